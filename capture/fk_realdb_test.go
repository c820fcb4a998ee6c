package capture

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
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
		{Name: "fk_refunds", Child: cdcsync.TableID{Database: "fk", Table: "refunds"}, ChildCols: []string{"order_id"},
			Parent: cdcsync.TableID{Database: "fk", Table: "orders"}, ParentCols: []string{"id"}}, // kept by name, without an action
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

// TestStreamFollowsForeignKeys: with cascades applied, the stream follows
// the foreign keys of the mirrored tables through the binlog: each ADD or
// DROP FOREIGN KEY of a mirrored table (named, unnamed, several in one
// statement) comes as a ChangeForeignKeys with the table's keys after it,
// which equal what SHOW CREATE TABLE says at that point; keys of a table
// cdcsync does not mirror change nothing. A statement whose effect it
// cannot tell (a rename of a key's column) marks the keys unknown and ends
// the stream with ErrForeignKeys. Read again from the start with keys
// recorded later, the statements before the keys' position change nothing
// (issue 13: a session read the keys MySQL had at its start and applied
// them to the transactions it replayed from before a key was dropped or
// added).
func TestStreamFollowsForeignKeys(t *testing.T) {
	db := rdbStart(t)
	src := rdbSource(db.Host, db.Port, "root", "")
	root := rdbConnect(t, src)
	rdbExec(t, root, "CREATE DATABASE fks", "CREATE TABLE fks.p (id INT PRIMARY KEY, k INT, UNIQUE KEY (k))",
		"CREATE TABLE fks.c (id INT PRIMARY KEY, p INT, q INT, CONSTRAINT fk FOREIGN KEY (p) REFERENCES fks.p (id) ON DELETE CASCADE)",
		"CREATE TABLE fks.other (id INT PRIMARY KEY, p INT)")
	ctx := context.Background()
	c := cdcsync.TableID{Database: "fks", Table: "c"}
	schema, err := LoadSchema(ctx, root, c)
	if err != nil {
		t.Fatal(err)
	}
	start, err := CurrentPosition(ctx, root, binlogpos.FlavorMariaDB, "test")
	if err != nil {
		t.Fatal(err)
	}
	initial, _, err := ForeignKeys(ctx, root, []cdcsync.TableID{c})
	if err != nil {
		t.Fatal(err)
	}
	steps := [][]string{
		{"ALTER TABLE fks.other ADD CONSTRAINT fko FOREIGN KEY (p) REFERENCES fks.p (id) ON DELETE CASCADE", "ALTER TABLE fks.other DROP FOREIGN KEY fko"},
		{"ALTER TABLE fks.c DROP FOREIGN KEY fk"},
		{"ALTER TABLE fks.c ADD CONSTRAINT fk FOREIGN KEY (p) REFERENCES fks.p (id) ON DELETE SET NULL, ADD FOREIGN KEY (q) REFERENCES p (k) ON UPDATE CASCADE"},
		{"ALTER TABLE fks.c ADD COLUMN r INT, ADD FOREIGN KEY fk_r (r) REFERENCES fks.p (id)"},
		{"ALTER TABLE fks.c DROP FOREIGN KEY c_ibfk_1, DROP FOREIGN KEY fk_r"},
	}
	var server [][]cdcsync.ForeignKey // SHOW CREATE TABLE's keys after each step
	for _, st := range steps {
		rdbExec(t, root, st...)
		k, _, err := ForeignKeys(ctx, root, []cdcsync.TableID{c})
		if err != nil {
			t.Fatal(err)
		}
		server = append(server, k)
	}
	rdbExec(t, root, "ALTER TABLE fks.c RENAME COLUMN p TO p2")
	end, err := CurrentPosition(ctx, root, binlogpos.FlavorMariaDB, "test")
	if err != nil {
		t.Fatal(err)
	}

	read := func(keys cdcsync.TableKeys, stopAtEnd bool) ([]cdcsync.SchemaChange, error) {
		cfg := StreamConfig{Source: src, Flavor: binlogpos.FlavorMariaDB, ServerUUID: "test", Start: start, Horizon: start, ForeignKeys: true,
			Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{c: schema}, Keys: map[cdcsync.TableID]cdcsync.TableKeys{c: keys}}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out := make(chan *cdcsync.Txn, 64)
		done := make(chan error, 1)
		go func() { done <- Stream(sctx, cfg, out); close(out) }()
		var changes []cdcsync.SchemaChange
		for txn := range out {
			for _, ch := range txn.DDL {
				if ch.Kind == cdcsync.ChangeForeignKeys {
					changes = append(changes, ch)
				}
			}
			if ok, _ := (binlogpos.Order{}).Includes(txn.Pos, end); ok && stopAtEnd {
				cancel()
			}
		}
		return changes, <-done
	}

	changes, err := read(cdcsync.TableKeys{Keys: initial, Pos: start}, false)
	if !errors.Is(err, ErrForeignKeys) || !strings.Contains(err.Error(), "RENAME COLUMN") {
		t.Fatalf("Stream returned %v, want ErrForeignKeys at the column rename", err)
	}
	if len(changes) != len(steps) {
		t.Fatalf("%d key changes, want %d (one per statement on fks.c, and the rename's): %+v", len(changes), len(steps), changes)
	}
	for i, ch := range changes[:len(changes)-1] {
		if ch.Table != c || ch.KeysUnknown || fmt.Sprint(sortedKeys(ch.ForeignKeys)) != fmt.Sprint(sortedKeys(server[i+1])) {
			t.Errorf("after %q the stream holds keys %+v, the server %+v", steps[i+1], ch.ForeignKeys, server[i+1])
		}
	}
	if last := changes[len(changes)-1]; !last.KeysUnknown || last.Table != c {
		t.Errorf("the column rename gave %+v, want the keys of fks.c unknown", last)
	}

	// Keys recorded at the end: every statement before is in them.
	changes, err = read(cdcsync.TableKeys{Keys: server[len(server)-1], Pos: end}, true)
	if !errors.Is(err, context.Canceled) && err != nil {
		t.Fatalf("Stream with keys as of its end: %v", err)
	}
	if len(changes) != 0 {
		t.Errorf("statements before the keys' position changed them: %+v", changes)
	}
}

func sortedKeys(ks []cdcsync.ForeignKey) []cdcsync.ForeignKey {
	out := slices.Clone(ks)
	slices.SortFunc(out, func(a, b cdcsync.ForeignKey) int { return strings.Compare(a.Name, b.Name) })
	return out
}
