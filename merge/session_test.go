package merge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// The session's decisions (where each table resumes, what is copied
// afresh, where the stream starts, what is refused) against a source and
// a lake in memory. The daemon's integration tests run the same code
// against MariaDB and Iceberg.

type fakeSource struct {
	in      Inspection
	missing map[cdcsync.Position]string // position -> why the source lost it
	spec    *StreamSpec                 // what the stream was asked for
	awaited []string
}

func (f *fakeSource) Inspect(context.Context) (*Inspection, error) { in := f.in; return &in, nil }
func (f *fakeSource) History(context.Context) (History, error)     { return f, nil }
func (f *fakeSource) Order() cdcsync.Order                         { return order }
func (f *fakeSource) Missing(pos cdcsync.Position) (string, error) {
	return f.missing[pos], nil
}
func (f *fakeSource) AwaitPrepared(_ context.Context, xids []string) error {
	f.awaited = xids
	return nil
}
func (f *fakeSource) Chunks() (ChunkSource, func()) { return emptyChunks{}, func() {} }
func (f *fakeSource) Stream(_ context.Context, spec StreamSpec, _ chan<- *cdcsync.Txn) error {
	f.spec = &spec
	return nil
}

type emptyChunks struct{}

func (emptyChunks) Estimate(context.Context, *cdcsync.TableSchema) (int64, error) { return 0, nil }
func (emptyChunks) NextBound(context.Context, *cdcsync.TableSchema, string, int) (string, bool, error) {
	return "", true, nil
}
func (emptyChunks) ReadChunk(context.Context, *cdcsync.TableSchema, string, string, bool) ([]cdcsync.Row, cdcsync.Position, error) {
	return nil, cdcsync.Position{}, errors.New("no chunks in this test")
}

type fakeLake struct {
	mu       sync.Mutex
	ckpt     *cdcsync.Checkpoint
	saved    []cdcsync.Checkpoint
	tables   map[cdcsync.TableID]*fakeTable
	departed []*fakeTable
}

type fakeTable struct {
	schema    *cdcsync.TableSchema
	committed cdcsync.Committed
	stop      *cdcsync.StopInfo
	recopy    bool
	copies    []string // "epoch@position" of each StartCopy (the position encoded)
}

func (l *fakeLake) Check(context.Context) error { return nil }
func (l *fakeLake) LoadCheckpoint(context.Context) (cdcsync.Checkpoint, bool, error) {
	if l.ckpt == nil {
		return cdcsync.Checkpoint{}, false, nil
	}
	return *l.ckpt, true, nil
}
func (l *fakeLake) SaveCheckpoint(_ context.Context, c cdcsync.Checkpoint) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.saved = append(l.saved, c)
	return nil
}
func (l *fakeLake) TableExists(_ context.Context, id cdcsync.TableID) (bool, error) {
	return l.tables[id] != nil, nil
}
func (l *fakeLake) Table(_ context.Context, s *cdcsync.TableSchema) (LakeTable, error) {
	if t := l.tables[s.ID]; t != nil {
		return t, nil
	}
	t := &fakeTable{schema: s}
	l.tables[s.ID] = t
	return t, nil
}
func (l *fakeLake) Departed(context.Context, map[cdcsync.TableID]bool) ([]LakeTable, error) {
	var out []LakeTable
	for _, t := range l.departed {
		out = append(out, t)
	}
	return out, nil
}
func (l *fakeLake) Recopy(_ context.Context, t LakeTable, s *cdcsync.TableSchema) (LakeTable, error) {
	ft := t.(*fakeTable)
	ft.schema, ft.recopy = s, false
	return ft, nil
}
func (l *fakeLake) Sink(map[cdcsync.TableID]LakeTable) Sink { return &memSink{} }

func (t *fakeTable) Schema() *cdcsync.TableSchema          { return t.schema }
func (t *fakeTable) Committed() (cdcsync.Committed, error) { return t.committed, nil }
func (t *fakeTable) Stopped() (cdcsync.StopInfo, bool) {
	if t.stop == nil {
		return cdcsync.StopInfo{}, false
	}
	return *t.stop, true
}
func (t *fakeTable) StoppedMessage(info cdcsync.StopInfo) string { return "stopped: " + info.Reason }
func (t *fakeTable) NeedsRecopy() bool                           { return t.recopy }
func (t *fakeTable) StartCopy(_ context.Context, epoch int64, pos cdcsync.Position) error {
	t.copies = append(t.copies, fmt.Sprintf("%d@%s", epoch, pos.Encode()))
	return nil
}
func (t *fakeTable) SchemaPos() cdcsync.Position          { return t.committed.Pos }
func (t *fakeTable) Shadows() ([]cdcsync.ShadowAt, error) { return nil, nil }
func (t *fakeTable) ForeignKeys() (cdcsync.TableKeys, bool, error) {
	return cdcsync.TableKeys{}, true, nil
}
func (t *fakeTable) SetForeignKeys(context.Context, int64, cdcsync.TableKeys) error {
	return nil
}

func streaming(t *testing.T, committed cdcsync.Position, epoch int64) *fakeTable {
	t.Helper()
	return &fakeTable{committed: cdcsync.Committed{Found: true, Epoch: epoch, Pos: committed}}
}

func runSession(t *testing.T, src *fakeSource, lk *fakeLake, recopyLost bool) error {
	t.Helper()
	for _, s := range src.in.Schemas {
		if ft := lk.tables[s.ID]; ft != nil && ft.schema == nil {
			ft.schema = s
		}
	}
	return RunSession(context.Background(), src, lk, SessionOptions{
		Pipeline:   Options{Order: order, Interval: time.Hour, MaxRows: 1000, MaxBytes: 1 << 30},
		RecopyLost: recopyLost, Log: quiet(),
	})
}

func newSessionEnv(tables ...*cdcsync.TableSchema) (*fakeSource, *fakeLake) {
	src := &fakeSource{in: Inspection{Server: "db:3306", Schemas: tables, Horizon: mariaPos(100), KeysLogged: true}}
	return src, &fakeLake{tables: map[cdcsync.TableID]*fakeTable{}}
}

// A new pipeline copies every table from the horizon, checkpoints there
// before anything else, and streams from there.
func TestSessionNewPipelineCopiesFromTheHorizon(t *testing.T) {
	src, lk := newSessionEnv(users, orders)
	src.in.PreparedXA = []string{"x1"}
	if err := runSession(t, src, lk, false); err != nil {
		t.Fatal(err)
	}
	for _, id := range []cdcsync.TableID{users.ID, orders.ID} {
		if got := lk.tables[id].copies; !slices.Equal(got, []string{"1@" + mariaPos(100).Encode()}) {
			t.Errorf("%s: copies %v, want one at the horizon as epoch 1", id, got)
		}
	}
	if len(lk.saved) == 0 || lk.saved[0].Pos != mariaPos(100) || lk.saved[0].Epoch != 1 {
		t.Errorf("first checkpoint %+v, want epoch 1 at the horizon", lk.saved)
	}
	if src.spec == nil || src.spec.Start != mariaPos(100) {
		t.Fatalf("stream spec %+v, want a start at the horizon", src.spec)
	}
	if !slices.Equal(src.awaited, []string{"x1"}) {
		t.Errorf("awaited XA %v: copies must wait for the transactions prepared at the horizon", src.awaited)
	}
}

// A table behind the checkpoint (its catalog restored from a backup) is
// replayed from its own position: the stream starts there, not at the
// checkpoint, and nothing is copied.
func TestSessionStartsAtTheOldestTable(t *testing.T) {
	src, lk := newSessionEnv(users, orders)
	lk.ckpt = &cdcsync.Checkpoint{Epoch: 9, Pos: mariaPos(50)}
	lk.tables[users.ID] = streaming(t, mariaPos(50), 9)
	lk.tables[orders.ID] = streaming(t, mariaPos(20), 4)
	if err := runSession(t, src, lk, false); err != nil {
		t.Fatal(err)
	}
	if src.spec.Start != mariaPos(20) {
		t.Errorf("start %s, want %s: orders is behind the checkpoint", src.spec.Start, mariaPos(20))
	}
	if src.spec.Committed[orders.ID] != mariaPos(20) || src.spec.Committed[users.ID] != mariaPos(50) {
		t.Errorf("committed %v", src.spec.Committed)
	}
	for id, ft := range lk.tables {
		if len(ft.copies) > 0 {
			t.Errorf("%s copied %v", id, ft.copies)
		}
	}
}

// A table whose position the source lost fails the session, naming the
// table and the fixes; with RecopyLost it is copied again from the
// horizon while the other streams on.
func TestSessionLostPosition(t *testing.T) {
	for _, recopy := range []bool{false, true} {
		src, lk := newSessionEnv(users, orders)
		src.missing = map[cdcsync.Position]string{mariaPos(20): "binlog purged"}
		lk.ckpt = &cdcsync.Checkpoint{Epoch: 9, Pos: mariaPos(50)}
		lk.tables[users.ID] = streaming(t, mariaPos(50), 9)
		lk.tables[orders.ID] = streaming(t, mariaPos(20), 4)
		err := runSession(t, src, lk, recopy)
		if !recopy {
			if !errors.Is(err, cdcsync.ErrPositionLost) || !strings.Contains(err.Error(), "shop.orders") ||
				!strings.Contains(err.Error(), "on_position_lost: recopy") || src.spec != nil {
				t.Fatalf("err = %v (streamed %v), want ErrPositionLost naming shop.orders and the fixes, before streaming", err, src.spec != nil)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := lk.tables[orders.ID].copies; !slices.Equal(got, []string{"10@" + mariaPos(100).Encode()}) {
			t.Errorf("orders copies %v, want one at the horizon", got)
		}
		if len(lk.tables[users.ID].copies) > 0 || src.spec.Start != mariaPos(50) {
			t.Errorf("users copied %v, start %s: users streams on from the checkpoint", lk.tables[users.ID].copies, src.spec.Start)
		}
	}
}

// A stopped table stays stopped: the stream passes it over and it is not
// mirrored; a global check failure ends the session before the lake is
// touched; a table failing a check before the first checkpoint too.
func TestSessionStoppedAndFailedChecks(t *testing.T) {
	src, lk := newSessionEnv(users, orders)
	lk.ckpt = &cdcsync.Checkpoint{Epoch: 3, Pos: mariaPos(50)}
	lk.tables[users.ID] = streaming(t, mariaPos(50), 3)
	lk.tables[orders.ID] = streaming(t, mariaPos(30), 2)
	lk.tables[orders.ID].stop = &cdcsync.StopInfo{Position: mariaPos(30), Reason: "a zero date"}
	if err := runSession(t, src, lk, false); err != nil {
		t.Fatal(err)
	}
	if !src.spec.Stopped[orders.ID] || src.spec.Schemas[orders.ID] != nil || src.spec.Start != mariaPos(50) {
		t.Errorf("spec %+v: orders must be stopped and not streamed, from the checkpoint", src.spec)
	}

	src, lk = newSessionEnv(users)
	src.in.Global, src.in.Failures = true, []string{"binlog_format is STATEMENT; set ROW"}
	if err := runSession(t, src, lk, false); err == nil || !strings.Contains(err.Error(), "binlog_format is STATEMENT") || len(lk.tables) > 0 {
		t.Errorf("err = %v, tables %v: a global failure ends the session first", err, lk.tables)
	}

	src, lk = newSessionEnv(users, orders)
	src.in.Failures = []string{"shop.orders has no primary key"}
	src.in.Failed = map[cdcsync.TableID][]string{orders.ID: src.in.Failures}
	if err := runSession(t, src, lk, false); err == nil || !strings.Contains(err.Error(), "no primary key") {
		t.Errorf("err = %v: before the first checkpoint a table's failed check ends the session", err)
	}
}
