package lake

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go/table"
)

// mergeManifests rewrites the data manifests into target-sized ones when the
// current snapshot has more than max manifests.
func (t *Table) mergeManifests(ctx context.Context, max int) (before, after int, err error) {
	t.state.commitMu.Lock()
	defer t.state.commitMu.Unlock()
	base := t.current()
	snap := base.CurrentSnapshot()
	if snap == nil {
		return 0, 0, nil
	}
	fsys, err := base.FS(ctx)
	if err != nil {
		return 0, 0, err
	}
	mans, err := snap.Manifests(fsys)
	if err != nil {
		return 0, 0, fmt.Errorf("merge manifests of %s: %w", t.ID, err)
	}
	before, after = len(mans), len(mans)
	if len(mans) <= max {
		return before, after, nil
	}
	tx := base.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return before, after, err
	}
	r, err := tx.RewriteManifests(ctx)
	if err != nil {
		return before, after, fmt.Errorf("merge manifests of %s: %w", t.ID, err)
	}
	if r.IsNoOp() {
		return before, after, nil
	}
	next, err := tx.Commit(ctx)
	if err != nil {
		fresh, lerr := t.reload(ctx)
		if lerr == nil {
			if cur := fresh.CurrentSnapshot(); cur != nil && cur.ParentSnapshotID != nil && *cur.ParentSnapshotID == snap.SnapshotID &&
				cur.Summary != nil && cur.Summary.Operation == table.OpReplace && cur.Summary.Properties["manifests-created"] != "" {
				t.setCurrent(fresh) // the commit went through after all
			}
		}
		return before, after, fmt.Errorf("merge manifests of %s: %w", t.ID, err)
	}
	t.setCurrent(next)
	after = before - len(r.RewrittenManifests) + len(r.AddedManifests)
	return before, after, nil
}
