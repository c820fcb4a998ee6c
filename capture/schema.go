package capture

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

// ListTables returns the base tables (information_schema.TABLES with
// TABLE_TYPE 'BASE TABLE': no views, sequences or MariaDB system-versioned
// tables) that src selects, sorted by database and table.
func ListTables(ctx context.Context, conn *client.Conn, src *config.Source) ([]cdcsync.TableID, error) {
	all, err := schemaAllTables(ctx, conn)
	if err != nil {
		return nil, err
	}
	var out []cdcsync.TableID
	for _, id := range all {
		if src.Selects(id.Database, id.Table) {
			out = append(out, id)
		}
	}
	return out, nil
}

// schemaAllTables lists every base table outside the system schemas, sorted.
func schemaAllTables(ctx context.Context, conn *client.Conn) ([]cdcsync.TableID, error) {
	r, err := connQuery(ctx, conn, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES"+
		" WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')")
	if err != nil {
		return nil, fmt.Errorf("list the tables in information_schema.TABLES: %w", err)
	}
	var out []cdcsync.TableID
	for _, row := range r.Values {
		out = append(out, cdcsync.TableID{Database: connText(row[0]), Table: connText(row[1])})
	}
	schemaSortIDs(out)
	return out, nil
}

func schemaSortIDs(ids []cdcsync.TableID) {
	slices.SortFunc(ids, func(a, b cdcsync.TableID) int {
		if c := strings.Compare(a.Database, b.Database); c != 0 {
			return c
		}
		return strings.Compare(a.Table, b.Table)
	})
}

// LoadSchema reads the columns of one table from information_schema.COLUMNS
// (in ORDINAL_POSITION order) and its primary key from KEY_COLUMN_USAGE (in
// key order), and maps every column with MapColumn. A column cdcsync cannot
// map yet keeps Kind == KindInvalid; LoadSchema does not fail on it, so that
// Preflight can report all of them. It fails on query errors and when the
// table does not exist.
func LoadSchema(ctx context.Context, conn *client.Conn, id cdcsync.TableID) (*cdcsync.TableSchema, error) {
	m, err := LoadSchemas(ctx, conn, []cdcsync.TableID{id})
	if err != nil {
		return nil, err
	}
	return m[0], nil
}

// LoadSchemas is LoadSchema for many tables with two queries per database,
// which matters with thousands of tables. The schemas are returned in the
// order of ids. It fails when one of the tables does not exist.
func LoadSchemas(ctx context.Context, conn *client.Conn, ids []cdcsync.TableID) ([]*cdcsync.TableSchema, error) {
	out, _, err := schemaLoad(ctx, conn, ids)
	return out, err
}

// schemaLoad is LoadSchemas that also returns, per table, the errors of
// MapColumn for the columns it left at KindInvalid (with Table set).
func schemaLoad(ctx context.Context, conn *client.Conn, ids []cdcsync.TableID) ([]*cdcsync.TableSchema, map[cdcsync.TableID][]*UnsupportedColumnError, error) {
	byDB := map[string]map[string]*cdcsync.TableSchema{}
	var dbs []string
	for _, id := range ids {
		if byDB[id.Database] == nil {
			byDB[id.Database] = map[string]*cdcsync.TableSchema{}
			dbs = append(dbs, id.Database)
		}
		byDB[id.Database][id.Table] = &cdcsync.TableSchema{ID: id}
	}
	unsupported := map[cdcsync.TableID][]*UnsupportedColumnError{}
	for _, db := range dbs {
		if err := schemaLoadDB(ctx, conn, db, byDB[db], unsupported); err != nil {
			return nil, nil, err
		}
	}
	out := make([]*cdcsync.TableSchema, len(ids))
	for i, id := range ids {
		s := byDB[id.Database][id.Table]
		if len(s.Columns) == 0 {
			return nil, nil, fmt.Errorf("table %s does not exist (or the user cannot see it): check source.include and that the user has SELECT on it", id)
		}
		out[i] = s
	}
	return out, unsupported, nil
}

// schemaLoadDB fills the schemas of the tables of one database. Querying a
// whole database and filtering here keeps the number of round trips small.
func schemaLoadDB(ctx context.Context, conn *client.Conn, db string, tables map[string]*cdcsync.TableSchema, unsupported map[cdcsync.TableID][]*UnsupportedColumnError) error {
	one := ""
	var args []any
	args = append(args, db)
	if len(tables) == 1 {
		for t := range tables {
			one = " AND TABLE_NAME = ?"
			args = append(args, t)
		}
	}
	r, err := connQuery(ctx, conn, "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, CHARACTER_SET_NAME"+
		" FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ?"+one+" ORDER BY TABLE_NAME, ORDINAL_POSITION", args...)
	if err != nil {
		return fmt.Errorf("read the columns of database %s from information_schema.COLUMNS: %w", db, err)
	}
	for _, row := range r.Values {
		s := tables[connText(row[0])]
		if s == nil {
			continue
		}
		c := cdcsync.Column{
			Name:       connText(row[1]),
			DataType:   strings.ToLower(connText(row[2])),
			ColumnType: connText(row[3]),
			Nullable:   strings.EqualFold(connText(row[4]), "YES"),
		}
		// An unsupported column keeps KindInvalid; Preflight reports it.
		if err := MapColumn(&c, connText(row[5])); err != nil {
			var ue *UnsupportedColumnError
			if errors.As(err, &ue) {
				ue.Table = s.ID
				unsupported[s.ID] = append(unsupported[s.ID], ue)
			}
		}
		s.Columns = append(s.Columns, c)
	}
	r, err = connQuery(ctx, conn, "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE"+
		" WHERE TABLE_SCHEMA = ?"+one+" AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY TABLE_NAME, ORDINAL_POSITION", args...)
	if err != nil {
		return fmt.Errorf("read the primary keys of database %s from information_schema.KEY_COLUMN_USAGE: %w", db, err)
	}
	for _, row := range r.Values {
		s := tables[connText(row[0])]
		if s == nil {
			continue
		}
		name := connText(row[1])
		i := s.ColumnIndex(name)
		if i < 0 {
			return fmt.Errorf("table %s: primary key column %q is not among the table's columns (the table changed while it was read?): retry", s.ID, name)
		}
		s.PrimaryKey = append(s.PrimaryKey, i)
	}
	return nil
}

// UnsupportedColumnError is the error of MapColumn for a column cdcsync
// cannot map. Table is zero when it comes from MapColumn; Preflight sets it
// so that the message names the table.
type UnsupportedColumnError struct {
	Table      cdcsync.TableID
	Column     string
	ColumnType string // information_schema COLUMN_TYPE
	Charset    string // set when the character set is what is unsupported
	Detail     string // why, when it is neither the type nor the character set
}

func (e *UnsupportedColumnError) Error() string {
	col, excl := e.Column, `"!db.table"`
	if e.Table != (cdcsync.TableID{}) {
		col = e.Table.String() + "." + e.Column
		excl = strconv.Quote("!" + e.Table.String())
	}
	switch {
	case e.Detail != "":
		return fmt.Sprintf("column %s has type %s: %s; exclude the table with %s in source.include or change the column",
			col, e.ColumnType, e.Detail, excl)
	case e.Charset != "":
		return fmt.Sprintf("column %s has type %s with character set %s, which cdcsync does not decode (see docs/types.md for the character sets it does); exclude the table with %s in source.include or convert the column to utf8mb4",
			col, e.ColumnType, e.Charset, excl)
	}
	return fmt.Sprintf("column %s has type %s, which cdcsync does not map; exclude the table with %s in source.include or drop the column",
		col, e.ColumnType, excl)
}

// MapColumn sets c.Kind, c.Unsigned, c.Precision and c.Scale from
// c.DataType and c.ColumnType (charset is information_schema's
// CHARACTER_SET_NAME, empty for non-text columns). For a type cdcsync does
// not map it leaves c.Kind at KindInvalid and returns an
// *UnsupportedColumnError. docs/types.md explains each choice.
//
//	tinyint, smallint, mediumint (signed or unsigned), int, year -> int32
//	int unsigned, bigint, bit(2..63)                         -> int64
//	bigint unsigned, bit(64)                                 -> decimal(20,0), so it never overflows
//	bit(1)                                                   -> boolean
//	decimal(p,s) with p <= 38                                -> decimal(p,s)
//	decimal(p,s) with p > 38                                 -> string with the exact decimal text (Precision/Scale still set)
//	float / double                                           -> float32 / float64
//	char, varchar, *text                                     -> string (UTF-8; see charset.go for the character sets)
//	enum, set                                                -> string: the label, or the labels joined by ","
//	json (MySQL) and MariaDB JSON (a longtext)               -> string
//	inet4, inet6, uuid (MariaDB)                             -> string, as the server prints them
//	binary, varbinary, *blob                                 -> binary
//	geometry, point, linestring, polygon, multi*, *collection -> binary: WKB, without MySQL's 4-byte SRID prefix
//	date / datetime / timestamp                              -> date / timestamp / timestamptz
//	time                                                     -> time: int64 microseconds (an Iceberg long)
//
// A text column in a character set other than the UTF-8 family and ascii
// gets " character set <name>" appended to c.ColumnType (once), which is how
// the decoders learn the encoding of the binlog's bytes; when charset is
// empty, that suffix names it.
func MapColumn(c *cdcsync.Column, charset string) error {
	dt := strings.ToLower(strings.TrimSpace(c.DataType))
	base := c.ColumnType
	if schemaIsText(dt) {
		var suffix string
		base, suffix = schemaSplitCharset(c.ColumnType)
		if charset == "" {
			charset = suffix
		}
	}
	charset = strings.ToLower(strings.TrimSpace(charset))
	c.ColumnType = base
	ct := strings.ToLower(base)
	c.Kind, c.Precision, c.Scale = cdcsync.KindInvalid, 0, 0
	c.Unsigned = strings.Contains(ct, "unsigned") || strings.Contains(ct, "zerofill")
	switch dt {
	case "tinyint", "smallint", "mediumint":
		c.Kind = cdcsync.KindInt32
	case "year":
		c.Kind = cdcsync.KindInt32
		c.Unsigned = true // as the table map's signedness says
	case "int", "integer":
		c.Kind = cdcsync.KindInt32
		if c.Unsigned {
			c.Kind = cdcsync.KindInt64
		}
	case "bigint":
		c.Kind = cdcsync.KindInt64
		if c.Unsigned {
			c.Kind, c.Precision, c.Scale = cdcsync.KindDecimal, 20, 0
		}
	case "bit":
		switch n := max(schemaFixedLength(ct), 1); {
		case n == 1:
			c.Kind = cdcsync.KindBool
		case n < 64:
			c.Kind = cdcsync.KindInt64
		case n == 64:
			c.Kind, c.Precision, c.Scale = cdcsync.KindDecimal, 20, 0
		}
	case "decimal", "numeric", "fixed":
		p, s, ok := schemaPrecScale(ct)
		if !ok {
			break
		}
		c.Precision, c.Scale = p, s
		if p <= 38 {
			c.Kind = cdcsync.KindDecimal
		} else {
			c.Kind = cdcsync.KindString
		}
	case "float":
		c.Kind = cdcsync.KindFloat32
	case "double", "double precision", "real":
		c.Kind = cdcsync.KindFloat64
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
		if charset == "" || !charsetSupported(charset) {
			cs := charset
			if cs == "" {
				cs = "unknown"
			}
			return &UnsupportedColumnError{Column: c.Name, ColumnType: c.ColumnType, Charset: cs}
		}
		c.Kind = cdcsync.KindString
		if !charsetUTF8(charset) {
			c.ColumnType = base + " character set " + charset
		}
	case "enum", "set":
		labels, ok := schemaLabels(base)
		if !ok {
			break
		}
		if schemaLabelsLossy(labels, charset) {
			c.Unsigned = false
			return &UnsupportedColumnError{Column: c.Name, ColumnType: c.ColumnType,
				Detail: "a label holds \"?\", which is how information_schema shows characters outside Unicode's Basic Multilingual Plane (emoji), " +
					"so cdcsync cannot know the labels the binlog's numbers stand for"}
		}
		c.Kind = cdcsync.KindString
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		c.Kind = cdcsync.KindBinary
	case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
		"geometrycollection", "geomcollection":
		c.Kind = cdcsync.KindBinary
	case "json", "inet4", "inet6", "uuid":
		c.Kind = cdcsync.KindString
	case "date":
		c.Kind = cdcsync.KindDate
	case "datetime":
		c.Kind = cdcsync.KindTimestamp
	case "timestamp":
		c.Kind = cdcsync.KindTimestampTZ
	case "time":
		c.Kind = cdcsync.KindTime
	}
	if c.Kind == cdcsync.KindInvalid {
		c.Unsigned = false
		return &UnsupportedColumnError{Column: c.Name, ColumnType: c.ColumnType}
	}
	return nil
}

// schemaIsText reports whether a data type is one whose column type may
// carry the character set suffix of MapColumn.
func schemaIsText(dt string) bool {
	switch dt {
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
		return true
	}
	return false
}

// schemaSplitCharset splits the " character set <name>" suffix MapColumn
// appends to the type of a text column off its column type (only text column
// types have it; an ENUM label may hold the same words).
func schemaSplitCharset(ct string) (base, charset string) {
	const sep = " character set "
	if len(ct) <= len(sep) {
		return ct, ""
	}
	i := strings.LastIndex(ct, sep)
	if i < 0 {
		return ct, ""
	}
	return ct[:i], ct[i+len(sep):]
}

// schemaLabels parses the labels of "enum('a','b')" or "set(...)" as
// information_schema writes them: a quote in a label is written twice, and a
// backslash, newline, carriage return and NUL as \\, \n, \r and \0 (other
// backslash escapes are read too).
func schemaLabels(ct string) ([]string, bool) {
	open := strings.IndexByte(ct, '(')
	if open < 0 || !strings.HasSuffix(ct, ")") {
		return nil, false
	}
	s := ct[open+1 : len(ct)-1]
	var labels []string
	for len(s) > 0 {
		if s[0] != '\'' {
			return nil, false
		}
		var b strings.Builder
		i := 1
		for {
			if i >= len(s) {
				return nil, false
			}
			c := s[i]
			if c == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					b.WriteByte('\'')
					i += 2
					continue
				}
				i++
				break
			}
			if c == '\\' && i+1 < len(s) {
				switch e := s[i+1]; e {
				case 'n':
					b.WriteByte('\n')
				case 'r':
					b.WriteByte('\r')
				case 't':
					b.WriteByte('\t')
				case '0':
					b.WriteByte(0)
				case 'Z':
					b.WriteByte(0x1a)
				case 'b':
					b.WriteByte('\b')
				default:
					b.WriteByte(e)
				}
				i += 2
				continue
			}
			b.WriteByte(c)
			i++
		}
		labels = append(labels, b.String())
		s = s[i:]
		if len(s) > 0 {
			if s[0] != ',' {
				return nil, false
			}
			s = s[1:]
		}
	}
	return labels, len(labels) > 0
}

// schemaQuoteLabel writes an ENUM or SET label as information_schema does
// in COLUMN_TYPE (schemaLabels reads it back): quoted, a quote written twice,
// and a backslash, newline, carriage return and NUL escaped. A
// column type built from a DDL statement must quote its labels so, to match
// the one LoadSchema reads.
func schemaQuoteLabel(label string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(label); i++ {
		switch c := label[i]; c {
		case '\'':
			b.WriteString("''")
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case 0:
			b.WriteString(`\0`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// schemaLabelsLossy reports whether labels read from information_schema
// may have lost characters: it shows text in utf8mb3, with "?" for every
// character outside the Basic Multilingual Plane, which only these
// character sets can hold.
func schemaLabelsLossy(labels []string, charset string) bool {
	switch charset {
	case "utf8mb4", "utf16", "utf16le", "utf32":
	default:
		return false
	}
	for _, l := range labels {
		if strings.Contains(l, "?") {
			return true
		}
	}
	return false
}

var schemaLabelCache sync.Map // column type -> []string

// schemaLabelsOf returns the labels of an ENUM or SET column type, parsed
// once per type.
func schemaLabelsOf(ct string) ([]string, bool) {
	if v, ok := schemaLabelCache.Load(ct); ok {
		return v.([]string), true
	}
	labels, ok := schemaLabels(ct)
	if !ok {
		return nil, false
	}
	schemaLabelCache.Store(ct, labels)
	return labels, true
}

// schemaPrecScale parses "decimal(10,2) unsigned".
func schemaPrecScale(ct string) (p, s int, ok bool) {
	open := strings.IndexByte(ct, '(')
	end := strings.IndexByte(ct, ')')
	if open < 0 || end < open {
		return 10, 0, true // DECIMAL without arguments is DECIMAL(10,0)
	}
	ps, ss, hasScale := strings.Cut(ct[open+1:end], ",")
	p, err := strconv.Atoi(strings.TrimSpace(ps))
	if err != nil || p <= 0 {
		return 0, 0, false
	}
	if hasScale {
		s, err = strconv.Atoi(strings.TrimSpace(ss))
		if err != nil || s < 0 || s > p {
			return 0, 0, false
		}
	}
	return p, s, true
}

// schemaFixedLength parses the length of "binary(16)"; 0 when absent.
func schemaFixedLength(ct string) int {
	open := strings.IndexByte(ct, '(')
	end := strings.IndexByte(ct, ')')
	if open < 0 || end < open {
		return 0
	}
	n, err := strconv.Atoi(ct[open+1 : end])
	if err != nil {
		return 0
	}
	return n
}
