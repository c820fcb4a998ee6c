package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture"
	"github.com/cdcsync/cdcsync/config"
)

// cdcsync check says where the key index goes, and fails a path that
// cannot be a directory.
func TestCheckKeyIndex(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		indexDir string
		ok       bool
		want     string
	}{
		{filepath.Join(dir, "new", "index"), true, "goes to " + filepath.Join(dir, "new", "index")},
		{filepath.Join(file, "index"), false, "is not a directory"},
	} {
		cfg := &config.Config{Pipeline: "p", Deletes: config.Deletes{Mode: "position", IndexDir: tc.indexDir}}
		var got string
		var ok bool
		checkKeyIndex(cfg, func(o, _ bool, check, msg string) { ok, got = o, check+": "+msg })
		if ok != tc.ok || !strings.Contains(got, tc.want) {
			t.Errorf("index_dir %s: ok %v %q; want %v and %q", tc.indexDir, ok, got, tc.ok, tc.want)
		}
	}
}

// TestPartitionAdviceNamesDV: a layout that writes thousands of files an
// epoch points a position-mode table at dv mode, whose deletes are one file
// an epoch; a dv or equality table, or a layout that warns of nothing, gets
// no such advice.
func TestPartitionAdviceNamesDV(t *testing.T) {
	fine := capture.PartitionEstimate{Table: cdcsync.TableID{Database: "shop", Table: "orders"}, Rows: 1_000_000, Partitions: 29_000, PerEpoch: 8_000}
	if msg := partitionAdvice(fine, config.DeletesPosition, config.DefaultStageAbove); !strings.Contains(msg, "deletes: dv") {
		t.Errorf("position mode, fine layout: no dv advice:\n%s", msg)
	}
	for _, mode := range []string{config.DeletesDV, config.DeletesEquality} {
		if msg := partitionAdvice(fine, mode, config.DefaultStageAbove); strings.Contains(msg, "deletes: dv") {
			t.Errorf("%s mode: dv advice:\n%s", mode, msg)
		}
	}
	if msg := partitionAdvice(fine, config.DeletesDV, config.DefaultStageAbove); !strings.Contains(msg, "stage_above") {
		t.Errorf("dv mode, fine layout: staging not named:\n%s", msg)
	}
	if msg := partitionAdvice(fine, config.DeletesDV, 0); strings.Contains(msg, "stage_above") {
		t.Errorf("stage_above: 0 named as staging:\n%s", msg)
	}
	coarse := fine
	coarse.Partitions, coarse.PerEpoch = 120, 120
	if msg := partitionAdvice(coarse, config.DeletesPosition, config.DefaultStageAbove); strings.Contains(msg, "deletes: dv") {
		t.Errorf("a coarse layout gets dv advice:\n%s", msg)
	}
}
