package lake

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// parquetFiles counts the Parquet files under the warehouse.
func parquetFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(filepath.Join(dir, "warehouse"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			n++
		}
		return nil
	})
	return n
}

// An epoch written out in parts before its commit (a transaction larger
// than epoch.max_bytes) is invisible until the commit, then whole in one
// snapshot: keys that come again after their spill keep only their last
// image, keys deleted after their spill are gone, and the committed rows
// they replace are deleted; later epochs find the spilled rows where they
// are.
func TestSpilledEpochCommitsWhole(t *testing.T) {
	for _, mode := range []string{DeletesPosition, DeletesDV, DeletesEquality} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			e := newKVMode(t, "p", mode)
			e.commit(nil, keys(1, 100), "a", nil)
			before := e.tbl.current()
			snaps := len(before.Metadata().Snapshots())

			const id = 77
			spill := func(set []int64, v string, del []int64) {
				t.Helper()
				d, r := e.change(set, v, del)
				if err := e.tbl.Spill(ctx, id, d, r); err != nil {
					t.Fatal(err)
				}
				e.apply(set, v, del)
			}
			spill(keys(50, 150), "b", keys(1, 10))
			spill(keys(100, 120), "c", keys(140, 145))
			spill(nil, "", []int64{55, 130})
			if got := rowsOf(t, e.tbl.current(), 0); len(got) != 100 || got[50] != "a" {
				t.Fatalf("the table changed before the commit: %d rows, key 50 = %q", len(got), got[50])
			}
			e.epoch++
			d, r := e.change(keys(1, 5), "d", []int64{60})
			if err := e.tbl.Commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch), Spill: id}, d, r, nil); err != nil {
				t.Fatal(err)
			}
			e.apply(keys(1, 5), "d", []int64{60})
			// Its time goes to the phases that ran (all of it went to the
			// manifests, which a spilled epoch of the fine bench put at 23 s).
			c := e.tbl.LastCommitTimes()
			var sum time.Duration
			for _, d := range c.phases() {
				sum += d
			}
			if c.Epoch != e.epoch || sum > c.Total || c.Data <= 0 || c.Deletes <= 0 || c.Manifests <= 0 || (mode != DeletesEquality && c.Index <= 0) {
				t.Errorf("the spilled epoch's times: %+v", c)
			}
			after := e.tbl.current()
			if n := len(after.Metadata().Snapshots()); n != snaps+1 {
				t.Errorf("%d snapshots after the spilled epoch, want %d (one commit)", n, snaps+1)
			}
			e.assertModel(after)
			if mode == DeletesDV {
				dvFiles(t, after) // one vector a data file, none on a file of the commit
			}
			// The spilled rows are where the key index says.
			e.commit(nil, keys(100, 119), "e", []int64{120, 150})
			e.commit(nil, keys(1, 3), "f", []int64{51})
			e.assertModel(e.tbl.current())
			if len(e.tbl.state.spills) != 0 {
				t.Error("the spill is kept after its commit")
			}
		})
	}
}

// A spill that is abandoned, or left by a crash, leaves no file behind and
// nothing in the table; one whose epoch was committed keeps its files.
func TestAbandonedSpillLeavesNothing(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.commit(nil, keys(1, 20), "a", nil)
	files := parquetFiles(t, e.dir)

	d, r := e.change(keys(10, 40), "b", nil)
	if err := e.tbl.Spill(ctx, 5, d, r); err != nil {
		t.Fatal(err)
	}
	if err := e.tbl.Spill(ctx, 5, d[:5], r[:5]); err != nil {
		t.Fatal(err)
	}
	if parquetFiles(t, e.dir) <= files {
		t.Fatal("the spill wrote no file")
	}
	e.tbl.Abandon(ctx, 5)
	if n := parquetFiles(t, e.dir); n != files {
		t.Errorf("%d Parquet files after the spill was abandoned, want %d", n, files)
	}

	// A crash: the store and the files stay until the next session cleans.
	if err := e.tbl.Spill(ctx, 6, d, r); err != nil {
		t.Fatal(err)
	}
	other, err := e.lk.EnsureTable(ctx, kvSchema()) // the next session's handle
	if err != nil {
		t.Fatal(err)
	}
	e.lk.cleanSpills(ctx, map[cdcsync.TableID]*Table{other.ID: other})
	if n := parquetFiles(t, e.dir); n != files {
		t.Errorf("%d Parquet files after the next session started, want %d", n, files)
	}
	e.assertModel(other.current())
	names, err := e.lk.keys.Tables()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, spillPrefix) {
			t.Errorf("spill store %s is left", n)
		}
	}
}

// The next epoch may spill while the one before it, spilled too, waits for
// its commit: each commits its own, the later on top of the earlier.
func TestSpilledEpochsOneAfterAnother(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.commit(nil, keys(1, 50), "a", nil)
	d1, r1 := e.change(keys(1, 30), "b", nil)
	if err := e.tbl.Spill(ctx, 1, d1, r1); err != nil {
		t.Fatal(err)
	}
	d2, r2 := e.change(keys(20, 60), "c", []int64{5})
	if err := e.tbl.Spill(ctx, 2, d2, r2); err != nil {
		t.Fatal(err)
	}
	for i, spill := range []int64{1, 2} {
		e.epoch++
		if err := e.tbl.Commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch), Spill: spill}, nil, nil, nil); err != nil {
			t.Fatalf("commit of spill %d: %v", spill, err)
		}
		if i == 0 {
			e.apply(keys(1, 30), "b", nil)
		} else {
			e.apply(keys(20, 60), "c", []int64{5})
		}
		e.assertModel(e.tbl.current())
	}
}
