package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/lake"
)

// assertIcebergRows checks the table's current Iceberg rows against rows
// of schema ts (a table cdcsync stopped keeps the rows it had).
func (e *env) assertIcebergRows(table string, ts *cdcsync.TableSchema, want []cdcsync.Row) {
	e.t.Helper()
	lk := e.openLake()
	ctx := context.Background()
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
		e.t.Errorf("%s: Iceberg has %d rows, want %d", table, len(got), len(want))
	}
	diffRows(e.t, ts, want, got)
}

func (e *env) insertN(table string, from, n int, cols string, row func(i int) string) {
	e.t.Helper()
	for i := from; i < from+n; i++ {
		e.exec(fmt.Sprintf("INSERT INTO %s.%s (%s) VALUES (%s)", e.dbName, table, cols, row(i)))
	}
}

// TestIncompatibleChangesStopOnlyTheirTable: a change Iceberg cannot
// express, a statement cdcsync cannot parse and a column type it cannot map
// each stop their own table, durably and with an error saying how to go
// on, while the other tables keep flowing; dropping the Iceberg table
// brings the table back with a new copy.
func TestIncompatibleChangesStopOnlyTheirTable(t *testing.T) {
	e := newEnv(t, "it_ddl_stop", envOptions{})
	for _, tbl := range []string{"s", "u", "x", "other"} {
		e.exec(fmt.Sprintf("CREATE TABLE %s.%s (id INT PRIMARY KEY, code VARCHAR(10), n INT)", e.dbName, tbl))
	}
	num := func(i int) string { return fmt.Sprintf("%d, '%d', %d", i, i, i) }
	for _, tbl := range []string{"s", "u", "x", "other"} {
		e.insertN(tbl, 1, 10, "id, code, n", num)
	}
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	for _, tbl := range []string{"s", "u", "x", "other"} {
		e.insertN(tbl, 11, 5, "id, code, n", num)
	}
	e.waitCaughtUp(p, time.Minute)
	before := map[string]oldState{}
	for _, tbl := range []string{"s", "u", "x"} {
		before[tbl] = e.captureState(tbl)
	}

	e.exec("ALTER TABLE it_ddl_stop.s MODIFY code INT")                            // VARCHAR to INT
	e.exec("ALTER TABLE it_ddl_stop.u ADD COLUMN w INT, ADD SYSTEM VERSIONING")    // not parsed
	e.exec("ALTER TABLE it_ddl_stop.x ADD COLUMN e VARCHAR(5) CHARACTER SET swe7") // not mapped
	e.insertN("s", 100, 5, "id, code, n", num)
	e.insertN("u", 100, 5, "id, code, n", num)
	e.insertN("x", 100, 5, "id, code, n", num)
	e.insertN("other", 100, 20, "id, code, n", num)
	e.exec("UPDATE it_ddl_stop.other SET n = n * 2 WHERE id < 5")
	e.waitCaughtUp(p, time.Minute)
	if p.exited() {
		t.Fatalf("cdcsync exited; output:\n%s", p.output())
	}
	e.assertMirrors("other")
	for _, tbl := range []string{"s", "u", "x"} {
		e.assertIcebergRows(tbl, before[tbl].schema, before[tbl].rows)
	}
	out := p.output()
	if testing.Verbose() {
		t.Logf("output:\n%s", out)
	}
	for _, want := range []string{
		"cdcsync stopped mirroring it_ddl_stop.s at binlog position mariadb:", "MODIFY code INT", "Iceberg cannot promote string to int32",
		"cdcsync stopped mirroring it_ddl_stop.u", "cannot parse the statement", "ADD SYSTEM VERSIONING",
		"cdcsync stopped mirroring it_ddl_stop.x", "character set swe7",
		"drop the Iceberg table it_ddl_stop.s", "restart cdcsync", "ddl_incompatible: recopy",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q", want)
		}
	}

	// After a restart the tables stay stopped (resuming them from the
	// checkpoint would lose rows), and the others keep flowing.
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	e.insertN("s", 200, 3, "id, code, n", num)
	e.insertN("other", 200, 3, "id, code, n", num)
	p = e.start()
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("other")
	for _, tbl := range []string{"s", "x"} {
		e.assertIcebergRows(tbl, before[tbl].schema, before[tbl].rows)
	}
	if !strings.Contains(p.output(), "cdcsync stopped mirroring it_ddl_stop.s") || !strings.Contains(p.output(), "cdcsync stopped mirroring it_ddl_stop.x") {
		t.Errorf("after a restart the log does not say the tables are stopped:\n%s", p.output())
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}

	// Dropping the Iceberg table is how to go on: the table is copied again.
	lk := e.openLake()
	if err := lk.DropTable(context.Background(), cdcsync.TableID{Database: e.dbName, Table: "s"}); err != nil {
		t.Fatal(err)
	}
	p = e.start()
	e.waitCaughtUp(p, time.Minute)
	e.insertN("s", 300, 3, "id, code, n", func(i int) string { return fmt.Sprintf("%d, %d, %d", i, i, i) })
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("s")
	e.assertMirrors("other")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if t.Failed() {
		t.Logf("output:\n%s", p.output())
	}
}

// TestIncompatibleChangeRecopy: under ddl_incompatible: recopy the table is
// copied again online, with the new schema, and older snapshots still read
// the old values.
func TestIncompatibleChangeRecopy(t *testing.T) {
	e := newEnv(t, "it_ddl_recopy", envOptions{tables: "tables:\n  - match: it_ddl_recopy.r\n    ddl_incompatible: recopy"})
	e.exec("CREATE TABLE it_ddl_recopy.r (id INT PRIMARY KEY, code VARCHAR(10), d DECIMAL(10,2))")
	e.exec("CREATE TABLE it_ddl_recopy.other (id INT PRIMARY KEY, v INT)")
	e.insertN("r", 1, 20, "id, code, d", func(i int) string { return fmt.Sprintf("%d, '%d', %d.5", i, i, i) })
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	before := e.captureState("r")
	e.exec("ALTER TABLE it_ddl_recopy.r MODIFY code INT, MODIFY d DECIMAL(10,3)")
	e.insertN("r", 100, 5, "id, code, d", func(i int) string { return fmt.Sprintf("%d, %d, %d.125", i, i, i) })
	e.exec("UPDATE it_ddl_recopy.r SET code = code + 1 WHERE id < 10")
	e.insertN("other", 1, 5, "id, v", func(i int) string { return fmt.Sprintf("%d, %d", i, i) })
	e.waitCaughtUp(p, 2*time.Minute)
	e.assertMirrors("r")
	e.assertMirrors("other")
	e.assertColumns("r")
	e.assertOldSnapshot("r", before)
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), "copying the table again") {
		t.Errorf("the log does not say the table was copied again:\n%s", p.output())
	}
	if t.Failed() {
		t.Logf("output:\n%s", p.output())
	}
}
