package capture

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/integration/testenv"
)

// TestForeignKeyCascades: MariaDB applies cascading foreign-key actions
// without writing them to the binlog. ForeignKeys reads them (columns,
// referenced table and columns, actions) along a three-level chain, and
// preflight (check and run) says that cdcsync applies those between
// selected tables and warns, naming the child, about those whose parent is
// not selected, while leaving RESTRICT keys alone (issue 13: a mirrored
// order_items kept the rows a cascade deleted, and check said all checks
// passed).
func TestForeignKeyCascades(t *testing.T) {
	db := rdbStart(t)
	root := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	rdbExec(t, root, "CREATE DATABASE fk",
		"CREATE TABLE fk.orders (id INT PRIMARY KEY, region CHAR(2), UNIQUE KEY (id, region))",
		"CREATE TABLE fk.order_items (id INT PRIMARY KEY, order_id INT, region CHAR(2), FOREIGN KEY fk_items (order_id, region) REFERENCES fk.orders (id, region) ON DELETE CASCADE)",
		"CREATE TABLE fk.item_notes (id INT PRIMARY KEY, item_id INT, FOREIGN KEY fk_notes (item_id) REFERENCES fk.order_items (id) ON DELETE SET NULL ON UPDATE CASCADE)",
		"CREATE TABLE fk.refunds (id INT PRIMARY KEY, order_id INT, FOREIGN KEY fk_refunds (order_id) REFERENCES fk.orders (id) ON DELETE RESTRICT)")
	conn := rdbConnect(t, rdbSource(db.Host, db.Port, testenv.ReplUser, testenv.ReplPassword))

	fks, unsupported, err := ForeignKeys(context.Background(), conn, []cdcsync.TableID{{Database: "fk", Table: "order_items"},
		{Database: "fk", Table: "item_notes"}, {Database: "fk", Table: "refunds"}})
	if err != nil || len(unsupported) > 0 {
		t.Fatalf("ForeignKeys: %v %v", err, unsupported)
	}
	want := []cdcsync.ForeignKey{
		{Name: "fk_items", Child: cdcsync.TableID{Database: "fk", Table: "order_items"}, ChildCols: []string{"order_id", "region"},
			Parent: cdcsync.TableID{Database: "fk", Table: "orders"}, ParentCols: []string{"id", "region"}, OnDelete: cdcsync.FKCascade},
		{Name: "fk_notes", Child: cdcsync.TableID{Database: "fk", Table: "item_notes"}, ChildCols: []string{"item_id"},
			Parent: cdcsync.TableID{Database: "fk", Table: "order_items"}, ParentCols: []string{"id"}, OnDelete: cdcsync.FKSetNull, OnUpdate: cdcsync.FKCascade},
	}
	if fmt.Sprint(fks) != fmt.Sprint(want) {
		t.Errorf("ForeignKeys = %+v\nwant %+v", fks, want)
	}

	find := func(include ...string) Finding {
		t.Helper()
		src := rdbSource(db.Host, db.Port, testenv.ReplUser, testenv.ReplPassword)
		src.Include = include
		fs, _, err := Preflight(context.Background(), conn, src)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if f.Check == "foreign_keys" {
				return f
			}
		}
		t.Fatalf("no foreign_keys finding:\n%s", rdbFindings(fs))
		return Finding{}
	}
	f := find("fk.*")
	if f.Warning {
		t.Fatalf("cascades between selected tables are warned about: %s", f)
	}
	for _, want := range []string{"fk.order_items (fk_items ON DELETE CASCADE, referencing fk.orders)",
		"fk.item_notes (fk_notes ON DELETE SET NULL, ON UPDATE CASCADE, referencing fk.order_items)", "MariaDB", "cdcsync applies them"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("the finding lacks %q: %s", want, f.Message)
		}
	}
	if strings.Contains(f.Message, "refunds") {
		t.Errorf("a RESTRICT key is reported: %s", f.Message)
	}
	f = find("fk.order_items", "fk.item_notes")
	if !f.Warning || !strings.Contains(f.Message, "fk.order_items (fk_items ON DELETE CASCADE, referencing fk.orders)") ||
		strings.Contains(f.Message, "fk_notes") || !strings.Contains(f.Message, "source.include") {
		t.Errorf("a cascade whose parent is not selected is not warned about (alone): %s", f)
	}
	if f := find("fk.orders", "fk.refunds"); f.Warning || !f.OK || !strings.Contains(f.Message, "no selected table") {
		t.Errorf("with no child of a cascade selected: %s", f)
	}
}

// TestStreamEndsAtForeignKeyChanges: with cascades applied, a statement
// that adds or drops a foreign key of a mirrored table ends the stream with
// ErrForeignKeys after its transaction, so that the next session reads the
// keys again; one of an unmirrored table does not.
func TestStreamEndsAtForeignKeyChanges(t *testing.T) {
	db := rdbStart(t)
	src := rdbSource(db.Host, db.Port, "root", "")
	root := rdbConnect(t, src)
	rdbExec(t, root, "CREATE DATABASE fks", "CREATE TABLE fks.p (id INT PRIMARY KEY)",
		"CREATE TABLE fks.c (id INT PRIMARY KEY, p INT, CONSTRAINT fk FOREIGN KEY (p) REFERENCES fks.p (id) ON DELETE CASCADE)",
		"CREATE TABLE fks.other (id INT PRIMARY KEY, p INT)")
	ctx := context.Background()
	schema, err := LoadSchema(ctx, root, cdcsync.TableID{Database: "fks", Table: "c"})
	if err != nil {
		t.Fatal(err)
	}
	for _, stmts := range [][]string{
		{"ALTER TABLE fks.c DROP FOREIGN KEY fk"},
		{"SET SESSION foreign_key_checks = 0", "ALTER TABLE fks.c ADD CONSTRAINT fk FOREIGN KEY (p) REFERENCES fks.p (id) ON DELETE SET NULL"},
	} {
		start, err := CurrentPosition(ctx, root, cdcsync.FlavorMariaDB, "test")
		if err != nil {
			t.Fatal(err)
		}
		cfg := StreamConfig{Source: src, Flavor: cdcsync.FlavorMariaDB, ServerUUID: "test", Start: start, Horizon: start, ForeignKeys: true,
			Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{schema.ID: schema}}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out := make(chan *cdcsync.Txn, 64)
		done := make(chan error, 1)
		go func() { done <- Stream(sctx, cfg, out) }()
		rdbExec(t, root, "ALTER TABLE fks.other ADD CONSTRAINT fko FOREIGN KEY (p) REFERENCES fks.p (id)", "ALTER TABLE fks.other DROP FOREIGN KEY fko")
		rdbExec(t, root, stmts...)
		err = <-done
		cancel()
		if !errors.Is(err, ErrForeignKeys) || !strings.Contains(err.Error(), "fks.c") && !strings.Contains(err.Error(), stmts[len(stmts)-1][:20]) {
			t.Fatalf("after %q Stream returned %v, want ErrForeignKeys", stmts, err)
		}
		if strings.Contains(err.Error(), "fko") {
			t.Errorf("a foreign key of a table cdcsync does not mirror ended the stream: %v", err)
		}
	}
}
