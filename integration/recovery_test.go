package integration

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

// TestCatalogRestoredFromBackup: with cdcsync stopped, the SQLite catalog
// is restored from a copy taken two workload rounds earlier (an everyday
// backup restore), while the pipeline checkpoint in the warehouse stays
// newer. The tables' own committed positions are the truth: the next run
// starts the stream before them, replays what they lack, and every table
// equals MySQL (issue 14: it resumed from the checkpoint and skipped
// thousands of transactions for every table, silently).
func TestCatalogRestoredFromBackup(t *testing.T) {
	dbName := "it_restore"
	e := newEnv(t, dbName, envOptions{tables: fmt.Sprintf(workloadTables, dbName)})
	createWorkloadSchema(t, dbName)
	w := newWorkload(t, dbName, uint64(time.Now().UnixNano()))
	w.run(t, 100)
	p := e.start()
	e.waitCaughtUp(p, 2*time.Minute)
	w.run(t, 150)
	e.waitCaughtUp(p, 2*time.Minute)
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM; output:\n%s", code, p.output())
	}

	catalog := filepath.Join(e.dir, "catalog.db")
	backup := catalog + ".backup"
	backupSQLite(t, catalog, backup)

	p = e.start()
	for i := 0; i < 2; i++ {
		w.run(t, 200)
		e.waitCaughtUp(p, 2*time.Minute)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM; output:\n%s", code, p.output())
	}

	// The restore: the catalog as it was, the checkpoint as it is.
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(catalog + suffix); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	copyFile(t, backup, catalog)

	p = e.start()
	w.run(t, 50)
	e.waitCaughtUp(p, 2*time.Minute)
	for _, tbl := range mirroredTables {
		e.assertMirrors(tbl)
	}
	if !strings.Contains(p.output(), "tables are behind the pipeline checkpoint") {
		t.Errorf("cdcsync did not say the tables are behind the checkpoint; output:\n%s", p.output())
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM; output:\n%s", code, p.output())
	}
}

// backupSQLite writes a consistent copy of a SQLite database, as its
// .backup command would.
func backupSQLite(t *testing.T, from, to string) {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+from)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec("VACUUM INTO ?", to); err != nil {
		t.Fatalf("back up %s: %v", from, err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestPurgedPositionExits: when the binlog cdcsync needs was purged while
// it was stopped, check fails naming the tables, and run exits 1 before it
// streams with the tables, what is missing and the recovery, instead of
// retrying for ever as a lost connection; after `cdcsync resync --offline
// --all`, the next run copies them afresh from the server's current
// position (not the purged checkpoint) and they equal MySQL. Purged once
// more, with source.on_position_lost: recopy run copies them again by
// itself (issue 14).
func TestPurgedPositionExits(t *testing.T) {
	server, err := testenv.StartMariaDB(testenv.MariaDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Stop()
	const dbName = "it_purged"
	e := newEnv(t, dbName, envOptions{server: server})
	e.exec("CREATE TABLE " + dbName + ".a (id INT PRIMARY KEY, v INT)")
	e.exec("CREATE TABLE " + dbName + ".b (id INT PRIMARY KEY, v INT)")
	e.exec("INSERT INTO " + dbName + ".a VALUES (1, 1)")
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM; output:\n%s", code, p.output())
	}
	e.exec("INSERT INTO " + dbName + ".a VALUES (2, 2)")
	e.exec("INSERT INTO " + dbName + ".b VALUES (1, 1)")
	e.exec("FLUSH BINARY LOGS")
	// The stopped daemon's dump thread may linger a moment; the purge waits.
	if err := server.PurgeOldBinlogs(); err != nil {
		t.Fatal(err)
	}

	// check names the tables whose position is gone, and the recovery.
	out, code := runCLI(t, "check", "--config", e.cfgPath)
	if code != 1 {
		t.Errorf("check exited %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{"FAIL  binlog positions", dbName + ".a is committed up to", "purged the binlog after it",
		"cdcsync resync --offline --config FILE " + dbName + ".b"} {
		if !strings.Contains(out, want) {
			t.Errorf("check's output lacks %q:\n%s", want, out)
		}
	}

	// run refuses before it streams, with the same.
	e.start().expectExit(t, 1, "cannot stream what these tables need", dbName+".a at mariadb:", "purged the binlog after it",
		"cdcsync resync --offline --config FILE "+dbName+".a "+dbName+".b", "on_position_lost: recopy")

	if out, code := runCLI(t, "resync", "--config", e.cfgPath, "--offline", "--all"); code != 0 || strings.Count(out, "is marked") != 2 {
		t.Fatalf("resync --all exited %d:\n%s", code, out)
	}
	p = e.start()
	e.exec("INSERT INTO " + dbName + ".b VALUES (2, 2)")
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("a")
	e.assertMirrors("b")
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM; output:\n%s", code, p.output())
	}

	// With source.on_position_lost: recopy, run copies the tables whose
	// position is gone again by itself.
	e.exec("INSERT INTO " + dbName + ".a VALUES (3, 3)")
	e.exec("UPDATE " + dbName + ".b SET v = 5")
	e.exec("FLUSH BINARY LOGS")
	if err := server.PurgeOldBinlogs(); err != nil {
		t.Fatal(err)
	}
	e.rewriteConfig("  server_id:", "  on_position_lost: recopy\n  server_id:")
	p = e.start()
	e.exec("INSERT INTO " + dbName + ".a VALUES (4, 4)")
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("a")
	e.assertMirrors("b")
	if strings.Count(p.output(), "copying it again from the current position") != 2 {
		t.Errorf("the log does not say that both tables are copied again:\n%s", p.output())
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM; output:\n%s", code, p.output())
	}
}

// TestFailoverToReplica: cdcsync mirrors a primary whose GTID replica
// (log_slave_updates) follows it; the primary goes away, the replica is
// promoted, and cdcsync pointed at it resumes from its committed GTID
// positions without a resync while the workload goes on against the new
// primary: every table equals it. A server whose history lacks those
// positions (a fresh server with the same schema) is refused before any
// stream, with the reason and the recovery (issue 14).
func TestFailoverToReplica(t *testing.T) {
	primary, err := testenv.StartMariaDB(testenv.MariaDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Stop()
	replica, err := testenv.StartMariaDB(testenv.MariaDBOptions{ExtraArgs: []string{"--server-id=2", "--log-slave-updates", "--gtid-strict-mode=ON"}})
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Stop()
	if err := replica.ReplicateFrom(primary); err != nil {
		t.Fatal(err)
	}
	const dbName = "it_failover"
	e := newEnv(t, dbName, envOptions{server: primary, tables: fmt.Sprintf(workloadTables, dbName)})
	createWorkloadSchemaOn(t, primary, dbName)
	w := newWorkloadOn(t, primary, dbName, uint64(time.Now().UnixNano()))
	w.run(t, 150)
	p := e.start()
	e.waitCaughtUp(p, 2*time.Minute)
	w.run(t, 150)
	e.waitCaughtUp(p, 2*time.Minute)
	p.kill()      // the primary's host dies with cdcsync on it
	w.run(t, 100) // written on the primary after cdcsync's last commit
	if err := replica.WaitReplicated(primary, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := primary.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Exec("STOP SLAVE"); err != nil {
		t.Fatal(err)
	}

	// Promoted: cdcsync follows the replica from its own positions.
	e.rewriteConfig(fmt.Sprintf("port: %d", primary.Port), fmt.Sprintf("port: %d", replica.Port))
	e.server = replica
	p = e.start()
	w = newWorkloadOn(t, replica, dbName, uint64(time.Now().UnixNano()))
	w.run(t, 150)
	e.waitCaughtUp(p, 2*time.Minute)
	for _, tbl := range mirroredTables {
		e.assertMirrors(tbl)
	}
	if strings.Contains(p.output(), "initial copy starting") {
		t.Errorf("cdcsync copied tables again after the failover; it must resume from its positions:\n%s", p.output())
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM; output:\n%s", code, p.output())
	}

	// A server with the same tables but not the history is refused.
	other, err := testenv.StartMariaDB(testenv.MariaDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	if err := other.Exec("CREATE DATABASE " + dbName); err != nil {
		t.Fatal(err)
	}
	createWorkloadSchemaOn(t, other, dbName)
	e.rewriteConfig(fmt.Sprintf("port: %d", replica.Port), fmt.Sprintf("port: %d", other.Port))
	e.start().expectExit(t, 1, "cannot stream what these tables need", "does not contain it", "cdcsync resync --offline")
}

// TestQuietTableAfterPurge: a table that has not changed for a long time
// holds everything up to the pipeline checkpoint. A restart streams from
// the checkpoint, not from the quiet table's last change, and the binlog
// purged since that change is no reason to refuse to run (issue 14's
// "behind the checkpoint" rule made every restart replay from it, and made
// run exit once the server expired that binlog).
func TestQuietTableAfterPurge(t *testing.T) {
	server, err := testenv.StartMariaDB(testenv.MariaDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Stop()
	const dbName = "it_quiet"
	e := newEnv(t, dbName, envOptions{server: server})
	e.exec("CREATE TABLE " + dbName + ".busy (id INT PRIMARY KEY, v INT)")
	e.exec("CREATE TABLE " + dbName + ".quiet (id INT PRIMARY KEY, v INT)")
	e.exec("INSERT INTO " + dbName + ".quiet VALUES (1, 1)")
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	e.exec("INSERT INTO " + dbName + ".quiet VALUES (2, 2)") // its last change
	e.waitCaughtUp(p, time.Minute)
	for i := range 20 {
		e.exec(fmt.Sprintf("INSERT INTO %s.busy VALUES (%d, 1)", dbName, i))
	}
	e.waitCaughtUp(p, time.Minute)
	e.exec("FLUSH BINARY LOGS")
	for i := range 20 {
		e.exec(fmt.Sprintf("INSERT INTO %s.busy VALUES (%d, 1)", dbName, 100+i))
	}
	e.waitCaughtUp(p, time.Minute)
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM; output:\n%s", code, p.output())
	}
	// The binlog of the quiet table's last change expires.
	if err := server.PurgeOldBinlogs(); err != nil {
		t.Fatal(err)
	}
	if out, code := runCLI(t, "check", "--config", e.cfgPath); code != 0 {
		t.Errorf("check exited %d, want 0:\n%s", code, out)
	}
	p = e.start()
	e.exec("INSERT INTO " + dbName + ".busy VALUES (1000, 1)")
	e.exec("UPDATE " + dbName + ".quiet SET v = 3")
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("busy")
	e.assertMirrors("quiet")
	if strings.Contains(p.output(), "behind the pipeline checkpoint") {
		t.Errorf("cdcsync says a quiet table is behind the checkpoint:\n%s", p.output())
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM; output:\n%s", code, p.output())
	}
}
