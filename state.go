package cdcsync

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Committed is what a table's snapshot summaries say cdcsync last committed.
type Committed struct {
	Epoch int64
	Pos   Position
	Found bool // false when the pipeline never committed to the table
	// Copy is the progress of the table's initial copy, when one runs.
	Copy *CopyState
}

// StopInfo says why and where cdcsync stopped mirroring a table.
type StopInfo struct {
	Position  Position  `json:"position"`
	Reason    string    `json:"reason"`
	Statement string    `json:"statement,omitempty"`
	Dropped   bool      `json:"dropped,omitempty"`   // the MySQL table was dropped (ddl.drop_table: keep)
	NoRecopy  bool      `json:"no_recopy,omitempty"` // a new copy would not help
	Time      time.Time `json:"time"`
}

// Checkpoint is the position up to which every table of the pipeline is
// committed. cdcsync resumes reading the binlog there.
type Checkpoint struct {
	Pipeline string    `json:"pipeline"`
	Epoch    int64     `json:"epoch"`
	Pos      Position  `json:"position"`
	Time     time.Time `json:"time"`
	// Tables holds each table's last committed epoch when the checkpoint
	// was written: a table that has not changed since holds everything up
	// to Pos, however old its own last commit (see Holds).
	Tables []TableEpoch `json:"tables,omitempty"`
	// Token is the fencing token of the lease holder that wrote it.
	Token int64 `json:"token,omitempty"`
}

// TableEpoch is a table's last committed epoch.
type TableEpoch struct {
	Table TableID `json:"table"`
	Epoch int64   `json:"epoch"`
}

// Holds reports whether a table whose last commit is epoch holds every
// transaction up to c.Pos: c recorded its last commit at that epoch or an
// earlier one. A table whose catalog was restored from a backup shows an
// older epoch and does not; nor does one c does not list (written by an
// older cdcsync, or a table that joined the pipeline since), whose own
// position is all that is known.
func (c Checkpoint) Holds(id TableID, epoch int64) bool {
	i, ok := slices.BinarySearchFunc(c.Tables, id, func(e TableEpoch, id TableID) int { return compareIDs(e.Table, id) })
	return ok && epoch >= c.Tables[i].Epoch
}

// Effective is the position up to which a table with committed state
// holds every transaction: its own position, or c.Pos when it holds that
// (Holds) and its own is older. A quiet table would otherwise make every
// restart replay the binlog from its last change, and fail once the
// server expired that binlog.
func (c Checkpoint) Effective(id TableID, committed Committed, order Order) Position {
	if !committed.Found || committed.Copy != nil || !c.Holds(id, committed.Epoch) {
		return committed.Pos
	}
	if ok, err := order.Includes(committed.Pos, c.Pos); err == nil && ok {
		return committed.Pos
	}
	return c.Pos
}

// SortTables orders Tables for Holds.
func (c *Checkpoint) SortTables() {
	slices.SortFunc(c.Tables, func(a, b TableEpoch) int { return compareIDs(a.Table, b.Table) })
}

func compareIDs(a, b TableID) int {
	return cmp.Or(strings.Compare(a.Database, b.Database), strings.Compare(a.Table, b.Table))
}
