package lake

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
)

// parquetFiles lists the Parquet files under the warehouse.
func (e *kvEnv) parquetFiles() []string {
	e.t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(e.dir, "warehouse"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// added returns the files of after that before lacks.
func added(before, after []string) []string {
	had := map[string]bool{}
	for _, p := range before {
		had[p] = true
	}
	var out []string
	for _, p := range after {
		if !had[p] {
			out = append(out, p)
		}
	}
	return out
}

// compactBeforeFirstCommit makes other (the table opened by another
// process) compact everything between tb's next staging and its catalog
// commit, once.
func compactBeforeFirstCommit(t *testing.T, tb, other *Table) {
	compacted := false
	tb.BeforeCommit = func() {
		if compacted {
			return
		}
		compacted = true
		if _, err := other.Compact(context.Background(), CompactOptions{DeleteFiles: 1, DeleteRatio: 0.01, SmallFiles: 1, SmallFileSize: 1 << 30, TargetFileSize: 1 << 30}); err != nil {
			t.Errorf("compact: %v", err)
		}
	}
}

// A commit retried after a failure commits the files its first attempt
// wrote: an outage of any length leaves one set of files per epoch, not one
// per attempt. The failure here is a real one: another process compacted
// the table between the attempt's staging and its catalog commit.
func TestRetryReusesTheAttemptsFiles(t *testing.T) {
	ctx := context.Background()
	e := newKVMode(t, "p", DeletesEquality)
	e.churn(6)
	other := e.second("p") // the same table opened by another process
	before := e.parquetFiles()
	compactBeforeFirstCommit(t, e.tbl, other)
	e.epoch++
	d, r := e.change(keys(1, 5), "retried", nil)
	err := e.tbl.Commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch)}, d, r, nil)
	if err == nil || errors.Is(err, ErrConflict) {
		t.Fatalf("the first attempt: err = %v, want a retryable failure", err)
	}
	mid := added(before, e.parquetFiles())
	if err := e.tbl.Commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch)}, d, r, nil); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	e.apply(keys(1, 5), "retried", nil)
	e.assertModel(e.tbl.Iceberg())
	after := added(before, e.parquetFiles())
	// The retry wrote nothing new.
	if len(after) != len(mid) {
		t.Errorf("the retry wrote %d more files; want none:\n%s", len(after)-len(mid), strings.Join(added(mid, after), "\n"))
	}
	c, err := e.tbl.Committed()
	if err != nil || c.Epoch != e.epoch {
		t.Fatalf("committed %+v, %v", c, err)
	}
}

// TestPositionRetryRewritesItsDeletes: in position mode, a retry after a
// rewrite landed looks the rows up again (the positions its first attempt
// wrote name rows of files the rewrite removed) and removes what the first
// attempt wrote; the rows stay exact.
func TestPositionRetryRewritesItsDeletes(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.churn(6)
	other := e.second("p")
	before := e.parquetFiles()
	compactBeforeFirstCommit(t, e.tbl, other)
	e.epoch++
	d, r := e.change(keys(1, 5), "retried", []int64{50})
	if err := e.tbl.Commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch)}, d, r, nil); err == nil || errors.Is(err, ErrConflict) {
		t.Fatalf("the first attempt: err = %v, want a retryable failure", err)
	}
	first := added(before, e.parquetFiles())
	if err := e.tbl.Commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch)}, d, r, nil); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	e.apply(keys(1, 5), "retried", []int64{50})
	e.assertModel(e.tbl.Iceberg())
	now := map[string]bool{}
	for _, f := range e.parquetFiles() {
		now[f] = true
	}
	for _, f := range first {
		if now[f] && !strings.Contains(f, "compact") && strings.Contains(f, "-00000-") && !inTable(t, e.tbl, f) {
			t.Errorf("the first attempt's file %s is still there", f)
		}
	}
}

// inTable says whether path is a data or delete file of tb's current
// snapshot.
func inTable(t *testing.T, tb *Table, path string) bool {
	t.Helper()
	tasks, err := tb.Iceberg().Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		if strings.HasSuffix(tk.File.FilePath(), path) || strings.HasSuffix(path, tk.File.FilePath()) {
			return true
		}
		for _, d := range append(tk.DeleteFiles, tk.EqualityDeleteFiles...) {
			if strings.HasSuffix(d.FilePath(), path) || strings.HasSuffix(path, d.FilePath()) {
				return true
			}
		}
	}
	return false
}

// A commit that another writer's snapshot beat can never land: the files
// its attempt wrote are removed at once.
func TestConflictRemovesTheAttemptsFiles(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.churn(2)
	intruder := e.second("p") // a second daemon of the pipeline, without the lease
	var theirs []string
	e.tbl.BeforeCommit = func() {
		before := e.parquetFiles()
		if err := intruder.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, []cdcsync.Row{{int64(500), "x"}}, nil); err != nil {
			t.Errorf("intruder: %v", err)
		}
		theirs = added(before, e.parquetFiles())
	}
	before := e.parquetFiles()
	e.epoch++
	d, r := e.change(keys(1, 5), "lost", nil)
	err := e.tbl.Commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch)}, d, r, nil)
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("err = %v, want ErrConflict", err)
	}
	if left := added(before, e.parquetFiles()); strings.Join(left, ",") != strings.Join(theirs, ",") {
		t.Errorf("after the conflict these files are new: %v; only the other writer's should be: %v", left, theirs)
	}
}

// An external expire_snapshots that keeps only the newest snapshot, a
// compaction's, leaves no snapshot of the pipeline: the committed position
// still reads back (from the table property every commit also sets), so
// cdcsync does not take the table for a new one and copy it again (issue 13).
func TestCommittedSurvivesExternalExpiry(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.churn(4)
	want, err := e.tbl.Committed()
	if err != nil || !want.Found {
		t.Fatalf("committed %+v, %v", want, err)
	}
	if _, err := e.tbl.Compact(ctx, CompactOptions{Force: true, TargetFileSize: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	// Another engine expires every snapshot but the newest.
	other := e.second("p") // only its Iceberg handle is used
	tx := other.Iceberg().NewTransaction()
	if err := tx.ExpireSnapshots(table.WithRetainLast(1), table.WithOlderThan(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	reopened := e.second("p")
	got, err := reopened.Committed()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(reopened.Iceberg().Metadata().Snapshots()); n != 1 {
		t.Fatalf("the expiry kept %d snapshots, want 1", n)
	}
	if !got.Found || got.Epoch != want.Epoch || got.Pos != want.Pos {
		t.Fatalf("after the expiry the table reads as committed %+v, want %+v", got, want)
	}
	e.assertModel(reopened.Iceberg())
}

// A table that holds rows is copied again on a branch: readers of main see
// the last contents while the copy runs (never an empty or half-copied
// table), and the commit that completes the copy makes it visible at once.
// A crash between that commit and the switch is finished by the next load.
func TestRecopyKeepsTheLastContentsVisible(t *testing.T) {
	ctx := context.Background()
	for _, crash := range []bool{false, true} {
		e := newKV(t, "p")
		e.churn(3)
		old := map[int64]string{}
		for k, v := range e.model {
			old[k] = v
		}
		e.epoch++
		if err := e.tbl.StartCopy(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch)}); err != nil {
			t.Fatal(err)
		}
		e.model = old
		e.assertModel(e.tbl.Iceberg()) // main: unchanged
		if c, err := e.tbl.Committed(); err != nil || c.Copy == nil || c.Epoch != e.epoch {
			t.Fatalf("after StartCopy the table reads as committed %+v (%v); want the copy's start", c, err)
		}
		// Two chunks of the new copy, the first one not the last.
		e.epoch++
		chunk1 := []cdcsync.Row{{int64(1), "copied"}, {int64(2), "copied"}}
		if err := e.tbl.Commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch)}, nil, chunk1, &cdcsync.CopyState{After: "2", Rows: 2}); err != nil {
			t.Fatal(err)
		}
		e.assertModel(e.tbl.Iceberg()) // main: still unchanged
		e.epoch++
		chunk2 := []cdcsync.Row{{int64(3), "copied"}}
		last := &cdcsync.CopyState{After: "3", Rows: 3, Done: true}
		if crash {
			// The copy's last commit lands on the branch; the process dies
			// before main moves.
			e.tbl.state.commitMu.Lock()
			err := e.tbl.commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch)}, nil, chunk2, last)
			e.tbl.state.commitMu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			e.assertModel(e.tbl.Iceberg())
			e.tbl = e.second("p") // the next start loads the table
		} else if err := e.tbl.Commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch)}, nil, chunk2, last); err != nil {
			t.Fatal(err)
		}
		e.model = map[int64]string{1: "copied", 2: "copied", 3: "copied"}
		e.assertModel(e.tbl.Iceberg())
		meta := e.tbl.Iceberg().Metadata()
		if refOf(meta) != table.MainBranch {
			t.Errorf("crash=%v: the copy branch is still there", crash)
		}
		if c, err := e.tbl.Committed(); err != nil || c.Copy != nil || c.Epoch != e.epoch {
			t.Fatalf("crash=%v: after the copy the table reads as committed %+v (%v)", crash, c, err)
		}
		// Streaming goes on on main.
		e.commit(nil, []int64{4}, "streamed", []int64{1})
		e.assertModel(e.tbl.Iceberg())
	}
}

// A value its Iceberg column cannot take fails the commit with ErrValue,
// naming the column, the row's key and the value, and commits nothing:
// the pipeline stops just that table on it (merge.StopTable).
func TestCommitRefusesValueByName(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	e.churn(2)
	before, files := e.tbl.Iceberg().CurrentSnapshot().SnapshotID, e.parquetFiles()
	e.epoch++
	d, r := e.change(keys(1, 3), "fine", nil)
	r[1][1] = 42 // an int where the column holds strings
	err := e.tbl.Commit(ctx, Epoch{Number: e.epoch, Pos: pos(e.epoch)}, d, r, nil)
	if !errors.Is(err, ErrValue) {
		t.Fatalf("err = %v, want ErrValue", err)
	}
	for _, want := range []string{"id=2", "column v", "42"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not name %q", err, want)
		}
	}
	if got := e.tbl.Iceberg().CurrentSnapshot().SnapshotID; got != before {
		t.Errorf("snapshot %d after the refused commit, want %d: nothing may be committed", got, before)
	}
	if got := added(files, e.parquetFiles()); len(got) != 0 {
		t.Errorf("the refused commit left files %v", got)
	}
	e.assertModel(e.tbl.Iceberg())
}
