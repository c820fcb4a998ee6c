package lake

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
)

// lineage is a row's _row_id and _last_updated_sequence_number.
type lineage struct{ rowID, seq int64 }

// lineageOf reads the lineage of every row of tasks (all of tbl's current
// snapshot when nil), by key, with iceberg-go's reader.
func lineageOf(t *testing.T, tbl *table.Table, tasks []table.FileScanTask) map[int64]lineage {
	t.Helper()
	ctx := context.Background()
	scan := tbl.Scan(table.WithSelectedFields("id", iceberg.RowIDColumnName, iceberg.LastUpdatedSequenceNumberColumnName), table.WithRowLineage())
	var err error
	if tasks == nil {
		if tasks, err = scan.PlanFiles(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(tasks) == 0 {
		return nil
	}
	sc, recs, err := scan.ReadTasks(ctx, tasks)
	if err != nil {
		t.Fatal(err)
	}
	idCol, rowCol, seqCol := sc.FieldIndices("id"), sc.FieldIndices(iceberg.RowIDColumnName), sc.FieldIndices(iceberg.LastUpdatedSequenceNumberColumnName)
	if len(idCol) != 1 || len(rowCol) != 1 || len(seqCol) != 1 {
		t.Fatalf("scan schema %s lacks the lineage columns", sc)
	}
	out := map[int64]lineage{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		ids, rows, seqs := rec.Column(idCol[0]).(*array.Int64), rec.Column(rowCol[0]).(*array.Int64), rec.Column(seqCol[0]).(*array.Int64)
		for i := range ids.Len() {
			if rows.IsNull(i) || seqs.IsNull(i) {
				t.Fatalf("row %d has no lineage", ids.Value(i))
			}
			out[ids.Value(i)] = lineage{rows.Value(i), seqs.Value(i)}
		}
		rec.Release()
	}
	return out
}

// A v3 (dv mode) table's rows keep their row lineage through a
// compaction by cdcsync's own reader, which applies the deletion vectors
// by position: each live row has the _row_id and
// _last_updated_sequence_number it had before, both when it was inherited
// (files of epochs) and when a rewrite wrote it (a second compaction), as
// iceberg-go's ExecuteCompactionGroup keeps them.
func TestRewriteGroupKeepsRowLineage(t *testing.T) {
	ctx := context.Background()
	e := newKVMode(t, "p", DeletesDV)
	// More rows than a read batch (rewriteBatchRows): a row's _row_id
	// comes from its position in the file, across batches.
	const rows = 2*rewriteBatchRows + 1000
	e.commit(nil, keys(1, rows), "a", nil)
	r := rand.New(rand.NewPCG(3, 4))
	churn := func(epochs int) {
		for i := range epochs {
			picked := map[int64]bool{}
			var set, del []int64
			for range 40 {
				k := int64(1 + r.IntN(rows+30))
				if picked[k] {
					continue
				}
				picked[k] = true
				if _, ok := e.model[k]; ok && r.IntN(4) == 0 {
					del = append(del, k)
				} else {
					set = append(set, k)
				}
			}
			e.commit(nil, set, fmt.Sprintf("e%d-%d", e.epoch, i), del)
		}
	}
	churn(6)
	o := testOpts()
	o.Force = true
	for round := range 2 {
		base := e.tbl.Iceberg()
		before := lineageOf(t, base, nil)
		if len(before) != len(e.model) {
			t.Fatalf("round %d: %d rows with lineage, the model has %d", round, len(before), len(e.model))
		}
		tasks, err := base.Scan().PlanFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		groups, _ := selectCompaction(tasks, localScope, &o)
		if len(groups) == 0 {
			t.Fatalf("round %d: nothing to compact", round)
		}
		ours, theirs := map[int64]lineage{}, map[int64]lineage{}
		for _, g := range groups {
			res, _, err := e.tbl.rewriteGroup(ctx, base, g, o.TargetFileSize, nil)
			if err != nil {
				t.Fatalf("round %d: rewriteGroup: %v (it must handle a v3 group with deletion vectors itself)", round, err)
			}
			maps.Copy(ours, lineageOf(t, base, newTasks(res)))
			ref, err := table.ExecuteCompactionGroup(ctx, base, g)
			if err != nil {
				t.Fatal(err)
			}
			maps.Copy(theirs, lineageOf(t, base, newTasks(ref)))
		}
		if !maps.Equal(ours, before) {
			t.Fatalf("round %d: lineage after cdcsync's rewrite differs:\n got %v\nwant %v", round, ours, before)
		}
		if !maps.Equal(theirs, before) {
			t.Fatalf("round %d: iceberg-go's rewrite changed the lineage too: %v", round, theirs)
		}
		res, err := e.tbl.Compact(ctx, o)
		if err != nil || !res.Committed() {
			t.Fatalf("round %d: Compact: %+v, %v", round, res, err)
		}
		if after := lineageOf(t, e.tbl.Iceberg(), nil); !maps.Equal(after, before) {
			t.Fatalf("round %d: the table's lineage after Compact differs:\n got %v\nwant %v", round, after, before)
		}
		e.assertModel(e.tbl.Iceberg())
		churn(3) // updated rows get new lineage; the compacted file's rows keep theirs
	}
}

// newTasks are scan tasks over a group result's new files.
func newTasks(res table.CompactionGroupResult) []table.FileScanTask {
	var tasks []table.FileScanTask
	for _, f := range res.NewDataFiles {
		tasks = append(tasks, table.FileScanTask{File: f, Start: 0, Length: f.FileSizeBytes()})
	}
	return tasks
}

// TestStagedRowsKeepRowLineage: in a v3 (dv mode) table, the rows that
// compaction moves from a staged file to their partitions (through the
// epoch writer, staged.go) keep their _row_id and
// _last_updated_sequence_number, those an update gave a row included.
func TestStagedRowsKeepRowLineage(t *testing.T) {
	ctx := context.Background()
	tb := dayTable(t, DeletesDV)
	unpart, ok := unpartitionedSpec(tb.Iceberg().Metadata())
	if !ok {
		t.Fatal("the partitioned table has no unpartitioned spec")
	}
	model := map[int64]cdcsync.Row{}
	var rows []cdcsync.Row
	for id := int64(1); id <= 3000; id++ { // a day each: staged
		model[id] = orderRow(id, id, "v1")
		rows = append(rows, model[id])
	}
	commit := func(e int64, dels, rows []cdcsync.Row) {
		t.Helper()
		if err := tb.Commit(ctx, Epoch{Number: e, Pos: pos(e)}, dels, rows, nil); err != nil {
			t.Fatal(err)
		}
	}
	commit(1, nil, rows)
	// Update every third row (a later sequence number, a new row id) and
	// delete every seventh: the staged file gets a deletion vector.
	var dels, ups []cdcsync.Row
	for id := int64(1); id <= 3000; id++ {
		switch {
		case id%7 == 0:
			dels = append(dels, model[id])
			delete(model, id)
		case id%3 == 0:
			dels = append(dels, model[id])
			model[id] = orderRow(id, id, "v2")
			ups = append(ups, model[id])
		}
	}
	commit(2, dels, ups)
	before := lineageOf(t, tb.Iceberg(), nil)
	if len(before) != len(model) {
		t.Fatalf("%d rows with lineage, the model has %d", len(before), len(model))
	}
	if got := liveDataFiles(t, tb.Iceberg())[int32(unpart.ID())]; got != 2 {
		t.Fatalf("%d staged data files before the compaction, want 2", got)
	}
	res, err := tb.Compact(ctx, testOpts())
	if err != nil || !res.Committed() {
		t.Fatalf("Compact: %+v, %v", res, err)
	}
	if got := liveDataFiles(t, tb.Iceberg())[int32(unpart.ID())]; got != 0 {
		t.Fatalf("%d staged data files left after the compaction (%+v)", got, res)
	}
	assertOrders(t, tb.Iceberg(), model)
	after := lineageOf(t, tb.Iceberg(), nil)
	for id, want := range before {
		if got, ok := after[id]; !ok || got != want {
			t.Fatalf("row %d: lineage %+v after its move to its partition, %+v before (%d of %d rows differ)", id, got, want, differing(before, after), len(before))
		}
	}
	// What the rewrite wrote stays readable through the key index.
	commit(3, []cdcsync.Row{model[1]}, []cdcsync.Row{orderRow(1, 1, "v3")})
	model[1] = orderRow(1, 1, "v3")
	assertOrders(t, tb.Iceberg(), model)
}

func differing(a, b map[int64]lineage) int {
	n := 0
	for k, v := range a {
		if b[k] != v {
			n++
		}
	}
	return n
}
