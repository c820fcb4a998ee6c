package lake

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
)

// BenchmarkScanAfterEpoch measures what one epoch of updates costs a reader
// of iceberg-go (the bench harness's reader): a full scan of the bench
// table's million rows, freshly compacted into one file, against the scan
// right after an epoch that updated 5% of them (a new data file, and
// position deletes or a deletion vector on the old one). iceberg-go copies
// every column of a record batch that has a deleted row (compute.Take), so
// the second scan costs more than the 5% more rows it reads.
func BenchmarkScanAfterEpoch(b *testing.B) {
	for _, mode := range []string{DeletesPosition, DeletesDV} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			lk := benchLakeIn(b, b.TempDir(), "deletes:\n  mode: "+mode+"\n")
			t, err := lk.EnsureTable(ctx, benchSchema())
			if err != nil {
				b.Fatal(err)
			}
			commit := func(n int64, deletes, rows []cdcsync.Row) {
				pos := binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: fmt.Sprintf("0-1-%d", n)}.Position()
				if err := t.Commit(ctx, Epoch{Number: n, Pos: pos}, deletes, rows, nil); err != nil {
					b.Fatal(err)
				}
			}
			const rows = 1_000_000
			commit(1, nil, benchRows(rows))
			o := testOpts()
			o.Force = true
			if _, err := t.Compact(ctx, o); err != nil {
				b.Fatal(err)
			}
			compacted := t.current().CurrentSnapshot().SnapshotID
			upd := benchRows(rows / 20)
			for i := range upd {
				upd[i][0] = int64(i*20 + 1)
			}
			commit(2, upd, upd)
			epoch := t.current().CurrentSnapshot().SnapshotID
			scan := func(id int64) time.Duration {
				start := time.Now()
				s := t.current().Scan(table.WithSnapshotID(id))
				defer s.Close()
				_, recs, err := s.ToArrowRecords(ctx)
				if err != nil {
					b.Fatal(err)
				}
				var n int64
				for rec, err := range recs {
					if err != nil {
						b.Fatal(err)
					}
					n += rec.NumRows()
					rec.Release()
				}
				if n != rows {
					b.Fatalf("the scan of snapshot %d read %d rows, want %d", id, n, rows)
				}
				return time.Since(start)
			}
			b.ResetTimer()
			var before, after time.Duration
			for range b.N {
				before += scan(compacted)
				after += scan(epoch)
			}
			b.ReportMetric(before.Seconds()/float64(b.N), "compacted-s")
			b.ReportMetric(after.Seconds()/float64(b.N), "epoch-s")
			b.ReportMetric(after.Seconds()/before.Seconds(), "ratio")
		})
	}
}
