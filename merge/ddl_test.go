package merge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// ddlSink records commits and schema changes in one log.
type ddlSink struct {
	memSink
	log     []string
	rows    map[string]int // table@epoch -> values per row of the last row committed
	restart bool
	changes []appliedChange
}

type appliedChange struct {
	ch cdcsync.SchemaChange
	at cdcsync.Position
}

func (s *ddlSink) Commit(ctx context.Context, id cdcsync.TableID, d cdcsync.Delta) error {
	epoch, rows := d.Epoch, d.Rows
	if err := s.memSink.Commit(ctx, id, d); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, fmt.Sprintf("commit %s@%d", id.Table, epoch))
	if len(rows) > 0 {
		if s.rows == nil {
			s.rows = map[string]int{}
		}
		s.rows[fmt.Sprintf("%s@%d", id.Table, epoch)] = len(rows[len(rows)-1])
	}
	return nil
}

func (s *ddlSink) SaveCheckpoint(ctx context.Context, epoch int64, pos cdcsync.Position) error {
	s.mu.Lock()
	s.log = append(s.log, fmt.Sprintf("checkpoint %d", epoch))
	s.mu.Unlock()
	return s.memSink.SaveCheckpoint(ctx, epoch, pos)
}

func (s *ddlSink) ApplyDDL(_ context.Context, epoch int64, pos cdcsync.Position, ch *cdcsync.SchemaChange) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, fmt.Sprintf("%s %s@%d", ch.Kind, ch.Table.Table, epoch))
	s.changes = append(s.changes, appliedChange{*ch, pos})
	if ch.Kind == cdcsync.ChangeRecopy && s.restart {
		return fmt.Errorf("%w: copy %s again", cdcsync.ErrRestart, ch.Table)
	}
	return nil
}

func TestDDLIsABarrier(t *testing.T) {
	sink := &ddlSink{}
	p := New(sink, []Table{{Schema: users}, {Schema: orders}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 1000, MaxBytes: 1 << 30, CommitConcurrency: 1}, quiet(), nil)
	wider := &cdcsync.TableSchema{ID: users.ID, Columns: append(append([]cdcsync.Column{}, users.Columns...),
		cdcsync.Column{Name: "age", Kind: cdcsync.KindInt32, Nullable: true}), PrimaryKey: []int{0}}
	alter := txnAt(3)
	alter.DDL = []cdcsync.SchemaChange{{Table: users.ID, Kind: cdcsync.ChangeSchema, Schema: wider,
		Sources: []cdcsync.ColumnSource{{From: "id"}, {From: "region"}, {From: "name"}, {}}, Fills: make([]any, 4)}}
	err := runPipeline(t, p,
		txnAt(1, ins(u(1, "eu", "a"))),
		txnAt(2, cdcsync.Change{Table: orders.ID, Op: cdcsync.OpInsert, After: cdcsync.Row{"x", int32(1), "1.00"}}),
		alter,
		txnAt(4, ins(cdcsync.Row{int64(2), "eu", "b", int32(40)})),
	)
	if err != nil {
		t.Fatal(err)
	}
	// Epoch 1 (txns 1-2) commits before the change, which takes epoch 2;
	// the rows after it commit in epoch 3 with four columns.
	want := "commit orders@1 commit users@1 checkpoint 1 schema users@2 commit users@3 checkpoint 3"
	if got := strings.Join(sink.log, " "); got != want {
		t.Fatalf("log\n got %s\nwant %s", got, want)
	}
	if sink.rows["users@3"] != 4 {
		t.Errorf("rows after the change have %d values", sink.rows["users@3"])
	}
	if sink.positions[len(sink.positions)-1] != mariaPos(4) {
		t.Errorf("last checkpoint at %v", sink.positions)
	}
}

func TestDDLStopDropsTheTable(t *testing.T) {
	sink := &ddlSink{}
	p := New(sink, []Table{{Schema: users}, {Schema: orders}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 1000, MaxBytes: 1 << 30, CommitConcurrency: 1}, quiet(), nil)
	stop := txnAt(2, cdcsync.Change{Table: orders.ID, Op: cdcsync.OpInsert, After: cdcsync.Row{"x", int32(1), "1.00"}})
	stop.DDL = []cdcsync.SchemaChange{{Table: users.ID, Kind: cdcsync.ChangeStop, Reason: "test"}}
	err := runPipeline(t, p,
		txnAt(1, ins(u(1, "eu", "a"))),
		stop,
		txnAt(3, cdcsync.Change{Table: orders.ID, Op: cdcsync.OpInsert, After: cdcsync.Row{"y", int32(2), "2.00"}}),
		// A later schema change of the stopped table is not applied.
		func() *cdcsync.Txn {
			x := txnAt(4)
			x.DDL = []cdcsync.SchemaChange{{Table: users.ID, Kind: cdcsync.ChangeTruncate}}
			return x
		}(),
	)
	if err != nil {
		t.Fatal(err)
	}
	want := "commit users@1 checkpoint 1 stop users@2 commit orders@3 checkpoint 3 checkpoint 4"
	if got := strings.Join(sink.log, " "); got != want {
		t.Fatalf("log\n got %s\nwant %s", got, want)
	}
}

func TestDDLRecopyRestarts(t *testing.T) {
	sink := &ddlSink{restart: true}
	p := New(sink, []Table{{Schema: users}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 1000, MaxBytes: 1 << 30, CommitConcurrency: 1}, quiet(), nil)
	x := txnAt(2)
	x.DDL = []cdcsync.SchemaChange{{Table: users.ID, Kind: cdcsync.ChangeRecopy}}
	err := runPipeline(t, p, txnAt(1, ins(u(1, "eu", "a"))), x, txnAt(3, ins(u(2, "eu", "b"))))
	if !errors.Is(err, cdcsync.ErrRestart) {
		t.Fatalf("err = %v, want ErrRestart", err)
	}
	if got := strings.Join(sink.log, " "); got != "commit users@1 checkpoint 1 recopy users@2" {
		t.Fatalf("log %s", got)
	}
}

// A table whose share of an epoch the sink refuses for good (a value
// Iceberg cannot hold) stops, persisted as a stop at the position before
// the epoch, and nothing of the epoch lands in it; the other tables commit
// the epoch and go on, and the daemon does not exit.
func TestCommitStopsOnlyTheTableTheSinkRefuses(t *testing.T) {
	sink := &ddlSink{}
	sink.fail = func(id cdcsync.TableID, _ int64, _ int) error {
		if id == users.ID {
			return cdcsync.StopTable(errors.New("the row with primary key (id=1) has a value the Iceberg column name cannot hold"))
		}
		return nil
	}
	p := New(sink, []Table{{Schema: users}, {Schema: orders}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 2, MaxBytes: 1 << 30, CommitConcurrency: 1, RetryBackoff: time.Millisecond}, quiet(), nil)
	order := func(id string) cdcsync.Change {
		return cdcsync.Change{Table: orders.ID, Op: cdcsync.OpInsert, After: cdcsync.Row{id, int32(1), "1.00"}}
	}
	err := runPipeline(t, p,
		txnAt(1, ins(u(1, "eu", "a")), order("x")),
		txnAt(2, ins(u(2, "eu", "b")), order("y")),
		txnAt(3, ins(u(3, "eu", "c"))),
	)
	if err != nil {
		t.Fatalf("run: %v; a table the sink refuses must not stop the pipeline", err)
	}
	// Commits of different epochs overlap (commit lanes), and when epoch
	// 2 seals while orders@1 still commits, orders' changes are carried
	// over into epoch 3, so epoch 2 moves no checkpoint of its own. What
	// must hold whatever the timing: orders commits both epochs in order,
	// users is stopped once and never committed, the stop is recorded
	// before the first checkpoint, and checkpoints only advance, to 3.
	log := sink.log
	got := strings.Join(log, " ")
	at := func(entry string) int { return slices.Index(log, entry) }
	var ckpts []string
	for _, e := range log {
		if strings.HasPrefix(e, "checkpoint") {
			ckpts = append(ckpts, e)
		}
		if strings.HasPrefix(e, "commit users") {
			t.Errorf("log %q: users was committed after the sink refused it", got)
		}
	}
	switch {
	case at("commit orders@1") < 0 || at("commit orders@2") < at("commit orders@1"):
		t.Errorf("log %q: want orders@1, then orders@2 committed", got)
	case strings.Count(got, "stop users@1") != 1 || at("stop users@1") > at("checkpoint 1"):
		t.Errorf("log %q: want users stopped once, before checkpoint 1", got)
	case at("checkpoint 1") < 0 || ckpts[len(ckpts)-1] != "checkpoint 3" || !slices.IsSorted(ckpts):
		t.Errorf("log %q: want checkpoints from 1 up to 3, in order", got)
	}
	if len(sink.changes) != 1 || sink.changes[0].at != mariaPos(0) || !sink.changes[0].ch.NoRecopy ||
		!strings.Contains(sink.changes[0].ch.Reason, "id=1") || !strings.Contains(sink.changes[0].ch.Reason, mariaPos(1).String()) {
		t.Fatalf("stops %+v: want one at the position before the epoch, naming the row and the epoch's end", sink.changes)
	}
	if p.Committed() != mariaPos(3) {
		t.Fatalf("committed %v, want %v", p.Committed(), mariaPos(3))
	}
}
