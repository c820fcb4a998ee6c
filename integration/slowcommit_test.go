package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync/lake"
)

// TestSlowCommitKeepsTheStream holds one epoch's commit for 25 s (as a
// finely partitioned table or a slow object store would) while 40 MB of
// transactions arrive, on a server that drops a binlog reader after 5 s
// without reads (net_write_timeout; 60 s by default). The daemon must go
// on reading, write out (spill) the next epoch as it grows past
// epoch.max_bytes, keep its binlog connection, and end with the table
// equal to MySQL. Before, the next seal waited for the commit, reading
// stopped, and the server dropped the connection (issue 23).
func TestSlowCommitKeepsTheStream(t *testing.T) {
	const dbName = "it_slowcommit"
	e := newEnv(t, dbName, envOptions{epoch: "interval: 500ms\n  max_bytes: 4MiB"})
	e.exec(fmt.Sprintf("CREATE TABLE %s.docs (id INT PRIMARY KEY, grp INT NOT NULL, body LONGTEXT NOT NULL)", dbName))
	e.exec(fmt.Sprintf("INSERT INTO %s.docs VALUES (1, 0, 'first')", dbName))

	r, err := e.server.Query("SELECT @@GLOBAL.net_write_timeout")
	if err != nil {
		t.Fatal(err)
	}
	was, _ := r.GetInt(0, 0)
	e.exec("SET GLOBAL net_write_timeout = 5")
	t.Cleanup(func() { e.exec(fmt.Sprintf("SET GLOBAL net_write_timeout = %d", was)) })

	// The table's commit is held, not the checkpoint: a delay at the
	// checkpoint, after the table committed, holds nothing back any more
	// (the next epoch commits meanwhile).
	p := e.startHeld("docs", 25*time.Second, fmt.Sprintf("INSERT INTO %s.docs VALUES (2, 0, 'second')", dbName))
	start := time.Now()
	for i := 0; i < 400; i++ {
		// About 96 KiB of row image per transaction, changing rows
		// written before too.
		e.exec(fmt.Sprintf("INSERT INTO %s.docs VALUES (?, ?, REPEAT(MD5(?), 3000)) ON DUPLICATE KEY UPDATE grp = grp + 1, body = VALUES(body)", dbName),
			10+i%300, i, i)
	}
	t.Logf("40 MB of transactions in %s while the commit was held", time.Since(start).Round(time.Millisecond))
	e.waitCaughtUp(p, 2*time.Minute)
	out := p.output()
	if strings.Contains(out, "the binlog connection was lost") || strings.Contains(out, "restarting the pipeline") {
		t.Errorf("the slow commit cost the binlog connection; output:\n%s", out)
	}
	if !strings.Contains(out, "spilled the open epoch: the epoch before it is still committing") {
		t.Errorf("the epoch after the slow one was not written out as it grew; output:\n%s", out)
	}
	e.assertMirrors("docs")
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d; output:\n%s", code, p.output())
	}
}

// TestSlowTableDoesNotHoldTheOthers holds one table's commit for 20 s (as
// a finely partitioned table's would take) while transactions change it
// and another table, some of them both. The other table's changes must
// reach Iceberg within seconds, each epoch, instead of waiting for the
// slow commit (issue 23); the slow table's changes are carried over and
// committed once it is free, its commit records the epochs it spans, and
// cut refuses those epochs but gives a consistent cut at the checkpoint.
// Both tables end equal to MySQL.
func TestSlowTableDoesNotHoldTheOthers(t *testing.T) {
	const dbName = "it_lanes"
	e := newEnv(t, dbName, envOptions{epoch: "interval: 500ms"})
	for _, name := range []string{"slow", "fast"} {
		e.exec(fmt.Sprintf("CREATE TABLE %s.%s (id INT PRIMARY KEY, v INT NOT NULL)", dbName, name))
		e.exec(fmt.Sprintf("INSERT INTO %s.%s VALUES (1, 0)", dbName, name))
	}
	const hold = 20 * time.Second
	p := e.startHeld("slow", hold, fmt.Sprintf("UPDATE %s.slow SET v = v + 1 WHERE id = 1", dbName))
	start := time.Now()
	for i := 0; i < 20; i++ {
		e.exec(fmt.Sprintf("INSERT INTO %s.fast VALUES (?, ?)", dbName), 100+i, i)
		// One transaction over both tables.
		e.exec(fmt.Sprintf("UPDATE %s.fast f, %s.slow s SET f.v = f.v + 1, s.v = s.v + 1 WHERE f.id = 1 AND s.id = 1", dbName, dbName))
	}
	lk := e.openLake()
	ctx := context.Background()
	ts := e.mysqlSchema("fast")
	var seen time.Duration
	for {
		tbl, err := lk.LoadTable(ctx, lk.Identifier(dbName, "fast"))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := lake.ReadRows(lk.Scope(ctx), tbl, ts, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 21 {
			seen = time.Since(start)
			break
		}
		if time.Since(start) > hold/2 {
			t.Fatalf("%s.fast has %d of 21 rows in Iceberg %s after its transactions, while the commit of %s.slow is held: one slow table holds the others back; output:\n%s",
				dbName, len(rows), time.Since(start).Round(time.Millisecond), dbName, p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%s.fast's rows were in Iceberg %s after its transactions, with %s.slow's commit held", dbName, seen.Round(time.Millisecond), dbName)
	e.waitCaughtUp(p, 2*time.Minute)
	e.assertMirrors("fast")
	e.assertMirrors("slow")
	if out := p.output(); !strings.Contains(out, "carried over into the next one") {
		t.Errorf("no carry was logged; output:\n%s", out)
	}

	// The slow table's commit after the held one spans the epochs it sat out.
	tbl, err := lk.LoadTable(ctx, lk.Identifier(dbName, "slow"))
	if err != nil {
		t.Fatal(err)
	}
	var from, epoch int64
	for _, s := range ancestry(tbl) {
		if f := s.Summary.Properties[lake.SummaryEpochFrom]; f != "" {
			from, _ = strconv.ParseInt(f, 10, 64)
			epoch, _ = strconv.ParseInt(s.Summary.Properties[lake.SummaryEpoch], 10, 64)
		}
	}
	if from == 0 || from >= epoch {
		t.Fatalf("no commit of %s.slow records the epochs it spans (%s)", dbName, lake.SummaryEpochFrom)
	}
	out, code := runCLI(t, "cut", "--config", e.cfgPath, "--epoch", strconv.FormatInt(from, 10))
	if code != 1 || !strings.Contains(out, "is not a consistent state") || !strings.Contains(out, fmt.Sprintf("--epoch %d", from-1)) {
		t.Errorf("cut --epoch %d, inside the epochs %s.slow committed late (%d to %d), exited %d: %s", from, dbName, from, epoch, code, out)
	}
	if out, code := runCLI(t, "cut", "--config", e.cfgPath); code != 0 {
		t.Errorf("cut at the checkpoint exited %d: %s", code, out)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d; output:\n%s", code, p.output())
	}
}

// startHeld starts cdcsync with the first epoch commit of table after its
// initial copy (its first two commits start and end the copy) held for
// hold, as a slow commit would take; it runs trigger, a statement that
// changes the table, and returns once that commit is held.
func (e *env) startHeld(table string, hold time.Duration, trigger string) *proc {
	e.t.Helper()
	p := e.start(fmt.Sprintf("CDCSYNC_DELAY=before-commit@%s.%s:%s:3", e.dbName, table, hold))
	e.waitCaughtUp(p, time.Minute)
	held := p.waitFor("delay injection: sleeping", time.Minute)
	e.exec(trigger)
	select {
	case <-held:
	case <-p.done:
		e.t.Fatalf("cdcsync exited; output:\n%s", p.output())
	case <-time.After(time.Minute):
		e.t.Fatalf("the commit of %s.%s was not held; output:\n%s", e.dbName, table, p.output())
	}
	return p
}
