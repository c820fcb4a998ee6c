package lake

// Deletion vectors (deletes.mode: dv).
//
// A table in dv mode is an Iceberg format v3 table that records an update or
// delete like position mode does (through the key index), but as a deletion
// vector: a bitmap of the deleted positions of one data file, stored as a
// blob of a Puffin file. An epoch writes one Puffin file per 128 data files
// its deletes touch, whatever the partitions (position mode writes a delete
// file per partition, the cost that dominates an epoch of a finely
// partitioned table, issue 23).
//
// The v3 spec allows one live deletion vector per data file. A data file
// that already has one gets a new vector holding the old positions and the
// new ones, and the commit removes the old vector (RowDelta.RemoveDeletes),
// so the live vectors of the snapshot an epoch is written on must be known:
// liveDVs reads them from its delete manifests, and keeps them per table
// while only this process's epochs commit.

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
)

// DeletesDV is the deletes mode that writes deletion vectors (format v3).
const DeletesDV = "dv"

// dvFormatVersion is the Iceberg format version deletion vectors need.
const dvFormatVersion = 3

// byPosition reports whether the mode deletes rows by position, through the
// key index: position and dv.
func byPosition(mode string) bool { return mode == DeletesPosition || mode == DeletesDV }

// dvSet collects positions to delete, by data file, as bitmaps.
type dvSet struct {
	entries map[string]*dvEntry
	order   []string // paths in the order first added
}

type dvEntry struct {
	bitmap *dv.RoaringPositionBitmap
	spec   int
	values partitionRecord
}

func newDVSet() *dvSet { return &dvSet{entries: map[string]*dvEntry{}} }

func (s *dvSet) add(tg posTarget) {
	e := s.entries[tg.path]
	if e == nil {
		e = &dvEntry{bitmap: dv.NewRoaringPositionBitmap(), spec: tg.spec, values: tg.values}
		s.entries[tg.path] = e
		s.order = append(s.order, tg.path)
	}
	e.bitmap.Set(uint64(tg.pos))
}

func (s *dvSet) empty() bool { return s == nil || len(s.order) == 0 }

// liveDVSet is the live deletion vectors of one snapshot, by the path of the
// data file each names.
type liveDVSet struct {
	snap   int64
	byPath map[string]iceberg.DataFile
}

// liveDVs returns the live deletion vectors of tbl's head (on the ref epochs
// commit to), by data file path. Under commitMu.
func (t *Table) liveDVs(ctx context.Context, tbl *table.Table) (map[string]iceberg.DataFile, error) {
	meta := tbl.Metadata()
	snap := head(meta, refOf(meta))
	if c := t.state.dvs; c != nil && c.snap == snapshotID(snap) {
		return c.byPath, nil
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	byPath, err := t.state.manifests.liveDVs(ctx, fsys, snap)
	if err != nil {
		return nil, fmt.Errorf("read the deletion vectors of %s: %w", t.ID, err)
	}
	t.state.dvs = &liveDVSet{snap: snapshotID(snap), byPath: byPath}
	return byPath, nil
}

// advanceDVs follows an epoch commit of dels on base in the cache of live
// deletion vectors (each new vector replaces the one its data file had);
// any other change of the table drops the cache. Under commitMu.
func (t *Table) advanceDVs(base *table.Table, dels []iceberg.DataFile) {
	c := t.state.dvs
	if c == nil {
		return
	}
	if c.snap != snapshotID(head(base.Metadata(), refOf(base.Metadata()))) {
		t.state.dvs = nil
		return
	}
	for _, d := range dels {
		if ref := d.ReferencedDataFile(); table.IsDeletionVector(d) && ref != nil {
			c.byPath[*ref] = d
		}
	}
	cur := t.current().Metadata()
	h := head(cur, refOf(cur))
	if h == nil || parentID(h) != c.snap {
		t.state.dvs = nil // not our commit on top of base
		return
	}
	c.snap = h.SnapshotID
}

// writeDVs writes the positions of set, each data file's merged with the
// live deletion vector it has in tbl, as Puffin files of at most dvsPerFile
// vectors, and returns the vectors and the live ones they supersede (for
// the commit to remove).
func (t *Table) writeDVs(ctx context.Context, tbl *table.Table, set *dvSet) (added, superseded []iceberg.DataFile, err error) {
	if set.empty() {
		return nil, nil, nil
	}
	live, err := t.liveDVs(ctx, tbl)
	if err != nil {
		return nil, nil, err
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("open the file IO of %s: %w", t.ID, err)
	}
	wfs, ok := fsys.(icebergio.WriteFileIO)
	if !ok {
		return nil, nil, fmt.Errorf("the file IO of %s cannot write files", t.ID)
	}
	loc, err := tbl.LocationProvider()
	if err != nil {
		return nil, nil, fmt.Errorf("the location provider of %s: %w", t.ID, err)
	}
	olds, superseded, err := t.oldDVs(ctx, fsys, set, live)
	if err != nil {
		return nil, nil, err
	}
	// A Puffin file holds the vectors of one partition spec (a table with
	// staged rows, staged.go, has two), so that a reader that groups
	// delete files by spec finds each file under one.
	bySpec := map[int][]string{}
	var specs []int
	for _, p := range set.order {
		sp := set.entries[p].spec
		if _, ok := bySpec[sp]; !ok {
			specs = append(specs, sp)
		}
		bySpec[sp] = append(bySpec[sp], p)
	}
	type puffinFile struct {
		path  string
		paths []string // the data files whose vectors it holds
	}
	var files []puffinFile
	for _, sp := range specs {
		order := bySpec[sp]
		for start := 0; start < len(order); start += dvsPerFile {
			files = append(files, puffinFile{loc.NewDataLocation(uuid.NewString() + "-dv.puffin"), order[start:min(start+dvsPerFile, len(order))]})
		}
	}
	// Written a few at a time: on S3 each is a request.
	written := make([][]iceberg.DataFile, len(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(dvRequests)
	for i, f := range files {
		g.Go(func() error {
			var err error
			written[i], err = t.writeDVFile(gctx, tbl, wfs, f.path, set, f.paths, live, olds)
			return err
		})
	}
	err = g.Wait()
	for _, a := range written {
		added = append(added, a...)
	}
	if err != nil {
		t.removeFiles(ctx, tbl, added)
		return nil, nil, err
	}
	return added, superseded, nil
}

// dvRequests bounds the Puffin files an epoch reads or writes at once.
const dvRequests = 8

// dvsByFile are deletion vectors to read, by Puffin file.
type dvsByFile struct {
	files  []string // in the order first added
	byFile map[string][]iceberg.DataFile
}

func (v *dvsByFile) add(del iceberg.DataFile) {
	if v.byFile == nil {
		v.byFile = map[string][]iceberg.DataFile{}
	}
	if _, seen := v.byFile[del.FilePath()]; !seen {
		v.files = append(v.files, del.FilePath())
	}
	v.byFile[del.FilePath()] = append(v.byFile[del.FilePath()], del)
}

// read reads the vectors, each Puffin file once and dvRequests files at
// once (on S3 each read is a request), and calls got with each one, one
// call at a time.
func (v *dvsByFile) read(ctx context.Context, fsys icebergio.IO, got func(del iceberg.DataFile, bm *dv.RoaringPositionBitmap)) error {
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(dvRequests)
	for _, file := range v.files {
		dels := v.byFile[file]
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			bms, err := readDVBlobsFrom(fsys, dels)
			if err != nil {
				return fmt.Errorf("read the deletion vectors in %s: %w", file, err)
			}
			mu.Lock()
			defer mu.Unlock()
			for i, del := range dels {
				got(del, bms[i])
			}
			return nil
		})
	}
	return g.Wait()
}

// dvSpanBytes is the most readDVBlobsFrom reads at once to get several
// vectors of a file in one request.
const dvSpanBytes = 4 << 20

// oldDVs returns the bitmaps of the live vectors that the vectors of set
// replace, by data file path, and those vectors. Those this process wrote
// come from memory (dvcache.go); the others are read, each Puffin file
// once, a few files at a time: an epoch of a finely partitioned table
// replaces thousands of vectors, and read one by one from S3 they took 49
// s an epoch.
func (t *Table) oldDVs(ctx context.Context, fsys icebergio.IO, set *dvSet, live map[string]iceberg.DataFile) (map[string]*dv.RoaringPositionBitmap, []iceberg.DataFile, error) {
	olds := map[string]*dv.RoaringPositionBitmap{}
	var superseded []iceberg.DataFile
	var toRead dvsByFile
	for _, p := range set.order {
		old, ok := live[p]
		if !ok {
			continue
		}
		superseded = append(superseded, old)
		if bm := t.dvs.get(old); bm != nil {
			olds[p] = bm
			continue
		}
		toRead.add(old)
	}
	err := toRead.read(ctx, fsys, func(del iceberg.DataFile, bm *dv.RoaringPositionBitmap) {
		olds[*del.ReferencedDataFile()] = bm
	})
	if err != nil {
		return nil, nil, fmt.Errorf("merge the deletion vectors of %s with their new positions: %w", t.ID, err)
	}
	return olds, superseded, nil
}

// dvsPerFile bounds the deletion vectors of one Puffin file. A reader that
// reads a vector through the file's footer (iceberg-go's scans, and so its
// compaction) parses every vector's entry each time: with an epoch's
// thousands in one file, a compaction of a finely partitioned table spent
// half its time there (BenchmarkCompactFinePartitions/dv).
const dvsPerFile = 128

// writeDVFile writes the vectors of the data files paths of set, each
// merged with its live one (whose bitmap olds holds), as the Puffin file
// at path.
func (t *Table) writeDVFile(ctx context.Context, tbl *table.Table, wfs icebergio.WriteFileIO, path string, set *dvSet, paths []string,
	live map[string]iceberg.DataFile, olds map[string]*dv.RoaringPositionBitmap) (added []iceberg.DataFile, err error) {
	meta := tbl.Metadata()
	w := dv.NewDVWriter(wfs, func(id int32) *iceberg.PartitionSpec { return meta.PartitionSpecByID(int(id)) })
	merged := make(map[string]*dv.RoaringPositionBitmap, len(paths))
	for _, p := range paths {
		e := set.entries[p]
		bm := dv.NewRoaringPositionBitmap()
		if _, ok := live[p]; ok && olds[p] == nil {
			return nil, fmt.Errorf("the live deletion vector of %s in %s was not read; this is a bug", p, t.ID)
		}
		bm.Or(olds[p])
		bm.Or(e.bitmap)
		merged[p] = bm
		if old, ok := live[p]; ok {
			// The old vector's partition is its data file's (the writer
			// resolves the spec at Flush).
			w.Load(p, bm, old.SpecID(), old.Partition())
			continue
		}
		spec := meta.PartitionSpecByID(e.spec)
		if spec == nil {
			return nil, fmt.Errorf("data file %s of %s names partition spec %d, which the table does not have", p, t.ID, e.spec)
		}
		pd := make(map[int]any, len(e.values))
		for i, f := range spec.Fields() {
			if i < len(e.values) {
				pd[f.FieldID] = e.values[i]
			}
		}
		w.Load(p, bm, int32(e.spec), pd)
	}
	if added, err = w.Flush(ctx, path); err != nil {
		_ = wfs.Remove(path)
		return nil, fmt.Errorf("write the deletion vectors of %s: %w", t.ID, err)
	}
	for _, a := range added {
		if ref := a.ReferencedDataFile(); ref != nil && merged[*ref] != nil {
			t.dvs.put(a, merged[*ref])
		}
	}
	return added, nil
}

// eachDVDelete calls fn with the data file and every position of the
// deletion vector del, until fn returns false; the vector comes from cache
// when it holds it (nil: none).
func eachDVDelete(fsys icebergio.IO, cache *dvCache, del iceberg.DataFile, fn func(path string, pos int64) bool) error {
	ref := del.ReferencedDataFile()
	if ref == nil {
		return fmt.Errorf("deletion vector in %s names no data file", del.FilePath())
	}
	bm := cache.get(del)
	if bm == nil {
		bms, err := readDVBlobsFrom(fsys, []iceberg.DataFile{del})
		if err != nil {
			return fmt.Errorf("read the deletion vector of %s in %s: %w", *ref, del.FilePath(), err)
		}
		bm = bms[0]
	}
	for p := range bm.Positions() {
		if !fn(*ref, int64(p)) {
			return nil
		}
	}
	return nil
}

// readDVBlobsFrom reads the deletion vectors dels, all in one Puffin file,
// by the offsets and lengths their manifest entries record, as Iceberg
// Java does. dv.ReadDVs parses the file's footer first, which lists every
// vector of the file: an epoch that supersedes a vector or two in each of
// many files paid for all their footers (68% of the CPU of an epoch of
// 10,000 updates in BenchmarkCommitFinePartitions/dv). The vector's own
// checksum and its cardinality against the manifest's record count still
// catch a wrong offset.
func readDVBlobsFrom(fsys icebergio.IO, dels []iceberg.DataFile) ([]*dv.RoaringPositionBitmap, error) {
	for _, del := range dels {
		off, size := del.ContentOffset(), del.ContentSizeInBytes()
		if off == nil || size == nil || *size < 0 || *size > 1<<30 {
			return dv.ReadDVs(fsys, dels)
		}
	}
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, del := range dels {
		if del.FilePath() != dels[0].FilePath() {
			return nil, fmt.Errorf("deletion vector in %s read with those of %s", del.FilePath(), dels[0].FilePath())
		}
		lo, hi = min(lo, *del.ContentOffset()), max(hi, *del.ContentOffset()+*del.ContentSizeInBytes())
	}
	f, err := fsys.Open(dels[0].FilePath())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The vectors in one read when they lie close together (a Puffin
	// file of an epoch is small): on S3 each read is a request.
	var span []byte
	if hi-lo <= dvSpanBytes {
		span = make([]byte, hi-lo)
		if _, err := f.ReadAt(span, lo); err != nil {
			return nil, err
		}
	}
	bms := make([]*dv.RoaringPositionBitmap, len(dels))
	for i, del := range dels {
		off, size := *del.ContentOffset(), *del.ContentSizeInBytes()
		var buf []byte
		if span != nil {
			buf = span[off-lo : off-lo+size]
		} else {
			buf = make([]byte, size)
			if _, err := f.ReadAt(buf, off); err != nil {
				return nil, err
			}
		}
		if bms[i], err = dv.DeserializeDV(buf, del.Count()); err != nil {
			return nil, err
		}
	}
	return bms, nil
}
