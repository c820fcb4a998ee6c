package capture

import (
	"context"
	"strings"
	"testing"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

// TestForeignKeyCascadesWarned: MariaDB applies cascading foreign-key
// actions without writing them to the binlog, so preflight (check and run)
// names every selected child table with such an action, along a
// three-level chain, and leaves RESTRICT keys and unselected tables alone
// (issue 13: a mirrored order_items kept the rows a cascade deleted, and
// check said all checks passed).
func TestForeignKeyCascadesWarned(t *testing.T) {
	db := rdbStart(t)
	root := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	rdbExec(t, root, "CREATE DATABASE fk",
		"CREATE TABLE fk.orders (id INT PRIMARY KEY)",
		"CREATE TABLE fk.order_items (id INT PRIMARY KEY, order_id INT, FOREIGN KEY fk_items (order_id) REFERENCES fk.orders (id) ON DELETE CASCADE)",
		"CREATE TABLE fk.item_notes (id INT PRIMARY KEY, item_id INT, FOREIGN KEY fk_notes (item_id) REFERENCES fk.order_items (id) ON DELETE SET NULL ON UPDATE CASCADE)",
		"CREATE TABLE fk.refunds (id INT PRIMARY KEY, order_id INT, FOREIGN KEY fk_refunds (order_id) REFERENCES fk.orders (id) ON DELETE RESTRICT)")
	conn := rdbConnect(t, rdbSource(db.Host, db.Port, testenv.ReplUser, testenv.ReplPassword))
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
	if !f.Warning {
		t.Fatalf("cascading foreign keys not warned: %s", f)
	}
	for _, want := range []string{"fk.order_items (fk_items ON DELETE CASCADE, referencing orders)",
		"fk.item_notes (fk_notes ON DELETE SET NULL, ON UPDATE CASCADE, referencing order_items)", "MariaDB", "binlog"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("the warning lacks %q: %s", want, f.Message)
		}
	}
	if strings.Contains(f.Message, "refunds") {
		t.Errorf("a RESTRICT key is warned about: %s", f.Message)
	}
	if f := find("fk.orders", "fk.refunds"); f.Warning || !f.OK {
		t.Errorf("with no child of a cascade selected: %s", f)
	}
}
