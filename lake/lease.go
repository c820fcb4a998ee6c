package lake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
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
	return table.Identifier{LeaseNamespace, l.opts.Pipeline + "_lease"}
}

// LeaseStore returns the store of the pipeline's lease.
func (l *Lake) LeaseStore() lease.Store { return &leaseStore{l: l} }

type leaseStore struct{ l *Lake }

func (s *leaseStore) table(ctx context.Context) (*table.Table, error) {
	l := s.l
	ident := l.LeaseIdent()
	tbl, err := l.cat.LoadTable(ctx, ident)
	floor := int64(0)
	switch {
	case err != nil && !errors.Is(err, catalog.ErrNoSuchTable) && missingFile(err):
		// A catalog restored from a backup names a metadata file that
		// later swaps deleted. The record is lost: start a new table
		// whose tokens continue after the newest one the warehouse knows
		// (the checkpoint's).
		ck, _, cerr := l.LoadCheckpoint(ctx)
		if cerr != nil {
			return nil, fmt.Errorf("the lease table %s cannot be read (%v), and neither can the checkpoint: %w", strings.Join(ident, "."), err, cerr)
		}
		floor = ck.Token
		l.log.Warn("the lease table's metadata file is gone (was the catalog restored from a backup?); creating the lease table again",
			"table", strings.Join(ident, "."), "error", err, "tokens_after", floor)
		if derr := l.cat.DropTable(ctx, ident); derr != nil && !errors.Is(derr, catalog.ErrNoSuchTable) {
			return nil, fmt.Errorf("drop the unreadable lease table %s: %w", strings.Join(ident, "."), derr)
		}
	case !errors.Is(err, catalog.ErrNoSuchTable):
		return tbl, err
	}
	if err := l.cat.CreateNamespace(ctx, table.Identifier{LeaseNamespace}, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, fmt.Errorf("create namespace %s: %w", LeaseNamespace, err)
	}
	sc := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "unused", Type: iceberg.PrimitiveTypes.Int32})
	tbl, err = l.cat.CreateTable(ctx, ident, sc,
		catalog.WithLocation(l.pipelineDir()+"/lease"),
		catalog.WithProperties(iceberg.Properties{
			"comment": fmt.Sprintf("the lease of cdcsync pipeline %s (who holds it: its current snapshot's summary); it holds no rows", l.opts.Pipeline),
			table.MetadataDeleteAfterCommitEnabledKey: "true",
			"format-version":                     "2",
			table.MetadataPreviousVersionsMaxKey: "3",
			propTokenFloor:                       strconv.FormatInt(floor, 10),
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

// propTokenFloor is the lease table property a table created again starts
// its tokens after.
const propTokenFloor = "cdcsync.lease.token-floor"

// missingFile says err is about a file that does not exist.
func missingFile(err error) bool {
	msg := err.Error()
	return errors.Is(err, fs.ErrNotExist) || strings.Contains(msg, "no such file") || strings.Contains(msg, "NoSuchKey") ||
		strings.Contains(msg, "does not exist")
}

func leaseRecord(tbl *table.Table) (lease.Record, string, error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		// No holder yet: tokens start after the floor (a table created
		// again after a restore).
		floor, _ := strconv.ParseInt(tbl.Properties()[propTokenFloor], 10, 64)
		return lease.Record{Token: floor}, "", nil
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
	next, err := s.commitRecord(ctx, tbl, string(b))
	if err == nil {
		return strconv.FormatInt(next, 10), nil
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

// commitRecord commits a snapshot that carries the record in its summary
// and replaces every earlier one, asserting the current one. It is staged
// by hand rather than as an append: an append reads the current snapshot's
// manifest list, which is gone once that snapshot was expired, and after a
// catalog restored from a backup the current snapshot is such an expired
// one. The new snapshot has no parent and an empty manifest list of its own.
func (s *leaseStore) commitRecord(ctx context.Context, tbl *table.Table, record string) (int64, error) {
	meta := tbl.Metadata()
	id := rand.Int64N(1<<62) + 1
	seq := meta.LastSequenceNumber() + 1
	var buf bytes.Buffer
	if err := iceberg.WriteManifestList(meta.Version(), &buf, id, nil, &seq, 0, nil); err != nil {
		return 0, fmt.Errorf("write the lease's manifest list: %w", err)
	}
	fsys, err := s.l.fs(ctx)
	if err != nil {
		return 0, err
	}
	list := fmt.Sprintf("%s/metadata/snap-%d-lease.avro", strings.TrimRight(tbl.Location(), "/"), id)
	if err := fsys.WriteFile(list, buf.Bytes()); err != nil {
		return 0, fmt.Errorf("write the lease's manifest list %s: %w", list, err)
	}
	schema := meta.CurrentSchema().ID
	snap := &table.Snapshot{SnapshotID: id, SequenceNumber: seq, TimestampMs: time.Now().UnixMilli(), ManifestList: list, SchemaID: &schema,
		Summary: &table.Summary{Operation: table.OpAppend, Properties: iceberg.Properties{SummaryLease: record}}}
	var old []int64
	var oldLists []string
	for _, o := range meta.Snapshots() {
		old = append(old, o.SnapshotID)
		oldLists = append(oldLists, o.ManifestList)
	}
	var cur *int64
	if c := meta.CurrentSnapshot(); c != nil {
		cur = &c.SnapshotID
	}
	updates := []table.Update{table.NewAddSnapshotUpdate(snap), table.NewSetSnapshotRefUpdate(table.MainBranch, id, table.BranchRef, 0, 0, 0)}
	if len(old) > 0 {
		updates = append(updates, table.NewRemoveSnapshotsUpdate(old, false))
	}
	reqs := []table.Requirement{table.AssertTableUUID(meta.TableUUID()), table.AssertRefSnapshotID(table.MainBranch, cur)}
	newMeta, _, err := s.l.cat.CommitTable(ctx, tbl.Identifier(), reqs, updates)
	if err != nil {
		_ = fsys.Remove(list)
		return 0, err
	}
	for _, f := range oldLists {
		_ = fsys.Remove(f) // best effort: nothing reads an expired snapshot's empty list
	}
	// The metadata files the new metadata's log no longer lists
	// (write.metadata.previous-versions-max) go too, as an append's commit
	// would delete them (the lease table asks for it).
	dropOldMetadata(fsys, meta, newMeta)
	return id, nil
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
			if tbl, err = l.fenceRef(ctx, tbl, ref, token); err != nil {
				return n, err
			}
		}
		n++
	}
	return n, nil
}

// fenceTries bounds how often a fence is staged again because another
// commit moved the branch first.
const fenceTries = 10

// fenceRef fences one branch of tbl. The previous holder commits until it
// learns of the takeover: one paused after its checks, and resumed while
// the fence goes from table to table, finishes its commit to a table not
// fenced yet. When the branch moved between the load and the fence's
// commit, the commit that won is the previous holder's last (legitimate:
// it asserted the snapshot it had loaded, and the new holder reads the
// table's progress after the fence), and the fence is staged again on top
// of it.
func (l *Lake) fenceRef(ctx context.Context, tbl *table.Table, ref string, token int64) (*table.Table, error) {
	for try := 1; ; try++ {
		next, err := l.fence(ctx, tbl, ref, token)
		if err == nil || try == fenceTries || ctx.Err() != nil {
			return next, err
		}
		fresh, lerr := l.cat.LoadTable(ctx, tbl.Identifier())
		if lerr != nil {
			return nil, err
		}
		if snapshotID(head(fresh.Metadata(), ref)) == snapshotID(head(tbl.Metadata(), ref)) {
			return nil, err // the branch did not move: not a lost race
		}
		l.log.Info("another commit landed before the fence; fencing on top of it", "table", strings.Join(tbl.Identifier(), "."), "branch", ref,
			"snapshot", snapshotID(head(fresh.Metadata(), ref)), "token", tokenOf(head(fresh.Metadata(), ref)))
		tbl = fresh
		time.Sleep(time.Duration(10+rand.IntN(40)) * time.Millisecond)
	}
}

// ownedBy says whether tbl is one of this pipeline's tables.
func (l *Lake) ownedBy(tbl *table.Table) bool {
	props := tbl.Properties()
	if props[PropSource] == "" {
		return false
	}
	if props[PropPipeline] == l.opts.Pipeline {
		return true
	}
	_, ok := props[PropCommitted+l.opts.Pipeline]
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
	props := iceberg.Properties{SummaryFence: l.opts.Pipeline, SummaryToken: strconv.FormatInt(token, 10)}
	if err := tx.AddFiles(ctx, nil, props, false); err != nil {
		return nil, fmt.Errorf("stage the fence of %s: %w", strings.Join(tbl.Identifier(), "."), err)
	}
	next, err := tx.Commit(ctx)
	if err != nil {
		return nil, fmt.Errorf("fence table %s (branch %s) against the pipeline's previous holder: %w; this daemon committed nothing, and fences again when it starts",
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
			if p, ok := strings.CutPrefix(k, PropCommitted); ok && p != l.opts.Pipeline {
				other = p
				break
			}
		}
	}
	if other == "" || other == l.opts.Pipeline {
		return nil
	}
	name := strings.Join(tbl.Identifier(), ".")
	return cdcsync.Permanent(fmt.Errorf("the Iceberg table %s (of MySQL table %s) is written by pipeline %q, and two pipelines must not write one table: "+
		"exclude %s from pipeline %q (source.exclude), or give it another Iceberg name with a tables[] rule (namespace, name); "+
		"if pipeline %q was renamed to %q, remove the table property %s (and %s%s) to hand the table over",
		name, id, other, id, l.opts.Pipeline, other, l.opts.Pipeline, PropPipeline, PropCommitted, other))
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
