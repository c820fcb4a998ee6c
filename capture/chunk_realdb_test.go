package capture

// The chunked copy against a real MariaDB started by integration/testenv:
// iterating NextBound/ReadChunk yields every row exactly once for every
// splittable key type, bounds compare in the column's collation, positions
// are the snapshots', and the connection pool recovers from lost
// connections.

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/integration/testenv"
)

// chunkPolicy decodes zero dates (bounds of some tests) as the epoch.
func chunkPolicy() *ValuePolicy {
	return NewValuePolicy(config.Types{ZeroDate: config.TypeToEpoch, ZeroDatetime: config.TypeToEpoch}, nil, nil)
}

func chunkLoad(t *testing.T, conn *client.Conn, db, table string) *cdcsync.TableSchema {
	t.Helper()
	ts, err := LoadSchema(context.Background(), conn, cdcsync.TableID{Database: db, Table: table})
	if err != nil {
		t.Fatalf("LoadSchema %s.%s: %v", db, table, err)
	}
	return ts
}

// chunkFullSelect reads the whole table in one SELECT, decoded like
// ReadChunk decodes.
func chunkFullSelect(t *testing.T, src *config.Source, ts *cdcsync.TableSchema, p *ValuePolicy) []cdcsync.Row {
	t.Helper()
	conn := rdbConnect(t, src)
	rdbExec(t, conn, SnapshotSessionSQL...)
	var rows []cdcsync.Row
	var res mysql.Result
	err := conn.ExecuteSelectStreaming("SELECT "+SelectList(ts)+" FROM "+chunkTable(ts), &res, func(raw []mysql.FieldValue) error {
		row, err := p.SnapshotRow(ts, raw, binlogpos.Pos{})
		if err != nil {
			return err
		}
		rows = append(rows, row)
		return nil
	}, nil)
	if err != nil {
		t.Fatalf("full SELECT of %s: %v", ts.ID, err)
	}
	return rows
}

func chunkRowKey(r cdcsync.Row) string { return fmt.Sprintf("%#v", r) }

// chunkIterate reads the whole table chunk by chunk and checks the chunk
// sizes: every chunk but the last has exactly size rows (the table does not
// change meanwhile), the last one at least one unless the table is empty.
func chunkIterate(t *testing.T, r *ChunkReader, ts *cdcsync.TableSchema, size int) (rows []cdcsync.Row, chunks int) {
	t.Helper()
	ctx := context.Background()
	splittable, _ := Chunkable(ts)
	after := ""
	for {
		if chunks > 10000 {
			t.Fatalf("%s: more than 10000 chunks, NextBound does not advance", ts.ID)
		}
		hi, last, err := r.NextBound(ctx, ts, after, size)
		if err != nil {
			t.Fatalf("NextBound(%s): %v", after, err)
		}
		if last != (hi == "") {
			t.Fatalf("NextBound(%s) = %q, last %v", after, hi, last)
		}
		got, pos, err := r.ReadChunk(ctx, ts, after, hi, last)
		if err != nil {
			t.Fatalf("ReadChunk(%s, %s): %v", after, hi, err)
		}
		if dec(pos).File == "" || dec(pos).Flavor != r.flavor {
			t.Errorf("ReadChunk(%s, %s): position %+v", after, hi, pos)
		}
		chunks++
		t.Logf("chunk %d: after %s up to %s: %d rows", chunks, after, hi, len(got))
		switch {
		case splittable && !last && len(got) != size:
			t.Errorf("chunk %d (after %s up to %s) has %d rows, want %d", chunks, after, hi, len(got), size)
		case splittable && last && len(got) > size:
			t.Errorf("last chunk %d (after %s) has %d rows, more than %d", chunks, after, len(got), size)
		case last && len(got) == 0 && chunks > 1:
			t.Errorf("last chunk %d (after %s) is empty although the table has rows", chunks, after)
		}
		rows = append(rows, got...)
		if last {
			return rows, chunks
		}
		after = hi
	}
}

// chunkSame checks that the chunks hold every row of the full SELECT exactly
// once.
func chunkSame(t *testing.T, chunked, full []cdcsync.Row) {
	t.Helper()
	want := map[string]int{}
	for _, r := range full {
		want[chunkRowKey(r)]++
	}
	got := map[string]int{}
	for _, r := range chunked {
		k := chunkRowKey(r)
		got[k]++
		if got[k] > 1 {
			t.Errorf("row %s came back %d times", k, got[k])
		}
		if want[k] == 0 {
			t.Errorf("row %s is not in the full SELECT", k)
		}
	}
	for k := range want {
		if got[k] == 0 {
			t.Errorf("row %s is missing from the chunks", k)
		}
	}
	if len(chunked) != len(full) {
		t.Errorf("the chunks hold %d rows, the full SELECT %d", len(chunked), len(full))
	}
}

type chunkCase struct {
	name   string
	create string   // CREATE TABLE ck.<name> (...)
	keys   []string // one row per value list, the rest of the columns from v
	split  bool     // Chunkable
}

func chunkCases() []chunkCase {
	var ints, bigs, decs, dts []string
	for _, n := range []int64{-2147483648, -1000, -5, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 99, 100, 101, 65535, 1 << 24, 2147483646, 2147483647} {
		ints = append(ints, strconv.FormatInt(n, 10))
	}
	for _, n := range []uint64{0, 1, 2, 12345, 1<<63 - 2, 1<<63 - 1, 1 << 63, 1<<63 + 1, 1<<64 - 3, 1<<64 - 2, 1<<64 - 1} {
		bigs = append(bigs, strconv.FormatUint(n, 10))
	}
	decs = append(decs, "-9999999999999999.9999", "-1.5", "-1.0001", "-0.0001", "0", "0.0001", "1", "1.5", "2.25", "10", "9999999999999999.9999")
	// A DATETIME(6) and DECIMAL(20,4) key, including the zero date.
	for _, dt := range []string{"0000-00-00 00:00:00", "1000-01-01 00:00:00", "1970-01-01 00:00:00.000001", "2024-02-29 23:59:59.999999", "9999-12-31 23:59:59.999999"} {
		for _, d := range []string{"-1.5", "0", "3.1416"} {
			dts = append(dts, fmt.Sprintf("'%s', %s", dt, d))
		}
	}
	var comp []string
	for _, a := range []int{-1, 1, 2, 3} {
		for _, b := range []string{"''", "'a'", "'B'", "'c '", "'É'", "'ö'", "'Z'"} {
			comp = append(comp, fmt.Sprintf("%d, %s", a, b))
		}
	}
	// In utf8mb4_general_ci 'É' = 'E' = 'e', 'b ' = 'B' and '' = ' ', so
	// only one of each can be a key; binary order differs from the
	// collation's ('B' < 'a' < 'É' in bytes, a < B < É in the collation).
	ci := []string{"''", "'a'", "'B'", "'c '", "'É'", "'f'", "'Ö'", "'p'", "'Q'", "'x  '", "'Ω'", "'中'", "'😀'", "'zz'", "'Zy'", "'aa'", "'A b'", `'a''b'`, `'a\\b'`, "X'6e00'", "'n'"}
	return []chunkCase{
		{"t_int", "(id INT PRIMARY KEY, v VARCHAR(20))", ints, true},
		{"t_bigint_unsigned", "(id BIGINT UNSIGNED PRIMARY KEY, v VARCHAR(20))", bigs, true},
		{"t_varchar_ci", "(k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PRIMARY KEY, v VARCHAR(20))", ci, true},
		{"t_varchar_bin", "(k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, v VARCHAR(20))", append(slices.Clone(ci), "'b '", "'e'", "'E'"), true},
		{"t_latin1", "(k VARCHAR(20) CHARACTER SET latin1 PRIMARY KEY, v VARCHAR(20))",
			[]string{"'a'", "'B'", "'c'", "'é'", "'Ä'", "'Ö'", "'x'", "'µ'", "'¿'", "'Œ'", "_latin1 X'81'", "_latin1 X'9D'", "'d '", "'€'", "'Þ'"}, true},
		{"t_varbinary", "(k VARBINARY(20) PRIMARY KEY, v VARCHAR(20))",
			[]string{"''", "X'00'", "X'0000'", "X'0001'", "X'00FF'", "X'20'", "X'2020'", "'A'", "'a'", "X'7F'", "X'80'", "X'FF'", "X'FF00'", "X'FFFF'", "'a '"}, true},
		{"t_binary", "(k BINARY(3) PRIMARY KEY, v VARCHAR(20))",
			[]string{"X'00'", "X'0001'", "X'000001'", "X'00FF'", "X'01'", "'a'", "'ab'", "'abc'", "X'FF'", "X'FFFFFF'"}, true},
		{"t_composite", "(a INT, b VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci, v VARCHAR(20), PRIMARY KEY (a, b))", comp, true},
		{"t_decimal", "(d DECIMAL(20,4) PRIMARY KEY, v VARCHAR(20))", decs, true},
		{"t_datetime_decimal", "(dt DATETIME(6), d DECIMAL(20,4), v VARCHAR(20), PRIMARY KEY (dt, d))", dts, true},
		{"t_wide_decimal", "(d DECIMAL(65,10) PRIMARY KEY, v VARCHAR(20))",
			[]string{"-99999999999999999999999999999999999999999999999999999.9999999999", "-1", "0", "0.0000000001", "12345678901234567890123456789012345678901234567890.5", "99999999999999999999999999999999999999999999999999999.9999999999"}, true},
		{"t_timestamp", "(ts TIMESTAMP(1) PRIMARY KEY, v VARCHAR(20))",
			[]string{"'1970-01-01 08:00:01'", "'1999-12-31 23:59:59.9'", "'2000-01-01 00:00:00'", "'2000-01-01 07:59:59'", "'2000-01-01 08:00:00'", "'2000-01-01 08:00:00.1'", "'2024-03-10 02:30:00'", "'2038-01-19 11:14:07'"}, true},
		{"t_date", "(d DATE PRIMARY KEY, v VARCHAR(20))",
			[]string{"'0000-00-00'", "'1000-01-01'", "'1969-12-31'", "'1970-01-01'", "'2024-02-29'", "'9999-12-31'"}, true},
		{"t_time", "(tm TIME(2) PRIMARY KEY, v VARCHAR(20))",
			[]string{"'-838:59:59'", "'-24:00:00'", "'-00:00:00.01'", "'00:00:00'", "'00:00:00.01'", "'23:59:59.99'", "'100:00:00'", "'838:59:59'"}, true},
		{"t_char", "(k CHAR(5) CHARACTER SET ascii PRIMARY KEY, v VARCHAR(20))",
			[]string{"'a'", "'a b'", "'ab'", "'B'", "'b c'", "'zzzzz'", "''", "'-'"}, true},
		{"t_double", "(f DOUBLE PRIMARY KEY, v VARCHAR(20))",
			[]string{"-1.5", "0", "0.1", "0.30000000000000004", "1e300", "3.141592653589793", "2.5"}, false},
		{"t_enum", "(e ENUM('z','a','m') PRIMARY KEY, v VARCHAR(20))", []string{"'a'", "'m'", "'z'"}, false},
	}
}

func TestChunkRealMariaDB(t *testing.T) {
	// The server's time zone is not the session's '+00:00': TIMESTAMP
	// bounds must be read and written in the same zone.
	db := rdbStart(t, "--default-time-zone=+08:00")
	root := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	rdbExec(t, root, "SET SESSION sql_mode = ''", "SET NAMES utf8mb4", "CREATE DATABASE ck")
	src := rdbSource(db.Host, db.Port, testenv.ReplUser, testenv.ReplPassword)

	t.Run("tables", func(t *testing.T) { chunkTables(t, root, src) })
	t.Run("collation", func(t *testing.T) { chunkCollation(t, root, src) })
	t.Run("charsets", func(t *testing.T) { chunkCharsets(t, root) })
	t.Run("position", func(t *testing.T) { chunkPositions(t, root, src) })
	t.Run("pool", func(t *testing.T) { chunkPool(t, db, root) })
	t.Run("estimate", func(t *testing.T) { chunkEstimate(t, root, src) })
}

func chunkTables(t *testing.T, root *client.Conn, src *config.Source) {
	r := NewChunkReader(src, binlogpos.FlavorMariaDB, "", chunkPolicy(), 3)
	defer r.Close()
	for _, c := range chunkCases() {
		t.Run(c.name, func(t *testing.T) {
			rdbExec(t, root, "CREATE TABLE ck."+c.name+" "+c.create)
			for i, k := range c.keys {
				rdbExec(t, root, fmt.Sprintf("INSERT INTO ck.%s VALUES (%s, 'row %d')", c.name, k, i))
			}
			ts := chunkLoad(t, root, "ck", c.name)
			if ok, why := Chunkable(ts); ok != c.split {
				t.Fatalf("Chunkable = %v (%s), want %v", ok, why, c.split)
			}
			full := chunkFullSelect(t, src, ts, chunkPolicy())
			if len(full) != len(c.keys) {
				t.Fatalf("the full SELECT has %d rows, %d were inserted", len(full), len(c.keys))
			}
			for _, size := range []int{3, 1, len(c.keys), len(c.keys) + 1} {
				rows, chunks := chunkIterate(t, r, ts, size)
				chunkSame(t, rows, full)
				want := (len(c.keys) + size - 1) / size
				if !c.split {
					want = 1
				}
				if chunks != want {
					t.Errorf("chunk size %d: %d chunks, want %d", size, chunks, want)
				}
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		rdbExec(t, root, "CREATE TABLE ck.t_empty (id INT PRIMARY KEY)")
		ts := chunkLoad(t, root, "ck", "t_empty")
		rows, chunks := chunkIterate(t, r, ts, 3)
		if len(rows) != 0 || chunks != 1 {
			t.Errorf("empty table: %d rows in %d chunks, want 0 in 1", len(rows), chunks)
		}
	})
	t.Run("random", func(t *testing.T) {
		// Many rows, a composite key with duplicates in its first column,
		// and chunks that do not divide the row count.
		rdbExec(t, root, "CREATE TABLE ck.t_random (a INT, b VARCHAR(8) COLLATE utf8mb4_unicode_ci, c BIGINT, v INT, PRIMARY KEY (a, b, c))")
		rng := rand.New(rand.NewPCG(1, 2))
		seen := map[string]bool{}
		var vals []string
		for len(vals) < 997 {
			a, b, c := rng.IntN(7)-3, string(rune('a'+rng.IntN(5)))+string(rune('A'+rng.IntN(3))), rng.Int64N(20)-10
			k := fmt.Sprintf("%d|%s|%d", a, strings.ToLower(b), c)
			if seen[k] {
				continue
			}
			seen[k] = true
			vals = append(vals, fmt.Sprintf("(%d, '%s', %d, %d)", a, b, c, len(vals)))
		}
		rdbExec(t, root, "INSERT INTO ck.t_random VALUES "+strings.Join(vals, ", "))
		ts := chunkLoad(t, root, "ck", "t_random")
		full := chunkFullSelect(t, src, ts, chunkPolicy())
		for _, size := range []int{7, 100} {
			rows, chunks := chunkIterate(t, r, ts, size)
			chunkSame(t, rows, full)
			if want := (len(vals) + size - 1) / size; chunks != want {
				t.Errorf("chunk size %d: %d chunks, want %d", size, chunks, want)
			}
		}
	})
	t.Run("malformed_bound", func(t *testing.T) {
		ts := chunkLoad(t, root, "ck", "t_int")
		_, _, err := r.ReadChunk(context.Background(), ts, `{"v":1,"key":[{"str":"1"}]}`, "", true)
		if err == nil || !strings.Contains(err.Error(), "read a chunk of ck.t_int: the copy bound") {
			t.Errorf("malformed bound: %v", err)
		}
	})
}

// chunkCollation checks that a text bound compares in the column's
// collation: the _utf8mb4 literal is coercible, so the column decides.
func chunkCollation(t *testing.T, root *client.Conn, src *config.Source) {
	conn := rdbConnect(t, src)
	rdbExec(t, conn, SnapshotSessionSQL...)
	if got := rdbQueryString(t, conn, "SELECT COERCIBILITY("+chunkValue{chunkStr, "a"}.literal()+")"); got != "4" {
		t.Errorf("COERCIBILITY of the text literal = %s, want 4 (coercible)", got)
	}
	count := func(table string, b chunkBound, op string) []string {
		t.Helper()
		ts := chunkLoad(t, root, "ck", table)
		q := "SELECT k FROM " + chunkTable(ts) + " WHERE " + chunkLexPred(chunkKeyCols(ts), b, op) + " ORDER BY k"
		res, err := conn.Execute(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var out []string
		for _, row := range res.Values {
			out = append(out, string(row[0].AsString()))
		}
		return out
	}
	a := chunkBound{{chunkStr, "a"}}
	// general_ci: 'B', 'É', ... follow 'a'; in bytes 'B' comes before it.
	if got := count("t_varchar_ci", a, "<="); !slices.Equal(got, []string{"", "a"}) {
		t.Errorf("general_ci: keys <= 'a' are %q, want ['' 'a']", got)
	}
	if got := count("t_varchar_ci", chunkBound{{chunkStr, "e"}}, "<="); !slices.Contains(got, "É") || slices.Contains(got, "f") {
		t.Errorf("general_ci: keys <= 'e' are %q, want 'É' (equal to 'e') and not 'f'", got)
	}
	if got := count("t_varchar_bin", a, "<="); !slices.Contains(got, "B") || slices.Contains(got, "É") {
		t.Errorf("utf8mb4_bin: keys <= 'a' are %q, want 'B' (0x42 < 0x61) and not 'É'", got)
	}
	// PAD SPACE: 'c' equals 'c ', so the row 'c ' is not after 'c'.
	if got := count("t_varchar_ci", chunkBound{{chunkStr, "c"}}, ">"); slices.Contains(got, "c ") || !slices.Contains(got, "É") {
		t.Errorf("general_ci: keys > 'c' are %q, want no 'c ' and 'É'", got)
	}
	// latin1: the utf8mb4 literal is converted to latin1 and compared in
	// latin1_swedish_ci.
	if got := count("t_latin1", chunkBound{{chunkStr, "é"}}, "<="); !slices.Contains(got, "c") || slices.Contains(got, "x") || !slices.Contains(got, "é") {
		t.Errorf("latin1: keys <= 'é' are %q", got)
	}
	if got := count("t_latin1", chunkBound{{chunkStr, "\u0081"}}, "<="); !slices.Contains(got, "\u0081") {
		t.Errorf("latin1: keys <= U+0081 are %q, want the row 0x81", got)
	}
}

// chunkCharsets checks on the server that every single-byte character set
// chunkCharsetExact accepts converts to utf8mb4 and back unchanged, and
// that every one it refuses does not.
func chunkCharsets(t *testing.T, root *client.Conn) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for name := range singleByteSets {
		q := fmt.Sprintf("SELECT HEX(CONVERT(CONVERT(CONVERT(X'%X' USING %s) USING utf8mb4) USING %s))", all, name, name)
		got := rdbQueryString(t, root, q)
		same := got == fmt.Sprintf("%X", all)
		if same != chunkCharsetExact(name) {
			t.Errorf("%s: the server's round trip through utf8mb4 is exact: %v; chunkCharsetExact says %v", name, same, chunkCharsetExact(name))
		}
	}
}

func chunkCmpPos(t *testing.T, a, b cdcsync.Position) int {
	t.Helper()
	if dec(a).File == "" || dec(b).File == "" {
		t.Fatalf("positions without a file: %+v, %+v", a, b)
	}
	if c := strings.Compare(dec(a).File, dec(b).File); c != 0 {
		return c
	}
	return int(int64(dec(a).Offset) - int64(dec(b).Offset))
}

func chunkPositions(t *testing.T, root *client.Conn, src *config.Source) {
	ctx := context.Background()
	rdbExec(t, root, "CREATE TABLE ck.t_pos (id INT PRIMARY KEY)")
	ts := chunkLoad(t, root, "ck", "t_pos")
	now := func() cdcsync.Position {
		t.Helper()
		p, err := CurrentPosition(ctx, root, binlogpos.FlavorMariaDB, "uuid-1")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ids := func(rows []cdcsync.Row) []int32 {
		var out []int32
		for _, r := range rows {
			out = append(out, r[0].(int32))
		}
		slices.Sort(out)
		return out
	}

	t.Run("mariadb_exact", func(t *testing.T) {
		r := NewChunkReader(src, binlogpos.FlavorMariaDB, "uuid-1", nil, 1)
		defer r.Close()
		rdbExec(t, root, "INSERT INTO ck.t_pos VALUES (1)")
		p1 := now()
		rows, pos, err := r.ReadChunk(ctx, ts, "", "", true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(rows), []int32{1}) {
			t.Errorf("rows %v, want [1]", ids(rows))
		}
		// Nothing was written since p1: the snapshot's position is p1's
		// file and offset (a chunk's position carries no GTID set).
		if dec(pos).File != dec(p1).File || dec(pos).Offset != dec(p1).Offset {
			t.Errorf("position %+v, want the server's %+v", pos, p1)
		}
		if dec(pos).GTIDSet != "" || dec(pos).Flavor != binlogpos.FlavorMariaDB || dec(pos).ServerUUID != "uuid-1" {
			t.Errorf("position %+v: want file and offset only, with flavor and server", pos)
		}
		rdbExec(t, root, "INSERT INTO ck.t_pos VALUES (2)")
		p2 := now()
		if chunkCmpPos(t, pos, p2) >= 0 {
			t.Errorf("the chunk's position %+v is not before the later INSERT's %+v", pos, p2)
		}
		// A row inserted after the snapshot opened is not in the chunk,
		// and the position is before it.
		r.afterBegin = func() { rdbExec(t, root, "INSERT INTO ck.t_pos VALUES (3)") }
		rows, pos, err = r.ReadChunk(ctx, ts, "", "", true)
		r.afterBegin = nil
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(rows), []int32{1, 2}) {
			t.Errorf("rows %v, want [1 2]: the INSERT after the snapshot must not be seen", ids(rows))
		}
		if dec(pos).File != dec(p2).File || dec(pos).Offset != dec(p2).Offset {
			t.Errorf("position %+v, want %+v (before the INSERT of 3)", pos, p2)
		}
		// The next chunk sees it, at a later position.
		rows, pos3, err := r.ReadChunk(ctx, ts, `{"v":1,"key":[{"int":"2"}]}`, "", true)
		if err != nil {
			t.Fatal(err)
		}
		if p := now(); !slices.Equal(ids(rows), []int32{3}) || dec(pos3).File != dec(p).File || dec(pos3).Offset != dec(p).Offset || chunkCmpPos(t, pos3, pos) <= 0 {
			t.Errorf("after 2: rows %v at %+v, want [3] at %+v", ids(rows), pos3, now())
		}
	})

	t.Run("mysql_high_watermark", func(t *testing.T) {
		// The MySQL path on MariaDB: no snapshot position is asked for; the
		// position is read after the SELECT.
		r := NewChunkReader(src, binlogpos.FlavorMySQL, "uuid-2", nil, 1)
		defer r.Close()
		rdbExec(t, root, "INSERT INTO ck.t_pos VALUES (4)")
		p4 := now()
		rows, pos, err := r.ReadChunk(ctx, ts, "", "", true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ids(rows), 4) {
			t.Errorf("rows %v lack 4", ids(rows))
		}
		if chunkCmpPos(t, pos, p4) < 0 || dec(pos).Flavor != binlogpos.FlavorMySQL || dec(pos).ServerUUID != "uuid-2" {
			t.Errorf("position %+v is not at or after %+v", pos, p4)
		}
		r.afterBegin = func() { rdbExec(t, root, "INSERT INTO ck.t_pos VALUES (5)") }
		rows, pos, err = r.ReadChunk(ctx, ts, "", "", true)
		r.afterBegin = nil
		if err != nil {
			t.Fatal(err)
		}
		p5 := now()
		if slices.Contains(ids(rows), 5) {
			t.Errorf("rows %v hold 5, inserted after the snapshot opened", ids(rows))
		}
		if chunkCmpPos(t, pos, p5) != 0 {
			t.Errorf("high watermark %+v, want the position after the INSERT of 5, %+v", pos, p5)
		}
		rdbExec(t, root, "INSERT INTO ck.t_pos VALUES (6)")
		if chunkCmpPos(t, pos, now()) >= 0 {
			t.Errorf("position %+v is not before a later INSERT", pos)
		}
	})
}

// chunkPool checks the pool's bound, concurrent use, Close, recovery after
// a cancelled call and after a connection the server killed.
func chunkPool(t *testing.T, db *testenv.MariaDB, root *client.Conn) {
	ctx := context.Background()
	rdbExec(t, root, "CREATE USER chunkpool@'%' IDENTIFIED BY 'pool-secret'",
		"GRANT SELECT, BINLOG MONITOR ON *.* TO chunkpool@'%'")
	src := rdbSource(db.Host, db.Port, "chunkpool", "pool-secret")
	conns := func() []string { // also called from other goroutines
		t.Helper()
		res, err := root.Execute("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'chunkpool' ORDER BY ID")
		if err != nil {
			t.Errorf("list the pool's connections: %v", err)
			return nil
		}
		var ids []string
		for _, row := range res.Values {
			ids = append(ids, connText(row[0]))
		}
		return ids
	}
	waitConns := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(conns()) != n {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections of the pool's user, want %d", len(conns()), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	ts := chunkLoad(t, root, "ck", "t_int")
	full := chunkFullSelect(t, rdbSource(db.Host, db.Port, testenv.ReplUser, testenv.ReplPassword), ts, nil)

	r := NewChunkReader(src, binlogpos.FlavorMariaDB, "", nil, 2)
	if n := len(conns()); n != 0 {
		t.Fatalf("%d connections before the first call; the pool opens them lazily", n)
	}
	// Bounds first, then every chunk from 8 goroutines at once.
	var bounds []string
	after := ""
	for {
		hi, last, err := r.NextBound(ctx, ts, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		bounds = append(bounds, hi)
		if last {
			break
		}
		after = hi
	}
	var (
		mu   sync.Mutex
		rows []cdcsync.Row
		wg   sync.WaitGroup
		most int
	)
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				lo := ""
				if i > 0 {
					lo = bounds[i-1]
				}
				got, _, err := r.ReadChunk(ctx, ts, lo, bounds[i], bounds[i] == "")
				mu.Lock()
				if err != nil {
					t.Errorf("chunk %d: %v", i, err)
				}
				rows = append(rows, got...)
				most = max(most, len(conns()))
				mu.Unlock()
			}
		})
	}
	for i := range bounds {
		work <- i
	}
	close(work)
	wg.Wait()
	chunkSame(t, rows, full)
	if n := len(conns()); n < 1 || n > 2 || most > 2 {
		t.Errorf("the pool holds %d connections (at most %d seen), want 1 or 2", n, most)
	}
	r.Close()
	waitConns(0)
	if _, _, err := r.ReadChunk(ctx, ts, "", "", true); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("ReadChunk after Close: %v", err)
	}

	// A cancelled call closes its connection; the next call opens another.
	r = NewChunkReader(src, binlogpos.FlavorMariaDB, "", nil, 1)
	defer r.Close()
	cctx, cancel := context.WithCancel(ctx)
	r.afterBegin = cancel
	_, _, err := r.ReadChunk(cctx, ts, "", "", true)
	r.afterBegin = nil
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "read the chunk of ck.t_int from the start of the table to the end of the table") {
		t.Errorf("cancelled ReadChunk: %v", err)
	}
	waitConns(0)
	if got, _, err := r.ReadChunk(ctx, ts, "", "", true); err != nil || len(got) != len(full) {
		t.Errorf("ReadChunk after a cancelled one: %d rows, %v", len(got), err)
	}

	// A pooled connection the server killed: pinged before reuse after
	// pingAfter, so the call succeeds on a new connection; without the ping
	// the call fails (and the next one succeeds).
	kill := func() {
		t.Helper()
		ids := conns()
		if len(ids) != 1 {
			t.Fatalf("%d pooled connections, want 1", len(ids))
		}
		rdbExec(t, root, "KILL "+ids[0])
		waitConns(0)
	}
	r.pingAfter = 0
	kill()
	if _, _, err := r.NextBound(ctx, ts, "", 3); err != nil {
		t.Errorf("NextBound on a killed pooled connection (pinged): %v", err)
	}
	r.pingAfter = time.Hour
	kill()
	if _, _, err := r.NextBound(ctx, ts, "", 3); err == nil || !strings.Contains(err.Error(), "find the end of the first 3-row chunk of ck.t_int: ") {
		t.Errorf("NextBound on a killed pooled connection (not pinged): %v", err)
	}
	if _, _, err := r.NextBound(ctx, ts, "", 3); err != nil {
		t.Errorf("NextBound after the failed one: %v", err)
	}
}

func chunkEstimate(t *testing.T, root *client.Conn, src *config.Source) {
	ctx := context.Background()
	r := NewChunkReader(src, binlogpos.FlavorMariaDB, "", nil, 1)
	defer r.Close()
	rdbExec(t, root, "CREATE TABLE ck.t_est (id INT PRIMARY KEY)")
	var vals []string
	for i := range 5000 {
		vals = append(vals, fmt.Sprintf("(%d)", i))
	}
	rdbExec(t, root, "INSERT INTO ck.t_est VALUES "+strings.Join(vals, ","), "ANALYZE TABLE ck.t_est")
	ts := chunkLoad(t, root, "ck", "t_est")
	n, err := r.Estimate(ctx, ts)
	if err != nil || n < 2500 || n > 10000 {
		t.Errorf("Estimate = %d, %v; want about 5000", n, err)
	}
	missing := &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "ck", Table: "nope"}}
	if _, err := r.Estimate(ctx, missing); err == nil || !strings.Contains(err.Error(), "does not list the table") {
		t.Errorf("Estimate of a missing table: %v", err)
	}
}
