package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/go-mysql-org/go-mysql/client"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
	"github.com/cdcsync/cdcsync/integration/testenv"
	"github.com/cdcsync/cdcsync/lake"
)

// The maintenance tests use one upsert-heavy table.
const kvSchemaSQL = `CREATE TABLE %s.kv (id INT NOT NULL PRIMARY KEY, v BIGINT NOT NULL, s VARCHAR(48))`

type kvRow struct {
	v int64
	s string
}

// kvTxn is one committed MySQL transaction and what it did.
type kvTxn struct {
	gtid string
	at   time.Time
	set  map[int32]kvRow
	del  []int32
}

// kvWorkload upserts and deletes random keys of kv, one transaction of 1 to
// 4 statements at a time, and remembers every transaction so that the
// table's state at any binlog position can be rebuilt.
type kvWorkload struct {
	t    *testing.T
	conn *client.Conn
	r    *rand.Rand
	keys int
	n    int64

	mu   sync.Mutex
	base map[int32]kvRow // the rows before the first recorded transaction
	hist []kvTxn
}

func newKVWorkload(t *testing.T, dbName string, keys int, seed uint64) *kvWorkload {
	t.Helper()
	conn, err := db.Connect(testenv.RootUser, "", dbName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Logf("kv workload on %s with seed %d", dbName, seed)
	return &kvWorkload{t: t, conn: conn, r: rand.New(rand.NewPCG(seed, 3)), keys: keys, base: map[int32]kvRow{}}
}

// load inserts every key once, before cdcsync starts.
func (w *kvWorkload) load() {
	w.t.Helper()
	const batch = 1000
	for lo := 1; lo <= w.keys; lo += batch {
		var vals []string
		for id := lo; id < lo+batch && id <= w.keys; id++ {
			row := kvRow{v: int64(id), s: fmt.Sprintf("initial-%d", id)}
			w.base[int32(id)] = row
			vals = append(vals, fmt.Sprintf("(%d, %d, '%s')", id, row.v, row.s))
		}
		if _, err := w.conn.Execute("INSERT INTO kv (id, v, s) VALUES " + strings.Join(vals, ",")); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *kvWorkload) txn() error {
	tx := kvTxn{set: map[int32]kvRow{}}
	if _, err := w.conn.Execute("BEGIN"); err != nil {
		return err
	}
	for i, n := 0, 1+w.r.IntN(4); i < n; i++ {
		id := int32(1 + w.r.IntN(w.keys))
		if w.r.IntN(10) == 0 {
			if _, err := w.conn.Execute("DELETE FROM kv WHERE id = ?", id); err != nil {
				return err
			}
			delete(tx.set, id)
			tx.del = append(tx.del, id)
			continue
		}
		w.n++
		row := kvRow{v: w.n, s: fmt.Sprintf("upsert-%d-%x", w.n, w.r.Uint32())}
		if _, err := w.conn.Execute("INSERT INTO kv (id, v, s) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v), s = VALUES(s)", id, row.v, row.s); err != nil {
			return err
		}
		tx.set[id] = row
	}
	if _, err := w.conn.Execute("COMMIT"); err != nil {
		return err
	}
	tx.at = time.Now()
	r, err := w.conn.Execute("SELECT @@last_gtid")
	if err != nil {
		return err
	}
	g, _ := r.GetString(0, 0)
	tx.gtid = strings.Clone(g)
	w.mu.Lock()
	w.hist = append(w.hist, tx)
	w.mu.Unlock()
	return nil
}

// runFor runs transactions, pace apart, until stop is closed.
func (w *kvWorkload) runUntil(stop <-chan struct{}, pace time.Duration) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := w.txn(); err != nil {
			return err
		}
		time.Sleep(pace)
	}
}

// at rebuilds the table as of a committed position.
func (w *kvWorkload) at(pos cdcsync.Position) map[int32]kvRow {
	w.t.Helper()
	state := map[int32]kvRow{}
	for k, v := range w.base {
		state[k] = v
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, tx := range w.hist {
		ok, err := (binlogpos.Order{}).Covers(pos, &cdcsync.Txn{GTID: tx.gtid})
		if err != nil {
			w.t.Fatal(err)
		}
		if !ok {
			break // positions only grow: nothing later is covered
		}
		for _, k := range tx.del {
			delete(state, k)
		}
		for k, v := range tx.set {
			state[k] = v
		}
	}
	return state
}

// kvRowsAt reads kv as of a snapshot, failing on a duplicate key.
func kvRowsAt(t *testing.T, lk *lake.Lake, tbl *table.Table, snapshotID int64) map[int32]kvRow {
	t.Helper()
	ts, err := lake.SchemaFromIceberg(tbl)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := lake.ReadRowsAt(lk.Scope(context.Background()), tbl, ts, snapshotID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]kvRow{}
	for _, r := range rows {
		id := r[0].(int32)
		if _, dup := out[id]; dup {
			t.Errorf("snapshot %d holds key %d twice", snapshotID, id)
		}
		s, _ := r[2].(string)
		out[id] = kvRow{v: r[1].(int64), s: s}
	}
	return out
}

func diffKV(want, got map[int32]kvRow) string {
	var msgs []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			msgs = append(msgs, fmt.Sprintf("missing %d", k))
		} else if g != w {
			msgs = append(msgs, fmt.Sprintf("stale %d: %v, want %v", k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			msgs = append(msgs, fmt.Sprintf("extra %d", k))
		}
	}
	sort.Strings(msgs)
	if len(msgs) > 10 {
		msgs = append(msgs[:10], fmt.Sprintf("... %d differences", len(msgs)))
	}
	return strings.Join(msgs, "; ")
}

// lineage returns the table's snapshots from the oldest to the current one.
func lineage(tbl *table.Table) []table.Snapshot {
	meta := tbl.Metadata()
	var out []table.Snapshot
	for s := meta.CurrentSnapshot(); s != nil; {
		out = append(out, *s)
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func summaryInt(s *table.Snapshot, key string) int {
	n, _ := strconv.Atoi(s.Summary.Properties[key])
	return n
}

// scanTime is the median time of n full iceberg-go scans (deletes applied)
// of the table at a snapshot.
func scanTime(t *testing.T, lk *lake.Lake, tbl *table.Table, snapshotID int64, n int) time.Duration {
	t.Helper()
	ctx := lk.Scope(context.Background())
	var ds []time.Duration
	for i := 0; i < n+1; i++ {
		began := time.Now()
		_, recs, err := tbl.Scan(table.WithSnapshotID(snapshotID)).ToArrowRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rows := 0
		for rec, err := range recs {
			if err != nil {
				t.Fatal(err)
			}
			rows += int(rec.NumRows())
			rec.Release()
		}
		if i > 0 { // the first scan warms the caches
			ds = append(ds, time.Since(began))
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// freshness records, for every transaction of a workload, how long after
// its MySQL commit the pipeline checkpoint covered it.
type freshness struct {
	mu   sync.Mutex
	lags []time.Duration
	when []time.Time // commit time of each lag's transaction
}

func (f *freshness) watch(t *testing.T, e *env, w *kvWorkload, stop <-chan struct{}) {
	lk := e.openLake()
	w.mu.Lock()
	next := len(w.hist) // earlier transactions belong to an earlier watch
	w.mu.Unlock()
	for {
		select {
		case <-stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		ck, ok, err := lk.LoadCheckpoint(context.Background())
		if err != nil || !ok {
			continue
		}
		now := time.Now()
		w.mu.Lock()
		for next < len(w.hist) {
			c, err := (binlogpos.Order{}).Covers(ck.Pos, &cdcsync.Txn{GTID: w.hist[next].gtid})
			if err != nil || !c {
				break
			}
			f.mu.Lock()
			f.lags = append(f.lags, now.Sub(w.hist[next].at))
			f.when = append(f.when, w.hist[next].at)
			f.mu.Unlock()
			next++
		}
		w.mu.Unlock()
	}
}

// stats returns p50, p99 and max of the lags of transactions committed in
// [from, to).
func (f *freshness) stats(from, to time.Time) (n int, p50, p99, mx time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ds []time.Duration
	for i, d := range f.lags {
		if !f.when[i].Before(from) && f.when[i].Before(to) {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return 0, 0, 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return len(ds), ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1]
}

var compactedLog = regexp.MustCompile(`time=(\S+) level=INFO msg="table compacted".* seconds=([0-9.e-]+)`)

// compactions parses the daemon's "table compacted" log lines into the
// windows during which a compaction ran.
func compactions(out string) [][2]time.Time {
	var ws [][2]time.Time
	for _, m := range compactedLog.FindAllStringSubmatch(out, -1) {
		end, err := time.Parse(time.RFC3339Nano, m[1])
		secs, err2 := strconv.ParseFloat(m[2], 64)
		if err == nil && err2 == nil {
			ws = append(ws, [2]time.Time{end.Add(-time.Duration(secs * float64(time.Second))), end})
		}
	}
	return ws
}

// TestMaintenanceLongUpsertWorkload streams a long upsert workload into one
// table, first without maintenance, then with it, compacting after every
// epoch. It checks that every compaction left the table equal to MySQL at
// the position it was made at, that the delete files stay under the
// threshold, and that the maintained table reads, over the time each of its
// snapshots was current, within 1.5 times the time of a freshly compacted
// one (iceberg-go scans); it reports freshness with and without compaction.
func TestMaintenanceLongUpsertWorkload(t *testing.T) {
	const (
		dbName      = "it_maint_long"
		keys        = 20000
		deleteFiles = 1
		every       = 1
	)
	maintenance := fmt.Sprintf(`maintenance:
  enabled: false
  every_epochs: %d
  compaction:
    delete_files: %d
    delete_ratio: 0.5
    small_files: 12
    small_file_size: 4MiB
    target_file_size: 32MiB
    max_bytes: 64MiB
    max_manifests: 16
  snapshots:
    max_age: 1h
    min_keep: 20
  orphans:
    min_age: 1h
    interval: 1h`, every, deleteFiles)
	e := newEnv(t, dbName, envOptions{onMinIO: true, extra: maintenance, epoch: "interval: 2s"})
	mustExec(t, fmt.Sprintf(kvSchemaSQL, dbName))
	w := newKVWorkload(t, dbName, keys, uint64(time.Now().UnixNano()))
	w.load()

	bin := plainBinary(t)
	fresh := &freshness{}
	phase := func(name string, d time.Duration) (string, time.Time, time.Time) {
		p := e.startWith(bin)
		e.waitCaughtUp(p, 3*time.Minute)
		stop, stopWatch := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		var werr error
		wg.Add(2)
		go func() { defer wg.Done(); werr = w.runUntil(stop, 2*time.Millisecond) }()
		go func() { defer wg.Done(); fresh.watch(t, e, w, stopWatch) }()
		began := time.Now()
		time.Sleep(d)
		close(stop)
		ended := time.Now()
		e.waitCaughtUp(p, 3*time.Minute)
		time.Sleep(300 * time.Millisecond) // let the watcher see the last checkpoint
		close(stopWatch)
		wg.Wait()
		if werr != nil {
			t.Fatalf("%s: workload: %v", name, werr)
		}
		if code := p.stop(t); code != 0 {
			t.Fatalf("%s: exit %d; output:\n%s", name, code, p.output())
		}
		return p.output(), began, ended
	}

	// Phase A: maintenance off, the way cdcsync ran before it had any.
	outA, aFrom, aTo := phase("without maintenance", 15*time.Second)
	lk := e.openLake()
	ctx := context.Background()
	ident := lk.Identifier(dbName, "kv")
	tblA, err := lk.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	snapA := tblA.CurrentSnapshot()

	// Phase B: maintenance on.
	e.rewriteConfig("  enabled: false", "  enabled: true")
	out, bFrom, bTo := phase("with maintenance", 60*time.Second)
	e.assertMirrors("kv")

	tbl, err := lk.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	snaps := lineage(tbl)
	// Every compaction leaves the table equal to MySQL at the position of
	// the epoch it was made on, row for row.
	var compactIdx []int
	var lastPos cdcsync.Position
	for i := range snaps {
		s := &snaps[i]
		if p := s.Summary.Properties[lake.SummaryPosition]; p != "" {
			if lastPos, err = cdcsync.DecodePosition(p); err != nil {
				t.Fatal(err)
			}
		}
		if s.Summary.Properties[lake.SummaryMaintenance] != "compaction" {
			continue
		}
		compactIdx = append(compactIdx, i)
		if s.Summary.Properties[lake.SummaryPipeline] != "" || s.Summary.Properties[lake.SummaryEpoch] != "" {
			t.Errorf("compaction snapshot %d carries epoch keys: %v", s.SnapshotID, s.Summary.Properties)
		}
		if d := diffKV(w.at(lastPos), kvRowsAt(t, lk, tbl, s.SnapshotID)); d != "" {
			t.Errorf("after the compaction in snapshot %d the table differs from MySQL at %s: %s", s.SnapshotID, lastPos.String(), d)
		}
	}
	if len(compactIdx) < 10 {
		t.Fatalf("%d compactions during the maintained phase, want at least 10; output:\n%s", len(compactIdx), out)
	}
	// Once the first compaction ran, the delete files stay under the threshold.
	maxDeletes, maxData := 0, 0
	for _, s := range snaps[compactIdx[0]:] {
		maxDeletes = max(maxDeletes, summaryInt(&s, "total-delete-files"))
		maxData = max(maxData, summaryInt(&s, "total-data-files"))
	}
	if maxDeletes > deleteFiles {
		t.Errorf("with maintenance, a snapshot had %d delete files, over the threshold of %d", maxDeletes, deleteFiles)
	}

	// A compaction by hand gives the freshly compacted reference.
	cliOut, code := runCLI(t, "compact", "--config", e.cfgPath, dbName+".kv")
	if code != 0 || !strings.Contains(cliOut, "it_maint_long.kv:") {
		t.Fatalf("cdcsync compact exited %d:\n%s", code, cliOut)
	}
	t.Logf("cdcsync compact:\n%s", cliOut)
	e.assertMirrors("kv")
	tblF, err := lk.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	snapF := tblF.CurrentSnapshot()
	if n := summaryInt(snapF, "total-delete-files"); n != 0 {
		t.Errorf("%d delete files after cdcsync compact, want 0", n)
	}
	if n := summaryInt(snapF, "total-data-files"); n != 1 {
		t.Errorf("%d data files after cdcsync compact, want 1", n)
	}
	if d := diffKV(w.at(lastPos), kvRowsAt(t, lk, tblF, snapF.SnapshotID)); d != "" {
		t.Errorf("after cdcsync compact: %s", d)
	}

	// Read time of every snapshot of the maintained phase, each measured
	// right after the freshly compacted table (the machine's load changes
	// over a run; back to back, the ratio does not), weighted by how long
	// the snapshot was the table's current one: what readers experienced.
	var weighted, total, sumFresh time.Duration
	var ratioEpoch, ratioCompact, worst float64
	var nEpoch, nCompact int
	for i := compactIdx[0]; i+1 < len(snaps); i++ {
		f := scanTime(t, lk, tblF, snapF.SnapshotID, 3)
		d := scanTime(t, lk, tbl, snaps[i].SnapshotID, 3)
		r := float64(d) / float64(f)
		current := time.Duration(snaps[i+1].TimestampMs-snaps[i].TimestampMs) * time.Millisecond
		weighted += time.Duration(r * float64(current))
		total += current
		sumFresh += f
		worst = max(worst, r)
		if snaps[i].Summary.Properties[lake.SummaryMaintenance] != "" {
			ratioCompact += r
			nCompact++
		} else {
			ratioEpoch += r
			nEpoch++
		}
	}
	avgRatio := float64(weighted) / float64(total)
	readFresh := sumFresh / time.Duration(nEpoch+nCompact)
	fA, readA := scanTime(t, lk, tblF, snapF.SnapshotID, 5), scanTime(t, lk, tblA, snapA.SnapshotID, 5)

	t.Logf("%d transactions, %d rows in the end", len(w.hist), len(w.at(lastPos)))
	t.Logf("without maintenance (15s): %d data files, %d delete files, %d snapshots; scan %s = %.1f x fresh",
		summaryInt(snapA, "total-data-files"), summaryInt(snapA, "total-delete-files"), len(tblA.Metadata().Snapshots()), readA, float64(readA)/float64(fA))
	t.Logf("with maintenance (60s): %d compactions, at most %d delete files and %d data files per snapshot",
		len(compactIdx), maxDeletes, maxData)
	t.Logf("scan times: freshly compacted %s; maintained table, weighted by the time each snapshot was current: %.2f x fresh; "+
		"epoch snapshots avg %.2f x, compaction snapshots avg %.2f x, worst %.2f x",
		readFresh, avgRatio, ratioEpoch/float64(max(nEpoch, 1)), ratioCompact/float64(max(nCompact, 1)), worst)
	if avgRatio > 1.5 {
		t.Errorf("the maintained table read %.2f times slower than a freshly compacted one on average over time, over 1.5", avgRatio)
	}

	// Freshness: lag from the MySQL commit to the checkpoint covering it.
	nA, a50, a99, aMax := fresh.stats(aFrom, aTo)
	nB, b50, b99, bMax := fresh.stats(bFrom, bTo)
	t.Logf("freshness without maintenance: %d txns, p50 %s p99 %s max %s; epoch commits %s", nA, a50, a99, aMax, commitStats(outA))
	t.Logf("freshness with maintenance:    %d txns, p50 %s p99 %s max %s; epoch commits %s", nB, b50, b99, bMax, commitStats(out))
	var compSecs []float64
	worstDuring := time.Duration(0)
	for _, win := range compactions(out) {
		compSecs = append(compSecs, win[1].Sub(win[0]).Seconds())
		// Transactions committed while a compaction ran, or in the epoch before it.
		_, _, _, m := fresh.stats(win[0].Add(-2*time.Second), win[1])
		worstDuring = max(worstDuring, m)
	}
	sort.Float64s(compSecs)
	if len(compSecs) > 0 {
		t.Logf("compaction durations: %d runs, median %.3fs, max %.3fs; worst lag of a transaction committed during or just before a compaction: %s",
			len(compSecs), compSecs[len(compSecs)/2], compSecs[len(compSecs)-1], worstDuring)
	}
	if strings.Contains(out, "maintenance failed") {
		t.Errorf("a maintenance task failed")
	}
	if nB == 0 || bMax > 10*time.Second {
		t.Errorf("with maintenance the worst lag was %s over %d transactions; want under 10s", bMax, nB)
	}
	if t.Failed() || os.Getenv("CDCSYNC_TEST_VERBOSE") != "" {
		t.Logf("cdcsync output without maintenance:\n%s", outA)
		t.Logf("cdcsync output:\n%s", out)
	}
}

var epochLog = regexp.MustCompile(`msg="epoch committed".* seconds=([0-9.e-]+)`)

// commitStats summarizes the "epoch committed" durations of a daemon log.
func commitStats(out string) string {
	var ds []float64
	for _, m := range epochLog.FindAllStringSubmatch(out, -1) {
		if f, err := strconv.ParseFloat(m[1], 64); err == nil {
			ds = append(ds, f)
		}
	}
	if len(ds) == 0 {
		return "none"
	}
	n := len(ds)
	first, last := ds[:min(5, n)], ds[max(0, n-5):]
	avg := func(x []float64) float64 {
		s := 0.0
		for _, v := range x {
			s += v
		}
		return s / float64(len(x))
	}
	sort.Float64s(ds)
	return fmt.Sprintf("%d, median %.3fs, first five avg %.3fs, last five avg %.3fs", n, ds[n/2], avg(first), avg(last))
}

// TestMaintenanceCrash kills cdcsync with SIGKILL inside a compaction (its
// files written, the catalog commit not done) and inside a snapshot expiry
// (committed, the expired files not deleted yet), with a workload running.
// After the restart nothing is lost or duplicated and orphan cleanup
// removes what the crashes left, while every retained snapshot still reads.
func TestMaintenanceCrash(t *testing.T) {
	const dbName = "it_maint_crash"
	maintenance := `maintenance:
  every_epochs: 2
  compaction:
    delete_files: 3
  snapshots:
    max_age: 2s
    min_keep: 3
  orphans:
    min_age: 3s
    interval: 2s`
	e := newEnv(t, dbName, envOptions{extra: maintenance, epoch: "interval: 200ms"})
	mustExec(t, fmt.Sprintf(kvSchemaSQL, dbName))
	w := newKVWorkload(t, dbName, 3000, uint64(time.Now().UnixNano()))
	w.load()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() { defer wg.Done(); werr = w.runUntil(stop, 3*time.Millisecond) }()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	lk := e.openLake()
	ctx := context.Background()
	ident := lk.Identifier(dbName, "kv")
	// orphans lists the files under the table's location that its metadata
	// does not reference.
	orphans := func() []string {
		tbl, err := lk.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := tbl.PlanOrphanFiles(lk.Scope(ctx), table.WithFilesOlderThan(0))
		if err != nil {
			t.Fatal(err)
		}
		return plan.Files()
	}
	crash := func(point string) []string {
		t.Helper()
		p := e.start("CDCSYNC_FAULT=" + point + ":1")
		select {
		case <-p.done:
		case <-time.After(3 * time.Minute):
			p.kill()
			t.Fatalf("cdcsync did not reach %s within 3 minutes; output:\n%s", point, p.output())
		}
		if code := p.cmd.ProcessState.ExitCode(); code != -1 || !strings.Contains(p.output(), "point="+point) {
			t.Fatalf("cdcsync ended with code %d, not killed at %s; output:\n%s", code, point, p.output())
		}
		left := orphans()
		t.Logf("killed at %s: %d unreferenced files left", point, len(left))
		if len(left) == 0 {
			t.Logf("output:\n%s", p.output())
		}
		return left
	}
	left := crash("during-compaction")
	if len(left) == 0 {
		t.Fatal("a crash during compaction left no unreferenced file: the fault point is not after the rewrite was written")
	}
	snapsBefore := 0
	if tbl, err := lk.LoadTable(ctx, ident); err == nil {
		snapsBefore = len(tbl.Metadata().Snapshots())
	}
	left2 := crash("during-expiry")
	tbl, err := lk.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshots: %d before the second run, %d after the expiry it was killed in", snapsBefore, len(tbl.Metadata().Snapshots()))
	var fromExpiry []string
	first := map[string]bool{}
	for _, f := range left {
		first[f] = true
	}
	for _, f := range left2 {
		if !first[f] {
			fromExpiry = append(fromExpiry, f)
		}
	}
	if len(fromExpiry) == 0 {
		t.Fatal("a crash during expiry left no new unreferenced file: the fault point is not between the commit and the deletion")
	}

	// Restart without faults: everything the crashes left is removed. The
	// metrics server is on, to read the maintenance metrics.
	port := freePort(t)
	e.rewriteConfig(`listen: "off"`, `listen: 127.0.0.1:`+strconv.Itoa(port))
	p := e.start()
	fsys, err := tbl.FS(lk.Scope(ctx))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var still []string
		for _, f := range left2 {
			if fh, err := fsys.Open(f); err == nil {
				fh.Close()
				still = append(still, f)
			}
		}
		if len(still) == 0 {
			break
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("%d of the %d files the crashes left are still there (e.g. %s); output:\n%s", len(still), len(left2), still[0], p.output())
		}
		time.Sleep(500 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatalf("workload: %v", werr)
	}
	e.waitCaughtUp(p, 3*time.Minute)
	e.assertMirrors("kv")
	_, metrics := httpGet(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	for _, want := range []string{
		`cdcsync_table_data_files{table="it_maint_crash.kv"}`,
		`cdcsync_table_delete_files{table="it_maint_crash.kv"}`,
		`cdcsync_table_delete_rows{table="it_maint_crash.kv"}`,
		`cdcsync_table_average_file_bytes{table="it_maint_crash.kv"}`,
		`cdcsync_table_snapshots{table="it_maint_crash.kv"}`,
		`cdcsync_compaction_last_timestamp_seconds{table="it_maint_crash.kv"}`,
		`cdcsync_compaction_last_duration_seconds{table="it_maint_crash.kv"}`,
		`cdcsync_compaction_rewritten_bytes_total{table="it_maint_crash.kv"}`,
		`cdcsync_snapshots_expired_total{table="it_maint_crash.kv"}`,
		`cdcsync_orphan_files_deleted_total{table="it_maint_crash.kv"}`,
		`cdcsync_maintenance_runs_total{result="ok",table="it_maint_crash.kv",task="compaction"}`,
		`cdcsync_maintenance_duration_seconds_bucket{task="expiry"`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	out := p.output()
	if strings.Contains(out, "maintenance failed") {
		t.Errorf("a maintenance task failed after the restart")
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, out)
	}
	for _, want := range []string{"table compacted", "snapshots expired", "orphan files removed"} {
		if !strings.Contains(out, want) {
			t.Errorf("the restarted daemon never logged %q", want)
		}
	}
	// Every snapshot still in the metadata reads: orphan cleanup and expiry
	// never removed a file a retained snapshot needs.
	tbl, err = lk.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tbl.Metadata().Snapshots() {
		kvRowsAt(t, lk, tbl, s.SnapshotID)
	}
	if c, err := lake.CommittedBy(tbl, e.cfg.Pipeline); err != nil || !c.Found {
		t.Errorf("the last epoch commit is no longer in the lineage: %+v, %v", c, err)
	}
	t.Logf("%d snapshots retained, %d transactions in total", len(tbl.Metadata().Snapshots()), len(w.hist))
	if t.Failed() {
		t.Logf("cdcsync output:\n%s", out)
	}
}
