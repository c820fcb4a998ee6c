package lake

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/cdcsync/cdcsync"
)

func evolveSchemaOf() *cdcsync.TableSchema {
	return &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "ev"}, Columns: []cdcsync.Column{
		{Name: "id", DataType: "bigint", ColumnType: "bigint(20)", Kind: cdcsync.KindInt64},
		{Name: "a", DataType: "varchar", ColumnType: "varchar(8)", Kind: cdcsync.KindString, Nullable: true},
		{Name: "b", DataType: "varchar", ColumnType: "varchar(8)", Kind: cdcsync.KindString, Nullable: true},
		{Name: "n", DataType: "int", ColumnType: "int(11)", Kind: cdcsync.KindInt32, Nullable: true},
	}, PrimaryKey: []int{0}}
}

func readAll(t *testing.T, lk *Lake, tb *Table) []cdcsync.Row {
	t.Helper()
	rows, err := tb.ReadRows(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	cdcsync.SortRows(tb.Schema, rows)
	return rows
}

// TestEvolve: renames keep field ids (a swap of two names rewrites the rows
// instead), promotions change types in place, a new column with a default
// fills the existing rows, and the recorded MySQL schema comes back after a
// reopen; the old snapshot still reads the old values.
func TestEvolve(t *testing.T) {
	dir := t.TempDir()
	cfg := kvConfig(t, dir, "p")
	lk := openLake(t, cfg)
	ctx := context.Background()
	s0 := evolveSchemaOf()
	tb, err := lk.EnsureTable(ctx, s0)
	if err != nil {
		t.Fatal(err)
	}
	rows := []cdcsync.Row{{int64(1), "a1", "b1", int32(10)}, {int64(2), "a2", nil, int32(20)}}
	deletes := []cdcsync.Row{{int64(1), nil, nil, nil}, {int64(2), nil, nil, nil}}
	if err := tb.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, deletes, rows, nil); err != nil {
		t.Fatal(err)
	}
	snap0 := tb.Iceberg().CurrentSnapshot().SnapshotID
	idA, _ := tb.Iceberg().Schema().FindFieldByName("a")

	// Rename n to num and promote it; add w with a default; swap a and b.
	s1 := &cdcsync.TableSchema{ID: s0.ID, Columns: []cdcsync.Column{
		s0.Columns[0],
		{Name: "w", DataType: "int", ColumnType: "int(11)", Kind: cdcsync.KindInt32},
		{Name: "b", DataType: "varchar", ColumnType: "varchar(8)", Kind: cdcsync.KindString, Nullable: true},
		{Name: "a", DataType: "varchar", ColumnType: "varchar(8)", Kind: cdcsync.KindString, Nullable: true},
		{Name: "num", DataType: "bigint", ColumnType: "bigint(20)", Kind: cdcsync.KindInt64, Nullable: true},
	}, PrimaryKey: []int{0}}
	fill := "5"
	ch := &cdcsync.SchemaChange{Table: s0.ID, Kind: cdcsync.ChangeSchema, Schema: s1,
		Sources: []cdcsync.ColumnSource{{From: "id"}, {Fill: &fill}, {From: "a"}, {From: "b"}, {From: "n"}},
		Fills:   []any{nil, int32(5), nil, nil, nil}}
	if _, err := lk.ApplyChange(ctx, tb, Epoch{Number: 2, Pos: pos(2)}, ch); err != nil {
		t.Fatal(err)
	}
	want := []cdcsync.Row{{int64(1), int32(5), "a1", "b1", int64(10)}, {int64(2), int32(5), "a2", nil, int64(20)}}
	if got := readAll(t, lk, tb); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows after the change\n got %v\nwant %v", got, want)
	}
	sc := tb.Iceberg().Schema()
	var names []string
	for _, f := range sc.Fields() {
		names = append(names, f.Name)
	}
	// The swapped columns are new fields whose names old fields had: a move
	// cannot name them, so they come last.
	if fmt.Sprint(names) != "[id w num b a]" {
		t.Errorf("Iceberg columns %v", names)
	}
	if f, _ := sc.FindFieldByName("num"); f.ID != 4 {
		t.Errorf("the renamed column num has field id %d, want 4", f.ID)
	}
	if f, _ := sc.FindFieldByName("b"); f.ID == idA.ID {
		t.Errorf("a swapped name kept its old field id")
	}
	// The old snapshot reads with its schema.
	old, err := ReadRowsAt(ctx, tb.Iceberg(), s0, snap0)
	if err != nil {
		t.Fatal(err)
	}
	cdcsync.SortRows(s0, old)
	if !reflect.DeepEqual(old, rows) {
		t.Errorf("old snapshot\n got %v\nwant %v", old, rows)
	}
	// Later commits use the new schema.
	if err := tb.Commit(ctx, Epoch{Number: 3, Pos: pos(3)}, []cdcsync.Row{{int64(3), nil, nil, nil, nil}},
		[]cdcsync.Row{{int64(3), int32(1), "x", "y", int64(1) << 40}}, nil); err != nil {
		t.Fatal(err)
	}
	// A reopen gives the recorded schema and position.
	lk2 := openLake(t, cfg)
	tb2, err := lk2.EnsureTable(ctx, s0) // information_schema may be older or newer: the recorded one wins
	if err != nil {
		t.Fatal(err)
	}
	if tb2.SchemaPos() != pos(2) || len(tb2.Schema.Columns) != 5 || tb2.Schema.Columns[4].Name != "num" {
		t.Errorf("reopened: %v %+v", tb2.SchemaPos(), tb2.Schema)
	}
	if n := len(readAll(t, lk2, tb2)); n != 3 {
		t.Errorf("%d rows after reopen", n)
	}

	// Truncate, then stop: both durable.
	if _, err := lk2.ApplyChange(ctx, tb2, Epoch{Number: 4, Pos: pos(4)}, &cdcsync.SchemaChange{Table: s0.ID, Kind: cdcsync.ChangeTruncate}); err != nil {
		t.Fatal(err)
	}
	if n := len(readAll(t, lk2, tb2)); n != 0 {
		t.Errorf("%d rows after truncate", n)
	}
	if c, _ := tb2.Committed(); c.Pos != pos(4) {
		t.Errorf("truncate committed at %v", c.Pos)
	}
	if _, err := lk2.ApplyChange(ctx, tb2, Epoch{Number: 5, Pos: pos(5)}, &cdcsync.SchemaChange{Table: s0.ID, Kind: cdcsync.ChangeStop, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	tb3, err := openLake(t, cfg).EnsureTable(ctx, s0)
	if err != nil {
		t.Fatal(err)
	}
	if info, ok := tb3.Stopped(); !ok || info.Reason != "test" || info.Position != pos(5) {
		t.Errorf("stop not durable: %+v %v", info, ok)
	}
}
