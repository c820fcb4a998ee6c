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

// maintSink is a memSink that maintains its tables slowly and checks that
// no commit overlaps maintenance.
type maintSink struct {
	memSink
	running  atomic.Bool
	overlaps atomic.Int32
	mu2      sync.Mutex
	calls    []string
	block    chan struct{} // when set, Maintain waits for it or for ctx
}

func (s *maintSink) Commit(ctx context.Context, id cdcsync.TableID, d Delta) error {
	if s.running.Load() {
		s.overlaps.Add(1)
	}
	return s.memSink.Commit(ctx, id, d)
}

func (s *maintSink) Maintain(ctx context.Context, epoch int64, tables []cdcsync.TableID) error {
	s.running.Store(true)
	defer s.running.Store(false)
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

func TestPipelineMaintainsBetweenCommits(t *testing.T) {
	sink := &maintSink{}
	p := New(sink, []Table{{Schema: users}, {Schema: orders}}, 1, mariaPos(0),
		Options{Interval: time.Hour, MaxRows: 1, MaxBytes: 1 << 30, CommitConcurrency: 2}, quiet(), nil)
	var txns []*cdcsync.Txn
	for i := 1; i <= 4; i++ {
		txns = append(txns, txnAt(i, ins(u(int64(i), "eu", "a"))))
	}
	if err := runPipeline(t, p, txns...); err != nil {
		t.Fatal(err)
	}
	if n := sink.overlaps.Load(); n != 0 {
		t.Fatalf("%d commits ran while maintenance was running", n)
	}
	if len(sink.commits) != 4 {
		t.Fatalf("commits = %v", sink.commits)
	}
	// Every epoch committed while streaming is maintained. The last one may
	// still be committing in the background when the stream ends; shutting
	// down, the pipeline starts no maintenance for it (or cancels it).
	got := fmt.Sprint(sink.calls)
	if got != "[1[shop.users] 2[shop.users] 3[shop.users] 4[shop.users]]" && got != "[1[shop.users] 2[shop.users] 3[shop.users]]" {
		t.Fatalf("maintenance calls = %v", sink.calls)
	}
}

func TestPipelineStopCancelsMaintenance(t *testing.T) {
	sink := &maintSink{block: make(chan struct{})}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Interval: time.Hour, MaxRows: 2, MaxBytes: 1 << 30}, quiet(), nil)
	ch := make(chan *cdcsync.Txn)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), ch) }()
	ch <- txnAt(1, ins(u(1, "eu", "a")), ins(u(3, "eu", "c")))
	deadline := time.Now().Add(5 * time.Second)
	for !sink.running.Load() {
		if time.Now().After(deadline) {
			t.Fatal("maintenance did not start")
		}
		time.Sleep(time.Millisecond)
	}
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
	if fmt.Sprint(sink.commits) != "[shop.users@1 shop.users@2]" || sink.overlaps.Load() != 0 {
		t.Fatalf("commits = %v, overlaps %d", sink.commits, sink.overlaps.Load())
	}
}

// While catching up on old transactions, maintenance waits (at most
// maxMaintenanceSkips epochs in a row); once the stream is fresh it runs
// after every epoch again.
func TestPipelineSkipsMaintenanceWhileCatchingUp(t *testing.T) {
	sink := &maintSink{}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Interval: time.Hour, MaxRows: 1, MaxBytes: 1 << 30}, quiet(), nil)
	var txns []*cdcsync.Txn
	n := maxMaintenanceSkips + 3
	for i := 1; i <= n; i++ {
		x := txnAt(i, ins(u(int64(i), "eu", "a")))
		x.Time = time.Now().Add(-3 * time.Hour)
		txns = append(txns, x)
	}
	fresh := txnAt(n+1, ins(u(int64(n+1), "eu", "a")))
	txns = append(txns, fresh, txnAt(n+2, ins(u(int64(n+2), "eu", "a"))))
	if err := runPipeline(t, p, txns...); err != nil {
		t.Fatal(err)
	}
	var epochs []string
	for _, c := range sink.calls {
		epochs = append(epochs, strings.SplitN(c, "[", 2)[0])
	}
	// Epochs 1..10 skip; 11 runs (the bound); 12, 13 skip again; 14 (fresh)
	// runs; 15, the last, may be cut short by the shutdown.
	got := strings.Join(epochs, ",")
	if got != "11,14" && got != "11,14,15" {
		t.Fatalf("maintenance ran after epochs %s; want 11 and 14 (and maybe 15)", got)
	}
}
