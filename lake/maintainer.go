package lake

// Table maintenance: compaction, snapshot expiry and orphan cleanup.
//
// The daemon runs maintenance in the background next to the epochs (see
// merge.Maintainer). A task commits under the table's commit lock (a
// compaction of a table that cannot rebase deletes holds it from its plan
// on), through the same cached *table.Table, and leaves the new one in
// place, so the next epoch commit's AssertRefSnapshotID still holds. Maintenance
// snapshots never carry the cdcsync.pipeline / cdcsync.epoch summary keys:
// committedIn passes over them to the last epoch commit.

import (
	"context"
	"log/slog"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

// Maintainer schedules the maintenance of the daemon's tables. AfterCommit
// is called after an epoch commit of a table and runs one task at most (two
// when one would starve), so that each run is a bounded piece of work next
// to the epochs, which wait for it only while it holds the table's commit
// lock. A task is due:
//
//   - compaction, when every_epochs of the table's epochs have passed since
//     the last one and a threshold is reached;
//   - snapshot expiry, at most once per every_epochs epochs, when some
//     snapshot is old enough;
//   - orphan cleanup, ten minutes into the session (orphans.interval if
//     shorter) and then every orphans.interval.
//
// Compaction goes first when it is due, which keeps delete files under the
// threshold; expiry and orphan cleanup take turns in the other epochs, and
// run after a compaction when compaction was due five times in a row while
// they waited.
type Maintainer struct {
	cfg   config.Maintenance
	log   *slog.Logger
	fault func(string)
	dir   string
	state map[cdcsync.TableID]*maintState
	turn  int // rotates the order of the tables in Maintain
	// firstOrphans is how long after a table's first epoch of the session
	// its first orphan cleanup waits: a restart is followed by a catch-up,
	// the daemon's busiest time, and the cleanup reads every manifest of
	// every snapshot (on a finely partitioned table 2 to 9 s of a core,
	// and the epochs next to it took twice as long). Nothing is lost by
	// waiting: only files older than orphans.min_age go.
	firstOrphans time.Duration
}

// firstOrphansDelay is Maintainer.firstOrphans, unless orphans.interval is
// shorter.
const firstOrphansDelay = 10 * time.Minute

type maintState struct {
	sinceCompaction, sinceExpiry int
	lastOrphans                  time.Time
	last                         string // the last expiry or orphans task run
	starved                      int    // calls in a row where compaction went before a due expiry or orphan cleanup
}

// maxStarved is how many calls in a row compaction may go alone while an
// expiry or orphan cleanup is due; the next call runs both.
const maxStarved = 5

// MaintenanceReport says what AfterCommit did. Task is "" when nothing was
// due.
type MaintenanceReport struct {
	Table      cdcsync.TableID
	Task       string // "compaction", "expiry" or "orphans"
	Compaction CompactResult
	Expiry     ExpireResult
	Orphans    OrphanResult
	Duration   time.Duration
}

// NewMaintainer returns the scheduler for cfg; fault is called at the
// maintenance fault points (tests only; may be nil).
func (l *Lake) NewMaintainer(cfg config.Maintenance, fault func(string)) *Maintainer {
	return &Maintainer{cfg: cfg, log: l.log, fault: fault, dir: l.pipelineDir(), state: map[cdcsync.TableID]*maintState{},
		firstOrphans: min(firstOrphansDelay, cfg.Orphans.Interval.Duration)}
}

// Maintain runs what is due for the tables of one epoch (see AfterCommit).
// Their compactions share maintenance.compaction.max_bytes: once the
// epoch's compactions have rewritten that much, the other tables' wait for a
// later epoch (they stay due). The tables are taken in turn, starting one
// further at every call, so that none waits for ever. It stops at the first
// error.
func (m *Maintainer) Maintain(ctx context.Context, tables []*Table) ([]MaintenanceReport, error) {
	if !m.cfg.Enabled || len(tables) == 0 {
		return nil, nil
	}
	m.turn++
	budget := m.cfg.Compaction.MaxBytes.Int64()
	var reps []MaintenanceReport
	for i := range tables {
		t := tables[(i+m.turn)%len(tables)]
		if ctx.Err() != nil {
			return reps, ctx.Err()
		}
		r, err := m.afterCommit(ctx, t, budget)
		for _, rep := range r {
			budget -= rep.Compaction.BytesBefore
		}
		reps = append(reps, r...)
		if err != nil {
			return reps, err
		}
	}
	return reps, nil
}

// MaintainIdle maintains tables that no epoch changed for
// maintenance.idle_after: the load moved to other tables, or stopped after
// a backlog (during which maintenance waits). Their maintenance would wait
// for epochs that may not come, and their readers keep paying for the
// files the backlog left, so each is compacted until nothing is due (one
// run after another, each bounded by compaction.max_files and max_bytes,
// at most maxIdleRuns), whatever every_epochs says, and gets the expiry or
// orphan cleanup whose turn it is.
func (m *Maintainer) MaintainIdle(ctx context.Context, tables []*Table) ([]MaintenanceReport, error) {
	if !m.cfg.Enabled {
		return nil, nil
	}
	var reps []MaintenanceReport
	for _, t := range tables {
		began, runs := time.Now(), 0
		for range maxIdleRuns {
			st := m.stateOf(t)
			// afterCommit counts one more epoch: the compaction is due.
			st.sinceCompaction = max(st.sinceCompaction, m.cfg.EveryEpochs-1)
			r, err := m.afterCommit(ctx, t, m.cfg.Compaction.MaxBytes.Int64())
			reps = append(reps, r...)
			if err != nil || ctx.Err() != nil {
				return reps, err
			}
			more := false
			for _, rep := range r {
				if rep.Task == "compaction" && rep.Compaction.Committed() {
					runs++
					more = more || rep.Compaction.Deferred > 0
				}
			}
			if !more {
				break
			}
		}
		st := t.Stats()
		m.log.Info("idle table maintained", "table", t.ID.String(), "compactions", runs, "data_files", st.DataFiles,
			"delete_files", st.DeleteFiles, "seconds", time.Since(began).Seconds())
	}
	return reps, nil
}

// maxIdleRuns bounds the compactions in a row of one idle table.
const maxIdleRuns = 100

func (m *Maintainer) stateOf(t *Table) *maintState {
	st := m.state[t.ID]
	if st == nil {
		st = &maintState{sinceCompaction: m.cfg.EveryEpochs, sinceExpiry: m.cfg.EveryEpochs,
			lastOrphans: time.Now().Add(m.firstOrphans - m.cfg.Orphans.Interval.Duration)} // first due firstOrphans from now
		m.state[t.ID] = st
	}
	return st
}

// AfterCommit runs the table's maintenance that is due: usually one task or
// none; a compaction and then a starved expiry or orphan cleanup at most.
func (m *Maintainer) AfterCommit(ctx context.Context, t *Table) ([]MaintenanceReport, error) {
	return m.afterCommit(ctx, t, m.cfg.Compaction.MaxBytes.Int64())
}

// afterCommit is AfterCommit with budget bytes left for compaction; with
// none left, compaction waits for a later epoch.
func (m *Maintainer) afterCommit(ctx context.Context, t *Table, budget int64) ([]MaintenanceReport, error) {
	if !m.cfg.Enabled {
		return nil, nil
	}
	st := m.stateOf(t)
	st.sinceCompaction++
	st.sinceExpiry++
	opts := CompactOptionsFrom(&m.cfg)
	opts.Fault = m.fault
	opts.MaxBytes = budget
	var other string // the due expiry or orphan cleanup whose turn it is
	others := []string{"expiry", "orphans"}
	if st.last == "expiry" {
		others = []string{"orphans", "expiry"}
	}
	for _, task := range others {
		due := false
		switch task {
		case "expiry":
			due = st.sinceExpiry >= m.cfg.EveryEpochs && t.ExpiryDue(m.cfg.Snapshots.MaxAge.Duration, m.cfg.Snapshots.MinKeep)
		case "orphans":
			due = time.Since(st.lastOrphans) >= m.cfg.Orphans.Interval.Duration
		}
		if due {
			other = task
			break
		}
	}
	var tasks []string
	if budget > 0 && st.sinceCompaction >= m.cfg.EveryEpochs && t.CompactionDue(opts) {
		tasks = append(tasks, "compaction")
		if other != "" {
			st.starved++
			if st.starved > maxStarved {
				tasks = append(tasks, other)
			}
		}
	} else if other != "" {
		tasks = append(tasks, other)
	}
	var reps []MaintenanceReport
	for _, task := range tasks {
		if task != "compaction" {
			st.last, st.starved = task, 0
		}
		rep, err := m.run(ctx, t, st, task, opts)
		reps = append(reps, rep)
		if err != nil || ctx.Err() != nil {
			return reps, err
		}
	}
	return reps, nil
}

func (m *Maintainer) run(ctx context.Context, t *Table, st *maintState, task string, opts CompactOptions) (rep MaintenanceReport, err error) {
	rep.Table, rep.Task = t.ID, task
	began := time.Now()
	defer func() { rep.Duration = time.Since(began) }()
	switch task {
	case "compaction":
		st.sinceCompaction = 0
		before := t.Stats()
		r, err := t.Compact(ctx, opts)
		rep.Compaction = r
		if err != nil {
			return rep, err
		}
		if r.Committed() {
			m.log.Info("table compacted", "table", t.ID.String(), "rewritten_files", r.RewrittenFiles, "written_files", r.AddedFiles,
				"bytes_read", r.BytesBefore, "bytes_written", r.BytesAfter, "delete_files_before", before.DeleteFiles,
				"delete_files_after", r.DeleteFilesAfter, "deferred_files", r.Deferred, "manifests_before", r.ManifestsBefore,
				"manifests_after", r.ManifestsAfter, "yielded_to_epoch", r.Yielded, "seconds", r.Duration.Seconds(),
				"planning_seconds", r.Planning.Seconds(), "rewriting_seconds", r.Rewriting.Seconds(),
				"locked_seconds", r.Locked.Seconds(), "rebased_deletes", r.Rebased)
		}
	case "expiry":
		st.sinceExpiry = 0
		r, err := t.ExpireSnapshots(ctx, m.cfg.Snapshots.MaxAge.Duration, m.cfg.Snapshots.MinKeep, m.fault)
		rep.Expiry = r
		if err != nil {
			return rep, err
		}
		m.log.Info("snapshots expired", "table", t.ID.String(), "expired", r.Expired, "snapshots_left", len(t.current().Metadata().Snapshots()),
			"seconds", r.Duration.Seconds())
	case "orphans":
		st.lastOrphans = time.Now()
		r, err := t.RemoveOrphans(ctx, m.cfg.Orphans.MinAge.Duration, m.dir)
		rep.Orphans = r
		if err != nil {
			return rep, err
		}
		msg := "orphan files removed"
		if r.Deleted == 0 {
			// Logged too: the scan reads every manifest of every snapshot,
			// and the epochs committing meanwhile share the CPU with it.
			msg = "no orphan files found"
		}
		m.log.Info(msg, "table", t.ID.String(), "files", r.Deleted, "bytes", r.Bytes, "seconds", r.Duration.Seconds())
	}
	return rep, nil
}
