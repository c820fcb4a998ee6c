package lake

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
)

// planOf is a plan by data file path: its deletion vectors (by dvKey), data
// sequence number and first row id.
type planOf map[string]struct {
	dvs      string
	seq, row int64
}

func plannedFiles(t *testing.T, tasks []table.FileScanTask) planOf {
	t.Helper()
	out := planOf{}
	for _, tk := range wholeFiles(table.CompactionTaskGroup{Tasks: tasks}).Tasks {
		p := out[tk.File.FilePath()]
		if len(tk.DeleteFiles) > 0 || len(tk.EqualityDeleteFiles) > 0 {
			t.Fatalf("%s has delete files that are not deletion vectors", tk.File.FilePath())
		}
		for _, d := range tk.DeletionVectorFiles {
			p.dvs += dvKey(d) + " "
		}
		p.seq, p.row = -1, -1
		if tk.DataSequenceNumber != nil {
			p.seq = *tk.DataSequenceNumber
		}
		if tk.FirstRowID != nil {
			p.row = *tk.FirstRowID
		}
		out[tk.File.FilePath()] = p
	}
	return out
}

// checkPlanDV compares the plan of tb's current snapshot from the manifest
// cache, warm and cold, with iceberg-go's scan planning.
func checkPlanDV(t *testing.T, tb *Table) []table.FileScanTask {
	t.Helper()
	ctx := context.Background()
	cur := tb.current()
	want, err := cur.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := plannedFiles(t, want)
	for _, c := range []*manifestCache{&tb.state.manifests, {}} {
		got, ok, err := c.planDV(ctx, cur)
		if err != nil || !ok {
			t.Fatalf("planDV: ok %v, %v", ok, err)
		}
		if len(got) != len(w) {
			t.Fatalf("the cached plan of snapshot %d has %d tasks; iceberg-go plans %d data files", snapshotID(cur.CurrentSnapshot()), len(got), len(w))
		}
		g := plannedFiles(t, got)
		for path, wp := range w {
			if gp, ok := g[path]; !ok || gp != wp {
				t.Fatalf("snapshot %d, %s: the cached plan has %+v (planned %v); iceberg-go %+v", snapshotID(cur.CurrentSnapshot()), path, gp, ok, wp)
			}
		}
		if !c.holdsOnlyDVs(snapshotID(cur.CurrentSnapshot())) {
			t.Fatal("a snapshot planned from the cache is not known to hold only deletion vectors")
		}
	}
	return want
}

// TestPlanDVMatchesScanPlanning: a dv table's compaction plans from cached
// manifests read without statistics (plan.go); after random epochs over
// thousands of partitions (rows staged), bounded compactions that leave
// staged rows and move others, and manifest merges, that plan has the data
// files, deletion vectors, data sequence numbers and first row ids that
// iceberg-go's scan planning gives, and the rows stay right.
func TestPlanDVMatchesScanPlanning(t *testing.T) {
	ctx := context.Background()
	tb := dayTable(t, DeletesDV)
	r := rand.New(rand.NewPCG(3, 4))
	model := map[int64]cdcsync.Row{}
	commit := epochCommits(t, tb)
	next := int64(1)
	sawDV, sawStagedDV := false, false
	for i := 0; i < 16; i++ {
		var dels, rows []cdcsync.Row
		touched := map[int64]bool{} // a key changes once an epoch here
		for n := 0; n < 400; n++ {
			switch id := r.Int64N(next + 200); {
			case id >= next: // insert
				model[next] = orderRow(next, r.Int64N(3000), "v0")
				rows = append(rows, model[next])
				touched[next] = true
				next++
			case model[id] == nil || touched[id]:
			case r.IntN(4) == 0: // delete
				touched[id] = true
				dels = append(dels, model[id])
				delete(model, id)
			default: // update, perhaps into another day
				touched[id] = true
				dels = append(dels, model[id])
				model[id] = orderRow(id, r.Int64N(3000), "v"+string(rune('a'+i)))
				rows = append(rows, model[id])
			}
		}
		commit(dels, rows)
		if t.Failed() {
			t.FailNow()
		}
		for _, tk := range checkPlanDV(t, tb) {
			sawDV = sawDV || len(tk.DeletionVectorFiles) > 0
			sawStagedDV = sawStagedDV || (len(tk.DeletionVectorFiles) > 0 && tb.isStaged(tk.File))
		}
		if i%4 == 3 {
			o := testOpts()
			o.MaxFiles = 1 + r.IntN(300)
			if _, err := tb.Compact(ctx, o); err != nil {
				t.Fatal(err)
			}
			assertOrders(t, tb.Iceberg(), model)
			checkPlanDV(t, tb)
		}
	}
	assertOrders(t, tb.Iceberg(), model)
	if !sawDV || !sawStagedDV {
		t.Errorf("no plan had a deletion vector (%v), or none on a staged file (%v)", sawDV, sawStagedDV)
	}
	if n := len(tb.state.manifests.byPath); n == 0 {
		t.Error("the manifest cache keeps no entry between plans")
	}
}

// TestPlanDVLeavesOtherDeletesToIceberg: a table switched to dv mode from
// equality mode keeps its equality deletes until a compaction clears them;
// until then its plans are iceberg-go's, after that the cache's.
func TestPlanDVLeavesOtherDeletesToIceberg(t *testing.T) {
	ctx := context.Background()
	e, tb := switchedToDV(t)
	e.randomEpoch(rand.New(rand.NewPCG(1, 2)), tb, 120)
	if _, ok, err := tb.state.manifests.planDV(ctx, tb.current()); err != nil || ok {
		t.Fatalf("a snapshot with equality deletes planned from the cache: ok %v, %v", ok, err)
	}
	if tb.state.manifests.holdsOnlyDVs(snapshotID(tb.current().CurrentSnapshot())) {
		t.Fatal("a snapshot with equality deletes is taken for one with only deletion vectors")
	}
	o := testOpts()
	o.Force = true
	if _, err := tb.Compact(ctx, o); err != nil {
		t.Fatal(err)
	}
	e.assertModel(tb.current())
	e.randomEpoch(rand.New(rand.NewPCG(3, 4)), tb, 120)
	checkPlanDV(t, tb)
	e.assertModel(tb.current())
}

// The planning cache is bounded by the Lake's budget too: a snapshot whose
// manifests hold more entries than fit is planned without keeping them.
func TestPlanCacheBounded(t *testing.T) {
	const each = 100
	manifest := func(path string) iceberg.ManifestFile {
		return iceberg.NewManifestFile(2, path, 1, 0, 1).Content(iceberg.ManifestContentData).Build()
	}
	mans := []iceberg.ManifestFile{manifest("a"), manifest("b")}
	b := newEntryBudget(2 * each * plannedEntryBytes)
	for _, tc := range []struct {
		each int
		kept bool
	}{{each, true}, {each + 1, false}} {
		c := manifestCache{claim: &claim{b: b}, byPath: map[string][]iceberg.ManifestEntry{
			"a": make([]iceberg.ManifestEntry, tc.each),
			"b": make([]iceberg.ManifestEntry, tc.each),
		}}
		if _, err := c.read(t.Context(), nil, mans, mans); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.byPath["a"]; ok != tc.kept {
			t.Errorf("%d entries: kept %t, want %t (the budget has room for %d)", 2*tc.each, ok, tc.kept, 2*each)
		}
		c.claim.release()
	}
}
