package lake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/merge"
	"github.com/cdcsync/cdcsync/metrics"
	"github.com/cdcsync/cdcsync/pkindex"
)

// deleteFiles counts the delete files of tbl's current snapshot by kind.
func deleteFiles(t *testing.T, tbl *table.Table) (pos, eq int) {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tk := range tasks {
		for _, d := range append(append([]iceberg.DataFile{}, tk.DeleteFiles...), tk.EqualityDeleteFiles...) {
			if seen[d.FilePath()] {
				continue
			}
			seen[d.FilePath()] = true
			if d.ContentType() == iceberg.EntryContentPosDeletes {
				pos++
			} else {
				eq++
			}
		}
	}
	return pos, eq
}

// randomEpoch commits an epoch of random upserts and deletes over keys
// 1..n through tb.
func (e *kvEnv) randomEpoch(r *rand.Rand, tb *Table, n int64) {
	e.t.Helper()
	var set, del []int64
	picked := map[int64]bool{}
	for i := 0; i < 1+r.IntN(40); i++ {
		k := 1 + r.Int64N(n)
		if picked[k] {
			continue
		}
		picked[k] = true
		if r.IntN(4) == 0 {
			del = append(del, k)
		} else {
			set = append(set, k)
		}
	}
	e.commit(tb, set, fmt.Sprintf("e%d", e.epoch+1), del)
}

// TestPositionModeEpochs: a table in position mode (the default) takes
// upserts and deletes as position deletes found in its key index: the rows
// equal the model after every epoch, an epoch of new keys writes no delete
// file, and no equality delete is ever written.
func TestPositionModeEpochs(t *testing.T) {
	e := newKV(t, "p")
	if e.tbl.mode != DeletesPosition || deletesMode(e.tbl.current()) != DeletesPosition {
		t.Fatalf("a new table is in %s mode, want position", e.tbl.mode)
	}
	e.commit(nil, keys(1, 200), "v0", nil)
	if p, q := deleteFiles(t, e.tbl.current()); p+q != 0 {
		t.Fatalf("an epoch of new keys wrote %d position and %d equality delete files, want none", p, q)
	}
	// The index follows the table's first snapshot too.
	if st, ok, err := e.tbl.state.keys.db.State(); err != nil || !ok || !st.Complete || st.SnapshotID != e.tbl.current().CurrentSnapshot().SnapshotID {
		t.Fatalf("index state after the first commit %+v (%v, %v), want complete at snapshot %d", st, ok, err, e.tbl.current().CurrentSnapshot().SnapshotID)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 25; i++ {
		e.randomEpoch(r, nil, 250)
		e.assertModel(e.tbl.current())
	}
	if c, _ := e.tbl.IndexCounts(); c.Rebuilds != 0 || c.Replayed != 0 {
		t.Errorf("the index was rebuilt %d times and replayed %d snapshots over epochs that only this table committed", c.Rebuilds, c.Replayed)
	}
	if _, q := deleteFiles(t, e.tbl.current()); q != 0 {
		t.Fatalf("%d equality delete files in a position-mode table", q)
	}
	st, ok, err := e.tbl.state.keys.db.State()
	if err != nil || !ok || !st.Complete || st.SnapshotID != e.tbl.current().CurrentSnapshot().SnapshotID {
		t.Fatalf("index state %+v (%v, %v), want complete at snapshot %d", st, ok, err, e.tbl.current().CurrentSnapshot().SnapshotID)
	}
	// Compaction rewrites the files with deletes; the next epochs find
	// the moved rows through the index caught up from its snapshot.
	if _, err := e.tbl.Compact(context.Background(), testOpts()); err != nil {
		t.Fatal(err)
	}
	e.assertModel(e.tbl.current())
	for i := 0; i < 10; i++ {
		e.randomEpoch(r, nil, 250)
		e.assertModel(e.tbl.current())
	}
}

// TestKeyIndexRecovers: the index is a cache. A missing index is rebuilt;
// one left behind (a crash between a commit and its index update, commits
// made elsewhere) catches up; one of another lineage or a rebuild that
// did not finish is rebuilt; in every case the next epochs leave the rows
// equal to the model.
func TestKeyIndexRecovers(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	r := rand.New(rand.NewPCG(3, 4))
	e.commit(nil, keys(1, 100), "v0", nil)
	for i := 0; i < 5; i++ {
		e.randomEpoch(r, nil, 120)
	}
	a := e.tbl

	// A daemon on another machine (an empty index) builds it from the table.
	b := e.reopen()
	for i := 0; i < 5; i++ {
		e.randomEpoch(r, b, 120)
		e.assertModel(b.current())
	}

	// Back to the first index, now five epochs behind: it catches up.
	if err := a.reloadForTest(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		e.randomEpoch(r, a, 120)
		e.assertModel(a.current())
	}

	// Another lineage: the index claims a snapshot the table never had.
	ib := a.state.keys.newBatch()
	ib.b.Put([]byte("stale"), pkindex.Loc{File: 1, Pos: 7})
	if err := ib.commit(pkindex.State{SnapshotID: 424242, Complete: true}); err != nil {
		t.Fatal(err)
	}
	ib.close()
	for i := 0; i < 3; i++ {
		e.randomEpoch(r, a, 120)
		e.assertModel(a.current())
	}
	if _, found, _ := a.state.keys.db.Lookup([][]byte{[]byte("stale")}); found[0] {
		t.Error("a rebuild kept an entry of the index it replaced")
	}

	// A rebuild that did not finish.
	ib = a.state.keys.newBatch()
	if err := ib.commit(pkindex.State{SnapshotID: a.current().CurrentSnapshot().SnapshotID, Complete: false}); err != nil {
		t.Fatal(err)
	}
	ib.close()
	for i := 0; i < 3; i++ {
		e.randomEpoch(r, a, 120)
		e.assertModel(a.current())
	}
}

// TestSwitchToPositionMode: an equality-mode table (as earlier versions
// made them) switches when its rule says deletes: position; the index is
// built through its equality deletes, and the rows stay exact.
func TestSwitchToPositionMode(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	yaml := func(extra string) string {
		return fmt.Sprintf("pipeline: p\nsource:\n  user: u\n  server_id: 7\n  include: [\"shop.*\"]\nwarehouse:\n  location: %s\ncatalog:\n  sql:\n    dsn: %s\n%s",
			filepath.Join(dir, "warehouse"), filepath.Join(dir, "catalog.db"), extra)
	}
	e := &kvEnv{t: t, dir: dir, model: map[int64]string{}}
	e.cfg = loadConfig(t, filepath.Join(dir, "eq.yaml"), yaml("deletes:\n  mode: equality\n"))
	var err error
	if e.tbl, err = openLake(t, e.cfg).EnsureTable(ctx, kvSchema()); err != nil {
		t.Fatal(err)
	}
	if e.tbl.mode != DeletesEquality {
		t.Fatalf("mode %s, want equality", e.tbl.mode)
	}
	r := rand.New(rand.NewPCG(5, 6))
	e.commit(nil, keys(1, 100), "v0", nil)
	for i := 0; i < 6; i++ {
		e.randomEpoch(r, nil, 120)
	}
	_, eqBefore := deleteFiles(t, e.tbl.current())
	if eqBefore == 0 {
		t.Fatal("the equality-mode table has no equality deletes")
	}

	// A default of position does not switch an existing table.
	cfg := loadConfig(t, filepath.Join(dir, "default.yaml"), yaml(""))
	tb, err := openLake(t, cfg).EnsureTable(ctx, kvSchema())
	if err != nil {
		t.Fatal(err)
	}
	if tb.mode != DeletesEquality {
		t.Fatalf("the default switched an existing table to %s", tb.mode)
	}

	// Its rule does.
	cfg = loadConfig(t, filepath.Join(dir, "pos.yaml"), yaml("tables:\n  - match: shop.kv\n    deletes: position\n"))
	if e.tbl, err = openLake(t, cfg).EnsureTable(ctx, kvSchema()); err != nil {
		t.Fatal(err)
	}
	if e.tbl.mode != DeletesPosition {
		t.Fatalf("the rule left the table in %s mode", e.tbl.mode)
	}
	for i := 0; i < 8; i++ {
		e.randomEpoch(r, nil, 120)
		e.assertModel(e.tbl.current())
	}
	if _, eq := deleteFiles(t, e.tbl.current()); eq > eqBefore {
		t.Errorf("after the switch %d equality delete files, before %d: new ones were written", eq, eqBefore)
	}
}

// reloadForTest makes t see the table as the catalog has it now.
func (t *Table) reloadForTest(ctx context.Context) error {
	fresh, err := t.reload(ctx)
	if err != nil {
		return err
	}
	t.setCurrent(fresh)
	return nil
}

// TestCompactReplayOverPositionDeletes: `cdcsync compact` runs next to the
// daemon. In position mode an epoch that lands while it runs and deletes,
// by position, rows of a file it rewrites would be undone by re-staging the
// rewrite as it is (the rewritten file still holds those rows): the deletes
// are carried over to the new files, and the rows stay exact, also for the
// daemon, whose index catches up by replaying the compaction. Where the
// rows' new places are not known (a table with a sort order: iceberg-go
// sorts what it writes) the compaction is dropped instead.
func TestCompactReplayOverPositionDeletes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		touch   []int64 // keys the concurrent epoch updates
		sorted  bool
		dropped bool
	}{
		{"the epoch updates rewritten rows", []int64{3}, false, false},
		{"the epoch adds new keys only", []int64{500, 501}, false, false},
		{"a sorted table's epoch updates rewritten rows", []int64{3}, true, true},
		{"a sorted table's epoch adds new keys only", []int64{500, 501}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newKV(t, "p")
			e.commit(nil, keys(1, 20), "copy", nil)
			e.churn(4)
			daemon := e.second("p")
			if tc.sorted {
				tx := e.tbl.current().NewTransaction()
				order, err := table.NewSortOrder(1, []table.SortField{{SourceIDs: []int{2}, Transform: iceberg.IdentityTransform{},
					Direction: table.SortDESC, NullOrder: table.NullsLast}})
				if err != nil {
					t.Fatal(err)
				}
				if err := tx.ReplaceSortOrder(order); err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				if err := e.tbl.reloadForTest(ctx); err != nil {
					t.Fatal(err)
				}
			}
			o := testOpts()
			o.Replay, o.Force = true, true
			o.Fault = func(point string) {
				if point == "compaction-written" {
					e.commit(daemon, tc.touch, "updated", nil)
				}
			}
			res, err := e.tbl.Compact(ctx, o)
			if tc.dropped {
				if !errors.Is(err, ErrCompactionConflict) {
					t.Fatalf("compaction over position deletes of its files: %+v, %v; want ErrCompactionConflict", res, err)
				}
			} else if err != nil || !res.Committed() || res.Replays != 1 {
				t.Fatalf("compaction next to an epoch: %+v, %v; want it re-staged once and committed", res, err)
			}
			if err := e.tbl.reloadForTest(ctx); err != nil {
				t.Fatal(err)
			}
			e.assertModel(e.tbl.Iceberg())
			// The daemon's next epochs catch their index up and stay exact.
			if err := daemon.reloadForTest(ctx); err != nil {
				t.Fatal(err)
			}
			e.commit(daemon, keys(1, 6), "after", []int64{7})
			e.commit(daemon, keys(8, 30), "after2", nil)
			e.assertModel(daemon.Iceberg())
		})
	}
}

// TestUnusedIndexesAreDropped: a session's sink drops the indexes of the
// tables it does not mirror (any more) and keeps its own.
func TestUnusedIndexesAreDropped(t *testing.T) {
	e := newKV(t, "p")
	e.commit(nil, keys(1, 10), "v", nil)
	db := e.lk.keys
	stale, err := db.Table("00000000-0000-0000-0000-000000000000/1")
	if err != nil {
		t.Fatal(err)
	}
	b := stale.NewBatch()
	if err := b.Commit(pkindex.State{SnapshotID: 1, Complete: true}); err != nil {
		t.Fatal(err)
	}
	e.lk.ForSession(metrics.New(), nil).Sink(map[cdcsync.TableID]merge.LakeTable{e.tbl.ID: &SessionTable{l: e.lk, t: e.tbl}})
	names, err := db.Tables()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != e.tbl.state.keys.name {
		t.Fatalf("indexes after the session began: %v, want only %s", names, e.tbl.state.keys.name)
	}
	e.commit(nil, keys(5, 15), "w", []int64{1})
	e.assertModel(e.tbl.current())
}

// TestForeignDeleteOverPositionDeletes: another writer (iceberg-go's
// merge-on-read Delete, as Spark's DELETE) deletes rows of a file that
// already carries cdcsync's position deletes; the rows stay exact, and so
// do the epochs after it.
func TestForeignDeleteOverPositionDeletes(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.commit(nil, keys(1, 100), "v0", nil)
	e.commit(nil, []int64{3, 10, 11, 40}, "v1", []int64{20, 21})
	tbl := e.tbl.current()
	tx := tbl.NewTransaction()
	if err := tx.Delete(ctx, iceberg.EqualTo(iceberg.Reference("id"), int64(50)), nil); err != nil {
		t.Fatal(err)
	}
	next, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	delete(e.model, 50)
	e.assertModel(next)
	if err := e.tbl.reloadForTest(ctx); err != nil {
		t.Fatal(err)
	}
	e.commit(nil, []int64{51, 52, 3}, "v2", []int64{60})
	e.assertModel(e.tbl.current())
}

// TestCompactSwitchedTableNextToEpochs: `cdcsync compact` of a table
// switched from equality to position mode, while the daemon's epochs
// delete by position rows of files it rewrites. The rewrite drops the dead
// equality deletes and would carry the epochs' position deletes over to
// its files, which one commit cannot do (iceberg-go refuses to remove
// delete files of both kinds while adding some): the run is dropped as a
// conflict (it runs again later), the rows stay exact, and a later run
// without epochs in between clears the equality deletes.
func TestCompactSwitchedTableNextToEpochs(t *testing.T) {
	ctx := context.Background()
	e := newKVMode(t, "p", DeletesEquality)
	e.commit(nil, keys(1, 100), "v0", nil)
	e.churn(4)
	e.commit(nil, keys(200, 210), "new", nil) // a file no equality delete applies to
	if _, eq := deleteFiles(t, e.tbl.current()); eq == 0 {
		t.Fatal("the equality-mode table has no equality deletes")
	}
	e.cfg = loadConfig(t, filepath.Join(e.dir, "pos.yaml"), fmt.Sprintf("pipeline: p\nsource:\n  user: u\n  server_id: 7\n  include: [\"shop.*\"]\n"+
		"warehouse:\n  location: %s\ncatalog:\n  sql:\n    dsn: %s\ntables:\n  - match: shop.kv\n    deletes: position\n",
		filepath.Join(e.dir, "warehouse"), filepath.Join(e.dir, "catalog.db")))
	cli, daemon := e.reopen(), e.reopen()
	if cli.mode != DeletesPosition {
		t.Fatalf("the switched table is in %s mode", cli.mode)
	}
	o := testOpts()
	o.Replay, o.Force = true, true
	o.Fault = func(point string) {
		if point == "compaction-written" {
			e.commit(daemon, []int64{205}, "during", []int64{206})
		}
	}
	res, err := cli.Compact(ctx, o)
	if err != nil && !errors.Is(err, ErrCompactionConflict) {
		t.Fatalf("compaction next to epochs of a switched table: %+v, %v; want it committed or dropped as a conflict", res, err)
	}
	if err := cli.reloadForTest(ctx); err != nil {
		t.Fatal(err)
	}
	e.assertModel(cli.Iceberg())
	o.Fault = nil
	if _, err := cli.Compact(ctx, o); err != nil {
		t.Fatal(err)
	}
	if _, eq := deleteFiles(t, cli.Iceberg()); eq != 0 {
		t.Fatalf("%d equality delete files after a compaction without epochs in between", eq)
	}
	e.assertModel(cli.Iceberg())
	if err := daemon.reloadForTest(ctx); err != nil {
		t.Fatal(err)
	}
	e.commit(daemon, keys(1, 10), "after", []int64{40})
	e.assertModel(daemon.Iceberg())
}

// TestInterruptedIndexSync: a shutdown does not wait for a key index to be
// built. A commit that must rebuild its table's index gives up once its
// epoch's Interrupt closes, before or during the rebuild, with an error
// wrapping cdcsync.ErrInterrupted, and commits nothing; a commit whose
// index is current goes through. The next commit builds the index, and
// the rows equal the model.
func TestInterruptedIndexSync(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	r := rand.New(rand.NewPCG(7, 8))
	e.commit(nil, keys(1, 100), "v0", nil)
	for i := 0; i < 5; i++ {
		e.randomEpoch(r, nil, 120)
	}
	closed := make(chan struct{})
	close(closed)
	try := func(tb *Table, interrupt <-chan struct{}) error {
		set, del := []int64{3, 200}, []int64{5}
		d, rows := e.change(set, fmt.Sprintf("e%d", e.epoch+1), del)
		err := tb.Commit(ctx, Epoch{Number: e.epoch + 1, Pos: pos(e.epoch + 1), Interrupt: interrupt}, d, rows, nil)
		if err == nil {
			e.epoch++
			e.apply(set, fmt.Sprintf("e%d", e.epoch), del)
		}
		return err
	}

	// The index is current: an interrupted commit has nothing to give up.
	if err := try(e.tbl, closed); err != nil {
		t.Fatalf("a commit with its index current failed after an interrupt: %v", err)
	}
	e.assertModel(e.tbl.current())

	for _, when := range []string{"before the rebuild", "during the rebuild"} {
		// Another machine's daemon (an empty index) must build it.
		b := e.reopen()
		before := b.current().CurrentSnapshot().SnapshotID
		interrupt := closed
		if when == "during the rebuild" {
			ch := make(chan struct{})
			b.state.keys.fault = func(point string) {
				if point == "during-index-rebuild" {
					close(ch)
					time.Sleep(100 * time.Millisecond) // the interrupt reaches the rebuild's context
				}
			}
			interrupt = ch
		}
		err := try(b, interrupt)
		if !errors.Is(err, cdcsync.ErrInterrupted) {
			t.Fatalf("%s: a commit that must build its key index, interrupted: %v; want an error wrapping cdcsync.ErrInterrupted", when, err)
		}
		if err := b.reloadForTest(ctx); err != nil {
			t.Fatal(err)
		}
		if now := b.current().CurrentSnapshot().SnapshotID; now != before {
			t.Fatalf("%s: the interrupted commit committed snapshot %d", when, now)
		}
		if st, ok, err := b.state.keys.db.State(); err != nil || (ok && st.Complete) {
			t.Fatalf("%s: the index after an interrupted build: %+v, %v, %v; want it unfinished", when, st, ok, err)
		}
		b.state.keys.fault = nil
		for i := 0; i < 3; i++ {
			e.randomEpoch(r, b, 220)
			e.assertModel(b.current())
		}
		if err := e.tbl.reloadForTest(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPositionDeletesReadOnce: a rebuild's reading of the live keys reads
// each position delete file once, however many data files it applies to,
// and finds every live key of the model and no other.
func TestPositionDeletesReadOnce(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	r := rand.New(rand.NewPCG(9, 10))
	e.commit(nil, keys(1, 100), "v0", nil)
	for i := 0; i < 12; i++ {
		e.randomEpoch(r, nil, 120)
	}
	tbl := e.tbl.current()
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files, applied := map[string]bool{}, 0
	for _, task := range tasks {
		for _, d := range task.DeleteFiles {
			files[d.FilePath()] = true
			applied++
		}
	}
	if len(files) < 5 || applied <= len(files) {
		t.Fatalf("%d tasks apply %d position delete files %d times: the table does not make the case", len(tasks), len(files), applied)
	}
	want := map[string]bool{}
	for k := range e.model {
		key, _ := kvSchema().AppendKey(nil, cdcsync.Row{k, nil})
		want[string(key)] = true
	}
	reads, err := liveKeys(ctx, tbl, tbl.CurrentSnapshot().SnapshotID, kvSchema(), "", func(key []byte, df iceberg.DataFile, pos int64) error {
		if !want[string(key)] {
			return fmt.Errorf("live key %x at %s:%d is not in the model, or came twice", key, df.FilePath(), pos)
		}
		delete(want, string(key))
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) > 0 {
		t.Errorf("%d live keys of the model not found", len(want))
	}
	if reads != len(files) {
		t.Errorf("%d position delete files applied %d times were read %d times, want once each", len(files), applied, reads)
	}
}

// TestMovedKeys: the keys a compaction wrote come back by file and
// position whatever order they were recorded in; a file with a row not
// recorded is not known; past maxMovedKeys rows nothing is.
func TestMovedKeys(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.commit(nil, keys(1, 50), "a", nil)
	e.commit(nil, keys(51, 80), "b", nil)
	tasks, err := e.tbl.current().Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var files []iceberg.DataFile
	for _, tk := range tasks {
		files = append(files, tk.File)
	}
	if len(files) != 2 {
		t.Fatalf("%d data files, want 2", len(files))
	}
	var (
		rows []cdcsync.Row
		locs []rowLoc
	)
	for f, df := range files {
		for pos := int64(0); pos < df.Count(); pos++ {
			rows = append(rows, cdcsync.Row{int64(1000*f) + pos*7, "x"})
			locs = append(locs, rowLoc{file: int32(f), pos: pos})
		}
	}
	r := rand.New(rand.NewPCG(11, 12))
	r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i]; locs[i], locs[j] = locs[j], locs[i] })
	want := func(f int, pos int) []byte {
		k, _ := kvSchema().AppendKey(nil, cdcsync.Row{int64(1000*f) + int64(pos)*7, "x"})
		return k
	}

	m := newMovedKeys()
	if err := m.add(kvSchema(), files, rows, locs); err != nil {
		t.Fatal(err)
	}
	for f, df := range files {
		keys, ok := m.of(df)
		if !ok || int64(keys.len()) != df.Count() {
			t.Fatalf("file %d: known %v, %d keys; want its %d", f, ok, keys.len(), df.Count())
		}
		for pos := range keys.len() {
			if !bytes.Equal(keys.at(pos), want(f, pos)) {
				t.Fatalf("file %d position %d: key %x, want %x", f, pos, keys.at(pos), want(f, pos))
			}
		}
	}

	gap := newMovedKeys()
	if err := gap.add(kvSchema(), files, rows[1:], locs[1:]); err != nil {
		t.Fatal(err)
	}
	for f, df := range files {
		if _, ok := gap.of(df); ok == (int32(f) == locs[0].file) {
			t.Errorf("file %d known %v with row %d of file %d not recorded", f, ok, locs[0].pos, locs[0].file)
		}
	}

	full := newMovedKeys()
	full.rows = maxMovedKeys - 10
	if err := full.add(kvSchema(), files, rows, locs); err != nil {
		t.Fatal(err)
	}
	for _, df := range files {
		if _, ok := full.of(df); ok {
			t.Error("keys kept past maxMovedKeys")
		}
	}
}

// TestKeyIndexRebuildResumes: a rebuild cut short (here by a shutdown's
// interrupt) resumes after the last data file it finished, without
// reading again what it committed, and the rows stay exact. A rebuild for
// another snapshot starts afresh.
func TestKeyIndexRebuildResumes(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	r := rand.New(rand.NewPCG(13, 14))
	e.commit(nil, keys(1, 100), "v0", nil)
	for i := 0; i < 10; i++ {
		e.randomEpoch(r, nil, 150)
	}
	live := len(e.model)

	b := e.reopen()
	b.state.keys.chunk = 1
	interrupt, chunks := make(chan struct{}), 0
	b.state.keys.fault = func(point string) {
		if point != "index-rebuild-chunk" || chunks < 0 {
			return
		}
		chunks++
		// Once a data file is finished, with others left to read.
		if st, _, err := b.state.keys.db.State(); err == nil && st.Through != "" {
			chunks = -chunks
			close(interrupt)
			time.Sleep(300 * time.Millisecond) // the interrupt reaches the rebuild's context
		}
	}
	d, rows := e.change([]int64{3}, "x", nil)
	err := b.Commit(ctx, Epoch{Number: e.epoch + 1, Pos: pos(e.epoch + 1), Interrupt: interrupt}, d, rows, nil)
	if !errors.Is(err, cdcsync.ErrInterrupted) {
		t.Fatalf("the interrupted rebuild: %v; want cdcsync.ErrInterrupted", err)
	}
	st, ok, err := b.state.keys.db.State()
	if err != nil || !ok || st.Complete || st.Through == "" || st.SnapshotID != b.current().CurrentSnapshot().SnapshotID {
		t.Fatalf("index state after %d of %d rows: %+v (%v, %v); want unfinished at the head, through some file", -chunks, live, st, ok, err)
	}
	b.state.keys.fault, b.state.keys.chunk = nil, 0

	e.randomEpoch(r, b, 150)
	c, _ := b.IndexCounts()
	if c.Rebuilds != 1 || c.RebuildRows == 0 || c.RebuildRows >= int64(live) {
		t.Errorf("the resumed rebuild: %d rebuilds, %d rows read of %d live; want one that read only what was left", c.Rebuilds, c.RebuildRows, live)
	}
	e.assertModel(b.current())
	for i := 0; i < 3; i++ {
		e.randomEpoch(r, b, 150)
		e.assertModel(b.current())
	}

	// Unfinished for a snapshot that is no longer the head: afresh.
	ib := b.state.keys.newBatch()
	if err := ib.commit(pkindex.State{SnapshotID: 424242, Through: st.Through}); err != nil {
		t.Fatal(err)
	}
	ib.close()
	live = len(e.model)
	e.randomEpoch(r, b, 150)
	if c2, _ := b.IndexCounts(); c2.Rebuilds != 2 || c2.RebuildRows-c.RebuildRows != int64(live) {
		t.Errorf("a rebuild for another snapshot read %d rows (%d rebuilds); want all %d live rows", c2.RebuildRows-c.RebuildRows, c2.Rebuilds, live)
	}
	e.assertModel(b.current())
}
