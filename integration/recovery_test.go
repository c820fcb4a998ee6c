package integration

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
