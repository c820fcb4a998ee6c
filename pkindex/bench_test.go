package pkindex

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The benchmarks load one million keys into a table and look keys up in
// batches of 10,000, as an epoch commit would. Run them with, for example,
//
//	CGO_ENABLED=0 go test -run '^$' -bench . -benchtime 20x ./pkindex
//
// (the release binary is built without cgo, which changes pebble's zstd
// and where its block cache lives).
const (
	benchKeys  = 1_000_000
	benchBatch = 10_000
)

// benchKey is key i of a kind: "int8" an 8-byte integer spread over the
// whole range (a hash of i: no locality), "str24" a 24-byte string in the
// order of i. The loaded keys are the even i, so odd i are absent keys
// between them.
func benchKey(kind string, i uint64) []byte {
	switch kind {
	case "int8":
		return binary.BigEndian.AppendUint64(nil, mix64(i))
	default:
		return fmt.Appendf(nil, "order-%018d", i)
	}
}

// mix64 is splitmix64's finalizer, a bijection.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// benchDB is a loaded, compacted database, shared by the benchmarks of a
// kind (a benchmark function runs several times while b.N grows).
type benchDB struct {
	db   *DB
	tb   *Table
	dir  string
	load time.Duration
}

var (
	benchMu  sync.Mutex
	benchDBs = map[string]*benchDB{}
)

func loadBench(b *testing.B, kind string, cacheBytes int64, compact bool) *benchDB {
	benchMu.Lock()
	defer benchMu.Unlock()
	name := fmt.Sprintf("%s/%d/%t", kind, cacheBytes, compact)
	if d := benchDBs[name]; d != nil {
		return d
	}
	dir, err := os.MkdirTemp("", "pkindex-bench-")
	if err != nil {
		b.Fatal(err)
	}
	db, err := Open(dir, Options{CacheBytes: cacheBytes})
	if err != nil {
		b.Fatal(err)
	}
	tb, err := db.Table("bench-" + kind)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := loadKeys(tb, kind, benchKeys); err != nil {
		b.Fatal(err)
	}
	if compact {
		if err := db.Compact(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	d := &benchDB{db: db, tb: tb, dir: dir, load: time.Since(start)}
	benchDBs[name] = d
	return d
}

// loadKeys puts keys 0..n-1 in chunks of 100,000, 1,000 rows per file.
func loadKeys(tb *Table, kind string, n int) error {
	for lo := 0; lo < n; lo += 100_000 {
		b := tb.NewBatch()
		var f uint32
		for i := lo; i < min(n, lo+100_000); i++ {
			if i%1000 == 0 {
				f = b.AddFile(File{Path: fmt.Sprintf("s3://bucket/warehouse/db/t/data/%08d.parquet", i/1000), Live: true})
			}
			b.Put(benchKey(kind, 2*uint64(i)), Loc{File: f, Pos: int64(i % 1000)})
		}
		if err := b.Commit(State{SnapshotID: int64(lo), Complete: lo+100_000 >= n}); err != nil {
			return err
		}
	}
	return nil
}

func closeBenchDBs() {
	benchMu.Lock()
	defer benchMu.Unlock()
	for _, d := range benchDBs {
		d.db.Close()
		os.RemoveAll(d.dir)
	}
}

var modeNames = map[lookupMode]string{
	lookupSortedPrefix:   "sorted-prefix", // Lookup
	lookupSortedSeek:     "sorted-seek",
	lookupUnsortedPrefix: "unsorted-prefix",
	lookupSortedPrefixL6: "sorted-prefix-l6",
	lookupGet:            "get",
}

// BenchmarkLookup looks up batches of 10,000 keys in one million, with
// each way of looking them up (sorted-prefix is Lookup's), in a compacted
// database whose blocks are in the block cache (64 MiB), then in one with
// a 4 MiB cache (blocks from the OS page cache), then in one left as the
// load left it (keys in several levels).
func BenchmarkLookup(b *testing.B) {
	b.Cleanup(closeBenchDBs)
	for _, kind := range []string{"int8", "str24"} {
		for _, what := range []string{"present", "absent", "mixed"} {
			for _, mode := range []lookupMode{lookupSortedPrefix, lookupSortedSeek, lookupUnsortedPrefix, lookupSortedPrefixL6, lookupGet} {
				b.Run(kind+"/"+what+"/"+modeNames[mode], func(b *testing.B) {
					lookupBench(b, loadBench(b, kind, 0, true), kind, what, mode)
				})
			}
		}
	}
	for _, what := range []string{"present", "absent"} {
		// An index larger than its block cache (1M keys, 4 MiB): the
		// blocks come from the OS page cache.
		for _, mode := range []lookupMode{lookupSortedPrefix, lookupSortedPrefixL6} {
			b.Run("int8/"+what+"/"+modeNames[mode]+"/cache-4MiB", func(b *testing.B) {
				lookupBench(b, loadBench(b, "int8", 4<<20, true), "int8", what, mode)
			})
		}
		// Not compacted: the keys are in several levels, where prefix
		// seeks skip the sstables whose filter excludes the key.
		for _, mode := range []lookupMode{lookupSortedPrefix, lookupSortedSeek} {
			name := modeNames[mode]
			b.Run("int8/"+what+"/"+name+"/uncompacted", func(b *testing.B) {
				lookupBench(b, loadBench(b, "int8", 0, false), "int8", what, mode)
			})
		}
	}
}

// lookupBench looks up batches of benchBatch random keys: present ones,
// absent ones (new rows), or half and half.
func lookupBench(b *testing.B, d *benchDB, kind, what string, mode lookupMode) {
	r := rand.New(rand.NewPCG(1, 1))
	batches := make([][][]byte, 16)
	for j := range batches {
		keys := make([][]byte, benchBatch)
		for i := range keys {
			n := 2 * r.Uint64N(benchKeys)
			if what == "absent" || what == "mixed" && i%2 == 1 {
				n++ // between the loaded keys
			}
			keys[i] = benchKey(kind, n)
		}
		batches[j] = keys
	}
	for _, keys := range batches { // warm the block cache
		if _, _, err := d.tb.lookup(keys, mode); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		_, found, err := d.tb.lookup(batches[i%len(batches)], mode)
		if err != nil {
			b.Fatal(err)
		}
		if what == "present" && !found[0] || what == "absent" && found[0] {
			b.Fatalf("key 0 found: %v", found[0])
		}
	}
	reportPerKey(b, b.N*benchBatch, cpu)
}

// reportPerKey reports the wall time and the process's CPU time per key
// (the CPU time includes pebble's background work, and does not count the
// time waiting for a CPU on a busy machine).
func reportPerKey(b *testing.B, keys int, cpuBefore time.Duration) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(keys), "ns/key")
	if cpu := cpuTime() - cpuBefore; cpuBefore > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(keys), "cpu-ns/key")
	}
}

// BenchmarkPut commits batches of 10,000 puts (random keys, one new file
// per batch), synced, into a table that grows.
func BenchmarkPut(b *testing.B) {
	for _, kind := range []string{"int8", "str24"} {
		b.Run(kind, func(b *testing.B) {
			db, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			tb, err := db.Table("put")
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(2, 2))
			b.ResetTimer()
			cpu := cpuTime()
			for i := 0; i < b.N; i++ {
				batch := tb.NewBatch()
				f := batch.AddFile(File{Path: fmt.Sprintf("s3://bucket/warehouse/db/t/data/%08d.parquet", i), Live: true})
				for j := range benchBatch {
					batch.Put(benchKey(kind, r.Uint64N(1<<40)), Loc{File: f, Pos: int64(j)})
				}
				if err := batch.Commit(State{SnapshotID: int64(i)}); err != nil {
					b.Fatal(err)
				}
			}
			reportPerKey(b, b.N*benchBatch, cpu)
			b.ReportMetric(float64(db.Stats().DiskBytes)/float64(b.N*benchBatch)*1e6/(1<<20), "disk-MiB/Mkeys-uncompacted")
		})
	}
}

// BenchmarkFootprint loads one million keys into a fresh database (in
// chunks of 100,000), compacts it, and reports per million keys the bytes
// on disk (Stats.DiskBytes: with the WAL files pebble keeps for reuse), in
// live sstables, and in the directory after Close; and the peak Go heap
// and the peak RSS of the process (run it alone for the RSS to mean
// something). One iteration is enough (-benchtime 1x).
func BenchmarkFootprint(b *testing.B) {
	for _, kind := range []string{"int8", "str24"} {
		b.Run(kind, func(b *testing.B) {
			var diskPerM, sstPerM, dirPerM, peakHeap float64
			for i := 0; i < b.N; i++ {
				runtime.GC()
				stop := samplePeakHeap()
				dir := b.TempDir()
				db, err := Open(dir, Options{})
				if err != nil {
					b.Fatal(err)
				}
				tb, err := db.Table("footprint")
				if err != nil {
					b.Fatal(err)
				}
				if err := loadKeys(tb, kind, benchKeys); err != nil {
					b.Fatal(err)
				}
				if err := db.Compact(b.Context()); err != nil {
					b.Fatal(err)
				}
				st := db.Stats()
				diskPerM = float64(st.DiskBytes) / benchKeys * 1e6
				sstPerM = float64(st.TableBytes) / benchKeys * 1e6
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				dirPerM = float64(dirSize(b, dir)) / benchKeys * 1e6
				peakHeap = float64(stop())
			}
			b.ReportMetric(diskPerM/(1<<20), "disk-MiB/Mkeys")
			b.ReportMetric(sstPerM/(1<<20), "sst-MiB/Mkeys")
			b.ReportMetric(dirPerM/(1<<20), "dir-MiB/Mkeys-closed")
			b.ReportMetric(peakHeap/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MiB")
		})
	}
}

// dirSize sums the sizes of the files in dir.
func dirSize(b *testing.B, dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if info, err := e.Info(); err == nil && !e.IsDir() {
			n += info.Size()
		}
	}
	return n
}

// samplePeakHeap samples the Go heap (live and not yet swept objects)
// every 5 ms until the returned function is called, which returns the
// peak.
func samplePeakHeap() func() uint64 {
	done := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var max uint64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			max = maxU(max, s[0].Value.Uint64())
			select {
			case <-done:
				peak <- max
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		return <-peak
	}
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// peakRSS is VmHWM of /proc/self/status, in bytes (0 elsewhere than Linux).
func peakRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkChurn is the index's share of the daemon's steady state at
// 10,000 changes/s on the bench table (one million int8 keys): one op is
// five epochs of 50,000 updates of random present keys (a put each, to
// the epoch's new file), then a compaction of the table that moves every
// key to a new file. It reports the process CPU per key put, background
// compactions included (the op waits for them to finish), and the bytes
// pebble's compactions wrote per key put.
func BenchmarkChurn(b *testing.B) {
	const epochKeys = 50_000
	db, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tb, err := db.Table("churn")
	if err != nil {
		b.Fatal(err)
	}
	if err := loadKeys(tb, "int8", benchKeys); err != nil {
		b.Fatal(err)
	}
	if err := db.Compact(b.Context()); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 3))
	snap := int64(benchKeys)
	commit := func(put func(*Batch, uint32)) {
		snap++
		batch := tb.NewBatch()
		f := batch.AddFile(File{Path: fmt.Sprintf("s3://bucket/warehouse/db/t/data/e%08d.parquet", snap), Live: true})
		put(batch, f)
		if err := batch.Commit(State{SnapshotID: snap, Complete: true}); err != nil {
			b.Fatal(err)
		}
	}
	written0 := db.pdb.Metrics().Compact.Count
	compactBytes := func() uint64 {
		m := db.pdb.Metrics()
		var n uint64
		for _, l := range m.Levels {
			n += l.TableBytesCompacted + l.TableBytesFlushed
		}
		return n
	}
	bytes0 := compactBytes()
	b.ResetTimer()
	cpu := cpuTime()
	puts := 0
	for i := 0; i < b.N; i++ {
		for range 5 {
			commit(func(batch *Batch, f uint32) {
				for j := range epochKeys {
					batch.Put(benchKey("int8", 2*r.Uint64N(benchKeys)), Loc{File: f, Pos: int64(j)})
				}
			})
			puts += epochKeys
		}
		commit(func(batch *Batch, f uint32) {
			for j := range benchKeys {
				batch.Put(benchKey("int8", 2*uint64(j)), Loc{File: f, Pos: int64(j)})
			}
		})
		puts += benchKeys
	}
	for db.pdb.Metrics().Compact.NumInProgress > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	reportPerKey(b, puts, cpu)
	b.ReportMetric(float64(compactBytes()-bytes0)/float64(puts), "written-B/put")
	b.ReportMetric(float64(db.pdb.Metrics().Compact.Count-written0)/float64(b.N), "compactions/op")
}

// BenchmarkLoad loads one million 8-byte keys into a fresh index as an
// initial copy does: in batches of 62,500 (a quarter epoch of the bench
// table), then closes it. The keys come in order, as shuffled runs of
// 7,800 (the chunks of parallel copy workers, each in key order), or at
// random: what the order saves of pebble's flushes and compactions.
func BenchmarkLoad(b *testing.B) {
	const total, batchKeys, run = 1_000_000, 62_500, 7_800
	keys := func(order string) []uint64 {
		out := make([]uint64, total)
		for i := range out {
			out[i] = uint64(i + 1)
		}
		r := rand.New(rand.NewPCG(1, 1))
		switch order {
		case "runs":
			var runs [][]uint64
			for i := 0; i < total; i += run {
				runs = append(runs, out[i:min(total, i+run)])
			}
			r.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
			var shuffled []uint64
			for _, ks := range runs {
				shuffled = append(shuffled, ks...)
			}
			out = shuffled
		case "random":
			r.Shuffle(total, func(i, j int) { out[i], out[j] = out[j], out[i] })
		}
		return out
	}
	for _, order := range []string{"sequential", "runs", "random"} {
		b.Run(order, func(b *testing.B) {
			ks := keys(order)
			b.ResetTimer()
			cpu := cpuTime()
			for i := 0; i < b.N; i++ {
				db, err := Open(b.TempDir(), Options{})
				if err != nil {
					b.Fatal(err)
				}
				tb, err := db.Table("load")
				if err != nil {
					b.Fatal(err)
				}
				for n := 0; n*batchKeys < total; n++ {
					batch := tb.NewBatch()
					f := batch.AddFile(File{Path: fmt.Sprintf("s3://bucket/warehouse/db/t/data/%08d.parquet", n), Live: true})
					for j, k := range ks[n*batchKeys : min(total, (n+1)*batchKeys)] {
						batch.Put(binary.BigEndian.AppendUint64([]byte{'l'}, k), Loc{File: f, Pos: int64(j)})
					}
					if err := batch.Commit(State{SnapshotID: int64(n + 1), Complete: true}); err != nil {
						b.Fatal(err)
					}
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
			}
			reportPerKey(b, b.N*total, cpu)
		})
	}
}
