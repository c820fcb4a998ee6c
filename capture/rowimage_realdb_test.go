package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/integration/testenv"
)

// rdbRowImages: the reader's own decoding of row images (rowimage.go)
// gives exactly what go-mysql's decoding followed by decodeBinlogRow gives,
// for random and edge values of every column type it decodes, in inserts,
// updates (both images) and deletes; rows it must not decide (zero dates)
// go to go-mysql's path. Run under TestRealMariaDB, whose server's time
// zone is +08:00.
func rdbRowImages(t *testing.T, db *testenv.MariaDB) {
	ctx := context.Background()
	conn := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	rdbExec(t, conn, "CREATE DATABASE rimg", `CREATE TABLE rimg.t (
		id INT PRIMARY KEY,
		ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
		mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT,
		d1 DECIMAL(10,2), d2 DECIMAL(38,10), d3 DECIMAL(38,0), d4 DECIMAL(5,5), d5 DECIMAL(1,0),
		d6 DECIMAL(19,0), d7 DECIMAL(20,10), d8 DECIMAL(18,4), d9 DECIMAL(12,9),
		f FLOAT, fd DOUBLE,
		c CHAR(5), vc VARCHAR(20), vl VARCHAR(300), tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT,
		cl CHAR(4) CHARACTER SET latin1, vl1 VARCHAR(10) CHARACTER SET latin1, j JSON,
		b BINARY(4), vb VARBINARY(8), bl BLOB,
		dt DATE, dtm DATETIME, dtm1 DATETIME(1), dtm3 DATETIME(3), dtm4 DATETIME(4), dtm6 DATETIME(6),
		ts TIMESTAMP NULL, ts2 TIMESTAMP(2) NULL, ts5 TIMESTAMP(5) NULL, ts6 TIMESTAMP(6) NULL
	) CHARACTER SET utf8mb4`,
		// Zero dates, which only go-mysql's path may decide.
		"CREATE TABLE rimg.z (id INT PRIMARY KEY, d DATE, dtm DATETIME(6), ts TIMESTAMP NULL)",
		`CREATE TABLE rimg.x (id INT PRIMARY KEY, tm TIME, tm1 TIME(1), tm2 TIME(2), tm3 TIME(3), tm4 TIME(4), tm5 TIME(5), tm6 TIME(6),
		y YEAR, e ENUM('a','b','c d','é'), e2 ENUM(`+rimgLabels(300)+`), st SET('x','y','z'), st2 SET(`+rimgLabels(64)+`),
		b1 BIT(1), b5 BIT(5), b12 BIT(12), b64 BIT(64), bo BOOL)`)
	schemas := map[string]*cdcsync.TableSchema{}
	for _, name := range []string{"t", "z", "x"} {
		s, err := LoadSchema(ctx, conn, cdcsync.TableID{Database: "rimg", Table: name})
		if err != nil {
			t.Fatal(err)
		}
		schemas[name] = s
	}
	start := rdbBinlogPos(t, conn)

	rng := rand.New(rand.NewPCG(7, 11))
	const rows = 600
	var stmts []string
	for id := 1; id <= rows; id++ {
		stmts = append(stmts, "INSERT INTO rimg.t VALUES ("+rimgRow(rng, id)+")")
	}
	for id := 1; id <= rows; id += 3 {
		stmts = append(stmts, fmt.Sprintf("REPLACE INTO rimg.t VALUES (%s)", rimgRow(rng, id)))
		stmts = append(stmts, fmt.Sprintf("UPDATE rimg.t SET vc = %s, d2 = %s, dtm6 = %s WHERE id = %d",
			rimgText(rng, 20), rimgDecimal(rng, 38, 10), rimgDatetime(rng), id+1))
	}
	for id := 1; id <= 300; id++ {
		stmts = append(stmts, "INSERT INTO rimg.x VALUES ("+rimgRowX(rng, id)+")")
	}
	stmts = append(stmts, "UPDATE rimg.x SET tm6 = '-838:59:59.000000', b64 = b'1' WHERE id < 50", "DELETE FROM rimg.x WHERE id % 5 = 0")
	stmts = append(stmts, "DELETE FROM rimg.t WHERE id % 7 = 0",
		// A multi-row event and a multi-row update.
		"UPDATE rimg.t SET ti = ti DIV 2 WHERE id < 100")
	rdbExec(t, conn, "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'", "SET SESSION time_zone = '+00:00'")
	stmts = append(stmts, "INSERT INTO rimg.z VALUES (1, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00'),"+
		" (2, '2024-02-30', '2024-02-30 10:00:00.5', NULL), (3, '2024-02-29', '2024-02-29 23:59:59.999999', FROM_UNIXTIME(2147483647))")
	stmts = append(stmts, "INSERT INTO rimg.t (id) VALUES (100000)") // every column NULL but the key
	rdbExec(t, conn, "BEGIN")
	rdbExec(t, conn, stmts...)
	rdbExec(t, conn, "COMMIT")

	streamer := rdbDeferredStream(t, db, start)
	readCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var fast, fellBack, images int
	for {
		ev, err := streamer.GetEvent(readCtx)
		if err != nil {
			t.Fatalf("read the binlog: %v", err)
		}
		if _, ok := ev.Event.(*replication.XIDEvent); ok && fast > 0 {
			break
		}
		e, ok := ev.Event.(*replication.RowsEvent)
		if !ok || string(e.Table.Schema) != "rimg" {
			continue
		}
		s := schemas[string(e.Table.Table)]
		body, ok := deferredOf(e)
		if !ok {
			t.Fatal("a rows event was decoded by go-mysql, not deferred")
		}
		dec := compileRowDecoder(e.Table, s)
		if dec == nil {
			t.Fatalf("no row decoder for %s", s.ID)
		}
		if !fastEventType(ev.Header.EventType) {
			t.Fatalf("event type %s is not decoded by the reader", ev.Header.EventType)
		}
		imgs, ok := dec.decode(e, body, true)
		if !ok {
			fellBack++
			if s.ID.Table != "z" {
				t.Errorf("an event of %s went to go-mysql's path", s.ID)
			}
			continue
		}
		fast++
		images += len(imgs)
		if err := checkImages(s, e, body, imgs, nil, binlogpos.Pos{}); err != nil {
			t.Error(err)
		}
	}
	t.Logf("%d events (%d row images) decoded by the reader and equal to go-mysql's path; %d left to go-mysql", fast, images, fellBack)
	if fellBack != 1 {
		t.Errorf("%d events with zero or invalid dates went to go-mysql's path, want 1", fellBack)
	}
	if images < rows {
		t.Errorf("only %d row images compared", images)
	}

	// The valid rows of z's event are decoded by the reader once alone.
	z := schemas["z"]
	rdbExec(t, conn, "INSERT INTO rimg.z VALUES (4, '2024-02-29', '2024-02-29 23:59:59.999999', FROM_UNIXTIME(2147483647))")
	for {
		ev, err := streamer.GetEvent(readCtx)
		if err != nil {
			t.Fatalf("read the binlog: %v", err)
		}
		e, ok := ev.Event.(*replication.RowsEvent)
		if !ok || string(e.Table.Table) != "z" {
			continue
		}
		body, _ := deferredOf(e)
		imgs, ok := compileRowDecoder(e.Table, z).decode(e, body, true)
		if !ok {
			t.Fatal("a valid row of z went to go-mysql's path")
		}
		if err := checkImages(z, e, body, imgs, nil, binlogpos.Pos{}); err != nil {
			t.Error(err)
		}
		want := cdcsync.Row{int32(4), int32(19782), int64(1709251199999999), int64(2147483647000000)}
		for i := range want {
			if imgs[0][i] != want[i] {
				t.Errorf("column %s: %#v, want %#v", z.Columns[i].Name, imgs[0][i], want[i])
			}
		}
		break
	}
}

// rdbDeferredStream streams db's binlog from start as the reader does:
// go-mysql decodes the headers of rows events, their rows are left to the
// test (deferRows).
func rdbDeferredStream(t *testing.T, db *testenv.MariaDB, start mysql.Position) *replication.BinlogStreamer {
	t.Helper()
	rdbSyncerID++
	sc := DecodingSyncerConfig(replication.BinlogSyncerConfig{
		ServerID: uint32(100000+os.Getpid()%100000) + rdbSyncerID*200000,
		Flavor:   "mariadb",
		Host:     db.Host,
		Port:     uint16(db.Port),
		User:     "root",
	})
	sc.Logger = slog.New(slog.DiscardHandler)
	sc.RowsEventDecodeFunc = deferRows
	syncer := replication.NewBinlogSyncer(sc)
	t.Cleanup(syncer.Close)
	streamer, err := syncer.StartSync(start)
	if err != nil {
		t.Fatal(err)
	}
	return streamer
}

// rimgRow is the VALUES of a random row of rimg.t with id.
func rimgRow(rng *rand.Rand, id int) string {
	null := func(v string) string {
		if rng.IntN(8) == 0 {
			return "NULL"
		}
		return v
	}
	ints := []struct {
		bits     uint
		unsigned bool
	}{{8, false}, {8, true}, {16, false}, {16, true}, {24, false}, {24, true}, {32, false}, {32, true}, {64, false}}
	vals := []string{fmt.Sprint(id)}
	for _, in := range ints {
		vals = append(vals, null(rimgInt(rng, in.bits, in.unsigned)))
	}
	for _, d := range [][2]int{{10, 2}, {38, 10}, {38, 0}, {5, 5}, {1, 0}, {19, 0}, {20, 10}, {18, 4}, {12, 9}} {
		vals = append(vals, null(rimgDecimal(rng, d[0], d[1])))
	}
	floats := []string{"0", "-0", "1.5", "-3.25e10", "3.4e38", "1e-30", fmt.Sprint(rng.Float32() * 1000)}
	vals = append(vals, null(floats[rng.IntN(len(floats))]))
	doubles := []string{"0", "1.7976931348623157e308", "-2.2250738585072014e-308", fmt.Sprint(rng.NormFloat64() * 1e6)}
	vals = append(vals, null(doubles[rng.IntN(len(doubles))]))
	vals = append(vals, null(rimgText(rng, 5)), null(rimgText(rng, 20)), null(rimgText(rng, 300)),
		null(rimgText(rng, 60)), null(rimgText(rng, 400)), null(rimgText(rng, 70)), null(rimgText(rng, 90)))
	vals = append(vals, null("'"+[]string{"ab  ", "é", "", " x"}[rng.IntN(4)]+"'"), null("'"+[]string{"café", "", "x y "}[rng.IntN(3)]+"'"))
	vals = append(vals, null([]string{`'{"a": [1, 2.50, "x"], "b": null}'`, `'[]'`, `'"s"'`, `'{"z":1,"a":{"k":true}}'`}[rng.IntN(4)]))
	vals = append(vals, null(fmt.Sprintf("X'%08x'", rng.Uint32())), null(fmt.Sprintf("X'%s'", fmt.Sprintf("%016x", rng.Uint64())[:2*rng.IntN(9)])),
		null(fmt.Sprintf("REPEAT(X'00ff', %d)", rng.IntN(300))))
	day := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, rng.IntN(3287000))
	vals = append(vals, null(day.Format("'2006-01-02'")))
	for range 5 { // dtm, dtm1, dtm3, dtm4, dtm6
		vals = append(vals, null(rimgDatetime(rng)))
	}
	for range 4 { // ts, ts2, ts5, ts6: the server rounds to each one's digits
		ts := time.Unix(1+rng.Int64N(2147483000), rng.Int64N(1e6)*1000).UTC()
		vals = append(vals, null(ts.Format("'2006-01-02 15:04:05.000000'")))
	}
	return strings.Join(vals, ", ")
}

// rimgLabels is n labels of an ENUM or SET: 'l1', 'l2', ...
func rimgLabels(n int) string {
	var ls []string
	for i := 1; i <= n; i++ {
		ls = append(ls, fmt.Sprintf("'l%d'", i))
	}
	return strings.Join(ls, ",")
}

// rimgRowX is the VALUES of a random row of rimg.x with id.
func rimgRowX(rng *rand.Rand, id int) string {
	null := func(v string) string {
		if rng.IntN(8) == 0 {
			return "NULL"
		}
		return v
	}
	vals := []string{fmt.Sprint(id)}
	for range 7 { // tm .. tm6; the server rounds to each one's digits
		var v string
		switch rng.IntN(5) {
		case 0:
			v = []string{"'838:59:59'", "'-838:59:59'", "'00:00:00'", "'-00:00:00.5'", "'-00:00:01.25'", "'-12:00:00.000001'"}[rng.IntN(6)]
		default:
			sign := []string{"", "-"}[rng.IntN(2)]
			v = fmt.Sprintf("'%s%d:%02d:%02d.%06d'", sign, rng.IntN(838), rng.IntN(60), rng.IntN(60), rng.IntN(1000000))
		}
		vals = append(vals, null(v))
	}
	vals = append(vals, null(fmt.Sprint([]int{0, 1901, 2155, 1970 + rng.IntN(100)}[rng.IntN(4)])))
	vals = append(vals, null([]string{"'a'", "'b'", "'c d'", "'é'", "''"}[rng.IntN(5)]), null(fmt.Sprintf("'l%d'", 1+rng.IntN(300))))
	vals = append(vals, null([]string{"''", "'x'", "'x,z'", "'x,y,z'"}[rng.IntN(4)]))
	var members []string
	for i := 1; i <= 64; i++ {
		if rng.IntN(3) == 0 || (i == 64 && rng.IntN(2) == 0) {
			members = append(members, fmt.Sprintf("l%d", i))
		}
	}
	vals = append(vals, null("'"+strings.Join(members, ",")+"'"))
	vals = append(vals, null(fmt.Sprintf("b'%b'", rng.IntN(2))), null(fmt.Sprintf("b'%b'", rng.IntN(32))), null(fmt.Sprintf("b'%b'", rng.IntN(4096))),
		null(fmt.Sprintf("b'%b'", rng.Uint64())), null(fmt.Sprint(rng.IntN(2))))
	return strings.Join(vals, ", ")
}

func rimgInt(rng *rand.Rand, bits uint, unsigned bool) string {
	switch rng.IntN(4) {
	case 0: // the ends of the range
		if unsigned {
			return fmt.Sprint([]uint64{0, 1<<bits - 1}[rng.IntN(2)])
		}
		return fmt.Sprint([]int64{-1 << (bits - 1), 1<<(bits-1) - 1, -1, 0}[rng.IntN(4)])
	}
	u := rng.Uint64() >> (64 - bits)
	if unsigned {
		return fmt.Sprint(u)
	}
	return fmt.Sprint(int64(u<<(64-bits)) >> (64 - bits))
}

func rimgDecimal(rng *rand.Rand, prec, scale int) string {
	digits := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		return b.String()
	}
	intg := prec - scale
	var s string
	switch rng.IntN(5) {
	case 0:
		s = "0"
	case 1: // all nines
		s = strings.Repeat("9", max(intg, 1))
		if intg == 0 {
			s = "0"
		}
		if scale > 0 {
			s += "." + strings.Repeat("9", scale)
		}
	default:
		n := rng.IntN(intg + 1)
		s = digits(n)
		if s == "" {
			s = "0"
		}
		if scale > 0 {
			s += "." + digits(1+rng.IntN(scale))
		}
	}
	if rng.IntN(2) == 0 {
		s = "-" + s
	}
	return s
}

func rimgText(rng *rand.Rand, n int) string {
	parts := []string{"a", "Z", " ", "é", "日本", "😀", "\\\\", "''", "x", "0"}
	var b strings.Builder
	b.WriteByte('\'')
	for range rng.IntN(n + 1) {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	// Trailing spaces, which CHAR drops and VARCHAR keeps.
	if rng.IntN(4) == 0 {
		b.WriteString("  ")
	}
	b.WriteByte('\'')
	s := b.String()
	// Characters, not bytes, count against the column's length; cut to n
	// runes (a cut may leave a quote pair split, so keep whole parts only).
	if r := []rune(s); len(r) > n {
		return "LEFT(" + s + ", " + fmt.Sprint(n) + ")"
	}
	return s
}

func rimgDatetime(rng *rand.Rand) string {
	t := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(9000*365*24)) * time.Hour).
		Add(time.Duration(rng.Int64N(3600e6)) * time.Microsecond)
	if rng.IntN(6) == 0 {
		t = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC) // no fraction to round up past the end
	}
	return t.Format("'2006-01-02 15:04:05.000000'")
}

// rdbLargeValues: values of shareValueBytes and more decode as go-mysql
// decodes them; those of inserts and deletes share the event's bytes,
// those of updates are copies (an after image must not keep its before
// image alive), and small values are copies.
func rdbLargeValues(t *testing.T, db *testenv.MariaDB) {
	ctx := context.Background()
	conn := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	rdbExec(t, conn, "CREATE DATABASE rimgl",
		"CREATE TABLE rimgl.t (id INT PRIMARY KEY, lb LONGBLOB, lt LONGTEXT, ct LONGTEXT CHARACTER SET latin1, s VARCHAR(10), sb VARBINARY(10)) CHARACTER SET utf8mb4")
	s, err := LoadSchema(ctx, conn, cdcsync.TableID{Database: "rimgl", Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	start := rdbBinlogPos(t, conn)
	rdbExec(t, conn,
		"INSERT INTO rimgl.t VALUES (1, REPEAT('b', 70000), REPEAT('é', 40000), REPEAT('x', 70000), 'small', 'small')",
		"INSERT INTO rimgl.t VALUES (2, REPEAT('c', 100), CONCAT(REPEAT('日', 30000), '  '), NULL, NULL, NULL)",
		"UPDATE rimgl.t SET lb = REPEAT('u', 80000), lt = REPEAT('v', 80000) WHERE id = 1",
		"DELETE FROM rimgl.t WHERE id = 1")

	streamer := rdbDeferredStream(t, db, start)
	readCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// aliases says whether v's bytes lie inside body.
	aliases := func(v any, body []byte) bool {
		var p unsafe.Pointer
		switch v := v.(type) {
		case []byte:
			p = unsafe.Pointer(unsafe.SliceData(v))
		case string:
			p = unsafe.Pointer(unsafe.StringData(v))
		default:
			return false
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(body)))
		return uintptr(p) >= lo && uintptr(p) < lo+uintptr(len(body))
	}
	// want[event][column]: whether the first image's value is shared.
	want := []map[string]bool{
		{"lb": true, "lt": true, "ct": false, "s": false, "sb": false}, // insert: latin1 text is converted
		{"lb": false, "lt": true},                                      // insert: lb is small; lt is 90,002 bytes
		{"lb": false, "lt": false},                                     // update
		{"lb": true, "lt": true},                                       // delete
	}
	for n := 0; n < len(want); {
		ev, err := streamer.GetEvent(readCtx)
		if err != nil {
			t.Fatalf("read the binlog: %v", err)
		}
		e, ok := ev.Event.(*replication.RowsEvent)
		if !ok || string(e.Table.Schema) != "rimgl" {
			continue
		}
		body, ok := deferredOf(e)
		if !ok {
			t.Fatal("a rows event was decoded by go-mysql, not deferred")
		}
		imgs, ok := compileRowDecoder(e.Table, s).decode(e, body, true)
		if !ok {
			t.Fatalf("event %d went to go-mysql's path", n)
		}
		if err := checkImages(s, e, body, imgs, nil, binlogpos.Pos{}); err != nil {
			t.Error(err)
		}
		img := imgs[len(imgs)-1] // an update's after image
		for col, shared := range want[n] {
			if got := aliases(img[s.ColumnIndex(col)], body.data); got != shared {
				t.Errorf("event %d (%s), column %s: value shares the event's bytes = %v, want %v", n, ev.Header.EventType, col, got, shared)
			}
		}
		// The events of a compressed transaction share one buffer: no
		// value may keep it alive.
		copies, ok := compileRowDecoder(e.Table, s).decode(e, body, false)
		if !ok {
			t.Fatalf("event %d went to go-mysql's path", n)
		}
		for _, img := range copies {
			for i, v := range img {
				if aliases(v, body.data) {
					t.Errorf("event %d, column %s: a value of an event that does not own its bytes shares them", n, s.Columns[i].Name)
				}
			}
		}
		n++
	}
}
