package lake

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync/config"
)

// dvFiles returns the live deletion vectors of tbl's current snapshot, and
// the Puffin files they are in, failing the test if a data file has two or
// a plan puts any position delete file that is not a vector in front of a
// data file.
func dvFiles(t *testing.T, tbl *table.Table) (dvs int, puffins map[string]bool) {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	puffins = map[string]bool{}
	for _, tk := range tasks {
		if len(tk.DeleteFiles) > 0 {
			t.Fatalf("data file %s has %d Parquet position delete files in a dv-mode table", tk.File.FilePath(), len(tk.DeleteFiles))
		}
		if len(tk.DeletionVectorFiles) > 1 {
			t.Fatalf("data file %s has %d deletion vectors, want at most one", tk.File.FilePath(), len(tk.DeletionVectorFiles))
		}
		for _, d := range tk.DeletionVectorFiles {
			if ref := d.ReferencedDataFile(); ref == nil || *ref != tk.File.FilePath() {
				t.Fatalf("the deletion vector of %s names %v", tk.File.FilePath(), ref)
			}
			dvs++
			puffins[d.FilePath()] = true
		}
	}
	// No live vector names a data file the table no longer has.
	live := map[string]bool{}
	for _, tk := range tasks {
		live[tk.File.FilePath()] = true
	}
	fsys, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s := tbl.CurrentSnapshot(); s != nil {
		mfs, err := s.Manifests(fsys)
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.ManifestContent() != iceberg.ManifestContentDeletes {
				continue
			}
			for e, err := range mf.Entries(fsys, true) {
				if err != nil {
					t.Fatal(err)
				}
				if ref := e.DataFile().ReferencedDataFile(); ref != nil && !live[*ref] {
					t.Fatalf("a live deletion vector in %s names %s, which the table no longer has", e.DataFile().FilePath(), *ref)
				}
			}
		}
	}
	return dvs, puffins
}

// TestDVModeEpochs: a table in dv mode is format v3 and takes upserts and
// deletes as deletion vectors: an epoch of new keys writes none, every
// later epoch writes its deletes as one Puffin file, a data file that
// loses rows again gets one vector holding its old and new deletes (the
// old one removed), and the rows equal the model after every epoch,
// after a compaction and after the key index is rebuilt.
func TestDVModeEpochs(t *testing.T) {
	ctx := context.Background()
	e := newKVMode(t, "p", DeletesDV)
	if e.tbl.mode != DeletesDV || e.tbl.current().Metadata().Version() != 3 {
		t.Fatalf("a new dv-mode table is in %s mode, format v%d; want dv, v3", e.tbl.mode, e.tbl.current().Metadata().Version())
	}
	e.commit(nil, keys(1, 200), "v0", nil)
	if n, _ := dvFiles(t, e.tbl.current()); n != 0 {
		t.Fatalf("an epoch of new keys wrote %d deletion vectors, want none", n)
	}
	// Two epochs that delete rows of the same data file: one vector, with
	// both epochs' rows.
	e.commit(nil, []int64{3, 5}, "v1", []int64{7})
	e.commit(nil, []int64{11}, "v2", []int64{13, 3})
	e.assertModel(e.tbl.current())
	// The v0 file lost 3, 5, 7, 11 and 13, the v1 file 3: both vectors
	// are v2's, in its one Puffin file, the v0 file's holding v1's rows.
	if n, p := dvFiles(t, e.tbl.current()); n != 2 || len(p) != 1 {
		t.Fatalf("%d deletion vectors in %d Puffin files, want 2 in 1", n, len(p))
	}
	if s := e.tbl.current().CurrentSnapshot().Summary.Properties["total-position-deletes"]; s != "6" {
		t.Fatalf("the snapshot counts %s position deletes, want 6 (5 rows of the first file, 1 of the second)", s)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 25; i++ {
		before := e.tbl.current().CurrentSnapshot().SnapshotID
		e.randomEpoch(r, nil, 250)
		e.assertModel(e.tbl.current())
		added := addedDeleteFiles(t, e.tbl.current(), before)
		if len(added) > 1 {
			t.Fatalf("epoch %d added %d delete files (%v), want them all in one Puffin file", i, len(added), added)
		}
	}
	dvFiles(t, e.tbl.current())

	// Compaction rewrites the files whose deleted share is high; the
	// next epochs find the moved rows, and no vector names a file gone.
	if _, err := e.tbl.Compact(ctx, testOpts()); err != nil {
		t.Fatal(err)
	}
	e.assertModel(e.tbl.current())
	for i := 0; i < 10; i++ {
		e.randomEpoch(r, nil, 250)
		e.assertModel(e.tbl.current())
	}
	dvFiles(t, e.tbl.current())

	// An empty index (a moved daemon) is rebuilt from the data files and
	// their vectors: the next epochs still leave the model.
	b := e.reopen()
	for i := 0; i < 5; i++ {
		e.randomEpoch(r, b, 250)
		e.assertModel(b.current())
	}
	dvFiles(t, b.current())
}

// addedDeleteFiles returns the paths of the delete files (a Puffin file
// counts once) that the snapshots after from added.
func addedDeleteFiles(t testing.TB, tbl *table.Table, from int64) map[string]bool {
	t.Helper()
	fsys, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	meta := tbl.Metadata()
	for s := meta.CurrentSnapshot(); s != nil && s.SnapshotID != from; {
		mfs, err := s.Manifests(fsys)
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.ManifestContent() != iceberg.ManifestContentDeletes || mf.SnapshotID() != s.SnapshotID {
				continue
			}
			for e, err := range mf.Entries(fsys, true) {
				if err != nil {
					t.Fatal(err)
				}
				if e.Status() == iceberg.EntryStatusADDED && e.SnapshotID() == s.SnapshotID {
					out[e.DataFile().FilePath()] = true
				}
			}
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return out
}

// TestDVModePartitioned: on a finely partitioned table, an epoch whose
// updates touch rows in many partitions writes its deletes as one Puffin
// file (position mode writes one delete file per partition).
func TestDVModePartitioned(t *testing.T) {
	for _, mode := range []string{DeletesPosition, DeletesDV} {
		t.Run(mode, func(t *testing.T) {
			e := newKVMode(t, "p", mode, config.TableRule{Match: "shop.kv", Partition: []string{"bucket(64, id)"}})
			tb := e.tbl
			e.commit(nil, keys(1, 1000), "v0", nil)
			before := tb.current().CurrentSnapshot().SnapshotID
			e.commit(nil, keys(1, 1000), "v1", nil)
			e.assertModel(tb.current())
			added := addedDeleteFiles(t, tb.current(), before)
			want := 64
			if mode == DeletesDV {
				want = 1
			}
			if len(added) != want {
				t.Fatalf("an update of 1,000 rows over 64 partitions added %d delete files in %s mode, want %d", len(added), mode, want)
			}
		})
	}
}

// TestSwitchToDV: a position-mode table switches to dv (and format v3)
// when its rule asks, once it has no position delete files; until then it
// stays in position mode.
func TestSwitchToDV(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.commit(nil, keys(1, 100), "v0", nil)
	e.commit(nil, keys(1, 10), "v1", nil) // position deletes

	e.cfg.Tables = append(e.cfg.Tables, config.TableRule{Match: "shop.kv", Deletes: DeletesDV})
	tb := e.reopen()
	if tb.mode != DeletesPosition || tb.current().Metadata().Version() != 2 {
		t.Fatalf("a table with position deletes switched to %s (v%d); it must stay in position mode until they are compacted away", tb.mode, tb.current().Metadata().Version())
	}
	o := testOpts()
	o.Force = true
	if _, err := tb.Compact(ctx, o); err != nil {
		t.Fatal(err)
	}
	if n := positionDeleteCount(tb.current().CurrentSnapshot()); n != 0 {
		t.Fatalf("%d position deletes left after a forced compaction", n)
	}
	tb2 := e.reopen()
	if tb2.mode != DeletesDV || tb2.current().Metadata().Version() != 3 {
		t.Fatalf("after compaction the table is in %s mode, v%d; want dv, v3", tb2.mode, tb2.current().Metadata().Version())
	}
	r := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 10; i++ {
		e.randomEpoch(r, tb2, 120)
		e.assertModel(tb2.current())
	}
	dvFiles(t, tb2.current())

	// And it never goes back: v3 takes no position delete files.
	e.cfg.Tables[len(e.cfg.Tables)-1] = config.TableRule{Match: "shop.kv", Deletes: DeletesPosition}
	tb3 := e.reopen()
	if tb3.mode != DeletesDV {
		t.Fatalf("a dv table went to %s mode", tb3.mode)
	}
}

// TestSwitchEqualityToDV: an equality-mode table switches to dv at once (its
// equality deletes stay valid in v3); its rows stay right through epochs
// of deletion vectors and a compaction that clears the equality deletes.
func TestSwitchEqualityToDV(t *testing.T) {
	ctx := context.Background()
	e, tb := switchedToDV(t)
	if tb.mode != DeletesDV || tb.current().Metadata().Version() != 3 {
		t.Fatalf("an equality table with the rule dv is in %s mode, v%d; want dv, v3", tb.mode, tb.current().Metadata().Version())
	}
	r := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 8; i++ {
		e.randomEpoch(r, tb, 120)
		e.assertModel(tb.current())
	}
	o := testOpts()
	o.Force = true
	if _, err := tb.Compact(ctx, o); err != nil {
		t.Fatal(err)
	}
	e.assertModel(tb.current())
	if _, eq := deleteFiles(t, tb.current()); eq != 0 {
		t.Errorf("%d equality delete files left after a forced compaction", eq)
	}
	for i := 0; i < 5; i++ {
		e.randomEpoch(r, tb, 120)
		e.assertModel(tb.current())
	}
	dvFiles(t, tb.current())
}

// TestCompactMaxFiles: maintenance.compaction.max_files bounds the data
// files one run rewrites (a run of a position- or dv-mode table holds the
// commit lock), in every mode; the runs that follow finish the work, and
// the rows stay right.
func TestCompactMaxFiles(t *testing.T) {
	for _, mode := range []string{DeletesPosition, DeletesDV, DeletesEquality} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			e := newKVMode(t, "p", mode, config.TableRule{Match: "shop.kv", Partition: []string{"bucket(16, id)"}})
			tb := e.tbl
			e.commit(nil, keys(1, 400), "v0", nil)
			e.commit(nil, keys(1, 400), "v1", nil) // every partition: a second file and deletes
			o := testOpts()
			o.MaxFiles = 5
			for run := 1; tb.Stats().DeleteFiles > 0; run++ {
				if run > 12 {
					t.Fatalf("delete files left after 12 runs: %+v", tb.Stats())
				}
				res, err := tb.Compact(ctx, o)
				if err != nil {
					t.Fatal(err)
				}
				if res.RewrittenFiles > o.MaxFiles {
					t.Fatalf("run %d rewrote %d files, max_files %d", run, res.RewrittenFiles, o.MaxFiles)
				}
				if run == 1 && res.Deferred == 0 {
					t.Errorf("the first run deferred nothing: %+v", res)
				}
				e.assertModel(tb.current())
			}
		})
	}
}

// TestDVCompactionPlansBeforeTheLock: a compaction of a dv table holds the
// commit lock from its plan to its commit (epochs' deletion vectors on the
// files it rewrites are not rebased), but plans first without it, so that
// epochs do not wait for the planning (1.1 s on a finely partitioned table
// of 29,000 files, issue 23). An epoch that lands between the plan and the
// lock makes it plan again under the lock: its deletes survive the rewrite.
func TestDVCompactionPlansBeforeTheLock(t *testing.T) {
	ctx := context.Background()
	e := newKVMode(t, "p", "dv")
	e.commit(nil, keys(1, 100), "copy", nil)
	e.churn(5)
	o := testOpts()
	o.Force = true
	landed := false
	o.Fault = func(point string) {
		if point != "compaction-planned" || landed {
			return
		}
		landed = true
		e.epoch++
		n := e.epoch
		set, del := []int64{3, 60, 7, 200}, []int64{4, 50}
		d, r := e.change(set, "planned", del)
		waited, err := commitWithin(ctx, e.tbl, n, d, r, 20*time.Second)
		if waited {
			t.Fatalf("epoch %d waited 20 s for a compaction that was only planning", n)
		}
		if err != nil {
			t.Errorf("epoch %d after the compaction's plan: %v", n, err)
		}
		e.apply(set, "planned", del)
	}
	res, err := e.tbl.Compact(ctx, o)
	if err != nil || !res.Committed() || res.RewrittenFiles == 0 || !landed {
		t.Fatalf("compaction: %+v, %v (epoch landed: %v); want it committed after the epoch", res, err, landed)
	}
	e.assertModel(e.tbl.current())
}

// switchedToDV returns a table with equality deletes, reopened with the
// rule deletes: dv.
func switchedToDV(t *testing.T) (*kvEnv, *Table) {
	t.Helper()
	e := newKVMode(t, "p", DeletesEquality)
	e.commit(nil, keys(1, 100), "v0", nil)
	e.commit(nil, keys(1, 20), "v1", []int64{30, 31})
	e.cfg.Tables = append(e.cfg.Tables, config.TableRule{Match: "shop.kv", Deletes: DeletesDV})
	return e, e.reopen()
}
