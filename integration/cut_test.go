package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync/integration/testenv"
	"github.com/cdcsync/cdcsync/lake"
)

// TestCutIsConsistent runs transfers between accounts kept in two tables,
// each transfer one transaction that touches both, so the total balance is
// constant. While they run, a reader takes cuts (`cdcsync cut`) and reads
// each cut's snapshots through iceberg-go: every cut must hold the total.
// Reading the latest snapshot of each table one after the other does not
// (the test shows it breaks). A tagged cut is read through DuckDB with the
// SQL `cut --format duckdb` prints, and once the transfers stop and the
// daemon caught up, the newest cut equals MySQL.
func TestCutIsConsistent(t *testing.T) {
	const dbName, accounts, start = "it_cut", 40, 1000
	// The daemon also tags a cut once a minute (the shortest period).
	e := newEnv(t, dbName, envOptions{epoch: "interval: 200ms", extra: "cut:\n  tag_every: 1m\n"})
	for _, tbl := range []string{"acct_a", "acct_b"} {
		e.exec(fmt.Sprintf("CREATE TABLE %s.%s (id INT PRIMARY KEY, bal BIGINT NOT NULL)", dbName, tbl))
		e.exec(fmt.Sprintf("INSERT INTO %s.%s SELECT seq, %d FROM %s.seq_1_to_%d", dbName, tbl, start, dbName, accounts))
	}
	const total = 2 * accounts * start
	conn, err := e.server.Connect(testenv.RootUser, "", dbName)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	var transfers atomic.Int64
	stopBackground := inBackground(t, func() error {
		from, to := "acct_a", "acct_b"
		if r.IntN(2) == 0 {
			from, to = to, from
		}
		amount := 1 + r.IntN(50)
		if err := conn.Begin(); err != nil {
			return err
		}
		if _, err := conn.Execute(fmt.Sprintf("UPDATE %s SET bal = bal - ? WHERE id = ?", from), amount, 1+r.IntN(accounts)); err != nil {
			_ = conn.Rollback()
			return err
		}
		if _, err := conn.Execute(fmt.Sprintf("UPDATE %s SET bal = bal + ? WHERE id = ?", to), amount, 1+r.IntN(accounts)); err != nil {
			_ = conn.Rollback()
			return err
		}
		transfers.Add(1)
		return conn.Commit()
	})
	var stopOnce sync.Once
	var loadErr error
	stopLoad := func() error {
		stopOnce.Do(func() { loadErr = stopBackground() })
		return loadErr
	}
	defer stopLoad() //nolint:errcheck // before conn closes, also when the test fails early
	p := e.start()
	<-p.waitFor("streaming the binlog", time.Minute)
	e.waitCaughtUp(p, time.Minute)

	lk := e.openLake()
	ctx := context.Background()
	sumAt := func(name string, snapshot int64) int64 {
		t.Helper()
		tbl, err := lk.LoadTable(ctx, lk.Identifier(dbName, name))
		if err != nil {
			t.Fatal(err)
		}
		_, sum := scanSum(t, ctx, tbl, snapshot, "bal")
		return sum
	}
	cutNow := func(args ...string) lake.Cut {
		t.Helper()
		cmd := exec.Command(binary, append([]string{"cut", "--config", e.cfgPath, "--format", "json"}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var c lake.Cut
		if err != nil || json.Unmarshal(out, &c) != nil || len(c.Tables) != 2 {
			t.Fatalf("cut %v: %v\n%s%s", args, err, out, stderr.String())
		}
		return c
	}

	// The copies' last commits may be newer than the checkpoint for a
	// moment: then the cut leaves those tables out.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		out, err := exec.Command(binary, "cut", "--config", e.cfgPath, "--format", "json").Output()
		var c lake.Cut
		if err == nil && json.Unmarshal(out, &c) == nil && len(c.Tables) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cut holds both tables after a minute: %v\n%s", err, out)
		}
	}
	// The daemon's scheduled tag: the same name on both tables, once
	// their copies are done, holding the total.
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		var names [2]string
		var snaps [2]int64
		for i, name := range []string{"acct_a", "acct_b"} {
			tbl, err := lk.LoadTable(ctx, lk.Identifier(dbName, name))
			if err != nil {
				t.Fatal(err)
			}
			for n, ref := range tbl.Metadata().Refs() {
				if strings.HasPrefix(n, "cut-") && n > names[i] {
					names[i], snaps[i] = n, ref.SnapshotID
				}
			}
		}
		if names[0] != "" && names[0] == names[1] {
			if got := sumAt("acct_a", snaps[0]) + sumAt("acct_b", snaps[1]); got != total {
				t.Errorf("the daemon's tag %s holds a total of %d, want %d", names[0], got, total)
			}
			t.Logf("the daemon tagged %s", names[0])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scheduled tag on both tables after 45 s (acct_a %q, acct_b %q); output:\n%s", names[0], names[1], p.output())
		}
	}
	asOf := time.Now().UTC().Truncate(time.Second)
	cuts, plainBroken := 0, 0
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		c := cutNow()
		got := sumAt("acct_a", c.Tables[0].Snapshot) + sumAt("acct_b", c.Tables[1].Snapshot)
		if got != total {
			t.Errorf("cut of epoch %d (snapshots %d, %d) holds a total of %d, want %d", c.Epoch, c.Tables[0].Snapshot, c.Tables[1].Snapshot, got, total)
		}
		cuts++
		// The latest snapshot of each table, read one after the other.
		a := sumAt("acct_a", 0)
		time.Sleep(300 * time.Millisecond)
		if a+sumAt("acct_b", 0) != total {
			plainBroken++
		}
	}
	t.Logf("%d cuts held the total; %d of as many plain reads of the latest snapshots did not; %d transfers so far", cuts, plainBroken, transfers.Load())
	if plainBroken == 0 {
		t.Errorf("no plain read of the latest snapshots broke the total: the test does not show what a cut is for")
	}

	// The cut as of a time while the transfers ran: every table's snapshot
	// holds transactions of MySQL time up to then, and the total.
	c := cutNow("--as-of", asOf.Format(time.RFC3339))
	for i, name := range []string{"acct_a", "acct_b"} {
		tbl, err := lk.LoadTable(ctx, lk.Identifier(dbName, name))
		if err != nil {
			t.Fatal(err)
		}
		s := tbl.Metadata().SnapshotByID(c.Tables[i].Snapshot)
		for ; s != nil; s = parentOf(tbl, s) {
			if v := s.Summary.Properties[lake.SummarySourceTime]; v != "" {
				ms, _ := strconv.ParseInt(v, 10, 64)
				if time.UnixMilli(ms).After(asOf) {
					t.Errorf("%s: the cut as of %s holds epoch %s of MySQL time %s", name, asOf, s.Summary.Properties[lake.SummaryEpoch], time.UnixMilli(ms).UTC())
				}
				break
			}
		}
	}
	if got := sumAt("acct_a", c.Tables[0].Snapshot) + sumAt("acct_b", c.Tables[1].Snapshot); got != total {
		t.Errorf("the cut as of %s (epoch %d) holds a total of %d, want %d", asOf, c.Epoch, got, total)
	}
	if out, code := runCLI(t, "cut", "--config", e.cfgPath, "--as-of", "2001-01-01T00:00:00Z"); code != 1 || !strings.Contains(out, "no epoch kept") {
		t.Errorf("cut as of a time before the pipeline: exit %d, %s", code, out)
	}

	// A tagged cut, read by DuckDB with the SQL cut prints. cut hands the
	// tag to the daemon, which pauses each table's commits for it: from
	// here, the tag's commit raced the epochs every 200 ms and, on a busy
	// machine, lost every try for a minute.
	c = cutNow("--tag", "it-cut-1", "--tag-keep", "168h")
	if out := p.output(); !strings.Contains(out, "cut tagged on request of the admin listener") || !strings.Contains(out, "it-cut-1") {
		t.Errorf("the daemon did not tag it-cut-1 (cdcsync cut should find it on its admin socket); output:\n%s", p.output())
	}
	out, code := runCLI(t, "cut", "--config", e.cfgPath, "--epoch", strconv.FormatInt(c.Epoch, 10), "--format", "duckdb")
	if code != 0 || strings.Count(out, "iceberg_scan(") != 2 {
		t.Fatalf("cut --format duckdb (exit %d):\n%s", code, out)
	}
	if got := duckdbSum(t, out); got != total {
		t.Errorf("DuckDB read the cut of epoch %d with a total of %d, want %d; SQL:\n%s", c.Epoch, got, total, out)
	}
	for i, name := range []string{"acct_a", "acct_b"} {
		tbl, err := lk.LoadTable(ctx, lk.Identifier(dbName, name))
		if err != nil {
			t.Fatal(err)
		}
		if s := tbl.Metadata().SnapshotByName("it-cut-1"); s == nil || s.SnapshotID != c.Tables[i].Snapshot {
			t.Errorf("%s: tag it-cut-1 points at %v, want snapshot %d", name, s, c.Tables[i].Snapshot)
		}
	}
	if out, code := runCLI(t, "cut", "--config", e.cfgPath, "--epoch", strconv.FormatInt(c.Epoch+1000, 10)); code != 1 || !strings.Contains(out, "newer than the pipeline's checkpoint") {
		t.Errorf("cut of a future epoch: exit %d, %s", code, out)
	}

	// Quiet and caught up: the newest cut equals MySQL.
	if err := stopLoad(); err != nil {
		t.Fatalf("transfers: %v", err)
	}
	e.waitCaughtUp(p, time.Minute)
	c = cutNow()
	for i, name := range []string{"acct_a", "acct_b"} {
		res, err := conn.Execute(fmt.Sprintf("SELECT CAST(SUM(bal) AS SIGNED) FROM %s", name))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := res.GetInt(0, 0)
		if got := sumAt(name, c.Tables[i].Snapshot); got != want {
			t.Errorf("%s in the newest cut sums to %d, MySQL to %d", name, got, want)
		}
		e.assertMirrors(name)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}
}

// duckdbSum runs the SQL statements `cut --format duckdb` printed in one
// DuckDB (the engines' venv, with the iceberg extension loaded from its
// package) and returns the sum of their bal columns.
func duckdbSum(t *testing.T, sql string) int64 {
	t.Helper()
	m := loadEngineManifest(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var stmts, settings []string
	for _, line := range strings.Split(strings.TrimSpace(sql), "\n") {
		stmt, _, _ := strings.Cut(line, ";")
		if !strings.HasPrefix(stmt, "SELECT") {
			settings = append(settings, stmt)
			continue
		}
		stmts = append(stmts, strings.Replace(stmt, "SELECT *", "SELECT SUM(bal)", 1))
	}
	if len(settings) != 1 || settings[0] != "SET enable_external_file_cache = false" {
		t.Errorf("cut --format duckdb printed %q before its queries, want the external file cache turned off", settings)
	}
	b, _ := json.Marshal(map[string][]string{"settings": settings, "queries": stmts})
	script := `import json, sys
sys.path.insert(0, sys.argv[1])
import duckdb_read
con = duckdb_read.connect()
con.execute("SET enable_progress_bar = false")
req = json.loads(sys.argv[2])
for s in req["settings"]:
    con.execute(s)
print(sum(con.execute(s).fetchone()[0] for s in req["queries"]))`
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, m.Python, "-c", script, filepath.Join(root, "integration", "engines"), string(b)).CombinedOutput()
	if err != nil {
		t.Fatalf("DuckDB: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	n, err := strconv.ParseInt(strings.TrimSpace(lines[len(lines)-1]), 10, 64)
	if err != nil {
		t.Fatalf("DuckDB printed %q", out)
	}
	return n
}

func parentOf(tbl *table.Table, s *table.Snapshot) *table.Snapshot {
	if s.ParentSnapshotID == nil {
		return nil
	}
	return tbl.Metadata().SnapshotByID(*s.ParentSnapshotID)
}
