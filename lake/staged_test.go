package lake

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
)

// liveDataFiles returns the current snapshot's data files by spec id.
func liveDataFiles(t *testing.T, tbl *table.Table) map[int32]int {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int{}
	seen := map[string]bool{}
	for _, tk := range tasks {
		if !seen[tk.File.FilePath()] {
			seen[tk.File.FilePath()] = true
			out[tk.File.SpecID()]++
		}
	}
	return out
}

// dayTable opens shop.orders partitioned by day(created_at), in deletes
// mode mode ("": the default).
func dayTable(t *testing.T, mode string) *Table {
	t.Helper()
	extra := ""
	if mode != "" {
		extra = "deletes:\n  mode: " + mode + "\n"
	}
	tb, err := openLake(t, partitionedConfig(t, t.TempDir(), extra, "day(created_at)")).EnsureTable(context.Background(), ordersSchema())
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestStagedRows: an epoch spread over thousands of partitions writes its
// rows as one staged file, its updates and deletes of staged rows as one
// delete file (or deletion vectors of one Puffin file), and compaction moves
// the live rows to their partitions, after which updates find them there.
func TestStagedRows(t *testing.T) {
	for _, mode := range []string{DeletesPosition, DeletesDV} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			tb := dayTable(t, mode)
			unpart, ok := unpartitionedSpec(tb.Iceberg().Metadata())
			if !ok {
				t.Fatal("the partitioned table has no unpartitioned spec")
			}
			spec := tb.Iceberg().Metadata().PartitionSpec()
			staged, parted := int32(unpart.ID()), int32(spec.ID())
			model := map[int64]cdcsync.Row{}
			var rows []cdcsync.Row
			// 3,000 rows over 3,000 days, and 2,000 rows of one day: that
			// partition keeps a file of its own.
			for id := int64(1); id <= 5000; id++ {
				day := id
				if id > 3000 {
					day = 9000
				}
				model[id] = orderRow(id, day, "v1")
				rows = append(rows, model[id])
			}
			epoch := int64(0)
			commit := func(dels, rows []cdcsync.Row) *table.Snapshot {
				t.Helper()
				epoch++
				if err := tb.Commit(ctx, Epoch{Number: epoch, Pos: pos(epoch)}, dels, rows, nil); err != nil {
					t.Fatal(err)
				}
				assertOrders(t, tb.Iceberg(), model)
				return tb.Iceberg().CurrentSnapshot()
			}
			s := commit(nil, rows)
			if got := s.Summary.Properties["added-data-files"]; got != "2" {
				t.Errorf("the first epoch added %s data files, want 2: the dense partition's and one staged", got)
			}
			if got := liveDataFiles(t, tb.Iceberg()); got[staged] != 1 || got[parted] != 1 {
				t.Errorf("data files by spec %v, want 1 staged (spec %d) and 1 partitioned (spec %d)", got, staged, parted)
			}

			// Update 1,000 sparse rows (moving them a day) and delete 200.
			var dels []cdcsync.Row
			rows = rows[:0]
			for id := int64(1); id <= 1200; id++ {
				dels = append(dels, model[id])
				if id > 1000 {
					delete(model, id)
					continue
				}
				model[id] = orderRow(id, id+1, "v2")
				rows = append(rows, model[id])
			}
			s = commit(dels, rows)
			if got := s.Summary.Properties["added-data-files"]; got != "1" {
				t.Errorf("the update epoch added %s data files, want 1 staged", got)
			}
			if n := len(addedDeleteFiles(t, tb.Iceberg(), *s.ParentSnapshotID)); n != 1 {
				t.Errorf("the update epoch added %d delete files, want 1", n)
			}

			o := testOpts()
			before, _ := tb.IndexCounts()
			res, err := tb.Compact(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			assertOrders(t, tb.Iceberg(), model)
			// The compaction told the index where the rows went: it read
			// none of the files it wrote back.
			if after, _ := tb.IndexCounts(); after.ReplayReads != before.ReplayReads || after.Replayed != before.Replayed+1 {
				t.Errorf("the key index followed the compaction by replaying %d snapshots and reading %d files back, want 1 and 0",
					after.Replayed-before.Replayed, after.ReplayReads-before.ReplayReads)
			}
			// The manifest merge after a compaction is recognized as one, so
			// the next epoch's replay of it reads no manifest.
			if manifestsOnly(tb.Iceberg().CurrentSnapshot()) {
				t.Errorf("the compaction's snapshot is taken for a manifest merge: %v", tb.Iceberg().CurrentSnapshot().Summary)
			}
			if _, _, err := tb.mergeManifests(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if s := tb.Iceberg().CurrentSnapshot(); !manifestsOnly(s) {
				t.Errorf("the manifest merge's snapshot is not recognized as one: %v", s.Summary)
			}
			got := liveDataFiles(t, tb.Iceberg())
			if got[staged] != 0 {
				t.Errorf("after the compaction (%+v) %d staged files are left", res, got[staged])
			}
			if got[parted] != len(model)-2000+1 {
				t.Errorf("after the compaction %d partition files, want %d: one a day", got[parted], len(model)-2000+1)
			}
			if st := tb.Stats(); st.DeleteFiles != 0 {
				t.Errorf("after the compaction %d delete files are left", st.DeleteFiles)
			}

			// The key index followed the rows: updating them again deletes
			// their moved copies.
			dels, rows = dels[:0], rows[:0]
			for id := int64(1); id <= 100; id++ {
				dels = append(dels, model[id])
				model[id] = orderRow(id, id+1, "v3")
				rows = append(rows, model[id])
			}
			commit(dels, rows)
		})
	}
}

// TestStagedRowsBoundedRuns: a compaction writes at most max_files
// partition files for staged rows, stages the others again, stays due,
// and drains them over several runs.
func TestStagedRowsBoundedRuns(t *testing.T) {
	for _, mode := range []string{DeletesPosition, DeletesDV} {
		t.Run(mode, func(t *testing.T) { testStagedRowsBoundedRuns(t, mode) })
	}
}

func testStagedRowsBoundedRuns(t *testing.T, mode string) {
	ctx := context.Background()
	tb := dayTable(t, mode)
	model := map[int64]cdcsync.Row{}
	var rows []cdcsync.Row
	for id := int64(1); id <= 1000; id++ {
		model[id] = orderRow(id, id%250, "v1") // 250 days, 4 rows each
		rows = append(rows, model[id])
	}
	if err := tb.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, rows, nil); err != nil {
		t.Fatal(err)
	}
	if n := tb.StagedRows(); n != 1000 {
		t.Errorf("%d staged rows reported after the epoch, want 1000", n)
	}
	o := testOpts()
	o.MaxFiles = 100
	for run := 1; ; run++ {
		if !tb.CompactionDue(o) {
			if run != 4 {
				t.Errorf("the staged rows were moved in %d runs, want 3 of at most 100 partitions", run-1)
			}
			break
		}
		if run > 4 {
			t.Fatal("compaction is still due after 4 runs")
		}
		res, err := tb.Compact(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if res.AddedFiles > o.MaxFiles+1 {
			t.Errorf("run %d wrote %d files, want at most %d partition files and one staged", run, res.AddedFiles, o.MaxFiles)
		}
		assertOrders(t, tb.Iceberg(), model)
	}
	if n := tb.StagedRows(); n != 0 {
		t.Errorf("%d staged rows reported after the runs, want 0", n)
	}
	spec := tb.Iceberg().Metadata().PartitionSpec()
	if got := liveDataFiles(t, tb.Iceberg()); len(got) != 1 || got[int32(spec.ID())] != 250 {
		t.Errorf("data files by spec after the runs: %v, want 250 under spec %d", got, spec.ID())
	}
}

// TestSpillStagedRows: an epoch spilled in parts whose rows are staged, and
// whose later parts delete rows of the earlier (in dv mode the spilled file
// is copied without them before the commit), commits whole.
func TestSpillStagedRows(t *testing.T) {
	for _, mode := range []string{DeletesPosition, DeletesDV} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			tb := dayTable(t, mode)
			model := map[int64]cdcsync.Row{}
			var rows []cdcsync.Row
			for id := int64(1); id <= 300; id++ {
				model[id] = orderRow(id, id, "v1")
				rows = append(rows, model[id])
			}
			if err := tb.Spill(ctx, 9, nil, rows); err != nil {
				t.Fatal(err)
			}
			var dels []cdcsync.Row
			rows = rows[:0]
			for id := int64(100); id < 200; id++ {
				dels = append(dels, model[id])
				if id%2 == 0 {
					delete(model, id)
					continue
				}
				model[id] = orderRow(id, id+1000, "v2")
				rows = append(rows, model[id])
			}
			if err := tb.Spill(ctx, 9, dels, rows); err != nil {
				t.Fatal(err)
			}
			if err := tb.Commit(ctx, Epoch{Number: 1, Pos: pos(1), Spill: 9}, nil, nil, nil); err != nil {
				t.Fatal(err)
			}
			assertOrders(t, tb.Iceberg(), model)
		})
	}
}

// TestStageSparse: a write over more partitions than stage_above stages
// the rows of its partitions under 1,024 rows; one over fewer stages none.
func TestStageSparse(t *testing.T) {
	mk := func(sizes ...int) []*group {
		var gs []*group
		next := 0
		for _, n := range sizes {
			g := &group{}
			for i := 0; i < n; i++ {
				g.rows = append(g.rows, next)
				next++
			}
			gs = append(gs, g)
		}
		return gs
	}
	if kept, staged := stageSparse(mk(1, 2, 3), 3); len(kept) != 3 || staged != nil {
		t.Errorf("3 partitions at stage_above 3: kept %d, staged %v", len(kept), staged)
	}
	kept, staged := stageSparse(mk(1, 2000, 3, 1024), 3)
	if len(kept) != 2 || len(kept[0].rows) != 2000 || len(kept[1].rows) != 1024 {
		t.Errorf("kept %d groups, want the two of 1,024 rows or more", len(kept))
	}
	if staged == nil || len(staged.rows) != 4 {
		t.Errorf("staged %v, want the 4 rows of the small partitions", staged)
	}
	if kept, staged := stageSparse(mk(2000, 3000, 4000, 5000), 3); len(kept) != 4 || staged != nil {
		t.Errorf("4 large partitions: kept %d, staged %v; want all kept", len(kept), staged)
	}
	if kept, rest := largestGroups(mk(1, 5, 3, 4), 2); len(kept) != 2 || len(kept[0].rows) != 5 || len(kept[1].rows) != 4 || len(rest.rows) != 4 {
		t.Errorf("largestGroups kept %d (%d, %d rows), rest %d rows", len(kept), len(kept[0].rows), len(kept[1].rows), len(rest.rows))
	}
}

// TestStagedRowsIndexRebuild: a daemon on an empty disk rebuilds the key
// index of a table with staged rows (and their deletes) and finds them.
func TestStagedRowsIndexRebuild(t *testing.T) {
	for _, mode := range []string{DeletesPosition, DeletesDV} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			cfg := partitionedConfig(t, t.TempDir(), "deletes:\n  mode: "+mode+"\n", "day(created_at)")
			tb, err := openLake(t, cfg).EnsureTable(ctx, ordersSchema())
			if err != nil {
				t.Fatal(err)
			}
			model := map[int64]cdcsync.Row{}
			update := func(tb *Table, epoch int64, from, to int64, note string) {
				t.Helper()
				var dels, rows []cdcsync.Row
				for id := from; id <= to; id++ {
					if old, ok := model[id]; ok {
						dels = append(dels, old)
					}
					model[id] = orderRow(id, id+epoch, note)
					rows = append(rows, model[id])
				}
				if err := tb.Commit(ctx, Epoch{Number: epoch, Pos: pos(epoch)}, dels, rows, nil); err != nil {
					t.Fatal(err)
				}
				assertOrders(t, tb.Iceberg(), model)
			}
			update(tb, 1, 1, 3000, "v1")
			update(tb, 2, 1, 1000, "v2")
			// Another process, its own empty key index.
			again, err := openLake(t, cfg).EnsureTable(ctx, ordersSchema())
			if err != nil {
				t.Fatal(err)
			}
			update(again, 3, 500, 1500, "v3")
			if got := liveDataFiles(t, again.Iceberg()); len(got) != 1 {
				t.Errorf("data files by spec %v, want staged ones only", got)
			}
		})
	}
}

// epochCommits returns a function that commits dels and rows to tb as its
// next epoch (from any goroutine).
func epochCommits(t *testing.T, tb *Table) func(dels, rows []cdcsync.Row) {
	var epoch atomic.Int64
	return func(dels, rows []cdcsync.Row) {
		t.Helper()
		e := epoch.Add(1)
		if err := tb.Commit(context.Background(), Epoch{Number: e, Pos: pos(e)}, dels, rows, nil); err != nil {
			t.Error(err)
		}
	}
}

// epochAtFirstGroup returns a compaction fault hook that, before the run's
// first group, starts commit in a goroutine and returns once that epoch
// waits for the commit lock the run holds; done is closed when the epoch
// is committed.
func epochAtFirstGroup(tb *Table, commit func()) (fault func(string), done <-chan struct{}) {
	ch := make(chan struct{})
	started := false
	return func(point string) {
		if point != "compaction-group" || started {
			return
		}
		started = true
		go func() {
			defer close(ch)
			commit()
		}()
		for tb.state.epochsWaiting.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
	}, ch
}

// A compaction that holds the commit lock (dv mode; position mode only
// for tables with staged rows or a sort order: rebase.go) yields to an
// epoch that waits for it: it commits the groups it has rewritten and
// leaves the rest to the next run, which finishes them.
func TestCompactionYieldsToEpoch(t *testing.T) {
	ctx := context.Background()
	tb := dayTable(t, DeletesDV)
	model := map[int64]cdcsync.Row{}
	commit := epochCommits(t, tb)
	// 40 days of 3 orders (under stage_above: a file a day), then an
	// update in each day: 40 partitions with a delete file each.
	var rows []cdcsync.Row
	for id := int64(1); id <= 120; id++ {
		model[id] = orderRow(id, id%40, "v0")
		rows = append(rows, model[id])
	}
	commit(nil, rows)
	var dels []cdcsync.Row
	rows = nil
	for id := int64(1); id <= 40; id++ {
		dels = append(dels, model[id])
		model[id] = orderRow(id, id%40, "v1")
		rows = append(rows, model[id])
	}
	commit(dels, rows)

	o := testOpts()
	o.DeleteFiles = 1
	groups := 0
	fault, done := epochAtFirstGroup(tb, func() {
		old := model[100]
		model[100] = orderRow(100, 100%40, "v2")
		commit([]cdcsync.Row{old}, []cdcsync.Row{model[100]})
	})
	o.Fault = func(point string) {
		if point == "compaction-group" {
			groups++
		}
		fault(point)
	}
	res, err := tb.Compact(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if !res.Yielded || res.Partitions != 1 || groups != 1 {
		t.Errorf("the run rewrote %d partitions in %d groups and yielded=%v; want 1 partition, then a yield: %+v", res.Partitions, groups, res.Yielded, res)
	}
	if res.Deferred != 78 {
		t.Errorf("the run deferred %d files, want the other 39 partitions' 78", res.Deferred)
	}
	assertOrders(t, tb.Iceberg(), model)

	o.Fault = nil
	if res, err = tb.Compact(ctx, o); err != nil {
		t.Fatal(err)
	}
	if res.Yielded || res.Partitions != 39 {
		t.Errorf("the next run rewrote %d partitions (yielded=%v), want the 39 left", res.Partitions, res.Yielded)
	}
	if st := tb.Stats(); st.DeleteFiles != 0 {
		t.Errorf("%d delete files left after the second run", st.DeleteFiles)
	}
	assertOrders(t, tb.Iceberg(), model)
}

// A run over staged rows yields too: after a batch of yieldBatch partition
// files it stages the rows it has not written again.
func TestStagedRowsYieldToEpoch(t *testing.T) {
	ctx := context.Background()
	tb := dayTable(t, DeletesDV)
	model, commit := stagedOrders(t, tb)
	o := testOpts()
	var done <-chan struct{}
	o.Fault, done = epochAtFirstGroup(tb, func() {
		old := model[7]
		model[7] = orderRow(7, 7, "v1")
		commit([]cdcsync.Row{old}, []cdcsync.Row{model[7]})
	})
	res, err := tb.Compact(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	<-done
	staged, parted := specIDs(tb)
	files := liveDataFiles(t, tb.Iceberg())
	if !res.Yielded || files[staged] != 1 || files[parted] != yieldBatch+1 {
		t.Errorf("after a run that yielded (%v): data files by spec %v, want %d partition files (spec %d) and the epoch's, the rest staged again (spec %d)",
			res.Yielded, files, yieldBatch, parted, staged)
	}
	assertOrders(t, tb.Iceberg(), model)
	o.Fault = nil
	if _, err := tb.Compact(ctx, o); err != nil {
		t.Fatal(err)
	}
	if files := liveDataFiles(t, tb.Iceberg()); files[staged] != 0 {
		t.Errorf("staged files left after the next run: %v", files)
	}
	assertOrders(t, tb.Iceberg(), model)
}

// A run holds the commit lock for max_lock at most: with no epoch waiting
// it stops after the batch during which max_lock passed, stages the rows
// it has not written again, and the next runs go on from there.
func TestStagedRowsMaxLock(t *testing.T) {
	ctx := context.Background()
	tb := dayTable(t, DeletesDV)
	model, commit := stagedOrders(t, tb)
	staged, parted := specIDs(tb)
	o := testOpts()
	o.MaxLock = time.Nanosecond
	for run := 1; ; run++ {
		res, err := tb.Compact(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		assertOrders(t, tb.Iceberg(), model)
		checkTotals(t, tb.current())
		files := liveDataFiles(t, tb.Iceberg())
		if want := min(run*yieldBatch, 300); files[parted] != want || res.Yielded != (want < 300) {
			t.Fatalf("after run %d (yielded: %v): data files by spec %v, want %d partition files (spec %d)", run, res.Yielded, files, want, parted)
		}
		if files[staged] == 0 {
			break
		}
	}
	// Updates of every order and deletes of some: the key index followed
	// each run.
	touchEveryOrder(t, tb, model, commit)
}

// touchEveryOrder commits an epoch that updates every order of model and
// deletes every seventh, and checks the table's rows: an update or delete
// finds a row only where the key index says it is.
func touchEveryOrder(t *testing.T, tb *Table, model map[int64]cdcsync.Row, commit func(dels, rows []cdcsync.Row)) {
	t.Helper()
	var dels, rows []cdcsync.Row
	for id, r := range model {
		dels = append(dels, r)
		if id%7 == 0 {
			delete(model, id)
			continue
		}
		model[id] = cdcsync.Row{id, r[1], "touched"}
		rows = append(rows, model[id])
	}
	commit(dels, rows)
	assertOrders(t, tb.Iceberg(), model)
}

// stagedOrders commits 300 orders of 300 days to tb as its first epoch
// (staged) and returns them, by id, and tb's epoch commits.
func stagedOrders(t *testing.T, tb *Table) (map[int64]cdcsync.Row, func(dels, rows []cdcsync.Row)) {
	t.Helper()
	model := map[int64]cdcsync.Row{}
	var rows []cdcsync.Row
	for id := int64(1); id <= 300; id++ {
		model[id] = orderRow(id, id, "v0")
		rows = append(rows, model[id])
	}
	commit := epochCommits(t, tb)
	commit(nil, rows)
	return model, commit
}

// specIDs returns the ids of tb's unpartitioned spec (its staged files')
// and of its partition spec.
func specIDs(tb *Table) (staged, parted int32) {
	unpart, _ := unpartitionedSpec(tb.Iceberg().Metadata())
	spec := tb.Iceberg().Metadata().PartitionSpec()
	return int32(unpart.ID()), int32(spec.ID())
}

// TestStagedRowsRunStopsAtFile: a run that must yield (max_lock passed at
// once) moves what it can of the oldest staged file, stages the rest of
// that file again, and leaves the newer staged files as they are, rather
// than reading every staged row and writing those it did not move into a
// new staged file under the commit lock. The runs that follow drain the
// files oldest first; the rows are right after each run, and the key
// index follows every run.
func TestStagedRowsRunStopsAtFile(t *testing.T) {
	for _, mode := range []string{DeletesPosition, DeletesDV} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			tb := dayTable(t, mode)
			model, commit := stagedOrders(t, tb)
			// Three more epochs, each staging 300 orders of 300 other days,
			// and updating a few rows of the files before it.
			for e := int64(1); e <= 3; e++ {
				var dels, rows []cdcsync.Row
				for id := e*1000 + 1; id <= e*1000+300; id++ {
					model[id] = orderRow(id, id, "v0")
					rows = append(rows, model[id])
				}
				for id := int64(1); id <= 5; id++ {
					dels = append(dels, model[id])
					model[id] = orderRow(id, id, fmt.Sprint("e", e))
					rows = append(rows, model[id])
				}
				commit(dels, rows)
			}
			staged, parted := specIDs(tb)
			stagedFiles := func() []string {
				t.Helper()
				tasks, err := tb.Iceberg().Scan().PlanFiles(ctx)
				if err != nil {
					t.Fatal(err)
				}
				// Oldest first.
				slices.SortStableFunc(tasks, func(a, b table.FileScanTask) int { return cmp.Compare(seqOf(&a), seqOf(&b)) })
				var out []string
				for _, tk := range tasks {
					if tk.File.SpecID() == staged && !slices.Contains(out, tk.File.FilePath()) {
						out = append(out, tk.File.FilePath())
					}
				}
				return out
			}
			before := stagedFiles()
			if len(before) != 4 {
				t.Fatalf("%d staged files before the compaction, want one an epoch (4)", len(before))
			}
			o := testOpts()
			o.MaxLock = time.Nanosecond
			res, err := tb.Compact(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			assertOrders(t, tb.Iceberg(), model)
			checkTotals(t, tb.current())
			after := stagedFiles()
			kept := 0
			for _, f := range before {
				if slices.Contains(after, f) {
					kept++
				}
			}
			// The oldest file (the first epoch's) was read: 32 partitions
			// moved, its other rows staged again; the three newer files
			// were not read.
			if files := liveDataFiles(t, tb.Iceberg()); !res.Yielded || files[parted] != yieldBatch || kept != 3 || len(after) != 4 || res.Deferred < 3 {
				t.Fatalf("after the first run (yielded %v, deferred %d): data files by spec %v, staged files %d of which %d from before; "+
					"want %d partition files, the 3 newest staged files kept and one new", res.Yielded, res.Deferred, files, len(after), kept, yieldBatch)
			}
			// The next run reads the oldest file left: the second epoch's.
			if _, err := tb.Compact(ctx, o); err != nil {
				t.Fatal(err)
			}
			assertOrders(t, tb.Iceberg(), model)
			if after := stagedFiles(); slices.Contains(after, before[1]) || !slices.Contains(after, before[2]) || !slices.Contains(after, before[3]) {
				t.Fatalf("the second run did not read the oldest staged file left, and only it: staged files before %v, after %v", before, after)
			}
			// Runs without the bound move the rest.
			o.MaxLock = 0
			for run := 3; len(stagedFiles()) > 0; run++ {
				if run > 6 {
					t.Fatalf("staged files left after %d runs: %v", run, stagedFiles())
				}
				if _, err := tb.Compact(ctx, o); err != nil {
					t.Fatal(err)
				}
				assertOrders(t, tb.Iceberg(), model)
			}
			checkTotals(t, tb.current())
			// Every order updated or deleted: the key index followed.
			touchEveryOrder(t, tb, model, commit)
		})
	}
}
