package lake

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/lease"
)

func holder(name string) lease.Holder {
	return lease.Holder{Host: name, PID: 1, Instance: name}
}

// The lease record in a real catalog: a swap lands only on the version it
// names, and a lease renewed many times stays a few small files.
func TestLeaseStoreInTheCatalog(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	s := e.lk.LeaseStore()
	rec, v, err := s.Load(ctx)
	if err != nil || v != "" || rec.Token != 0 {
		t.Fatalf("fresh pipeline: %+v %q %v, want no record", rec, v, err)
	}
	v1, err := s.Swap(ctx, "", lease.Record{Holder: holder("a"), Token: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Swap(ctx, "", lease.Record{Holder: holder("b"), Token: 1}); !errors.Is(err, lease.ErrContended) {
		t.Fatalf("second swap of the empty record: %v, want ErrContended", err)
	}
	// Another process sees a's record.
	other := openLake(t, e.cfg).LeaseStore()
	got, gv, err := other.Load(ctx)
	if err != nil || gv != v1 || got.Holder.Instance != "a" {
		t.Fatalf("other process loads %+v %q %v, want a's record at %q", got, gv, err, v1)
	}
	v = v1
	for i := range 60 {
		r := lease.Record{Holder: holder("a"), Token: 1, Renewed: time.Unix(int64(i), 0).UTC()}
		if v, err = s.Swap(ctx, v, r); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
	}
	if _, err := other.Swap(ctx, v1, lease.Record{Holder: holder("b"), Token: 2}); !errors.Is(err, lease.ErrContended) {
		t.Fatalf("swap of a stale version: %v, want ErrContended", err)
	}
	var files int
	root := filepath.Join(e.dir, "warehouse", "_cdcsync", "p", "lease")
	_ = filepath.Walk(root, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			files++
		}
		return nil
	})
	t.Logf("%d files under the lease table after 61 swaps", files)
	if files == 0 || files > 10 {
		t.Errorf("%d files under %s after 60 renewals, want a handful", files, root)
	}
	tbl, err := e.lk.LoadTable(ctx, e.lk.LeaseIdent())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Metadata().Snapshots()); n > 2 {
		t.Errorf("lease table keeps %d snapshots, want at most 2", n)
	}
	// The control table is not one of the pipeline's tables.
	pts, err := e.lk.PipelineTables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, pt := range pts {
		if pt.ID.Database == LeaseNamespace {
			t.Errorf("PipelineTables lists the lease table: %+v", pt)
		}
	}
}

// Daemons that race for a fresh pipeline's lease in one catalog: one wins.
func TestLeaseRaceInTheCatalog(t *testing.T) {
	e := newKV(t, "p")
	var wg sync.WaitGroup
	won := make(chan int64, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lk := openLake(t, e.cfg)
			l, err := lease.Acquire(context.Background(), lk.LeaseStore(), lease.Options{Pipeline: "p", TTL: time.Minute,
				Self: holder(string(rune('a' + i)))})
			if err == nil {
				won <- l.Token()
			} else if !strings.Contains(err.Error(), "is held by") {
				t.Errorf("loser: %v", err)
			}
		}()
	}
	wg.Wait()
	close(won)
	var tokens []int64
	for tok := range won {
		tokens = append(tokens, tok)
	}
	if len(tokens) != 1 || tokens[0] != 1 {
		t.Errorf("winners' tokens %v, want one winner with token 1", tokens)
	}
}

// leaseHolderWithRows returns a table committed to with lease token 1 (the
// old holder's), holding keys 1 to 10.
func leaseHolderWithRows(t *testing.T) (*kvEnv, *Table) {
	e := newKV(t, "p")
	e.lk.SetLease(1, nil)
	old, err := e.lk.EnsureTable(context.Background(), kvSchema())
	if err != nil {
		t.Fatal(err)
	}
	e.tbl = old
	e.commit(nil, keys(1, 10), "copy", nil)
	return e, old
}

// A new holder fences the tables: the old holder's next commit fails with
// lease.ErrLost and lands nothing; the new holder commits, with its token.
func TestFenceStopsTheOlderHolder(t *testing.T) {
	ctx := context.Background()
	e, old := leaseHolderWithRows(t)
	before, _ := old.Committed()

	newer := openLake(t, e.cfg)
	newer.SetLease(2, nil)
	n, err := newer.Fence(ctx, 2)
	if err != nil || n != 1 {
		t.Fatalf("fence: %d tables, %v; want 1", n, err)
	}
	if n, err := newer.Fence(ctx, 2); err != nil || n != 1 {
		t.Fatalf("fence again: %d, %v", n, err)
	}
	nt, err := newer.EnsureTable(ctx, kvSchema())
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := nt.Committed(); c != before {
		t.Errorf("the fence changed the committed state: %+v, want %+v", c, before)
	}
	snaps := len(nt.Iceberg().Metadata().Snapshots())

	d, r := e.change([]int64{1}, "zombie", nil)
	err = old.Commit(ctx, Epoch{Number: e.epoch + 1, Pos: pos(e.epoch + 1)}, d, r, nil)
	if !errors.Is(err, lease.ErrLost) || errors.Is(err, ErrConflict) {
		t.Fatalf("old holder's commit after the fence: %v, want lease.ErrLost", err)
	}
	if !strings.Contains(err.Error(), "lease token 2, this daemon's 1") {
		t.Errorf("message %q does not name the tokens", err)
	}
	// A retry must not stage on top of the fence.
	if err := old.Commit(ctx, Epoch{Number: e.epoch + 1, Pos: pos(e.epoch + 1)}, d, r, nil); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("old holder's retry: %v, want lease.ErrLost", err)
	}
	if err := nt.Commit(ctx, Epoch{Number: e.epoch + 1, Pos: pos(e.epoch + 1)}, d, []cdcsync.Row{{int64(1), "new"}}, nil); err != nil {
		t.Fatal(err)
	}
	cur := nt.Iceberg().CurrentSnapshot()
	if got := cur.Summary.Properties[SummaryToken]; got != "2" {
		t.Errorf("new holder's commit carries token %q, want 2", got)
	}
	if n := len(nt.Iceberg().Metadata().Snapshots()); n != snaps+1 {
		t.Errorf("%d snapshots after the new holder's commit, want %d: the old holder's landed?", n, snaps+1)
	}
	e.model[1] = "new"
	e.assertModel(nt.Iceberg())

	// The old holder cannot even stop a table now that its lease is gone.
	expired := errors.New("lease expired")
	e.lk.SetLease(1, func() error { return expired })
	stale, err := e.lk.EnsureTable(ctx, kvSchema())
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.Commit(ctx, Epoch{Number: 99, Pos: pos(99)}, d, r, nil); !errors.Is(err, expired) {
		t.Errorf("commit with an invalid lease: %v, want the lease's error", err)
	}
}

// Pipelines that write different tables of one warehouse and catalog work
// side by side: each has its own lease, and neither's fence touches the
// other's tables.
func TestPipelinesSideBySide(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.commit(nil, keys(1, 5), "p", nil)
	q := openLake(t, kvConfig(t, e.dir, "q"))
	other := kvSchema()
	other.ID.Table = "kv2"
	qt, err := q.EnsureTable(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if err := qt.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, []cdcsync.Row{{int64(1), "q"}}, nil); err != nil {
		t.Fatal(err)
	}
	opts := func(pipeline, who string) lease.Options {
		return lease.Options{Pipeline: pipeline, TTL: time.Minute, Self: holder(who)}
	}
	lp, err := lease.Acquire(ctx, e.lk.LeaseStore(), opts("p", "a"))
	if err != nil {
		t.Fatal(err)
	}
	lq, err := lease.Acquire(ctx, q.LeaseStore(), opts("q", "b"))
	if err != nil {
		t.Fatalf("pipeline q's lease while p's is held: %v", err)
	}
	if lp.Token() != 1 || lq.Token() != 1 {
		t.Errorf("tokens %d and %d, want 1 each", lp.Token(), lq.Token())
	}
	if n, err := q.Fence(ctx, 5); err != nil || n != 1 {
		t.Fatalf("q fenced %d tables (%v), want its own one", n, err)
	}
	// p's table was not fenced by q: p still commits.
	e.commit(nil, keys(6, 7), "p", nil)
	e.assertModel(e.tbl.Iceberg())
}

// racingCatalog lets a commit of another process land just after its
// first load of a table: the race a fence loses to a previous holder that
// is still committing when the standby takes over.
type racingCatalog struct {
	catalog.Catalog
	once   sync.Once
	before func()
}

func (c *racingCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	c.once.Do(c.before)
	return tbl, err
}

// A previous holder's commit that lands between the fence's load of a
// table and its commit makes the fence's commit fail: the fence is staged
// again on top of it, instead of ending the new holder's start (CI saw a
// takeover from a paused holder exit so).
func TestFenceAfterTheOlderHoldersLastCommit(t *testing.T) {
	ctx := context.Background()
	e, old := leaseHolderWithRows(t)

	newer := openLake(t, e.cfg)
	newer.SetLease(2, nil)
	var raced error
	newer.cat = &racingCatalog{Catalog: newer.cat, before: func() {
		d, r := e.change([]int64{1}, "last of the old holder", nil)
		raced = old.Commit(ctx, Epoch{Number: e.epoch + 1, Pos: pos(e.epoch + 1)}, d, r, nil)
		e.epoch++
		e.apply([]int64{1}, "last of the old holder", nil)
	}}
	n, err := newer.Fence(ctx, 2)
	if raced != nil {
		t.Fatalf("the old holder's commit before the fence: %v", raced)
	}
	if err != nil || n != 1 {
		t.Fatalf("fence after a commit of the old holder: %d tables, %v; want 1", n, err)
	}
	nt, err := newer.EnsureTable(ctx, kvSchema())
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := nt.Committed(); c.Epoch != e.epoch {
		t.Errorf("committed epoch %d after the fence, want the old holder's last, %d", c.Epoch, e.epoch)
	}
	if got := nt.Iceberg().CurrentSnapshot().Summary.Properties[SummaryFence]; got != "p" {
		t.Errorf("the head is not the fence (summary %v)", nt.Iceberg().CurrentSnapshot().Summary.Properties)
	}
	e.assertModel(nt.Iceberg())
	d, r := e.change([]int64{2}, "zombie", nil)
	if err := old.Commit(ctx, Epoch{Number: e.epoch + 1, Pos: pos(e.epoch + 1)}, d, r, nil); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("old holder's commit after the fence: %v, want lease.ErrLost", err)
	}
}
