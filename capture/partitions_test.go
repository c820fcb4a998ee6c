package capture

import (
	"math"
	"strings"
	"testing"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

func TestTouched(t *testing.T) {
	for _, c := range []struct {
		p    float64
		n    int
		want float64
	}{
		{1, 10_000, 1},
		{10, 10_000, 10},          // every partition
		{1_000_000, 10, 10},       // every change its own partition
		{10_000, 10_000, 6321.36}, // 1 - 1/e
	} {
		if got := touched(c.p, c.n); math.Abs(got-c.want) > 0.01*c.want {
			t.Errorf("touched(%v, %d) = %v, want %v", c.p, c.n, got, c.want)
		}
	}
}

// TestPartitionEstimateAdvice: the layout of issue 23 (day x bucket(8) over
// ten years of a million orders) warns and proposes a month layout; a
// month layout does not warn.
func TestPartitionEstimateAdvice(t *testing.T) {
	id := cdcsync.TableID{Database: "shop", Table: "orders"}
	day := config.PartitionField{Column: "created_at", Transform: config.TransformDay}
	bucket := config.PartitionField{Column: "id", Transform: config.TransformBucket, Param: 8}
	fine := PartitionEstimate{Table: id, Rows: 1_000_000, Fields: []FieldEstimate{
		{Field: day, Distinct: 3653, Note: "created_at spans 10.0 years"}, {Field: bucket, Distinct: 8}}}
	fine.Partitions = partitionsOf(fine.Fields, fine.Rows)
	fine.PerEpoch = touched(fine.Partitions, EstimateEpochChanges)
	if fine.Partitions != 3653*8 || !fine.Warn() {
		t.Fatalf("day x bucket(8) over ten years: %v partitions, %v an epoch, warn %v", fine.Partitions, fine.PerEpoch, fine.Warn())
	}
	msg := fine.String()
	for _, want := range []string{"shop.orders", `partition: ["month(created_at)"]`, "about 29k partitions", "writes about 8470 data files", "drop its Iceberg table"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	month := PartitionEstimate{Table: id, Rows: 1_000_000, Fields: []FieldEstimate{{Field: config.PartitionField{Column: "created_at", Transform: config.TransformMonth}, Distinct: 121}}}
	month.Partitions = partitionsOf(month.Fields, month.Rows)
	month.PerEpoch = touched(month.Partitions, EstimateEpochChanges)
	if month.Warn() || strings.Contains(month.String(), "coarser") {
		t.Errorf("a month layout warns: %s", month.String())
	}
	// A small table has at most one partition a row.
	small := PartitionEstimate{Rows: 500, Fields: fine.Fields}
	if p := partitionsOf(small.Fields, small.Rows); p != 500 {
		t.Errorf("500 rows give %v partitions, want at most 500", p)
	}
}
