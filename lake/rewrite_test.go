package lake

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

// ckSchema has a composite key of five kinds and a payload column.
func ckSchema() *cdcsync.TableSchema {
	return &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "ck"}, Columns: []cdcsync.Column{
		{Name: "region", DataType: "varchar", ColumnType: "varchar(8)", Kind: cdcsync.KindString},
		{Name: "n", DataType: "int", ColumnType: "int(11)", Kind: cdcsync.KindInt32},
		{Name: "amount", DataType: "decimal", ColumnType: "decimal(10,2)", Kind: cdcsync.KindDecimal, Precision: 10, Scale: 2},
		{Name: "at", DataType: "datetime", ColumnType: "datetime(6)", Kind: cdcsync.KindTimestamp},
		{Name: "day", DataType: "date", ColumnType: "date", Kind: cdcsync.KindDate},
		{Name: "v", DataType: "varchar", ColumnType: "varchar(32)", Kind: cdcsync.KindString, Nullable: true},
	}, PrimaryKey: []int{0, 1, 2, 3, 4}}
}

func ckRow(k int, v string) cdcsync.Row {
	regions := []string{"eu", "us", "", "ap\x00x", "é"}
	var val any = v
	if v == "" {
		val = nil
	}
	return cdcsync.Row{regions[k%len(regions)], int32(k / 7), fmt.Sprintf("%d.%02d", k%13-6, k%100), int64(k%3) * 1_000_000_007, int32(k%5 - 2), val}
}

// TestRewriteGroup compacts tables after epochs of upserts and deletes with
// cdcsync's reader (rewriteGroup) and checks it against the model, against
// iceberg-go's ExecuteCompactionGroup on the same plan, and that it really
// ran (no fallback).
func TestRewriteGroup(t *testing.T) {
	for _, tc := range []struct {
		name      string
		schema    *cdcsync.TableSchema
		partition string
		row       func(k int, v string) cdcsync.Row
	}{
		{"int64 key", kvSchema(), "", func(k int, v string) cdcsync.Row { return cdcsync.Row{int64(k), v} }},
		{"int64 key, bucket partitions", kvSchema(), `["bucket(3, id)"]`, func(k int, v string) cdcsync.Row { return cdcsync.Row{int64(k), v} }},
		{"composite key", ckSchema(), "", ckRow},
		// (A NUL in an identity partition value makes a local warehouse's
		// directory name invalid: not this test's subject.)
		{"composite key, identity partitions", ckSchema(), `["region"]`, func(k int, v string) cdcsync.Row {
			r := ckRow(k, v)
			r[0] = strings.ReplaceAll(r[0].(string), "\x00", "-")
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			yaml := fmt.Sprintf("pipeline: p\nsource:\n  user: u\n  server_id: 7\n  include: [\"shop.*\"]\nwarehouse:\n  location: %s\ncatalog:\n  sql:\n    dsn: %s\n",
				filepath.Join(dir, "warehouse"), filepath.Join(dir, "catalog.db"))
			if tc.partition != "" {
				yaml += fmt.Sprintf("tables:\n  - match: %s\n    partition: %s\n", tc.schema.ID, tc.partition)
			}
			p := filepath.Join(dir, "p.yaml")
			if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(p)
			if err != nil {
				t.Fatal(err)
			}
			// rewriteGroup applies equality deletes itself; position
			// deletes go through iceberg-go's reader.
			cfg.Deletes.Mode = DeletesEquality
			tb, err := openLake(t, cfg).EnsureTable(ctx, tc.schema)
			if err != nil {
				t.Fatal(err)
			}
			key := func(r cdcsync.Row) string {
				var k []string
				for _, i := range tc.schema.PrimaryKey {
					k = append(k, fmt.Sprint(r[i]))
				}
				return strings.Join(k, "|")
			}
			model := map[string]cdcsync.Row{}
			r := rand.New(rand.NewPCG(5, 6))
			for epoch := int64(1); epoch <= 8; epoch++ {
				var deletes, rows []cdcsync.Row
				touched := map[string]bool{}
				for range 60 {
					k := r.IntN(200)
					row := tc.row(k, fmt.Sprintf("e%d-%d", epoch, r.IntN(1000)))
					if touched[key(row)] {
						continue
					}
					touched[key(row)] = true
					deletes = append(deletes, row)
					if epoch > 1 && r.IntN(4) == 0 {
						delete(model, key(row))
						continue
					}
					if r.IntN(10) == 0 {
						row[len(row)-1] = nil
					}
					rows = append(rows, row)
					model[key(row)] = row
				}
				if err := tb.Commit(ctx, Epoch{Number: epoch, Pos: pos(epoch)}, deletes, rows, nil); err != nil {
					t.Fatal(err)
				}
			}
			base := tb.Iceberg()
			tasks, err := base.Scan().PlanFiles(ctx)
			if err != nil {
				t.Fatal(err)
			}
			o := testOpts()
			o.Force = true
			groups, _ := selectCompaction(tasks, localScope, &o)
			if len(groups) == 0 {
				t.Fatal("nothing to compact")
			}
			var ours, theirs []cdcsync.Row
			for _, g := range groups {
				res, _, err := tb.rewriteGroup(ctx, base, g, o.TargetFileSize, nil)
				if err != nil {
					t.Fatalf("rewriteGroup: %v (it must handle this group itself)", err)
				}
				if len(res.OldDataFiles) != len(g.Tasks) || res.BytesBefore != g.TotalSizeBytes {
					t.Fatalf("result %+v for a group of %d files", res, len(g.Tasks))
				}
				ours = append(ours, readFiles(t, base, tc.schema, res)...)
				ref, err := table.ExecuteCompactionGroup(ctx, base, g)
				if err != nil {
					t.Fatal(err)
				}
				theirs = append(theirs, readFiles(t, base, tc.schema, ref)...)
			}
			want := sortedRows(slices.Collect(maps.Values(model)))
			if got := sortedRows(ours); !slices.Equal(got, want) {
				t.Fatalf("rewritten rows differ from the model:\n got %v\nwant %v", got, want)
			}
			if got, ref := sortedRows(ours), sortedRows(theirs); !slices.Equal(got, ref) {
				t.Fatalf("rewritten rows differ from iceberg-go's:\n ours   %v\ntheirs %v", got, ref)
			}
			// And through Compact, which commits it.
			res, err := tb.Compact(ctx, o)
			if err != nil || !res.Committed() {
				t.Fatalf("Compact: %+v, %v", res, err)
			}
			rows, err := ReadRows(ctx, tb.Iceberg(), tc.schema, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := sortedRows(rows); !slices.Equal(got, want) {
				t.Fatalf("table after Compact differs from the model:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// sortedRows prints rows, sorted, for comparing row sets.
func sortedRows(rows []cdcsync.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprint(r)
	}
	slices.Sort(out)
	return out
}

// readFiles reads the new data files of a group result as rows.
func readFiles(t *testing.T, tbl *table.Table, ts *cdcsync.TableSchema, res table.CompactionGroupResult) []cdcsync.Row {
	t.Helper()
	var tasks []table.FileScanTask
	for _, f := range res.NewDataFiles {
		tasks = append(tasks, table.FileScanTask{File: f, Start: 0, Length: f.FileSizeBytes()})
	}
	if len(tasks) == 0 {
		return nil
	}
	_, recs, err := tbl.Scan().ReadTasks(context.Background(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	var out []cdcsync.Row
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		rows, err := rowsFromBatch(rec, ts)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
	}
	return out
}

// DeleteColumns, which the epoch buffer trims before images to, are the key
// and the partition source columns.
func TestDeleteColumns(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	yaml := fmt.Sprintf("pipeline: p\nsource:\n  user: u\n  server_id: 7\n  include: [\"shop.*\"]\nwarehouse:\n  location: %s\ncatalog:\n  sql:\n    dsn: %s\n"+
		"tables:\n  - match: shop.ck\n    partition: [\"bucket(4, v)\", \"day(at)\"]\n",
		filepath.Join(dir, "warehouse"), filepath.Join(dir, "catalog.db"))
	p := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	lk := openLake(t, cfg)
	ck, err := lk.EnsureTable(ctx, ckSchema())
	if err != nil {
		t.Fatal(err)
	}
	got := ck.DeleteColumns()
	slices.Sort(got)
	if fmt.Sprint(got) != "[0 1 2 3 4 5]" { // the five key columns and v; at is in the key
		t.Fatalf("DeleteColumns of a table keyed by columns 0-4 and partitioned by v and at = %v", got)
	}
	kv, err := lk.EnsureTable(ctx, kvSchema())
	if err != nil {
		t.Fatal(err)
	}
	if got := kv.DeleteColumns(); fmt.Sprint(got) != "[0]" {
		t.Fatalf("DeleteColumns of an unpartitioned table keyed by column 0 = %v", got)
	}
}

// TestCompactReadsFilesOfOlderSchemas: compaction reads a file written
// under the table's current schema with cdcsync's Parquet reader, and one
// written before a schema change (a column renamed and widened since)
// through iceberg-go, which projects it: the rows come out right either
// way.
func TestCompactReadsFilesOfOlderSchemas(t *testing.T) {
	ctx := context.Background()
	lk := openLake(t, kvConfig(t, t.TempDir(), "p"))
	s0 := evolveSchemaOf()
	tb, err := lk.EnsureTable(ctx, s0)
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil,
		[]cdcsync.Row{{int64(1), "a1", "b1", int32(10)}, {int64(2), "a2", nil, int32(20)}, {int64(3), "a3", "b3", nil}}, nil); err != nil {
		t.Fatal(err)
	}
	s1 := &cdcsync.TableSchema{ID: s0.ID, Columns: []cdcsync.Column{s0.Columns[0], s0.Columns[1], s0.Columns[2],
		{Name: "num", DataType: "bigint", ColumnType: "bigint(20)", Kind: cdcsync.KindInt64, Nullable: true}}, PrimaryKey: []int{0}}
	ch := &cdcsync.SchemaChange{Table: s0.ID, Kind: cdcsync.ChangeSchema, Schema: s1,
		Sources: []cdcsync.ColumnSource{{From: "id"}, {From: "a"}, {From: "b"}, {From: "n"}}, Fills: []any{nil, nil, nil, nil}}
	if _, err := lk.ApplyChange(ctx, tb, Epoch{Number: 2, Pos: pos(2)}, ch); err != nil {
		t.Fatal(err)
	}
	up := []cdcsync.Row{{int64(2), "a2'", "b2'", int64(1) << 40}, {int64(4), "a4", nil, int64(4)}}
	if err := tb.Commit(ctx, Epoch{Number: 3, Pos: pos(3)}, []cdcsync.Row{{int64(2), nil, nil, nil}, {int64(4), nil, nil, nil}}, up, nil); err != nil {
		t.Fatal(err)
	}

	tasks, fsys := planWithFS(t, tb.Iceberg())
	plain := map[int64]bool{} // by the file's row count: 3 before the change, 2 after
	for _, tk := range tasks {
		sc, err := readSchema(ctx, tb.Iceberg(), tk)
		if err != nil {
			t.Fatal(err)
		}
		pr, _, err := openPlainReader(fsys, tk.File.FilePath(), memory.DefaultAllocator, columnsForm{sc, tb.Iceberg().Schema()})
		if err != nil {
			t.Fatal(err)
		}
		if pr != nil {
			pr.close()
		}
		plain[tk.File.Count()] = pr != nil
	}
	if len(plain) != 2 || plain[3] || !plain[2] {
		t.Fatalf("read with cdcsync's reader, by the file's rows: %v; want only the file written after the change", plain)
	}

	o := testOpts()
	o.Force = true
	if res, err := tb.Compact(ctx, o); err != nil || !res.Committed() {
		t.Fatalf("compact: %+v, %v", res, err)
	}
	want := []cdcsync.Row{{int64(1), "a1", "b1", int64(10)}, {int64(2), "a2'", "b2'", int64(1) << 40}, {int64(3), "a3", "b3", nil}, {int64(4), "a4", nil, int64(4)}}
	if got := readAll(t, lk, tb); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows after compaction\n got %v\nwant %v", got, want)
	}
}

// TestCompactionWriterRollsFiles: cdcsync's compaction writer (groups in
// the current spec) writes each partition's live rows into files that roll
// once their written pages pass the target size, in row groups of at most
// rewriteRowGroupRows rows, with the group's partition values: the table
// reads back whole.
func TestCompactionWriterRollsFiles(t *testing.T) {
	ctx := context.Background()
	tb, err := openLake(t, partitionedConfig(t, t.TempDir(), "", "day(created_at)")).EnsureTable(ctx, ordersSchema())
	if err != nil {
		t.Fatal(err)
	}
	model := map[int64]cdcsync.Row{}
	r := rand.New(rand.NewPCG(5, 5))
	for e := int64(1); e <= 3; e++ {
		var rows []cdcsync.Row
		for i := range int64(70_000) {
			id := (e-1)*70_000 + i + 1
			// Two days; incompressible notes, so that files roll.
			model[id] = orderRow(id, id%2, fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64()))
			rows = append(rows, model[id])
		}
		if err := tb.Commit(ctx, Epoch{Number: e, Pos: pos(e)}, nil, rows, nil); err != nil {
			t.Fatal(err)
		}
	}
	o := testOpts()
	o.Force, o.TargetFileSize = true, 256<<10
	res, err := tb.Compact(ctx, o)
	if err != nil || !res.Committed() {
		t.Fatalf("Compact: %+v, %v", res, err)
	}
	assertOrders(t, tb.Iceberg(), model)
	tasks, fsys := planWithFS(t, tb.Iceberg())
	perPart := map[string]int{}
	for _, tk := range tasks {
		df := tk.File
		perPart[partitionKey(df)]++
		pr, err := openParquetReader(fsys, df.FilePath(), 1<<16, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		md := pr.pf.MetaData()
		for g := range md.NumRowGroups() {
			if n := md.RowGroup(g).NumRows(); n > rewriteRowGroupRows {
				t.Errorf("%s: row group %d holds %d rows, more than %d", df.FilePath(), g, n, rewriteRowGroupRows)
			}
		}
		pr.close()
	}
	if len(perPart) != 2 || slices.Min(slices.Collect(maps.Values(perPart))) < 2 {
		t.Fatalf("files per partition %v: want two partitions, each rolled over several files", perPart)
	}
}

// planWithFS plans a scan of tbl's current snapshot and returns its tasks
// and the table's file IO, to read the files with.
func planWithFS(t *testing.T, tbl *table.Table) ([]table.FileScanTask, icebergio.IO) {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tasks, fsys
}
