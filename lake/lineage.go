package lake

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
)

// Row lineage (format v3, dv mode): every row has a _row_id, unique in the
// table and kept for life, and the _last_updated_sequence_number of the
// commit that last changed it. A file an epoch writes holds neither: its
// rows inherit them, the _row_id from the file's first row id (assigned
// when the commit writes its manifest list) plus the row's position, the
// sequence number from the file's. A rewrite moves rows to other positions
// of other files, so it writes both into the new files as columns, which
// readers take before inheriting (the spec's materialized lineage).

// lineageSchema reads a v3 table's rows with their lineage for a rewrite.
type lineageSchema struct {
	plain *arrow.Schema   // the table's columns, as a scan reads them
	out   *arrow.Schema   // plain's, then _row_id and _last_updated_sequence_number, with field ids
	ice   *iceberg.Schema // the table's schema with the two lineage fields
}

// newLineageSchema returns the lineage form of read, the Arrow schema a
// scan of tbl reads; errNoKeyFilter when the two do not line up (the group
// is then left to iceberg-go).
func newLineageSchema(tbl *table.Table, read *arrow.Schema) (*lineageSchema, error) {
	ice := iceberg.SchemaWithRowLineage(tbl.Schema())
	out, err := table.SchemaToArrowSchemaWithOptions(ice, table.ArrowSchemaOptions{IncludeFieldIDs: true, TableProperties: tbl.Metadata().Properties()})
	if err != nil {
		return nil, fmt.Errorf("compaction: the row lineage schema: %w", err)
	}
	n := read.NumFields()
	if out.NumFields() != n+2 || fieldID(out.Field(n)) != iceberg.RowIDFieldID || fieldID(out.Field(n+1)) != iceberg.LastUpdatedSequenceNumberFieldID {
		return nil, errNoKeyFilter
	}
	for i := range n {
		if out.Field(i).Name != read.Field(i).Name || !arrow.TypeEqual(out.Field(i).Type, read.Field(i).Type) {
			return nil, errNoKeyFilter
		}
	}
	return &lineageSchema{plain: read, out: out, ice: ice}, nil
}

// lineageColumns are the row lineage columns, in the order a row holds
// them after the table's columns (rowsFromBatch, withLineage).
var lineageColumns = []string{iceberg.RowIDColumnName, iceberg.LastUpdatedSequenceNumberColumnName}

// withLineage returns out writing files that also hold each row's
// _row_id and _last_updated_sequence_number, fed by the two values a row
// holds past ts's columns (rowsFromBatch with lineageColumns). A rewrite
// that moves rows through the epoch writer (staged rows) keeps their
// lineage this way, as rewriteGroup does.
func withLineage(out *fileOut, ts *cdcsync.TableSchema, props iceberg.Properties) (*fileOut, error) {
	ice := iceberg.SchemaWithRowLineage(out.schema)
	as, err := table.SchemaToArrowSchemaWithOptions(ice, table.ArrowSchemaOptions{IncludeFieldIDs: true, TableProperties: props})
	if err != nil {
		return nil, fmt.Errorf("the row lineage schema of %s: %w", ts.ID, err)
	}
	n := out.layout.schema.NumFields()
	if as.NumFields() != n+2 || fieldID(as.Field(n)) != iceberg.RowIDFieldID || fieldID(as.Field(n+1)) != iceberg.LastUpdatedSequenceNumberFieldID {
		return nil, fmt.Errorf("the row lineage schema of %s has %d fields, not its %d and the two of row lineage", ts.ID, as.NumFields(), n)
	}
	l := *out.layout
	l.schema = arrow.NewSchema(append(slices.Clone(l.schema.Fields()), as.Field(n), as.Field(n+1)), nil)
	l.cols = append(slices.Clone(l.cols), len(ts.Columns), len(ts.Columns)+1)
	o := *out
	o.layout, o.schema = &l, ice
	return &o, nil
}

func fieldID(f arrow.Field) int {
	v, _ := f.Metadata.GetValue("PARQUET:field_id")
	id, _ := strconv.Atoi(v)
	return id
}

// read reads the rows of tk, a whole data file without deletes, for fill
// to complete: with the plain reader when the file has the table's
// columns, with the lineage columns (a file a rewrite wrote) or without
// (an epoch's); any other file (an older schema) through iceberg-go's
// scan, which brings the lineage it holds.
func (l *lineageSchema) read(ctx context.Context, tbl *table.Table, fsys icebergio.IO, tk table.FileScanTask, mem memory.Allocator) (iter.Seq2[arrow.RecordBatch, error], error) {
	pr, as, err := openPlainReader(fsys, tk.File.FilePath(), mem, columnsForm{l.out, l.ice}, columnsForm{l.plain, tbl.Schema()})
	if err != nil {
		return nil, err
	}
	if pr != nil {
		return plainRecords(ctx, pr, as), nil
	}
	_, recs, err := tbl.Scan(table.WithArrowBatchSize(rewriteBatchRows), table.WithRowLineage()).ReadTasks(ctx, []table.FileScanTask{tk})
	return recs, err
}

// fill returns rec, the rows of tk from position off on, as out: the
// lineage a row's file holds, or else what it inherits. It releases rec.
func (l *lineageSchema) fill(rec arrow.RecordBatch, tk table.FileScanTask, off int64) (arrow.RecordBatch, error) {
	defer rec.Release()
	n, base := int(rec.NumRows()), l.plain.NumFields()
	first, seq := *tk.FirstRowID+off, *tk.DataSequenceNumber
	cols := rec.Columns()
	var held [2]arrow.Array
	switch len(cols) {
	case base:
	case base + 2:
		held[0], held[1] = cols[base], cols[base+1]
	default:
		return nil, fmt.Errorf("compaction: %s read with %d columns; the table has %d (and 2 of row lineage)", tk.File.FilePath(), len(cols), base)
	}
	rowID, err := inherited(held[0], n, func(k int) int64 { return first + int64(k) })
	if err != nil {
		return nil, err
	}
	defer rowID.Release()
	seqs, err := inherited(held[1], n, func(int) int64 { return seq })
	if err != nil {
		return nil, err
	}
	defer seqs.Release()
	return array.NewRecordBatch(l.out, append(cols[:base:base], rowID, seqs), int64(n)), nil
}

// inherited returns the lineage column held (nil: the file has none) with
// each null taken from value. The caller releases it.
func inherited(held arrow.Array, n int, value func(k int) int64) (arrow.Array, error) {
	var ints *array.Int64
	if held != nil {
		var ok bool
		if ints, ok = held.(*array.Int64); !ok {
			return nil, fmt.Errorf("compaction: a row lineage column is %s, not int64", held.DataType())
		}
		if ints.NullN() == 0 {
			ints.Retain()
			return ints, nil
		}
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(n)
	for k := range n {
		if ints != nil && ints.IsValid(k) {
			b.UnsafeAppend(ints.Value(k))
		} else {
			b.UnsafeAppend(value(k))
		}
	}
	return b.NewArray(), nil
}
