package lake

import (
	"context"
	"testing"
	"time"
)

// The phases of an epoch commit are timed and add up to at most its
// total, and the wait for the commit lock (a compaction holding it) is
// counted as such: the metric and log line that tell a user why a large
// table's epochs are slow.
func TestCommitTimesAddUp(t *testing.T) {
	for _, mode := range []string{DeletesEquality, DeletesPosition, DeletesDV} {
		t.Run(mode, func(t *testing.T) {
			e := newKVMode(t, "p", mode)
			e.churn(2)
			held := 150 * time.Millisecond
			e.tbl.state.commitMu.Lock()
			go func() {
				time.Sleep(held)
				e.tbl.state.commitMu.Unlock()
			}()
			e.commit(e.tbl, keys(1, 50), "timed", keys(60, 70))
			c := e.tbl.LastCommitTimes()
			if c.Epoch != e.epoch {
				t.Fatalf("times of epoch %d, want %d", c.Epoch, e.epoch)
			}
			// The hold began before the commit did: half of it, at least,
			// falls into the commit's wait.
			if c.Wait < held/2 {
				t.Errorf("wait %v; the lock was held %v", c.Wait, held)
			}
			var sum time.Duration
			for phase, d := range c.phases() {
				if d < 0 {
					t.Errorf("%s: %v", phase, d)
				}
				sum += d
			}
			if sum > c.Total {
				t.Errorf("phases add up to %v, more than the commit's %v", sum, c.Total)
			}
			for phase, d := range map[string]time.Duration{"data": c.Data, "deletes": c.Deletes, "manifests": c.Manifests, "catalog": c.Catalog} {
				if d <= 0 {
					t.Errorf("%s took %v; it ran", phase, d)
				}
			}
			if c.EntriesWritten < 2 {
				t.Errorf("%d manifest entries written; the epoch added a data file and deletes", c.EntriesWritten)
			}
			if mode != DeletesEquality && c.Index <= 0 {
				t.Errorf("index took %v; it ran", c.Index)
			}
			// A compaction's commits are not an epoch's: they leave the times.
			if _, err := e.tbl.Compact(context.Background(), CompactOptions{Force: true, TargetFileSize: 1 << 30}); err != nil {
				t.Fatal(err)
			}
			if got := e.tbl.LastCommitTimes(); got != c {
				t.Errorf("after a compaction the times are %+v, want the epoch's %+v", got, c)
			}
		})
	}
}
