package docker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// tool finds a binary in the repository's .tools (where scripts/test.sh
// installs it) or on PATH.
func tool(t *testing.T, rel, what string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if p := filepath.Join(root, ".tools", rel); fileExists(p) {
		return p
	}
	if p, err := exec.LookPath(filepath.Base(rel)); err == nil && !strings.Contains(rel, "venv") {
		return p
	}
	t.Fatalf("%s not found in .tools/%s: run scripts/test.sh, which installs it", what, rel)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func hadolint(t *testing.T) string { return tool(t, "bin/hadolint", "hadolint") }

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestQuickStartNatively runs what `docker compose up` runs, without
// Docker: the sample database of initdb/ in a MariaDB, a MinIO bucket,
// cdcsync built as the Dockerfile builds it (static, CGO_ENABLED=0) on
// compose's cdcsync.yaml with only the service addresses replaced, and
// query/query.py with DuckDB from scripts/engines.sh.
func TestQuickStartNatively(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MariaDB and MinIO")
	}
	c := readCompose(t)
	python := tool(t, "venv/bin/python", "Python with DuckDB (scripts/engines.sh)")
	dir := t.TempDir()

	db, err := testenv.StartMariaDB(testenv.MariaDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Stop() })
	minio, err := testenv.StartMinIO(filepath.Join(dir, "minio"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = minio.Stop() })

	// What the MariaDB image does with compose's environment and initdb/.
	maria := c.Services["mariadb"]
	if err := db.Exec("CREATE DATABASE " + maria.Environment["MARIADB_DATABASE"]); err != nil {
		t.Fatal(err)
	}
	sql, err := os.ReadFile(filepath.Join("initdb", "10-shop.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range strings.Split(string(sql), ";\n") {
		if strings.TrimSpace(stmt) != "" {
			if err := db.Exec(stmt); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg, cfgPath := loadComposeConfig(t, c)
	bucket := strings.SplitN(strings.TrimPrefix(cfg.Warehouse.Location, "s3://"), "/", 2)[0]
	if err := minio.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}

	// compose's cdcsync.yaml with the addresses of these servers.
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	catalog := filepath.Join(dir, "catalog.db")
	for _, r := range [][2]string{
		{"host: mariadb ", "host: 127.0.0.1 "},
		{"port: 3306\n", fmt.Sprintf("port: %d\n", db.Port)},
		{"http://minio:9000", minio.Endpoint},
		{cfg.Catalog.SQL.DSN.Value(), catalog},
		{cfg.HTTP.Listen, httpAddr},
	} {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("docker/cdcsync.yaml no longer has %q; update this test", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	native := filepath.Join(dir, "cdcsync.yaml")
	if err := os.WriteFile(native, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MYSQL_PASSWORD", testenv.ReplPassword)
	t.Setenv("MINIO_ACCESS_KEY", minio.AccessKey)
	t.Setenv("MINIO_SECRET_KEY", minio.SecretKey)
	if cfg.Source.User != testenv.ReplUser {
		t.Fatalf("the quick start's user %s is not the test server's %s", cfg.Source.User, testenv.ReplUser)
	}

	// Built as docker/Dockerfile builds it.
	bin := filepath.Join(dir, "cdcsync")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=quickstart-test", "-o", bin, "./cmd/cdcsync")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build with CGO_ENABLED=0: %v\n%s", err, out)
	}
	if out, err := execOutput("file", bin); err == nil && !strings.Contains(out, "statically linked") {
		t.Errorf("the binary is not static: %s", out)
	}

	if out, err := execOutput(bin, "check", "--config", native); err != nil {
		t.Fatalf("cdcsync check: %v\n%s", err, out)
	}
	log, err := os.Create(filepath.Join(dir, "cdcsync.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	daemon := exec.Command(bin, "run", "--config", native)
	daemon.Stdout, daemon.Stderr = log, log
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- daemon.Wait() }()
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = daemon.Process.Kill()
			<-done
		}
	})
	waitFor(t, 2*time.Minute, "cdcsync to be ready", func() bool {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, log)

	// A change in MariaDB reaches Iceberg.
	if err := db.Exec("UPDATE shop.orders SET status = 'shipped', note = 'sent today' WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the update to reach shop.orders", func() bool {
		out, err := execOutput(bin, "cat", "--config", native, "--format", "json", "shop.orders")
		return err == nil && strings.Contains(out, `{"id":2,"customer_id":2,"amount":75.50,"status":"shipped","note":"sent today",`)
	}, log)

	// DuckDB reads the same rows through query.py, as the query service does.
	q := exec.Command(python, filepath.Join("query", "query.py"), "SELECT id, status, note FROM shop.orders ORDER BY id")
	q.Env = append(os.Environ(),
		"CATALOG_DB="+catalog, "CATALOG_NAME="+cfg.Catalog.Name,
		"S3_ENDPOINT="+strings.TrimPrefix(minio.Endpoint, "http://"),
		"S3_ACCESS_KEY="+minio.AccessKey, "S3_SECRET_KEY="+minio.SecretKey)
	out, err := q.CombinedOutput()
	if err != nil {
		t.Fatalf("query.py: %v\n%s", err, out)
	}
	for _, want := range []string{"sent today", "two parcels:\\nbox A, box B", "│     5 │ new"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("query.py output lacks %q:\n%s", want, out)
		}
	}

	if err := daemon.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		exited = true
		if err != nil {
			t.Fatalf("cdcsync exited with %v after SIGTERM:\n%s", err, readLog(log))
		}
	case <-time.After(time.Minute):
		t.Fatalf("cdcsync did not stop within a minute of SIGTERM:\n%s", readLog(log))
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, ok func() bool, log *os.File) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("waited %s for %s; cdcsync's log:\n%s", timeout, what, readLog(log))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func readLog(f *os.File) string {
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return err.Error()
	}
	return string(b)
}
