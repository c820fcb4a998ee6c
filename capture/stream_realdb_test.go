package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
	"github.com/cdcsync/cdcsync/config"
)

// TestStreamReconnects: a binlog connection that the server drops, between
// transactions or in the middle of one, and a reader that stalls for longer
// than the server's net_write_timeout (what a slow commit downstream does)
// cost nothing: Stream opens a new connection at the end of the last
// transaction it sent and goes on, every transaction arrives once, whole and
// in order, and Stream itself never returns (issue 23: the server dropped
// the connection during slow commits and the session restarted).
func TestStreamReconnects(t *testing.T) {
	db := rdbStart(t)
	for _, mode := range []string{"gtid", "file"} {
		t.Run(mode, func(t *testing.T) { streamReconnects(t, db.Host, db.Port, mode) })
	}
}

func streamReconnects(t *testing.T, host string, port int, mode string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := rdbConnect(t, rdbSource(host, port, "root", ""))
	dbName := "rc_" + mode
	rdbExec(t, root, "CREATE DATABASE "+dbName,
		"CREATE TABLE "+dbName+".t (id INT PRIMARY KEY, pad VARCHAR(4000))")
	id := cdcsync.TableID{Database: dbName, Table: "t"}
	schema, err := LoadSchema(ctx, root, id)
	if err != nil {
		t.Fatal(err)
	}
	at := binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, ServerUUID: "test"}
	if mode == "gtid" {
		at.GTIDSet = rdbQueryString(t, root, "SELECT @@gtid_binlog_pos")
	} else {
		r, err := root.Execute("SHOW MASTER STATUS")
		if err != nil {
			t.Fatal(err)
		}
		at.File, at.Offset = connText(r.Values[0][0]), uint32(r.Values[0][1].AsUint64())
	}
	start := at.Position()
	// The server drops a reader that stops reading for a second; the
	// sessions of the stream take the global value when they connect.
	rdbExec(t, root, "SET GLOBAL net_write_timeout = 1")
	t.Cleanup(func() { _, _ = root.Execute("SET GLOBAL net_write_timeout = 60") })
	var logs syncBuffer
	src := rdbSource(host, port, "root", "")
	cfg := StreamConfig{Source: src, Flavor: binlogpos.FlavorMariaDB, ServerUUID: "test", Start: start,
		Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{id: schema},
		Log:     slog.New(slog.NewTextHandler(&logs, nil))}
	out := make(chan *cdcsync.Txn)
	streamErr := make(chan error, 1)
	go func() { streamErr <- Stream(ctx, cfg, out) }()

	// Two loads of transactions of one row, every 50th of 400 rows (so
	// that kills land inside transactions too), each row with a 3 KB pad.
	// The first (about 9,000 rows, 27 MB) is written while the reader
	// does not read for three seconds, so the server's writes block and it
	// drops the connection after net_write_timeout; the second is paced
	// over about six seconds while the dump thread is killed every 50 ms.
	const bigEvery, bigRows = 50, 400
	writer := rdbConnect(t, src)
	next := 1
	insert := func(txns int, pace time.Duration) (rows int, err error) {
		pad := strings.Repeat("x", 3000)
		for i := 1; i <= txns; i++ {
			n := 1
			if i%bigEvery == 0 {
				n = bigRows
			}
			var vals []string
			for j := 0; j < n; j++ {
				vals = append(vals, fmt.Sprintf("(%d, '%s')", next, pad))
				next++
			}
			if _, err := writer.Execute("INSERT INTO " + dbName + ".t VALUES " + strings.Join(vals, ",")); err != nil {
				return rows, err
			}
			rows += n
			time.Sleep(pace)
		}
		return rows, nil
	}
	stallRows, err := insert(1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	const txns = 1500
	wantRows := stallRows
	for i := 1; i <= txns; i++ {
		if i%bigEvery == 0 {
			wantRows += bigRows
		} else {
			wantRows++
		}
	}
	load := make(chan error, 1)
	startLoad := make(chan struct{})
	go func() {
		<-startLoad
		_, err := insert(txns, 4*time.Millisecond)
		load <- err
	}()

	// The server drops the reader: KILL of its dump thread during the
	// second load, until four fifths of the rows have arrived, each time
	// 1,000 more rows have arrived than at the last kill (more than
	// go-mysql reads ahead), so that every connection killed has sent
	// transactions, however slow the machine: Stream gives up only on
	// connections that never do.
	killer := rdbConnect(t, src)
	kills := 0
	var killErr error
	var rowsSeen atomic.Int64
	startKilling, quit, killDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(killDone)
		select {
		case <-startKilling:
		case <-quit:
			return
		}
		lastKill := rowsSeen.Load()
		for {
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if rowsSeen.Load() < lastKill+1000 {
				continue
			}
			n, err := killDumpThreads(killer)
			if err != nil {
				killErr = err
				return
			}
			kills += n
			lastKill = rowsSeen.Load()
		}
	}()
	stopKiller := sync.OnceFunc(func() { close(quit); <-killDone })
	t.Cleanup(stopKiller) // before the connections close, also on a failure

	// Read everything; the second load and the kills start once the first
	// load has arrived.
	seen := map[int32]bool{}
	var last cdcsync.Position
	got, loading := 0, false
	deadline := time.After(3 * time.Minute)
	for got < wantRows {
		select {
		case txn := <-out:
			if txn.Progress {
				continue
			}
			if !last.IsZero() && !after(txn, last) {
				t.Fatalf("transaction at %s arrived after %s: out of order or twice", txn.Pos, last)
			}
			last = txn.Pos
			n := 0
			for _, c := range txn.Changes {
				if c.Table != id {
					continue
				}
				k := c.After[0].(int32)
				if seen[k] {
					t.Fatalf("row %d arrived twice (transaction at %s)", k, txn.Pos)
				}
				seen[k] = true
				n++
			}
			if n != 0 && n != 1 && n != bigRows {
				t.Fatalf("a transaction arrived with %d rows, want 1 or %d: not whole", n, bigRows)
			}
			got += n
			rowsSeen.Store(int64(got))
			if got >= wantRows*4/5 {
				stopKiller()
			}
			if !loading && got >= stallRows {
				loading = true
				close(startLoad)
				close(startKilling)
			}
		case err := <-streamErr:
			t.Fatalf("Stream returned %v after %d of %d rows; log:\n%s", err, got, wantRows, logs.String())
		case <-deadline:
			t.Fatalf("%d of %d rows after 3 minutes; log:\n%s", got, wantRows, logs.String())
		}
	}
	if err := <-load; err != nil {
		t.Fatal(err)
	}
	if killErr != nil {
		t.Fatal(killErr)
	}
	reconnects := strings.Count(logs.String(), "reconnecting at the end of the last transaction read")
	t.Logf("%s: %d rows in %d transactions, %d kills, %d reconnects", mode, got, txns, kills, reconnects)
	// Every kill and the stall cost a connection, and none the session.
	if kills < 3 || reconnects < kills+1 {
		t.Errorf("%d reconnects logged for %d kills; log:\n%s", reconnects, kills, logs.String())
	}
	cancel()
	if err := <-streamErr; err != nil {
		t.Fatalf("Stream after cancel: %v", err)
	}
}

// after says whether txn comes after the position last of the same stream,
// which does not hold it yet.
func after(txn *cdcsync.Txn, last cdcsync.Position) bool {
	covered, err := (binlogpos.Order{}).Covers(last, txn)
	return err == nil && !covered
}

// killDumpThreads kills every binlog dump connection of the server and
// returns how many it killed.
func killDumpThreads(conn *client.Conn) (int, error) {
	r, err := conn.Execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, row := range r.Values {
		if _, err := conn.Execute(fmt.Sprintf("KILL %d", row[0].AsInt64())); err == nil {
			n++
		}
	}
	return n, nil
}

// syncBuffer is a bytes.Buffer that goroutines may write concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStreamPositionLost: a start position whose binlog the server purged
// ends the stream at once with cdcsync.ErrPositionLost and the recovery, in GTID
// and file/offset mode (issue 14: ERROR 1236 was retried for ever as a lost
// connection).
func TestStreamPositionLost(t *testing.T) {
	db := rdbStart(t)
	root := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	rdbExec(t, root, "CREATE DATABASE pl", "CREATE TABLE pl.t (id INT PRIMARY KEY)", "INSERT INTO pl.t VALUES (1)")
	gtid := rdbQueryString(t, root, "SELECT @@gtid_binlog_pos")
	r, err := root.Execute("SHOW MASTER STATUS")
	if err != nil {
		t.Fatal(err)
	}
	file, off := connText(r.Values[0][0]), uint32(r.Values[0][1].AsUint64())
	rdbExec(t, root, "INSERT INTO pl.t VALUES (2)", "FLUSH BINARY LOGS", "INSERT INTO pl.t VALUES (3)")
	if err := db.PurgeOldBinlogs(); err != nil {
		t.Fatal(err)
	}
	// ReadBinlog says so before any stream is tried (check, run).
	b, err := ReadBinlog(context.Background(), root, binlogpos.FlavorMariaDB, "test")
	if err != nil {
		t.Fatal(err)
	}
	now := rdbQueryString(t, root, "SELECT @@gtid_binlog_pos")
	for _, c := range []struct {
		pos  cdcsync.Position
		want string // in the problem; "" = none
	}{
		{binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: gtid}.Position(), "purged"},
		{binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, File: file, Offset: off, ServerUUID: "test"}.Position(), "no longer on the server"},
		{binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: now}.Position(), ""},
		{binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: "0-1-99999999"}.Position(), "does not contain it"},
		{binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, File: file, Offset: off, ServerUUID: "other"}.Position(), "file positions do not carry across servers"},
	} {
		got, err := b.Missing(c.pos)
		if err != nil {
			t.Fatal(err)
		}
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("Missing(%s) = %q, want %q", c.pos, got, c.want)
		}
	}
	for _, start := range []cdcsync.Position{
		binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: gtid}.Position(),
		binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, File: file, Offset: off, ServerUUID: "test"}.Position(),
	} {
		cfg := StreamConfig{Source: rdbSource(db.Host, db.Port, "root", ""), Flavor: binlogpos.FlavorMariaDB, ServerUUID: "test", Start: start}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := Stream(ctx, cfg, make(chan *cdcsync.Txn, 16))
		cancel()
		if !errors.Is(err, cdcsync.ErrPositionLost) || errors.Is(err, ErrDisconnected) {
			t.Errorf("from %s: Stream returned %v, want cdcsync.ErrPositionLost (and not a lost connection)", start, err)
			continue
		}
		for _, want := range []string{"1236", "cdcsync resync"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("from %s: the error lacks %q: %v", start, want, err)
			}
		}
	}
}

// Without gtid_strict_mode MariaDB lets a session write a GTID whose
// sequence number is below its domain's last one. A position holds the last
// sequence number per domain, so after a restart that transaction would be
// skipped: the stream stops on it with ErrGTIDOrder and the fix, and the
// preflight warns about the setting (issue 13).
func TestStreamStopsWhenGTIDsGoBack(t *testing.T) {
	db := rdbStart(t, "--gtid-strict-mode=OFF")
	root := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	rdbExec(t, root, "CREATE DATABASE go", "CREATE TABLE go.t (id INT PRIMARY KEY)", "INSERT INTO go.t VALUES (1)")

	findings, _, err := Preflight(context.Background(), root, &config.Source{Host: db.Host, Port: db.Port, User: "root", ServerID: 4242, Include: []string{"go.*"}})
	if err != nil {
		t.Fatal(err)
	}
	warned := false
	for _, f := range findings {
		warned = warned || (f.Check == "gtid" && f.Warning && strings.Contains(f.Message, "SET GLOBAL gtid_strict_mode=ON"))
	}
	if !warned {
		t.Errorf("the preflight does not warn that gtid_strict_mode is off: %+v", findings)
	}

	start := rdbQueryString(t, root, "SELECT @@gtid_binlog_pos")
	cfg := StreamConfig{Source: rdbSource(db.Host, db.Port, "root", ""), Flavor: binlogpos.FlavorMariaDB, ServerUUID: "test",
		Start: binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: start}.Position()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := make(chan *cdcsync.Txn, 64)
	done := make(chan error, 1)
	go func() { done <- Stream(ctx, cfg, out) }()
	rdbExec(t, root, "INSERT INTO go.t VALUES (2)", "INSERT INTO go.t VALUES (3)")
	for got := 0; got < 2; {
		select {
		case txn := <-out:
			if !txn.Progress {
				got++
			}
		case err := <-done:
			t.Fatalf("Stream returned early: %v", err)
		}
	}
	rdbExec(t, root, "SET SESSION gtid_seq_no = 2", "INSERT INTO go.t VALUES (4)")
	err = <-done
	if !errors.Is(err, ErrGTIDOrder) || !strings.Contains(err.Error(), "gtid_strict_mode") {
		t.Fatalf("Stream returned %v, want ErrGTIDOrder naming gtid_strict_mode", err)
	}
	t.Log(err)
}
