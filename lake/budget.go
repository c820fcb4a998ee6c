package lake

import (
	"runtime"
	"sync"

	"github.com/apache/iceberg-go"
)

// What the tables of one Lake keep in memory between commits.
//
// Each table keeps the entries of its live delete manifests
// (entrycache.go) and, in dv mode, the entries its compactions plan from
// (plan.go); both only save reading manifests again. They are bounded
// together, for all of a process's tables, by one budget: a table that
// would take more than what the others leave keeps nothing and reads its
// manifests at each commit, as before these caches. With memory_limit set
// the budget is a share of it (entryBudgetBytes), so a pipeline of many
// large tables stays within the limit the user gave.
//
// The sizes are estimates measured on the issue 23 bench table: an entry
// with its column statistics (a deletion vector's; a position delete
// file's bounds name paths) takes about 2 KB as iceberg-go holds it, one
// read without statistics for planning about 1.4 KB.
const (
	heldEntryBytes    = 2048
	plannedEntryBytes = 1434
)

// Budgets without memory_limit: the entries about 256 MiB (the finely
// partitioned bench table's 28,000 vectors and 29,000 data files take
// about 100 MB), the deletion vectors' bitmaps 64 MiB.
const (
	defaultEntryBudget = 256 << 20
	maxDVCacheBytes    = 64 << 20
)

// entryBudgetBytes is the budget of the manifest entries the tables keep:
// an eighth of memory_limit when it is set (the open epoch and the one
// being written take up to half of it with the default epoch.max_bytes).
func entryBudgetBytes(memoryLimit int64) int64 {
	if memoryLimit <= 0 {
		return defaultEntryBudget
	}
	return min(defaultEntryBudget, memoryLimit/8)
}

// dvCacheBudget is the budget of the deletion vectors kept after an epoch
// writes them (dvcache.go): a sixteenth of memory_limit, at most 64 MiB.
func dvCacheBudget(memoryLimit int64) int64 {
	if memoryLimit <= 0 {
		return maxDVCacheBytes
	}
	return min(maxDVCacheBytes, memoryLimit/16)
}

// entryBudget is the bytes of manifest entries a Lake's tables may keep,
// and what they keep.
type entryBudget struct {
	mu    sync.Mutex
	limit int64
	used  int64
}

func newEntryBudget(limit int64) *entryBudget { return &entryBudget{limit: limit} }

// Used returns the bytes the tables keep now.
func (b *entryBudget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Limit returns the bytes the tables may keep.
func (b *entryBudget) Limit() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit
}

// claim is what one cache of one table keeps of a budget. A nil claim, or
// one of no budget, is unbounded (caches made outside a Lake, in tests).
type claim struct {
	b *entryBudget
	n int64 // under b.mu
}

// resize makes the claim want bytes; when that does not fit beside the
// other claims it releases the claim and returns false, and the cache
// must then keep nothing.
func (c *claim) resize(want int64) bool {
	if c == nil || c.b == nil {
		return true
	}
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if c.b.used-c.n+want > c.b.limit {
		c.b.used -= c.n
		c.n = 0
		return false
	}
	c.b.used += want - c.n
	c.n = want
	return true
}

// release gives the claim's bytes back.
func (c *claim) release() { c.resize(0) }

// claimFor makes a table's caches claim from b, and gives their claims
// back once the table's state is garbage: a Table has no Close, and a
// schema change gives a Table a new state (Table.adopt).
func (st *tableState) claimFor(b *entryBudget) {
	if b == nil {
		return
	}
	held, planned := &claim{b: b}, &claim{b: b}
	st.deletes.claim, st.manifests.claim = held, planned
	runtime.AddCleanup(st, func(cs [2]*claim) {
		cs[0].release()
		cs[1].release()
	}, [2]*claim{held, planned})
}

// entriesBytes is the estimated memory of the entries in m, at each bytes.
func entriesBytes(m map[string][]iceberg.ManifestEntry, each int64) int64 {
	n := 0
	for _, es := range m {
		n += len(es)
	}
	return int64(n) * each
}
