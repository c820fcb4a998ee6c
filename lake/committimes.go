package lake

import "time"

// CommitTimes says where the wall time of a table's last epoch commit went:
// an epoch that takes seconds to become visible on a large table is slow
// for one of these reasons, and each has its own remedy (a compaction
// holding the lock, the key index, writing Parquet or deletion vectors,
// rewriting manifests, the catalog).
type CommitTimes struct {
	Epoch     int64         // the epoch committed
	Wait      time.Duration // for the table's commit lock (a compaction, a tag)
	Lookup    time.Duration // key index: catching up and finding the deleted rows
	Data      time.Duration // writing data files
	Deletes   time.Duration // writing delete files, or deletion vectors beyond Data (written at the same time)
	Manifests time.Duration // writing the snapshot's manifests and manifest list
	Catalog   time.Duration // the catalog commit
	Index     time.Duration // recording the committed rows in the key index
	Total     time.Duration

	// The manifest entries the snapshot's manifests hold, and those read
	// from the parent's to carry them over: on a table with many files both
	// grow with the files its epochs touch, and they are what Manifests is
	// spent on.
	EntriesWritten, EntriesRead int64
}

// attrs returns the times as log attributes, in seconds.
func (c CommitTimes) attrs() []any {
	return []any{"wait_seconds", c.Wait.Seconds(), "lookup_seconds", c.Lookup.Seconds(), "data_seconds", c.Data.Seconds(),
		"deletes_seconds", c.Deletes.Seconds(), "manifests_seconds", c.Manifests.Seconds(), "catalog_seconds", c.Catalog.Seconds(),
		"index_seconds", c.Index.Seconds(), "seconds", c.Total.Seconds(),
		"manifest_entries_written", c.EntriesWritten, "manifest_entries_read", c.EntriesRead}
}

// phases returns the times by phase name, for the metrics.
func (c CommitTimes) phases() map[string]time.Duration {
	return map[string]time.Duration{"wait": c.Wait, "lookup": c.Lookup, "data": c.Data, "deletes": c.Deletes,
		"manifests": c.Manifests, "catalog": c.Catalog, "index": c.Index}
}

// LastCommitTimes returns the phases of the table's last epoch commit.
func (t *Table) LastCommitTimes() CommitTimes {
	t.state.timesMu.Lock()
	defer t.state.timesMu.Unlock()
	return t.state.times
}

// clock times the phases of one epoch commit (under commitMu).
type clock struct {
	times *CommitTimes
	at    time.Time
}

// phase names a field of CommitTimes for clock.lap.
type phase func(*CommitTimes) *time.Duration

func lookupPhase(c *CommitTimes) *time.Duration    { return &c.Lookup }
func dataPhase(c *CommitTimes) *time.Duration      { return &c.Data }
func deletesPhase(c *CommitTimes) *time.Duration   { return &c.Deletes }
func manifestsPhase(c *CommitTimes) *time.Duration { return &c.Manifests }
func catalogPhase(c *CommitTimes) *time.Duration   { return &c.Catalog }
func indexPhase(c *CommitTimes) *time.Duration     { return &c.Index }

// lap adds the time since the last lap to phase p; a nil clock (a commit
// that is not an epoch's: compaction, expiry) times nothing.
func (c *clock) lap(p phase) {
	c.lapAt(p, time.Now())
}

// lapAt is lap for a phase that ended at at (a phase run next to the next
// one: the next lap gets only the time after at).
func (c *clock) lapAt(p phase, at time.Time) {
	if c == nil || at.Before(c.at) {
		return
	}
	*p(c.times) += at.Sub(c.at)
	c.at = at
}

// count adds the manifest entries a snapshot wrote and read.
func (c *clock) count(written, read int64) {
	if c == nil {
		return
	}
	c.times.EntriesWritten += written
	c.times.EntriesRead += read
}
