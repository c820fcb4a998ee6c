package lake

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

// A cut is one transactionally consistent state of all the pipeline's
// tables. An epoch ends at a transaction boundary and commits each table's
// share of the same transactions, and the checkpoint of an epoch is saved
// only after every table committed it. So for N the epoch of a checkpoint,
// the newest snapshot of each table whose lineage holds only the
// pipeline's commits of epochs up to N is the state of that table after
// the same transactions: a transaction that changed two tables is in both
// snapshots or in neither. A table that sat out epochs (its commit was
// slow, or it was behind after a restart) commits their transactions late,
// in a snapshot that records the first of them (SummaryEpochFrom): no
// epoch it spans has a consistent cut, and the checkpoint is never one of
// them.

// CutTable is one table's snapshot in a cut.
type CutTable struct {
	ID       cdcsync.TableID `json:"table"`
	Iceberg  string          `json:"iceberg"`
	Snapshot int64           `json:"snapshot_id"`
	// Epoch is the table's last epoch commit in the cut (older than the
	// cut's epoch when the table did not change since).
	Epoch     int64     `json:"epoch"`
	Committed time.Time `json:"committed_at"` // when the snapshot was committed
	// Metadata is the table's current metadata file (DuckDB's iceberg_scan
	// reads the snapshot through it).
	Metadata string `json:"metadata_location"`
}

// CutExcluded is a table of the pipeline that the cut cannot hold, and why.
type CutExcluded struct {
	ID     cdcsync.TableID `json:"table"`
	Reason string          `json:"reason"`
}

// Cut is a consistent state of the pipeline's tables.
type Cut struct {
	Epoch    int64            `json:"epoch"`
	Position cdcsync.Position `json:"position"` // the checkpoint's position; zero for an older epoch
	Tables   []CutTable       `json:"tables"`
	Excluded []CutExcluded    `json:"excluded,omitempty"`
}

// ErrNoCut says the pipeline has no checkpoint yet, or the epoch asked for
// is newer than its checkpoint.
var ErrNoCut = errors.New("no consistent cut")

// Cut returns the cut of epoch (0: the newest checkpoint's). An epoch newer
// than the checkpoint may still be committing and has no cut. Tables whose
// copy runs, or that did not exist at the epoch, are excluded with the
// reason; a table whose snapshot of the cut was expired fails the cut.
func (l *Lake) Cut(ctx context.Context, epoch int64) (Cut, error) {
	ctx = l.Scope(ctx)
	ck, ok, err := l.LoadCheckpoint(ctx)
	if err != nil {
		return Cut{}, err
	}
	if !ok {
		return Cut{}, fmt.Errorf("%w: pipeline %s has no checkpoint yet (the first one is written when the daemon starts streaming)", ErrNoCut, l.opts.Pipeline)
	}
	cut := Cut{Epoch: epoch}
	switch {
	case epoch <= 0 || epoch == ck.Epoch:
		cut.Epoch, cut.Position = ck.Epoch, ck.Pos
	case epoch > ck.Epoch:
		return Cut{}, fmt.Errorf("%w: epoch %d is newer than the pipeline's checkpoint (epoch %d), so it may not be committed to every table yet; use --epoch %d or older",
			ErrNoCut, epoch, ck.Epoch, ck.Epoch)
	}
	idents, err := l.ListTables(ctx)
	if err != nil {
		return Cut{}, err
	}
	for _, ident := range idents {
		tbl, err := l.LoadTable(ctx, ident)
		if err != nil {
			return Cut{}, err
		}
		if !l.ownedBy(tbl) {
			continue
		}
		db, name, _ := strings.Cut(tbl.Properties()[PropSource], ".")
		id := cdcsync.TableID{Database: db, Table: name}
		ct, why, err := l.cutOf(tbl, cut.Epoch)
		if err != nil {
			return Cut{}, fmt.Errorf("table %s: %w", id, err)
		}
		if why != "" {
			cut.Excluded = append(cut.Excluded, CutExcluded{ID: id, Reason: why})
			continue
		}
		ct.ID, ct.Iceberg = id, strings.Join(ident, ".")
		cut.Tables = append(cut.Tables, ct)
	}
	sort.Slice(cut.Tables, func(i, j int) bool { return cut.Tables[i].ID.String() < cut.Tables[j].ID.String() })
	sort.Slice(cut.Excluded, func(i, j int) bool { return cut.Excluded[i].ID.String() < cut.Excluded[j].ID.String() })
	return cut, nil
}

// cutOf picks tbl's snapshot of epoch: the newest snapshot of main whose
// lineage has no commit of the pipeline after epoch. why says why the
// table has none (a copy runs, it did not exist yet).
func (l *Lake) cutOf(tbl *table.Table, epoch int64) (ct CutTable, why string, err error) {
	meta := tbl.Metadata()
	if refOf(meta) == CopyBranch {
		return ct, "it is being copied again (cdcsync resync, or a schema change); its snapshots are not a consistent state", nil
	}
	var chain []*table.Snapshot
	expired := false
	for s := meta.CurrentSnapshot(); s != nil; {
		chain = append(chain, s)
		if s.ParentSnapshotID == nil {
			break
		}
		p := meta.SnapshotByID(*s.ParentSnapshotID)
		if p == nil {
			expired = true
		}
		s = p
	}
	var pick *table.Snapshot
	var last int64
	copying := false
	for i := len(chain) - 1; i >= 0; i-- { // oldest first
		s := chain[i]
		if s.Summary != nil && s.Summary.Properties[SummaryPipeline] == l.opts.Pipeline {
			e, _ := strconv.ParseInt(s.Summary.Properties[SummaryEpoch], 10, 64)
			if e > epoch {
				if from := epochFrom(s); from > 0 && from <= epoch {
					return ct, "", fmt.Errorf("%w: its commit of epoch %d also holds the transactions of epochs %d to %d (it committed them late: its commit was slow, or it was behind after a restart), "+
						"so epoch %d is not a consistent state; use --epoch %d or --epoch %d", ErrNoCut, e, from, e-1, epoch, from-1, e)
				}
				break
			}
			last = e
			_, copying = s.Summary.Properties[SummaryCopyAfter]
		}
		pick = s
	}
	switch {
	case pick == nil && expired:
		return ct, "", fmt.Errorf("its snapshots of epoch %d and before were expired (maintenance.snapshots keeps max_age and min_keep); take a newer cut, or tag cuts (--tag) to keep them", epoch)
	case pick == nil || last == 0:
		return ct, fmt.Sprintf("it has no commit of epoch %d or before (it joined the pipeline later)", epoch), nil
	case copying:
		return ct, fmt.Sprintf("its initial copy was running at epoch %d; its rows then were partial", epoch), nil
	}
	return CutTable{Snapshot: pick.SnapshotID, Epoch: last, Committed: time.UnixMilli(pick.TimestampMs).UTC(), Metadata: tbl.MetadataLocation()}, "", nil
}

// epochFrom is the first earlier epoch whose transactions the pipeline
// commit s holds (SummaryEpochFrom), 0 when it holds only its own.
func epochFrom(s *table.Snapshot) int64 {
	if s.Summary == nil {
		return 0
	}
	from, _ := strconv.ParseInt(s.Summary.Properties[SummaryEpochFrom], 10, 64)
	return from
}

// outsideCarried is the newest epoch at or before e that no late commit
// spans: ranges holds, for each commit that also holds earlier epochs'
// transactions, the first of those epochs and its own.
func outsideCarried(e int64, ranges [][2]int64) int64 {
	for moved := true; moved && e > 0; {
		moved = false
		for _, r := range ranges {
			if e >= r[0] && e < r[1] {
				e, moved = r[0]-1, true
			}
		}
	}
	return e
}

// EpochAsOf returns the newest epoch whose transactions all committed in
// MySQL at or before t: the epoch of the cut as of t. Only epochs that
// recorded their source time (SummarySourceTime) count, and none newer
// than the checkpoint.
func (l *Lake) EpochAsOf(ctx context.Context, t time.Time) (int64, error) {
	ctx = l.Scope(ctx)
	ck, ok, err := l.LoadCheckpoint(ctx)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%w: pipeline %s has no checkpoint yet", ErrNoCut, l.opts.Pipeline)
	}
	idents, err := l.ListTables(ctx)
	if err != nil {
		return 0, err
	}
	best := int64(0)
	var oldest time.Time
	var late [][2]int64 // epochs a late commit spans (SummaryEpochFrom)
	for _, ident := range idents {
		tbl, err := l.LoadTable(ctx, ident)
		if err != nil {
			return 0, err
		}
		if !l.ownedBy(tbl) {
			continue
		}
		meta := tbl.Metadata()
		for s := meta.CurrentSnapshot(); s != nil; {
			if p := s.Summary; p != nil && p.Properties[SummaryPipeline] == l.opts.Pipeline {
				ms, err1 := strconv.ParseInt(p.Properties[SummarySourceTime], 10, 64)
				e, err2 := strconv.ParseInt(p.Properties[SummaryEpoch], 10, 64)
				if from := epochFrom(s); err2 == nil && from > 0 && from < e {
					late = append(late, [2]int64{from, e})
				}
				if err1 == nil && err2 == nil {
					st := time.UnixMilli(ms)
					if !st.After(t) && e <= ck.Epoch {
						best = max(best, e)
					}
					if oldest.IsZero() || st.Before(oldest) {
						oldest = st
					}
				}
			}
			if s.ParentSnapshotID == nil {
				break
			}
			s = meta.SnapshotByID(*s.ParentSnapshotID)
		}
	}
	best = outsideCarried(best, late)
	if best == 0 {
		if oldest.IsZero() {
			return 0, fmt.Errorf("%w: no commit of pipeline %s records its MySQL time (epochs committed by older cdcsync versions do not); use --epoch", ErrNoCut, l.opts.Pipeline)
		}
		return 0, fmt.Errorf("%w: no epoch kept in the tables' snapshots committed its transactions at or before %s (the oldest kept is of %s)",
			ErrNoCut, t.UTC().Format(time.RFC3339), oldest.UTC().Format(time.RFC3339))
	}
	return best, nil
}

// TagCut tags every table's snapshot of cut with name, so that the cut can
// be read again by name and snapshot expiry keeps it. keep is how long the
// tag is kept (0: until it is removed).
//
// In the daemon (the lake runs a session's sink), each table's commits
// pause while its tag is committed: an epoch or compaction commit landing
// between the catalog's read of the metadata and its write would fail the
// tag's commit, and with epochs committed back to back (a short
// epoch.interval, a busy machine) it could fail every try. Elsewhere
// (cdcsync cut without a daemon to ask) a lost race is tried again.
func (l *Lake) TagCut(ctx context.Context, cut Cut, name string, keep time.Duration) error {
	var hold func(cdcsync.TableID) func()
	if s := l.sink.Load(); s != nil {
		hold = s.holdCommits
	}
	return l.tagCut(ctx, cut, name, keep, hold)
}

// tagCut is TagCut, holding each table's commits with hold (nil: none).
func (l *Lake) tagCut(ctx context.Context, cut Cut, name string, keep time.Duration, hold func(cdcsync.TableID) func()) error {
	ctx = l.Scope(ctx)
	if name == "" || name == table.MainBranch || name == CopyBranch {
		return fmt.Errorf("a cut cannot be tagged %q: choose another name, e.g. cut-2026-12-03", name)
	}
	age := int64(0) // 0 is left out of the update: kept until removed
	if keep > 0 {
		age = keep.Milliseconds()
	}
	for _, t := range cut.Tables {
		resume := func() {}
		if hold != nil {
			resume = hold(t.ID)
		}
		err := l.tagTable(ctx, t, name, age)
		resume()
		if err != nil {
			return err
		}
	}
	return nil
}

// tagTableTries bounds how long a tag is tried again while other commits
// win the race for the table's metadata.
var tagTableTries = time.Minute

// tagTable tags one table's snapshot of a cut. A commit that lost the race
// to another (the daemon commits meanwhile, back to back while it catches
// up) is staged again on the reloaded table, after a short random pause,
// for up to a minute. Other errors (a busy SQLite catalog) are tried ten
// times.
func (l *Lake) tagTable(ctx context.Context, t CutTable, name string, age int64) error {
	ident := table.Identifier(strings.Split(t.Iceberg, "."))
	lost := 0
	for try, deadline := 0, time.Now().Add(tagTableTries); ; try++ {
		err := l.tag(ctx, ident, t, name, age)
		if errors.Is(err, table.ErrCommitFailed) {
			lost++
		}
		switch {
		case err == nil || errors.Is(err, errTagTaken) || ctx.Err() != nil:
			return err
		case time.Now().After(deadline) && lost > 0:
			return fmt.Errorf("%w; other commits to %s won the race for its metadata %d times in %s: tag the cut through the running daemon "+
				"(cdcsync cut finds it on admin.listen), or when the table is quieter", err, t.Iceberg, lost, tagTableTries)
		case time.Now().After(deadline) || (!errors.Is(err, table.ErrCommitFailed) && try >= 9):
			return err
		}
		time.Sleep(time.Duration(10+rand.IntN(90)) * time.Millisecond)
	}
}

var errTagTaken = errors.New("the tag name is taken")

func (l *Lake) tag(ctx context.Context, ident table.Identifier, t CutTable, name string, age int64) error {
	tbl, err := l.LoadTable(ctx, ident)
	if err != nil {
		return err
	}
	if s := tbl.Metadata().SnapshotByName(name); s != nil {
		if s.SnapshotID == t.Snapshot {
			return nil // tagged already
		}
		return fmt.Errorf("table %s already has a tag or branch %q (snapshot %d); choose another name: %w", t.Iceberg, name, s.SnapshotID, errTagTaken)
	}
	_, _, err = l.cat.CommitTable(ctx, ident,
		[]table.Requirement{table.AssertTableUUID(tbl.Metadata().TableUUID()), table.AssertRefSnapshotID(name, nil)},
		[]table.Update{table.NewSetSnapshotRefUpdate(name, t.Snapshot, table.TagRef, age, 0, 0)})
	if err != nil {
		return fmt.Errorf("tag snapshot %d of %s as %q: %w", t.Snapshot, t.Iceberg, name, err)
	}
	return nil
}

// cutTags is the daemon's schedule of cut tags (config.Cut): once per
// period of tag_every, the first checkpoint of the period tags its cut
// on every table, named after the period's start. The name makes it
// idempotent: a daemon restarted within a period finds the tag there.
type cutTags struct {
	every, keep time.Duration
	prefix      string
	done        int64     // the last period tagged (or found tagged)
	retryAt     time.Time // after a failure, the next try
	// The first try in period tried: a cut that leaves out tables being
	// copied waits for them for up to half a period from then.
	tried    int64
	firstTry time.Time
	now      func() time.Time
}

func newCutTags(c *config.Cut) *cutTags {
	if c.TagEvery.Duration <= 0 {
		return nil
	}
	return &cutTags{every: c.TagEvery.Duration, keep: c.TagKeep.Duration, prefix: c.TagPrefix, done: -1, now: time.Now}
}

// tagName returns the tag of the period that holds t, and the period.
func (ct *cutTags) tagName(t time.Time) (string, int64) {
	period := t.UnixNano() / int64(ct.every)
	start := time.Unix(0, period*int64(ct.every)).UTC()
	return ct.prefix + start.Format("20060102T150405Z"), period
}

// tagScheduledCut tags the cut of epoch, just checkpointed, when its
// period has no tag yet. A failure is logged and tried again a minute
// later: a tag is a convenience, never a reason to stop mirroring.
func (l *Lake) tagScheduledCut(ctx context.Context, epoch int64) {
	ct := l.cutTags
	if ct == nil {
		return
	}
	now := ct.now()
	name, period := ct.tagName(now)
	if period == ct.done || now.Before(ct.retryAt) {
		return
	}
	if ct.tried != period {
		ct.tried, ct.firstTry = period, now
	}
	cut, err := l.Cut(ctx, epoch)
	if err == nil && len(cut.Excluded) > 0 && now.Before(ct.firstTry.Add(ct.every/2)) {
		// Tables being copied are left out of a cut: wait a little for
		// their copies rather than tag the others only.
		ct.retryAt = now.Add(min(ct.every/20, time.Minute))
		return
	}
	if err == nil {
		// No hold: this runs on the pipeline's goroutine, which must not
		// wait for a slow table's commit; a lost race is tried again.
		err = l.tagCut(ctx, cut, name, ct.keep, nil)
	}
	switch {
	case err == nil:
		l.log.Info("tagged the consistent cut of every table", "tag", name, "epoch", cut.Epoch, "tables", len(cut.Tables), "excluded", len(cut.Excluded))
	case errors.Is(err, errTagTaken):
		l.log.Info("the consistent cut of this period is tagged already", "tag", name, "detail", err.Error())
	default:
		if ctx.Err() == nil {
			l.log.Warn("cannot tag the consistent cut; trying again in a minute", "tag", name, "error", err)
		}
		ct.retryAt = now.Add(time.Minute)
		return
	}
	ct.done = period
}
