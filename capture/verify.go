package capture

// The MySQL side of `cdcsync verify` (verify.Source): checksums of
// primary-key chunks computed by the server, so that equal chunks cost no
// rows on the wire, the keys and row hashes of a chunk that differs, and
// rows by key, each read in a consistent snapshot whose binlog position is
// reported with it.
//
// The canonical row text the server computes here must equal, byte for
// byte, what verify.AppendRowText computes from the canonical values of
// the same row (verify/canon.go defines it; TestVerifyRowText checks every
// type on the real MariaDB).

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/verify"
)

// VerifyReader reads what `cdcsync verify` compares: a ChunkReader whose
// connections also compute checksums. It uses at most one connection, so
// verify runs one query at a time on the server.
type VerifyReader struct {
	*ChunkReader
}

// NewVerifyReader connects to src to learn the server's flavor and
// identity and returns a reader; values applies the types: policies, so
// rows decode to the values the daemon wrote.
func NewVerifyReader(ctx context.Context, src *config.Source, values *ValuePolicy) (*VerifyReader, error) {
	conn, flavor, uuid, err := connectIdentified(ctx, src)
	if err != nil {
		return nil, err
	}
	conn.Close()
	return &VerifyReader{NewChunkReader(src, flavor, uuid, values, 1)}, nil
}

// Flavor is the server's flavor (binlogpos.FlavorMySQL or FlavorMariaDB).
func (r *VerifyReader) Flavor() string { return r.flavor }

// Schema reads the table's current schema from information_schema.
func (r *VerifyReader) Schema(ctx context.Context, id cdcsync.TableID) (*cdcsync.TableSchema, error) {
	conn, err := r.acquire(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := LoadSchema(ctx, conn, id)
	r.release(conn, err != nil)
	return ts, err
}

// RowTextSQL returns the SQL expression of the canonical text of a row of
// ts (verify/canon.go); ok is false when the server cannot compute it: a
// MySQL JSON column, whose canonical text cdcsync normalizes in Go.
func RowTextSQL(ts *cdcsync.TableSchema) (expr string, ok bool) {
	parts := make([]string, len(ts.Columns))
	for i := range ts.Columns {
		if parts[i], ok = pieceSQL(&ts.Columns[i]); !ok {
			return "", false
		}
	}
	return "CONCAT(" + strings.Join(parts, ", ") + ")", true
}

// rowHashSQL is the SQL of the 64-bit hash of the row text text.
func rowHashSQL(text string) string {
	return "CAST(CONV(LEFT(MD5(" + text + "), 16), 16, 10) AS UNSIGNED)"
}

// pieceSQL is the SQL of column c's piece of the row text.
func pieceSQL(c *cdcsync.Column) (string, bool) {
	q := QuoteIdent(c.Name)
	num := func(e string) string { return "COALESCE(CONCAT(" + e + ", ','), 'N')" }
	str := func(x, n string) string { return "COALESCE(CONCAT(" + n + ", ':', " + x + "), 'N')" }
	dt := strings.ToLower(c.DataType)
	switch c.Kind {
	case cdcsync.KindInt32, cdcsync.KindInt64, cdcsync.KindBool, cdcsync.KindDecimal:
		return num("(" + q + " + 0)"), true
	case cdcsync.KindFloat32, cdcsync.KindFloat64:
		return num("(" + q + " + 0e0)"), true
	case cdcsync.KindDate:
		return num("(TO_DAYS(" + q + ") - 719528)"), true
	case cdcsync.KindTimestamp, cdcsync.KindTimestampTZ:
		// TIMESTAMP is converted to the session time zone, '+00:00'.
		return num("TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + q + ")"), true
	case cdcsync.KindTime:
		return num("CAST(" + q + " AS TIME(6))"), true
	case cdcsync.KindString:
		switch class := decStrClassOf(dt); {
		case class == decStrJSON:
			return "", false
		case class == decStrDecimal:
			x := "CAST(CAST((" + q + " + 0) AS CHAR) AS BINARY)"
			return str(x, "LENGTH("+x+")"), true
		case class >= decStrInet4 || decHasCharset(c):
			x := "CAST(CONVERT(" + q + " USING utf8mb4) AS BINARY)"
			return str(x, "LENGTH("+x+")"), true
		}
		// utf8mb4, utf8mb3 and ascii: the stored bytes are the UTF-8.
		return str("CAST("+q+" AS BINARY)", "LENGTH("+q+")"), true
	case cdcsync.KindBinary:
		if c.Spatial() {
			return str("SUBSTRING("+q+", 5)", "(LENGTH("+q+") - 4)"), true
		}
		return str(q, "LENGTH("+q+")"), true
	}
	return "", false
}

// snapshot runs fn inside a consistent snapshot on a pooled connection and
// returns where the snapshot read the binlog. With exact on MariaDB, the
// snapshot's own position, as a GTID set too (BINLOG_GTID_POS); else a
// high watermark read after fn (every transaction the snapshot shows is
// before it) and the position before the snapshot began as Low.
func (r *VerifyReader) snapshot(ctx context.Context, exact bool, fn func(conn *client.Conn, pos binlogpos.Pos) error) (verify.Read, error) {
	var read verify.Read
	conn, err := r.acquire(ctx)
	if err != nil {
		return read, err
	}
	err = r.inSnapshot(ctx, conn, exact, &read, fn)
	if err == nil {
		_, err = connQuery(ctx, conn, "COMMIT")
	}
	r.release(conn, err != nil)
	return read, disconnected(err)
}

func (r *VerifyReader) inSnapshot(ctx context.Context, conn *client.Conn, exact bool, read *verify.Read, fn func(conn *client.Conn, pos binlogpos.Pos) error) error {
	mariadb := r.flavor == binlogpos.FlavorMariaDB
	var low binlogpos.Pos
	if !mariadb {
		var err error
		if low, err = currentPos(conn, r.flavor, r.serverUUID); err != nil {
			return err
		}
	}
	if _, err := connQuery(ctx, conn, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
		return fmt.Errorf("start the snapshot transaction: %w", err)
	}
	var snap binlogpos.Pos
	if mariadb {
		var err error
		if snap, err = mariadbSnapshotPosition(ctx, conn, r.flavor, r.serverUUID); err != nil {
			return err
		}
		low = snap
		if exact {
			res, err := connQuery(ctx, conn, "SELECT BINLOG_GTID_POS(?, ?)", snap.File, snap.Offset)
			if err != nil {
				return fmt.Errorf("read the GTID position of the snapshot (%s): %w", snap, err)
			}
			g, _ := res.GetString(0, 0)
			if g == "" && snap.File != "" {
				return fmt.Errorf("the server has no GTID position for the snapshot's binlog position %s", snap)
			}
			snap.GTIDSet = strings.Clone(g)
			low = snap
			read.Pos, read.Exact = snap.Position(), true
		}
	}
	read.Low = low.Position()
	if err := fn(conn, low); err != nil {
		return err
	}
	if !read.Exact {
		high, err := chunkWithCtxValue(ctx, conn, func() (binlogpos.Pos, error) {
			return currentPos(conn, r.flavor, r.serverUUID)
		})
		if err != nil {
			return err
		}
		read.Pos = high.Position()
	}
	return nil
}

// Checksum returns the number of rows after < key <= hi (no upper bound
// when last) and the XOR of their row hashes, computed by the server: no
// row crosses the wire. A table with a MySQL JSON column is summed here
// instead, over the rows read (see RowTextSQL).
func (r *VerifyReader) Checksum(ctx context.Context, ts *cdcsync.TableSchema, after, hi string, last bool) (verify.Sum, verify.Read, error) {
	var sum verify.Sum
	a, h, err := r.bounds(ts, after, hi, last)
	if err != nil {
		return sum, verify.Read{}, err
	}
	text, inSQL := RowTextSQL(ts)
	read, err := r.snapshot(ctx, false, func(conn *client.Conn, pos binlogpos.Pos) error {
		if !inSQL {
			return r.streamRows(ctx, conn, ts, chunkReadSQL(ts, a, h), pos, func(row cdcsync.Row) error {
				sum.Rows++
				sum.Hash ^= verify.RowHash(ts, row)
				return nil
			})
		}
		q := fmt.Sprintf("SELECT COUNT(*), COALESCE(BIT_XOR(%s), 0) FROM %s%s", rowHashSQL(text), chunkTable(ts), chunkWhereHinted(ts, a, h))
		res, err := connQuery(ctx, conn, q)
		if err != nil {
			return err
		}
		if res.RowNumber() != 1 {
			return fmt.Errorf("the checksum query returned %d rows", res.RowNumber())
		}
		n, err := res.GetUint(0, 0)
		if err != nil {
			return fmt.Errorf("the checksum query's row count: %w", err)
		}
		x, err := res.GetUint(0, 1)
		if err != nil {
			return fmt.Errorf("the checksum query's hash: %w", err)
		}
		sum.Rows, sum.Hash = int64(n), x
		return nil
	})
	if err != nil {
		return sum, read, fmt.Errorf("checksum %s %s: %w", ts.ID, chunkRange(a, h), err)
	}
	return sum, read, nil
}

// Hashes calls fn with the primary-key values and the row hash of every
// row after < key <= hi (no upper bound when last), read in one
// consistent snapshot.
func (r *VerifyReader) Hashes(ctx context.Context, ts *cdcsync.TableSchema, after, hi string, last bool, fn func(key []any, hash uint64) error) (verify.Read, error) {
	a, h, err := r.bounds(ts, after, hi, last)
	if err != nil {
		return verify.Read{}, err
	}
	text, inSQL := RowTextSQL(ts)
	ks := keySchema(ts)
	read, err := r.snapshot(ctx, false, func(conn *client.Conn, pos binlogpos.Pos) error {
		if !inSQL {
			return r.streamRows(ctx, conn, ts, chunkReadSQL(ts, a, h), pos, func(row cdcsync.Row) error {
				key := make([]any, len(ts.PrimaryKey))
				for i, k := range ts.PrimaryKey {
					key[i] = row[k]
				}
				return fn(key, verify.RowHash(ts, row))
			})
		}
		cols := make([]string, len(ts.PrimaryKey))
		for i, k := range ts.PrimaryKey {
			cols[i] = SelectExpr(&ts.Columns[k])
		}
		q := fmt.Sprintf("SELECT %s, %s FROM %s%s", strings.Join(cols, ", "), rowHashSQL(text), chunkTable(ts), chunkWhereHinted(ts, a, h))
		var res mysql.Result
		return chunkWithCtx(ctx, conn, func() error {
			return conn.ExecuteSelectStreaming(q, &res, func(raw []mysql.FieldValue) error {
				n := len(ts.PrimaryKey)
				if len(raw) != n+1 {
					return fmt.Errorf("the hash query returned %d columns, want %d", len(raw), n+1)
				}
				key, err := r.values.SnapshotRow(ks, raw[:n], pos)
				if err != nil {
					return err
				}
				var hash uint64
				switch v := raw[n]; v.Type {
				case mysql.FieldValueTypeUnsigned:
					hash = v.AsUint64()
				case mysql.FieldValueTypeSigned:
					hash = uint64(v.AsInt64())
				default:
					if hash, err = strconv.ParseUint(string(v.AsString()), 10, 64); err != nil {
						return fmt.Errorf("the hash query returned the hash %q", v.AsString())
					}
				}
				return fn(key, hash)
			}, nil)
		})
	})
	if err != nil {
		return read, fmt.Errorf("read the row hashes of %s %s: %w", ts.ID, chunkRange(a, h), err)
	}
	return read, nil
}

// Rows reads the rows whose primary keys are keys (canonical values in key
// order), in one consistent snapshot whose exact position it reports on
// MariaDB. Keys without a row are absent from the result. Keys whose
// values cannot be written as exact SQL literals (a FLOAT key, text in a
// character set that does not convert back) make it read the whole table
// and pick the rows in Go.
func (r *VerifyReader) Rows(ctx context.Context, ts *cdcsync.TableSchema, keys [][]any) ([]cdcsync.Row, verify.Read, error) {
	var rows []cdcsync.Row
	read, err := r.snapshot(ctx, true, func(conn *client.Conn, pos binlogpos.Pos) error {
		var err error
		rows, err = r.rowsByKey(ctx, conn, ts, keys, pos)
		return err
	})
	if err != nil {
		return nil, read, fmt.Errorf("read %d rows of %s by key: %w", len(keys), ts.ID, err)
	}
	return rows, read, nil
}

// ReadKeys reads the rows whose primary keys are keys in one consistent
// snapshot and returns them with the snapshot's position (merge.KeyReader):
// on MariaDB the snapshot's own, comparable with the stream's positions
// like a chunk's; on MySQL a high watermark.
func (r *ChunkReader) ReadKeys(ctx context.Context, ts *cdcsync.TableSchema, keys [][]any) ([]cdcsync.Row, cdcsync.Position, error) {
	conn, err := r.acquire(ctx)
	if err != nil {
		return nil, cdcsync.Position{}, disconnected(err)
	}
	var rows []cdcsync.Row
	pos := binlogpos.Pos{Flavor: r.flavor, ServerUUID: r.serverUUID}
	err = func() error {
		if _, err := connQuery(ctx, conn, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
			return fmt.Errorf("start the snapshot transaction: %w", err)
		}
		exact := r.flavor == binlogpos.FlavorMariaDB
		if exact {
			if pos, err = mariadbSnapshotPosition(ctx, conn, r.flavor, r.serverUUID); err != nil {
				return err
			}
		}
		if rows, err = r.rowsByKey(ctx, conn, ts, keys, pos); err != nil {
			return err
		}
		if !exact {
			if pos, err = currentPos(conn, r.flavor, r.serverUUID); err != nil {
				return err
			}
		}
		_, err = connQuery(ctx, conn, "COMMIT")
		return err
	}()
	r.release(conn, err != nil)
	if err != nil {
		return nil, pos.Position(), disconnected(fmt.Errorf("read %d rows of %s by key: %w", len(keys), ts.ID, err))
	}
	return rows, pos.Position(), nil
}

// keyBatch is how many keys one SELECT asks for.
const keyBatch = 500

func (r *ChunkReader) rowsByKey(ctx context.Context, conn *client.Conn, ts *cdcsync.TableSchema, keys [][]any, pos binlogpos.Pos) ([]cdcsync.Row, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	want := map[string]bool{}
	for _, k := range keys {
		enc, ok := cdcsync.AppendTuple(nil, k...)
		if !ok || len(k) != len(ts.PrimaryKey) {
			return nil, fmt.Errorf("a key of %s is not %d canonical values: %v", ts.ID, len(ts.PrimaryKey), k)
		}
		want[string(enc)] = true
	}
	var rows []cdcsync.Row
	var enc []byte
	keep := func(row cdcsync.Row) error {
		enc = enc[:0]
		for _, k := range ts.PrimaryKey {
			enc, _ = cdcsync.AppendValue(enc, row[k])
		}
		if want[string(enc)] {
			rows = append(rows, row)
		}
		return nil
	}
	cols := chunkKeyCols(ts)
	if !keyLiterals(ts) {
		return rows, r.streamRows(ctx, conn, ts, chunkReadSQL(ts, nil, nil), pos, keep)
	}
	for b := range slices.Chunk(keys, keyBatch) {
		var where string
		if len(cols) == 1 {
			lits := make([]string, len(b))
			for i, k := range b {
				lits[i] = keyLiteral(&ts.Columns[ts.PrimaryKey[0]], k[0])
			}
			where = cols[0] + " IN (" + strings.Join(lits, ", ") + ")"
		} else {
			ors := make([]string, len(b))
			for i, k := range b {
				ands := make([]string, len(cols))
				for j, c := range cols {
					ands[j] = c + " = " + keyLiteral(&ts.Columns[ts.PrimaryKey[j]], k[j])
				}
				ors[i] = "(" + strings.Join(ands, " AND ") + ")"
			}
			where = strings.Join(ors, " OR ")
		}
		q := fmt.Sprintf("SELECT %s FROM %s WHERE %s", SelectList(ts), chunkTable(ts), where)
		if err := r.streamRows(ctx, conn, ts, q, pos, keep); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// streamRows runs a SELECT of SelectList(ts) and decodes each row.
func (r *ChunkReader) streamRows(ctx context.Context, conn *client.Conn, ts *cdcsync.TableSchema, q string, pos binlogpos.Pos, fn func(cdcsync.Row) error) error {
	var res mysql.Result
	return chunkWithCtx(ctx, conn, func() error {
		return conn.ExecuteSelectStreaming(q, &res, func(raw []mysql.FieldValue) error {
			row, err := r.values.SnapshotRow(ts, raw, pos)
			if err != nil {
				return err
			}
			return fn(row)
		}, nil)
	})
}

// keyLiterals reports whether every primary-key value of ts can be written
// as an SQL literal that finds exactly its row.
func keyLiterals(ts *cdcsync.TableSchema) bool {
	for _, k := range ts.PrimaryKey {
		c := &ts.Columns[k]
		switch c.Kind {
		case cdcsync.KindFloat32, cdcsync.KindFloat64, cdcsync.KindInvalid:
			return false
		case cdcsync.KindString:
			if _, cs := schemaSplitCharset(c.ColumnType); cs != "" && !chunkCharsetExact(cs) {
				return false
			}
			if decStrClassOf(strings.ToLower(c.DataType)) == decStrJSON {
				return false
			}
		}
	}
	return true
}

// keyLiteral writes the canonical value v of column c as an SQL literal
// (keyLiterals says which columns can). Text and bytes travel as hex.
func keyLiteral(c *cdcsync.Column, v any) string {
	switch x := v.(type) {
	case int32:
		if c.Kind == cdcsync.KindDate {
			return "'" + time.Unix(int64(x)*86400, 0).UTC().Format("2006-01-02") + "'"
		}
		return strconv.FormatInt(int64(x), 10)
	case int64:
		switch c.Kind {
		case cdcsync.KindTimestamp, cdcsync.KindTimestampTZ:
			// TIMESTAMP text is UTC, as is the session time zone.
			return "'" + time.UnixMicro(x).UTC().Format("2006-01-02 15:04:05.000000") + "'"
		case cdcsync.KindTime:
			return "'" + cdcsync.FormatTime(x) + "'"
		}
		return strconv.FormatInt(x, 10)
	case bool:
		if x {
			return "1"
		}
		return "0"
	case string:
		if c.Kind == cdcsync.KindDecimal {
			if chunkDecRE.MatchString(x) {
				return x
			}
			return "NULL"
		}
		return "_utf8mb4 X'" + hex.EncodeToString([]byte(x)) + "'"
	case []byte:
		return "_binary X'" + hex.EncodeToString(x) + "'"
	}
	return "NULL" // matches nothing
}

// keySchema is the schema of ts's primary-key columns alone, for decoding
// a SELECT of them.
func keySchema(ts *cdcsync.TableSchema) *cdcsync.TableSchema {
	ks := &cdcsync.TableSchema{ID: ts.ID}
	for i, k := range ts.PrimaryKey {
		ks.Columns = append(ks.Columns, ts.Columns[k])
		ks.PrimaryKey = append(ks.PrimaryKey, i)
	}
	return ks
}

// bounds decodes a verify chunk's bounds.
func (r *VerifyReader) bounds(ts *cdcsync.TableSchema, after, hi string, last bool) (chunkBound, chunkBound, error) {
	a, err := decodeChunkBound(ts, after)
	if err != nil {
		return nil, nil, err
	}
	h, err := decodeChunkBound(ts, hi)
	if err != nil {
		return nil, nil, err
	}
	if last != (h == nil) {
		return nil, nil, fmt.Errorf("a chunk of %s %s: the last chunk has no upper bound and every other chunk has one", ts.ID, chunkRange(a, h))
	}
	return a, h, nil
}

// chunkWhereHinted is chunkWhere with the PRIMARY index forced when there
// is a range to scan.
func chunkWhereHinted(ts *cdcsync.TableSchema, after, hi chunkBound) string {
	where := chunkWhere(ts, after, hi)
	if where == "" {
		return ""
	}
	return " FORCE INDEX (PRIMARY)" + where
}

// Ordered reports whether Go orders the primary keys of ts exactly as the
// server does, so that rows read from the lake can be assigned to the
// server's chunks (verify.Source): integer, DECIMAL, BINARY, VARBINARY,
// DATE, DATETIME, TIMESTAMP and TIME keys. Text keys follow collations Go
// does not know; such tables are compared as one chunk.
func (r *VerifyReader) Ordered(ts *cdcsync.TableSchema) bool {
	if ok, _ := Chunkable(ts); !ok {
		return false
	}
	for _, k := range ts.PrimaryKey {
		switch typ, _ := chunkTypeOf(&ts.Columns[k]); typ {
		case chunkInt, chunkDec, chunkBin, chunkDate, chunkDatetime, chunkTimestamp, chunkTime:
		default:
			return false
		}
	}
	return true
}

// BoundKey returns the primary-key values, canonical, of a chunk bound
// NextBound returned.
func (r *VerifyReader) BoundKey(ts *cdcsync.TableSchema, bound string) ([]any, error) {
	b, err := decodeChunkBound(ts, bound)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, errors.New("the start of a table is not a key")
	}
	out := make([]any, len(b))
	for i, v := range b {
		c := &ts.Columns[ts.PrimaryKey[i]]
		var err error
		switch v.typ {
		case chunkInt:
			out[i], err = boundInt(c, v.text)
		case chunkDec:
			s, ok := decNormDecimal(v.text, c.Scale)
			if !ok {
				err = fmt.Errorf("%q is not a decimal of scale %d", v.text, c.Scale)
			}
			out[i] = s
		case chunkStr:
			out[i] = v.text
		case chunkBin:
			out[i] = []byte(v.text)
		case chunkDate:
			out[i], err = decDateText(c, v.text)
		case chunkDatetime, chunkTimestamp:
			out[i], err = decDatetimeText(c, v.text)
		case chunkTime:
			out[i], err = decTimeText(c, v.text)
		default:
			err = fmt.Errorf("unknown bound type %q", v.typ)
		}
		if err != nil {
			return nil, fmt.Errorf("bound %s of %s, column %s: %w", b, ts.ID, c.Name, err)
		}
	}
	return out, nil
}

func boundInt(c *cdcsync.Column, text string) (any, error) {
	switch c.Kind {
	case cdcsync.KindInt32:
		n, err := strconv.ParseInt(text, 10, 32)
		return int32(n), err
	case cdcsync.KindInt64:
		return strconv.ParseInt(text, 10, 64)
	case cdcsync.KindDecimal:
		return text, nil // canonical digits (chunkValue.check)
	}
	return nil, fmt.Errorf("an integer bound for a %s column", c.Kind)
}
