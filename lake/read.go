package lake

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
)

// ReadRows scans the table as of its current snapshot, applying every delete
// file, and returns canonical rows; limit <= 0 reads everything.
func (t *Table) ReadRows(ctx context.Context, limit int64) ([]cdcsync.Row, error) {
	ctx = t.scope(ctx)
	return ReadRows(ctx, t.current(), t.Schema, limit)
}

// ReadRows scans an Iceberg table mirrored from ts.
func ReadRows(ctx context.Context, tbl *table.Table, ts *cdcsync.TableSchema, limit int64) ([]cdcsync.Row, error) {
	if tbl.CurrentSnapshot() == nil {
		return nil, nil
	}
	var opts []table.ScanOption
	if limit > 0 {
		opts = append(opts, table.WithLimit(limit))
	}
	_, recs, err := tbl.Scan(opts...).ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", ts.ID, err)
	}
	var out []cdcsync.Row
	for rec, err := range recs {
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", ts.ID, err)
		}
		rows, err := rowsFromBatch(rec, ts)
		rec.Release()
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// SchemaFromIceberg describes an Iceberg table cdcsync wrote in the terms of
// its MySQL source, so it can be read without connecting to MySQL.
func SchemaFromIceberg(tbl *table.Table) (*cdcsync.TableSchema, error) {
	sc := tbl.Schema()
	ts := &cdcsync.TableSchema{ID: cdcsync.TableID{Database: tbl.Identifier()[0], Table: tbl.Identifier()[len(tbl.Identifier())-1]}}
	for _, f := range sc.Fields() {
		c := cdcsync.Column{Name: f.Name, Nullable: !f.Required}
		switch t := f.Type.(type) {
		case iceberg.Int32Type:
			c.Kind = cdcsync.KindInt32
		case iceberg.Int64Type:
			c.Kind = cdcsync.KindInt64
		case iceberg.DecimalType:
			c.Kind, c.Precision, c.Scale = cdcsync.KindDecimal, t.Precision(), t.Scale()
		case iceberg.Float32Type:
			c.Kind = cdcsync.KindFloat32
		case iceberg.Float64Type:
			c.Kind = cdcsync.KindFloat64
		case iceberg.StringType:
			c.Kind = cdcsync.KindString
		case iceberg.BinaryType:
			c.Kind = cdcsync.KindBinary
		case iceberg.DateType:
			c.Kind = cdcsync.KindDate
		case iceberg.TimestampType:
			c.Kind = cdcsync.KindTimestamp
		case iceberg.TimestampTzType:
			c.Kind = cdcsync.KindTimestampTZ
		case iceberg.BooleanType:
			c.Kind = cdcsync.KindBool
		default:
			return nil, fmt.Errorf("column %s has Iceberg type %s, which cdcsync does not write", f.Name, f.Type)
		}
		c.ColumnType = f.Type.String()
		ts.Columns = append(ts.Columns, c)
	}
	for _, id := range sc.IdentifierFieldIDs {
		name, _ := sc.FindColumnName(id)
		ts.PrimaryKey = append(ts.PrimaryKey, ts.ColumnIndex(name))
	}
	return ts, nil
}
