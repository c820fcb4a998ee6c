package lake

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
)

// TableStatus is what the catalog says about one of the pipeline's tables.
type TableStatus struct {
	ID        cdcsync.TableID
	Iceberg   string // namespace.table
	Committed cdcsync.Committed
	// LastCommit is when the pipeline last committed to the table (zero
	// when the snapshot of that commit was expired).
	LastCommit time.Time
	Stopped    *cdcsync.StopInfo // why cdcsync stopped mirroring it; nil while it does
	StopNote   string            // Stopped for a person: why, and how to resume
	Recopy     bool              // marked to be copied again by the next run
	Recopying  bool              // copied again on the recopy branch; readers see the last contents
}

// Status lists the pipeline's tables as the catalog has them, sorted by
// MySQL name. It reads only the catalog.
func (l *Lake) Status(ctx context.Context) ([]TableStatus, error) {
	ctx = l.Scope(ctx)
	idents, err := l.ListTables(ctx)
	if err != nil {
		return nil, err
	}
	var out []TableStatus
	for _, ident := range idents {
		tbl, err := l.LoadTable(ctx, ident)
		if err != nil {
			return nil, err
		}
		if !l.ownedBy(tbl) {
			continue
		}
		props := tbl.Properties()
		db, name, _ := strings.Cut(props[PropSource], ".")
		c, err := committedIn(tbl, l.opts.Pipeline)
		if err != nil {
			return nil, err
		}
		st := TableStatus{ID: cdcsync.TableID{Database: db, Table: name}, Iceberg: strings.Join(ident, "."), Committed: c,
			LastCommit: lastCommit(tbl, l.opts.Pipeline), Recopy: props[PropRecopy] != "", Recopying: refOf(tbl.Metadata()) == CopyBranch}
		if info, ok := StoppedIn(props); ok {
			st.Stopped, st.StopNote = &info, l.stoppedMessage(st.ID, ident, info)
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID.String() < out[j].ID.String() })
	return out, nil
}

// lastCommit is the time of the newest snapshot the pipeline committed
// along the table's current branch.
func lastCommit(tbl *table.Table, pipeline string) time.Time {
	meta := tbl.Metadata()
	for s := head(meta, refOf(meta)); s != nil; {
		if s.Summary != nil && s.Summary.Properties[SummaryPipeline] == pipeline {
			return time.UnixMilli(s.TimestampMs).UTC()
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return time.Time{}
}
