package capture

// The MySQL side of verify against a real MariaDB: the canonical row text
// the server computes (RowTextSQL) equals, byte for byte, the text
// verify.AppendRowText computes from the values the initial copy decodes,
// for every type of docs/types.md; checksums and row hashes agree; keys
// order in Go as the server orders them; rows read by key.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/integration/testenv"
	"github.com/cdcsync/cdcsync/verify"
)

// verifyAllTypes is a table with a column of every type of docs/types.md.
const verifyAllTypes = `CREATE TABLE vfy.alltypes (
	id INT NOT NULL PRIMARY KEY,
	ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, mi MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
	bi BIGINT, biu BIGINT UNSIGNED, z INT(6) ZEROFILL, bo BOOL, y YEAR,
	b1 BIT(1), b9 BIT(9), b63 BIT(63), b64 BIT(64),
	d DECIMAL(10,2), dz DECIMAL(8,3) ZEROFILL, d38 DECIMAL(38,10), d65 DECIMAL(65,30), d0 DECIMAL(5,0),
	f FLOAT, fmd FLOAT(7,3), db DOUBLE, dmd DOUBLE(10,2),
	c CHAR(5), vc VARCHAR(20), tx TEXT, lt LONGTEXT, j JSON,
	vl VARCHAR(10) CHARACTER SET latin1, vg VARCHAR(10) CHARACTER SET gbk, vu VARCHAR(10) CHARACTER SET utf16,
	va VARCHAR(10) CHARACTER SET ascii, v3 VARCHAR(10) CHARACTER SET utf8mb3,
	e ENUM('a','b','ü'), st SET('x','y','ü'),
	bn BINARY(4), vb VARBINARY(10), bl BLOB,
	g GEOMETRY, pt POINT, ls LINESTRING, pg POLYGON, mpt MULTIPOINT, gc GEOMETRYCOLLECTION,
	dt DATE, dtm DATETIME, dtm6 DATETIME(6), dtm3 DATETIME(3), ts TIMESTAMP(3) NULL, ts0 TIMESTAMP NULL, ts6 TIMESTAMP(6) NULL,
	tm TIME, tm6 TIME(6), tm2 TIME(2),
	i4 INET4, i6 INET6, u UUID,
	gen INT AS (i + 1) VIRTUAL, gens VARCHAR(30) AS (CONCAT(vc, '!')) STORED
)`

var verifyAllTypesRows = []string{
	`(1, -128, 255, -32768, 16777215, -2147483648, 4294967295, -9223372036854775808, 18446744073709551615, 42, 1, 1901,
		1, 511, 9223372036854775807, 18446744073709551615,
		-99999999.99, 12.5, -1234567890123456789012345678.0123456789, 12345678901234567890123456789012345.123456789012345678901234567890, 99999,
		3.4028234e38, 1.01, 1.7976931348623157e308, -1.01,
		'ab  ', 'trailing  ', 'text', 'longtext', '{"b": 1, "a": [1.5, "x"]}',
		'é€', '中文', 'ü😀', 'ascii', 'mb3 ü',
		'ü', 'x,ü', 'ab', X'00ff', X'000102',
		ST_GeomFromText('POINT(1 2)'), ST_GeomFromText('POINT(-1.5 2e10)'), ST_GeomFromText('LINESTRING(0 0,1 1,2 2)'),
		ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0))'), ST_GeomFromText('MULTIPOINT(0 0,1 1)'),
		ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))'),
		'1000-01-01', '1000-01-01 00:00:00', '1969-12-31 23:59:59.999999', '9999-12-31 23:59:59.999', '1970-01-01 00:00:01.5', '2038-01-19 03:14:07', '1999-12-31 23:59:59.000001',
		'-838:59:59', '-00:00:00.5', '838:59:59.99',
		'255.255.255.255', '::ffff:1.2.3.4', '123e4567-e89b-12d3-a456-426614174000', DEFAULT, DEFAULT)`,
	`(2, 127, 0, 32767, 0, 2147483647, 0, 9223372036854775807, 0, 0, 0, 2155,
		0, 0, 0, 0,
		0, 0, 0, -0.000000000000000000000000000001, -99999,
		-1.17549435e-38, -999.999, 4.9e-324, 0,
		'', '', '', '', '[]',
		'', '', '', '', '',
		'a', '', X'00000000', X'', X'',
		ST_GeomFromText('POINT(0 0)'), ST_GeomFromText('POINT(0 0)'), ST_GeomFromText('LINESTRING(0 0,0 0)'),
		ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))'), ST_GeomFromText('MULTIPOINT(0 0)'), ST_GeomFromText('GEOMETRYCOLLECTION(POINT(0 0))'),
		'9999-12-31', '9999-12-31 23:59:59', '1970-01-01 00:00:00', '1970-01-01 00:00:00', '1970-01-01 00:00:01', '1970-01-01 00:00:01', '2000-02-29 12:00:00.5',
		'838:59:59', '00:00:00', '-838:59:59.99',
		'0.0.0.0', '::', '00000000-0000-0000-0000-000000000000', DEFAULT, DEFAULT)`,
	`(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
		NULL, NULL, NULL, NULL,
		NULL, NULL, NULL, NULL, NULL,
		NULL, NULL, NULL, NULL,
		NULL, NULL, NULL, NULL, NULL,
		NULL, NULL, NULL, NULL, NULL,
		NULL, NULL, NULL, NULL, NULL,
		NULL, NULL, NULL, NULL, NULL, NULL,
		NULL, NULL, NULL, NULL, NULL, NULL, NULL,
		NULL, NULL, NULL,
		NULL, NULL, NULL, DEFAULT, DEFAULT)`,
	`(4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2000,
		1, 256, 1, 9223372036854775808,
		0.01, 0.001, 0.0000000001, 0.000000000000000000000000000001, 1,
		1e-45, 0.001, 1e-300, 0.01,
		' x', ' ', 'N', 'N,', '"N"',
		' ', ' ', ' ', ' ', ' ',
		'b', 'x', X'01', X'00', X'00',
		ST_GeomFromText('POINT(1e300 -1e-300)'), ST_GeomFromText('POINT(1 1)'), ST_GeomFromText('LINESTRING(1 1,2 2)'),
		ST_GeomFromText('POLYGON((0 0,2 0,2 2,0 0))'), ST_GeomFromText('MULTIPOINT(1 1,2 2,3 3)'), ST_GeomFromText('GEOMETRYCOLLECTION(POINT(2 2))'),
		'1970-01-01', '1970-01-01 00:00:00', '2024-02-29 12:34:56.123456', '2024-02-29 12:34:56.100', '2024-06-30 23:59:59.999', '2024-06-30 23:59:59', '2024-06-30 23:59:59.000001',
		'00:00:00.000001', '-00:00:00.000001', '100:00:00.01',
		'1.2.3.4', '2001:db8::1', 'ffffffff-ffff-ffff-ffff-ffffffffffff', DEFAULT, DEFAULT)`,
}

// verifyReader returns a VerifyReader of db as the cdcsync account.
func verifyReader(t *testing.T, db *testenv.MariaDB, p *ValuePolicy) *VerifyReader {
	t.Helper()
	src := rdbSource("127.0.0.1", db.Port, testenv.ReplUser, testenv.ReplPassword)
	r, err := NewVerifyReader(context.Background(), src, p)
	if err != nil {
		t.Fatalf("NewVerifyReader: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// verifyTexts reads each row's canonical text as the server computes it,
// by the row's first column (an integer id).
func verifyTexts(t *testing.T, r *VerifyReader, ts *cdcsync.TableSchema) map[int64][]byte {
	t.Helper()
	text, ok := RowTextSQL(ts)
	if !ok {
		t.Fatalf("RowTextSQL(%s) refused the table", ts.ID)
	}
	ctx := context.Background()
	conn, err := r.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.release(conn, false)
	out := map[int64][]byte{}
	var res mysql.Result
	q := fmt.Sprintf("SELECT %s, %s FROM %s", QuoteIdent(ts.Columns[0].Name), text, chunkTable(ts))
	err = conn.ExecuteSelectStreaming(q, &res, func(raw []mysql.FieldValue) error {
		id, err := strconv.ParseInt(connText(raw[0]), 10, 64)
		if err != nil {
			return err
		}
		out[id] = bytes.Clone(raw[1].AsString())
		return nil
	}, nil)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// verifyCompareTexts checks that the server's text of every row equals
// Go's text of the row as the copy decodes it, and that the checksums of
// both sides agree.
func verifyCompareTexts(t *testing.T, r *VerifyReader, ts *cdcsync.TableSchema, p *ValuePolicy) {
	t.Helper()
	server := verifyTexts(t, r, ts)
	rows := chunkFullSelect(t, r.src, ts, p)
	if len(rows) != len(server) {
		t.Fatalf("%s: %d rows decoded, %d texts", ts.ID, len(rows), len(server))
	}
	var goSum verify.Sum
	for _, row := range rows {
		var id int64
		switch v := row[0].(type) {
		case int32:
			id = int64(v)
		case int64:
			id = v
		}
		got := verify.AppendRowText(nil, ts, row)
		want := server[id]
		goSum.Add(verify.RowHash(ts, row))
		if bytes.Equal(got, want) {
			continue
		}
		// Name the first column whose piece differs.
		for i := range ts.Columns {
			piece := verify.AppendValueText(nil, ts.Columns[i].Kind, row[i])
			if !bytes.HasPrefix(want, piece) {
				t.Errorf("%s id %d column %s (%s, %s): Go writes %q, the server's text goes on %q", ts.ID, id, ts.Columns[i].Name,
					ts.Columns[i].ColumnType, ts.Columns[i].Kind, piece, string(want[:min(len(want), len(piece)+20)]))
				break
			}
			want = want[len(piece):]
		}
	}
	sum, read, err := r.Checksum(context.Background(), ts, "", "", true)
	if err != nil {
		t.Fatal(err)
	}
	if sum != goSum {
		t.Errorf("%s: the server's checksum %+v, Go's %+v", ts.ID, sum, goSum)
	}
	if read.Pos.IsZero() || read.Exact {
		t.Errorf("a checksum's read %+v: want a high watermark", read)
	}
	hashes := map[string]uint64{}
	if _, err := r.Hashes(context.Background(), ts, "", "", true, func(key []any, hash uint64) error {
		enc, _ := cdcsync.AppendTuple(nil, key...)
		hashes[string(enc)] = hash
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		enc, _ := cdcsync.AppendTuple(nil, row[0])
		if h := verify.RowHash(ts, row); hashes[string(enc)] != h {
			t.Errorf("%s key %v: the server's row hash %x, Go's %x", ts.ID, row[0], hashes[string(enc)], h)
		}
	}
}

func TestVerifyRowText(t *testing.T) {
	// The server's time zone is not UTC: TIMESTAMP must not depend on it.
	db := rdbStart(t, "--default-time-zone=+08:00")
	conn := rdbConnect(t, rdbSource("127.0.0.1", db.Port, testenv.RootUser, ""))
	rdbExec(t, conn, "SET SESSION time_zone = '+00:00'", "CREATE DATABASE vfy", verifyAllTypes)
	for _, v := range verifyAllTypesRows {
		rdbExec(t, conn, "INSERT INTO vfy.alltypes VALUES "+v)
	}
	ts := chunkLoad(t, conn, "vfy", "alltypes")
	p := chunkPolicy()
	r := verifyReader(t, db, p)
	verifyCompareTexts(t, r, ts, p)

	t.Run("no_mix_of_collations", func(t *testing.T) {
		// Every text column is hashed as bytes: a table mixing character
		// sets and collations must not make CONCAT fail.
		rdbExec(t, conn, `CREATE TABLE vfy.mixed (id INT PRIMARY KEY, a VARCHAR(5) COLLATE utf8mb4_bin, b VARCHAR(5) CHARACTER SET latin1 COLLATE latin1_german2_ci,
			c VARCHAR(5) CHARACTER SET utf8mb3 COLLATE utf8mb3_unicode_ci, d TEXT CHARACTER SET cp1250)`,
			"INSERT INTO vfy.mixed VALUES (1, 'ä', 'ä', 'ä', 'ą'), (2, NULL, '', NULL, '')")
		verifyCompareTexts(t, r, chunkLoad(t, conn, "vfy", "mixed"), p)
	})

	t.Run("charsets", func(t *testing.T) {
		// The character sets cdcsync decodes, as the conformance suite
		// fills them (integration/types_test.go).
		rdbExec(t, conn, `CREATE TABLE vfy.charsets (id INT PRIMARY KEY, cl CHAR(8) CHARACTER SET latin1, vl VARCHAR(50) CHARACTER SET latin1,
			tl TEXT CHARACTER SET latin1, ck CHAR(8) CHARACTER SET gbk, g2 VARCHAR(20) CHARACTER SET gb2312, kr VARCHAR(20) CHARACTER SET euckr,
			cy VARCHAR(20) CHARACTER SET cp1251, l2 VARCHAR(20) CHARACTER SET latin2, u16 VARCHAR(20) CHARACTER SET utf16,
			u16le VARCHAR(20) CHARACTER SET utf16le, u2 TEXT CHARACTER SET ucs2, u32 VARCHAR(10) CHARACTER SET utf32)`,
			`INSERT INTO vfy.charsets VALUES (1, 'é ', 'Ünïcödé €‚ƒ„…†‡ˆ‰Š‹Œ', CONVERT(x'ff818d8f909d' USING latin1), '中 ',
			 '中国・―', '한국어 테스트', 'Привет, мир', 'Zażółć gęślą', 'é𝄞', 'é𝄞', 'é中', '𝄞😀'),
			 (2, 'ab  ', ' x', 'ÿ', 'a  ', 'a', 'a', 'ё', 'ő', ' ', 'a', 'x', 'a')`)
		verifyCompareTexts(t, r, chunkLoad(t, conn, "vfy", "charsets"), p)
	})

	t.Run("zero_dates", func(t *testing.T) {
		// Zero dates under a policy: NULL is NULL on both sides; to_epoch
		// differs from the server's text (the chunk is then compared row
		// by row, where the policy applies to both).
		conn := rdbConnect(t, rdbSource("127.0.0.1", db.Port, testenv.RootUser, ""))
		rdbExec(t, conn, "SET SESSION sql_mode = ''",
			"CREATE TABLE vfy.zero (id INT PRIMARY KEY, d DATE NULL, dt DATETIME NULL, ts TIMESTAMP NULL)",
			"INSERT INTO vfy.zero VALUES (1, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00')")
		nullPolicy := NewValuePolicy(config.Types{ZeroDate: config.TypeToNull, ZeroDatetime: config.TypeToNull, ZeroTimestamp: config.TypeToNull}, nil, nil)
		verifyCompareTexts(t, verifyReader(t, db, nullPolicy), chunkLoad(t, conn, "vfy", "zero"), nullPolicy)
	})

	t.Run("doubles", func(t *testing.T) {
		// MySQL prints doubles its own way (my_gcvt): random bit patterns,
		// powers of ten around the switch to exponents, float32 values.
		rdbExec(t, conn, "CREATE TABLE vfy.doubles (id INT PRIMARY KEY, d DOUBLE, f FLOAT)")
		rnd := rand.New(rand.NewPCG(1, 2))
		var vals []string
		add := func(d float64, f float32) {
			vals = append(vals, fmt.Sprintf("(%d, %s, %s)", len(vals)+1,
				strconv.FormatFloat(d, 'g', -1, 64), strconv.FormatFloat(float64(f), 'g', -1, 64)))
		}
		for e := -330; e <= 310; e++ {
			for _, m := range []float64{1, 1.5, 9.999999999999999, 1.2345678901234567} {
				d := m * math.Pow(10, float64(e))
				if d != 0 && !math.IsInf(d, 0) {
					f := float32(d)
					if math.IsInf(float64(f), 0) {
						f = 0
					}
					add(d, f)
					add(-d, -f)
				}
			}
		}
		for len(vals) < 6000 {
			d := math.Float64frombits(rnd.Uint64())
			f := math.Float32frombits(rnd.Uint32())
			if math.IsNaN(d) || math.IsInf(d, 0) || math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				continue
			}
			add(d, f)
		}
		add(0, 0)
		add(math.SmallestNonzeroFloat64, math.SmallestNonzeroFloat32)
		add(math.MaxFloat64, math.MaxFloat32)
		for c := range slices.Chunk(vals, 500) {
			rdbExec(t, conn, "INSERT INTO vfy.doubles VALUES "+strings.Join(c, ", "))
		}
		verifyCompareTexts(t, r, chunkLoad(t, conn, "vfy", "doubles"), p)
	})
}

func TestVerifyKeys(t *testing.T) {
	db := rdbStart(t)
	conn := rdbConnect(t, rdbSource("127.0.0.1", db.Port, testenv.RootUser, ""))
	rdbExec(t, conn, "CREATE DATABASE vfy",
		`CREATE TABLE vfy.k (a BIGINT UNSIGNED, b DATETIME(6), c DECIMAL(7,2), d VARBINARY(4), e TIME, f DATE, g TIMESTAMP(3) NOT NULL DEFAULT '2000-01-01',
			v INT, PRIMARY KEY (a, b, c, d, e, f, g))`)
	rnd := rand.New(rand.NewPCG(3, 4))
	var vals []string
	for i := range 3000 {
		vals = append(vals, fmt.Sprintf("(%d, '%04d-%02d-%02d 00:00:%02d.%06d', %d.%02d, X'%02x%02x', '%d:%02d:00', '19%02d-01-01', '20%02d-01-01 00:00:00.%03d', %d)",
			[]uint64{0, 1, 18446744073709551615}[rnd.IntN(3)], 1000+rnd.IntN(9000), 1+rnd.IntN(12), 1+rnd.IntN(28), rnd.IntN(60), rnd.IntN(1000000),
			rnd.IntN(20000)-10000, rnd.IntN(100), rnd.IntN(3), rnd.IntN(256), rnd.IntN(1676)-838, rnd.IntN(60), rnd.IntN(100), rnd.IntN(30), rnd.IntN(1000), i))
	}
	rdbExec(t, conn, "INSERT IGNORE INTO vfy.k VALUES "+strings.Join(vals, ", "),
		"CREATE TABLE vfy.s (a VARCHAR(10), b INT, v INT, PRIMARY KEY (a, b))",
		"INSERT INTO vfy.s VALUES ('a', 1, 1), ('B', 2, 2), ('ä', 3, 3)",
		"CREATE TABLE vfy.fl (a DOUBLE PRIMARY KEY, v INT)",
		"INSERT INTO vfy.fl VALUES (0.1, 1), (-2.5e-300, 2)")
	ts := chunkLoad(t, conn, "vfy", "k")
	p := chunkPolicy()
	r := verifyReader(t, db, p)
	ctx := context.Background()

	if !r.Ordered(ts) {
		t.Fatalf("Ordered(%s) = false, want true", ts.ID)
	}
	if r.Ordered(chunkLoad(t, conn, "vfy", "s")) {
		t.Errorf("Ordered(vfy.s) = true: Go does not know the collation of a VARCHAR key")
	}
	// Go orders the keys as the server does.
	rows := chunkFullSelect(t, r.src, ts, p)
	var byServer [][]any
	res, err := conn.Execute("SELECT v FROM vfy.k ORDER BY a, b, c, d, e, f, g")
	if err != nil {
		t.Fatal(err)
	}
	byV := map[int64]cdcsync.Row{}
	for _, row := range rows {
		byV[int64(row[len(row)-1].(int32))] = row
	}
	for i := range res.RowNumber() {
		v, _ := res.GetInt(i, 0)
		byServer = append(byServer, keyOfRow(ts, byV[v]))
	}
	for i := 1; i < len(byServer); i++ {
		c, err := verify.CompareKeys(byServer[i-1], byServer[i])
		if err != nil || c >= 0 {
			t.Fatalf("the server orders %v before %v, Go says %d (%v)", byServer[i-1], byServer[i], c, err)
		}
	}
	// Bounds stand for the keys they name.
	hi, last, err := r.NextBound(ctx, ts, "", 100)
	if err != nil || last {
		t.Fatalf("NextBound: %q %v %v", hi, last, err)
	}
	key, err := r.BoundKey(ts, hi)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := verify.CompareKeys(key, byServer[99]); err != nil || c != 0 {
		t.Errorf("BoundKey of the 100th row's bound = %v, want %v (%v)", key, byServer[99], err)
	}
	sum, _, err := r.Checksum(ctx, ts, "", hi, false)
	if err != nil || sum.Rows != 100 {
		t.Errorf("the first 100-row chunk sums %+v (%v)", sum, err)
	}

	// Rows by key: present keys come back, absent ones do not, exactly.
	for _, tc := range []struct {
		table string
		keys  [][]any
		want  int
	}{
		{"k", [][]any{byServer[0], byServer[1500], byServer[len(byServer)-1], {"5", int64(0), "0.00", []byte{9}, int64(0), int32(0), int64(0)}}, 3},
		{"s", [][]any{{"a", int32(1)}, {"b", int32(2)}, {"A", int32(1)}, {"ä", int32(3)}}, 2}, // "b" matches "B" in the collation, but is not its key
		{"fl", [][]any{{0.1}, {-2.5e-300}, {0.2}}, 2},                                         // no literal: the table is read
	} {
		ts := chunkLoad(t, conn, "vfy", tc.table)
		got, read, err := r.Rows(ctx, ts, tc.keys)
		if err != nil {
			t.Fatalf("Rows of %s: %v", tc.table, err)
		}
		if len(got) != tc.want {
			t.Errorf("Rows of %s by %v: %d rows %v, want %d", tc.table, tc.keys, len(got), got, tc.want)
		}
		if !read.Exact || dec(read.Pos).GTIDSet == "" || dec(read.Pos).File == "" || read.Low != read.Pos {
			t.Errorf("Rows' read %+v: want the snapshot's exact position with its GTID", read)
		}
		// ReadKeys (the daemon's repair) reads the same rows.
		again, pos, err := r.ReadKeys(ctx, ts, tc.keys)
		if err != nil || len(again) != len(got) || dec(pos).File == "" {
			t.Errorf("ReadKeys of %s: %d rows at %s (%v), want %d", tc.table, len(again), pos, err, len(got))
		}
	}
}

func keyOfRow(ts *cdcsync.TableSchema, row cdcsync.Row) []any {
	key := make([]any, len(ts.PrimaryKey))
	for i, k := range ts.PrimaryKey {
		key[i] = row[k]
	}
	return key
}
