package lake

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
)

// errNoKeyFilter says a compaction group needs iceberg-go's own reader:
// deletion vectors, a file read in parts, row lineage or a key type keySet
// does not encode.
var errNoKeyFilter = errors.New("the group needs iceberg-go's delete application")

// A rewrite (compaction, a schema change that rewrites rows) streams rows
// from a scan to the writer in batches of rewriteBatchRows, at most
// rewriteQueuedBatches of them queued for the writer: iceberg-go's defaults
// (131,072-row batches, 64 queued) let a reader faster than the Parquet
// encoding hold much of a table. The Parquet writer also holds a row
// group's pages until the row group is complete, so rewritten files get row
// groups of at most rewriteRowGroupRows rows instead of the table's (a
// million by default). TestChunkedCopyBoundedMemory checks the result.
const (
	rewriteBatchRows     = 16384
	rewriteQueuedBatches = 2
	rewriteRowGroupRows  = 65536
)

// compactionGroupOptions bound iceberg-go's ExecuteCompactionGroup alike.
func compactionGroupOptions(targetFileSize int64) []table.CompactionGroupOption {
	return []table.CompactionGroupOption{table.WithCompactionTargetFileSize(targetFileSize),
		table.WithCompactionArrowBatchSize(rewriteBatchRows), table.WithCompactionRecordBatchBufferSize(rewriteQueuedBatches),
		table.WithCompactionParquetRowGroupLimit(rewriteRowGroupRows)}
}

// rewriteGroup rewrites one compaction group: its data files' rows that no
// equality or position delete of the group applies to, written as
// target-sized files: by cdcsync's writer when the group is of the current
// partition spec and the table has no sort order (writeCompacted), else by
// iceberg-go's.
//
// iceberg-go's ExecuteCompactionGroup applies the deletes through a scan
// that builds, and keeps until it ends, one key set per distinct
// combination of delete files. An epoch-by-epoch table gives every data
// file its own combination (all the deletes of later epochs), so that
// memory grows with the square of the number of epochs since the last
// compaction (BenchmarkCompactEpochs compares the two). rewriteGroup reads
// the data files newest first instead, adding the delete files each one
// needs to one key set as it goes (a delete applying to a newer file
// applies to every older one of the partition too), so it holds every
// delete key once. It returns errNoKeyFilter for the groups it leaves to
// iceberg-go.
//
// Global delete files (globaldel.go) apply to the groups of many
// partitions: their keys are read once per compaction, into shared (nil
// for a table without them), and each group consults those sets instead of
// copying their keys.
//
// It also returns where the rows went (nil when that is not known), which
// lets a compaction that ran next to epoch commits carry their position
// deletes over to the new files (rebase.go).
func (t *Table) rewriteGroup(ctx context.Context, tbl *table.Table, g table.CompactionTaskGroup, targetFileSize int64, shared *sharedDeletes) (table.CompactionGroupResult, *rowMap, error) {
	res := table.CompactionGroupResult{PartitionKey: g.PartitionKey, BytesBefore: g.TotalSizeBytes}
	// A v3 table's rows keep their lineage (_row_id and
	// _last_updated_sequence_number) through the rewrite; a group with a
	// file that has none (a table upgraded to v3) is left to iceberg-go,
	// which drops it for the group.
	lineage := tbl.Metadata().Version() >= 3
	for _, tk := range g.Tasks {
		// Position deletes and deletion vectors are applied here by row
		// position, which needs the whole file read in order.
		whole := tk.Start == 0 && tk.Length == tk.File.FileSizeBytes()
		if (len(tk.DeleteFiles) > 0 || len(tk.DeletionVectorFiles) > 0) && !whole {
			return res, nil, errNoKeyFilter
		}
		if lineage && (tk.FirstRowID == nil || tk.DataSequenceNumber == nil) {
			return res, nil, errNoKeyFilter
		}
	}
	// cdcsync's writer takes the group when it can (compactionOut); its
	// batches then come from recycled buffers, which iceberg-go's writer
	// must not be given (openParquetReader).
	out, values, err := t.compactionOut(tbl, g, lineage)
	if err != nil {
		return res, nil, err
	}
	mem := memory.Allocator(memory.DefaultAllocator)
	if out != nil {
		mem = writeBuffers
	}
	rd, err := readLive(ctx, tbl, g, shared, lineage, false, mem)
	if err == nil && out != nil && !sameTypes(rd.schema, out.layout.schema) {
		out, mem = nil, memory.DefaultAllocator
		rd, err = readLive(ctx, tbl, g, shared, lineage, false, mem)
	}
	if err != nil {
		return res, nil, err
	}
	if out != nil {
		res.NewDataFiles, err = t.writeCompacted(ctx, tbl, out, values, rd, targetFileSize)
		if err != nil {
			return res, nil, fmt.Errorf("write compacted files for group %q: %w", g.PartitionKey, err)
		}
	} else {
		opts := []table.WriteRecordOption{table.WithClusteredWrite(), table.WithRecordBatchBufferSize(rewriteQueuedBatches), table.WithParquetRowGroupLimit(rewriteRowGroupRows)}
		if targetFileSize > 0 {
			opts = append(opts, table.WithTargetFileSize(targetFileSize))
		}
		if lineage {
			opts = append(opts, table.WithPreserveRowLineage(iceberg.SchemaWithRowLineage(tbl.Schema())))
		}
		for df, err := range table.WriteRecords(ctx, tbl, rd.schema, rd.records, opts...) {
			if err != nil {
				return res, nil, fmt.Errorf("write compacted files for group %q: %w", g.PartitionKey, err)
			}
			res.NewDataFiles = append(res.NewDataFiles, df)
		}
	}
	for _, df := range res.NewDataFiles {
		res.BytesAfter += df.FileSizeBytes()
	}
	if err := checkRowCount(res.NewDataFiles, rd.handed); err != nil {
		return res, nil, fmt.Errorf("compacted files for group %q: %w", g.PartitionKey, err)
	}
	for _, tk := range g.Tasks {
		res.OldDataFiles = append(res.OldDataFiles, tk.File)
		// A deletion vector names one data file: it goes with it.
		res.SafeDeletionVectors = append(res.SafeDeletionVectors, tk.DeletionVectorFiles...)
	}
	return res, newRowMap(tbl, rd, res.NewDataFiles), nil
}

// compactionOut returns how cdcsync's writer writes the rows of group g
// (with their lineage when lineage is set) and the group's partition; nil
// when iceberg-go's must: a table with a sort order (iceberg-go sorts each
// batch), files of an older partition spec (their rows may belong to
// several partitions of the current one), or a table cdcsync has no
// writer for.
func (t *Table) compactionOut(tbl *table.Table, g table.CompactionTaskGroup, lineage bool) (*fileOut, partitionRecord, error) {
	out := t.partFile
	current := tbl.Metadata().PartitionSpec()
	if out == nil || len(g.Tasks) == 0 || !tbl.SortOrder().IsUnsorted() || current.ID() != out.part.spec.ID() {
		return nil, nil, nil
	}
	key := partitionKey(g.Tasks[0].File)
	for _, tk := range g.Tasks {
		if int(tk.File.SpecID()) != out.part.spec.ID() || partitionKey(tk.File) != key {
			return nil, nil, nil
		}
	}
	values, err := partitionTuple(tbl.Metadata(), g.Tasks[0].File)
	if err != nil {
		return nil, nil, err
	}
	if lineage {
		if out, err = withLineage(out, t.Schema, tbl.Metadata().Properties()); err != nil {
			return nil, nil, err
		}
	}
	return out, values, nil
}

// sameTypes says whether batches of schema got can be written as want:
// the same field names, types and nullability, in order.
func sameTypes(got, want *arrow.Schema) bool {
	if got.NumFields() != want.NumFields() {
		return false
	}
	for i, g := range got.Fields() {
		w := want.Field(i)
		if g.Name != w.Name || g.Nullable != w.Nullable || !arrow.TypeEqual(g.Type, w.Type) {
			return false
		}
	}
	return true
}

// writeCompacted writes the rows rd yields into files of out in the
// partition values, rolling to a new file once one holds target bytes
// (the table's write.target-file-size-bytes when 0) after a batch, in row
// groups of at most rewriteRowGroupRows rows. It releases each batch once written, so a
// pooled reader's buffers go back to the pool. On an error nothing it
// wrote is left behind.
func (t *Table) writeCompacted(ctx context.Context, tbl *table.Table, out *fileOut, values partitionRecord, rd *liveReader, target int64) (files []iceberg.DataFile, err error) {
	w, err := t.newFileWriter(ctx, tbl, out)
	if err != nil {
		return nil, err
	}
	if target > 0 {
		w.target = target
	}
	partPath := ""
	if w.part.partitioned() {
		partPath = w.part.spec.PartitionToPath(values, w.part.schema)
	}
	select {
	case w.slots <- struct{}{}: // one file open at a time
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-w.slots }()
	// The next batches are read while one is written, as iceberg-go's
	// writer does: reading and encoding each take a core.
	batches, stopReading := readAhead(rd.records)
	defer stopReading()
	var f *openFile
	defer func() {
		if f != nil {
			f.abort(w.fs)
		}
		if err != nil {
			t.removeFiles(ctx, tbl, files)
			files = nil
		}
	}()
	var groupRows int64
	for b := range batches {
		rec := b.rec
		if b.err != nil {
			return files, b.err
		}
		if f == nil {
			if f, err = openParquet(w.fs, w.newPath(0, partPath), out.layout, w.props); err != nil {
				rec.Release()
				return files, err
			}
			groupRows = 0
		}
		n := rec.NumRows()
		as := array.NewRecordBatch(out.layout.schema, rec.Columns(), n)
		err = f.pq.WriteBuffered(as)
		as.Release()
		rec.Release()
		if err != nil {
			return files, fmt.Errorf("write %s: %w", f.path, err)
		}
		groupRows += n
		switch {
		case f.size.n+f.pq.RowGroupTotalCompressedBytes() >= w.target:
			df, err := w.close(f, values) // writes out the row group
			if err != nil {
				return files, err // f is removed by abort
			}
			f = nil
			files = append(files, df)
		case groupRows >= rewriteRowGroupRows:
			f.pq.NewBufferedRowGroup() // writes out the full one
			groupRows = 0
		}
	}
	if f != nil {
		df, err := w.close(f, values)
		if err != nil {
			return files, err
		}
		f = nil
		files = append(files, df)
	}
	return files, nil
}

// readBatch is a batch of a reader, or its error.
type readBatch struct {
	rec arrow.RecordBatch
	err error
}

// readAhead iterates recs in a goroutine, up to rewriteQueuedBatches
// batches ahead of the caller, who owns (and releases) each batch it
// receives. The channel closes after recs ends or yields an error. The
// caller must call done when it stops receiving: it stops the goroutine
// and releases the batches queued that nobody took.
func readAhead(recs iter.Seq2[arrow.RecordBatch, error]) (batches <-chan readBatch, done func()) {
	ch := make(chan readBatch, rewriteQueuedBatches)
	stop := make(chan struct{})
	go func() {
		defer close(ch)
		for rec, err := range recs {
			select {
			case ch <- readBatch{rec, err}:
				if err != nil {
					return
				}
			case <-stop:
				return // recs releases rec: the loop stopped it
			}
		}
	}()
	return ch, func() {
		close(stop)
		for b := range ch {
			if b.rec != nil {
				b.rec.Release()
			}
		}
	}
}

// liveReader streams the live rows of a compaction group's data files.
type liveReader struct {
	schema  *arrow.Schema
	records iter.Seq2[arrow.RecordBatch, error]
	handed  int64 // rows yielded so far
	// read holds, for each file read whole, the ordinal (among the rows
	// yielded) of its first row and the positions dropped by position.
	read map[string]readFile
	// between, when set, is asked before each file after the first: true
	// stops the reading there, and the files not read are not in read.
	between func() bool
}

// readLive reads the data files of g newest first, without the rows that
// the group's position deletes, deletion vectors or equality deletes (on
// the primary key) delete; see rewriteGroup. Every task must be a whole
// file. Equality deletes need that order: the keys they delete are
// gathered file after file, and a delete that applies to a file applies
// to every older one. Without them, oldestFirst reads the oldest first
// (a run that stops early, rd.between, leaves the newest files).
//
// With lineage, each row also carries its _row_id and
// _last_updated_sequence_number: read from the file where it has them,
// else inherited from the file's first row id and data sequence number
// (every task must have both), as the v3 spec defines them.
func readLive(ctx context.Context, tbl *table.Table, g table.CompactionTaskGroup, shared *sharedDeletes, lineage, oldestFirst bool, mem memory.Allocator) (*liveReader, error) {
	keyIDs := tbl.Schema().IdentifierFieldIDs
	for _, tk := range g.Tasks {
		for _, d := range tk.EqualityDeleteFiles {
			if !sameFields(d.EqualityFieldIDs(), keyIDs) {
				return nil, errNoKeyFilter
			}
		}
	}
	keyNames, err := identifierNames(tbl.Schema())
	if err != nil {
		return nil, err
	}
	tasks := slices.Clone(g.Tasks)
	slices.SortStableFunc(tasks, func(x, y table.FileScanTask) int { return cmp.Compare(seqOf(&y), seqOf(&x)) }) // newest first
	if oldestFirst && !slices.ContainsFunc(tasks, func(tk table.FileScanTask) bool { return len(tk.EqualityDeleteFiles) > 0 }) {
		slices.Reverse(tasks)
	}

	schema, err := readSchema(ctx, tbl, tasks[0])
	if err != nil {
		return nil, err
	}
	var lin *lineageSchema
	if lineage {
		if lin, err = newLineageSchema(tbl, schema); err != nil {
			return nil, err
		}
	}
	keyCols := make([]int, len(keyNames))
	for i, name := range keyNames {
		idx := schema.FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("compaction: key column %q is not in the scan's schema", name)
		}
		keyCols[i] = idx[0]
		if !keySetEncodes(schema.Field(idx[0]).Type) {
			return nil, errNoKeyFilter
		}
	}

	deleted := newKeySet()
	loaded := map[string]bool{}
	pos := shared.positions()
	if pos == nil {
		pos = newPosDeletes([]table.CompactionTaskGroup{g})
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	rd := &liveReader{schema: schema, read: map[string]readFile{}}
	if lin != nil {
		rd.schema = lin.out
	}
	rd.records = func(yield func(arrow.RecordBatch, error) bool) {
		if err := pos.prefetchDVs(ctx, fsys, tasks); err != nil {
			yield(nil, err)
			return
		}
		for i, tk := range tasks {
			if i > 0 && rd.between != nil && rd.between() {
				return // every file read so far was read whole
			}
			if err := pos.load(ctx, fsys, tk.DeleteFiles); err != nil {
				yield(nil, err)
				return
			}
			if err := pos.loadDVs(fsys, tk.DeletionVectorFiles); err != nil {
				yield(nil, err)
				return
			}
			gone := pos.of(tk.File.FilePath())
			first := rd.handed
			for _, d := range tk.EqualityDeleteFiles {
				if loaded[d.FilePath()] {
					continue
				}
				loaded[d.FilePath()] = true
				if shared.holds(d) {
					set, err := shared.get(ctx, tbl, d, keyNames)
					if err != nil {
						yield(nil, err)
						return
					}
					deleted.also = append(deleted.also, set)
					continue
				}
				if err := deleted.load(ctx, tbl, d, keyNames); err != nil {
					yield(nil, err)
					return
				}
			}
			plain := tk
			plain.EqualityDeleteFiles, plain.DeleteFiles, plain.DeletionVectorFiles = nil, nil, nil
			var recs iter.Seq2[arrow.RecordBatch, error]
			if lin != nil {
				recs, err = lin.read(ctx, tbl, fsys, plain, mem)
			} else {
				recs, err = readTask(ctx, tbl, fsys, plain, schema, mem)
			}
			if err != nil {
				yield(nil, fmt.Errorf("read %s: %w", tk.File.FilePath(), err))
				return
			}
			var off int64 // position of rec's first row in the file
			for rec, err := range recs {
				if err != nil {
					yield(nil, fmt.Errorf("read %s: %w", tk.File.FilePath(), err))
					return
				}
				n := rec.NumRows()
				if lin != nil {
					// Before any row is dropped: a row's _row_id comes
					// from its position in the file.
					if rec, err = lin.fill(rec, plain, off); err != nil {
						yield(nil, fmt.Errorf("read %s: %w", tk.File.FilePath(), err))
						return
					}
				}
				cur, err := filterPositions(ctx, rec, off, gone)
				off += n
				rec.Release()
				if err != nil {
					yield(nil, err)
					return
				}
				if cur == nil {
					continue
				}
				live, err := deleted.filter(ctx, cur, keyCols)
				cur.Release()
				if err != nil {
					yield(nil, err)
					return
				}
				if live == nil {
					continue
				}
				rd.handed += live.NumRows()
				if !yield(live, nil) {
					live.Release()
					return
				}
			}
			if off != tk.File.Count() {
				// Positions count from the file's first row: a reader
				// that skipped rows would make them wrong.
				yield(nil, fmt.Errorf("compaction read %d rows of %s, whose manifest entry says %d", off, tk.File.FilePath(), tk.File.Count()))
				return
			}
			// Rows dropped by an equality delete too: where the others
			// went is not known.
			exact := rd.handed-first == off-int64(len(gone))
			rd.read[tk.File.FilePath()] = readFile{first: first, gone: slices.Clone(gone), exact: exact}
		}
	}
	return rd, nil
}

// readTask reads the rows of tk, a whole data file without deletes, as
// schema (the scan's) in batches of rewriteBatchRows. A file whose columns
// are the scan's (the same names, field ids and types, in order: written
// since the last schema change) is read with a Parquet reader that holds a
// page of one column at a time; iceberg-go's reader holds every column
// chunk of a row group whole, read in parallel, which made up most of the
// steady state's memory peak when the compaction of a large file ran next
// to epoch commits. Any other file is read through iceberg-go, which
// projects it onto the table's schema.
func readTask(ctx context.Context, tbl *table.Table, fsys icebergio.IO, tk table.FileScanTask, schema *arrow.Schema, mem memory.Allocator) (iter.Seq2[arrow.RecordBatch, error], error) {
	pr, _, err := openPlainReader(fsys, tk.File.FilePath(), mem, columnsForm{schema, tbl.Schema()})
	if err != nil {
		return nil, err
	}
	if pr == nil {
		_, recs, err := tbl.Scan(table.WithArrowBatchSize(rewriteBatchRows)).ReadTasks(ctx, []table.FileScanTask{tk})
		return recs, err
	}
	return plainRecords(ctx, pr, schema), nil
}

// plainRecords reads every row of pr's file as schema, whose columns are
// the file's, and closes pr when done.
func plainRecords(ctx context.Context, pr *parquetReader, schema *arrow.Schema) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		defer pr.close()
		rr, err := pr.fr.GetRecordReader(ctx, nil, nil)
		if err != nil {
			yield(nil, err)
			return
		}
		defer rr.Release()
		for rr.Next() {
			rec := rr.RecordBatch()
			out := array.NewRecordBatch(schema, rec.Columns(), rec.NumRows())
			if !yield(out, nil) {
				return
			}
		}
		if err := rr.Err(); err != nil {
			yield(nil, err)
		}
	}
}

// columnsForm is a set of columns a data file may have: an Iceberg schema
// and its Arrow form.
type columnsForm struct {
	arrow *arrow.Schema
	ice   *iceberg.Schema
}

// openPlainReader opens the Parquet file at path for readTask, with the
// first of forms whose columns are the file's; it returns nil when none
// is.
func openPlainReader(fsys icebergio.IO, path string, mem memory.Allocator, forms ...columnsForm) (*parquetReader, *arrow.Schema, error) {
	// A column's stream buffers min(1 MiB, its chunk) and grows to hold a
	// larger page, so it never holds more than the unbuffered reader's
	// whole chunk; on object storage each refill is one ranged read.
	props := parquet.NewReaderProperties(memory.DefaultAllocator)
	props.BufferedStreamEnabled = true
	props.BufferSize = 1 << 20
	pr, err := openParquetReader(fsys, path, rewriteBatchRows, mem, props)
	if err != nil {
		return nil, nil, err
	}
	if fileSchema, err := pr.fr.Schema(); err == nil {
		for _, f := range forms {
			if sameColumns(fileSchema, f.arrow, f.ice) {
				return pr, f.arrow, nil
			}
		}
	}
	pr.close()
	return nil, nil, nil
}

// sameColumns says whether a file's Arrow schema has the columns of want,
// the Arrow form of ice: the same names, field ids and types, in order.
func sameColumns(got, want *arrow.Schema, ice *iceberg.Schema) bool {
	if got.NumFields() != want.NumFields() || ice.NumFields() != want.NumFields() {
		return false
	}
	for i, g := range got.Fields() {
		w, f := want.Field(i), ice.Field(i)
		if _, nested := g.Type.(arrow.NestedType); nested {
			return false // the field ids inside are not compared
		}
		id, _ := g.Metadata.GetValue("PARQUET:field_id")
		if g.Name != w.Name || f.Name != w.Name || id != strconv.Itoa(f.ID) || g.Nullable != w.Nullable || !arrow.TypeEqual(g.Type, w.Type) {
			return false
		}
	}
	return true
}

// identifierNames returns the names of the schema's identifier fields, the
// primary key the equality deletes are on.
func identifierNames(sc *iceberg.Schema) ([]string, error) {
	var names []string
	for _, id := range sc.IdentifierFieldIDs {
		f, ok := sc.FindFieldByID(id)
		if !ok {
			return nil, fmt.Errorf("compaction: identifier field %d is not in the schema", id)
		}
		names = append(names, f.Name)
	}
	if len(names) == 0 {
		return nil, errNoKeyFilter
	}
	return names, nil
}

// readSchema is the Arrow schema a full scan of tk reads, which is also what
// the rewritten files are written with.
func readSchema(ctx context.Context, tbl *table.Table, tk table.FileScanTask) (*arrow.Schema, error) {
	tk.EqualityDeleteFiles = nil
	sc, recs, err := tbl.Scan().ReadTasks(ctx, []table.FileScanTask{tk})
	if err != nil {
		return nil, err
	}
	_ = recs // not iterated: nothing is read
	return sc, nil
}

// keySet holds encoded primary keys.
type keySet struct {
	keys map[string]struct{}
	also []*keySet // further sets a key may be in (shared, read only)
	buf  []byte
}

// has says whether the encoded key is in the set or one of its also sets.
func (s *keySet) has(k []byte) bool {
	if _, ok := s.keys[string(k)]; ok {
		return true
	}
	for _, o := range s.also {
		if _, ok := o.keys[string(k)]; ok {
			return true
		}
	}
	return false
}

// empty says whether no key is in the set or its also sets.
func (s *keySet) empty() bool {
	if len(s.keys) > 0 {
		return false
	}
	for _, o := range s.also {
		if len(o.keys) > 0 {
			return false
		}
	}
	return true
}

// sharedDeletes are the key sets of a compaction's global delete files,
// each read once and shared by the groups it applies to.
type sharedDeletes struct {
	scope *deleteScope
	sets  map[string]*keySet
	pos   *posDeletes // the position deletes of the run's groups
}

// positions returns the run's position deletes, nil for no shared state.
func (s *sharedDeletes) positions() *posDeletes {
	if s == nil {
		return nil
	}
	return s.pos
}

// posDeletes holds the rows that position delete files delete from the
// data files a compaction rewrites or a key index rebuild reads (want),
// each delete file read once however many data files it applies to.
type posDeletes struct {
	want   map[string]bool
	read   map[string]bool
	rows   map[string][]int64
	sorted map[string]bool
	reads  int      // delete files and deletion vectors read
	dvs    *dvCache // deletion vectors the process wrote (nil: read them all)
}

func newPosDeletes(groups []table.CompactionTaskGroup) *posDeletes {
	p := &posDeletes{want: map[string]bool{}, read: map[string]bool{}, rows: map[string][]int64{}, sorted: map[string]bool{}}
	for _, g := range groups {
		for _, tk := range g.Tasks {
			p.want[tk.File.FilePath()] = true
		}
	}
	return p
}

// load reads the delete files not read yet. A delete file that names a
// data file applies to it (it was written after the file, so its sequence
// number is not lower), and planning gives it to that file's task too.
func (p *posDeletes) load(ctx context.Context, fsys icebergio.IO, dels []iceberg.DataFile) error {
	for _, d := range dels {
		if p.read[d.FilePath()] {
			continue
		}
		p.read[d.FilePath()] = true
		p.reads++
		if err := eachPositionDelete(ctx, fsys, d, func(path string, pos int64) bool {
			if p.want[path] {
				p.rows[path] = append(p.rows[path], pos)
				p.sorted[path] = false
			}
			return true
		}); err != nil {
			return fmt.Errorf("read the position deletes %s: %w", d.FilePath(), err)
		}
	}
	return nil
}

// loadDVs reads the deletion vectors not read yet.
func (p *posDeletes) loadDVs(fsys icebergio.IO, dvs []iceberg.DataFile) error {
	for _, d := range dvs {
		key := dvKey(d)
		if p.read[key] {
			continue
		}
		p.read[key] = true
		p.reads++
		if err := eachDVDelete(fsys, p.dvs, d, func(path string, pos int64) bool {
			if p.want[path] {
				p.rows[path] = append(p.rows[path], pos)
				p.sorted[path] = false
			}
			return true
		}); err != nil {
			return err
		}
	}
	return nil
}

// prefetchDVs reads the deletion vectors of tasks that loadDVs would read
// one at a time, each Puffin file once and several files at once: on S3
// each read is a request, and a compaction of a finely partitioned table
// needs thousands.
func (p *posDeletes) prefetchDVs(ctx context.Context, fsys icebergio.IO, tasks []table.FileScanTask) error {
	var toRead dvsByFile
	queued := map[string]bool{}
	for _, tk := range tasks {
		for _, d := range tk.DeletionVectorFiles {
			key := dvKey(d)
			if p.read[key] || queued[key] || d.ContentOffset() == nil || d.ReferencedDataFile() == nil || p.dvs.get(d) != nil {
				continue // read, or read by loadDVs (from memory, or through the footer)
			}
			queued[key] = true
			toRead.add(d)
		}
	}
	return toRead.read(ctx, fsys, func(d iceberg.DataFile, bm *dv.RoaringPositionBitmap) {
		p.read[dvKey(d)] = true
		p.reads++
		if ref := *d.ReferencedDataFile(); p.want[ref] {
			for pos := range bm.Positions() {
				p.rows[ref] = append(p.rows[ref], int64(pos))
			}
			p.sorted[ref] = false
		}
	})
}

// dvKey names one deletion vector: a Puffin file holds many.
func dvKey(d iceberg.DataFile) string {
	if off := d.ContentOffset(); off != nil {
		return fmt.Sprintf("%s@%d", d.FilePath(), *off)
	}
	return d.FilePath()
}

// of returns the deleted positions of the data file at path, sorted and
// without repeats.
func (p *posDeletes) of(path string) []int64 {
	rows := p.rows[path]
	if !p.sorted[path] {
		slices.Sort(rows)
		rows = slices.Compact(rows)
		p.rows[path], p.sorted[path] = rows, true
	}
	return rows
}

// filterPositions returns rec, whose first row is at position off of its
// file, without the rows at the positions of gone (sorted): rec itself
// (retained) when none is there, nil when all are.
func filterPositions(ctx context.Context, rec arrow.RecordBatch, off int64, gone []int64) (arrow.RecordBatch, error) {
	n := rec.NumRows()
	i, _ := slices.BinarySearch(gone, off)
	j, _ := slices.BinarySearch(gone, off+n)
	switch {
	case i == j:
		rec.Retain()
		return rec, nil
	case int64(j-i) == n:
		return nil, nil
	}
	mask := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer mask.Release()
	mask.Reserve(int(n))
	next := i
	for row := off; row < off+n; row++ {
		drop := next < j && gone[next] == row
		if drop {
			next++
		}
		mask.UnsafeAppend(!drop)
	}
	m := mask.NewArray()
	defer m.Release()
	out, err := compute.FilterRecordBatch(ctx, rec, m, compute.DefaultFilterOptions())
	if err != nil {
		return nil, fmt.Errorf("compaction: drop rows deleted by position: %w", err)
	}
	return out, nil
}

func newSharedDeletes(scope *deleteScope) *sharedDeletes {
	return &sharedDeletes{scope: scope, sets: map[string]*keySet{}}
}

// holds says whether d is a global delete file, whose keys are shared.
func (s *sharedDeletes) holds(d iceberg.DataFile) bool {
	return s != nil && s.scope.global[d.SpecID()]
}

// get returns the keys of d, reading them the first time.
func (s *sharedDeletes) get(ctx context.Context, tbl *table.Table, d iceberg.DataFile, keyNames []string) (*keySet, error) {
	if set, ok := s.sets[d.FilePath()]; ok {
		return set, nil
	}
	set := newKeySet()
	if err := set.load(ctx, tbl, d, keyNames); err != nil {
		return nil, err
	}
	s.sets[d.FilePath()] = set
	return set, nil
}

func newKeySet() *keySet { return &keySet{keys: map[string]struct{}{}} }

// load adds the keys of an equality delete file, read like a data file of
// the table with only the key columns projected (so that a key column's
// type promotion applies to it as to the data files).
func (s *keySet) load(ctx context.Context, tbl *table.Table, d iceberg.DataFile, keyNames []string) error {
	task := table.FileScanTask{File: d, Start: 0, Length: d.FileSizeBytes()}
	_, recs, err := tbl.Scan(table.WithSelectedFields(keyNames...)).ReadTasks(ctx, []table.FileScanTask{task})
	if err != nil {
		return fmt.Errorf("read the equality deletes %s: %w", d.FilePath(), err)
	}
	cols := make([]int, len(keyNames))
	for rec, err := range recs {
		if err != nil {
			return fmt.Errorf("read the equality deletes %s: %w", d.FilePath(), err)
		}
		for i, name := range keyNames {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) != 1 {
				rec.Release()
				return fmt.Errorf("the equality deletes %s have no column %q", d.FilePath(), name)
			}
			cols[i] = idx[0]
		}
		for row := 0; row < int(rec.NumRows()); row++ {
			b, ok := s.encode(rec, cols, row)
			if !ok {
				rec.Release()
				return fmt.Errorf("the equality deletes %s: a key column has an unexpected type", d.FilePath())
			}
			if _, dup := s.keys[string(b)]; !dup {
				s.keys[string(b)] = struct{}{}
			}
		}
		rec.Release()
	}
	return nil
}

func sameFields(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	as, bs := slices.Clone(a), slices.Clone(b)
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(as, bs)
}

// filter returns rec without the rows whose key is in the set: rec itself
// (retained) when none is, nil when all are.
func (s *keySet) filter(ctx context.Context, rec arrow.RecordBatch, keyCols []int) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	if s.empty() || n == 0 {
		if n == 0 {
			return nil, nil
		}
		rec.Retain()
		return rec, nil
	}
	mask := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer mask.Release()
	mask.Reserve(n)
	kept := 0
	for row := 0; row < n; row++ {
		b, ok := s.encode(rec, keyCols, row)
		if !ok {
			return nil, errors.New("compaction: a key column has an unexpected type")
		}
		gone := s.has(b)
		mask.UnsafeAppend(!gone)
		if !gone {
			kept++
		}
	}
	switch kept {
	case 0:
		return nil, nil
	case n:
		rec.Retain()
		return rec, nil
	}
	m := mask.NewArray()
	defer m.Release()
	out, err := compute.FilterRecordBatch(ctx, rec, m, compute.DefaultFilterOptions())
	if err != nil {
		return nil, fmt.Errorf("compaction: drop deleted rows: %w", err)
	}
	return out, nil
}

// keySetEncodes reports whether encode handles a key column of type t.
func keySetEncodes(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT32, arrow.INT64, arrow.DATE32, arrow.TIMESTAMP, arrow.TIME64, arrow.STRING, arrow.LARGE_STRING,
		arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY, arrow.DECIMAL128, arrow.FLOAT32, arrow.FLOAT64, arrow.BOOL:
		return true
	}
	return false
}

// encode writes row's key into s.buf: each column's value in a fixed width,
// or length-prefixed for strings and binaries, after a null marker. It is
// false for a column type it does not know.
func (s *keySet) encode(rec arrow.RecordBatch, cols []int, row int) ([]byte, bool) {
	b := s.buf[:0]
	for _, c := range cols {
		col := rec.Column(c)
		if col.IsNull(row) {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		switch a := col.(type) {
		case *array.Int32:
			b = binary.LittleEndian.AppendUint32(b, uint32(a.Value(row)))
		case *array.Int64:
			b = binary.LittleEndian.AppendUint64(b, uint64(a.Value(row)))
		case *array.Date32:
			b = binary.LittleEndian.AppendUint32(b, uint32(a.Value(row)))
		case *array.Timestamp:
			b = binary.LittleEndian.AppendUint64(b, uint64(a.Value(row)))
		case *array.Time64:
			b = binary.LittleEndian.AppendUint64(b, uint64(a.Value(row)))
		case *array.Float32:
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(a.Value(row)))
		case *array.Float64:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(a.Value(row)))
		case *array.Boolean:
			if a.Value(row) {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		case *array.Decimal128:
			v := a.Value(row)
			b = binary.LittleEndian.AppendUint64(b, v.LowBits())
			b = binary.LittleEndian.AppendUint64(b, uint64(v.HighBits()))
		case *array.String:
			b = appendSized(b, a.Value(row))
		case *array.LargeString:
			b = appendSized(b, a.Value(row))
		case *array.Binary:
			b = appendSized(b, a.Value(row))
		case *array.LargeBinary:
			b = appendSized(b, a.Value(row))
		case *array.FixedSizeBinary:
			b = append(b, a.Value(row)...)
		default:
			return nil, false
		}
	}
	s.buf = b
	return b, true
}

// appendSized appends v after its length, so that concatenated values
// cannot run into each other.
func appendSized[T string | []byte](b []byte, v T) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}
