package lake

// BenchmarkParquetCodec measures the Parquet codecs cdcsync can be
// configured with (parquet.compression and parquet.level, issue 20) on the
// bench harness's 15-column row (benchSchema, benchRows): each op writes
// one data file of 100,000 rows through cdcsync's writer (writeFiles: rows
// -> Arrow -> pqarrow -> DataFile, as an epoch does) into a table created
// with that codec, then reads the whole file back with arrow-go's Parquet
// reader (pqarrow, one goroutine, 64k-row batches). It reports, per row:
//
//	write-cpu-ns/row  process CPU of the write (encoding + compression + GC)
//	read-cpu-ns/row   process CPU of the read (decompression + decoding + GC)
//	file-B/row        the file's size
//
// CPU time, not wall time: the machine is shared. Run:
//
//	go test ./lake/ -run '^$' -bench ParquetCodec -benchtime 10x -count 5

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// benchCodecs are the parquet settings measured: name, compression, level.
var benchCodecs = []struct {
	name, codec string
	level       int
}{
	{"zstd", "zstd", 0}, // the default: zstd's own level, 3
	{"zstd-1", "zstd", 1},
	{"zstd-9", "zstd", 9},
	{"zstd-19", "zstd", 19},
	{"snappy", "snappy", 0},
	{"lz4raw", "lz4raw", 0},
	{"gzip", "gzip", 0},
	{"uncompressed", "uncompressed", 0},
}

// codecLake opens a fresh local warehouse with a SQLite catalog whose
// configuration sets parquet to codec and level.
func codecLake(tb testing.TB, dir, codec string, level int) *Lake {
	tb.Helper()
	return benchLakeIn(tb, dir, fmt.Sprintf("parquet:\n  compression: %s\n  level: %d\n", codec, level))
}

// readParquetFile reads every row of a local Parquet file with pqarrow and
// returns the row count.
func readParquetFile(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return 0, err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: writeBatchRows}, memory.DefaultAllocator)
	if err != nil {
		return 0, err
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return 0, err
	}
	defer rr.Release()
	var n int64
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	return n, rr.Err()
}

func BenchmarkParquetCodec(b *testing.B) {
	rows := benchRows(benchFileRows)
	ctx := context.Background()
	for _, c := range benchCodecs {
		b.Run(c.name, func(b *testing.B) {
			lk := codecLake(b, b.TempDir(), c.codec, c.level)
			t, err := lk.EnsureTable(ctx, benchSchema())
			if err != nil {
				b.Fatal(err)
			}
			var size int64
			var wcpu, rcpu, wall time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start, cpu0 := time.Now(), cpuNow()
				files, err := t.writeFiles(ctx, t.current(), t.dataFile, rows, nil)
				if err != nil {
					b.Fatal(err)
				}
				wcpu += cpuNow() - cpu0
				wall += time.Since(start)
				if len(files) != 1 || files[0].Count() != int64(len(rows)) {
					b.Fatalf("wrote %d files", len(files))
				}
				size = files[0].FileSizeBytes()
				path := strings.TrimPrefix(files[0].FilePath(), "file://")
				cpu1 := cpuNow()
				n, err := readParquetFile(path)
				if err != nil {
					b.Fatal(err)
				}
				rcpu += cpuNow() - cpu1
				if n != int64(len(rows)) {
					b.Fatalf("read %d rows of %d", n, len(rows))
				}
				_ = os.Remove(path)
			}
			b.StopTimer()
			n := float64(b.N) * float64(len(rows))
			b.ReportMetric(float64(wall.Nanoseconds())/n, "write-ns/row")
			b.ReportMetric(float64(wcpu.Nanoseconds())/n, "write-cpu-ns/row")
			b.ReportMetric(float64(rcpu.Nanoseconds())/n, "read-cpu-ns/row")
			b.ReportMetric(float64(size)/float64(len(rows)), "file-B/row")
		})
	}
}
