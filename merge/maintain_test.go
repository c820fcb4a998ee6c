package merge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// maintSink is a memSink that maintains its tables slowly and records
// whether commits ran while maintenance ran, and whether two maintenance
// runs ever overlapped.
type maintSink struct {
	memSink
	running  atomic.Int32
	overlaps atomic.Int32 // commits while maintenance ran
	doubled  atomic.Int32 // maintenance started while another ran
	mu2      sync.Mutex
	calls    []string
	block    chan struct{} // when set, Maintain waits for it or for ctx
}

func (s *maintSink) Commit(ctx context.Context, id cdcsync.TableID, d cdcsync.Delta) error {
	if s.running.Load() > 0 {
		s.overlaps.Add(1)
	}
	return s.memSink.Commit(ctx, id, d)
}

func (s *maintSink) Maintain(ctx context.Context, epoch int64, tables []cdcsync.TableID) error {
	if s.running.Add(1) > 1 {
		s.doubled.Add(1)
	}
	defer s.running.Add(-1)
	s.mu2.Lock()
	s.calls = append(s.calls, fmt.Sprintf("%d%v", epoch, tables))
	s.mu2.Unlock()
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	time.Sleep(30 * time.Millisecond)
	return errors.New("maintenance errors are logged, not fatal")
}

func (s *maintSink) committed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.commits)
}

// Epochs go on committing while maintenance runs; one maintenance runs at a
// time, and the epochs that end meanwhile get none.
func TestPipelineMaintainsNextToCommits(t *testing.T) {
	sink := &maintSink{block: make(chan struct{})}
	p := New(sink, []Table{{Schema: users}, {Schema: orders}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 1, MaxBytes: 1 << 30, CommitConcurrency: 2}, quiet(), nil)
	ch := make(chan *cdcsync.Txn)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), ch) }()
	ch <- txnAt(1, ins(u(1, "eu", "a")))
	waitFor(t, "maintenance to start", func() bool { return sink.running.Load() > 0 })
	// Maintenance of epoch 1 is blocked: epochs 2 to 4 must commit anyway.
	for i := 2; i <= 4; i++ {
		ch <- txnAt(i, ins(u(int64(i), "eu", "a")))
	}
	waitFor(t, "epochs 2 to 4 to commit while maintenance runs", func() bool { return sink.committed() >= 3 })
	close(sink.block)
	ch <- txnAt(5, ins(u(5, "eu", "a")))
	close(ch)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if sink.overlaps.Load() == 0 || sink.doubled.Load() != 0 {
		t.Fatalf("%d commits overlapped maintenance (want some), %d maintenance runs overlapped another (want none)", sink.overlaps.Load(), sink.doubled.Load())
	}
	if len(sink.commits) != 5 {
		t.Fatalf("commits = %v", sink.commits)
	}
	if sink.calls[0] != "1[shop.users]" {
		t.Fatalf("maintenance calls = %v", sink.calls)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPipelineStopCancelsMaintenance(t *testing.T) {
	sink := &maintSink{block: make(chan struct{})}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 2, MaxBytes: 1 << 30}, quiet(), nil)
	ch := make(chan *cdcsync.Txn)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), ch) }()
	ch <- txnAt(1, ins(u(1, "eu", "a")), ins(u(3, "eu", "c")))
	waitFor(t, "maintenance to start", func() bool { return sink.running.Load() > 0 })
	ch <- txnAt(2, ins(u(2, "eu", "b"))) // buffered while maintenance runs; the epoch is not sealed yet
	close(ch)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return: a blocked maintenance must be cancelled on the way out")
	}
	if fmt.Sprint(sink.commits) != "[shop.users@1 shop.users@2]" {
		t.Fatalf("commits = %v", sink.commits)
	}
}

// While catching up on old transactions, maintenance waits (at most
// maxMaintenanceSkips epochs in a row); once the stream is fresh it runs
// after every epoch again.
func TestMaintenanceWaitsWhileCatchingUp(t *testing.T) {
	p := New(&memSink{}, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Second, MaxRows: 1, MaxBytes: 1 << 30}, quiet(), nil)
	var due []string
	for epoch := 1; epoch <= maxMaintenanceSkips+5; epoch++ {
		last := time.Now().Add(-3 * time.Hour) // a backlog
		if epoch > maxMaintenanceSkips+3 {
			last = time.Now() // caught up
		}
		if b := (&Buffer{Last: last}); p.maintenanceDue(b, p.catchingUp(b)) {
			due = append(due, fmt.Sprint(epoch))
		}
	}
	// Epochs 1..10 skip; 11 runs (the bound); 12, 13 skip again; 14 and 15
	// (fresh) run.
	if got := strings.Join(due, ","); got != "11,14,15" {
		t.Fatalf("maintenance ran after epochs %s; want 11, 14 and 15", got)
	}
}

// idleSink records MaintainIdle calls.
type idleSink struct {
	maintSink
	idle chan []cdcsync.TableID
}

func (s *idleSink) MaintainIdle(_ context.Context, tables []cdcsync.TableID) error {
	s.idle <- tables
	return nil
}

// A table that no epoch changed for IdleAfter is handed to MaintainIdle
// once, and again only after new epochs of it: its maintenance must not
// wait for epochs that do not come (after a backlog, maintenance waits;
// when the load stops, nothing else would compact what it left).
func TestIdleTablesAreMaintained(t *testing.T) {
	sink := &idleSink{idle: make(chan []cdcsync.TableID, 10)}
	p := New(sink, []Table{{Schema: users}, {Schema: orders}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Millisecond, MaxRows: 1 << 20, MaxBytes: 1 << 30, CommitConcurrency: 2, IdleAfter: 100 * time.Millisecond}, quiet(), nil)
	ch := make(chan *cdcsync.Txn)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), ch) }()
	ch <- txnAt(1, ins(u(1, "eu", "a")), cdcsync.Change{Table: orders.ID, Op: cdcsync.OpInsert, After: cdcsync.Row{"x", int32(1), "1.00"}})
	began := time.Now()
	select {
	case got := <-sink.idle:
		if fmt.Sprint(got) != "[shop.orders shop.users]" {
			t.Errorf("idle maintenance of %v, want both tables", got)
		}
		if d := time.Since(began); d < 100*time.Millisecond {
			t.Errorf("idle maintenance after %s, before IdleAfter", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no idle maintenance within 5s of the last epoch")
	}
	select {
	case got := <-sink.idle:
		t.Fatalf("idle maintenance of %v again without a new epoch", got)
	case <-time.After(300 * time.Millisecond):
	}
	// users changes again: it alone is maintained next.
	ch <- txnAt(2, ins(u(2, "eu", "b")))
	select {
	case got := <-sink.idle:
		if fmt.Sprint(got) != "[shop.users]" {
			t.Errorf("idle maintenance of %v, want shop.users", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no idle maintenance of users after its new epoch")
	}
	close(ch)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// While cdcsync catches up on a backlog (its oldest transaction not yet
// committed is old), idle tables wait as all maintenance does: the CPU
// goes to ingestion.
func TestIdleMaintenanceWaitsWhileBehind(t *testing.T) {
	sink := &idleSink{idle: make(chan []cdcsync.TableID, 10)}
	p := New(sink, []Table{{Schema: users}, {Schema: orders}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 2, MaxBytes: 1 << 30, CommitConcurrency: 2, IdleAfter: 50 * time.Millisecond}, quiet(), nil)
	ch := make(chan *cdcsync.Txn)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), ch) }()
	ch <- txnAt(1, ins(u(1, "eu", "a")), ins(u(2, "eu", "b"))) // full: users commits
	old := txnAt(2, cdcsync.Change{Table: orders.ID, Op: cdcsync.OpInsert, After: cdcsync.Row{"x", int32(1), "1.00"}})
	old.Time = time.Now().Add(-5 * time.Hour) // a backlog: hours behind, over twice the interval
	ch <- old
	select {
	case got := <-sink.idle:
		t.Fatalf("idle maintenance of %v while behind (lag %s)", got, p.Lag())
	case <-time.After(500 * time.Millisecond):
	}
	close(ch)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
