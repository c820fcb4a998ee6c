package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture"
	"github.com/cdcsync/cdcsync/integration/testenv"
	"github.com/cdcsync/cdcsync/lake"
)

// The schema-change tests run DDL on a table while DML flows, with cdcsync
// running, restarted between a DDL statement and later events, and lagging
// behind the DDL (stopped while it happens), and check afterwards that the
// Iceberg table equals MySQL row for row and column for column, and that
// snapshots from before the changes still read as MySQL was then.

// ddlTable is the table the schema-change tests alter.
const ddlTable = `CREATE TABLE %s.t (
	id INT NOT NULL PRIMARY KEY,
	v VARCHAR(20),
	n INT NOT NULL,
	d DECIMAL(10,2),
	f FLOAT
)`

// ddlSteps is a sequence of schema changes Iceberg can express, each
// followed by DML that uses the new schema.
var ddlSteps = []string{
	"ALTER TABLE t ADD COLUMN w INT NOT NULL DEFAULT 5 AFTER id",
	"ALTER TABLE t ADD COLUMN c VARCHAR(10) FIRST, ADD COLUMN e DATETIME(3) DEFAULT '2024-05-06 07:08:09.123'",
	"ALTER TABLE t RENAME COLUMN v TO label",
	"ALTER TABLE t MODIFY n BIGINT NOT NULL",
	"ALTER TABLE t MODIFY f DOUBLE",
	"ALTER TABLE t MODIFY d DECIMAL(14,2)",
	"ALTER TABLE t MODIFY label VARCHAR(40)",
	"ALTER TABLE t DROP COLUMN c",
	"ALTER TABLE t CHANGE w weight INT NOT NULL DEFAULT 5",
	"ALTER TABLE t ADD INDEX i_n (n), ALGORITHM=INPLACE",
}

// ddlDML issues random inserts, updates and deletes on db.t that touch only
// the columns every step keeps (id, n) plus, when given, one more.
type ddlDML struct {
	t    *testing.T
	db   string
	r    *rand.Rand
	mu   sync.Mutex
	next int
}

func newDDLDML(t *testing.T, dbName string) *ddlDML {
	seed := uint64(time.Now().UnixNano())
	t.Logf("DML seed %d", seed)
	return &ddlDML{t: t, db: dbName, r: rand.New(rand.NewPCG(seed, 7)), next: 1000}
}

func (w *ddlDML) step() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.r
	var q string
	switch r.IntN(4) {
	case 0, 1:
		w.next++
		q = fmt.Sprintf("INSERT INTO %s.t (id, n) VALUES (%d, %d)", w.db, w.next, r.IntN(1000))
	case 2:
		q = fmt.Sprintf("UPDATE %s.t SET n = n + 1 WHERE id %% 7 = %d", w.db, r.IntN(7))
	default:
		q = fmt.Sprintf("DELETE FROM %s.t WHERE id = %d", w.db, 1+r.IntN(w.next))
	}
	return db.Exec(q)
}

// flow runs DML in the background; the returned function stops it and
// returns its first error.
func (w *ddlDML) flow() func() error {
	return inBackground(w.t, func() error {
		if err := w.step(); err != nil {
			return err
		}
		time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond) // the package-level source is safe across goroutines
		return nil
	})
}

func (e *env) createDDLTable(rows int) {
	e.t.Helper()
	e.exec(fmt.Sprintf(ddlTable, e.dbName))
	for i := 1; i <= rows; i++ {
		e.exec(fmt.Sprintf("INSERT INTO %s.t VALUES (%d, 'v%d', %d, %d.25, %d.5)", e.dbName, i, i, i, i, i))
	}
}

// mysqlSchema loads a table's current schema from MySQL.
func (e *env) mysqlSchema(table string) *cdcsync.TableSchema {
	e.t.Helper()
	conn, err := e.server.Connect(testenv.RootUser, "", "")
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	ts, err := capture.LoadSchema(context.Background(), conn, cdcsync.TableID{Database: e.dbName, Table: table})
	if err != nil {
		e.t.Fatal(err)
	}
	return ts
}

// icebergSchema loads the current Iceberg schema of a mirrored table.
func (e *env) icebergSchema(table string) *iceberg.Schema {
	e.t.Helper()
	lk := e.openLake()
	tbl, err := lk.LoadTable(context.Background(), lk.Identifier(e.dbName, table))
	if err != nil {
		e.t.Fatal(err)
	}
	return tbl.Schema()
}

// assertColumns checks that the Iceberg columns are MySQL's, in order.
func (e *env) assertColumns(table string) {
	e.t.Helper()
	ts := e.mysqlSchema(table)
	sc := e.icebergSchema(table)
	var want, got []string
	for _, c := range ts.Columns {
		want = append(want, c.Name)
	}
	for _, f := range sc.Fields() {
		got = append(got, f.Name)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		e.t.Errorf("%s: Iceberg columns %v, MySQL %v", table, got, want)
	}
	var keys []string
	for _, id := range sc.IdentifierFieldIDs {
		n, _ := sc.FindColumnName(id)
		keys = append(keys, n)
	}
	var pk []string
	for _, k := range ts.PrimaryKey {
		pk = append(pk, ts.Columns[k].Name)
	}
	// Identifier fields are a set (iceberg-go keeps them in field id order).
	slices.Sort(keys)
	slices.Sort(pk)
	if strings.Join(keys, ",") != strings.Join(pk, ",") {
		e.t.Errorf("%s: Iceberg identifier fields %v, MySQL primary key %v", table, keys, pk)
	}
}

// oldState is a table as it was at one moment: its MySQL schema and rows,
// and the Iceberg snapshot that held them.
type oldState struct {
	schema   *cdcsync.TableSchema
	rows     []cdcsync.Row
	snapshot int64
}

// captureState records the table while nothing changes it (the caller has
// waited for cdcsync to catch up).
func (e *env) captureState(table string) oldState {
	e.t.Helper()
	ts := e.mysqlSchema(table)
	lk := e.openLake()
	tbl, err := lk.LoadTable(context.Background(), lk.Identifier(e.dbName, table))
	if err != nil {
		e.t.Fatal(err)
	}
	return oldState{schema: ts, rows: mysqlRowsOn(e.t, e.server, ts), snapshot: tbl.CurrentSnapshot().SnapshotID}
}

// assertOldSnapshot checks that an old snapshot still reads as MySQL was.
func (e *env) assertOldSnapshot(table string, s oldState) {
	e.t.Helper()
	lk := e.openLake()
	ctx := context.Background()
	tbl, err := lk.LoadTable(ctx, lk.Identifier(e.dbName, table))
	if err != nil {
		e.t.Fatal(err)
	}
	got, err := lake.ReadRowsAt(lk.Scope(ctx), tbl, s.schema, s.snapshot)
	if err != nil {
		e.t.Fatalf("read snapshot %d: %v", s.snapshot, err)
	}
	cdcsync.SortRows(s.schema, got)
	if len(got) != len(s.rows) {
		e.t.Errorf("old snapshot %d has %d rows, MySQL had %d", s.snapshot, len(got), len(s.rows))
	}
	diffRows(e.t, s.schema, s.rows, got)
}

func (e *env) runDDL(steps []string, w *ddlDML) {
	e.t.Helper()
	for _, q := range steps {
		e.exec(strings.Replace(q, "TABLE t ", "TABLE "+e.dbName+".t ", 1))
		for i := 0; i < 5; i++ {
			if err := w.step(); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

// TestSchemaChangesWhileDMLFlows applies every kind of column change
// Iceberg can express while other sessions keep writing.
func TestSchemaChangesWhileDMLFlows(t *testing.T) {
	e := newEnv(t, "it_ddl_flow", envOptions{})
	e.createDDLTable(50)
	mustExec(t, "CREATE TABLE it_ddl_flow.other (id INT PRIMARY KEY, v INT)")
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	before := e.captureState("t")
	origV, _ := e.icebergSchema("t").FindFieldByName("v")

	w := newDDLDML(t, e.dbName)
	done := w.flow()
	e.runDDL(ddlSteps, w)
	mustExec(t, "INSERT INTO it_ddl_flow.other VALUES (1, 1)")
	if err := done(); err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp(p, 2*time.Minute)
	e.assertMirrors("t")
	e.assertMirrors("other")
	e.assertColumns("t")
	if f, ok := e.icebergSchema("t").FindFieldByName("label"); !ok || f.ID != origV.ID {
		t.Errorf("the renamed column label has field id %d, want %d (v's): a rename must keep the field id", f.ID, origV.ID)
	}
	e.assertOldSnapshot("t", before)
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if n := strings.Count(p.output(), "evolved the Iceberg schema"); n != len(ddlSteps)-1 {
		t.Errorf("%d schema evolutions logged, want %d (every step but the one that only adds an index)", n, len(ddlSteps)-1)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("output:\n%s", p.output())
	}
}

// TestSchemaChangesWhileStopped: cdcsync is stopped while DML and DDL
// happen, so on restart it lags behind every statement: it must decode the
// old rows with the old schema (recorded with the Iceberg table, not read
// from information_schema) and apply each DDL at its position.
func TestSchemaChangesWhileStopped(t *testing.T) {
	e := newEnv(t, "it_ddl_lag", envOptions{})
	e.createDDLTable(30)
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	before := e.captureState("t")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	w := newDDLDML(t, e.dbName)
	e.runDDL(ddlSteps, w)
	p = e.start()
	e.waitCaughtUp(p, 2*time.Minute)
	e.assertMirrors("t")
	e.assertColumns("t")
	e.assertOldSnapshot("t", before)
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if t.Failed() {
		t.Logf("output:\n%s", p.output())
	}
}

// TestSchemaChangeThenRestart: cdcsync applies a DDL statement, is killed,
// and restarts while rows written with the new schema wait; then again with
// kills at the protocol's points while DDL and DML flow.
func TestSchemaChangeThenRestart(t *testing.T) {
	e := newEnv(t, "it_ddl_kill", envOptions{})
	e.createDDLTable(20)
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	w := newDDLDML(t, e.dbName)
	e.runDDL(ddlSteps[:1], w)
	e.waitCaughtUp(p, time.Minute)
	p.kill()
	e.runDDL(ddlSteps[1:3], w)
	for i := 0; i < 20; i++ {
		if err := w.step(); err != nil {
			t.Fatal(err)
		}
	}
	p = e.start()
	e.waitCaughtUp(p, 2*time.Minute)
	e.assertMirrors("t")
	p.kill()

	// Kills at random moments and at the commit points while the rest of
	// the statements run.
	faults := []string{"", "CDCSYNC_FAULT=before-commit:0.3", "CDCSYNC_FAULT=before-checkpoint:0.4"}
	for i, q := range ddlSteps[3:] {
		var env []string
		if f := faults[i%len(faults)]; f != "" {
			env = append(env, f)
		}
		p := e.start(env...)
		e.runDDL([]string{q}, w)
		time.Sleep(time.Duration(200+w.r.IntN(800)) * time.Millisecond)
		p.kill()
	}
	p = e.start()
	e.waitCaughtUp(p, 2*time.Minute)
	e.assertMirrors("t")
	e.assertColumns("t")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if t.Failed() {
		t.Logf("output:\n%s", p.output())
	}
}

// TestNewTableIsPickedUp creates a table that matches the include patterns
// while cdcsync runs: cdcsync copies it and streams it without a restart by
// hand.
func TestNewTableIsPickedUp(t *testing.T) {
	e := newEnv(t, "it_newtbl", envOptions{})
	mustExec(t, "CREATE TABLE it_newtbl.a (id INT PRIMARY KEY, v INT)")
	mustExec(t, "INSERT INTO it_newtbl.a VALUES (1, 1)")
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	mustExec(t, "INSERT INTO it_newtbl.a VALUES (2, 2)")
	mustExec(t, "CREATE TABLE it_newtbl.b (id INT PRIMARY KEY, name VARCHAR(20))")
	mustExec(t, "INSERT INTO it_newtbl.b VALUES (1, 'x'), (2, 'y')")
	mustExec(t, "UPDATE it_newtbl.b SET name = 'z' WHERE id = 2")
	mustExec(t, "ALTER TABLE it_newtbl.b ADD COLUMN n INT DEFAULT 3")
	mustExec(t, "INSERT INTO it_newtbl.a VALUES (3, 3)")
	mustExec(t, "INSERT INTO it_newtbl.b VALUES (3, 'w', 4)")
	// Created and dropped again before cdcsync gets to it.
	mustExec(t, "CREATE TABLE it_newtbl.gone (id INT PRIMARY KEY)")
	mustExec(t, "DROP TABLE it_newtbl.gone")
	e.waitCaughtUp(p, 2*time.Minute)
	e.assertMirrors("a")
	e.assertMirrors("b")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), "new table") {
		t.Errorf("the log does not say why the pipeline restarted:\n%s", p.output())
	}
}
