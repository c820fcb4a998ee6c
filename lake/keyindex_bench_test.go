package lake

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
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
	benchRebuild(b, t, files*perFile)
}

// benchRebuild rebuilds t's index from its current snapshot b.N times and
// reports the cost per row; the table has rows live rows.
func benchRebuild(b *testing.B, t *Table, rows int) {
	ctx := context.Background()
	tbl := t.current()
	h := tbl.CurrentSnapshot()
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
	if got := t.state.keys.rebuildRows.Load() - before; got != int64(b.N)*int64(rows) {
		b.Fatalf("the rebuilds indexed %d rows, want %d per run", got, rows)
	}
	perRow(b, rows, ms, elapsed, cpu, 0)
}

// BenchmarkKeyIndexRebuildSmallEpochs measures the rebuild of the index of
// a table that took many small epochs and no compaction yet (a daemon that
// takes over a pipeline, or restarts without its index, between two
// compactions): 10,000 rows, then 200 epochs of 50 updates each, every
// epoch a data file and a position delete file that may apply to every
// older data file.
func BenchmarkKeyIndexRebuildSmallEpochs(b *testing.B) {
	_, t := benchTable(b)
	ctx := context.Background()
	const rows, epochs, perEpoch = 10_000, 200, 50
	commit := func(n int64, deletes, rows []cdcsync.Row) {
		pos := binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: fmt.Sprintf("0-1-%d", n)}.Position()
		if err := t.Commit(ctx, Epoch{Number: n, Pos: pos}, deletes, rows, nil); err != nil {
			b.Fatal(err)
		}
	}
	commit(1, nil, benchRows(rows))
	r := rand.New(rand.NewPCG(3, 4))
	for e := 0; e < epochs; e++ {
		upd := benchRows(perEpoch)
		for i := range upd {
			upd[i][0] = 1 + r.Int64N(rows)
		}
		slices.SortFunc(upd, func(a, b cdcsync.Row) int { return cmp.Compare(a[0].(int64), b[0].(int64)) })
		upd = slices.CompactFunc(upd, func(a, b cdcsync.Row) bool { return a[0] == b[0] })
		commit(int64(e+2), upd, upd)
	}
	benchRebuild(b, t, rows)
}
