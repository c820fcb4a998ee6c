package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// TestTruncateAndPrimaryKeyChange: TRUNCATE TABLE deletes every row at its
// position, and a new primary key becomes the identifier fields; both while
// cdcsync runs and while it is stopped (and then lags behind them).
func TestTruncateAndPrimaryKeyChange(t *testing.T) {
	e := newEnv(t, "it_ddl_trunc", envOptions{})
	e.exec("CREATE TABLE it_ddl_trunc.t (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, v VARCHAR(10))")
	e.exec("CREATE TABLE it_ddl_trunc.lag (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, v VARCHAR(10))")
	row := func(i int) string { return fmt.Sprintf("%d, %d, 'v%d'", i, i%3, i) }
	e.insertN("t", 1, 20, "id, k, v", row)
	e.insertN("lag", 1, 20, "id, k, v", row)
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	before := e.captureState("t")

	e.insertN("t", 21, 5, "id, k, v", row)
	e.exec("TRUNCATE TABLE it_ddl_trunc.t")
	e.insertN("t", 100, 5, "id, k, v", row)
	e.exec("UPDATE it_ddl_trunc.t SET v = 'x' WHERE id = 101")
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("t")
	e.assertOldSnapshot("t", before)

	e.exec("ALTER TABLE it_ddl_trunc.t DROP PRIMARY KEY, ADD PRIMARY KEY (id, k)")
	e.exec("INSERT INTO it_ddl_trunc.t VALUES (100, 7, 'second')")
	e.exec("UPDATE it_ddl_trunc.t SET v = 'y' WHERE id = 100 AND k = 1")
	e.exec("DELETE FROM it_ddl_trunc.t WHERE id = 102")
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("t")
	e.assertColumns("t")

	// Killed after the change: the rows after it wait for the restart.
	p.kill()
	e.exec("INSERT INTO it_ddl_trunc.t VALUES (100, 8, 'third')")
	e.exec("DELETE FROM it_ddl_trunc.t WHERE id = 100 AND k = 7")
	p = e.start()
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("t")

	// The same while cdcsync is stopped.
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	e.insertN("lag", 21, 5, "id, k, v", row)
	e.exec("TRUNCATE TABLE it_ddl_trunc.lag")
	e.insertN("lag", 100, 5, "id, k, v", row)
	e.exec("ALTER TABLE it_ddl_trunc.lag DROP PRIMARY KEY, ADD PRIMARY KEY (k, id)")
	e.exec("INSERT INTO it_ddl_trunc.lag VALUES (100, 9, 'second')")
	e.exec("UPDATE it_ddl_trunc.lag SET v = 'z' WHERE id = 100")
	p = e.start()
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("lag")
	e.assertColumns("lag")
	e.assertMirrors("t")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if t.Failed() {
		t.Logf("output:\n%s", p.output())
	}
}

// icebergTableExists reports whether the test's catalog has the table.
func (e *env) icebergTableExists(db, table string) bool {
	e.t.Helper()
	lk := e.openLake()
	ok, err := lk.TableExists(context.Background(), cdcsync.TableID{Database: db, Table: table})
	if err != nil {
		e.t.Fatal(err)
	}
	return ok
}

// TestDropAndRenameTableDefaults: with the default policies a RENAME TABLE
// renames the Iceberg table and keeps mirroring it, a DROP TABLE keeps the
// Iceberg table as it was and stops mirroring it (also when cdcsync was not
// running at the DROP), and a table created again under a dropped name is
// reported, not mirrored.
func TestDropAndRenameTableDefaults(t *testing.T) {
	e := newEnv(t, "it_ddl_drop", envOptions{})
	e.exec("DROP DATABASE IF EXISTS it_ddl_drop_out")
	e.exec("CREATE DATABASE it_ddl_drop_out")
	for _, tbl := range []string{"a", "b", "c", "d", "late"} {
		e.exec(fmt.Sprintf("CREATE TABLE it_ddl_drop.%s (id INT PRIMARY KEY, v INT)", tbl))
		e.insertN(tbl, 1, 5, "id, v", func(i int) string { return fmt.Sprintf("%d, %d", i, i) })
	}
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	e.exec("INSERT INTO it_ddl_drop.a VALUES (6, 6)")
	e.exec("RENAME TABLE it_ddl_drop.a TO it_ddl_drop.a2")
	e.exec("INSERT INTO it_ddl_drop.a2 VALUES (7, 7)")
	e.exec("UPDATE it_ddl_drop.a2 SET v = 0 WHERE id = 1")
	e.exec("INSERT INTO it_ddl_drop.b VALUES (6, 6)")
	bBefore := func() oldState {
		e.waitCaughtUp(p, time.Minute)
		return e.captureState("b")
	}()
	e.exec("DROP TABLE it_ddl_drop.b")
	e.exec("ALTER TABLE it_ddl_drop.c RENAME TO it_ddl_drop_out.c") // out of the selection: a DROP
	e.exec("CREATE TABLE it_ddl_drop.b (id INT PRIMARY KEY, v INT, w INT)")
	e.exec("INSERT INTO it_ddl_drop.b VALUES (1, 1, 1)")
	e.exec("INSERT INTO it_ddl_drop.d VALUES (6, 6)")
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("a2")
	e.assertMirrors("d")
	if e.icebergTableExists("it_ddl_drop", "a") {
		t.Errorf("the Iceberg table of the renamed table a still exists under its old name")
	}
	e.assertIcebergRows("b", bBefore.schema, bBefore.rows)
	if !e.icebergTableExists("it_ddl_drop", "c") {
		t.Errorf("the Iceberg table of c, renamed out of the selection, was dropped; drop_table: keep keeps it")
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	out := p.output()
	for _, want := range []string{"renamed the Iceberg table", "it_ddl_drop.b was dropped in MySQL", "it_ddl_drop.c was dropped in MySQL"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q", want)
		}
	}

	// While cdcsync is stopped: rows, then the DROP. They must reach the
	// Iceberg table before it stops.
	e.insertN("late", 10, 3, "id, v", func(i int) string { return fmt.Sprintf("%d, %d", i, i) })
	e.exec("UPDATE it_ddl_drop.late SET v = 100 WHERE id = 1")
	late := e.captureState("late")
	e.exec("DROP TABLE it_ddl_drop.late")
	p = e.start()
	e.waitCaughtUp(p, time.Minute)
	e.assertIcebergRows("late", late.schema, late.rows)
	e.assertIcebergRows("b", bBefore.schema, bBefore.rows)
	e.assertMirrors("a2")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), "it_ddl_drop.b was dropped in MySQL") || !strings.Contains(p.output(), "drop the Iceberg table it_ddl_drop.b") {
		t.Errorf("after a restart the log does not say b is not mirrored:\n%s", p.output())
	}
	if t.Failed() {
		t.Logf("output:\n%s", p.output())
	}
}

// TestDropAndRenameTablePolicies: drop_table: drop drops the Iceberg table,
// and a table created again under that name is copied and mirrored;
// rename_table: keep keeps the old Iceberg table and copies the new name.
func TestDropAndRenameTablePolicies(t *testing.T) {
	e := newEnv(t, "it_ddl_pol", envOptions{extra: "ddl:\n  drop_table: drop\n  rename_table: keep"})
	for _, tbl := range []string{"a", "b"} {
		e.exec(fmt.Sprintf("CREATE TABLE it_ddl_pol.%s (id INT PRIMARY KEY, v INT)", tbl))
		e.insertN(tbl, 1, 5, "id, v", func(i int) string { return fmt.Sprintf("%d, %d", i, i) })
	}
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	aBefore := e.captureState("a")
	e.exec("RENAME TABLE it_ddl_pol.a TO it_ddl_pol.a2")
	e.exec("INSERT INTO it_ddl_pol.a2 VALUES (6, 6)")
	e.exec("DROP TABLE it_ddl_pol.b")
	e.waitCaughtUp(p, time.Minute)
	if e.icebergTableExists("it_ddl_pol", "b") {
		t.Errorf("drop_table: drop did not drop the Iceberg table of b")
	}
	e.exec("CREATE TABLE it_ddl_pol.b (id INT PRIMARY KEY, name VARCHAR(10))")
	e.exec("INSERT INTO it_ddl_pol.b VALUES (1, 'new')")
	e.waitCaughtUp(p, 2*time.Minute)
	e.exec("INSERT INTO it_ddl_pol.b VALUES (2, 'newer')")
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("b")
	e.assertMirrors("a2")
	e.assertIcebergRows("a", aBefore.schema, aBefore.rows)
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if t.Failed() {
		t.Logf("output:\n%s", p.output())
	}
}
