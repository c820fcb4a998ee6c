package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/lease"
)

// Committed walks the table's snapshot lineage from the current snapshot and
// returns the newest commit of this pipeline. Snapshots of other writers
// (maintenance jobs) are passed over.
func (t *Table) Committed() (cdcsync.Committed, error) {
	return committedIn(t.current(), t.pipeline)
}

func committedIn(tbl *table.Table, pipeline string) (cdcsync.Committed, error) {
	meta := tbl.Metadata()
	// A recopy commits to CopyBranch until it is done: its lineage holds
	// the table's progress.
	for s := head(meta, refOf(meta)); s != nil; {
		if s.Summary != nil && s.Summary.Properties[SummaryPipeline] == pipeline {
			c, err := parseCommitted(s.Summary.Properties)
			if err != nil {
				return cdcsync.Committed{}, fmt.Errorf("snapshot %d of %s: %w", s.SnapshotID, strings.Join(tbl.Identifier(), "."), err)
			}
			return c, nil
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	// The snapshots of this pipeline's commits can be gone (an external
	// expire_snapshots that kept only a compaction's): every commit also
	// records what it committed in a table property, in the same catalog
	// commit, which expiry does not touch.
	if v, ok := meta.Properties()[PropCommitted+pipeline]; ok {
		var props map[string]string
		if err := json.Unmarshal([]byte(v), &props); err != nil {
			return cdcsync.Committed{}, fmt.Errorf("table %s: property %s%s is malformed: %w", strings.Join(tbl.Identifier(), "."), PropCommitted, pipeline, err)
		}
		c, err := parseCommitted(props)
		if err != nil {
			return cdcsync.Committed{}, fmt.Errorf("table %s: property %s%s: %w", strings.Join(tbl.Identifier(), "."), PropCommitted, pipeline, err)
		}
		return c, nil
	}
	return cdcsync.Committed{}, nil
}

// parseCommitted reads an epoch commit's summary (or its copy in
// PropCommitted).
func parseCommitted(props map[string]string) (cdcsync.Committed, error) {
	epoch, err := strconv.ParseInt(props[SummaryEpoch], 10, 64)
	if err != nil {
		return cdcsync.Committed{}, fmt.Errorf("malformed %s %q", SummaryEpoch, props[SummaryEpoch])
	}
	pos, err := cdcsync.DecodePosition(props[SummaryPosition])
	if err != nil {
		return cdcsync.Committed{}, err
	}
	c := cdcsync.Committed{Epoch: epoch, Pos: pos, Found: true}
	if after, ok := props[SummaryCopyAfter]; ok {
		rows, err := strconv.ParseInt(props[SummaryCopyRows], 10, 64)
		if err != nil {
			return cdcsync.Committed{}, fmt.Errorf("malformed %s %q", SummaryCopyRows, props[SummaryCopyRows])
		}
		c.Copy = &cdcsync.CopyState{After: after, Rows: rows}
	}
	return c, nil
}

// PropCommitted + the pipeline name is the table property that repeats
// the summary of the pipeline's last epoch commit to the table.
const PropCommitted = "cdcsync.committed."

// recordCommitted stages, in tx, the table property that repeats the epoch
// commit's summary sum.
func (t *Table) recordCommitted(tx *table.Transaction, sum iceberg.Properties) error {
	set, err := t.committedProps(sum)
	if err != nil {
		return err
	}
	if err := tx.SetProperties(set); err != nil {
		return fmt.Errorf("%s: %w", t.ID, err)
	}
	return nil
}

// committedProps is the table property that records sum as the pipeline's
// last commit.
func (t *Table) committedProps(sum iceberg.Properties) (iceberg.Properties, error) {
	b, err := json.Marshal(map[string]string(sum))
	if err != nil {
		return nil, err
	}
	return iceberg.Properties{PropCommitted + t.pipeline: string(b)}, nil
}

// Epoch identifies one commit of the pipeline.
type Epoch struct {
	Number int64
	// From, when below Number, is the first earlier epoch whose
	// transactions the commit holds (SummaryEpochFrom).
	From int64
	Pos  cdcsync.Position
	// SourceTime is when the epoch's last transaction committed in MySQL
	// (recorded as SummarySourceTime; zero: not recorded).
	SourceTime time.Time
	// Spill names the part of the epoch written out before the commit
	// (Spill; 0: none), which the commit adds.
	Spill int64
	// Interrupt, when closed, makes the commit give up bringing the key
	// index to the table (syncIndexUnless); nil: never.
	Interrupt <-chan struct{}
}

// summary is the snapshot summary of an epoch commit; copying is the
// table's initial-copy progress to record with it (none once Done).
func (t *Table) summary(e Epoch, copying *cdcsync.CopyState) iceberg.Properties {
	p := iceberg.Properties{
		SummaryPipeline: t.pipeline,
		SummaryEpoch:    strconv.FormatInt(e.Number, 10),
		SummaryPosition: e.Pos.Encode(),
	}
	if t.token > 0 {
		p[SummaryToken] = strconv.FormatInt(t.token, 10)
	}
	if e.From > 0 && e.From < e.Number {
		p[SummaryEpochFrom] = strconv.FormatInt(e.From, 10)
	}
	if !e.SourceTime.IsZero() {
		p[SummarySourceTime] = strconv.FormatInt(e.SourceTime.UnixMilli(), 10)
	}
	if c := copying; c != nil && !c.Done {
		p[SummaryCopyAfter] = c.After
		p[SummaryCopyRows] = strconv.FormatInt(c.Rows, 10)
	}
	return p
}

// Copying returns the progress of the table's initial copy as last
// committed, or nil when no copy runs.
func (t *Table) Copying() *cdcsync.CopyState { return t.state.copying.Load() }

// StartCopy empties the table at the epoch's position and records a fresh
// initial copy (and drops a recopy mark), in one commit.
func (t *Table) StartCopy(ctx context.Context, e Epoch) error {
	ctx = t.scope(ctx)
	t.state.commitMu.Lock()
	defer t.state.commitMu.Unlock()
	copying := &cdcsync.CopyState{}
	base := t.current()
	// A table that holds rows is copied again on CopyBranch: readers of
	// main keep its last contents until the copy is done and main moves
	// to it in one commit (promote).
	ref := table.MainBranch
	if h := head(base.Metadata(), table.MainBranch); h != nil {
		ref = CopyBranch
		if head(base.Metadata(), CopyBranch) == nil {
			// The branch starts at main's head (a catalog commit of its
			// own: a transaction cannot delete on a branch it creates).
			// A crash after it leaves a branch with nothing of the copy,
			// which the next load promotes (a no-op) and the recopy mark
			// starts again.
			id := h.SnapshotID
			if err := t.setRefs(ctx, base, []table.Requirement{table.AssertRefSnapshotID(CopyBranch, nil)},
				table.NewSetSnapshotRefUpdate(CopyBranch, id, table.BranchRef, 0, 0, 0)); err != nil {
				return fmt.Errorf("start the copy branch of %s: %w", t.ID, err)
			}
			base = t.current()
		}
	}
	tx, err := t.newTx(base, ref)
	if err != nil {
		return err
	}
	if _, ok := t.NeedsRecopy(); ok {
		if err := tx.RemoveProperties([]string{PropRecopy}); err != nil {
			return fmt.Errorf("%s: %w", t.ID, err)
		}
	}
	if head(base.Metadata(), ref) != nil {
		if err := tx.Delete(ctx, iceberg.AlwaysTrue{}, t.summary(e, copying)); err != nil {
			return fmt.Errorf("empty %s for its copy: %w", t.ID, err)
		}
	}
	if err := tx.AddFiles(ctx, nil, t.summary(e, copying), false); err != nil {
		return fmt.Errorf("record the start of the copy of %s: %w", t.ID, err)
	}
	if err := t.finish(ctx, tx, e, base, t.summary(e, copying)); err != nil {
		return err
	}
	t.state.copying.Store(copying)
	if t.state.keys != nil {
		// The copy starts from an empty table: so does its index.
		cur := t.current()
		return t.rebuildIndex(ctx, cur, head(cur.Metadata(), refOf(cur.Metadata())))
	}
	return nil
}

// ErrConflict reports that another writer changed the table under cdcsync.
var ErrConflict = errors.New("another writer committed to the table")

// Commit writes the epoch's changes to the table as one row delta: an
// equality delete on the primary key for every key in deletes (each row
// carries the key and, for partitioned tables, the partition source columns
// of the row's before image), and a data file holding rows, the final images.
// The commit asserts that the table is still at the snapshot cdcsync last
// saw. After a failed commit it reloads the table: if the catalog applied
// the commit after all, Commit succeeds; if another writer only rewrote
// files (operation "replace": compaction, manifest rewrites) it keeps the
// reloaded table and returns a retryable error, so the retry commits on top;
// if another writer committed anything else, it returns an error wrapping
// ErrConflict; otherwise the error is retryable.
//
// copying, when set, is the table's initial-copy progress to record with the
// commit (Done: the commit completes the copy and records none).
func (t *Table) Commit(ctx context.Context, e Epoch, deletes, rows []cdcsync.Row, copying *cdcsync.CopyState) error {
	ctx = t.scope(ctx)
	if len(deletes) == 0 && len(rows) == 0 && copying == nil && e.Spill == 0 {
		return nil
	}
	began := time.Now()
	t.state.epochsWaiting.Add(1)
	t.state.commitMu.Lock()
	t.state.epochsWaiting.Add(-1)
	times := CommitTimes{Epoch: e.Number, Wait: time.Since(began)}
	t.state.clock = &clock{times: &times, at: time.Now()}
	defer func() {
		t.state.clock = nil
		times.Total = time.Since(began)
		t.state.timesMu.Lock()
		t.state.times = times
		t.state.timesMu.Unlock()
		t.state.commitMu.Unlock()
	}()
	commit := t.commit
	if e.Spill != 0 {
		commit = func(ctx context.Context, e Epoch, deletes, rows []cdcsync.Row, copying *cdcsync.CopyState) error {
			return t.commitSpilled(ctx, e, e.Spill, deletes, rows, copying)
		}
	}
	if err := commit(ctx, e, deletes, rows, copying); err != nil {
		return err
	}
	if copying != nil && copying.Done {
		copying = nil
		if err := t.promote(ctx); err != nil {
			return err
		}
	}
	t.state.copying.Store(copying)
	return nil
}

func (t *Table) commit(ctx context.Context, e Epoch, deletes, rows []cdcsync.Row, copying *cdcsync.CopyState) error {
	base := t.current()
	tx, err := t.newTx(base, refOf(base.Metadata()))
	if err != nil {
		return err
	}
	if len(deletes) == 0 && len(rows) == 0 {
		// Only the copy's progress (an empty chunk, the end of the copy).
		return t.commitEmpty(ctx, tx, e, base, copying)
	}
	data, dels, err := t.epochFiles(ctx, base, e, deletes, rows)
	if err != nil {
		return err
	}
	var superseded []iceberg.DataFile
	if p := t.state.pending; p != nil {
		superseded = p.superseded
	}
	if len(data) == 0 && len(dels) == 0 && len(superseded) == 0 {
		// The epoch only deletes rows the table does not hold (another
		// writer deleted them, or verify's repair found them gone): by
		// position there is nothing to delete, and a row delta without a
		// file is refused at every retry. Its snapshot records the
		// position alone.
		err = t.commitEmpty(ctx, tx, e, base, copying)
	} else {
		err = t.commitFiles(ctx, e, base, copying, data, dels, superseded)
	}
	switch {
	case err == nil:
		if p := t.state.pending; p != nil && p.keys != nil {
			t.indexEpoch(e, p, rows)
			t.state.clock.lap(indexPhase)
		}
		t.state.pending = nil
	case errors.Is(err, ErrConflict):
		// Another writer's snapshot is current: a commit asserting the
		// old one can never land, so its files are garbage now.
		t.removeFiles(ctx, base, append(data, dels...))
		t.state.pending = nil
	}
	return err
}

// commitEmpty commits a snapshot of tx that adds no file and records e
// (and the copy's progress).
func (t *Table) commitEmpty(ctx context.Context, tx *table.Transaction, e Epoch, base *table.Table, copying *cdcsync.CopyState) error {
	if err := tx.AddFiles(ctx, nil, t.summary(e, copying), false); err != nil {
		return fmt.Errorf("record epoch %d of %s: %w", e.Number, t.ID, err)
	}
	return t.finish(ctx, tx, e, base, t.summary(e, copying))
}

// commitFiles commits an epoch's row delta (data and delete files, and the
// deletion vectors that new ones supersede) on base (commitRowDelta).
func (t *Table) commitFiles(ctx context.Context, e Epoch, base *table.Table, copying *cdcsync.CopyState, data, dels, superseded []iceberg.DataFile) error {
	sum := t.summary(e, copying)
	set, err := t.committedProps(sum)
	if err != nil {
		return err
	}
	d := rowDelta{data: data, dels: dels, superseded: superseded}
	if err := t.land(ctx, e, base, func(ctx context.Context) (*table.Table, error) {
		return t.commitRowDelta(ctx, base, refOf(base.Metadata()), d, sum, set)
	}); err != nil {
		return err
	}
	if t.mode == DeletesDV {
		t.advanceDVs(base, dels)
		t.dvs.drop(superseded)
	}
	for _, f := range data {
		if t.isStaged(f) {
			t.state.staged.Store(true)
			t.state.stagedRows.Add(f.Count())
		}
	}
	return nil
}

// pendingFiles are the files written for an epoch whose commit failed.
type pendingFiles struct {
	epoch       Epoch
	rows, dels  int // rows and deletes they hold
	data, edels []iceberg.DataFile
	superseded  []iceberg.DataFile // deletion vectors that edels replace (dv mode)
	// In position mode: the snapshot the position deletes were looked up
	// at (files written on another are not reused), the keys of the
	// deletes and where each row landed, for the key index.
	base int64
	keys [][]byte
	locs []rowLoc
}

// epochFiles writes the epoch's data and equality-delete files, or returns
// those an earlier attempt of the same epoch wrote when its commit failed:
// the retries of an outage write nothing twice, so a catalog that refuses
// commits for an hour leaves one set of files, not one per attempt. Files
// of an attempt whose writing failed are removed at once.
func (t *Table) epochFiles(ctx context.Context, base *table.Table, e Epoch, deletes, rows []cdcsync.Row) (data, dels []iceberg.DataFile, err error) {
	if p := t.state.pending; p != nil && p.epoch == e && p.rows == len(rows) && p.dels == len(deletes) &&
		(!byPosition(t.mode) || p.base == snapshotID(head(base.Metadata(), refOf(base.Metadata())))) {
		return p.data, p.edels, nil
	}
	// Files of another epoch's failed attempt stay where they are: their
	// commit's outcome may be unknown, and orphan cleanup removes them
	// once they are old if nothing references them. (So do position
	// deletes looked up at a snapshot the table has left.)
	if p := t.state.pending; p != nil && p.epoch == e && p.keys != nil {
		// This epoch's position deletes name rows of a snapshot the table
		// has left (a rewrite landed since): the attempt did not commit
		// (finish checked), so its files are garbage.
		t.removeFiles(ctx, base, append(slices.Clone(p.data), p.edels...))
	}
	t.state.pending = nil
	if byPosition(t.mode) {
		return t.positionEpochFiles(ctx, base, e, deletes, rows)
	}
	t.state.clock.lap(lookupPhase)
	if len(rows) > 0 {
		if data, err = t.writeFiles(ctx, base, t.dataFile, rows, nil); err != nil {
			return nil, nil, fmt.Errorf("write data files of %s: %w", t.ID, err)
		}
	}
	t.state.clock.lap(dataPhase)
	if len(deletes) > 0 {
		if dels, err = t.writeFiles(ctx, base, t.eqFile, deletes, nil); err != nil {
			t.removeFiles(ctx, base, data)
			return nil, nil, fmt.Errorf("write equality deletes of %s: %w", t.ID, err)
		}
	}
	t.state.clock.lap(deletesPhase)
	t.state.pending = &pendingFiles{epoch: e, rows: len(rows), dels: len(deletes), data: data, edels: dels}
	return data, dels, nil
}

// removeFiles deletes files no commit references, as far as the storage
// lets it (during an outage it may not: orphan cleanup gets them later).
func (t *Table) removeFiles(ctx context.Context, tbl *table.Table, files []iceberg.DataFile) {
	if len(files) == 0 {
		return
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return
	}
	if wfs, ok := fsys.(icebergio.WriteFileIO); ok {
		for _, f := range files {
			_ = wfs.Remove(f.FilePath())
		}
	}
}

// finish records the epoch commit's summary sum as a table property too,
// commits the staged transaction and reconciles on failure.
func (t *Table) finish(ctx context.Context, tx *table.Transaction, e Epoch, base *table.Table, sum iceberg.Properties) error {
	if err := t.recordCommitted(tx, sum); err != nil {
		return err
	}
	return t.land(ctx, e, base, tx.Commit)
}

// land commits epoch e, staged on base, with commit (which returns the
// committed table) and reconciles on failure: the epoch may have landed
// after all, another writer may have rewritten files (retryable), or
// committed something else (ErrConflict).
func (t *Table) land(ctx context.Context, e Epoch, base *table.Table, commit func(context.Context) (*table.Table, error)) error {
	if t.BeforeCommit != nil {
		t.BeforeCommit()
	}
	if err := t.mayCommit(); err != nil {
		return fmt.Errorf("commit epoch %d to %s: %w", e.Number, t.ID, err)
	}
	next, err := commit(ctx)
	if err == nil {
		t.setCurrent(next)
		return nil
	}
	// The catalog may have applied the commit and failed afterwards: the
	// table's own summary is the truth.
	fresh, lerr := t.reload(ctx)
	if lerr != nil {
		return fmt.Errorf("commit epoch %d to %s: %w (and reloading the table failed: %v)", e.Number, t.ID, err, lerr)
	}
	c, cerr := committedIn(fresh, t.pipeline)
	if cerr == nil && c.Found && c.Epoch == e.Number && c.Pos == e.Pos {
		t.setCurrent(fresh)
		return nil
	}
	ref := refOf(base.Metadata())
	if err := t.fenced(fresh, base); err != nil {
		// Never stage on top of the fence: every later commit fails too.
		t.state.lost.Store(&err)
		return fmt.Errorf("commit epoch %d to %s: %w", e.Number, t.ID, err)
	}
	if cur, old := head(fresh.Metadata(), ref), head(base.Metadata(), ref); snapshotID(cur) != snapshotID(old) {
		if ref == table.MainBranch && onlyRewritesSince(fresh, base) {
			// Rewrites (a cdcsync compaction, Spark's rewrite_data_files or
			// rewrite_manifests) keep the rows as they are. This commit only
			// adds files, whose equality deletes get a higher sequence number
			// than anything a rewrite wrote and so still apply to the
			// rewritten rows: committing again on top is safe.
			t.setCurrent(fresh)
			return fmt.Errorf("commit epoch %d to %s: %s rewrote files (snapshot %d, operation replace) since cdcsync loaded snapshot %d; "+
				"the table is reloaded and the commit retried: %w", e.Number, t.ID, writerOf(cur), snapshotID(cur), snapshotID(old), err)
		}
		who := "a writer that is not this pipeline"
		if cur != nil && cur.Summary != nil {
			if p := cur.Summary.Properties[SummaryPipeline]; p != "" {
				who = fmt.Sprintf("pipeline %q (epoch %s)", p, cur.Summary.Properties[SummaryEpoch])
			} else {
				who = fmt.Sprintf("a writer that is not cdcsync (operation %s)", cur.Summary.Operation)
			}
		}
		return fmt.Errorf("commit epoch %d to %s failed because %s committed snapshot %d since cdcsync loaded snapshot %d: %w; "+
			"stop the other writer (two cdcsync daemons must not share a pipeline name), then restart cdcsync",
			e.Number, t.ID, who, snapshotID(cur), snapshotID(old), ErrConflict)
	}
	t.setCurrent(fresh)
	return fmt.Errorf("commit epoch %d to %s: %w", e.Number, t.ID, err)
}

// fenced returns an error wrapping lease.ErrLost when a newer holder of the
// pipeline's lease committed to the table since base (a fence, or its
// epochs): this process lost the pipeline.
func (t *Table) fenced(fresh, base *table.Table) error {
	for _, ref := range []string{table.MainBranch, CopyBranch} {
		stop := snapshotID(head(base.Metadata(), ref))
		meta := fresh.Metadata()
		for s := head(meta, ref); s != nil && s.SnapshotID != stop; {
			if s.Summary != nil {
				p := s.Summary.Properties
				if tok := tokenOf(s); tok > t.token && (p[SummaryFence] == t.pipeline || p[SummaryPipeline] == t.pipeline) {
					return fmt.Errorf("%w: a newer holder of pipeline %s (lease token %d, this daemon's %d) committed snapshot %d",
						lease.ErrLost, t.pipeline, tok, t.token, s.SnapshotID)
				}
			}
			if s.ParentSnapshotID == nil {
				break
			}
			s = meta.SnapshotByID(*s.ParentSnapshotID)
		}
	}
	return nil
}

// mayCommit says whether this process may still commit to the table: nil,
// or why not (its lease is no longer valid, or a newer holder fenced it).
func (t *Table) mayCommit() error {
	if p := t.state.lost.Load(); p != nil {
		return *p
	}
	return t.valid()
}

// CopyBranch is the branch a table that holds rows is copied again on
// (cdcsync resync, a recopy): its commits go there until the copy is done,
// then main is moved to its head in one catalog commit and the branch is
// removed. Readers of main see the last contents meanwhile, never an empty
// or half-copied table.
const CopyBranch = "cdcsync-copy"

// refOf returns the branch the table's epoch commits go to.
func refOf(meta table.Metadata) string {
	for name := range meta.Refs() {
		if name == CopyBranch {
			return CopyBranch
		}
	}
	return table.MainBranch
}

// head returns the snapshot ref points at, nil when none.
func head(meta table.Metadata, ref string) *table.Snapshot {
	if ref == table.MainBranch {
		return meta.CurrentSnapshot()
	}
	return meta.SnapshotByName(ref)
}

// newTx starts a transaction on ref that asserts the ref is where cdcsync
// last saw it (absent, for a branch not created yet).
func (t *Table) newTx(base *table.Table, ref string) (*table.Transaction, error) {
	tx, err := base.NewTransactionOnBranchWithError(ref)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.ID, err)
	}
	if err := tx.AssertRefSnapshotID(ref); err != nil {
		return nil, fmt.Errorf("%s: %w", t.ID, err)
	}
	return tx, nil
}

// promote ends a recopy: main moves to CopyBranch's head and the branch
// goes, in one catalog commit. It does nothing when no recopy branch
// exists. A crash before it leaves the branch with a completed copy, which
// the table's next load promotes.
func (t *Table) promote(ctx context.Context) error {
	cur := t.current()
	meta := cur.Metadata()
	h := head(meta, CopyBranch)
	if h == nil {
		return nil
	}
	id := h.SnapshotID
	err := t.setRefs(ctx, cur, []table.Requirement{table.AssertRefSnapshotID(CopyBranch, &id)},
		// 0, not -1: -1 would be sent to a REST catalog, which refuses it.
		table.NewSetSnapshotRefUpdate(table.MainBranch, id, table.BranchRef, 0, 0, 0),
		table.NewRemoveSnapshotRefUpdate(CopyBranch))
	if err != nil {
		// The catalog may have applied it: the reloaded table says.
		fresh, lerr := t.reload(ctx)
		if lerr == nil && head(fresh.Metadata(), CopyBranch) == nil && snapshotID(fresh.CurrentSnapshot()) == id {
			t.setCurrent(fresh)
			return nil
		}
		return fmt.Errorf("make the new copy of %s visible (move main to snapshot %d of branch %s): %w", t.ID, id, CopyBranch, err)
	}
	return nil
}

// setRefs commits ref updates to the table in the catalog, with reqs and
// the table's identity as requirements, and reloads it.
func (t *Table) setRefs(ctx context.Context, base *table.Table, reqs []table.Requirement, updates ...table.Update) error {
	reqs = append(reqs, table.AssertTableUUID(base.Metadata().TableUUID()))
	if _, _, err := t.cat.CommitTable(ctx, t.Ident, reqs, updates); err != nil {
		return err
	}
	fresh, err := t.reload(ctx)
	if err != nil {
		return fmt.Errorf("reload %s: %w", t.ID, err)
	}
	t.setCurrent(fresh)
	return nil
}

func snapshotID(s *table.Snapshot) int64 {
	if s == nil {
		return noSnapshot
	}
	return s.SnapshotID
}

// parentID is the id of s's parent: noSnapshot for a table's first
// snapshot, whose base was the table without snapshots.
func parentID(s *table.Snapshot) int64 {
	if s.ParentSnapshotID == nil {
		return noSnapshot
	}
	return *s.ParentSnapshotID
}

func (t *Table) reload(ctx context.Context) (*table.Table, error) {
	fresh := *t.current()
	if err := fresh.Refresh(ctx); err != nil {
		return nil, err
	}
	return &fresh, nil
}

// CommittedBy returns what the named pipeline last committed to tbl.
func CommittedBy(tbl *table.Table, pipeline string) (cdcsync.Committed, error) {
	return committedIn(tbl, pipeline)
}

// onlyRewritesSince reports whether every snapshot committed on top of base's
// current snapshot is a "replace" (a rewrite of files that keeps the rows)
// that is not an epoch commit.
func onlyRewritesSince(fresh, base *table.Table) bool {
	return lineageSince(fresh, base, func(s *table.Snapshot) bool {
		return s.Summary != nil && s.Summary.Operation == table.OpReplace && s.Summary.Properties[SummaryPipeline] == ""
	})
}
