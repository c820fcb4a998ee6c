package capture

// Benchmarks of decoding rows: a binlog row image as go-mysql v1.16.0 yields
// it (ParseTime, UseDecimal, MariaDB with binlog_row_metadata=FULL) and a
// snapshot row as the text protocol yields it, for the bench harness's
// 15-column, ~200-byte row (bench/schema.go). BenchmarkRowsEvent runs the
// reader's whole per-event path (reader.rows: decode both images of an
// UPDATE, size accounting, Change construction) on a 500-row update event.
//
// Run: go test ./capture/ -run '^$' -bench . -benchmem

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/shopspring/decimal"

	"github.com/cdcsync/cdcsync"
)

func benchSchema() *cdcsync.TableSchema {
	col := func(name, dt, ct string, k cdcsync.Kind, null bool, p, s int) cdcsync.Column {
		return cdcsync.Column{Name: name, DataType: dt, ColumnType: ct, Kind: k, Nullable: null, Precision: p, Scale: s}
	}
	return &cdcsync.TableSchema{
		ID: cdcsync.TableID{Database: "bench", Table: "t"},
		Columns: []cdcsync.Column{
			col("id", "bigint", "bigint(20)", cdcsync.KindInt64, false, 0, 0),
			col("account_id", "int", "int(11)", cdcsync.KindInt32, false, 0, 0),
			col("qty", "int", "int(11)", cdcsync.KindInt32, true, 0, 0),
			col("amount", "decimal", "decimal(12,2)", cdcsync.KindDecimal, false, 12, 2),
			col("price", "decimal", "decimal(18,4)", cdcsync.KindDecimal, true, 18, 4),
			col("ratio", "double", "double", cdcsync.KindFloat64, true, 0, 0),
			col("status", "varchar", "varchar(16)", cdcsync.KindString, false, 0, 0),
			col("name", "varchar", "varchar(64)", cdcsync.KindString, true, 0, 0),
			col("email", "varchar", "varchar(100)", cdcsync.KindString, true, 0, 0),
			col("note", "text", "text", cdcsync.KindString, true, 0, 0),
			col("created_at", "datetime", "datetime(6)", cdcsync.KindTimestamp, false, 0, 0),
			col("updated_at", "timestamp", "timestamp(6)", cdcsync.KindTimestampTZ, false, 0, 0),
			col("birth", "date", "date", cdcsync.KindDate, true, 0, 0),
			col("flags", "tinyint", "tinyint(4)", cdcsync.KindInt32, true, 0, 0),
			col("attrs", "longtext", "longtext", cdcsync.KindString, true, 0, 0),
		},
		PrimaryKey: []int{0},
	}
}

var benchStatuses = []string{"new", "paid", "shipped", "delivered", "cancelled", "refunded"}

// binlogRow is row id as go-mysql's replication package yields it.
func binlogRow(id int64, r *rand.Rand) []any {
	created := time.Unix(1_600_000_000+id, int64(id%1_000_000)*1000).UTC()
	return []any{
		id,
		int32(id % 100_000),
		int32(id % 1000),
		decimal.New(r.Int64N(10_000_000), -2),
		decimal.New(r.Int64N(10_000_000_000), -4),
		r.Float64() * 1000,
		benchStatuses[id%int64(len(benchStatuses))],
		fmt.Sprintf("customer %08d", id),
		fmt.Sprintf("user%d@example%d.com", id, id%97),
		[]byte(fmt.Sprintf("order %d note: lorem ipsum dolor sit amet %x", id, r.Uint64())),
		created,
		created.Add(1500 * time.Millisecond).Local(),
		"1987-06-15",
		int8(id % 128),
		[]byte(fmt.Sprintf(`{"k": %d, "tags": ["a", "b"], "v": %q}`, id%1000, benchStatuses[id%3])),
	}
}

// snapshotRow is row id as the text protocol yields it.
func snapshotRow(id int64, r *rand.Rand) []mysql.FieldValue {
	str := func(s string) mysql.FieldValue { return mysql.NewFieldValue(mysql.FieldValueTypeString, 0, []byte(s)) }
	i64 := func(n int64) mysql.FieldValue { return mysql.NewFieldValue(mysql.FieldValueTypeSigned, uint64(n), nil) }
	created := time.Unix(1_600_000_000+id, int64(id%1_000_000)*1000).UTC()
	f := r.Float64() * 1000
	return []mysql.FieldValue{
		i64(id), i64(id % 100_000), i64(id % 1000),
		str(decimal.New(r.Int64N(10_000_000), -2).StringFixed(2)),
		str(decimal.New(r.Int64N(10_000_000_000), -4).StringFixed(4)),
		mysql.NewFieldValue(mysql.FieldValueTypeFloat, mathFloat64bits(f), nil),
		str(benchStatuses[id%int64(len(benchStatuses))]),
		str(fmt.Sprintf("customer %08d", id)),
		str(fmt.Sprintf("user%d@example%d.com", id, id%97)),
		str(fmt.Sprintf("order %d note: lorem ipsum dolor sit amet %x", id, r.Uint64())),
		str(created.Format("2006-01-02 15:04:05.000000")),
		str(created.Add(1500 * time.Millisecond).Format("2006-01-02 15:04:05.000000")),
		str("1987-06-15"),
		i64(id % 128),
		str(fmt.Sprintf(`{"k": %d, "tags": ["a", "b"], "v": %q}`, id%1000, benchStatuses[id%3])),
	}
}

func mathFloat64bits(f float64) uint64 { return math.Float64bits(f) }

const benchRowsN = 1000

// BenchmarkDecodeBinlogRow decodes one binlog row image (15 columns).
func BenchmarkDecodeBinlogRow(b *testing.B) {
	s := benchSchema()
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([][]any, benchRowsN)
	for i := range rows {
		rows[i] = binlogRow(int64(i+1), r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuNow()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeBinlogRow(s, rows[i%benchRowsN]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuNow()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkDecodeSnapshotRow decodes one snapshot SELECT row (15 columns).
func BenchmarkDecodeSnapshotRow(b *testing.B) {
	s := benchSchema()
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([][]mysql.FieldValue, benchRowsN)
	for i := range rows {
		rows[i] = snapshotRow(int64(i+1), r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuNow()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeSnapshotRow(s, rows[i%benchRowsN]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuNow()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkRowsEvent runs the body of reader.rows (stream.go) on an UPDATE
// event of 500 rows (1000 images): reader.decodeRow of both images, the size
// accounting and the Change appended to the transaction. (reader.rows itself
// needs a RowsEvent parsed from bytes for its Type.) The metric is per row
// change.
func BenchmarkRowsEvent(b *testing.B) {
	s := benchSchema()
	r := rand.New(rand.NewPCG(1, 2))
	ev := &replication.RowsEvent{
		Table:       &replication.TableMapEvent{Schema: []byte("bench"), Table: []byte("t")},
		ColumnCount: uint64(len(s.Columns)),
	}
	const perEvent = 500
	for i := 0; i < perEvent; i++ {
		ev.Rows = append(ev.Rows, binlogRow(int64(i+1), r), binlogRow(int64(i+1), r))
	}
	rd := &reader{cfg: StreamConfig{Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{s.ID: s}}}
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuNow()
	for i := 0; i < b.N; i++ {
		rd.txn = &cdcsync.Txn{}
		for j := 0; j+2 <= len(ev.Rows); j += 2 {
			before, n, err := rd.decodeRow(s, ev.Rows[j])
			if err != nil {
				b.Fatal(err)
			}
			after, n2, err := rd.decodeRow(s, ev.Rows[j+1])
			if err != nil {
				b.Fatal(err)
			}
			rd.txn.Changes = append(rd.txn.Changes, cdcsync.Change{Table: s.ID, Op: cdcsync.OpUpdate, Before: before, After: after})
			rd.txn.Bytes += n + n2
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*perEvent), "ns/change")
	b.ReportMetric(float64((cpuNow()-cpu0).Nanoseconds())/float64(b.N*perEvent), "cpu-ns/change")
}

// TestDecimalFastPaths checks decDecimalFast and decCanonicalDecimal, the
// fast paths of decode.go, against the general code they short-cut.
func TestDecimalFastPaths(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	slow := func(c *cdcsync.Column, d decimal.Decimal) (any, error) {
		if d.Exponent() < -int32(c.Scale) {
			return decDecimalText(c, d.String())
		}
		return decDecimalText(c, d.StringFixed(int32(c.Scale)))
	}
	var ds []decimal.Decimal
	for _, s := range []string{"0", "-0", "0.00", "-0.00", "1", "-1", "123.45", "-123.45", "0.001", "-0.5", "99999999.99", "100000000.00",
		"123456789012345678", "-123456789012345678", "1234567890123456789", "12345678901234567890.5", "1e3", "1.5e-1", "7.000"} {
		ds = append(ds, decimal.RequireFromString(s))
	}
	for range 5000 {
		digits := 1 + r.IntN(20)
		var sb strings.Builder
		if r.IntN(2) == 0 {
			sb.WriteByte('-')
		}
		for i := 0; i < digits; i++ {
			sb.WriteByte(byte('0' + r.IntN(10)))
		}
		ds = append(ds, decimal.RequireFromString(sb.String()).Shift(-int32(r.IntN(8))))
	}
	for _, p := range []struct{ prec, scale int }{{10, 0}, {12, 2}, {18, 4}, {20, 0}, {38, 10}, {5, 5}, {65, 30}} {
		c := &cdcsync.Column{Name: "d", DataType: "decimal", ColumnType: fmt.Sprintf("decimal(%d,%d)", p.prec, p.scale), Kind: cdcsync.KindDecimal, Precision: p.prec, Scale: p.scale}
		for _, d := range ds {
			want, werr := slow(c, d)
			got, gerr := decDecimalValue(c, d)
			if (werr == nil) != (gerr == nil) || want != got {
				t.Errorf("decimal(%d,%d) %s: got %v, %v; want %v, %v", p.prec, p.scale, d, got, gerr, want, werr)
			}
			if werr != nil {
				continue
			}
			for _, text := range []string{d.StringFixed(int32(p.scale)), d.String(), want.(string)} {
				got, gerr := decDecimalText(c, text)
				w, e := decNormDecimal(strings.TrimSpace(text), p.scale)
				if !e {
					continue
				}
				if gerr != nil || got != w {
					t.Errorf("decDecimalText(decimal(%d,%d), %q) = %v, %v; want %v", p.prec, p.scale, text, got, gerr, w)
				}
			}
		}
	}
	for _, s := range []string{"-0.00", "00.10", "+1.00", "1.0", "1.000", ".10", "1e2", " 1.00", "-", ""} {
		if decCanonicalDecimal(s, 2) {
			t.Errorf("decCanonicalDecimal(%q, 2) = true", s)
		}
	}
}

// TestRowDecodersMatchValueDecoders checks that DecodeBinlogRow and
// DecodeSnapshotRow, with their fast paths and shared text buffer, give
// exactly what DecodeBinlog and DecodeSnapshot give value by value,
// errors included.
func TestRowDecodersMatchValueDecoders(t *testing.T) {
	s := benchSchema()
	s.Columns = append(s.Columns,
		cdcsync.Column{Name: "big", DataType: "decimal", ColumnType: "decimal(50,5)", Kind: cdcsync.KindString, Nullable: true, Precision: 50, Scale: 5},
		cdcsync.Column{Name: "bin", DataType: "binary", ColumnType: "binary(4)", Kind: cdcsync.KindBinary, Nullable: true})
	// Every kind of column whose decoding differs, mapped by MapColumn.
	for _, c := range [][3]string{
		{"char", "char(6)", "utf8mb4"}, {"varchar", "varchar(10)", "latin1"}, {"char", "char(4)", "gbk"}, {"enum", "enum('a','b''c')", "utf8mb4"},
		{"set", "set('x','y','z')", "utf8mb4"}, {"bit", "bit(1)", ""}, {"bit", "bit(12)", ""}, {"bit", "bit(64)", ""}, {"time", "time(3)", ""},
		{"year", "year(4)", ""}, {"inet6", "inet6", ""}, {"uuid", "uuid", ""}, {"point", "point", ""}, {"json", "json", ""},
		{"int", "int(10) unsigned", ""}, {"float", "float", ""},
	} {
		col := cdcsync.Column{Name: fmt.Sprintf("x%d", len(s.Columns)), DataType: c[0], ColumnType: c[1], Nullable: true}
		if err := MapColumn(&col, c[2]); err != nil {
			t.Fatal(err)
		}
		s.Columns = append(s.Columns, col)
	}
	r := rand.New(rand.NewPCG(7, 8))
	str := func(s string) mysql.FieldValue { return mysql.NewFieldValue(mysql.FieldValueTypeString, 0, []byte(s)) }
	var binRows [][]any
	var snapRows [][]mysql.FieldValue
	for i := 0; i < 300; i++ {
		b := append(binlogRow(int64(i+1), r), decimal.RequireFromString("12345678901234567890123456789.5"), []byte("ab"),
			"ab  ", "caf\xe9", "\xd6\xd0 ", int64(2), int64(5), int64(1), int64(0xabc), int64(-2), "-100:00:00.5",
			2024, "\x20\x01\x0d\xb8", "\x12>Eg\xe8\x9b\x12\xd3\xa4VBfUD", []byte("\x00\x00\x00\x00\x01\x01\x00"), `{"a":1}`,
			uint32(4294967295), float32(1.5))
		sn := append(snapshotRow(int64(i+1), r), str("12345678901234567890123456789.50000"), str("ab\x00\x00"),
			str("ab"), str("café"), str("中"), str("b'c"), str("x,z"), str("\x01"), str("\x0a\xbc"),
			str("\xff\xff\xff\xff\xff\xff\xff\xfe"), str("-100:00:00.500"), mysql.NewFieldValue(mysql.FieldValueTypeUnsigned, 2024, nil),
			str("2001:db8::"), str("123e4567-e89b-12d3-a456-426655440000"), str("\x00\x00\x00\x00\x01\x01\x00"), str(`{"a": 1}`),
			mysql.NewFieldValue(mysql.FieldValueTypeUnsigned, 4294967295, nil), mysql.NewFieldValue(mysql.FieldValueTypeFloat, math.Float64bits(1.5), nil))
		for j := range b {
			if r.IntN(8) == 0 {
				b[j], sn[j] = nil, mysql.FieldValue{}
			}
		}
		switch i % 10 {
		case 1:
			b[3], sn[3] = decimal.RequireFromString("123.456"), str("123.456") // too many fraction digits
		case 2:
			b[3], sn[3] = decimal.RequireFromString("12345678901.5"), str("12345678901.50") // too wide
		case 3:
			b[12], sn[12] = "0000-00-00", str("0000-00-00") // zero date
			sn[10] = str("2024-02-30 10:00:00")
		case 4:
			b[4], sn[4] = decimal.RequireFromString("-0.00001"), str("-0.0000")
			sn[3] = str("007.10")
		case 5:
			b[6], b[9] = "", []byte{}
			sn[6], sn[9] = str(""), str("")
		case 6:
			b[len(b)-13] = int64(9) // no such ENUM label
		case 7:
			b[len(b)-8], sn[len(sn)-8] = "25:61:00", str("25:61:00") // not a time
		case 8:
			// An INT's value out of its kind's range, or a BIGINT's out
			// of int64's: errors on both paths.
			if i%20 == 8 {
				b[1], sn[1] = int64(1)<<40, mysql.NewFieldValue(mysql.FieldValueTypeSigned, uint64(1)<<40, nil)
			} else {
				sn[0] = mysql.NewFieldValue(mysql.FieldValueTypeUnsigned, math.MaxUint64, nil)
			}
		}
		binRows, snapRows = append(binRows, b), append(snapRows, sn)
	}
	ok := 0
	first := len(benchSchema().Columns) + 2 // the columns both paths give the same values in
	for i := range binRows {
		b, berr := DecodeBinlogRow(s, binRows[i])
		sn, serr := DecodeSnapshotRow(s, snapRows[i])
		if berr != nil || serr != nil {
			continue
		}
		ok++
		if !reflect.DeepEqual(b[first:], sn[first:]) {
			t.Errorf("row %d: binlog %#v, snapshot %#v", i, b[first:], sn[first:])
		}
	}
	if ok < 80 {
		t.Errorf("only %d rows decode on both paths", ok)
	}
	for i := range binRows {
		got, gerr := DecodeBinlogRow(s, binRows[i])
		want := make(cdcsync.Row, len(s.Columns))
		var werr error
		for j := range s.Columns {
			v, err := DecodeBinlog(&s.Columns[j], binRows[i][j])
			if err != nil {
				werr = decWithTable(err, s.ID)
				break
			}
			want[j] = v
		}
		compareRows(t, "binlog", i, got, gerr, want, werr)
	}
	for i := range snapRows {
		got, gerr := DecodeSnapshotRow(s, snapRows[i])
		want := make(cdcsync.Row, len(s.Columns))
		var werr error
		for j := range s.Columns {
			v, err := DecodeSnapshot(&s.Columns[j], snapRows[i][j])
			if err != nil {
				werr = decWithTable(err, s.ID)
				if ve, ok := werr.(*ValueError); ok {
					ve.Key = snapshotKey(s, snapRows[i]) // the copy names the row
				}
				break
			}
			want[j] = v
		}
		compareRows(t, "snapshot", i, got, gerr, want, werr)
	}
}

func compareRows(t *testing.T, path string, i int, got cdcsync.Row, gerr error, want cdcsync.Row, werr error) {
	t.Helper()
	if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
		t.Errorf("%s row %d: error %v, want %v", path, i, gerr, werr)
		return
	}
	if gerr != nil {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s row %d:\n got %#v\nwant %#v", path, i, got, want)
	}
}

// cpuNow is the process's user+system CPU time. The benchmarks report CPU
// time per unit next to wall time: on a shared 2-core machine wall time
// swings with the load, CPU time much less.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
