package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// TestStreamXA: on the real MariaDB, the rows of an XA transaction arrive
// once, at its XA COMMIT (not at its PREPARE, and never when it is rolled
// back), interleaved with ordinary transactions; XA COMMIT ... ONE PHASE
// is an ordinary commit; while a transaction is prepared every transaction
// carries the position before its PREPARE in Resume, and a stream restarted
// from there, with the table committed past the PREPARE, applies its rows
// at the XA COMMIT. Before the fix, the prepared rows were attributed to no
// transaction and lost (issue 13).
func TestStreamXA(t *testing.T) {
	db := rdbStart(t)
	for _, mode := range []string{"gtid", "file"} {
		t.Run(mode, func(t *testing.T) { streamXA(t, db.Host, db.Port, mode) })
	}
}

func streamXA(t *testing.T, host string, port int, mode string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := rdbSource(host, port, "root", "")
	root := rdbConnect(t, src)
	dbName := "xa_" + mode
	rdbExec(t, root, "CREATE DATABASE "+dbName, "CREATE TABLE "+dbName+".t (id INT PRIMARY KEY, v INT)",
		"INSERT INTO "+dbName+".t VALUES (1, 1)")
	id := cdcsync.TableID{Database: dbName, Table: "t"}
	schema, err := LoadSchema(ctx, root, id)
	if err != nil {
		t.Fatal(err)
	}
	current := func() cdcsync.Position {
		p, err := CurrentPosition(ctx, root, binlogpos.FlavorMariaDB, "test")
		if err != nil {
			t.Fatal(err)
		}
		if mode == "file" {
			p = withSet(p, "")
		}
		return p
	}
	stream := func(start cdcsync.Position, committed cdcsync.Position) (<-chan *cdcsync.Txn, func()) {
		sctx, stop := context.WithCancel(ctx)
		cfg := StreamConfig{Source: src, Flavor: binlogpos.FlavorMariaDB, ServerUUID: "test", Start: start,
			Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{id: schema}}
		if !committed.IsZero() {
			cfg.Committed = map[cdcsync.TableID]cdcsync.Position{id: committed}
		}
		out := make(chan *cdcsync.Txn, 256)
		done := make(chan error, 1)
		go func() { done <- Stream(sctx, cfg, out) }()
		return out, func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("Stream: %v", err)
			}
		}
	}
	// next returns the next transaction (not a progress marker).
	next := func(out <-chan *cdcsync.Txn) *cdcsync.Txn {
		t.Helper()
		for {
			select {
			case txn := <-out:
				if !txn.Progress {
					return txn
				}
			case <-ctx.Done():
				t.Fatal("no transaction arrived")
			}
		}
	}
	// rows describes a transaction's changes as "op:id=v" in order.
	rows := func(txn *cdcsync.Txn) string {
		var s []string
		for _, c := range txn.Changes {
			r := c.After
			if c.Op == cdcsync.OpDelete {
				r = c.Before
			}
			s = append(s, fmt.Sprintf("%s:%v=%v", c.Op, r[0], r[1]))
		}
		return strings.Join(s, " ")
	}
	session := func() func(...string) {
		c := rdbConnect(t, src)
		return func(stmts ...string) { t.Helper(); rdbExec(t, c, stmts...) }
	}

	start := current()
	out, stop := stream(start, cdcsync.Position{})
	tb := dbName + ".t"
	a, b := session(), session()
	a("INSERT INTO " + tb + " VALUES (2, 2)")
	beforeX1 := current()
	a("XA START '"+mode+"x1'", "INSERT INTO "+tb+" VALUES (3, 3)", "UPDATE "+tb+" SET v = 10 WHERE id = 1", "XA END '"+mode+"x1'", "XA PREPARE '"+mode+"x1'")
	b("INSERT INTO " + tb + " VALUES (4, 4)")
	a("XA COMMIT '" + mode + "x1'")
	a("XA START '"+mode+"x2'", "INSERT INTO "+tb+" VALUES (5, 5)", "XA END '"+mode+"x2'", "XA PREPARE '"+mode+"x2'", "XA ROLLBACK '"+mode+"x2'")
	a("XA START '"+mode+"x3'", "INSERT INTO "+tb+" VALUES (6, 6)", "XA END '"+mode+"x3'", "XA COMMIT '"+mode+"x3' ONE PHASE")
	beforeX4 := current()
	a("XA START '"+mode+"x4'", "INSERT INTO "+tb+" VALUES (7, 7)", "DELETE FROM "+tb+" WHERE id = 2", "XA END '"+mode+"x4'", "XA PREPARE '"+mode+"x4'")
	b("INSERT INTO " + tb + " VALUES (8, 8)")
	xids, err := PreparedXA(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("x'%x',x'',1", mode+"x4"); len(xids) != 1 || xids[0] != want {
		t.Errorf("PreparedXA = %q, want [%s] as the binlog spells it", xids, want)
	}

	type want struct {
		rows   string
		resume cdcsync.Position
	}
	wants := []want{
		{"insert:2=2", cdcsync.Position{}},
		{"", beforeX1},                                 // PREPARE x1
		{"insert:4=4", beforeX1},                       // while x1 is prepared
		{"insert:3=3 update:1=10", cdcsync.Position{}}, // XA COMMIT x1
		{"", cdcsync.Position{}},                       // PREPARE x2 (checked below)
		{"", cdcsync.Position{}},                       // XA ROLLBACK x2
		{"insert:6=6", cdcsync.Position{}},             // ONE PHASE
		{"", beforeX4},                                 // PREPARE x4
		{"insert:8=8", beforeX4},
	}
	var last *cdcsync.Txn
	for i, w := range wants {
		txn := next(out)
		t.Logf("transaction %d: %q at %v, resume %v", i, rows(txn), txn.Pos, txn.Resume)
		got := rows(txn)
		if got != w.rows {
			t.Fatalf("transaction %d holds %q, want %q", i, got, w.rows)
		}
		if i == 4 { // the PREPARE of x2 resumes before itself, a position not read above
			if txn.Resume.IsZero() {
				t.Errorf("transaction %d (the PREPARE of x2) has no Resume", i)
			}
		} else if txn.Resume != w.resume {
			t.Errorf("transaction %d (%q) resumes at %v, want %v", i, got, txn.Resume, w.resume)
		}
		last = txn
	}
	stop()

	// A restart from the checkpoint the last transaction gives (its
	// Resume), with the table committed up to that transaction: the
	// transactions it holds are passed over, the PREPARE of x4 is read
	// again, and its rows arrive at the XA COMMIT.
	out, stop = stream(last.Resume, last.Pos)
	defer stop()
	a("XA COMMIT '" + mode + "x4'")
	var got []string
	for {
		txn := next(out)
		if txn.Pos == last.Pos || rows(txn) == "" {
			continue
		}
		got = append(got, rows(txn))
		break
	}
	if strings.Join(got, ",") != "insert:7=7 delete:2=2" {
		t.Fatalf("after the restart the XA COMMIT of x4 brought %q, want its two rows", got)
	}
}
