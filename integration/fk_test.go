package integration

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

// The foreign-key schema: a three-level chain (orders -> order_items ->
// item_notes) with ON DELETE CASCADE, ON UPDATE CASCADE on a composite key
// and ON DELETE SET NULL, and a table referencing itself.
var fkSchema = []string{
	`CREATE TABLE orders (id INT NOT NULL PRIMARY KEY, region CHAR(2) NOT NULL, total DECIMAL(10,2), UNIQUE KEY (id, region))`,
	`CREATE TABLE order_items (id INT NOT NULL PRIMARY KEY, order_id INT, region CHAR(2), qty INT,
		FOREIGN KEY fk_items (order_id, region) REFERENCES orders (id, region) ON DELETE CASCADE ON UPDATE CASCADE)`,
	`CREATE TABLE item_notes (id INT NOT NULL PRIMARY KEY, item_id INT, note VARCHAR(32),
		FOREIGN KEY fk_notes (item_id) REFERENCES order_items (id) ON DELETE SET NULL)`,
	`CREATE TABLE staff (id INT NOT NULL PRIMARY KEY, boss INT, FOREIGN KEY fk_boss (boss) REFERENCES staff (id) ON DELETE CASCADE)`,
}

var fkTables = []string{"orders", "order_items", "item_notes", "staff"}

// fkLoad changes the foreign-key schema at random: orders with items and
// notes, deletes and key changes of orders (cascades two levels down),
// deletes of items (SET NULL), a child inserted and its parent deleted in
// one transaction, and chains of staff deleted from their root.
type fkLoad struct {
	r     *rand.Rand
	conn  *client.Conn
	next  int // the next new id
	stats map[string]int
}

func newFKLoad(t *testing.T, dbName string, seed uint64) *fkLoad {
	conn, err := db.Connect(testenv.RootUser, "", dbName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &fkLoad{r: rand.New(rand.NewPCG(seed, 5)), conn: conn, next: 1, stats: map[string]int{}}
}

// exec runs a statement; a foreign-key or duplicate-key refusal (the random
// id is gone or taken) is a normal outcome, and so is a deadlock or a lock
// wait timeout with the concurrent ALTER TABLE (the server rolled the
// statement, or its transaction, back: errRolledBack).
func (l *fkLoad) exec(q string, args ...any) error {
	_, err := l.conn.Execute(q, args...)
	var my *mysql.MyError
	if errors.As(err, &my) {
		switch my.Code {
		case 1451, 1452, 1062:
			return nil
		case 1213, 1205:
			return errRolledBack
		}
	}
	return err
}

// errRolledBack is a deadlock or lock wait timeout: InnoDB rolled back the
// transaction, which MySQL then does not have either.
var errRolledBack = errors.New("rolled back by the server")

func (l *fkLoad) id() int { l.next++; return l.next }

func (l *fkLoad) some() int { return 1 + l.r.IntN(max(l.next, 2)) }

func (l *fkLoad) region() string { return []string{"eu", "us", "ap"}[l.r.IntN(3)] }

func (l *fkLoad) order() error {
	o, reg := l.id(), l.region()
	stmts := []string{fmt.Sprintf("INSERT INTO orders VALUES (%d, '%s', %d.50)", o, reg, l.r.IntN(1000))}
	for range l.r.IntN(4) {
		it := l.id()
		stmts = append(stmts, fmt.Sprintf("INSERT INTO order_items VALUES (%d, %d, '%s', %d)", it, o, reg, 1+l.r.IntN(9)))
		for range l.r.IntN(3) {
			stmts = append(stmts, fmt.Sprintf("INSERT INTO item_notes VALUES (%d, %d, 'n%d')", l.id(), it, l.r.IntN(100)))
		}
	}
	return l.txn(stmts...)
}

// single runs one statement in a transaction of its own.
func (l *fkLoad) single(q string, args ...any) error {
	err := l.exec(q, args...)
	if errors.Is(err, errRolledBack) {
		l.stats["rolled back"]++
		return nil
	}
	return err
}

func (l *fkLoad) txn(stmts ...string) error {
	if err := l.conn.Begin(); err != nil {
		return err
	}
	for _, s := range stmts {
		if err := l.exec(s); err != nil {
			_ = l.conn.Rollback()
			if errors.Is(err, errRolledBack) {
				l.stats["rolled back"]++
				return nil
			}
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return l.conn.Commit()
}

func (l *fkLoad) step() error {
	switch n := l.r.IntN(20); {
	case n < 7:
		l.stats["orders"]++
		return l.order()
	case n < 10:
		l.stats["order deletes"]++
		return l.single("DELETE FROM orders WHERE id = ?", l.some())
	case n < 12:
		l.stats["order key changes"]++
		return l.single("UPDATE orders SET id = ? WHERE id = ?", l.id(), l.some())
	case n < 14:
		l.stats["item deletes"]++
		return l.single("DELETE FROM order_items WHERE id = ?", l.some())
	case n < 15:
		l.stats["item moves"]++
		return l.single("UPDATE order_items i JOIN orders o ON o.id = ? SET i.order_id = o.id, i.region = o.region WHERE i.id = ?", l.some(), l.some())
	case n < 17:
		// A child inserted, then its parent deleted, in one transaction.
		l.stats["insert then cascade"]++
		o := l.some()
		return l.txn(fmt.Sprintf("INSERT INTO order_items SELECT %d, id, region, 1 FROM orders WHERE id = %d", l.id(), o),
			fmt.Sprintf("DELETE FROM orders WHERE id = %d", o))
	case n < 19:
		l.stats["staff chains"]++
		root := l.id()
		stmts := []string{fmt.Sprintf("INSERT INTO staff VALUES (%d, NULL)", root)}
		boss := root
		for range 1 + l.r.IntN(3) {
			id := l.id()
			stmts = append(stmts, fmt.Sprintf("INSERT INTO staff VALUES (%d, %d)", id, boss))
			boss = id
		}
		return l.txn(stmts...)
	default:
		l.stats["staff deletes"]++
		return l.single("DELETE FROM staff WHERE id = ?", l.some())
	}
}

// TestForeignKeyCascadesApplied: on the real MariaDB, which writes only the
// parent's change of a cascading foreign key to the binlog, the mirror of
// every table of a three-level chain (CASCADE on a composite key, ON UPDATE
// CASCADE, SET NULL) and of a table referencing itself equals MySQL after a
// random load, with cdcsync restarted now and then and a foreign key
// dropped and added again while it runs. Before, the child tables kept every row a
// cascade deleted (issue 13).
func TestForeignKeyCascadesApplied(t *testing.T) {
	const dbName = "it_fk"
	e := newEnv(t, dbName, envOptions{epoch: "interval: 200ms"})
	for _, q := range fkSchema {
		mustExec(t, strings.Replace(q, "CREATE TABLE ", "CREATE TABLE "+dbName+".", 1))
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	l := newFKLoad(t, dbName, seed)
	for range 200 { // copied by the initial copy
		if err := l.step(); err != nil {
			t.Fatal(err)
		}
	}
	bin := plainBinary(t)
	p := e.startWith(bin)
	stop := inBackground(t, func() error {
		if err := l.step(); err != nil {
			return err
		}
		time.Sleep(time.Duration(5+l.r.IntN(10)) * time.Millisecond) // cascades read the lake: about 70 transactions a second here
		return nil
	})
	r := rand.New(rand.NewPCG(seed, 6))
	var earlier []*proc // the runs stopped before the last
	for i := range 6 {
		time.Sleep(time.Duration(800+r.IntN(2000)) * time.Millisecond)
		if i == 3 {
			// The key goes, and comes back unchecked (the rows the load
			// orphans meanwhile stay): the stream follows each change.
			ddl, err := db.Connect(testenv.RootUser, "", dbName)
			if err != nil {
				t.Fatal(err)
			}
			for n, q := range []string{"ALTER TABLE item_notes DROP FOREIGN KEY fk_notes",
				"ALTER TABLE item_notes ADD CONSTRAINT fk_notes FOREIGN KEY (item_id) REFERENCES order_items (id) ON DELETE SET NULL"} {
				if _, err := ddl.Execute("SET SESSION foreign_key_checks = 0"); err != nil {
					t.Fatal(err)
				}
				if _, err := ddl.Execute(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				// The stream follows the key from its statement on.
				for deadline := time.Now().Add(3 * time.Minute); strings.Count(p.output(), "foreign keys changed") <= n; time.Sleep(50 * time.Millisecond) {
					if p.exited() || time.Now().After(deadline) {
						t.Fatalf("%q was not followed; output:\n%s", q, p.output())
					}
				}
				time.Sleep(time.Duration(200+r.IntN(1000)) * time.Millisecond)
			}
			ddl.Close()
			continue
		}
		// Restarts alternate between SIGKILL and SIGTERM.
		earlier = append(earlier, p)
		if i%2 == 0 {
			p.kill()
		} else if code := p.stop(t); code != 0 {
			t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
		}
		p = e.startWith(bin)
	}
	if err := stop(); err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Logf("load: %v", l.stats)
	began := time.Now()
	e.waitCaughtUp(p, 3*time.Minute)
	t.Logf("caught up in %s; the last cdcsync copied %d tables again", time.Since(began).Round(time.Second), strings.Count(p.output(), "are copied again"))
	for _, tbl := range fkTables {
		e.assertMirrors(tbl)
	}
	if t.Failed() {
		for i, q := range earlier {
			t.Logf("cdcsync run %d's output:\n%s", i+1, q.output())
		}
		t.Logf("the last cdcsync's output:\n%s", p.output())
		keepBinlog(t, seed)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}
}

// keepBinlog saves the server's binlog, decoded with its rows
// (mariadb-binlog --verbose), where it outlives the test, so that a
// failure can be traced to the transactions of the differing rows.
func keepBinlog(t *testing.T, seed uint64) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(db.DataDir, "binlog.[0-9]*"))
	if len(files) == 0 {
		t.Logf("no binlog files under %s to keep", db.DataDir)
		return
	}
	out := filepath.Join(os.TempDir(), fmt.Sprintf("cdcsync-fk-binlog-%d.txt", seed))
	f, err := os.Create(out)
	if err != nil {
		t.Logf("keep the binlog: %v", err)
		return
	}
	defer f.Close()
	cmd := exec.Command("mariadb-binlog", append([]string{"--verbose", "--base64-output=DECODE-ROWS"}, files...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		t.Logf("mariadb-binlog: %v (partial output in %s)", err, out)
		return
	}
	t.Logf("the decoded binlog is kept in %s", out)
}
