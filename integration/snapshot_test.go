package integration

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/integration/testenv"
	"github.com/cdcsync/cdcsync/lake"
)

// chunkTables are the tables of the chunked-copy test: an integer key, a
// string key in a case- and accent-insensitive collation, and a composite
// key. ver is a global counter, so a row image older than another has a
// smaller ver.
var chunkTables = []string{
	"CREATE TABLE %s.ints (id INT PRIMARY KEY, ver BIGINT NOT NULL, pad VARCHAR(100))",
	"CREATE TABLE %s.strs (k VARCHAR(32) COLLATE utf8mb4_general_ci PRIMARY KEY, ver BIGINT NOT NULL, pad VARCHAR(100))",
	"CREATE TABLE %s.comp (a INT, b VARCHAR(16) COLLATE utf8mb4_general_ci, ver BIGINT NOT NULL, PRIMARY KEY (a, b))",
}

func strKey(n int) string {
	// Mixed case and accents: MySQL's order (general_ci) differs from the
	// bytes' order.
	return fmt.Sprintf("%s%06d", []string{"k", "K", "é", "E"}[n%4], n)
}

// chunkLoad changes rows of the three tables, inside and outside the
// ranges being copied, with increasing ver.
type chunkLoad struct {
	ver  atomic.Int64
	r    *rand.Rand
	keys int
	db   string
}

func (l *chunkLoad) txn() error {
	conn, err := db.Connect(testenv.RootUser, "", "")
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Execute("BEGIN"); err != nil {
		return err
	}
	for range 1 + l.r.IntN(4) {
		v := l.ver.Add(1)
		n := 1 + l.r.IntN(l.keys)
		var q string
		switch l.r.IntN(9) {
		case 0:
			q = fmt.Sprintf("DELETE FROM %s.ints WHERE id = %d", l.db, n)
		case 1:
			q = fmt.Sprintf("DELETE FROM %s.strs WHERE k = '%s'", l.db, strKey(n))
		case 2:
			q = fmt.Sprintf("DELETE FROM %s.comp WHERE a = %d AND b = 'b%d'", l.db, n%97, n)
		case 3, 4:
			q = fmt.Sprintf("INSERT INTO %s.ints VALUES (%d, %d, 'w') ON DUPLICATE KEY UPDATE ver = %d, pad = 'u'", l.db, n, v, v)
		case 5, 6:
			q = fmt.Sprintf("INSERT INTO %s.strs VALUES ('%s', %d, 'w') ON DUPLICATE KEY UPDATE ver = %d, pad = 'u'", l.db, strKey(n), v, v)
		default:
			q = fmt.Sprintf("INSERT INTO %s.comp VALUES (%d, 'b%d', %d) ON DUPLICATE KEY UPDATE ver = %d", l.db, n%97, n, v, v)
		}
		if _, err := conn.Execute(q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	_, err = conn.Execute("COMMIT")
	return err
}

// TestChunkedCopyUnderLoadWithCrashes copies three tables in small chunks
// while a workload changes rows inside the ranges being copied, and kills
// cdcsync with SIGKILL several times during the copy. Each restart resumes
// the copy after its last committed chunk; at the end every table equals
// MySQL, and no committed snapshot ever showed a row image older than one
// an earlier snapshot showed.
func TestChunkedCopyUnderLoadWithCrashes(t *testing.T) {
	const dbName = "it_chunk"
	const rows = 40000
	e := newEnv(t, dbName, envOptions{extra: "snapshot:\n  chunk_rows: 400\n  workers: 3\nmaintenance:\n  enabled: false"})
	for _, q := range chunkTables {
		e.exec(fmt.Sprintf(q, dbName))
	}
	e.exec(fmt.Sprintf("INSERT INTO %s.ints SELECT seq, 0, REPEAT('p', seq %% 50) FROM %s.seq_1_to_%d", dbName, dbName, rows))
	e.exec(fmt.Sprintf("INSERT INTO %s.strs SELECT CONCAT(ELT(seq %% 4 + 1, 'k', 'K', 'é', 'E'), LPAD(seq, 6, '0')), 0, 'p' FROM %s.seq_1_to_%d", dbName, dbName, rows))
	e.exec(fmt.Sprintf("INSERT INTO %s.comp SELECT seq %% 97, CONCAT('b', seq), 0 FROM %s.seq_1_to_%d", dbName, dbName, rows))

	load := &chunkLoad{r: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4)), keys: rows + rows/10, db: dbName}
	stopLoad := inBackground(t, func() error { return load.txn() })

	resumed := 0
	var outputs []string
	for round := 0; round < 5; round++ {
		p := e.start()
		// The first round is killed right after its first commit, so that
		// some copy has committed chunks left to resume however fast the
		// copy runs; the others at random moments.
		timer := time.After(time.Duration(1500+rand.IntN(1500)) * time.Millisecond)
		var committed <-chan struct{}
		if round == 0 {
			timer, committed = nil, p.waitFor("epoch committed", 30*time.Second)
		}
		select {
		case <-timer:
			p.kill()
		case <-committed:
			p.kill()
		case <-p.done:
			t.Fatalf("round %d: cdcsync exited by itself; output:\n%s", round, p.output())
		}
		out := p.output()
		outputs = append(outputs, out)
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "resuming the initial copy after its last committed chunk") && !strings.Contains(line, "rows=0") {
				resumed++
			}
		}
	}
	if err := stopLoad(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	if resumed == 0 {
		t.Errorf("no restart resumed a copy with rows already committed; outputs:\n%s", strings.Join(outputs, "\n----\n"))
	}
	t.Logf("%d table copies resumed after a kill; %d workload versions", resumed, load.ver.Load())

	p := e.start()
	e.waitCaughtUp(p, 4*time.Minute)
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}
	// waitCaughtUp also waited for every copy to be finished (a copy may
	// end within a killed round, and its log line die with the process).
	for _, tbl := range []string{"ints", "strs", "comp"} {
		e.assertMirrors(tbl)
		e.assertNeverBackInTime(tbl)
	}
}

// assertNeverBackInTime reads every snapshot of a table, oldest first, and
// checks that no key appears twice in one and that no snapshot shows a row
// with a smaller ver than an earlier snapshot showed for its key.
func (e *env) assertNeverBackInTime(name string) {
	e.t.Helper()
	ctx := context.Background()
	lk := e.openLake()
	ts := e.mysqlSchema(name)
	tbl, err := lk.LoadTable(ctx, lk.Identifier(e.dbName, name))
	if err != nil {
		e.t.Fatal(err)
	}
	verCol := ts.ColumnIndex("ver")
	seen := map[string]int64{}
	checked := 0
	for _, s := range ancestry(tbl) {
		rows, err := lake.ReadRowsAt(lk.Scope(ctx), tbl, ts, s.SnapshotID)
		if err != nil {
			e.t.Fatal(err)
		}
		keys := map[string]bool{}
		for _, r := range rows {
			k := keyString(ts, r)
			if keys[k] {
				e.t.Errorf("%s: snapshot %d holds key %s twice", name, s.SnapshotID, k)
			}
			keys[k] = true
			v := r[verCol].(int64)
			if v < seen[k] {
				e.t.Errorf("%s: snapshot %d shows key %s at ver %d after an earlier snapshot showed ver %d", name, s.SnapshotID, k, v, seen[k])
			}
			seen[k] = max(seen[k], v)
		}
		checked++
		if e.t.Failed() {
			return
		}
	}
	e.t.Logf("%s: %d snapshots checked", name, checked)
}

func keyString(ts *cdcsync.TableSchema, r cdcsync.Row) string {
	parts := make([]string, len(ts.PrimaryKey))
	for i, c := range ts.PrimaryKey {
		parts[i] = fmt.Sprint(r[c])
	}
	return strings.Join(parts, "|")
}

// TestChunkedCopyBoundedMemory copies a table several times larger than
// the memory cdcsync may use and checks the daemon's peak RSS. It runs a
// binary built without the race detector, whose memory is the real one.
func TestChunkedCopyBoundedMemory(t *testing.T) {
	const dbName = "it_chunkmem"
	const rows, width = 600000, 1000
	bin := filepath.Join(t.TempDir(), "cdcsync")
	build := exec.Command("go", "build", "-o", bin, "./cmd/cdcsync")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	e := newEnv(t, dbName, envOptions{epoch: "interval: 1s\n  max_bytes: 16MiB", extra: "snapshot:\n  chunk_rows: 2000\n  workers: 2\nmaintenance:\n  enabled: false"})
	e.exec(fmt.Sprintf("CREATE TABLE %s.big (id INT PRIMARY KEY, pad VARCHAR(%d) NOT NULL)", dbName, width))
	e.exec(fmt.Sprintf("INSERT INTO %s.big SELECT seq, REPEAT(CHAR(65 + seq %% 26), %d) FROM %s.seq_1_to_%d", dbName, width, dbName, rows))
	tableMiB := float64(rows*width) / (1 << 20)

	p := e.startWith(bin)
	e.waitCaughtUp(p, 4*time.Minute)
	// VmHWM is the peak since the process started.
	peak := vmHWM(p.cmd.Process.Pid)
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}
	peakMiB := float64(peak) / 1024
	if !logHas(p.output(), "cdcsync starting", "memory_limit=none", "gc_percent=50", "epoch_max_bytes=16MiB") {
		t.Errorf("the start line does not show the memory settings (no limit, gc_percent 50 by default):\n%s", p.output())
	}
	// The budget: what the Go runtime, iceberg-go and Arrow need, plus about
	// (workers + 1) chunks and an epoch of max_bytes (16 MiB here) with the
	// garbage collector's headroom; measured at 260 to 300 MiB for tables of
	// 286 and 572 MiB (maintenance, whose compaction has its own bound,
	// maintenance.compaction.max_bytes, is off). The table is larger.
	const budgetMiB = 400
	t.Logf("copied %d rows (%.0f MiB of row data); peak RSS %.0f MiB (budget %d MiB)", rows, tableMiB, peakMiB, budgetMiB)
	if tableMiB <= budgetMiB {
		t.Fatalf("the table (%.0f MiB) must be larger than the budget (%d MiB)", tableMiB, budgetMiB)
	}
	if peak == 0 {
		t.Fatal("could not read the daemon's peak RSS (VmHWM)")
	}
	if peakMiB > budgetMiB {
		t.Errorf("peak RSS %.0f MiB exceeds the %d MiB budget while copying a %.0f MiB table", peakMiB, budgetMiB, tableMiB)
	}
	e.assertMirrors("big")

	// Compaction of the same table after three epochs of updates spread
	// over all of it streams too: it reads and rewrites every row within
	// the same budget.
	p = e.startWith(bin)
	for i := 2; i <= 4; i++ {
		e.exec(fmt.Sprintf("UPDATE %s.big SET pad = REPEAT(CHAR(97 + %d), %d) WHERE id %% %d = 0", dbName, i, width, 10*i+1))
		time.Sleep(1500 * time.Millisecond) // one epoch each
	}
	e.waitCaughtUp(p, 2*time.Minute)
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}
	// The child's rusage maxrss would include this test process, whose
	// memory the child shares until it execs: read its own VmHWM instead.
	compact := exec.Command(bin, "compact", "--config", e.cfgPath, dbName+".big")
	var out bytes.Buffer
	compact.Stdout, compact.Stderr = &out, &out
	if err := compact.Start(); err != nil {
		t.Fatal(err)
	}
	var hwm atomic.Int64
	exited, polled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(polled)
		for {
			if v := vmHWM(compact.Process.Pid); v > 0 {
				hwm.Store(v)
			}
			select {
			case <-exited:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	err := compact.Wait()
	close(exited)
	<-polled
	if err != nil {
		t.Fatalf("cdcsync compact: %v\n%s", err, out.String())
	}
	if hwm.Load() == 0 {
		t.Fatal("could not read the compaction's peak RSS (VmHWM)")
	}
	peakMiB = float64(hwm.Load()) / 1024
	t.Logf("cdcsync compact of the %.0f MiB table: peak RSS %.0f MiB (budget %d MiB)\n%s", tableMiB, peakMiB, budgetMiB, out.String())
	if !strings.Contains(out.String(), "compacted in") {
		t.Fatalf("the compaction rewrote nothing:\n%s", out.String())
	}
	if peakMiB > budgetMiB {
		t.Errorf("peak RSS %.0f MiB exceeds the %d MiB budget while compacting a %.0f MiB table", peakMiB, budgetMiB, tableMiB)
	}
	e.assertMirrors("big")
}

// vmHWM returns a process's peak resident set in KiB (0 if unknown).
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// TestResync copies one table afresh while the daemon runs and another
// table keeps streaming, then once more offline through the mark the next
// start acts on; bad requests get clear errors.
func TestResync(t *testing.T) {
	const dbName = "it_resync"
	port := freePort(t)
	e := newEnv(t, dbName, envOptions{extra: "snapshot:\n  chunk_rows: 150"})
	e.rewriteConfig(`listen: "off"`, `listen: 127.0.0.1:`+strconv.Itoa(port))
	for _, tbl := range []string{"a", "b"} {
		e.exec(fmt.Sprintf("CREATE TABLE %s.%s (id INT PRIMARY KEY, v BIGINT NOT NULL)", dbName, tbl))
		e.exec(fmt.Sprintf("INSERT INTO %s.%s SELECT seq, 0 FROM %s.seq_1_to_3000", dbName, tbl, dbName))
	}
	r := rand.New(rand.NewPCG(5, 5))
	v := 0
	stopLoad := inBackground(t, func() error {
		v++
		tbl := []string{"a", "b"}[r.IntN(2)]
		if err := db.Exec(fmt.Sprintf("INSERT INTO %s.%s VALUES (%d, %d) ON DUPLICATE KEY UPDATE v = %d", dbName, tbl, 1+r.IntN(3300), v, v)); err != nil {
			return err
		}
		time.Sleep(2 * time.Millisecond)
		return nil
	})
	p := e.start()
	e.waitCaughtUp(p, 2*time.Minute)

	cli := func(args ...string) (string, int) {
		return runCLI(t, append([]string{"resync", "--config", e.cfgPath}, args...)...)
	}
	if out, code := cli("nodot"); code != 2 || !strings.Contains(out, "DB.TABLE") {
		t.Errorf("resync of a malformed name: exit %d, output %q; want exit 2 naming DB.TABLE", code, out)
	}
	if out, code := cli(dbName + ".nope"); code != 1 || !strings.Contains(out, "not mirrored") {
		t.Errorf("resync of an unknown table: exit %d, output %q; want exit 1 saying it is not mirrored", code, out)
	}
	out, code := cli(dbName + ".a")
	if code != 0 || !strings.Contains(out, "copying "+dbName+".a afresh") {
		t.Fatalf("online resync: exit %d, output %q; daemon output:\n%s", code, out, p.output())
	}
	// Readers keep seeing the whole table while it is copied again (the
	// copy runs on a branch): never empty, never half-copied.
	lk := e.openLake()
	ts := e.mysqlSchema("a")
	for i := 0; i < 10; i++ {
		tbl, err := lk.LoadTable(context.Background(), lk.Identifier(dbName, "a"))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := lake.ReadRows(context.Background(), tbl, ts, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) < 3000 {
			t.Fatalf("during the resync readers see %d rows of %s.a; the table has at least 3000", len(rows), dbName)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.waitCaughtUp(p, 2*time.Minute)
	if !strings.Contains(p.output(), "copying the table afresh (resync)") {
		t.Errorf("the daemon did not log the resync; output:\n%s", p.output())
	}
	e.assertCopiedAgain("a", 1)
	// The copy metrics are refreshed every second.
	var metrics string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, metrics = httpGet(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if strings.Contains(metrics, "\ncdcsync_copy_tables 0\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("/metrics does not show cdcsync_copy_tables 0 after the copies")
			break
		}
	}
	copied := 0.0
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, `cdcsync_snapshot_rows_total{table="`+dbName+`.a"} `) {
			copied, _ = strconv.ParseFloat(strings.Fields(line)[1], 64)
		}
	}
	if copied <= 4000 {
		t.Errorf("cdcsync_snapshot_rows_total for %s.a is %v; two copies of about 3000 rows each should count more than 4000", dbName, copied)
	}
	if err := stopLoad(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	e.waitCaughtUp(p, 2*time.Minute)
	e.assertMirrors("a")
	e.assertMirrors("b")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}

	// Offline: no daemon answers, so the table is marked and the next start
	// copies it.
	if out, code := cli(dbName + ".b"); code != 0 || !strings.Contains(out, "next `cdcsync run` copies it") {
		t.Fatalf("offline resync: exit %d, output %q", code, out)
	}
	if out, _ := runCLI(t, "tables", "--config", e.cfgPath); !strings.Contains(out, "marked for a new copy") {
		t.Errorf("cdcsync tables does not show the mark:\n%s", out)
	}
	mustExec(t, fmt.Sprintf("UPDATE %s.b SET v = -1 WHERE id %% 7 = 0", dbName))
	p = e.start()
	e.waitCaughtUp(p, 2*time.Minute)
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}
	if !logHas(p.output(), "initial copy finished", "table="+dbName+".b") {
		t.Errorf("the restart did not copy %s.b again; output:\n%s", dbName, p.output())
	}
	e.assertCopiedAgain("b", 1)
	e.assertMirrors("a")
	e.assertMirrors("b")
}

// logHas reports whether one line of out contains every part.
func logHas(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// assertCopiedAgain checks that the table's history holds the first copy
// and at least n more: snapshots that start a copy (no chunk committed)
// after one that did not.
func (e *env) assertCopiedAgain(name string, n int) {
	e.t.Helper()
	lk := e.openLake()
	tbl, err := lk.LoadTable(context.Background(), lk.Identifier(e.dbName, name))
	if err != nil {
		e.t.Fatal(err)
	}
	fresh := func(s *table.Snapshot) bool {
		after, ok := s.Summary.Properties[lake.SummaryCopyAfter]
		return ok && after == "" && s.Summary.Properties[lake.SummaryCopyRows] == "0"
	}
	starts := 0
	chain := ancestry(tbl)
	for i, s := range chain {
		if fresh(s) && (i == 0 || !fresh(chain[i-1])) {
			starts++
		}
	}
	if starts < n+1 {
		e.t.Errorf("%s: %d commits started a copy; want the first copy and %d more", name, starts, n)
	}
}
