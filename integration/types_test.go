package integration

// The type conformance suite: one table per type family, filled with edge
// values, copied by the initial snapshot and inserted again through the
// binlog, then updated and deleted. Every value read back from Iceberg (by
// iceberg-go) must equal what the server itself renders for that row
// (an SQL expression per type, independent of cdcsync's decoders), the rows
// that came through the copy must equal their twins that came through the
// binlog value for value, and each column must have the Iceberg type
// docs/types.md promises. The server runs at time zone +08:00 and cdcsync
// under TZ=America/New_York.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture"
	"github.com/cdcsync/cdcsync/integration/testenv"
	"github.com/cdcsync/cdcsync/lake"
)

// typeFamily is one table of the suite.
type typeFamily struct {
	table string
	// columns follow "id INT PRIMARY KEY"; iceberg gives each column's
	// expected Iceberg type.
	columns string
	iceberg map[string]string
	// insert names the inserted columns (all but id and generated ones)
	// when the table has generated columns.
	insert string
	// rows are value lists without the id. Row i (from 1) is inserted as id
	// i before cdcsync starts (initial copy) and as id 100+i while it
	// streams (binlog).
	rows []string
	// updates are SET clauses applied in turn to rows 1 and 101; row 2 and
	// 102 are deleted at the end.
	updates []string
	sqlMode string // session sql_mode for the inserts, when not the default
}

// pairOffset is added to a row's id for its binlog twin.
const pairOffset = 100

var longGBK = strings.Repeat("中文汉字ＡＢＣ", 3000)

var typeFamilies = []typeFamily{
	{
		table: "ints",
		columns: `ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT, miu MEDIUMINT UNSIGNED,
			i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED, bo BOOL, y YEAR, zf INT(8) UNSIGNED ZEROFILL`,
		iceberg: map[string]string{"ti": "int", "tiu": "int", "si": "int", "siu": "int", "mi": "int", "miu": "int", "i": "int",
			"iu": "long", "bi": "long", "biu": "decimal(20, 0)", "bo": "int", "y": "int", "zf": "long"},
		rows: []string{
			`-128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0, -128, 1901, 0`,
			`127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615, 127, 2155, 99999999`,
			`0, 1, 0, 1, 0, 1, 0, 1, 0, 9223372036854775808, 1, 0, 42`,
			`NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
			`-1, 128, -1, 32768, -1, 8388608, -1, 2147483648, -1, 9223372036854775807, 0, 1970, 1`,
		},
		updates: []string{"biu = 18446744073709551614, y = 2000", "ti = NULL, iu = 4294967294"},
	},
	{
		table: "decimals",
		columns: `d1 DECIMAL(10,2), d2 DECIMAL(38,0), d3 DECIMAL(38,30), d4 DECIMAL(65,30), d5 DECIMAL(65,0), d6 DECIMAL(39,2),
			d7 DECIMAL(5,5) UNSIGNED, f FLOAT, fd DOUBLE, f2 FLOAT(7,3), fp FLOAT(30)`,
		iceberg: map[string]string{"d1": "decimal(10, 2)", "d2": "decimal(38, 0)", "d3": "decimal(38, 30)", "d4": "string", "d5": "string",
			"d6": "string", "d7": "decimal(5, 5)", "f": "float", "fd": "double", "f2": "float", "fp": "double"},
		rows: []string{
			`-99999999.99, -99999999999999999999999999999999999999, -99999999.999999999999999999999999999999,
			 -99999999999999999999999999999999999.999999999999999999999999999999, -99999999999999999999999999999999999999999999999999999999999999999,
			 -9999999999999999999999999999999999999.99, 0, -3.40282e38, -1.7976931348623157e308, -9999.999, -1e300`,
			`99999999.99, 99999999999999999999999999999999999999, 99999999.999999999999999999999999999999,
			 99999999999999999999999999999999999.999999999999999999999999999999, 99999999999999999999999999999999999999999999999999999999999999999,
			 9999999999999999999999999999999999999.99, 0.99999, 3.40282e38, 1.7976931348623157e308, 9999.999, 2.2250738585072014e-308`,
			`0, 0, -0.000000000000000000000000000001, -0.000000000000000000000000000001, 0, 0.01, 0.00001, 3.1415927, 0.1, 0.5, 0.30000000000000004`,
			`NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
			`12.5, 1, 1, 1, 1, 1, 0.5, 16777217, 1e-7, -0.001, 123456789.123456789`,
		},
		updates: []string{"d4 = 0.5, f = 1.17549435e-38", "fd = NULL"},
	},
	{
		table:   "bits",
		columns: `b1 BIT(1), b2 BIT(2), b8 BIT(8), b12 BIT(12), b63 BIT(63), b64 BIT(64)`,
		iceberg: map[string]string{"b1": "boolean", "b2": "long", "b8": "long", "b12": "long", "b63": "long", "b64": "decimal(20, 0)"},
		rows: []string{
			`b'0', b'00', 0, 0, 0, 0`,
			`b'1', b'11', 255, 4095, 9223372036854775807, 18446744073709551615`,
			`1, 2, b'10101010', b'100000000001', 4611686018427387904, 9223372036854775808`,
			`NULL, NULL, NULL, NULL, NULL, NULL`,
		},
		updates: []string{"b1 = 0, b64 = 1", "b63 = NULL"},
	},
	{
		table: "strings",
		columns: `c CHAR(10), vc VARCHAR(255), tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT, j JSON,
			v3 VARCHAR(20) CHARACTER SET utf8mb3, va VARCHAR(20) CHARACTER SET ascii, cb CHAR(10) COLLATE utf8mb4_bin`,
		iceberg: map[string]string{"c": "string", "vc": "string", "tt": "string", "tx": "string", "mt": "string", "lt": "string",
			"j": "string", "v3": "string", "va": "string", "cb": "string"},
		rows: []string{
			`'', '', '', '', '', '', '{}', '', '', ''`,
			`'trailing  ', ' lead and trail  ', '😀🎉', 'nested ünïcødé 中文 🇫🇷 \t tab\nnewline', REPEAT('m', 70000), REPEAT('😀', 100000),
			 '{"a": {"b": ["é", "😀", "\\u00e9", "\\ud83d\\ude00"]}, "big": 18446744073709551616123, "f": 1.7976931348623157e308, "neg": -0.0, "s": "\\"q\\""}',
			 'utf8mb3 é中', 'ascii ~!', 'x  '`,
			`'  ', 'NULL', 'null', '0', '\\\\', '''', '[1, 2.50, -3e2, null, true]', '€', '\\0', ' '`,
			`NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
		},
		updates: []string{"vc = '😀 updated', j = '{\"k\": [1, {\"x\": \"ü\"}]}'", "c = NULL, lt = ''"},
	},
	{
		table: "charsets",
		columns: `cl CHAR(8) CHARACTER SET latin1, vl VARCHAR(50) CHARACTER SET latin1, tl TEXT CHARACTER SET latin1,
			ck CHAR(8) CHARACTER SET gbk, vk VARCHAR(50) CHARACTER SET gbk, tk MEDIUMTEXT CHARACTER SET gbk,
			g2 VARCHAR(20) CHARACTER SET gb2312, kr VARCHAR(20) CHARACTER SET euckr, cy VARCHAR(20) CHARACTER SET cp1251,
			l2 VARCHAR(20) CHARACTER SET latin2, u16 VARCHAR(20) CHARACTER SET utf16, u16le VARCHAR(20) CHARACTER SET utf16le,
			u2 TEXT CHARACTER SET ucs2, u32 VARCHAR(10) CHARACTER SET utf32`,
		iceberg: map[string]string{"cl": "string", "vl": "string", "tl": "string", "ck": "string", "vk": "string", "tk": "string",
			"g2": "string", "kr": "string", "cy": "string", "l2": "string", "u16": "string", "u16le": "string", "u2": "string", "u32": "string"},
		rows: []string{
			`'é ', 'Ünïcödé €‚ƒ„…†‡ˆ‰Š‹Œ', CONVERT(x'ff818d8f909d' USING latin1), '中 ', '汉字ＡＢＣ·', '` + longGBK + `',
			 '中国・―', '한국어 테스트', 'Привет, мир', 'Zażółć gęślą', 'é𝄞', 'é𝄞', 'é中', '𝄞😀'`,
			`'', '', '', '', '', '', '', '', '', '', '', '', '', ''`,
			`NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
			`'ab  ', ' x', 'ÿ', 'a  ', '　', 'ａ', 'a', 'a', 'ё', 'ő', ' ', 'a', CONVERT(x'd800' USING ucs2), 'a'`,
		},
		updates: []string{"vl = 'çà et là', vk = '更新'", "tk = NULL"},
	},
	{
		table:   "binaries",
		columns: `b4 BINARY(4), b16 BINARY(16), vb VARBINARY(100), tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB`,
		iceberg: map[string]string{"b4": "binary", "b16": "binary", "vb": "binary", "tb": "binary", "bl": "binary", "mb": "binary", "lb": "binary"},
		rows: []string{
			`x'00', x'', x'', x'', x'', x'', x''`,
			`x'01000000', x'ffffffffffffffffffffffffffffffff', x'00ff00', x'00', REPEAT(x'ab', 65535), REPEAT('m', 16777215), REPEAT('l', 16777217)`,
			`'a', x'61', x'610000', x'0000', x'00', x'ff', x'00'`,
			`NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
		},
		updates: []string{"b4 = x'0a0b', vb = x'00'", "b16 = NULL"},
	},
	{
		table:   "enums",
		columns: `e ENUM('a','b''c','d\\e','é','x,y','中'), s SET('x','y','z','é'), s64 SET(` + set64 + `)`,
		iceberg: map[string]string{"e": "string", "s": "string", "s64": "string"},
		rows: []string{
			`'a', '', 'a0'`,
			`'中', 'x,y,z,é', '` + strings.ReplaceAll(strings.ReplaceAll(set64, "'", ""), ",", ",") + `'`,
			`'b''c', 'z,x', 'a63,a1'`,
			`NULL, NULL, NULL`,
			`'nosuchlabel', 'y', ''`, // the empty error value, under sql_mode ''
			`'d\\e', 'é', 'a31,a32'`,
		},
		updates: []string{"e = 'x,y', s = 'x,é'", "s64 = NULL"},
		sqlMode: "NO_ENGINE_SUBSTITUTION",
	},
	{
		table: "temporal",
		columns: `d DATE, dt DATETIME, dt1 DATETIME(1), dt2 DATETIME(2), dt3 DATETIME(3), dt4 DATETIME(4), dt5 DATETIME(5), dt6 DATETIME(6),
			ts TIMESTAMP NULL, ts1 TIMESTAMP(1) NULL, ts2 TIMESTAMP(2) NULL, ts3 TIMESTAMP(3) NULL, ts4 TIMESTAMP(4) NULL, ts5 TIMESTAMP(5) NULL, ts6 TIMESTAMP(6) NULL,
			tm TIME, tm1 TIME(1), tm2 TIME(2), tm3 TIME(3), tm4 TIME(4), tm5 TIME(5), tm6 TIME(6)`,
		iceberg: map[string]string{"d": "date", "dt": "timestamp", "dt1": "timestamp", "dt2": "timestamp", "dt3": "timestamp", "dt4": "timestamp",
			"dt5": "timestamp", "dt6": "timestamp", "ts": "timestamptz", "ts1": "timestamptz", "ts2": "timestamptz", "ts3": "timestamptz",
			"ts4": "timestamptz", "ts5": "timestamptz", "ts6": "timestamptz", "tm": "long", "tm1": "long", "tm2": "long", "tm3": "long",
			"tm4": "long", "tm5": "long", "tm6": "long"},
		// TIMESTAMP literals are wall clocks of the server's +08:00.
		rows: []string{
			`'1000-01-01', '1000-01-01 00:00:00', '1000-01-01 00:00:00.1', '1000-01-01 00:00:00.01', '1000-01-01 00:00:00.001',
			 '1000-01-01 00:00:00.0001', '1000-01-01 00:00:00.00001', '1000-01-01 00:00:00.000001',
			 '1970-01-01 08:00:01', '1970-01-01 08:00:01.1', '1970-01-01 08:00:01.01', '1970-01-01 08:00:01.001',
			 '1970-01-01 08:00:01.0001', '1970-01-01 08:00:01.00001', '1970-01-01 08:00:01.000001',
			 '-838:59:59', '-838:59:59.0', '-838:59:59.00', '-838:59:59.000', '-838:59:59.0000', '-838:59:59.00000', '-838:59:59.000000'`,
			`'9999-12-31', '9999-12-31 23:59:59', '9999-12-31 23:59:59.9', '9999-12-31 23:59:59.99', '9999-12-31 23:59:59.999',
			 '9999-12-31 23:59:59.9999', '9999-12-31 23:59:59.99999', '9999-12-31 23:59:59.999999',
			 '2038-01-19 11:14:07', '2038-01-19 11:14:07.9', '2038-01-19 11:14:07.99', '2038-01-19 11:14:07.999',
			 '2038-01-19 11:14:07.9999', '2038-01-19 11:14:07.99999', '2038-01-19 11:14:07.999999',
			 '838:59:59', '838:59:59.0', '838:59:59.00', '838:59:59.000', '838:59:59.0000', '838:59:59.00000', '838:59:59.000000'`,
			`'1969-07-20', '1969-07-20 20:17:40', '1969-12-31 23:59:59.9', '1969-12-31 23:59:59.99', '1969-12-31 23:59:59.999',
			 '1969-12-31 23:59:59.9999', '1969-12-31 23:59:59.99999', '1969-12-31 23:59:59.999999',
			 '2024-03-10 15:30:00', '2024-03-10 14:59:59.9', '2024-11-03 13:30:00.25', '2024-11-03 14:30:00.125',
			 '2024-02-29 12:00:00.0625', '2000-01-01 08:00:00.03125', '1999-12-31 23:59:59.999999',
			 '-00:00:00', '-00:00:00.5', '24:00:00.25', '-12:34:56.789', '100:00:00.0001', '-01:02:03.00001', '00:00:00.000001'`,
			`NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
			`'1582-10-04', '1582-10-15 00:00:00', '1900-02-28 23:59:59.5', '2000-02-29 00:00:00.25', '2100-03-01 00:00:00',
			 '1970-01-01 00:00:00', '1970-01-01 00:00:00.00001', '1970-01-01 00:00:00.000001',
			 '2005-06-07 08:09:10', '2001-09-09 09:46:40', NULL, NULL, NULL, NULL, NULL,
			 '00:00:00', '23:59:59.9', '-24:00:00.01', '12:00:00', NULL, NULL, '-00:00:00.000001'`,
		},
		updates: []string{"d = '2024-01-01', ts6 = '2024-06-30 23:59:59.999999', tm6 = '-100:00:00.000001'", "dt = NULL, tm = '00:00:01'"},
	},
	{
		table: "spatial",
		columns: `g GEOMETRY, p POINT, ls LINESTRING, pg POLYGON, mp MULTIPOINT, ml MULTILINESTRING, mpg MULTIPOLYGON,
			gc GEOMETRYCOLLECTION`,
		iceberg: map[string]string{"g": "binary", "p": "binary", "ls": "binary", "pg": "binary", "mp": "binary", "ml": "binary",
			"mpg": "binary", "gc": "binary"},
		rows: []string{
			`ST_GeomFromText('POINT(0 0)'), POINT(-180, -90), ST_GeomFromText('LINESTRING(0 0, 1 1)'),
			 ST_GeomFromText('POLYGON((0 0, 1 0, 1 1, 0 0))'), ST_GeomFromText('MULTIPOINT(0 0, 1 1)'),
			 ST_GeomFromText('MULTILINESTRING((0 0, 1 1), (2 2, 3 3))'), ST_GeomFromText('MULTIPOLYGON(((0 0, 1 0, 1 1, 0 0)))'),
			 ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1), LINESTRING(0 0, 1 1))')`,
			`ST_GeomFromText('POLYGON((0 0, 10 0, 10 10, 0 0), (1 1, 2 1, 2 2, 1 1))', 4326), ST_GeomFromText('POINT(121.47 31.23)', 4326),
			 ST_GeomFromText('LINESTRING(-1.25 2e10, 3 4, 5 6)', 3857), ST_GeomFromText('POLYGON((0 0, 1 0, 1 1, 0 0))', 4326),
			 ST_GeomFromText('MULTIPOINT(1 2)', 3857), ST_GeomFromText('MULTILINESTRING((1 2, 3 4))'),
			 ST_GeomFromText('MULTIPOLYGON(((0 0, 1 0, 1 1, 0 0)), ((5 5, 6 5, 6 6, 5 5)))'), ST_GeomFromText('GEOMETRYCOLLECTION EMPTY')`,
			`NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
		},
		updates: []string{"p = POINT(1e-300, -1e300)", "g = NULL"},
	},
	{
		table:   "mariadb",
		columns: `i4 INET4, i6 INET6, u UUID`,
		iceberg: map[string]string{"i4": "string", "i6": "string", "u": "string"},
		rows: []string{
			`'0.0.0.0', '::', '00000000-0000-0000-0000-000000000000'`,
			`'255.255.255.255', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffffffff-ffff-ffff-ffff-ffffffffffff'`,
			`'10.0.0.1', '::ffff:1.2.3.4', '123e4567-e89b-12d3-a456-426655440000'`,
			`'192.168.1.254', '2001:db8::1:0:0:1', '01890a5d-ac96-774b-bcce-b302099a8057'`,
			`'1.0.0.0', '::1.2.3.4', '6ccd780c-baba-1026-9564-5b8c656024db'`,
			`NULL, NULL, NULL`,
			`'127.0.0.1', 'fe80::1', 'f81d4fae-7dec-11d0-a765-00a0c91e6bf6'`,
		},
		updates: []string{"i6 = '2001:db8::', u = '00000000-0000-0000-0000-000000000001'", "i4 = NULL"},
	},
	{
		table: "generated",
		columns: `a INT, b VARCHAR(20) CHARACTER SET latin1, gv INT AS (a * 2) VIRTUAL, gs VARCHAR(30) CHARACTER SET latin1 AS (CONCAT(b, '!')) STORED,
			gd DATE AS (DATE_ADD('2000-01-01', INTERVAL a DAY)) VIRTUAL, gt TIME AS (MAKETIME(a DIV 3600, ABS(a) MOD 60, 0)) STORED`,
		iceberg: map[string]string{"a": "int", "b": "string", "gv": "int", "gs": "string", "gd": "date", "gt": "long"},
		insert:  "a, b",
		rows: []string{
			`5, 'é'`,
			`-700000, ''`,
			`NULL, NULL`,
			`1234567, 'ÿ€'`,
		},
		updates: []string{"a = 7", "b = 'changed'"},
	},
}

// set64 is the label list of a SET with 64 members, a0 to a63.
var set64 = func() string {
	var b strings.Builder
	for i := range 64 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "'a%d'", i)
	}
	return b.String()
}()

// startTypesServer starts a MariaDB whose time zone is +08:00, with room
// for 16 MiB values in rows and events.
func startTypesServer(t *testing.T) *testenv.MariaDB {
	t.Helper()
	server, err := testenv.StartMariaDB(testenv.MariaDBOptions{ExtraArgs: []string{
		"--default-time-zone=+08:00", "--max-allowed-packet=256M"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Stop() })
	return server
}

// typesConn is a root connection that talks utf8mb4.
func typesConn(t *testing.T, server *testenv.MariaDB) *client.Conn {
	t.Helper()
	conn, err := server.Connect(testenv.RootUser, "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Execute("SET NAMES utf8mb4"); err != nil {
		t.Fatal(err)
	}
	return conn
}

func typesExec(t *testing.T, conn *client.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := conn.Execute(s); err != nil {
			short := s
			if len(short) > 300 {
				short = short[:300] + "..."
			}
			t.Fatalf("%s: %v", short, err)
		}
	}
}

func (f *typeFamily) insertRows(t *testing.T, conn *client.Conn, db string, offset int) {
	t.Helper()
	cols := ""
	if f.insert != "" {
		cols = "(id, " + f.insert + ")"
	}
	if f.sqlMode != "" {
		typesExec(t, conn, "SET SESSION sql_mode = '"+f.sqlMode+"'")
		defer typesExec(t, conn, "SET SESSION sql_mode = DEFAULT")
	}
	for i, r := range f.rows {
		typesExec(t, conn, fmt.Sprintf("INSERT INTO %s.%s %s VALUES (%d, %s)", db, f.table, cols, offset+i+1, r))
	}
}

func TestTypeConformance(t *testing.T) {
	server := startTypesServer(t)
	const dbName = "it_types"
	e := newEnv(t, dbName, envOptions{server: server, epoch: "interval: 300ms\n  max_bytes: 512MiB"})
	conn := typesConn(t, server)
	if tz := queryString(t, conn, "SELECT @@global.time_zone"); tz != "+08:00" {
		t.Fatalf("server time zone %s, want +08:00", tz)
	}
	for i := range typeFamilies {
		f := &typeFamilies[i]
		typesExec(t, conn, fmt.Sprintf("CREATE TABLE %s.%s (id INT PRIMARY KEY, %s) CHARACTER SET utf8mb4", dbName, f.table, f.columns))
		f.insertRows(t, conn, dbName, 0)
	}

	// cdcsync runs in New York.
	p := e.start("TZ=America/New_York")
	e.waitCaughtUp(p, 3*time.Minute)
	for i := range typeFamilies {
		typeFamilies[i].insertRows(t, conn, dbName, pairOffset)
	}
	e.waitCaughtUp(p, 3*time.Minute)

	for i := range typeFamilies {
		f := &typeFamilies[i]
		t.Run(f.table+"/inserted", func(t *testing.T) {
			ts := typesCheckOracle(t, e, conn, f.table)
			typesCheckIcebergTypes(t, e, f)
			typesCheckPairs(t, e, ts, f)
		})
	}

	// Updates and deletes, through the binlog, of rows of both origins.
	for i := range typeFamilies {
		f := &typeFamilies[i]
		if f.sqlMode != "" {
			typesExec(t, conn, "SET SESSION sql_mode = '"+f.sqlMode+"'")
		}
		for _, u := range f.updates {
			typesExec(t, conn, fmt.Sprintf("UPDATE %s.%s SET %s WHERE id IN (1, %d)", dbName, f.table, u, 1+pairOffset))
		}
		typesExec(t, conn, "SET SESSION sql_mode = DEFAULT",
			fmt.Sprintf("DELETE FROM %s.%s WHERE id IN (2, %d)", dbName, f.table, 2+pairOffset))
	}
	e.waitCaughtUp(p, 3*time.Minute)
	for i := range typeFamilies {
		f := &typeFamilies[i]
		t.Run(f.table+"/updated", func(t *testing.T) {
			ts := typesCheckOracle(t, e, conn, f.table)
			typesCheckPairs(t, e, ts, f)
			e.assertMirrors(f.table)
		})
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d, want 0; output:\n%s", code, p.output())
	}
	// The daemon's log times show it ran in New York (EST or EDT).
	if out := p.output(); !strings.Contains(out, "-05:00 level=") && !strings.Contains(out, "-04:00 level=") {
		t.Errorf("cdcsync did not run under TZ=America/New_York; output:\n%s", out)
	}
	if t.Failed() {
		t.Logf("cdcsync output:\n%s", p.output())
	}
}

func queryString(t *testing.T, conn *client.Conn, q string) string {
	t.Helper()
	r, err := conn.Execute(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	s, _ := r.GetString(0, 0)
	return s
}

// icebergRows reads a table from Iceberg as canonical rows by id.
func icebergRows(t *testing.T, e *env, table string, ts *cdcsync.TableSchema) map[int32]cdcsync.Row {
	t.Helper()
	ctx := context.Background()
	lk := e.openLake()
	tbl, err := lk.LoadTable(ctx, lk.Identifier(e.dbName, table))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := lake.ReadRows(lk.Scope(ctx), tbl, ts, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]cdcsync.Row{}
	for _, r := range rows {
		id := r[0].(int32)
		if _, dup := out[id]; dup {
			t.Errorf("%s: id %d twice in Iceberg", table, id)
		}
		out[id] = r
	}
	return out
}

// typesCheckOracle compares every value in Iceberg with the server's own
// rendering of it (typesOracle) and returns the table's schema.
func typesCheckOracle(t *testing.T, e *env, conn *client.Conn, table string) *cdcsync.TableSchema {
	t.Helper()
	ts, err := capture.LoadSchema(context.Background(), conn, cdcsync.TableID{Database: e.dbName, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	exprs := make([]string, len(ts.Columns))
	for i := range ts.Columns {
		exprs[i] = typesOracle(&ts.Columns[i])
	}
	r, err := conn.Execute(fmt.Sprintf("SELECT %s FROM %s.%s ORDER BY id", strings.Join(exprs, ", "), e.dbName, table))
	if err != nil {
		t.Fatal(err)
	}
	got := icebergRows(t, e, table, ts)
	if len(got) != len(r.Values) {
		t.Errorf("%s: Iceberg has %d rows, MySQL %d", table, len(got), len(r.Values))
	}
	for _, row := range r.Values {
		n, err := strconv.Atoi(string(row[0].AsString()))
		if err != nil {
			t.Fatalf("id %v: %v", row[0], err)
		}
		id := int32(n)
		ice, ok := got[id]
		if !ok {
			t.Errorf("%s: row %d missing in Iceberg", table, id)
			continue
		}
		for i := range ts.Columns {
			c := &ts.Columns[i]
			var want *string
			if row[i].Type != mysql.FieldValueTypeNull {
				s := string(row[i].AsString()) // every oracle is text
				want = &s
			}
			if msg := typesSame(c, want, ice[i]); msg != "" {
				t.Errorf("%s row %d column %s (%s): %s", table, id, c.Name, c.ColumnType, msg)
			}
		}
	}
	return ts
}

// typesOracle is the SQL expression that has the server render column c's
// value as text that typesSame compares with an Iceberg value.
func typesOracle(c *cdcsync.Column) string {
	q := capture.QuoteIdent(c.Name)
	switch strings.ToLower(c.DataType) {
	case "tinyint", "smallint", "mediumint", "int", "bigint", "year":
		return "CAST(" + q + " + 0 AS CHAR)"
	case "bit":
		return "CAST(" + q + " + 0 AS CHAR)"
	case "decimal":
		return "CAST(" + q + " AS CHAR)"
	case "float", "double":
		return "CAST(" + q + " + 0e0 AS CHAR)"
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		return "CONCAT(LENGTH(" + q + "), ':', SHA2(" + q + ", 256))"
	case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection":
		return "HEX(ST_AsBinary(" + q + "))"
	case "date":
		return "CAST(DATEDIFF(" + q + ", '1970-01-01') AS CHAR)"
	case "datetime":
		return "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + q + ") AS CHAR)"
	case "timestamp":
		return "CAST(CAST(UNIX_TIMESTAMP(" + q + ") * 1000000 AS SIGNED) AS CHAR)"
	case "time":
		return "CAST(CAST(TIME_TO_SEC(" + q + ") * 1000000 AS SIGNED) AS CHAR)"
	}
	// Text of every kind (CHAR ... LONGTEXT in any character set, ENUM,
	// SET, MariaDB JSON, INET4, INET6, UUID): the bytes of its utf8mb4 form.
	return "HEX(CONVERT(" + q + " USING utf8mb4))"
}

// typesSame compares the server's rendering (nil for NULL) with the value
// read from Iceberg, and says how they differ.
func typesSame(c *cdcsync.Column, want *string, got any) string {
	if want == nil || got == nil {
		if want == nil && got == nil {
			return ""
		}
		if want == nil {
			return fmt.Sprintf("MySQL NULL, Iceberg %T %v", got, got)
		}
		return fmt.Sprintf("MySQL %q, Iceberg NULL", *want)
	}
	w := *want
	var g string
	switch strings.ToLower(c.DataType) {
	case "float", "double":
		f, err := strconv.ParseFloat(w, 64)
		if err != nil {
			return fmt.Sprintf("MySQL %q is not a number", w)
		}
		switch x := got.(type) {
		case float32:
			if x == float32(f) || (math.IsNaN(float64(x)) && math.IsNaN(f)) {
				return ""
			}
		case float64:
			if x == f {
				return ""
			}
		}
		return fmt.Sprintf("MySQL %s, Iceberg %T %v", w, got, got)
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		b, _ := got.([]byte)
		sum := sha256.Sum256(b)
		g = fmt.Sprintf("%d:%x", len(b), sum)
		if g != w && len(b) < 100 {
			g += fmt.Sprintf(" (%x)", b)
		}
	case "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection":
		b, _ := got.([]byte)
		g = strings.ToUpper(hex.EncodeToString(b))
	default:
		switch x := got.(type) {
		case string:
			if c.Kind == cdcsync.KindDecimal || strings.EqualFold(c.DataType, "decimal") {
				g = x
			} else {
				g = strings.ToUpper(hex.EncodeToString([]byte(x)))
				wb, _ := hex.DecodeString(w)
				if strings.Contains(c.ColumnType, "character set ucs2") || strings.Contains(c.ColumnType, "character set utf32") {
					// The server sends a surrogate code point as ED A0..BF
					// 80..BF, which is not UTF-8; cdcsync writes U+FFFD
					// (docs/types.md).
					wb = typesSurrogates(wb)
					w = strings.ToUpper(hex.EncodeToString(wb))
				}
				if g != w {
					return fmt.Sprintf("MySQL %q, Iceberg %q", wb, x)
				}
			}
		case bool:
			g = "0"
			if x {
				g = "1"
			}
		case int32:
			g = strconv.FormatInt(int64(x), 10)
		case int64:
			g = strconv.FormatInt(x, 10)
		default:
			g = fmt.Sprintf("%T %v", got, got)
		}
	}
	if g != w {
		return fmt.Sprintf("MySQL %s, Iceberg %s", w, g)
	}
	return ""
}

// typesCheckIcebergTypes checks each column's Iceberg type against the
// mapping docs/types.md promises.
func typesCheckIcebergTypes(t *testing.T, e *env, f *typeFamily) {
	t.Helper()
	ctx := context.Background()
	lk := e.openLake()
	tbl, err := lk.LoadTable(ctx, lk.Identifier(e.dbName, f.table))
	if err != nil {
		t.Fatal(err)
	}
	for _, fld := range tbl.Schema().Fields() {
		if fld.Name == "id" {
			continue
		}
		want, ok := f.iceberg[fld.Name]
		if !ok {
			t.Errorf("%s.%s: no expected Iceberg type in the test", f.table, fld.Name)
			continue
		}
		if got := fld.Type.String(); got != want {
			t.Errorf("%s.%s: Iceberg type %s, want %s", f.table, fld.Name, got, want)
		}
	}
}

// typesCheckPairs checks that each row copied by the initial snapshot and
// its twin inserted through the binlog hold the same values in Iceberg.
func typesCheckPairs(t *testing.T, e *env, ts *cdcsync.TableSchema, f *typeFamily) {
	t.Helper()
	rows := icebergRows(t, e, f.table, ts)
	pairs := 0
	for id, r := range rows {
		if id > pairOffset {
			continue
		}
		twin, ok := rows[id+pairOffset]
		if !ok {
			t.Errorf("%s: row %d has no binlog twin %d in Iceberg", f.table, id, id+pairOffset)
			continue
		}
		pairs++
		for i := 1; i < len(ts.Columns); i++ {
			if !reflect.DeepEqual(r[i], twin[i]) && !typesBothNaN(r[i], twin[i]) {
				t.Errorf("%s column %s: row %d (initial copy) has %s, row %d (binlog) %s", f.table, ts.Columns[i].Name,
					id, cdcsync.Format(ts.Columns[i].Kind, r[i]), id+pairOffset, cdcsync.Format(ts.Columns[i].Kind, twin[i]))
			}
		}
	}
	if pairs == 0 {
		t.Errorf("%s: no pairs compared", f.table)
	}
}

// typesSurrogates replaces each ED A0..BF 80..BF with U+FFFD.
func typesSurrogates(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] == 0xed && i+2 < len(b) && b[i+1] >= 0xa0 && b[i+1] <= 0xbf && b[i+2] >= 0x80 && b[i+2] <= 0xbf {
			out = append(out, "\ufffd"...)
			i += 2
			continue
		}
		out = append(out, b[i])
	}
	return out
}

func typesBothNaN(a, b any) bool {
	x, ok1 := a.(float64)
	y, ok2 := b.(float64)
	return ok1 && ok2 && math.IsNaN(x) && math.IsNaN(y)
}

// TestTypeZeroDateStops: with the default policies, a zero date stops the
// table it is in, with nothing of its transaction, and an error that names
// the table, the column, the value, the transaction's GTID, the row's
// primary key and the setting that would mirror it; the other tables go on,
// and the table stays stopped after a restart (issue 13: the daemon exited
// 1 on every restart, every other table stopped too).
func TestTypeZeroDateStops(t *testing.T) {
	const dbName = "it_zero_stop"
	e := newEnv(t, dbName, envOptions{})
	mustExec(t, "CREATE TABLE "+dbName+".t (id INT PRIMARY KEY, d DATE NOT NULL)")
	mustExec(t, "CREATE TABLE "+dbName+".u (id INT PRIMARY KEY, v INT)")
	mustExec(t, "INSERT INTO "+dbName+".t VALUES (1, '2024-01-01')")
	mustExec(t, "INSERT INTO "+dbName+".u VALUES (1, 1)")
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	conn := typesConn(t, db)
	typesExec(t, conn, "SET SESSION sql_mode = ''",
		"BEGIN", "INSERT INTO "+dbName+".t VALUES (3, '2024-03-03')", "INSERT INTO "+dbName+".t VALUES (2, '0000-00-00')",
		"INSERT INTO "+dbName+".u VALUES (2, 2)", "COMMIT",
		"INSERT INTO "+dbName+".u VALUES (3, 3)", "INSERT INTO "+dbName+".t VALUES (4, '2024-04-04')")
	e.waitCaughtUp(p, time.Minute)
	if p.exited() {
		t.Fatalf("cdcsync exited at the zero date; output:\n%s", p.output())
	}
	e.assertMirrors("u")
	out := p.output()
	for _, w := range []string{`zero date \"0000-00-00\" in it_zero_stop.t.d cannot be stored in Iceberg`, "(GTID 0-1-", "primary key (id=2)",
		"types.zero_date", "cdcsync resync it_zero_stop.t", "cdcsync stopped mirroring it_zero_stop.t"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	// t keeps what it had before the transaction: not row 3 of the same
	// transaction, not row 4 after it.
	lk := e.openLake()
	tbl, err := lk.LoadTable(context.Background(), lk.Identifier(dbName, "t"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := lake.ReadRows(context.Background(), tbl, e.mysqlSchema("t"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0][0] != int32(1) {
		t.Errorf("the stopped table holds %v, want row 1 only", rows)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM; output:\n%s", code, p.output())
	}
	if out, _ := runCLI(t, "tables", "--config", e.cfgPath); !strings.Contains(out, "stopped") {
		t.Errorf("cdcsync tables does not show the table stopped:\n%s", out)
	}
	// After a restart it stays stopped and u goes on.
	p = e.start()
	mustExec(t, "INSERT INTO "+dbName+".u VALUES (4, 4)")
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("u")
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM; output:\n%s", code, p.output())
	}
}

// TestTypeZeroDateStopsTheCopy: a zero date that the initial copy reads
// (under the default types.zero_date: error) stops that table only, with
// the column, the row's primary key and the value in the message, while
// the other tables copy and stream; the stop is kept across a restart.
// Before, the copy's error ended the daemon, on every restart (issue 13).
func TestTypeZeroDateStopsTheCopy(t *testing.T) {
	const dbName = "it_zero_copy"
	e := newEnv(t, dbName, envOptions{})
	conn := typesConn(t, db)
	typesExec(t, conn, "SET SESSION sql_mode = ''",
		"CREATE TABLE "+dbName+".t (id INT PRIMARY KEY, d DATE NOT NULL)",
		"CREATE TABLE "+dbName+".u (id INT PRIMARY KEY, v INT)",
		"INSERT INTO "+dbName+".t VALUES (1, '2024-01-01'), (7, '0000-00-00'), (9, '2024-01-09')",
		"INSERT INTO "+dbName+".u VALUES (1, 1), (2, 2)")
	p := e.start()
	mustExec(t, "INSERT INTO "+dbName+".u VALUES (3, 3)")
	e.waitCaughtUp(p, time.Minute)
	if p.exited() {
		t.Fatalf("cdcsync exited at the zero date; output:\n%s", p.output())
	}
	e.assertMirrors("u")
	out := p.output()
	for _, w := range []string{`zero date \"0000-00-00\" in it_zero_copy.t.d of the row with primary key (id=7) cannot be stored in Iceberg`,
		"types.zero_date", "cdcsync resync it_zero_copy.t"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM; output:\n%s", code, p.output())
	}
	if out, _ := runCLI(t, "tables", "--config", e.cfgPath); !strings.Contains(out, "stopped") || !strings.Contains(out, "id=7") {
		t.Errorf("cdcsync tables does not show the table stopped at row id=7:\n%s", out)
	}
	p = e.start()
	mustExec(t, "INSERT INTO "+dbName+".u VALUES (4, 4)")
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("u")
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM; output:\n%s", code, p.output())
	}
}

// TestTypeZeroDatePolicies: with to_null and to_epoch, zero and invalid
// dates copied by the initial snapshot and read from the binlog become NULL
// or 1970-01-01 alike; every changed value is counted in
// cdcsync_type_policy_values_total, and the first one per column is logged
// with the table, the column and the binlog position.
func TestTypeZeroDatePolicies(t *testing.T) {
	const dbName = "it_zero_policy"
	port := freePort(t)
	e := newEnv(t, dbName, envOptions{extra: "types:\n  zero_date: to_null\n  zero_datetime: to_epoch\n  zero_timestamp: to_null\n"})
	e.rewriteConfig(`listen: "off"`, `listen: 127.0.0.1:`+strconv.Itoa(port))
	conn := typesConn(t, db)
	typesExec(t, conn, "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
		"CREATE TABLE "+dbName+".t (id INT PRIMARY KEY, d DATE, dn DATE NOT NULL, dt DATETIME(3), ts TIMESTAMP NULL, k DATE NOT NULL)",
		"INSERT INTO "+dbName+".t VALUES (1, '0000-00-00', '2024-00-10', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '2024-01-01'),"+
			" (2, '2024-02-30', '0000-00-00', '2023-04-31 12:00:00', NULL, '2024-01-02'), (3, '2024-01-01', '2024-01-01', NULL, NULL, '2024-01-03')")
	p := e.start()
	deadline := time.Now().Add(time.Minute)
	for !p.exited() && time.Now().Before(deadline) && !strings.Contains(p.output(), "streaming the binlog") {
		time.Sleep(100 * time.Millisecond)
	}
	if p.exited() && strings.Contains(p.output(), "zero date") {
		t.Fatalf("cdcsync stopped at a zero date although types: says to_null/to_epoch: the daemon does not apply "+
			"capture.ValuePolicy (cmd/cdcsync/run.go, capture/stream.go, capture/snapshot.go); output:\n%s", p.output())
	}
	e.waitCaughtUp(p, time.Minute)
	typesExec(t, conn, "INSERT INTO "+dbName+".t VALUES (11, '0000-00-00', '2024-00-10', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '2024-01-01'),"+
		" (12, '2024-02-30', '0000-00-00', '2023-04-31 12:00:00', NULL, '2024-01-02')",
		"UPDATE "+dbName+".t SET d = '0000-00-00' WHERE id = 3",
		"SET SESSION sql_mode = DEFAULT")
	e.waitCaughtUp(p, time.Minute)

	ts, err := capture.LoadSchema(context.Background(), conn, cdcsync.TableID{Database: dbName, Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	got := icebergRows(t, e, "t", ts)
	epochDate, epochTime := int32(0), int64(0)
	day := func(y int, m time.Month, d int) int32 {
		return int32(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
	}
	want := map[int32]cdcsync.Row{
		1:  {int32(1), nil, epochDate, epochTime, nil, day(2024, 1, 1)},
		2:  {int32(2), nil, epochDate, epochTime, nil, day(2024, 1, 2)},
		3:  {int32(3), nil, day(2024, 1, 1), nil, nil, day(2024, 1, 3)},
		11: {int32(11), nil, epochDate, epochTime, nil, day(2024, 1, 1)},
		12: {int32(12), nil, epochDate, epochTime, nil, day(2024, 1, 2)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Iceberg rows\n got %#v\nwant %#v", got, want)
	}
	_, metrics := httpGet(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	for _, w := range []string{
		`cdcsync_type_policy_values_total{column="d",policy="to_null",table="it_zero_policy.t"} 5`,
		`cdcsync_type_policy_values_total{column="dn",policy="to_epoch",table="it_zero_policy.t"} 4`,
		`cdcsync_type_policy_values_total{column="dt",policy="to_epoch",table="it_zero_policy.t"} 4`,
		`cdcsync_type_policy_values_total{column="ts",policy="to_null",table="it_zero_policy.t"} 2`,
	} {
		if !strings.Contains(metrics, w) {
			t.Errorf("/metrics lacks %q", w)
		}
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	out := p.output()
	logged := regexp.MustCompile(`(?m)^.*a value Iceberg cannot hold was replaced.*$`).FindAllString(out, -1)
	if len(logged) != 4 {
		t.Errorf("%d policy log lines, want one per column (4):\n%s", len(logged), out)
	}
	for _, l := range logged {
		for _, w := range []string{"table=it_zero_policy.t", "column=", "value=", "policy=", "position=mariadb:"} {
			if !strings.Contains(l, w) {
				t.Errorf("log line lacks %q: %s", w, l)
			}
		}
	}
}

// TestTypeUnsupportedColumns: a column cdcsync cannot decode makes check
// and run fail for its table, naming the column.
func TestTypeUnsupportedColumns(t *testing.T) {
	const dbName = "it_types_bad"
	mustExec(t, "DROP DATABASE IF EXISTS "+dbName)
	mustExec(t, "CREATE DATABASE "+dbName)
	mustExec(t, "CREATE TABLE "+dbName+".big5 (id INT PRIMARY KEY, name VARCHAR(10) CHARACTER SET big5)")
	cfg := sourceConfig(t, db.Port, testenv.ReplUser, testenv.ReplPassword, dbName+".*", "")
	expectCheckFails(t, cfg, testenv.ReplPassword, "it_types_bad.big5.name", "character set big5", "!it_types_bad.big5")
}
