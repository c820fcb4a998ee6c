package lake

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cdcsync/cdcsync"
)

// TestCompactGlobalDeletes: on a partitioned table, whose epochs write one
// global equality delete file each, compaction rewrites only the partitions
// the deletes' rows belong to, keeps every row of the model (updates in
// place, moves across partitions, deletes, re-inserts), drops a global
// delete once those partitions are rewritten, and never rewrites a
// partition no delete touched.
func TestCompactGlobalDeletes(t *testing.T) {
	for _, spec := range [][]string{{"day(created_at)", "bucket(4, id)"}, {"note"}} {
		t.Run(fmt.Sprint(spec), func(t *testing.T) {
			ctx := context.Background()
			lk := openLake(t, partitionedConfig(t, t.TempDir(), eqMode, spec...))
			tb, err := lk.EnsureTable(ctx, ordersSchema())
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(7, 7))
			model := map[int64]cdcsync.Row{}
			var rows []cdcsync.Row
			for id := int64(1); id <= 400; id++ {
				model[id] = orderRow(id, r.Int64N(200), fmt.Sprintf("n%d", r.IntN(200)))
				rows = append(rows, model[id])
			}
			epoch := int64(1)
			commit := func(dels, rows []cdcsync.Row) {
				t.Helper()
				epoch++
				if err := tb.Commit(ctx, Epoch{Number: epoch, Pos: pos(epoch)}, dels, rows, nil); err != nil {
					t.Fatal(err)
				}
			}
			commit(nil, rows)
			// The copy's files by partition, checked against the partitions
			// the deletes touch: only those may be rewritten.
			copyParts := map[string]string{}
			tasks, err := tb.Iceberg().Scan().PlanFiles(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range tasks {
				copyParts[tk.File.FilePath()] = partitionKey(tk.File)
			}
			touched := map[string]bool{}

			// Epochs that touch keys 1..100 only: updates in place, moves to
			// other partitions, deletes and re-inserts of deleted keys.
			for i := 0; i < 12; i++ {
				var dels, ups []cdcsync.Row
				seen := map[int64]bool{}
				for len(seen) < 15 {
					id := 1 + r.Int64N(100)
					if seen[id] {
						continue
					}
					seen[id] = true
					old, ok := model[id]
					switch {
					case !ok: // re-insert
						model[id] = orderRow(id, r.Int64N(200), "back")
						dels = append(dels, model[id])
						ups = append(ups, model[id])
					case r.IntN(5) == 0: // delete
						dels = append(dels, old)
						delete(model, id)
					case r.IntN(2) == 0: // move: another day and note
						model[id] = orderRow(id, r.Int64N(200), fmt.Sprintf("n%d", r.IntN(200)))
						dels = append(dels, old)
						ups = append(ups, model[id])
					default: // in place
						model[id] = cdcsync.Row{id, old[1], old[2]}
						dels = append(dels, old)
						ups = append(ups, model[id])
					}
				}
				for _, d := range append(slices.Clone(dels), ups...) {
					touched[rowPartition(t, tb, d)] = true
				}
				commit(dels, ups)
				if got := tb.Iceberg().CurrentSnapshot().Summary.Properties["added-delete-files"]; got != "1" {
					t.Fatalf("epoch %d added %s delete files, want one global file", epoch, got)
				}
				if i%4 == 3 {
					o := testOpts()
					o.DeleteFiles, o.DeleteRatio = 3, 10
					res, err := tb.Compact(ctx, o)
					if err != nil {
						t.Fatal(err)
					}
					assertOrders(t, tb.Iceberg(), model)
					// Four global deletes are more than DeleteFiles (3): all are
					// retired, whatever each partition's own count.
					if st := tb.Stats(); st.DeleteFiles != 0 || res.RemovedDeletes != 4 {
						t.Fatalf("after the compaction of epoch %d: %d delete files left, %d removed (%+v); want all four retired", epoch, st.DeleteFiles, res.RemovedDeletes, res)
					}
				}
			}

			// Whatever the thresholds left, a forced compaction retires every
			// global delete, and the rows of keys above 100 stay in the files
			// the copy wrote unless a partition they share was rewritten.
			o := testOpts()
			o.Force = true
			res, err := tb.Compact(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			assertOrders(t, tb.Iceberg(), model)
			if st := tb.Stats(); st.DeleteFiles != 0 {
				t.Fatalf("after a forced compaction %d delete files are left (%+v), want 0: a global delete was not retired", st.DeleteFiles, res)
			}
			// No file of the copy in a partition no epoch touched (by a
			// delete or a new row, which may make small files to compact)
			// was rewritten.
			live := map[string]bool{}
			tasks, err = tb.Iceberg().Scan().PlanFiles(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range tasks {
				live[tk.File.FilePath()] = true
			}
			rewritten, kept := 0, 0
			for f, part := range copyParts {
				switch {
				case live[f]:
					kept++
				case !touched[part]:
					t.Errorf("%s of untouched partition %s was rewritten", f, part)
				default:
					rewritten++
				}
			}
			t.Logf("%d of the copy's files rewritten, %d kept; %d partitions touched; last compaction %+v", rewritten, kept, len(touched), res)
			if kept == 0 || rewritten == 0 {
				t.Errorf("%d files of the copy rewritten and %d kept: the test needs both", rewritten, kept)
			}
		})
	}
}

// rowPartition is the partition key of a row under the table's spec.
func rowPartition(t *testing.T, tb *Table, r cdcsync.Row) string {
	t.Helper()
	pv, err := tb.part.values(r)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[int]any{}
	for i, v := range pv {
		vals[tb.part.fields[i].fieldID] = v
	}
	return partKey(int32(tb.part.spec.ID()), vals)
}

// TestCompactCrowdedPartitions: epochs that add a small file to each of
// hundreds of partitions, never reaching a partition's own small_files
// threshold, still get the table compacted back to a file a partition once
// its data files outnumber twice its partitions (issue 23: a finely
// partitioned table reached 172,859 files for 100,000 rows).
func TestCompactCrowdedPartitions(t *testing.T) {
	ctx := context.Background()
	lk := openLake(t, partitionedConfig(t, t.TempDir(), eqMode, "day(created_at)"))
	tb, err := lk.EnsureTable(ctx, ordersSchema())
	if err != nil {
		t.Fatal(err)
	}
	const days = 300
	model := map[int64]cdcsync.Row{}
	for e := int64(1); e <= 3; e++ {
		var rows []cdcsync.Row
		for d := int64(0); d < days; d++ {
			id := e*1000 + d
			model[id] = orderRow(id, d, "v")
			rows = append(rows, model[id])
		}
		if err := tb.Commit(ctx, Epoch{Number: e, Pos: pos(e)}, nil, rows, nil); err != nil {
			t.Fatal(err)
		}
	}
	o := testOpts()
	o.SmallFiles = 10
	if st := tb.Stats(); st.DataFiles != 3*days {
		t.Fatalf("%d data files before, want %d", st.DataFiles, 3*days)
	}
	res, err := tb.Compact(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	assertOrders(t, tb.Iceberg(), model)
	if st := tb.Stats(); st.DataFiles != days {
		t.Fatalf("%d data files after the compaction (%+v), want %d: one a partition", st.DataFiles, res, days)
	}
	// At twice the partitions or fewer, nothing is rewritten.
	var rows []cdcsync.Row
	for d := int64(0); d < days; d++ {
		id := 9000 + d
		model[id] = orderRow(id, d, "w")
		rows = append(rows, model[id])
	}
	if err := tb.Commit(ctx, Epoch{Number: 4, Pos: pos(4)}, nil, rows, nil); err != nil {
		t.Fatal(err)
	}
	if res, err := tb.Compact(ctx, o); err != nil || res.RewrittenFiles != 0 {
		t.Fatalf("a table of two files a partition was compacted: %+v, %v", res, err)
	}
}
