package integration

// Engine tests: independent query engines (Spark with the Iceberg runtime,
// DuckDB with its iceberg extension) read the tables cdcsync wrote, after
// upserts and deletes through position deletes and on partitioned tables,
// and what they return must equal MySQL row for row.
//
// scripts/engines.sh installs the engines into .tools/ (venv, jars) and
// writes .tools/engines.json, which this test reads. A missing or broken
// engine is a test failure. Only CDCSYNC_SKIP_ENGINES=1, for local
// iteration, skips the test; CI never sets it.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture"
	"github.com/cdcsync/cdcsync/integration/testenv"
	"github.com/cdcsync/cdcsync/lake"
)

// engineManifest is .tools/engines.json, written by scripts/engines.sh.
type engineManifest struct {
	Python string `json:"python"`
	Spark  struct {
		PySpark  string   `json:"pyspark"`
		Iceberg  string   `json:"iceberg"`
		JavaHome string   `json:"java_home"`
		Jars     []string `json:"jars"`
	} `json:"spark"`
	DuckDB struct {
		DuckDB           string `json:"duckdb"`
		IcebergExtension string `json:"iceberg_extension"`
	} `json:"duckdb"`
	Trino *struct {
		Version  string `json:"version"`
		Home     string `json:"home"`
		CLI      string `json:"cli"`
		JavaHome string `json:"java_home"`
	} `json:"trino"`
}

// engineRequest is what the reader scripts in integration/engines read; see
// integration/engines/rowjson.py.
type engineRequest struct {
	Catalogs []engineCatalog `json:"catalogs"`
	Tables   []engineTable   `json:"tables"`
	Jars     []string        `json:"jars,omitempty"`
}

type engineCatalog struct {
	Name      string          `json:"name"`
	SQLite    string          `json:"sqlite,omitempty"`
	Postgres  *enginePostgres `json:"postgres,omitempty"`
	Warehouse string          `json:"warehouse"`
	S3        *engineS3       `json:"s3"`
}

type enginePostgres struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Database string `json:"database"`
	User     string `json:"user"`
	Password string `json:"password"`
}

type engineS3 struct {
	Endpoint        string `json:"endpoint"`
	Region          string `json:"region"`
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	PathStyle       bool   `json:"path_style"`
}

type engineTable struct {
	Catalog   string   `json:"catalog"`
	Namespace string   `json:"namespace"`
	Table     string   `json:"table"`
	Columns   []string `json:"columns"`
	// MetadataLocation is the current metadata file as cdcsync's catalog
	// records it; DuckDB uses it for catalogs it cannot query itself
	// (PostgreSQL) and looks it up in SQLite catalogs.
	MetadataLocation string `json:"metadata_location"`
	// Filters are WHERE clauses in the engine's dialect (engines_filter_test.go).
	Filters []string `json:"filters,omitempty"`

	schema  *cdcsync.TableSchema
	want    []cdcsync.Row
	filters []engineFilter
	mode    string // deletes mode (lake.DeletesMode)
}

type engineAnswer struct {
	Engine string              `json:"engine"`
	Tables []engineAnswerTable `json:"tables"`
}

type engineAnswerTable struct {
	Catalog   string   `json:"catalog"`
	Namespace string   `json:"namespace"`
	Table     string   `json:"table"`
	Types     []string `json:"types"`
	Rows      [][]any  `json:"rows"`
	Filtered  [][]any  `json:"filtered"` // [filter index, values...]
	Error     string   `json:"error"`
	Seconds   float64  `json:"seconds"`
}

// engineRun is one cdcsync pipeline whose tables the engines read.
type engineRun struct {
	e       *env
	catalog engineCatalog
	// spill ends the workload with a transaction many times
	// epoch.max_bytes, which the daemon writes out before its commit.
	spill bool
}

func skipEngines(t *testing.T) {
	t.Helper()
	if os.Getenv("CDCSYNC_SKIP_ENGINES") == "1" {
		msg := "\n" + strings.Repeat("!", 72) + "\n" +
			"!!! CDCSYNC_SKIP_ENGINES=1: the engine tests (Spark, DuckDB, pyiceberg, Trino) DID NOT RUN.\n" +
			"!!! Nothing checked that other engines can read what cdcsync writes.\n" +
			"!!! Unset it (CI never sets it) and run scripts/engines.sh first.\n" +
			strings.Repeat("!", 72)
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
	}
}

func loadEngineManifest(t *testing.T) *engineManifest {
	t.Helper()
	path := os.Getenv("CDCSYNC_ENGINES_MANIFEST")
	if path == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(root, ".tools", "engines.json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the query engines are not installed (%v): run scripts/engines.sh, which installs "+
			"pyspark, duckdb and the Iceberg jars into .tools/ (scripts/test.sh runs it)", err)
	}
	var m engineManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v; run scripts/engines.sh again", path, err)
	}
	for _, f := range append([]string{m.Python}, m.Spark.Jars...) {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s lists %s: %v; run scripts/engines.sh again", path, f, err)
		}
	}
	return &m
}

// newEngineRun prepares a pipeline whose tables the engines will read: its
// database, configuration (catalog named catalogName) and warehouse. It runs
// in the test's own goroutine (newEnv sets environment variables, which
// parallel tests may not); mirror then runs the pipeline.
func newEngineRun(t *testing.T, dbName string, o envOptions, catalogName string) *engineRun {
	t.Helper()
	o.tables = fmt.Sprintf(workloadTables, dbName)
	for name, mode := range o.tableDeletes {
		o.tables = strings.Replace(o.tables, "match: "+dbName+"."+name+"\n", "match: "+dbName+"."+name+"\n    deletes: "+mode+"\n", 1)
	}
	for name, lines := range o.tableRules {
		o.tables = strings.Replace(o.tables, "match: "+dbName+"."+name+"\n", "match: "+dbName+"."+name+"\n"+lines, 1)
	}
	// Compact often, so the engines also read data files that maintenance
	// rewrote (replace snapshots) under the newer epochs' deletes.
	if o.compaction == "" {
		o.compaction = "    delete_files: 2\n"
	}
	o.extra = "maintenance:\n  every_epochs: 2\n  compaction:\n" + strings.TrimSuffix(o.compaction, "\n")
	e := newEnv(t, dbName, o)
	if catalogName != "cdcsync" {
		e.rewriteConfig("  name: cdcsync\n", "  name: "+catalogName+"\n")
	}
	c := engineCatalog{Name: e.cfg.Catalog.Name}
	if o.pgDSN != "" {
		u, err := url.Parse(o.pgDSN)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(u.Port())
		pw, _ := u.User.Password()
		c.Postgres = &enginePostgres{Host: u.Hostname(), Port: port, Database: strings.TrimPrefix(u.Path, "/"), User: u.User.Username(), Password: pw}
	} else {
		c.SQLite = e.cfg.Catalog.SQL.DSN.Value()
	}
	wh, err := e.cfg.Warehouse.URL()
	if err != nil {
		t.Fatal(err)
	}
	c.Warehouse = wh
	if o.onMinIO {
		s := e.cfg.Warehouse.S3
		c.S3 = &engineS3{Endpoint: s.Endpoint, Region: s.Region, AccessKeyID: s.AccessKeyID,
			SecretAccessKey: s.SecretAccessKey.Value(), PathStyle: s.PathStyle}
	}
	return &engineRun{e: e, catalog: c, spill: o.epoch == spillEpoch}
}

// spillEpoch is the epoch: section of the engine runs that end with a
// transaction far larger than an epoch (engineRun.spill).
const spillEpoch = "interval: 300ms\n  max_bytes: 256KiB"

// hugeTxn changes every row of items and events in one transaction of
// about a megabyte, which a daemon with spillEpoch reads in fragments and
// writes out in several parts before its commit.
func hugeTxn(t *testing.T, e *env) {
	t.Helper()
	conn, err := e.server.Connect(testenv.RootUser, "", e.dbName)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"BEGIN",
		"UPDATE items SET payload = REPEAT(CHAR(65 + id % 26), 3000), qty = IFNULL(qty, 0) + 1",
		"UPDATE events SET amount = IFNULL(amount, 0) + 1, kind = 'bulk'",
		"UPDATE items SET name = CONCAT('bulk ', id) WHERE id % 3 = 0", // keys changed again after their spill
		"COMMIT"} {
		if _, err := conn.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// mirror mirrors the workload tables: an initial copy, then a streamed
// randomized workload of inserts, updates (partition moves and key changes
// included) and deletes. cdcsync is stopped before it returns, so the engines
// read tables at rest. It may run in a parallel subtest t.
func (r *engineRun) mirror(t *testing.T, seed uint64) {
	e := r.e
	parent := e.t
	e.t = t
	defer func() { e.t = parent }()
	createWorkloadSchema(t, e.dbName)
	w := newWorkload(t, e.dbName, seed)
	w.run(t, 150) // copied by the initial snapshot
	p := e.start()
	e.waitCaughtUp(p, 2*time.Minute)
	for i := 0; i < 4; i++ {
		w.run(t, 120) // streamed: epochs of position deletes and inserts, compactions between them
		e.waitCaughtUp(p, 2*time.Minute)
	}
	if r.spill {
		hugeTxn(t, e)
		w.run(t, 20)
		e.waitCaughtUp(p, 2*time.Minute)
		if !strings.Contains(p.output(), "spilled the open epoch") {
			t.Fatalf("the large transaction was not written out before its commit; output:\n%s", p.output())
		}
	}
	// The engines must meet position deletes that hide superseded rows, or
	// this test proves nothing about deletes. Maintenance may have compacted
	// them all away right after the last epoch: then stream a little more.
	for attempt := 0; ; attempt++ {
		if code := p.stop(t); code != 0 {
			t.Fatalf("cdcsync exited %d after SIGTERM, want 0; output:\n%s", code, p.output())
		}
		why := engineDeletesMissing(t, e)
		if why == "" {
			break
		}
		if attempt == 4 {
			t.Fatalf("%s after %d extra rounds of workload; the engine test needs live deletes", why, attempt)
		}
		t.Logf("%s; streaming more changes", why)
		p = e.start()
		w.run(t, 40)
		e.waitCaughtUp(p, 2*time.Minute)
	}

}

// engineDeletesMissing says why the tables of e are no good for the engine
// test, or "": each must have deletes of its mode (position or equality) in
// its current snapshot, and more rows in its data files than MySQL has (a
// reader that ignored the deletes would return superseded rows).
func engineDeletesMissing(t *testing.T, e *env) string {
	t.Helper()
	lk := e.openLake()
	for _, name := range mirroredTables {
		tbl, err := lk.LoadTable(context.Background(), lk.Identifier(e.dbName, name))
		if err != nil {
			t.Fatal(err)
		}
		props := tbl.CurrentSnapshot().Summary.Properties
		r, err := e.server.Query(fmt.Sprintf("SELECT COUNT(*) FROM %s.%s", e.dbName, name))
		if err != nil {
			t.Fatal(err)
		}
		live, _ := r.GetInt(0, 0)
		kind := "position" // deletion vectors count as position deletes
		if lake.DeletesMode(tbl) == lake.DeletesEquality {
			kind = "equality"
		}
		deletes, _ := strconv.Atoi(props["total-"+kind+"-deletes"])
		records, _ := strconv.ParseInt(props["total-records"], 10, 64)
		if deletes == 0 || records <= live {
			return fmt.Sprintf("%s.%s: %d %s deletes, %d rows in data files, %d in MySQL", e.dbName, name, deletes, kind, records, live)
		}
		var replaces int
		for _, s := range tbl.Metadata().Snapshots() {
			if s.Summary != nil && s.Summary.Operation == "replace" {
				replaces++
			}
		}
		t.Logf("%s.%s: %d snapshots (%d compactions), %d %s deletes, %d rows in data files, %d in MySQL",
			e.dbName, name, len(tbl.Metadata().Snapshots()), replaces, deletes, kind, records, live)
	}
	return ""
}

// TestEngines runs three pipelines: a local warehouse with a SQLite catalog
// named "cdcsync" (the default name), MinIO with a SQLite catalog named
// "lake_s3" and MinIO with a PostgreSQL catalog named "lake_pg" (other names,
// to prove the name rule). Then one Spark session, one DuckDB connection and
// one pyiceberg process read all their tables (and Trino the PostgreSQL
// ones, with CDCSYNC_TRINO=1), and every row is compared with MySQL.
func TestEngines(t *testing.T) {
	skipEngines(t)
	// In parallel with TestOutagesAreWaitedOut, which has a server of its
	// own and mostly waits: the engines' JVMs get the CPU it leaves.
	t.Parallel()
	m := loadEngineManifest(t)
	seed := uint64(time.Now().UnixNano())
	pg, err := testenv.StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	if err := pg.CreateDatabase("enginecat"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// events stages every epoch's rows (stage_above: 1), and compaction
	// moves at most two partitions' worth a run, so the engines read
	// staged rows (data files under the unpartitioned spec) with their
	// position deletes or deletion vectors, next to moved ones.
	staged := map[string]string{"events": "    stage_above: 1\n"}
	const fewMoves = "    delete_files: 2\n    max_files: 2\n"
	runs := []*engineRun{
		newEngineRun(t, "it_eng_local", envOptions{epoch: spillEpoch, tableRules: staged, compaction: fewMoves}, "cdcsync"),
		// Tables in dv mode (format v3, deletion vectors).
		newEngineRun(t, "it_eng_minio", envOptions{onMinIO: true, deletesMode: "dv", epoch: spillEpoch, tableRules: staged, compaction: fewMoves}, "lake_s3"),
		// A table of each mode on the PostgreSQL catalog, the one Trino
		// reads (it has no SQLite driver): items in dv, events in
		// position, pairs in equality (the mode of earlier versions, or
		// chosen), which every engine but pyiceberg reads.
		newEngineRun(t, "it_eng_pg", envOptions{onMinIO: true, pgDSN: pg.DSN("enginecat"), deletesMode: "equality", epoch: spillEpoch,
			tableDeletes: map[string]string{"items": "dv", "events": "position"}, tableRules: staged, compaction: fewMoves}, "lake_pg"),
	}
	t.Run("cdcsync", func(t *testing.T) {
		for i, r := range runs {
			t.Run(r.e.dbName, func(t *testing.T) {
				t.Parallel()
				r.mirror(t, seed+uint64(i))
			})
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("cdcsync pipelines: %s", time.Since(start).Round(time.Millisecond))

	// What MySQL has: the expected rows of every table.
	req := engineRequest{Jars: m.Spark.Jars}
	var tables []*engineTable
	for _, r := range runs {
		req.Catalogs = append(req.Catalogs, r.catalog)
		for _, name := range mirroredTables {
			ts := engineMySQLSchema(t, r.e.server, r.e.dbName, name)
			lk := r.e.openLake()
			id := lk.Identifier(r.e.dbName, name)
			tbl, err := lk.LoadTable(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if name == "events" {
				assertStagedRows(t, tbl)
			}
			et := &engineTable{Catalog: r.catalog.Name, Namespace: id[0], Table: id[1], MetadataLocation: tbl.MetadataLocation(),
				schema: ts, want: mysqlRowsOn(t, r.e.server, ts), mode: lake.DeletesMode(tbl)}
			et.filters = buildFilters(name, ts, et.want)
			for _, c := range ts.Columns {
				et.Columns = append(et.Columns, c.Name)
			}
			tables = append(tables, et)
			req.Tables = append(req.Tables, *et)
		}
	}
	// The built-in reader (iceberg-go) must agree too: if it does not, the
	// table itself is wrong and no engine can be blamed.
	for _, r := range runs {
		for _, name := range mirroredTables {
			r.e.assertMirrors(name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	t.Run("spark", func(t *testing.T) {
		env := []string{
			"JAVA_HOME=" + m.Spark.JavaHome,
			"PATH=" + filepath.Join(m.Spark.JavaHome, "bin") + string(os.PathListSeparator) + os.Getenv("PATH"),
			"PYSPARK_PYTHON=" + m.Python,
			"PYSPARK_DRIVER_PYTHON=" + m.Python,
		}
		ans := runEngineScript(t, m, "spark_read.py", req.forDialect(sparkDialect, tables), env)
		compareEngineAnswer(t, sparkDialect, ans, tables)
	})
	t.Run("duckdb", func(t *testing.T) {
		ans := runEngineScript(t, m, "duckdb_read.py", req.forDialect(duckdbDialect, tables), nil)
		compareEngineAnswer(t, duckdbDialect, ans, tables)
	})
	t.Run("pyiceberg", func(t *testing.T) {
		checkPyiceberg(t, m, req, runs)
		// pyiceberg reads the rows of position-mode tables (SQLite
		// catalogs: Python has no PostgreSQL client here).
		sqlite := map[string]bool{}
		for _, c := range req.Catalogs {
			sqlite[c.Name] = c.SQLite != ""
		}
		var mine []*engineTable
		for _, et := range tables {
			if sqlite[et.Catalog] {
				mine = append(mine, et)
			}
		}
		ans := runEngineScript(t, m, "pyiceberg_read.py", req.forDialect(duckdbDialect, mine), nil)
		compareEngineAnswer(t, duckdbDialect, ans, mine)
	})
	t.Run("trino", func(t *testing.T) { runTrino(t, m, req, tables) })
	holdEngineTables(t, req)
}

// holdEngineTables keeps the tables (and MinIO) alive for a person who wants
// to point another engine at them: with CDCSYNC_ENGINES_HOLD=1 it writes the
// request (catalogs, warehouses, credentials) and waits until that file is
// deleted, 30 minutes at most. For local iteration only.
func holdEngineTables(t *testing.T, req engineRequest) {
	if os.Getenv("CDCSYNC_ENGINES_HOLD") != "1" {
		return
	}
	f, err := os.CreateTemp("", "cdcsync-engines-hold-*.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(req, "", "  ")
	_, _ = f.Write(b)
	f.Close()
	fmt.Fprintf(os.Stderr, "CDCSYNC_ENGINES_HOLD: tables described in %s; delete it to end the test\n", f.Name())
	for deadline := time.Now().Add(30 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if _, err := os.Stat(f.Name()); err != nil {
			return
		}
	}
}

func engineMySQLSchema(t *testing.T, server *testenv.MariaDB, dbName, table string) *cdcsync.TableSchema {
	t.Helper()
	conn, err := server.Connect(testenv.RootUser, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ts, err := capture.LoadSchema(context.Background(), conn, cdcsync.TableID{Database: dbName, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// runEngineScript runs one reader script once for every table of req and
// returns its answer. Failing to start or to answer is fatal.
func runEngineScript(t *testing.T, m *engineManifest, script string, req engineRequest, extraEnv []string) *engineAnswer {
	t.Helper()
	var ans engineAnswer
	took, output := runPythonScript(t, m, script, req, extraEnv, &ans)
	var rows int
	for _, a := range ans.Tables {
		rows += len(a.Rows)
	}
	t.Logf("%s read %d tables (%d rows) in %s, engine start included", ans.Engine, len(ans.Tables), rows, took)
	if len(ans.Tables) != len(req.Tables) {
		t.Fatalf("%s answered for %d tables, asked %d; output:\n%s", script, len(ans.Tables), len(req.Tables), engineTailLines(output, 80))
	}
	return &ans
}

// runPythonScript runs one script of integration/engines with the venv's
// Python on req and decodes its answer into ans (numbers as json.Number).
func runPythonScript(t *testing.T, m *engineManifest, script string, req any, extraEnv []string, ans any) (time.Duration, string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	reqPath, ansPath := filepath.Join(dir, "request.json"), filepath.Join(dir, "answer.json")
	b, err := json.MarshalIndent(req, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(reqPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.Python, filepath.Join(root, "integration", "engines", script), reqPath, ansPath)
	cmd.Dir = dir // Spark may leave spark-warehouse/ or derby.log in its working directory
	cmd.Env = append(os.Environ(), "TZ=UTC", "PYTHONDONTWRITEBYTECODE=1")
	cmd.Env = append(cmd.Env, extraEnv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		t.Fatalf("%s failed after %s (%v); output:\n%s", script, took, err, engineTailLines(out.String(), 80))
	}
	b, err = os.ReadFile(ansPath)
	if err != nil {
		t.Fatalf("%s wrote no answer (%v); output:\n%s", script, err, engineTailLines(out.String(), 80))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(ans); err != nil {
		t.Fatalf("%s: answer %s: %v", script, ansPath, err)
	}
	if testing.Verbose() {
		t.Logf("%s output:\n%s", script, engineTailLines(out.String(), 30))
	}
	return took, out.String()
}

func engineTailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// compareEngineAnswer checks the engine's column types and rows against MySQL.
func compareEngineAnswer(t *testing.T, d *engineDialect, ans *engineAnswer, tables []*engineTable) {
	t.Helper()
	engine, typeOf := d.name, d.typeOf
	for i, et := range tables {
		a := ans.Tables[i]
		name := et.Catalog + "." + et.Namespace + "." + et.Table
		if a.Catalog != et.Catalog || a.Namespace != et.Namespace || a.Table != et.Table {
			t.Fatalf("%s answered for %s.%s.%s in place of %s", engine, a.Catalog, a.Namespace, a.Table, name)
		}
		if a.Error != "" {
			t.Errorf("%s cannot read %s:\n%s", engine, name, a.Error)
			continue
		}
		ts := et.schema
		if len(a.Types) != len(ts.Columns) {
			t.Errorf("%s: %s has %d columns (%v), MySQL %d", engine, name, len(a.Types), a.Types, len(ts.Columns))
			continue
		}
		for j := range ts.Columns {
			c := &ts.Columns[j]
			if want := typeOf(c); !strings.EqualFold(a.Types[j], want) {
				t.Errorf("%s: column %s.%s (MySQL %s, cdcsync kind %s) has type %s, want %s",
					engine, name, c.Name, c.ColumnType, c.Kind, a.Types[j], want)
			}
		}
		got := make([]cdcsync.Row, 0, len(a.Rows))
		bad := 0
		for _, raw := range a.Rows {
			row, err := canonicalEngineRow(ts, raw)
			if err != nil {
				if bad++; bad <= 5 {
					t.Errorf("%s: %s: %v in row %v", engine, name, err, raw)
				}
				continue
			}
			got = append(got, row)
		}
		if bad > 0 {
			continue
		}
		cdcsync.SortRows(ts, got)
		if len(got) != len(et.want) {
			t.Errorf("%s: %s has %d rows, MySQL %d", engine, name, len(got), len(et.want))
		}
		diffRows(t, ts, et.want, got)
		compareFiltered(t, engine, name, et, a.Filtered)
		t.Logf("%s: %s: %d rows, %d filters in %.2fs", engine, name, len(got), len(et.filters), a.Seconds)
	}
}

// compareFiltered checks the rows each filter returned against the MySQL
// rows it matches.
func compareFiltered(t *testing.T, engine, name string, et *engineTable, filtered [][]any) {
	t.Helper()
	ts := et.schema
	got := make([][]cdcsync.Row, len(et.filters))
	for _, raw := range filtered {
		if len(raw) == 0 {
			t.Errorf("%s: %s: empty filtered row", engine, name)
			return
		}
		n, ok := raw[0].(json.Number)
		i, err := strconv.Atoi(n.String())
		if !ok || err != nil || i < 0 || i >= len(et.filters) {
			t.Errorf("%s: %s: filtered row with filter index %v", engine, name, raw[0])
			return
		}
		row, err := canonicalEngineRow(ts, raw[1:])
		if err != nil {
			t.Errorf("%s: %s WHERE %s: %v in row %v", engine, name, et.filters[i].String(ts), err, raw[1:])
			return
		}
		got[i] = append(got[i], row)
	}
	for i, f := range et.filters {
		var want []cdcsync.Row
		for _, r := range et.want {
			if f.matches(&ts.Columns[f.col], r) {
				want = append(want, r)
			}
		}
		cdcsync.SortRows(ts, got[i])
		if len(got[i]) != len(want) || !reflect.DeepEqual(got[i], want) {
			t.Errorf("%s: %s WHERE %s returned %d rows, MySQL has %d matching rows (a file skipped by a wrong partition value or column bound?)",
				engine, name, f.String(ts), len(got[i]), len(want))
			diffRows(t, ts, want, got[i])
		}
	}
}

// sparkType is the Spark SQL type (DataType.simpleString) of a column that
// cdcsync mapped to kind c.Kind.
func sparkType(c *cdcsync.Column) string {
	switch c.Kind {
	case cdcsync.KindInt32:
		return "int"
	case cdcsync.KindInt64:
		return "bigint"
	case cdcsync.KindDecimal:
		return fmt.Sprintf("decimal(%d,%d)", c.Precision, c.Scale)
	case cdcsync.KindFloat32:
		return "float"
	case cdcsync.KindFloat64:
		return "double"
	case cdcsync.KindString:
		return "string"
	case cdcsync.KindBinary:
		return "binary"
	case cdcsync.KindDate:
		return "date"
	case cdcsync.KindTimestamp:
		return "timestamp_ntz"
	case cdcsync.KindTimestampTZ:
		return "timestamp"
	}
	return "?" + c.Kind.String()
}

// duckdbType is the DuckDB type of a column that cdcsync mapped to kind c.Kind.
func duckdbType(c *cdcsync.Column) string {
	switch c.Kind {
	case cdcsync.KindInt32:
		return "INTEGER"
	case cdcsync.KindInt64:
		return "BIGINT"
	case cdcsync.KindDecimal:
		return fmt.Sprintf("DECIMAL(%d,%d)", c.Precision, c.Scale)
	case cdcsync.KindFloat32:
		return "FLOAT"
	case cdcsync.KindFloat64:
		return "DOUBLE"
	case cdcsync.KindString:
		return "VARCHAR"
	case cdcsync.KindBinary:
		return "BLOB"
	case cdcsync.KindDate:
		return "DATE"
	case cdcsync.KindTimestamp:
		return "TIMESTAMP"
	case cdcsync.KindTimestampTZ:
		return "TIMESTAMP WITH TIME ZONE"
	}
	return "?" + c.Kind.String()
}

// canonicalEngineRow converts one row of a reader script's answer (encoded
// as rowjson.py describes) into cdcsync's canonical values.
func canonicalEngineRow(ts *cdcsync.TableSchema, raw []any) (cdcsync.Row, error) {
	if len(raw) != len(ts.Columns) {
		return nil, fmt.Errorf("%d values for %d columns", len(raw), len(ts.Columns))
	}
	row := make(cdcsync.Row, len(raw))
	for i, v := range raw {
		c := &ts.Columns[i]
		if v == nil {
			continue
		}
		cv, err := canonicalEngineValue(c, v)
		if err != nil {
			return nil, fmt.Errorf("column %s (%s): %w", c.Name, c.Kind, err)
		}
		row[i] = cv
	}
	return row, nil
}

func canonicalEngineValue(c *cdcsync.Column, v any) (any, error) {
	if m, ok := v.(map[string]any); ok {
		return nil, fmt.Errorf("the engine returned a value the reader cannot encode: %v", m["unsupported"])
	}
	num, isNum := v.(json.Number)
	str, isStr := v.(string)
	switch c.Kind {
	case cdcsync.KindInt32, cdcsync.KindInt64, cdcsync.KindTimestamp, cdcsync.KindTimestampTZ:
		if !isNum {
			return nil, fmt.Errorf("want an integer, got %T %v", v, v)
		}
		bits := 64
		if c.Kind == cdcsync.KindInt32 {
			bits = 32
		}
		n, err := strconv.ParseInt(num.String(), 10, bits)
		if err != nil {
			return nil, err
		}
		if c.Kind == cdcsync.KindInt32 {
			return int32(n), nil
		}
		return n, nil
	}
	if !isStr {
		return nil, fmt.Errorf("want a string, got %T %v", v, v)
	}
	switch c.Kind {
	case cdcsync.KindString:
		return str, nil
	case cdcsync.KindDecimal:
		return canonicalDecimal(str, c.Scale)
	case cdcsync.KindFloat64:
		return strconv.ParseFloat(str, 64)
	case cdcsync.KindFloat32:
		f, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, err
		}
		if f32 := float32(f); float64(f32) != f && !math.IsNaN(f) {
			return nil, fmt.Errorf("%s is not a float32 value", str)
		}
		return float32(f), nil
	case cdcsync.KindBinary:
		return base64.StdEncoding.DecodeString(str)
	case cdcsync.KindDate:
		d, err := time.Parse("2006-01-02", str)
		if err != nil {
			return nil, err
		}
		return int32(d.Unix() / 86400), nil
	}
	return nil, fmt.Errorf("no conversion for kind %s", c.Kind)
}

// canonicalDecimal rewrites a plain-notation decimal with exactly scale
// fraction digits; digits beyond the scale must be zeros.
func canonicalDecimal(s string, scale int) (string, error) {
	sign := ""
	body := s
	if strings.HasPrefix(body, "-") {
		sign, body = "-", body[1:]
	}
	intPart, frac, _ := strings.Cut(body, ".")
	if intPart == "" || strings.Trim(intPart+frac, "0123456789") != "" {
		return "", fmt.Errorf("%q is not a plain decimal", s)
	}
	if len(frac) > scale {
		if strings.Trim(frac[scale:], "0") != "" {
			return "", fmt.Errorf("%q has more than %d fraction digits", s, scale)
		}
		frac = frac[:scale]
	}
	frac += strings.Repeat("0", scale-len(frac))
	if scale == 0 {
		return sign + intPart, nil
	}
	return sign + intPart + "." + frac, nil
}

// assertStagedRows fails unless the current snapshot of tbl, a partitioned
// table, has live data files under an unpartitioned spec (staged rows) and
// under its partition spec, so that the engines read both.
func assertStagedRows(t *testing.T, tbl *table.Table) {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	specs := map[int]bool{}
	for _, s := range tbl.Metadata().PartitionSpecs() {
		specs[s.ID()] = s.IsUnpartitioned()
	}
	var staged, placed int
	for _, tk := range tasks {
		if specs[int(tk.File.SpecID())] {
			staged++
		} else {
			placed++
		}
	}
	if staged == 0 || placed == 0 {
		t.Errorf("%s has %d staged and %d partitioned data files; the engines should read both", strings.Join(tbl.Identifier(), "."), staged, placed)
	}
}
