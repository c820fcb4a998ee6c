// Package integration runs cdcsync end to end against real servers: a
// MariaDB with the binlog on and MinIO, started by testenv, and the real
// cdcsync binary, built once per run. Nothing is mocked.
package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

var (
	db     *testenv.MariaDB
	minio  *testenv.MinIO
	binary string // the cdcsync binary under test
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	var err error
	if db, err = testenv.StartMariaDB(testenv.MariaDBOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "integration: cannot start MariaDB:", err)
		return 1
	}
	defer db.Stop()
	if minio, err = testenv.StartMinIO(""); err != nil {
		fmt.Fprintln(os.Stderr, "integration: cannot start MinIO:", err)
		return 1
	}
	defer minio.Stop()
	dir, err := os.MkdirTemp("", "cdcsync-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Every test's configuration takes its secrets from these (see newEnv).
	for k, v := range map[string]string{"CDCSYNC_TEST_PASSWORD": testenv.ReplPassword, "CDCSYNC_TEST_S3_SECRET": testenv.MinIOSecretKey} {
		if err := os.Setenv(k, v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	binary = filepath.Join(dir, "cdcsync")
	// The daemon is built with the race detector for the tests that
	// exercise its goroutines (raceTests in harness_test.go).
	build := exec.Command("go", "build", "-race", "-o", binary, "./cmd/cdcsync")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "integration: cannot build cdcsync:", err)
		return 1
	}
	plain.path, plain.root = filepath.Join(dir, "cdcsync-plain"), root
	return m.Run()
}

// plain is cdcsync built without the race detector, for the tests that
// measure times (freshness, compaction: the race detector slows the daemon
// down ten to twenty times) and those whose workload writes tens of
// thousands of files: the race build writes a small
// Parquet file 20 to 30 times slower (3.7 to 5.4 ms against 0.17 to 0.24
// ms, BenchmarkWriteManyPartitions), which would turn minutes into an hour. The
// race build runs the same code paths in every other test.
var plain struct {
	once       sync.Once
	path, root string
	err        error
}

// plainBinary builds the plain binary on first use.
func plainBinary(t *testing.T) string {
	t.Helper()
	plain.once.Do(func() {
		build := exec.Command("go", "build", "-o", plain.path, "./cmd/cdcsync")
		build.Dir = plain.root
		out, err := build.CombinedOutput()
		if err != nil {
			plain.err = fmt.Errorf("go build ./cmd/cdcsync: %v\n%s", err, out)
		}
	})
	if plain.err != nil {
		t.Fatal(plain.err)
	}
	return plain.path
}
