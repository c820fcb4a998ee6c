package lake

// Sequence numbers. An equality delete applies to data files whose data
// sequence number is lower than its own. iceberg-go's RewriteDataFiles and
// RewriteFiles give the rewritten files the sequence number of the rewrite
// snapshot itself unless RewriteFiles.DataSequenceNumber is set (Java uses the
// starting snapshot's number). That is only safe if nothing was committed
// between planning and committing the rewrite: an equality delete committed in
// between has a lower number than the rewritten files and would not apply to
// them, resurrecting the row it deleted. cdcsync pins the rewritten files to
// the sequence number of the snapshot the rewrite read (Java's semantics):
// deletes committed before it are applied while reading, so they are not
// needed any more; deletes committed after it keep applying. The commit also
// asserts the snapshot it read, so in the daemon a rewrite never lands on a
// moved table; `cdcsync compact` (Replay) re-stages it on top of epoch
// commits of this pipeline, which is correct only because of the pinning.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync/config"
)

// Summary keys of maintenance snapshots. They are deliberately not the
// epoch keys, so that committedIn skips maintenance snapshots.
const (
	SummaryMaintenance    = "cdcsync.maintenance"     // the task: "compaction"
	SummaryMaintenanceRun = "cdcsync.maintenance.run" // random id of the run
)

// CompactOptions tune one compaction run.
type CompactOptions struct {
	DeleteFiles    int     // compact a partition with this many delete files
	DeleteRatio    float64 // ... or this many delete rows per data row
	SmallFiles     int     // ... or this many small data files
	SmallFileSize  int64   // a data file below this size is small
	TargetFileSize int64   // size of the files written
	MaxBytes       int64   // data rewritten per run; <= 0 means no limit
	// MaxFiles bounds the data files rewritten per run (<= 0: no limit).
	// In position and dv modes a run holds the table's commit lock, so on
	// a finely partitioned table (thousands of partitions of a file or
	// two each) this is what bounds the time epochs wait for it.
	MaxFiles int
	// MaxLock bounds how long a run holds the commit lock while it
	// rewrites (<= 0: no bound): once it has held it that long it commits
	// what it has rewritten, as when an epoch waits, and leaves the rest to
	// the next run. Without it a run with much to do (staged rows of
	// thousands of partitions) went on until the next epoch came to wait
	// for it, every time (issue 23).
	MaxLock      time.Duration
	MaxManifests int // merge data manifests when there are more manifests than this; <= 0 never
	// Force ignores the thresholds: every partition with deletes or with at
	// least two small files is compacted (cdcsync compact).
	Force bool
	// Replay re-stages the rewrite, once per attempt (3 attempts), when
	// epoch commits of this pipeline landed while it ran (cdcsync compact,
	// which runs next to the daemon). Without it such a rewrite is dropped.
	Replay bool
	// Fault is called at "compaction-planned" after the run's first plan,
	// before it may take the commit lock, at "compaction-group" before
	// each group is rewritten, at "compaction-written", after the new
	// files are written and before the commit lock is taken, at
	// "compaction-rebase-pass" after each pass that rebases the position
	// deletes of the epochs committed until then (rebase.go), at
	// "compaction-rebased" after the last, and at "during-compaction",
	// under the lock before the catalog commit. Tests only.
	Fault func(point string)
}

// CompactOptionsFrom returns the options configured in maintenance.compaction.
func CompactOptionsFrom(m *config.Maintenance) CompactOptions {
	c := &m.Compaction
	return CompactOptions{DeleteFiles: c.DeleteFiles, DeleteRatio: c.DeleteRatio, SmallFiles: c.SmallFiles,
		SmallFileSize: c.SmallFileSize.Int64(), TargetFileSize: c.TargetFileSize.Int64(), MaxBytes: c.MaxBytes.Int64(),
		MaxFiles: c.MaxFiles, MaxManifests: c.MaxManifests, MaxLock: c.MaxLock.Duration}
}

// CompactResult reports what a compaction run did.
type CompactResult struct {
	Partitions     int   // partitions whose files were rewritten
	RewrittenFiles int   // data files replaced
	AddedFiles     int   // data files written
	BytesBefore    int64 // size of the replaced data files
	BytesAfter     int64 // size of the written data files
	RemovedDeletes int   // delete files dropped
	Deferred       int   // candidate files left for a later run by max_bytes, or by a yield
	// Yielded is set when the run stopped early for an epoch commit that
	// waited for the table's commit lock, and committed what it had done.
	Yielded         bool
	ManifestsBefore int
	ManifestsAfter  int
	Snapshot        int64 // the rewrite snapshot; 0 when nothing was committed
	Replays         int   // times the rewrite was re-staged on a moved table
	// StagedMoved counts the staged files the run moved into partitions
	// (staged.go): each partition they went to got a file of its own.
	StagedMoved int
	// Rebased counts the position deletes of epochs committed while the
	// run rewrote their files, carried over to the new files (rebase.go).
	Rebased  int
	Duration time.Duration
	// Planning and Rewriting are the parts of Duration spent before the
	// groups are rewritten and rewriting them (the rest: the commit, the
	// key index, the manifests).
	Planning, Rewriting time.Duration
	// Locked is how long the run held the table's commit lock: what
	// epochs of the table may have waited for it.
	Locked           time.Duration
	DeleteFilesAfter int64
}

// Then returns the result of r and the run next after it, as one.
func (r CompactResult) Then(next CompactResult) CompactResult {
	out := next
	out.Partitions += r.Partitions
	out.RewrittenFiles += r.RewrittenFiles
	out.AddedFiles += r.AddedFiles
	out.BytesBefore += r.BytesBefore
	out.BytesAfter += r.BytesAfter
	out.RemovedDeletes += r.RemovedDeletes
	out.Yielded = r.Yielded || next.Yielded
	out.ManifestsBefore = r.ManifestsBefore
	if next.ManifestsBefore == 0 && next.ManifestsAfter == 0 { // next merged none
		out.ManifestsAfter = r.ManifestsAfter
	}
	if next.Snapshot == 0 {
		out.Snapshot = r.Snapshot
	}
	out.Replays += r.Replays
	out.Rebased += r.Rebased
	out.StagedMoved += r.StagedMoved
	out.Duration += r.Duration
	out.Planning += r.Planning
	out.Rewriting += r.Rewriting
	out.Locked += r.Locked
	return out
}

// Committed reports whether the run committed anything.
func (r CompactResult) Committed() bool {
	return r.Snapshot != 0 || r.ManifestsAfter < r.ManifestsBefore
}

// ErrCompactionConflict reports that the table changed while a compaction
// ran, so the compaction was dropped (nothing is lost: it runs again later).
var ErrCompactionConflict = errors.New("the table changed during compaction")

// partition is one partition's live files as scan planning sees them.
type partition struct {
	key      string
	tasks    []table.FileScanTask
	carries  []bool           // carries[i]: a delete can delete a row of tasks[i]
	retire   bool             // a global delete to retire counts here
	deletes  map[string]int64 // the delete files that count here, with their rows here
	dataRows int64
	small    int
}

func (p *partition) deleteRows() int64 {
	var n int64
	for _, rows := range p.deletes {
		n += rows
	}
	return n
}

func (p *partition) triggered(o *CompactOptions) bool {
	if o.Force || p.retire {
		return len(p.deletes) > 0 || p.small >= 2
	}
	return len(p.deletes) >= o.DeleteFiles ||
		(p.dataRows > 0 && float64(p.deleteRows()) >= o.DeleteRatio*float64(p.dataRows)) ||
		p.small >= o.SmallFiles
}

func seqOf(tk *table.FileScanTask) int64 {
	if tk.DataSequenceNumber != nil {
		return *tk.DataSequenceNumber
	}
	return 0
}

// CompactionDue is a cheap check of the current snapshot's summary: false
// means no partition can have reached a threshold, so planning is not needed.
func (t *Table) CompactionDue(o CompactOptions) bool {
	if t.state.staged.Load() {
		return true // staged rows always move to their partitions
	}
	s := t.Stats()
	return s.DeleteFiles >= int64(o.DeleteFiles) || s.DataFiles >= int64(o.SmallFiles) ||
		(s.Records > 0 && float64(s.DeleteRows) >= o.DeleteRatio*float64(s.Records))
}

// Compact rewrites, in the partitions that reached a threshold, the data
// files that carry deletes or are small, oldest first and up to MaxBytes,
// reading them through a scan that applies every delete; drops the delete
// files that apply to nothing any more; and merges manifests. It commits one
// "replace" snapshot (plus one for the manifests) marked with
// cdcsync.maintenance, never the epoch keys. Epoch commits may run while it
// reads and writes files; its own commit takes the table's commit lock.
func (t *Table) Compact(ctx context.Context, o CompactOptions) (res CompactResult, err error) {
	ctx = t.scope(ctx)
	began := time.Now()
	defer func() { res.Duration = time.Since(began) }()
	held := false
	var lockedAt time.Time
	lock := func() {
		t.state.commitMu.Lock()
		held, lockedAt = true, time.Now()
	}
	// Epochs write position deletes into the files this run rewrites; one
	// landing while it runs would be lost with the old file. Where they
	// cannot be rebased (rebase.go), the run holds the commit lock from its
	// plan to its commit: epochs of this table wait for it, bounded by
	// MaxBytes and by yielding between groups. It plans once before taking
	// the lock, and again under it only if an epoch landed meanwhile (a dv
	// table's plan decodes only the manifests new since the last, plan.go).
	lockAfterPlan := byPosition(t.mode) && !t.rebases()
	release := func() {
		if held {
			held = false
			t.state.commitMu.Unlock()
			res.Locked = time.Since(lockedAt)
		}
	}
	defer release()
	var (
		base   *table.Table
		tasks  []table.FileScanTask
		scope  *deleteScope
		groups []table.CompactionTaskGroup
		merges []posMerge
	)
	plan := func() error {
		base = t.current()
		if base.CurrentSnapshot() == nil {
			return nil
		}
		var err error
		if tasks, err = t.planFiles(ctx, base); err != nil {
			return fmt.Errorf("compact %s: plan files: %w", t.ID, err)
		}
		if scope, err = t.deleteScope(ctx, base, tasks); err != nil {
			return fmt.Errorf("compact %s: %w", t.ID, err)
		}
		if byPosition(t.mode) && !hasEqualityDeletes(tasks) {
			fsys, err := base.FS(ctx)
			if err != nil {
				return fmt.Errorf("compact %s: %w", t.ID, err)
			}
			deleted, err := deletedRows(ctx, fsys, tasks)
			if err != nil {
				return fmt.Errorf("compact %s: count the rows of its position deletes: %w", t.ID, err)
			}
			pp := selectPositionCompaction(tasks, deleted, &o, t.isStaged)
			groups, merges, res.Deferred = pp.groups, pp.merges, pp.deferred
		} else {
			groups, res.Deferred = selectCompaction(tasks, scope, &o)
		}
		return nil
	}
	if err := plan(); err != nil {
		return res, err
	}
	if o.Fault != nil {
		o.Fault("compaction-planned")
	}
	if lockAfterPlan || (byPosition(t.mode) && hasEqualityDeletes(tasks)) {
		// (A table switched from equality mode: its equality deletes drop
		// rows of the files read, so the rows' new places are not known
		// and epochs' position deletes cannot be rebased either.)
		lock()
		if snapshotID(t.current().CurrentSnapshot()) != snapshotID(base.CurrentSnapshot()) {
			if err := plan(); err != nil {
				return res, err
			}
		}
	}
	snap := base.CurrentSnapshot()
	if snap == nil {
		return res, nil
	}

	// Execute the groups: read with deletes applied, write new files.
	res.Planning = time.Since(began)
	var (
		results []table.CompactionGroupResult
		merged  []mergedDeletes
	)
	cleanup := func() {
		for _, gr := range results {
			t.removeFiles(ctx, base, gr.NewDataFiles)
		}
		for _, m := range merged {
			t.removeFiles(ctx, base, m.added)
		}
	}
	shared := newSharedDeletes(scope)
	shared.pos = newPosDeletes(groups)
	shared.pos.dvs = t.dvs
	var moved *movedKeys
	if byPosition(t.mode) && t.state.keys != nil {
		moved = newMovedKeys()
	}
	// moves says where the rows of each rewritten file went (nil: not
	// known), for rebasing epochs' position deletes when the run does not
	// hold the lock.
	moves := map[string]*rowMap{}
	// epochWaits says whether an epoch waits for the lock this run holds,
	// or the run has held it for MaxLock.
	epochWaits := func() bool {
		return held && (t.state.epochsWaiting.Load() > 0 || (o.MaxLock > 0 && time.Since(lockedAt) >= o.MaxLock))
	}
	for i, g := range groups {
		if len(results) > 0 && epochWaits() {
			// An epoch waits for the lock this run holds: commit what is
			// done and leave the rest to a later run, so that a run over
			// thousands of small files delays an epoch by one group, not
			// by all of them (issue 23: 9 s at 10,000 changes/s).
			for _, rest := range groups[i:] {
				res.Deferred += len(rest.Tasks)
			}
			res.Yielded, merges = true, nil
			break
		}
		if o.Fault != nil {
			o.Fault("compaction-group")
		}
		var (
			gr  table.CompactionGroupResult
			rm  *rowMap
			err error
		)
		if len(g.Tasks) > 0 && t.isStaged(g.Tasks[0].File) {
			var left int
			gr, left, err = t.rewriteStaged(ctx, base, g, shared, o.MaxFiles, moved, func() bool {
				res.Yielded = res.Yielded || epochWaits()
				return res.Yielded
			})
			res.Deferred += left
		} else {
			gr, rm, err = t.rewriteGroup(ctx, base, g, o.TargetFileSize, shared)
		}
		if errors.Is(err, errNoKeyFilter) {
			gr, err = table.ExecuteCompactionGroup(ctx, base, g, compactionGroupOptions(o.TargetFileSize)...)
		}
		if err != nil {
			results = append(results, gr)
			cleanup()
			return res, fmt.Errorf("compact %s: %w", t.ID, err)
		}
		if len(gr.OldDataFiles) == 0 && len(gr.NewDataFiles) == 0 {
			continue
		}
		results = append(results, gr)
		for _, f := range gr.OldDataFiles {
			moves[f.FilePath()] = rm
		}
		if !held && moved != nil {
			// The index learns the keys of the new files here, outside
			// the lock, not by reading them back while epochs wait.
			fsys, err := base.FS(ctx)
			for _, df := range gr.NewDataFiles {
				if err == nil {
					err = moved.read(ctx, fsys, df, t.state.keys.kc)
				}
			}
			if err != nil {
				cleanup()
				return res, fmt.Errorf("compact %s: %w", t.ID, err)
			}
		}
	}
	if len(merges) > 0 {
		rewritten := map[string]struct{}{}
		for _, gr := range results {
			for _, f := range gr.OldDataFiles {
				rewritten[f.FilePath()] = struct{}{}
			}
		}
		if merged, err = t.writeMerges(ctx, base, tasks, merges, rewritten); err != nil {
			cleanup()
			return res, fmt.Errorf("compact %s: %w", t.ID, err)
		}
	}
	if o.Fault != nil {
		o.Fault("compaction-written")
	}
	res.Rewriting = time.Since(began) - res.Planning
	rb := rebase{moves: moves, from: snap.SnapshotID, early: snap.SnapshotID}
	if !held {
		// Most of the epochs' deletes to carry over are there by now:
		// rebase them before taking the lock, the rest under it.
		if err := t.rebaseEarly(ctx, base, &rb, o.Fault); err != nil {
			cleanup()
			rb.discard(ctx, t, base)
			return res, err
		}
		if o.Fault != nil {
			o.Fault("compaction-rebased")
		}
		lock()
	}
	if err := t.commitCompaction(ctx, &o, base, tasks, results, merged, &rb, cleanup, &res); err != nil {
		return res, err
	}
	if t.stageFile != nil {
		files, rows := stagedLeft(tasks, results, t.isStaged)
		t.state.staged.Store(files > 0)
		t.state.stagedRows.Store(rows)
	}
	if res.Snapshot != 0 && t.state.keys != nil {
		// The rewrite moved live rows: the index follows in the same
		// critical section, so the next epoch finds them at their new
		// places without a replay.
		// The rows the commit deletes in its own files are known here:
		// the replay need not read its delete files back.
		moved.deleted(rb.all().at)
		if err := t.syncIndexKnown(ctx, t.current(), moved); err != nil {
			t.state.keys.log.Warn("the key index could not follow a compaction; the next commit catches it up", "error", err)
		}
	}
	release()
	if o.MaxManifests > 0 && !res.Yielded {
		before, after, err := t.mergeManifests(ctx, o.MaxManifests)
		res.ManifestsBefore, res.ManifestsAfter = before, after
		if err != nil {
			return res, err
		}
	}
	res.DeleteFilesAfter = t.Stats().DeleteFiles
	return res, nil
}

// commitCompaction commits the rewrite of the files that results replace,
// read from base's current snapshot; the caller holds the table's commit
// lock. Epochs this pipeline committed since base (the rewrite runs while
// they commit) add files, and equality deletes at higher sequence numbers,
// which keep applying to the rewritten files (pinned to base's number), or
// position deletes, which are rebased onto the new files (moves, see
// rebase.go): the rewrite is staged again on top of them.
func (t *Table) commitCompaction(ctx context.Context, o *CompactOptions, base *table.Table, tasks []table.FileScanTask,
	results []table.CompactionGroupResult, merged []mergedDeletes, rb *rebase, cleanup func(), res *CompactResult) error {
	snap := base.CurrentSnapshot()
	runID := newRunID()
	discard := func() {
		cleanup()
		rb.discard(ctx, t, base)
	}
	type commitFunc = func(context.Context) (*table.Table, error)
	stage := func(on *table.Table, plan []table.FileScanTask) (commitFunc, int, error) {
		return t.stageRewrite(ctx, on, plan, snap.SequenceNumber, results, merged, rb.all(), runID)
	}
	// restage plans again on a table that epochs moved and stages there.
	restage := func(on *table.Table) (commitFunc, int, error) {
		plan, err := on.Scan().PlanFiles(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("compact %s: plan files: %w", t.ID, err)
		}
		// A position delete committed since the read that names a
		// rewritten file deletes a row the new files still hold: it is
		// carried over to them, or, where that cannot be done, the run is
		// dropped (it runs again later).
		if err := rb.late(ctx, t, on, plan); err != nil {
			return nil, 0, err
		}
		res.Replays++
		return stage(on, plan)
	}
	cur := t.current()
	var (
		commitRun      commitFunc
		removedDeletes int
		err            error
	)
	switch {
	case snapshotID(cur.CurrentSnapshot()) == snapshotID(snap):
		commitRun, removedDeletes, err = stage(cur, tasks) // properties may have changed
	case !onlyEpochsSince(cur, base, t.pipeline):
		discard()
		return t.compactionConflict(cur.CurrentSnapshot())
	default:
		commitRun, removedDeletes, err = restage(cur)
	}
	base = cur
	if err != nil {
		discard()
		return err
	}
	if commitRun != nil {
		if o.Fault != nil {
			o.Fault("during-compaction")
		}
		next, err := commitRun(ctx)
		for attempt := 1; err != nil; attempt++ {
			fresh, lerr := t.reload(ctx)
			if lerr != nil {
				// Unknown outcome: keep the files, orphan cleanup removes them
				// if the commit did not happen.
				return fmt.Errorf("commit the compaction of %s: %w (and reloading the table failed: %v)", t.ID, err, lerr)
			}
			if hasRun(fresh, base, runID) {
				if cur := fresh.CurrentSnapshot(); cur != nil && cur.Summary != nil && cur.Summary.Properties[SummaryMaintenanceRun] == runID {
					next, err = fresh, nil // the commit went through after all
					break
				}
				// It went through, and another writer committed on top: the
				// next epoch commit sees that writer's snapshot and decides.
				return fmt.Errorf("the compaction of %s was committed, then %s committed snapshot %d (operation %s)",
					t.ID, writerOf(fresh.CurrentSnapshot()), snapshotID(fresh.CurrentSnapshot()), operationOf(fresh.CurrentSnapshot()))
			}
			cur, old := fresh.CurrentSnapshot(), base.CurrentSnapshot()
			if snapshotID(cur) == snapshotID(old) {
				discard()
				return fmt.Errorf("commit the compaction of %s: %w", t.ID, err)
			}
			if !o.Replay || attempt > 3 || !onlyEpochsSince(fresh, base, t.pipeline) {
				discard()
				return t.compactionConflict(cur)
			}
			// Only epoch commits of this pipeline landed: they add files,
			// and equality deletes at higher sequence numbers, which keep
			// applying to the rewritten files (pinned to snap's number), or
			// position deletes, rebased onto them. Re-stage.
			base = fresh
			var serr error
			if commitRun, removedDeletes, serr = restage(fresh); serr != nil {
				discard()
				return serr
			}
			if commitRun == nil {
				discard()
				return nil
			}
			next, err = commitRun(ctx)
		}
		t.setCurrent(next)
		res.Snapshot = snapshotID(next.CurrentSnapshot())
		res.RemovedDeletes = removedDeletes
		res.Rebased = rb.all().rows
		for _, gr := range results {
			res.Partitions++
			for _, f := range gr.OldDataFiles {
				if t.isStaged(f) {
					res.StagedMoved++
				}
			}
			res.RewrittenFiles += len(gr.OldDataFiles)
			res.AddedFiles += len(gr.NewDataFiles)
			res.BytesBefore += gr.BytesBefore
			res.BytesAfter += gr.BytesAfter
		}
	}
	return nil
}

// compactionConflict is the error of a compaction dropped because another
// writer committed cur while it ran.
func (t *Table) compactionConflict(cur *table.Snapshot) error {
	return fmt.Errorf("%w: %s committed snapshot %d (operation %s) while compacting %s; the compaction was dropped and runs again later",
		ErrCompactionConflict, writerOf(cur), snapshotID(cur), operationOf(cur), t.ID)
}

// selectCompaction picks the files to rewrite, grouped by partition: in
// every partition that reached a threshold, the data files carrying deletes
// or smaller than SmallFileSize, oldest data sequence number first (deletes
// become dead once every older file is rewritten). Partitions with the most
// delete files go first. MaxBytes caps the total; the first file is always
// taken so that a file larger than the cap is compacted eventually. scope
// says which of the delete files planning attached count for a partition
// (globaldel.go); the tasks of the groups carry only those.
func selectCompaction(tasks []table.FileScanTask, scope *deleteScope, o *CompactOptions) ([]table.CompactionTaskGroup, int) {
	// Global deletes are retired together once there are more than
	// DeleteFiles of them: every partition one counts for is compacted,
	// so that a partition touched once does not keep a global delete, which
	// readers apply to every older file of the table, alive for ever.
	retire := scope.globals() > o.DeleteFiles
	parts := map[string]*partition{}
	var order []string
	for _, tk := range tasks {
		key := partitionKey(tk.File)
		p := parts[key]
		if p == nil {
			p = &partition{key: key, deletes: map[string]int64{}}
			parts[key] = p
			order = append(order, key)
		}
		p.dataRows += tk.File.Count()
		if tk.File.FileSizeBytes() < o.SmallFileSize {
			p.small++
		}
		eq := tk.EqualityDeleteFiles[:0:0]
		for _, d := range tk.EqualityDeleteFiles {
			if rows, ok := scope.count(key, d); ok {
				eq = append(eq, d)
				p.deletes[d.FilePath()] = rows
				if retire && scope.global[d.SpecID()] {
					p.retire = true
				}
			}
		}
		tk.EqualityDeleteFiles = eq
		for _, d := range tk.DeleteFiles {
			p.deletes[d.FilePath()] = d.Count()
		}
		for _, d := range tk.DeletionVectorFiles {
			// One Puffin file holds the vectors of many data files.
			p.deletes[d.FilePath()+"\x00"+tk.File.FilePath()] = d.Count()
		}
		p.tasks = append(p.tasks, tk)
		p.carries = append(p.carries, len(eq)+len(tk.DeleteFiles)+len(tk.DeletionVectorFiles) > 0)
	}
	// A table whose data files outnumber twice its partitions (and
	// small_files) compacts every partition with two small files or more:
	// on a finely partitioned table each epoch adds a file to every
	// partition it touches, and readers open each one, so the per-partition
	// threshold alone let a 100,000-row table reach 172,859 files (issue 23).
	crowded := len(tasks) > max(2*len(parts), o.SmallFiles)
	var hot []*partition
	for _, k := range order {
		if p := parts[k]; p.triggered(o) || (crowded && p.small >= 2) {
			hot = append(hot, p)
		}
	}
	sort.SliceStable(hot, func(i, j int) bool {
		if len(hot[i].deletes) != len(hot[j].deletes) {
			return len(hot[i].deletes) > len(hot[j].deletes)
		}
		return hot[i].small > hot[j].small
	})
	var groups []table.CompactionTaskGroup
	b := compactBudget{max: o.MaxBytes, maxFiles: o.MaxFiles}
	for _, p := range hot {
		var cands []compactCand
		for i, tk := range p.tasks {
			if p.carries[i] || tk.File.FileSizeBytes() < o.SmallFileSize {
				cands = append(cands, compactCand{tk, p.carries[i]})
			}
		}
		sort.SliceStable(cands, func(i, j int) bool {
			if a, b := seqOf(&cands[i].tk), seqOf(&cands[j].tk); a != b {
				return a < b
			}
			return cands[i].tk.File.FilePath() < cands[j].tk.File.FilePath()
		})
		if g := b.take(p.key, cands); len(g.Tasks) > 0 {
			groups = append(groups, g)
		}
	}
	return groups, b.deferred
}

// compactCand is a data file a compaction may rewrite; carries says a
// delete applies to it.
type compactCand struct {
	tk      table.FileScanTask
	carries bool
}

// compactBudget hands out max bytes of rewriting (<= 0: no limit) across
// the groups of one run, and counts the candidate files left for later.
type compactBudget struct {
	max, used int64
	maxFiles  int // files per run; 0: no limit
	files     int
	full      bool
	deferred  int
}

// take returns the group of the candidates of partition key, in order,
// that the budget allows; the first file of a run is always taken, so
// that a file larger than the budget is compacted eventually. One clean
// small file alone gains nothing: the group is empty then.
func (b *compactBudget) take(key string, cands []compactCand) table.CompactionTaskGroup {
	g := table.CompactionTaskGroup{PartitionKey: key}
	for i, c := range cands {
		size := c.tk.File.FileSizeBytes()
		if b.full || (b.max > 0 && b.used > 0 && b.used+size > b.max) || (b.maxFiles > 0 && b.files >= b.maxFiles) {
			b.full = true
			b.deferred += len(cands) - i
			break
		}
		b.used += size
		b.files++
		g.Tasks = append(g.Tasks, c.tk)
		g.TotalSizeBytes += size
	}
	if len(g.Tasks) == 1 && !cands[0].carries {
		b.used -= g.TotalSizeBytes
		b.files--
		g.Tasks, g.TotalSizeBytes = nil, 0
	}
	return g
}

// stageRewrite stages on tbl one rewrite snapshot replacing the groups' old
// files by their new ones, with the new files' data sequence number pinned to
// readSeq, and dropping the delete files that apply to nothing left. It
// returns the commit of that snapshot (nil when there is nothing to commit)
// and the number of delete files it drops.
func (t *Table) stageRewrite(ctx context.Context, tbl *table.Table, tasks []table.FileScanTask, readSeq int64, results []table.CompactionGroupResult,
	merged []mergedDeletes, rebased rebasedDeletes, runID string) (func(context.Context) (*table.Table, error), int, error) {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, 0, err
	}
	snap := tbl.CurrentSnapshot()
	rewritten := map[string]struct{}{}
	for _, gr := range results {
		for _, f := range gr.OldDataFiles {
			rewritten[f.FilePath()] = struct{}{}
		}
	}
	scope, err := t.deleteScope(ctx, tbl, tasks)
	if err != nil {
		return nil, 0, fmt.Errorf("compact %s: %w", t.ID, err)
	}
	// A snapshot planned from the manifest cache holds no delete file
	// but deletion vectors, and those of the rewritten files go with them.
	onlyDVs := t.state.manifests.holdsOnlyDVs(snapshotID(snap))
	var dead []iceberg.DataFile
	if !onlyDVs {
		if dead, err = deadDeletes(ctx, tbl, tasks, scope, rewritten, readSeq); err != nil {
			return nil, 0, fmt.Errorf("compact %s: find dead delete files: %w", t.ID, err)
		}
	}
	if len(rewritten) > 0 && mayHavePositionDeletes(snap) && !onlyDVs {
		pos, err := table.CollectDeadPositionDeletes(ctx, fsys, snap, rewritten)
		if err != nil {
			return nil, 0, fmt.Errorf("compact %s: find dead position deletes: %w", t.ID, err)
		}
		dead = append(dead, pos...)
	}
	if len(rewritten) == 0 && len(dead) == 0 && len(merged) == 0 && len(rebased.replaced) == 0 {
		return nil, 0, nil
	}
	if len(rebased.added) > 0 && slices.ContainsFunc(dead, func(f iceberg.DataFile) bool { return f.ContentType() == iceberg.EntryContentEqDeletes }) {
		// iceberg-go refuses a rewrite that adds delete files and removes
		// delete files of both kinds.
		return nil, 0, fmt.Errorf("%w: epochs deleted rows of files that the compaction of %s rewrote while it also drops equality deletes; it runs again later",
			ErrCompactionConflict, t.ID)
	}
	props := iceberg.Properties{SummaryMaintenance: "compaction", SummaryMaintenanceRun: runID}
	if len(merged) == 0 && len(rebased.added) == 0 && len(rebased.replaced) == 0 {
		// What a compaction of a dv table and most others commit: files
		// replaced by files, committed by cdcsync (rowdelta.go).
		d := rowDelta{op: table.OpReplace}
		if len(rewritten) > 0 {
			d.dataSeq = &readSeq
		}
		seen := map[string]bool{}
		drop := func(f iceberg.DataFile) {
			if k := dvKey(f); !seen[k] {
				seen[k] = true
				if f.ContentType() == iceberg.EntryContentData {
					d.removedData = append(d.removedData, f)
				} else {
					d.removedDels = append(d.removedDels, f)
				}
			}
		}
		for _, gr := range results {
			for _, f := range gr.OldDataFiles {
				drop(f)
			}
			d.data = append(d.data, gr.NewDataFiles...)
			for _, f := range gr.SafeDeletionVectors {
				drop(f)
			}
		}
		for _, f := range dead {
			drop(f)
		}
		commit := func(ctx context.Context) (*table.Table, error) {
			return t.commitRowDelta(ctx, tbl, table.MainBranch, d, props, nil)
		}
		return commit, len(dead), nil
	}
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return nil, 0, fmt.Errorf("compact %s: %w", t.ID, err)
	}
	rw := tx.NewRewrite(props)
	seen := map[string]bool{}
	drop := func(f iceberg.DataFile) {
		// The deletion vectors of a Puffin file share its path.
		k := f.FilePath()
		if ref := f.ReferencedDataFile(); ref != nil {
			k += "\x00" + *ref
		}
		if !seen[k] {
			seen[k] = true
			rw.DeleteFile(f)
		}
	}
	for _, gr := range results {
		for _, f := range gr.OldDataFiles {
			drop(f)
		}
		for _, f := range gr.NewDataFiles {
			rw.AddDataFile(f)
		}
		for _, f := range gr.SafeDeletionVectors {
			drop(f)
		}
	}
	for _, f := range dead {
		drop(f)
	}
	removed := len(seen)
	for _, m := range merged {
		for _, f := range m.old {
			drop(f)
		}
		// Each merged entry comes from a delete file at least as new as
		// the data file it names, so the newest replaced delete file's
		// data sequence number (what the rewrite gives a delete file it
		// adds) applies the new file to all of them. readSeq, used
		// before, is refused when no replaced delete file has it (the
		// newest snapshot wrote none there: a compaction right after
		// another), which failed every run on such a table.
		for _, f := range m.added {
			rw.AddDeleteFile(f)
		}
	}
	removed = len(seen) - removed + len(dead)
	// Position deletes of epochs that ran next to the rewrite, carried
	// over to the new files (rebase.go). An added delete file takes the
	// newest data sequence number of those the rewrite replaces, which is
	// not below any of the replaced ones it comes from: it applies to the
	// new files (at readSeq) and to every file it names.
	for _, f := range rebased.replaced {
		drop(f)
	}
	for _, f := range rebased.added {
		rw.AddDeleteFile(f)
	}
	if len(rewritten) > 0 {
		rw.DataSequenceNumber(readSeq)
	}
	if err := rw.Commit(ctx); err != nil {
		return nil, 0, fmt.Errorf("compact %s: stage the rewrite: %w", t.ID, err)
	}
	return tx.Commit, removed, nil
}

// positionDeleteCount is the number of position deletes the snapshot's
// summary counts (-1 when it does not say).
func positionDeleteCount(s *table.Snapshot) int64 {
	if s == nil {
		return 0
	}
	if s.Summary == nil {
		return -1
	}
	v, ok := s.Summary.Properties["total-position-deletes"]
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// mayHavePositionDeletes is false when the snapshot's summary says it has
// no position deletes (cdcsync writes none), which saves a manifest walk.
func mayHavePositionDeletes(s *table.Snapshot) bool {
	if s == nil || s.Summary == nil {
		return true
	}
	v, ok := s.Summary.Properties["total-position-deletes"]
	return !ok || v != "0"
}

// deadDeletes returns the equality delete files of tbl's current snapshot,
// with a data sequence number of at most maxSeq, that scan planning matches
// to no data file left once the rewritten files are gone (tasks is a plan of
// that snapshot), or only to files of partitions scope says they do not
// count for (a global delete, see globaldel.go). Planning matches a delete
// to the files of its partition (all files, for an unpartitioned delete)
// with a lower data sequence number whose column bounds may hold its keys,
// so such a delete changes no row. Files written by the rewrite get maxSeq,
// so no such delete applies to them either. Deletes newer than maxSeq are
// kept: they apply to the rewritten rows.
func deadDeletes(ctx context.Context, tbl *table.Table, tasks []table.FileScanTask, scope *deleteScope, rewritten map[string]struct{}, maxSeq int64) ([]iceberg.DataFile, error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return nil, nil
	}
	live := map[string]bool{}
	for _, tk := range tasks {
		if _, gone := rewritten[tk.File.FilePath()]; gone {
			continue
		}
		part := partitionKey(tk.File)
		for _, d := range tk.EqualityDeleteFiles {
			if _, ok := scope.count(part, d); ok {
				live[d.FilePath()] = true
			}
		}
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	manifests, err := snap.Manifests(fsys)
	if err != nil {
		return nil, err
	}
	var dead []iceberg.DataFile
	for _, m := range manifests {
		if m.ManifestContent() != iceberg.ManifestContentDeletes {
			continue
		}
		for e, err := range m.Entries(fsys, true) {
			if err != nil {
				return nil, err
			}
			df := e.DataFile()
			if s := e.SequenceNum(); df.ContentType() == iceberg.EntryContentEqDeletes && s >= 0 && s <= maxSeq && !live[df.FilePath()] {
				dead = append(dead, df)
			}
		}
	}
	return dead, nil
}

// hasRun reports whether a snapshot of maintenance run id is in fresh's
// lineage above base's current snapshot.
func hasRun(fresh, base *table.Table, id string) bool {
	stop := snapshotID(base.CurrentSnapshot())
	meta := fresh.Metadata()
	for s := meta.CurrentSnapshot(); s != nil && s.SnapshotID != stop; {
		if s.Summary != nil && s.Summary.Properties[SummaryMaintenanceRun] == id {
			return true
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return false
}

// onlyEpochsSince reports whether every snapshot of fresh since base's
// current one is an epoch commit of pipeline that only added files (its
// position deletes are rebased, rebase.go).
func onlyEpochsSince(fresh, base *table.Table, pipeline string) bool {
	return lineageSince(fresh, base, func(s *table.Snapshot) bool {
		if s.Summary == nil || s.Summary.Properties[SummaryPipeline] != pipeline {
			return false
		}
		p := s.Summary.Properties
		return p["deleted-data-files"] == "" && p["removed-delete-files"] == "" &&
			p["removed-position-delete-files"] == "" && p["removed-equality-delete-files"] == ""
	})
}

// lineageSince walks fresh's lineage from its current snapshot down to
// base's current one and reports whether every snapshot on the way passes
// ok. It is false when base's snapshot is not an ancestor (a rollback).
func lineageSince(fresh, base *table.Table, ok func(*table.Snapshot) bool) bool {
	stop := snapshotID(base.CurrentSnapshot())
	meta := fresh.Metadata()
	s := meta.CurrentSnapshot()
	for s != nil {
		if s.SnapshotID == stop {
			return true
		}
		if !ok(s) {
			return false
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return stop == -1 && s == nil
}

func writerOf(s *table.Snapshot) string {
	if s == nil || s.Summary == nil {
		return "a writer that is not this pipeline"
	}
	if p := s.Summary.Properties[SummaryPipeline]; p != "" {
		return fmt.Sprintf("pipeline %q (epoch %s)", p, s.Summary.Properties[SummaryEpoch])
	}
	if m := s.Summary.Properties[SummaryMaintenance]; m != "" {
		return "a cdcsync " + m
	}
	return "a writer that is not cdcsync"
}

func operationOf(s *table.Snapshot) string {
	if s == nil || s.Summary == nil {
		return "unknown"
	}
	return string(s.Summary.Operation)
}

func newRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
