// Package cdcsync holds the domain types shared by every part of cdcsync:
// tables, their schemas, row changes, whole transactions and binlog
// positions. It imports no other cdcsync package, so capture/, merge/ and
// lake/ can all speak it without depending on each other.
package cdcsync

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// TableID names a MySQL table.
type TableID struct {
	Database string
	Table    string
}

func (t TableID) String() string { return t.Database + "." + t.Table }

// Kind is the canonical value kind of a column. Each kind has exactly one Go
// representation, used by both the snapshot and the binlog path, so the two
// paths always produce identical values.
type Kind int

const (
	KindInvalid     Kind = iota
	KindInt32            // int32
	KindInt64            // int64
	KindDecimal          // string, plain decimal notation with exactly Scale fraction digits
	KindFloat32          // float32
	KindFloat64          // float64
	KindString           // string (UTF-8)
	KindBinary           // []byte
	KindDate             // int32, days since 1970-01-01
	KindTimestamp        // int64, microseconds since 1970-01-01 of the wall clock (DATETIME)
	KindTimestampTZ      // int64, microseconds since the Unix epoch, UTC (TIMESTAMP)
	KindBool             // bool (BIT(1))
	KindTime             // int64, signed microseconds, any magnitude (TIME: -838:59:59 to 838:59:59)
)

var kindNames = [...]string{"invalid", "int32", "int64", "decimal", "float32", "float64", "string", "binary", "date", "timestamp", "timestamptz", "boolean", "time"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Column is one column of a MySQL table and the kind cdcsync maps it to.
type Column struct {
	Name     string
	DataType string // information_schema DATA_TYPE, lower case: "int", "varchar", ...
	// ColumnType is information_schema's COLUMN_TYPE: "int(10) unsigned",
	// "decimal(10,2)", "enum('a','b')", ... For a text column in a character
	// set other than utf8mb4, utf8mb3 and ascii, capture.MapColumn appends
	// " character set <name>" ("varchar(10) character set latin1"), so that
	// the schema names the encoding of the binlog's bytes wherever it is kept.
	ColumnType string
	Kind       Kind
	Nullable   bool
	Unsigned   bool
	Precision  int // DECIMAL precision, or 20 for BIGINT UNSIGNED and BIT(64)
	Scale      int // DECIMAL scale
}

// Spatial says whether c is of a spatial type (GEOMETRY, POINT, ...),
// whose values are WKB.
func (c *Column) Spatial() bool {
	switch strings.ToLower(c.DataType) {
	case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
		"geometrycollection", "geomcollection":
		return true
	}
	return false
}

// TableSchema is the shape of one MySQL table.
type TableSchema struct {
	ID         TableID
	Columns    []Column
	PrimaryKey []int // indexes into Columns, in key order
}

// ColumnIndex returns the index of the named column, or -1.
func (s *TableSchema) ColumnIndex(name string) int {
	for i, c := range s.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// Same reports whether two schemas have the same columns (name, type,
// nullability, precision) and primary key.
func (s *TableSchema) Same(o *TableSchema) bool {
	if len(s.Columns) != len(o.Columns) || !slices.Equal(s.PrimaryKey, o.PrimaryKey) {
		return false
	}
	for i := range s.Columns {
		x, y := s.Columns[i], o.Columns[i]
		if x.Name != y.Name || x.Kind != y.Kind || !strings.EqualFold(x.ColumnType, y.ColumnType) ||
			!strings.EqualFold(x.DataType, y.DataType) || x.Nullable != y.Nullable || x.Precision != y.Precision || x.Scale != y.Scale {
			return false
		}
	}
	return true
}

// KeyText names a row by its primary key, for messages: "id=5, region=eu",
// each value cut to 64 bytes.
func (s *TableSchema) KeyText(row Row) string {
	parts := make([]string, 0, len(s.PrimaryKey))
	for _, k := range s.PrimaryKey {
		if k < len(row) && k < len(s.Columns) {
			parts = append(parts, s.Columns[k].Name+"="+ValueText(row[k]))
		}
	}
	return strings.Join(parts, ", ")
}

// ValueText prints a value for a message, cut to 64 bytes.
func ValueText(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return s
}

// Row holds one canonical value per column (nil for NULL), in column order.
type Row []any

// MemSize estimates the Go heap a decoded row holds: its slice of
// interfaces, each boxed value (a string's header, a time.Time, a number)
// and the bytes of its strings. epoch.max_bytes is counted in it, so it
// must track what the decoders really allocate (TestRowMemSize in capture
// measures it).
func (r Row) MemSize() int {
	n := 24 + 16*len(r) // slice header and interface words
	for _, v := range r {
		switch v := v.(type) {
		case nil, bool:
		case string:
			n += 16 + len(v)
		case []byte:
			n += 24 + len(v)
		case time.Time:
			n += 24
		case int8, uint8, int16, uint16, int32, uint32, float32:
			n += 4
		case int64, uint64, int, uint, float64:
			n += 8
		default:
			n += 16
		}
	}
	return n
}

// ChangeMemSize is the Go heap a Change holds besides its row images.
const ChangeMemSize = 64

// Op is the kind of a row change.
type Op uint8

const (
	OpInsert Op = iota + 1
	OpUpdate
	OpDelete
)

func (o Op) String() string {
	switch o {
	case OpInsert:
		return "insert"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	}
	return "unknown"
}

// Change is one row change. Before is set for updates and deletes, After for
// inserts and updates; both are full row images.
type Change struct {
	Table  TableID
	Op     Op
	Before Row
	After  Row
}

// Txn is one whole committed MySQL transaction, or a fragment of one.
//
// A transaction whose changes outgrow the source's fragment size arrives
// in fragments, in order, with nothing else between them: every fragment
// but the last has More set, carries some of the changes and the GTID,
// and its Pos is a position inside the transaction (after its start,
// before its commit), so that an Order compares it with committed
// positions as it would the whole transaction; Time and Resume are set on
// the last fragment only. The pipeline never commits part of a
// transaction: a fragmented one is written out as it arrives (spilled)
// and committed whole, or not at all.
type Txn struct {
	GTID string   // the transaction's own GTID, empty when GTIDs are off
	Pos  Position // the position right after the transaction's commit
	// More marks a fragment that more fragments of the same transaction
	// follow.
	More bool
	// Resume is where a restart must read the binlog from when it resumes
	// after this transaction: before the oldest XA transaction that is
	// prepared but not yet committed or rolled back, whose rows only the
	// binlog holds. Zero when none is open (Pos is enough).
	Resume  Position
	Time    time.Time // commit time written by the server
	Changes []Change
	Bytes   int // Go heap of the decoded changes (Row.MemSize), for sealing epochs
	// DDL holds the effects of a DDL statement (or of a rows event cdcsync
	// cannot follow) on mirrored tables. The pipeline commits everything
	// before the transaction first, then applies them, then the changes.
	DDL []SchemaChange
	// Progress marks no transaction but the stream's progress between
	// transactions (a binlog rotation, a heartbeat while idle): the binlog
	// has been read up to Pos. Only Pos is set.
	Progress bool
	// Idle, on a progress marker, says that the server had nothing newer
	// to send (a heartbeat): the stream has caught up with it.
	Idle bool
}

// CopyState is the progress of a table's initial copy, which runs in
// primary-key chunks while the binlog streams. It is committed with every
// snapshot of the table while the copy runs, so a restart resumes after the
// last chunk committed.
type CopyState struct {
	// After is the bound after which the next chunk starts ("" when no chunk
	// is committed yet); capture encodes it and only capture reads it.
	After string
	// Rows counts the rows the committed chunks copied.
	Rows int64
	// Done is set on the commit that completes the copy; later commits carry
	// no copy state.
	Done bool
}

// Delta is one table's share of an epoch.
type Delta struct {
	Epoch int64
	// From, when not zero, is an earlier epoch: the commit also holds
	// transactions of epochs From to Epoch-1, whose commits the table
	// skipped (it was still committing, or it was behind the others after
	// a restart). A cut of those epochs would be inconsistent.
	From int64
	Pos  Position // the position the table is at once committed
	// Time is when the epoch's last transaction committed in MySQL (zero
	// for an epoch of copy progress alone).
	Time time.Time
	// Deletes are equality deletes on the primary key (each row carries the
	// key and the partition source columns of the image it deletes).
	Deletes []Row
	Rows    []Row // rows to insert
	// Spill, when not zero, names what the sink already wrote of this
	// epoch for the table (Spiller): Deletes and Rows are the rest, and
	// the commit adds both.
	Spill int64
	// Copy is the table's initial-copy progress while the copy runs (and on
	// the commit that completes it, with Done set); nil otherwise. It must be
	// committed with the rows.
	Copy *CopyState
}
