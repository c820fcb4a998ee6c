package lake

// An epoch's row delta, committed by cdcsync itself.
//
// iceberg-go v0.7.0's RowDelta reads the whole table's manifests at each
// commit: it checks that every data file a position delete or deletion
// vector names is live by reading every data manifest
// (validateDataFilesExist, even when no other commit intervened), resolves
// the deletion vectors an epoch supersedes by reading every delete
// manifest, and its overwrite producer reads every manifest once more to
// drop them. On a finely partitioned dv table (29,000 data files, 20,000
// vectors) that was most of an epoch commit's 2 to 3.5 s (issue 23).
//
// An epoch commit needs none of that reading. It asserts that its branch is
// still at the snapshot its deletes were looked up on, so the data files
// they name are live when it lands (the key index names rows of that
// snapshot); only the delete manifests that hold a vector the epoch
// supersedes are read, and rewritten without it. The snapshot is what
// iceberg-go's row delta writes: the new manifests first, the parent's
// manifests after them, the superseded vectors as DELETED entries, the
// same summary keys and totals, and v3 row lineage.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
)

// rowDelta is what a snapshot changes in a table: the data files and
// delete files it adds, the deletion vectors its new ones replace, and (a
// compaction's) the data and delete files it removes.
type rowDelta struct {
	data, dels  []iceberg.DataFile
	superseded  []iceberg.DataFile
	removedData []iceberg.DataFile
	removedDels []iceberg.DataFile
	// dataSeq, when set, is the data sequence number of the added data
	// files (a compaction's: the snapshot it read), instead of the
	// snapshot's own.
	dataSeq *int64
	// op, when set, is the snapshot's operation (a compaction: replace).
	op table.Operation
}

func (d rowDelta) operation() table.Operation {
	switch {
	case d.op != "":
		return d.op
	case len(d.data) > 0 && len(d.dels) > 0:
		return table.OpOverwrite
	case len(d.dels) > 0:
		return table.OpDelete
	}
	return table.OpAppend
}

// commitRowDelta commits d as one snapshot on ref of base, with props in
// its summary and the table property updates, asserting that ref is still
// at base's head and the table is base's. It returns the committed table.
// When the catalog refuses the commit, the files it wrote for it go.
func (t *Table) commitRowDelta(ctx context.Context, base *table.Table, ref string, d rowDelta, props iceberg.Properties, set iceberg.Properties) (*table.Table, error) {
	meta := base.Metadata()
	if meta.Version() < 2 && len(d.dels) > 0 {
		return nil, fmt.Errorf("%s is an Iceberg format v%d table, which cannot hold delete files; cdcsync needs format v2 (deletes: equality or position) or v3 (deletes: dv)", t.ID, meta.Version())
	}
	if err := checkSupersession(d); err != nil {
		return nil, fmt.Errorf("commit to %s: %w", t.ID, err)
	}
	wfs, locs, err := t.writeIO(ctx, base)
	if err != nil {
		return nil, err
	}
	s := &snapshotWriter{meta: meta, fsys: wfs, locs: locs, id: newSnapshotID(meta), seq: meta.LastSequenceNumber() + 1,
		commit: uuid.New(), chunk: deleteManifestEntries, held: &t.state.deletes, fresh: map[string][]iceberg.ManifestEntry{}}
	if t.deleteManifestEntries > 0 {
		s.chunk = t.deleteManifestEntries
	}
	committed := false
	defer func() {
		if !committed {
			s.removeWritten()
		}
	}()
	parent := head(meta, ref)
	// The new files' manifests are written while the parent's are read and
	// rewritten: both are mostly Avro encoding and deflate, on one core each.
	var mans, kept []iceberg.ManifestFile
	var g errgroup.Group
	g.Go(func() error {
		var err error
		if mans, err = s.addedManifests(d); err != nil {
			return fmt.Errorf("write the manifests of a snapshot of %s: %w", t.ID, err)
		}
		return nil
	})
	if parent != nil {
		g.Go(func() error {
			var err error
			if kept, err = s.parentManifests(ctx, parent, d); err != nil {
				return fmt.Errorf("carry the manifests of snapshot %d of %s over: %w", parent.SnapshotID, t.ID, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	mans = append(mans, kept...)
	snap, err := s.snapshot(parent, mans, rowDeltaSummary(d, parent, props))
	if err != nil {
		return nil, fmt.Errorf("write the manifest list of a snapshot of %s: %w", t.ID, err)
	}
	var parentID *int64
	if parent != nil {
		parentID = &parent.SnapshotID
	}
	reqs := []table.Requirement{table.AssertTableUUID(meta.TableUUID()), table.AssertRefSnapshotID(ref, parentID)}
	updates := []table.Update{
		table.NewAddSnapshotUpdate(snap),
		// 0, not -1: -1 would be sent to a REST catalog, which refuses it.
		table.NewSetSnapshotRefUpdate(ref, snap.SnapshotID, table.BranchRef, 0, 0, 0),
	}
	if len(set) > 0 {
		updates = append(updates, table.NewSetPropertiesUpdate(set))
	}
	t.state.clock.lap(manifestsPhase)
	t.state.clock.count(s.entriesWritten.Load(), s.entriesRead.Load())
	newMeta, newLoc, err := t.cat.CommitTable(ctx, t.Ident, reqs, updates)
	t.state.clock.lap(catalogPhase)
	if err != nil {
		// Unless the catalog said it refused the commit, it may have
		// applied it: its files stay (orphan cleanup removes them if
		// nothing references them).
		committed = !errors.Is(err, table.ErrCommitFailed)
		return nil, err
	}
	committed = true
	t.state.deletes.committed(mans, s.fresh)
	dropOldMetadata(wfs, meta, newMeta)
	// The new table opens its file IO as base does. base.FS, a method
	// value, keeps base (and its metadata) alive: given to each new table,
	// every commit would keep all earlier ones and add a call to each file
	// access. So a table this writer built passes on the opener it got,
	// and only a table the catalog gave is kept, once. (The IO base.FS
	// returned is bound to this commit's context: S3 reads through it fail
	// once the context ends.)
	open := t.state.builtFS
	if base != t.state.built || open == nil {
		open = base.FS
	}
	next := table.New(t.Ident, newMeta, newLoc, open, t.cat)
	t.state.built, t.state.builtFS = next, open
	return next, nil
}

// checkSupersession checks what the v3 spec asks of deletion vectors: at
// most one new vector per data file, and a new one for the data file of
// every vector it removes.
func checkSupersession(d rowDelta) error {
	added := map[string]bool{}
	for _, f := range d.dels {
		if ref := f.ReferencedDataFile(); table.IsDeletionVector(f) && ref != nil {
			if added[*ref] {
				return fmt.Errorf("two new deletion vectors name data file %s", *ref)
			}
			added[*ref] = true
		}
	}
	for _, f := range d.superseded {
		ref := f.ReferencedDataFile()
		if !table.IsDeletionVector(f) || ref == nil {
			return fmt.Errorf("%s is not a deletion vector: only deletion vectors are replaced", f.FilePath())
		}
		if !added[*ref] {
			return fmt.Errorf("the deletion vector of data file %s is removed without a new one", *ref)
		}
	}
	return nil
}

// newSnapshotID returns a positive snapshot id meta does not hold.
func newSnapshotID(meta table.Metadata) int64 {
	for {
		id := rand.Int64N(1<<62) + 1
		if meta.SnapshotByID(id) == nil {
			return id
		}
	}
}

// snapshotWriter writes the manifests and the manifest list of one new
// snapshot of a table.
type snapshotWriter struct {
	meta   table.Metadata
	fsys   icebergio.WriteFileIO
	locs   table.LocationProvider
	id     int64
	seq    int64 // the snapshot's sequence number
	commit uuid.UUID
	chunk  int // the most entries of a delete manifest it writes
	// held are the table's delete manifests' entries; fresh, those of
	// the delete manifests this snapshot wrote or read (under mu).
	held  *deleteEntries
	fresh map[string][]iceberg.ManifestEntry

	mu      sync.Mutex
	n       int
	written []string

	entriesWritten, entriesRead atomic.Int64
}

func (s *snapshotWriter) newPath() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.locs.NewMetadataLocation(fmt.Sprintf("%s-m%d.avro", s.commit, s.n))
	s.n++
	s.written = append(s.written, p)
	return p
}

// keep records the live entries of the delete manifest at path.
func (s *snapshotWriter) keep(path string, es []iceberg.ManifestEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fresh[path] = es
}

// liveEntries returns the live entries of mf: held, or read (and then
// kept for a delete manifest).
func (s *snapshotWriter) liveEntries(mf iceberg.ManifestFile) ([]iceberg.ManifestEntry, error) {
	deletes := mf.ManifestContent() == iceberg.ManifestContentDeletes
	if deletes {
		if es, ok := s.held.get(mf.FilePath()); ok {
			return es, nil
		}
	}
	var entries []iceberg.ManifestEntry
	for e, err := range mf.Entries(s.fsys, true) {
		if err != nil {
			return nil, fmt.Errorf("read manifest %s: %w", mf.FilePath(), err)
		}
		entries = append(entries, e)
	}
	s.entriesRead.Add(int64(len(entries)))
	if deletes {
		s.keep(mf.FilePath(), entries)
	}
	return entries, nil
}

func (s *snapshotWriter) removeWritten() {
	for _, p := range s.written {
		_ = s.fsys.Remove(p)
	}
}

// addedManifests writes d's new data and delete files as manifests, one
// per partition spec and content.
func (s *snapshotWriter) addedManifests(d rowDelta) ([]iceberg.ManifestFile, error) {
	var out []iceberg.ManifestFile
	for _, group := range []struct {
		files   []iceberg.DataFile
		content iceberg.ManifestContent
	}{{d.data, iceberg.ManifestContentData}, {d.dels, iceberg.ManifestContentDeletes}} {
		bySpec := map[int32][]iceberg.DataFile{}
		var specs []int32
		for _, f := range group.files {
			if _, ok := bySpec[f.SpecID()]; !ok {
				specs = append(specs, f.SpecID())
			}
			bySpec[f.SpecID()] = append(bySpec[f.SpecID()], f)
		}
		for _, spec := range specs {
			var seq *int64
			if group.content == iceberg.ManifestContentData {
				seq = d.dataSeq
			}
			files := bySpec[spec]
			mfs, err := s.writeManifests(spec, group.content, len(files), func(w *manifestOut, i int) error {
				return w.add(files[i], seq)
			})
			if err != nil {
				return nil, err
			}
			out = append(out, mfs...)
		}
	}
	return out, nil
}

// deleteManifestEntries bounds the entries of a delete manifest that a
// commit adds (its new deletes, or the removed files it records): a larger
// set is written as several manifests at once. An epoch of a finely
// partitioned dv table adds and replaces tens of thousands of vectors, and
// iceberg-go's manifest writer encodes and deflates on one core. Data
// manifests are written whole: their files' row ids follow their order.
const deleteManifestEntries = 8192

// manifestWriters bounds the manifests a commit writes at once.
const manifestWriters = 2

// writeManifests writes n entries (put writes entry i) as manifests of
// spec and content, in order: one, or for deletes several of at most
// s.chunk each, written at once.
func (s *snapshotWriter) writeManifests(spec int32, content iceberg.ManifestContent, n int, put func(w *manifestOut, i int) error) ([]iceberg.ManifestFile, error) {
	parts := 1
	if content == iceberg.ManifestContentDeletes {
		parts = max(1, (n+s.chunk-1)/s.chunk)
	}
	out := make([]iceberg.ManifestFile, parts)
	var g errgroup.Group
	g.SetLimit(manifestWriters)
	for p := range parts {
		lo, hi := p*n/parts, (p+1)*n/parts
		g.Go(func() error {
			mf, err := s.writeManifest(spec, content, func(w *manifestOut) error {
				for i := lo; i < hi; i++ {
					if err := put(w, i); err != nil {
						return err
					}
				}
				return nil
			})
			out[p] = mf
			return err
		})
	}
	return out, g.Wait()
}

// manifestOut writes the entries of one manifest and, for a delete
// manifest, keeps its live entries as a reader of the file gets them
// (deleteEntries).
type manifestOut struct {
	w       *iceberg.ManifestWriter
	s       *snapshotWriter
	content iceberg.ManifestContent
	live    []iceberg.ManifestEntry
}

// add writes f as added by the snapshot, with data sequence number dataSeq
// (nil: the snapshot's).
func (o *manifestOut) add(f iceberg.DataFile, dataSeq *int64) error {
	if err := o.w.Add(iceberg.NewManifestEntry(iceberg.EntryStatusADDED, &o.s.id, dataSeq, nil, f)); err != nil {
		return err
	}
	if o.content == iceberg.ManifestContentDeletes {
		// A reader inherits the sequence numbers left out from the
		// manifest's, which the manifest list sets to the snapshot's.
		seq := o.s.seq
		if dataSeq == nil {
			dataSeq = &seq
		}
		o.live = append(o.live, iceberg.NewManifestEntry(iceberg.EntryStatusADDED, &o.s.id, dataSeq, &seq, f))
	}
	return nil
}

// existing writes e as carried over from an earlier snapshot.
func (o *manifestOut) existing(e iceberg.ManifestEntry) error {
	if err := o.w.Existing(e); err != nil {
		return err
	}
	if o.content == iceberg.ManifestContentDeletes {
		o.live = append(o.live, e)
	}
	return nil
}

// remove writes e as removed by the snapshot.
func (o *manifestOut) remove(e iceberg.ManifestEntry) error { return o.w.Delete(e) }

// writeManifest writes one manifest of spec and content, whose entries fill
// adds.
func (s *snapshotWriter) writeManifest(specID int32, content iceberg.ManifestContent, fill func(*manifestOut) error) (iceberg.ManifestFile, error) {
	spec := s.meta.PartitionSpecByID(int(specID))
	if spec == nil {
		return nil, fmt.Errorf("the table has no partition spec %d", specID)
	}
	path := s.newPath()
	out, err := s.fsys.Create(path)
	if err != nil {
		return nil, err
	}
	cnt := &countingWriter{w: out, buf: bufio.NewWriterSize(out, fileBufferBytes)}
	w, err := iceberg.NewManifestWriter(s.meta.Version(), cnt, *spec, s.meta.CurrentSchema(), s.id, iceberg.WithManifestWriterContent(content))
	mo := &manifestOut{w: w, s: s, content: content}
	if err == nil {
		err = fill(mo)
	}
	if err == nil {
		err = w.Close()
	}
	if cerr := cnt.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("write manifest %s: %w", path, err)
	}
	mf, err := w.ToManifestFile(path, cnt.n)
	if err == nil {
		s.entriesWritten.Add(int64(mf.AddedDataFiles() + mf.ExistingDataFiles() + mf.DeletedDataFiles()))
		if len(mo.live) > 0 {
			s.keep(path, mo.live)
		}
	}
	return mf, err
}

// parentManifests returns the manifests of parent the new snapshot keeps:
// those that hold a file d removes (a vector it replaces, a compaction's
// files) rewritten without it (the others EXISTING, and none if none is
// left), the others as they are, except those left with no live entry by
// an earlier commit; and, after them, the removed files as DELETED entries.
// Only manifests of the content and partition spec of a removed file are
// read.
func (s *snapshotWriter) parentManifests(ctx context.Context, parent *table.Snapshot, d rowDelta) ([]iceberg.ManifestFile, error) {
	mans, err := parent.Manifests(s.fsys)
	if err != nil {
		return nil, err
	}
	gone := map[iceberg.ManifestContent]map[string]iceberg.DataFile{
		iceberg.ManifestContentData:    {},
		iceberg.ManifestContentDeletes: {},
	}
	specs := map[iceberg.ManifestContent]map[int32]bool{
		iceberg.ManifestContentData:    {},
		iceberg.ManifestContentDeletes: {},
	}
	remove := func(c iceberg.ManifestContent, files []iceberg.DataFile) {
		for _, f := range files {
			gone[c][dvKey(f)] = f
			specs[c][f.SpecID()] = true
		}
	}
	remove(iceberg.ManifestContentData, d.removedData)
	remove(iceberg.ManifestContentDeletes, d.superseded)
	remove(iceberg.ManifestContentDeletes, d.removedDels)
	out := make([]iceberg.ManifestFile, len(mans))
	var found sync.Map
	var tombs tombstones
	g, _ := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for i, mf := range mans {
		if !mf.HasAddedFiles() && !mf.HasExistingFiles() && mf.DeletedDataFiles() > 0 {
			continue // only DELETED entries, recorded by an earlier snapshot
		}
		drop := gone[mf.ManifestContent()]
		if len(drop) == 0 || !specs[mf.ManifestContent()][mf.PartitionSpecID()] {
			out[i] = mf
			continue
		}
		g.Go(func() error {
			entries, err := s.liveEntries(mf)
			if err != nil {
				return err
			}
			hit := 0
			for _, e := range entries {
				if drop[dvKey(e.DataFile())] != nil {
					hit++
				}
			}
			if hit == 0 {
				out[i] = mf
				return nil
			}
			var kept []iceberg.ManifestEntry
			for _, e := range entries {
				if k := dvKey(e.DataFile()); drop[k] != nil {
					found.Store(k, true)
					tombs.add(mf.ManifestContent(), mf.PartitionSpecID(), e)
				} else {
					kept = append(kept, e)
				}
			}
			if len(kept) == 0 {
				return nil
			}
			nm, err := s.writeManifest(mf.PartitionSpecID(), mf.ManifestContent(), func(w *manifestOut) error {
				for _, e := range kept {
					if err := w.existing(e); err != nil {
						return err
					}
				}
				return nil
			})
			out[i] = nm
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	// The removed entries, DELETED, in one manifest per content and spec
	// (as iceberg-go writes them): a manifest of only deleted entries per
	// rewritten manifest would be dropped by the next commit anyway, and
	// iceberg-go's manifest merge fails on a group of them.
	for _, k := range tombs.order {
		es := tombs.entries[k]
		mfs, err := s.writeManifests(k.spec, k.content, len(es), func(w *manifestOut, i int) error {
			return w.remove(es[i])
		})
		if err != nil {
			return nil, err
		}
		out = append(out, mfs...)
	}
	for _, byKey := range gone {
		for k, f := range byKey {
			if _, ok := found.Load(k); !ok {
				return nil, fmt.Errorf("%s %s, which the commit removes, is not live in snapshot %d", contentName(f.ContentType()), k, parent.SnapshotID)
			}
		}
	}
	return slices.DeleteFunc(out, func(mf iceberg.ManifestFile) bool { return mf == nil }), nil
}

// tombstones collects the entries a snapshot removes, by manifest content
// and partition spec.
type tombstones struct {
	mu      sync.Mutex
	order   []tombKey
	entries map[tombKey][]iceberg.ManifestEntry
}

type tombKey struct {
	content iceberg.ManifestContent
	spec    int32
}

func (t *tombstones) add(c iceberg.ManifestContent, spec int32, e iceberg.ManifestEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tombKey{c, spec}
	if t.entries == nil {
		t.entries = map[tombKey][]iceberg.ManifestEntry{}
	}
	if _, ok := t.entries[k]; !ok {
		t.order = append(t.order, k)
	}
	t.entries[k] = append(t.entries[k], e)
}

// snapshot writes the manifest list of mans and returns the snapshot.
func (s *snapshotWriter) snapshot(parent *table.Snapshot, mans []iceberg.ManifestFile, sum table.Summary) (*table.Snapshot, error) {
	seq := s.meta.LastSequenceNumber() + 1
	var parentID *int64
	if parent != nil {
		parentID = &parent.SnapshotID
	}
	path := s.locs.NewMetadataLocation(fmt.Sprintf("snap-%d-0-%s.avro", s.id, s.commit))
	s.written = append(s.written, path)
	f, err := s.fsys.Create(path)
	if err != nil {
		return nil, err
	}
	out := &countingWriter{w: f, buf: bufio.NewWriterSize(f, fileBufferBytes)}
	var w *iceberg.ManifestListWriter
	var firstRowID int64
	switch s.meta.Version() {
	case 1:
		w, err = iceberg.NewManifestListWriterV1(out, s.id, parentID)
	case 2:
		w, err = iceberg.NewManifestListWriterV2(out, s.id, seq, parentID)
	default:
		firstRowID = s.meta.NextRowID()
		w, err = iceberg.NewManifestListWriterV3(out, s.id, seq, firstRowID, parentID)
	}
	if err == nil {
		err = w.AddManifests(mans)
	}
	var addedRows int64
	if err == nil && w.NextRowID() != nil {
		addedRows = *w.NextRowID() - firstRowID
	}
	if w != nil {
		if cerr := w.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	schema := s.meta.CurrentSchema().ID
	snap := &table.Snapshot{SnapshotID: s.id, ParentSnapshotID: parentID, SequenceNumber: seq,
		TimestampMs: max(time.Now().UnixMilli(), s.meta.LastUpdatedMillis()), ManifestList: path, Summary: &sum, SchemaID: &schema}
	if s.meta.Version() >= 3 {
		snap.FirstRowID, snap.AddedRows = &firstRowID, &addedRows
	}
	return snap, nil
}

// rowDeltaSummary is the summary of the snapshot of d on parent: props,
// and the counts and totals iceberg-go's snapshot producers record (a
// deletion vector counts as a position delete file, as they count it, and
// in added-dvs and removed-dvs too, as Iceberg Java counts it).
func rowDeltaSummary(d rowDelta, parent *table.Snapshot, props iceberg.Properties) table.Summary {
	p := iceberg.Properties{}
	for k, v := range props {
		p[k] = v
	}
	var c summaryCounts
	parts := map[string]bool{}
	for _, f := range d.data {
		c.add(f, 1)
		parts[partitionKeyOf(f)] = true
	}
	for _, f := range d.dels {
		c.add(f, 1)
		parts[partitionKeyOf(f)] = true
	}
	for _, group := range [][]iceberg.DataFile{d.superseded, d.removedData, d.removedDels} {
		for _, f := range group {
			c.add(f, -1)
			parts[partitionKeyOf(f)] = true
		}
	}
	c.set(p, int64(len(parts)))
	var prev iceberg.Properties
	if parent != nil && parent.Summary != nil {
		prev = parent.Summary.Properties
	}
	for _, k := range []struct{ total, added, removed string }{
		{"total-data-files", "added-data-files", "deleted-data-files"},
		{"total-delete-files", "added-delete-files", "removed-delete-files"},
		{"total-records", "added-records", "deleted-records"},
		{"total-files-size", "added-files-size", "removed-files-size"},
		{"total-position-deletes", "added-position-deletes", "removed-position-deletes"},
		{"total-equality-deletes", "added-equality-deletes", "removed-equality-deletes"},
	} {
		n := prev.GetInt64(k.total, 0) + p.GetInt64(k.added, 0) - p.GetInt64(k.removed, 0)
		if n >= 0 {
			p[k.total] = strconv.FormatInt(n, 10)
		}
	}
	return table.Summary{Operation: d.operation(), Properties: p}
}

// summaryCounts are the added and removed counts of a snapshot summary.
type summaryCounts struct {
	size, removedSize               int64
	dataFiles, removedDataFiles     int64
	records, removedRecords         int64
	deleteFiles, removedDeleteFiles int64
	posFiles, removedPosFiles       int64
	eqFiles, removedEqFiles         int64
	posDeletes, removedPosDeletes   int64
	eqDeletes, removedEqDeletes     int64
	dvs, removedDVs                 int64
}

// add counts f as added (sign 1) or removed (-1).
func (c *summaryCounts) add(f iceberg.DataFile, sign int) {
	type side struct{ size, dataFiles, records, deleteFiles, posFiles, eqFiles, posDeletes, eqDeletes, dvs *int64 }
	x := side{&c.size, &c.dataFiles, &c.records, &c.deleteFiles, &c.posFiles, &c.eqFiles, &c.posDeletes, &c.eqDeletes, &c.dvs}
	if sign < 0 {
		x = side{&c.removedSize, &c.removedDataFiles, &c.removedRecords, &c.removedDeleteFiles, &c.removedPosFiles, &c.removedEqFiles,
			&c.removedPosDeletes, &c.removedEqDeletes, &c.removedDVs}
	}
	*x.size += f.FileSizeBytes()
	switch f.ContentType() {
	case iceberg.EntryContentData:
		*x.dataFiles++
		*x.records += f.Count()
	case iceberg.EntryContentPosDeletes:
		*x.deleteFiles++
		*x.posFiles++
		*x.posDeletes += f.Count()
		if table.IsDeletionVector(f) {
			*x.dvs++
		}
	case iceberg.EntryContentEqDeletes:
		*x.deleteFiles++
		*x.eqFiles++
		*x.eqDeletes += f.Count()
	}
}

func (c *summaryCounts) set(p iceberg.Properties, partitions int64) {
	for k, v := range map[string]int64{
		"added-files-size": c.size, "removed-files-size": c.removedSize,
		"added-data-files": c.dataFiles, "deleted-data-files": c.removedDataFiles,
		"added-records": c.records, "deleted-records": c.removedRecords,
		"added-delete-files": c.deleteFiles, "removed-delete-files": c.removedDeleteFiles,
		"added-position-delete-files": c.posFiles, "removed-position-delete-files": c.removedPosFiles,
		"added-equality-delete-files": c.eqFiles, "removed-equality-delete-files": c.removedEqFiles,
		"added-position-deletes": c.posDeletes, "removed-position-deletes": c.removedPosDeletes,
		"added-equality-deletes": c.eqDeletes, "removed-equality-deletes": c.removedEqDeletes,
		"added-dvs": c.dvs, "removed-dvs": c.removedDVs,
		"changed-partition-count": partitions,
	} {
		if v > 0 {
			p[k] = strconv.FormatInt(v, 10)
		}
	}
}

// partitionKeyOf names f's partition (spec and values) for counting the
// partitions a snapshot changes.
func partitionKeyOf(f iceberg.DataFile) string {
	part := f.Partition()
	ids := make([]int, 0, len(part))
	for id := range part {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(f.SpecID())))
	for _, id := range ids {
		fmt.Fprintf(&b, "/%d=%v", id, part[id])
	}
	return b.String()
}

// dropOldMetadata removes the metadata files newMeta's log no longer lists
// when the table asks for it (write.metadata.delete-after-commit.enabled),
// as iceberg-go's commits do.
func dropOldMetadata(fsys icebergio.IO, old, newMeta table.Metadata) {
	if !newMeta.Properties().GetBool(table.MetadataDeleteAfterCommitEnabledKey, table.MetadataDeleteAfterCommitEnabledDefault) {
		return
	}
	keep := map[string]bool{}
	for e := range newMeta.PreviousFiles() {
		keep[e.MetadataFile] = true
	}
	for e := range old.PreviousFiles() {
		if f := e.MetadataFile; f != "" && !keep[f] {
			_ = fsys.Remove(f)
		}
	}
}
