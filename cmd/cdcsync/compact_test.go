package main

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/lake"
)

// `cdcsync compact` while no daemon runs tells the key index where the rows
// it moved went: the daemon's next commit reads none of the files back. With
// the index held by a daemon it compacts without it.
// compactEnv is a pipeline's shop.orders, partitioned by day, and a way
// to commit epochs to it as a daemon does.
type compactEnv struct {
	cfg   *config.Config
	log   *slog.Logger
	epoch int64
}

func newCompactEnv(t *testing.T) *compactEnv {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	yaml := fmt.Sprintf("pipeline: p\nsource:\n  user: u\n  server_id: 7\n  include: [\"shop.*\"]\nwarehouse:\n  location: %s\ncatalog:\n  sql:\n    dsn: %s\n"+
		"deletes:\n  index_dir: %s\ntables:\n  - match: shop.orders\n    partition: [\"day(created_at)\"]\n",
		filepath.Join(dir, "warehouse"), filepath.Join(dir, "catalog.db"), filepath.Join(dir, "index"))
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return &compactEnv{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

var ordersSchema = &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "orders"}, Columns: []cdcsync.Column{
	{Name: "id", DataType: "bigint", ColumnType: "bigint(20)", Kind: cdcsync.KindInt64},
	{Name: "created_at", DataType: "datetime", ColumnType: "datetime(6)", Kind: cdcsync.KindTimestamp, Nullable: true},
	{Name: "note", DataType: "varchar", ColumnType: "varchar(32)", Kind: cdcsync.KindString, Nullable: true},
}, PrimaryKey: []int{0}}

// order is order id created day days after 1970-01-01.
func order(id, day int64, note string) cdcsync.Row {
	return cdcsync.Row{id, day * 86_400_000_000, note}
}

// daemon opens the lake with the key index as a daemon does, commits rows
// and deletes of rows in one epoch, and returns the table's key index
// counts after it.
func (e *compactEnv) daemon(t *testing.T, dels, rows []cdcsync.Row) lake.IndexCounts {
	t.Helper()
	ctx := context.Background()
	keys, err := openKeyIndex(e.cfg, e.log)
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	lk, err := lake.Open(ctx, lake.OptionsFrom(e.cfg), e.log)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	lk.SetKeyIndex(keys.DB)
	tb, err := lk.EnsureTable(ctx, ordersSchema)
	if err != nil {
		t.Fatal(err)
	}
	e.epoch++
	if err := tb.Commit(ctx, lake.Epoch{Number: e.epoch, Pos: binlogpos.Pos{File: "binlog.000001", Offset: uint32(e.epoch)}.Position()}, dels, rows, nil); err != nil {
		t.Fatal(err)
	}
	c, ok := tb.IndexCounts()
	if !ok {
		t.Fatal("the table has no key index open")
	}
	return c
}

// table opens shop.orders as it is now.
func (e *compactEnv) table(t *testing.T) *lake.Table {
	t.Helper()
	ctx := context.Background()
	lk, err := lake.Open(ctx, lake.OptionsFrom(e.cfg), e.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.Close() })
	tb, err := lk.OpenTable(ctx, "shop.orders")
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// `cdcsync compact` while no daemon runs tells the key index where the rows it
// moved went: the daemon's next commit reads none of the files back. With
// the index held by a daemon it compacts without it.
func TestCompactByHandKeepsKeyIndex(t *testing.T) {
	ctx := context.Background()
	e := newCompactEnv(t)
	cfg := e.cfg
	log := e.log
	row := func(id int64, note string) cdcsync.Row { return order(id, id, note) }
	daemon := func(dels, rows []cdcsync.Row) lake.IndexCounts { return e.daemon(t, dels, rows) }
	// 300 orders of 300 days: one staged file.
	var rows []cdcsync.Row
	for id := int64(1); id <= 300; id++ {
		rows = append(rows, row(id, "v0"))
	}
	daemon(nil, rows)

	var stdout, stderr bytes.Buffer
	if err := runCompact(ctx, cfg, "shop.orders", 0, &stdout, &stderr); err != nil {
		t.Fatalf("compact: %v\n%s", err, stderr.String())
	}
	c := daemon(rows[:10], []cdcsync.Row{row(1, "v1"), row(2, "v1")})
	if c.ReplayReads != 0 || c.Rebuilds != 0 {
		t.Errorf("after a compaction by hand the daemon's commit read %d files back and rebuilt the index %d times, want 0 and 0\n%s", c.ReplayReads, c.Rebuilds, stdout.String())
	}
	// The index is right: a reader sees each order once, the updated ones
	// updated.
	got, err := e.table(t).ReadRows(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{1: "v1", 2: "v1"}
	for id := int64(11); id <= 300; id++ {
		want[id] = "v0"
	}
	if len(got) != len(want) {
		t.Fatalf("the table has %d rows, want %d", len(got), len(want))
	}
	for _, r := range got {
		if id := r[0].(int64); want[id] != r[2] {
			t.Errorf("order %d: note %v, want %q", id, r[2], want[id])
		}
	}

	// A daemon holds the index: the compaction runs without it.
	held, err := openKeyIndex(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	stdout.Reset()
	if err := runCompact(ctx, cfg, "shop.orders", 0, &stdout, &stderr); err != nil {
		t.Fatalf("compact next to a daemon: %v\n%s", err, stderr.String())
	}
}

// TestCompactByHandLeavesOneFilePerPartition: staged rows that a compaction
// by hand moves into partitions that have a file already end up in that
// file, not next to it (a run moves them to a file of their own; the
// command merges them in a second pass).
func TestCompactByHandLeavesOneFilePerPartition(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"position", "dv"} {
		t.Run(mode, func(t *testing.T) {
			e := newCompactEnv(t)
			e.cfg.Deletes.Mode = mode
			want := map[int64]string{}
			// 300 orders of 300 days, staged; compacted into 300 files.
			var rows []cdcsync.Row
			for id := int64(1); id <= 300; id++ {
				rows = append(rows, order(id, id, "v0"))
				want[id] = "v0"
			}
			e.daemon(t, nil, rows)
			var stdout, stderr bytes.Buffer
			if err := runCompact(ctx, e.cfg, "shop.orders", 0, &stdout, &stderr); err != nil {
				t.Fatalf("compact: %v\n%s", err, stderr.String())
			}
			// 300 more orders on the same days, and updates of 100: staged.
			rows = rows[:0]
			var dels []cdcsync.Row
			for id := int64(1); id <= 100; id++ {
				dels = append(dels, order(id, id, "v0"))
				rows = append(rows, order(id, id, "v1"))
				want[id] = "v1"
			}
			for id := int64(301); id <= 600; id++ {
				rows = append(rows, order(id, id-300, "v0"))
				want[id] = "v0"
			}
			e.daemon(t, dels, rows)
			stdout.Reset()
			if err := runCompact(ctx, e.cfg, "shop.orders", 0, &stdout, &stderr); err != nil {
				t.Fatalf("compact: %v\n%s", err, stderr.String())
			}
			tb := e.table(t)
			if st := tb.Stats(); st.DataFiles != 300 || st.DeleteFiles != 0 {
				t.Errorf("after the compaction by hand %d data files and %d delete files, want 300 (one a day) and 0\n%s", st.DataFiles, st.DeleteFiles, stdout.String())
			}
			got, err := tb.ReadRows(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("the table has %d rows, want %d", len(got), len(want))
			}
			for _, r := range got {
				if id := r[0].(int64); want[id] != r[2] {
					t.Errorf("order %d: note %v, want %q", id, r[2], want[id])
				}
			}
		})
	}
}
