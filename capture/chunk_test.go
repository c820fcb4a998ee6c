package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync"
)

// chunkCol builds a column as LoadSchema would (MapColumn). charset is the
// column's character set for text columns ("" otherwise).
func chunkCol(t *testing.T, name, dataType, columnType, charset string) cdcsync.Column {
	t.Helper()
	c := cdcsync.Column{Name: name, DataType: dataType, ColumnType: columnType}
	if err := MapColumn(&c, charset); err != nil {
		t.Fatalf("MapColumn(%s %s): %v", name, columnType, err)
	}
	return c
}

// chunkSchema is a table whose primary key is all of cols, in order, plus a
// non-key column.
func chunkSchema(cols ...cdcsync.Column) *cdcsync.TableSchema {
	ts := &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "d`b", Table: "t"}}
	for i, c := range cols {
		ts.Columns = append(ts.Columns, c)
		ts.PrimaryKey = append(ts.PrimaryKey, i)
	}
	ts.Columns = append(ts.Columns, cdcsync.Column{Name: "v", DataType: "int", ColumnType: "int(11)", Kind: cdcsync.KindInt32, Nullable: true})
	return ts
}

// chunkAllKinds is a table with one key column of every bound type.
func chunkAllKinds(t *testing.T) *cdcsync.TableSchema {
	return chunkSchema(
		chunkCol(t, "i", "int", "int(11)", ""),
		chunkCol(t, "u", "bigint", "bigint(20) unsigned", ""),
		chunkCol(t, "d", "decimal", "decimal(20,4)", ""),
		chunkCol(t, "s", "varchar", "varchar(20)", "utf8mb4"),
		chunkCol(t, "b", "varbinary", "varbinary(20)", ""),
		chunkCol(t, "dt", "date", "date", ""),
		chunkCol(t, "dtm", "datetime", "datetime(6)", ""),
		chunkCol(t, "ts", "timestamp", "timestamp", ""),
		chunkCol(t, "tm", "time", "time(3)", ""),
	)
}

func chunkAllValues() chunkBound {
	return chunkBound{
		{chunkInt, "-2147483648"},
		{chunkInt, "18446744073709551615"},
		{chunkDec, "-12345678.0001"},
		{chunkStr, "it's <a> \"b\" \\ É 😀"},
		{chunkBin, "\x00\xff'\\"},
		{chunkDate, "0000-00-00"},
		{chunkDatetime, "2024-02-29 23:59:59.000001"},
		{chunkTimestamp, "1970-01-01 00:00:01"},
		{chunkTime, "-838:59:59.000"},
	}
}

func TestChunkBoundRoundTrip(t *testing.T) {
	ts := chunkAllKinds(t)
	b := chunkAllValues()
	s, err := encodeChunkBound(b)
	if err != nil {
		t.Fatal(err)
	}
	// The stored form is fixed: a change here breaks resuming copies
	// written by earlier versions.
	want := `{"v":1,"key":[{"int":"-2147483648"},{"int":"18446744073709551615"},{"dec":"-12345678.0001"},` +
		`{"str":"it's <a> \"b\" \\ É 😀"},{"bin":"00ff275c"},{"date":"0000-00-00"},` +
		`{"datetime":"2024-02-29 23:59:59.000001"},{"timestamp":"1970-01-01 00:00:01"},{"time":"-838:59:59.000"}]}`
	if s != want {
		t.Errorf("encoded\n%s\nwant\n%s", s, want)
	}
	got, err := decodeChunkBound(ts, s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b) {
		t.Errorf("decoded %#v\nwant %#v", got, b)
	}
	if got, err := decodeChunkBound(ts, ""); err != nil || got != nil {
		t.Errorf(`decode "" = %v, %v; want nil (the start of the table)`, got, err)
	}
	// Whitespace and member order are JSON's business.
	one := chunkSchema(chunkCol(t, "i", "int", "int(11)", ""))
	got, err = decodeChunkBound(one, " {\"key\" : [ {\"int\":\"7\"} ], \"v\":1}\n")
	if err != nil || !reflect.DeepEqual(got, chunkBound{{chunkInt, "7"}}) {
		t.Errorf("decode with spaces = %v, %v", got, err)
	}
}

func TestChunkBoundMalformed(t *testing.T) {
	ts := chunkSchema(chunkCol(t, "i", "int", "int(11)", ""), chunkCol(t, "s", "varchar", "varchar(10)", "utf8mb4"))
	ok := `{"v":1,"key":[{"int":"1"},{"str":"a"}]}`
	if _, err := decodeChunkBound(ts, ok); err != nil {
		t.Fatalf("the valid bound fails: %v", err)
	}
	all := chunkAllKinds(t)
	for _, c := range []struct {
		name, in, want string
	}{
		{"not json", `garbage`, "not the JSON of a bound"},
		{"array", `[1]`, "not the JSON of a bound"},
		{"trailing", ok + `{}`, "text follows the JSON object"},
		{"unknown field", `{"v":1,"key":[{"int":"1"},{"str":"a"}],"x":1}`, `unknown field "x"`},
		{"no version", `{"key":[{"int":"1"},{"str":"a"}]}`, `no version ("v")`},
		{"newer", `{"v":2,"key":[]}`, "version 2, written by a newer cdcsync"},
		{"negative version", `{"v":-1,"key":[]}`, "version -1 is unknown"},
		{"too few", `{"v":1,"key":[{"int":"1"}]}`, "1 key values but the primary key of d`b.t has 2 columns"},
		{"too many", `{"v":1,"key":[{"int":"1"},{"str":"a"},{"str":"b"}]}`, "3 key values"},
		{"no key", `{"v":1}`, "0 key values"},
		{"wrong type", `{"v":1,"key":[{"str":"1"},{"str":"a"}]}`, `key value 1 is of type "str" but column i (int(11)) takes "int"`},
		{"two members", `{"v":1,"key":[{"int":"1","str":"1"},{"str":"a"}]}`, "key value 1 has 2 members"},
		{"empty element", `{"v":1,"key":[{},{"str":"a"}]}`, "key value 1 has 0 members"},
		{"number not string", `{"v":1,"key":[{"int":1},{"str":"a"}]}`, "not the JSON of a bound"},
		{"int not a number", `{"v":1,"key":[{"int":"1 OR 1=1"},{"str":"a"}]}`, `"1 OR 1=1" is not a 64-bit integer`},
		{"int overflow", `{"v":1,"key":[{"int":"18446744073709551616"},{"str":"a"}]}`, "not a 64-bit integer"},
		{"int below", `{"v":1,"key":[{"int":"-9223372036854775809"},{"str":"a"}]}`, "not a 64-bit integer"},
		{"int leading zero", `{"v":1,"key":[{"int":"007"},{"str":"a"}]}`, "not written canonically (7)"},
		{"int plus", `{"v":1,"key":[{"int":"+7"},{"str":"a"}]}`, `"+7" is not a 64-bit integer`},
		{"int minus zero", `{"v":1,"key":[{"int":"-0"},{"str":"a"}]}`, "not written canonically (0)"},
		{"invalid utf8", "{\"v\":1,\"key\":[{\"int\":\"1\"},{\"str\":\"\xff\"}]}", "it is not UTF-8"},
		{"dec", `{"v":1,"key":[{"int":"1"},{"int":"1"},{"dec":"1e5"},{"str":""},{"bin":""},{"date":"2024-01-01"},{"datetime":"2024-01-01 00:00:00"},{"timestamp":"2024-01-01 00:00:00"},{"time":"00:00:00"}]}`, `"1e5" is not a decimal number`},
		{"bin", `{"v":1,"key":[{"int":"1"},{"int":"1"},{"dec":"1"},{"str":""},{"bin":"0g"},{"date":"2024-01-01"},{"datetime":"2024-01-01 00:00:00"},{"timestamp":"2024-01-01 00:00:00"},{"time":"00:00:00"}]}`, `"0g" is not hex`},
		{"date quote", `{"v":1,"key":[{"int":"1"},{"int":"1"},{"dec":"1"},{"str":""},{"bin":""},{"date":"2024-01-01' OR '1"},{"datetime":"2024-01-01 00:00:00"},{"timestamp":"2024-01-01 00:00:00"},{"time":"00:00:00"}]}`, "is not a date"},
		{"datetime", `{"v":1,"key":[{"int":"1"},{"int":"1"},{"dec":"1"},{"str":""},{"bin":""},{"date":"2024-01-01"},{"datetime":"2024-01-01T00:00:00"},{"timestamp":"2024-01-01 00:00:00"},{"time":"00:00:00"}]}`, "is not a datetime"},
		{"timestamp zone", `{"v":1,"key":[{"int":"1"},{"int":"1"},{"dec":"1"},{"str":""},{"bin":""},{"date":"2024-01-01"},{"datetime":"2024-01-01 00:00:00"},{"timestamp":"2024-01-01 00:00:00+01:00"},{"time":"00:00:00"}]}`, "is not a timestamp"},
		{"datetime 7 digits", `{"v":1,"key":[{"int":"1"},{"int":"1"},{"dec":"1"},{"str":""},{"bin":""},{"date":"2024-01-01"},{"datetime":"2024-01-01 00:00:00.1234567"},{"timestamp":"2024-01-01 00:00:00"},{"time":"00:00:00"}]}`, "is not a datetime"},
		{"time", `{"v":1,"key":[{"int":"1"},{"int":"1"},{"dec":"1"},{"str":""},{"bin":""},{"date":"2024-01-01"},{"datetime":"2024-01-01 00:00:00"},{"timestamp":"2024-01-01 00:00:00"},{"time":"1 00:00:00"}]}`, "is not a time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := ts
			if strings.Contains(c.in, `"time"`) {
				s = all
			}
			_, err := decodeChunkBound(s, c.in)
			if err == nil {
				t.Fatalf("decode %s: no error", c.in)
			}
			prefix := "the copy bound " + `"` // quoted with %q
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), "stored in the table's snapshot summary is malformed: ") {
				t.Errorf("error %q does not say which bound is malformed", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q\nwant it to contain %q", err, c.want)
			}
		})
	}
	// A bound for a table that is now one chunk.
	dbl := chunkSchema(chunkCol(t, "f", "double", "double", ""))
	_, err := decodeChunkBound(dbl, `{"v":1,"key":[{"int":"1"}]}`)
	if err == nil || !strings.Contains(err.Error(), "is read as one chunk") {
		t.Errorf("bound of an unsplittable table: %v", err)
	}
	// Long garbage is abbreviated in the message.
	_, err = decodeChunkBound(ts, strings.Repeat("x", 1000))
	if err == nil || len(err.Error()) > 400 {
		t.Errorf("long bound: %v", err)
	}
}

func TestChunkEncodeRefusesBadValues(t *testing.T) {
	for _, v := range []chunkValue{
		{chunkStr, "\xff"},
		{chunkInt, "1.5"},
		{chunkDate, "2024-1-1"},
		{"float", "1"},
	} {
		if s, err := encodeChunkBound(chunkBound{v}); err == nil {
			t.Errorf("encode %#v = %s, want an error", v, s)
		}
	}
}

func TestChunkLiterals(t *testing.T) {
	for _, c := range []struct {
		v    chunkValue
		want string
	}{
		{chunkValue{chunkInt, "-42"}, "-42"},
		{chunkValue{chunkInt, "18446744073709551615"}, "18446744073709551615"},
		{chunkValue{chunkDec, "-0012.5000"}, "-0012.5000"},
		{chunkValue{chunkStr, ""}, "_utf8mb4 X''"},
		{chunkValue{chunkStr, "a'b\\"}, "_utf8mb4 X'6127625c'"},
		{chunkValue{chunkStr, "É "}, "_utf8mb4 X'c38920'"},
		{chunkValue{chunkBin, "\x00\xff"}, "_binary X'00ff'"},
		{chunkValue{chunkBin, ""}, "_binary X''"},
		{chunkValue{chunkDate, "2024-02-29"}, "'2024-02-29'"},
		{chunkValue{chunkDatetime, "2024-02-29 01:02:03.456789"}, "'2024-02-29 01:02:03.456789'"},
		{chunkValue{chunkTimestamp, "2038-01-19 03:14:07"}, "'2038-01-19 03:14:07'"},
		{chunkValue{chunkTime, "-838:59:59"}, "'-838:59:59'"},
	} {
		if err := c.v.check(); err != nil {
			t.Errorf("check %#v: %v", c.v, err)
		}
		if got := c.v.literal(); got != c.want {
			t.Errorf("literal %#v = %s, want %s", c.v, got, c.want)
		}
	}
}

func TestChunkPredicates(t *testing.T) {
	one := chunkSchema(chunkCol(t, "id", "int", "int(11)", ""))
	b1 := chunkBound{{chunkInt, "5"}}
	if got, want := chunkLexPred(chunkKeyCols(one), b1, ">"), "(`id` > 5)"; got != want {
		t.Errorf("one column >: %s, want %s", got, want)
	}
	if got, want := chunkLexPred(chunkKeyCols(one), b1, "<="), "(`id` <= 5)"; got != want {
		t.Errorf("one column <=: %s, want %s", got, want)
	}

	three := chunkSchema(
		chunkCol(t, "a", "int", "int(11)", ""),
		chunkCol(t, "b`x", "varchar", "varchar(10)", "utf8mb4"),
		chunkCol(t, "c", "datetime", "datetime", ""),
	)
	b3 := chunkBound{{chunkInt, "1"}, {chunkStr, "x"}, {chunkDatetime, "2024-01-01 00:00:00"}}
	cols := chunkKeyCols(three)
	gt := "(`a` > 1) OR (`a` = 1 AND `b``x` > _utf8mb4 X'78') OR " +
		"(`a` = 1 AND `b``x` = _utf8mb4 X'78' AND `c` > '2024-01-01 00:00:00')"
	if got := chunkLexPred(cols, b3, ">"); got != gt {
		t.Errorf("three columns >:\n%s\nwant\n%s", got, gt)
	}
	le := "(`a` < 1) OR (`a` = 1 AND `b``x` < _utf8mb4 X'78') OR " +
		"(`a` = 1 AND `b``x` = _utf8mb4 X'78' AND `c` <= '2024-01-01 00:00:00')"
	if got := chunkLexPred(cols, b3, "<="); got != le {
		t.Errorf("three columns <=:\n%s\nwant\n%s", got, le)
	}

	sel := "`a`, `b``x`, `c`, `v`"
	from := "`d``b`.`t`"
	for _, c := range []struct {
		name      string
		after, hi chunkBound
		want      string
	}{
		{"whole table", nil, nil, "SELECT " + sel + " FROM " + from},
		{"first", nil, b3, "SELECT " + sel + " FROM " + from + " FORCE INDEX (PRIMARY) WHERE (" + le + ")"},
		{"last", b3, nil, "SELECT " + sel + " FROM " + from + " FORCE INDEX (PRIMARY) WHERE (" + gt + ")"},
		{"middle", b3, b3, "SELECT " + sel + " FROM " + from + " FORCE INDEX (PRIMARY) WHERE (" + gt + ") AND (" + le + ")"},
	} {
		if got := chunkReadSQL(three, c.after, c.hi); got != c.want {
			t.Errorf("%s:\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
	keys := "`a`, `b``x`, `c`"
	if got, want := chunkNextBoundSQL(three, nil, 1000),
		"SELECT "+keys+" FROM "+from+" FORCE INDEX (PRIMARY) ORDER BY "+keys+" LIMIT 2 OFFSET 999"; got != want {
		t.Errorf("next bound from the start:\n%s\nwant\n%s", got, want)
	}
	if got, want := chunkNextBoundSQL(three, b3, 1),
		"SELECT "+keys+" FROM "+from+" FORCE INDEX (PRIMARY) WHERE ("+gt+") ORDER BY "+keys+" LIMIT 2 OFFSET 0"; got != want {
		t.Errorf("next bound after b3:\n%s\nwant\n%s", got, want)
	}
}

func TestChunkable(t *testing.T) {
	for _, c := range []struct {
		col  cdcsync.Column
		ok   bool
		want string // in why
	}{
		{chunkCol(t, "k", "tinyint", "tinyint(4)", ""), true, ""},
		{chunkCol(t, "k", "smallint", "smallint(5) unsigned", ""), true, ""},
		{chunkCol(t, "k", "mediumint", "mediumint(9)", ""), true, ""},
		{chunkCol(t, "k", "int", "int(10) unsigned zerofill", ""), true, ""},
		{chunkCol(t, "k", "bigint", "bigint(20)", ""), true, ""},
		{chunkCol(t, "k", "bigint", "bigint(20) unsigned", ""), true, ""},
		{chunkCol(t, "k", "decimal", "decimal(20,4)", ""), true, ""},
		{chunkCol(t, "k", "decimal", "decimal(65,10)", ""), true, ""}, // KindString
		{chunkCol(t, "k", "char", "char(36)", "ascii"), true, ""},
		{chunkCol(t, "k", "varchar", "varchar(10)", "utf8mb4"), true, ""},
		{chunkCol(t, "k", "varchar", "varchar(10)", "utf8mb3"), true, ""},
		{chunkCol(t, "k", "varchar", "varchar(10)", "latin1"), true, ""},
		{chunkCol(t, "k", "varchar", "varchar(10)", "utf16"), true, ""},
		{chunkCol(t, "k", "binary", "binary(16)", ""), true, ""},
		{chunkCol(t, "k", "varbinary", "varbinary(16)", ""), true, ""},
		{chunkCol(t, "k", "date", "date", ""), true, ""},
		{chunkCol(t, "k", "datetime", "datetime(6)", ""), true, ""},
		{chunkCol(t, "k", "timestamp", "timestamp(3)", ""), true, ""},
		{chunkCol(t, "k", "time", "time", ""), true, ""},
		{chunkCol(t, "k", "float", "float", ""), false, "printed value does not compare equal"},
		{chunkCol(t, "k", "double", "double", ""), false, "printed value does not compare equal"},
		{chunkCol(t, "k", "enum", "enum('b','a')", "utf8mb4"), false, "sorts by the label's number"},
		{chunkCol(t, "k", "set", "set('b','a')", "utf8mb4"), false, "sorts by the label's number"},
		{chunkCol(t, "k", "bit", "bit(8)", ""), false, "cdcsync splits only integer"},
		{chunkCol(t, "k", "year", "year(4)", ""), false, "cdcsync splits only integer"},
		{chunkCol(t, "k", "text", "text", "utf8mb4"), false, "max_sort_length"},
		{chunkCol(t, "k", "blob", "blob", ""), false, "max_sort_length"},
		{chunkCol(t, "k", "json", "json", ""), false, "is json"},
		{chunkCol(t, "k", "uuid", "uuid", ""), false, "is uuid"},
		{chunkCol(t, "k", "inet6", "inet6", ""), false, "is inet6"},
		{chunkCol(t, "k", "point", "point", ""), false, "is point"},
		{chunkCol(t, "k", "varchar", "varchar(10)", "cp1256"), false, "character set cp1256"},
		{chunkCol(t, "k", "varchar", "varchar(10)", "gbk"), false, "character set gbk"},
		{chunkCol(t, "k", "varchar", "varchar(10)", "ucs2"), false, "character set ucs2"},
	} {
		ts := chunkSchema(c.col)
		ok, why := Chunkable(ts)
		if ok != c.ok || !strings.Contains(why, c.want) || (ok && why != "") {
			t.Errorf("%s (%s %s): Chunkable = %v, %q; want %v, %q", c.col.ColumnType, c.col.DataType, c.col.Kind, ok, why, c.ok, c.want)
		}
		// Composite: one unsplittable column makes the whole key unsplittable.
		comp := chunkSchema(chunkCol(t, "a", "int", "int(11)", ""), c.col)
		if ok2, _ := Chunkable(comp); ok2 != c.ok {
			t.Errorf("(int, %s): Chunkable = %v, want %v", c.col.ColumnType, ok2, c.ok)
		}
	}
	if ok, why := Chunkable(&cdcsync.TableSchema{Columns: []cdcsync.Column{{Name: "x", DataType: "int", Kind: cdcsync.KindInt32}}}); ok || !strings.Contains(why, "no primary key") {
		t.Errorf("no primary key: %v, %q", ok, why)
	}
	bad := chunkSchema(cdcsync.Column{Name: "g", DataType: "int", ColumnType: "int"})
	if ok, why := Chunkable(bad); ok || !strings.Contains(why, "does not map") {
		t.Errorf("unmapped key column: %v, %q", ok, why)
	}
}

func TestChunkCharsetExact(t *testing.T) {
	for cs, want := range map[string]bool{
		"latin1": true, "LATIN1": true, "latin2": true, "koi8r": true, "cp850": true, "utf16": true, "utf16le": true,
		"cp1251": false, "cp1250": false, "cp1256": false, "tis620": false, "greek": false, "gbk": false, "euckr": false, "ucs2": false, "utf32": false, "nosuch": false,
	} {
		if got := chunkCharsetExact(cs); got != want {
			t.Errorf("chunkCharsetExact(%s) = %v, want %v", cs, got, want)
		}
	}
}

func TestChunkValueOf(t *testing.T) {
	ts := chunkAllKinds(t)
	col := func(i int) *cdcsync.Column { return &ts.Columns[i] }
	signed := mysql.NewFieldValue(mysql.FieldValueTypeSigned, uint64(1<<64-5), nil)     // -5
	unsigned := mysql.NewFieldValue(mysql.FieldValueTypeUnsigned, uint64(1<<64-1), nil) // 2^64-1
	str := func(s string) mysql.FieldValue { return mysql.NewFieldValue(mysql.FieldValueTypeString, 0, []byte(s)) }
	for _, c := range []struct {
		col  int
		typ  string
		fv   mysql.FieldValue
		want string
		err  string
	}{
		{0, chunkInt, signed, "-5", ""},
		{1, chunkInt, unsigned, "18446744073709551615", ""},
		{1, chunkInt, str("42"), "42", ""},
		{2, chunkDec, str("12.5000"), "12.5000", ""},
		{3, chunkStr, str("b "), "b ", ""},
		{4, chunkBin, str("\x00\xff"), "\x00\xff", ""},
		{6, chunkDatetime, str("2024-01-01 00:00:00.000000"), "2024-01-01 00:00:00.000000", ""},
		{0, chunkInt, mysql.NewFieldValue(mysql.FieldValueTypeNull, 0, nil), "", "is NULL"},
		{2, chunkDec, signed, "", "came back as an integer"},
		{6, chunkDatetime, str("yesterday"), "", "cannot bound a chunk"},
		{3, chunkStr, str("\xc3"), "", "not UTF-8"},
	} {
		v, err := chunkValueOf(col(c.col), c.typ, c.fv)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %v: error %v, want %q", c.typ, c.fv, err, c.err)
			}
			continue
		}
		if err != nil || v.text != c.want || v.typ != c.typ {
			t.Errorf("%s %v = %#v, %v; want %q", c.typ, c.fv, v, err, c.want)
		}
	}
}

// TestChunkReaderArguments checks the refusals that need no server: the
// reader connects to nothing here (the source's port is closed).
func TestChunkReaderArguments(t *testing.T) {
	src := rdbSource("127.0.0.1", 1, "nobody", "")
	r := NewChunkReader(src, binlogpos.FlavorMariaDB, "", nil, 0)
	defer r.Close()
	ctx := context.Background()
	ts := chunkSchema(chunkCol(t, "id", "int", "int(11)", ""))
	if _, _, err := r.NextBound(ctx, ts, "", 0); err == nil || !strings.Contains(err.Error(), "at least 1 row") {
		t.Errorf("rows 0: %v", err)
	}
	if _, _, err := r.NextBound(ctx, ts, "{", 3); err == nil || !strings.Contains(err.Error(), "find the next chunk of d`b.t: the copy bound \"{\" stored in the table's snapshot summary is malformed") {
		t.Errorf("bad after: %v", err)
	}
	if _, _, err := r.ReadChunk(ctx, ts, "", "", false); err == nil || !strings.Contains(err.Error(), "every other chunk has one") {
		t.Errorf("no hi, not last: %v", err)
	}
	if _, _, err := r.ReadChunk(ctx, ts, "", `{"v":1,"key":[{"int":"1"}]}`, true); err == nil || !strings.Contains(err.Error(), "the last chunk has no upper bound") {
		t.Errorf("hi and last: %v", err)
	}
	if _, _, err := r.ReadChunk(ctx, ts, "", `{"v":1,"key":[{"str":"1"}]}`, false); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("bad hi: %v", err)
	}
	// An unsplittable table is one chunk without asking the server.
	dbl := chunkSchema(chunkCol(t, "f", "double", "double", ""))
	if hi, last, err := r.NextBound(ctx, dbl, "", 3); hi != "" || !last || err != nil {
		t.Errorf("NextBound of a DOUBLE key = %q, %v, %v; want \"\", true, nil", hi, last, err)
	}
	if _, _, err := r.NextBound(ctx, dbl, `{"v":1,"key":[{"int":"1"}]}`, 3); err == nil || !strings.Contains(err.Error(), "read as one chunk") {
		t.Errorf("NextBound of a DOUBLE key after a bound: %v", err)
	}
	// The server is unreachable: the error names the table and the chunk.
	_, _, err := r.ReadChunk(ctx, ts, `{"v":1,"key":[{"int":"1"}]}`, `{"v":1,"key":[{"int":"9"}]}`, false)
	if err == nil || !strings.Contains(err.Error(), "read the chunk of d`b.t after key (1) up to key (9): ") {
		t.Errorf("unreachable server: %v", err)
	}
	r.Close()
	if _, _, err := r.NextBound(ctx, ts, "", 3); err == nil || !strings.Contains(err.Error(), "the chunk reader is closed") {
		t.Errorf("after Close: %v", err)
	}
}

// withSet is p with the GTID set set.
func withSet(p cdcsync.Position, set string) cdcsync.Position {
	q := dec(p)
	q.GTIDSet = set
	return q.Position()
}

// dec reads a position the capture made.
func dec(p cdcsync.Position) binlogpos.Pos {
	q, err := binlogpos.Decode(p)
	if err != nil {
		panic(err)
	}
	return q
}
