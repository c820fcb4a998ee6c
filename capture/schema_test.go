package capture

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

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
		{"year", "year(4)", "", cdcsync.KindInt32, true, 0, 0},
		{"bit", "bit(1)", "", cdcsync.KindBool, false, 0, 0},
		{"bit", "bit", "", cdcsync.KindBool, false, 0, 0},
		{"bit", "bit(2)", "", cdcsync.KindInt64, false, 0, 0},
		{"bit", "bit(63)", "", cdcsync.KindInt64, false, 0, 0},
		{"bit", "bit(64)", "", cdcsync.KindDecimal, false, 20, 0},
		{"time", "time", "", cdcsync.KindTime, false, 0, 0},
		{"time", "time(6)", "", cdcsync.KindTime, false, 0, 0},
		{"enum", "enum('a','b')", "utf8mb4", cdcsync.KindString, false, 0, 0},
		{"enum", "enum('?','é')", "latin1", cdcsync.KindString, false, 0, 0},
		{"set", "set('a','b')", "big5", cdcsync.KindString, false, 0, 0},
		{"geometry", "geometry", "", cdcsync.KindBinary, false, 0, 0},
		{"point", "point", "", cdcsync.KindBinary, false, 0, 0},
		{"geomcollection", "geomcollection", "", cdcsync.KindBinary, false, 0, 0},
		{"multipolygon", "multipolygon", "", cdcsync.KindBinary, false, 0, 0},
		{"inet4", "inet4", "", cdcsync.KindString, false, 0, 0},
		{"inet6", "inet6", "", cdcsync.KindString, false, 0, 0},
		{"uuid", "uuid", "", cdcsync.KindString, false, 0, 0},
		{"varchar", "varchar(10)", "latin1", cdcsync.KindString, false, 0, 0},
		{"char", "char(10)", "gbk", cdcsync.KindString, false, 0, 0},
		{"text", "text", "utf16", cdcsync.KindString, false, 0, 0},
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
		{"vector", "vector(3)", ""},
		{"bit", "bit(65)", ""},
		{"decimal", "decimal(x)", ""},
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
		want := "column status has type " + tc.columnType + ", which cdcsync does not map"
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	// The message names the table once it is known.
	e := &UnsupportedColumnError{Table: cdcsync.TableID{Database: "shop", Table: "orders"}, Column: "status", ColumnType: "enum('a','b')"}
	want := `column shop.orders.status has type enum('a','b'), which cdcsync does not map; exclude the table with "!shop.orders" in source.include or drop the column`
	if e.Error() != want {
		t.Errorf("got  %s\nwant %s", e.Error(), want)
	}
	// Character sets cdcsync does not decode.
	for _, cs := range []string{"big5", "sjis", "binary", ""} {
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

// TestMapColumnCharsetSuffix: the character set of a text column that is
// not UTF-8 goes into the column type, once, and names it when MapColumn is
// called again without one (a schema read back from the Iceberg table).
func TestMapColumnCharsetSuffix(t *testing.T) {
	c := cdcsync.Column{Name: "c", DataType: "varchar", ColumnType: "varchar(10)"}
	for range 2 {
		if err := MapColumn(&c, "latin1"); err != nil || c.ColumnType != "varchar(10) character set latin1" {
			t.Fatalf("MapColumn = %q, %v", c.ColumnType, err)
		}
	}
	if err := MapColumn(&c, ""); err != nil || c.ColumnType != "varchar(10) character set latin1" || c.Kind != cdcsync.KindString {
		t.Fatalf("MapColumn without a charset = %q %s, %v", c.ColumnType, c.Kind, err)
	}
	if err := MapColumn(&c, "utf8mb4"); err != nil || c.ColumnType != "varchar(10)" {
		t.Fatalf("MapColumn to utf8mb4 = %q, %v", c.ColumnType, err)
	}
	if n := schemaFixedLength("char(4) character set gbk"); n != 4 {
		t.Errorf("schemaFixedLength = %d", n)
	}
}

// TestMapColumnEnumLabels: labels as information_schema writes them.
func TestMapColumnEnumLabels(t *testing.T) {
	for ct, want := range map[string][]string{
		`enum('a','b''c','d\\e','e\nf','g` + "\t" + `h','i"j','k\\''l','é','',' sp','a,b')`: {"a", "b'c", `d\e`, "e\nf", "g\th", `i"j`, `k\'l`, "é", "", " sp", "a,b"},
		`set('x')`:   {"x"},
		`enum('')`:   {""},
		`enum('''')`: {"'"},
	} {
		got, ok := schemaLabels(ct)
		if !ok || strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Errorf("schemaLabels(%s) = %q, %v; want %q", ct, got, ok, want)
		}
	}
	// schemaQuoteLabel writes what schemaLabels reads.
	labels := []string{"a", "b'c", `d\e`, "e\nf\r\x00\x1a", "g\th", "é", "", " sp", "a,b", `\'`}
	quoted := make([]string, len(labels))
	for i, l := range labels {
		quoted[i] = schemaQuoteLabel(l)
	}
	if got, ok := schemaLabels("enum(" + strings.Join(quoted, ",") + ")"); !ok || strings.Join(got, "|") != strings.Join(labels, "|") {
		t.Errorf("schemaLabels(schemaQuoteLabel) = %q, want %q", got, labels)
	}
	if q := schemaQuoteLabel(`it's a\b`); q != `'it''s a\\b'` {
		t.Errorf("schemaQuoteLabel = %s", q)
	}
	for _, ct := range []string{"enum", "enum()", "enum('a'", "enum('a' 'b')", "enum(a)"} {
		if got, ok := schemaLabels(ct); ok {
			t.Errorf("schemaLabels(%s) = %q, want failure", ct, got)
		}
	}
	// "?" may stand for a character information_schema cannot show.
	c := cdcsync.Column{Name: "e", DataType: "enum", ColumnType: "enum('?','x')"}
	if err := MapColumn(&c, "utf8mb4"); err == nil || !strings.Contains(err.Error(), "a label holds") {
		t.Errorf("utf8mb4 enum with '?': %v", err)
	}
}

// An ENUM label may hold the words of the character set suffix.
func TestMapColumnEnumWithSuffixWords(t *testing.T) {
	c := cdcsync.Column{Name: "e", DataType: "enum", ColumnType: "enum('a character set b','c')"}
	if err := MapColumn(&c, "latin1"); err != nil || c.ColumnType != "enum('a character set b','c')" {
		t.Fatalf("MapColumn = %q, %v", c.ColumnType, err)
	}
	for _, v := range []any{int64(1), int64(2)} {
		got, err := DecodeBinlog(&c, v)
		if err != nil || (got != "a character set b" && got != "c") {
			t.Errorf("DecodeBinlog(%v) = %v, %v", v, got, err)
		}
	}
	row, err := DecodeSnapshotRow(&cdcsync.TableSchema{Columns: []cdcsync.Column{c}}, []mysql.FieldValue{mysql.NewFieldValue(mysql.FieldValueTypeString, 0, []byte("c"))})
	if err != nil || row[0] != "c" {
		t.Errorf("DecodeSnapshotRow = %v, %v", row, err)
	}
}
