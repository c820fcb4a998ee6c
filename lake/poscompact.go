package lake

import (
	"context"
	"fmt"
	"sort"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// Compaction of a table in position mode.
//
// A position delete names one row of one data file, so it costs a reader
// only that file's share and it dies with that file: unlike an equality
// delete, it never makes a whole partition's older files worth rewriting.
// A compaction in position mode therefore rewrites a large data file only
// when the fraction of its rows deleted reaches delete_ratio; small files
// (below small_file_size) with deletes are rewritten at once, as are small
// files where they crowd, as in equality mode; and it keeps the number of position delete files of a
// partition below delete_files by merging them into one: the entries that
// still name live rows are written again, those of files gone or rewritten
// by the same run are dropped.
//
// A table switched from equality mode keeps its equality deletes until the
// first compaction, which runs the equality selection (whole partitions).

// posMerge replaces a partition's position delete files by one file of
// their live entries.
type posMerge struct {
	key     string
	deletes []iceberg.DataFile
}

// positionPlan is what a compaction in position mode rewrites.
type positionPlan struct {
	groups   []table.CompactionTaskGroup
	merges   []posMerge
	deferred int
}

// posPartition is one partition's live files and position deletes.
type posPartition struct {
	tasks   []table.FileScanTask
	deletes map[string]iceberg.DataFile // its position delete files by path
	deleted int64                       // rows its position deletes name
	small   int
	staged  bool // the staged files (staged.go)
}

// hasEqualityDeletes reports whether any task carries an equality delete.
func hasEqualityDeletes(tasks []table.FileScanTask) bool {
	for _, tk := range tasks {
		if len(tk.EqualityDeleteFiles) > 0 {
			return true
		}
	}
	return false
}

// deletedRows counts, per data file path, the rows that the position
// delete files and deletion vectors of tasks name. A row named twice (a
// replayed key index may delete a row again) counts twice, which only
// makes its file due a little earlier.
func deletedRows(ctx context.Context, fsys icebergio.IO, tasks []table.FileScanTask) (map[string]int64, error) {
	counts := map[string]int64{}
	read := map[string]bool{}
	for _, tk := range tasks {
		for _, d := range tk.DeleteFiles {
			if read[d.FilePath()] {
				continue
			}
			read[d.FilePath()] = true
			if err := eachPositionDelete(ctx, fsys, d, func(path string, _ int64) bool {
				counts[path]++
				return true
			}); err != nil {
				return nil, err
			}
		}
		for _, d := range tk.DeletionVectorFiles {
			counts[tk.File.FilePath()] += d.Count()
		}
	}
	return counts, nil
}

// selectPositionCompaction picks, partition by partition, the data files
// to rewrite (large ones whose deleted fraction reached DeleteRatio, small
// ones with deletes, and the partition's other small files when it is
// rewritten or they crowd) and the partitions whose position delete files
// to merge. Files with deletes go first, then oldest first; the partitions
// with the most deleted rows first, up to MaxBytes.
func selectPositionCompaction(tasks []table.FileScanTask, deleted map[string]int64, o *CompactOptions, staged func(iceberg.DataFile) bool) positionPlan {
	parts := map[string]*posPartition{}
	var order []string
	for _, tk := range tasks {
		key := partitionKey(tk.File)
		p := parts[key]
		if p == nil {
			p = &posPartition{deletes: map[string]iceberg.DataFile{}}
			parts[key] = p
			order = append(order, key)
		}
		p.tasks = append(p.tasks, tk)
		p.staged = p.staged || staged(tk.File)
		p.deleted += deleted[tk.File.FilePath()]
		if tk.File.FileSizeBytes() < o.SmallFileSize {
			p.small++
		}
		for _, d := range tk.DeleteFiles {
			p.deletes[d.FilePath()] = d
		}
	}
	crowded := len(tasks) > max(2*len(parts), o.SmallFiles)
	sort.SliceStable(order, func(i, j int) bool {
		a, b := parts[order[i]], parts[order[j]]
		if a.staged != b.staged {
			return a.staged // first: their rows are read by every query
		}
		return a.deleted > b.deleted
	})

	var plan positionPlan
	b := compactBudget{max: o.MaxBytes, maxFiles: o.MaxFiles}
	for _, key := range order {
		p := parts[key]
		// A small file with deletes costs little to rewrite and a reader
		// its own open: it goes; a large one once delete_ratio of its rows
		// are deleted. Once a partition is rewritten at all, its other
		// small files join (as in equality mode): they cost nothing more
		// to merge and one open less each to read.
		var cands []compactCand
		smallDue := o.Force || p.small >= o.SmallFiles || (crowded && p.small >= 2)
		small := func(tk table.FileScanTask) bool { return tk.File.FileSizeBytes() < o.SmallFileSize }
		for _, tk := range p.tasks {
			n := deleted[tk.File.FilePath()]
			// Staged rows always move to their partitions.
			if p.staged || (n > 0 && (o.Force || small(tk) || (tk.File.Count() > 0 && float64(n) >= o.DeleteRatio*float64(tk.File.Count())))) {
				// (A staged file counts as carrying: it is rewritten alone too.)
				cands = append(cands, compactCand{tk, n > 0 || p.staged})
			}
		}
		smallDue = smallDue || len(cands) > 0
		for _, tk := range p.tasks {
			if smallDue && small(tk) && deleted[tk.File.FilePath()] == 0 && !p.staged {
				cands = append(cands, compactCand{tk, false})
			}
		}
		// Files with deletes first (a position delete dies with its file,
		// whatever the order), then small files, oldest first.
		sort.SliceStable(cands, func(i, j int) bool {
			if cands[i].carries != cands[j].carries {
				return cands[i].carries
			}
			if a, b := seqOf(&cands[i].tk), seqOf(&cands[j].tk); a != b {
				return a < b
			}
			return cands[i].tk.File.FilePath() < cands[j].tk.File.FilePath()
		})
		g := b.take(key, cands)
		if len(g.Tasks) > 0 {
			plan.groups = append(plan.groups, g)
		}
		// The partition's delete files are merged when they are many, and
		// whenever files of the partition are rewritten (their entries
		// naming those files go), so that a delete file never outlives
		// the rows it names.
		if len(p.deletes) >= max(o.DeleteFiles, 1) || (len(p.deletes) > 0 && (o.Force || len(g.Tasks) > 0)) {
			m := posMerge{key: key}
			for _, d := range p.deletes {
				m.deletes = append(m.deletes, d)
			}
			sort.Slice(m.deletes, func(i, j int) bool { return m.deletes[i].FilePath() < m.deletes[j].FilePath() })
			plan.merges = append(plan.merges, m)
		}
	}
	plan.deferred = b.deferred
	return plan
}

// mergedDeletes is a merge's outcome: the delete files it replaces and the
// ones it wrote (none when no entry still names a live row).
type mergedDeletes struct {
	old, added []iceberg.DataFile
}

// writeMerges writes, for each merge, one position delete file (per spec
// and partition) of the entries that name data files of tasks that the
// run does not rewrite.
func (t *Table) writeMerges(ctx context.Context, tbl *table.Table, tasks []table.FileScanTask, merges []posMerge, rewritten map[string]struct{}) ([]mergedDeletes, error) {
	if len(merges) == 0 {
		return nil, nil
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	live := map[string]iceberg.DataFile{}
	for _, tk := range tasks {
		if _, gone := rewritten[tk.File.FilePath()]; !gone {
			live[tk.File.FilePath()] = tk.File
		}
	}
	var out []mergedDeletes
	fail := func(err error) ([]mergedDeletes, error) {
		for _, m := range out {
			t.removeFiles(ctx, tbl, m.added)
		}
		return nil, fmt.Errorf("merge the position deletes of %s: %w", t.ID, err)
	}
	for _, m := range merges {
		var targets []posTarget
		tuples := map[string]partitionRecord{}
		seen := map[posKey]bool{}
		for _, d := range m.deletes {
			var perr error
			err := eachPositionDelete(ctx, fsys, d, func(path string, pos int64) bool {
				df, ok := live[path]
				if !ok || partitionKey(df) != m.key || seen[posKey{path, pos}] {
					return true
				}
				seen[posKey{path, pos}] = true
				vals, ok := tuples[path]
				if !ok {
					if vals, perr = partitionTuple(tbl.Metadata(), df); perr != nil {
						return false
					}
					tuples[path] = vals
				}
				targets = append(targets, posTarget{path: path, pos: pos, spec: int(df.SpecID()), values: vals})
				return true
			})
			if err == nil {
				err = perr
			}
			if err != nil {
				return fail(err)
			}
		}
		added, err := t.writePositionDeletes(ctx, tbl, targets)
		if err != nil {
			return fail(err)
		}
		out = append(out, mergedDeletes{old: m.deletes, added: added})
	}
	return out, nil
}

type posKey struct {
	path string
	pos  int64
}
