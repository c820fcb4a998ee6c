package lake

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
)

// dataFileRows returns the live data files of tbl's current snapshot with
// their record counts.
func dataFileRows(t *testing.T, tbl *table.Table) map[string]int64 {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, tk := range tasks {
		out[tk.File.FilePath()] = tk.File.Count()
	}
	return out
}

// TestPositionCompactionRewritesDeletedFiles: in position mode a
// compaction rewrites only the data files whose deleted fraction reached
// delete_ratio, merges a partition's position delete files once there are
// delete_files of them (keeping the entries that name rows of files it
// leaves alone), moves the key index with the rows, and the rows stay equal
// to the model through later epochs.
func TestPositionCompactionRewritesDeletedFiles(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.commit(nil, keys(1, 100), "a", nil)   // file A
	e.commit(nil, keys(101, 200), "b", nil) // file B
	files := dataFileRows(t, e.tbl.current())
	if len(files) != 2 {
		t.Fatalf("%d data files after two epochs of inserts, want 2", len(files))
	}
	// 30 rows of A change; one row of B changes in each of five epochs.
	e.commit(nil, keys(1, 30), "a2", nil)
	for i := int64(0); i < 5; i++ {
		e.commit(nil, []int64{150 + i}, fmt.Sprintf("b%d", i), nil)
	}
	pos, _ := deleteFiles(t, e.tbl.current())
	if pos != 6 {
		t.Fatalf("%d position delete files, want one per updating epoch (6)", pos)
	}
	o := testOpts()
	o.DeleteRatio, o.DeleteFiles, o.SmallFileSize = 0.2, 5, 0
	res, err := e.tbl.Compact(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	e.assertModel(e.tbl.current())
	after := dataFileRows(t, e.tbl.current())
	var kept []string
	for path := range files {
		if _, ok := after[path]; ok {
			kept = append(kept, path)
		}
	}
	if res.RewrittenFiles != 1 || len(kept) != 1 {
		t.Fatalf("compaction %+v kept %v of the two files: want one rewritten (30%% deleted), one kept (5%%)", res, kept)
	}
	// What is left of the deletes names the five rows of B: B was kept.
	tasks, err := e.tbl.current().Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := e.tbl.current().FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := deletedRows(ctx, fsys, tasks)
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 1 || deleted[kept[0]] != 5 {
		t.Fatalf("position deletes after the compaction name %v, want the 5 rows of the kept file %s", deleted, kept[0])
	}
	if pos, _ := deleteFiles(t, e.tbl.current()); pos != 1 {
		t.Fatalf("%d position delete files after the merge, want 1", pos)
	}
	// The index followed the rewrite in the same critical section.
	st, ok, err := e.tbl.state.keys.db.State()
	if err != nil || !ok || st.SnapshotID != res.Snapshot {
		t.Fatalf("index at %+v (%v, %v) after the compaction, want its snapshot %d", st, ok, err, res.Snapshot)
	}
	// Updates of moved rows, of rows of B and deletes after the compaction.
	e.commit(nil, []int64{5, 60, 150, 160, 300}, "c", []int64{10, 151})
	e.assertModel(e.tbl.current())
	// Forced: every file with a delete is rewritten, no delete is left.
	o.Force = true
	if _, err := e.tbl.Compact(ctx, o); err != nil {
		t.Fatal(err)
	}
	e.assertModel(e.tbl.current())
	if pos, eq := deleteFiles(t, e.tbl.current()); pos+eq != 0 {
		t.Fatalf("%d position and %d equality delete files after a forced compaction, want none", pos, eq)
	}
	e.commit(nil, keys(1, 20), "d", []int64{150})
	e.assertModel(e.tbl.current())
}

// TestFilterPositions: a batch whose first row is at position off of its
// file loses exactly the rows at the deleted positions inside it.
func TestFilterPositions(t *testing.T) {
	ctx := context.Background()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	for i := int64(0); i < 10; i++ {
		b.Append(100 + i)
	}
	col := b.NewArray()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "pos", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{col}, 10)
	for _, c := range []struct {
		gone []int64
		want []int64 // nil: the batch is dropped whole
	}{
		{[]int64{1, 99, 110, 200}, []int64{100, 101, 102, 103, 104, 105, 106, 107, 108, 109}},
		{[]int64{99, 100, 105, 109, 110}, []int64{101, 102, 103, 104, 106, 107, 108}},
		{[]int64{100, 101, 102, 103, 104, 105, 106, 107, 108, 109}, nil},
		{nil, []int64{100, 101, 102, 103, 104, 105, 106, 107, 108, 109}},
	} {
		out, err := filterPositions(ctx, rec, 100, c.gone)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		if out != nil {
			got = out.Column(0).(*array.Int64).Int64Values()
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) || (out == nil) != (c.want == nil) {
			t.Errorf("deleting %v from rows 100..109: kept %v, want %v", c.gone, got, c.want)
		}
	}
}

// TestPositionCompactionLetsEpochsCommit: a compaction in position mode
// rewrites its files without the table's commit lock, so epochs commit
// while it reads and writes (issue 20: a compaction that held the lock for
// 8 s made p99 freshness at 50,000 changes/s 8-14 s). The position deletes
// those epochs write into the files it rewrites are carried over to the new
// files when it commits: no deleted row comes back, no row is lost, and the
// key index (in this process, and in another that catches up by replaying
// the snapshots) finds every moved row for the epochs after it.
func TestPositionCompactionLetsEpochsCommit(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.commit(nil, keys(1, 100), "copy", nil)
	e.churn(5)
	other := e.second("p") // a restarted daemon: its index replays
	if err := other.reloadForTest(ctx); err != nil {
		t.Fatal(err)
	}
	o := testOpts()
	o.Force = true
	// Epochs land after the files are written (their deletes are rebased
	// before the commit lock is taken), after that first rebase (a second
	// pass rebases them) and after the last pass (under the lock).
	during := map[string][][2][]int64{
		"compaction-written": {
			{{3, 60, 7, 200}, {4, 50}}, // updates and deletes of rewritten rows, a new key
			{{5, 4}, {3, 60}},          // again: a re-insert, a delete of a row updated above
		},
		"compaction-rebase-pass": {{{11, 12, 3}, {13}}},
		"compaction-rebased":     {{{8, 9, 5}, {10}}},
	}
	blocked := false
	passes := 0
	o.Fault = func(point string) {
		if point == "compaction-rebase-pass" {
			if passes++; passes > 1 {
				return
			}
		}
		for i, ch := range during[point] {
			e.epoch++
			n := e.epoch
			v := fmt.Sprintf("%s-%d", point, i)
			d, r := e.change(ch[0], v, ch[1])
			waited, err := commitWithin(ctx, e.tbl, n, d, r, 20*time.Second)
			if waited {
				blocked = true
				t.Errorf("epoch %d waited 20 s for a compaction that was only reading and writing files", n)
				return
			}
			if err != nil {
				t.Errorf("epoch %d during the compaction: %v", n, err)
			}
			e.apply(ch[0], v, ch[1])
		}
	}
	res, err := e.tbl.Compact(ctx, o)
	if blocked {
		t.FailNow()
	}
	if err != nil || !res.Committed() || res.Replays != 1 || res.RewrittenFiles == 0 || res.Rebased == 0 {
		t.Fatalf("compaction: %+v, %v; want it committed on top of the four epochs, their deletes rebased", res, err)
	}
	if passes != 2 {
		t.Fatalf("%d passes of the rebase before the commit lock, want 2 (the second for the epoch that landed during the first)", passes)
	}
	e.assertModel(e.tbl.current())
	if _, eq := deleteFiles(t, e.tbl.current()); eq != 0 {
		t.Fatalf("%d equality delete files in a position-mode table", eq)
	}
	// The index followed the rows: updates and deletes of every key,
	// moved or not, leave the table exact.
	e.commit(nil, []int64{1, 3, 4, 5, 7, 8, 11, 13, 60, 99, 200}, "after", []int64{2, 9, 12, 50, 98})
	e.assertModel(e.tbl.current())
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 5; i++ {
		e.randomEpoch(r, nil, 210)
		e.assertModel(e.tbl.current())
	}
	if err := other.reloadForTest(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		e.randomEpoch(r, other, 210)
		e.assertModel(other.current())
	}
}

// commitWithin commits epoch n through tb and returns its error, or
// waited when the commit did not return within limit (it goes on in the
// background: a test fails then).
func commitWithin(ctx context.Context, tb *Table, n int64, deletes, rows []cdcsync.Row, limit time.Duration) (waited bool, err error) {
	done := make(chan error, 1)
	go func() { done <- tb.Commit(ctx, Epoch{Number: n, Pos: pos(n)}, deletes, rows, nil) }()
	select {
	case err := <-done:
		return false, err
	case <-time.After(limit):
		return true, nil
	}
}
