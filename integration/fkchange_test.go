package integration

import (
	"strings"
	"testing"
	"time"
)

// TestForeignKeyChangesWhileStopped: a foreign key dropped or added while
// cdcsync is stopped applies from its statement on, not to the
// transactions before it that the next run reads: a SET NULL of a key
// dropped afterwards is applied, and a delete made while the key was gone
// nulls nothing, though the key is back when cdcsync starts (issue 13: each
// session applied the keys MySQL had at its start to everything it read).
func TestForeignKeyChangesWhileStopped(t *testing.T) {
	const dbName = "it_fkstop"
	e := newEnv(t, dbName, envOptions{epoch: "interval: 200ms"})
	for _, q := range fkSchema {
		mustExec(t, strings.Replace(q, "CREATE TABLE ", "CREATE TABLE "+dbName+".", 1))
	}
	for _, q := range []string{
		"INSERT INTO orders VALUES (1, 'eu', 1), (2, 'us', 2)",
		"INSERT INTO order_items VALUES (10, 1, 'eu', 1), (11, 1, 'eu', 1), (12, 2, 'us', 1), (13, 2, 'us', 1)",
		"INSERT INTO item_notes VALUES (100, 10, 'a'), (101, 11, 'b'), (102, 12, 'c'), (103, 13, 'd')",
	} {
		e.exec(strings.NewReplacer("INTO ", "INTO "+dbName+".").Replace(q))
	}
	bin := plainBinary(t)
	restart := func(p *proc, stmts ...string) *proc {
		t.Helper()
		if code := p.stop(t); code != 0 {
			t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
		}
		conn, err := db.Connect("root", "", dbName)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, q := range stmts {
			if _, err := conn.Execute(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		p = e.startWith(bin)
		e.waitCaughtUp(p, time.Minute)
		for _, tbl := range fkTables {
			e.assertMirrors(tbl)
		}
		return p
	}
	p := e.startWith(bin)
	e.waitCaughtUp(p, time.Minute)
	// The key nulls note 100, then goes.
	p = restart(p, "DELETE FROM order_items WHERE id = 10", "ALTER TABLE item_notes DROP FOREIGN KEY fk_notes")
	// Without the key note 101 keeps its item; the key comes back unchecked.
	p = restart(p, "DELETE FROM order_items WHERE id = 11", "SET SESSION foreign_key_checks = 0",
		"ALTER TABLE item_notes ADD CONSTRAINT fk_notes FOREIGN KEY (item_id) REFERENCES order_items (id) ON DELETE SET NULL")
	// And the key that is back applies to what follows.
	e.exec("DELETE FROM " + dbName + ".order_items WHERE id = 12")
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("item_notes")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}
}
