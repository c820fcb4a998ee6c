package lake

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// BenchmarkCommitFinePartitions is the shape of issue 23: an orders table
// partitioned day(created_at) x bucket(8, id) whose rows span ten years,
// and epochs of 2,000 updates of random old orders, so that nearly every
// key of an epoch is a partition of its own. One op is one epoch commit;
// files/epoch counts the data and delete files the epoch adds.
func BenchmarkCommitFinePartitions(b *testing.B) {
	ctx := context.Background()
	lk := openLake(b, partitionedConfig(b, b.TempDir(), "", "day(created_at)", "bucket(8, id)"))
	tb, err := lk.EnsureTable(ctx, ordersSchema())
	if err != nil {
		b.Fatal(err)
	}
	const tableRows, perEpoch = 50_000, 2_000
	r := rand.New(rand.NewPCG(23, 23))
	model := make([]cdcsync.Row, tableRows+1)
	var rows []cdcsync.Row
	for id := int64(1); id <= tableRows; id++ {
		model[id] = orderRow(id, r.Int64N(3650), "v0")
		rows = append(rows, model[id])
	}
	if err := tb.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, rows, nil); err != nil {
		b.Fatal(err)
	}
	epoch := int64(1)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuNow()
	var files int
	for i := 0; i < b.N; i++ {
		var dels, ups []cdcsync.Row
		seen := map[int64]bool{}
		for len(ups) < perEpoch {
			id := 1 + r.Int64N(tableRows)
			if seen[id] {
				continue
			}
			seen[id] = true
			dels = append(dels, model[id])
			model[id] = cdcsync.Row{id, model[id][1], "v1"}
			ups = append(ups, model[id])
		}
		epoch++
		if err := tb.Commit(ctx, Epoch{Number: epoch, Pos: pos(epoch)}, dels, ups, nil); err != nil {
			b.Fatal(err)
		}
		s := tb.Iceberg().CurrentSnapshot()
		files = int(atoiProp(s.Summary.Properties, "added-data-files") + atoiProp(s.Summary.Properties, "added-delete-files"))
	}
	elapsed, cpu := time.Since(start), cpuNow()-cpu0
	b.StopTimer()
	perRow(b, perEpoch, ms, elapsed, cpu, 0)
	b.ReportMetric(float64(files), "files/epoch")
}

func atoiProp(p map[string]string, k string) int64 {
	n, _ := strconv.ParseInt(p[k], 10, 64)
	return n
}

// BenchmarkCompactFinePartitions compacts the table of
// BenchmarkCommitFinePartitions after four epochs of 2,000 updates: four
// global deletes, retired together, so every partition one of their rows
// belongs to (about 7,900) is rewritten. One op is one Compact.
func BenchmarkCompactFinePartitions(b *testing.B) {
	ctx := context.Background()
	const tableRows, perEpoch, epochs = 50_000, 2_000, 4
	var elapsed, cpu time.Duration
	var res CompactResult
	for i := 0; i < b.N; i++ {
		lk := openLake(b, partitionedConfig(b, b.TempDir(), "", "day(created_at)", "bucket(8, id)"))
		tb, err := lk.EnsureTable(ctx, ordersSchema())
		if err != nil {
			b.Fatal(err)
		}
		r := rand.New(rand.NewPCG(23, 23))
		model := make([]cdcsync.Row, tableRows+1)
		var rows []cdcsync.Row
		for id := int64(1); id <= tableRows; id++ {
			model[id] = orderRow(id, r.Int64N(3650), "v0")
			rows = append(rows, model[id])
		}
		if err := tb.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, rows, nil); err != nil {
			b.Fatal(err)
		}
		for e := int64(2); e <= epochs+1; e++ {
			var dels, ups []cdcsync.Row
			seen := map[int64]bool{}
			for len(ups) < perEpoch {
				id := 1 + r.Int64N(tableRows)
				if seen[id] {
					continue
				}
				seen[id] = true
				dels = append(dels, model[id])
				model[id] = cdcsync.Row{id, model[id][1], "v1"}
				ups = append(ups, model[id])
			}
			if err := tb.Commit(ctx, Epoch{Number: e, Pos: pos(e)}, dels, ups, nil); err != nil {
				b.Fatal(err)
			}
		}
		o := testOpts()
		o.SmallFiles = 1 << 30 // only the deletes trigger
		start, cpu0 := time.Now(), cpuNow()
		if res, err = tb.Compact(ctx, o); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
		cpu += cpuNow() - cpu0
		if st := tb.Stats(); st.DeleteFiles != 0 {
			b.Fatalf("%d delete files left after the compaction: %+v", st.DeleteFiles, res)
		}
	}
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/compaction")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/compaction")
	b.ReportMetric(float64(res.Partitions), "partitions")
	b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N*max(res.Partitions, 1)), "µs/partition")
}
