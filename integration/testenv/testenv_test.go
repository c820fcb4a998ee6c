package testenv

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

func startMariaDB(t *testing.T, opts MariaDBOptions) *MariaDB {
	t.Helper()
	db, err := StartMariaDB(opts)
	if err != nil {
		t.Fatalf("StartMariaDB: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return db
}

func queryString(t *testing.T, db *MariaDB, sql string) string {
	t.Helper()
	r, err := db.Query(sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer r.Close()
	if r.Resultset == nil || r.RowNumber() != 1 {
		t.Fatalf("%s: want one row", sql)
	}
	s, err := r.GetString(0, 0)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	// Strings from a go-mysql Result may alias its pooled buffers: copy
	// before Close.
	return strings.Clone(s)
}

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "integration", "testenv")); err != nil {
		t.Fatalf("RepoRoot() = %s, which does not hold integration/testenv: %v", root, err)
	}
}

func TestMariaDB(t *testing.T) {
	t.Parallel()
	db := startMariaDB(t, MariaDBOptions{})

	if db.Host != "127.0.0.1" || db.Port == 0 || !strings.HasPrefix(db.Addr(), "127.0.0.1:") {
		t.Fatalf("Host=%q Port=%d Addr=%q", db.Host, db.Port, db.Addr())
	}
	for sql, want := range map[string]string{
		"SELECT @@log_bin":              "1",
		"SELECT @@binlog_format":        "ROW",
		"SELECT @@binlog_row_image":     "FULL",
		"SELECT @@binlog_row_metadata":  "FULL",
		"SELECT @@server_id":            "1",
		"SELECT @@bind_address":         "127.0.0.1",
		"SELECT @@character_set_server": "utf8mb4",
	} {
		if got := queryString(t, db, sql); got != want {
			t.Errorf("%s = %q, want %q", sql, got, want)
		}
	}

	// Exec with and without args, then read back with Query.
	if err := db.Exec("CREATE DATABASE shop"); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("CREATE TABLE shop.t (id INT PRIMARY KEY, s VARCHAR(20))"); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("INSERT INTO shop.t VALUES (?, ?), (?, ?)", 1, "a", 2, "b"); err != nil {
		t.Fatal(err)
	}
	if got := queryString(t, db, "SELECT GROUP_CONCAT(s ORDER BY id) FROM shop.t"); got != "a,b" {
		t.Errorf("rows = %q, want a,b", got)
	}
	if err := db.Exec("SELECT * FROM no_such_db.t"); err == nil {
		t.Error("query on a missing table: want an error")
	}
	// A server error must not poison the pooled connection.
	if got := queryString(t, db, "SELECT COUNT(*) FROM shop.t"); got != "2" {
		t.Errorf("count = %q, want 2", got)
	}

	if pos := queryString(t, db, "SELECT @@gtid_binlog_pos"); !strings.HasPrefix(pos, "0-1-") {
		t.Errorf("@@gtid_binlog_pos = %q, want 0-1-N after writes", pos)
	}

	// The replication account can run what cdcsync's preflight runs.
	c, err := db.Connect(ReplUser, ReplPassword, "")
	if err != nil {
		t.Fatalf("connect as %s: %v", ReplUser, err)
	}
	defer c.Close()
	var file string
	var pos uint64
	for _, sql := range []string{"SHOW MASTER STATUS", "SHOW BINARY LOGS", "SELECT @@gtid_binlog_pos", "SELECT * FROM shop.t"} {
		r, err := c.Execute(sql)
		if err != nil {
			t.Fatalf("%s as %s: %v", sql, ReplUser, err)
		}
		if sql == "SHOW MASTER STATUS" {
			if r.RowNumber() != 1 {
				t.Fatalf("SHOW MASTER STATUS: %d rows, want 1", r.RowNumber())
			}
			file, _ = r.GetString(0, 0)
			file = strings.Clone(file)
			pos, _ = r.GetUint(0, 1)
		}
		r.Close()
	}
	if !strings.HasPrefix(file, "binlog.") || pos < 4 {
		t.Fatalf("SHOW MASTER STATUS = %q %d", file, pos)
	}

	// ... and read the binlog over a replica connection.
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: 4242, Flavor: mysql.MariaDBFlavor, Host: db.Host, Port: uint16(db.Port),
		User: ReplUser, Password: ReplPassword, DisableRetrySync: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	defer syncer.Close()
	streamer, err := syncer.StartSync(mysql.Position{Name: file, Pos: uint32(pos)})
	if err != nil {
		t.Fatalf("StartSync as %s: %v", ReplUser, err)
	}
	if err := db.Exec("INSERT INTO shop.t VALUES (3, 'c')"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			t.Fatalf("reading the binlog as %s: %v", ReplUser, err)
		}
		if rows, ok := ev.Event.(*replication.RowsEvent); ok {
			if len(rows.Rows) != 1 || len(rows.Rows[0]) != 2 {
				t.Fatalf("rows event: %v", rows.Rows)
			}
			break
		}
	}

	// The SELECT-only account cannot.
	c2, err := db.Connect(NoReplUser, NoReplPassword, "")
	if err != nil {
		t.Fatalf("connect as %s: %v", NoReplUser, err)
	}
	defer c2.Close()
	if _, err := c2.Execute("SELECT COUNT(*) FROM shop.t"); err != nil {
		t.Errorf("SELECT as %s: %v", NoReplUser, err)
	}
	if _, err := c2.Execute("SHOW MASTER STATUS"); err == nil {
		t.Errorf("SHOW MASTER STATUS as %s: want a privilege error", NoReplUser)
	}

	// Stop shuts down, frees the port and removes the temporary directory.
	addr, dir := db.Addr(), db.Dir
	if err := db.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Stop", addr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Stop (err %v)", dir, err)
	}
	if err := db.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestMariaDBExtraArgs(t *testing.T) {
	t.Parallel()
	db := startMariaDB(t, MariaDBOptions{ExtraArgs: []string{"--binlog-format=STATEMENT", "--default-time-zone=+08:00"}})
	if got := queryString(t, db, "SELECT @@binlog_format"); got != "STATEMENT" {
		t.Errorf("@@binlog_format = %q, want STATEMENT", got)
	}
	if got := queryString(t, db, "SELECT @@global.time_zone"); got != "+08:00" {
		t.Errorf("@@global.time_zone = %q, want +08:00", got)
	}
}

func TestMariaDBKillRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := startMariaDB(t, MariaDBOptions{Dir: dir})
	if err := db.Exec("CREATE DATABASE test"); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("CREATE TABLE test.t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("INSERT INTO test.t VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	port := db.Port
	db.Kill()
	if err := db.Exec("SELECT 1"); err == nil {
		t.Fatal("Exec after Kill: want an error")
	}
	if err := db.Restart(); err != nil {
		t.Fatalf("Restart after Kill: %v", err)
	}
	if db.Port != port {
		t.Errorf("port changed across Restart: %d -> %d", port, db.Port)
	}
	if got := queryString(t, db, "SELECT COUNT(*) FROM test.t"); got != "2" {
		t.Errorf("rows after crash recovery = %s, want 2", got)
	}
	if err := db.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "mysql")); err != nil {
		t.Errorf("Stop removed a caller-provided Dir: %v", err)
	}
	// A new server on the same Dir reuses the data.
	db2 := startMariaDB(t, MariaDBOptions{Dir: dir})
	if got := queryString(t, db2, "SELECT COUNT(*) FROM test.t"); got != "2" {
		t.Errorf("rows after start on existing Dir = %s, want 2", got)
	}
}

func TestMinIO(t *testing.T) {
	t.Parallel()
	m, err := StartMinIO("")
	if err != nil {
		t.Fatalf("StartMinIO: %v", err)
	}
	t.Cleanup(func() { _ = m.Stop() })
	if !strings.HasPrefix(m.Endpoint, "http://127.0.0.1:") || m.AccessKey == "" || m.SecretKey == "" {
		t.Fatalf("Endpoint=%q AccessKey=%q", m.Endpoint, m.AccessKey)
	}
	if err := m.CreateBucket("warehouse"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, key := range []string{"db/t/data/b.parquet", "db/t/data/a.parquet", "db/t/metadata/v1.json", "other/x"} {
		_, err := m.S3Client().PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String("warehouse"), Key: aws.String(key), Body: strings.NewReader("x"),
		})
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	keys, err := m.ListObjects("warehouse", "db/t/")
	if err != nil {
		t.Fatal(err)
	}
	want := "db/t/data/a.parquet db/t/data/b.parquet db/t/metadata/v1.json"
	if got := strings.Join(keys, " "); got != want {
		t.Errorf("ListObjects = %q, want %q", got, want)
	}
	if _, err := m.ListObjects("no-such-bucket", ""); err == nil {
		t.Error("ListObjects on a missing bucket: want an error")
	}

	endpoint, dir := m.Endpoint, m.Dir
	if err := m.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", strings.TrimPrefix(endpoint, "http://"), time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Stop", endpoint)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Stop (err %v)", dir, err)
	}
}

func TestMinIOBinaryFromEnv(t *testing.T) {
	t.Setenv("CDCSYNC_MINIO", filepath.Join(t.TempDir(), "missing-minio"))
	if _, err := StartMinIO(""); err == nil || !strings.Contains(err.Error(), "CDCSYNC_MINIO") {
		t.Fatalf("StartMinIO with a missing $CDCSYNC_MINIO: err = %v, want one naming CDCSYNC_MINIO", err)
	}
}
