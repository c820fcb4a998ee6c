package lake

import (
	"context"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

func TestBudgetsFollowMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		limit, entries, dvs int64
	}{
		{0, 256 << 20, 64 << 20},
		{64 << 20, 8 << 20, 4 << 20},
		{1 << 30, 128 << 20, 64 << 20},
		{8 << 30, 256 << 20, 64 << 20},
	} {
		if got := entryBudgetBytes(tc.limit); got != tc.entries {
			t.Errorf("memory_limit %d: manifest entries may take %d bytes, want %d", tc.limit, got, tc.entries)
		}
		if got := dvCacheBudget(tc.limit); got != tc.dvs {
			t.Errorf("memory_limit %d: deletion vectors may take %d bytes, want %d", tc.limit, got, tc.dvs)
		}
	}
	cfg := &config.Config{MemoryLimit: 1 << 30}
	if got := OptionsFrom(cfg).MemoryLimit; got != 1<<30 {
		t.Errorf("OptionsFrom passes memory_limit as %d", got)
	}
}

// The tables of a Lake share one budget for the manifest entries they keep
// between commits: a table that does not fit beside the others keeps
// none and reads its manifests (its rows stay right), and a table that is
// gone gives its share back.
func TestEntryBudgetSharedByTables(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := kvConfig(t, dir, "p")
	cfg.Deletes.Mode = DeletesDV
	lk := openLake(t, cfg)
	b := lk.entries
	open := func(name string) *kvEnv {
		s := kvSchema()
		s.ID = cdcsync.TableID{Database: "shop", Table: name}
		tb, err := lk.EnsureTable(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		tb.deleteManifestEntries = 16
		return &kvEnv{t: t, dir: dir, cfg: cfg, lk: lk, tbl: tb, model: map[int64]string{}}
	}
	held := func(e *kvEnv) bool {
		e.tbl.state.deletes.mu.Lock()
		defer e.tbl.state.deletes.mu.Unlock()
		return len(e.tbl.state.deletes.byPath) > 0
	}
	r := rand.New(rand.NewPCG(5, 6))
	// files data files, each with a deletion vector.
	fill := func(e *kvEnv, files int64) {
		per := 300 / files
		var one []int64
		for f := int64(0); f < files; f++ {
			e.commit(nil, keys(1+f*per, (f+1)*per), "v0", nil)
			one = append(one, 1+f*per)
		}
		e.commit(nil, one, "v1", nil)
	}
	first, second := open("first"), open("second")
	fill(first, 20)
	fill(second, 12)
	if !held(first) || !held(second) {
		t.Fatal("with the default budget, the two small tables do not both hold their delete entries")
	}
	// Room for the first table's entries and half of the second's (and,
	// once the first is gone, for all of the second's).
	b.mu.Lock()
	b.limit = first.tbl.state.deletes.claim.n + first.tbl.state.manifests.claim.n + second.tbl.state.deletes.claim.n/2
	b.mu.Unlock()
	second.randomEpoch(r, nil, 300)
	first.randomEpoch(r, nil, 300)
	if !held(first) || held(second) {
		t.Fatalf("first holds %t, second %t: want only the first", held(first), held(second))
	}
	second.randomEpoch(r, nil, 300)
	if c := second.tbl.LastCommitTimes(); c.EntriesRead == 0 {
		t.Error("the second table's epoch read no manifest entry; it holds none")
	}
	if used, limit := b.Used(), b.limit; used > limit {
		t.Errorf("the tables keep %d bytes of entries; the budget is %d", used, limit)
	}
	first.assertModel(first.tbl.current())
	second.assertModel(second.tbl.current())

	// The first table goes (as a Table the sink replaces): its share comes back.
	first = nil
	deadline := time.Now().Add(10 * time.Second)
	for b.Used() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the budget still counts %d bytes once no table holds entries", b.Used())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	second.randomEpoch(r, nil, 300)
	second.randomEpoch(r, nil, 300)
	if !held(second) {
		t.Fatal("the second table holds no entries once the first is gone")
	}
	if c := second.tbl.LastCommitTimes(); c.EntriesRead != 0 {
		t.Errorf("the second table's epoch read %d manifest entries; its parent's were held", c.EntriesRead)
	}
	second.assertModel(second.tbl.current())
}
