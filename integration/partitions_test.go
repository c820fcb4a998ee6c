package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

// Finely partitioned tables (issue 22): an epoch that touches thousands of
// partitions, under an open-file limit far below that count, must commit
// every row and every delete, in the copy and in streaming.

// envInt reads a positive integer test knob from the environment.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// TestCopyManyPartitionsLowFileLimit copies a table of n rows (default
// 30,000; CDCSYNC_FINEPARTS_ROWS, e.g. 100000 for the long run) spread over
// as many partitions with the daemon under `ulimit -n 256`, then streams a
// transaction that moves a fifth of its rows to other partitions and deletes
// a tenth more.
func TestCopyManyPartitionsLowFileLimit(t *testing.T) {
	const dbName = "it_fineparts"
	n := envInt(t, "CDCSYNC_FINEPARTS_ROWS", 30000)
	e := newEnv(t, dbName, envOptions{tables: `tables:
  - match: it_fineparts.orders
    partition: ["day(created_at)"]`, extra: "maintenance:\n  enabled: false"})
	e.exec("CREATE TABLE it_fineparts.orders (id BIGINT NOT NULL PRIMARY KEY, created_at DATETIME(6) NOT NULL, customer_id INT NOT NULL, amount DECIMAL(10,2), note VARCHAR(40))")
	e.exec(fmt.Sprintf(`INSERT INTO it_fineparts.orders SELECT seq, TIMESTAMP('1800-01-01') + INTERVAL seq DAY + INTERVAL seq SECOND, seq %% 1000, (seq %% 20000) / 100 - 100, CONCAT('n', seq) FROM it_fineparts.seq_1_to_%d`, n))

	// check says whether the limit is enough, before anything runs.
	out, _ := runLimited(t, 100, "check", "--config", e.cfgPath)
	if !strings.Contains(out, "warn  open files") || !strings.Contains(out, "RLIMIT_NOFILE is 100; cdcsync needs about 136") ||
		!strings.Contains(out, "raise it (ulimit -n 272") {
		t.Errorf("check under ulimit -n 100 does not report the open-file limit as too low:\n%s", out)
	}
	out, _ = runLimited(t, 256, "check", "--config", e.cfgPath)
	if !strings.Contains(out, "ok    open files               RLIMIT_NOFILE is 256") {
		t.Errorf("check under ulimit -n 256 does not report the open-file limit as enough:\n%s", out)
	}

	p := e.startLimited(plainBinary(t), 256)
	peaks := procPeaks(p)
	e.waitCaughtUp(p, 5*time.Minute)
	// The copy's last commit is in the table before the daemon logs it.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.output(), "initial copy finished") && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(p.output(), "initial copy finished") {
		t.Fatalf("no copy finished; output:\n%s", p.output())
	}
	e.assertMirrors("orders")

	e.exec(fmt.Sprintf(`UPDATE it_fineparts.orders SET created_at = created_at + INTERVAL 1 DAY, note = 'moved' WHERE id <= %d`, n/5))
	e.exec(fmt.Sprintf(`DELETE FROM it_fineparts.orders WHERE id > %d`, n-n/10))
	e.waitCaughtUp(p, 5*time.Minute)
	e.assertMirrors("orders")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}
	if strings.Contains(p.output(), "too many open files") {
		t.Errorf("cdcsync ran out of file descriptors under ulimit -n 256; output:\n%s", p.output())
	}
	fds, rss := peaks()
	t.Logf("the daemon held at most %d file descriptors; peak RSS %d MiB", fds, rss)
	if n := fds; n > 136 {
		t.Errorf("the daemon held %d file descriptors, more than the 136 check says it needs", n)
	}
}

// runLimited runs a cdcsync subcommand under ulimit -n nofile.
func runLimited(t *testing.T, nofile int, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile), binary}, args...)...)
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}

// procPeaks samples the file descriptors and the peak resident size
// (VmHWM) of p until it exits; the returned function reads the peaks so far.
func procPeaks(p *proc) func() (fds int, rssMiB int) {
	var fds, rss atomic.Int64
	pid := p.cmd.Process.Pid
	go func() {
		for !p.exited() {
			if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil && int64(len(ents)) > fds.Load() {
				fds.Store(int64(len(ents)))
			}
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
						if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
							rss.Store(kb / 1024)
						}
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() (int, int) { return int(fds.Load()), int(rss.Load()) }
}

// fineTables are the same orders table under the three layouts of the
// acceptance run that lost rows: day x bucket, and each alone.
var fineTables = []struct{ name, partition string }{
	{"orders_db", `["day(created_at)", "bucket(8, customer_id)"]`},
	{"orders_d", `["day(created_at)"]`},
	{"orders_b", `["bucket(8, customer_id)"]`},
}

// fineWorkload changes the orders tables the way an orders table changes:
// inserts, updates of old orders, moves of created_at, deletes, primary-key
// changes, a key deleted and inserted again, several updates of one row in
// one transaction, transactions over several tables, rollbacks, and now and
// then a large transaction of thousands of rows that moves created_at.
type fineWorkload struct {
	r      *rand.Rand
	conn   *client.Conn
	db     string
	nextID int64
}

const fineSeedRows = 20000

func (w *fineWorkload) created() string {
	// Anywhere in 30 years.
	return fmt.Sprintf("TIMESTAMP('1995-01-01') + INTERVAL %d SECOND", w.r.Int64N(30*365*86400))
}

func (w *fineWorkload) id() int64 { return 1 + w.r.Int64N(w.nextID) }

func (w *fineWorkload) statement(tbl string) string {
	t := w.db + "." + tbl
	switch w.r.IntN(20) {
	case 0, 1, 2, 3:
		w.nextID++
		return fmt.Sprintf("INSERT IGNORE INTO %s VALUES (%d, %s, %d, %d.%02d, 'new')", t, w.nextID, w.created(), w.r.IntN(1000), w.r.IntN(2000)-1000, w.r.IntN(100))
	case 4, 5, 6:
		return fmt.Sprintf("UPDATE %s SET amount = -amount, note = CONCAT('upd', %d) WHERE id = %d", t, w.r.IntN(1000), w.id())
	case 7, 8, 9:
		return fmt.Sprintf("UPDATE %s SET created_at = created_at + INTERVAL %d DAY WHERE id = %d", t, w.r.IntN(81)-40, w.id())
	case 10:
		return fmt.Sprintf("UPDATE %s SET customer_id = %d WHERE id = %d", t, w.r.IntN(1000), w.id())
	case 11, 12:
		return fmt.Sprintf("DELETE FROM %s WHERE id = %d", t, w.id())
	case 13:
		return fmt.Sprintf("UPDATE IGNORE %s SET id = %d WHERE id = %d", t, w.id()+1_000_000, w.id())
	case 14:
		id := w.id()
		return fmt.Sprintf("DELETE FROM %s WHERE id = %d; INSERT IGNORE INTO %s VALUES (%d, %s, %d, 1.00, 'again')", t, id, t, id, w.created(), w.r.IntN(1000))
	case 15:
		id := w.id()
		return fmt.Sprintf("UPDATE %s SET note = 'a' WHERE id = %d; UPDATE %s SET created_at = created_at - INTERVAL 3 DAY, note = 'b' WHERE id = %d; UPDATE %s SET amount = amount + 1 WHERE id = %d", t, id, t, id, t, id)
	default:
		lo := w.r.Int64N(w.nextID)
		return fmt.Sprintf("UPDATE %s SET note = 'range' WHERE id BETWEEN %d AND %d", t, lo, lo+int64(w.r.IntN(30)))
	}
}

// large is a transaction of 2,000 to 10,000 rows.
func (w *fineWorkload) large(tbl string) string {
	t := w.db + "." + tbl
	lo := w.r.Int64N(w.nextID)
	n := 2000 + w.r.Int64N(8000)
	switch w.r.IntN(3) {
	case 0:
		return fmt.Sprintf("UPDATE %s SET created_at = created_at + INTERVAL 1 DAY, note = 'bulk' WHERE id BETWEEN %d AND %d", t, lo, lo+n)
	case 1:
		return fmt.Sprintf("DELETE FROM %s WHERE id BETWEEN %d AND %d", t, lo, lo+n/2)
	default:
		first := w.nextID + 1
		w.nextID += n
		return fmt.Sprintf("INSERT IGNORE INTO %s SELECT %d + seq, TIMESTAMP('1995-01-01') + INTERVAL (seq * 7919) %% 10950 DAY, seq %% 1000, seq %% 500, 'bulkins' FROM seq_0_to_%d", t, first, n-1)
	}
}

func (w *fineWorkload) exec(q string) error {
	for _, s := range strings.Split(q, "; ") {
		if _, err := w.conn.Execute(s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// txn runs one transaction over one to three of the tables.
func (w *fineWorkload) txn() error {
	if err := w.conn.Begin(); err != nil {
		return err
	}
	if w.r.IntN(200) == 0 {
		if err := w.exec(w.large(fineTables[w.r.IntN(len(fineTables))].name)); err != nil {
			_ = w.conn.Rollback()
			return err
		}
		return w.conn.Commit()
	}
	tables := 1 + w.r.IntN(3)
	for i := 0; i < tables; i++ {
		tbl := fineTables[w.r.IntN(len(fineTables))].name
		q := w.statement(tbl)
		for n := w.r.IntN(3); n >= 0; n-- {
			if err := w.exec(q); err != nil {
				_ = w.conn.Rollback()
				return err
			}
			q = w.statement(tbl)
		}
	}
	if w.r.IntN(10) == 0 {
		return w.conn.Rollback()
	}
	return w.conn.Commit()
}

// TestCrashRecoveryFinePartitions is the crash test on finely partitioned
// tables: the workload above over 30 years of created_at, cdcsync under a
// low open-file limit with compactions during the run, SIGKILLed again and
// again. At the end every table equals MySQL row for row.
//
// CDCSYNC_CRASH_ROUNDS (default 10: about two minutes on two cores, most
// of it the catch-up after the last kill), CDCSYNC_CRASH_SEED and
// CDCSYNC_CRASH_NOFILE (default 256) make it the long acceptance run, e.g.
// CDCSYNC_CRASH_ROUNDS=60 CDCSYNC_CRASH_NOFILE=1024 for sixty kills.
func TestCrashRecoveryFinePartitions(t *testing.T) {
	const dbName = "it_finecrash"
	var rules strings.Builder
	rules.WriteString("tables:")
	for i, ft := range fineTables {
		fmt.Fprintf(&rules, "\n  - match: %s.%s\n    partition: %s", dbName, ft.name, ft.partition)
		if i == 0 {
			// day x bucket, the finest: deletion vectors (the others
			// are in position mode).
			rules.WriteString("\n    deletes: dv")
		}
	}
	e := newEnv(t, dbName, envOptions{tables: rules.String(), epoch: "interval: 500ms",
		extra: "maintenance:\n  every_epochs: 2\n  idle_after: 2s\n  compaction:\n    delete_files: 3\n    small_file_size: 4MiB\n    target_file_size: 32MiB\n    max_bytes: 64MiB"})
	for _, ft := range fineTables {
		e.exec(fmt.Sprintf("CREATE TABLE %s.%s (id BIGINT NOT NULL PRIMARY KEY, created_at DATETIME(6) NOT NULL, customer_id INT NOT NULL, amount DECIMAL(10,2), note VARCHAR(40))", dbName, ft.name))
		e.exec(fmt.Sprintf("INSERT INTO %s.%s SELECT seq, TIMESTAMP('1995-01-01') + INTERVAL (seq * 7919) %% 10950 DAY + INTERVAL seq SECOND, seq %% 1000, (seq %% 20000) / 100 - 100, 'seed' FROM %s.seq_1_to_%d", dbName, ft.name, dbName, fineSeedRows))
	}
	seed := uint64(envInt(t, "CDCSYNC_CRASH_SEED", int(time.Now().UnixNano()%1e9)))
	rounds := envInt(t, "CDCSYNC_CRASH_ROUNDS", 10)
	nofile := envInt(t, "CDCSYNC_CRASH_NOFILE", 256)
	t.Logf("seed %d, %d rounds, ulimit -n %d", seed, rounds, nofile)
	conn, err := db.Connect(testenv.RootUser, "", dbName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	w := &fineWorkload{r: rand.New(rand.NewPCG(seed, 1)), conn: conn, db: dbName, nextID: fineSeedRows}
	stopLoad := inBackground(t, func() error {
		if err := w.txn(); err != nil {
			return err
		}
		time.Sleep(time.Duration(w.r.IntN(15)) * time.Millisecond)
		return nil
	})

	bin := plainBinary(t)
	r := rand.New(rand.NewPCG(seed, 2))
	start := time.Now()
	for i := 0; i < rounds; i++ {
		p := e.startLimited(bin, nofile)
		select {
		case <-time.After(time.Duration(1000+r.IntN(7000)) * time.Millisecond):
			p.kill()
		case <-p.done:
			t.Fatalf("round %d: cdcsync exited by itself (code %d); output:\n%s", i, p.cmd.ProcessState.ExitCode(), p.output())
		}
		if strings.Contains(p.output(), "too many open files") {
			t.Fatalf("round %d: cdcsync ran out of file descriptors under ulimit -n %d; output:\n%s", i, nofile, p.output())
		}
	}
	if err := stopLoad(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("%d kills over %s", rounds, time.Since(start).Round(time.Second))

	p := e.startLimited(bin, nofile)
	caught := time.Now()
	e.waitCaughtUp(p, 5*time.Minute)
	took := time.Since(caught)
	t.Logf("the last daemon caught up in %s", took.Round(time.Millisecond))
	if took > time.Minute {
		t.Errorf("the last daemon took %s to catch up after the load ended, over a minute", took.Round(time.Second))
	}
	for _, ft := range fineTables {
		e.assertMirrors(ft.name)
	}
	scanned := fineTablesBounded(t, e, p)
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}
	if t.Failed() {
		t.Logf("final cdcsync output:\n%s", p.output())
	}
	fineTablesScan(t, e, scanned)
}

// fineFiles counts what a reader of the table must open: data files, delete
// files (a deletion vector counts one), and the partitions with rows.
func fineFiles(t *testing.T, e *env, name string) (parts, data, deletes int) {
	t.Helper()
	lk := e.openLake()
	tbl, err := lk.LoadTable(context.Background(), lk.Identifier(e.dbName, name))
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(lk.Scope(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	ps, ds := map[string]bool{}, map[string]bool{}
	for _, tk := range tasks {
		ps[fmt.Sprint(tk.File.SpecID(), tk.File.Partition())] = true
		for _, d := range tk.DeleteFiles {
			ds[fmt.Sprint(d.FilePath(), d.ContentOffset())] = true
		}
	}
	return len(ps), len(tasks), len(ds)
}

// fineTablesBounded waits, while the daemon runs on with no more load, for
// its maintenance of idle tables (maintenance.idle_after) to finish with
// each fine table, and checks that the table is then within the documented
// bound (docs/configuration.md): at most twice as many data files as
// partitions with rows, and no more delete files than partitions (issue
// 23). The two day-partitioned tables, whose 20,000 files take minutes to
// compact here, only with CDCSYNC_CRASH_SCAN=1. It returns the tables it
// checked.
func fineTablesBounded(t *testing.T, e *env, p *proc) []string {
	t.Helper()
	var names []string
	began := time.Now()
	for _, ft := range fineTables {
		if ft.name != "orders_b" && os.Getenv("CDCSYNC_CRASH_SCAN") != "1" {
			continue
		}
		names = append(names, ft.name)
		marker := `msg="idle table maintained" table=` + e.dbName + "." + ft.name + " "
		select {
		case <-p.waitFor(marker, 20*time.Minute):
		case <-p.done:
		}
		if !strings.Contains(p.output(), marker) {
			t.Fatalf("%s was not maintained once idle (maintenance.idle_after: 2s); output:\n%s", ft.name, p.output())
		}
		parts, data, deletes := fineFiles(t, e, ft.name)
		t.Logf("%s: %d partitions with rows, %d data files, %d delete files once maintained idle, %s after the catch-up",
			ft.name, parts, data, deletes, time.Since(began).Round(time.Second))
		if data > 2*parts || deletes > parts {
			t.Errorf("%s: %d data files and %d delete files for %d partitions with rows; the bound is %d and %d",
				ft.name, data, deletes, parts, 2*parts, parts)
		}
	}
	return names
}

// fineTablesScan times a full scan of each table against the same rows
// freshly compacted (cdcsync compact): at most 1.5x (issue 23).
func fineTablesScan(t *testing.T, e *env, names []string) {
	t.Helper()
	ctx := context.Background()
	lk := e.openLake()
	for _, name := range names {
		ident := lk.Identifier(e.dbName, name)
		tbl, err := lk.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		old := tbl.CurrentSnapshot().SnapshotID
		began := time.Now()
		out, err := exec.Command(binary, "compact", "--config", e.cfgPath, e.dbName+"."+name).CombinedOutput()
		if err != nil {
			t.Fatalf("cdcsync compact %s: %v\n%s", name, err, out)
		}
		took := time.Since(began)
		fresh, err := lk.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		// Both snapshots, scan after scan, so that the machine's load
		// weighs on both alike: the medians of seven each.
		var bs, as []time.Duration
		for range 7 {
			bs = append(bs, scanTime(t, lk, fresh, old, 1))
			as = append(as, scanTime(t, lk, fresh, fresh.CurrentSnapshot().SnapshotID, 1))
		}
		slices.Sort(bs)
		slices.Sort(as)
		before, after := bs[len(bs)/2], as[len(as)/2]
		ratio := float64(before) / float64(after)
		t.Logf("%s: full scan %s, %s freshly compacted (%.2fx; cdcsync compact took %s)", name, before.Round(time.Millisecond), after.Round(time.Millisecond), ratio, took.Round(time.Millisecond))
		if ratio > 1.5 {
			t.Errorf("%s: a full scan took %.2f times as long as the same rows freshly compacted, over 1.5", name, ratio)
		}
	}
}
