package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/integration/testenv"
	"github.com/cdcsync/cdcsync/lake"
)

// env is one test's pipeline: its own database, config and warehouse.
type env struct {
	t        *testing.T
	dir      string
	dbName   string
	cfgPath  string
	cfg      *config.Config
	serverID int
	server   *testenv.MariaDB
}

type envOptions struct {
	onMinIO   bool
	minio     *testenv.MinIO   // default: the shared MinIO
	server    *testenv.MariaDB // default: the shared server
	sourceTLS string           // the source.tls: section's body
	s3CA      string           // warehouse.s3.ca_file
	pgDSN     string           // a PostgreSQL catalog at this DSN instead of SQLite
	tables    string           // extra YAML for the tables: section
	extra     string           // extra top-level YAML
	epoch     string           // the epoch: section's body; default "interval: 300ms"
	// Fault tests put a proxy between cdcsync and the servers.
	sourcePort int    // MySQL at this port instead of the server's
	s3Endpoint string // S3 at this endpoint instead of the MinIO's
	httpListen string // http.listen; default "off"
	reqTimeout string // warehouse.request_timeout
	// admin is the admin: section's body; default a socket in the test's
	// directory (not the default socket, which is named after the pipeline
	// and shared by every test run on the machine); adminDefault leaves
	// the section out.
	admin string
	// deletesMode is deletes.mode; default the configuration's default
	// (position).
	deletesMode string
	indexCache  string // deletes.index_cache
	// tableDeletes sets tables[].deletes of the named workload tables
	// (newEngineRun only).
	tableDeletes map[string]string
	// tableRules adds lines (YAML, indented for a tables[] entry) to the
	// rules of the named workload tables (newEngineRun only).
	tableRules map[string]string
	// compaction is maintenance.compaction's body, indented (newEngineRun
	// only; default delete_files: 2).
	compaction string
}

// adminDefault as envOptions.admin leaves admin: out of the config.
const adminDefault = "default"

var serverIDs = struct {
	sync.Mutex
	next int
}{next: 9000}

func newEnv(t *testing.T, dbName string, o envOptions) *env {
	t.Helper()
	dir := t.TempDir()
	serverIDs.Lock()
	serverIDs.next++
	sid := serverIDs.next
	serverIDs.Unlock()
	if o.server == nil {
		o.server = db
	}
	e := &env{t: t, dir: dir, dbName: dbName, serverID: sid, server: o.server}
	catalogSQL := "driver: sqlite\n    dsn: " + filepath.Join(dir, "catalog.db")
	if o.pgDSN != "" {
		catalogSQL = "driver: postgres\n    dsn: " + o.pgDSN
	}
	if o.sourceTLS == "" {
		o.sourceTLS = "mode: disabled"
	}
	if o.epoch == "" {
		o.epoch = "interval: 300ms"
	}
	if o.sourcePort == 0 {
		o.sourcePort = o.server.Port
	}
	if o.httpListen == "" {
		o.httpListen = "off"
	}
	adminYAML := ""
	switch o.admin {
	case "":
		adminYAML = "admin:\n  listen: " + filepath.Join(dir, "admin.sock") + "\n"
	case adminDefault:
	default:
		adminYAML = "admin:\n" + o.admin
	}
	if !strings.Contains(o.extra, "deletes:") {
		// The key index of the test's daemon, in the test's directory
		// (the default is under $HOME).
		adminYAML += "deletes:\n  index_dir: " + filepath.Join(dir, "index") + "\n"
		if o.deletesMode != "" {
			adminYAML += "  mode: " + o.deletesMode + "\n"
		}
		if o.indexCache != "" {
			adminYAML += "  index_cache: " + o.indexCache + "\n"
		}
	}
	e.exec("DROP DATABASE IF EXISTS " + dbName)
	e.exec("CREATE DATABASE " + dbName)
	if o.minio == nil {
		o.minio = minio
	}
	warehouse := "location: " + filepath.Join(dir, "warehouse")
	if o.onMinIO {
		bucket := strings.ReplaceAll(strings.ToLower(dbName), "_", "-")
		if err := o.minio.CreateBucket(bucket); err != nil {
			t.Fatal(err)
		}
		if o.s3Endpoint == "" {
			o.s3Endpoint = o.minio.Endpoint
		}
		warehouse = fmt.Sprintf(`location: s3://%s/lake
  s3:
    endpoint: %s
    region: %s
    path_style: true
    access_key_id: %s
    secret_access_key: ${CDCSYNC_TEST_S3_SECRET}`, bucket, o.s3Endpoint, testenv.MinIORegion, testenv.MinIOAccessKey)
		if o.s3CA != "" {
			warehouse += "\n    ca_file: " + o.s3CA
		}
	}
	if o.reqTimeout != "" {
		warehouse += "\n  request_timeout: " + o.reqTimeout
	}
	yaml := fmt.Sprintf(`pipeline: %s
source:
  host: 127.0.0.1
  port: %d
  user: %s
  password: ${CDCSYNC_TEST_PASSWORD}
  server_id: %d
  include: ["%s.*"]
  tls:
    %s
warehouse:
  %s
catalog:
  type: sql
  name: cdcsync
  sql:
    %s
epoch:
  %s
http:
  listen: %q
%s%s
%s
`, strings.ReplaceAll(dbName, "_", "-"), o.sourcePort, testenv.ReplUser, sid, dbName, o.sourceTLS, warehouse,
		catalogSQL, o.epoch, o.httpListen, adminYAML, o.tables, o.extra)
	e.cfgPath = filepath.Join(dir, "cdcsync.yaml")
	if err := os.WriteFile(e.cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	// The config's ${CDCSYNC_TEST_PASSWORD} and ${CDCSYNC_TEST_S3_SECRET}
	// are set for the whole process by TestMain (t.Setenv here would keep
	// tests that use an env from running in parallel).
	cfg, err := config.Load(e.cfgPath)
	if err != nil {
		t.Fatalf("test config: %v\n%s", err, yaml)
	}
	e.cfg = cfg
	return e
}

// rewriteConfig replaces text in the config file and reloads it.
func (e *env) rewriteConfig(old, new string) {
	e.t.Helper()
	b, err := os.ReadFile(e.cfgPath)
	if err != nil {
		e.t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		e.t.Fatalf("config has no %q", old)
	}
	if err := os.WriteFile(e.cfgPath, []byte(strings.Replace(string(b), old, new, 1)), 0o600); err != nil {
		e.t.Fatal(err)
	}
	if e.cfg, err = config.Load(e.cfgPath); err != nil {
		e.t.Fatal(err)
	}
}

// exec runs a statement as root on the env's server.
func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if err := e.server.Exec(sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

func mustExec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if err := db.Exec(sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// proc is a running cdcsync.
type proc struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	mu   *sync.Mutex
	done chan error
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// start runs the race-built cdcsync on the env's config.
func (e *env) start(extraEnv ...string) *proc {
	e.t.Helper()
	return e.startWith(daemonBinary(e.t), extraEnv...)
}

// raceTests are the tests whose daemon is the race build: between them
// they run every part of the daemon that has goroutines of its own next to
// the epoch commits (crashes at every protocol point, the lease and its
// renewals, repairs and resyncs, maintenance, outages, copies under load,
// schema changes while rows flow). The others run the plain build, which
// is ten to twenty times cheaper in CPU (CI runs on two cores);
// CDCSYNC_RACE=all makes every test use the race build.
var raceTests = map[string]bool{
	"TestCrashRecovery": true, "TestTwoDaemonsOnePipeline": true, "TestVerifyFindsAndRepairs": true,
	"TestResync": true, "TestMaintenanceCrash": true, "TestOutagesAreWaitedOut": true,
	"TestChunkedCopyUnderLoadWithCrashes": true, "TestSchemaChangesWhileDMLFlows": true,
	"TestForeignKeyCascadesApplied": true, "TestXATransactions": true, "TestMirrorMinIO": true,
}

// daemonBinary is the cdcsync binary t's daemons run (see raceTests).
func daemonBinary(t *testing.T) string {
	t.Helper()
	name, _, _ := strings.Cut(t.Name(), "/")
	if raceTests[name] || os.Getenv("CDCSYNC_RACE") == "all" {
		return binary
	}
	return plainBinary(t)
}

// startLimited runs the cdcsync binary bin under an open-file limit of
// nofile (soft and hard, as `ulimit -n` sets it, so the Go runtime cannot
// raise it).
func (e *env) startLimited(bin string, nofile int, extraEnv ...string) *proc {
	e.t.Helper()
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile), bin, "run", "--config", e.cfgPath)
	return e.startCmd(cmd, extraEnv...)
}

// startWith runs the given cdcsync binary on the env's config.
func (e *env) startWith(bin string, extraEnv ...string) *proc {
	e.t.Helper()
	return e.startCmd(exec.Command(bin, "run", "--config", e.cfgPath), extraEnv...)
}

func (e *env) startCmd(cmd *exec.Cmd, extraEnv ...string) *proc {
	e.t.Helper()
	cmd.Env = append(os.Environ(), extraEnv...)
	p := &proc{cmd: cmd, out: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan error, 1)}
	cmd.Stdout = lockedWriter{p.mu, p.out}
	cmd.Stderr = lockedWriter{p.mu, p.out}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitFor returns a channel that is closed once the output contains s, or
// after timeout.
func (p *proc) waitFor(s string, timeout time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for deadline := time.Now().Add(timeout); time.Now().Before(deadline) && !p.exited(); time.Sleep(5 * time.Millisecond) {
			if strings.Contains(p.output(), s) {
				return
			}
		}
	}()
	return ch
}

// stop sends SIGTERM and returns the exit code. It first waits for the
// start line: a SIGTERM that arrives before main installed its handler
// (a race build takes a moment to get there) would kill the process
// instead of stopping it.
func (p *proc) stop(t *testing.T) int {
	t.Helper()
	<-p.waitFor("cdcsync starting", time.Minute)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		t.Fatalf("cdcsync did not stop within 2 minutes of SIGTERM; output:\n%s", p.output())
	}
	return p.cmd.ProcessState.ExitCode()
}

// expectExit waits for the process to end by itself within a minute and
// checks its exit code and that its output holds every one of wants.
func (p *proc) expectExit(t *testing.T, code int, wants ...string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		p.kill()
		t.Fatalf("cdcsync did not exit by itself; output:\n%s", p.output())
	}
	if got := p.cmd.ProcessState.ExitCode(); got != code {
		t.Errorf("exit code %d, want %d", got, code)
	}
	for _, want := range wants {
		if !strings.Contains(p.output(), want) {
			t.Errorf("output lacks %q:\n%s", want, p.output())
		}
	}
}

// kill sends SIGKILL and waits.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// exited reports whether the process ended by itself.
func (p *proc) exited() bool {
	select {
	case err := <-p.done:
		p.done <- err
		return true
	default:
		return false
	}
}

// openLake opens the test's catalog and warehouse like cdcsync does.
func (e *env) openLake() *lake.Lake {
	e.t.Helper()
	lk, err := lake.Open(context.Background(), lake.OptionsFrom(e.cfg), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { lk.Close() })
	return lk
}

// gtidPos is the server's current GTID position.
func gtidPos(t *testing.T, server *testenv.MariaDB) string {
	t.Helper()
	r, err := server.Query("SELECT @@gtid_binlog_pos")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := r.GetString(0, 0)
	return strings.Clone(s)
}

// waitCaughtUp waits until the pipeline's checkpoint covers the server's
// current GTID position, or fails with the process output.
func (e *env) waitCaughtUp(p *proc, timeout time.Duration) {
	e.t.Helper()
	target := gtidPos(e.t, e.server)
	// Its own catalog connection, closed on return: a test may replace
	// the catalog's files afterwards (TestCatalogRestoredFromBackup).
	lk, err := lake.Open(context.Background(), lake.OptionsFrom(e.cfg), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		e.t.Fatal(err)
	}
	defer lk.Close()
	deadline := time.Now().Add(timeout)
	for {
		ck, ok, err := lk.LoadCheckpoint(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		if ok && coversAll(e.t, ck.Pos, target) && !copying(e.t, lk) {
			return
		}
		if p != nil && p.exited() {
			e.t.Fatalf("cdcsync exited before catching up to %s; output:\n%s", target, p.output())
		}
		if time.Now().After(deadline) {
			out := ""
			if p != nil {
				// A hung daemon prints its goroutines on SIGQUIT.
				_ = p.cmd.Process.Signal(syscall.SIGQUIT)
				select {
				case <-p.done:
				case <-time.After(5 * time.Second):
				}
				out = p.output()
			}
			e.t.Fatalf("cdcsync did not catch up to %s within %s (checkpoint %+v); output:\n%s", target, timeout, ck, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// inBackground calls step again and again in a goroutine until the
// returned stop is called or step fails; stop waits for the goroutine and
// returns step's error. Workloads run this way while cdcsync is killed and
// restarted. A test that fails before it calls stop still stops the
// goroutine before the cleanups registered earlier (the workload's
// connection) run.
func inBackground(t *testing.T, step func() error) (stop func() error) {
	quit := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-quit:
				done <- nil
				return
			default:
			}
			if err := step(); err != nil {
				done <- err
				return
			}
		}
	}()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			close(quit)
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// ancestry returns the snapshots of tbl's current branch, oldest first.
func ancestry(tbl *table.Table) []*table.Snapshot {
	meta := tbl.Metadata()
	var chain []*table.Snapshot
	for s := meta.CurrentSnapshot(); s != nil; {
		chain = append(chain, s)
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	slices.Reverse(chain)
	return chain
}

// copying reports whether the initial copy of some table of lk's pipeline
// is still running (a table stopped during its copy does not count).
func copying(t *testing.T, lk *lake.Lake) bool {
	t.Helper()
	tables, err := lk.PipelineTables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, pt := range tables {
		if pt.Committed.Copy != nil && !pt.Stopped {
			return true
		}
	}
	return false
}

func coversAll(t *testing.T, pos cdcsync.Position, target string) bool {
	for _, g := range strings.Split(target, ",") {
		if g == "" {
			continue
		}
		ok, err := (binlogpos.Order{}).Covers(pos, &cdcsync.Txn{GTID: g})
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return false
		}
	}
	return true
}

// mysqlRowsOn reads a table from server as canonical rows, sorted by key.
func mysqlRowsOn(t *testing.T, server *testenv.MariaDB, ts *cdcsync.TableSchema) []cdcsync.Row {
	t.Helper()
	src := config.Source{Host: "127.0.0.1", Port: server.Port, User: testenv.RootUser,
		ConnectTimeout: config.Duration{Duration: 10 * time.Second}, TLS: config.TLS{Mode: config.TLSDisabled}}
	snap, err := capture.BeginSnapshot(context.Background(), &src, binlogpos.FlavorMariaDB, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	var rows []cdcsync.Row
	if err := snap.Copy(context.Background(), ts, func(r cdcsync.Row) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	cdcsync.SortRows(ts, rows)
	return rows
}

// assertMirrors checks that the Iceberg table equals the MySQL table row for
// row: no missing, no duplicate and no stale row.
func (e *env) assertMirrors(table string) {
	e.t.Helper()
	ctx := context.Background()
	lk := e.openLake()
	ts := e.mysqlSchema(table)
	want := mysqlRowsOn(e.t, e.server, ts)
	tbl, err := lk.LoadTable(ctx, lk.Identifier(e.dbName, table))
	if err != nil {
		e.t.Fatal(err)
	}
	got, err := lake.ReadRows(lk.Scope(ctx), tbl, ts, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	cdcsync.SortRows(ts, got)
	if len(got) != len(want) {
		e.t.Errorf("%s.%s: Iceberg has %d rows, MySQL %d", e.dbName, table, len(got), len(want))
	}
	diffRows(e.t, ts, want, got)
}

func diffRows(t *testing.T, ts *cdcsync.TableSchema, want, got []cdcsync.Row) {
	t.Helper()
	i, j, shown := 0, 0, 0
	for (i < len(want) || j < len(got)) && shown < 10 {
		switch {
		case j >= len(got) || (i < len(want) && cdcsync.CompareKeys(ts, want[i], got[j]) < 0):
			t.Errorf("%s: missing row %s", ts.ID, fmtRow(ts, want[i]))
			i++
			shown++
		case i >= len(want) || cdcsync.CompareKeys(ts, want[i], got[j]) > 0:
			t.Errorf("%s: extra or duplicate row %s", ts.ID, fmtRow(ts, got[j]))
			j++
			shown++
		default:
			if !reflect.DeepEqual(want[i], got[j]) {
				t.Errorf("%s: stale row\n  MySQL:   %s\n  Iceberg: %s", ts.ID, fmtRow(ts, want[i]), fmtRow(ts, got[j]))
				shown++
			}
			i++
			j++
		}
	}
}

func fmtRow(ts *cdcsync.TableSchema, r cdcsync.Row) string {
	parts := make([]string, len(r))
	for i, v := range r {
		parts[i] = ts.Columns[i].Name + "=" + cdcsync.Format(ts.Columns[i].Kind, v)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// runCLI runs a cdcsync subcommand to completion.
func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	return runCLIEnv(t, nil, args...)
}

// runCLIEnv runs a cdcsync subcommand to completion with env added to the
// environment ("NAME=" unsets NAME).
func runCLIEnv(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = os.Environ()
	for _, kv := range env {
		if name, v, _ := strings.Cut(kv, "="); v == "" {
			cmd.Env = slices.DeleteFunc(cmd.Env, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		} else {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}

// assertEpochSnapshots checks what an analyst finds in a table's snapshots:
// the newest epoch commit of the pipeline (maintenance commits may stand on
// top of it) names the pipeline, its epoch and a MariaDB GTID position, and
// epoch commits wrote position deletes (merge-on-read upserts).
func assertEpochSnapshots(t *testing.T, tbl *table.Table, pipeline string) {
	t.Helper()
	meta := tbl.Metadata()
	var epochSnap *table.Snapshot
	deletes := false
	for s := meta.CurrentSnapshot(); s != nil; {
		props := s.Summary.Properties
		if props[lake.SummaryPipeline] == pipeline {
			if epochSnap == nil {
				epochSnap = s
			}
			if n := props["added-equality-delete-files"]; n != "" && n != "0" {
				t.Errorf("epoch commit %d of %s added equality delete files; a position-mode table (the default) writes position deletes only", s.SnapshotID, strings.Join(tbl.Identifier(), "."))
			}
			if n := props["added-position-delete-files"]; n != "" && n != "0" {
				deletes = true
			}
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	if epochSnap == nil {
		t.Fatalf("no snapshot of %s carries pipeline %q", strings.Join(tbl.Identifier(), "."), pipeline)
	}
	props := epochSnap.Summary.Properties
	if props[lake.SummaryEpoch] == "" {
		t.Errorf("epoch snapshot summary %v lacks the epoch", props)
	}
	enc, err := cdcsync.DecodePosition(props[lake.SummaryPosition])
	pos, _ := binlogpos.Decode(enc)
	if err != nil || pos.Flavor != binlogpos.FlavorMariaDB || !strings.HasPrefix(pos.GTIDSet, "0-1-") {
		t.Errorf("snapshot position %q (%v): want a MariaDB GTID position", props[lake.SummaryPosition], err)
	}
	if !deletes {
		t.Errorf("no epoch commit of %s added position delete files; cdcsync must write position deletes (merge-on-read)", strings.Join(tbl.Identifier(), "."))
	}
}

// scanSum reads one int64 column of tbl with iceberg-go, deletes applied,
// at a snapshot (0: the current one), and returns the rows and the
// column's sum.
func scanSum(t *testing.T, ctx context.Context, tbl *table.Table, snapshot int64, column string) (rows, sum int64) {
	t.Helper()
	opts := []table.ScanOption{table.WithSelectedFields(column)}
	if snapshot != 0 {
		opts = append(opts, table.WithSnapshotID(snapshot))
	}
	scan := tbl.Scan(opts...)
	defer scan.Close()
	_, recs, err := scan.ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		col := rec.Column(0).(*array.Int64)
		for i := range col.Len() {
			sum += col.Value(i)
		}
		rows += rec.NumRows()
		rec.Release()
	}
	return rows, sum
}
