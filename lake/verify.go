package lake

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/verify"
)

// VerifyView is the lake as `cdcsync verify` reads it (verify.Lake): the
// pipeline's tables, their commit lineage and positions, their rows as of
// a snapshot and the keys each commit changed. It only reads.
type VerifyView struct {
	l     *Lake
	order cdcsync.Order

	mu     sync.Mutex
	tables map[cdcsync.TableID]*table.Table // as State last loaded them
}

// Verify returns a read-only view of the pipeline's tables for verify;
// order compares the source's positions.
func (l *Lake) Verify(order cdcsync.Order) *VerifyView {
	return &VerifyView{l: l, order: order, tables: map[cdcsync.TableID]*table.Table{}}
}

// Tables lists the tables the pipeline mirrors (not those it stopped).
func (v *VerifyView) Tables(ctx context.Context) ([]cdcsync.TableID, error) {
	pts, err := v.l.PipelineTables(ctx)
	if err != nil {
		return nil, err
	}
	var out []cdcsync.TableID
	for _, pt := range pts {
		if !pt.Stopped {
			out = append(out, pt.ID)
		}
	}
	return out, nil
}

// State loads the table and the pipeline checkpoint afresh. The checkpoint
// is read first: a table whose last commit is the epoch the checkpoint
// recorded for it holds every transaction up to the checkpoint.
func (v *VerifyView) State(ctx context.Context, id cdcsync.TableID) (*verify.TableState, error) {
	ck, haveCk, err := v.l.LoadCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	tbl, err := v.load(ctx, id)
	if err != nil {
		return nil, err
	}
	st := &verify.TableState{Head: -1}
	props := tbl.Properties()
	ts, _, ok, err := storedState(tbl)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("Iceberg table %s records no MySQL schema (%s): it was not written by cdcsync, or by a version older than verify", strings.Join(tbl.Identifier(), "."), PropMySQLSchema)
	}
	st.Schema = ts
	c, err := CommittedBy(tbl, v.l.opts.Pipeline)
	if err != nil {
		return nil, err
	}
	meta := tbl.Metadata()
	switch {
	case !c.Found:
		st.Unverifiable = fmt.Sprintf("pipeline %q has not committed to it", v.l.opts.Pipeline)
	case props[PropStopped] != "":
		st.Unverifiable = "cdcsync stopped mirroring it"
		if info, ok := StoppedIn(props); ok {
			st.Unverifiable += fmt.Sprintf(" at %s: %s", info.Position, info.Reason)
		}
	case props[PropRecopy] != "":
		st.Unverifiable = "it is marked to be copied afresh at the next start"
	case c.Copy != nil || meta.SnapshotByName(CopyBranch) != nil:
		rows := int64(0)
		if c.Copy != nil {
			rows = c.Copy.Rows
		}
		st.Unverifiable = fmt.Sprintf("its initial copy runs (%d rows copied so far); verify it once the copy is done", rows)
	}
	st.Effective = c.Pos
	if haveCk {
		st.Effective = ck.Effective(id, c, v.order)
	}
	if s := meta.CurrentSnapshot(); s != nil {
		st.Head = s.SnapshotID
	}
	for s := meta.CurrentSnapshot(); s != nil; {
		p := s.Summary
		if p != nil && p.Properties[SummaryPipeline] == v.l.opts.Pipeline && p.Properties[SummaryEpoch] != "" {
			cm, err := parseCommitted(p.Properties)
			if err != nil {
				return nil, fmt.Errorf("snapshot %d of %s: %w", s.SnapshotID, id, err)
			}
			st.Epochs = append(st.Epochs, verify.Epoch{Snapshot: s.SnapshotID, Epoch: cm.Epoch, Pos: cm.Pos})
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	slices.Reverse(st.Epochs)
	return st, nil
}

func (v *VerifyView) load(ctx context.Context, id cdcsync.TableID) (*table.Table, error) {
	tbl, err := v.l.LoadTable(ctx, v.l.Identifier(id.Database, id.Table))
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	v.tables[id] = tbl
	v.mu.Unlock()
	return tbl, nil
}

// loaded returns the table as State last loaded it, which knows every
// snapshot State reported.
func (v *VerifyView) loaded(ctx context.Context, id cdcsync.TableID) (*table.Table, error) {
	v.mu.Lock()
	tbl := v.tables[id]
	v.mu.Unlock()
	if tbl != nil {
		return tbl, nil
	}
	return v.load(ctx, id)
}

// Scan calls fn with every row of the table as of snapshot, deletes
// applied.
func (v *VerifyView) Scan(ctx context.Context, id cdcsync.TableID, ts *cdcsync.TableSchema, snapshot int64, fn func(cdcsync.Row) error) error {
	tbl, err := v.loaded(ctx, id)
	if err != nil {
		return err
	}
	if snapshot < 0 {
		return nil // no snapshot: no rows
	}
	ctx = v.l.Scope(ctx)
	what := fmt.Sprintf("scan %s at snapshot %d", id, snapshot)
	_, recs, err := tbl.Scan(table.WithSnapshotID(snapshot)).ToArrowRecords(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for rec, err := range recs {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		rows, err := rowsFromBatch(rec, ts)
		rec.Release()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		for _, r := range rows {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// Touched returns the keys whose rows the commit of snapshot changed: the
// keys of the equality deletes it added (an equality-mode epoch writes one
// for every key it touches), or in position mode the keys of the rows it
// added and of those it deleted by position. all is true when the commit removed data files (a TRUNCATE
// empties the table that way), so any row may have changed.
func (v *VerifyView) Touched(ctx context.Context, id cdcsync.TableID, ts *cdcsync.TableSchema, snapshot int64) (map[string]bool, bool, error) {
	tbl, err := v.loaded(ctx, id)
	if err != nil {
		return nil, false, err
	}
	snap := tbl.Metadata().SnapshotByID(snapshot)
	if snap == nil {
		return nil, false, fmt.Errorf("%s has no snapshot %d any more (expired?)", id, snapshot)
	}
	if snap.Summary != nil {
		if n := snap.Summary.Properties["deleted-data-files"]; n != "" && n != "0" {
			return nil, true, nil
		}
	}
	ctx = v.l.Scope(ctx)
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, false, err
	}
	manifests, err := snap.Manifests(fsys)
	if err != nil {
		return nil, false, fmt.Errorf("read the manifests of %s at snapshot %d: %w", id, snapshot, err)
	}
	var files, posFiles, added []iceberg.DataFile
	for _, m := range manifests {
		if m.SnapshotID() != snapshot {
			continue
		}
		for e, err := range m.Entries(fsys, true) {
			if err != nil {
				return nil, false, fmt.Errorf("read the manifest %s of %s: %w", m.FilePath(), id, err)
			}
			if e.Status() != iceberg.EntryStatusADDED || e.SnapshotID() != snapshot {
				continue
			}
			switch e.DataFile().ContentType() {
			case iceberg.EntryContentEqDeletes:
				files = append(files, e.DataFile())
			case iceberg.EntryContentPosDeletes:
				posFiles = append(posFiles, e.DataFile())
			case iceberg.EntryContentData:
				added = append(added, e.DataFile())
			}
		}
	}
	if len(posFiles) > 0 || byPosition(deletesMode(tbl)) {
		// Position and dv modes: the keys of the rows the commit added, and
		// of those it deleted by position (read from the files they were in).
		keys, err := positionTouched(ctx, fsys, tbl, ts, added, posFiles)
		if err != nil {
			return nil, false, fmt.Errorf("read the changes of %s at snapshot %d: %w", id, snapshot, err)
		}
		if len(files) == 0 {
			return keys, false, nil
		}
		eqKeys, all, err := v.eqTouched(ctx, tbl, ts, snapshot, files)
		for k := range eqKeys {
			keys[k] = true
		}
		return keys, all, err
	}
	return v.eqTouched(ctx, tbl, ts, snapshot, files)
}

// positionTouched returns the keys of the rows in the data files added and
// of the rows the position delete files delete.
func positionTouched(ctx context.Context, fsys icebergio.IO, tbl *table.Table, ts *cdcsync.TableSchema, added, posFiles []iceberg.DataFile) (map[string]bool, error) {
	kc, err := newKeyColumns(tbl.Schema(), ts)
	if err != nil {
		return nil, err
	}
	keys := map[string]bool{}
	for _, df := range added {
		if err := readFileKeys(ctx, fsys, df.FilePath(), kc, func(_ int64, key []byte) error {
			keys[string(key)] = true
			return nil
		}); err != nil {
			return nil, err
		}
	}
	byPath := map[string]map[int64]bool{}
	for _, d := range posFiles {
		if err := eachPositionDelete(ctx, fsys, d, func(path string, pos int64) bool {
			if byPath[path] == nil {
				byPath[path] = map[int64]bool{}
			}
			byPath[path][pos] = true
			return true
		}); err != nil {
			return nil, err
		}
	}
	for path, positions := range byPath {
		if err := readFileKeys(ctx, fsys, path, kc, func(pos int64, key []byte) error {
			if positions[pos] {
				keys[string(key)] = true
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// eqTouched returns the keys of the equality delete files a commit added
// (an equality-mode epoch writes one for every key it touches).
func (v *VerifyView) eqTouched(ctx context.Context, tbl *table.Table, ts *cdcsync.TableSchema, snapshot int64, files []iceberg.DataFile) (map[string]bool, bool, error) {
	id := ts.ID
	keys := map[string]bool{}
	if len(files) == 0 {
		return keys, false, nil
	}
	names := make([]string, len(ts.PrimaryKey))
	for i, k := range ts.PrimaryKey {
		names[i] = ts.Columns[k].Name
	}
	tasks := make([]table.FileScanTask, len(files))
	for i, f := range files {
		tasks[i] = table.FileScanTask{File: f, Start: 0, Length: f.FileSizeBytes()}
	}
	_, recs, err := tbl.Scan(table.WithSnapshotID(snapshot), table.WithSelectedFields(names...)).ReadTasks(ctx, tasks)
	if err != nil {
		return nil, false, fmt.Errorf("read the equality deletes of %s at snapshot %d: %w", id, snapshot, err)
	}
	var enc []byte
	for rec, err := range recs {
		if err != nil {
			return nil, false, fmt.Errorf("read the equality deletes of %s at snapshot %d: %w", id, snapshot, err)
		}
		rows, err := rowsFromBatch(rec, ts)
		rec.Release()
		if err != nil {
			return nil, false, fmt.Errorf("read the equality deletes of %s at snapshot %d: %w", id, snapshot, err)
		}
		for _, r := range rows {
			enc = enc[:0]
			ok := true
			for _, k := range ts.PrimaryKey {
				if enc, ok = cdcsync.AppendValue(enc, r[k]); !ok {
					break
				}
			}
			if ok {
				keys[string(enc)] = true
			}
		}
	}
	return keys, false, nil
}
