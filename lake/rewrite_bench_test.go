package lake

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
)

// BenchmarkCompactEpochs compacts the bench table (200,000 rows) after 20
// epochs of 10,000 upserts each, the shape in-process maintenance meets on
// an unpartitioned table, with cdcsync's reader (rewriteGroup) and with
// iceberg-go's ExecuteCompactionGroup (both with the same batch and queue
// bounds, so that they differ in how they apply deletes), and reports CPU and the peak of the
// live heap during the rewrite (a forced collection every 25 ms, which
// adds a little CPU to both):
//
//	go test ./lake/ -run '^$' -bench CompactEpochs -benchtime 1x
func BenchmarkCompactEpochs(b *testing.B) {
	const rows, epochs, perEpoch = 200_000, 20, 10_000
	_, t := benchTable(b)
	ctx := context.Background()
	base := benchRows(rows)
	if err := t.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, base, nil); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	for e := int64(2); e <= epochs+1; e++ {
		seen := map[int64]bool{}
		var ups []cdcsync.Row
		for len(ups) < perEpoch {
			id := 1 + r.Int64N(rows)
			if !seen[id] {
				seen[id] = true
				ups = append(ups, benchRow(id, r))
			}
		}
		if err := t.Commit(ctx, Epoch{Number: e, Pos: pos(e)}, ups, ups, nil); err != nil {
			b.Fatal(err)
		}
	}
	tasks, err := t.Iceberg().Scan().PlanFiles(ctx)
	if err != nil {
		b.Fatal(err)
	}
	o := testOpts()
	o.Force = true
	groups, _ := selectCompaction(tasks, localScope, &o)
	if len(groups) != 1 || len(groups[0].Tasks) != epochs+1 {
		b.Fatalf("%d groups", len(groups))
	}
	for _, impl := range []struct {
		name    string
		rewrite func() (table.CompactionGroupResult, error)
	}{
		{"cdcsync", func() (table.CompactionGroupResult, error) {
			gr, _, err := t.rewriteGroup(ctx, t.Iceberg(), groups[0], 0, nil)
			return gr, err
		}},
		{"iceberg-go", func() (table.CompactionGroupResult, error) {
			return table.ExecuteCompactionGroup(ctx, t.Iceberg(), groups[0], compactionGroupOptions(0)...)
		}},
	} {
		b.Run(impl.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var res table.CompactionGroupResult
				var err error
				start := time.Now()
				peak, cpu := peakLive(func() { res, err = impl.rewrite() })
				elapsed := time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				var out int64
				for _, f := range res.NewDataFiles {
					out += f.Count()
				}
				if out != rows {
					b.Fatalf("%d rows written, want %d", out, rows)
				}
				b.ReportMetric(elapsed.Seconds(), "s")
				b.ReportMetric(cpu.Seconds(), "cpu-s")
				b.ReportMetric(float64(peak)/(1<<20), "peak-live-MiB")
			}
		})
	}
}

// BenchmarkCompactWideRows compacts a table of 1 KiB rows after three
// update epochs spread over it, like TestChunkedCopyBoundedMemory, and
// reports the live heap's peak: it must not grow with the table.
func BenchmarkCompactWideRows(b *testing.B) {
	for _, rows := range []int{50_000, 200_000, 400_000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			ctx := context.Background()
			lk := benchLake(b)
			t, err := lk.EnsureTable(ctx, kvSchema())
			if err != nil {
				b.Fatal(err)
			}
			pad := func(id int64, c byte) cdcsync.Row {
				return cdcsync.Row{id, strings.Repeat(string(rune('A'+(int(id)+int(c))%26)), 1000)}
			}
			all := make([]cdcsync.Row, rows)
			for i := range all {
				all[i] = pad(int64(i+1), 0)
			}
			if err := t.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, all, nil); err != nil {
				b.Fatal(err)
			}
			for e := int64(2); e <= 4; e++ {
				var ups []cdcsync.Row
				for id := int64(1); id <= int64(rows); id++ {
					if id%(10*e+1) == 0 {
						ups = append(ups, pad(id, byte(e)))
					}
				}
				if err := t.Commit(ctx, Epoch{Number: e, Pos: pos(e)}, ups, ups, nil); err != nil {
					b.Fatal(err)
				}
			}
			all = nil
			o := testOpts()
			o.Force = true
			for i := 0; i < b.N; i++ {
				peak, cpu := peakLive(func() {
					res, err := t.Compact(ctx, o)
					if err != nil || !res.Committed() {
						b.Fatalf("compact: %+v, %v", res, err)
					}
				})
				b.ReportMetric(cpu.Seconds(), "cpu-s")
				b.ReportMetric(float64(peak)/(1<<20), "peak-live-MiB")
			}
		})
	}
}

// peakLive runs f and returns the peak of the live heap while it ran
// (sampled with a forced collection every 25 ms) and the process's CPU time.
func peakLive(f func()) (uint64, time.Duration) {
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(25 * time.Millisecond):
			}
		}
	}()
	cpu0 := cpuNow()
	f()
	cpu := cpuNow() - cpu0
	close(stop)
	<-sampled
	return peak.Load(), cpu
}

// BenchmarkReadPositionDeletes reads the position delete files of five
// epochs of 50,000 updates each (eachPositionDelete, as compaction and the
// key index do) and reports the cost per delete row.
func BenchmarkReadPositionDeletes(b *testing.B) {
	const rows, epochs, perEpoch = 250_000, 5, 50_000
	_, t := benchTable(b)
	ctx := context.Background()
	if err := t.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, benchRows(rows), nil); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	for e := int64(2); e <= epochs+1; e++ {
		ups := make([]cdcsync.Row, 0, perEpoch)
		for _, id := range r.Perm(rows)[:perEpoch] {
			ups = append(ups, benchRow(int64(id)+1, r))
		}
		if err := t.Commit(ctx, Epoch{Number: e, Pos: pos(e)}, ups, ups, nil); err != nil {
			b.Fatal(err)
		}
	}
	tasks, err := t.Iceberg().Scan().PlanFiles(ctx)
	if err != nil {
		b.Fatal(err)
	}
	dels := map[string]iceberg.DataFile{}
	for _, tk := range tasks {
		for _, d := range tk.DeleteFiles {
			dels[d.FilePath()] = d
		}
	}
	if len(dels) != epochs {
		b.Fatalf("%d position delete files, want %d", len(dels), epochs)
	}
	fsys, err := t.Iceberg().FS(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuNow()
	for i := 0; i < b.N; i++ {
		n := 0
		for _, d := range dels {
			if err := eachPositionDelete(ctx, fsys, d, func(string, int64) bool { n++; return true }); err != nil {
				b.Fatal(err)
			}
		}
		if n != epochs*perEpoch {
			b.Fatalf("read %d deletes, want %d", n, epochs*perEpoch)
		}
	}
	perRow(b, epochs*perEpoch, ms, time.Since(start), cpuNow()-cpu0, 0)
}
