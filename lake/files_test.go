package lake

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

// ordersSchema is an orders table keyed by id with a DATETIME to partition on.
func ordersSchema() *cdcsync.TableSchema {
	return &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "orders"}, Columns: []cdcsync.Column{
		{Name: "id", DataType: "bigint", ColumnType: "bigint(20)", Kind: cdcsync.KindInt64},
		{Name: "created_at", DataType: "datetime", ColumnType: "datetime(6)", Kind: cdcsync.KindTimestamp, Nullable: true},
		{Name: "note", DataType: "varchar", ColumnType: "varchar(32)", Kind: cdcsync.KindString, Nullable: true},
	}, PrimaryKey: []int{0}}
}

// partitionedConfig is kvConfig with the orders table partitioned by spec.
func partitionedConfig(t testing.TB, dir string, extra string, spec ...string) *config.Config {
	t.Helper()
	parts := ""
	for i, s := range spec {
		if i > 0 {
			parts += ", "
		}
		parts += fmt.Sprintf("%q", s)
	}
	yaml := fmt.Sprintf("pipeline: p\nsource:\n  user: u\n  server_id: 7\n  include: [\"shop.*\"]\nwarehouse:\n  location: %q\n%scatalog:\n  sql:\n    dsn: %q\n"+
		"tables:\n  - match: shop.orders\n    partition: [%s]\n",
		filepath.Join(dir, "warehouse"), extra, filepath.Join(dir, "catalog.db"), parts)
	return loadConfig(t, filepath.Join(dir, "p.yaml"), yaml)
}

const microsPerDay = int64(86_400_000_000)

// orderRow is order id created day days after 1970-01-01.
func orderRow(id int64, day int64, note string) cdcsync.Row {
	return cdcsync.Row{id, day*microsPerDay + id%1000, note}
}

// limitOpenFiles lowers the process's soft RLIMIT_NOFILE to what is open now
// plus headroom, until the returned function or the end of the test.
func limitOpenFiles(t *testing.T, headroom uint64) (restore func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = uint64(len(ents)) + headroom
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	restore = func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(restore)
	return restore
}

func orderModel(rows []cdcsync.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprint(r...)
	}
	sort.Strings(out)
	return out
}

func assertOrders(t *testing.T, tbl *table.Table, want map[int64]cdcsync.Row) {
	t.Helper()
	got, err := ReadRows(context.Background(), tbl, ordersSchema(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var w []cdcsync.Row
	for _, r := range want {
		w = append(w, r)
	}
	g, wm := orderModel(got), orderModel(w)
	if len(g) != len(wm) {
		t.Fatalf("the table holds %d rows, want %d", len(g), len(wm))
	}
	for i := range g {
		if g[i] != wm[i] {
			t.Fatalf("row %d: got %s, want %s", i, g[i], wm[i])
		}
	}
}

// TestCommitManyPartitionsLowFileLimit: an epoch that touches thousands of
// partitions commits every row and every delete under an open-file limit
// far below the partition count (issue 22: the fanout writers lost the rows
// of every partition whose file failed to open, without an error).
func TestCommitManyPartitionsLowFileLimit(t *testing.T) {
	for _, spec := range [][]string{{"day(created_at)", "bucket(8, id)"}, {"day(created_at)"}, {"bucket(64, id)"}} {
		t.Run(fmt.Sprint(spec), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			lk := openLake(t, partitionedConfig(t, dir, eqMode, spec...))
			tb, err := lk.EnsureTable(ctx, ordersSchema())
			if err != nil {
				t.Fatal(err)
			}
			limitOpenFiles(t, 64)

			const n = 3000
			model := map[int64]cdcsync.Row{}
			var rows []cdcsync.Row
			for id := int64(1); id <= n; id++ {
				r := orderRow(id, id*3, "v1") // one day each, over 25 years
				rows = append(rows, r)
				model[id] = r
			}
			if err := tb.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, rows, nil); err != nil {
				t.Fatal(err)
			}
			assertOrders(t, tb.Iceberg(), model)

			// Every row moves by a day: the deletes go to the old partitions.
			var dels []cdcsync.Row
			rows = rows[:0]
			for id := int64(1); id <= n; id++ {
				if id%5 == 0 {
					dels = append(dels, model[id])
					delete(model, id)
					continue
				}
				dels = append(dels, model[id])
				r := orderRow(id, id*3+1, "v2")
				rows = append(rows, r)
				model[id] = r
			}
			if err := tb.Commit(ctx, Epoch{Number: 2, Pos: pos(2)}, dels, rows, nil); err != nil {
				t.Fatal(err)
			}
			assertOrders(t, tb.Iceberg(), model)
			// The 3,000 deletes of thousands of partitions are one global
			// file (issue 23), under the table's unpartitioned spec.
			props := tb.Iceberg().CurrentSnapshot().Summary.Properties
			if got := props["added-delete-files"]; got != "1" {
				t.Errorf("the epoch added %s delete files, want 1 global file", got)
			}
			if _, ok := unpartitionedSpec(tb.Iceberg().Metadata()); !ok {
				t.Error("the table has no unpartitioned spec for its global deletes")
			}
		})
	}
}

// TestCommitFileErrorFails: a file that cannot be opened fails the commit
// with the cause, leaves the table as it was, and the retry commits it all.
func TestCommitFileErrorFails(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	lk := openLake(t, partitionedConfig(t, dir, "", "day(created_at)", "bucket(8, id)"))
	tb, err := lk.EnsureTable(ctx, ordersSchema())
	if err != nil {
		t.Fatal(err)
	}
	model := map[int64]cdcsync.Row{}
	var rows []cdcsync.Row
	for id := int64(1); id <= 500; id++ {
		r := orderRow(id, id%3, "v1") // 24 partitions: a file each, none staged
		rows = append(rows, r)
		model[id] = r
	}
	restore := limitOpenFiles(t, 0)
	// The limit counts the descriptor limitOpenFiles read /proc/self/fd
	// with, closed since: take it, so that no file can open whatever the
	// order the writers open and close theirs in.
	spare, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	err = tb.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, rows, nil)
	spare.Close()
	restore()
	if err == nil || !strings.Contains(err.Error(), "too many open files") {
		t.Fatalf("commit under no free file descriptor: got %v, want an error naming too many open files", err)
	}
	if c, err := tb.Committed(); err != nil || c.Found {
		t.Fatalf("after the failed commit the table records %+v (%v), want nothing", c, err)
	}
	if err := tb.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, rows, nil); err != nil {
		t.Fatal(err)
	}
	assertOrders(t, tb.Iceberg(), model)
}

func TestCheckRowCount(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	lk := openLake(t, partitionedConfig(t, dir, "", "bucket(4, id)"))
	tb, err := lk.EnsureTable(ctx, ordersSchema())
	if err != nil {
		t.Fatal(err)
	}
	rows := []cdcsync.Row{orderRow(1, 1, "a"), orderRow(2, 2, "b"), orderRow(3, 3, "c")}
	files, err := tb.writeFiles(ctx, tb.Iceberg(), tb.dataFile, rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkRowCount(files, 3); err != nil {
		t.Fatalf("the files of 3 rows: %v", err)
	}
	err = checkRowCount(files[1:], 3)
	if err == nil || !strings.Contains(err.Error(), "hold") || !strings.Contains(err.Error(), "3 were handed") {
		t.Fatalf("files missing a partition's rows: got %v, want the counts named", err)
	}
}

// TestRewriteManyPartitionsLowFileLimit: a schema change that rewrites every
// row (a new column with a default) of a table over thousands of
// partitions commits under an open-file limit far below that count.
func TestRewriteManyPartitionsLowFileLimit(t *testing.T) {
	for _, stage := range []bool{false, true} {
		t.Run(fmt.Sprintf("staged=%v", stage), func(t *testing.T) { testRewriteManyPartitions(t, stage) })
	}
}

// testRewriteManyPartitions: with stage false, epochs write a file per
// partition (tables[].stage_above: 0).
func testRewriteManyPartitions(t *testing.T, stage bool) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := partitionedConfig(t, dir, "", "day(created_at)", "bucket(4, id)")
	if !stage {
		cfg.Tables[0].StageAbove = new(0)
	}
	lk := openLake(t, cfg)
	s0 := ordersSchema()
	tb, err := lk.EnsureTable(ctx, s0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	var rows, dels []cdcsync.Row
	day := func(id int64) int64 { return (id * 7919) % 9973 } // in no order of id
	for id := int64(1); id <= n; id++ {
		rows = append(rows, orderRow(id, day(id), "v1"))
	}
	if err := tb.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, rows, nil); err != nil {
		t.Fatal(err)
	}
	// The odd rows move to the day of the next even one: two staged files
	// (staged.go), each with rows of the same partitions.
	var moved []cdcsync.Row
	for id := int64(1); id <= n; id += 2 {
		dels = append(dels, rows[id-1])
		moved = append(moved, orderRow(id, day(id+1), "v2"))
	}
	if err := tb.Commit(ctx, Epoch{Number: 2, Pos: pos(2)}, dels, moved, nil); err != nil {
		t.Fatal(err)
	}
	limitOpenFiles(t, 64)
	s1 := &cdcsync.TableSchema{ID: s0.ID, Columns: append(slices.Clone(s0.Columns),
		cdcsync.Column{Name: "w", DataType: "int", ColumnType: "int(11)", Kind: cdcsync.KindInt32}), PrimaryKey: []int{0}}
	fill := "7"
	ch := &cdcsync.SchemaChange{Table: s0.ID, Kind: cdcsync.ChangeSchema, Schema: s1,
		Sources: []cdcsync.ColumnSource{{From: "id"}, {From: "created_at"}, {From: "note"}, {Fill: &fill}},
		Fills:   []any{nil, nil, nil, int32(7)}}
	if _, err := lk.ApplyChange(ctx, tb, Epoch{Number: 3, Pos: pos(3)}, ch); err != nil {
		t.Fatal(err)
	}
	got, err := tb.ReadRows(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("after the rewrite the table holds %d rows, want %d", len(got), n)
	}
	for _, r := range got {
		if r[3] != int32(7) {
			t.Fatalf("row %v: w is %v, want 7", r, r[3])
		}
	}
	// Staged rows are in no order of partition, which the clustered
	// writer of the partitioned ones needs past one batch: they are
	// written staged again.
	unpart, _ := unpartitionedSpec(tb.Iceberg().Metadata())
	if got := liveDataFiles(t, tb.Iceberg()); stage && got[int32(unpart.ID())] == 0 {
		t.Errorf("data files by spec after the rewrite: %v; the staged rows were not staged again", got)
	}
}

// eqMode is the partitionedConfig extra of the tests of equality mode.
const eqMode = "deletes:\n  mode: equality\n"

// TestWarehousePathWithURLCharacters: a local warehouse and a SQLite
// catalog whose paths hold characters a URL escapes (a space, parentheses,
// a percent sign, #) are created and written where the user said, and
// nowhere else (Open created an empty directory at the escaped path, next
// to the real one; SQLite could not open a catalog path with % in it, and
// config refused one with #).
func TestWarehousePathWithURLCharacters(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	dir := filepath.Join(parent, "my lake (test) #2 100%")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lk := openLake(t, partitionedConfig(t, dir, eqMode, "bucket(4, id)"))
	tb, err := lk.EnsureTable(ctx, ordersSchema())
	if err != nil {
		t.Fatal(err)
	}
	model := map[int64]cdcsync.Row{}
	var rows []cdcsync.Row
	for id := int64(1); id <= 10; id++ {
		model[id] = orderRow(id, id, "v1")
		rows = append(rows, model[id])
	}
	if err := tb.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, rows, nil); err != nil {
		t.Fatal(err)
	}
	assertOrders(t, tb.Iceberg(), model)
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != filepath.Base(dir) {
			t.Errorf("%s holds %q next to the warehouse's directory %q", parent, e.Name(), filepath.Base(dir))
		}
	}
	data, err := filepath.Glob(filepath.Join(dir, "warehouse", "shop.db", "orders", "data", "*", "*.parquet"))
	if err != nil || len(data) == 0 {
		t.Errorf("no data file under %s (%v)", filepath.Join(dir, "warehouse"), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "catalog.db")); err != nil {
		t.Errorf("the catalog is not where the configuration says: %v", err)
	}
}
