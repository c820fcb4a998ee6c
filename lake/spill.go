package lake

// Spills: the part of an open epoch written before the epoch commits.
//
// A transaction larger than epoch.max_bytes is not held in memory: the
// pipeline hands what it holds of the open epoch to Spill as it grows, and
// the epoch's commit adds everything spilled, with the rest, in the one
// snapshot of the table. Spilled rows go to data files in the warehouse
// that no snapshot references until that commit (readers see none of
// them, as with any file of an uncommitted epoch).
//
// A key can come again after it was spilled: its spilled row is then
// deleted by position in the same commit (a position delete applies to
// data files of its own sequence number). Which keys were spilled, and
// where their rows are, is kept in the spill store, a keyspace of the
// pipeline's key index database (pkindex, on local disk) named
// "spill/<table uuid>/<spill>": key -> (pending data file, position), or
// the tombstone file for a key the epoch deleted. Every file a spill
// writes is in the store's file table (delete files as not live), so a
// spill that will not be committed is removed whole: by Abandon, or, after
// a crash, when the next session starts (cleanSpills).
//
// In position mode the commit deletes the committed rows of every key the
// spill store holds, looked up in the table's key index at the commit
// (not at the spill: compaction may move rows in between); in equality
// mode each spill writes the equality deletes of its keys.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/pkindex"
)

// spillPrefix starts the names of the spill stores in the key index
// database.
const spillPrefix = "spill/"

// spillBatch bounds the keys looked up, and the position deletes written,
// at a time when a spilled epoch commits.
const spillBatch = 1 << 16

// spill is the spilled part of one table's share of an open epoch.
type spill struct {
	id    int64
	store *pkindex.Table
	tomb  uint32                 // the store's file id of the tombstone: the key was deleted in the epoch
	data  map[uint32]indexedFile // the pending data files, by store file id
	files []iceberg.DataFile     // every pending file: data, equality and position deletes
	rows  int64                  // rows in the pending data files
	final bool                   // the commit's own rows are spilled too (a retry must not add them again)
	cdels []iceberg.DataFile     // the position deletes of committed rows of the last commit attempt
	csup  []iceberg.DataFile     // the deletion vectors cdels supersede (dv mode)
	cbase int64                  // the snapshot they were looked up at
	pdvs  *dvSet                 // dv mode: the rows of pending files that later spills deleted
}

func spillName(tbl *table.Table, id int64) string {
	return spillPrefix + tbl.Metadata().TableUUID().String() + "/" + strconv.FormatInt(id, 10)
}

// openSpill returns the table's spill id, starting it when the table has
// none. Another epoch's spill may be under way: the epoch before, whose
// commit runs while this one fills.
func (t *Table) openSpill(id int64) (*spill, error) {
	if s := t.state.spills[id]; s != nil {
		return s, nil
	}
	if t.spills == nil {
		return nil, fmt.Errorf("%s cannot write out part of an epoch: this process has no key index database open (deletes.index_dir); this is a bug", t.ID)
	}
	st, err := t.spills.Table(spillName(t.current(), id))
	if err != nil {
		return nil, fmt.Errorf("open the spill store of %s: %w", t.ID, err)
	}
	if err := st.Reset(); err != nil {
		return nil, fmt.Errorf("open the spill store of %s: %w", t.ID, err)
	}
	b := st.NewBatch()
	defer b.Close()
	tomb := b.AddFile(pkindex.File{Path: "", Live: false})
	if err := b.Commit(pkindex.State{}); err != nil {
		return nil, fmt.Errorf("open the spill store of %s: %w", t.ID, err)
	}
	s := &spill{id: id, store: st, tomb: tomb, data: map[uint32]indexedFile{}}
	if t.state.spills == nil {
		t.state.spills = map[int64]*spill{}
	}
	t.state.spills[id] = s
	return s, nil
}

// Spill writes part of the table's share of an open epoch (see the top of
// this file): rows are final images, deletes the images the keys had
// before (as in Commit). id names the epoch's spill.
func (t *Table) Spill(ctx context.Context, id int64, deletes, rows []cdcsync.Row) error {
	ctx = t.scope(ctx)
	t.state.spillMu.Lock()
	defer t.state.spillMu.Unlock()
	s, err := t.openSpill(id)
	if err != nil {
		return err
	}
	if s.final {
		return fmt.Errorf("a spill of %s after its epoch's commit began; this is a bug", t.ID)
	}
	return t.spillRows(ctx, s, deletes, rows)
}

// spillRows writes rows and deletes to the spill s (under spillMu).
func (t *Table) spillRows(ctx context.Context, s *spill, deletes, rows []cdcsync.Row) error {
	if len(deletes) == 0 && len(rows) == 0 {
		return nil
	}
	base := t.current()
	keys := make([][]byte, len(deletes))
	for i, r := range deletes {
		k, err := t.Schema.AppendKey(nil, r)
		if err != nil {
			return err
		}
		keys[i] = k
	}
	// Rows spilled before for these keys are superseded.
	locs, found, err := s.store.Lookup(keys)
	if err != nil {
		return fmt.Errorf("look up the spill store of %s: %w", t.ID, err)
	}
	var targets []posTarget
	for i, l := range locs {
		if f, ok := s.data[l.File]; found[i] && ok {
			targets = append(targets, posTarget{path: f.path, pos: l.Pos, spec: f.spec, values: f.values})
		}
	}
	var written []iceberg.DataFile
	fail := func(err error) error {
		t.removeFiles(ctx, base, written)
		return err
	}
	rowLocs := make([]rowLoc, len(rows))
	var data []iceberg.DataFile
	if len(rows) > 0 {
		if data, err = t.writeFiles(ctx, base, t.dataFile, rows, rowLocs); err != nil {
			return fail(fmt.Errorf("write data files of %s: %w", t.ID, err))
		}
		written = append(written, data...)
	}
	if !byPosition(t.mode) && len(deletes) > 0 {
		edels, err := t.writeFiles(ctx, base, t.eqFile, deletes, nil)
		if err != nil {
			return fail(fmt.Errorf("write equality deletes of %s: %w", t.ID, err))
		}
		written = append(written, edels...)
	}
	if t.mode == DeletesDV {
		// A pending file may lose rows to several spills, and may have
		// one deletion vector: they are written at the commit.
		if s.pdvs == nil {
			s.pdvs = newDVSet()
		}
		for _, tg := range targets {
			s.pdvs.add(tg)
		}
	} else {
		pdels, err := t.writePositionDeletes(ctx, base, targets)
		if err != nil {
			return fail(err)
		}
		written = append(written, pdels...)
	}

	b := s.store.NewBatch()
	defer b.Close()
	ids := make([]uint32, len(data))
	newData := map[uint32]indexedFile{}
	for i, df := range data {
		vals, err := partitionTuple(base.Metadata(), df)
		if err != nil {
			return fail(err)
		}
		enc, err := encodePartitionTuple(vals)
		if err != nil {
			return fail(err)
		}
		ids[i] = b.AddFile(pkindex.File{Path: df.FilePath(), SpecID: df.SpecID(), Partition: enc, Live: true})
		newData[ids[i]] = indexedFile{path: df.FilePath(), spec: int(df.SpecID()), values: vals, live: true}
	}
	for _, df := range written[len(data):] {
		b.AddFile(pkindex.File{Path: df.FilePath(), SpecID: df.SpecID(), Live: false})
	}
	for _, k := range keys {
		b.Put(k, pkindex.Loc{File: s.tomb})
	}
	var key []byte
	for i, r := range rows {
		if key, err = t.Schema.AppendKey(key[:0], r); err != nil {
			return fail(err)
		}
		b.Put(key, pkindex.Loc{File: ids[rowLocs[i].file], Pos: rowLocs[i].pos})
	}
	if err := b.Commit(pkindex.State{}); err != nil {
		return fail(fmt.Errorf("record a spill of %s: %w", t.ID, err))
	}
	for id, f := range newData {
		s.data[id] = f
	}
	s.files = append(s.files, written...)
	s.rows += int64(len(rows))
	return nil
}

// Abandon removes the spill id of the table, if it has it: its epoch will
// not be committed.
func (t *Table) Abandon(ctx context.Context, id int64) {
	ctx = t.scope(ctx)
	t.state.spillMu.Lock()
	defer t.state.spillMu.Unlock()
	if s := t.state.spills[id]; s != nil {
		t.abandonSpill(ctx, s)
	}
}

func (t *Table) abandonSpill(ctx context.Context, s *spill) {
	t.removeFiles(ctx, t.current(), append(s.files, s.cdels...))
	t.dropSpill(s)
}

// dropSpill forgets s (its files are committed, or removed).
func (t *Table) dropSpill(s *spill) {
	if err := s.store.Drop(); err != nil && t.state.keys != nil {
		t.state.keys.log.Warn("cannot drop a spill store; it is dropped when the next session starts", "error", err)
	}
	delete(t.state.spills, s.id)
}

// SpillHolds reports whether the spill id holds rows of the table, and
// which of keys it deleted (see merge.Spiller).
func (t *Table) SpillHolds(id int64, keys [][]byte) (rows bool, deleted []bool, err error) {
	t.state.spillMu.Lock()
	defer t.state.spillMu.Unlock()
	s := t.state.spills[id]
	deleted = make([]bool, len(keys))
	if s == nil {
		return false, deleted, nil
	}
	locs, found, err := s.store.Lookup(keys)
	if err != nil {
		return false, nil, fmt.Errorf("look up the spill store of %s: %w", t.ID, err)
	}
	for i := range keys {
		deleted[i] = found[i] && locs[i].File == s.tomb
	}
	return s.rows > 0, deleted, nil
}

// commitSpilled commits an epoch of which the spill id holds part: the
// rest (deletes, rows) is spilled too, then every pending file is added in
// one snapshot with, in position mode, the position deletes of the
// committed rows of every key the spill holds. Called under commitMu.
func (t *Table) commitSpilled(ctx context.Context, e Epoch, id int64, deletes, rows []cdcsync.Row, copying *cdcsync.CopyState) error {
	t.state.spillMu.Lock()
	defer t.state.spillMu.Unlock()
	s := t.state.spills[id]
	if s == nil {
		return fmt.Errorf("the part of epoch %d of %s written out before its commit is gone (spill %d); this is a bug", e.Number, t.ID, id)
	}
	if !s.final {
		if err := t.spillRows(ctx, s, deletes, rows); err != nil {
			return err
		}
		s.final = true
		// The epoch it commits as: after a crash, cleanSpills keeps the
		// files if the table has it.
		state := pkindex.State{SnapshotID: e.Number, Complete: true}
		if err := s.record(nil, state); err != nil {
			return fmt.Errorf("record the commit of a spill of %s: %w", t.ID, err)
		}
		if err := t.dropPendingRows(ctx, s, state); err != nil {
			return err
		}
	}
	t.state.clock.lap(dataPhase)
	base := t.current()
	baseID := snapshotID(head(base.Metadata(), refOf(base.Metadata())))
	if byPosition(t.mode) && (s.cdels == nil || s.cbase != baseID) {
		t.removeFiles(ctx, base, s.cdels)
		s.cdels = nil
		cdels, csup, err := t.committedDeletes(ctx, base, s, e.Interrupt)
		if err != nil {
			return err
		}
		s.cdels, s.csup, s.cbase = cdels, csup, baseID
		if err := s.record(cdels, pkindex.State{SnapshotID: e.Number, Complete: true}); err != nil {
			return fmt.Errorf("record the commit of a spill of %s: %w", t.ID, err)
		}
	}
	// (The key lookups of a spilled epoch, made while its deletes are
	// written, count as deletes.)
	t.state.clock.lap(deletesPhase)
	var data, dels []iceberg.DataFile
	for _, f := range s.files {
		if f.ContentType() == iceberg.EntryContentData {
			data = append(data, f)
		} else {
			dels = append(dels, f)
		}
	}
	dels = append(dels, s.cdels...)
	err := t.commitFiles(ctx, e, base, copying, data, dels, s.csup)
	switch {
	case err == nil:
		if byPosition(t.mode) {
			t.indexSpill(ctx, e, s, data, baseID)
			t.state.clock.lap(indexPhase)
		}
		t.dropSpill(s)
	case errors.Is(err, ErrConflict):
		t.abandonSpill(ctx, s)
	}
	return err
}

// dropPendingRows rewrites, in dv mode, each pending data file of s that
// later spills deleted rows of (s.pdvs) without those rows, and points the
// spill store's keys at the rows' new places. A deletion vector cannot
// name them instead: iceberg-go's row delta refuses a vector whose data
// file the table does not have yet, even one the same commit adds. The
// rows of such a file are the newest of their keys but for the deleted
// ones, so each survivor's key moves to it. Done once, before the first
// commit attempt (under spillMu).
func (t *Table) dropPendingRows(ctx context.Context, s *spill, state pkindex.State) error {
	if s.pdvs.empty() {
		return nil
	}
	base := t.current()
	// A file is copied under its own spec: staged files (staged.go) under
	// the unpartitioned one.
	writers := map[int]*fileWriter{}
	writerFor := func(spec int) (*fileWriter, error) {
		if w, ok := writers[spec]; ok {
			return w, nil
		}
		out := t.partFile
		if t.stageFile != nil && spec == t.stageFile.part.spec.ID() {
			out = t.stageFile
		}
		w, err := t.newFileWriter(ctx, base, out)
		writers[spec] = w
		return w, err
	}
	kc, err := newKeyColumns(base.Schema(), t.Schema)
	if err != nil {
		return err
	}
	ids := make(map[string]uint32, len(s.data))
	for id, f := range s.data {
		ids[f.path] = id
	}
	for _, path := range s.pdvs.order {
		oldID, ok := ids[path]
		if !ok {
			return fmt.Errorf("a spill of %s deleted rows of %s, which is not one of its files; this is a bug", t.ID, path)
		}
		old := s.data[oldID]
		w, err := writerFor(old.spec)
		if err != nil {
			return err
		}
		gone := make([]int64, 0, s.pdvs.entries[path].bitmap.Cardinality())
		for p := range s.pdvs.entries[path].bitmap.Positions() {
			gone = append(gone, int64(p))
		}
		partPath := ""
		if w.part.partitioned() {
			partPath = w.part.spec.PartitionToPath(old.values, w.part.schema)
		}
		newPath := w.newPath(0, partPath)
		enc, err := encodePartitionTuple(old.values)
		if err != nil {
			return err
		}
		// In the file table before it exists: a crash leaves nothing.
		b := s.store.NewBatch()
		newID := b.AddFile(pkindex.File{Path: newPath, SpecID: int32(old.spec), Partition: enc, Live: true})
		err = b.Commit(state)
		b.Close()
		if err != nil {
			return fmt.Errorf("record a rewrite of a spilled file of %s: %w", t.ID, err)
		}
		df, kept, err := t.copyWithout(ctx, w, path, newPath, gone, old.values)
		if err != nil {
			return err
		}
		if err := t.movePendingKeys(ctx, w.fs, s, kc, newPath, newID, state); err != nil {
			return err
		}
		for i, f := range s.files {
			if f.FilePath() == path {
				s.rows -= f.Count() - kept
				s.files[i] = df
			}
		}
		delete(s.data, oldID)
		s.data[newID] = indexedFile{path: newPath, spec: old.spec, values: old.values, live: true}
		_ = w.fs.Remove(path)
	}
	s.pdvs = nil
	return nil
}

// copyWithout writes the data file at path less the rows at the positions
// gone (ascending) to newPath, and returns the new file and its rows.
func (t *Table) copyWithout(ctx context.Context, w *fileWriter, path, newPath string, gone []int64, values partitionRecord) (iceberg.DataFile, int64, error) {
	pr, err := openParquetReader(w.fs, path, 1<<14, writeBuffers)
	if err != nil {
		return nil, 0, err
	}
	defer pr.close()
	rr, err := pr.fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	defer rr.Release()
	out, err := openParquet(w.fs, newPath, w.out.layout, w.props)
	if err != nil {
		return nil, 0, err
	}
	var off, kept int64
	for rr.Next() {
		rec := rr.RecordBatch()
		n := rec.NumRows()
		cur, err := filterPositions(ctx, rec, off, gone)
		off += n
		if err != nil {
			out.abort(w.fs)
			return nil, 0, err
		}
		if cur == nil {
			continue
		}
		kept += cur.NumRows()
		err = out.pq.Write(cur)
		cur.Release()
		if err != nil {
			out.abort(w.fs)
			return nil, 0, fmt.Errorf("write %s: %w", newPath, err)
		}
	}
	if err := rr.Err(); err != nil {
		out.abort(w.fs)
		return nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	df, err := w.close(out, values)
	if err != nil {
		out.abort(w.fs)
		return nil, 0, err
	}
	return df, kept, nil
}

// movePendingKeys points the spill store's key of every row of the file at
// path (store file id) at its place there, in bounded batches.
func (t *Table) movePendingKeys(ctx context.Context, fsys icebergio.IO, s *spill, kc keyColumns, path string, id uint32, state pkindex.State) error {
	b := s.store.NewBatch()
	defer func() { b.Close() }()
	n := 0
	err := readFileKeys(ctx, fsys, path, kc, func(pos int64, key []byte) error {
		b.Put(key, pkindex.Loc{File: id, Pos: pos})
		if n++; n%spillBatch == 0 {
			if err := b.Commit(state); err != nil {
				return err
			}
			b.Close()
			b = s.store.NewBatch()
		}
		return nil
	})
	if err == nil {
		err = b.Commit(state)
	}
	if err != nil {
		return fmt.Errorf("record the rewrite of a spilled file of %s: %w", t.ID, err)
	}
	return nil
}

// record adds delete files to the store's file table, with state.
func (s *spill) record(dels []iceberg.DataFile, state pkindex.State) error {
	b := s.store.NewBatch()
	defer b.Close()
	for _, df := range dels {
		b.AddFile(pkindex.File{Path: df.FilePath(), SpecID: df.SpecID(), Live: false})
	}
	return b.Commit(state)
}

// committedDeletes writes the position deletes of the committed rows of
// the keys the spill holds, looked up in the key index at base (brought
// there unless interrupt closes first).
func (t *Table) committedDeletes(ctx context.Context, base *table.Table, s *spill, interrupt <-chan struct{}) (dels, superseded []iceberg.DataFile, err error) {
	if t.state.keys == nil {
		return nil, nil, fmt.Errorf("%s records deletes by position but this process has no key index open for it; this is a bug", t.ID)
	}
	if err := t.syncIndexUnless(ctx, base, interrupt); err != nil {
		return nil, nil, err
	}
	t.state.clock.lap(lookupPhase)
	ki := t.state.keys
	var (
		written []iceberg.DataFile
		keys    [][]byte
		targets []posTarget
	)
	// In dv mode the deletes gather as bitmaps (a few bytes a row) and
	// are written once: a data file may have one deletion vector. (The
	// pending files lost their deleted rows in dropPendingRows.)
	var dvs *dvSet
	if t.mode == DeletesDV {
		dvs = newDVSet()
	}
	flushTargets := func() error {
		if dvs != nil {
			for _, tg := range targets {
				dvs.add(tg)
			}
			targets = targets[:0]
			return nil
		}
		files, err := t.writePositionDeletes(ctx, base, targets)
		written = append(written, files...)
		targets = targets[:0]
		return err
	}
	lookup := func() error {
		locs, found, err := ki.db.Lookup(keys)
		if err != nil {
			return fmt.Errorf("look up the key index of %s: %w", t.ID, err)
		}
		for i, l := range locs {
			if f, ok := ki.files[l.File]; found[i] && ok && f.live {
				targets = append(targets, posTarget{path: f.path, pos: l.Pos, spec: f.spec, values: f.values})
			}
		}
		keys = keys[:0]
		if len(targets) >= spillBatch {
			return flushTargets()
		}
		return nil
	}
	err = s.store.Scan(func(key []byte, _ pkindex.Loc) error {
		keys = append(keys, append([]byte(nil), key...))
		if len(keys) >= spillBatch {
			return lookup()
		}
		return nil
	})
	if err == nil {
		err = lookup()
	}
	if err == nil {
		err = flushTargets()
	}
	if err == nil && dvs != nil {
		written, superseded, err = t.writeDVs(ctx, base, dvs)
	}
	if err != nil {
		t.removeFiles(ctx, base, written)
		return nil, nil, err
	}
	return written, superseded, nil
}

// indexSpill records a committed spilled epoch in the key index: every key
// of the spill moves to its pending row, or leaves the index. The batches
// are bounded: the index counts as incomplete until the last one, so a
// crash in between rebuilds it. A failure leaves the index behind the
// table, which the next commit's syncIndex catches up.
func (t *Table) indexSpill(ctx context.Context, e Epoch, s *spill, data []iceberg.DataFile, baseID int64) {
	tbl := t.current()
	snap := epochSnapshot(tbl.Metadata(), refOf(tbl.Metadata()), t.pipeline, e.Number)
	ki := t.state.keys
	if snap == nil || parentID(snap) != baseID {
		return // another writer in between: syncIndex replays
	}
	err := func() error {
		ib := ki.newBatch()
		defer func() { ib.close() }()
		byPath := make(map[string]iceberg.DataFile, len(data))
		for _, df := range data {
			byPath[df.FilePath()] = df
		}
		ids := map[uint32]uint32{} // store file id -> index file id
		for sid, f := range s.data {
			id, err := ib.file(tbl.Metadata(), byPath[f.path])
			if err != nil {
				return err
			}
			ids[sid] = id
		}
		n := 0
		err := s.store.Scan(func(key []byte, l pkindex.Loc) error {
			if l.File == s.tomb {
				ib.b.Delete(key)
			} else {
				ib.b.Put(key, pkindex.Loc{File: ids[l.File], Pos: l.Pos})
			}
			if n++; n%spillBatch == 0 {
				return ib.commit(pkindex.State{SnapshotID: baseID, Complete: false})
			}
			return nil
		})
		if err != nil {
			return err
		}
		return ib.commit(pkindex.State{SnapshotID: snap.SnapshotID, Complete: true})
	}()
	if err != nil {
		ki.log.Warn("the key index could not record an epoch; the next commit catches it up from the table", "epoch", e.Number, "error", err)
	}
}

// cleanSpills removes the spills a crashed process left: the files of one
// whose epoch the table does not have, then its store. A spill of a table
// this session does not mirror keeps its files (orphan cleanup removes
// them once old).
func (l *Lake) cleanSpills(ctx context.Context, tables map[cdcsync.TableID]*Table) {
	if l.keys == nil {
		return
	}
	names, err := l.keys.Tables()
	if err != nil {
		l.log.Warn("cannot list the spill stores", "error", err)
		return
	}
	byUUID := map[string]*Table{}
	for _, t := range tables {
		byUUID[t.current().Metadata().TableUUID().String()] = t
	}
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, spillPrefix)
		if !ok {
			continue
		}
		uuid, _, _ := strings.Cut(rest, "/")
		st, err := l.keys.Table(name)
		if err != nil {
			l.log.Warn("cannot open a spill store", "store", name, "error", err)
			continue
		}
		if t := byUUID[uuid]; t != nil {
			t.state.spillMu.Lock()
			live := false
			for _, s := range t.state.spills {
				live = live || s.store == st
			}
			t.state.spillMu.Unlock()
			if live {
				continue
			}
			if err := t.removeUncommittedSpill(ctx, st); err != nil {
				l.log.Warn("cannot remove the files of an epoch written out before a crash; orphan cleanup removes them once old", "table", t.ID.String(), "error", err)
			}
		}
		if err := st.Drop(); err != nil {
			l.log.Warn("cannot drop a spill store", "store", name, "error", err)
		}
	}
}

// removeUncommittedSpill removes the files of the spill store st unless
// the table has the epoch the spill was committed as.
func (t *Table) removeUncommittedSpill(ctx context.Context, st *pkindex.Table) error {
	state, ok, err := st.State()
	if err != nil {
		return err
	}
	if ok && state.Complete {
		c, err := t.Committed()
		if err != nil {
			return err
		}
		if c.Found && c.Epoch >= state.SnapshotID {
			return nil // committed: the files are the table's
		}
	}
	files, err := st.Files()
	if err != nil {
		return err
	}
	fsys, err := t.current().FS(ctx)
	if err != nil {
		return err
	}
	wfs, ok := fsys.(icebergio.WriteFileIO)
	if !ok {
		return nil
	}
	n := 0
	for _, f := range files {
		if f.Path == "" {
			continue
		}
		if err := wfs.Remove(f.Path); err == nil {
			n++
		}
	}
	if n > 0 && t.state.keys != nil {
		t.state.keys.log.Info("removed the files of an epoch written out before a crash, which was not committed", "files", n)
	}
	return nil
}
