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

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/google/uuid"
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
	for _, sp := range specs {
		order := bySpec[sp]
		for start := 0; start < len(order); start += dvsPerFile {
			paths := order[start:min(start+dvsPerFile, len(order))]
			a, s, err := t.writeDVFile(ctx, tbl, wfs, loc.NewDataLocation(uuid.NewString()+"-dv.puffin"), set, paths, live)
			if err != nil {
				t.removeFiles(ctx, tbl, added)
				return nil, nil, err
			}
			added, superseded = append(added, a...), append(superseded, s...)
		}
	}
	return added, superseded, nil
}

// dvsPerFile bounds the deletion vectors of one Puffin file. A reader that
// reads a vector through the file's footer (iceberg-go's scans, and so its
// compaction) parses every vector's entry each time: with an epoch's
// thousands in one file, a compaction of a finely partitioned table spent
// half its time there (BenchmarkCompactFinePartitions/dv).
const dvsPerFile = 128

// writeDVFile writes the vectors of the data files paths of set, each
// merged with its live one, as the Puffin file at path.
func (t *Table) writeDVFile(ctx context.Context, tbl *table.Table, wfs icebergio.WriteFileIO, path string, set *dvSet, paths []string, live map[string]iceberg.DataFile) (added, superseded []iceberg.DataFile, err error) {
	fsys := icebergio.IO(wfs)
	meta := tbl.Metadata()
	w := dv.NewDVWriter(wfs, func(id int32) *iceberg.PartitionSpec { return meta.PartitionSpecByID(int(id)) })
	// The old vectors, read one Puffin file at a time.
	byFile := map[string][]iceberg.DataFile{}
	for _, p := range paths {
		if old, ok := live[p]; ok {
			byFile[old.FilePath()] = append(byFile[old.FilePath()], old)
			superseded = append(superseded, old)
		}
	}
	for file, olds := range byFile {
		bms, err := readDVBlobs(fsys, olds)
		if err != nil {
			return nil, nil, fmt.Errorf("read the deletion vectors of %s in %s: %w", t.ID, file, err)
		}
		for i, old := range olds {
			// The old vector's partition is its data file's (the writer
			// resolves the spec at Flush).
			w.Load(*old.ReferencedDataFile(), bms[i], old.SpecID(), old.Partition())
		}
	}
	for _, p := range paths {
		e := set.entries[p]
		spec := meta.PartitionSpecByID(e.spec)
		if spec == nil {
			return nil, nil, fmt.Errorf("data file %s of %s names partition spec %d, which the table does not have", p, t.ID, e.spec)
		}
		pd := make(map[int]any, len(e.values))
		for i, f := range spec.Fields() {
			if i < len(e.values) {
				pd[f.FieldID] = e.values[i]
			}
		}
		w.Load(p, e.bitmap, int32(e.spec), pd)
	}
	if added, err = w.Flush(ctx, path); err != nil {
		_ = wfs.Remove(path)
		return nil, nil, fmt.Errorf("write the deletion vectors of %s: %w", t.ID, err)
	}
	return added, superseded, nil
}

// eachDVDelete calls fn with the data file and every position of the
// deletion vector del, until fn returns false.
func eachDVDelete(fsys icebergio.IO, del iceberg.DataFile, fn func(path string, pos int64) bool) error {
	ref := del.ReferencedDataFile()
	if ref == nil {
		return fmt.Errorf("deletion vector in %s names no data file", del.FilePath())
	}
	bm, err := readDVBlob(fsys, del)
	if err != nil {
		return fmt.Errorf("read the deletion vector of %s in %s: %w", *ref, del.FilePath(), err)
	}
	for p := range bm.Positions() {
		if !fn(*ref, int64(p)) {
			return nil
		}
	}
	return nil
}

// readDVBlob reads the deletion vector del by the offset and length its
// manifest entry records, as Iceberg Java does.
func readDVBlob(fsys icebergio.IO, del iceberg.DataFile) (*dv.RoaringPositionBitmap, error) {
	bms, err := readDVBlobs(fsys, []iceberg.DataFile{del})
	if err != nil {
		return nil, err
	}
	return bms[0], nil
}

// readDVBlobs reads the deletion vectors dels, all in one Puffin file, by
// the offsets and lengths their manifest entries record, as Iceberg Java
// does. dv.ReadDVs parses the file's footer first, which lists every
// vector of the file: an epoch that supersedes a vector or two in each of
// many files paid for all their footers (68% of the CPU of an epoch of
// 10,000 updates in BenchmarkCommitFinePartitions/dv). The vector's own
// checksum and its cardinality against the manifest's record count still
// catch a wrong offset.
func readDVBlobs(fsys icebergio.IO, dels []iceberg.DataFile) ([]*dv.RoaringPositionBitmap, error) {
	if len(dels) == 0 {
		return nil, nil
	}
	for _, del := range dels {
		off, size := del.ContentOffset(), del.ContentSizeInBytes()
		if off == nil || size == nil || *size < 0 || *size > 1<<30 {
			return dv.ReadDVs(fsys, dels)
		}
	}
	f, err := fsys.Open(dels[0].FilePath())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bms := make([]*dv.RoaringPositionBitmap, len(dels))
	for i, del := range dels {
		if del.FilePath() != dels[0].FilePath() {
			return nil, fmt.Errorf("deletion vector in %s read with those of %s", del.FilePath(), dels[0].FilePath())
		}
		buf := make([]byte, *del.ContentSizeInBytes())
		if _, err := f.ReadAt(buf, *del.ContentOffset()); err != nil {
			return nil, err
		}
		if bms[i], err = dv.DeserializeDV(buf, del.Count()); err != nil {
			return nil, err
		}
	}
	return bms, nil
}
