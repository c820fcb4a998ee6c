package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cdcsync.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBadConfig(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "source:\n  user: u\n  servr_id: 5\n  include: [\"a.*\"]\n", []string{"line 3", `unknown key "servr_id"`, `"server_id"`}},
		{"wrong type", "source:\n  user: u\n  port: abc\n  server_id: 5\n  include: [\"a.*\"]\n", []string{"line 3", "source.port", "integer"}},
		{"missing required", "source:\n  host: 127.0.0.1\n", []string{"source.user", "source.server_id", "source.include"}},
		{"bad enum", "source:\n  user: u\n  server_id: 5\n  include: [\"a.*\"]\ncatalog:\n  type: hive\n", []string{"catalog.type", "sql", "rest"}},
		{"unset secret variable", "source:\n  user: u\n  password: ${CDCSYNC_UNSET_VAR_FOR_TEST}\n  server_id: 5\n  include: [\"a.*\"]\n", []string{"CDCSYNC_UNSET_VAR_FOR_TEST"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, sub := range []string{"run", "check"} {
				out, code := runCLI(t, sub, "--config", writeConfig(t, tc.yaml))
				if code != 2 {
					t.Errorf("%s exited %d, want 2; output:\n%s", sub, code, out)
				}
				for _, w := range tc.want {
					if !strings.Contains(out, w) {
						t.Errorf("%s output lacks %q:\n%s", sub, w, out)
					}
				}
			}
		})
	}
	out, code := runCLI(t, "run")
	if code != 2 || !strings.Contains(out, "--config") {
		t.Errorf("run without --config exited %d:\n%s", code, out)
	}
	out, code = runCLI(t, "frobnicate")
	if code != 2 || !strings.Contains(out, `unknown subcommand "frobnicate"`) {
		t.Errorf("unknown subcommand exited %d:\n%s", code, out)
	}
}

// sourceConfig is a valid config against a server, user and include list,
// with an admin socket of its own (the default one is named after the
// pipeline and shared by every run on the machine).
func sourceConfig(t *testing.T, port int, user, password, include, extra string) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("CDCSYNC_TEST_BAD_PASSWORD", password)
	return writeConfig(t, fmt.Sprintf(`source:
  host: 127.0.0.1
  port: %d
  user: %s
  password: ${CDCSYNC_TEST_BAD_PASSWORD}
  server_id: 9500
  include: [%q]
warehouse:
  location: %s
catalog:
  sql:
    dsn: %s
http:
  listen: "off"
admin:
  listen: %s
%s`, port, user, include, filepath.Join(dir, "wh"), filepath.Join(dir, "cat.db"), filepath.Join(dir, "admin.sock"), extra))
}

func expectCheckFails(t *testing.T, cfg, secret string, wants ...string) {
	t.Helper()
	for _, sub := range []string{"check", "run"} {
		out, code := runCLI(t, sub, "--config", cfg)
		if code != 1 {
			t.Errorf("%s exited %d, want 1; output:\n%s", sub, code, out)
		}
		for _, w := range wants {
			if !strings.Contains(strings.ToLower(out), strings.ToLower(w)) {
				t.Errorf("%s output lacks %q:\n%s", sub, w, out)
			}
		}
		if secret != "" && strings.Contains(out, secret) {
			t.Errorf("%s output contains the password:\n%s", sub, out)
		}
	}
}

// TestPreflightMisconfiguredServer runs check and run against a server with
// every binlog setting wrong: each problem gets its own message.
func TestPreflightMisconfiguredServer(t *testing.T) {
	bad, err := testenv.StartMariaDB(testenv.MariaDBOptions{ExtraArgs: []string{
		"--binlog-format=STATEMENT", "--binlog-row-image=MINIMAL", "--binlog-row-metadata=MINIMAL"}})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Stop()
	if err := bad.Exec("CREATE DATABASE shop"); err != nil {
		t.Fatal(err)
	}
	if err := bad.Exec("CREATE TABLE shop.t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	cfg := sourceConfig(t, bad.Port, testenv.ReplUser, testenv.ReplPassword, "shop.*", "")
	expectCheckFails(t, cfg, testenv.ReplPassword, "binlog_format", "ROW", "binlog_row_image", "FULL", "binlog_row_metadata")

	off, err := testenv.StartMariaDB(testenv.MariaDBOptions{ExtraArgs: []string{"--skip-log-bin"}})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Stop()
	if err := off.Exec("CREATE DATABASE shop"); err != nil {
		t.Fatal(err)
	}
	if err := off.Exec("CREATE TABLE shop.t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	cfg = sourceConfig(t, off.Port, testenv.ReplUser, testenv.ReplPassword, "shop.*", "")
	expectCheckFails(t, cfg, testenv.ReplPassword, "log_bin")
}

func TestPreflightTablesAndPrivileges(t *testing.T) {
	mustExec(t, "DROP DATABASE IF EXISTS it_bad")
	mustExec(t, "CREATE DATABASE it_bad")
	mustExec(t, "CREATE TABLE it_bad.nopk (a INT, b VARCHAR(10))")
	mustExec(t, "CREATE TABLE it_bad.withbig5 (id INT PRIMARY KEY, state VARCHAR(10) CHARACTER SET big5)")
	mustExec(t, "CREATE TABLE it_bad.fine (id INT PRIMARY KEY)")

	cfg := sourceConfig(t, db.Port, testenv.ReplUser, testenv.ReplPassword, "it_bad.*", "")
	expectCheckFails(t, cfg, testenv.ReplPassword, "it_bad.nopk", "primary key", "!it_bad.nopk", "it_bad.withbig5", "state", "big5")

	cfg = sourceConfig(t, db.Port, testenv.NoReplUser, testenv.NoReplPassword, "it_bad.fine", "")
	expectCheckFails(t, cfg, "", "REPLICATION SLAVE", "GRANT")

	cfg = sourceConfig(t, db.Port, testenv.ReplUser, "wrong-password-4711", "it_bad.fine", "")
	expectCheckFails(t, cfg, "wrong-password-4711", "access denied")

	// Patterns that select no table yet are a warning: the tables may be
	// created after the mirror starts (TestStartBeforeTheTablesExist).
	cfg = sourceConfig(t, db.Port, testenv.ReplUser, testenv.ReplPassword, "nosuchdb.*", "")
	out, code := runCLI(t, "check", "--config", cfg)
	if code != 0 || !strings.Contains(out, `warn  tables                   source.include selects no table on`) || !strings.Contains(out, `"nosuchdb.*" matched no table`) {
		t.Errorf("check with patterns that select no table yet: exit %d, want 0 and a warning naming the pattern:\n%s", code, out)
	}
}

func TestPreflightUnreachableLake(t *testing.T) {
	mustExec(t, "CREATE DATABASE IF NOT EXISTS it_lake")
	mustExec(t, "CREATE TABLE IF NOT EXISTS it_lake.t (id INT PRIMARY KEY)")
	t.Setenv("CDCSYNC_TEST_S3_SECRET", testenv.MinIOSecretKey)
	cfg := sourceConfig(t, db.Port, testenv.ReplUser, testenv.ReplPassword, "it_lake.*", "")
	// A bucket that does not exist.
	body, _ := os.ReadFile(cfg)
	s := strings.Replace(string(body), "warehouse:\n  location: ", "warehouse:\n  s3:\n    endpoint: "+minio.Endpoint+
		"\n    path_style: true\n    access_key_id: "+testenv.MinIOAccessKey+"\n    secret_access_key: ${CDCSYNC_TEST_S3_SECRET}\n  location: s3://no-such-bucket/x #", 1)
	if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	expectCheckFails(t, cfg, testenv.MinIOSecretKey, "warehouse", "no-such-bucket")

	// A PostgreSQL catalog on a port where nothing listens.
	cfg = sourceConfig(t, db.Port, testenv.ReplUser, testenv.ReplPassword, "it_lake.*", "")
	body, _ = os.ReadFile(cfg)
	s = strings.Replace(string(body), "catalog:\n  sql:\n    dsn: ", "catalog:\n  sql:\n    driver: postgres\n    dsn: postgres://u:pgsecret42@127.0.0.1:1/db #", 1)
	if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	expectCheckFails(t, cfg, "pgsecret42", "catalog")
}
