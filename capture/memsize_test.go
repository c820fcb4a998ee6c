package capture

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync"
)

// TestRowMemSize checks that Row.MemSize, in which epoch.max_bytes is
// counted, is within 25% of the heap the decoders really allocate for the
// bench's 15-column rows, on both paths. An estimate far below it let a
// 128 MiB epoch hold well over twice that.
func TestRowMemSize(t *testing.T) {
	const n = 20000
	s := benchSchema()
	r := rand.New(rand.NewPCG(3, 4))
	binlog := make([][]any, n)
	snap := make([][]mysql.FieldValue, n)
	for i := range binlog {
		binlog[i] = binlogRow(int64(i+1), r)
		snap[i] = snapshotRow(int64(i+1), r)
	}
	for _, path := range []struct {
		name   string
		decode func(i int) (cdcsync.Row, error)
	}{
		{"binlog", func(i int) (cdcsync.Row, error) { return DecodeBinlogRow(s, binlog[i]) }},
		{"snapshot", func(i int) (cdcsync.Row, error) { return DecodeSnapshotRow(s, snap[i]) }},
	} {
		rows := make([]cdcsync.Row, n) // allocated before the first reading
		before := heapInUse()
		for i := range rows {
			row, err := path.decode(i)
			if err != nil {
				t.Fatal(err)
			}
			rows[i] = row
		}
		measured := heapInUse() - before
		estimate := 0
		for _, row := range rows {
			estimate += row.MemSize()
		}
		ratio := float64(measured) / float64(estimate)
		t.Logf("%s: %d rows hold %d bytes of heap, MemSize says %d (%.0f and %.0f bytes a row): ratio %.2f",
			path.name, n, measured, estimate, float64(measured)/n, float64(estimate)/n, ratio)
		if ratio < 0.8 || ratio > 1.25 {
			t.Errorf("%s rows: MemSize is off by a factor %.2f from the heap they hold", path.name, ratio)
		}
		runtime.KeepAlive(rows)
	}
	runtime.KeepAlive(binlog)
	runtime.KeepAlive(snap)
}

func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
