package lake

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkKeyIndexRebuild measures the rebuild of a key index from the
// table (what a moved daemon or a lost index costs): 1M rows of the bench
// table in five data files, 50,000 of them updated by position deletes,
// read back key columns only, deletes applied, into pebble.
func BenchmarkKeyIndexRebuild(b *testing.B) {
	_, t := benchTable(b)
	ctx := context.Background()
	const files, perFile = 5, 200_000
	for f := 0; f < files; f++ {
		rows := benchRows(perFile)
		for i := range rows {
			rows[i][0] = int64(f*perFile + i + 1)
		}
		pos := binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: fmt.Sprintf("0-1-%d", f+1)}.Position()
		if err := t.Commit(ctx, Epoch{Number: int64(f + 1), Pos: pos}, nil, rows, nil); err != nil {
			b.Fatal(err)
		}
	}
	upd := benchRows(50_000)
	for i := range upd {
		upd[i][0] = int64(i*20 + 1)
	}
	pos := binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: fmt.Sprintf("0-1-%d", files+1)}.Position()
	if err := t.Commit(ctx, Epoch{Number: files + 1, Pos: pos}, upd, upd, nil); err != nil {
		b.Fatal(err)
	}
	tbl := t.current()
	h := tbl.CurrentSnapshot()
	const n = files * perFile
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := t.state.keys.rebuildRows.Load()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuNow()
	for i := 0; i < b.N; i++ {
		if err := t.rebuildIndex(ctx, tbl, h); err != nil {
			b.Fatal(err)
		}
	}
	elapsed, cpu := time.Since(start), cpuNow()-cpu0
	b.StopTimer()
	if got := t.state.keys.rebuildRows.Load() - before; got != int64(b.N)*n {
		b.Fatalf("the rebuilds indexed %d rows, want %d per run", got, n)
	}
	perRow(b, n, ms, elapsed, cpu, 0)
}
