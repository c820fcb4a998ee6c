package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/lease"
)

// The pipeline's lease lives in the catalog, where every daemon of the
// pipeline looks (an SQL or a REST catalog alike): it is the current
// snapshot of a control table, an Iceberg table that never holds rows. A
// change of the lease is a catalog commit that asserts the snapshot it
// replaces, so of two daemons swapping the same record only one wins.
//
// Its metadata files are deleted as commits replace them and each swap
// expires the snapshots before it, so a lease renewed every 10 seconds
// stays a handful of small files.

// LeaseNamespace is the catalog namespace of the pipelines' control tables.
const LeaseNamespace = "cdcsync"

const (
	// SummaryLease is the snapshot summary key of the lease record.
	SummaryLease = "cdcsync.lease"
	// SummaryToken is the fencing token of the holder that committed a
	// snapshot: on every epoch commit, and on the fences a new holder
	// commits (SummaryFence).
	SummaryToken = "cdcsync.token"
	// SummaryFence names the pipeline whose new holder committed the
	// snapshot to stop an older holder's commits; it adds no files.
	SummaryFence = "cdcsync.fence"
)

// LeaseIdent is the identifier of the pipeline's control table.
func (l *Lake) LeaseIdent() table.Identifier {
	return table.Identifier{LeaseNamespace, l.cfg.Pipeline + "_lease"}
}

// LeaseStore returns the store of the pipeline's lease.
func (l *Lake) LeaseStore() lease.Store { return &leaseStore{l: l} }

type leaseStore struct{ l *Lake }

func (s *leaseStore) table(ctx context.Context) (*table.Table, error) {
	l := s.l
	ident := l.LeaseIdent()
	tbl, err := l.cat.LoadTable(ctx, ident)
	if !errors.Is(err, catalog.ErrNoSuchTable) {
		return tbl, err
	}
	if err := l.cat.CreateNamespace(ctx, table.Identifier{LeaseNamespace}, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, fmt.Errorf("create namespace %s: %w", LeaseNamespace, err)
	}
	sc := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "unused", Type: iceberg.PrimitiveTypes.Int32})
	tbl, err = l.cat.CreateTable(ctx, ident, sc,
		catalog.WithLocation(l.pipelineDir()+"/lease"),
		catalog.WithProperties(iceberg.Properties{
			"comment": fmt.Sprintf("the lease of cdcsync pipeline %s (who holds it: its current snapshot's summary); it holds no rows", l.cfg.Pipeline),
			table.MetadataDeleteAfterCommitEnabledKey: "true",
			table.MetadataPreviousVersionsMaxKey:      "3",
		}))
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		return l.cat.LoadTable(ctx, ident) // another daemon created it first
	}
	if err != nil {
		return nil, fmt.Errorf("create the lease table %s: %w", strings.Join(ident, "."), err)
	}
	return tbl, nil
}

// Load reads the record from the control table's current snapshot; its
// version is the snapshot's id.
func (s *leaseStore) Load(ctx context.Context) (lease.Record, string, error) {
	tbl, err := s.table(s.l.Scope(ctx))
	if err != nil {
		return lease.Record{}, "", err
	}
	return leaseRecord(tbl)
}

func leaseRecord(tbl *table.Table) (lease.Record, string, error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return lease.Record{}, "", nil
	}
	var rec lease.Record
	if snap.Summary == nil || json.Unmarshal([]byte(snap.Summary.Properties[SummaryLease]), &rec) != nil {
		return lease.Record{}, "", fmt.Errorf("snapshot %d of the lease table %s holds no lease record; another writer committed to it: drop the table (`DROP TABLE %s`) and restart",
			snap.SnapshotID, strings.Join(tbl.Identifier(), "."), strings.Join(tbl.Identifier(), "."))
	}
	return rec, strconv.FormatInt(snap.SnapshotID, 10), nil
}

// Swap commits rec as a new snapshot that asserts the one of version.
func (s *leaseStore) Swap(ctx context.Context, version string, rec lease.Record) (string, error) {
	ctx = s.l.Scope(ctx)
	tbl, err := s.table(ctx)
	if err != nil {
		return "", err
	}
	if _, cur, err := leaseRecord(tbl); err != nil {
		return "", err
	} else if cur != version {
		return "", lease.ErrContended
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	tx, err := tbl.NewTransactionOnBranchWithError(table.MainBranch)
	if err != nil {
		return "", err
	}
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return "", err
	}
	if err := tx.AddFiles(ctx, nil, iceberg.Properties{SummaryLease: string(b)}, false); err != nil {
		return "", fmt.Errorf("stage the lease record: %w", err)
	}
	if tbl.CurrentSnapshot() != nil {
		if err := tx.ExpireSnapshots(table.WithRetainLast(1), table.WithOlderThan(0)); err != nil {
			return "", fmt.Errorf("stage the expiry of the lease's old snapshots: %w", err)
		}
	}
	next, err := tx.Commit(ctx)
	if err == nil {
		return strconv.FormatInt(next.CurrentSnapshot().SnapshotID, 10), nil
	}
	// The catalog may have applied the commit and failed afterwards, or
	// refused it because another daemon's swap landed first: the record
	// tells (read with a context of its own: ctx may be what ended).
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	fresh, lerr := s.table(rctx)
	if lerr != nil {
		return "", fmt.Errorf("swap the lease record: %w", err)
	}
	got, nv, rerr := leaseRecord(fresh)
	switch {
	case rerr == nil && got.Holder.Instance == rec.Holder.Instance && got.Token == rec.Token && got.Renewed.Equal(rec.Renewed):
		return nv, nil
	case nv != version:
		return "", lease.ErrContended
	}
	return "", fmt.Errorf("swap the lease record: %w", err)
}

// Fence commits, to every table of the pipeline, a snapshot that adds
// nothing and carries token: an older holder's commit, which asserts the
// snapshot it loaded, can no longer land. The new holder calls it before
// it commits anything; it returns the number of tables fenced.
func (l *Lake) Fence(ctx context.Context, token int64) (int, error) {
	ctx = l.Scope(ctx)
	idents, err := l.ListTables(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ident := range idents {
		tbl, err := l.cat.LoadTable(ctx, ident)
		if errors.Is(err, catalog.ErrNoSuchTable) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("load table %s to fence it: %w", strings.Join(ident, "."), err)
		}
		if !l.ownedBy(tbl) {
			continue
		}
		refs := []string{table.MainBranch}
		if refOf(tbl.Metadata()) == CopyBranch {
			refs = append(refs, CopyBranch)
		}
		for _, ref := range refs {
			if tbl, err = l.fence(ctx, tbl, ref, token); err != nil {
				return n, err
			}
		}
		n++
	}
	return n, nil
}

// ownedBy says whether tbl is one of this pipeline's tables.
func (l *Lake) ownedBy(tbl *table.Table) bool {
	props := tbl.Properties()
	if props[PropSource] == "" {
		return false
	}
	if props[PropPipeline] == l.cfg.Pipeline {
		return true
	}
	_, ok := props[PropCommitted+l.cfg.Pipeline]
	return ok
}

func (l *Lake) fence(ctx context.Context, tbl *table.Table, ref string, token int64) (*table.Table, error) {
	if h := head(tbl.Metadata(), ref); h != nil && tokenOf(h) >= token {
		return tbl, nil // fenced already (a fence retried after a crash)
	}
	tx, err := tbl.NewTransactionOnBranchWithError(ref)
	if err != nil {
		return nil, err
	}
	if err := tx.AssertRefSnapshotID(ref); err != nil {
		return nil, err
	}
	props := iceberg.Properties{SummaryFence: l.cfg.Pipeline, SummaryToken: strconv.FormatInt(token, 10)}
	if err := tx.AddFiles(ctx, nil, props, false); err != nil {
		return nil, fmt.Errorf("stage the fence of %s: %w", strings.Join(tbl.Identifier(), "."), err)
	}
	next, err := tx.Commit(ctx)
	if err != nil {
		return nil, fmt.Errorf("fence table %s (branch %s) against the pipeline's previous holder: %w; the fence is retried before anything is committed",
			strings.Join(tbl.Identifier(), "."), ref, err)
	}
	return next, nil
}

// refuseOtherPipeline fails when another pipeline writes tbl: two
// pipelines would overwrite each other's rows and positions. Pipelines
// that write different tables of one warehouse work side by side.
func (l *Lake) refuseOtherPipeline(tbl *table.Table, id fmt.Stringer) error {
	props := tbl.Properties()
	other := props[PropPipeline]
	if other == "" {
		for k := range props {
			if p, ok := strings.CutPrefix(k, PropCommitted); ok && p != l.cfg.Pipeline {
				other = p
				break
			}
		}
	}
	if other == "" || other == l.cfg.Pipeline {
		return nil
	}
	name := strings.Join(tbl.Identifier(), ".")
	return cdcsync.Permanent(fmt.Errorf("the Iceberg table %s (of MySQL table %s) is written by pipeline %q, and two pipelines must not write one table: "+
		"exclude %s from pipeline %q (source.exclude), or give it another Iceberg name with a tables[] rule (namespace, name); "+
		"if pipeline %q was renamed to %q, remove the table property %s (and %s%s) to hand the table over",
		name, id, other, id, l.cfg.Pipeline, other, l.cfg.Pipeline, PropPipeline, PropCommitted, other))
}

// tokenOf returns the fencing token a snapshot was committed with (0 for
// commits without one: other writers, cdcsync before leases).
func tokenOf(s *table.Snapshot) int64 {
	if s == nil || s.Summary == nil {
		return 0
	}
	n, _ := strconv.ParseInt(s.Summary.Properties[SummaryToken], 10, 64)
	return n
}
