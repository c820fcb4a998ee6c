package lake

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/cdcsync/cdcsync"
)

// batchBuilder accumulates canonical rows into Arrow record batches laid
// out by a rowLayout.
type batchBuilder struct {
	layout *rowLayout
	b      *array.RecordBuilder
	n      int
	bytes  int // the rows' cdcsync.Row.MemSize
	large  int // the MemSize of rows of largeRowBytes and more
}

func newBatchBuilder(l *rowLayout) *batchBuilder {
	return &batchBuilder{layout: l, b: array.NewRecordBuilder(writeBuffers, l.schema)}
}

// ErrValue is wrapped by the error of a write that holds a value its
// Iceberg column cannot take (a decimal wider than the column, a value of
// another type). Retrying cannot cure it: the value must change, or the
// table stops (the pipeline stops just that table).
var ErrValue = errors.New("a value its Iceberg column cannot hold")

// ValueError names a value that its Iceberg column cannot take.
type ValueError struct {
	Column string
	Value  string // cut to 64 bytes
	Key    string // the row's primary key (cdcsync.TableSchema.KeyText)
	Err    error
}

func (e *ValueError) Error() string {
	return fmt.Sprintf("the row with primary key (%s) has a value the Iceberg column %s cannot hold: %s: %v", e.Key, e.Column, e.Value, e.Err)
}

func (e *ValueError) Unwrap() []error { return []error{ErrValue, e.Err} }

// add appends one row. Values must be the canonical Go types of their kind.
func (bb *batchBuilder) add(row cdcsync.Row) error {
	for i, col := range bb.layout.cols {
		if err := appendValue(bb.b.Field(i), row[col]); err != nil {
			return &ValueError{Column: bb.layout.schema.Field(i).Name, Value: cdcsync.ValueText(row[col]), Key: bb.layout.key(row), Err: err}
		}
	}
	bb.n++
	size := row.MemSize()
	bb.bytes += size
	if size >= largeRowBytes {
		bb.large += size
	}
	return nil
}

// full says whether the batch should be written out before another row is
// added: it holds writeBatchRows rows, writeBatchBytes bytes of rows or
// largeBatchBytes bytes of large rows.
func (bb *batchBuilder) full() bool {
	return bb.n >= writeBatchRows || bb.bytes >= writeBatchBytes || bb.large >= largeBatchBytes
}

// flush returns the rows added so far as a record batch and starts a new one.
func (bb *batchBuilder) flush() arrow.RecordBatch {
	bb.n, bb.bytes, bb.large = 0, 0, 0
	return bb.b.NewRecordBatch()
}

func (bb *batchBuilder) release() { bb.b.Release() }

func appendValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	ok := true
	switch b := b.(type) {
	case *array.Int32Builder:
		var x int32
		if x, ok = v.(int32); ok {
			b.Append(x)
		}
	case *array.Int64Builder:
		var x int64
		if x, ok = v.(int64); ok {
			b.Append(x)
		}
	case *array.Float32Builder:
		var x float32
		if x, ok = v.(float32); ok {
			b.Append(x)
		}
	case *array.Float64Builder:
		var x float64
		if x, ok = v.(float64); ok {
			b.Append(x)
		}
	case *array.StringBuilder:
		var x string
		if x, ok = v.(string); ok {
			b.Append(x)
		}
	case *array.LargeStringBuilder:
		var x string
		if x, ok = v.(string); ok {
			b.Append(x)
		}
	case *array.BinaryBuilder: // binary and large_binary
		var x []byte
		if x, ok = v.([]byte); ok {
			b.Append(x)
		}
	case *array.BooleanBuilder:
		var x bool
		if x, ok = v.(bool); ok {
			b.Append(x)
		}
	case *array.Date32Builder:
		var x int32
		if x, ok = v.(int32); ok {
			b.Append(arrow.Date32(x))
		}
	case *array.TimestampBuilder:
		var x int64
		if x, ok = v.(int64); ok {
			b.Append(arrow.Timestamp(x))
		}
	case *array.Decimal128Builder:
		var s string
		if s, ok = v.(string); ok {
			t := b.Type().(*arrow.Decimal128Type)
			n, fast := decimalFromCanonical(s, t.Precision, t.Scale)
			if !fast {
				var err error
				if n, err = decimal128.FromString(s, t.Precision, t.Scale); err != nil {
					return fmt.Errorf("decimal %q does not fit decimal(%d,%d): %w", s, t.Precision, t.Scale, err)
				}
			}
			b.Append(n)
		}
	default:
		return fmt.Errorf("no writer for Arrow type %s", b.Type())
	}
	if !ok {
		return fmt.Errorf("value %v of Go type %T does not match Arrow type %s", v, v, b.Type())
	}
	return nil
}

// decimalFromCanonical parses the canonical decimal text of cdcsync.KindDecimal
// ("-123.45": an optional minus, digits, and exactly scale fraction digits
// after a point when scale > 0) into its unscaled 128-bit integer, exactly and
// without math/big. It returns false for any other text, or a value with more
// than prec digits, and the caller falls back to decimal128.FromString, which
// reports the error. Profiles of the initial copy showed FromString (a
// big.Float parse per value) as the largest cost of building Arrow batches.
func decimalFromCanonical(s string, prec, scale int32) (decimal128.Num, bool) {
	neg := false
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	intPart, frac := s, ""
	if scale > 0 {
		i := len(s) - int(scale) - 1
		if i < 1 || s[i] != '.' {
			return decimal128.Num{}, false
		}
		intPart, frac = s[:i], s[i+1:]
	}
	if intPart == "" {
		return decimal128.Num{}, false
	}
	for len(intPart) > 1 && intPart[0] == '0' {
		intPart = intPart[1:]
	}
	digits := len(frac)
	if intPart != "0" {
		digits += len(intPart)
	}
	if digits > int(prec) || digits > 38 {
		return decimal128.Num{}, false
	}
	// Accumulate 18 digits at a time in a uint64, then fold into 128 bits.
	var n decimal128.Num
	var chunk uint64
	var chunkDigits int
	flush := func() {
		if chunkDigits == 0 {
			return
		}
		n = n.Mul(decimal128.GetScaleMultiplier(chunkDigits)).Add(decimal128.FromU64(chunk))
		chunk, chunkDigits = 0, 0
	}
	for _, part := range [2]string{intPart, frac} {
		for i := 0; i < len(part); i++ {
			c := part[i]
			if c < '0' || c > '9' {
				return decimal128.Num{}, false
			}
			chunk = chunk*10 + uint64(c-'0')
			chunkDigits++
			if chunkDigits == 18 {
				flush()
			}
		}
	}
	flush()
	if neg {
		n = n.Negate()
	}
	return n, true
}

// rowsFromBatch converts a record batch read from Iceberg back to canonical
// rows of ts; fields map to row indexes by name. The fields named extra
// (row lineage) follow the table's columns, in that order.
func rowsFromBatch(rec arrow.RecordBatch, ts *cdcsync.TableSchema, extra ...string) ([]cdcsync.Row, error) {
	idx := make([]int, rec.NumCols())
	for i, f := range rec.Schema().Fields() {
		idx[i] = ts.ColumnIndex(f.Name)
		if j := slices.Index(extra, f.Name); idx[i] < 0 && j >= 0 {
			idx[i] = len(ts.Columns) + j
		}
		if idx[i] < 0 {
			return nil, fmt.Errorf("column %s is not in %s", f.Name, ts.ID)
		}
	}
	rows := make([]cdcsync.Row, rec.NumRows())
	for r := range rows {
		rows[r] = make(cdcsync.Row, len(ts.Columns)+len(extra))
	}
	for c := 0; c < int(rec.NumCols()); c++ {
		col := rec.Column(c)
		if s, ok := col.(*array.String); ok {
			// The rows outlive rec, whose buffers may be recycled
			// (openParquetReader): one copy of the column's text.
			vals := ownStrings(s)
			for r := range rows {
				if !s.IsNull(r) {
					rows[r][idx[c]] = vals[r]
				}
			}
			continue
		}
		for r := range rows {
			if col.IsNull(r) {
				continue
			}
			v, err := arrowValue(col, r)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", rec.ColumnName(c), err)
			}
			if s, ok := v.(string); ok {
				v = strings.Clone(s)
			}
			rows[r][idx[c]] = v
		}
	}
	return rows, nil
}

// ownStrings returns the values of a, which share one copy of a's text.
func ownStrings(a *array.String) []string {
	text := string(a.ValueBytes())
	offs := a.ValueOffsets()
	out := make([]string, a.Len())
	for i := range out {
		out[i] = text[offs[i]-offs[0] : offs[i+1]-offs[0]]
	}
	return out
}

// arrowValue returns the value of row i of a. A string is a's own memory,
// valid until a is released; binary values are copies.
func arrowValue(a arrow.Array, i int) (any, error) {
	switch a := a.(type) {
	case *array.Int32:
		return a.Value(i), nil
	case *array.Int64:
		return a.Value(i), nil
	case *array.Float32:
		return a.Value(i), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.String:
		return a.Value(i), nil
	case *array.LargeString:
		return a.Value(i), nil
	case *array.Binary:
		return append([]byte{}, a.Value(i)...), nil
	case *array.LargeBinary:
		return append([]byte{}, a.Value(i)...), nil
	case *array.Boolean:
		return a.Value(i), nil
	case *array.Date32:
		return int32(a.Value(i)), nil
	case *array.Timestamp:
		return int64(a.Value(i)), nil
	case *array.Decimal128:
		t := a.DataType().(*arrow.Decimal128Type)
		return a.Value(i).ToString(t.Scale), nil
	}
	return nil, fmt.Errorf("cannot read Arrow type %s", a.DataType())
}
