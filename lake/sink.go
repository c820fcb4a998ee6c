package lake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/lease"
	"github.com/cdcsync/cdcsync/metrics"
)

// Sink is the lake as the pipeline sees it: the tables of one session,
// committed, changed and maintained (it implements merge.Sink and the
// optional interfaces merge looks for: DDLSink, CopySink, Maintainer,
// RowFinder, DeleteColumner). It maps lake errors to the pipeline's kinds
// (cdcsync.Permanent, cdcsync.StopTable, cdcsync.ErrRestart) and applies
// the DDL policy where Iceberg refuses a change.
type Sink struct {
	lake  *Lake
	m     *metrics.Metrics
	maint *Maintainer
	// tables changes on schema changes and stops, which the pipeline
	// applies from its reading goroutine or (a stop at commit) from its
	// committing one while the reader looks tables up.
	mu     sync.RWMutex
	tables map[cdcsync.TableID]*Table
	// indexSeen are the key index counts already published, per table.
	indexSeen map[cdcsync.TableID]IndexCounts
	// interrupt is closed by Interrupt: the pipeline stops.
	interrupt     chan struct{}
	interruptOnce sync.Once
}

// NewSink returns the sink of a session's tables, and publishes their
// file and snapshot counts to m.
func (l *Lake) NewSink(tables map[cdcsync.TableID]*Table, m *metrics.Metrics, maint *Maintainer) *Sink {
	s := &Sink{lake: l, tables: tables, m: m, maint: maint, indexSeen: map[cdcsync.TableID]IndexCounts{}, interrupt: make(chan struct{})}
	for id := range tables {
		s.observe(id)
	}
	l.sink.Store(s)
	return s
}

// holdCommits waits for the commits to table id (epochs, compaction) to
// pause, and returns what resumes them. A commit that comes meanwhile
// waits, and a compaction run that holds the lock yields as to an epoch.
func (s *Sink) holdCommits(id cdcsync.TableID) (resume func()) {
	t := s.table(id)
	if t == nil {
		return func() {}
	}
	t.state.epochsWaiting.Add(1)
	t.state.commitMu.Lock()
	t.state.epochsWaiting.Add(-1)
	return t.state.commitMu.Unlock
}

// table returns a table of the session, nil when it has none (any more).
func (s *Sink) table(id cdcsync.TableID) *Table {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tables[id]
}

// RowsWhere reads a table's committed rows for the foreign-key cascades
// of merge.
func (s *Sink) RowsWhere(ctx context.Context, id cdcsync.TableID, cols []int, vals [][]any) ([]cdcsync.Row, error) {
	t := s.table(id)
	if t == nil {
		return nil, fmt.Errorf("%s is not a mirrored table", id)
	}
	return t.RowsWhere(ctx, cols, vals)
}

func (s *Sink) Commit(ctx context.Context, id cdcsync.TableID, d cdcsync.Delta) error {
	t := s.table(id)
	if t == nil {
		return cdcsync.Permanent(fmt.Errorf("a commit to %s, which has no Iceberg table in this session", id))
	}
	err := t.Commit(ctx, Epoch{Number: d.Epoch, From: d.From, Pos: d.Pos, SourceTime: d.Time, Spill: d.Spill, Interrupt: s.interrupt}, d.Deletes, d.Rows, d.Copy)
	switch {
	case final(err):
		return cdcsync.Permanent(err)
	case errors.Is(err, ErrValue):
		return cdcsync.StopTable(err)
	}
	if err == nil {
		s.observe(id)
		if times := t.LastCommitTimes(); times.Epoch == d.Epoch {
			s.lake.log.Debug("table committed", append([]any{"table", id.String(), "epoch", d.Epoch}, times.attrs()...)...)
			if s.m != nil {
				for phase, took := range times.phases() {
					s.m.CommitPhase.WithLabelValues(phase).Observe(took.Seconds())
				}
			}
		}
		state := metrics.StateStreaming
		if d.Copy != nil && !d.Copy.Done {
			state = metrics.StateCopying
		}
		s.m.SetTableState(id.String(), state)
	}
	return err
}

// Interrupt makes the commits under way and to come give up bringing a
// key index to their table (merge.Interrupter): a rebuild reads the whole
// table, which a shutdown must not wait for.
func (s *Sink) Interrupt() { s.interruptOnce.Do(func() { close(s.interrupt) }) }

// Spill writes part of table's share of the open epoch before its commit
// (merge.Spiller).
func (s *Sink) Spill(ctx context.Context, id cdcsync.TableID, spill int64, deletes, rows []cdcsync.Row) error {
	t := s.table(id)
	if t == nil {
		return cdcsync.Permanent(fmt.Errorf("a spill of %s, which has no Iceberg table in this session", id))
	}
	err := t.Spill(ctx, spill, deletes, rows)
	if final(err) {
		return cdcsync.Permanent(err)
	}
	return err
}

// Abandon removes what Spill wrote for spill (merge.Spiller).
func (s *Sink) Abandon(ctx context.Context, id cdcsync.TableID, spill int64) {
	if t := s.table(id); t != nil {
		t.Abandon(ctx, spill)
	}
}

// SpillHolds reports what spill holds of table (merge.Spiller).
func (s *Sink) SpillHolds(id cdcsync.TableID, spill int64, keys [][]byte) (bool, []bool, error) {
	t := s.table(id)
	if t == nil {
		return false, make([]bool, len(keys)), nil
	}
	return t.SpillHolds(spill, keys)
}

// Maintain runs the maintenance due for the tables of the epoch while the
// pipeline goes on committing epochs (Table serializes their catalog
// commits).
func (s *Sink) Maintain(ctx context.Context, _ int64, ids []cdcsync.TableID) error {
	reps, err := s.maint.Maintain(ctx, s.maintainable(ids))
	return s.recordMaintenance(reps, err)
}

// MaintainIdle compacts tables no epoch changed for a while until nothing
// is due (merge.IdleMaintainer).
func (s *Sink) MaintainIdle(ctx context.Context, ids []cdcsync.TableID) error {
	reps, err := s.maint.MaintainIdle(ctx, s.maintainable(ids))
	return s.recordMaintenance(reps, err)
}

// maintainable returns the tables of ids that maintenance may touch.
func (s *Sink) maintainable(ids []cdcsync.TableID) []*Table {
	var tables []*Table
	for _, id := range ids {
		// A table being copied gets large files without deletes; compacting
		// it before the copy ends would rewrite the same rows again and again.
		if t := s.table(id); t != nil && t.Copying() == nil {
			tables = append(tables, t)
		}
	}
	return tables
}

// recordMaintenance publishes what maintenance did in the metrics.
func (s *Sink) recordMaintenance(reps []MaintenanceReport, err error) error {
	for i, rep := range reps {
		name := rep.Table.String()
		result := "ok"
		switch {
		case err != nil && i == len(reps)-1:
			result = "failed"
		case rep.Task == "compaction" && !rep.Compaction.Committed(),
			rep.Task == "expiry" && rep.Expiry.Expired == 0,
			rep.Task == "orphans" && rep.Orphans.Deleted == 0:
			result = "noop"
		}
		s.m.MaintenanceRuns.WithLabelValues(name, rep.Task, result).Inc()
		s.m.MaintenanceSeconds.WithLabelValues(rep.Task).Observe(rep.Duration.Seconds())
		switch rep.Task {
		case "compaction":
			if c := rep.Compaction; c.Committed() {
				s.m.CompactionLast.WithLabelValues(name).Set(float64(time.Now().Unix()))
				s.m.CompactionLastSecs.WithLabelValues(name).Set(c.Duration.Seconds())
				s.m.CompactionBytes.WithLabelValues(name).Add(float64(c.BytesBefore))
				s.m.DeleteFilesCompacted.WithLabelValues(name).Add(float64(c.RemovedDeletes))
			}
		case "expiry":
			s.m.SnapshotsExpired.WithLabelValues(name).Add(float64(rep.Expiry.Expired))
		case "orphans":
			s.m.OrphanFilesDeleted.WithLabelValues(name).Add(float64(rep.Orphans.Deleted))
		}
		if s.table(rep.Table) != nil {
			s.observe(rep.Table)
		}
	}
	return err
}

// DeleteColumns says which columns a table's equality deletes need
// (merge.DeleteColumner).
func (s *Sink) DeleteColumns(id cdcsync.TableID) []int {
	if t := s.table(id); t != nil {
		return t.DeleteColumns()
	}
	return nil
}

// observe publishes a table's file and snapshot counts.
func (s *Sink) observe(id cdcsync.TableID) {
	t := s.table(id)
	if t == nil {
		return
	}
	st := t.Stats()
	name := id.String()
	s.m.TableDataFiles.WithLabelValues(name).Set(float64(st.DataFiles))
	s.m.TableDeleteFiles.WithLabelValues(name).Set(float64(st.DeleteFiles))
	s.m.TableDeleteRows.WithLabelValues(name).Set(float64(st.DeleteRows))
	s.m.TableRecords.WithLabelValues(name).Set(float64(st.Records))
	s.m.TableAvgFileBytes.WithLabelValues(name).Set(st.AvgFileBytes())
	s.m.TableSnapshots.WithLabelValues(name).Set(float64(st.Snapshots))
	s.m.TableStagedRows.WithLabelValues(name).Set(float64(t.StagedRows()))
	s.m.TableLastCommit.WithLabelValues(name).SetToCurrentTime()
	if c, ok := t.IndexCounts(); ok {
		s.mu.Lock()
		seen := s.indexSeen[id]
		s.indexSeen[id] = c
		s.mu.Unlock()
		if c.Rebuilds < seen.Rebuilds || c.Replayed < seen.Replayed || c.ReplayReads < seen.ReplayReads {
			seen = IndexCounts{} // the table was opened again
		}
		s.m.KeyIndexRebuilds.WithLabelValues(name).Add(float64(c.Rebuilds - seen.Rebuilds))
		s.m.KeyIndexRebuildRows.WithLabelValues(name).Add(float64(c.RebuildRows - seen.RebuildRows))
		s.m.KeyIndexReplayed.WithLabelValues(name).Add(float64(c.Replayed - seen.Replayed))
		s.m.KeyIndexReplayReads.WithLabelValues(name).Add(float64(c.ReplayReads - seen.ReplayReads))
	}
	if s.lake.keys != nil {
		s.m.KeyIndexDiskBytes.Set(float64(s.lake.keys.Stats().DiskBytes))
	}
	s.m.ManifestCacheBytes.Set(float64(s.lake.entries.Used()))
	s.m.ManifestCacheLimit.Set(float64(s.lake.entries.Limit()))
}

// StartCopy empties a table and starts its copy afresh (merge.CopySink).
func (s *Sink) StartCopy(ctx context.Context, id cdcsync.TableID, epoch int64, pos cdcsync.Position) error {
	t := s.table(id)
	if t == nil {
		return fmt.Errorf("%s has no Iceberg table in this session", id)
	}
	err := t.StartCopy(ctx, Epoch{Number: epoch, Pos: pos})
	if final(err) {
		return cdcsync.Permanent(err)
	}
	return err
}

// ApplyDDL applies one schema change to its Iceberg table (merge.DDLSink).
func (s *Sink) ApplyDDL(ctx context.Context, epoch int64, pos cdcsync.Position, ch *cdcsync.SchemaChange) error {
	t := s.table(ch.Table)
	if t == nil {
		return cdcsync.Permanent(fmt.Errorf("a %s change of %s, which has no Iceberg table in this session", ch.Kind, ch.Table))
	}
	log := s.lake.log
	dropped, err := s.lake.ApplyChange(ctx, t, Epoch{Number: epoch, Pos: pos}, ch)
	if errors.Is(err, ErrIncompatible) && (ch.Kind == cdcsync.ChangeSchema || ch.Kind == cdcsync.ChangeRename) {
		// Iceberg refuses the change (a partition source column dropped, a
		// rename onto an existing table): the table stops, the others go on.
		// NewID stays set, so the pipeline drops the changes of the new name.
		*ch = cdcsync.SchemaChange{Table: ch.Table, Kind: cdcsync.ChangeStop, Statement: ch.Statement, NewID: ch.NewID,
			Reason: fmt.Sprintf("Iceberg refuses the schema change: %v", err)}
		dropped, err = s.lake.ApplyChange(ctx, t, Epoch{Number: epoch, Pos: pos}, ch)
	}
	if err != nil {
		if final(err) || errors.Is(err, ErrIncompatible) {
			return cdcsync.Permanent(err)
		}
		return err
	}
	switch ch.Kind {
	case cdcsync.ChangeSchema:
		log.Info("schema change applied", "table", ch.Table.String(), "position", pos.String(), "statement", abbreviate(ch.Statement, 300))
	case cdcsync.ChangeTruncate:
		log.Info("table truncated", "table", ch.Table.String(), "position", pos.String())
	case cdcsync.ChangeForeignKeys:
		if ch.KeysUnknown {
			log.Info("the foreign keys of a mirrored table changed in a way cdcsync reads from MySQL: the next session reads them",
				"table", ch.Table.String(), "position", pos.String(), "statement", abbreviate(ch.Statement, 300))
		} else {
			log.Info("foreign keys changed", "table", ch.Table.String(), "position", pos.String(), "keys", len(ch.ForeignKeys),
				"statement", abbreviate(ch.Statement, 300))
		}
	case cdcsync.ChangeRename:
		s.mu.Lock()
		delete(s.tables, ch.Table)
		s.tables[ch.NewID] = t
		s.mu.Unlock()
	case cdcsync.ChangeDrop:
		s.forget(ch.Table)
		if !dropped {
			info, _ := t.Stopped()
			log.Warn(s.lake.StoppedMessage(t, info), "table", ch.Table.String(), "position", pos.String())
		}
	case cdcsync.ChangeStop:
		s.forget(ch.Table)
		info, _ := t.Stopped()
		log.Error(s.lake.StoppedMessage(t, info), "table", ch.Table.String(), "position", pos.String())
	case cdcsync.ChangeRecopy:
		s.forget(ch.Table)
		return fmt.Errorf("%w: %s must be copied again at %s (ddl.incompatible: recopy): %s", cdcsync.ErrRestart, ch.Table, pos, ch.Reason)
	}
	return nil
}

// forget removes a table that is not mirrored any more from the session.
func (s *Sink) forget(id cdcsync.TableID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tables, id)
}

// StoppedMessage says why a table is not mirrored any more and how to
// resume it.
func (l *Lake) StoppedMessage(t *Table, info cdcsync.StopInfo) string {
	return l.stoppedMessage(t.ID, t.Ident, info)
}

func (l *Lake) stoppedMessage(id cdcsync.TableID, iceberg table.Identifier, info cdcsync.StopInfo) string {
	ident := strings.Join(iceberg, ".")
	if info.Dropped {
		return fmt.Sprintf("%s was dropped in MySQL at %s; its Iceberg table %s keeps the rows it had then and is no longer mirrored "+
			"(ddl.drop_table: keep). If a table of that name exists again, drop the Iceberg table %s and restart cdcsync to copy and mirror it",
			id, info.Position, ident, ident)
	}
	msg := fmt.Sprintf("cdcsync stopped mirroring %s at binlog position %s: %s", id, info.Position, info.Reason)
	if info.Statement != "" {
		msg += fmt.Sprintf(" (statement %q)", abbreviate(info.Statement, 300))
	}
	msg += fmt.Sprintf(". The other tables go on. The Iceberg table %s keeps the rows it had before that position. To mirror the table again, ", ident)
	if info.NoRecopy {
		msg += "change the MySQL table so that cdcsync can map it (or exclude it in source.include), then "
	}
	msg += fmt.Sprintf("drop the Iceberg table %s (DROP TABLE in Spark or Trino, or through the catalog) and restart cdcsync, which copies it afresh", ident)
	if !info.NoRecopy && l.opts.Tables.IncompatiblePolicy(id.Database, id.Table) != config.DDLRecopy {
		msg += "; or set ddl_incompatible: recopy for it under tables: (or ddl.incompatible: recopy) so that cdcsync copies such tables again by itself"
	}
	return msg
}

// SaveCheckpoint records pos with every table's last committed epoch (see
// Checkpoint.Holds). The pipeline calls it once the commits of the epoch
// and of every epoch before it are done, and before any schema change. A
// table carried over may be committing a later epoch meanwhile: it is
// recorded at that one or the one before, either at or after pos.
func (s *Sink) SaveCheckpoint(ctx context.Context, epoch int64, pos cdcsync.Position) error {
	c := cdcsync.Checkpoint{Epoch: epoch, Pos: pos, Time: time.Now()}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for id, t := range s.tables {
		if tc, err := t.Committed(); err == nil && tc.Found {
			c.Tables = append(c.Tables, cdcsync.TableEpoch{Table: id, Epoch: tc.Epoch})
		}
	}
	if err := s.lake.SaveCheckpoint(ctx, c); err != nil {
		return err
	}
	s.lake.tagScheduledCut(ctx, epoch)
	return nil
}

// final says a commit error ends the session: another writer's snapshot
// is in the way, or this process lost the pipeline's lease. Retrying could
// only stage on top of what the other writer committed.
func final(err error) bool {
	return errors.Is(err, ErrConflict) || errors.Is(err, lease.ErrLost)
}
