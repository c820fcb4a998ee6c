package lake

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
)

// Committed is what a table's snapshot summaries say cdcsync last committed.
type Committed struct {
	Epoch int64
	Pos   cdcsync.Position
	Found bool // false when the pipeline never committed to the table
}

// Committed walks the table's snapshot lineage from the current snapshot and
// returns the newest commit of this pipeline. Snapshots of other writers
// (maintenance jobs) are passed over.
func (t *Table) Committed() (Committed, error) {
	return committedIn(t.tbl, t.pipeline)
}

func committedIn(tbl *table.Table, pipeline string) (Committed, error) {
	meta := tbl.Metadata()
	for s := meta.CurrentSnapshot(); s != nil; {
		if s.Summary != nil && s.Summary.Properties[SummaryPipeline] == pipeline {
			props := s.Summary.Properties
			epoch, err := strconv.ParseInt(props[SummaryEpoch], 10, 64)
			if err != nil {
				return Committed{}, fmt.Errorf("snapshot %d of %s has a malformed %s %q", s.SnapshotID, strings.Join(tbl.Identifier(), "."), SummaryEpoch, props[SummaryEpoch])
			}
			pos, err := cdcsync.DecodePosition(props[SummaryPosition])
			if err != nil {
				return Committed{}, fmt.Errorf("snapshot %d of %s: %w", s.SnapshotID, strings.Join(tbl.Identifier(), "."), err)
			}
			return Committed{Epoch: epoch, Pos: pos, Found: true}, nil
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return Committed{}, nil
}

// Epoch identifies one commit of the pipeline.
type Epoch struct {
	Number int64
	Pos    cdcsync.Position
}

func (t *Table) summary(e Epoch) iceberg.Properties {
	return iceberg.Properties{
		SummaryPipeline: t.pipeline,
		SummaryEpoch:    strconv.FormatInt(e.Number, 10),
		SummaryPosition: e.Pos.Encode(),
	}
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
func (t *Table) Commit(ctx context.Context, e Epoch, deletes, rows []cdcsync.Row) error {
	ctx = t.scope(ctx)
	if len(deletes) == 0 && len(rows) == 0 {
		return nil
	}
	base := t.tbl
	tx := base.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return fmt.Errorf("%s: %w", t.ID, err)
	}
	rd := tx.NewRowDelta(t.summary(e))
	if len(rows) > 0 {
		files, err := t.writeData(ctx, base, sliceBatches(t.dataOut, rows))
		if err != nil {
			return err
		}
		rd.AddRows(files...)
	}
	if len(deletes) > 0 {
		files, err := tx.WriteEqualityDeletes(ctx, t.eqIDs, sliceBatches(t.delOut, deletes))
		if err != nil {
			return fmt.Errorf("write equality deletes of %s: %w", t.ID, err)
		}
		rd.AddDeletes(files...)
	}
	if err := rd.Commit(ctx); err != nil {
		return fmt.Errorf("stage the commit of %s: %w", t.ID, err)
	}
	return t.finish(ctx, tx, e, base)
}

// CopyInto writes the initial copy of the table, whose rows fill() streams
// through add, and commits it as one snapshot at epoch e. Rows already in the
// table (from a copy that crashed before the pipeline's first checkpoint) are
// replaced in the same commit.
func (t *Table) CopyInto(ctx context.Context, e Epoch, batchRows int, fill func(add func(cdcsync.Row) error) error) (int64, error) {
	ctx = t.scope(ctx)
	base := t.tbl
	tx := base.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return 0, fmt.Errorf("%s: %w", t.ID, err)
	}
	if base.CurrentSnapshot() != nil {
		if err := tx.Delete(ctx, iceberg.AlwaysTrue{}, nil); err != nil {
			return 0, fmt.Errorf("clear the earlier partial copy of %s: %w", t.ID, err)
		}
	}
	batches := make(chan arrow.RecordBatch, 1)
	fillErr := make(chan error, 1)
	var n int64
	go func() {
		defer close(batches)
		bb := newBatchBuilder(t.dataOut)
		defer bb.release()
		err := fill(func(r cdcsync.Row) error {
			if err := bb.add(r); err != nil {
				return fmt.Errorf("%s: %w", t.ID, err)
			}
			n++
			if bb.n >= batchRows {
				select {
				case batches <- bb.flush():
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
		if err == nil && bb.n > 0 {
			batches <- bb.flush()
		}
		fillErr <- err
	}()
	seq := func(yield func(arrow.RecordBatch, error) bool) {
		for b := range batches {
			if !yield(b, nil) {
				b.Release()
				break
			}
		}
	}
	files, werr := t.writeData(ctx, base, seq)
	for range batches { // let the producer finish if the writer stopped early
	}
	if err := <-fillErr; err != nil {
		return 0, err
	}
	if werr != nil {
		return 0, werr
	}
	if len(files) > 0 {
		if err := tx.NewRowDelta(t.summary(e)).AddRows(files...).Commit(ctx); err != nil {
			return 0, fmt.Errorf("stage the copy of %s: %w", t.ID, err)
		}
	} else if err := tx.AddFiles(ctx, nil, t.summary(e), false); err != nil {
		// An empty table still records the position it was copied at, so a
		// restart does not copy it again.
		return 0, fmt.Errorf("record the empty copy of %s: %w", t.ID, err)
	}
	return n, t.finish(ctx, tx, e, base)
}

func (t *Table) writeData(ctx context.Context, base *table.Table, batches iter.Seq2[arrow.RecordBatch, error]) ([]iceberg.DataFile, error) {
	var files []iceberg.DataFile
	for f, err := range table.WriteRecords(ctx, base, t.dataOut.schema, batches) {
		if err != nil {
			return nil, fmt.Errorf("write data files of %s: %w", t.ID, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// finish commits the staged transaction and reconciles on failure.
func (t *Table) finish(ctx context.Context, tx *table.Transaction, e Epoch, base *table.Table) error {
	if t.BeforeCommit != nil {
		t.BeforeCommit()
	}
	next, err := tx.Commit(ctx)
	if err == nil {
		t.tbl = next
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
		t.tbl = fresh
		return nil
	}
	if cur, old := fresh.CurrentSnapshot(), base.CurrentSnapshot(); snapshotID(cur) != snapshotID(old) {
		if onlyRewritesSince(fresh, base) {
			// Rewrites (a cdcsync compaction, Spark's rewrite_data_files or
			// rewrite_manifests) keep the rows as they are. This commit only
			// adds files, whose equality deletes get a higher sequence number
			// than anything a rewrite wrote and so still apply to the
			// rewritten rows: committing again on top is safe.
			t.tbl = fresh
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
	t.tbl = fresh
	return fmt.Errorf("commit epoch %d to %s: %w", e.Number, t.ID, err)
}

func snapshotID(s *table.Snapshot) int64 {
	if s == nil {
		return -1
	}
	return s.SnapshotID
}

func (t *Table) reload(ctx context.Context) (*table.Table, error) {
	fresh := *t.tbl
	if err := fresh.Refresh(ctx); err != nil {
		return nil, err
	}
	return &fresh, nil
}

// sliceBatches yields rows as record batches of at most 64k rows.
func sliceBatches(l *rowLayout, rows []cdcsync.Row) iter.Seq2[arrow.RecordBatch, error] {
	const max = 1 << 16
	return func(yield func(arrow.RecordBatch, error) bool) {
		bb := newBatchBuilder(l)
		defer bb.release()
		for i, r := range rows {
			if err := bb.add(r); err != nil {
				yield(nil, err)
				return
			}
			if bb.n == max || i == len(rows)-1 {
				if !yield(bb.flush(), nil) {
					return
				}
			}
		}
	}
}

// CommittedBy returns what the named pipeline last committed to tbl.
func CommittedBy(tbl *table.Table, pipeline string) (Committed, error) {
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
