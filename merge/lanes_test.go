package merge

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// slowT is a second table shaped like users, whose commits a laneSink
// can hold.
var slowT = &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "slow"}, Columns: users.Columns, PrimaryKey: []int{0}}

func sIns(r cdcsync.Row) cdcsync.Change {
	return cdcsync.Change{Table: slowT.ID, Op: cdcsync.OpInsert, After: r}
}

func sUpd(b, a cdcsync.Row) cdcsync.Change {
	return cdcsync.Change{Table: slowT.ID, Op: cdcsync.OpUpdate, Before: b, After: a}
}

// commitRec is one table commit as a laneSink saw it.
type commitRec struct {
	table       cdcsync.TableID
	epoch, from int64
	pos         cdcsync.Position
}

// laneSink records every commit with its epoch span, and holds the first
// commit of slowT until release is closed.
type laneSink struct {
	*spillSink
	entered, release chan struct{}
	once             sync.Once
	lmu              sync.Mutex
	recs             []commitRec
}

func newLaneSink() *laneSink {
	return &laneSink{spillSink: newSpillSink(), entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *laneSink) Commit(ctx context.Context, id cdcsync.TableID, d cdcsync.Delta) error {
	if id == slowT.ID {
		held := false
		s.once.Do(func() { held = true; close(s.entered) })
		if held {
			<-s.release
		}
	}
	if err := s.spillSink.Commit(ctx, id, d); err != nil {
		return err
	}
	s.lmu.Lock()
	s.recs = append(s.recs, commitRec{table: id, epoch: d.Epoch, from: d.From, pos: d.Pos})
	s.lmu.Unlock()
	return nil
}

func (s *laneSink) commitsOf(id cdcsync.TableID) []commitRec {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	var out []commitRec
	for _, r := range s.recs {
		if r.table == id {
			out = append(out, r)
		}
	}
	return out
}

// seqOf is the transaction number of a test position.
func seqOf(t *testing.T, p cdcsync.Position) int {
	t.Helper()
	s := p.String()
	n, err := strconv.Atoi(s[strings.LastIndexByte(s, '-')+1:])
	if err != nil {
		t.Fatalf("position %s: %v", p, err)
	}
	return n
}

// checkCuts checks that the state at every checkpoint is a consistent cut:
// for its epoch E and position P, no table's commit of an epoch up to E
// holds a transaction after P, and the first commit after E of each table
// holds no transaction of E or before (cut's rule, lake/cut.go).
func checkCuts(t *testing.T, sink *laneSink, tables ...cdcsync.TableID) {
	t.Helper()
	sink.memSink.mu.Lock()
	epochs, positions := append([]int64(nil), sink.checkpoints...), append([]cdcsync.Position(nil), sink.positions...)
	sink.memSink.mu.Unlock()
	for i, e := range epochs {
		p := seqOf(t, positions[i])
		for _, id := range tables {
			for _, r := range sink.commitsOf(id) {
				if r.epoch <= e && seqOf(t, r.pos) > p {
					t.Errorf("checkpoint of epoch %d at %d: %s's commit of epoch %d holds transactions up to %d", e, p, id, r.epoch, seqOf(t, r.pos))
				}
				if r.epoch > e {
					if r.from != 0 && r.from <= e {
						t.Errorf("checkpoint of epoch %d: %s's next commit (epoch %d) spans epochs from %d", e, id, r.epoch, r.from)
					}
					break
				}
			}
		}
	}
}

// One table whose commit is slow (a finely partitioned table) does not
// hold the others back: while its commit of epoch 1 is held, the other
// table commits an epoch each interval, the slow table's changes are
// carried over, and it commits them all once free, recording the epochs
// its commit spans. The checkpoint never passes a carried change, every
// checkpoint is a consistent cut, and both tables end equal to the source.
// Before, every table waited for the slowest (issue 23).
func TestSlowTableDoesNotHoldOthersBack(t *testing.T) {
	sink := newLaneSink()
	p := New(sink, []Table{{Schema: users}, {Schema: slowT}}, 1, mariaPos(0),
		Options{Order: order, Interval: 5 * time.Millisecond, MaxRows: 1 << 20, MaxBytes: 1 << 20, CommitConcurrency: 4, SlowCommit: time.Hour}, quiet(), nil)
	ch := make(chan *cdcsync.Txn)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), ch) }()
	ch <- txnAt(1, ins(u(1, "eu", "a")), sIns(u(1, "eu", "s1")))
	<-sink.entered
	wantU, wantS := map[int64]string{1: "a"}, map[int64]string{1: "s1"}
	seq := 1
	send := func(changes ...cdcsync.Change) {
		seq++
		select {
		case ch <- txnAt(seq, changes...):
		case <-time.After(5 * time.Second):
			t.Fatalf("the pipeline stopped reading at transaction %d", seq)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(sink.commitsOf(users.ID)) < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("users committed %v while shop.slow's commit of epoch 1 was held: one slow table held the others back", sink.commitsOf(users.ID))
		}
		k := int64(seq%7 + 1)
		name := fmt.Sprintf("n%d", seq)
		if seq%3 == 0 {
			// Transactions that change both tables.
			send(ins(u(100+int64(seq), "eu", name)), sIns(u(100+int64(seq), "eu", name)))
			wantU[100+int64(seq)-1], wantS[100+int64(seq)-1] = name, name
		} else {
			send(upd(u(k, "eu", wantU[k]), u(k, "eu", name)))
			wantU[k] = name
		}
		time.Sleep(2 * time.Millisecond)
	}
	sink.memSink.mu.Lock()
	held := append([]int64(nil), sink.checkpoints...)
	sink.memSink.mu.Unlock()
	if len(held) > 0 {
		t.Errorf("checkpoints %v were saved while epoch 1 of shop.slow was not committed", held)
	}
	close(sink.release)
	send(sUpd(u(1, "eu", "s1"), u(1, "eu", "s2")))
	wantS[1] = "s2"
	close(ch)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sink.rows[users.ID]) != fmt.Sprint(wantU) {
		t.Errorf("users %v, want %v", sink.rows[users.ID], wantU)
	}
	if fmt.Sprint(sink.rows[slowT.ID]) != fmt.Sprint(wantS) {
		t.Errorf("slow %v, want %v", sink.rows[slowT.ID], wantS)
	}
	slow := sink.commitsOf(slowT.ID)
	if len(slow) < 2 || slow[1].from == 0 || slow[1].from >= slow[1].epoch {
		t.Errorf("shop.slow's commits %+v: the one after the held commit must record the epochs it spans", slow)
	}
	for _, id := range []cdcsync.TableID{users.ID, slowT.ID} {
		cs := sink.commitsOf(id)
		if !sort.SliceIsSorted(cs, func(i, j int) bool { return cs[i].epoch < cs[j].epoch }) {
			t.Errorf("%s committed epochs out of order: %+v", id, cs)
		}
	}
	sink.memSink.mu.Lock()
	ckpts := fmt.Sprint(sink.checkpoints)
	sink.memSink.mu.Unlock()
	if !sort.SliceIsSorted(sink.checkpoints, func(i, j int) bool { return sink.checkpoints[i] < sink.checkpoints[j] }) {
		t.Errorf("checkpoints %s out of order", ckpts)
	}
	if p.Committed() != mariaPos(seq) {
		t.Errorf("committed %v, want %v", p.Committed(), mariaPos(seq))
	}
	checkCuts(t, sink, users.ID, slowT.ID)
}

// After a restart, a table that committed epochs past the checkpoint
// passes over what it holds, and the others' commits of those
// transactions record that they span the epochs after the checkpoint: a
// cut of one of them would have the first table's share without theirs.
func TestRestartMarksLateCommits(t *testing.T) {
	sink := newLaneSink()
	close(sink.release)
	// users committed up to transaction 4 in epochs 4 and 5 before the
	// crash; slow up to the checkpoint (epoch 3, transaction 2) only.
	p := New(sink, []Table{{Schema: users, Committed: mariaPos(4)}, {Schema: slowT, Committed: mariaPos(2)}}, 6, mariaPos(2),
		Options{Order: order, Interval: time.Hour, MaxRows: 1 << 20, MaxBytes: 1 << 20, CommitConcurrency: 4, CheckpointEpoch: 3}, quiet(), nil)
	err := runPipeline(t, p,
		txnAt(3, ins(u(3, "eu", "c")), sIns(u(3, "eu", "c"))),
		txnAt(4, ins(u(4, "eu", "d")), sIns(u(4, "eu", "d"))),
		txnAt(5, ins(u(5, "eu", "e")), sIns(u(5, "eu", "e"))),
	)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(sink.commitsOf(users.ID)[0].from, sink.commitsOf(slowT.ID)[0].from)
	if got != "0 4" {
		t.Fatalf("epoch spans (users, slow) %s; want 0 (users committed only new transactions) and 4 (slow committed those of epochs 4 and 5 late)", got)
	}
	if fmt.Sprint(sink.rows[users.ID]) != "map[5:e]" || fmt.Sprint(sink.rows[slowT.ID]) != "map[3:c 4:d 5:e]" {
		t.Fatalf("rows %v %v", sink.rows[users.ID], sink.rows[slowT.ID])
	}
}

// While one table's commit takes many intervals, the epochs the others
// commit meanwhile wait to finish in order; past maxEpochsInFlight of
// them every table waits, so the epochs held do not grow without bound.
func TestCarryIsBounded(t *testing.T) {
	sink := newLaneSink()
	p := New(sink, []Table{{Schema: users}, {Schema: slowT}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Millisecond, MaxRows: 1 << 20, MaxBytes: 1 << 20, CommitConcurrency: 4, SlowCommit: time.Hour}, quiet(), nil)
	ch := make(chan *cdcsync.Txn)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), ch) }()
	ch <- txnAt(1, ins(u(1, "eu", "a")), sIns(u(1, "eu", "s")))
	<-sink.entered
	for seq := 2; seq <= 400; seq++ {
		ch <- txnAt(seq, ins(u(int64(seq), "eu", "x")))
		time.Sleep(500 * time.Microsecond)
	}
	n := len(sink.commitsOf(users.ID))
	close(sink.release)
	close(ch)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n < 10 || n > maxEpochsInFlight {
		t.Errorf("users committed %d epochs while shop.slow's commit was held; want some, at most %d", n, maxEpochsInFlight)
	}
	if len(sink.rows[users.ID]) != 400 {
		t.Errorf("users has %d rows, want 400", len(sink.rows[users.ID]))
	}
	checkCuts(t, sink, users.ID, slowT.ID)
}
