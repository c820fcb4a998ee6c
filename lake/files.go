package lake

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/cdcsync/cdcsync"
)

// This file writes an epoch's rows (final images, or the before images of
// its equality deletes) as Parquet files. It replaces iceberg-go's
// partitioned fanout writer for epoch commits, which keeps one open file
// per partition until the end and loses the rows of a partition whose file
// failed to open (its writer leaves the factory's map when its goroutine
// exits, so the error never reaches the caller: issue 22). Here the rows
// are grouped by partition first and each group is written whole, one file
// open per worker, with every error returned, and the files' row counts are
// checked against the rows handed over before anything is committed.

// fileOut is what one kind of file of a table holds.
type fileOut struct {
	layout  *rowLayout      // Arrow schema of the file and the row columns feeding it
	schema  *iceberg.Schema // Iceberg schema of the file's columns
	content iceberg.ManifestEntryContent
	eqIDs   []int        // equality field ids, for equality delete files
	part    *partitioner // the partition spec the files are written under
	// stage, on the data files of a partitioned table in position or dv
	// mode, is where the rows of a write spread over many partitions go
	// instead (staged.go).
	stage      *fileOut
	stageAbove int // tables[].stage_above
}

// partitioner computes the partition of a row under a spec.
type partitioner struct {
	spec   iceberg.PartitionSpec
	schema *iceberg.Schema // the table schema, for partition paths
	fields []partField
	table  *cdcsync.TableSchema
}

type partField struct {
	fieldID   int // the partition field's id
	col       int // the MySQL column of its source
	kind      cdcsync.Kind
	precision int
	scale     int
	transform iceberg.Transform
}

func newPartitioner(ts *cdcsync.TableSchema, sc *iceberg.Schema, spec iceberg.PartitionSpec) (*partitioner, error) {
	p := &partitioner{spec: spec, schema: sc, table: ts}
	for _, f := range spec.Fields() {
		name, ok := sc.FindColumnName(f.SourceID())
		if !ok {
			return nil, fmt.Errorf("partition field %s of %s: source field %d is not in the Iceberg schema", f.Name, ts.ID, f.SourceID())
		}
		col := ts.ColumnIndex(name)
		if col < 0 {
			return nil, fmt.Errorf("partition field %s of %s: column %s is not in the MySQL table", f.Name, ts.ID, name)
		}
		c := ts.Columns[col]
		p.fields = append(p.fields, partField{fieldID: f.FieldID, col: col, kind: c.Kind, precision: c.Precision, scale: c.Scale, transform: f.Transform})
	}
	return p, nil
}

// partitioned reports whether the spec has any field.
func (p *partitioner) partitioned() bool { return len(p.fields) > 0 }

// values returns the partition values of r, in spec field order, as the
// Go values iceberg-go records in manifests (nil for a null).
func (p *partitioner) values(r cdcsync.Row) ([]any, error) {
	out := make([]any, len(p.fields))
	for i, f := range p.fields {
		v := r[f.col]
		if v == nil {
			continue
		}
		lit, err := literalOf(v, f.kind, f.precision, f.scale)
		if err != nil {
			return nil, &ValueError{Column: p.table.Columns[f.col].Name, Value: cdcsync.ValueText(v), Key: p.table.KeyText(r), Err: err}
		}
		res := f.transform.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: lit})
		if res.Valid {
			out[i] = res.Val.Any()
		}
	}
	return out, nil
}

// literalOf converts a canonical value to the Iceberg literal of its column.
func literalOf(v any, k cdcsync.Kind, precision, scale int) (iceberg.Literal, error) {
	bad := func() (iceberg.Literal, error) {
		return nil, fmt.Errorf("value %v of Go type %T is not a canonical %s", v, v, k)
	}
	switch k {
	case cdcsync.KindInt32:
		if x, ok := v.(int32); ok {
			return iceberg.NewLiteral(x), nil
		}
	case cdcsync.KindInt64, cdcsync.KindTime:
		if x, ok := v.(int64); ok {
			return iceberg.NewLiteral(x), nil
		}
	case cdcsync.KindFloat32:
		if x, ok := v.(float32); ok {
			return iceberg.NewLiteral(x), nil
		}
	case cdcsync.KindFloat64:
		if x, ok := v.(float64); ok {
			return iceberg.NewLiteral(x), nil
		}
	case cdcsync.KindString:
		if x, ok := v.(string); ok {
			return iceberg.NewLiteral(x), nil
		}
	case cdcsync.KindBinary:
		if x, ok := v.([]byte); ok {
			return iceberg.NewLiteral(x), nil
		}
	case cdcsync.KindBool:
		if x, ok := v.(bool); ok {
			return iceberg.NewLiteral(x), nil
		}
	case cdcsync.KindDate:
		if x, ok := v.(int32); ok {
			return iceberg.NewLiteral(iceberg.Date(x)), nil
		}
	case cdcsync.KindTimestamp, cdcsync.KindTimestampTZ:
		if x, ok := v.(int64); ok {
			return iceberg.NewLiteral(iceberg.Timestamp(x)), nil
		}
	case cdcsync.KindDecimal:
		if s, ok := v.(string); ok {
			n, err := decimal128.FromString(s, int32(precision), int32(scale))
			if err != nil {
				return nil, fmt.Errorf("decimal %q does not fit decimal(%d,%d): %w", s, precision, scale, err)
			}
			return iceberg.NewLiteral(iceberg.Decimal{Val: n, Scale: scale}), nil
		}
	}
	return bad()
}

// partitionRecord is a partition tuple as iceberg-go's StructLike.
type partitionRecord []any

func (r partitionRecord) Size() int          { return len(r) }
func (r partitionRecord) Get(pos int) any    { return r[pos] }
func (r partitionRecord) Set(pos int, v any) { r[pos] = v }

// group is the rows of one partition, by index into the rows written.
type group struct {
	values partitionRecord
	rows   []int
}

// groupRows groups rows by partition, in the order partitions first appear.
func (p *partitioner) groupRows(rows []cdcsync.Row) ([]*group, error) {
	if !p.partitioned() {
		all := make([]int, len(rows))
		for i := range all {
			all[i] = i
		}
		return []*group{{rows: all}}, nil
	}
	byKey := map[string]*group{}
	var groups []*group
	var key []byte
	for i, r := range rows {
		vals, err := p.values(r)
		if err != nil {
			return nil, err
		}
		key = appendPartitionKey(key[:0], vals)
		g, ok := byKey[string(key)]
		if !ok {
			g = &group{values: vals}
			byKey[string(key)] = g
			groups = append(groups, g)
		}
		g.rows = append(g.rows, i)
	}
	return groups, nil
}

// appendPartitionKey encodes partition values so that two tuples encode
// equally exactly when they are the same partition (a null differs from
// every value, the types of one spec field never vary).
func appendPartitionKey(b []byte, vals []any) []byte {
	for _, v := range vals {
		switch x := v.(type) {
		case nil:
			b = append(b, 0)
		case []byte:
			b = appendSized(append(b, 1), x)
		case string:
			b = appendSized(append(b, 1), x)
		case int32: // bucket, year, month, hour
			b = strconv.AppendInt(append(b, 2), int64(x), 10)
		case iceberg.Date: // day
			b = strconv.AppendInt(append(b, 2), int64(x), 10)
		case int64:
			b = strconv.AppendInt(append(b, 2), x, 10)
		default:
			b = appendSized(append(b, 1), fmt.Sprint(x))
		}
	}
	return b
}

// fileWriter writes the files of one table commit.
type fileWriter struct {
	tbl     *table.Table
	tableID cdcsync.TableID
	part    *partitioner
	out     *fileOut
	slots   chan struct{} // the process's open-file budget
	fs      icebergio.WriteFileIO
	loc     table.LocationProvider
	target  int64 // roll to a new file at this many bytes
	props   *parquet.WriterProperties
	run     string // unique per write, in every file name
	files   atomic.Int64
}

// writeFiles writes rows as files of out's kind, grouped by partition, at
// most cap(slots) files open at a time, and returns them in partition
// order. The files must hold exactly len(rows) rows. When locs is not nil
// (len(rows) long), locs[i] is set to where rows[i] landed.
func (t *Table) writeFiles(ctx context.Context, tbl *table.Table, out *fileOut, rows []cdcsync.Row, locs []rowLoc) ([]iceberg.DataFile, error) {
	return t.writeSplit(ctx, tbl, out, rows, locs, func(groups []*group) ([]*group, *group) {
		if out.stage == nil {
			return groups, nil
		}
		return stageSparse(groups, out.stageAbove)
	}, nil)
}

// yieldBatch is the number of partition files a write that may yield
// writes between two looks at whether it should.
const yieldBatch = 32

// writeSplit is writeFiles with the choice of the partitions whose rows are
// staged (out.stage) made by split. When yield is set, the partition files
// are written yieldBatch at a time, and once yield returns true the rows of
// the partitions not written yet are staged instead.
func (t *Table) writeSplit(ctx context.Context, tbl *table.Table, out *fileOut, rows []cdcsync.Row, locs []rowLoc,
	split func([]*group) (kept []*group, staged *group), yield func() bool) ([]iceberg.DataFile, error) {
	groups, err := out.part.groupRows(rows)
	if err != nil {
		return nil, fmt.Errorf("partition the rows of %s: %w", t.ID, err)
	}
	groups, staged := split(groups)
	w, err := t.newFileWriter(ctx, tbl, out)
	if err != nil {
		return nil, err
	}
	var files []iceberg.DataFile
	for len(groups) > 0 {
		batch := groups
		if yield != nil {
			batch = groups[:min(len(groups), yieldBatch)]
		}
		groups = groups[len(batch):]
		more, err := w.writeGroups(ctx, batch, rows, locs)
		if err != nil {
			t.removeFiles(ctx, tbl, files)
			return nil, err
		}
		if locs != nil && len(files) > 0 {
			// writeGroups numbered the batch's files from 0.
			for _, g := range batch {
				for _, i := range g.rows {
					locs[i].file += int32(len(files))
				}
			}
		}
		files = append(files, more...)
		if len(groups) > 0 && yield != nil && yield() {
			if staged == nil {
				staged = &group{}
			}
			for _, g := range groups {
				staged.rows = append(staged.rows, g.rows...)
			}
			break
		}
	}
	if staged == nil {
		return files, nil
	}
	sw, err := t.newFileWriter(ctx, tbl, out.stage)
	if err == nil {
		var more []iceberg.DataFile
		if more, err = sw.writeGroups(ctx, []*group{staged}, rows, locs); err == nil {
			if locs != nil {
				for _, i := range staged.rows {
					locs[i].file += int32(len(files))
				}
			}
			return append(files, more...), nil
		}
	}
	t.removeFiles(ctx, tbl, files)
	return nil, err
}

// rowLoc is where a written row landed: the index of its file among the
// files of the write, and its position in that file.
type rowLoc struct {
	file int32
	pos  int64
}

// writeIO returns tbl's file IO, which must be able to write, and its
// location provider.
func (t *Table) writeIO(ctx context.Context, tbl *table.Table) (icebergio.WriteFileIO, table.LocationProvider, error) {
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
	return wfs, loc, nil
}

// newFileWriter prepares the writing of out's files to tbl.
func (t *Table) newFileWriter(ctx context.Context, tbl *table.Table, out *fileOut) (*fileWriter, error) {
	wfs, loc, err := t.writeIO(ctx, tbl)
	if err != nil {
		return nil, err
	}
	return &fileWriter{tbl: tbl, tableID: t.ID, part: out.part, out: out, slots: t.files, fs: wfs, loc: loc,
		target: int64(tbl.Properties().GetInt(table.WriteTargetFileSizeBytesKey, table.WriteTargetFileSizeBytesDefault)),
		props:  parquetProps(tbl.Properties(), out.layout),
		run:    uuid.NewString()}, nil
}

// writeGroups writes each group's rows as files of its partition; see
// writeFiles. On an error nothing written is left behind.
func (w *fileWriter) writeGroups(ctx context.Context, groups []*group, rows []cdcsync.Row, locs []rowLoc) ([]iceberg.DataFile, error) {
	perGroup := make([][]iceberg.DataFile, len(groups))
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(cap(w.slots))
	for i, g := range groups {
		eg.Go(func() error {
			files, err := w.writeGroup(gctx, i, g, rows, locs)
			perGroup[i] = files
			return err
		})
	}
	werr := eg.Wait()
	var files []iceberg.DataFile
	var want int64
	for gi, fs := range perGroup {
		if locs != nil && werr == nil {
			// writeGroup numbered the files of its group from 0.
			for _, i := range groups[gi].rows {
				locs[i].file += int32(len(files))
			}
		}
		files = append(files, fs...)
		want += int64(len(groups[gi].rows))
	}
	if werr == nil {
		if werr = checkRowCount(files, want); werr != nil {
			werr = fmt.Errorf("%s files of %s: %w", contentName(w.out.content), w.tableID, werr)
		}
	}
	if werr != nil {
		// No commit will reference what was written (a full disk, an
		// outage): remove it now rather than leave it to orphan cleanup.
		for _, f := range files {
			_ = w.fs.Remove(f.FilePath())
		}
		return nil, werr
	}
	return files, nil
}

// checkRowCount is the end-to-end guard on every write: the files must
// record exactly the rows handed to their writer, else nothing is committed.
func checkRowCount(files []iceberg.DataFile, want int64) error {
	var got int64
	for _, f := range files {
		got += f.Count()
	}
	if got != want {
		return fmt.Errorf("the %d files written hold %d rows but %d were handed to the writer; nothing was committed (a write error was lost)", len(files), got, want)
	}
	return nil
}

func contentName(c iceberg.ManifestEntryContent) string {
	switch c {
	case iceberg.EntryContentEqDeletes:
		return "equality delete"
	case iceberg.EntryContentPosDeletes:
		return "position delete"
	}
	return "data"
}

// writeGroup writes the rows of one partition, rolling to a new file at the
// target size; on an error it returns the files it completed (for removal)
// and removes the one it was writing. It holds one slot of the open-file
// budget while a file is open.
func (w *fileWriter) writeGroup(ctx context.Context, gi int, g *group, rows []cdcsync.Row, locs []rowLoc) ([]iceberg.DataFile, error) {
	select {
	case w.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-w.slots }()

	partPath := ""
	if w.part.partitioned() {
		partPath = w.part.spec.PartitionToPath(g.values, w.part.schema)
	}
	var files []iceberg.DataFile
	var f *openFile
	defer func() {
		if f != nil {
			f.abort(w.fs)
		}
	}()
	bb := newBatchBuilder(w.out.layout)
	defer bb.release()
	flush := func() error {
		rec := bb.flush()
		defer rec.Release()
		if err := f.pq.Write(rec); err != nil {
			return fmt.Errorf("write %s: %w", f.path, err)
		}
		return nil
	}
	var pos int64 // of the next row in f
	for n, i := range g.rows {
		if f == nil {
			pos = 0
			var err error
			if f, err = openParquet(w.fs, w.newPath(gi, partPath), w.out.layout, w.props); err != nil {
				return files, err
			}
		}
		if err := bb.add(rows[i]); err != nil {
			return files, fmt.Errorf("%s: %w", w.tableID, err)
		}
		if locs != nil {
			locs[i] = rowLoc{file: int32(len(files)), pos: pos}
		}
		pos++
		if bb.full() || n == len(g.rows)-1 {
			if err := flush(); err != nil {
				return files, err
			}
			if f.size.n >= w.target || n == len(g.rows)-1 {
				df, err := w.close(f, g.values)
				if err != nil {
					return files, err // f is removed by abort
				}
				f = nil
				files = append(files, df)
			}
		}
	}
	return files, nil
}

// newPath names a new file of the write's group gi in the partition
// directory partPath ("" for an unpartitioned table).
func (w *fileWriter) newPath(gi int, partPath string) string {
	name := fmt.Sprintf("%s-%05d-%d-%s.parquet", w.run, gi, w.files.Add(1), fileSuffix(w.out.content))
	if partPath != "" {
		name = partPath + "/" + name
	}
	return w.loc.NewDataLocation(name)
}

// writeBatchRows and writeBatchBytes bound the Arrow batches (and Parquet
// row groups) an epoch's rows are written in: the writer holds about three
// copies of a batch (Arrow, encoded pages, compressed), which for rows of
// large values (LONGBLOBs of megabytes) the row count alone does not bound.
// Rows of largeRowBytes and more are bounded tighter, to largeBatchBytes:
// arrow-go writes a page of up to 1,024 values before it looks at its
// size, so a batch of such rows is one page, held about six times over
// (Arrow, the page growing, compressed, zstd's history); with 16 MiB
// batches of LONGBLOBs of 2 MiB, the writer alone held about 100 MiB.
const (
	writeBatchRows  = 1 << 16
	writeBatchBytes = 16 << 20
	largeRowBytes   = 64 << 10
	largeBatchBytes = 4 << 20
)

func fileSuffix(c iceberg.ManifestEntryContent) string {
	if c == iceberg.EntryContentEqDeletes {
		return "eq-deletes"
	}
	return "data"
}

// close finishes f and describes it for the manifest.
func (w *fileWriter) close(f *openFile, values partitionRecord) (iceberg.DataFile, error) {
	if err := f.pq.Close(); err != nil { // closes the file too
		return nil, fmt.Errorf("finish %s: %w", f.path, err)
	}
	meta, err := f.pq.FileMetadata()
	if err != nil {
		return nil, fmt.Errorf("read back the footer of %s: %w", f.path, err)
	}
	pv := make(map[int]any, len(values))
	for i, v := range values {
		pv[w.part.fields[i].fieldID] = v
	}
	df, err := table.DataFileFromMetadata(table.DataFileArgs{
		Schema:           w.out.schema,
		Spec:             w.part.spec,
		Format:           iceberg.ParquetFile,
		Metadata:         meta,
		FilePath:         f.path,
		FileSize:         f.size.n,
		Content:          w.out.content,
		PartitionValues:  pv,
		Properties:       w.tbl.Properties(),
		EqualityFieldIDs: w.out.eqIDs,
		FormatVersion:    w.tbl.Metadata().Version(),
	})
	if err != nil {
		return nil, fmt.Errorf("describe %s for the manifest: %w", f.path, err)
	}
	return df, nil
}

// openFile is a Parquet file being written.
type openFile struct {
	path string
	file icebergio.FileWriter
	size *countingWriter
	pq   *pqarrow.FileWriter
}

func openParquet(fs icebergio.WriteFileIO, path string, l *rowLayout, props *parquet.WriterProperties) (*openFile, error) {
	fw, err := fs.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	cw := &countingWriter{w: fw, buf: bufio.NewWriterSize(fw, fileBufferBytes)}
	pq, err := pqarrow.NewFileWriter(l.schema, cw, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		fw.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	return &openFile{path: path, file: fw, size: cw, pq: pq}, nil
}

// abort releases a file that will not be finished; the object, if any was
// written, is an orphan that orphan cleanup removes.
// abort gives up a file that will not be committed: it is closed (which
// on S3 may still upload what was written) and removed.
func (f *openFile) abort(fs icebergio.WriteFileIO) {
	_ = f.file.Close()
	_ = fs.Remove(f.path)
}

// countingWriter counts the bytes of a file as they are written: the size
// recorded in the manifest. It buffers them: the Parquet writer writes each
// page and footer part on its own, and a small file of a finely partitioned
// table is dozens of writes, each a system call on a local warehouse.
type countingWriter struct {
	w interface {
		Write([]byte) (int, error)
		Close() error
	}
	buf *bufio.Writer
	n   int64
}

// fileBufferBytes is the write buffer of a file being written.
const fileBufferBytes = 64 << 10

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.buf.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Close() error {
	if err := c.buf.Flush(); err != nil {
		_ = c.w.Close()
		return err
	}
	return c.w.Close()
}

// parquetProps are the Parquet writer settings of a table: its compression
// codec and level (write.parquet.compression-codec and -level, set from
// the parquet configuration, table.go) and, as iceberg-go (and Iceberg
// Java) do, the cost-based dictionary fallback on every column, so that a
// column of distinct values is written plain rather than with a dictionary
// as large as itself. Columns of large values (largeValues) get no
// dictionary at all.
func parquetProps(p iceberg.Properties, l *rowLayout) *parquet.WriterProperties {
	codec := compress.Codecs.Zstd
	switch p.Get(table.ParquetCompressionKey, "zstd") {
	case "snappy":
		codec = compress.Codecs.Snappy
	case "gzip":
		codec = compress.Codecs.Gzip
	case "uncompressed":
		codec = compress.Codecs.Uncompressed
	case "lz4", "lz4raw", "lz4_raw":
		codec = compress.Codecs.Lz4Raw
	case "brotli":
		codec = compress.Codecs.Brotli
	}
	level := compress.DefaultCompressionLevel
	if v, err := strconv.Atoi(p[table.ParquetCompressionLevelKey]); err == nil && v != table.ParquetCompressionLevelDefault {
		level = v
	}
	opts := []parquet.WriterProperty{parquet.WithCompression(codec), parquet.WithCompressionLevel(level), parquet.WithStats(true)}
	for i, f := range l.schema.Fields() {
		if c := l.cols[i]; c < len(l.table.Columns) && largeValues(&l.table.Columns[c]) { // past them: row lineage
			opts = append(opts, parquet.WithDictionaryFor(f.Name, false))
			continue
		}
		opts = append(opts, parquet.WithDictionaryCostFallbackFor(f.Name, true))
	}
	return parquet.NewWriterProperties(opts...)
}

// largeValues says whether c is of a MySQL type whose values may be
// megabytes (MEDIUM and LONG BLOB and TEXT, JSON, spatial types) and are
// seldom repeated. Such a column is written without a dictionary: the
// writer would add every value of a batch to a dictionary, write it out
// as a dictionary page, then find it too large and write the batch again
// plain, holding the batch three more times for nothing (a batch of
// LONGBLOBs of 2 MiB peaked 50 MiB higher with it).
func largeValues(c *cdcsync.Column) bool {
	switch strings.ToLower(c.DataType) {
	case "mediumblob", "longblob", "mediumtext", "longtext", "json":
		return true
	}
	return c.Spatial()
}
