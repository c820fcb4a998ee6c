package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/shopspring/decimal"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/internal/strutil"
)

// SnapshotSessionSQL lists the statements a snapshot connection runs before
// its SELECTs, so that the text it reads decodes to the same canonical values
// as the binlog:
//
//   - time_zone '+00:00': TIMESTAMP values are printed in UTC, and
//     DecodeSnapshot reads them as UTC (an offset needs no time zone tables);
//   - NAMES utf8mb4: text arrives as UTF-8 whatever the server's default;
//   - an empty sql_mode: above all without PAD_CHAR_TO_FULL_LENGTH, which would pad
//     CHAR values that the binlog carries unpadded;
//   - net_write_timeout 3600: a streaming SELECT whose reader waits on
//     back-pressure is not aborted by the server after 60 s.
var SnapshotSessionSQL = []string{
	"SET SESSION time_zone = '+00:00'",
	"SET NAMES utf8mb4",
	"SET SESSION sql_mode = ''",
	"SET SESSION net_write_timeout = 3600",
}

// SelectExpr is the select-list expression that reads column c in a
// snapshot SELECT. It is the quoted column name, except for FLOAT: the text
// protocol prints FLOAT with 6 significant digits (3.1415927 arrives as
// "3.14159", 16777217 as "16777200"), which would not match the exact value
// in the binlog, so FLOAT is read as a DOUBLE ("(`c` + 0e0)", exact, and valid
// on MySQL 5.7 too) and DecodeSnapshot narrows it back to float32 exactly.
func SelectExpr(c *cdcsync.Column) string {
	if strings.EqualFold(c.DataType, "float") {
		return "(" + QuoteIdent(c.Name) + " + 0e0)"
	}
	return QuoteIdent(c.Name)
}

// SelectList is the select list for a snapshot SELECT of every column of s,
// in column order: SelectExpr of each, joined by ", ". Use it (rather than
// SELECT * or bare column names) so that DecodeSnapshot gets exact values and
// so that MySQL 8 invisible columns, which the binlog carries, are read too.
func SelectList(s *cdcsync.TableSchema) string {
	parts := make([]string, len(s.Columns))
	for i := range s.Columns {
		parts[i] = SelectExpr(&s.Columns[i])
	}
	return strings.Join(parts, ", ")
}

// ValueReason classifies a ValueError.
type ValueReason int

const (
	// ReasonBadValue: a value of an unexpected Go type or text format for the
	// column (a schema that no longer matches the binlog, or a bug).
	ReasonBadValue ValueReason = iota + 1
	// ReasonZeroDate: a zero date or a date with a zero month or day
	// ('0000-00-00', '2024-00-10'), which Iceberg cannot store.
	ReasonZeroDate
	// ReasonOutOfRange: a number that does not fit the column's kind.
	ReasonOutOfRange
	// ReasonUnsupportedColumn: the column's type is not mapped (KindInvalid).
	ReasonUnsupportedColumn
	// ReasonPartialJSON: a partial JSON update (binlog_row_value_options=PARTIAL_JSON).
	ReasonPartialJSON
	// ReasonInvalidDate: a date with a day its month does not have
	// ('2024-02-30', allowed by sql_mode ALLOW_INVALID_DATES), which Iceberg
	// cannot store either. The zero-date policies apply to it.
	ReasonInvalidDate
)

// ValueError is the error of DecodeBinlog and DecodeSnapshot (and of the
// row decoders) for a value that cdcsync cannot represent. Its message names
// the value, the column and, when known, the table.
type ValueError struct {
	Table      cdcsync.TableID // zero from DecodeBinlog/DecodeSnapshot; set by DecodeBinlogRow/DecodeSnapshotRow
	Column     string
	ColumnType string
	Value      string // the value as text, abbreviated
	Reason     ValueReason
	Detail     string
	Key        string // the row's primary key, "id=5", when known (the initial copy)
}

func (e *ValueError) where() string {
	w := "column " + e.Column
	if e.Table != (cdcsync.TableID{}) {
		w = e.Table.String() + "." + e.Column
	}
	if e.Key != "" {
		w += " of the row with primary key (" + e.Key + ")"
	}
	return w
}

// StopsTable names the table such a value stops: the others go on.
func (e *ValueError) StopsTable() cdcsync.TableID { return e.Table }

func (e *ValueError) Error() string {
	if e.Reason == ReasonZeroDate || e.Reason == ReasonInvalidDate {
		what := "zero date"
		if e.Reason == ReasonInvalidDate {
			what = "invalid date"
		}
		return fmt.Sprintf("%s %q in %s cannot be stored in Iceberg; to mirror such values, set types.%s to to_null or to_epoch (see docs/types.md)",
			what, e.Value, e.where(), e.Detail)
	}
	msg := fmt.Sprintf("%s (%s): %s", e.where(), e.ColumnType, e.Detail)
	if e.Value != "" {
		msg += fmt.Sprintf(" (value %s)", e.Value)
	}
	return msg
}

func decErr(c *cdcsync.Column, reason ValueReason, value, detail string, args ...any) error {
	if len(args) > 0 {
		detail = fmt.Sprintf(detail, args...)
	}
	return &ValueError{Column: c.Name, ColumnType: c.ColumnType, Value: value, Reason: reason, Detail: detail}
}

func decShow(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		s = strconv.Quote(v)
	case []byte:
		s = strconv.Quote(string(v))
	default:
		s = fmt.Sprintf("%T %v", v, v)
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// decZeroDate is the error for a zero (or, with reason ReasonInvalidDate,
// invalid) date; Detail holds the key of its policy.
func decZeroDate(c *cdcsync.Column, reason ValueReason, value string) error {
	key := "zero_date"
	switch c.Kind {
	case cdcsync.KindTimestamp:
		key = "zero_datetime"
	case cdcsync.KindTimestampTZ:
		key = "zero_timestamp"
	}
	return &ValueError{Column: c.Name, ColumnType: c.ColumnType, Value: value, Reason: reason, Detail: key}
}

func decBadType(c *cdcsync.Column, path string, v any) error {
	return decErr(c, ReasonBadValue, decShow(v), "unexpected value of Go type %T from the %s for kind %s", v, path, c.Kind)
}

// DecodeBinlogRow decodes one row image of a rows event (full image, one
// value per column of s) with DecodeBinlog; errors name the table.
//
// It gives exactly the values DecodeBinlog gives, but copies the text of
// the row's string and DECIMAL values into one buffer (strings are
// immutable, so they may share it) instead of allocating each on its own:
// profiles of the catch-up showed allocation and GC as the largest cost of
// decoding after the DECIMAL formatting (see docs/performance.md).
func DecodeBinlogRow(s *cdcsync.TableSchema, values []any) (cdcsync.Row, error) {
	return decodeBinlogRow(s, values, nil, binlogpos.Pos{})
}

// decodeBinlogRow is DecodeBinlogRow applying policy p (see ValuePolicy)
// to values Iceberg cannot hold.
func decodeBinlogRow(s *cdcsync.TableSchema, values []any, p *ValuePolicy, pos binlogpos.Pos) (cdcsync.Row, error) {
	if len(values) != len(s.Columns) {
		return nil, fmt.Errorf("a binlog row of %s has %d columns but its schema has %d: the table changed without cdcsync seeing the DDL, or binlog_row_image is not FULL", s.ID, len(values), len(s.Columns))
	}
	size := 0
	for i, v := range values {
		switch x := v.(type) {
		case string:
			size += len(x)
		case []byte:
			size += len(x)
		case decimal.Decimal:
			size += s.Columns[i].Precision + 3
		}
	}
	arena := decArena{buf: make([]byte, 0, size)}
	row := make(cdcsync.Row, len(values))
	for i := range values {
		c := &s.Columns[i]
		if v, ok := decBinlogFast(c, values[i], &arena); ok {
			row[i] = v
			continue
		}
		v, err := DecodeBinlog(c, values[i])
		if err != nil {
			if v, ok := p.apply(s, c, err, pos, "binlog"); ok {
				row[i] = v
				continue
			}
			return nil, decWithTable(err, s.ID)
		}
		row[i] = v
	}
	return row, nil
}

// decBinlogFast decodes the common values of DecodeBinlog with their text
// in the row's arena. It returns false for everything it leaves to
// DecodeBinlog, which also reports every error.
func decBinlogFast(c *cdcsync.Column, v any, a *decArena) (any, bool) {
	switch c.Kind {
	case cdcsync.KindString:
		class := decStrClassOf(c.DataType)
		if class > decStrChar || decHasCharset(c) {
			return nil, false
		}
		var t string
		switch x := v.(type) {
		case string:
			t = x
		case []byte:
			t = unsafeString(x)
		default:
			return nil, false
		}
		if class == decStrChar {
			t = strings.TrimRight(t, " ")
		}
		return a.str(t), true
	case cdcsync.KindDecimal:
		if d, ok := v.(decimal.Decimal); ok {
			var buf [96]byte
			if out, ok := decDecimalFast(c, d, buf[:0]); ok {
				return a.str(unsafeString(out)), true
			}
		}
	}
	return nil, false
}

// DecodeSnapshotRow decodes one row of a snapshot SELECT of SelectList(s)
// with DecodeSnapshot; errors name the table. It copies what it keeps, so
// values may be reused by go-mysql afterwards.
//
// Like DecodeBinlogRow it gives exactly DecodeSnapshot's values, with the
// row's text in one buffer, and it parses dates and times from go-mysql's
// buffer without copying them first.
func DecodeSnapshotRow(s *cdcsync.TableSchema, values []mysql.FieldValue) (cdcsync.Row, error) {
	return decodeSnapshotRow(s, values, nil, binlogpos.Pos{})
}

// decodeSnapshotRow is DecodeSnapshotRow applying policy p.
func decodeSnapshotRow(s *cdcsync.TableSchema, values []mysql.FieldValue, p *ValuePolicy, pos binlogpos.Pos) (cdcsync.Row, error) {
	if len(values) != len(s.Columns) {
		return nil, fmt.Errorf("a SELECT of %s returned %d columns but its schema has %d: select SelectList(schema)", s.ID, len(values), len(s.Columns))
	}
	size, nums, strs := 0, 0, 0
	for i := range values {
		switch s.Columns[i].Kind {
		case cdcsync.KindString, cdcsync.KindDecimal:
			if values[i].Type == mysql.FieldValueTypeString {
				size += len(values[i].AsString())
				strs++
			}
		case cdcsync.KindInt32, cdcsync.KindInt64, cdcsync.KindFloat32, cdcsync.KindFloat64,
			cdcsync.KindDate, cdcsync.KindTimestamp, cdcsync.KindTimestampTZ:
			if values[i].Type != mysql.FieldValueTypeNull {
				nums++
			}
		}
	}
	arena := decArena{buf: make([]byte, 0, size)}
	block := newRowBlock(nums, strs)
	row := make(cdcsync.Row, len(values))
	for i := range values {
		c := &s.Columns[i]
		if v, ok := decSnapshotFast(c, &values[i], &arena, &block); ok {
			row[i] = v
			continue
		}
		v, err := DecodeSnapshot(c, values[i])
		if err != nil {
			if v, ok := p.apply(s, c, err, pos, "initial copy"); ok {
				row[i] = v
				continue
			}
			err = decWithTable(err, s.ID)
			if ve, ok := err.(*ValueError); ok {
				ve.Key = snapshotKey(s, values)
			}
			return nil, err
		}
		row[i] = v
	}
	return row, nil
}

// snapshotKey describes the primary key of a row a SELECT returned, for
// messages.
func snapshotKey(s *cdcsync.TableSchema, values []mysql.FieldValue) string {
	var key []string
	for _, k := range s.PrimaryKey {
		v := values[k]
		text := "NULL"
		switch v.Type {
		case mysql.FieldValueTypeString:
			text = string(v.AsString())
		case mysql.FieldValueTypeNull:
		default:
			text = fmt.Sprint(v.Value())
		}
		key = append(key, s.Columns[k].Name+"="+strutil.Abbreviate(text, 64))
	}
	return strings.Join(key, ", ")
}

// decSnapshotFast decodes the common values of DecodeSnapshot, boxed in
// the row's block (boxing.go). Text it keeps goes to the arena; text it
// only parses (dates, times) is read in place. It returns false for
// everything it leaves to DecodeSnapshot, which also reports every error
// (with its own copy of the text).
func decSnapshotFast(c *cdcsync.Column, v *mysql.FieldValue, a *decArena, b *rowBlock) (any, bool) {
	switch v.Type {
	case mysql.FieldValueTypeSigned, mysql.FieldValueTypeUnsigned:
		if c.Kind != cdcsync.KindInt32 && c.Kind != cdcsync.KindInt64 {
			return nil, false
		}
		u, neg := decFieldInt(v)
		n, err := decIntRange(c, u, neg)
		if err != nil {
			return nil, false
		}
		if c.Kind == cdcsync.KindInt64 {
			return b.int64(n), true
		}
		return b.int32(int32(n)), true
	case mysql.FieldValueTypeFloat:
		switch c.Kind {
		case cdcsync.KindFloat64:
			return b.float64(v.AsFloat64()), true
		case cdcsync.KindFloat32:
			return b.float32(float32(v.AsFloat64())), true
		}
		return nil, false
	case mysql.FieldValueTypeString:
	default:
		return nil, false
	}
	t := unsafeString(v.AsString()) // valid only during this call
	switch c.Kind {
	case cdcsync.KindString:
		if class := decStrClassOf(c.DataType); class == decStrDecimal || class == decStrJSON || (class <= decStrChar && decHasCharset(c)) {
			return nil, false
		}
		return b.string(a.str(t)), true
	case cdcsync.KindDecimal:
		if !decCanonicalDecimal(t, c.Scale) {
			return nil, false
		}
		if c.Precision > 0 {
			intPart, _, _ := strings.Cut(strings.TrimPrefix(t, "-"), ".")
			if intPart != "0" && len(intPart) > c.Precision-c.Scale {
				return nil, false
			}
		}
		return b.string(a.str(t)), true
	case cdcsync.KindDate:
		if days, err := decDateDays(c, t); err == nil {
			return b.int32(days), true
		}
	case cdcsync.KindTimestamp, cdcsync.KindTimestampTZ:
		if us, err := decDatetimeMicros(c, t); err == nil {
			return b.int64(us), true
		}
	}
	return nil, false
}

// decArena hands out strings that share one buffer. A string it returns is
// never written again (the buffer only grows by append within its capacity,
// or is replaced by a new one), so sharing is safe; the buffer lives as long
// as any of its strings.
type decArena struct{ buf []byte }

func (a *decArena) str(s string) string {
	if s == "" {
		return ""
	}
	if cap(a.buf)-len(a.buf) < len(s) {
		a.buf = make([]byte, 0, max(len(s), 64))
	}
	start := len(a.buf)
	a.buf = append(a.buf, s...)
	return unsafe.String(&a.buf[start], len(s))
}

// unsafeSlice views s as bytes without copying; they must not be written.
func unsafeSlice(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// unsafeString views b as a string without copying; the caller must not
// keep it beyond b's lifetime or let b change while it is used.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func decWithTable(err error, id cdcsync.TableID) error {
	if ve, ok := err.(*ValueError); ok {
		cp := *ve
		cp.Table = id
		return &cp
	}
	return err
}

// DecodeBinlog converts a value of a rows event, as go-mysql's replication
// package yields it with BinlogSyncerConfig{ParseTime: true, UseDecimal:
// true}, into the canonical value of c.Kind (see cdcsync.Kind). NULL (nil)
// stays nil. Strings and byte slices are copied: go-mysql's may alias the
// event buffer.
//
// What go-mysql v1.16.0 yields, and what is done with it:
//   - integers: int8/16/32/64, or uint8/16/32/64 when the table map carries
//     signedness (binlog_row_metadata); a signed Go value in an UNSIGNED
//     column is reinterpreted at the column's width (int8(-1) in TINYINT
//     UNSIGNED is 255, a MEDIUMINT UNSIGNED arrives 24-bit sign-extended);
//     YEAR: int (0 for the zero year);
//   - BIT(n): int64 holding the n bits (BIT(64) may be negative);
//   - DECIMAL: decimal.Decimal (a string without UseDecimal), formatted with
//     exactly Scale fraction digits;
//   - FLOAT float32, DOUBLE float64;
//   - CHAR/VARCHAR: string; TEXT: []byte; BINARY/VARBINARY: string; BLOB
//     and spatial types: []byte. Text is in the column's character set and is
//     converted to UTF-8 (charset.go); CHAR loses trailing spaces as in a
//     SELECT. BINARY(n) arrives without its trailing 0x00 bytes (the server
//     strips them when it writes the row) and is padded back to n bytes, as
//     SELECT returns it; so are MariaDB's INET4, INET6 and UUID (4, 16 and 16
//     bytes), which are then printed as the server prints them. Spatial values
//     lose MySQL's 4-byte SRID prefix (WKB remains);
//   - ENUM: int64 index (0 for the empty error value), SET: int64 bit mask;
//     both become their labels from c.ColumnType;
//   - DATE: always a "YYYY-MM-DD" string;
//   - DATETIME: time.Time in UTC holding the wall clock, but a string for
//     values before 1970 and for zero dates;
//   - TIMESTAMP: time.Time of the true instant (in time.Local, which does not
//     matter: only the instant is used), or the string "0000-00-00
//     00:00:00[.ffffff]" for the zero timestamp; a non-zero TIMESTAMP as text
//     (ParseTime off) is taken as UTC, so a reader without ParseTime must set
//     BinlogSyncerConfig.TimestampStringLocation to time.UTC;
//   - TIME: a "[-]H:MM:SS[.ffffff]" string;
//   - JSON (MySQL): the JSON text as a string ([]byte accepted); it is
//     canonicalised (see decCanonicalJSON) so that it equals the text SELECT
//     returns, which is formatted differently. MariaDB JSON is a LONGTEXT and
//     is kept verbatim.
//
// Zero dates (and dates with a zero month or day) are a *ValueError with
// Reason ReasonZeroDate, impossible days ReasonInvalidDate.
func DecodeBinlog(c *cdcsync.Column, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	const path = "binlog"
	switch c.Kind {
	case cdcsync.KindInt32, cdcsync.KindInt64:
		if decIsBit(c) {
			u, ok := decBinlogBits(c, v)
			if !ok || u > math.MaxInt64 {
				return nil, decBadType(c, path, v)
			}
			return decIntKind(c, u, false)
		}
		u, neg, ok := decBinlogInt(c, v)
		if !ok {
			return nil, decBadType(c, path, v)
		}
		return decIntKind(c, u, neg)
	case cdcsync.KindBool:
		u, ok := decBinlogBits(c, v)
		if !ok || u > 1 {
			return nil, decBadType(c, path, v)
		}
		return u == 1, nil
	case cdcsync.KindDecimal:
		if decIsBit(c) {
			u, ok := decBinlogBits(c, v)
			if !ok {
				return nil, decBadType(c, path, v)
			}
			return decIntDecimal(c, u, false)
		}
		switch x := v.(type) {
		case decimal.Decimal:
			return decDecimalValue(c, x)
		case string: // cloned: decDecimalText may keep canonical text as it is
			return decDecimalText(c, strings.Clone(x))
		case []byte:
			return decDecimalText(c, string(x))
		}
		if u, neg, ok := decBinlogInt(c, v); ok { // BIGINT UNSIGNED
			return decIntDecimal(c, u, neg)
		}
		return nil, decBadType(c, path, v)
	case cdcsync.KindFloat32:
		if f, ok := decFloat(v); ok {
			return float32(f), nil
		}
		return nil, decBadType(c, path, v)
	case cdcsync.KindFloat64:
		if f, ok := decFloat(v); ok {
			return f, nil
		}
		return nil, decBadType(c, path, v)
	case cdcsync.KindString:
		return decBinlogString(c, v)
	case cdcsync.KindBinary:
		var b []byte
		switch x := v.(type) {
		case []byte:
			b = x
		case string:
			b = unsafeSlice(x)
		default:
			return nil, decBadType(c, path, v)
		}
		return decBinaryValue(c, b)
	case cdcsync.KindDate:
		switch x := v.(type) {
		case string:
			return decDateText(c, x)
		case []byte:
			return decDateText(c, string(x))
		case time.Time:
			y, m, d := x.Date()
			return int32(decDaysFromCivil(int64(y), int64(m), int64(d))), nil
		}
		return nil, decBadType(c, path, v)
	case cdcsync.KindTimestamp, cdcsync.KindTimestampTZ:
		switch x := v.(type) {
		case string:
			return decDatetimeText(c, x)
		case []byte:
			return decDatetimeText(c, string(x))
		case time.Time:
			if c.Kind == cdcsync.KindTimestampTZ {
				return x.UnixMicro(), nil
			}
			return decWallMicros(x), nil
		}
		return nil, decBadType(c, path, v)
	case cdcsync.KindTime:
		switch x := v.(type) {
		case string:
			return decTimeText(c, x)
		case []byte:
			return decTimeText(c, string(x))
		case time.Duration:
			return x.Microseconds(), nil
		}
		return nil, decBadType(c, path, v)
	case cdcsync.KindInvalid:
		return nil, decErr(c, ReasonUnsupportedColumn, "", "the column's type is not mapped to an Iceberg type (see the preflight check column_types)")
	}
	return nil, decErr(c, ReasonBadValue, "", "unknown kind %s", c.Kind)
}

// decBinlogString decodes a binlog value of a KindString column.
func decBinlogString(c *cdcsync.Column, v any) (any, error) {
	const path = "binlog"
	class := decStrClassOf(c.DataType)
	switch class {
	case decStrDecimal: // DECIMAL(p>38,s) kept as exact text
		switch x := v.(type) {
		case decimal.Decimal:
			return decDecimalValue(c, x)
		case string:
			return decDecimalText(c, strings.Clone(x))
		case []byte:
			return decDecimalText(c, string(x))
		}
		return nil, decBadType(c, path, v)
	case decStrEnum, decStrSet:
		if x, ok := v.(int64); ok {
			return decLabels(c, class, uint64(x)) // a SET of 64 members uses the sign bit
		}
		if u, neg, ok := decBinlogInt(c, v); ok && !neg {
			return decLabels(c, class, u)
		}
		return nil, decBadType(c, path, v)
	}
	if _, partial := v.(*replication.JsonDiff); partial {
		return nil, decErr(c, ReasonPartialJSON, "", "a partial JSON update, which go-mysql does not apply: set binlog_row_value_options='' on the server (SET GLOBAL and my.cnf) and resync the table")
	}
	var b []byte
	switch x := v.(type) {
	case string:
		b = unsafeSlice(x)
	case []byte:
		b = x
	default:
		return nil, decBadType(c, path, v)
	}
	switch class {
	case decStrJSON:
		return decCanonicalJSON(c, string(b))
	case decStrInet4, decStrInet6, decStrUUID:
		return decFormatBinaryText(c, class, b)
	}
	if cs := decCharset(c); cs != nil && class <= decStrChar {
		s := cs.decode(b)
		if class == decStrChar {
			s = strings.TrimRight(s, " ")
		}
		return s, nil
	}
	if class == decStrChar {
		b = bytes.TrimRight(b, " ")
	}
	return string(b), nil
}

// DecodeSnapshot converts a value of a SELECT row read with go-mysql's
// client over the text protocol (conn.ExecuteSelectStreaming, after
// SnapshotSessionSQL, selecting SelectList) into the same canonical value as
// DecodeBinlog gives for the same stored value. It copies what it keeps.
//
// The text protocol yields: integer and YEAR columns as FieldValueTypeSigned
// or FieldValueTypeUnsigned, FLOAT/DOUBLE as FieldValueTypeFloat (float64
// parsed from the text), everything else (DECIMAL, BIT, dates, times,
// strings, binary strings, JSON) as FieldValueTypeString holding the text, or
// the bytes for BIT (big-endian), binary strings and spatial values (SRID
// prefix, then WKB). Text arrives in utf8mb4 (SnapshotSessionSQL), ENUM and
// SET as their labels, INET4/INET6/UUID as the server prints them.
// BINARY(n) comes padded with 0x00 to n bytes; TIMESTAMP as wall-clock text
// in the session time zone, which must be '+00:00' (SnapshotSessionSQL).
func DecodeSnapshot(c *cdcsync.Column, v mysql.FieldValue) (any, error) {
	if v.Type == mysql.FieldValueTypeNull {
		return nil, nil
	}
	const path = "SELECT"
	text := func() string { return string(v.AsString()) }
	bad := func() error {
		var x any
		switch v.Type {
		case mysql.FieldValueTypeSigned:
			x = v.AsInt64()
		case mysql.FieldValueTypeUnsigned:
			x = v.AsUint64()
		case mysql.FieldValueTypeFloat:
			x = v.AsFloat64()
		default:
			x = v.AsString()
		}
		return decBadType(c, path, x)
	}
	switch c.Kind {
	case cdcsync.KindInt32, cdcsync.KindInt64, cdcsync.KindDecimal, cdcsync.KindBool:
		var u uint64
		var neg bool
		switch v.Type {
		case mysql.FieldValueTypeSigned, mysql.FieldValueTypeUnsigned:
			u, neg = decFieldInt(&v)
		case mysql.FieldValueTypeString:
			if decIsBit(c) {
				b := v.AsString()
				if len(b) > 8 {
					return nil, bad()
				}
				for _, x := range b {
					u = u<<8 | uint64(x)
				}
				break
			}
			if c.Kind == cdcsync.KindDecimal {
				return decDecimalText(c, text())
			}
			t := strings.TrimSpace(text())
			var err error
			if neg = strings.HasPrefix(t, "-"); neg {
				u, err = strconv.ParseUint(t[1:], 10, 64)
			} else {
				u, err = strconv.ParseUint(strings.TrimPrefix(t, "+"), 10, 64)
			}
			if err != nil {
				return nil, decErr(c, ReasonBadValue, decShow(t), "not an integer")
			}
		default:
			return nil, bad()
		}
		switch c.Kind {
		case cdcsync.KindDecimal:
			return decIntDecimal(c, u, neg)
		case cdcsync.KindBool:
			if neg || u > 1 {
				return nil, bad()
			}
			return u == 1, nil
		}
		return decIntKind(c, u, neg)
	case cdcsync.KindFloat32, cdcsync.KindFloat64:
		var f float64
		switch v.Type {
		case mysql.FieldValueTypeFloat:
			f = v.AsFloat64()
		case mysql.FieldValueTypeString:
			var err error
			f, err = strconv.ParseFloat(strings.TrimSpace(text()), 64)
			if err != nil {
				return nil, decErr(c, ReasonBadValue, decShow(text()), "not a floating-point number")
			}
		case mysql.FieldValueTypeSigned:
			f = float64(v.AsInt64())
		case mysql.FieldValueTypeUnsigned:
			f = float64(v.AsUint64())
		default:
			return nil, bad()
		}
		if c.Kind == cdcsync.KindFloat32 {
			return float32(f), nil
		}
		return f, nil
	case cdcsync.KindString:
		if v.Type != mysql.FieldValueTypeString {
			return nil, bad()
		}
		switch class := decStrClassOf(c.DataType); {
		case class == decStrDecimal:
			return decDecimalText(c, text())
		case class == decStrJSON:
			return decCanonicalJSON(c, text())
		case class <= decStrChar:
			if _, cs := schemaSplitCharset(c.ColumnType); charsetHasSurrogates(cs) {
				return decSurrogates(text()), nil
			}
		}
		return text(), nil
	case cdcsync.KindBinary:
		if v.Type != mysql.FieldValueTypeString {
			return nil, bad()
		}
		return decBinaryValue(c, v.AsString())
	case cdcsync.KindDate:
		if v.Type != mysql.FieldValueTypeString {
			return nil, bad()
		}
		return decDateText(c, text())
	case cdcsync.KindTimestamp, cdcsync.KindTimestampTZ:
		if v.Type != mysql.FieldValueTypeString {
			return nil, bad()
		}
		// DATETIME is the wall clock taken as UTC; TIMESTAMP was printed in
		// the session time zone '+00:00', so the same arithmetic gives the
		// instant.
		return decDatetimeText(c, text())
	case cdcsync.KindTime:
		if v.Type != mysql.FieldValueTypeString {
			return nil, bad()
		}
		return decTimeText(c, text())
	case cdcsync.KindInvalid:
		return nil, decErr(c, ReasonUnsupportedColumn, "", "the column's type is not mapped to an Iceberg type (see the preflight check column_types)")
	}
	return nil, decErr(c, ReasonBadValue, "", "unknown kind %s", c.Kind)
}

// decStrClass tells how the binlog value of a KindString column becomes
// its text. The classes up to decStrChar are plain text.
type decStrClass uint8

const (
	decStrText    decStrClass = iota // VARCHAR, TEXT, ...
	decStrChar                       // CHAR: trailing spaces go, as in a SELECT
	decStrDecimal                    // DECIMAL(p>38,s)
	decStrJSON                       // MySQL JSON
	decStrEnum
	decStrSet
	decStrInet4
	decStrInet6
	decStrUUID
)

func decStrClassOf(dt string) decStrClass {
	switch dt {
	case "varchar", "text", "longtext", "mediumtext", "tinytext":
		return decStrText
	case "char":
		return decStrChar
	case "decimal", "numeric", "fixed":
		return decStrDecimal
	case "json":
		return decStrJSON
	case "enum":
		return decStrEnum
	case "set":
		return decStrSet
	case "inet4":
		return decStrInet4
	case "inet6":
		return decStrInet6
	case "uuid":
		return decStrUUID
	}
	// DataType is lower case as LoadSchema sets it; accept any case without
	// paying strings.ToLower on every value.
	if l := strings.ToLower(dt); l != dt {
		return decStrClassOf(l)
	}
	return decStrText
}

// decHasCharset reports whether c's text is in a character set other than
// the UTF-8 family (see MapColumn).
func decHasCharset(c *cdcsync.Column) bool {
	_, cs := schemaSplitCharset(c.ColumnType)
	return cs != ""
}

// decCharset is the decoder of c's character set, nil for UTF-8.
func decCharset(c *cdcsync.Column) *textCharset {
	_, cs := schemaSplitCharset(c.ColumnType)
	if cs == "" {
		return nil
	}
	return charsetByName(cs)
}

func decIsBit(c *cdcsync.Column) bool {
	return c.DataType == "bit" || strings.EqualFold(c.DataType, "bit")
}

// decBinlogBits reads the bits of a BIT(n) value: go-mysql yields an int64
// holding them (negative for BIT(64) with the top bit set).
func decBinlogBits(c *cdcsync.Column, v any) (uint64, bool) {
	u, neg, ok := uint64(0), false, true
	if x, isInt64 := v.(int64); isInt64 {
		u = uint64(x)
	} else if u, neg, ok = decBinlogInt(c, v); !ok || neg {
		return 0, false
	}
	if n := max(schemaFixedLength(c.ColumnType), 1); n < 64 && u>>n != 0 {
		return 0, false
	}
	return u, true
}

// decLabels turns an ENUM index (0: the empty string MySQL stores for an
// invalid value) or a SET bit mask into the text SELECT returns.
func decLabels(c *cdcsync.Column, class decStrClass, u uint64) (any, error) {
	labels, ok := schemaLabelsOf(c.ColumnType)
	if !ok {
		return nil, decErr(c, ReasonBadValue, "", "cannot read the labels of the column type")
	}
	if class == decStrEnum {
		switch {
		case u == 0:
			return "", nil
		case u <= uint64(len(labels)):
			return labels[u-1], nil
		}
		return nil, decErr(c, ReasonBadValue, strconv.FormatUint(u, 10), "no label for this ENUM index: the column's labels changed without cdcsync seeing the DDL")
	}
	if len(labels) < 64 && u>>len(labels) != 0 {
		return nil, decErr(c, ReasonBadValue, strconv.FormatUint(u, 10), "bits without a label in this SET value: the column's labels changed without cdcsync seeing the DDL")
	}
	var b strings.Builder
	for i, l := range labels {
		if u&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l)
		}
	}
	return b.String(), nil
}

// decFormatBinaryText prints the bytes of a MariaDB INET4, INET6 or UUID as
// the server does. The binlog drops their trailing zero bytes, like a
// BINARY's.
func decFormatBinaryText(c *cdcsync.Column, class decStrClass, b []byte) (any, error) {
	size := 16
	if class == decStrInet4 {
		size = 4
	}
	if len(b) > size {
		return nil, decErr(c, ReasonBadValue, decShow(b), "more than %d bytes", size)
	}
	var v [16]byte
	copy(v[:], b)
	switch class {
	case decStrInet4:
		return decInet4(v[:4]), nil
	case decStrInet6:
		return decInet6(v), nil
	}
	const hexDigits = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, x := range v {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hexDigits[x>>4], hexDigits[x&15])
	}
	return string(out), nil
}

func decInet4(b []byte) string {
	return strconv.Itoa(int(b[0])) + "." + strconv.Itoa(int(b[1])) + "." + strconv.Itoa(int(b[2])) + "." + strconv.Itoa(int(b[3]))
}

// decInet6 prints an IPv6 address as MariaDB's Inet6::to_string: lower-case
// hex words without leading zeros, the first longest run of zero words
// (even a single one) as "::", and an IPv4-compatible (::a.b.c.d) or
// IPv4-mapped (::ffff:a.b.c.d) address with its last 32 bits dotted.
func decInet6(b [16]byte) string {
	var w [8]int
	for i := range w {
		w[i] = int(b[2*i])<<8 | int(b[2*i+1])
	}
	gapPos, gapLen := -1, -1
	for i := 0; i < 8; {
		if w[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && w[j] == 0 {
			j++
		}
		if j-i > gapLen {
			gapPos, gapLen = i, j-i
		}
		i = j
	}
	var out strings.Builder
	for i := 0; i < 8; i++ {
		switch {
		case i == gapPos:
			if i == 0 {
				out.WriteByte(':')
			}
			out.WriteByte(':')
			i += gapLen - 1
		case i == 6 && gapPos == 0 && (gapLen == 6 || (gapLen == 5 && w[5] == 0xffff)):
			out.WriteString(decInet4(b[12:]))
			return out.String()
		default:
			out.WriteString(strconv.FormatInt(int64(w[i]), 16))
			if i != 7 {
				out.WriteByte(':')
			}
		}
	}
	return out.String()
}

// decBinaryValue copies a binary value: BINARY(n) padded with 0x00 to n
// bytes (the binlog drops trailing zero bytes), a spatial value without the
// 4-byte SRID that MySQL puts before the WKB.
func decBinaryValue(c *cdcsync.Column, b []byte) (any, error) {
	if c.Spatial() {
		if len(b) < 4 {
			return nil, decErr(c, ReasonBadValue, decShow(b), "a spatial value shorter than its 4-byte SRID")
		}
		return append([]byte{}, b[4:]...), nil
	}
	return decPadBinary(c, b), nil
}

// decTimeText parses a TIME, "[-]H:MM:SS[.f{1,6}]" (any number of hours),
// to signed microseconds.
//
// go-mysql prints the old TIME format (MySQL before 5.6.4) as "%02d:%02d:%02d"
// of its 24-bit value read as unsigned, so a negative one arrives as
// "1677:72:15" for -00:00:01; such text (minutes or seconds above 59) is
// read back as the 24-bit two's complement it was.
func decTimeText(c *cdcsync.Column, s string) (any, error) {
	t := strings.TrimSpace(s)
	neg := strings.HasPrefix(t, "-")
	t = strings.TrimPrefix(t, "-")
	hms, frac, hasFrac := strings.Cut(t, ".")
	parts := strings.Split(hms, ":")
	bad := func() (any, error) {
		return nil, decErr(c, ReasonBadValue, decShow(s), "not a time ([-]H:MM:SS[.ffffff])")
	}
	if len(parts) != 3 || len(parts[1]) != 2 || len(parts[2]) != 2 {
		return bad()
	}
	h, ok1 := decDigits(parts[0])
	m, ok2 := decDigits(parts[1])
	sec, ok3 := decDigits(parts[2])
	if !ok1 || !ok2 || !ok3 || h > 1<<20 {
		return bad()
	}
	var us int64
	if hasFrac {
		n, ok := decDigits(frac)
		if !ok || len(frac) > 6 {
			return bad()
		}
		for i := len(frac); i < 6; i++ {
			n *= 10
		}
		us = n
	}
	if h > 838 || m > 59 || sec > 59 {
		// The old format's negative value, printed as unsigned.
		raw := h*10000 + m*100 + sec
		if neg || hasFrac || raw < 1<<23 || raw >= 1<<24 {
			return bad()
		}
		raw = 1<<24 - raw
		h, m, sec, neg = raw/10000, raw/100%100, raw%100, true
		if m > 59 || sec > 59 {
			return bad()
		}
	}
	v := ((h*60+m)*60+sec)*1e6 + us
	if neg {
		v = -v
	}
	return v, nil
}

// decIntWidth is the width in bits of an integer column.
func decIntWidth(c *cdcsync.Column) int {
	return decIntWidthOf(c.DataType)
}

func decIntWidthOf(dt string) int {
	switch dt {
	case "tinyint":
		return 8
	case "smallint":
		return 16
	case "mediumint":
		return 24
	case "int", "integer":
		return 32
	case "bigint":
		return 64
	}
	if l := strings.ToLower(dt); l != dt {
		return decIntWidthOf(l)
	}
	return 64
}

// decBinlogInt reads an integer of any Go integer type. It returns the value
// as magnitude u with sign neg. A
// signed value in an UNSIGNED column is reinterpreted at the column's width,
// an unsigned value in a signed column sign-extended at that width.
func decBinlogInt(c *cdcsync.Column, v any) (u uint64, neg bool, ok bool) {
	var signed bool
	var sv int64
	var uv uint64
	switch x := v.(type) {
	case int8:
		signed, sv = true, int64(x)
	case int16:
		signed, sv = true, int64(x)
	case int32:
		signed, sv = true, int64(x)
	case int64:
		signed, sv = true, x
	case int:
		signed, sv = true, int64(x)
	case uint8:
		uv = uint64(x)
	case uint16:
		uv = uint64(x)
	case uint32:
		uv = uint64(x)
	case uint64:
		uv = x
	case uint:
		uv = uint64(x)
	default:
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			signed, sv = true, rv.Int()
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			uv = rv.Uint()
		default:
			return 0, false, false
		}
	}
	u, neg = decIntParts(c, signed, sv, uv)
	return u, neg, true
}

// decIntKind returns the int32 or int64 of a magnitude and sign, checking
// the range.
func decIntKind(c *cdcsync.Column, u uint64, neg bool) (any, error) {
	n, err := decIntRange(c, u, neg)
	if err != nil {
		return nil, err
	}
	if c.Kind == cdcsync.KindInt32 {
		return int32(n), nil
	}
	return n, nil
}

// decFieldInt returns the magnitude and sign of an integer the text
// protocol gave (FieldValueTypeSigned or FieldValueTypeUnsigned).
func decFieldInt(v *mysql.FieldValue) (u uint64, neg bool) {
	if v.Type == mysql.FieldValueTypeUnsigned {
		return v.AsUint64(), false
	}
	n := v.AsInt64()
	if n < 0 {
		return uint64(-(n + 1)) + 1, true // |n| without overflow at MinInt64
	}
	return uint64(n), false
}

// decIntRange is decIntKind's value before it is boxed: an int64 within
// the range of c's kind.
func decIntRange(c *cdcsync.Column, u uint64, neg bool) (int64, error) {
	var n int64
	if neg {
		if u > 1<<63 {
			return 0, decErr(c, ReasonOutOfRange, "-"+strconv.FormatUint(u, 10), "does not fit kind %s", c.Kind)
		}
		n = -int64(u-1) - 1
	} else {
		if u > math.MaxInt64 {
			return 0, decErr(c, ReasonOutOfRange, strconv.FormatUint(u, 10), "does not fit kind %s", c.Kind)
		}
		n = int64(u)
	}
	if c.Kind == cdcsync.KindInt32 && (n < math.MinInt32 || n > math.MaxInt32) {
		return 0, decErr(c, ReasonOutOfRange, strconv.FormatInt(n, 10), "does not fit kind %s", c.Kind)
	}
	return n, nil
}

// decIntDecimal formats an integer (BIGINT UNSIGNED) as a decimal with the
// column's scale.
func decIntDecimal(c *cdcsync.Column, u uint64, neg bool) (any, error) {
	s := strconv.FormatUint(u, 10)
	if neg && u != 0 {
		s = "-" + s
	}
	return decDecimalText(c, s)
}

func decDecimalValue(c *cdcsync.Column, d decimal.Decimal) (any, error) {
	var buf [96]byte
	if out, ok := decDecimalFast(c, d, buf[:0]); ok {
		return string(out), nil
	}
	if d.Exponent() < -int32(c.Scale) {
		// More fraction digits than the scale: never rounds silently.
		return decDecimalText(c, d.String())
	}
	return decDecimalText(c, d.StringFixed(int32(c.Scale)))
}

// decDecimalFast is decDecimalValue for the common case, without math/big,
// appending the text to out: a coefficient of at most 18 digits (so it fits an
// int64) and no more fraction digits than the scale. It formats the same
// canonical text as decDecimalText(c, d.StringFixed(c.Scale)) and returns
// false for anything else (including a value too wide for the column, whose
// error the slow path reports). Profiles of the binlog decoder showed
// StringFixed (big.Int formatting) plus the string handling of
// decNormDecimal as about half of the time spent decoding a row.
func decDecimalFast(c *cdcsync.Column, d decimal.Decimal, out []byte) ([]byte, bool) {
	scale := c.Scale
	exp := int(d.Exponent())
	zeros := exp + scale // zeros appended to the coefficient to reach the scale
	if zeros < 0 || zeros > 20 || scale > 40 || d.NumDigits() > 18 {
		return nil, false
	}
	coef := d.CoefficientInt64()
	neg := coef < 0
	if neg {
		coef = -coef
	}
	var ubuf [64]byte
	u := strconv.AppendUint(ubuf[:0], uint64(coef), 10)
	if coef != 0 {
		for range zeros {
			u = append(u, '0')
		}
	}
	if neg && coef != 0 {
		out = append(out, '-')
	}
	intDigits := len(u) - scale
	if intDigits <= 0 || coef == 0 {
		out = append(out, '0')
		intDigits = 0
	} else {
		out = append(out, u[:intDigits]...)
	}
	if c.Precision > 0 && intDigits > c.Precision-scale {
		return nil, false
	}
	if scale > 0 {
		out = append(out, '.')
		if coef == 0 {
			for range scale {
				out = append(out, '0')
			}
		} else {
			for i := len(u); i < scale; i++ {
				out = append(out, '0')
			}
			out = append(out, u[max(intDigits, 0):]...)
		}
	}
	return out, true
}

// decCanonicalDecimal reports whether s is already in the canonical form of
// decDecimalText for the scale: an optional "-" (not on zero), an integer
// part without leading zeros ("0" alone), and a point followed by exactly
// scale digits when scale > 0. SELECT returns DECIMAL in this form, so the
// snapshot path can keep the text as it is.
func decCanonicalDecimal(s string, scale int) bool {
	neg := false
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	intPart, frac := s, ""
	if scale > 0 {
		i := len(s) - scale - 1
		if i < 1 || s[i] != '.' {
			return false
		}
		intPart, frac = s[:i], s[i+1:]
	}
	if intPart == "" || (len(intPart) > 1 && intPart[0] == '0') {
		return false
	}
	zero := intPart == "0"
	for i := 0; i < len(intPart); i++ {
		if intPart[i] < '0' || intPart[i] > '9' {
			return false
		}
	}
	for i := 0; i < len(frac); i++ {
		if frac[i] < '0' || frac[i] > '9' {
			return false
		}
		if frac[i] != '0' {
			zero = false
		}
	}
	return !(neg && zero)
}

// decDecimalText normalises a plain decimal text to exactly c.Scale fraction
// digits, without leading zeros or a "+" sign, and "0" rather than "-0". Extra
// fraction digits are accepted only when they are zeros; an exponent is
// accepted (shopspring may print one) and applied exactly.
func decDecimalText(c *cdcsync.Column, s string) (any, error) {
	out, ok := s, decCanonicalDecimal(s, c.Scale)
	if !ok {
		out, ok = decNormDecimal(strings.TrimSpace(s), c.Scale)
	}
	if !ok {
		return nil, decErr(c, ReasonBadValue, decShow(s), "not a decimal with scale %d", c.Scale)
	}
	if c.Precision > 0 {
		intPart, _, _ := strings.Cut(strings.TrimPrefix(out, "-"), ".")
		if intPart != "0" && len(intPart) > c.Precision-c.Scale {
			return nil, decErr(c, ReasonOutOfRange, out, "more than %d digits before the decimal point", c.Precision-c.Scale)
		}
	}
	return out, nil
}

func decNormDecimal(s string, scale int) (string, bool) {
	neg := false
	switch {
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > 100 || e < -100 {
			return "", false
		}
		exp, s = e, s[:i]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" && frac == "" {
		return "", false
	}
	for _, r := range intPart + frac {
		if r < '0' || r > '9' {
			return "", false
		}
	}
	// Apply the exponent by moving the decimal point.
	digits := intPart + frac
	point := len(intPart) + exp
	for point < 0 {
		digits, point = "0"+digits, point+1
	}
	for point > len(digits) {
		digits += "0"
	}
	intPart, frac = digits[:point], digits[point:]
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	if len(frac) > scale {
		if strings.Trim(frac[scale:], "0") != "" {
			return "", false
		}
		frac = frac[:scale]
	}
	frac += strings.Repeat("0", scale-len(frac))
	out := intPart
	if scale > 0 {
		out += "." + frac
	}
	if neg && strings.Trim(out, "0.") != "" {
		out = "-" + out
	}
	return out, true
}

func decFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	rv := reflect.ValueOf(v) // e.g. replication.FloatWithTrailingZero
	switch rv.Kind() {
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return 0, false
}

// decPadBinary copies b and, for BINARY(n), pads it with 0x00 to n bytes:
// the binlog carries BINARY values without their trailing zero bytes.
func decPadBinary(c *cdcsync.Column, b []byte) []byte {
	n := 0
	if strings.EqualFold(c.DataType, "binary") {
		n = schemaFixedLength(c.ColumnType)
	}
	out := make([]byte, max(len(b), n))
	copy(out, b)
	return out
}

// decDaysFromCivil is the number of days from 1970-01-01 to y-m-d in the
// proleptic Gregorian calendar (H. Hinnant's algorithm).
func decDaysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// decWallMicros is the wall clock of t, whatever its location, as
// microseconds since 1970-01-01 00:00:00 taken as UTC.
func decWallMicros(t time.Time) int64 {
	y, m, d := t.Date()
	hh, mm, ss := t.Clock()
	days := decDaysFromCivil(int64(y), int64(m), int64(d))
	return ((days*24+int64(hh))*60+int64(mm))*60*1e6 + int64(ss)*1e6 + int64(t.Nanosecond()/1000)
}

// decParseDate parses "YYYY-MM-DD" at the start of s and returns the rest.
func decParseDate(s string) (y, m, d int64, rest string, ok bool) {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return 0, 0, 0, "", false
	}
	y, ok1 := decDigits(s[0:4])
	m, ok2 := decDigits(s[5:7])
	d, ok3 := decDigits(s[8:10])
	return y, m, d, s[10:], ok1 && ok2 && ok3
}

func decDigits(s string) (int64, bool) {
	var n int64
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

func decValidYMD(y, m, d int64) bool {
	if m < 1 || m > 12 || d < 1 {
		return false
	}
	days := [13]int64{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	limit := days[m]
	if m == 2 && (y%4 == 0 && (y%100 != 0 || y%400 == 0)) {
		limit = 29
	}
	return d <= limit
}

// decInvalidDate is the error of a date the calendar does not have: a day
// its month lacks (ALLOW_INVALID_DATES) follows the zero-date policy, a month
// above 12 or a day above 31 is not a date at all.
func decInvalidDate(c *cdcsync.Column, s string, m, d int64) error {
	if m <= 12 && d <= 31 {
		return decZeroDate(c, ReasonInvalidDate, s)
	}
	return decErr(c, ReasonBadValue, decShow(s), "not a valid date")
}

func decDateText(c *cdcsync.Column, s string) (any, error) {
	days, err := decDateDays(c, s)
	if err != nil {
		return nil, err
	}
	return days, nil
}

// decDateDays parses "YYYY-MM-DD" to days since 1970-01-01.
func decDateDays(c *cdcsync.Column, s string) (int32, error) {
	y, m, d, rest, ok := decParseDate(strings.TrimSpace(s))
	if !ok || rest != "" {
		return 0, decErr(c, ReasonBadValue, decShow(s), "not a date (YYYY-MM-DD)")
	}
	if m == 0 || d == 0 {
		return 0, decZeroDate(c, ReasonZeroDate, s)
	}
	if !decValidYMD(y, m, d) {
		return 0, decInvalidDate(c, s, m, d)
	}
	return int32(decDaysFromCivil(y, m, d)), nil
}

func decDatetimeText(c *cdcsync.Column, s string) (any, error) {
	us, err := decDatetimeMicros(c, s)
	if err != nil {
		return nil, err
	}
	return us, nil
}

// decDatetimeMicros parses "YYYY-MM-DD HH:MM:SS[.f{1,6}]" (or a bare date)
// to microseconds since 1970-01-01 00:00:00, the text taken as UTC.
func decDatetimeMicros(c *cdcsync.Column, s string) (int64, error) {
	t := strings.TrimSpace(s)
	y, m, d, rest, ok := decParseDate(t)
	if !ok {
		return 0, decErr(c, ReasonBadValue, decShow(s), "not a date and time (YYYY-MM-DD HH:MM:SS[.ffffff])")
	}
	if m == 0 || d == 0 {
		return 0, decZeroDate(c, ReasonZeroDate, s)
	}
	var hh, mi, ss, us int64
	if rest != "" {
		if len(rest) < 9 || (rest[0] != ' ' && rest[0] != 'T') || rest[3] != ':' || rest[6] != ':' {
			return 0, decErr(c, ReasonBadValue, decShow(s), "not a date and time (YYYY-MM-DD HH:MM:SS[.ffffff])")
		}
		var ok1, ok2, ok3 bool
		hh, ok1 = decDigits(rest[1:3])
		mi, ok2 = decDigits(rest[4:6])
		ss, ok3 = decDigits(rest[7:9])
		if !ok1 || !ok2 || !ok3 || hh > 23 || mi > 59 || ss > 59 {
			return 0, decErr(c, ReasonBadValue, decShow(s), "not a valid time of day")
		}
		if f := rest[9:]; f != "" {
			if f[0] != '.' || len(f) < 2 || len(f) > 7 {
				return 0, decErr(c, ReasonBadValue, decShow(s), "bad fractional seconds")
			}
			digits := f[1:]
			n, ok := decDigits(digits)
			if !ok {
				return 0, decErr(c, ReasonBadValue, decShow(s), "bad fractional seconds")
			}
			for i := len(digits); i < 6; i++ {
				n *= 10
			}
			us = n
		}
	}
	if !decValidYMD(y, m, d) {
		return 0, decInvalidDate(c, s, m, d)
	}
	days := decDaysFromCivil(y, m, d)
	return ((days*24+hh)*60+mi)*60*1e6 + ss*1e6 + us, nil
}

// decCanonicalJSON rewrites a MySQL JSON text in one canonical form, so
// that the binlog (go-mysql re-encodes the binary JSON with encoding/json:
// compact, keys sorted, doubles in Go's shortest form, or MySQL-like text
// with RenderJSONAsMySQLText) and SELECT (MySQL's own text: ", " and ": "
// separators, keys ordered by length then bytes, doubles via my_gcvt) agree:
// compact, object keys sorted by bytes, integers verbatim, other numbers as
// the shortest text of their float64 value. Strings are re-escaped by
// encoding/json (without HTML escaping). An empty document is JSON null,
// as MySQL reads it.
func decCanonicalJSON(c *cdcsync.Column, s string) (any, error) {
	if strings.TrimSpace(s) == "" {
		return "null", nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, decErr(c, ReasonBadValue, decShow(s), "not valid JSON: %v", err)
	}
	var b bytes.Buffer
	b.Grow(len(s))
	if err := decWriteJSON(&b, v); err != nil {
		return nil, decErr(c, ReasonBadValue, decShow(s), "cannot canonicalise JSON: %v", err)
	}
	return b.String(), nil
}

func decWriteJSON(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case json.Number:
		b.WriteString(decJSONNumber(string(x)))
	case string:
		decWriteJSONString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := decWriteJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			decWriteJSONString(b, k)
			b.WriteByte(':')
			if err := decWriteJSON(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("unexpected %T", v)
	}
	return nil
}

func decWriteJSONString(b *bytes.Buffer, s string) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode appends a newline
}

// decJSONNumber writes a JSON number in a canonical form of its value.
// Numbers with a fraction or an exponent are doubles in MySQL JSON: they are
// reduced to the shortest digits of their float64 value first, so that two
// texts of the same double agree. Integers keep all their digits. The value
// D×10^E (D without trailing zeros) is then written as an integer when
// 0 <= E and it has at most 21 digits, as a plain decimal when it is at
// least 0.000001 in magnitude, else as d.ddde±N.
func decJSONNumber(s string) string {
	if strings.ContainsAny(s, ".eE") {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			s = strconv.FormatFloat(f, 'e', -1, 64)
		}
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	mant, expText, _ := strings.Cut(strings.ToLower(s), "e")
	exp := 0
	if expText != "" {
		e, err := strconv.Atoi(expText)
		if err != nil {
			return s
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	digits = trimmed
	if digits == "" {
		return "0"
	}
	var out string
	switch {
	case exp >= 0 && len(digits)+exp <= 21:
		out = digits + strings.Repeat("0", exp)
	case exp < 0 && len(digits)+exp >= -5:
		point := len(digits) + exp // digits before the point
		if point > 0 {
			out = digits[:point] + "." + digits[point:]
		} else {
			out = "0." + strings.Repeat("0", -point) + digits
		}
	default:
		e := exp + len(digits) - 1
		out = digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		out += "e" + strconv.Itoa(e)
	}
	if neg {
		out = "-" + out
	}
	return out
}
