package capture

import (
	"errors"
	"strings"
	"testing"

	"github.com/cdcsync/cdcsync"
)

func TestMapColumn(t *testing.T) {
	cases := []struct {
		dataType, columnType, charset string
		kind                          cdcsync.Kind
		unsigned                      bool
		precision, scale              int
	}{
		{"tinyint", "tinyint(4)", "", cdcsync.KindInt32, false, 0, 0},
		{"tinyint", "tinyint(1)", "", cdcsync.KindInt32, false, 0, 0},
		{"tinyint", "tinyint(3) unsigned", "", cdcsync.KindInt32, true, 0, 0},
		{"smallint", "smallint(5) unsigned zerofill", "", cdcsync.KindInt32, true, 0, 0},
		{"mediumint", "mediumint unsigned", "", cdcsync.KindInt32, true, 0, 0},
		{"int", "int(11)", "", cdcsync.KindInt32, false, 0, 0},
		{"int", "int unsigned", "", cdcsync.KindInt64, true, 0, 0},
		{"bigint", "bigint(20)", "", cdcsync.KindInt64, false, 0, 0},
		{"bigint", "bigint(20) unsigned", "", cdcsync.KindDecimal, true, 20, 0},
		{"decimal", "decimal(10,2)", "", cdcsync.KindDecimal, false, 10, 2},
		{"decimal", "decimal(38,38)", "", cdcsync.KindDecimal, false, 38, 38},
		{"decimal", "decimal(5,0) unsigned", "", cdcsync.KindDecimal, true, 5, 0},
		{"decimal", "decimal(39,2)", "", cdcsync.KindString, false, 39, 2},
		{"decimal", "decimal(65,30)", "", cdcsync.KindString, false, 65, 30},
		{"float", "float", "", cdcsync.KindFloat32, false, 0, 0},
		{"float", "float(7,3)", "", cdcsync.KindFloat32, false, 0, 0},
		{"double", "double", "", cdcsync.KindFloat64, false, 0, 0},
		{"double", "double(10,2) unsigned", "", cdcsync.KindFloat64, true, 0, 0},
		{"char", "char(3)", "utf8mb4", cdcsync.KindString, false, 0, 0},
		{"varchar", "varchar(255)", "utf8mb3", cdcsync.KindString, false, 0, 0},
		{"varchar", "varchar(255)", "utf8", cdcsync.KindString, false, 0, 0},
		{"text", "text", "ascii", cdcsync.KindString, false, 0, 0},
		{"tinytext", "tinytext", "utf8mb4", cdcsync.KindString, false, 0, 0},
		{"mediumtext", "mediumtext", "UTF8MB4", cdcsync.KindString, false, 0, 0},
		{"longtext", "longtext", "utf8mb4", cdcsync.KindString, false, 0, 0}, // MariaDB JSON
		{"binary", "binary(16)", "", cdcsync.KindBinary, false, 0, 0},
		{"varbinary", "varbinary(16)", "", cdcsync.KindBinary, false, 0, 0},
		{"tinyblob", "tinyblob", "", cdcsync.KindBinary, false, 0, 0},
		{"blob", "blob", "", cdcsync.KindBinary, false, 0, 0},
		{"mediumblob", "mediumblob", "", cdcsync.KindBinary, false, 0, 0},
		{"longblob", "longblob", "", cdcsync.KindBinary, false, 0, 0},
		{"json", "json", "", cdcsync.KindString, false, 0, 0},
		{"date", "date", "", cdcsync.KindDate, false, 0, 0},
		{"datetime", "datetime(6)", "", cdcsync.KindTimestamp, false, 0, 0},
		{"timestamp", "timestamp(3)", "", cdcsync.KindTimestampTZ, false, 0, 0},
	}
	for _, tc := range cases {
		c := cdcsync.Column{Name: "c", DataType: tc.dataType, ColumnType: tc.columnType}
		if err := MapColumn(&c, tc.charset); err != nil {
			t.Errorf("MapColumn(%s %s): %v", tc.columnType, tc.charset, err)
			continue
		}
		if c.Kind != tc.kind || c.Unsigned != tc.unsigned || c.Precision != tc.precision || c.Scale != tc.scale {
			t.Errorf("MapColumn(%s) = kind %s unsigned %v (%d,%d); want %s %v (%d,%d)", tc.columnType,
				c.Kind, c.Unsigned, c.Precision, c.Scale, tc.kind, tc.unsigned, tc.precision, tc.scale)
		}
	}
}

func TestMapColumnUnsupported(t *testing.T) {
	for _, tc := range []struct{ dataType, columnType, charset string }{
		{"enum", "enum('a','b')", "utf8mb4"},
		{"set", "set('a','b')", "utf8mb4"},
		{"bit", "bit(3)", ""},
		{"year", "year(4)", ""},
		{"time", "time(2)", ""},
		{"geometry", "geometry", ""},
		{"point", "point", ""},
		{"inet4", "inet4", ""},
		{"inet6", "inet6", ""},
		{"uuid", "uuid", ""},
		{"vector", "vector(3)", ""},
	} {
		c := cdcsync.Column{Name: "status", DataType: tc.dataType, ColumnType: tc.columnType, Kind: cdcsync.KindInt32}
		err := MapColumn(&c, tc.charset)
		var ue *UnsupportedColumnError
		if !errors.As(err, &ue) {
			t.Errorf("MapColumn(%s) = %v, want an UnsupportedColumnError", tc.columnType, err)
			continue
		}
		if c.Kind != cdcsync.KindInvalid {
			t.Errorf("MapColumn(%s) left kind %s", tc.columnType, c.Kind)
		}
		want := "column status has type " + tc.columnType + ", which cdcsync does not map yet"
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	// The message names the table once it is known.
	e := &UnsupportedColumnError{Table: cdcsync.TableID{Database: "shop", Table: "orders"}, Column: "status", ColumnType: "enum('a','b')"}
	want := `column shop.orders.status has type enum('a','b'), which cdcsync does not map yet; exclude the table with "!shop.orders" in source.include or drop the column`
	if e.Error() != want {
		t.Errorf("got  %s\nwant %s", e.Error(), want)
	}
	// Character sets other than UTF-8 and ASCII.
	for _, cs := range []string{"latin1", "gbk", "utf16", ""} {
		c := cdcsync.Column{Name: "name", DataType: "varchar", ColumnType: "varchar(10)"}
		err := MapColumn(&c, cs)
		var ue *UnsupportedColumnError
		if !errors.As(err, &ue) || c.Kind != cdcsync.KindInvalid {
			t.Errorf("charset %q: %v, kind %s", cs, err, c.Kind)
			continue
		}
		if cs != "" && !strings.Contains(err.Error(), "character set "+cs) {
			t.Errorf("charset %q: message %q does not name it", cs, err)
		}
	}
}

func TestSchemaHelpers(t *testing.T) {
	if p, s, ok := schemaPrecScale("decimal(12,4) unsigned"); !ok || p != 12 || s != 4 {
		t.Errorf("schemaPrecScale = %d %d %v", p, s, ok)
	}
	if p, s, ok := schemaPrecScale("decimal(7)"); !ok || p != 7 || s != 0 {
		t.Errorf("schemaPrecScale = %d %d %v", p, s, ok)
	}
	if _, _, ok := schemaPrecScale("decimal(2,5)"); ok {
		t.Error("scale above precision accepted")
	}
	if n := schemaFixedLength("binary(16)"); n != 16 {
		t.Errorf("schemaFixedLength = %d", n)
	}
	if n := schemaFixedLength("blob"); n != 0 {
		t.Errorf("schemaFixedLength = %d", n)
	}
	if q := QuoteIdent("a`b"); q != "`a``b`" {
		t.Errorf("QuoteIdent = %s", q)
	}
}
