package lake

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"
)

// Planning a compaction of a table in dv mode from cached manifests.
//
// A compaction plans the table's live files before each run. iceberg-go's
// scan planning reads every manifest of the snapshot, with every column's
// statistics: on a finely partitioned dv table (29,000 data files, 20,000
// deletion vectors) 2.2 to 2.8 s of CPU a run, and as much garbage, next to
// epochs that commit every few seconds on two cores (issue 23); and again
// under the commit lock when an epoch landed while it planned.
//
// Manifests never change once written, and each snapshot keeps most of
// its parent's. So a dv table's plans read manifests without column
// statistics (iceberg.EntriesWithProjection: what a scan task needs) and
// keep their live entries by manifest path: a plan decodes only the
// manifests written since the previous one, and the cache keeps only the
// manifests of the snapshot last planned. The live deletion vectors an
// epoch needs (dv.go) come from the same cache.
//
// A deletion vector names its data file, so matching one to its file is
// exact (the Iceberg spec's rule, as iceberg-go applies it: a vector
// applies to the file it names when the file's data sequence number is not
// above the vector's). A snapshot that holds position delete files or
// equality deletes (a table switched to dv mode, or written by another
// engine) is planned by iceberg-go: their matching by partition, sequence
// number and bounds is not repeated here.
//
// Entries read so carry no column statistics: they must never be written
// to a manifest (iceberg-go refuses to), only name files. cdcsync's own
// snapshot writer (rowdelta.go) removes files by name and writes the
// entries it reads itself.

// manifestCache keeps the live entries of a table's manifests, read
// without column statistics, by manifest path.
type manifestCache struct {
	mu     sync.Mutex
	byPath map[string][]iceberg.ManifestEntry
	// onlyDVs is the last snapshot planned whose delete files are all
	// deletion vectors (0: none).
	onlyDVs int64
	// held are the delete manifest entries the table's commits keep
	// (entrycache.go): a delete manifest held there is not decoded.
	held *deleteEntries
	// claim is what the entries not held there take of the Lake's budget
	// (budget.go): a snapshot whose entries do not fit is planned without
	// keeping them.
	claim *claim
}

// read returns the live entries of each of mans, in order, decoding those
// the cache does not hold, and keeps in the cache only the manifests of
// keep (the snapshot's whole list).
func (c *manifestCache) read(ctx context.Context, fsys icebergio.IO, mans, keep []iceberg.ManifestFile) ([][]iceberg.ManifestEntry, error) {
	out := make([][]iceberg.ManifestEntry, len(mans))
	missing := make([]bool, len(mans))
	c.mu.Lock()
	for i, mf := range mans {
		es, ok := c.byPath[mf.FilePath()]
		out[i], missing[i] = es, !ok
	}
	c.mu.Unlock()
	for i, mf := range mans {
		if !missing[i] || c.held == nil || mf.ManifestContent() != iceberg.ManifestContentDeletes {
			continue
		}
		if es, ok := c.held.get(mf.FilePath()); ok {
			out[i], missing[i] = es, false
		}
	}
	// Decoded without the lock: an epoch that needs the live vectors
	// does not wait for a compaction's first plan.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for i, mf := range mans {
		if !missing[i] {
			continue
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			var es []iceberg.ManifestEntry
			for e, err := range iceberg.EntriesWithProjection(fsys, mf, true, iceberg.ManifestEntryProjection{}) {
				if err != nil {
					return fmt.Errorf("read manifest %s: %w", mf.FilePath(), err)
				}
				es = append(es, e)
			}
			out[i] = es
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	next := make(map[string][]iceberg.ManifestEntry, len(keep))
	for _, mf := range keep {
		if es, ok := c.byPath[mf.FilePath()]; ok {
			next[mf.FilePath()] = es
		}
	}
	for i, mf := range mans {
		if _, ok := next[mf.FilePath()]; !ok {
			next[mf.FilePath()] = out[i]
		}
	}
	if !c.claim.resize(c.ownBytes(next)) {
		next = nil
	}
	c.byPath = next
	return out, nil
}

// ownBytes estimates the memory of the entries in m that the table's held
// delete entries do not share.
func (c *manifestCache) ownBytes(m map[string][]iceberg.ManifestEntry) int64 {
	n := int64(0)
	for path, es := range m {
		if c.held != nil {
			if _, shared := c.held.get(path); shared {
				continue
			}
		}
		n += int64(len(es)) * plannedEntryBytes
	}
	return n
}

// planDV returns one task per live data file of tbl's current snapshot,
// with the deletion vector that applies to it, from the cache; ok is false
// when the snapshot holds delete files that are not deletion vectors (the
// caller plans with iceberg-go).
func (c *manifestCache) planDV(ctx context.Context, tbl *table.Table) (tasks []table.FileScanTask, ok bool, err error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return nil, true, nil
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, false, err
	}
	mans, err := snap.Manifests(fsys)
	if err != nil {
		return nil, false, fmt.Errorf("read the manifest list of snapshot %d: %w", snap.SnapshotID, err)
	}
	entries, err := c.read(ctx, fsys, mans, mans)
	if err != nil {
		return nil, false, err
	}
	dvs := map[string]iceberg.ManifestEntry{}
	for i, mf := range mans {
		if mf.ManifestContent() != iceberg.ManifestContentDeletes {
			continue
		}
		for _, e := range entries[i] {
			df := e.DataFile()
			ref := df.ReferencedDataFile()
			if !table.IsDeletionVector(df) || ref == nil {
				return nil, false, nil
			}
			if _, dup := dvs[*ref]; dup {
				return nil, false, fmt.Errorf("snapshot %d holds two deletion vectors for %s; the Iceberg spec allows one", snap.SnapshotID, *ref)
			}
			dvs[*ref] = e
		}
	}
	for i, mf := range mans {
		if mf.ManifestContent() != iceberg.ManifestContentData {
			continue
		}
		for _, e := range entries[i] {
			df := e.DataFile()
			tk := table.FileScanTask{File: df, Start: 0, Length: df.FileSizeBytes(), FirstRowID: df.FirstRowID()}
			if seq := e.SequenceNum(); seq >= 0 {
				tk.DataSequenceNumber = &seq
			}
			if dv, ok := dvs[df.FilePath()]; ok {
				if s := dv.SequenceNum(); s < 0 || e.SequenceNum() <= s {
					tk.DeletionVectorFiles = []iceberg.DataFile{dv.DataFile()}
				}
			}
			tasks = append(tasks, tk)
		}
	}
	c.mu.Lock()
	c.onlyDVs = snap.SnapshotID
	c.mu.Unlock()
	return tasks, true, nil
}

// holdsOnlyDVs reports whether the snapshot id was planned from the cache:
// its delete files are all deletion vectors.
func (c *manifestCache) holdsOnlyDVs(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return id != 0 && c.onlyDVs == id
}

// liveDVs returns the deletion vectors of snap, by the path of the data
// file each names, from the cache.
func (c *manifestCache) liveDVs(ctx context.Context, fsys icebergio.IO, snap *table.Snapshot) (map[string]iceberg.DataFile, error) {
	byPath := map[string]iceberg.DataFile{}
	if snap == nil {
		return byPath, nil
	}
	mans, err := snap.Manifests(fsys)
	if err != nil {
		return nil, fmt.Errorf("read the manifest list of snapshot %d: %w", snap.SnapshotID, err)
	}
	var dels []iceberg.ManifestFile
	for _, mf := range mans {
		if mf.ManifestContent() == iceberg.ManifestContentDeletes {
			dels = append(dels, mf)
		}
	}
	entries, err := c.read(ctx, fsys, dels, mans)
	if err != nil {
		return nil, err
	}
	for _, es := range entries {
		for _, e := range es {
			df := e.DataFile()
			if ref := df.ReferencedDataFile(); table.IsDeletionVector(df) && ref != nil {
				byPath[*ref] = df
			}
		}
	}
	return byPath, nil
}

// planFiles returns the live files of tbl's current snapshot as scan tasks
// for a compaction: from the manifest cache in dv mode (one task per data
// file), through iceberg-go's scan planning otherwise.
func (t *Table) planFiles(ctx context.Context, tbl *table.Table) ([]table.FileScanTask, error) {
	if t.mode == DeletesDV {
		tasks, ok, err := t.state.manifests.planDV(ctx, tbl)
		if err != nil || ok {
			return tasks, err
		}
	}
	return tbl.Scan().PlanFiles(ctx)
}
