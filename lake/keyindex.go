package lake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/pkindex"
	"golang.org/x/sync/errgroup"
)

// Position deletes and the key index.
//
// A table in position mode (PropDeletes = DeletesPosition) records an
// update or delete as a position delete of the row it replaces, found in
// the table's key index (pkindex): primary key → data file and position of
// the key's live row. A key the index does not hold is not in the table,
// so an insert writes no delete at all.
//
// The index is a cache on local disk; the catalog is the truth. The index
// records the snapshot it reflects, and it is brought to the table's
// current snapshot under the table's commit lock before each epoch commit
// (syncIndex):
//   - at that snapshot: nothing to do;
//   - behind it (a crash between a commit and the index update, or
//     snapshots of other writers: a compaction, a schema change's rewrite,
//     Spark's rewrite_data_files): the snapshots in between are replayed,
//     oldest first: the keys of the data files each added are put at their
//     places, the data files each removed are marked dead;
//   - of another lineage (a catalog restored from a backup, a table
//     dropped and created again, an index from another machine), a rebuild
//     under way, or missing: rebuilt from the table's live rows (liveKeys).
//
// An index can never be ahead of the table: it is written only after the
// catalog accepted the commit it reflects, so a snapshot the index names
// that the table's lineage lacks means another lineage, and a rebuild.
//
// What replay leaves is exact for every live row: the last put of a key is
// the newest copy of it. It may also keep entries of keys that are deleted
// (replay does not read delete files): such an entry names a row that is
// dead, in a file that is live or dead. A lookup ignores entries in dead
// files; an entry naming a deleted row of a live file yields a second
// position delete of that row, which readers apply like the first. A live
// row is never missed, so an update never leaves its old copy visible.

// Deletes modes (the deletes.mode setting and the table property
// PropDeletes).
const (
	DeletesPosition = "position"
	DeletesEquality = "equality"
)

// PropDeletes records how cdcsync deletes rows of the table: position or
// equality (absent: equality, the tables of earlier versions).
const PropDeletes = "cdcsync.deletes"

// DeletesMode returns how cdcsync records the updates and deletes of tbl:
// DeletesPosition, DeletesDV or DeletesEquality.
func DeletesMode(tbl *table.Table) string { return deletesMode(tbl) }

// deletesMode returns the table's mode as its properties record it.
func deletesMode(tbl *table.Table) string {
	switch m := tbl.Properties()[PropDeletes]; m {
	case DeletesPosition, DeletesDV:
		return m
	}
	return DeletesEquality
}

// keyIndex is a table's key index and what the commits keep of it.
type keyIndex struct {
	db     *pkindex.Table
	name   string
	kc     keyColumns
	files  map[uint32]indexedFile // the index's file table, as loaded
	byPath map[string]uint32
	log    *slog.Logger
	// fault is the testing hook (CDCSYNC_FAULT) at "before-index",
	// between an epoch's commit and its index update, and at
	// "during-index-rebuild", once a rebuild has started, and at
	// "index-rebuild-chunk", after each part of it committed (nil in
	// production).
	fault func(string)
	// chunk, when set, replaces rebuildChunk (tests).
	chunk int
	// Counts for metrics (IndexCounts), cumulative.
	rebuilds, rebuildRows, replayed, replayReads atomic.Int64
}

// IndexCounts are a table's key index figures since it was opened.
type IndexCounts struct {
	Rebuilds, RebuildRows, Replayed int64
	// ReplayReads counts the data files whose keys a replay read back.
	ReplayReads int64
}

// IndexCounts returns the table's key index counts; ok is false when the
// table has no index open.
func (t *Table) IndexCounts() (c IndexCounts, ok bool) {
	ki := t.state.keys
	if ki == nil {
		return c, false
	}
	return IndexCounts{Rebuilds: ki.rebuilds.Load(), RebuildRows: ki.rebuildRows.Load(), Replayed: ki.replayed.Load(), ReplayReads: ki.replayReads.Load()}, true
}

// indexedFile is a data file the index names rows in.
type indexedFile struct {
	path   string
	spec   int
	values partitionRecord
	live   bool
}

// indexName names a table's index: its UUID and the field ids of its
// primary key, so that a key change starts a new index.
func indexName(tbl *table.Table, kc keyColumns) string {
	ids := make([]string, len(kc.ids))
	for i, id := range kc.ids {
		ids[i] = strconv.Itoa(id)
	}
	return tbl.Metadata().TableUUID().String() + "/" + strings.Join(ids, ",")
}

// attachIndex opens the key index of t (in position mode) in db.
func (t *Table) attachIndex(db *pkindex.DB, log *slog.Logger, fault func(string)) error {
	tbl := t.current()
	kc, err := newKeyColumns(tbl.Schema(), t.Schema)
	if err != nil {
		return err
	}
	name := indexName(tbl, kc)
	it, err := db.Table(name)
	if err != nil {
		return fmt.Errorf("open the key index of %s: %w", t.ID, err)
	}
	ki := &keyIndex{db: it, name: name, kc: kc, log: log.With("table", t.ID.String()), fault: fault}
	if err := ki.loadFiles(); err != nil {
		return err
	}
	t.state.keys = ki
	return nil
}

func (ki *keyIndex) loadFiles() error {
	fs, err := ki.db.Files()
	if err != nil {
		return fmt.Errorf("read the key index's files: %w", err)
	}
	ki.files = make(map[uint32]indexedFile, len(fs))
	ki.byPath = make(map[string]uint32, len(fs))
	for id, f := range fs {
		vals, err := decodePartitionTuple(f.Partition)
		if err != nil {
			return err
		}
		ki.files[id] = indexedFile{path: f.Path, spec: int(f.SpecID), values: vals, live: f.Live}
		if f.Live {
			ki.byPath[f.Path] = id
		}
	}
	return nil
}

// indexBatch stages changes to the index and the file table in memory.
type indexBatch struct {
	ki      *keyIndex
	b       *pkindex.Batch
	added   map[uint32]indexedFile
	addedBy map[string]uint32 // path -> id, of added
	dead    []uint32
}

func (ki *keyIndex) newBatch() *indexBatch {
	return &indexBatch{ki: ki, b: ki.db.NewBatch(), added: map[uint32]indexedFile{}, addedBy: map[string]uint32{}}
}

// file returns the id of the data file df, adding it to the file table when
// it is new.
func (ib *indexBatch) file(meta table.Metadata, df iceberg.DataFile) (uint32, error) {
	if id, ok := ib.ki.byPath[df.FilePath()]; ok {
		return id, nil
	}
	if id, ok := ib.addedBy[df.FilePath()]; ok {
		return id, nil
	}
	vals, err := partitionTuple(meta, df)
	if err != nil {
		return 0, err
	}
	enc, err := encodePartitionTuple(vals)
	if err != nil {
		return 0, err
	}
	id := ib.b.AddFile(pkindex.File{Path: df.FilePath(), SpecID: df.SpecID(), Partition: enc, Live: true})
	ib.added[id] = indexedFile{path: df.FilePath(), spec: int(df.SpecID()), values: vals, live: true}
	ib.addedBy[df.FilePath()] = id
	return id, nil
}

func (ib *indexBatch) kill(path string) {
	if id, ok := ib.ki.byPath[path]; ok {
		ib.b.SetFileLive(id, false)
		ib.dead = append(ib.dead, id)
	}
}

// commit writes the batch with the state it brings the index to, and
// updates the file table in memory once it is durable.
func (ib *indexBatch) commit(s pkindex.State) error {
	if err := ib.b.Commit(s); err != nil {
		return err
	}
	for id, f := range ib.added {
		ib.ki.files[id] = f
		ib.ki.byPath[f.path] = id
	}
	for _, id := range ib.dead {
		f := ib.ki.files[id]
		f.live = false
		ib.ki.files[id] = f
		delete(ib.ki.byPath, f.path)
	}
	ib.added, ib.addedBy, ib.dead = map[uint32]indexedFile{}, map[string]uint32{}, nil
	ib.b = ib.ki.db.NewBatch()
	return nil
}

func (ib *indexBatch) close() { ib.b.Close() }

// noSnapshot is the state of the index of a table without snapshots.
const noSnapshot = -1

// syncIndex brings the index to tbl's head on ref (see the top of this
// file). Callers hold the commit lock.
func (t *Table) syncIndex(ctx context.Context, tbl *table.Table) error {
	return t.syncIndexKnown(ctx, tbl, nil)
}

// syncIndexUnless is syncIndex that gives up when interrupt closes (the
// pipeline stops): a rebuild reads the whole table, and a replay every file
// added since, which a shutdown must not wait for. The error then wraps
// cdcsync.ErrInterrupted, and the index keeps what it committed (a rebuild
// resumes after the last data file it finished; a replay goes on from its
// last snapshot).
func (t *Table) syncIndexUnless(ctx context.Context, tbl *table.Table, interrupt <-chan struct{}) error {
	if interrupt == nil {
		return t.syncIndex(ctx, tbl)
	}
	ictx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-interrupt:
			cancel(cdcsync.ErrInterrupted)
		case <-ictx.Done():
		}
	}()
	err := t.syncIndex(ictx, tbl)
	if err != nil && errors.Is(context.Cause(ictx), cdcsync.ErrInterrupted) {
		return fmt.Errorf("bring the key index of %s to the table (%v): %w", t.ID, err, cdcsync.ErrInterrupted)
	}
	return err
}

// syncIndexKnown is syncIndex told the keys of the rows of some files
// added since (see movedKeys).
func (t *Table) syncIndexKnown(ctx context.Context, tbl *table.Table, known *movedKeys) error {
	ki := t.state.keys
	headSnap := head(tbl.Metadata(), refOf(tbl.Metadata()))
	want := snapshotID(headSnap)
	st, ok, err := ki.db.State()
	if err != nil {
		return t.resetIndexAfter(ctx, tbl, fmt.Errorf("read the state of the key index: %w", err))
	}
	if ok && st.Complete && st.SnapshotID == want {
		return nil
	}
	if ok && st.Complete && headSnap != nil {
		if path, found := lineageFrom(tbl.Metadata(), headSnap, st.SnapshotID, maxReplay); found {
			return t.replayIndex(ctx, tbl, path, known)
		}
		ki.log.Info("the key index is of another lineage than the table; rebuilding it", "index_snapshot", st.SnapshotID, "table_snapshot", want)
	} else if ok && !st.Complete {
		ki.log.Info("the key index's last rebuild did not finish; rebuilding it")
	} else if !ok && headSnap != nil {
		ki.log.Info("the table has no key index on this machine; building it")
	}
	return t.rebuildIndex(ctx, tbl, headSnap)
}

// maxReplay bounds the snapshots replayed: further behind, a rebuild reads
// less.
const maxReplay = 500

// lineageFrom returns the snapshots after ancestor up to head, oldest
// first, and whether ancestor is in head's lineage within max steps. An
// ancestor of noSnapshot (the index of the table before its first
// snapshot) is the start of the lineage.
func lineageFrom(meta table.Metadata, h *table.Snapshot, ancestor int64, max int) ([]*table.Snapshot, bool) {
	var path []*table.Snapshot
	for s := h; s != nil && len(path) <= max; {
		if s.SnapshotID == ancestor {
			slices.Reverse(path)
			return path, true
		}
		path = append(path, s)
		if s.ParentSnapshotID == nil {
			if ancestor == noSnapshot && len(path) <= max {
				slices.Reverse(path)
				return path, true
			}
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return nil, false
}

// replayIndex applies the data files each snapshot of path added and
// removed, in order, committing the index's state after each snapshot. It
// reads the keys of an added file from the file, unless known has them.
func (t *Table) replayIndex(ctx context.Context, tbl *table.Table, path []*table.Snapshot, known *movedKeys) error {
	ki := t.state.keys
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return fmt.Errorf("open the file IO of %s: %w", t.ID, err)
	}
	start := time.Now()
	for _, s := range path {
		added, removed, err := snapshotDataChanges(fsys, s)
		dead, ok := known.deadIn(added)
		if err == nil && !ok {
			dead, err = ownDeletes(ctx, fsys, s, added)
		}
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("key index of %s: %w", t.ID, err)
		}
		if err != nil {
			// A snapshot whose manifests are gone (expired, or a
			// restored catalog): the table itself can still be read.
			ki.log.Warn("cannot replay a snapshot into the key index; rebuilding it", "snapshot", s.SnapshotID, "error", err)
			return t.rebuildIndex(ctx, tbl, head(tbl.Metadata(), refOf(tbl.Metadata())))
		}
		ib := ki.newBatch()
		for _, p := range removed {
			ib.kill(p)
		}
		for _, df := range added {
			id, err := ib.file(tbl.Metadata(), df)
			if err != nil {
				ib.close()
				return fmt.Errorf("key index of %s: %w", t.ID, err)
			}
			// Rows the snapshot itself deletes are not indexed: their keys
			// live elsewhere, or nowhere.
			gone := dead[df.FilePath()]
			put := func(pos int64, key []byte) error { // pos ascending
				for len(gone) > 0 && gone[0] < pos {
					gone = gone[1:]
				}
				if len(gone) == 0 || gone[0] != pos {
					ib.b.Put(key, pkindex.Loc{File: id, Pos: pos})
				}
				return nil
			}
			if keys, ok := known.of(df); ok {
				for pos := range keys.len() {
					_ = put(int64(pos), keys.at(pos))
				}
				continue
			}
			ki.replayReads.Add(1)
			if err := readFileKeys(ctx, fsys, df.FilePath(), ki.kc, put); err != nil {
				ib.close()
				return fmt.Errorf("key index of %s: %w", t.ID, err)
			}
		}
		if err := ib.commit(pkindex.State{SnapshotID: s.SnapshotID, Complete: true}); err != nil {
			ib.close()
			return fmt.Errorf("update the key index of %s: %w", t.ID, err)
		}
		ib.close()
	}
	ki.replayed.Add(int64(len(path)))
	ki.log.Info("key index caught up with the table", "snapshots", len(path), "seconds", time.Since(start).Seconds())
	return nil
}

// manifestsOnly reports whether s only regrouped manifests (a manifest
// merge after each compaction: its new manifests list every data file of
// the table as existing, which the replay would read for nothing).
func manifestsOnly(s *table.Snapshot) bool {
	if s.Summary == nil || s.Summary.Operation != table.OpReplace || s.Summary.Properties["manifests-created"] == "" {
		return false
	}
	for _, k := range []string{"added-data-files", "deleted-data-files", "added-delete-files", "removed-delete-files"} {
		if n := s.Summary.Properties[k]; n != "" && n != "0" {
			return false
		}
	}
	return true
}

// movedKeys holds the keys of the rows a compaction wrote, by data file
// and row position, so that the index follows the compaction without
// reading the files back: reading the key column of the thousand-odd
// small files a run over staged rows writes took a third of the daemon's
// CPU at 10,000 changes/s on a finely partitioned table (issue 23). Past
// maxMovedKeys rows it gives up and the replay reads the files.
//
// A key is kept as a reference into one arena, 8 bytes a row beside the
// key itself: as a slice of its own (24 bytes) the keys of a compaction of
// a million-row file, with the arena's earlier copies that those slices
// kept alive, were 74 MB, the largest part of the steady state's memory
// peak at 10,000 changes/s.
type movedKeys struct {
	arena []byte
	files map[string][]keyRef
	rows  int
	// dead, once set (deleted), holds the positions (sorted) that the
	// compaction's own commit deletes in the files it wrote.
	dead map[string][]int64
}

// keyRef locates a key in movedKeys.arena: n is its length plus one, 0
// for a row whose key is not recorded.
type keyRef struct{ start, n uint32 }

// deleted records the positions that the compaction's commit deletes in
// the files it wrote (rebase.go).
func (m *movedKeys) deleted(at map[string][]int64) {
	if m != nil {
		m.dead = at
	}
}

// deadIn returns the positions that the snapshot adding added deletes in
// them, when m knows: it knows the keys of every file added and was told
// what the commit deletes.
func (m *movedKeys) deadIn(added []iceberg.DataFile) (map[string][]int64, bool) {
	if m == nil || m.dead == nil {
		return nil, false
	}
	for _, df := range added {
		if _, ok := m.of(df); !ok {
			return nil, false
		}
	}
	return m.dead, true
}

const maxMovedKeys = 1 << 20

func newMovedKeys() *movedKeys { return &movedKeys{files: map[string][]keyRef{}} }

// refs returns the key references of df's rows, made on first use.
func (m *movedKeys) refs(df iceberg.DataFile) []keyRef {
	refs := m.files[df.FilePath()]
	if refs == nil {
		refs = make([]keyRef, df.Count())
		m.files[df.FilePath()] = refs
	}
	return refs
}

// keep appends key to the arena and returns its reference; ok is false
// when the arena would outgrow what a reference can locate (m then gives
// up on every key).
func (m *movedKeys) keep(key []byte) (keyRef, bool) {
	start := len(m.arena)
	if start+len(key) >= math.MaxUint32 {
		m.arena, m.files = nil, nil
		return keyRef{}, false
	}
	m.arena = append(m.arena, key...)
	return keyRef{start: uint32(start), n: uint32(len(key)) + 1}, true
}

// add records rows, written to files at locs.
func (m *movedKeys) add(ts *cdcsync.TableSchema, files []iceberg.DataFile, rows []cdcsync.Row, locs []rowLoc) error {
	if !m.reserve(len(rows)) {
		return nil
	}
	var key []byte
	for i, r := range rows {
		refs := m.refs(files[locs[i].file])
		if locs[i].pos < 0 || locs[i].pos >= int64(len(refs)) {
			return fmt.Errorf("row %d of %s placed at position %d, past its %d rows; this is a bug", i, files[locs[i].file].FilePath(), locs[i].pos, len(refs))
		}
		var err error
		if key, err = ts.AppendKey(key[:0], r); err != nil {
			return err
		}
		ref, ok := m.keep(key)
		if !ok {
			return nil
		}
		refs[locs[i].pos] = ref
	}
	return nil
}

// reserve counts n more rows and reports whether m keeps their keys: past
// maxMovedKeys it gives up on all of them.
func (m *movedKeys) reserve(n int) bool {
	if m == nil || m.files == nil {
		return false
	}
	if m.rows += n; m.rows > maxMovedKeys {
		m.arena, m.files = nil, nil
		return false
	}
	return true
}

// read records the keys of df's rows, read from the file.
func (m *movedKeys) read(ctx context.Context, fsys icebergio.IO, df iceberg.DataFile, kc keyColumns) error {
	if !m.reserve(int(df.Count())) {
		return nil
	}
	refs := m.refs(df)
	first := true
	err := readFileKeys(ctx, fsys, df.FilePath(), kc, func(pos int64, key []byte) error {
		if pos >= int64(len(refs)) {
			return fmt.Errorf("%s has more rows than its manifest entry says (%d)", df.FilePath(), len(refs))
		}
		if first {
			// Room for the file's keys at once, if they are as long as its
			// first (a fixed-width key): growing the arena a quarter at a
			// time would copy it about four times over, garbage made while
			// the compaction's buffers are at their peak.
			first = false
			if n := len(m.arena) + len(key)*len(refs); n < math.MaxUint32 {
				m.arena = slices.Grow(m.arena, n-len(m.arena))
			}
		}
		ref, ok := m.keep(key)
		if !ok {
			return errGaveUp
		}
		refs[pos] = ref
		return nil
	})
	if errors.Is(err, errGaveUp) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the keys of %s: %w", df.FilePath(), err)
	}
	return nil
}

// errGaveUp stops a read whose keys movedKeys no longer keeps.
var errGaveUp = errors.New("moved keys: gave up")

// fileKeys are the keys of a data file's rows, by position.
type fileKeys struct {
	arena []byte
	refs  []keyRef
}

func (k fileKeys) len() int { return len(k.refs) }

// at returns the key of the row at pos.
func (k fileKeys) at(pos int) []byte {
	r := k.refs[pos]
	return k.arena[r.start : r.start+r.n-1 : r.start+r.n-1]
}

// of returns the key of every row of df by position; ok is false when m
// does not know them all.
func (m *movedKeys) of(df iceberg.DataFile) (keys fileKeys, ok bool) {
	if m == nil || m.files == nil {
		return fileKeys{}, false
	}
	refs := m.files[df.FilePath()]
	if int64(len(refs)) != df.Count() || slices.ContainsFunc(refs, func(r keyRef) bool { return r.n == 0 }) {
		return fileKeys{}, false
	}
	return fileKeys{arena: m.arena, refs: refs}, true
}

// snapshotDataChanges returns the data files snapshot s added and the paths
// of those it removed.
func snapshotDataChanges(fsys icebergio.IO, s *table.Snapshot) (added []iceberg.DataFile, removed []string, err error) {
	if manifestsOnly(s) {
		return nil, nil, nil
	}
	mfs, err := s.Manifests(fsys)
	if err != nil {
		return nil, nil, err
	}
	for _, mf := range mfs {
		if mf.ManifestContent() != iceberg.ManifestContentData || mf.SnapshotID() != s.SnapshotID {
			continue
		}
		for e, err := range mf.Entries(fsys, false) {
			if err != nil {
				return nil, nil, err
			}
			if e.SnapshotID() != s.SnapshotID {
				continue
			}
			switch e.Status() {
			case iceberg.EntryStatusADDED:
				added = append(added, e.DataFile())
			case iceberg.EntryStatusDELETED:
				removed = append(removed, e.DataFile().FilePath())
			}
		}
	}
	return added, removed, nil
}

// rebuildChunk is the number of index operations committed at a time
// while rebuilding.
const rebuildChunk = 200_000

// rebuildIndex builds the index from the live rows of snapshot h. It
// commits its work in chunks, each with the state marked incomplete and
// the last data file it finished (pkindex.State.Through), so that a
// rebuild of h cut short (a shutdown, a crash) resumes after that file
// instead of starting again: on a large table a crash loop would otherwise
// never see a rebuild finish.
func (t *Table) rebuildIndex(ctx context.Context, tbl *table.Table, h *table.Snapshot) error {
	ki := t.state.keys
	var through string
	if st, ok, err := ki.db.State(); err == nil && ok && h != nil && !st.Complete && st.SnapshotID == h.SnapshotID {
		through = st.Through
	}
	if through == "" {
		if err := ki.db.Reset(); err != nil {
			return fmt.Errorf("reset the key index of %s: %w", t.ID, err)
		}
	}
	if err := ki.loadFiles(); err != nil {
		return err
	}
	if h == nil {
		ib := ki.newBatch()
		defer ib.close()
		return ib.commit(pkindex.State{SnapshotID: noSnapshot, Complete: true})
	}
	start := time.Now()
	ib := ki.newBatch()
	defer ib.close()
	if through == "" {
		// Marked unfinished first: a rebuild cut short resumes, or
		// starts again.
		if err := ib.commit(pkindex.State{SnapshotID: h.SnapshotID, Complete: false}); err != nil {
			return fmt.Errorf("build the key index of %s: %w", t.ID, err)
		}
	} else {
		ki.log.Info("resuming the key index's rebuild", "after", through)
	}
	if ki.fault != nil {
		ki.fault("during-index-rebuild")
	}
	chunk := rebuildChunk
	if ki.chunk > 0 {
		chunk = ki.chunk
	}
	var rows int64
	finished := through // the last file whose keys are all in ib or committed
	flush := func() error {
		if err := ib.commit(pkindex.State{SnapshotID: h.SnapshotID, Complete: false, Through: finished}); err != nil {
			return err
		}
		ki.log.Info("building the key index", "rows", rows)
		if ki.fault != nil {
			ki.fault("index-rebuild-chunk")
		}
		return nil
	}
	deleteReads, err := liveKeys(ctx, tbl, h.SnapshotID, t.Schema, through, func(key []byte, df iceberg.DataFile, pos int64) error {
		id, err := ib.file(tbl.Metadata(), df)
		if err != nil {
			return err
		}
		ib.b.Put(key, pkindex.Loc{File: id, Pos: pos})
		rows++
		if ib.b.Len() >= chunk {
			return flush()
		}
		return nil
	}, func(path string) error {
		finished = path
		return nil
	})
	if err == nil {
		err = ib.commit(pkindex.State{SnapshotID: h.SnapshotID, Complete: true})
	}
	if err != nil {
		return fmt.Errorf("build the key index of %s: %w", t.ID, err)
	}
	ki.rebuilds.Add(1)
	ki.rebuildRows.Add(rows)
	ki.log.Info("key index built", "rows", rows, "files", len(ki.byPath), "delete_files", deleteReads, "seconds", time.Since(start).Seconds(), "resumed", through != "")
	return nil
}

// resetIndexAfter rebuilds an index that could not be read.
func (t *Table) resetIndexAfter(ctx context.Context, tbl *table.Table, cause error) error {
	if errors.Is(cause, context.Canceled) {
		return cause
	}
	t.state.keys.log.Warn("the key index cannot be read; rebuilding it", "error", cause)
	return t.rebuildIndex(ctx, tbl, head(tbl.Metadata(), refOf(tbl.Metadata())))
}

// positionTargets looks up the keys of deletes (before images) and returns
// the rows to delete by position, and the encoded keys.
func (t *Table) positionTargets(deletes []cdcsync.Row) ([]posTarget, [][]byte, error) {
	ki := t.state.keys
	keys := make([][]byte, len(deletes))
	for i, r := range deletes {
		k, err := t.Schema.AppendKey(nil, r)
		if err != nil {
			return nil, nil, err
		}
		keys[i] = k
	}
	locs, found, err := ki.db.Lookup(keys)
	if err != nil {
		return nil, nil, fmt.Errorf("look up the key index of %s: %w", t.ID, err)
	}
	var out []posTarget
	for i, l := range locs {
		if !found[i] {
			continue
		}
		f, ok := ki.files[l.File]
		if !ok || !f.live {
			continue // a row of a file gone from the table: nothing to delete
		}
		out = append(out, posTarget{path: f.path, pos: l.Pos, spec: f.spec, values: f.values})
	}
	return out, keys, nil
}

// indexCommitted records an epoch commit in the index: the keys of deletes
// leave it, the rows are put where the writer placed them.
func (t *Table) indexCommitted(tbl *table.Table, snap int64, keys [][]byte, rows []cdcsync.Row, data []iceberg.DataFile, locs []rowLoc) error {
	ki := t.state.keys
	ib := ki.newBatch()
	defer ib.close()
	ids := make([]uint32, len(data))
	for i, df := range data {
		id, err := ib.file(tbl.Metadata(), df)
		if err != nil {
			return err
		}
		ids[i] = id
	}
	for _, k := range keys {
		ib.b.Delete(k)
	}
	var key []byte
	for i, r := range rows {
		var err error
		if key, err = t.Schema.AppendKey(key[:0], r); err != nil {
			return err
		}
		ib.b.Put(key, pkindex.Loc{File: ids[locs[i].file], Pos: locs[i].pos})
	}
	return ib.commit(pkindex.State{SnapshotID: snap, Complete: true})
}

// positionEpochFiles writes an epoch of a table in position mode: the rows,
// and position deletes of the rows the index holds for the keys of
// deletes. It first brings the index to base.
func (t *Table) positionEpochFiles(ctx context.Context, base *table.Table, e Epoch, deletes, rows []cdcsync.Row) (data, dels []iceberg.DataFile, err error) {
	if t.state.keys == nil {
		return nil, nil, fmt.Errorf("%s records deletes by position but this process has no key index open for it; this is a bug", t.ID)
	}
	if err := t.syncIndexUnless(ctx, base, e.Interrupt); err != nil {
		return nil, nil, err
	}
	targets, keys, err := t.positionTargets(deletes)
	if err != nil {
		return nil, nil, err
	}
	t.state.clock.lap(lookupPhase)
	locs := make([]rowLoc, len(rows))
	var (
		superseded []iceberg.DataFile
		dataDone   time.Time
	)
	writeData := func() error {
		defer func() { dataDone = time.Now() }()
		if len(rows) == 0 {
			return nil
		}
		var err error
		if data, err = t.writeFiles(ctx, base, t.dataFile, rows, locs); err != nil {
			return fmt.Errorf("write data files of %s: %w", t.ID, err)
		}
		return nil
	}
	writeDeletes := func() error {
		var err error
		dels, superseded, err = t.writeTargets(ctx, base, targets)
		return err
	}
	if t.mode == DeletesDV {
		// Deletion vectors take none of the data writer's open-file budget
		// (position delete files do), so they are written next to the data
		// files: on a finely partitioned table each is a good part of the
		// commit (reading the vectors they replace, tens of Puffin files).
		var g errgroup.Group
		g.Go(writeData)
		g.Go(writeDeletes)
		err = g.Wait()
	} else if err = writeData(); err == nil {
		err = writeDeletes()
	}
	if err != nil {
		t.removeFiles(ctx, base, data)
		t.removeFiles(ctx, base, dels)
		return nil, nil, err
	}
	// The deletes phase is the time they took beyond the data files.
	t.state.clock.lapAt(dataPhase, dataDone)
	t.state.clock.lap(deletesPhase)
	if keys == nil {
		keys = [][]byte{} // marks the pending files as position mode's
	}
	t.state.pending = &pendingFiles{epoch: e, rows: len(rows), dels: len(deletes), data: data, edels: dels,
		superseded: superseded, base: snapshotID(head(base.Metadata(), refOf(base.Metadata()))), keys: keys, locs: locs}
	return data, dels, nil
}

// writeTargets writes deletes by position: position delete files in
// position mode, deletion vectors in dv mode, which supersede the vectors
// their data files have (returned for the commit to remove).
func (t *Table) writeTargets(ctx context.Context, base *table.Table, targets []posTarget) (dels, superseded []iceberg.DataFile, err error) {
	if t.mode != DeletesDV {
		dels, err = t.writePositionDeletes(ctx, base, targets)
		return dels, nil, err
	}
	set := newDVSet()
	for _, tg := range targets {
		set.add(tg)
	}
	return t.writeDVs(ctx, base, set)
}

// indexEpoch records a committed epoch in the key index. A failure leaves
// the index behind the table, which the next commit's syncIndex replays.
func (t *Table) indexEpoch(e Epoch, p *pendingFiles, rows []cdcsync.Row) {
	tbl := t.current()
	snap := epochSnapshot(tbl.Metadata(), refOf(tbl.Metadata()), t.pipeline, e.Number)
	if snap == nil || parentID(snap) != p.base {
		return // another writer in between: syncIndex replays
	}
	if f := t.state.keys.fault; f != nil {
		f("before-index")
	}
	if err := t.indexCommitted(tbl, snap.SnapshotID, p.keys, rows, p.data, p.locs); err != nil {
		t.state.keys.log.Warn("the key index could not record an epoch; the next commit catches it up from the table", "epoch", e.Number, "error", err)
	}
}

// epochSnapshot returns the snapshot of the pipeline's epoch on ref, if it
// is in the newest ten of the lineage.
func epochSnapshot(meta table.Metadata, ref, pipeline string, epoch int64) *table.Snapshot {
	want := strconv.FormatInt(epoch, 10)
	s := head(meta, ref)
	for i := 0; s != nil && i < 10; i++ {
		if s.Summary != nil && s.Summary.Properties[SummaryPipeline] == pipeline && s.Summary.Properties[SummaryEpoch] == want {
			return s
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return nil
}

// dropUnusedIndexes removes from the key index database the indexes of no
// table of the session: tables dropped, no longer mirrored, switched to
// equality mode, or whose key changed. They would only take disk.
func (l *Lake) dropUnusedIndexes(tables map[cdcsync.TableID]*Table) {
	if l.keys == nil {
		return
	}
	used := map[string]bool{}
	for _, t := range tables {
		if t.state.keys != nil {
			used[t.state.keys.name] = true
		}
	}
	names, err := l.keys.Tables()
	if err != nil {
		l.log.Warn("cannot list the key indexes", "error", err)
		return
	}
	for _, name := range names {
		if used[name] || strings.HasPrefix(name, spillPrefix) {
			continue // spill stores: cleanSpills
		}
		it, err := l.keys.Table(name)
		if err == nil {
			err = it.Drop()
		}
		if err != nil {
			l.log.Warn("cannot drop an unused key index", "index", name, "error", err)
			continue
		}
		l.log.Info("dropped the key index of a table this pipeline no longer mirrors in position mode", "index", name)
	}
}
