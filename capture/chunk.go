package capture

// The chunked initial copy (DBLog/Flink CDC style). A table is read in
// primary-key ranges, each in a consistent snapshot of its own, so no lock is
// taken, a large table is not held in one transaction for hours, and a copy
// resumes after the last range it committed. The coordinator in merge/
// reconciles each chunk with the binlog through the position ReadChunk
// reports.
//
// Ranges are compared by the server, never in Go: a bound is the primary key
// of a row as the server printed it, and predicates send it back as a literal
// the column's own type and collation compare. Key types whose printed form
// does not compare exactly like the stored value make a table one chunk.
//
// # Bounds
//
// A bound is stored in Iceberg snapshot summaries and read back by later
// versions, so its form is fixed. Version 1 is JSON:
//
//	{"v":1,"key":[{"int":"42"},{"str":"Ärger"}]}
//
// with one element per primary-key column, in key order. An element is an
// object with one member, whose name is the column's bound type and whose
// value is a JSON string:
//
//   - "int": TINYINT to BIGINT, signed or unsigned: the decimal integer,
//     canonical (no sign on zero, no leading zeros);
//   - "dec": DECIMAL/NUMERIC: the value as the server prints it
//     ([-]digits[.digits]);
//   - "str": CHAR/VARCHAR: the text in UTF-8 (as the server converts it to
//     utf8mb4);
//   - "bin": BINARY/VARBINARY: the bytes in lower-case hex (BINARY(n) with
//     its 0x00 padding);
//   - "date": YYYY-MM-DD; "datetime": YYYY-MM-DD hh:mm:ss[.ffffff];
//     "timestamp": the same, in UTC; "time": [-]hh:mm:ss[.ffffff] (hours up
//     to 838).
//
// "" is the start of the table, not a bound. A decoder that meets another
// version or a bound that does not fit the table's key refuses it.

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

// chunkBoundVersion is the version of the bound encoding written by
// encodeChunkBound; decodeChunkBound reads only this version.
const chunkBoundVersion = 1

// chunkPingAfter is how long a pooled connection may sit idle before it is
// pinged on reuse: a server's wait_timeout may have closed it meanwhile.
const chunkPingAfter = 10 * time.Second

// Bound types, the member names of a bound element.
const (
	chunkInt       = "int"
	chunkDec       = "dec"
	chunkStr       = "str"
	chunkBin       = "bin"
	chunkDate      = "date"
	chunkDatetime  = "datetime"
	chunkTimestamp = "timestamp"
	chunkTime      = "time"
)

// ChunkReader reads tables in primary-key chunks, each chunk in a consistent
// snapshot whose binlog position it reports. Safe for concurrent use; it keeps
// a pool of at most conns connections, opened lazily.
type ChunkReader struct {
	src        *config.Source
	flavor     string
	serverUUID string
	values     *ValuePolicy

	slots     chan struct{} // one token per connection in use or being opened
	pingAfter time.Duration // chunkPingAfter; tests shorten it
	mu        sync.Mutex
	idle      []chunkConn
	done      bool

	// afterBegin, when set (tests only), runs once a chunk's snapshot is
	// open and its position read, before its SELECT.
	afterBegin func()
}

type chunkConn struct {
	conn *client.Conn
	used time.Time // when it went back to the pool
}

// NewChunkReader returns a reader of src's tables. flavor and serverUUID
// fill the positions it reports; values applies the types: policies (nil:
// the defaults). conns below 1 is taken as 1.
func NewChunkReader(src *config.Source, flavor, serverUUID string, values *ValuePolicy, conns int) *ChunkReader {
	conns = max(conns, 1)
	return &ChunkReader{src: src, flavor: flavor, serverUUID: serverUUID, values: values,
		slots: make(chan struct{}, conns), pingAfter: chunkPingAfter}
}

// Close closes the pooled connections; connections in use are closed when
// their call returns. Later calls fail.
func (r *ChunkReader) Close() {
	r.mu.Lock()
	idle := r.idle
	r.idle, r.done = nil, true
	r.mu.Unlock()
	for _, c := range idle {
		c.conn.Close()
	}
}

// acquire takes a connection from the pool, or opens one (running
// SnapshotSessionSQL and REPEATABLE READ) while fewer than conns are open.
func (r *ChunkReader) acquire(ctx context.Context) (*client.Conn, error) {
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		r.mu.Lock()
		if r.done {
			r.mu.Unlock()
			<-r.slots
			return nil, errors.New("the chunk reader is closed")
		}
		var c chunkConn
		ok := len(r.idle) > 0
		if ok {
			c = r.idle[len(r.idle)-1]
			r.idle = r.idle[:len(r.idle)-1]
		}
		r.mu.Unlock()
		if !ok {
			break
		}
		if time.Since(c.used) < r.pingAfter {
			return c.conn, nil
		}
		if err := chunkWithCtx(ctx, c.conn, c.conn.Ping); err == nil {
			return c.conn, nil
		}
		c.conn.Close() // gone stale; try the next one or open a new one
		if err := ctx.Err(); err != nil {
			<-r.slots
			return nil, err
		}
	}
	conn, err := Connect(ctx, r.src)
	if err != nil {
		<-r.slots
		return nil, err
	}
	stmts := append(append([]string{}, SnapshotSessionSQL...), "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
	for _, q := range stmts {
		if _, err := connQuery(ctx, conn, q); err != nil {
			conn.Close()
			<-r.slots
			return nil, fmt.Errorf("prepare a connection for the chunked copy (%s): %w", q, err)
		}
	}
	return conn, nil
}

// release returns conn to the pool, or closes it when the call that used it
// failed (its state is unknown) or the reader is closed.
func (r *ChunkReader) release(conn *client.Conn, failed bool) {
	r.mu.Lock()
	keep := !failed && !r.done
	if keep {
		r.idle = append(r.idle, chunkConn{conn: conn, used: time.Now()})
	}
	r.mu.Unlock()
	if !keep {
		conn.Close()
	}
	<-r.slots
}

// Chunkable reports whether the table's primary key can be split into ranges
// (why says why not). A table that cannot be split is read as one chunk.
func Chunkable(ts *cdcsync.TableSchema) (ok bool, why string) {
	if len(ts.PrimaryKey) == 0 {
		return false, "the table has no primary key"
	}
	for _, i := range ts.PrimaryKey {
		if i < 0 || i >= len(ts.Columns) {
			return false, fmt.Sprintf("the schema's primary key names column %d of %d", i, len(ts.Columns))
		}
		if _, why := chunkTypeOf(&ts.Columns[i]); why != "" {
			return false, why
		}
	}
	return true, ""
}

// chunkTypeOf is the bound type of a primary-key column, or why the column
// cannot bound a range: its printed value would not compare exactly like the
// stored one, or its ORDER BY would not agree with its comparisons.
func chunkTypeOf(c *cdcsync.Column) (typ, why string) {
	if c.Kind == cdcsync.KindInvalid {
		return "", fmt.Sprintf("primary-key column %s has a type cdcsync does not map (%s)", c.Name, c.ColumnType)
	}
	switch dt := strings.ToLower(c.DataType); dt {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		return chunkInt, ""
	case "decimal", "numeric", "fixed":
		return chunkDec, ""
	case "char", "varchar":
		if _, cs := schemaSplitCharset(c.ColumnType); cs != "" && !chunkCharsetExact(cs) {
			return "", fmt.Sprintf("primary-key column %s is text in character set %s, which does not convert to utf8mb4 and back unchanged, so a bound read as utf8mb4 could name another key", c.Name, cs)
		}
		return chunkStr, ""
	case "binary", "varbinary":
		return chunkBin, ""
	case "date":
		return chunkDate, ""
	case "datetime":
		return chunkDatetime, ""
	case "timestamp":
		return chunkTimestamp, ""
	case "time":
		return chunkTime, ""
	case "float", "double", "double precision", "real":
		return "", fmt.Sprintf("primary-key column %s is %s: its printed value does not compare equal to the stored one", c.Name, c.ColumnType)
	case "enum", "set":
		return "", fmt.Sprintf("primary-key column %s is %s: it sorts by the label's number, not by the label a bound would hold", c.Name, dt)
	case "tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob", "longblob":
		return "", fmt.Sprintf("primary-key column %s is %s: ORDER BY compares only its first max_sort_length bytes", c.Name, dt)
	}
	return "", fmt.Sprintf("primary-key column %s is %s; cdcsync splits only integer, DECIMAL, CHAR, VARCHAR, BINARY, VARBINARY, DATE, DATETIME, TIMESTAMP and TIME keys", c.Name, c.ColumnType)
}

// chunkCharsetExact reports whether text in charset survives the server's
// conversion to utf8mb4 and back, byte for byte: a single-byte set whose
// every byte is its own character (no byte becomes "?" or U+FFFD), or
// utf16/utf16le (which hold no lone surrogates). The UTF-8 family is not
// asked: it needs no conversion.
func chunkCharsetExact(charset string) bool {
	charset = strings.ToLower(charset)
	switch charset {
	case "utf16", "utf16le":
		return true
	}
	if _, ok := singleByteSets[charset]; !ok {
		return false
	}
	t := charsetByName(charset).single
	seen := map[rune]bool{}
	for b, r := range t {
		if r == utf8.RuneError || (r == '?' && b != '?') || seen[r] {
			return false
		}
		seen[r] = true
	}
	return true
}

// chunkBound is a decoded bound: one value per primary-key column, each the
// text of the bound type (for "bin" the bytes themselves).
type chunkBound []chunkValue

type chunkValue struct {
	typ  string
	text string
}

var (
	chunkDecRE      = regexp.MustCompile(`^-?[0-9]{1,65}(\.[0-9]{1,38})?$`)
	chunkDateRE     = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
	chunkDatetimeRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?$`)
	chunkTimeRE     = regexp.MustCompile(`^-?[0-9]{2,3}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?$`)
)

// check validates a value's text for its type.
func (v chunkValue) check() error {
	switch v.typ {
	case chunkInt:
		var canon string
		if strings.HasPrefix(v.text, "-") {
			n, err := strconv.ParseInt(v.text, 10, 64)
			if err != nil {
				return fmt.Errorf("%q is not a 64-bit integer", v.text)
			}
			canon = strconv.FormatInt(n, 10)
		} else {
			n, err := strconv.ParseUint(v.text, 10, 64)
			if err != nil {
				return fmt.Errorf("%q is not a 64-bit integer", v.text)
			}
			canon = strconv.FormatUint(n, 10)
		}
		if canon != v.text {
			return fmt.Errorf("integer %q is not written canonically (%s)", v.text, canon)
		}
	case chunkDec:
		if !chunkDecRE.MatchString(v.text) {
			return fmt.Errorf("%q is not a decimal number", v.text)
		}
	case chunkStr:
		if !utf8.ValidString(v.text) {
			return fmt.Errorf("text %q is not UTF-8", v.text)
		}
	case chunkBin:
	case chunkDate:
		if !chunkDateRE.MatchString(v.text) {
			return fmt.Errorf("%q is not a date (YYYY-MM-DD)", v.text)
		}
	case chunkDatetime, chunkTimestamp:
		if !chunkDatetimeRE.MatchString(v.text) {
			return fmt.Errorf("%q is not a %s (YYYY-MM-DD hh:mm:ss[.ffffff])", v.text, v.typ)
		}
	case chunkTime:
		if !chunkTimeRE.MatchString(v.text) {
			return fmt.Errorf("%q is not a time ([-]hh:mm:ss[.ffffff])", v.text)
		}
	default:
		return fmt.Errorf("unknown value type %q", v.typ)
	}
	return nil
}

// literal is the value as an SQL literal. Only validated values get here,
// and text and bytes travel as hex, so nothing can break out of the literal.
// Text is a coercible _utf8mb4 literal: compared with a column, it is
// converted to the column's character set and compared in the column's
// collation, exactly as ORDER BY orders the column.
func (v chunkValue) literal() string {
	switch v.typ {
	case chunkInt, chunkDec:
		return v.text
	case chunkStr:
		return "_utf8mb4 X'" + hex.EncodeToString([]byte(v.text)) + "'"
	case chunkBin:
		return "_binary X'" + hex.EncodeToString([]byte(v.text)) + "'"
	}
	// Dates and times, checked against their patterns: no quote inside.
	// TIMESTAMP text is UTC, as is the session time zone (SnapshotSessionSQL).
	return "'" + v.text + "'"
}

// show is the value for messages.
func (v chunkValue) show() string {
	switch v.typ {
	case chunkInt, chunkDec:
		return v.text
	case chunkBin:
		return "0x" + hex.EncodeToString([]byte(v.text))
	}
	return strconv.Quote(v.text)
}

func (b chunkBound) String() string {
	parts := make([]string, len(b))
	for i, v := range b {
		parts[i] = v.show()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

type chunkBoundJSON struct {
	V   int                 `json:"v"`
	Key []map[string]string `json:"key"`
}

// encodeChunkBound writes b in the version 1 form (see the top of this file).
func encodeChunkBound(b chunkBound) (string, error) {
	j := chunkBoundJSON{V: chunkBoundVersion, Key: make([]map[string]string, len(b))}
	for i, v := range b {
		if err := v.check(); err != nil {
			return "", err
		}
		text := v.text
		if v.typ == chunkBin {
			text = hex.EncodeToString([]byte(v.text))
		}
		j.Key[i] = map[string]string{v.typ: text}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(j); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// decodeChunkBound reads a bound of table ts; "" is the start of the table
// (nil). It checks the form, the version and that every value fits its
// primary-key column.
func decodeChunkBound(ts *cdcsync.TableSchema, s string) (chunkBound, error) {
	if s == "" {
		return nil, nil
	}
	b, err := decodeChunkBoundText(ts, s)
	if err != nil {
		return nil, fmt.Errorf("the copy bound %q stored in the table's snapshot summary is malformed: %w", chunkAbbrev(s), err)
	}
	return b, nil
}

func decodeChunkBoundText(ts *cdcsync.TableSchema, s string) (chunkBound, error) {
	if !utf8.ValidString(s) {
		// encoding/json would quietly turn the bad bytes into U+FFFD.
		return nil, errors.New("it is not UTF-8")
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var j chunkBoundJSON
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("not the JSON of a bound: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("text follows the JSON object")
	}
	switch {
	case j.V == 0:
		return nil, errors.New(`it has no version ("v")`)
	case j.V > chunkBoundVersion:
		return nil, fmt.Errorf("it is version %d, written by a newer cdcsync; this one reads version %d", j.V, chunkBoundVersion)
	case j.V != chunkBoundVersion:
		return nil, fmt.Errorf("version %d is unknown; this cdcsync reads version %d", j.V, chunkBoundVersion)
	}
	if ok, why := Chunkable(ts); !ok {
		return nil, fmt.Errorf("table %s is read as one chunk (%s), so it has no bounds", ts.ID, why)
	}
	if len(j.Key) != len(ts.PrimaryKey) {
		return nil, fmt.Errorf("it has %d key values but the primary key of %s has %d columns", len(j.Key), ts.ID, len(ts.PrimaryKey))
	}
	b := make(chunkBound, len(j.Key))
	for i, m := range j.Key {
		c := &ts.Columns[ts.PrimaryKey[i]]
		want, _ := chunkTypeOf(c)
		if len(m) != 1 {
			return nil, fmt.Errorf("key value %d has %d members; it needs exactly one, named by its type", i+1, len(m))
		}
		for typ, text := range m {
			if typ != want {
				return nil, fmt.Errorf("key value %d is of type %q but column %s (%s) takes %q", i+1, typ, c.Name, c.ColumnType, want)
			}
			v := chunkValue{typ: typ, text: text}
			if typ == chunkBin {
				raw, err := hex.DecodeString(text)
				if err != nil {
					return nil, fmt.Errorf("key value %d (column %s): %q is not hex", i+1, c.Name, text)
				}
				v.text = string(raw)
			}
			if err := v.check(); err != nil {
				return nil, fmt.Errorf("key value %d (column %s): %w", i+1, c.Name, err)
			}
			b[i] = v
		}
	}
	return b, nil
}

func chunkAbbrev(s string) string {
	if len(s) > 200 {
		return s[:197] + "..."
	}
	return s
}

// chunkValueOf turns a primary-key value of a text-protocol SELECT into a
// bound value of column c.
func chunkValueOf(c *cdcsync.Column, typ string, fv mysql.FieldValue) (chunkValue, error) {
	v := chunkValue{typ: typ}
	switch fv.Type {
	case mysql.FieldValueTypeNull:
		return v, fmt.Errorf("primary-key column %s is NULL", c.Name)
	case mysql.FieldValueTypeSigned, mysql.FieldValueTypeUnsigned:
		if typ != chunkInt {
			return v, fmt.Errorf("primary-key column %s (%s) came back as an integer", c.Name, c.ColumnType)
		}
		v.text = connText(fv)
	case mysql.FieldValueTypeString:
		v.text = string(fv.AsString())
	default:
		return v, fmt.Errorf("primary-key column %s (%s) came back as a floating-point number", c.Name, c.ColumnType)
	}
	if err := v.check(); err != nil {
		return v, fmt.Errorf("primary-key column %s (%s) cannot bound a chunk: %w", c.Name, c.ColumnType, err)
	}
	return v, nil
}

// chunkLexPred is the predicate key op b for the primary key cols, op ">"
// or "<=", expanded lexicographically so that the optimizer scans a range of
// PRIMARY: for key > (x, y): (a > x) OR (a = x AND b > y); for key <= (x, y):
// (a < x) OR (a = x AND b <= y).
func chunkLexPred(cols []string, b chunkBound, op string) string {
	strict := op
	if op == "<=" {
		strict = "<"
	}
	terms := make([]string, len(cols))
	for i := range cols {
		var and []string
		for j := 0; j < i; j++ {
			and = append(and, cols[j]+" = "+b[j].literal())
		}
		last := strict
		if i == len(cols)-1 {
			last = op
		}
		and = append(and, cols[i]+" "+last+" "+b[i].literal())
		terms[i] = "(" + strings.Join(and, " AND ") + ")"
	}
	return strings.Join(terms, " OR ")
}

// chunkKeyCols returns the quoted primary-key columns of ts.
func chunkKeyCols(ts *cdcsync.TableSchema) []string {
	cols := make([]string, len(ts.PrimaryKey))
	for i, k := range ts.PrimaryKey {
		cols[i] = QuoteIdent(ts.Columns[k].Name)
	}
	return cols
}

func chunkTable(ts *cdcsync.TableSchema) string {
	return QuoteIdent(ts.ID.Database) + "." + QuoteIdent(ts.ID.Table)
}

// chunkWhere is the WHERE clause (with its keyword, or "") of the rows
// after < key <= hi; nil bounds are open.
func chunkWhere(ts *cdcsync.TableSchema, after, hi chunkBound) string {
	cols := chunkKeyCols(ts)
	var preds []string
	if after != nil {
		preds = append(preds, "("+chunkLexPred(cols, after, ">")+")")
	}
	if hi != nil {
		preds = append(preds, "("+chunkLexPred(cols, hi, "<=")+")")
	}
	if len(preds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(preds, " AND ")
}

// chunkNextBoundSQL selects the keys of the rows-th and the next row after
// `after` in key order. FORCE INDEX keeps the order the index's, so ORDER
// BY never falls back to a sort that could compare differently.
func chunkNextBoundSQL(ts *cdcsync.TableSchema, after chunkBound, rows int) string {
	cols := chunkKeyCols(ts)
	list := strings.Join(cols, ", ")
	return fmt.Sprintf("SELECT %s FROM %s FORCE INDEX (PRIMARY)%s ORDER BY %s LIMIT 2 OFFSET %d",
		list, chunkTable(ts), chunkWhere(ts, after, nil), list, rows-1)
}

// chunkReadSQL selects every column of the rows after < key <= hi.
func chunkReadSQL(ts *cdcsync.TableSchema, after, hi chunkBound) string {
	where := chunkWhere(ts, after, hi)
	hint := ""
	if where != "" {
		hint = " FORCE INDEX (PRIMARY)"
	}
	return fmt.Sprintf("SELECT %s FROM %s%s%s", SelectList(ts), chunkTable(ts), hint, where)
}

// chunkRange describes a chunk for messages.
func chunkRange(after, hi chunkBound) string {
	from := "from the start of the table"
	if after != nil {
		from = "after key " + after.String()
	}
	to := "to the end of the table"
	if hi != nil {
		to = "up to key " + hi.String()
	}
	return from + " " + to
}

// Estimate returns the server's estimate of the table's row count
// (information_schema.TABLES.TABLE_ROWS), for progress reporting.
func (r *ChunkReader) estimate(ctx context.Context, ts *cdcsync.TableSchema) (int64, error) {
	conn, err := r.acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("estimate the rows of %s: %w", ts.ID, err)
	}
	res, err := connQuery(ctx, conn, "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		ts.ID.Database, ts.ID.Table)
	r.release(conn, err != nil)
	if err != nil {
		return 0, fmt.Errorf("estimate the rows of %s: %w", ts.ID, err)
	}
	if len(res.Values) == 0 {
		return 0, fmt.Errorf("estimate the rows of %s: information_schema.TABLES does not list the table", ts.ID)
	}
	switch fv := res.Values[0][0]; fv.Type {
	case mysql.FieldValueTypeUnsigned:
		return int64(min(fv.AsUint64(), 1<<63-1)), nil
	case mysql.FieldValueTypeSigned:
		return max(fv.AsInt64(), 0), nil
	case mysql.FieldValueTypeString:
		n, err := strconv.ParseInt(string(fv.AsString()), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("estimate the rows of %s: TABLE_ROWS is %q", ts.ID, fv.AsString())
		}
		return n, nil
	}
	return 0, nil // NULL: the engine keeps no count
}

// NextBound returns the upper bound hi of the chunk that follows the bound
// `after` ("" = the start of the table): the primary key of the rows-th row
// after `after` in primary-key order. When at most rows rows follow (or the
// table is not Chunkable), last is true and hi is "": the chunk runs to the
// end of the table.
func (r *ChunkReader) nextBound(ctx context.Context, ts *cdcsync.TableSchema, after string, rows int) (hi string, last bool, err error) {
	if ok, _ := Chunkable(ts); !ok {
		if after != "" {
			_, err := decodeChunkBound(ts, after)
			return "", false, fmt.Errorf("find the next chunk of %s: %w", ts.ID, err)
		}
		return "", true, nil
	}
	if rows < 1 {
		return "", false, fmt.Errorf("find the next chunk of %s: a chunk needs at least 1 row, not %d", ts.ID, rows)
	}
	a, err := decodeChunkBound(ts, after)
	if err != nil {
		return "", false, fmt.Errorf("find the next chunk of %s: %w", ts.ID, err)
	}
	fail := func(err error) (string, bool, error) {
		which := "the first"
		if a != nil {
			which = "the"
		}
		follows := ""
		if a != nil {
			follows = " that follows key " + a.String()
		}
		return "", false, fmt.Errorf("find the end of %s %d-row chunk of %s%s: %w", which, rows, ts.ID, follows, err)
	}
	conn, err := r.acquire(ctx)
	if err != nil {
		return fail(err)
	}
	res, err := connQuery(ctx, conn, chunkNextBoundSQL(ts, a, rows))
	r.release(conn, err != nil)
	if err != nil {
		return fail(err)
	}
	if len(res.Values) < 2 {
		return "", true, nil
	}
	row := res.Values[0]
	if len(row) != len(ts.PrimaryKey) {
		return fail(fmt.Errorf("the server returned %d key columns, want %d", len(row), len(ts.PrimaryKey)))
	}
	b := make(chunkBound, len(row))
	for i, k := range ts.PrimaryKey {
		c := &ts.Columns[k]
		typ, _ := chunkTypeOf(c)
		if b[i], err = chunkValueOf(c, typ, row[i]); err != nil {
			return fail(err)
		}
	}
	hi, err = encodeChunkBound(b)
	if err != nil {
		return fail(err)
	}
	return hi, false, nil
}

// ReadChunk reads the rows with after < key <= hi (after "" = no lower bound;
// last = no upper bound) in one consistent snapshot and returns them decoded
// (ValuePolicy.SnapshotRow, exactly like the existing Snapshotter.Copy) together with the
// binlog position that snapshot is consistent with.
//
// On MariaDB the position is the snapshot's own (binlog_snapshot_file and
// _position, no lock): the chunk holds exactly the transactions before it.
// MySQL does not report it, so there the position is read after the SELECT:
// every transaction the chunk holds is before it, but one that committed
// while the chunk was read may be before it too and missing from the chunk.
func (r *ChunkReader) readBetween(ctx context.Context, ts *cdcsync.TableSchema, after, hi string, last bool) ([]cdcsync.Row, cdcsync.Position, error) {
	var none cdcsync.Position
	a, err := decodeChunkBound(ts, after)
	if err != nil {
		return nil, none, fmt.Errorf("read a chunk of %s: %w", ts.ID, err)
	}
	h, err := decodeChunkBound(ts, hi)
	if err != nil {
		return nil, none, fmt.Errorf("read a chunk of %s: %w", ts.ID, err)
	}
	if last != (h == nil) {
		return nil, none, fmt.Errorf("read a chunk of %s %s: the last chunk has no upper bound and every other chunk has one (hi %q, last %v)", ts.ID, chunkRange(a, h), hi, last)
	}
	conn, err := r.acquire(ctx)
	if err != nil {
		return nil, none, fmt.Errorf("read the chunk of %s %s: %w", ts.ID, chunkRange(a, h), err)
	}
	rows, at, err := r.readChunk(ctx, conn, ts, a, h)
	pos := at.Position()
	if err == nil {
		_, err = connQuery(ctx, conn, "COMMIT")
	}
	r.release(conn, err != nil)
	if err != nil {
		return nil, none, fmt.Errorf("read the chunk of %s %s: %w", ts.ID, chunkRange(a, h), err)
	}
	return rows, pos, nil
}

func (r *ChunkReader) readChunk(ctx context.Context, conn *client.Conn, ts *cdcsync.TableSchema, after, hi chunkBound) ([]cdcsync.Row, binlogpos.Pos, error) {
	pos := binlogpos.Pos{Flavor: r.flavor, ServerUUID: r.serverUUID}
	if _, err := connQuery(ctx, conn, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
		return nil, pos, fmt.Errorf("start the snapshot transaction: %w", err)
	}
	exact := r.flavor == binlogpos.FlavorMariaDB
	if exact {
		var err error
		if pos, err = mariadbSnapshotPosition(ctx, conn, r.flavor, r.serverUUID); err != nil {
			return nil, pos, err
		}
	}
	if r.afterBegin != nil {
		r.afterBegin()
	}
	var rows []cdcsync.Row
	var res mysql.Result
	err := chunkWithCtx(ctx, conn, func() error {
		return conn.ExecuteSelectStreaming(chunkReadSQL(ts, after, hi), &res, func(raw []mysql.FieldValue) error {
			row, err := r.values.SnapshotRow(ts, raw, pos)
			if err != nil {
				return fmt.Errorf("chunked initial copy: %w", err)
			}
			rows = append(rows, row)
			return nil
		}, nil)
	})
	if err != nil {
		return nil, pos, err
	}
	if !exact {
		// The high watermark: at or after the snapshot.
		if pos, err = chunkWithCtxValue(ctx, conn, func() (binlogpos.Pos, error) {
			return currentPos(conn, r.flavor, r.serverUUID)
		}); err != nil {
			return nil, pos, err
		}
	}
	return rows, pos, nil
}

// mariadbSnapshotPosition reads the binlog position of the consistent
// snapshot open on conn (START TRANSACTION WITH CONSISTENT SNAPSHOT) on
// MariaDB, which reports it without a lock.
func mariadbSnapshotPosition(ctx context.Context, conn *client.Conn, flavor, serverUUID string) (binlogpos.Pos, error) {
	pos := binlogpos.Pos{Flavor: flavor, ServerUUID: serverUUID}
	res, err := connQuery(ctx, conn, "SHOW STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return pos, fmt.Errorf("read the snapshot's binlog position: %w", err)
	}
	var offset string
	for i := 0; i < res.RowNumber(); i++ {
		name, _ := res.GetString(i, 0)
		val, _ := res.GetString(i, 1)
		switch strings.ToLower(name) {
		case "binlog_snapshot_file":
			pos.File = strings.Clone(val)
		case "binlog_snapshot_position":
			offset = val
		}
	}
	if pos.File == "" {
		return pos, errors.New("the server reports no binlog snapshot position; is the binlog on? (log_bin)")
	}
	off, err := strconv.ParseUint(offset, 10, 32)
	if err != nil {
		return pos, fmt.Errorf("the server reports binlog_snapshot_position %q, not an offset", offset)
	}
	pos.Offset = uint32(off)
	// No GTID set: the pipeline orders a chunk with the stream by file and
	// offset, and BINLOG_GTID_POS scans the binlog file up to the offset
	// (about 0.1 s at 400 MB before MariaDB 11.4), for every chunk.
	return pos, nil
}

// chunkWithCtx runs fn on conn and aborts it when ctx is done by forcing the
// socket's deadline into the past; the connection is unusable afterwards
// (the caller then closes it).
func chunkWithCtx(ctx context.Context, conn *client.Conn, fn func() error) error {
	_, err := chunkWithCtxValue(ctx, conn, func() (struct{}, error) { return struct{}{}, fn() })
	return err
}

func chunkWithCtxValue[T any](ctx context.Context, conn *client.Conn, fn func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	v, err := fn()
	if !stop() {
		return zero, fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return v, err
}

// Estimate is the approximate row count of a table, for progress reports
// (merge.ChunkSource).
func (r *ChunkReader) Estimate(ctx context.Context, ts *cdcsync.TableSchema) (int64, error) {
	n, err := r.estimate(ctx, ts)
	return n, disconnected(err)
}

// NextBound returns the bound closing the chunk of about rows rows after
// after ("" = the table's start); last when it runs to the end
// (merge.ChunkSource).
func (r *ChunkReader) NextBound(ctx context.Context, ts *cdcsync.TableSchema, after string, rows int) (hi string, last bool, err error) {
	hi, last, err = r.nextBound(ctx, ts, after, rows)
	return hi, last, disconnected(err)
}

// ReadChunk reads the rows after < key <= hi (no upper bound when last) in
// one consistent snapshot and returns them with its position
// (merge.ChunkSource).
func (r *ChunkReader) ReadChunk(ctx context.Context, ts *cdcsync.TableSchema, after, hi string, last bool) ([]cdcsync.Row, cdcsync.Position, error) {
	rows, pos, err := r.readBetween(ctx, ts, after, hi, last)
	return rows, pos, disconnected(err)
}

// disconnected wraps a connection failure in ErrDisconnected, so the daemon
// restarts the session; SQL errors and values a policy refuses stay as they
// are and stop it.
func disconnected(err error) error {
	if err == nil || errors.Is(err, ErrDisconnected) {
		return err
	}
	var me *mysql.MyError
	if errors.As(err, &me) {
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "connection") {
		return fmt.Errorf("%w: %w", ErrDisconnected, err)
	}
	return err
}
