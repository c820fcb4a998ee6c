package lake

import (
	"sync"

	"github.com/apache/iceberg-go"
)

// deleteEntries keeps the entries of a table's live delete manifests, with
// every field (column statistics included), by manifest path: those
// cdcsync's snapshot writer wrote or read to carry them over.
//
// An epoch of a dv table replaces the vectors of the files it deletes
// from, and a replaced vector must leave its manifest: so each commit
// rewrites every delete manifest that holds one, and must read every
// delete manifest to find them. With updates spread over the table that is
// every vector of the table at every epoch (28,000 on the finely
// partitioned bench table, for about 1,100 replaced), and decoding them
// took a quarter of the epoch's manifest CPU. The entries a commit writes
// are the ones the next commit reads, so they are kept here instead.
//
// A manifest is never changed once written, and its path names it alone,
// so an entry kept for a path is the entry the file holds whichever
// snapshot the cache was last brought to (a commit that lost a race, a
// compaction next to an epoch): a manifest not held is read.
type deleteEntries struct {
	mu     sync.Mutex
	byPath map[string][]iceberg.ManifestEntry
	// claim is what the entries take of the Lake's budget (budget.go): a
	// snapshot whose live delete entries do not fit holds none, and its
	// commits read them, as before.
	claim *claim
}

// get returns the live entries of the delete manifest at path, if held.
func (c *deleteEntries) get(path string) ([]iceberg.ManifestEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	es, ok := c.byPath[path]
	return es, ok
}

// committed keeps the entries of the delete manifests among mans (a
// committed snapshot's list): from fresh (what the commit wrote or read),
// else from what was held; and drops the rest.
func (c *deleteEntries) committed(mans []iceberg.ManifestFile, fresh map[string][]iceberg.ManifestEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := map[string][]iceberg.ManifestEntry{}
	for _, mf := range mans {
		if mf.ManifestContent() != iceberg.ManifestContentDeletes {
			continue
		}
		es, ok := fresh[mf.FilePath()]
		if !ok {
			es, ok = c.byPath[mf.FilePath()]
		}
		if ok {
			next[mf.FilePath()] = es
		}
	}
	if !c.claim.resize(entriesBytes(next, heldEntryBytes)) {
		next = nil
	}
	c.byPath = next
}
