package merge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
)

// memSink records commits and can fail them on demand.
type memSink struct {
	mu          sync.Mutex
	commits     []string // "table@epoch"
	checkpoints []int64
	positions   []cdcsync.Position
	fail        func(id cdcsync.TableID, epoch int64, attempt int) error
	attempts    map[string]int
}

func (s *memSink) Commit(_ context.Context, id cdcsync.TableID, d cdcsync.Delta) error {
	epoch := d.Epoch
	s.mu.Lock()
	defer s.mu.Unlock()
	k := fmt.Sprintf("%s@%d", id, epoch)
	if s.attempts == nil {
		s.attempts = map[string]int{}
	}
	s.attempts[k]++
	if s.fail != nil {
		if err := s.fail(id, epoch, s.attempts[k]); err != nil {
			return err
		}
	}
	s.commits = append(s.commits, k)
	return nil
}

func (s *memSink) SaveCheckpoint(_ context.Context, epoch int64, pos cdcsync.Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkpoints = append(s.checkpoints, epoch)
	s.positions = append(s.positions, pos)
	return nil
}

func mariaPos(seq int) cdcsync.Position {
	return binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: fmt.Sprintf("0-1-%d", seq)}.Position()
}

func txnAt(seq int, changes ...cdcsync.Change) *cdcsync.Txn {
	return &cdcsync.Txn{GTID: fmt.Sprintf("0-1-%d", seq), Pos: mariaPos(seq), Time: time.Now(), Changes: changes, Bytes: 10}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func runPipeline(t *testing.T, p *Pipeline, txns ...*cdcsync.Txn) error {
	t.Helper()
	ch := make(chan *cdcsync.Txn, len(txns))
	for _, x := range txns {
		ch <- x
	}
	close(ch)
	return p.Run(context.Background(), ch)
}

func TestPipelineSealsByRowsAndCheckpointsAfterAllTables(t *testing.T) {
	sink := &memSink{}
	p := New(sink, []Table{{Schema: users}, {Schema: orders}}, 5, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 2, MaxBytes: 1 << 30, CommitConcurrency: 1}, quiet(), nil)
	err := runPipeline(t, p,
		txnAt(1, ins(u(1, "eu", "a"))),
		txnAt(2, ins(u(2, "eu", "b")), cdcsync.Change{Table: orders.ID, Op: cdcsync.OpInsert, After: cdcsync.Row{"x", int32(1), "1.00"}}),
		txnAt(3, ins(u(3, "eu", "c"))),
	)
	if err != nil {
		t.Fatal(err)
	}
	// Epoch 5 seals after txn 2 (3 rows >= 2) with both tables; epoch 6 holds txn 3 and is committed at the end of the stream.
	want := []string{"shop.orders@5", "shop.users@5", "shop.users@6"}
	if fmt.Sprint(sink.commits) != fmt.Sprint(want) {
		t.Fatalf("commits = %v, want %v", sink.commits, want)
	}
	if fmt.Sprint(sink.checkpoints) != "[5 6]" || sink.positions[1] != mariaPos(3) {
		t.Fatalf("checkpoints = %v at %v", sink.checkpoints, sink.positions)
	}
	if p.Committed() != mariaPos(3) {
		t.Fatalf("committed = %v", p.Committed())
	}
}

func TestPipelineSkipsWhatATableAlreadyHolds(t *testing.T) {
	sink := &memSink{}
	// users already holds everything up to 0-1-2 (it committed before a crash); orders does not.
	p := New(sink, []Table{{Schema: users, Committed: mariaPos(2)}, {Schema: orders}}, 1, mariaPos(1),
		Options{Order: order, Interval: time.Hour, MaxRows: 100, MaxBytes: 1 << 30}, quiet(), nil)
	var got []int
	sink.fail = func(id cdcsync.TableID, _ int64, _ int) error {
		if id == users.ID {
			got = append(got, 1)
		}
		return nil
	}
	err := runPipeline(t, p,
		txnAt(2, ins(u(1, "eu", "a")), cdcsync.Change{Table: orders.ID, Op: cdcsync.OpInsert, After: cdcsync.Row{"x", int32(1), "1.00"}}),
	)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sink.commits) != "[shop.orders@1]" {
		t.Fatalf("commits = %v: users must skip the transaction it already holds", sink.commits)
	}
}

func TestPipelineSealsByInterval(t *testing.T) {
	sink := &memSink{}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: 50 * time.Millisecond, MaxRows: 1000, MaxBytes: 1 << 30}, quiet(), nil)
	ch := make(chan *cdcsync.Txn)
	done := make(chan error)
	go func() { done <- p.Run(context.Background(), ch) }()
	ch <- txnAt(1, ins(u(1, "eu", "a")))
	waitFor(t, "the epoch to seal by interval", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.checkpoints) == 1
	})
	close(ch)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestPipelineSealsCatchUpTailWhenIdle: after an epoch sealed full (the
// stream was behind), the stream catching up with the server (an idle
// progress marker, sent on a heartbeat) seals the open epoch at once
// instead of after epoch.interval; when the stream keeps up (no epoch
// sealed full), an idle marker seals nothing.
func TestPipelineSealsCatchUpTailWhenIdle(t *testing.T) {
	checkpoints := func(s *memSink) int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.checkpoints)
	}
	idle := func(seq int) *cdcsync.Txn { return &cdcsync.Txn{Progress: true, Idle: true, Pos: mariaPos(seq)} }
	for _, behind := range []bool{true, false} {
		t.Run(fmt.Sprintf("behind=%v", behind), func(t *testing.T) {
			sink := &memSink{}
			p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
				Options{Order: order, Interval: time.Hour, MaxRows: 3, MaxBytes: 1 << 30}, quiet(), nil)
			ch := make(chan *cdcsync.Txn)
			done := make(chan error)
			go func() { done <- p.Run(context.Background(), ch) }()
			seq := 1
			if behind {
				// Three rows fill an epoch: it seals full.
				ch <- txnAt(seq, ins(u(1, "eu", "a")), ins(u(2, "eu", "b")), ins(u(5, "eu", "e")))
				seq++
				waitFor(t, "the full epoch to commit", func() bool { return checkpoints(sink) == 1 })
			}
			ch <- txnAt(seq, ins(u(3, "eu", "c"))) // the tail: not full
			before := checkpoints(sink)
			ch <- idle(seq)
			if behind {
				waitFor(t, "the tail to seal on the idle marker", func() bool { return checkpoints(sink) == before+1 })
			} else {
				time.Sleep(200 * time.Millisecond)
				if n := checkpoints(sink); n != before {
					t.Fatalf("%d checkpoints after an idle marker while keeping up, want %d: the epoch must wait for its interval", n, before)
				}
			}
			// Once caught up, the next idle marker seals nothing more.
			ch <- txnAt(seq+1, ins(u(4, "eu", "d")))
			after := checkpoints(sink)
			ch <- idle(seq + 1)
			time.Sleep(200 * time.Millisecond)
			if n := checkpoints(sink); n != after {
				t.Fatalf("%d checkpoints after a second idle marker, want %d", n, after)
			}
			close(ch)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPipelineRetriesTransientFailures(t *testing.T) {
	sink := &memSink{fail: func(_ cdcsync.TableID, _ int64, attempt int) error {
		if attempt < 3 {
			return errors.New("catalog unavailable")
		}
		return nil
	}}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 1000, MaxBytes: 1 << 30, RetryBackoff: time.Millisecond}, quiet(), nil)
	if err := runPipeline(t, p, txnAt(1, ins(u(1, "eu", "a")))); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sink.commits) != "[shop.users@1]" || sink.attempts["shop.users@1"] != 3 {
		t.Fatalf("commits = %v attempts = %v", sink.commits, sink.attempts)
	}
}

var errOutage = errors.New("dial tcp 127.0.0.1:9000: connect: connection refused")

func isOutage(err error) bool { return errors.Is(err, errOutage) }

// An outage of the warehouse or the catalog is waited out however many
// attempts it takes (far more than Retries), Stalled reports it meanwhile,
// and the epoch then commits once, checkpoint included.
func TestPipelineWaitsOutAnOutage(t *testing.T) {
	var outage sync.Mutex // held while the storage is down
	outage.Lock()
	sink := &memSink{fail: func(_ cdcsync.TableID, _ int64, attempt int) error {
		if !outage.TryLock() {
			return fmt.Errorf("write data files: %w", errOutage)
		}
		outage.Unlock()
		return nil
	}}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 1000, MaxBytes: 1 << 30, Retries: 2, RetryBackoff: time.Millisecond, Transient: isOutage}, quiet(), nil)
	done := make(chan error, 1)
	go func() { done <- runPipeline(t, p, txnAt(1, ins(u(1, "eu", "a")))) }()
	waitFor(t, "the commit to stall", func() bool {
		st := p.Stalled()
		return len(st) == 1 && st[0].What == "shop.users" && errors.Is(st[0].Err, errOutage)
	})
	waitFor(t, "many attempts", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return sink.attempts["shop.users@1"] >= 6
	})
	outage.Unlock()
	if err := <-done; err != nil {
		t.Fatalf("the pipeline gave up during an outage: %v", err)
	}
	if fmt.Sprint(sink.commits) != "[shop.users@1]" || fmt.Sprint(sink.checkpoints) != "[1]" {
		t.Fatalf("commits %v checkpoints %v", sink.commits, sink.checkpoints)
	}
	if st := p.Stalled(); len(st) != 0 {
		t.Fatalf("still stalled after the outage: %v", st)
	}
}

// An error that is not an outage is still given up after Retries attempts.
func TestPipelineGivesUpOnUnknownFailures(t *testing.T) {
	sink := &memSink{fail: func(cdcsync.TableID, int64, int) error { return errors.New("field 7 is not in the schema") }}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 1000, MaxBytes: 1 << 30, Retries: 3, RetryBackoff: time.Millisecond, Transient: isOutage}, quiet(), nil)
	err := runPipeline(t, p, txnAt(1, ins(u(1, "eu", "a"))))
	if !errors.Is(err, ErrCommit) || sink.attempts["shop.users@1"] != 3 || len(sink.checkpoints) != 0 {
		t.Fatalf("err %v attempts %v checkpoints %v", err, sink.attempts, sink.checkpoints)
	}
}

// Quit (a shutdown) ends the wait for an outage, without a checkpoint.
func TestPipelineQuitEndsAnOutageWait(t *testing.T) {
	sink := &memSink{fail: func(cdcsync.TableID, int64, int) error { return errOutage }}
	quit := make(chan struct{})
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 1000, MaxBytes: 1 << 30, RetryBackoff: time.Millisecond, Transient: isOutage, Quit: quit}, quiet(), nil)
	done := make(chan error, 1)
	go func() { done <- runPipeline(t, p, txnAt(1, ins(u(1, "eu", "a")))) }()
	waitFor(t, "the commit to stall", func() bool { return len(p.Stalled()) == 1 })
	close(quit)
	select {
	case err := <-done:
		if !errors.Is(err, errOutage) || len(sink.checkpoints) != 0 {
			t.Fatalf("err %v checkpoints %v", err, sink.checkpoints)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pipeline did not stop on quit during an outage")
	}
}

func TestPipelineStopsOnPermanentFailureWithoutCheckpoint(t *testing.T) {
	sink := &memSink{fail: func(cdcsync.TableID, int64, int) error {
		return cdcsync.Permanent(errors.New("another writer committed"))
	}}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 1000, MaxBytes: 1 << 30, RetryBackoff: time.Millisecond}, quiet(), nil)
	err := runPipeline(t, p, txnAt(1, ins(u(1, "eu", "a"))))
	if !cdcsync.IsPermanent(err) || !errors.Is(err, ErrCommit) {
		t.Fatalf("err = %v, want a permanent commit error", err)
	}
	if sink.attempts["shop.users@1"] != 1 || len(sink.checkpoints) != 0 {
		t.Fatalf("attempts %v checkpoints %v: a permanent failure must not retry or checkpoint", sink.attempts, sink.checkpoints)
	}
}

func TestPipelineCommitsOpenEpochOnShutdown(t *testing.T) {
	sink := &memSink{}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 1000, MaxBytes: 1 << 30}, quiet(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan *cdcsync.Txn, 1)
	ch <- txnAt(1, ins(u(1, "eu", "a")))
	done := make(chan error)
	go func() { done <- p.Run(ctx, ch) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sink.commits) != "[shop.users@1]" || fmt.Sprint(sink.checkpoints) != "[1]" {
		t.Fatalf("commits %v checkpoints %v: the open epoch must be committed on shutdown", sink.commits, sink.checkpoints)
	}
}

// interruptSink is a memSink whose commit of epoch block (if any) waits
// for Interrupt, and whose commits after Interrupt fail as a sink's that
// must rebuild a key index first: with cdcsync.ErrInterrupted.
type interruptSink struct {
	memSink
	block       int64
	committing  chan struct{} // closed when the commit of block starts
	interrupted chan struct{}
	once        sync.Once
}

func (s *interruptSink) Interrupt() { s.once.Do(func() { close(s.interrupted) }) }

func (s *interruptSink) Commit(ctx context.Context, id cdcsync.TableID, d cdcsync.Delta) error {
	if d.Epoch == s.block {
		close(s.committing)
		<-s.interrupted
	}
	select {
	case <-s.interrupted:
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.attempts == nil {
			s.attempts = map[string]int{}
		}
		s.attempts[fmt.Sprintf("%s@%d", id, d.Epoch)]++
		return fmt.Errorf("rebuild the key index: %w", cdcsync.ErrInterrupted)
	default:
	}
	return s.memSink.Commit(ctx, id, d)
}

// TestPipelineShutdownInterruptsCommits: a shutdown interrupts the work
// of a sink's commits that it need not wait for. The pipeline then stops
// cleanly without retrying, checkpointing or committing anything after
// the interrupted epoch: the epoch in flight when the signal came, or the
// open one committed on the way out.
func TestPipelineShutdownInterruptsCommits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		block   int64 // the epoch in flight at the shutdown; 0: none
		commits string
		ckpts   string
	}{
		{"the epoch in flight", 1, "[]", "[]"},
		{"the open epoch", 0, "[shop.users@1]", "[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &interruptSink{block: tc.block, committing: make(chan struct{}), interrupted: make(chan struct{})}
			p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
				Options{Order: order, Interval: 200 * time.Millisecond, MaxRows: 1000, MaxBytes: 1 << 30, RetryBackoff: time.Millisecond}, quiet(), nil)
			ctx, cancel := context.WithCancel(context.Background())
			ch := make(chan *cdcsync.Txn, 2)
			ch <- txnAt(1, ins(u(1, "eu", "a")))
			done := make(chan error)
			go func() { done <- p.Run(ctx, ch) }()
			if tc.block != 0 {
				<-sink.committing
			} else {
				waitFor(t, "epoch 1 to commit", func() bool {
					sink.mu.Lock()
					defer sink.mu.Unlock()
					return len(sink.checkpoints) == 1
				})
			}
			ch <- txnAt(2, ins(u(2, "eu", "b"))) // the open epoch
			waitFor(t, "the second transaction to be read", func() bool { return p.LastSeen().After(time.Time{}) && len(ch) == 0 })
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("the pipeline stopped with %v; an interrupted commit is a clean stop", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the pipeline did not stop")
			}
			sink.mu.Lock()
			defer sink.mu.Unlock()
			if fmt.Sprint(sink.commits) != tc.commits || fmt.Sprint(sink.checkpoints) != tc.ckpts {
				t.Errorf("commits %v checkpoints %v; want %s and %s", sink.commits, sink.checkpoints, tc.commits, tc.ckpts)
			}
			for k, n := range sink.attempts {
				if n != 1 {
					t.Errorf("%s was tried %d times: an interrupted commit is not retried", k, n)
				}
			}
		})
	}
}

func TestPipelineCheckpointsTransactionsOfOtherTables(t *testing.T) {
	sink := &memSink{}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 1000, MaxBytes: 1 << 30}, quiet(), nil)
	if err := runPipeline(t, p, txnAt(1), txnAt(2)); err != nil {
		t.Fatal(err)
	}
	if len(sink.commits) != 0 || fmt.Sprint(sink.checkpoints) != "[1]" || sink.positions[0] != mariaPos(2) {
		t.Fatalf("commits %v checkpoints %v %v", sink.commits, sink.checkpoints, sink.positions)
	}
}

// TestCheckpointStaysBeforeAPreparedXA: while an XA transaction is prepared
// (its rows held by the reader until its XA COMMIT), the checkpoint is the
// position before its PREPARE, so that a restart reads the PREPARE again;
// once it is committed the checkpoint moves on.
func TestCheckpointStaysBeforeAPreparedXA(t *testing.T) {
	sink := &memSink{}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 1, MaxBytes: 1 << 30, CommitConcurrency: 1}, quiet(), nil)
	prepared := txnAt(2) // the PREPARE group: no changes
	prepared.Resume = mariaPos(1)
	during := txnAt(3, ins(u(1, "eu", "a")))
	during.Resume = mariaPos(1)
	committed := txnAt(4, ins(u(2, "eu", "b"))) // the XA COMMIT, with its rows
	if err := runPipeline(t, p, txnAt(1, ins(u(3, "eu", "c"))), prepared, during, committed); err != nil {
		t.Fatal(err)
	}
	want := []cdcsync.Position{mariaPos(1), mariaPos(1), mariaPos(4)}
	if fmt.Sprint(sink.positions) != fmt.Sprint(want) {
		t.Fatalf("checkpoints at %v, want %v", sink.positions, want)
	}
}

// TestFailedTransactionIsNotHalfCommitted: when a change of a transaction
// cannot be applied, the open epoch, which holds the transaction's earlier
// changes, is not committed; the epochs sealed before it are.
func TestFailedTransactionIsNotHalfCommitted(t *testing.T) {
	sink := &memSink{}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 2, MaxBytes: 1 << 30, CommitConcurrency: 1}, quiet(), nil)
	bad := cdcsync.Change{Table: users.ID, Op: cdcsync.OpInsert, After: cdcsync.Row{int64(9)}} // too few columns
	err := runPipeline(t, p,
		txnAt(1, ins(u(1, "eu", "a")), ins(u(2, "eu", "b"))), // epoch 1, sealed by rows
		txnAt(2, ins(u(3, "eu", "c")), bad),
	)
	if err == nil {
		t.Fatal("Run accepted a row with too few columns")
	}
	if fmt.Sprint(sink.commits) != "[shop.users@1]" || len(sink.positions) != 1 || sink.positions[0] != mariaPos(1) {
		t.Fatalf("commits %v, checkpoints at %v: only epoch 1 may be committed, not the first row of the failed transaction", sink.commits, sink.positions)
	}
}

// order orders the MariaDB positions of the tests.
var order = binlogpos.Order{}
