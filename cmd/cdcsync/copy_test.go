package main

import (
	"testing"
	"time"

	"github.com/cdcsync/cdcsync/merge"
)

func TestCopyProgressFigures(t *testing.T) {
	now := time.Now()
	cp := merge.CopyProgress{Rows: 250_000, Estimate: 1_000_000, Session: 200_000, Started: now.Add(-20 * time.Second)}
	rate, eta := copyRate(cp, now)
	if rate != 10_000 {
		t.Errorf("rate %v, want 10000 rows/s (200k rows this session in 20 s)", rate)
	}
	if eta != 75*time.Second {
		t.Errorf("ETA %v, want 75s (750k rows left at 10k/s)", eta)
	}
	if p := percent(cp); p != 25 {
		t.Errorf("percent %d, want 25", p)
	}
	// The server's estimate is low: the copy is not done until it says so.
	if p := percent(merge.CopyProgress{Rows: 1200, Estimate: 1000}); p != 99 {
		t.Errorf("percent past the estimate %d, want 99", p)
	}
	if _, eta := copyRate(merge.CopyProgress{Rows: 1200, Estimate: 1000, Session: 1200, Started: now.Add(-time.Second)}, now); eta != 0 {
		t.Errorf("ETA past the estimate %v, want 0", eta)
	}
	if rate, eta := copyRate(merge.CopyProgress{Started: now}, now); rate != 0 || eta != 0 {
		t.Errorf("nothing copied yet: rate %v ETA %v, want zeros", rate, eta)
	}
	if got := progressBar(50, 10); got != "[#####.....] 50%" {
		t.Errorf("bar %q", got)
	}
	for n, want := range map[int64]string{999: "999", 12_345: "12k", 25_000_000: "25M"} {
		if got := humanCount(n); got != want {
			t.Errorf("humanCount(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseTableID(t *testing.T) {
	if id, err := parseTableID("shop.orders"); err != nil || id.Database != "shop" || id.Table != "orders" {
		t.Errorf("shop.orders: %v %v", id, err)
	}
	for _, bad := range []string{"", "shop", ".orders", "shop.", "a.b.c"} {
		if _, err := parseTableID(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
