package lake

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// fineTable is the table of issue 23: orders partitioned day(created_at) x
// bucket(8, id), 50,000 rows over ten years, copied in one commit.
type fineTable struct {
	tb    *Table
	r     *rand.Rand
	model []cdcsync.Row // by id
	epoch int64
}

const fineRows = 50_000

var fineUpdates = envInt("FINE_UPDATES", 2_000)

// fineWarmUpdates are updates committed before the timer starts, in one
// epoch: a table whose files mostly have deletion vectors already, as the
// bench's table has after a few epochs, so that each measured epoch
// replaces a few of many vectors.
var fineWarmUpdates = envInt("FINE_WARM_UPDATES", 0)

func envInt(k string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return n
	}
	return def
}

// newFineTableMode makes it in deletes mode mode ("": the default).
func newFineTableMode(b *testing.B, mode string) *fineTable {
	b.Helper()
	extra := ""
	if mode != "" {
		extra = "deletes:\n  mode: " + mode + "\n  index_dir: " + b.TempDir() + "\n"
	}
	lk := openLake(b, partitionedConfig(b, b.TempDir(), extra, "day(created_at)", "bucket(8, id)"))
	tb, err := lk.EnsureTable(context.Background(), ordersSchema())
	if err != nil {
		b.Fatal(err)
	}
	f := &fineTable{tb: tb, r: rand.New(rand.NewPCG(23, 23)), model: make([]cdcsync.Row, fineRows+1)}
	var rows []cdcsync.Row
	for id := int64(1); id <= fineRows; id++ {
		f.model[id] = orderRow(id, f.r.Int64N(3650), "v0")
		rows = append(rows, f.model[id])
	}
	f.commit(b, nil, rows)
	// The copy's rows were staged (staged.go); in a table mirrored for a
	// while they are in their partitions, where updates find them.
	o := testOpts()
	o.Force, o.MaxFiles, o.MaxBytes = true, 0, 0
	if _, err := tb.Compact(context.Background(), o); err != nil {
		b.Fatal(err)
	}
	return f
}

func (f *fineTable) commit(b *testing.B, dels, rows []cdcsync.Row) {
	b.Helper()
	f.epoch++
	if err := f.tb.Commit(context.Background(), Epoch{Number: f.epoch, Pos: pos(f.epoch)}, dels, rows, nil); err != nil {
		b.Fatal(err)
	}
}

// updateEpoch commits an epoch of n updates of random old orders, in place:
// nearly every key is a partition of its own.
func (f *fineTable) updateEpoch(b *testing.B, n int) {
	b.Helper()
	var dels, ups []cdcsync.Row
	seen := map[int64]bool{}
	for len(ups) < n {
		id := 1 + f.r.Int64N(fineRows)
		if seen[id] {
			continue
		}
		seen[id] = true
		dels = append(dels, f.model[id])
		f.model[id] = cdcsync.Row{id, f.model[id][1], "v1"}
		ups = append(ups, f.model[id])
	}
	f.commit(b, dels, ups)
}

// BenchmarkCommitFinePartitions is one epoch commit of 2,000 updates to the
// table of issue 23, in each deletes mode; files/epoch counts the data and
// delete files it adds (a Puffin file of deletion vectors counts once).
func BenchmarkCommitFinePartitions(b *testing.B) {
	for _, mode := range []string{DeletesEquality, DeletesPosition, DeletesDV} {
		b.Run(mode, func(b *testing.B) { benchCommitFine(b, mode) })
	}
}

func benchCommitFine(b *testing.B, mode string) {
	f := newFineTableMode(b, mode)
	if fineWarmUpdates > 0 {
		f.updateEpoch(b, fineWarmUpdates)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuNow()
	phases := map[string]time.Duration{}
	var read, written int64
	for i := 0; i < b.N; i++ {
		f.updateEpoch(b, fineUpdates)
		c := f.tb.LastCommitTimes()
		for phase, d := range c.phases() {
			phases[phase] += d
		}
		read, written = read+c.EntriesRead, written+c.EntriesWritten
	}
	elapsed, cpu := time.Since(start), cpuNow()-cpu0
	b.StopTimer()
	perRow(b, fineUpdates, ms, elapsed, cpu, 0)
	for phase, d := range phases {
		if d > 0 {
			b.ReportMetric(d.Seconds()/float64(b.N), phase+"-s/op")
		}
	}
	s := f.tb.Iceberg().CurrentSnapshot()
	var parent int64
	if s.ParentSnapshotID != nil {
		parent = *s.ParentSnapshotID
	}
	files := atoiProp(s.Summary.Properties, "added-data-files") + int64(len(addedDeleteFiles(b, f.tb.Iceberg(), parent)))
	b.ReportMetric(float64(files), "files/epoch")
	b.ReportMetric(float64(read)/float64(b.N), "entries-read/op")
	b.ReportMetric(float64(written)/float64(b.N), "entries-written/op")
}

func atoiProp(p map[string]string, k string) int64 {
	n, _ := strconv.ParseInt(p[k], 10, 64)
	return n
}

// BenchmarkCompactFinePartitions compacts the table of issue 23 after four
// epochs of 2,000 updates, in each deletes mode: in equality mode four
// global deletes, retired together, so every partition one of their rows
// belongs to (about 6,700) is rewritten; in position and dv modes every
// small file with deletes. One op is one Compact.
func BenchmarkCompactFinePartitions(b *testing.B) {
	for _, mode := range []string{DeletesEquality, DeletesPosition, DeletesDV} {
		b.Run(mode, func(b *testing.B) { benchCompactFine(b, mode) })
	}
}

func benchCompactFine(b *testing.B, mode string) {
	ctx := context.Background()
	var elapsed, cpu time.Duration
	var res CompactResult
	for i := 0; i < b.N; i++ {
		f := newFineTableMode(b, mode)
		for e := 0; e < 4; e++ {
			f.updateEpoch(b, 2_000)
		}
		o := testOpts()
		o.SmallFiles = 1 << 30 // only the deletes trigger
		start, cpu0 := time.Now(), cpuNow()
		var err error
		if res, err = f.tb.Compact(ctx, o); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
		cpu += cpuNow() - cpu0
		if st := f.tb.Stats(); st.DeleteFiles != 0 {
			b.Fatalf("%d delete files left after the compaction: %+v", st.DeleteFiles, res)
		}
	}
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/compaction")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/compaction")
	b.ReportMetric(float64(res.Partitions), "partitions")
	b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N*max(res.Partitions, 1)), "µs/partition")
}

// BenchmarkWriteSmallFilesWide writes the bench harness's 15-column rows
// two to a file (bucket(2000, id) over 4,000 rows): the per-file cost of an
// epoch on a finely partitioned table, for each Parquet codec.
func BenchmarkWriteSmallFilesWide(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	cfg := loadConfig(b, dir+"/c.yaml", "pipeline: bench\nsource:\n  user: u\n  server_id: 7\n  include: [\"bench.*\"]\nwarehouse:\n  location: "+dir+
		"/warehouse\ncatalog:\n  sql:\n    dsn: "+dir+"/catalog.db\ntables:\n  - match: bench.t\n    partition: [\"bucket(2000, id)\"]\n")
	lk := openLake(b, cfg)
	tb, err := lk.EnsureTable(ctx, benchSchema())
	if err != nil {
		b.Fatal(err)
	}
	rows := benchRows(4000)
	for _, codec := range []string{"zstd", "snappy", "uncompressed"} {
		b.Run(codec, func(b *testing.B) {
			tx := tb.Iceberg().NewTransaction()
			if err := tx.SetProperties(map[string]string{"write.parquet.compression-codec": codec}); err != nil {
				b.Fatal(err)
			}
			next, err := tx.Commit(ctx)
			if err != nil {
				b.Fatal(err)
			}
			tb.setCurrent(next)
			files, elapsed, cpu := benchWriteFiles(b, tb, rows)
			b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N*files), "µs/file")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*files), "cpu-µs/file")
		})
	}
}
