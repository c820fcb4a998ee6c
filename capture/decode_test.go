package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/shopspring/decimal"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

// decTestCol builds a mapped column named "c". A column type may end in
// " character set <name>" (utf8mb4 otherwise).
func decTestCol(t *testing.T, dataType, columnType string) *cdcsync.Column {
	t.Helper()
	ct, cs := schemaSplitCharset(columnType)
	if cs == "" {
		cs = "utf8mb4"
	}
	c := &cdcsync.Column{Name: "c", DataType: dataType, ColumnType: ct, Nullable: true}
	if err := MapColumn(c, cs); err != nil {
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

		// YEAR.
		{"year max", "year", "year(4)", 2155, decFVUnsigned(2155), false, int32(2155)},
		{"year min", "year", "year(4)", 1901, decFVUnsigned(1901), false, int32(1901)},
		{"year zero", "year", "year(4)", 0, decFVUnsigned(0), false, int32(0)},

		// BIT: the bytes SELECT returns are big-endian.
		{"bit(1) true", "bit", "bit(1)", int64(1), decFVText("\x01"), false, true},
		{"bit(1) false", "bit", "bit(1)", int64(0), decFVText("\x00"), false, false},
		{"bit(8)", "bit", "bit(8)", int64(0xaa), decFVText("\xaa"), false, int64(0xaa)},
		{"bit(12)", "bit", "bit(12)", int64(0xfff), decFVText("\x0f\xff"), false, int64(0xfff)},
		{"bit(63) max", "bit", "bit(63)", int64(math.MaxInt64), decFVText("\x7f\xff\xff\xff\xff\xff\xff\xff"), false, int64(math.MaxInt64)},
		{"bit(64) max", "bit", "bit(64)", int64(-1), decFVText("\xff\xff\xff\xff\xff\xff\xff\xff"), false, "18446744073709551615"},
		{"bit(64) top bit", "bit", "bit(64)", int64(math.MinInt64), decFVText("\x80\x00\x00\x00\x00\x00\x00\x00"), false, "9223372036854775808"},
		{"bit(64) one", "bit", "bit(64)", int64(1), decFVText("\x00\x00\x00\x00\x00\x00\x00\x01"), false, "1"},

		// TIME: signed microseconds, beyond 24 hours.
		{"time min", "time", "time", "-838:59:59", decFVText("-838:59:59"), false, int64(-3020399_000000)},
		{"time max", "time", "time(6)", "838:59:59", decFVText("838:59:59.000000"), false, int64(3020399_000000)},
		{"time zero", "time", "time", "00:00:00", decFVText("00:00:00"), false, int64(0)},
		{"time negative fraction", "time", "time(3)", "-00:00:00.500", decFVText("-00:00:00.500"), false, int64(-500000)},
		{"time 100 hours", "time", "time(3)", "100:00:00.125", decFVText("100:00:00.125"), false, int64(360000_125000)},
		{"time fsp 6", "time", "time(6)", "-01:02:03.000001", decFVText("-01:02:03.000001"), false, int64(-3723_000001)},
		{"time fsp 1", "time", "time(1)", "23:59:59.9", decFVText("23:59:59.9"), false, int64(86399_900000)},
		{"time old format negative", "time", "time", "1677:72:15", mysql.FieldValue{}, true, int64(-1_000000)},
		{"time old format -838:59:59", "time", "time", "839:12:57", mysql.FieldValue{}, true, int64(-3020399_000000)},

		// ENUM and SET: the binlog has numbers, SELECT the labels.
		{"enum", "enum", "enum('a','b''c','d\\\\e','é')", int64(4), decFVText("é"), false, "é"},
		{"enum quote", "enum", "enum('a','b''c','d\\\\e','é')", int64(2), decFVText("b'c"), false, "b'c"},
		{"enum backslash", "enum", "enum('a','b''c','d\\\\e','é')", int64(3), decFVText("d\\e"), false, "d\\e"},
		{"enum empty (invalid value)", "enum", "enum('a','b')", int64(0), decFVText(""), false, ""},
		{"set", "set", "set('x','y','z')", int64(5), decFVText("x,z"), false, "x,z"},
		{"set full", "set", "set('x','y','z')", int64(7), decFVText("x,y,z"), false, "x,y,z"},
		{"set empty", "set", "set('x','y','z')", int64(0), decFVText(""), false, ""},
		{"set 64", "set", "set(" + decSet64 + ")", int64(-1), decFVText(strings.ReplaceAll(strings.ReplaceAll(decSet64, "'", ""), ",", ",")), false, strings.ReplaceAll(decSet64, "'", "")},

		// MariaDB INET4, INET6, UUID.
		{"inet4", "inet4", "inet4", "\n\x00\x00\x01", decFVText("10.0.0.1"), false, "10.0.0.1"},
		{"inet4 zero", "inet4", "inet4", "", decFVText("0.0.0.0"), false, "0.0.0.0"},
		{"inet4 max", "inet4", "inet4", "\xff\xff\xff\xff", decFVText("255.255.255.255"), false, "255.255.255.255"},
		{"inet6 mapped", "inet6", "inet6", "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x01\x02\x03\x04", decFVText("::ffff:1.2.3.4"), false, "::ffff:1.2.3.4"},
		{"inet6 zero", "inet6", "inet6", "", decFVText("::"), false, "::"},
		{"inet6 loopback", "inet6", "inet6", "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01", decFVText("::1"), false, "::1"},
		{"inet6 trailing zeros", "inet6", "inet6", "\x20\x01\x0d\xb8", decFVText("2001:db8::"), false, "2001:db8::"},
		{"inet6 compatible", "inet6", "inet6", "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x02\x03\x04", decFVText("::1.2.3.4"), false, "::1.2.3.4"},
		{"inet6 full", "inet6", "inet6", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", decFVText("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), false, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
		{"inet6 single zero word", "inet6", "inet6", "\x20\x01\x0d\xb8\x00\x00\x00\x01\x00\x01\x00\x01\x00\x01\x00\x01", decFVText("2001:db8::1:1:1:1:1"), false, "2001:db8::1:1:1:1:1"},
		{"inet6 first longest gap", "inet6", "inet6", "\x00\x01\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x03\x00\x04", decFVText("1::2:0:0:3:4"), false, "1::2:0:0:3:4"},
		{"uuid", "uuid", "uuid", "\x12>Eg\xe8\x9b\x12\xd3\xa4VBfUD", decFVText("123e4567-e89b-12d3-a456-426655440000"), false, "123e4567-e89b-12d3-a456-426655440000"},
		{"uuid zero", "uuid", "uuid", "", decFVText("00000000-0000-0000-0000-000000000000"), false, "00000000-0000-0000-0000-000000000000"},

		// Spatial: the SRID prefix goes, WKB stays.
		{"point", "point", "point", []byte("\xe6\x10\x00\x00\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf8?\x00\x00\x00\x00\x00\x00\x04\xc0"),
			decFVText("\xe6\x10\x00\x00\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf8?\x00\x00\x00\x00\x00\x00\x04\xc0"), false,
			[]byte("\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf8?\x00\x00\x00\x00\x00\x00\x04\xc0")},
		{"geometry", "geometry", "geometry", []byte("\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x00\x00\x00"), decFVText("\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x00\x00\x00"), false, []byte("\x01\x02\x00\x00\x00\x00\x00\x00\x00")},

		// CHAR: trailing spaces go on both paths.
		{"char trailing spaces", "char", "char(6)", "ab  ", decFVText("ab"), false, "ab"},
		{"char leading spaces kept", "char", "char(6)", "  ab", decFVText("  ab"), false, "  ab"},

		// Character sets: the binlog has the column's bytes, SELECT utf8mb4.
		{"latin1", "varchar", "varchar(10) character set latin1", "\xe9\x80x", decFVText("é€x"), false, "é€x"},
		{"latin1 C1", "varchar", "varchar(10) character set latin1", "\x81\x8d\x8f\x90\x9d", decFVText("\u0081\u008d\u008f\u0090\u009d"), false, "\u0081\u008d\u008f\u0090\u009d"},
		{"latin1 char", "char", "char(4) character set latin1", "\xe9  ", decFVText("é"), false, "é"},
		{"latin1 text", "text", "text character set latin1", []byte("caf\xe9"), decFVText("café"), false, "café"},
		{"gbk", "varchar", "varchar(10) character set gbk", "\xd6\xd0\xce\xc4abc", decFVText("中文abc"), false, "中文abc"},
		{"gbk unmapped", "varchar", "varchar(10) character set gbk", "\xa2\xe3", decFVText("?"), false, "?"},
		{"gb2312", "varchar", "varchar(10) character set gb2312", "\xd6\xd0\xa1\xa4", decFVText("中・"), false, "中・"},
		{"euckr", "varchar", "varchar(10) character set euckr", "\xc7\xd1", decFVText("한"), false, "한"},
		{"cp1251", "varchar", "varchar(10) character set cp1251", "\xcf\xf0\xe8", decFVText("При"), false, "При"},
		{"utf16", "varchar", "varchar(10) character set utf16", "\x00\xe9\xd8\x34\xdd\x1e", decFVText("é𝄞"), false, "é𝄞"},
		{"utf16le", "varchar", "varchar(10) character set utf16le", "\xe9\x00\x34\xd8\x1e\xdd", decFVText("é𝄞"), false, "é𝄞"},
		{"utf32", "varchar", "varchar(10) character set utf32", "\x00\x00\x00\xe9\x00\x01\xd1\x1e", decFVText("é𝄞"), false, "é𝄞"},
		{"ucs2", "text", "text character set ucs2", []byte("\x00\xe9\x4e\x2d"), decFVText("é中"), false, "é中"},
		{"ucs2 char", "char", "char(3) character set ucs2", "\x00a\x00 \x00 ", decFVText("a"), false, "a"},
		{"ucs2 lone surrogates", "text", "text character set ucs2", []byte("\xd8\x00\xdf\xff\x00a"), decFVText("\xed\xa0\x80\xed\xbf\xbfa"), false, "\ufffd\ufffda"},
		{"utf32 lone surrogate", "varchar", "varchar(3) character set utf32", "\x00\x00\xdb\xff", decFVText("\xed\xaf\xbf"), false, "\ufffd"},
		{"ucs2 ed byte kept", "varchar", "varchar(3) character set ucs2", "\xd5\x5c", decFVText("\xed\x95\x9c"), false, "한"},

		// TIMESTAMP as text from the binlog (ParseTime off, UTC).
		{"timestamp text", "timestamp", "timestamp(6)", "2038-01-19 03:14:07.999999", decFVText("2038-01-19 03:14:07.999999"), false, int64(2147483647_999999)},
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

// decSet64 is a SET with 64 labels, "a0" to "a63".
var decSet64 = func() string {
	var b strings.Builder
	for i := range 64 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "'a%d'", i)
	}
	return b.String()
}()

func TestDecodeZeroDates(t *testing.T) {
	cases := []struct {
		dataType, columnType string
		binlog               any
		snapshot             string
		want                 string
		what, key            string
	}{
		{"date", "date", "0000-00-00", "0000-00-00", "0000-00-00", "zero date", "zero_date"},
		{"date", "date", "2024-00-10", "2024-00-10", "2024-00-10", "zero date", "zero_date"},
		{"date", "date", "2024-05-00", "2024-05-00", "2024-05-00", "zero date", "zero_date"},
		{"date", "date", "2024-02-30", "2024-02-30", "2024-02-30", "invalid date", "zero_date"},
		{"datetime", "datetime", "0000-00-00 00:00:00", "0000-00-00 00:00:00", "0000-00-00 00:00:00", "zero date", "zero_datetime"},
		{"datetime", "datetime(6)", "2000-00-10 00:00:00.000000", "2000-00-10 00:00:00.000000", "2000-00-10 00:00:00.000000", "zero date", "zero_datetime"},
		{"datetime", "datetime", "2023-04-31 10:00:00", "2023-04-31 10:00:00", "2023-04-31 10:00:00", "invalid date", "zero_datetime"},
		{"timestamp", "timestamp", "0000-00-00 00:00:00", "0000-00-00 00:00:00", "0000-00-00 00:00:00", "zero date", "zero_timestamp"},
		{"timestamp", "timestamp(6)", "0000-00-00 00:00:00.000000", "0000-00-00 00:00:00.000000", "0000-00-00 00:00:00.000000", "zero date", "zero_timestamp"},
	}
	for _, tc := range cases {
		c := decTestCol(t, tc.dataType, tc.columnType)
		for path, call := range map[string]func() (any, error){
			"binlog":   func() (any, error) { return DecodeBinlog(c, tc.binlog) },
			"snapshot": func() (any, error) { return DecodeSnapshot(c, decFVText(tc.snapshot)) },
		} {
			v, err := call()
			var ve *ValueError
			if !errors.As(err, &ve) || (ve.Reason != ReasonZeroDate && ve.Reason != ReasonInvalidDate) {
				t.Errorf("%s %s %q: got %v, %v; want a zero-date ValueError", path, tc.columnType, tc.want, v, err)
				continue
			}
			want := tc.what + ` "` + tc.want + `" in column c cannot be stored in Iceberg; to mirror such values, set types.` + tc.key + ` to to_null or to_epoch (see docs/types.md)`
			if err.Error() != want {
				t.Errorf("%s: message %q, want %q", path, err.Error(), want)
			}
		}
	}
	// With the table known (row decoders) the message names it.
	s := &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "t"}, Columns: []cdcsync.Column{*decTestCol(t, "date", "date")}}
	const msg = `zero date "0000-00-00" in shop.t.c cannot be stored in Iceberg; to mirror such values, set types.zero_date to to_null or to_epoch (see docs/types.md)`
	_, err := DecodeBinlogRow(s, []any{"0000-00-00"})
	if err == nil || err.Error() != msg {
		t.Errorf("DecodeBinlogRow: %v", err)
	}
	_, err = DecodeSnapshotRow(s, []mysql.FieldValue{decFVText("0000-00-00")})
	if err == nil || err.Error() != msg {
		t.Errorf("DecodeSnapshotRow: %v", err)
	}
	// Not dates at all: no policy applies.
	for _, text := range []string{"2024-13-01", "2024-01-32"} {
		_, err := DecodeSnapshot(decTestCol(t, "date", "date"), decFVText(text))
		var ve *ValueError
		if !errors.As(err, &ve) || ve.Reason != ReasonBadValue {
			t.Errorf("%s: %v, want a bad-value error", text, err)
		}
	}
}

// TestValuePolicy applies the types: policies to zero dates on both paths.
func TestValuePolicy(t *testing.T) {
	key := &cdcsync.Column{Name: "id", DataType: "int", ColumnType: "int(11)"}
	d := &cdcsync.Column{Name: "d", DataType: "date", ColumnType: "date", Nullable: true}
	dn := &cdcsync.Column{Name: "dn", DataType: "date", ColumnType: "date"}
	dt := &cdcsync.Column{Name: "dt", DataType: "datetime", ColumnType: "datetime(3)", Nullable: true}
	ts := &cdcsync.Column{Name: "ts", DataType: "timestamp", ColumnType: "timestamp", Nullable: true}
	for _, c := range []*cdcsync.Column{key, d, dn, dt, ts} {
		nullable := c.Nullable
		if err := MapColumn(c, ""); err != nil {
			t.Fatal(err)
		}
		c.Nullable = nullable
	}
	s := &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "t"}, Columns: []cdcsync.Column{*key, *d, *dn, *dt, *ts}, PrimaryKey: []int{0}}
	binRow := func(id int32) []any {
		return []any{id, "0000-00-00", "2024-02-30", "0000-00-00 00:00:00.000", "0000-00-00 00:00:00"}
	}
	snapRow := func(id int64) []mysql.FieldValue {
		return []mysql.FieldValue{decFVSigned(id), decFVText("0000-00-00"), decFVText("2024-02-30"), decFVText("0000-00-00 00:00:00.000"), decFVText("0000-00-00 00:00:00")}
	}
	pos := binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: "0-1-42"}

	// The default is an error, with or without a ValuePolicy.
	for _, p := range []*ValuePolicy{nil, NewValuePolicy(config.Types{}, nil, nil)} {
		if _, err := p.BinlogRow(s, binRow(1), pos); err == nil || !strings.Contains(err.Error(), "types.zero_date") {
			t.Errorf("default policy: %v", err)
		}
	}

	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	counts := map[string]int{}
	p := NewValuePolicy(config.Types{ZeroDate: config.TypeToNull, ZeroDatetime: config.TypeToEpoch, ZeroTimestamp: config.TypeToNull}, log,
		func(table, column, policy string) { counts[table+"."+column+" "+policy]++ })
	want := cdcsync.Row{int32(1), nil, int32(0), int64(0), nil}
	for i := range 3 {
		got, err := p.BinlogRow(s, binRow(1), pos)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("binlog %d: %#v, %v; want %#v", i, got, err, want)
		}
		got, err = p.SnapshotRow(s, snapRow(1), pos)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("snapshot %d: %#v, %v; want %#v", i, got, err, want)
		}
	}
	wantCounts := map[string]int{"shop.t.d to_null": 6, "shop.t.dn to_epoch": 6, "shop.t.dt to_epoch": 6, "shop.t.ts to_null": 6}
	if !reflect.DeepEqual(counts, wantCounts) {
		t.Errorf("counts %v, want %v", counts, wantCounts)
	}
	logs := logBuf.String()
	if n := strings.Count(logs, "level=WARN"); n != 4 {
		t.Errorf("%d log lines, want one per column:\n%s", n, logs)
	}
	for _, w := range []string{"table=shop.t", "column=dn", "value=2024-02-30", "policy=to_epoch", "position=mariadb:0-1-42", "read_by=binlog"} {
		if !strings.Contains(logs, w) {
			t.Errorf("log lacks %q:\n%s", w, logs)
		}
	}
	// Other errors are not a policy's business.
	bad := binRow(1)
	bad[3] = "2024-13-01 00:00:00"
	if _, err := p.BinlogRow(s, bad, pos); err == nil {
		t.Error("a month 13 was accepted")
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
		{"timestamp", "timestamp", 1.5, decFVSigned(1)},
		{"time", "time", "12:60:00", decFVText("12:00")},
		{"time", "time(6)", "12:00:00.1234567", decFVText("-1677:72:15")},
		{"bit", "bit(1)", int64(2), decFVText("\x02")},
		{"bit", "bit(4)", int64(16), decFVText("\x01\x02\x03\x04\x05\x06\x07\x08\x09")},
		{"enum", "enum('a','b')", int64(3), decFVSigned(1)},
		{"set", "set('a','b')", int64(4), decFVFloat(1)},
		{"inet4", "inet4", "\x01\x02\x03\x04\x05", decFVSigned(1)},
		{"uuid", "uuid", 12, decFVSigned(1)},
		{"point", "point", []byte{1, 2}, decFVText("\x01")},
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
	e := &cdcsync.Column{Name: "e", DataType: "vector", ColumnType: "vector(3)"}
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
