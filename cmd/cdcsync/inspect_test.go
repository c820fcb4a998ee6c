package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cdcsync/cdcsync"
)

// catSchema has a column of every kind, keyed by (region, id).
func catSchema() *cdcsync.TableSchema {
	return &cdcsync.TableSchema{
		ID: cdcsync.TableID{Database: "shop", Table: "t"},
		Columns: []cdcsync.Column{
			{Name: "region", Kind: cdcsync.KindString},
			{Name: "id", Kind: cdcsync.KindInt64},
			{Name: "note", Kind: cdcsync.KindString, Nullable: true},
			{Name: "amount", Kind: cdcsync.KindDecimal, Precision: 30, Scale: 2, Nullable: true},
			{Name: "n32", Kind: cdcsync.KindInt32, Nullable: true},
			{Name: "f32", Kind: cdcsync.KindFloat32, Nullable: true},
			{Name: "f64", Kind: cdcsync.KindFloat64, Nullable: true},
			{Name: "bin", Kind: cdcsync.KindBinary, Nullable: true},
			{Name: "day", Kind: cdcsync.KindDate, Nullable: true},
			{Name: "at", Kind: cdcsync.KindTimestamp, Nullable: true},
			{Name: "atz", Kind: cdcsync.KindTimestampTZ, Nullable: true},
			{Name: "flag", Kind: cdcsync.KindBool, Nullable: true},
			{Name: "dur", Kind: cdcsync.KindTime, Nullable: true},
		},
		PrimaryKey: []int{0, 1},
	}
}

func catRows() []cdcsync.Row {
	return []cdcsync.Row{
		{"eu", int64(1), "two\nlines\tand a tab, a \\ and \r", "12345678901234567890123456.78", int32(-7), float32(0.1), 0.1,
			[]byte{0, 0xff, '\n'}, int32(19000), int64(1_700_000_000_123_456), int64(-1), true, int64(-3_723_000_001)},
		{"eu", int64(9223372036854775807), "", "-0.01", int32(2147483647), float32(math.Inf(1)), math.NaN(),
			[]byte{}, int32(0), int64(0), int64(0), false, int64(0)},
		{"asia", int64(3), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil},
		{"eu", int64(-5), `"quoted", comma`, "0.00", int32(0), float32(-2.5), math.Inf(-1), []byte("x"), int32(-1), int64(-1), int64(1), nil, int64(1)},
	}
}

func TestCatText(t *testing.T) {
	ts := catSchema()
	rows := catRows()
	cdcsync.SortRows(ts, rows)
	var out bytes.Buffer
	if err := writeRows(&out, "text", ts, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1+len(rows) {
		t.Fatalf("%d lines for %d rows: every row must be one line:\n%s", len(lines), len(rows), out.String())
	}
	if !strings.HasPrefix(lines[1], "asia ") || !strings.HasPrefix(lines[2], "eu      -5 ") || !strings.HasPrefix(lines[3], "eu      1 ") {
		t.Errorf("rows not in primary-key order:\n%s", out.String())
	}
	for _, want := range []string{`two\nlines\tand a tab, a \\ and \r`, "12345678901234567890123456.78", "0x00ff0a", "2022-01-08",
		"2023-11-14 22:13:20.123456", "1969-12-31 23:59:59.999999Z", "-01:02:03.000001", "NaN", "+Inf"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(lines[1], "NULL") {
		t.Errorf("NULL not shown: %s", lines[1])
	}
}

func TestCatJSON(t *testing.T) {
	ts := catSchema()
	rows := catRows()
	var out bytes.Buffer
	if err := writeRows(&out, "json", ts, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(rows) {
		t.Fatalf("%d lines for %d rows:\n%s", len(lines), len(rows), out.String())
	}
	wantFirst := `{"region":"eu","id":1,"note":"two\nlines\tand a tab, a \\ and \r","amount":12345678901234567890123456.78,` +
		`"n32":-7,"f32":0.1,"f64":0.1,"bin":"AP8K","day":"2022-01-08","at":"2023-11-14 22:13:20.123456",` +
		`"atz":"1969-12-31 23:59:59.999999Z","flag":true,"dur":"-01:02:03.000001"}`
	if lines[0] != wantFirst {
		t.Errorf("first row\n got %s\nwant %s", lines[0], wantFirst)
	}
	for i, line := range lines {
		d := json.NewDecoder(strings.NewReader(line))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i, err, line)
		}
		if len(m) != len(ts.Columns) {
			t.Errorf("line %d has %d keys, want %d", i, len(m), len(ts.Columns))
		}
	}
	// Exact values: the largest BIGINT and the 28-digit decimal survive
	// a decoder that keeps numbers as text.
	if !strings.Contains(lines[1], `"id":9223372036854775807,`) || !strings.Contains(lines[1], `"amount":-0.01,`) ||
		!strings.Contains(lines[1], `"f32":"Infinity","f64":"NaN","bin":"","day":"1970-01-01"`) {
		t.Errorf("second row: %s", lines[1])
	}
	if !strings.Contains(lines[2], `"note":null,"amount":null,`) || !strings.Contains(lines[3], `"f64":"-Infinity"`) {
		t.Errorf("nulls or infinities: %s\n%s", lines[2], lines[3])
	}
}

func TestCatCSV(t *testing.T) {
	ts := catSchema()
	rows := catRows()
	var out bytes.Buffer
	if err := writeRows(&out, "csv", ts, rows); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+len(rows) || recs[0][0] != "region" || recs[0][12] != "dur" {
		t.Fatalf("records: %q", recs)
	}
	if got := recs[1][2]; got != "two\nlines\tand a tab, a \\ and \r" {
		t.Errorf("a value with a newline, a tab and a backslash reads back as %q", got)
	}
	if got := recs[4][2]; got != `"quoted", comma` {
		t.Errorf("quotes and commas read back as %q", got)
	}
	if recs[3][2] != "" || recs[3][3] != "" || recs[1][7] != "0x00ff0a" || recs[2][1] != "9223372036854775807" {
		t.Errorf("records: %q", recs)
	}
}

// firstRows keeps the rows with the smallest keys, whatever order the scan
// yields them in, and all of them without a limit.
func TestCatFirstRowsByKey(t *testing.T) {
	ts := &cdcsync.TableSchema{
		Columns:    []cdcsync.Column{{Name: "a", Kind: cdcsync.KindString}, {Name: "b", Kind: cdcsync.KindDecimal, Scale: 1}},
		PrimaryKey: []int{0, 1},
	}
	var all []cdcsync.Row
	for _, a := range []string{"x", "y", "ab"} {
		for _, b := range []string{"-10.0", "-9.5", "2.0", "10.0", "100.0"} {
			all = append(all, cdcsync.Row{a, b})
		}
	}
	want := slices.Clone(all)
	cdcsync.SortRows(ts, want)
	for _, limit := range []int{0, 1, 4, 15, 50} {
		rows := slices.Clone(all)
		rand.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		f := &firstRows{ts: ts, limit: limit}
		for _, r := range rows {
			f.add(r)
		}
		got := f.sorted()
		n := min(limit, len(all))
		if limit == 0 {
			n = len(all)
		}
		if f.seen != len(all) || len(got) != n {
			t.Fatalf("limit %d: kept %d of %d, want %d", limit, len(got), f.seen, n)
		}
		for i := range got {
			if cdcsync.CompareKeys(ts, got[i], want[i]) != 0 {
				t.Fatalf("limit %d: row %d is %v, want %v", limit, i, got[i], want[i])
			}
		}
	}
	// Decimal keys are ordered by value, not by text.
	if want[0][0] != "ab" || want[0][1] != "-10.0" || want[1][1] != "-9.5" || want[4][1] != "100.0" {
		t.Errorf("order: %v", want)
	}
}
