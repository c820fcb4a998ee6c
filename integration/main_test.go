// Package integration runs cdcsync end to end against real servers: a
// MariaDB with the binlog on and MinIO, started by testenv, and the real
// cdcsync binary, built once per run. Nothing is mocked.
package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	binary = filepath.Join(dir, "cdcsync")
	// The daemon is built with the race detector, so every end-to-end test
	// also checks its goroutines.
	build := exec.Command("go", "build", "-race", "-o", binary, "./cmd/cdcsync")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "integration: cannot build cdcsync:", err)
		return 1
	}
	return m.Run()
}
