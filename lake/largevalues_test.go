package lake

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/cdcsync/cdcsync"
)

// TestLargeValuesWriting: columns of MEDIUM/LONG TEXT and BLOB and JSON
// are written without a dictionary (a VARCHAR keeps its), rows of large
// values go in row groups of about largeBatchBytes (narrow rows in one),
// and every value reads back whole.
func TestLargeValuesWriting(t *testing.T) {
	ctx := context.Background()
	lk := openLake(t, kvConfig(t, t.TempDir(), "p"))
	s := &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "docs"}, Columns: []cdcsync.Column{
		{Name: "id", DataType: "bigint", ColumnType: "bigint(20)", Kind: cdcsync.KindInt64},
		{Name: "s", DataType: "varchar", ColumnType: "varchar(20)", Kind: cdcsync.KindString, Nullable: true},
		{Name: "lt", DataType: "longtext", ColumnType: "longtext", Kind: cdcsync.KindString, Nullable: true},
		{Name: "lb", DataType: "longblob", ColumnType: "longblob", Kind: cdcsync.KindBinary, Nullable: true},
		{Name: "j", DataType: "json", ColumnType: "json", Kind: cdcsync.KindString, Nullable: true},
	}, PrimaryKey: []int{0}}
	tb, err := lk.EnsureTable(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	// groups returns the row groups of each data file of the table, and
	// fails on a dictionary where there must be none and on none where
	// there should be one (the cost-based fallback may leave out a VARCHAR's
	// in a small group).
	groups := func() []int {
		t.Helper()
		var out []int
		dictS := false
		for path := range tableParquetFiles(t, tb.Iceberg()) {
			if !strings.Contains(path, "-data.parquet") {
				continue
			}
			n, chunks := columnChunks(t, path)
			for _, cc := range chunks {
				switch name := cc.PathInSchema().String(); {
				case name == "s":
					dictS = dictS || cc.HasDictionaryPage()
				case name != "id" && cc.HasDictionaryPage():
					t.Errorf("column %s has a dictionary page", name)
				}
			}
			out = append(out, n)
		}
		if !dictS {
			t.Error("the VARCHAR column of repeated values has no dictionary in any row group")
		}
		return out
	}

	// 24 rows of 256 KiB of text and 256 KiB of binary: 12 MiB of large
	// rows, about 3 row groups; 16 narrow rows among them.
	var rows []cdcsync.Row
	for i := range 40 {
		r := cdcsync.Row{int64(i), "same", nil, nil, `{"a": 1}`}
		if i%5 < 3 {
			r[2] = strings.Repeat(string(rune('a'+i%26)), 256<<10)
			r[3] = bytes.Repeat([]byte{byte(i)}, 256<<10)
		}
		rows = append(rows, r)
	}
	if err := tb.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, rows, nil); err != nil {
		t.Fatal(err)
	}
	if g := groups(); len(g) != 1 || g[0] < 3 || g[0] > 4 {
		t.Errorf("row groups per file %v, want one file of 3 or 4 (12 MiB of large rows, %d MiB per group)", g, largeBatchBytes>>20)
	}
	got := readAll(t, lk, tb)
	if len(got) != len(rows) {
		t.Fatalf("read %d rows, want %d", len(got), len(rows))
	}
	for i := range rows {
		for c := range rows[i] {
			if cdcsync.ValueText(got[i][c]) != cdcsync.ValueText(rows[i][c]) || (rows[i][c] == nil) != (got[i][c] == nil) {
				t.Fatalf("row %d column %s differs from what was written", i, s.Columns[c].Name)
			}
		}
		if b, ok := rows[i][3].([]byte); ok && !bytes.Equal(got[i][3].([]byte), b) {
			t.Fatalf("row %d: the LONGBLOB differs from what was written", i)
		}
	}
}
