package lake

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/merge"
	"github.com/cdcsync/cdcsync/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A row the lake refuses at commit, after decoding (here a value of the
// wrong Go type, as a decoder bug would hand over), stops its table only:
// the stop is persisted in the Iceberg table at the position before the
// epoch, the other table commits the epoch and every later one, the
// checkpoint passes the epoch, and the pipeline does not fail.
func TestSinkStopsTheTableOfARefusedValue(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	yaml := "pipeline: p\nsource:\n  user: u\n  server_id: 7\n  include: [\"shop.*\"]\nwarehouse:\n  location: " +
		filepath.Join(dir, "warehouse") + "\ncatalog:\n  sql:\n    dsn: " + filepath.Join(dir, "catalog.db") + "\n"
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	lk, err := Open(ctx, OptionsFrom(cfg), log)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	lk.SetKeyIndex(openKeyIndex(t, filepath.Join(dir, "keys")))
	schema := func(name string) *cdcsync.TableSchema {
		return &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: name}, Columns: []cdcsync.Column{
			{Name: "id", DataType: "bigint", ColumnType: "bigint(20)", Kind: cdcsync.KindInt64},
			{Name: "v", DataType: "varchar", ColumnType: "varchar(32)", Kind: cdcsync.KindString, Nullable: true},
		}, PrimaryKey: []int{0}}
	}
	good, bad := schema("good"), schema("bad")
	tables := map[cdcsync.TableID]*Table{} // the sink's: it forgets stopped tables
	held := map[cdcsync.TableID]*Table{}
	var specs []merge.Table
	for _, s := range []*cdcsync.TableSchema{good, bad} {
		tb, err := lk.EnsureTable(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		tables[s.ID], held[s.ID] = tb, tb
		specs = append(specs, merge.Table{Schema: s})
	}
	m := metrics.New()
	sink := lk.NewSink(tables, m, lk.NewMaintainer(cfg.Maintenance, nil))
	at := func(n int) cdcsync.Position {
		return binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: "0-1-" + string(rune('0'+n))}.Position()
	}
	txn := func(n int, changes ...cdcsync.Change) *cdcsync.Txn {
		return &cdcsync.Txn{GTID: "0-1-" + string(rune('0'+n)), Pos: at(n), Time: time.Now(), Changes: changes, Bytes: 10}
	}
	ins := func(s *cdcsync.TableSchema, id int64, v any) cdcsync.Change {
		return cdcsync.Change{Table: s.ID, Op: cdcsync.OpInsert, After: cdcsync.Row{id, v}}
	}
	p := merge.New(sink, specs, 1, at(0), merge.Options{Order: binlogpos.Order{}, Interval: time.Hour, MaxRows: 4, MaxBytes: 1 << 30,
		CommitConcurrency: 2, RetryBackoff: time.Millisecond}, log, nil)
	ch := make(chan *cdcsync.Txn, 4)
	ch <- txn(1, ins(good, 1, "a"), ins(bad, 1, "a"))
	ch <- txn(2, ins(good, 2, "b"), ins(bad, 2, 42)) // 42: not a string
	ch <- txn(3, ins(good, 3, "c"), ins(bad, 3, "c"))
	close(ch)
	if err := p.Run(ctx, ch); err != nil {
		t.Fatalf("run: %v; a value the lake refuses must stop its table only", err)
	}
	info, stopped := held[bad.ID].Stopped()
	if !stopped {
		t.Fatal("shop.bad is not stopped")
	}
	for _, want := range []string{"id=2", "column v", "42", at(2).String()} {
		if !strings.Contains(info.Reason, want) {
			t.Errorf("the stop's reason %q does not name %q", info.Reason, want)
		}
	}
	if info.Position != at(0) || !info.NoRecopy {
		t.Errorf("stopped at %v (no recopy %v), want at %v, before the refused epoch, with no recopy", info.Position, info.NoRecopy, at(0))
	}
	rows, err := ReadRows(ctx, held[bad.ID].Iceberg(), bad, 0)
	if err != nil || len(rows) != 0 {
		t.Errorf("shop.bad holds %v (%v), want nothing of the refused epoch", rows, err)
	}
	rows, err = ReadRows(ctx, held[good.ID].Iceberg(), good, 0)
	if err != nil || len(rows) != 3 {
		t.Errorf("shop.good holds %v (%v), want its 3 rows", rows, err)
	}
	ck, ok, err := lk.LoadCheckpoint(ctx)
	if err != nil || !ok || ck.Pos != at(3) {
		t.Errorf("checkpoint %v (found %v, %v), want %v", ck.Pos, ok, err, at(3))
	}
	if got := testutil.ToFloat64(m.ManifestCacheLimit); got != float64(entryBudgetBytes(0)) {
		t.Errorf("cdcsync_manifest_cache_limit_bytes is %v without memory_limit, want %d", got, entryBudgetBytes(0))
	}
}

// Sink is what the pipeline needs of the lake, with every optional part.
var (
	_ merge.Sink           = (*Sink)(nil)
	_ merge.DDLSink        = (*Sink)(nil)
	_ merge.CopySink       = (*Sink)(nil)
	_ merge.Maintainer     = (*Sink)(nil)
	_ merge.RowFinder      = (*Sink)(nil)
	_ merge.DeleteColumner = (*Sink)(nil)
)
