package integration

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

// xaLoad runs XA transactions next to the randomized workload, on keys the
// workload does not touch (items 1000-1099, pairs 'x'/'y'), so that a
// prepared transaction's locks do not stall it for long. Each transaction
// prepares on a connection of its own, which then disconnects (MariaDB
// keeps the transaction prepared), and ends later from another connection,
// interleaved with the workload's transactions and with other XA ones.
type xaLoad struct {
	t        *testing.T
	dbName   string
	r        *rand.Rand
	ctl      *client.Conn
	n        int
	prepared []string // open, oldest first
	counts   map[string]int
}

func newXALoad(t *testing.T, dbName string, seed uint64) *xaLoad {
	ctl, err := db.Connect(testenv.RootUser, "", dbName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	return &xaLoad{t: t, dbName: dbName, r: rand.New(rand.NewPCG(seed, 3)), ctl: ctl, counts: map[string]int{}}
}

// prepare runs one XA transaction up to its PREPARE and leaves it open; with
// onePhase it commits it at once instead (XA COMMIT ... ONE PHASE).
func (x *xaLoad) prepare(onePhase bool) error {
	x.n++
	xid := fmt.Sprintf("'%s-%d'", x.dbName, x.n)
	c, err := db.Connect(testenv.RootUser, "", x.dbName)
	if err != nil {
		return err
	}
	defer c.Close()
	// A prepared transaction's locks can close a cycle InnoDB cannot see:
	// a workload statement's next-key locks reach into these keys and wait
	// for a prepared transaction, while this goroutine (the only one that
	// ends prepared transactions) waits for that statement's gap lock. A
	// short lock wait here breaks the cycle; the transaction is dropped.
	stmts := []string{"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", "SET SESSION innodb_lock_wait_timeout = 1", "XA START " + xid}
	// Each transaction has keys of its own among the (at most three) open
	// ones: one waiting for the locks of another prepared one would wait
	// for ever, since this goroutine ends them.
	slot := x.n % 30
	// The first statement always changes a row: MariaDB rolls back a
	// read-only XA transaction at its PREPARE.
	for i := 0; i < 1+x.r.IntN(4); i++ {
		id := 1000 + 3*slot + x.r.IntN(3)
		op := x.r.IntN(5)
		if i == 0 {
			op = 0
		}
		switch op {
		case 0, 1:
			stmts = append(stmts, fmt.Sprintf("INSERT INTO items (id, region, name, qty) VALUES (%d, 'eu', 'xa-%d', %d) "+
				"ON DUPLICATE KEY UPDATE name = VALUES(name), qty = qty + 1", id, x.n, x.n))
		case 2:
			stmts = append(stmts, fmt.Sprintf("UPDATE items SET region = '%s', price = %d.25 WHERE id = %d", regions[x.r.IntN(len(regions))], x.n, id))
		case 3:
			stmts = append(stmts, fmt.Sprintf("DELETE FROM items WHERE id = %d", id))
		default:
			stmts = append(stmts, fmt.Sprintf("INSERT INTO pairs (a, b, v) VALUES ('%c', %d, %d) ON DUPLICATE KEY UPDATE v = v + 1",
				'x'+rune(x.r.IntN(2)), slot, x.n))
		}
	}
	stmts = append(stmts, "XA END "+xid)
	if onePhase {
		stmts = append(stmts, "XA COMMIT "+xid+" ONE PHASE")
		x.counts["one phase"]++
	} else {
		stmts = append(stmts, "XA PREPARE "+xid)
	}
	for _, s := range stmts {
		if _, err := c.Execute(s); err != nil {
			_, _ = c.Execute("XA END " + xid)
			_, _ = c.Execute("XA ROLLBACK " + xid)
			var me *mysql.MyError
			if errors.As(err, &me) && (me.Code == mysql.ER_LOCK_WAIT_TIMEOUT || me.Code == mysql.ER_LOCK_DEADLOCK) {
				x.counts["dropped on a lock wait"]++
				if onePhase {
					x.counts["one phase"]--
				}
				return nil
			}
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	if !onePhase {
		x.prepared = append(x.prepared, xid)
	}
	return nil
}

// end commits (or, one time in three, rolls back) the oldest open one.
func (x *xaLoad) end() error {
	if len(x.prepared) == 0 {
		return nil
	}
	xid := x.prepared[0]
	x.prepared = x.prepared[1:]
	verb := "COMMIT"
	if x.r.IntN(3) == 0 {
		verb = "ROLLBACK"
	}
	x.counts[verb]++
	if _, err := x.ctl.Execute("XA " + verb + " " + xid); err != nil {
		r, _ := x.ctl.Execute("XA RECOVER")
		var open []string
		if r != nil {
			for _, row := range r.Values {
				open = append(open, string(row[3].AsString()))
			}
		}
		return fmt.Errorf("XA %s %s (open: %v, prepared here: %v): %w", verb, xid, open, x.prepared, err)
	}
	return nil
}

// step prepares, commits or rolls back at random, keeping up to three open.
func (x *xaLoad) step() error {
	switch {
	case len(x.prepared) >= 3 || (len(x.prepared) > 0 && x.r.IntN(3) == 0):
		return x.end()
	case x.r.IntN(4) == 0:
		return x.prepare(true)
	default:
		return x.prepare(false)
	}
}

// TestXATransactions runs XA transactions (PREPARE then COMMIT or ROLLBACK
// from another connection, and ONE PHASE commits) next to the randomized
// workload while cdcsync is killed again and again, some kills landing
// between a PREPARE and its COMMIT: every table must equal MySQL, so a
// committed XA transaction lands exactly once and a rolled-back one leaves
// nothing. One transaction is prepared before cdcsync first starts and
// committed after its copy began: the copy waits for it. Before the fix,
// the rows of every two-phase XA transaction were lost (issue 13).
func TestXATransactions(t *testing.T) {
	const dbName = "it_xa"
	e := newEnv(t, dbName, envOptions{tables: fmt.Sprintf(workloadTables, dbName), epoch: "interval: 200ms"})
	createWorkloadSchema(t, dbName)
	seed := uint64(time.Now().UnixNano())
	w := newWorkload(t, dbName, seed)
	w.run(t, 100)
	xa := newXALoad(t, dbName, seed)
	if err := xa.prepare(false); err != nil {
		t.Fatal(err)
	}
	bin := plainBinary(t)
	p := e.startWith(bin)
	select {
	case <-p.waitFor("initial copy waits for XA transactions", 30*time.Second):
	case <-p.done:
		t.Fatalf("cdcsync exited; output:\n%s", p.output())
	}
	if err := xa.end(); err != nil {
		t.Fatal(err)
	}

	// The workload and the XA transactions run in goroutines of their own:
	// a workload statement may wait for a prepared transaction's locks
	// until the XA goroutine ends it.
	stopLoad := inBackground(t, func() error {
		if err := w.txn(); err != nil {
			return err
		}
		time.Sleep(time.Duration(w.r.IntN(3)) * time.Millisecond)
		return nil
	})
	stopXA := inBackground(t, func() error {
		if err := xa.step(); err != nil {
			return fmt.Errorf("XA: %w", err)
		}
		time.Sleep(time.Duration(50+xa.r.IntN(300)) * time.Millisecond)
		return nil
	})
	r := rand.New(rand.NewPCG(seed, 4))
	const rounds = 12
	for i := 0; i < rounds; i++ {
		time.Sleep(time.Duration(500+r.IntN(2500)) * time.Millisecond)
		p.kill()
		p = e.startWith(bin)
	}
	if err := stopXA(); err != nil {
		t.Fatal(err)
	}
	// End the prepared transactions before waiting for the workload: its
	// current statement may wait for their locks (CI once saw it time out
	// after 50 s, when they were ended only after the workload stopped).
	for len(xa.prepared) > 0 {
		if err := xa.end(); err != nil {
			t.Fatal(err)
		}
	}
	if err := stopLoad(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("XA transactions: %v", xa.counts)
	if xa.counts["COMMIT"] == 0 || xa.counts["ROLLBACK"] == 0 || xa.counts["one phase"] == 0 {
		t.Errorf("the load did not exercise every XA ending: %v", xa.counts)
	}
	e.waitCaughtUp(p, 3*time.Minute)
	for _, tbl := range mirroredTables {
		e.assertMirrors(tbl)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}
}
