package lake

import (
	"sync"

	"github.com/apache/iceberg-go"
)

// The live entries of the delete manifests this process wrote.
//
// An epoch of a dv table replaces the vectors of the data files it
// deletes rows from, and the v3 spec wants the old vector gone in the
// same snapshot: every delete manifest holding one is rewritten without
// it. On a finely partitioned table nearly every epoch replaces a vector
// in nearly every delete manifest, so each epoch decoded every delete
// manifest of the table (iceberg-go's Avro reader, deflate included) only
// to write most of it back. The entries of the delete manifests a commit
// writes are known when it writes them, so the table keeps them, by
// manifest path, for the manifests of its current snapshot (a manifest
// file never changes, so the path names its entries); the next commit
// takes them from here and decodes only the manifests others wrote.

// maxDeleteEntries bounds the entries a table keeps (a few hundred bytes
// each: deletion vectors and position delete files carry no column
// statistics); a snapshot with more keeps none.
const maxDeleteEntries = 200_000

// deleteEntries are the live entries of the delete manifests of a table's
// current snapshot that this process wrote, by manifest path, as a reader
// decodes them (sequence numbers and snapshot ids filled in).
type deleteEntries struct {
	mu     sync.Mutex
	byPath map[string][]iceberg.ManifestEntry
}

// get returns the entries of the manifest at path, nil when not kept.
func (d *deleteEntries) get(path string) []iceberg.ManifestEntry {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byPath[path]
}

// committed keeps, for the snapshot whose manifests are mans, the entries
// of the delete manifests written for it (written) and those of the
// manifests it kept from its parent that were kept already.
func (d *deleteEntries) committed(mans []iceberg.ManifestFile, written map[string][]iceberg.ManifestEntry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	next := map[string][]iceberg.ManifestEntry{}
	n := 0
	for _, mf := range mans {
		if mf.ManifestContent() != iceberg.ManifestContentDeletes {
			continue
		}
		es, ok := written[mf.FilePath()]
		if !ok {
			es, ok = d.byPath[mf.FilePath()]
		}
		if ok {
			next[mf.FilePath()] = es
			n += len(es)
		}
	}
	if n > maxDeleteEntries {
		next = nil
	}
	d.byPath = next
}
