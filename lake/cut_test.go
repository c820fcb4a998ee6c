package lake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/metrics"
)

// TestScheduledCutTags: with cut.tag_every, the first checkpoint of each
// period tags its cut on every table, named after the period's start, with
// tag_keep as the tag's max age; a later checkpoint of the same period
// does not move it, and a daemon restarted within the period leaves it.
func TestScheduledCutTags(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	clock := time.Date(2026, 12, 5, 2, 30, 0, 0, time.UTC)
	schedule := func() *cutTags {
		return &cutTags{every: time.Hour, keep: 2 * time.Hour, prefix: "cut-", done: -1, now: func() time.Time { return clock }}
	}
	e.lk.cutTags = schedule()
	checkpoint := func() {
		t.Helper()
		c := cdcsync.Checkpoint{Epoch: e.epoch, Pos: pos(e.epoch), Time: clock,
			Tables: []cdcsync.TableEpoch{{Table: e.tbl.ID, Epoch: e.epoch}}}
		if err := e.lk.SaveCheckpoint(ctx, c); err != nil {
			t.Fatal(err)
		}
		e.lk.tagScheduledCut(ctx, e.epoch)
	}
	epochSnap := map[int64]int64{}
	step := func(v string) {
		t.Helper()
		e.commit(nil, keys(1, 10), v, nil)
		epochSnap[e.epoch] = e.tbl.current().CurrentSnapshot().SnapshotID
		checkpoint()
	}
	tagged := func(name string) (int64, int64) {
		t.Helper()
		tbl, err := e.lk.LoadTable(ctx, e.lk.Identifier("shop", "kv"))
		if err != nil {
			t.Fatal(err)
		}
		for n, r := range tbl.Metadata().Refs() {
			if n == name {
				age := int64(0)
				if r.MaxRefAgeMs != nil {
					age = *r.MaxRefAgeMs
				}
				return r.SnapshotID, age
			}
		}
		return 0, 0
	}

	step("a") // epoch 1 at 02:30
	if id, age := tagged("cut-20261205T020000Z"); id != epochSnap[1] || age != (2*time.Hour).Milliseconds() {
		t.Fatalf("tag of the 02:00 period on snapshot %d with max age %d ms; want epoch 1's snapshot %d, %d ms", id, age, epochSnap[1], (2 * time.Hour).Milliseconds())
	}
	clock = clock.Add(20 * time.Minute)
	step("b") // epoch 2 at 02:50: same period, the tag stays
	if id, _ := tagged("cut-20261205T020000Z"); id != epochSnap[1] {
		t.Fatalf("a later checkpoint of the period moved its tag to snapshot %d", id)
	}
	clock = clock.Add(15 * time.Minute)
	step("c") // epoch 3 at 03:05: a new period
	if id, _ := tagged("cut-20261205T030000Z"); id != epochSnap[3] {
		t.Fatalf("tag of the 03:00 period on snapshot %d, want epoch 3's %d", id, epochSnap[3])
	}
	// A restarted daemon in the same period finds the tag there.
	e.lk.cutTags = schedule()
	clock = clock.Add(5 * time.Minute)
	step("d")
	if id, _ := tagged("cut-20261205T030000Z"); id != epochSnap[3] || e.lk.cutTags.done < 0 {
		t.Fatalf("after a restart the 03:00 tag is on snapshot %d (want %d), schedule %+v", id, epochSnap[3], e.lk.cutTags)
	}
}

// A commit that also holds the transactions of epochs its table sat out
// (its commit before was slow, or it was behind after a restart) records
// them; a cut of one of those epochs would have the other tables' share
// of a transaction without this table's, so Cut refuses it and names the
// consistent epochs on either side.
func TestCutRefusesEpochsCommittedLate(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.commit(nil, keys(1, 10), "a", nil) // epoch 1
	e.commit(nil, keys(1, 5), "b", nil)  // epoch 2
	d, r := e.change(keys(3, 8), "c", nil)
	if err := e.tbl.Commit(ctx, Epoch{Number: 5, From: 3, Pos: pos(5)}, d, r, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.lk.SaveCheckpoint(ctx, cdcsync.Checkpoint{Epoch: 5, Pos: pos(5), Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, epoch := range []int64{3, 4} {
		_, err := e.lk.Cut(ctx, epoch)
		if !errors.Is(err, ErrNoCut) || !strings.Contains(err.Error(), "holds the transactions of epochs 3 to 4") ||
			!strings.Contains(err.Error(), "use --epoch 2 or --epoch 5") {
			t.Errorf("cut of epoch %d: %v; want it refused, naming epochs 2 and 5", epoch, err)
		}
	}
	for _, epoch := range []int64{2, 5} {
		c, err := e.lk.Cut(ctx, epoch)
		if err != nil || len(c.Tables) != 1 {
			t.Errorf("cut of epoch %d: %+v, %v", epoch, c, err)
		}
	}
}

// EpochAsOf never picks an epoch that a late commit spans: it steps back
// to the epoch before the span.
func TestOutsideCarried(t *testing.T) {
	late := [][2]int64{{3, 5}, {5, 7}, {10, 11}}
	for _, c := range [][2]int64{{2, 2}, {3, 2}, {4, 2}, {5, 2}, {6, 2}, {7, 7}, {9, 9}, {10, 9}, {11, 11}} {
		if got := outsideCarried(c[0], late); got != c[1] {
			t.Errorf("outsideCarried(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

// slowTagCatalog is a catalog whose commits of a tag take a while between
// reading the table's metadata and writing it, as a busy machine's do
// (the SQL catalog's read, new metadata file and conditional update): long
// enough for an epoch to land if one can (up to a second), which fails the
// tag's commit, as it does there.
type slowTagCatalog struct {
	catalog.Catalog
}

func (c slowTagCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, upd []table.Update) (table.Metadata, string, error) {
	// A tag's commit is a ref update alone; an epoch's adds a snapshot.
	if len(upd) == 1 && upd[0].Action() == table.UpdateSetSnapshotRef {
		before, err := c.LoadTable(ctx, ident)
		if err != nil {
			return nil, "", err
		}
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			now, err := c.LoadTable(ctx, ident)
			if err != nil {
				return nil, "", err
			}
			if now.MetadataLocation() != before.MetadataLocation() {
				return nil, "", fmt.Errorf("%w: table %v metadata-location moved underneath us", table.ErrCommitFailed, ident)
			}
		}
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, upd)
}

// TestTagCutHoldsCommits: a cut tagged through the daemon's lake (cdcsync
// cut --tag finds the daemon) pauses the table's commits while the tag is
// committed, so a tag whose catalog commit is slow is not lost to epochs
// committed back to back. Tagged from another process, such a tag loses
// every try, and the error says to go through the daemon.
func TestTagCutHoldsCommits(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.lk.cat = slowTagCatalog{e.lk.cat}
	e.commit(nil, keys(1, 10), "a", nil)
	snap := e.tbl.current().CurrentSnapshot().SnapshotID
	cut := Cut{Epoch: e.epoch, Tables: []CutTable{{ID: e.tbl.ID, Iceberg: "shop.kv", Snapshot: snap}}}

	// Epochs back to back, as a daemon catching up commits them.
	stop := make(chan struct{})
	done := make(chan error, 1)
	var epochs atomic.Int64
	go func() {
		for n := e.epoch + 1; ; n++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			d, r := e.change(keys(n%10+1, n%10+1), fmt.Sprint("v", n), nil)
			if err := e.tbl.Commit(ctx, Epoch{Number: n, Pos: pos(n)}, d, r, nil); err != nil {
				done <- fmt.Errorf("commit epoch %d: %w", n, err)
				return
			}
			epochs.Add(1)
		}
	}()
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	for epochs.Load() < 3 {
		time.Sleep(time.Millisecond)
	}

	defer func(d time.Duration) { tagTableTries = d }(tagTableTries)
	tagTableTries = 3 * time.Second
	// From another process (no sink to hold): every try loses.
	err := e.lk.TagCut(ctx, cut, "elsewhere", 0)
	if err == nil || !errors.Is(err, table.ErrCommitFailed) || !strings.Contains(err.Error(), "tag the cut through the running daemon") {
		t.Fatalf("a tag committed beside epochs back to back: %v; want it lost, with the way out", err)
	}
	// The daemon's lake holds the table's commits.
	e.lk.NewSink(map[cdcsync.TableID]*Table{e.tbl.ID: e.tbl}, metrics.New(), nil)
	before := epochs.Load()
	if err := e.lk.TagCut(ctx, cut, "cut-1", 24*time.Hour); err != nil {
		t.Fatalf("tag through the daemon's lake: %v", err)
	}
	tbl, err := e.lk.LoadTable(ctx, e.lk.Identifier("shop", "kv"))
	if err != nil {
		t.Fatal(err)
	}
	if s := tbl.Metadata().SnapshotByName("cut-1"); s == nil || s.SnapshotID != snap {
		t.Fatalf("tag cut-1 is on %+v, want snapshot %d", s, snap)
	}
	// The epochs went on once the tag was in.
	for deadline := time.Now().Add(10 * time.Second); epochs.Load() < before+3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no epoch committed after the tag (%d before it, %d now)", before, epochs.Load())
		}
	}
}
