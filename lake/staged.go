package lake

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
)

// Staged rows (issue 23). On a finely partitioned table (days x buckets
// over years of rows) an epoch's changes land in thousands of partitions,
// a row or two each, and a file per partition made an epoch thousands of
// files: the file, not the row, was the unit of cost (about a millisecond
// of CPU each on a local disk, a PUT each on S3), so such a table fell
// behind at a fraction of the rate an unpartitioned one keeps up with.
//
// So a write of a partitioned table in position or dv mode whose rows
// would make more than tables[].stage_above (default 64) partition files
// keeps a file of its own only for the partitions with at least
// stageMinRows rows; the rows of the others go to one file (rolled at the
// target size) written under the table's unpartitioned spec, the one
// global equality deletes use. Iceberg
// allows data files of any of a table's specs; every reader reads them
// (a partition filter cannot skip them, their column bounds still can).
// Deletes of staged rows follow them: a position delete file applies to
// the data files of its own spec and partition, so the deletes of staged
// rows are written under the unpartitioned spec too (posdelete.go groups
// by the data file's spec), and a deletion vector names its data file.
//
// Compaction moves staged rows into their partitions: the staged files
// are always due, and their live rows are written through the same
// writer, staging only what a bounded run leaves (rewriteStaged), so that
// each partition gets one file for all the epochs staged since the last
// run instead of one per epoch.
// Equality mode does not stage: its global deletes count only for the
// partitions of their rows (globaldel.go), which a staged copy is not in.

// stageMinRows is the number of rows from which a partition of such a
// write keeps its own file: the file's fixed cost is then small next to
// its rows'.
const stageMinRows = 1024

// stageSparse splits the groups of a write: those written to their own
// partition, and the rows of the others as one group to stage (nil when
// none is staged).
func stageSparse(groups []*group, above int) (kept []*group, staged *group) {
	if len(groups) <= above {
		return groups, nil
	}
	staged = &group{}
	for _, g := range groups {
		if len(g.rows) >= stageMinRows {
			kept = append(kept, g)
			continue
		}
		staged.rows = append(staged.rows, g.rows...)
	}
	if len(staged.rows) == 0 {
		return kept, nil
	}
	return kept, staged
}

// isStaged says whether df is a staged data file: a data file under the
// unpartitioned spec of a partitioned table.
func (t *Table) isStaged(df iceberg.DataFile) bool {
	st := t.stageFile
	return st != nil && df.ContentType() == iceberg.EntryContentData && int(df.SpecID()) == st.part.spec.ID()
}

// stagedChunkBytes bounds the rows a rewrite of staged rows holds at once
// (cdcsync.Row.MemSize): each chunk is written before the next is read.
const stagedChunkBytes = 64 << 20

// inChunks reads recs as rows of ts, maps each with mapRow (nil: as read)
// and hands them to write about stagedChunkBytes at a time. write may not
// keep the slice.
func inChunks(recs iter.Seq2[arrow.RecordBatch, error], ts *cdcsync.TableSchema, extra []string, mapRow func(cdcsync.Row) cdcsync.Row, write func([]cdcsync.Row) error) error {
	var rows []cdcsync.Row
	bytes := 0
	for rec, err := range recs {
		if err != nil {
			return err
		}
		rs, err := rowsFromBatch(rec, ts, extra...)
		rec.Release()
		if err != nil {
			return err
		}
		for _, r := range rs {
			if mapRow != nil {
				r = mapRow(r)
			}
			rows = append(rows, r)
			bytes += r.MemSize()
		}
		if bytes >= stagedChunkBytes {
			if err := write(rows); err != nil {
				return err
			}
			rows, bytes = rows[:0], 0
		}
	}
	if len(rows) > 0 {
		return write(rows)
	}
	return nil
}

// rewriteStaged moves the live rows of the staged files of g into their
// partitions, written as an epoch's are but without staging.
//
// A run writes at most maxFiles partition files (<= 0: no limit), for the
// partitions with the most rows; the rows of the others are staged again,
// in a new staged file that replaces the old ones. A position or dv run
// holds the table's commit lock, which bounds the time epochs wait for it.
//
// moved (nil: none) gets the keys of the rows written, for the key index.
// yield is asked after each staged file read and every yieldBatch
// partition files written. Once it returns true the run reads no more
// files: the staged files not read yet are left as they are (left counts
// them), and of the rows read, those of the partitions not written yet
// are staged again. Before, a run that yielded still read every staged
// row and wrote those it had not moved into a new staged file, all under
// the commit lock: seconds when epochs had staged rows meanwhile. A run
// that may yield reads the oldest files first, so that runs that stop
// early still drain them.
func (t *Table) rewriteStaged(ctx context.Context, tbl *table.Table, g table.CompactionTaskGroup, shared *sharedDeletes, maxFiles int,
	moved *movedKeys, yield func() bool) (res table.CompactionGroupResult, left int, err error) {
	res = table.CompactionGroupResult{PartitionKey: g.PartitionKey}
	whole := wholeFiles(g)
	// A v3 table's rows keep their row lineage: read with each row's
	// _row_id and _last_updated_sequence_number, and written with them.
	lineage := tbl.Metadata().Version() >= 3 && !slices.ContainsFunc(whole.Tasks, func(tk table.FileScanTask) bool {
		return tk.FirstRowID == nil || tk.DataSequenceNumber == nil // a file from before an upgrade to v3
	})
	// The rows are copied out of the batches (rowsFromBatch): the reader's
	// buffers are recycled.
	oldestFirst := yield != nil
	rd, err := readLive(ctx, tbl, whole, shared, lineage, oldestFirst, writeBuffers)
	if errors.Is(err, errNoKeyFilter) && lineage {
		lineage = false // a file of another schema: the rows get new ids
		rd, err = readLive(ctx, tbl, whole, shared, false, oldestFirst, writeBuffers)
	}
	if err != nil {
		return res, 0, err
	}
	// Reading stops at a file's end once the run must yield.
	rd.between = yield
	defer func() {
		if err != nil {
			t.removeFiles(ctx, tbl, res.NewDataFiles)
			res.NewDataFiles = nil
		}
	}()
	out := *t.partFile
	out.stage = t.stageFile
	var extra []string
	if lineage {
		part, err := withLineage(t.partFile, t.Schema, tbl.Metadata().Properties())
		if err != nil {
			return res, 0, err
		}
		stage, err := withLineage(t.stageFile, t.Schema, tbl.Metadata().Properties())
		if err != nil {
			return res, 0, err
		}
		out, out.stage = *part, stage
		extra = lineageColumns
	}
	budget := maxFiles
	split := func(groups []*group) ([]*group, *group) {
		if maxFiles <= 0 || len(groups) <= budget {
			budget -= len(groups)
			return groups, nil
		}
		kept, staged := largestGroups(groups, max(budget, 0))
		budget -= len(kept)
		return kept, staged
	}
	if err := inChunks(rd.records, t.Schema, extra, nil, func(rows []cdcsync.Row) error {
		var locs []rowLoc
		if moved != nil {
			locs = make([]rowLoc, len(rows))
		}
		files, err := t.writeSplit(ctx, tbl, &out, rows, locs, split, yield)
		res.NewDataFiles = append(res.NewDataFiles, files...)
		if err != nil {
			return err
		}
		if extra != nil { // the keys are of the table's columns alone
			n := len(t.Schema.Columns)
			keyed := make([]cdcsync.Row, len(rows))
			for i, r := range rows {
				keyed[i] = r[:n:n]
			}
			rows = keyed
		}
		return moved.add(t.Schema, files, rows, locs)
	}); err != nil {
		return res, 0, fmt.Errorf("move the staged rows of %s to their partitions: %w", t.ID, err)
	}
	if err := checkRowCount(res.NewDataFiles, rd.handed); err != nil {
		return res, 0, fmt.Errorf("staged rows of %s: %w", t.ID, err)
	}
	for _, f := range res.NewDataFiles {
		res.BytesAfter += f.FileSizeBytes()
	}
	for _, tk := range whole.Tasks {
		if _, read := rd.read[tk.File.FilePath()]; !read {
			left++ // not read: the run stopped before it
			continue
		}
		res.OldDataFiles = append(res.OldDataFiles, tk.File)
		res.BytesBefore += tk.File.FileSizeBytes()
		// A deletion vector names one data file: it goes with it.
		res.SafeDeletionVectors = append(res.SafeDeletionVectors, tk.DeletionVectorFiles...)
	}
	return res, left, nil
}

// wholeFiles returns g with one task per data file, covering all of it
// with the deletes of all its tasks: deletes by position need a file read
// whole and in order.
func wholeFiles(g table.CompactionTaskGroup) table.CompactionTaskGroup {
	byPath := map[string]int{}
	var out []table.FileScanTask
	addNew := func(have []iceberg.DataFile, more []iceberg.DataFile) []iceberg.DataFile {
		for _, d := range more {
			if !slices.ContainsFunc(have, func(h iceberg.DataFile) bool { return dvKey(h) == dvKey(d) }) {
				have = append(have, d)
			}
		}
		return have
	}
	for _, tk := range g.Tasks {
		i, ok := byPath[tk.File.FilePath()]
		if !ok {
			i = len(out)
			byPath[tk.File.FilePath()] = i
			w := tk
			w.Start, w.Length = 0, tk.File.FileSizeBytes()
			w.DeleteFiles, w.EqualityDeleteFiles, w.DeletionVectorFiles = nil, nil, nil
			out = append(out, w)
		}
		out[i].DeleteFiles = addNew(out[i].DeleteFiles, tk.DeleteFiles)
		out[i].EqualityDeleteFiles = addNew(out[i].EqualityDeleteFiles, tk.EqualityDeleteFiles)
		out[i].DeletionVectorFiles = addNew(out[i].DeletionVectorFiles, tk.DeletionVectorFiles)
	}
	g.Tasks = out
	return g
}

// stagedLeft returns the rows of the staged files left after a compaction:
// those of tasks (its plan) that results did not rewrite, and those results
// wrote (a bounded run stages rows again); deletes are not subtracted.
func stagedLeft(tasks []table.FileScanTask, results []table.CompactionGroupResult, staged func(iceberg.DataFile) bool) (files int, rows int64) {
	seen := map[string]bool{}
	for _, gr := range results {
		for _, f := range gr.OldDataFiles {
			seen[f.FilePath()] = true
		}
		for _, f := range gr.NewDataFiles {
			if staged(f) {
				files++
				rows += f.Count()
			}
		}
	}
	for _, tk := range tasks {
		if staged(tk.File) && !seen[tk.File.FilePath()] {
			seen[tk.File.FilePath()] = true
			files++
			rows += tk.File.Count()
		}
	}
	return files, rows
}

// StagedRows returns the rows of the table's staged files as of its last
// compaction, plus those staged since (deletes not subtracted): rows that
// partition filters cannot skip until compaction moves them.
func (t *Table) StagedRows() int64 { return t.state.stagedRows.Load() }

// largestGroups keeps the n groups with the most rows and returns the rows
// of the others as one group (nil when none is left).
func largestGroups(groups []*group, n int) (kept []*group, rest *group) {
	sorted := slices.Clone(groups)
	slices.SortStableFunc(sorted, func(a, b *group) int { return len(b.rows) - len(a.rows) })
	kept = sorted[:min(n, len(sorted))]
	if len(sorted) == len(kept) {
		return kept, nil
	}
	rest = &group{}
	for _, g := range sorted[len(kept):] {
		rest.rows = append(rest.rows, g.rows...)
	}
	return kept, rest
}
