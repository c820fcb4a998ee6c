package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

var mirroredTables = []string{"items", "pairs", "events"}

// mirrorScenario preloads rows (copied by the initial snapshot), streams a
// randomized workload, checks every table row for row, checks what the
// snapshots record, and stops cdcsync with SIGTERM.
func mirrorScenario(t *testing.T, dbName string, o envOptions) {
	o.tables = fmt.Sprintf(workloadTables, dbName)
	e := newEnv(t, dbName, o)
	createWorkloadSchema(t, dbName)
	w := newWorkload(t, dbName, uint64(time.Now().UnixNano()))
	w.run(t, 150) // rows that exist before cdcsync starts: the initial copy

	p := e.start()
	e.waitCaughtUp(p, 2*time.Minute)
	for _, tbl := range mirroredTables {
		e.assertMirrors(tbl)
	}
	w.run(t, 400) // streamed through the binlog
	e.waitCaughtUp(p, 2*time.Minute)
	for _, tbl := range mirroredTables {
		e.assertMirrors(tbl)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM, want 0; output:\n%s", code, p.output())
	}
	if t.Failed() {
		t.Logf("cdcsync output:\n%s", p.output())
	}

	// What an analyst checks in the table metadata.
	lk := e.openLake()
	ctx := context.Background()
	tbl, err := lk.LoadTable(ctx, lk.Identifier(dbName, "items"))
	if err != nil {
		t.Fatal(err)
	}
	if ids := tbl.Schema().IdentifierFieldIDs; len(ids) != 1 || ids[0] != 1 {
		t.Errorf("items identifier fields = %v, want [1] (the primary key id)", ids)
	}
	if spec := tbl.Spec(); spec.NumFields() != 1 {
		t.Errorf("items partition spec = %s, want identity(region)", spec.String())
	}
	assertEpochSnapshots(t, tbl, e.cfg.Pipeline)
}

func TestMirrorLocalWarehouse(t *testing.T) { mirrorScenario(t, "it_local", envOptions{}) }

// TestMirrorPostgresCatalog keeps the catalog in PostgreSQL, the database
// Spark's and Trino's JDBC catalogs read, with the warehouse on MinIO.
func TestMirrorPostgresCatalog(t *testing.T) {
	pg, err := testenv.StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	if err := pg.CreateDatabase("lakecat"); err != nil {
		t.Fatal(err)
	}
	mirrorScenario(t, "it_pg", envOptions{onMinIO: true, pgDSN: pg.DSN("lakecat")})
}

func TestMirrorMinIO(t *testing.T) {
	mirrorScenario(t, "it_minio", envOptions{onMinIO: true})
	objs, err := minio.ListObjects("it-minio", "lake/")
	if err != nil {
		t.Fatal(err)
	}
	var data, ckpt int
	for _, o := range objs {
		if strings.HasSuffix(o, ".parquet") {
			data++
		}
		if strings.Contains(o, "/_cdcsync/") && strings.Contains(o, "checkpoint") {
			ckpt++
		}
	}
	if data == 0 || ckpt == 0 {
		t.Fatalf("MinIO bucket holds %d parquet files and %d checkpoints; want both in the bucket", data, ckpt)
	}
}

// TestCLIShowsTables checks what a new user sees with `tables` and `cat`.
func TestCLIShowsTables(t *testing.T) {
	e := newEnv(t, "it_cli", envOptions{})
	mustExec(t, "CREATE TABLE it_cli.people (id INT PRIMARY KEY, name VARCHAR(20), born DATE)")
	mustExec(t, "INSERT INTO it_cli.people VALUES (1, 'ada', '1815-12-10'), (2, 'alan', '1912-06-23'), (3, 'grace', '1906-12-09')")
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	mustExec(t, "UPDATE it_cli.people SET name = 'Ada Lovelace' WHERE id = 1")
	mustExec(t, "DELETE FROM it_cli.people WHERE id = 2")
	e.waitCaughtUp(p, time.Minute)

	out, code := runCLI(t, "tables", "--config", e.cfgPath)
	if code != 0 || !strings.Contains(out, "it_cli.people") || !strings.Contains(out, "mariadb:0-1-") || !strings.Contains(out, "position") {
		t.Fatalf("tables exited %d:\n%s", code, out)
	}
	out, code = runCLI(t, "cat", "--config", e.cfgPath, "it_cli.people", "--limit", "10")
	if code != 0 {
		t.Fatalf("cat exited %d:\n%s", code, out)
	}
	for _, want := range []string{"Ada Lovelace", "1815-12-10", "grace", "(2 rows)"} {
		if !strings.Contains(out, want) {
			t.Errorf("cat output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "alan") {
		t.Errorf("cat shows the deleted row:\n%s", out)
	}
	// A value with a newline and a tab stays on its row's line in text, and
	// reads back exactly from json and csv; rows come in key order.
	mustExec(t, "INSERT INTO it_cli.people VALUES (0, 'a\\nb\\tc \\\\', NULL)")
	e.waitCaughtUp(p, time.Minute)
	stdout, stderr, code := runCLISplit(t, "cat", "--config", e.cfgPath, "it_cli.people")
	lines := strings.Split(stdout, "\n")
	if code != 0 || len(lines) != 5 || !strings.HasPrefix(lines[1], "0 ") || !strings.Contains(lines[1], `a\nb\tc \\`) ||
		!strings.HasSuffix(lines[1], "NULL") || !strings.HasPrefix(lines[2], "1 ") || !strings.HasPrefix(lines[3], "3 ") ||
		!strings.Contains(stderr, "(3 rows)") {
		t.Errorf("cat exited %d; want one line a row, in key order:\n%s%s", code, stdout, stderr)
	}
	stdout, stderr, code = runCLISplit(t, "cat", "--config", e.cfgPath, "it_cli.people", "--format", "json", "--limit", "2")
	if want := `{"id":0,"name":"a\nb\tc \\","born":null}` + "\n" +
		`{"id":1,"name":"Ada Lovelace","born":"1815-12-10"}` + "\n"; code != 0 || stdout != want || !strings.Contains(stderr, "(2 of 3 rows; --limit 0 prints all)") {
		t.Errorf("cat --format json exited %d:\n%s%s\nwant:\n%s", code, stdout, stderr, want)
	}
	stdout, stderr, code = runCLISplit(t, "cat", "--config", e.cfgPath, "it_cli.people", "--format", "csv")
	if want := "id,name,born\n0,\"a\nb\tc \\\",\n1,Ada Lovelace,1815-12-10\n3,grace,1906-12-09\n"; code != 0 || stdout != want {
		t.Errorf("cat --format csv exited %d:\n%s%s\nwant:\n%s", code, stdout, stderr, want)
	}
	// The read-only commands need no MySQL password (issue 15): the same
	// file with the password's variable unset.
	raw, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	noPassword := filepath.Join(t.TempDir(), "no-password.yaml")
	if err := os.WriteFile(noPassword, []byte(strings.ReplaceAll(string(raw), "${CDCSYNC_TEST_PASSWORD}", "${CDCSYNC_TEST_UNSET_PASSWORD}")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"tables"}, {"cat", "it_cli.people", "--limit", "1"}} {
		if out, code := runCLI(t, append(append(args[:1:1], "--config", noPassword), args[1:]...)...); code != 0 {
			t.Errorf("%s without the MySQL password exited %d:\n%s", args[0], code, out)
		}
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// runCLISplit runs the cdcsync binary and returns its stdout and stderr apart.
func runCLISplit(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	_ = cmd.Run()
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}
