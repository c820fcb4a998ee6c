package capture

// Tests against a real MariaDB started by integration/testenv: the binlog
// and the snapshot decode to identical canonical values, the preflight
// checks find what they should, connections, TLS and schemas.

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/integration/testenv"
)

// Environment of the child process that reruns the fidelity test with
// TZ=America/New_York against the parent's server.
const (
	rdbEnvAddr = "CDCSYNC_CAPTURE_TEST_MARIADB" // host:port of the parent's server
	rdbEnvDB   = "CDCSYNC_CAPTURE_TEST_DB"
)

func rdbStart(t *testing.T, extra ...string) *testenv.MariaDB {
	t.Helper()
	db, err := testenv.StartMariaDB(testenv.MariaDBOptions{ExtraArgs: extra})
	if err != nil {
		t.Fatalf("start MariaDB: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Stop(); err != nil {
			t.Errorf("stop MariaDB: %v", err)
		}
	})
	return db
}

func rdbSource(host string, port int, user, password string) *config.Source {
	return &config.Source{Host: host, Port: port, User: user, Password: config.Secret(password), ServerID: 4242,
		ConnectTimeout: config.Duration{Duration: 10 * time.Second}}
}

func rdbConnect(t *testing.T, src *config.Source) *client.Conn {
	t.Helper()
	conn, err := Connect(context.Background(), src)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func rdbExec(t *testing.T, conn *client.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := conn.Execute(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func rdbQueryString(t *testing.T, conn *client.Conn, q string) string {
	t.Helper()
	r, err := conn.Execute(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if len(r.Values) == 0 {
		t.Fatalf("%s: no row", q)
	}
	return connText(r.Values[0][0])
}

func TestRealMariaDB(t *testing.T) {
	if addr := os.Getenv(rdbEnvAddr); addr != "" {
		// Child: only the fidelity test, against the parent's server, in
		// the time zone the parent chose.
		host, portText, _ := strings.Cut(addr, ":")
		port, _ := strconv.Atoi(portText)
		t.Run("fidelity", func(t *testing.T) { rdbFidelity(t, host, port, os.Getenv(rdbEnvDB)) })
		return
	}
	pki := connNewPKI(t, t.TempDir())
	db := rdbStart(t, "--default-time-zone=+08:00",
		"--ssl-ca="+pki.CA, "--ssl-cert="+pki.ServerCert, "--ssl-key="+pki.ServerKey)

	t.Run("fidelity", func(t *testing.T) { rdbFidelity(t, db.Host, db.Port, "fid_utc") })
	t.Run("fidelity_new_york", func(t *testing.T) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRealMariaDB$/^fidelity$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "TZ=America/New_York", rdbEnvAddr+"="+db.Addr(), rdbEnvDB+"=fid_ny")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestRealMariaDB/fidelity") {
			t.Fatalf("the fidelity test with TZ=America/New_York failed (%v):\n%s", err, out)
		}
		t.Logf("child process with TZ=America/New_York:\n%s", out)
	})
	t.Run("unsigned_without_row_metadata", func(t *testing.T) { rdbUnsignedNoMetadata(t, db) })
	t.Run("row_images", func(t *testing.T) { rdbRowImages(t, db) })
	t.Run("row_images_large_values", func(t *testing.T) { rdbLargeValues(t, db) })
	t.Run("connect", func(t *testing.T) { rdbConnectTests(t, db, pki) })
	t.Run("schema", func(t *testing.T) { rdbSchemaTests(t, db) })
	t.Run("preflight", func(t *testing.T) { rdbPreflightTests(t, db) })
	t.Run("lag_probe", func(t *testing.T) { rdbLagProbe(t, db) })
}

// rdbLagProbe: the binlog bytes behind a position grow with what the
// server writes, over one connection however often the daemon asks, and a
// lost connection is replaced at the next call.
func rdbLagProbe(t *testing.T, db *testenv.MariaDB) {
	ctx := context.Background()
	root := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	connections := func() int64 {
		n, err := strconv.ParseInt(rdbQueryStatus(t, root, "Connections"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	r, err := root.Execute("SHOW MASTER STATUS")
	if err != nil || len(r.Values) == 0 {
		t.Fatalf("SHOW MASTER STATUS: %v", err)
	}
	file, _ := r.GetString(0, 0)
	off, _ := r.GetInt(0, 1)
	pos := binlogpos.Pos{File: file, Offset: uint32(off)}.Position()

	probe := NewLagProbe(rdbSource(db.Host, db.Port, testenv.ReplUser, testenv.ReplPassword))
	defer probe.Close()
	before := connections()
	first, err := probe.Bytes(ctx, pos)
	if err != nil || first != 0 {
		t.Fatalf("at the server's own position: %d bytes behind (%v), want 0", first, err)
	}
	rdbExec(t, root, "CREATE DATABASE IF NOT EXISTS lagprobe", "CREATE TABLE IF NOT EXISTS lagprobe.t (id INT PRIMARY KEY, v TEXT)",
		"INSERT INTO lagprobe.t VALUES (1, REPEAT('x', 5000))")
	for i := 0; i < 5; i++ {
		n, err := probe.Bytes(ctx, pos)
		if err != nil || n < 5000 {
			t.Fatalf("call %d: %d bytes behind (%v), want at least the 5,000-byte row", i, n, err)
		}
	}
	if got := connections() - before; got != 1 {
		t.Errorf("six calls opened %d connections, want 1", got)
	}
	// The server ends the probe's connection: the next call fails or
	// reconnects, and the one after answers.
	rdbExec(t, root, fmt.Sprintf("KILL %d", probe.conn.GetConnectionID()))
	_, _ = probe.Bytes(ctx, pos)
	if n, err := probe.Bytes(ctx, pos); err != nil || n < 5000 {
		t.Fatalf("after its connection was killed: %d bytes behind (%v)", n, err)
	}
	if _, err := probe.Bytes(ctx, binlogpos.Pos{File: "binlog.999999", Offset: 4}.Position()); err == nil || !strings.Contains(err.Error(), "no longer on the server") {
		t.Errorf("a purged file: %v, want an error saying it is gone", err)
	}
}

// rdbQueryStatus returns a global status variable.
func rdbQueryStatus(t *testing.T, conn *client.Conn, name string) string {
	t.Helper()
	r, err := conn.Execute("SHOW GLOBAL STATUS LIKE '" + name + "'")
	if err != nil || len(r.Values) == 0 {
		t.Fatalf("SHOW GLOBAL STATUS LIKE %q: %v", name, err)
	}
	v, _ := r.GetString(0, 1)
	return v
}

// TestRealMariaDBWithoutBinlog checks a server started with --skip-log-bin
// and without TLS.
func TestRealMariaDBWithoutBinlog(t *testing.T) {
	db := rdbStart(t, "--skip-log-bin")
	root := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	rdbExec(t, root, "CREATE DATABASE nb", "CREATE TABLE nb.t (id INT PRIMARY KEY, v VARCHAR(10))")
	src := rdbSource(db.Host, db.Port, "root", "")
	src.Include = []string{"nb.*"}
	fs, schemas, err := Preflight(context.Background(), root, src)
	if err != nil {
		t.Fatal(err)
	}
	failed := Failed(fs)
	if len(failed) != 1 || failed[0].Check != "binlog" {
		t.Fatalf("want exactly the binlog finding, got %v", failed)
	}
	want := fmt.Sprintf("the binary log is off on %s; cdcsync reads it as a replica: start the server with log_bin", db.Addr())
	if !strings.HasPrefix(failed[0].Message, want) {
		t.Errorf("message %q\nwant prefix %q", failed[0].Message, want)
	}
	if len(schemas) != 1 || schemas[0].ID.String() != "nb.t" {
		t.Errorf("schemas: %v", schemas)
	}

	// TLS: this server has none.
	src.TLS.Mode = "required"
	_, err = Connect(context.Background(), src)
	if err == nil || !strings.Contains(err.Error(), "does not offer TLS") || !strings.Contains(err.Error(), db.Addr()) {
		t.Errorf("required TLS against a server without TLS: %v", err)
	}
	src.TLS.Mode = "preferred"
	conn := rdbConnect(t, src)
	if c := rdbQueryString(t, conn, "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'Ssl_cipher'"); c != "" {
		t.Errorf("preferred: cipher %q on a server without TLS", c)
	}
}

// rdbFidelity creates a table with one column of every supported type, fills
// it with edge rows and checks that the binlog and a SELECT decode to the
// same canonical values, equal to expected constants.
func rdbFidelity(t *testing.T, host string, port int, dbName string) {
	ctx := context.Background()
	if os.Getenv(rdbEnvAddr) != "" {
		_, off := time.Date(2024, 1, 15, 12, 0, 0, 0, time.Local).Zone()
		if off != -5*3600 {
			t.Fatalf("the child runs with UTC offset %d, not America/New_York", off)
		}
	}
	src := rdbSource(host, port, "root", "")
	conn := rdbConnect(t, src)
	if tz := rdbQueryString(t, conn, "SELECT @@global.time_zone"); tz != "+08:00" {
		t.Fatalf("server time zone %q, want +08:00", tz)
	}
	q := func(s string) string { return strings.ReplaceAll(s, "DB", QuoteIdent(dbName)) }
	rdbExec(t, conn, q("DROP DATABASE IF EXISTS DB"), q("CREATE DATABASE DB"), q(`CREATE TABLE DB.t (
		id INT PRIMARY KEY,
		ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
		mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
		d1 DECIMAL(10,2), d2 DECIMAL(38,10), d3 DECIMAL(38,0), d4 DECIMAL(65,30),
		f FLOAT, fd DOUBLE,
		c CHAR(5), vc VARCHAR(20), tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT,
		va VARCHAR(10) CHARACTER SET ascii, v3 VARCHAR(10) CHARACTER SET utf8mb3,
		j JSON,
		b BINARY(4), vb VARBINARY(8), tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
		dt DATE, dtm DATETIME, dtm1 DATETIME(1), dtm2 DATETIME(2), dtm3 DATETIME(3), dtm4 DATETIME(4),
		dtm5 DATETIME(5), dtm6 DATETIME(6),
		ts TIMESTAMP NULL, ts1 TIMESTAMP(1) NULL, ts2 TIMESTAMP(2) NULL, ts3 TIMESTAMP(3) NULL,
		ts4 TIMESTAMP(4) NULL, ts5 TIMESTAMP(5) NULL, ts6 TIMESTAMP(6) NULL
	) CHARACTER SET utf8mb4`))

	schema, err := LoadSchema(ctx, conn, cdcsync.TableID{Database: dbName, Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range schema.Columns {
		if c.Kind == cdcsync.KindInvalid {
			t.Fatalf("column %s (%s) not mapped", c.Name, c.ColumnType)
		}
	}

	startPos := rdbBinlogPos(t, conn)

	// The session keeps the server's time zone (+08:00): TIMESTAMP literals
	// below are +08:00 wall clocks.
	rows := []string{
		// Minimum values.
		`(1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
		  -99999999.99, -9999999999999999999999999999.9999999999, -99999999999999999999999999999999999999,
		  -99999999999999999999999999999999999.999999999999999999999999999999,
		  -3.40282e38, -1.7976931348623157e308,
		  '', '', '', '', '', '', '', '', '[]',
		  x'00', x'', x'', x'', x'', x'',
		  '1000-01-01', '1000-01-01 00:00:00', '1000-01-01 00:00:00.1', '1000-01-01 00:00:00.01',
		  '1000-01-01 00:00:00.001', '1000-01-01 00:00:00.0001', '1000-01-01 00:00:00.00001', '1000-01-01 00:00:00.000001',
		  '1970-01-01 08:00:01', '1970-01-01 08:00:01.1', '1970-01-01 08:00:01.01', '1970-01-01 08:00:01.001',
		  '1970-01-01 08:00:01.0001', '1970-01-01 08:00:01.00001', '1970-01-01 08:00:01.000001')`,
		// Maximum values.
		`(2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,
		  99999999.99, 9999999999999999999999999999.9999999999, 99999999999999999999999999999999999999,
		  99999999999999999999999999999999999.999999999999999999999999999999,
		  3.40282e38, 1.7976931348623157e308,
		  'abcde', 'x😀y', '😀', 'héllo 😀', 'mt', 'lt', 'ascii~', 'utf8mb3é', '{"b": 1, "a": [1.0, 2]}',
		  x'01000000', x'6100', x'00', x'00ff00', x'ff', x'0000',
		  '9999-12-31', '9999-12-31 23:59:59', '9999-12-31 23:59:59.9', '9999-12-31 23:59:59.99',
		  '9999-12-31 23:59:59.999', '9999-12-31 23:59:59.9999', '9999-12-31 23:59:59.99999', '9999-12-31 23:59:59.999999',
		  '2038-01-19 11:14:07', '2038-01-19 11:14:07.9', '2038-01-19 11:14:07.99', '2038-01-19 11:14:07.999',
		  '2038-01-19 11:14:07.9999', '2038-01-19 11:14:07.99999', '2038-01-19 11:14:07.999999')`,
		// In between: zeros, pre-1970, inexact floats, a New York DST day.
		`(3, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
		  0, -0.0000000001, 0, -0.000000000000000000000000000001,
		  3.1415927, 0.1,
		  'ab  ', '', 't', 'tx', 'm', 'l', '', '', '"x"',
		  x'61', x'610000', x'0000', x'', x'00', x'',
		  '1969-12-31', '1969-12-31 23:59:59', '1969-12-31 23:59:59.9', '1969-12-31 23:59:59.99',
		  '1969-12-31 23:59:59.999', '1969-12-31 23:59:59.9999', '1969-12-31 23:59:59.99999', '1969-07-20 20:17:40.000001',
		  '2024-03-10 15:30:00', '2024-03-10 15:30:00.5', '2024-03-10 15:30:00.25', '2024-03-10 15:30:00.125',
		  '2024-11-03 14:30:00.0625', '2024-11-03 14:30:00.03125', '2024-11-03 14:30:00.015625')`,
		// NULL everywhere but the key.
		`(4` + strings.Repeat(", NULL", len(schema.Columns)-1) + `)`,
		// float inexact in text (16777217 is stored as 16777216).
		`(5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
		  16777217, 1e-7` + strings.Repeat(", NULL", len(schema.Columns)-17) + `)`,
	}
	rdbExec(t, conn, q("INSERT INTO DB.t VALUES ")+strings.Join(rows, ",\n"))

	// Zero dates, in a table of their own.
	rdbExec(t, conn, "SET SESSION sql_mode = ''",
		q("CREATE TABLE DB.z (id INT PRIMARY KEY, d DATE, dt DATETIME(3), ts TIMESTAMP NULL, dm DATE)"),
		q("INSERT INTO DB.z VALUES (1, '0000-00-00', '0000-00-00 00:00:00.000', '0000-00-00 00:00:00', '2024-00-10')"),
		"SET SESSION sql_mode = DEFAULT")
	zschema, err := LoadSchema(ctx, conn, cdcsync.TableID{Database: dbName, Table: "z"})
	if err != nil {
		t.Fatal(err)
	}

	// Binlog.
	binlogRows := rdbReadBinlog(t, host, port, startPos, map[string]int{"t": len(rows), "z": 1}, dbName)
	binlogDecoded := map[int32]cdcsync.Row{}
	for _, raw := range binlogRows["t"] {
		row, err := DecodeBinlogRow(schema, raw)
		if err != nil {
			t.Fatalf("DecodeBinlogRow(%v): %v", raw, err)
		}
		binlogDecoded[row[0].(int32)] = row
	}

	// Snapshot.
	snap := rdbConnect(t, src)
	rdbExec(t, snap, SnapshotSessionSQL...)
	snapDecoded := map[int32]cdcsync.Row{}
	var res mysql.Result
	err = snap.ExecuteSelectStreaming("SELECT "+SelectList(schema)+" FROM "+QuoteIdent(dbName)+".t ORDER BY id", &res,
		func(raw []mysql.FieldValue) error {
			row, err := DecodeSnapshotRow(schema, raw)
			if err != nil {
				return err
			}
			snapDecoded[row[0].(int32)] = row
			return nil
		}, nil)
	if err != nil {
		t.Fatal(err)
	}

	if len(binlogDecoded) != len(rows) || len(snapDecoded) != len(rows) {
		t.Fatalf("rows: binlog %d, snapshot %d, want %d", len(binlogDecoded), len(snapDecoded), len(rows))
	}
	for id, b := range binlogDecoded {
		s := snapDecoded[id]
		for i, c := range schema.Columns {
			if !reflect.DeepEqual(b[i], s[i]) {
				t.Errorf("row %d column %s (%s): binlog %T %#v, snapshot %T %#v", id, c.Name, c.ColumnType, b[i], b[i], s[i], s[i])
			}
		}
	}

	// Expected constants for a selection of columns.
	micros := func(y int, m time.Month, d, hh, mm, ss, us int) int64 {
		return time.Date(y, m, d, hh, mm, ss, us*1000, time.UTC).UnixMicro()
	}
	days := func(y int, m time.Month, d int) int32 {
		return int32(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
	}
	want := map[int32]map[string]any{
		1: {"ti": int32(-128), "si": int32(-32768), "mi": int32(-8388608), "i": int32(math.MinInt32), "bi": int64(math.MinInt64),
			"biu": "0", "d1": "-99999999.99", "d2": "-9999999999999999999999999999.9999999999",
			"d3": "-99999999999999999999999999999999999999",
			"d4": "-99999999999999999999999999999999999.999999999999999999999999999999",
			"f":  float32(-3.40282e38), "fd": -math.MaxFloat64,
			"c": "", "j": "[]", "b": []byte{0, 0, 0, 0}, "vb": []byte{},
			"dt": days(1000, 1, 1), "dtm": micros(1000, 1, 1, 0, 0, 0, 0), "dtm1": micros(1000, 1, 1, 0, 0, 0, 100000),
			"dtm6": micros(1000, 1, 1, 0, 0, 0, 1),
			"ts":   int64(1_000_000), "ts1": int64(1_100_000), "ts2": int64(1_010_000), "ts3": int64(1_001_000),
			"ts4": int64(1_000_100), "ts5": int64(1_000_010), "ts6": int64(1_000_001)},
		2: {"ti": int32(127), "tiu": int32(255), "siu": int32(65535), "miu": int32(16777215), "iu": int64(math.MaxUint32),
			"bi": int64(math.MaxInt64), "biu": "18446744073709551615", "d1": "99999999.99",
			"f": float32(3.40282e38), "fd": math.MaxFloat64,
			"c": "abcde", "vc": "x😀y", "tt": "😀", "tx": "héllo 😀", "va": "ascii~", "v3": "utf8mb3é",
			"j": `{"b": 1, "a": [1.0, 2]}`, // MariaDB JSON is a LONGTEXT: verbatim
			"b": []byte{1, 0, 0, 0}, "vb": []byte("a\x00"), "tb": []byte{0}, "bl": []byte{0, 0xff, 0}, "lb": []byte{0, 0},
			"dt": days(9999, 12, 31), "dtm": micros(9999, 12, 31, 23, 59, 59, 0), "dtm3": micros(9999, 12, 31, 23, 59, 59, 999000),
			"dtm6": micros(9999, 12, 31, 23, 59, 59, 999999),
			"ts":   int64(2147483647_000000), "ts1": int64(2147483647_900000), "ts6": int64(2147483647_999999)},
		3: {"d2": "-0.0000000001", "d4": "-0.000000000000000000000000000001", "d1": "0.00",
			"f": float32(3.1415927), "fd": 0.1, "c": "ab", "b": []byte("a\x00\x00\x00"), "vb": []byte("a\x00\x00"),
			"dt": int32(-1), "dtm": int64(-1_000_000), "dtm1": int64(-100_000), "dtm6": micros(1969, 7, 20, 20, 17, 40, 1),
			"ts": micros(2024, 3, 10, 7, 30, 0, 0), "ts1": micros(2024, 3, 10, 7, 30, 0, 500000),
			"ts6": micros(2024, 11, 3, 6, 30, 0, 15625)},
		4: {"ti": nil, "biu": nil, "d1": nil, "f": nil, "vc": nil, "b": nil, "dt": nil, "dtm6": nil, "ts6": nil, "j": nil},
		5: {"f": float32(16777216), "fd": 1e-7},
	}
	for id, cols := range want {
		for name, w := range cols {
			i := schema.ColumnIndex(name)
			if got := binlogDecoded[id][i]; !reflect.DeepEqual(got, w) {
				t.Errorf("row %d column %s: got %T %#v, want %T %#v", id, name, got, got, w, w)
			}
		}
	}

	// Zero dates fail on both paths, naming the table and column.
	if len(binlogRows["z"]) != 1 {
		t.Fatalf("binlog rows of z: %d", len(binlogRows["z"]))
	}
	zraw := binlogRows["z"][0]
	var zsnap []mysql.FieldValue
	err = snap.ExecuteSelectStreaming("SELECT "+SelectList(zschema)+" FROM "+QuoteIdent(dbName)+".z", &res,
		func(raw []mysql.FieldValue) error {
			for _, v := range raw {
				zsnap = append(zsnap, mysql.NewFieldValue(v.Type, v.AsUint64(), append([]byte(nil), v.AsString()...)))
			}
			return nil
		}, nil)
	if err != nil {
		t.Fatal(err)
	}
	zwant := map[string]string{"d": "0000-00-00", "dt": "0000-00-00 00:00:00.000", "ts": "0000-00-00 00:00:00", "dm": "2024-00-10"}
	zkey := map[string]string{"d": "zero_date", "dt": "zero_datetime", "ts": "zero_timestamp", "dm": "zero_date"}
	for name, value := range zwant {
		i := zschema.ColumnIndex(name)
		one := &cdcsync.TableSchema{ID: zschema.ID, Columns: []cdcsync.Column{zschema.Columns[i]}}
		msg := fmt.Sprintf("zero date %q in %s.z.%s cannot be stored in Iceberg; to mirror such values, set types.%s to to_null or to_epoch (see docs/types.md)",
			value, dbName, name, zkey[name])
		if _, err := DecodeBinlogRow(one, []any{zraw[i]}); err == nil || err.Error() != msg {
			t.Errorf("binlog %s (%T %v): %v, want %s", name, zraw[i], zraw[i], err, msg)
		}
		if _, err := DecodeSnapshotRow(one, []mysql.FieldValue{zsnap[i]}); err == nil || err.Error() != msg {
			t.Errorf("snapshot %s: %v, want %s", name, err, msg)
		}
	}
	// With policies, both paths write the same replacement.
	pol := NewValuePolicy(config.Types{ZeroDate: config.TypeToNull, ZeroDatetime: config.TypeToEpoch, ZeroTimestamp: config.TypeToNull}, nil, nil)
	zb, err := pol.BinlogRow(zschema, zraw, binlogpos.Pos{})
	if err != nil {
		t.Fatal(err)
	}
	zs, err := pol.SnapshotRow(zschema, zsnap, binlogpos.Pos{})
	if err != nil {
		t.Fatal(err)
	}
	if w := (cdcsync.Row{int32(1), nil, int64(0), nil, nil}); !reflect.DeepEqual(zb, w) || !reflect.DeepEqual(zs, w) {
		t.Errorf("zero dates with policies: binlog %#v, snapshot %#v, want %#v", zb, zs, w)
	}

	// The same binlog read without ParseTime (times as text, TIMESTAMP in
	// UTC) decodes to the same values.
	textRows := rdbReadBinlogMode(t, host, port, startPos, map[string]int{"t": len(rows)}, dbName, false)
	for _, raw := range textRows["t"] {
		row, err := DecodeBinlogRow(schema, raw)
		if err != nil {
			t.Fatalf("DecodeBinlogRow without ParseTime (%v): %v", raw, err)
		}
		if w := binlogDecoded[row[0].(int32)]; !reflect.DeepEqual(row, w) {
			t.Errorf("without ParseTime:\n got %#v\nwant %#v", row, w)
		}
	}

	t.Run("types", func(t *testing.T) { rdbTypes(t, src, dbName) })
}

// rdbUnsignedNoMetadata: without row metadata the table map carries no
// signedness and go-mysql yields UNSIGNED columns as signed Go integers
// (int8(-1) for 255); DecodeBinlog must still agree with SELECT.
func rdbUnsignedNoMetadata(t *testing.T, db *testenv.MariaDB) {
	ctx := context.Background()
	conn := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	rdbExec(t, conn, "CREATE DATABASE unm",
		"CREATE TABLE unm.t (id INT PRIMARY KEY, a TINYINT UNSIGNED, b SMALLINT UNSIGNED, c MEDIUMINT UNSIGNED, d INT UNSIGNED, e BIGINT UNSIGNED)")
	schema, err := LoadSchema(ctx, conn, cdcsync.TableID{Database: "unm", Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	start := rdbBinlogPos(t, conn)
	rdbExec(t, conn, "SET GLOBAL binlog_row_metadata = 'NO_LOG'")
	t.Cleanup(func() { _, _ = conn.Execute("SET GLOBAL binlog_row_metadata = 'FULL'") })
	rdbExec(t, conn, "INSERT INTO unm.t VALUES (1, 255, 65535, 16777215, 4294967295, 18446744073709551615), (2, 128, 32768, 8388608, 2147483648, 9223372036854775808), (3, 0, 0, 0, 0, 0)",
		"SET GLOBAL binlog_row_metadata = 'FULL'")
	raw := rdbReadBinlog(t, db.Host, db.Port, start, map[string]int{"t": 3}, "unm")["t"]
	if _, signed := raw[0][1].(int8); !signed {
		t.Logf("note: go-mysql yielded %T for TINYINT UNSIGNED without row metadata", raw[0][1])
	}
	want := map[int32]cdcsync.Row{
		1: {int32(1), int32(255), int32(65535), int32(16777215), int64(4294967295), "18446744073709551615"},
		2: {int32(2), int32(128), int32(32768), int32(8388608), int64(2147483648), "9223372036854775808"},
		3: {int32(3), int32(0), int32(0), int32(0), int64(0), "0"},
	}
	for _, values := range raw {
		row, err := DecodeBinlogRow(schema, values)
		if err != nil {
			t.Fatal(err)
		}
		if w := want[row[0].(int32)]; !reflect.DeepEqual(row, w) {
			t.Errorf("binlog %#v decoded to %#v, want %#v", values, row, w)
		}
	}
	snap := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	rdbExec(t, snap, SnapshotSessionSQL...)
	var res mysql.Result
	err = snap.ExecuteSelectStreaming("SELECT "+SelectList(schema)+" FROM unm.t", &res, func(values []mysql.FieldValue) error {
		row, err := DecodeSnapshotRow(schema, values)
		if err != nil {
			return err
		}
		if w := want[row[0].(int32)]; !reflect.DeepEqual(row, w) {
			t.Errorf("snapshot row %#v, want %#v", row, w)
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
}

// rdbSyncerID keeps the replica server ids of successive readers apart.
var rdbSyncerID uint32

// rdbBinlogPos returns the server's binlog position now.
func rdbBinlogPos(t *testing.T, conn *client.Conn) mysql.Position {
	t.Helper()
	r, err := conn.Execute("SHOW MASTER STATUS")
	if err != nil || len(r.Values) == 0 {
		t.Fatalf("SHOW MASTER STATUS: %v", err)
	}
	return mysql.Position{Name: connText(r.Values[0][0]), Pos: uint32(r.Values[0][1].AsUint64())}
}

// rdbReadBinlog reads the rows of the INSERTs and UPDATEs (both images) into
// the tables of db from start, until it has want[table] rows of each.
func rdbReadBinlog(t *testing.T, host string, port int, start mysql.Position, want map[string]int, db string) map[string][][]any {
	t.Helper()
	return rdbReadBinlogMode(t, host, port, start, want, db, true)
}

// rdbReadBinlogMode is rdbReadBinlog with ParseTime on or off (then with
// TIMESTAMP text in UTC); updates count both images.
func rdbReadBinlogMode(t *testing.T, host string, port int, start mysql.Position, want map[string]int, db string, parseTime bool) map[string][][]any {
	t.Helper()
	rdbSyncerID++
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID:                uint32(100000+os.Getpid()%100000) + rdbSyncerID*200000,
		Flavor:                  "mariadb",
		Host:                    host,
		Port:                    uint16(port),
		User:                    "root",
		ParseTime:               parseTime,
		TimestampStringLocation: time.UTC,
		UseDecimal:              true,
		Logger:                  slog.New(slog.DiscardHandler),
	})
	defer syncer.Close()
	streamer, err := syncer.StartSync(start)
	if err != nil {
		t.Fatalf("StartSync: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := map[string][][]any{}
	done := func() bool {
		for table, n := range want {
			if len(got[table]) < n {
				return false
			}
		}
		return true
	}
	for !done() {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			t.Fatalf("reading the binlog: %v (have %v rows)", err, len(got))
		}
		re, ok := ev.Event.(*replication.RowsEvent)
		if !ok || string(re.Table.Schema) != db {
			continue
		}
		switch ev.Header.EventType {
		case replication.WRITE_ROWS_EVENTv0, replication.WRITE_ROWS_EVENTv1, replication.WRITE_ROWS_EVENTv2,
			replication.UPDATE_ROWS_EVENTv0, replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2:
		default:
			continue
		}
		table := string(re.Table.Table)
		got[table] = append(got[table], re.Rows...)
	}
	return got
}

func rdbConnectTests(t *testing.T, db *testenv.MariaDB, pki connTestPKI) {
	ctx := context.Background()
	src := rdbSource(db.Host, db.Port, "root", "")
	conn := rdbConnect(t, src)
	r, err := conn.Execute("SELECT @@character_set_client, @@character_set_connection, @@character_set_results")
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range r.Values[0] {
		if connText(v) != "utf8mb4" {
			t.Errorf("character set variable %d is %q, want utf8mb4", i, connText(v))
		}
	}

	// Wrong password: the message names the server and the user, not the password.
	bad := rdbSource(db.Host, db.Port, testenv.ReplUser, connTestPassword)
	_, err = Connect(ctx, bad)
	connAssertNoPassword(t, err)
	for _, w := range []string{db.Addr(), `"` + testenv.ReplUser + `"`, "access denied", "source.password"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("wrong password: %q lacks %q", err, w)
		}
	}
	var myErr *mysql.MyError
	if !errors.As(err, &myErr) || myErr.Code != mysql.ER_ACCESS_DENIED_ERROR {
		t.Errorf("wrong password: the server's error is not reachable with errors.As: %v", err)
	}
	// The password read from a file.
	pwFile := t.TempDir() + "/pw"
	if err := os.WriteFile(pwFile, []byte(testenv.ReplPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := rdbSource(db.Host, db.Port, testenv.ReplUser, "")
	good.PasswordFile = pwFile
	rdbConnect(t, good)

	cipher := func(conn *client.Conn) string {
		return rdbQueryString(t, conn, "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'Ssl_cipher'")
	}
	tlsSrc := func(mode string) *config.Source {
		s := rdbSource(db.Host, db.Port, testenv.ReplUser, testenv.ReplPassword)
		s.TLS = config.TLS{Mode: mode}
		if strings.HasPrefix(mode, "verify") {
			s.TLS.CAFile = pki.CA
		}
		return s
	}
	for _, mode := range []string{"preferred", "required", "verify-ca", "verify-full"} {
		if c := cipher(rdbConnect(t, tlsSrc(mode))); c == "" {
			t.Errorf("mode %s: no TLS", mode)
		}
	}
	if c := cipher(rdbConnect(t, tlsSrc("disabled"))); c != "" {
		t.Errorf("mode disabled: cipher %s", c)
	}
	s := tlsSrc("verify-full")
	s.TLS.ServerName = "localhost"
	s.TLS.CertFile, s.TLS.KeyFile = pki.ClientCert, pki.ClientKey
	if c := cipher(rdbConnect(t, s)); c == "" {
		t.Error("verify-full with server_name and a client certificate: no TLS")
	}
	s = tlsSrc("verify-full")
	s.Password = connTestPassword
	s.TLS.ServerName = "db.example.com"
	_, err = Connect(ctx, s)
	connAssertNoPassword(t, err)
	if !strings.Contains(err.Error(), "certificate") || !strings.Contains(err.Error(), "server_name") {
		t.Errorf("verify-full with a wrong name: %v", err)
	}
	other := connNewPKI(t, t.TempDir())
	s = tlsSrc("verify-ca")
	s.TLS.CAFile = other.CA
	if _, err = Connect(ctx, s); err == nil || !strings.Contains(err.Error(), other.CA) {
		t.Errorf("verify-ca with another CA: %v", err)
	}
}

func rdbSchemaTests(t *testing.T, db *testenv.MariaDB) {
	ctx := context.Background()
	conn := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	rdbExec(t, conn, "CREATE DATABASE sch", "CREATE DATABASE sch2",
		"CREATE TABLE sch.a (b INT NOT NULL, a INT UNSIGNED NOT NULL, c VARCHAR(10) NOT NULL, d DECIMAL(12,3), e ENUM('x','y'), PRIMARY KEY (c, a))",
		"CREATE TABLE sch.b (id BIGINT UNSIGNED PRIMARY KEY)",
		"CREATE TABLE sch.skip (id INT PRIMARY KEY)",
		"CREATE TABLE sch.ex1 (id INT PRIMARY KEY)",
		"CREATE VIEW sch.v AS SELECT * FROM sch.b",
		"CREATE TABLE sch2.c (id INT PRIMARY KEY)",
		"CREATE SEQUENCE sch.seq",
	)
	src := rdbSource(db.Host, db.Port, "root", "")
	src.Include = []string{"sch*.*", "!sch.skip"}
	src.Exclude = []string{"sch.ex*"}
	ids, err := ListTables(ctx, conn, src)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := []cdcsync.TableID{{Database: "sch", Table: "a"}, {Database: "sch", Table: "b"}, {Database: "sch2", Table: "c"}}
	if !reflect.DeepEqual(ids, wantIDs) {
		t.Errorf("ListTables = %v, want %v", ids, wantIDs)
	}

	s, err := LoadSchema(ctx, conn, cdcsync.TableID{Database: "sch", Table: "a"})
	if err != nil {
		t.Fatal(err)
	}
	want := &cdcsync.TableSchema{
		ID: cdcsync.TableID{Database: "sch", Table: "a"},
		Columns: []cdcsync.Column{
			{Name: "b", DataType: "int", ColumnType: "int(11)", Kind: cdcsync.KindInt32},
			{Name: "a", DataType: "int", ColumnType: "int(10) unsigned", Kind: cdcsync.KindInt64, Unsigned: true},
			{Name: "c", DataType: "varchar", ColumnType: "varchar(10)", Kind: cdcsync.KindString},
			{Name: "d", DataType: "decimal", ColumnType: "decimal(12,3)", Kind: cdcsync.KindDecimal, Nullable: true, Precision: 12, Scale: 3},
			{Name: "e", DataType: "enum", ColumnType: "enum('x','y')", Kind: cdcsync.KindString, Nullable: true},
		},
		PrimaryKey: []int{2, 1},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("LoadSchema =\n%+v\nwant\n%+v", s, want)
	}
	all, err := LoadSchemas(ctx, conn, []cdcsync.TableID{{Database: "sch2", Table: "c"}, {Database: "sch", Table: "b"}})
	if err != nil || len(all) != 2 || all[0].ID.Table != "c" || all[1].Columns[0].Kind != cdcsync.KindDecimal || !reflect.DeepEqual(all[1].PrimaryKey, []int{0}) {
		t.Errorf("LoadSchemas = %+v, %v", all, err)
	}
	_, err = LoadSchema(ctx, conn, cdcsync.TableID{Database: "sch", Table: "nope"})
	if err == nil || !strings.Contains(err.Error(), "sch.nope does not exist") {
		t.Errorf("missing table: %v", err)
	}
	// A cancelled context stops a query.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := LoadSchema(cctx, conn, cdcsync.TableID{Database: "sch", Table: "a"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled LoadSchema: %v", err)
	}
}

func rdbPreflightTests(t *testing.T, db *testenv.MariaDB) {
	ctx := context.Background()
	root := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	rdbExec(t, root,
		"CREATE DATABASE pf_good",
		"CREATE TABLE pf_good.t (id INT PRIMARY KEY, v VARCHAR(10), d DATETIME(6), j JSON)",
		"CREATE TABLE pf_good.u (a INT, b INT, PRIMARY KEY (a, b))",
		"CREATE DATABASE pf_bad",
		"CREATE TABLE pf_bad.t_nopk (a INT)",
		"CREATE TABLE pf_bad.t_enum (id INT PRIMARY KEY, status ENUM('?','b'))",
		"CREATE TABLE pf_bad.t_latin (id INT PRIMARY KEY, name VARCHAR(10) CHARACTER SET big5)",
		"CREATE TABLE pf_bad.t_ok (id INT PRIMARY KEY)",
		"CREATE USER 'pf_sel'@'%' IDENTIFIED BY 'pf-sel-pw'",
		"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'pf_sel'@'%'",
		"GRANT SELECT ON pf_good.* TO 'pf_sel'@'%'",
		"GRANT INSERT ON pf_bad.t_ok TO 'pf_sel'@'%'", // sees the table, cannot SELECT it
	)
	repl := rdbConnect(t, rdbSource(db.Host, db.Port, testenv.ReplUser, testenv.ReplPassword))
	goodSrc := func() *config.Source {
		s := rdbSource(db.Host, db.Port, testenv.ReplUser, testenv.ReplPassword)
		s.Include = []string{"pf_good.*"}
		return s
	}
	run := func(conn *client.Conn, src *config.Source) ([]Finding, []*cdcsync.TableSchema) {
		t.Helper()
		fs, schemas, err := Preflight(ctx, conn, src)
		if err != nil {
			t.Fatalf("Preflight: %v", err)
		}
		return fs, schemas
	}
	// expectFailed checks that exactly the listed checks fail, each with a
	// message containing the given texts.
	expectFailed := func(name string, fs []Finding, want map[string][]string) {
		t.Helper()
		failed := Failed(fs)
		count := map[string]int{}
		for _, f := range failed {
			count[f.Check]++
		}
		for check := range count {
			if _, ok := want[check]; !ok {
				t.Errorf("%s: unexpected failing finding %s", name, check)
			}
		}
		for check, texts := range want {
			var msgs []string
			for _, f := range failed {
				if f.Check == check {
					msgs = append(msgs, f.Message)
				}
			}
			if len(msgs) == 0 {
				t.Errorf("%s: no failing %s finding; findings:\n%s", name, check, rdbFindings(fs))
				continue
			}
			all := strings.Join(msgs, "\n")
			for _, text := range texts {
				if !strings.Contains(all, text) {
					t.Errorf("%s: %s finding lacks %q:\n%s", name, check, text, all)
				}
			}
		}
	}

	// A correctly configured server.
	fs, schemas := run(repl, goodSrc())
	expectFailed("good", fs, nil)
	if len(schemas) != 2 || schemas[0].ID.Table != "t" || schemas[1].ID.Table != "u" {
		t.Errorf("schemas: %+v", schemas)
	}
	checks := map[string]bool{}
	for _, f := range fs {
		if f.OK {
			checks[f.Check] = true
		}
	}
	for _, c := range []string{"version", "binlog", "binlog_format", "binlog_row_image", "binlog_row_metadata", "privileges", "server_id", "tables", "primary_key", "column_types", "gtid"} {
		if !checks[c] {
			t.Errorf("good: no OK finding for %s:\n%s", c, rdbFindings(fs))
		}
	}
	t.Logf("findings on a good server:\n%s", rdbFindings(fs))

	// Dynamic binlog settings, one at a time.
	addr := db.Addr()
	for _, tc := range []struct{ variable, bad, good, check, msg string }{
		{"binlog_format", "STATEMENT", "ROW", "binlog_format",
			"binlog_format is STATEMENT on " + addr + "; cdcsync needs ROW (row-based replication): SET GLOBAL binlog_format='ROW'"},
		{"binlog_row_image", "MINIMAL", "FULL", "binlog_row_image",
			"binlog_row_image is MINIMAL on " + addr + "; cdcsync needs FULL (whole rows before and after each change): SET GLOBAL binlog_row_image='FULL' (and binlog_row_image=FULL in my.cnf)"},
		{"binlog_row_metadata", "MINIMAL", "FULL", "binlog_row_metadata",
			"binlog_row_metadata is MINIMAL on " + addr + "; cdcsync needs FULL (column names and signedness in the binlog): SET GLOBAL binlog_row_metadata='FULL' (and binlog_row_metadata=FULL in my.cnf)"},
	} {
		rdbExec(t, root, fmt.Sprintf("SET GLOBAL %s = '%s'", tc.variable, tc.bad))
		fs, _ := run(repl, goodSrc())
		rdbExec(t, root, fmt.Sprintf("SET GLOBAL %s = '%s'", tc.variable, tc.good))
		expectFailed(tc.variable, fs, map[string][]string{tc.check: {tc.msg}})
	}

	// A user with only SELECT.
	noRepl := rdbConnect(t, rdbSource(db.Host, db.Port, testenv.NoReplUser, testenv.NoReplPassword))
	src := goodSrc()
	src.User, src.Password = testenv.NoReplUser, testenv.NoReplPassword
	fs, _ = run(noRepl, src)
	expectFailed("only SELECT", fs, map[string][]string{"privileges": {
		"'cdcsync_noslave'@'%' on " + addr + " lacks REPLICATION SLAVE and BINLOG MONITOR",
		"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'cdcsync_noslave'@'%'",
	}})

	// A user without SELECT on some selected tables.
	sel := rdbConnect(t, rdbSource(db.Host, db.Port, "pf_sel", "pf-sel-pw"))
	src = rdbSource(db.Host, db.Port, "pf_sel", "pf-sel-pw")
	src.Include = []string{"pf_good.*", "pf_bad.t_ok", "pf_bad.t_enum"}
	fs, _ = run(sel, src)
	expectFailed("no SELECT", fs, map[string][]string{"privileges": {
		"'pf_sel'@'%' on " + addr + " lacks SELECT on 1 selected table(s) (pf_bad.t_ok), which cdcsync needs for the initial copy: run GRANT SELECT ON `pf_bad`.* TO 'pf_sel'@'%'",
	}})
	// A table the user has no privilege on is invisible: the warning says why.
	hinted := false
	for _, f := range fs {
		hinted = hinted || (f.Check == "tables" && f.Warning && strings.Contains(f.Message, `"pf_bad.t_enum"`) &&
			strings.Contains(f.Message, "GRANT SELECT ON `pf_bad`.* TO 'pf_sel'@'%'"))
	}
	if !hinted {
		t.Errorf("invisible table: no warning with the GRANT:\n%s", rdbFindings(fs))
	}

	// Tables without a primary key and with unsupported columns.
	src = goodSrc()
	src.Include = []string{"pf_bad.*"}
	fs, schemas = run(repl, src)
	expectFailed("bad tables", fs, map[string][]string{
		"primary_key": {`table pf_bad.t_nopk has no primary key; cdcsync needs one to apply updates and deletes: add "!pf_bad.t_nopk" to source.include or add a primary key`},
		"column_types": {
			`column pf_bad.t_enum.status has type enum('?','b'): a label holds "?"`,
			`exclude the table with "!pf_bad.t_enum" in source.include or change the column`,
			`column pf_bad.t_latin.name has type varchar(10) with character set big5, which cdcsync does not decode`,
		},
	})
	n := 0
	for _, f := range Failed(fs) {
		if f.Check == "column_types" {
			n++
		}
	}
	if n != 2 || len(schemas) != 4 {
		t.Errorf("bad tables: %d column_types findings (want 2), %d schemas (want 4)", n, len(schemas))
	}
	for _, s := range schemas {
		if s.ID.Table == "t_enum" && s.Columns[1].Kind != cdcsync.KindInvalid {
			t.Errorf("t_enum.status kind %s", s.Columns[1].Kind)
		}
	}

	// Include patterns that match nothing.
	src = goodSrc()
	src.Include = []string{"nosuch.*", "pf_goood.*"}
	fs, schemas = run(repl, src)
	expectFailed("no tables", fs, nil) // a warning: the tables may come later
	noTables := false
	for _, f := range fs {
		if f.Warning && f.Check == "tables" && strings.Contains(f.Message, `source.include selects no table on `+addr+` yet: "nosuch.*" and "pf_goood.*" matched no table`) &&
			strings.Contains(f.Message, "pf_good") && strings.Contains(f.Message, "as they are created") {
			noTables = true
		}
	}
	if !noTables || len(schemas) != 0 {
		t.Errorf("no tables: findings %+v, schemas %v; want a warning naming the patterns and no schema", fs, schemas)
	}
	// One typo among good patterns is a warning.
	src.Include = []string{"pf_good.*", "pf_goood.*"}
	fs, _ = run(repl, src)
	expectFailed("typo", fs, nil)
	warned := false
	for _, f := range fs {
		warned = warned || (f.Check == "tables" && f.Warning && strings.Contains(f.Message, `"pf_goood.*"`))
	}
	if !warned {
		t.Errorf("typo: no warning:\n%s", rdbFindings(fs))
	}

	// server_id equal to the server's.
	src = goodSrc()
	src.ServerID = 1
	fs, _ = run(repl, src)
	expectFailed("server_id", fs, map[string][]string{"server_id": {"source.server_id 1 is the server_id of " + addr + " itself"}})

	// ServerFlavor.
	flavor, version, err := ServerFlavor(ctx, repl)
	if err != nil || flavor != binlogpos.FlavorMariaDB || !strings.HasPrefix(version, "10.") {
		t.Errorf("ServerFlavor = %s %s %v", flavor, version, err)
	}
}

func rdbFindings(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("  " + f.String() + "\n")
	}
	return b.String()
}

// rdbTypes covers the types beyond the first table: YEAR, BIT, BOOL, TIME,
// ENUM, SET, MariaDB's INET4/INET6/UUID, the spatial types, text in other
// character sets, ZEROFILL and generated columns. The binlog (both ParseTime
// modes, inserts and updates) and a SELECT must decode every value alike,
// and selected values must equal expected constants.
func rdbTypes(t *testing.T, src *config.Source, dbName string) {
	ctx := context.Background()
	conn := rdbConnect(t, src)
	q := func(s string) string { return strings.ReplaceAll(s, "DB", QuoteIdent(dbName)) }
	rdbExec(t, conn, "SET NAMES utf8mb4", q(`CREATE TABLE DB.ty (
		id INT PRIMARY KEY,
		y YEAR, b1 BIT(1), b8 BIT(8), b12 BIT(12), b63 BIT(63), b64 BIT(64), bo BOOL,
		tm TIME, tm1 TIME(1), tm3 TIME(3), tm6 TIME(6),
		e ENUM('a','b''c','d\\e','é','x,y'), st SET('x','y','z','é'),
		i4 INET4, i6 INET6, u UUID,
		g GEOMETRY, p POINT, ls LINESTRING, pg POLYGON, mp MULTIPOINT, ml MULTILINESTRING, mpg MULTIPOLYGON, gc GEOMETRYCOLLECTION,
		cl CHAR(5) CHARACTER SET latin1, vl VARCHAR(40) CHARACTER SET latin1, tl TEXT CHARACTER SET latin1,
		ck CHAR(5) CHARACTER SET gbk, vk VARCHAR(20) CHARACTER SET gbk, tk MEDIUMTEXT CHARACTER SET gbk,
		v16 VARCHAR(10) CHARACTER SET utf16, t2 TEXT CHARACTER SET ucs2, v3 VARCHAR(10) CHARACTER SET utf8mb3,
		cu CHAR(4) CHARACTER SET utf8mb4,
		zf INT(6) UNSIGNED ZEROFILL,
		gv INT AS (id * 2) VIRTUAL, gs VARCHAR(50) CHARACTER SET latin1 AS (CONCAT(vl, '!')) STORED
	) CHARACTER SET utf8mb4`))
	schema, err := LoadSchema(ctx, conn, cdcsync.TableID{Database: dbName, Table: "ty"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range schema.Columns {
		if c.Kind == cdcsync.KindInvalid {
			t.Fatalf("column %s (%s) not mapped", c.Name, c.ColumnType)
		}
	}
	startPos := rdbBinlogPos(t, conn)
	cols := "id, y, b1, b8, b12, b63, b64, bo, tm, tm1, tm3, tm6, e, st, i4, i6, u, g, p, ls, pg, mp, ml, mpg, gc, cl, vl, tl, ck, vk, tk, v16, t2, v3, cu, zf"
	longGBK := strings.Repeat("中文汉字ＡＢＣ", 2000)
	rows := []string{
		`(1, 1901, b'0', b'0', b'0', 0, 0, -128, '-838:59:59', '-838:59:59.0', '-00:00:00.001', '-838:59:59.000000',
		  'a', '', '0.0.0.0', '::', '00000000-0000-0000-0000-000000000000',
		  ST_GeomFromText('POINT(0 0)'), POINT(-180, -90), ST_GeomFromText('LINESTRING(0 0, 1 1)'),
		  ST_GeomFromText('POLYGON((0 0, 1 0, 1 1, 0 0))'), ST_GeomFromText('MULTIPOINT(0 0, 1 1)'),
		  ST_GeomFromText('MULTILINESTRING((0 0, 1 1), (2 2, 3 3))'), ST_GeomFromText('MULTIPOLYGON(((0 0, 1 0, 1 1, 0 0)))'),
		  ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1), LINESTRING(0 0, 1 1))'),
		  '', '', '', '', '', '', '', '', '', '', 0)`,
		`(2, 2155, b'1', b'11111111', b'111111111111', 9223372036854775807, 18446744073709551615, 127,
		  '838:59:59', '838:59:59.0', '838:59:59.000', '838:59:59.000000',
		  'é', 'x,y,z,é', '255.255.255.255', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffffffff-ffff-ffff-ffff-ffffffffffff',
		  ST_GeomFromText('LINESTRING(1 2, 3 4)', 4326), POINT(1.5, -2.5), ST_GeomFromText('LINESTRING(-1.25 2e10, 3 4, 5 6)', 3857),
		  ST_GeomFromText('POLYGON((0 0, 10 0, 10 10, 0 0), (1 1, 2 1, 2 2, 1 1))'), ST_GeomFromText('MULTIPOINT(1 2)'),
		  ST_GeomFromText('MULTILINESTRING((1 2, 3 4))'), ST_GeomFromText('MULTIPOLYGON(((0 0, 1 0, 1 1, 0 0)), ((5 5, 6 5, 6 6, 5 5)))'),
		  ST_GeomFromText('GEOMETRYCOLLECTION EMPTY'),
		  'é€ ', 'Ünïcödé €‚ƒ„…†‡ˆ‰Š‹Œ', 'ÿ', '中文  ', '汉字ＡＢＣ', '` + longGBK + `',
		  'é𝄞', 'é中', 'utf8mb3é', '😀 ', 999999)`,
		`(3, 0, b'1', b'10101010', b'101', 1, 9223372036854775808, 1,
		  '100:00:00', '-12:34:56.7', '23:59:59.999', '-01:02:03.000001',
		  'b''c', 'x,z', '10.0.0.1', '::ffff:1.2.3.4', '123e4567-e89b-12d3-a456-426655440000',
		  NULL, POINT(0.1, 0.2), NULL, NULL, NULL, NULL, NULL, NULL,
		  'ab  ', 'trailing  ', ' lead', 'a', '中', '·', 'a', 'b', 'c', 'ab  ', 42)`,
		`(4` + strings.Repeat(", NULL", 35) + `)`,
		`(5, 2000, b'0', b'1', b'100000000000', 4611686018427387904, 1, 0,
		  '-00:00:01', '00:00:00.1', '-00:00:00.500', '00:00:00.000001',
		  'd\\e', 'y', '192.168.1.254', '2001:db8::1:0:0:1', '6ccd780c-baba-1026-9564-5b8c656024db',
		  POINT(1, 1), NULL, NULL, NULL, NULL, NULL, NULL, NULL,
		  '€', '€', '€', 'ＡＢ', 'ａ', 'ｂ', '𝄞', CONVERT(x'd800dfff0041' USING ucs2), 'ü', '', 7)`,
		`(6, 2024, NULL, NULL, NULL, NULL, NULL, NULL, '-00:00:00', NULL, NULL, NULL, 'x,y', 'é', NULL, '::1.2.3.4', NULL,
		  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
	}
	rdbExec(t, conn, "SET NAMES utf8mb4", q("INSERT INTO DB.ty ("+cols+") VALUES ")+strings.Join(rows, ",\n"),
		q("UPDATE DB.ty SET vl = CONCAT(vl, 'ç'), tm = '-100:00:00' WHERE id = 3"))
	want := len(rows) + 2 // and the update's two images

	decoded := func(raws [][]any) map[int32][]cdcsync.Row {
		out := map[int32][]cdcsync.Row{}
		for _, raw := range raws {
			row, err := DecodeBinlogRow(schema, raw)
			if err != nil {
				t.Fatalf("DecodeBinlogRow(%v): %v", raw, err)
			}
			out[row[0].(int32)] = append(out[row[0].(int32)], row)
		}
		return out
	}
	binlog := decoded(rdbReadBinlog(t, src.Host, src.Port, startPos, map[string]int{"ty": want}, dbName)["ty"])
	text := decoded(rdbReadBinlogMode(t, src.Host, src.Port, startPos, map[string]int{"ty": want}, dbName, false)["ty"])
	if !reflect.DeepEqual(binlog, text) {
		t.Errorf("the binlog decodes differently without ParseTime")
	}

	snap := rdbConnect(t, src)
	rdbExec(t, snap, SnapshotSessionSQL...)
	var res mysql.Result
	snapshot := map[int32]cdcsync.Row{}
	err = snap.ExecuteSelectStreaming("SELECT "+SelectList(schema)+" FROM "+QuoteIdent(dbName)+".ty", &res, func(raw []mysql.FieldValue) error {
		row, err := DecodeSnapshotRow(schema, raw)
		if err != nil {
			return err
		}
		snapshot[row[0].(int32)] = row
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(snapshot) != len(rows) {
		t.Fatalf("snapshot rows %d, want %d", len(snapshot), len(rows))
	}
	// The insert of row 3 (first image) and its update's before image are
	// equal; the after image is what SELECT reads now.
	for id, s := range snapshot {
		images := binlog[id]
		if len(images) == 0 {
			t.Fatalf("row %d not in the binlog", id)
		}
		b := images[len(images)-1]
		for i, c := range schema.Columns {
			if !reflect.DeepEqual(b[i], s[i]) {
				t.Errorf("row %d column %s (%s): binlog %T %#v, snapshot %T %#v", id, c.Name, c.ColumnType, b[i], b[i], s[i], s[i])
			}
		}
	}

	wkbPoint := func(x, y float64) []byte {
		b := []byte{1, 1, 0, 0, 0}
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(y))
	}
	exp := map[int32]map[string]any{
		1: {"y": int32(1901), "b1": false, "b8": int64(0), "b64": "0", "bo": int32(-128), "tm": int64(-3020399_000000),
			"tm3": int64(-1000), "tm6": int64(-3020399_000000), "e": "a", "st": "", "i4": "0.0.0.0", "i6": "::",
			"u": "00000000-0000-0000-0000-000000000000", "g": wkbPoint(0, 0), "p": wkbPoint(-180, -90),
			"cl": "", "vk": "", "zf": int64(0), "gv": int32(2), "gs": "!"},
		2: {"y": int32(2155), "b1": true, "b8": int64(255), "b12": int64(4095), "b63": int64(math.MaxInt64), "b64": "18446744073709551615",
			"bo": int32(127), "tm": int64(3020399_000000), "tm1": int64(3020399_000000), "e": "é", "st": "x,y,z,é",
			"i4": "255.255.255.255", "i6": "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "u": "ffffffff-ffff-ffff-ffff-ffffffffffff",
			"p":  wkbPoint(1.5, -2.5),
			"cl": "é€", "vl": "Ünïcödé €‚ƒ„…†‡ˆ‰Š‹Œ", "tl": "ÿ", "ck": "中文", "vk": "汉字ＡＢＣ", "tk": longGBK,
			"v16": "é𝄞", "t2": "é中", "v3": "utf8mb3é", "cu": "😀", "zf": int64(999999), "gs": "Ünïcödé €‚ƒ„…†‡ˆ‰Š‹Œ!"},
		3: {"y": int32(0), "b8": int64(0xaa), "b12": int64(5), "b64": "9223372036854775808", "tm": int64(-360000_000000),
			"tm1": int64(-45296_700000), "tm3": int64(86399_999000), "tm6": int64(-3723_000001), "e": "b'c", "st": "x,z",
			"i6": "::ffff:1.2.3.4", "u": "123e4567-e89b-12d3-a456-426655440000", "g": nil, "p": wkbPoint(0.1, 0.2),
			"cl": "ab", "vl": "trailing  ç", "tl": " lead", "cu": "ab", "zf": int64(42)},
		4: {"y": nil, "b1": nil, "tm": nil, "e": nil, "i6": nil, "g": nil, "vl": nil, "gv": int32(8), "gs": nil},
		5: {"b12": int64(2048), "b63": int64(1 << 62), "tm": int64(-1_000000), "tm1": int64(100000), "tm3": int64(-500000), "tm6": int64(1),
			"e": `d\e`, "i6": "2001:db8::1:0:0:1", "cl": "€", "v16": "𝄞", "t2": "\ufffd\ufffdA"},
		6: {"tm": int64(0), "e": "x,y", "st": "é", "i6": "::1.2.3.4"},
	}
	for id, cs := range exp {
		for name, w := range cs {
			i := schema.ColumnIndex(name)
			if got := snapshot[id][i]; !reflect.DeepEqual(got, w) {
				t.Errorf("row %d column %s: got %T %#v, want %T %#v", id, name, got, got, w, w)
			}
		}
	}
	// WKB equals what the server's ST_AsBinary returns.
	r, err := snap.Execute("SELECT id, ST_AsBinary(g), ST_AsBinary(ls), ST_AsBinary(pg), ST_AsBinary(mpg), ST_AsBinary(gc) FROM " + QuoteIdent(dbName) + ".ty WHERE id = 2")
	if err != nil {
		t.Fatal(err)
	}
	for j, name := range []string{"g", "ls", "pg", "mpg", "gc"} {
		if got, w := snapshot[2][schema.ColumnIndex(name)], r.Values[0][j+1].AsString(); !bytes.Equal(got.([]byte), w) {
			t.Errorf("column %s: WKB %x, ST_AsBinary %x", name, got, w)
		}
	}

	t.Run("charsets", func(t *testing.T) { rdbCharsets(t, snap, dbName) })
	t.Run("inet6_uuid", func(t *testing.T) { rdbInetUUID(t, src, dbName) })
	t.Run("old_temporal_format", func(t *testing.T) { rdbOldTemporal(t, src, dbName) })
	t.Run("enum_labels", func(t *testing.T) { rdbEnumLabels(t, conn, dbName) })
}

// rdbCharsets checks every byte of the single-byte character sets, every
// two-byte code of the double-byte ones and all of ucs2 (plus samples of
// the other Unicode sets) against the server's CONVERT(... USING utf8mb4).
func rdbCharsets(t *testing.T, conn *client.Conn, dbName string) {
	// check compares the values from to to, as width-byte codes, that a
	// column of charset name can hold.
	check := func(name string, width int, codes string, from, to int) {
		t.Helper()
		hexLen := width * 2
		r, err := conn.Execute(fmt.Sprintf("SELECT seq, CONVERT(CONVERT(UNHEX(LPAD(HEX(seq), %d, '0')) USING %s) USING utf8mb4) FROM %s.seq_%d_to_%d",
			hexLen, name, QuoteIdent(dbName), from, to))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cs := charsetByName(name)
		if cs == nil {
			t.Fatalf("no decoder for %s", name)
		}
		bad := 0
		for _, row := range r.Values {
			n := row[0].AsUint64()
			in := make([]byte, width)
			for i := range in {
				in[i] = byte(n >> (8 * (width - 1 - i)))
			}
			if cs.double != nil && !(cs.double.lead(in[0]) && cs.double.trail(in[1])) {
				continue // not a well-formed code: no column holds it
			}
			if cs.pairs && cs.unit(in) >= 0xd800 && cs.unit(in) < 0xe000 {
				continue // a lone surrogate, which utf16 columns refuse
			}
			want := string(row[1].AsString())
			if charsetHasSurrogates(name) {
				want = decSurrogates(want) // the one documented difference
			}
			if got := cs.decode(in); got != want {
				if bad++; bad <= 10 {
					t.Errorf("%s %x: cdcsync %q, server %q", name, in, got, want)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d %s differ", name, bad, len(r.Values), codes)
		}
	}
	for name := range singleByteSets {
		check(name, 1, "bytes", 0, 255)
	}
	for _, name := range []string{"gbk", "gb2312", "euckr"} {
		check(name, 2, "codes", 0x8000, 0xffff)
	}
	check("ucs2", 2, "code units", 0, 0xffff) // surrogates included: ucs2 holds them
	check("utf16", 2, "code units", 0, 0xffff)
	check("utf16le", 2, "code units", 0, 0xffff)
	check("utf32", 4, "code points", 0, 0x1000)
	check("utf32", 4, "code points", 0xd7f0, 0xe010)
	check("utf32", 4, "code points", 0x10fff0, 0x10ffff)
	// Surrogate pairs.
	for _, h := range []string{"d834dd1e", "0041d834dd1e0042", "d83dde00d83dde01", "00e9", "dbffdfff"} {
		r, err := conn.Execute("SELECT CONVERT(CONVERT(UNHEX('" + h + "') USING utf16) USING utf8mb4)")
		if err != nil {
			t.Fatal(err)
		}
		in, _ := hex.DecodeString(h)
		if got, want := charsetByName("utf16").decode(in), string(r.Values[0][0].AsString()); got != want {
			t.Errorf("utf16 %s: cdcsync %q, server %q", h, got, want)
		}
		le := make([]byte, len(in))
		for i := 0; i+1 < len(in); i += 2 {
			le[i], le[i+1] = in[i+1], in[i]
		}
		if got, want := charsetByName("utf16le").decode(le), string(r.Values[0][0].AsString()); got != want {
			t.Errorf("utf16le %x: cdcsync %q, server %q", le, got, want)
		}
	}
	// Every character set the server has is either decoded or refused.
	r, err := conn.Execute("SELECT CHARACTER_SET_NAME FROM information_schema.CHARACTER_SETS")
	if err != nil {
		t.Fatal(err)
	}
	var supported, refused []string
	for _, row := range r.Values {
		name := connText(row[0])
		c := cdcsync.Column{Name: "c", DataType: "varchar", ColumnType: "varchar(1)"}
		if MapColumn(&c, name) == nil {
			supported = append(supported, name)
		} else {
			refused = append(refused, name)
		}
	}
	t.Logf("character sets decoded: %v; refused: %v", supported, refused)
}

// rdbInetUUID inserts random INET6 addresses (with runs of zero words, IPv4
// mapped and compatible ones) and UUIDs of every version and variant, and
// checks the binlog's bytes print as the server prints them.
func rdbInetUUID(t *testing.T, src *config.Source, dbName string) {
	conn := rdbConnect(t, src)
	table := QuoteIdent(dbName) + ".iu"
	rdbExec(t, conn, "CREATE TABLE "+table+" (id INT PRIMARY KEY, a INET6, u UUID, v INET4)")
	schema, err := LoadSchema(context.Background(), conn, cdcsync.TableID{Database: dbName, Table: "iu"})
	if err != nil {
		t.Fatal(err)
	}
	start := rdbBinlogPos(t, conn)
	rnd := rand.New(rand.NewPCG(11, 12))
	const n = 400
	var vals []string
	for i := range n {
		var a [16]byte
		for w := range 8 {
			switch rnd.IntN(3) {
			case 0: // zero word
			case 1:
				a[2*w+1] = byte(rnd.IntN(3))
			default:
				a[2*w], a[2*w+1] = byte(rnd.Uint32()), byte(rnd.Uint32())
			}
		}
		switch i % 10 {
		case 0:
			a = [16]byte{10: 0xff, 11: 0xff, 12: byte(i), 13: 2, 14: 3, 15: 4}
		case 1:
			a = [16]byte{12: byte(i), 13: 2, 14: 3, 15: 4}
		case 2:
			a = [16]byte{15: byte(i % 3)}
		}
		var u [16]byte
		for j := range u {
			u[j] = byte(rnd.Uint32())
		}
		u[6] = u[6]&0x0f | byte(i%9)<<4 // versions 0 to 8
		u[8] = u[8]&0x3f | byte(i%4)<<6 // every variant
		v := [4]byte{byte(rnd.Uint32()), byte(rnd.Uint32()), 0, byte(i % 2)}
		vals = append(vals, fmt.Sprintf("(%d, CAST(x'%x' AS INET6), CAST(x'%x' AS UUID), CAST(x'%x' AS INET4))", i, a, u, v))
	}
	rdbExec(t, conn, "INSERT INTO "+table+" VALUES "+strings.Join(vals, ","))
	binlog := map[int32]cdcsync.Row{}
	for _, raw := range rdbReadBinlog(t, src.Host, src.Port, start, map[string]int{"iu": n}, dbName)["iu"] {
		row, err := DecodeBinlogRow(schema, raw)
		if err != nil {
			t.Fatal(err)
		}
		binlog[row[0].(int32)] = row
	}
	r, err := conn.Execute("SELECT id, CAST(a AS CHAR), CAST(u AS CHAR), CAST(v AS CHAR) FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, row := range r.Values {
		id := int32(row[0].AsInt64())
		for j := 1; j <= 3; j++ {
			if got, want := binlog[id][j], connText(row[j]); got != want {
				if bad++; bad <= 10 {
					t.Errorf("row %d %s: binlog %q, server %q", id, schema.Columns[j].Name, got, want)
				}
			}
		}
	}
}

// rdbOldTemporal checks the TIME, DATETIME and TIMESTAMP formats of MySQL
// before 5.6.4 (MariaDB writes them with mysql56_temporal_format=OFF), which
// go-mysql decodes differently, negative TIMEs included. (MariaDB 5.3's
// format for fractional seconds, which the same switch gives TIME(n) and
// DATETIME(n), is beyond go-mysql: see docs/types.md.)
func rdbOldTemporal(t *testing.T, src *config.Source, dbName string) {
	conn := rdbConnect(t, src)
	table := QuoteIdent(dbName) + ".old"
	rdbExec(t, conn, "SET GLOBAL mysql56_temporal_format = OFF")
	defer func() { _, _ = conn.Execute("SET GLOBAL mysql56_temporal_format = ON") }()
	rdbExec(t, conn, "CREATE TABLE "+table+" (id INT PRIMARY KEY, t TIME, dt DATETIME, ts TIMESTAMP NULL)",
		"SET GLOBAL mysql56_temporal_format = ON")
	schema, err := LoadSchema(context.Background(), conn, cdcsync.TableID{Database: dbName, Table: "old"})
	if err != nil {
		t.Fatal(err)
	}
	start := rdbBinlogPos(t, conn)
	rows := []string{
		"(1, '-838:59:59', '1000-01-01 00:00:00', '1970-01-01 08:00:01')",
		"(2, '838:59:59', '9999-12-31 23:59:59', '2038-01-19 11:14:07')",
		"(3, '-00:00:01', '1969-12-31 23:59:59', '2024-03-10 15:30:00')",
		"(4, '-12:34:56', '2024-02-29 12:00:00', NULL)",
		"(5, '00:00:00', NULL, NULL)",
		"(6, '-100:00:00', NULL, NULL)",
	}
	rdbExec(t, conn, "INSERT INTO "+table+" VALUES "+strings.Join(rows, ","))
	for _, parseTime := range []bool{true, false} {
		binlog := map[int32]cdcsync.Row{}
		for _, raw := range rdbReadBinlogMode(t, src.Host, src.Port, start, map[string]int{"old": len(rows)}, dbName, parseTime)["old"] {
			row, err := DecodeBinlogRow(schema, raw)
			if err != nil {
				t.Fatalf("ParseTime %v: DecodeBinlogRow(%#v): %v", parseTime, raw, err)
			}
			binlog[row[0].(int32)] = row
		}
		snap := rdbConnect(t, src)
		rdbExec(t, snap, SnapshotSessionSQL...)
		var res mysql.Result
		err = snap.ExecuteSelectStreaming("SELECT "+SelectList(schema)+" FROM "+table, &res, func(raw []mysql.FieldValue) error {
			row, err := DecodeSnapshotRow(schema, raw)
			if err != nil {
				return err
			}
			if b := binlog[row[0].(int32)]; !reflect.DeepEqual(b, row) {
				t.Errorf("ParseTime %v:\n binlog   %#v\n snapshot %#v", parseTime, b, row)
			}
			return nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// rdbEnumLabels: information_schema shows characters outside the BMP as
// "?", so such labels are refused rather than guessed.
func rdbEnumLabels(t *testing.T, conn *client.Conn, dbName string) {
	rdbExec(t, conn, "SET NAMES utf8mb4", "CREATE TABLE "+QuoteIdent(dbName)+".el (id INT PRIMARY KEY, e ENUM('👍','x'), f ENUM('?','ok') CHARACTER SET latin1)")
	s, err := LoadSchema(context.Background(), conn, cdcsync.TableID{Database: dbName, Table: "el"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Columns[1].Kind != cdcsync.KindInvalid {
		t.Errorf("an ENUM with emoji labels was mapped: %+v", s.Columns[1])
	}
	if s.Columns[2].Kind != cdcsync.KindString {
		t.Errorf("a latin1 ENUM with a '?' label was not mapped: %+v", s.Columns[2])
	}
}
