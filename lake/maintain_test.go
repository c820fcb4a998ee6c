package lake

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/pkindex"
)

func kvSchema() *cdcsync.TableSchema {
	return &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "kv"}, Columns: []cdcsync.Column{
		{Name: "id", DataType: "bigint", ColumnType: "bigint(20)", Kind: cdcsync.KindInt64},
		{Name: "v", DataType: "varchar", ColumnType: "varchar(32)", Kind: cdcsync.KindString, Nullable: true},
	}, PrimaryKey: []int{0}}
}

// kvEnv is a table in a local warehouse with a SQLite catalog, and the
// model of the rows it must hold.
type kvEnv struct {
	t     *testing.T
	dir   string
	cfg   *config.Config
	lk    *Lake
	tbl   *Table
	model map[int64]string
	epoch int64
}

func newKV(t *testing.T, pipeline string) *kvEnv {
	t.Helper()
	return newKVMode(t, pipeline, "")
}

// newKVMode is newKV with the table in deletes mode mode ("" for the
// default) and the tables[] rules rules.
func newKVMode(t *testing.T, pipeline, mode string, rules ...config.TableRule) *kvEnv {
	t.Helper()
	dir := t.TempDir()
	e := &kvEnv{t: t, dir: dir, model: map[int64]string{}}
	e.cfg = kvConfig(t, dir, pipeline)
	if mode != "" {
		e.cfg.Deletes.Mode = mode
	}
	e.cfg.Tables = append(e.cfg.Tables, rules...)
	e.lk = openLake(t, e.cfg)
	tb, err := e.lk.EnsureTable(context.Background(), kvSchema())
	if err != nil {
		t.Fatal(err)
	}
	e.tbl = tb
	return e
}

// reopen opens the table again with e.cfg as it is now, in a lake of its
// own, as a restarted daemon (or one on another machine) would.
func (e *kvEnv) reopen() *Table {
	e.t.Helper()
	tb, err := openLake(e.t, e.cfg).EnsureTable(context.Background(), kvSchema())
	if err != nil {
		e.t.Fatal(err)
	}
	return tb
}

func kvConfig(t *testing.T, dir, pipeline string) *config.Config {
	t.Helper()
	yaml := fmt.Sprintf("pipeline: %s\nsource:\n  user: u\n  server_id: 7\n  include: [\"shop.*\"]\nwarehouse:\n  location: %s\ncatalog:\n  sql:\n    dsn: %s\n",
		pipeline, filepath.Join(dir, "warehouse"), filepath.Join(dir, "catalog.db"))
	return loadConfig(t, filepath.Join(dir, pipeline+".yaml"), yaml)
}

// loadConfig writes yaml to path and loads it.
func loadConfig(t testing.TB, path, yaml string) *config.Config {
	t.Helper()
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func openLake(t testing.TB, cfg *config.Config) *Lake {
	t.Helper()
	lk, err := Open(context.Background(), OptionsFrom(cfg), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	lk.SetKeyIndex(openKeyIndex(t, filepath.Join(t.TempDir(), "keys")))
	return lk
}

// openKeyIndex opens a key index in dir for the test's lake.
func openKeyIndex(t testing.TB, dir string) *pkindex.DB {
	t.Helper()
	db, err := pkindex.Open(dir, pkindex.Options{CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// second opens another handle on the same table, as a second process would.
func (e *kvEnv) second(pipeline string) *Table {
	e.t.Helper()
	cfg := kvConfig(e.t, e.dir, pipeline)
	tb, err := openLake(e.t, cfg).EnsureTable(context.Background(), kvSchema())
	if err != nil {
		e.t.Fatal(err)
	}
	return tb
}

func pos(n int64) cdcsync.Position {
	return binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: fmt.Sprintf("0-1-%d", n)}.Position()
}

// change builds one epoch: an upsert for every key of set (value v), a
// delete for every key of del.
func (e *kvEnv) change(set []int64, v string, del []int64) (deletes, rows []cdcsync.Row) {
	for _, k := range set {
		deletes = append(deletes, cdcsync.Row{k, nil})
		rows = append(rows, cdcsync.Row{k, v})
	}
	for _, k := range del {
		deletes = append(deletes, cdcsync.Row{k, nil})
	}
	return deletes, rows
}

func (e *kvEnv) apply(set []int64, v string, del []int64) {
	for _, k := range set {
		e.model[k] = v
	}
	for _, k := range del {
		delete(e.model, k)
	}
}

// commit commits one epoch through tb (e.tbl when nil) and applies it to the model.
func (e *kvEnv) commit(tb *Table, set []int64, v string, del []int64) {
	e.t.Helper()
	if tb == nil {
		tb = e.tbl
	}
	e.epoch++
	d, r := e.change(set, v, del)
	if err := tb.Commit(context.Background(), Epoch{Number: e.epoch, Pos: pos(e.epoch)}, d, r, nil); err != nil {
		e.t.Fatalf("commit epoch %d: %v", e.epoch, err)
	}
	e.apply(set, v, del)
}

func keys(from, to int64) []int64 {
	var out []int64
	for k := from; k <= to; k++ {
		out = append(out, k)
	}
	return out
}

// churn commits n epochs of updates and deletes over keys 1..100.
func (e *kvEnv) churn(n int) {
	for i := 0; i < n; i++ {
		lo := int64(1 + (i*13)%90)
		e.commit(nil, keys(lo, lo+9), fmt.Sprintf("e%d", e.epoch+1), []int64{(lo+40)%100 + 1})
	}
}

// rowsOf reads tbl (its current snapshot, or snapshot id) as a map, failing
// on a duplicate key.
func rowsOf(t *testing.T, tbl *table.Table, id int64) map[int64]string {
	t.Helper()
	var rows []cdcsync.Row
	var err error
	if id == 0 {
		rows, err = ReadRows(context.Background(), tbl, kvSchema(), 0)
	} else {
		rows, err = ReadRowsAt(context.Background(), tbl, kvSchema(), id)
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]string{}
	for _, r := range rows {
		k := r[0].(int64)
		if old, dup := out[k]; dup {
			t.Errorf("key %d appears twice: %q and %q", k, old, r[1])
		}
		out[k], _ = r[1].(string)
	}
	return out
}

func (e *kvEnv) assertModel(tbl *table.Table) {
	e.t.Helper()
	got := rowsOf(e.t, tbl, 0)
	if fmt.Sprint(got) != fmt.Sprint(e.model) {
		e.t.Fatalf("table rows differ from the model:\n got %v\nwant %v", got, e.model)
	}
}

func testOpts() CompactOptions {
	return CompactOptions{DeleteFiles: 3, DeleteRatio: 0.5, SmallFiles: 1000, SmallFileSize: 32 << 20,
		TargetFileSize: 128 << 20, MaxBytes: 256 << 20, MaxManifests: 4}
}

func manifestCount(t *testing.T, tbl *table.Table) int {
	t.Helper()
	_, mans := snapshotManifests(t, tbl, tbl.CurrentSnapshot())
	return len(mans)
}

func TestCompactAppliesAndDropsDeletes(t *testing.T) {
	ctx := context.Background()
	e := newKVMode(t, "p", DeletesEquality)
	e.commit(nil, keys(1, 100), "copy", nil)
	e.churn(8)
	before := e.tbl.Stats()
	readSeq := e.tbl.Iceberg().CurrentSnapshot().SequenceNumber
	if before.DeleteFiles != 9 || !e.tbl.CompactionDue(testOpts()) {
		t.Fatalf("before: %+v", before)
	}
	manBefore := manifestCount(t, e.tbl.Iceberg())
	res, err := e.tbl.Compact(ctx, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	after := e.tbl.Stats()
	t.Logf("compaction: %+v; stats %+v -> %+v; manifests %d -> %d", res, before, after, manBefore, manifestCount(t, e.tbl.Iceberg()))
	if !res.Committed() || res.RewrittenFiles != 9 || after.DeleteFiles != 0 || after.DataFiles != 1 || res.RemovedDeletes != 9 {
		t.Fatalf("compaction did not rewrite everything: %+v, after %+v", res, after)
	}
	if after.Records != int64(len(e.model)) {
		t.Fatalf("%d data rows after compaction, the table has %d rows", after.Records, len(e.model))
	}
	e.assertModel(e.tbl.Iceberg())

	// The rewrite snapshot is a maintenance snapshot: no epoch keys, and the
	// rewritten file keeps the sequence number of the snapshot it read.
	cur := e.tbl.Iceberg().CurrentSnapshot()
	if cur.Summary.Operation != table.OpReplace || cur.Summary.Properties[SummaryMaintenance] != "compaction" ||
		cur.Summary.Properties[SummaryPipeline] != "" || cur.Summary.Properties[SummaryEpoch] != "" {
		t.Fatalf("rewrite snapshot summary: %v %v", cur.Summary.Operation, cur.Summary.Properties)
	}
	tasks, err := e.tbl.Iceberg().Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || *tasks[0].DataSequenceNumber != readSeq || len(tasks[0].EqualityDeleteFiles) != 0 {
		t.Fatalf("after compaction: %d tasks, data sequence number %d (read at %d)", len(tasks), *tasks[0].DataSequenceNumber, readSeq)
	}
	c, err := e.tbl.Committed()
	if err != nil || !c.Found || c.Epoch != e.epoch {
		t.Fatalf("Committed after compaction = %+v, %v; want epoch %d", c, err, e.epoch)
	}
	// The cached table is the compacted one: the next epoch commits on top
	// (its AssertRefSnapshotID holds) and its deletes apply to the rewritten rows.
	e.commit(nil, []int64{5, 6}, "after", []int64{7, 8})
	e.assertModel(e.tbl.Iceberg())

	// Nothing to rewrite below the thresholds.
	res, err = e.tbl.Compact(ctx, testOpts())
	if err != nil || res.Snapshot != 0 {
		t.Fatalf("second compaction: %+v, %v", res, err)
	}
}

func TestCompactBudget(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.commit(nil, keys(1, 100), "copy", nil)
	e.churn(6)
	o := testOpts()
	o.Force = true
	o.MaxBytes = 1 // below any file: one file per run
	for run := 1; e.tbl.Stats().DeleteFiles > 0; run++ {
		if run > 10 {
			t.Fatalf("delete files left after 10 runs: %+v", e.tbl.Stats())
		}
		res, err := e.tbl.Compact(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if res.RewrittenFiles > 1 {
			t.Fatalf("run %d rewrote %d files with a budget of one", run, res.RewrittenFiles)
		}
		t.Logf("run %d: %d files rewritten, %d deferred, %d delete files dropped, %d left", run, res.RewrittenFiles, res.Deferred, res.RemovedDeletes, e.tbl.Stats().DeleteFiles)
		e.assertModel(e.tbl.Iceberg())
	}
}

// TestRewriteSequenceNumbers is the sequence-number finding: a row updated
// after a rewrite read the table but before it committed must end with the
// update, not with the rewritten (older) image.
func TestRewriteSequenceNumbers(t *testing.T) {
	ctx := context.Background()

	t.Run("daemon drops a rewrite that raced with a commit", func(t *testing.T) {
		e := newKVMode(t, "p", DeletesEquality)
		e.commit(nil, keys(1, 20), "copy", nil)
		e.churn(4)
		other := e.second("p")
		o := testOpts()
		o.Fault = func(point string) {
			if point == "during-compaction" {
				e.commit(other, []int64{3}, "updated", nil) // lands between read and commit
			}
		}
		base := e.tbl.Iceberg()
		_, err := e.tbl.Compact(ctx, o)
		if !errors.Is(err, ErrCompactionConflict) {
			t.Fatalf("compaction over a concurrent commit: %v, want ErrCompactionConflict", err)
		}
		if e.tbl.Iceberg() != base {
			t.Fatalf("a dropped compaction changed the cached table")
		}
		fresh, err := e.tbl.reload(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e.assertModel(fresh)
	})

	t.Run("cdcsync compact re-stages it with the pinned sequence number", func(t *testing.T) {
		e := newKVMode(t, "p", DeletesEquality)
		e.commit(nil, keys(1, 20), "copy", nil)
		e.churn(4)
		daemon := e.second("p")
		readSeq := e.tbl.Iceberg().CurrentSnapshot().SequenceNumber
		o := testOpts()
		o.Replay, o.Force = true, true
		o.Fault = func(point string) {
			if point == "during-compaction" {
				e.commit(daemon, []int64{3}, "updated", []int64{4})
			}
		}
		res, err := e.tbl.Compact(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("compaction: %+v", res)
		if res.Replays != 1 || !res.Committed() {
			t.Fatalf("compaction: %+v", res)
		}
		e.assertModel(e.tbl.Iceberg())
		// The epoch's delete (sequence number above the read) is kept: it
		// applies to the rewritten image of key 3.
		if st := e.tbl.Stats(); st.DeleteFiles != 1 {
			t.Fatalf("delete files after the replayed compaction: %+v", st)
		}
		tasks, _ := e.tbl.Iceberg().Scan().PlanFiles(ctx)
		for _, tk := range tasks {
			t.Logf("file seq %d, %d eq deletes (read at %d)", *tk.DataSequenceNumber, len(tk.EqualityDeleteFiles), readSeq)
		}
		// The daemon's handle commits on top of the rewrite (operation
		// replace): the first attempt reloads, the retry succeeds.
		d, r := e.change([]int64{3}, "again", nil)
		e.epoch++
		err = daemon.Commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch)}, d, r, nil)
		if err == nil || errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "rewrote files") {
			t.Fatalf("commit over a rewrite: %v, want a retryable error", err)
		}
		if err := daemon.Commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch)}, d, r, nil); err != nil {
			t.Fatalf("retry over a rewrite: %v", err)
		}
		e.apply([]int64{3}, "again", nil)
		e.assertModel(daemon.Iceberg())
		// A second compaction drops the last delete.
		if _, err := daemon.Compact(ctx, CompactOptions{DeleteFiles: 1, DeleteRatio: 1, SmallFiles: 2, SmallFileSize: 32 << 20, TargetFileSize: 128 << 20}); err != nil {
			t.Fatal(err)
		}
		if st := daemon.Stats(); st.DeleteFiles != 0 || st.DataFiles != 1 {
			t.Fatalf("after the second compaction: %+v", st)
		}
		e.assertModel(daemon.Iceberg())
	})

	// What iceberg-go does by default: the same replay without
	// RewriteFiles.DataSequenceNumber gives the rewritten file the rewrite
	// snapshot's own sequence number, above the concurrent delete, which no
	// longer applies to it: the old image of the updated key comes back.
	t.Run("iceberg-go's default sequence number would resurrect the row", func(t *testing.T) {
		for _, pin := range []bool{false, true} {
			e := newKVMode(t, "p", DeletesEquality)
			e.commit(nil, keys(1, 20), "copy", nil)
			e.churn(2)
			base := e.tbl.Iceberg()
			readSeq := base.CurrentSnapshot().SequenceNumber
			tasks, err := base.Scan().PlanFiles(ctx)
			if err != nil {
				t.Fatal(err)
			}
			gr, err := table.ExecuteCompactionGroup(ctx, base, table.CompactionTaskGroup{Tasks: tasks})
			if err != nil {
				t.Fatal(err)
			}
			e.commit(nil, []int64{3}, "updated", nil)
			tx := e.tbl.Iceberg().NewTransaction()
			rw := tx.NewRewrite(nil)
			for _, f := range gr.OldDataFiles {
				rw.DeleteFile(f)
			}
			for _, f := range gr.NewDataFiles {
				rw.AddDataFile(f)
			}
			if pin {
				rw.DataSequenceNumber(readSeq)
			}
			if err := rw.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			next, err := tx.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			rows, err := ReadRows(ctx, next, kvSchema(), 0)
			if err != nil {
				t.Fatal(err)
			}
			var vals []string
			for _, r := range rows {
				if r[0].(int64) == 3 {
					n++
					vals = append(vals, r[1].(string))
				}
			}
			t.Logf("pinned=%v: key 3 reads %v", pin, vals)
			if pin && (n != 1 || vals[0] != "updated") {
				t.Fatalf("with the sequence number pinned to the read snapshot, key 3 reads %v", vals)
			}
			if !pin && n != 2 {
				t.Fatalf("iceberg-go's default no longer resurrects the row (key 3 reads %v): revisit the note in compact.go", vals)
			}
		}
	})
}

func TestCommitAfterForeignWriters(t *testing.T) {
	ctx := context.Background()
	t.Run("rewrite: reload and retry", func(t *testing.T) {
		e := newKV(t, "p")
		e.commit(nil, keys(1, 30), "copy", nil)
		e.churn(4)
		spark := e.second("p") // any writer of a "replace" snapshot
		if _, err := spark.Compact(ctx, testOpts()); err != nil {
			t.Fatal(err)
		}
		d, r := e.change([]int64{1, 2}, "x", nil)
		e.epoch++
		err := e.tbl.Commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch)}, d, r, nil)
		if err == nil || errors.Is(err, ErrConflict) {
			t.Fatalf("first attempt: %v", err)
		}
		t.Logf("first attempt: %v", err)
		if err := e.tbl.Commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch)}, d, r, nil); err != nil {
			t.Fatal(err)
		}
		e.apply([]int64{1, 2}, "x", nil)
		e.assertModel(e.tbl.Iceberg())
		if c, _ := e.tbl.Committed(); c.Epoch != e.epoch {
			t.Fatalf("committed epoch %d, want %d", c.Epoch, e.epoch)
		}
	})
	t.Run("another pipeline: refused", func(t *testing.T) {
		e := newKV(t, "p")
		e.commit(nil, keys(1, 30), "copy", nil)
		_, err := openLake(t, kvConfig(t, e.dir, "q")).EnsureTable(ctx, kvSchema())
		if !cdcsync.IsPermanent(err) || !strings.Contains(err.Error(), `is written by pipeline "p", and two pipelines must not write one table`) {
			t.Fatalf("pipeline q opening pipeline p's table: %v, want a permanent refusal naming p", err)
		}
	})
	t.Run("another daemon of the pipeline: conflict", func(t *testing.T) {
		e := newKV(t, "p")
		e.commit(nil, keys(1, 30), "copy", nil)
		other := e.second("p")
		if err := other.Commit(ctx, Epoch{Number: 2, Pos: pos(2)}, nil, []cdcsync.Row{{int64(99), "q"}}, nil); err != nil {
			t.Fatal(err)
		}
		d, r := e.change([]int64{1}, "x", nil)
		err := e.tbl.Commit(ctx, Epoch{Number: 2, Pos: pos(3)}, d, r, nil)
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("commit after another daemon's commit: %v, want ErrConflict", err)
		}
	})
}

// files lists the files under the table's location.
func tableFiles(t *testing.T, tbl *table.Table) map[string]bool {
	t.Helper()
	root := strings.TrimPrefix(tbl.Location(), "file://")
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out[p] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func age(t *testing.T, files map[string]bool, by time.Duration) {
	t.Helper()
	old := time.Now().Add(-by)
	for f := range files {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
}

func TestExpireAndOrphans(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.commit(nil, keys(1, 50), "copy", nil)
	e.churn(6)
	if _, err := e.tbl.Compact(ctx, testOpts()); err != nil {
		t.Fatal(err)
	}
	snaps := len(e.tbl.Iceberg().Metadata().Snapshots())
	time.Sleep(20 * time.Millisecond)
	if !e.tbl.ExpiryDue(10*time.Millisecond, 1) || e.tbl.ExpiryDue(time.Hour, 1) || e.tbl.ExpiryDue(10*time.Millisecond, 100) {
		t.Fatal("ExpiryDue disagrees with the snapshots' ages")
	}
	filesBefore := tableFiles(t, e.tbl.Iceberg())

	// A crash after the expiry commit and before its files are deleted.
	var faulted bool
	func() {
		defer func() {
			if r := recover(); r != nil {
				faulted = true
			}
		}()
		_, _ = e.tbl.ExpireSnapshots(ctx, 10*time.Millisecond, 1, func(p string) {
			if p == "during-expiry" {
				panic("killed")
			}
		})
	}()
	if !faulted {
		t.Fatal("the during-expiry fault point was not reached")
	}
	meta := e.tbl.Iceberg().Metadata()
	// min_keep 1, but the last epoch commit and the maintenance snapshots
	// above it (the rewrite, and a manifest merge in position mode, whose
	// delete manifests are more) are kept.
	if n, want := len(meta.Snapshots()), e.tbl.retainCount(1); n != want || want < 2 {
		t.Fatalf("%d snapshots after expiry (from %d), want %d: the last epoch commit and the compaction above it", n, snaps, want)
	}
	if c, err := e.tbl.Committed(); err != nil || c.Epoch != e.epoch {
		t.Fatalf("Committed after expiry = %+v, %v; want epoch %d", c, err, e.epoch)
	}
	e.assertModel(e.tbl.Iceberg())
	// An uncommitted file from a crashed commit, written just now.
	fresh := filepath.Join(strings.TrimPrefix(e.tbl.Iceberg().Location(), "file://"), "data", "crashed-now.parquet")
	if err := os.WriteFile(fresh, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Everything written so far is made two hours old; referenced files
	// must survive all the same.
	age(t, filesBefore, 2*time.Hour)
	ckpt := filepath.Join(strings.TrimPrefix(e.lk.PipelineDir(), "file://"), "checkpoint-0.json")
	if err := e.lk.SaveCheckpoint(ctx, cdcsync.Checkpoint{Epoch: 2, Pos: pos(2)}); err != nil {
		t.Fatal(err)
	}
	age(t, map[string]bool{ckpt: true}, 2*time.Hour)

	res, err := e.tbl.RemoveOrphans(ctx, time.Hour, e.lk.PipelineDir())
	if err != nil {
		t.Fatal(err)
	}
	after := tableFiles(t, e.tbl.Iceberg())
	t.Logf("orphans: %+v; files %d -> %d", res, len(filesBefore), len(after))
	if res.Deleted == 0 {
		t.Fatal("orphan cleanup removed nothing after an interrupted expiry")
	}
	if !after[fresh] {
		t.Fatal("orphan cleanup removed a file younger than the safety age")
	}
	if _, err := os.Stat(ckpt); err != nil {
		t.Fatalf("the pipeline checkpoint is gone: %v", err)
	}
	e.assertModel(e.tbl.Iceberg())
	// Every file the retained snapshots need is still there: reading each works.
	for _, s := range e.tbl.Iceberg().Metadata().Snapshots() {
		if _, err := ReadRowsAt(ctx, e.tbl.Iceberg(), kvSchema(), s.SnapshotID); err != nil {
			t.Fatalf("snapshot %d no longer reads: %v", s.SnapshotID, err)
		}
	}
	// And a second run finds nothing more to remove.
	if res, err := e.tbl.RemoveOrphans(ctx, time.Hour, e.lk.PipelineDir()); err != nil || res.Deleted != 0 {
		t.Fatalf("second orphan cleanup: %+v, %v", res, err)
	}
	e.commit(nil, []int64{1}, "later", nil)
	e.assertModel(e.tbl.Iceberg())
}

func TestMaintainerSchedule(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	mc := e.cfg.Maintenance
	mc.EveryEpochs = 3
	mc.Compaction.DeleteFiles = 3
	mc.Snapshots.MaxAge = config.Duration{Duration: time.Millisecond}
	mc.Snapshots.MinKeep = 2
	mc.Orphans.MinAge = config.Duration{Duration: time.Hour}
	m := e.lk.NewMaintainer(mc, nil)
	m.firstOrphans = 0 // due at once
	e.commit(nil, keys(1, 30), "copy", nil)
	var tasks []string
	for i := 0; i < 12; i++ {
		e.churn(1)
		reps, err := m.AfterCommit(ctx, e.tbl)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range reps {
			names = append(names, r.Task)
		}
		tasks = append(tasks, strings.Join(names, "+"))
		e.assertModel(e.tbl.Iceberg())
		if st := e.tbl.Stats(); st.DeleteFiles > 3+2 {
			t.Fatalf("epoch %d: %d delete files", e.epoch, st.DeleteFiles)
		}
	}
	t.Logf("tasks: %q", tasks)
	count := map[string]int{}
	for _, k := range tasks {
		count[k]++
	}
	if count["compaction"] < 2 || count["expiry"] < 2 || count["orphans"] != 1 {
		t.Fatalf("unexpected schedule %q", tasks)
	}
	if c, _ := e.tbl.Committed(); c.Epoch != e.epoch {
		t.Fatalf("Committed = %d, want %d", c.Epoch, e.epoch)
	}
	mc.Enabled = false
	if reps, _ := e.lk.NewMaintainer(mc, nil).AfterCommit(ctx, e.tbl); len(reps) != 0 {
		t.Fatalf("disabled maintenance ran %v", reps)
	}

	// Compaction due at every epoch does not starve orphan cleanup: it runs
	// after the compaction once it has waited long enough.
	mc.Enabled, mc.EveryEpochs, mc.Compaction.DeleteFiles = true, 1, 1
	mc.Snapshots.MaxAge = config.Duration{Duration: time.Hour}
	m = e.lk.NewMaintainer(mc, nil)
	m.firstOrphans = 0
	tasks = nil
	for i := 0; i < 8; i++ {
		e.churn(1)
		reps, err := m.AfterCommit(ctx, e.tbl)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range reps {
			names = append(names, r.Task)
		}
		tasks = append(tasks, strings.Join(names, "+"))
		if st := e.tbl.Stats(); st.DeleteFiles != 0 {
			t.Fatalf("%d delete files after a compaction at every epoch", st.DeleteFiles)
		}
	}
	if fmt.Sprint(tasks) != "[compaction compaction compaction compaction compaction compaction+orphans compaction compaction]" {
		t.Fatalf("schedule with compaction always due: %q", tasks)
	}

	// A session's first orphan cleanup waits ten minutes, or
	// orphans.interval when that is shorter, then runs at the next epoch.
	mc.EveryEpochs = 100 // no compaction
	for _, c := range []struct {
		interval time.Duration
		first    time.Duration
	}{{time.Hour, firstOrphansDelay}, {300 * time.Millisecond, 300 * time.Millisecond}} {
		mc.Orphans.Interval = config.Duration{Duration: c.interval}
		m = e.lk.NewMaintainer(mc, nil)
		if m.firstOrphans != c.first {
			t.Errorf("interval %v: the first orphan cleanup waits %v, want %v", c.interval, m.firstOrphans, c.first)
		}
		// Times from the start of the first call, whose first look at the
		// table starts the delay.
		var starts, ends []time.Duration
		var began time.Time
		ran := -1 // the call that ran it
		for i := 0; i < 40 && ran < 0; i++ {
			e.churn(1)
			if i == 0 {
				began = time.Now()
			}
			starts = append(starts, time.Since(began))
			reps, err := m.AfterCommit(ctx, e.tbl)
			if err != nil {
				t.Fatal(err)
			}
			ends = append(ends, time.Since(began))
			for _, r := range reps {
				if r.Task == "orphans" {
					ran = i
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		if c.first > time.Minute {
			if ran >= 0 {
				t.Errorf("interval %v: orphan cleanup ran %v into the session", c.interval, starts[ran])
			}
			continue
		}
		if ran < 0 {
			t.Fatalf("interval %v: no orphan cleanup in %v", c.interval, ends[len(ends)-1])
		}
		// Not before the delay, and at the first call after it: every
		// call before began before the delay was up (at the latest, the
		// end of the first call plus the delay).
		if ends[ran] < c.first {
			t.Errorf("interval %v: the first orphan cleanup ran by %v into the session, before %v", c.interval, ends[ran], c.first)
		}
		for j := range ran {
			if starts[j] >= ends[0]+c.first {
				t.Errorf("interval %v: the call at %v, after the delay, did not run the orphan cleanup (it ran at %v)", c.interval, starts[j], starts[ran])
			}
		}
	}
}

func TestMaintainSharesTheBudget(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	s2 := kvSchema()
	s2.ID.Table = "kv2"
	t2, err := e.lk.EnsureTable(ctx, s2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range []*Table{e.tbl, t2} {
		for i := int64(1); i <= 3; i++ {
			d, r := e.change(keys(1, 20), fmt.Sprint("v", i), nil)
			if err := tb.Commit(ctx, Epoch{Number: i, Pos: pos(i)}, d, r, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	mc := e.cfg.Maintenance
	mc.EveryEpochs, mc.Compaction.DeleteFiles = 1, 2
	mc.Compaction.MaxBytes = 1 // one file per epoch, across tables
	mc.Orphans.Interval = config.Duration{Duration: time.Hour}
	m := e.lk.NewMaintainer(mc, nil)
	var got []string
	for call := 0; call < 2; call++ {
		reps, err := m.Maintain(ctx, []*Table{e.tbl, t2})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range reps {
			if r.Task == "compaction" {
				names = append(names, r.Table.Table)
			}
		}
		got = append(got, strings.Join(names, "+"))
	}
	// Only one table compacts per call, and the turn passes to the other.
	if fmt.Sprint(got) != "[kv2 kv]" && fmt.Sprint(got) != "[kv kv2]" {
		t.Fatalf("compactions per call: %q", got)
	}
}

// TestCompactWhileEpochsCommit: in the daemon the compaction reads and
// writes files while epochs commit through the same Table; its commit is
// staged again on top of them, and their updates and deletes still apply to
// the rewritten rows.
func TestCompactWhileEpochsCommit(t *testing.T) {
	ctx := context.Background()

	t.Run("epochs between the rewrite and its commit", func(t *testing.T) {
		e := newKVMode(t, "p", DeletesEquality)
		e.commit(nil, keys(1, 50), "copy", nil)
		e.churn(5)
		readSeq := e.tbl.Iceberg().CurrentSnapshot().SequenceNumber
		o := testOpts()
		o.Force = true
		o.Fault = func(point string) {
			if point == "compaction-written" {
				e.commit(nil, []int64{3, 60}, "during", []int64{4})
				e.commit(nil, []int64{5}, "during2", []int64{3})
			}
		}
		res, err := e.tbl.Compact(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Committed() || res.Replays != 1 || res.RewrittenFiles != 6 {
			t.Fatalf("compaction: %+v; want it committed on top of the two epochs", res)
		}
		e.assertModel(e.tbl.Iceberg())
		tasks, err := e.tbl.Iceberg().Scan().PlanFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var rewritten int
		for _, tk := range tasks {
			if *tk.DataSequenceNumber == readSeq {
				rewritten++
				if len(tk.EqualityDeleteFiles) != 2 {
					t.Errorf("the rewritten file has %d equality delete files applied; want the two epochs'", len(tk.EqualityDeleteFiles))
				}
			}
		}
		if rewritten != 1 || len(tasks) != 3 {
			t.Fatalf("%d data files (%d at the read sequence number %d); want the rewritten file and the two epochs'", len(tasks), rewritten, readSeq)
		}
		c, err := e.tbl.Committed()
		if err != nil || c.Epoch != e.epoch {
			t.Fatalf("Committed = %+v, %v; want epoch %d", c, err, e.epoch)
		}
	})

	for _, mode := range []string{DeletesEquality, DeletesPosition} {
		t.Run("concurrent in "+mode+" mode", func(t *testing.T) { compactConcurrently(t, mode) })
	}
}

// compactConcurrently compacts a table of mode in a loop while 30 epochs
// commit, and checks the rows after each compaction that committed and at
// the end.
func compactConcurrently(t *testing.T, mode string) {
	ctx := context.Background()
	e := newKVMode(t, "p", mode)
	e.commit(nil, keys(1, 100), "copy", nil)
	e.churn(4)
	o := testOpts()
	o.Force = true
	stop := make(chan struct{})
	done := make(chan error, 1)
	var committed, rebased int
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			res, err := e.tbl.Compact(ctx, o)
			if err != nil {
				done <- err
				return
			}
			if res.Committed() {
				committed++
			}
			rebased += res.Rebased
		}
	}()
	e.churn(30)
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("a compaction running next to epoch commits failed: %v", err)
	}
	t.Logf("%d compactions committed while 30 epochs committed", committed)
	if committed == 0 {
		t.Fatal("no compaction committed")
	}
	if mode == DeletesPosition && rebased == 0 {
		t.Fatal("no position delete of an epoch was carried over to compacted files: the test did not test that")
	}
	e.assertModel(e.tbl.Iceberg())
	if _, err := e.tbl.Compact(ctx, o); err != nil {
		t.Fatal(err)
	}
	e.assertModel(e.tbl.Iceberg())
	e.churn(5)
	e.assertModel(e.tbl.Iceberg())
}

// TestMaintainIdleCompactsUntilDone: a table that no epoch changes any more
// (MaintainIdle) is compacted whatever every_epochs says, one bounded run
// after another, until no compaction is due.
func TestMaintainIdleCompactsUntilDone(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	mc := e.cfg.Maintenance
	mc.EveryEpochs = 1000 // epochs alone would never compact it
	mc.Compaction.DeleteFiles = 2
	mc.Compaction.MaxFiles = 2 // several runs
	m := e.lk.NewMaintainer(mc, nil)
	e.commit(nil, keys(1, 30), "copy", nil)
	for i := 0; i < 8; i++ {
		e.churn(1)
		if _, err := m.AfterCommit(ctx, e.tbl); err != nil {
			t.Fatal(err)
		}
	}
	before := e.tbl.Stats()
	opts := CompactOptionsFrom(&mc)
	if !e.tbl.CompactionDue(opts) {
		t.Fatalf("no compaction due after 8 epochs (%+v): the test needs one", before)
	}
	reps, err := m.MaintainIdle(ctx, []*Table{e.tbl})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, r := range reps {
		if r.Task == "compaction" && r.Compaction.Committed() {
			runs++
		}
	}
	after := e.tbl.Stats()
	t.Logf("%d compaction runs: %d data files, %d delete files -> %d, %d", runs, before.DataFiles, before.DeleteFiles, after.DataFiles, after.DeleteFiles)
	if runs < 2 {
		t.Errorf("%d compaction runs; with max_files 2 over %d files it takes several", runs, before.DataFiles)
	}
	if e.tbl.CompactionDue(opts) {
		t.Errorf("a compaction is still due after MaintainIdle: %+v", after)
	}
	e.assertModel(e.tbl.Iceberg())
}
