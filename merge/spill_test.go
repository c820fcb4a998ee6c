package merge

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// spillSink is a sink that can spill: it keeps each table's rows by key,
// and what each spill wrote until the commit that names it.
type spillSink struct {
	memSink
	mu        sync.Mutex
	rows      map[cdcsync.TableID]map[int64]string
	pending   map[int64]map[cdcsync.TableID][]op
	spills    int
	abandoned int
}

type op struct {
	key  int64
	name string // "" deletes
}

func newSpillSink() *spillSink {
	return &spillSink{rows: map[cdcsync.TableID]map[int64]string{}, pending: map[int64]map[cdcsync.TableID][]op{}}
}

func ops(deletes, rows []cdcsync.Row) []op {
	var out []op
	for _, r := range deletes {
		out = append(out, op{key: r[0].(int64)})
	}
	for _, r := range rows {
		out = append(out, op{key: r[0].(int64), name: r[2].(string)})
	}
	return out
}

func (s *spillSink) Spill(_ context.Context, id cdcsync.TableID, spill int64, deletes, rows []cdcsync.Row) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[spill] == nil {
		s.pending[spill] = map[cdcsync.TableID][]op{}
	}
	s.pending[spill][id] = append(s.pending[spill][id], ops(deletes, rows)...)
	s.spills++
	return nil
}

func (s *spillSink) Abandon(_ context.Context, id cdcsync.TableID, spill int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending[spill], id)
	s.abandoned++
}

func (s *spillSink) SpillHolds(cdcsync.TableID, int64, [][]byte) (bool, []bool, error) {
	return false, nil, nil
}

func (s *spillSink) Commit(ctx context.Context, id cdcsync.TableID, d cdcsync.Delta) error {
	if err := s.memSink.Commit(ctx, id, d); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all := ops(d.Deletes, d.Rows)
	if d.Spill != 0 {
		p, ok := s.pending[d.Spill][id]
		if !ok {
			return fmt.Errorf("commit of %s names spill %d, which holds nothing of it", id, d.Spill)
		}
		all = append(p, all...)
		delete(s.pending[d.Spill], id)
	}
	if s.rows[id] == nil {
		s.rows[id] = map[int64]string{}
	}
	for _, o := range all {
		if o.name == "" {
			delete(s.rows[id], o.key)
		} else {
			s.rows[id][o.key] = o.name
		}
	}
	return nil
}

// frag is a fragment of the transaction seq (more: others follow).
func frag(seq int, more bool, changes ...cdcsync.Change) *cdcsync.Txn {
	t := txnAt(seq, changes...)
	t.Bytes = 100 * len(changes)
	if more {
		t.More, t.Time = true, time.Time{}
		t.Pos = mariaPos(seq - 1) // inside the transaction: after the one before
	}
	return t
}

// A transaction that arrives in fragments larger than the epoch's budget
// is spilled as it comes and committed whole, in one epoch of its own; a
// key it changes in several fragments ends with its last image.
func TestFragmentedTransactionSpillsAndCommitsWhole(t *testing.T) {
	sink := newSpillSink()
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 1 << 20, MaxBytes: 250, CommitConcurrency: 1}, quiet(), nil)
	err := runPipeline(t, p,
		txnAt(1, ins(u(1, "eu", "a"))),
		frag(2, true, ins(u(2, "eu", "b")), ins(u(3, "eu", "c")), upd(u(1, "eu", "a"), u(1, "eu", "a2"))),
		frag(2, true, upd(u(2, "eu", "b"), u(2, "eu", "b2")), ins(u(4, "eu", "d")), del(u(3, "eu", "c"))),
		frag(2, false, upd(u(2, "eu", "b2"), u(2, "eu", "b3")), ins(u(3, "eu", "c2"))),
		txnAt(3, ins(u(5, "eu", "e"))),
	)
	if err != nil {
		t.Fatal(err)
	}
	if sink.spills == 0 {
		t.Fatal("nothing was spilled: the transaction was held in memory")
	}
	// Epoch 1: txn 1, sealed when txn 2 began; epoch 2: txn 2 whole,
	// sealed when it ended (full); epoch 3: txn 3. Or, when epoch 1 was
	// still committing as txn 2 ended, epoch 2 also holds txn 3 (due).
	if c := fmt.Sprint(sink.commits, sink.checkpoints); c != "[shop.users@1 shop.users@2 shop.users@3] [1 2 3]" &&
		c != "[shop.users@1 shop.users@2] [1 2]" {
		t.Fatalf("commits and checkpoints %s", c)
	}
	want := map[int64]string{1: "a2", 2: "b3", 3: "c2", 4: "d", 5: "e"}
	if fmt.Sprint(sink.rows[users.ID]) != fmt.Sprint(want) {
		t.Fatalf("rows %v, want %v", sink.rows[users.ID], want)
	}
	if p.Committed() != mariaPos(3) {
		t.Fatalf("committed %v, want %v", p.Committed(), mariaPos(3))
	}
}

// A pipeline that stops inside a fragmented transaction commits what came
// before it, nothing of it, and removes what it spilled.
func TestStopInsideFragmentedTransaction(t *testing.T) {
	sink := newSpillSink()
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: 10 * time.Millisecond, MaxRows: 1 << 20, MaxBytes: 150, CommitConcurrency: 1}, quiet(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan *cdcsync.Txn, 4)
	ch <- txnAt(1, ins(u(1, "eu", "a")))
	ch <- frag(2, true, ins(u(2, "eu", "b")), upd(u(1, "eu", "a"), u(1, "eu", "a2")))
	ch <- frag(2, true, ins(u(3, "eu", "c")))
	done := make(chan error)
	go func() { done <- p.Run(ctx, ch) }()
	time.Sleep(100 * time.Millisecond) // several intervals: none seals the open transaction
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sink.commits) != "[shop.users@1]" || p.Committed() != mariaPos(1) {
		t.Fatalf("commits %v, committed %v: want the transaction before only", sink.commits, p.Committed())
	}
	if want := map[int64]string{1: "a"}; fmt.Sprint(sink.rows[users.ID]) != fmt.Sprint(want) {
		t.Fatalf("rows %v, want %v", sink.rows[users.ID], want)
	}
	if sink.spills == 0 || sink.abandoned == 0 {
		t.Fatalf("%d spills, %d abandoned: the spilled part must be removed", sink.spills, sink.abandoned)
	}
}

// slowSink holds the commit of epoch 1 until release is closed.
type slowSink struct {
	*spillSink
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *slowSink) Commit(ctx context.Context, id cdcsync.TableID, d cdcsync.Delta) error {
	if d.Epoch == 1 {
		s.once.Do(func() { close(s.entered) })
		<-s.release
	}
	return s.spillSink.Commit(ctx, id, d)
}

// While an epoch's commit is slow (a finely partitioned table, a slow
// object store), the pipeline keeps reading: the next epoch collects
// every transaction meanwhile, writing out what it holds past half of
// epoch.max_bytes, and commits whole once the slow one is done. Before,
// the next seal waited for the commit and reading stopped, long enough
// for the server to drop the binlog connection (issue 23).
func TestSlowCommitKeepsReading(t *testing.T) {
	sink := &slowSink{spillSink: newSpillSink(), entered: make(chan struct{}), release: make(chan struct{})}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: 5 * time.Millisecond, MaxRows: 1 << 20, MaxBytes: 200, CommitConcurrency: 1, SlowCommit: 50 * time.Millisecond}, quiet(), nil)
	ch := make(chan *cdcsync.Txn)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), ch) }()
	ch <- txnAt(1, ins(u(1, "eu", "a")))
	<-sink.entered
	want := map[int64]string{1: "a"}
	for seq := 2; seq <= 200; seq++ {
		key := int64(seq % 37)
		var c cdcsync.Change
		if _, ok := want[key]; ok && seq%5 == 0 {
			c = del(u(key, "eu", want[key]))
			delete(want, key)
		} else if ok {
			name := fmt.Sprintf("n%d", seq)
			c = upd(u(key, "eu", want[key]), u(key, "eu", name))
			want[key] = name
		} else {
			name := fmt.Sprintf("n%d", seq)
			c = ins(u(key, "eu", name))
			want[key] = name
		}
		select {
		case ch <- txnAt(seq, c):
		case <-time.After(5 * time.Second):
			t.Fatalf("the pipeline stopped reading at transaction %d while epoch 1 committed", seq)
		}
	}
	sink.mu.Lock()
	spills := sink.spills
	sink.mu.Unlock()
	close(sink.release)
	close(ch)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if spills == 0 {
		t.Fatal("nothing was spilled while epoch 1 committed: the open epoch grew past epoch.max_bytes in memory")
	}
	if fmt.Sprint(sink.rows[users.ID]) != fmt.Sprint(want) {
		t.Fatalf("rows %v, want %v", sink.rows[users.ID], want)
	}
	if p.Committed() != mariaPos(200) {
		t.Fatalf("committed %v, want %v", p.Committed(), mariaPos(200))
	}
	for i, e := range sink.checkpoints {
		if e != int64(i+1) {
			t.Fatalf("checkpoints %v, want 1, 2, ... in order", sink.checkpoints)
		}
	}
}

// delaySink takes a while over every commit.
type delaySink struct {
	*spillSink
	d time.Duration
}

func (s *delaySink) Commit(ctx context.Context, id cdcsync.TableID, d cdcsync.Delta) error {
	time.Sleep(s.d)
	return s.spillSink.Commit(ctx, id, d)
}

// Commits that take less than Options.SlowCommit (a backlog read faster
// than it commits, the usual catch-up) never make the open epoch spill:
// a full epoch waits for them, as a seal always did, and keeps its rows
// in memory, which costs less than writing them out and looking their
// keys up again.
func TestFastCommitsDoNotSpill(t *testing.T) {
	sink := &delaySink{spillSink: newSpillSink(), d: 20 * time.Millisecond}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Millisecond, MaxRows: 1 << 20, MaxBytes: 200, CommitConcurrency: 1, SlowCommit: 5 * time.Second}, quiet(), nil)
	var txns []*cdcsync.Txn
	for seq := 1; seq <= 300; seq++ {
		txns = append(txns, txnAt(seq, ins(u(int64(seq), "eu", "x"))))
	}
	if err := runPipeline(t, p, txns...); err != nil {
		t.Fatal(err)
	}
	if sink.spills != 0 {
		t.Fatalf("%d spills behind commits of 20ms", sink.spills)
	}
	if n := len(sink.rows[users.ID]); n != 300 {
		t.Fatalf("%d rows, want 300", n)
	}
	if len(sink.checkpoints) < 10 {
		t.Fatalf("%d epochs of 300 transactions of 10 bytes at max_bytes 200", len(sink.checkpoints))
	}
}
