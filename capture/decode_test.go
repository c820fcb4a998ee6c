package capture

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/shopspring/decimal"

	"github.com/cdcsync/cdcsync"
)

// decTestCol builds a mapped column named "c".
func decTestCol(t *testing.T, dataType, columnType string) *cdcsync.Column {
	t.Helper()
	c := &cdcsync.Column{Name: "c", DataType: dataType, ColumnType: columnType}
	if err := MapColumn(c, "utf8mb4"); err != nil {
		t.Fatalf("MapColumn(%s): %v", columnType, err)
	}
	return c
}

func decFVSigned(n int64) mysql.FieldValue {
	return mysql.NewFieldValue(mysql.FieldValueTypeSigned, uint64(n), nil)
}

func decFVUnsigned(n uint64) mysql.FieldValue {
	return mysql.NewFieldValue(mysql.FieldValueTypeUnsigned, n, nil)
}

func decFVFloat(f float64) mysql.FieldValue {
	return mysql.NewFieldValue(mysql.FieldValueTypeFloat, math.Float64bits(f), nil)
}

func decFVText(s string) mysql.FieldValue {
	return mysql.NewFieldValue(mysql.FieldValueTypeString, 0, []byte(s))
}

var decFVNull = mysql.NewFieldValue(mysql.FieldValueTypeNull, 0, nil)

type decCase struct {
	name       string
	dataType   string
	columnType string
	binlog     any              // value as go-mysql's replication package yields it
	snapshot   mysql.FieldValue // value as a text-protocol SELECT yields it
	noSnapshot bool             // only the binlog form is tested
	want       any
}

func TestDecodeCanonicalValues(t *testing.T) {
	days := func(y int, m time.Month, d int) int32 {
		return int32(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
	}
	micros := func(y int, m time.Month, d, hh, mm, ss, us int) int64 {
		return time.Date(y, m, d, hh, mm, ss, us*1000, time.UTC).UnixMicro()
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	plus8 := time.FixedZone("+08", 8*3600)
	f32 := float32(3.1415927)
	pointOne, pointTwo := 0.1, 0.2
	cases := []decCase{
		// Integers, signed and unsigned, at both ends of every width.
		{"tinyint min", "tinyint", "tinyint(4)", int8(-128), decFVSigned(-128), false, int32(-128)},
		{"tinyint max", "tinyint", "tinyint(4)", int8(127), decFVSigned(127), false, int32(127)},
		{"tinyint unsigned max", "tinyint", "tinyint(3) unsigned", uint8(255), decFVUnsigned(255), false, int32(255)},
		{"tinyint unsigned as signed", "tinyint", "tinyint(3) unsigned", int8(-1), decFVUnsigned(255), false, int32(255)},
		{"tinyint unsigned min", "tinyint", "tinyint(3) unsigned", uint8(0), decFVUnsigned(0), false, int32(0)},
		{"smallint min", "smallint", "smallint(6)", int16(-32768), decFVSigned(-32768), false, int32(-32768)},
		{"smallint max", "smallint", "smallint(6)", int16(32767), decFVSigned(32767), false, int32(32767)},
		{"smallint unsigned max", "smallint", "smallint(5) unsigned", uint16(65535), decFVUnsigned(65535), false, int32(65535)},
		{"smallint unsigned as signed", "smallint", "smallint(5) unsigned", int16(-1), decFVUnsigned(65535), false, int32(65535)},
		{"mediumint min", "mediumint", "mediumint(9)", int32(-8388608), decFVSigned(-8388608), false, int32(-8388608)},
		{"mediumint max", "mediumint", "mediumint(9)", int32(8388607), decFVSigned(8388607), false, int32(8388607)},
		{"mediumint unsigned max", "mediumint", "mediumint(8) unsigned", uint32(16777215), decFVUnsigned(16777215), false, int32(16777215)},
		{"mediumint unsigned sign-extended", "mediumint", "mediumint(8) unsigned", int32(-1), decFVUnsigned(16777215), false, int32(16777215)},
		{"int min", "int", "int(11)", int32(math.MinInt32), decFVSigned(math.MinInt32), false, int32(math.MinInt32)},
		{"int max", "int", "int(11)", int32(math.MaxInt32), decFVSigned(math.MaxInt32), false, int32(math.MaxInt32)},
		{"int unsigned max", "int", "int(10) unsigned", uint32(math.MaxUint32), decFVUnsigned(math.MaxUint32), false, int64(math.MaxUint32)},
		{"int unsigned as signed", "int", "int(10) unsigned", int32(-1), decFVUnsigned(math.MaxUint32), false, int64(math.MaxUint32)},
		{"bigint min", "bigint", "bigint(20)", int64(math.MinInt64), decFVSigned(math.MinInt64), false, int64(math.MinInt64)},
		{"bigint max", "bigint", "bigint(20)", int64(math.MaxInt64), decFVSigned(math.MaxInt64), false, int64(math.MaxInt64)},
		{"bigint unsigned max", "bigint", "bigint(20) unsigned", uint64(math.MaxUint64), decFVUnsigned(math.MaxUint64), false, "18446744073709551615"},
		{"bigint unsigned as signed", "bigint", "bigint(20) unsigned", int64(-1), decFVUnsigned(math.MaxUint64), false, "18446744073709551615"},
		{"bigint unsigned zero", "bigint", "bigint(20) unsigned", uint64(0), decFVUnsigned(0), false, "0"},
		{"bigint unsigned 2^63", "bigint", "bigint(20) unsigned", int64(math.MinInt64), decFVUnsigned(1 << 63), false, "9223372036854775808"},

		// Decimals.
		{"decimal negative", "decimal", "decimal(10,2)", decimal.RequireFromString("-12.5"), decFVText("-12.50"), false, "-12.50"},
		{"decimal zero", "decimal", "decimal(10,2)", decimal.RequireFromString("0.00"), decFVText("0.00"), false, "0.00"},
		{"decimal small fraction", "decimal", "decimal(10,4)", decimal.RequireFromString("-0.0001"), decFVText("-0.0001"), false, "-0.0001"},
		{"decimal scale 0", "decimal", "decimal(5,0)", decimal.RequireFromString("-99999"), decFVText("-99999"), false, "-99999"},
		{"decimal max precision", "decimal", "decimal(38,0)", decimal.RequireFromString("99999999999999999999999999999999999999"), decFVText("99999999999999999999999999999999999999"), false, "99999999999999999999999999999999999999"},
		{"decimal 38,10 min", "decimal", "decimal(38,10)", decimal.RequireFromString("-9999999999999999999999999999.9999999999"), decFVText("-9999999999999999999999999999.9999999999"), false, "-9999999999999999999999999999.9999999999"},
		{"decimal 38,38", "decimal", "decimal(38,38)", decimal.RequireFromString("0.12345678901234567890123456789012345678"), decFVText("0.12345678901234567890123456789012345678"), false, "0.12345678901234567890123456789012345678"},
		{"decimal as string", "decimal", "decimal(10,3)", "-1.500", decFVText("-1.500"), false, "-1.500"},
		{"decimal 65 as string", "decimal", "decimal(65,30)", decimal.RequireFromString("-12345678901234567890123456789012345.123456789012345678901234567890"), decFVText("-12345678901234567890123456789012345.123456789012345678901234567890"), false, "-12345678901234567890123456789012345.123456789012345678901234567890"},
		{"decimal 65 small", "decimal", "decimal(65,30)", decimal.RequireFromString("-1.5"), decFVText("-1.500000000000000000000000000000"), false, "-1.500000000000000000000000000000"},

		// Floating point.
		{"float pi", "float", "float", f32, decFVFloat(float64(f32)), false, f32},
		{"float max", "float", "float", float32(math.MaxFloat32), decFVFloat(math.MaxFloat32), false, float32(math.MaxFloat32)},
		{"float smallest", "float", "float", float32(math.SmallestNonzeroFloat32), decFVFloat(math.SmallestNonzeroFloat32), false, float32(math.SmallestNonzeroFloat32)},
		{"float +inf", "float", "float", float32(math.Inf(1)), decFVFloat(math.Inf(1)), false, float32(math.Inf(1))},
		{"float -inf", "float", "float", float32(math.Inf(-1)), decFVFloat(math.Inf(-1)), false, float32(math.Inf(-1))},
		{"double max", "double", "double", math.MaxFloat64, decFVFloat(math.MaxFloat64), false, math.MaxFloat64},
		{"double smallest", "double", "double", math.SmallestNonzeroFloat64, decFVFloat(math.SmallestNonzeroFloat64), false, math.SmallestNonzeroFloat64},
		{"double 0.1+0.2", "double", "double", pointOne + pointTwo, decFVText("0.30000000000000004"), false, 0.30000000000000004},
		{"double -inf", "double", "double", math.Inf(-1), decFVFloat(math.Inf(-1)), false, math.Inf(-1)},
		{"double trailing zero type", "double", "double", replication.FloatWithTrailingZero(2), decFVFloat(2), false, 2.0},

		// Strings.
		{"varchar empty", "varchar", "varchar(10)", "", decFVText(""), false, ""},
		{"varchar emoji", "varchar", "varchar(10)", "h\u00e9llo\U0001F600", decFVText("h\u00e9llo\U0001F600"), false, "h\u00e9llo\U0001F600"},
		{"text as bytes", "text", "text", []byte("\U0001F600 four bytes"), decFVText("\U0001F600 four bytes"), false, "\U0001F600 four bytes"},
		{"char", "char", "char(5)", "ab", decFVText("ab"), false, "ab"},
		{"longtext (MariaDB json) verbatim", "longtext", "longtext", []byte(`{"b": 1, "a": 2}`), decFVText(`{"b": 1, "a": 2}`), false, `{"b": 1, "a": 2}`},

		// Binary.
		{"binary padded", "binary", "binary(4)", "a", decFVText("a\x00\x00\x00"), false, []byte("a\x00\x00\x00")},
		{"binary all zero", "binary", "binary(4)", "", decFVText("\x00\x00\x00\x00"), false, []byte{0, 0, 0, 0}},
		{"binary full", "binary", "binary(4)", "\x01\x00\x00\x02", decFVText("\x01\x00\x00\x02"), false, []byte{1, 0, 0, 2}},
		{"varbinary keeps trailing zeros", "varbinary", "varbinary(8)", "a\x00", decFVText("a\x00"), false, []byte("a\x00")},
		{"varbinary empty", "varbinary", "varbinary(8)", "", decFVText(""), false, []byte{}},
		{"blob", "blob", "blob", []byte{0, 0xff, 0}, decFVText("\x00\xff\x00"), false, []byte{0, 0xff, 0}},

		// Dates.
		{"date 1000-01-01", "date", "date", "1000-01-01", decFVText("1000-01-01"), false, days(1000, 1, 1)},
		{"date 9999-12-31", "date", "date", "9999-12-31", decFVText("9999-12-31"), false, days(9999, 12, 31)},
		{"date 1969-12-31", "date", "date", "1969-12-31", decFVText("1969-12-31"), false, int32(-1)},
		{"date epoch", "date", "date", "1970-01-01", decFVText("1970-01-01"), false, int32(0)},
		{"date leap day", "date", "date", "2024-02-29", decFVText("2024-02-29"), false, days(2024, 2, 29)},
		{"date as time", "date", "date", time.Date(2000, 3, 1, 0, 0, 0, 0, time.UTC), decFVText("2000-03-01"), false, days(2000, 3, 1)},

		// DATETIME: the wall clock as if UTC.
		{"datetime", "datetime", "datetime", time.Date(2024, 2, 29, 12, 34, 56, 0, time.UTC), decFVText("2024-02-29 12:34:56"), false, micros(2024, 2, 29, 12, 34, 56, 0)},
		{"datetime before 1970", "datetime", "datetime", "1969-12-31 23:59:59", decFVText("1969-12-31 23:59:59"), false, int64(-1_000_000)},
		{"datetime 1000", "datetime", "datetime(1)", "1000-01-01 00:00:00.5", decFVText("1000-01-01 00:00:00.5"), false, micros(1000, 1, 1, 0, 0, 0, 500000)},
		{"datetime max", "datetime", "datetime(6)", time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), decFVText("9999-12-31 23:59:59.999999"), false, micros(9999, 12, 31, 23, 59, 59, 999999)},
		{"datetime fsp 1", "datetime", "datetime(1)", time.Date(2020, 1, 2, 3, 4, 5, 100000000, time.UTC), decFVText("2020-01-02 03:04:05.1"), false, micros(2020, 1, 2, 3, 4, 5, 100000)},
		{"datetime fsp 2", "datetime", "datetime(2)", time.Date(2020, 1, 2, 3, 4, 5, 120000000, time.UTC), decFVText("2020-01-02 03:04:05.12"), false, micros(2020, 1, 2, 3, 4, 5, 120000)},
		{"datetime fsp 3", "datetime", "datetime(3)", time.Date(2020, 1, 2, 3, 4, 5, 123000000, time.UTC), decFVText("2020-01-02 03:04:05.123"), false, micros(2020, 1, 2, 3, 4, 5, 123000)},
		{"datetime fsp 4", "datetime", "datetime(4)", time.Date(2020, 1, 2, 3, 4, 5, 123400000, time.UTC), decFVText("2020-01-02 03:04:05.1234"), false, micros(2020, 1, 2, 3, 4, 5, 123400)},
		{"datetime fsp 5", "datetime", "datetime(5)", time.Date(2020, 1, 2, 3, 4, 5, 123450000, time.UTC), decFVText("2020-01-02 03:04:05.12345"), false, micros(2020, 1, 2, 3, 4, 5, 123450)},
		{"datetime fsp 6", "datetime", "datetime(6)", time.Date(2020, 1, 2, 3, 4, 5, 123456000, time.UTC), decFVText("2020-01-02 03:04:05.123456"), false, micros(2020, 1, 2, 3, 4, 5, 123456)},
		{"datetime fsp 6 before 1970", "datetime", "datetime(6)", "1969-07-20 20:17:40.000001", decFVText("1969-07-20 20:17:40.000001"), false, micros(1969, 7, 20, 20, 17, 40, 1)},
		{"datetime in another location keeps wall clock", "datetime", "datetime", time.Date(2024, 1, 1, 8, 0, 0, 0, plus8), decFVText("2024-01-01 08:00:00"), false, micros(2024, 1, 1, 8, 0, 0, 0)},

		// TIMESTAMP: the instant; the session time zone is '+00:00'.
		{"timestamp 1s", "timestamp", "timestamp", time.Unix(1, 0), decFVText("1970-01-01 00:00:01"), false, int64(1_000_000)},
		{"timestamp in New York", "timestamp", "timestamp(6)", time.Unix(2147483647, 999999000).In(ny), decFVText("2038-01-19 03:14:07.999999"), false, int64(2147483647_999999)},
		{"timestamp in +08", "timestamp", "timestamp(3)", time.Date(2024, 7, 1, 8, 0, 0, 5_000_000, plus8), decFVText("2024-07-01 00:00:00.005"), false, micros(2024, 7, 1, 0, 0, 0, 5000)},

		// JSON (MySQL): canonical text on both paths.
		{"json object", "json", "json", `{"b":1,"a":[1,2]}`, decFVText(`{"a": [1.0, 2], "b": 1}`), false, `{"a":[1,2],"b":1}`},
		{"json bytes", "json", "json", []byte(`{"k":"v\u00e9\ud83d\ude00<>"}`), decFVText(`{"k": "vé😀<>"}`), false, `{"k":"vé😀<>"}`},
		{"json big double", "json", "json", `100000000000000000`, decFVText(`1e17`), false, `100000000000000000`},
		{"json small double", "json", "json", `1.5e-07`, decFVText(`1.5e-7`), false, `1.5e-7`},
		{"json large int", "json", "json", `18446744073709551615`, decFVText(`18446744073709551615`), false, `18446744073709551615`},
		{"json decimal", "json", "json", `[0.1,-2.50]`, decFVText(`[0.1, -2.5]`), false, `[0.1,-2.5]`},
		{"json null", "json", "json", `null`, decFVText(`null`), false, `null`},
		{"json empty document", "json", "json", []byte{}, decFVText(``), false, `null`},
		{"json string", "json", "json", `"x"`, decFVText(`"x"`), false, `"x"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := decTestCol(t, tc.dataType, tc.columnType)
			got, err := DecodeBinlog(c, tc.binlog)
			if err != nil {
				t.Fatalf("DecodeBinlog(%T %v): %v", tc.binlog, tc.binlog, err)
			}
			if !decEqual(got, tc.want) {
				t.Errorf("DecodeBinlog(%T %#v) = %T %#v, want %T %#v", tc.binlog, tc.binlog, got, got, tc.want, tc.want)
			}
			if tc.noSnapshot {
				return
			}
			got, err = DecodeSnapshot(c, tc.snapshot)
			if err != nil {
				t.Fatalf("DecodeSnapshot: %v", err)
			}
			if !decEqual(got, tc.want) {
				t.Errorf("DecodeSnapshot = %T %#v, want %T %#v", got, got, tc.want, tc.want)
			}
		})
	}
}

// decEqual compares canonical values; NaN equals NaN.
func decEqual(a, b any) bool {
	if fa, ok := a.(float32); ok {
		if fb, ok := b.(float32); ok && fa != fa && fb != fb {
			return true
		}
	}
	if fa, ok := a.(float64); ok {
		if fb, ok := b.(float64); ok && fa != fa && fb != fb {
			return true
		}
	}
	return reflect.DeepEqual(a, b)
}

func TestDecodeFloatSpecials(t *testing.T) {
	c32 := decTestCol(t, "float", "float")
	c64 := decTestCol(t, "double", "double")
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Copysign(0, -1), 0} {
		got, err := DecodeBinlog(c32, float32(f))
		if err != nil || !decEqual(got, float32(f)) {
			t.Errorf("float %v: got %v, %v", f, got, err)
		}
		got, err = DecodeBinlog(c64, f)
		if err != nil || !decEqual(got, f) {
			t.Errorf("double %v: got %v, %v", f, got, err)
		}
		got, err = DecodeSnapshot(c64, decFVFloat(f))
		if err != nil || !decEqual(got, f) {
			t.Errorf("snapshot double %v: got %v, %v", f, got, err)
		}
	}
	// -0 keeps its sign.
	got, _ := DecodeBinlog(c64, math.Copysign(0, -1))
	if !math.Signbit(got.(float64)) {
		t.Error("-0 lost its sign")
	}
}

func TestDecodeNull(t *testing.T) {
	for _, dt := range [][2]string{{"int", "int"}, {"varchar", "varchar(3)"}, {"date", "date"}, {"bigint", "bigint unsigned"}, {"json", "json"}} {
		c := decTestCol(t, dt[0], dt[1])
		if v, err := DecodeBinlog(c, nil); v != nil || err != nil {
			t.Errorf("%s binlog NULL: %v, %v", dt[1], v, err)
		}
		if v, err := DecodeSnapshot(c, decFVNull); v != nil || err != nil {
			t.Errorf("%s snapshot NULL: %v, %v", dt[1], v, err)
		}
	}
}

func TestDecodeZeroDates(t *testing.T) {
	cases := []struct {
		dataType, columnType string
		binlog               any
		snapshot             string
		want                 string
	}{
		{"date", "date", "0000-00-00", "0000-00-00", "0000-00-00"},
		{"date", "date", "2024-00-10", "2024-00-10", "2024-00-10"},
		{"date", "date", "2024-05-00", "2024-05-00", "2024-05-00"},
		{"datetime", "datetime", "0000-00-00 00:00:00", "0000-00-00 00:00:00", "0000-00-00 00:00:00"},
		{"datetime", "datetime(6)", "2000-00-10 00:00:00.000000", "2000-00-10 00:00:00.000000", "2000-00-10 00:00:00.000000"},
		{"timestamp", "timestamp", "0000-00-00 00:00:00", "0000-00-00 00:00:00", "0000-00-00 00:00:00"},
		{"timestamp", "timestamp(6)", "0000-00-00 00:00:00.000000", "0000-00-00 00:00:00.000000", "0000-00-00 00:00:00.000000"},
	}
	for _, tc := range cases {
		c := decTestCol(t, tc.dataType, tc.columnType)
		for path, call := range map[string]func() (any, error){
			"binlog":   func() (any, error) { return DecodeBinlog(c, tc.binlog) },
			"snapshot": func() (any, error) { return DecodeSnapshot(c, decFVText(tc.snapshot)) },
		} {
			v, err := call()
			var ve *ValueError
			if !errors.As(err, &ve) || ve.Reason != ReasonZeroDate {
				t.Errorf("%s %s %q: got %v, %v; want a zero-date ValueError", path, tc.columnType, tc.want, v, err)
				continue
			}
			want := `zero date "` + tc.want + `" in column c cannot be stored in Iceberg`
			if err.Error() != want {
				t.Errorf("%s: message %q, want %q", path, err.Error(), want)
			}
		}
	}
	// With the table known (row decoders) the message names it.
	s := &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "t"}, Columns: []cdcsync.Column{*decTestCol(t, "date", "date")}}
	_, err := DecodeBinlogRow(s, []any{"0000-00-00"})
	if err == nil || err.Error() != `zero date "0000-00-00" in shop.t.c cannot be stored in Iceberg` {
		t.Errorf("DecodeBinlogRow: %v", err)
	}
	_, err = DecodeSnapshotRow(s, []mysql.FieldValue{decFVText("0000-00-00")})
	if err == nil || err.Error() != `zero date "0000-00-00" in shop.t.c cannot be stored in Iceberg` {
		t.Errorf("DecodeSnapshotRow: %v", err)
	}
}

func TestDecodeWrongTypes(t *testing.T) {
	cases := []struct {
		dataType, columnType string
		binlog               any
		snapshot             mysql.FieldValue
	}{
		{"int", "int", "12", decFVFloat(1.5)},
		{"int", "int", 1.5, decFVText("x")},
		{"bigint", "bigint unsigned", 1.5, decFVFloat(1)},
		{"decimal", "decimal(10,2)", 1.5, decFVFloat(1.5)},
		{"decimal", "decimal(10,2)", "1.234", decFVText("1.234")},  // more digits than the scale
		{"decimal", "decimal(4,2)", "123.00", decFVText("123.00")}, // more digits than the precision
		{"decimal", "decimal(10,2)", "abc", decFVText("1,5")},
		{"float", "float", "1.5", decFVText("x")},
		{"varchar", "varchar(3)", 12, decFVSigned(12)},
		{"blob", "blob", 12, decFVSigned(1)},
		{"date", "date", 12, decFVSigned(20240101)},
		{"date", "date", "2024-02-30", decFVText("2024/01/01")},
		{"datetime", "datetime", 1.5, decFVText("2024-01-01 25:00:00")},
		{"datetime", "datetime(6)", "2024-01-01 00:00:00.1234567", decFVText("2024-01-01 00:00:00.")},
		{"timestamp", "timestamp", "2024-01-01 00:00:00", decFVSigned(1)}, // non-zero TIMESTAMP text from the binlog needs ParseTime
		{"json", "json", "{", decFVText("{")},
		{"json", "json", 12, decFVSigned(12)},
	}
	for _, tc := range cases {
		c := decTestCol(t, tc.dataType, tc.columnType)
		if v, err := DecodeBinlog(c, tc.binlog); err == nil {
			t.Errorf("DecodeBinlog(%s, %T %v) = %v, want an error", tc.columnType, tc.binlog, tc.binlog, v)
		} else if !strings.Contains(err.Error(), "column c") {
			t.Errorf("DecodeBinlog error %q does not name the column", err)
		}
		if v, err := DecodeSnapshot(c, tc.snapshot); err == nil {
			t.Errorf("DecodeSnapshot(%s, %v) = %v, want an error", tc.columnType, tc.snapshot.Value(), v)
		}
	}
	// Out of range for the kind.
	c := decTestCol(t, "int", "int(11)")
	if _, err := DecodeBinlog(c, int64(math.MaxInt32)+1); err == nil {
		t.Error("int64 beyond int32 accepted for INT")
	}
	c = decTestCol(t, "bigint", "bigint(20)")
	if _, err := DecodeBinlog(c, uint64(math.MaxUint64)); err == nil {
		t.Error("uint64 max accepted for signed BIGINT")
	}
	// Unmapped column.
	e := &cdcsync.Column{Name: "e", DataType: "enum", ColumnType: "enum('a','b')"}
	if _, err := DecodeBinlog(e, int64(1)); err == nil {
		t.Error("unmapped column decoded")
	}
	if _, err := DecodeSnapshot(e, decFVText("a")); err == nil {
		t.Error("unmapped column decoded")
	}
	// Partial JSON.
	j := decTestCol(t, "json", "json")
	_, err := DecodeBinlog(j, &replication.JsonDiff{})
	var ve *ValueError
	if !errors.As(err, &ve) || ve.Reason != ReasonPartialJSON || !strings.Contains(err.Error(), "binlog_row_value_options") {
		t.Errorf("partial JSON: %v", err)
	}
}

// The decoders must not keep go-mysql's buffers, which it reuses.
func TestDecodeCopies(t *testing.T) {
	c := decTestCol(t, "varbinary", "varbinary(10)")
	buf := []byte("abc")
	got, _ := DecodeBinlog(c, buf)
	buf[0] = 'X'
	if string(got.([]byte)) != "abc" {
		t.Error("DecodeBinlog kept the caller's []byte")
	}
	fv := decFVText("abc")
	got, _ = DecodeSnapshot(c, fv)
	fv.AsString()[0] = 'X'
	if string(got.([]byte)) != "abc" {
		t.Error("DecodeSnapshot kept the FieldValue's bytes")
	}
	s := decTestCol(t, "text", "text")
	buf = []byte("abc")
	got, _ = DecodeBinlog(s, buf)
	buf[0] = 'X'
	if got.(string) != "abc" {
		t.Error("DecodeBinlog kept the []byte of a TEXT")
	}
}

func TestDecodeRowLengthMismatch(t *testing.T) {
	s := &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "d", Table: "t"}, Columns: []cdcsync.Column{*decTestCol(t, "int", "int")}}
	if _, err := DecodeBinlogRow(s, []any{int32(1), int32(2)}); err == nil || !strings.Contains(err.Error(), "d.t") {
		t.Errorf("DecodeBinlogRow: %v", err)
	}
	if _, err := DecodeSnapshotRow(s, nil); err == nil {
		t.Error("DecodeSnapshotRow accepted a short row")
	}
	row, err := DecodeBinlogRow(s, []any{int32(7)})
	if err != nil || !reflect.DeepEqual(row, cdcsync.Row{int32(7)}) {
		t.Errorf("DecodeBinlogRow = %v, %v", row, err)
	}
}

func TestSelectList(t *testing.T) {
	s := &cdcsync.TableSchema{Columns: []cdcsync.Column{
		*decTestCol(t, "int", "int"),
		{Name: "f`x", DataType: "float", ColumnType: "float", Kind: cdcsync.KindFloat32},
		{Name: "d", DataType: "double", ColumnType: "double", Kind: cdcsync.KindFloat64},
	}}
	if got, want := SelectList(s), "`c`, (`f``x` + 0e0), `d`"; got != want {
		t.Errorf("SelectList = %s, want %s", got, want)
	}
}

func TestDecJSONNumber(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "0.0": "0", "1": "1", "1.0": "1", "-1.50": "-1.5", "1e17": "100000000000000000",
		"1e20": "100000000000000000000", "1e21": "1e21", "123456789012345678901234": "1.23456789012345678901234e23",
		"0.000001": "0.000001", "1e-7": "1e-7", "-2.5e-10": "-2.5e-10", "0.1": "0.1",
		"0.30000000000000004": "0.30000000000000004", "1.7976931348623157e308": "1.7976931348623157e308",
		"9007199254740993": "9007199254740993", "12.5e1": "125",
	} {
		if got := decJSONNumber(in); got != want {
			t.Errorf("decJSONNumber(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestDecNormDecimal(t *testing.T) {
	for _, tc := range []struct {
		in    string
		scale int
		want  string
		ok    bool
	}{
		{"1", 2, "1.00", true}, {"-0.00", 2, "0.00", true}, {"+007.5", 1, "7.5", true}, {".5", 2, "0.50", true},
		{"1.230", 2, "1.23", true}, {"1.235", 2, "", false}, {"1.5e2", 0, "150", true}, {"-1e-2", 2, "-0.01", true},
		{"", 0, "", false}, {"1.2.3", 1, "", false}, {"12", 0, "12", true},
	} {
		got, ok := decNormDecimal(tc.in, tc.scale)
		if got != tc.want || ok != tc.ok {
			t.Errorf("decNormDecimal(%q, %d) = %q, %v; want %q, %v", tc.in, tc.scale, got, ok, tc.want, tc.ok)
		}
	}
}
