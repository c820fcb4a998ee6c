package lake

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/apache/iceberg-go/table"
)

// ExpireResult reports what snapshot expiry did.
type ExpireResult struct {
	Expired  int // snapshots removed
	Duration time.Duration
}

// retainCount is how many snapshots of the current lineage expiry must keep:
// at least minKeep, and every snapshot down to this pipeline's last epoch
// commit, so that Committed still finds it.
func (t *Table) retainCount(minKeep int) int {
	meta := t.current().Metadata()
	i := 0
	for s := meta.CurrentSnapshot(); s != nil; i++ {
		if s.Summary != nil && s.Summary.Properties[SummaryPipeline] == t.pipeline {
			return max(minKeep, i+1)
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return max(minKeep, i+1) // no epoch commit: keep the whole lineage
}

// ExpiryDue reports, from the metadata alone, whether some snapshot would be
// expired.
func (t *Table) ExpiryDue(maxAge time.Duration, minKeep int) bool {
	meta := t.current().Metadata()
	cur := meta.CurrentSnapshot()
	if cur == nil {
		return false
	}
	cutoff := time.Now().Add(-maxAge).UnixMilli()
	keep := map[int64]bool{}
	n := t.retainCount(minKeep)
	for i, s := 0, cur; s != nil && i < n; i++ {
		keep[s.SnapshotID] = true
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	for _, s := range meta.Snapshots() {
		if !keep[s.SnapshotID] && s.TimestampMs < cutoff {
			return true
		}
	}
	return false
}

// ExpireSnapshots removes the snapshots older than maxAge, keeping the newest
// minKeep and every snapshot down to this pipeline's last epoch commit, then
// deletes the files only the expired snapshots referenced. A crash between
// the two leaves those files to orphan cleanup. fault is called at
// "during-expiry", after the commit and before the files are deleted.
func (t *Table) ExpireSnapshots(ctx context.Context, maxAge time.Duration, minKeep int, fault func(string)) (res ExpireResult, err error) {
	ctx = t.scope(ctx)
	began := time.Now()
	defer func() { res.Duration = time.Since(began) }()
	base, next, err := t.commitExpiry(ctx, maxAge, minKeep)
	if err != nil || next == nil {
		return res, err
	}
	kept := map[int64]bool{}
	for _, s := range next.Metadata().Snapshots() {
		kept[s.SnapshotID] = true
	}
	var expired []int64
	for _, s := range base.Metadata().Snapshots() {
		if !kept[s.SnapshotID] {
			expired = append(expired, s.SnapshotID)
		}
	}
	res.Expired = len(expired)
	if len(expired) == 0 {
		return res, nil
	}
	if fault != nil {
		fault("during-expiry")
	}
	// The deletion iceberg-go runs after an expiry: manifest lists,
	// manifests and data files reachable only from the expired snapshots.
	// A file can be listed twice across expiries (live in one expired
	// snapshot, DELETED in a later one); it is already gone the second time.
	if err := ignoreNotExist(table.NewRemoveSnapshotsUpdate(expired, true).PostCommit(ctx, base, next)); err != nil {
		return res, fmt.Errorf("delete the files of the %d expired snapshots of %s (orphan cleanup removes them later): %w", len(expired), t.ID, err)
	}
	return res, nil
}

// commitExpiry commits the expiry under the table's commit lock and returns
// the table before and after it; next is nil when there is no snapshot.
func (t *Table) commitExpiry(ctx context.Context, maxAge time.Duration, minKeep int) (base, next *table.Table, err error) {
	t.state.commitMu.Lock()
	defer t.state.commitMu.Unlock()
	base = t.current()
	if base.CurrentSnapshot() == nil {
		return base, nil, nil
	}
	tx := base.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return base, nil, fmt.Errorf("expire snapshots of %s: %w", t.ID, err)
	}
	if err := tx.ExpireSnapshots(table.WithRetainLast(t.retainCount(minKeep)), table.WithOlderThan(maxAge), table.WithPostCommit(false)); err != nil {
		return base, nil, fmt.Errorf("expire snapshots of %s: %w", t.ID, err)
	}
	next, err = tx.Commit(ctx)
	if err != nil {
		if fresh, lerr := t.reload(ctx); lerr == nil && snapshotID(fresh.CurrentSnapshot()) == snapshotID(base.CurrentSnapshot()) {
			t.setCurrent(fresh) // same data; the expiry may or may not have happened
		}
		return base, nil, fmt.Errorf("expire snapshots of %s: %w", t.ID, err)
	}
	t.setCurrent(next)
	return base, next, nil
}

// ignoreNotExist drops the "no such file" errors from a (joined) error.
func ignoreNotExist(err error) error {
	if err == nil || errors.Is(err, fs.ErrNotExist) && !hasOther(err) {
		return nil
	}
	return err
}

// hasOther reports whether a joined error holds an error that is not
// fs.ErrNotExist.
func hasOther(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if e != nil && hasOther(e) {
				return true
			}
		}
		return false
	}
	return !errors.Is(err, fs.ErrNotExist)
}
