package lake

import (
	"context"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/merge"
	"github.com/cdcsync/cdcsync/metrics"
)

// SessionLake is the lake as a session sees it (merge.Lake): its tables
// come as SessionTables, and its sink maintains them and publishes their
// metrics.
type SessionLake struct {
	l *Lake
	m *metrics.Metrics
	// fault is the testing hook of Table.BeforeCommit and maintenance
	// (CDCSYNC_FAULT); nil in production.
	fault func(string)
}

// ForSession returns l as a session's lake.
func (l *Lake) ForSession(m *metrics.Metrics, fault func(string)) *SessionLake {
	if fault == nil {
		fault = func(string) {}
	}
	l.indexFault = fault
	return &SessionLake{l: l, m: m, fault: fault}
}

// Check says whether the catalog and the warehouse answer.
func (s *SessionLake) Check(ctx context.Context) error { return s.l.Check(ctx) }

// LoadCheckpoint returns the pipeline's newest checkpoint.
func (s *SessionLake) LoadCheckpoint(ctx context.Context) (cdcsync.Checkpoint, bool, error) {
	return s.l.LoadCheckpoint(ctx)
}

// SaveCheckpoint records c.
func (s *SessionLake) SaveCheckpoint(ctx context.Context, c cdcsync.Checkpoint) error {
	return s.l.SaveCheckpoint(ctx, c)
}

// TableExists says whether the table has an Iceberg table.
func (s *SessionLake) TableExists(ctx context.Context, id cdcsync.TableID) (bool, error) {
	return s.l.TableExists(ctx, id)
}

// Table opens (or creates) the Iceberg table of ts.
func (s *SessionLake) Table(ctx context.Context, ts *cdcsync.TableSchema) (merge.LakeTable, error) {
	t, err := s.l.EnsureTable(ctx, ts)
	if err != nil {
		return nil, err
	}
	return s.wrap(t), nil
}

// Departed returns the pipeline's tables that present lacks.
func (s *SessionLake) Departed(ctx context.Context, present map[cdcsync.TableID]bool) ([]merge.LakeTable, error) {
	ts, err := s.l.Departed(ctx, present)
	if err != nil {
		return nil, err
	}
	out := make([]merge.LakeTable, len(ts))
	for i, t := range ts {
		out[i] = s.wrap(t)
	}
	return out, nil
}

// Recopy prepares t to be copied again under ts (PrepareRecopy).
func (s *SessionLake) Recopy(ctx context.Context, t merge.LakeTable, ts *cdcsync.TableSchema) (merge.LakeTable, error) {
	n, err := s.l.PrepareRecopy(ctx, t.(*SessionTable).t, ts)
	if err != nil {
		return nil, err
	}
	return s.wrap(n), nil
}

// Sink returns the sink of the session's tables (Sink).
func (s *SessionLake) Sink(tables map[cdcsync.TableID]merge.LakeTable) merge.Sink {
	ts := make(map[cdcsync.TableID]*Table, len(tables))
	for id, t := range tables {
		ts[id] = t.(*SessionTable).t
	}
	s.l.cleanSpills(context.Background(), ts)
	s.l.dropUnusedIndexes(ts)
	return s.l.NewSink(ts, s.m, s.l.NewMaintainer(s.l.opts.Maintenance, s.fault))
}

func (s *SessionLake) wrap(t *Table) *SessionTable {
	// A point per table too, so that a test can hold one table's commit.
	at := "before-commit@" + t.ID.String()
	t.BeforeCommit = func() {
		s.fault("before-commit")
		s.fault(at)
	}
	return &SessionTable{l: s.l, t: t}
}

// SessionTable is a Table as a session sees it (merge.LakeTable).
type SessionTable struct {
	l *Lake
	t *Table
}

// Schema is the table's MySQL schema as of SchemaPos.
func (s *SessionTable) Schema() *cdcsync.TableSchema { return s.t.Schema }

// Committed is the table's last commit of this pipeline.
func (s *SessionTable) Committed() (cdcsync.Committed, error) { return s.t.Committed() }

// Stopped says why cdcsync stopped mirroring the table, if it did.
func (s *SessionTable) Stopped() (cdcsync.StopInfo, bool) { return s.t.Stopped() }

// StoppedMessage says why the table is not mirrored and how to resume it.
func (s *SessionTable) StoppedMessage(info cdcsync.StopInfo) string {
	return s.l.StoppedMessage(s.t, info)
}

// NeedsRecopy says the table is marked to be copied again.
func (s *SessionTable) NeedsRecopy() bool {
	_, ok := s.t.NeedsRecopy()
	return ok
}

// StartCopy empties the table and starts its copy at pos.
func (s *SessionTable) StartCopy(ctx context.Context, epoch int64, pos cdcsync.Position) error {
	return s.t.StartCopy(ctx, Epoch{Number: epoch, Pos: pos})
}

// SchemaPos is the position the table's schema is as of.
func (s *SessionTable) SchemaPos() cdcsync.Position { return s.t.SchemaPos() }

// Shadows are the shadow tables remembered with the table.
func (s *SessionTable) Shadows() ([]cdcsync.ShadowAt, error) {
	sh, err := s.t.Shadows()
	if err != nil {
		return nil, err
	}
	out := make([]cdcsync.ShadowAt, len(sh))
	for i, x := range sh {
		out[i] = cdcsync.ShadowAt{Base: s.t.ID, Shadow: x.Shadow, Pos: x.Pos}
	}
	return out, nil
}

// ForeignKeys are the keys recorded with the table.
func (s *SessionTable) ForeignKeys() (cdcsync.TableKeys, bool, error) {
	k, pos, ok, err := s.t.ForeignKeys()
	return cdcsync.TableKeys{Keys: k, Pos: pos}, ok, err
}

// SetForeignKeys records the table's keys as of keys.Pos.
func (s *SessionTable) SetForeignKeys(ctx context.Context, epoch int64, keys cdcsync.TableKeys) error {
	return s.t.SetForeignKeys(ctx, Epoch{Number: epoch, Pos: keys.Pos}, keys.Keys)
}
