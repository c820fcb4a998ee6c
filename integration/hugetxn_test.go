package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
)

// TestHugeTransactions mirrors single transactions larger than the
// daemon's memory budget: an INSERT ... SELECT, an UPDATE of every row, a
// DELETE of half the rows, and few rows of large values. Each is read
// first by a daemon killed (SIGKILL) once it wrote out the first part of
// it, then by a fresh one: the transaction lands whole in one snapshot,
// the table equals MySQL, the daemon's peak RSS stays within
// memory_limit, and the killed daemon's files are gone.
//
// CDCSYNC_HUGE_ROWS and CDCSYNC_HUGE_LIMIT_MIB change the rows of each
// transaction (1,000,000) and memory_limit (384 MiB) for a run by hand,
// e.g. 5000000 and 512.
func TestHugeTransactions(t *testing.T) {
	const dbName = "it_hugetxn"
	const width = 200
	rows, memoryLimit := envInt(t, "CDCSYNC_HUGE_ROWS", 1000000), envInt(t, "CDCSYNC_HUGE_LIMIT_MIB", 384)
	bin := plainBinary(t)
	e := newEnv(t, dbName, envOptions{epoch: "interval: 1s",
		extra: fmt.Sprintf("memory_limit: %dMiB\nmaintenance:\n  enabled: false", memoryLimit), indexCache: "32MiB"})
	e.exec(fmt.Sprintf("CREATE TABLE %s.big (id INT PRIMARY KEY, grp INT NOT NULL, pad VARCHAR(%d) NOT NULL)", dbName, width))
	txnMiB := float64(rows*(width+40)) / (1 << 20) // the rows' images in MySQL
	e.exec(fmt.Sprintf("CREATE TABLE %s.blobs (id INT PRIMARY KEY, b LONGBLOB NOT NULL)", dbName))

	lk := e.openLake()
	ctx := context.Background()
	load := func(name string) *table.Table {
		tbl, err := lk.LoadTable(ctx, lk.Identifier(dbName, name))
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	}
	// lastCommit returns the summary of the table's newest snapshot.
	lastCommit := func(name string) map[string]string {
		s := load(name).CurrentSnapshot()
		if s == nil || s.Summary == nil {
			t.Fatal("the table has no snapshot")
		}
		return s.Summary.Properties
	}
	orphans := func(name string) []string {
		plan, err := load(name).PlanOrphanFiles(lk.Scope(ctx), table.WithFilesOlderThan(0))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range plan.Files() {
			if strings.HasSuffix(f, ".parquet") {
				out = append(out, f)
			}
		}
		return out
	}
	// mirror runs stmt, one transaction, under a daemon that is killed
	// once it wrote out the first part of it, then under a fresh daemon
	// that reads it again and commits it whole; and checks both.
	mirror := func(name, what, stmt, wantAdded, wantDeleted string) {
		t.Helper()
		p := e.startWith(bin, "CDCSYNC_FAULT=after-spill:1")
		e.waitCaughtUp(p, time.Minute)
		head := load(name).CurrentSnapshot()
		e.exec(stmt)
		select {
		case <-p.done:
		case <-time.After(3 * time.Minute):
			p.kill()
			t.Fatalf("%s: the daemon was not killed after its first spill; output:\n%s", what, p.output())
		}
		if !strings.Contains(p.output(), "point=after-spill") {
			t.Fatalf("%s: the daemon ended without the fault; output:\n%s", what, p.output())
		}
		if wantAdded != "" && len(orphans(name)) == 0 {
			// (A spill of deletes alone writes no file in position mode:
			// the commit looks the keys up.)
			t.Fatalf("%s: the killed daemon left no file of its spill: the test does not test the cleanup", what)
		}
		if now := load(name).CurrentSnapshot(); (head == nil) != (now == nil) || (head != nil && now.SnapshotID != head.SnapshotID) {
			t.Fatalf("%s: the killed daemon committed part of the transaction", what)
		}

		start := time.Now()
		// The memory measured is the daemon's as users run it: without the
		// tests' second decoding of every row image (scripts/test.sh's
		// CDCSYNC_CHECK_ROW_IMAGES=1), which adds 40 MiB and more to the
		// blob case's peak, and without poisoning freed write buffers
		// (CDCSYNC_POISON_FREED_BUFFERS=1), which makes every page of a
		// freed buffer resident. The killed daemon above does both.
		p = e.startWith(bin, "CDCSYNC_CHECK_ROW_IMAGES=0", "CDCSYNC_POISON_FREED_BUFFERS=0")
		peaks := procPeaks(p)
		anon := anonPeak(p)
		e.waitCaughtUp(p, 4*time.Minute)
		took := time.Since(start)
		_, peak := peaks()
		if code := p.stop(t); code != 0 {
			t.Fatalf("%s: exit %d after SIGTERM; output:\n%s", what, code, p.output())
		}
		t.Logf("%s: mirrored %s after the daemon started; peak RSS %d MiB (anonymous %d MiB; memory_limit %d MiB)",
			what, took.Round(time.Millisecond), peak, anon(), memoryLimit)
		if !strings.Contains(p.output(), "spilled the open epoch") {
			t.Errorf("%s: the daemon did not write the transaction out before its commit; output:\n%s", what, p.output())
		}
		if peak == 0 || peak > memoryLimit {
			t.Errorf("%s: peak RSS %d MiB, want at most memory_limit (%d MiB)", what, peak, memoryLimit)
		}
		sum := lastCommit(name)
		if sum["added-records"] != wantAdded || sum["added-position-deletes"] != wantDeleted {
			t.Errorf("%s: the newest snapshot added %s rows and %s position deletes, want %s and %s (the whole transaction in one snapshot)",
				what, sum["added-records"], sum["added-position-deletes"], wantAdded, wantDeleted)
		}
		if left := orphans(name); len(left) > 0 {
			t.Errorf("%s: %d Parquet files of the killed daemon's spill are left, e.g. %s", what, len(left), left[0])
		}
		e.assertMirrors(name)
	}
	n := strconv.Itoa(rows)
	t.Logf("each statement below is one transaction of %d rows, about %.0f MiB of row images in MySQL", rows, txnMiB)
	mirror("big", "INSERT ... SELECT", fmt.Sprintf("INSERT INTO %s.big SELECT seq, seq %% 10, REPEAT(CHAR(65 + seq %% 26), %d) FROM %s.seq_1_to_%d", dbName, width, dbName, rows), n, "")
	mirror("big", "UPDATE", fmt.Sprintf("UPDATE %s.big SET grp = grp + 1, pad = REPEAT('u', %d)", dbName, width), n, n)
	mirror("big", "DELETE", fmt.Sprintf("DELETE FROM %s.big WHERE id %% 2 = 0", dbName), "", strconv.Itoa(rows/2))
	// Rows of large values: 192 of 2 MiB, as much as memory_limit. (With
	// 4 MiB values the peak was 307 to 424 MiB over five runs: the copies
	// of a value in flight, go-mysql's packet and event, the decoded row,
	// Arrow and Parquet, dominate; see docs/architecture.md, "Memory".)
	mirror("blobs", "192 LONGBLOBs of 2 MiB", fmt.Sprintf("INSERT INTO %s.blobs SELECT seq, REPEAT(CHAR(65 + seq %% 26), 2 << 20) FROM %s.seq_1_to_192", dbName, dbName), "192", "")
}

// anonPeak samples the anonymous resident memory (RssAnon: the Go heap and
// stacks, not the executable's pages) of p until it exits; the returned
// function reads the peak so far, in MiB.
func anonPeak(p *proc) func() int {
	var peak atomic.Int64
	pid := p.cmd.Process.Pid
	go func() {
		for !p.exited() {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if f := strings.Fields(line); len(f) >= 2 && f[0] == "RssAnon:" {
						if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb/1024 > peak.Load() {
							peak.Store(kb / 1024)
						}
					}
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return func() int { return int(peak.Load()) }
}
