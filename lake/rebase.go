package lake

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// A compaction in position mode next to epoch commits.
//
// Epochs delete rows by naming their data file and position. A compaction
// that rewrites a file while an epoch deletes one of its rows would, on
// commit, bring the row back: the new file still holds it. Holding the
// table's commit lock for the whole rewrite avoids that, and made epochs
// wait for it: 8 s at 50,000 changes/s (issue 20). So a compaction of a
// format v2 table in position mode reads and writes its files without the
// lock, remembering where each row it read went (rowMap), and under the
// lock, before it commits, it rebases the position deletes that epochs
// committed in the meantime: every delete file added since the snapshot it
// read that names a rewritten file is replaced, in the same commit, by one
// naming the same rows, at their new places for the rewritten files. The
// key index follows in the same critical section (replayIndex skips the
// rows such a commit deletes in the files it adds).

// readFile is where a compaction group's reader put the rows of one file
// it read whole: the ordinal, among the rows it yielded, of the file's
// first live row, and the positions it dropped as deleted (sorted); exact
// is false when it dropped other rows too (equality deletes), whose
// positions it does not know.
type readFile struct {
	first int64
	gone  []int64
	exact bool
}

// rowMap says where a compaction group put the rows it read: those of
// each file it read, less the deleted ones, in file order, one after the
// other across the new files in the order they were written.
type rowMap struct {
	read map[string]readFile
	news []iceberg.DataFile
	ends []int64 // ends[i]: the ordinal after news[i]'s last row
}

// newRowMap returns the rowMap of a group that rd read and news holds, or
// nil when the order of the rows is not known: a table sort order
// (iceberg-go sorts each batch), or new files in more than one partition
// (one rolling writer per partition, so rows of different partitions
// interleave).
func newRowMap(tbl *table.Table, rd *liveReader, news []iceberg.DataFile) *rowMap {
	if !tbl.SortOrder().IsUnsorted() {
		return nil
	}
	m := &rowMap{read: rd.read, news: news}
	var n int64
	for _, df := range news {
		if df.SpecID() != news[0].SpecID() || partitionKey(df) != partitionKey(news[0]) {
			return nil
		}
		n += df.Count()
		m.ends = append(m.ends, n)
	}
	return m
}

// knows reports whether m knows where the rows of the file at path went.
func (m *rowMap) knows(path string) bool {
	return m != nil && m.read[path].exact
}

// place returns the new file and position of the row at pos of the file
// at path, which the group read exactly (knows); ok is false when that row
// was deleted when the group read it.
func (m *rowMap) place(path string, pos int64) (df iceberg.DataFile, at int64, ok bool, err error) {
	rf := m.read[path]
	if !rf.exact {
		return nil, 0, false, fmt.Errorf("the compaction does not know where the rows of %s went; this is a bug", path)
	}
	i, dead := slices.BinarySearch(rf.gone, pos)
	if dead {
		return nil, 0, false, nil
	}
	ord := rf.first + pos - int64(i)
	j := sort.Search(len(m.ends), func(j int) bool { return m.ends[j] > ord })
	if pos < 0 || j == len(m.ends) {
		return nil, 0, false, fmt.Errorf("row %d of %s has no place in the compacted files (%d rows); this is a bug", pos, path, m.total())
	}
	var start int64
	if j > 0 {
		start = m.ends[j-1]
	}
	return m.news[j], ord - start, true, nil
}

func (m *rowMap) total() int64 {
	if len(m.ends) == 0 {
		return 0
	}
	return m.ends[len(m.ends)-1]
}

// rebasedDeletes replace, in a compaction's commit, the position delete
// files committed since it read the table that name files it rewrote.
type rebasedDeletes struct {
	replaced, added []iceberg.DataFile
	rows            int // deletes carried over to the new files
	// at holds those deletes' positions by new file (unsorted), for the
	// key index's replay of the commit.
	at map[string][]int64
}

// rebase is a compaction's rebase of epochs' position deletes: those of
// the snapshots up to early, done before it takes the commit lock, and
// those after, done under it (again on each attempt of its commit).
type rebase struct {
	moves         map[string]*rowMap
	from          int64 // the snapshot the compaction read
	early         int64 // the snapshot the early rebase went to (from: none)
	before, after rebasedDeletes
}

// rebaseEarly rebases, without the commit lock, the deletes that epochs
// committed on t since the compaction read base: again for those that
// landed during the previous pass (the first can take seconds), so that
// little is left for the commit lock.
func (t *Table) rebaseEarly(ctx context.Context, base *table.Table, rb *rebase, fault func(string)) error {
	for pass := 0; pass < 3 && len(rb.moves) > 0; pass++ {
		cur := t.current()
		id := snapshotID(cur.CurrentSnapshot())
		if id == rb.early || !onlyEpochsSince(cur, base, t.pipeline) {
			return nil // nothing new, or the commit decides
		}
		live, err := cur.Scan().PlanFiles(ctx)
		if err != nil {
			return fmt.Errorf("compact %s: plan files: %w", t.ID, err)
		}
		more, err := t.rebaseDeletes(ctx, cur, rb.early, rb.moves, live)
		if err != nil {
			return err
		}
		rb.before, rb.early = rb.before.plus(more), id
		if fault != nil {
			fault("compaction-rebase-pass")
		}
	}
	return nil
}

// late rebases the deletes committed on tbl after the early rebase,
// replacing those of an earlier attempt.
func (rb *rebase) late(ctx context.Context, t *Table, tbl *table.Table, live []table.FileScanTask) error {
	t.removeFiles(ctx, tbl, rb.after.added)
	var err error
	rb.after, err = t.rebaseDeletes(ctx, tbl, rb.early, rb.moves, live)
	return err
}

// all is the whole rebase.
func (rb *rebase) all() rebasedDeletes {
	out := rb.before.plus(rb.after)
	for _, at := range out.at {
		slices.Sort(at)
	}
	return out
}

// plus returns r and o together.
func (r rebasedDeletes) plus(o rebasedDeletes) rebasedDeletes {
	out := rebasedDeletes{
		replaced: append(slices.Clip(r.replaced), o.replaced...),
		added:    append(slices.Clip(r.added), o.added...),
		rows:     r.rows + o.rows,
		at:       map[string][]int64{},
	}
	for _, part := range []map[string][]int64{r.at, o.at} {
		for path, at := range part {
			out.at[path] = append(out.at[path], at...)
		}
	}
	return out
}

// discard removes the delete files the rebase wrote (the compaction was
// dropped).
func (rb *rebase) discard(ctx context.Context, t *Table, tbl *table.Table) {
	t.removeFiles(ctx, tbl, rb.before.added)
	t.removeFiles(ctx, tbl, rb.after.added)
	rb.before, rb.after = rebasedDeletes{}, rebasedDeletes{}
}

// rebaseDeletes returns the rebase of the position deletes committed on
// tbl after snapshot from (see the top of this file). moves has an entry
// for every data file the compaction rewrote (nil when the group's row
// order is not known); a delete naming a file whose rows' places are not
// known is a conflict.
// live are tbl's current files; entries naming files not among them
// (removed since) are dropped.
func (t *Table) rebaseDeletes(ctx context.Context, tbl *table.Table, from int64, moves map[string]*rowMap, live []table.FileScanTask) (rebasedDeletes, error) {
	var out rebasedDeletes
	if len(moves) == 0 {
		return out, nil
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return out, err
	}
	files := make(map[string]iceberg.DataFile, len(live))
	for _, tk := range live {
		files[tk.File.FilePath()] = tk.File
	}
	meta := tbl.Metadata()
	var targets []posTarget
	tuples := map[string]partitionRecord{}
	target := func(df iceberg.DataFile, pos int64) error {
		vals, ok := tuples[df.FilePath()]
		if !ok {
			var err error
			if vals, err = partitionTuple(meta, df); err != nil {
				return err
			}
			tuples[df.FilePath()] = vals
		}
		targets = append(targets, posTarget{path: df.FilePath(), pos: pos, spec: int(df.SpecID()), values: vals})
		return nil
	}
	type entry struct {
		path string
		pos  int64
	}
	err = eachDeleteSince(ctx, fsys, tbl, from, func(d iceberg.DataFile) error {
		var entries []entry
		hit := false
		if err := eachPositionDelete(ctx, fsys, d, func(path string, pos int64) bool {
			_, rewritten := moves[path]
			hit = hit || rewritten
			entries = append(entries, entry{path, pos})
			return true
		}); err != nil {
			return err
		}
		if !hit {
			return nil
		}
		if table.IsDeletionVector(d) {
			return fmt.Errorf("%w: deletion vector %s, committed while the compaction of %s ran, deletes rows of a file it rewrote; it runs again later",
				ErrCompactionConflict, d.FilePath(), t.ID)
		}
		out.replaced = append(out.replaced, d)
		for _, e := range entries {
			m, rewritten := moves[e.path]
			switch {
			case rewritten && !m.knows(e.path):
				return fmt.Errorf("%w: position delete file %s, committed while the compaction of %s ran, deletes rows of a file it rewrote; it runs again later",
					ErrCompactionConflict, d.FilePath(), t.ID)
			case rewritten:
				df, at, ok, err := m.place(e.path, e.pos)
				if err != nil {
					return err
				}
				if ok {
					out.rows++
					if out.at == nil {
						out.at = map[string][]int64{}
					}
					out.at[df.FilePath()] = append(out.at[df.FilePath()], at)
					if err := target(df, at); err != nil {
						return err
					}
				}
			case files[e.path] != nil:
				if err := target(files[e.path], e.pos); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	if out.added, err = t.writePositionDeletes(ctx, tbl, targets); err != nil {
		return out, fmt.Errorf("compact %s: carry the position deletes of epochs over to the compacted files: %w", t.ID, err)
	}
	return out, nil
}

// eachDeleteSince calls fn with every position delete file and deletion
// vector that the snapshots of tbl's current lineage after snapshot from
// added.
func eachDeleteSince(ctx context.Context, fsys icebergio.IO, tbl *table.Table, from int64, fn func(iceberg.DataFile) error) error {
	meta := tbl.Metadata()
	for s := meta.CurrentSnapshot(); s != nil && s.SnapshotID != from; {
		if err := eachAddedDelete(fsys, s, fn); err != nil {
			return err
		}
		if s.ParentSnapshotID == nil {
			return fmt.Errorf("%w: snapshot %d is not an ancestor of the current one", ErrCompactionConflict, from)
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return nil
}

// eachAddedDelete calls fn with every position delete file and deletion
// vector that snapshot s added.
func eachAddedDelete(fsys icebergio.IO, s *table.Snapshot, fn func(iceberg.DataFile) error) error {
	mfs, err := s.Manifests(fsys)
	if err != nil {
		return err
	}
	for _, mf := range mfs {
		if mf.ManifestContent() != iceberg.ManifestContentDeletes || mf.SnapshotID() != s.SnapshotID {
			continue
		}
		for e, err := range mf.Entries(fsys, true) {
			if err != nil {
				return err
			}
			df := e.DataFile()
			if e.SnapshotID() != s.SnapshotID || e.Status() != iceberg.EntryStatusADDED || df.ContentType() != iceberg.EntryContentPosDeletes {
				continue
			}
			if err := fn(df); err != nil {
				return err
			}
		}
	}
	return nil
}

// ownDeletes returns, by data file path, the positions (sorted) that the
// position deletes snapshot s added delete from the data files it added
// (added): a compaction that rebased epochs' deletes adds both. An epoch
// never deletes rows it adds, so its snapshots are not read.
func ownDeletes(ctx context.Context, fsys icebergio.IO, s *table.Snapshot, added []iceberg.DataFile) (map[string][]int64, error) {
	if len(added) == 0 || (s.Summary != nil && s.Summary.Properties[SummaryEpoch] != "") {
		return nil, nil
	}
	paths := make(map[string]bool, len(added))
	for _, df := range added {
		paths[df.FilePath()] = true
	}
	var out map[string][]int64
	err := eachAddedDelete(fsys, s, func(d iceberg.DataFile) error {
		return eachPositionDelete(ctx, fsys, d, func(path string, pos int64) bool {
			if paths[path] {
				if out == nil {
					out = map[string][]int64{}
				}
				out[path] = append(out[path], pos)
			}
			return true
		})
	})
	for _, p := range out {
		slices.Sort(p)
	}
	return out, err
}

// rebases reports whether a compaction of t rebases the position deletes
// of epochs committed while it runs, and so does not hold the commit lock
// while it reads and writes: position mode on format v2 (a v3 table's
// groups go through iceberg-go's reader, whose row order is its own),
// without a sort order, and without staged rows (their rewrite yields to
// epochs instead, staged.go).
func (t *Table) rebases() bool {
	cur := t.current()
	return t.mode == DeletesPosition && cur.Metadata().Version() < 3 && cur.SortOrder().IsUnsorted() && !t.state.staged.Load()
}
