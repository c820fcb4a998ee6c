package main

import (
	"bufio"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/pkindex"
)

// A key index that another process holds (a paused daemon of the same
// pipeline) is left alone: this daemon uses a directory of its own, removed
// when it closes; one a killed process left is removed at the next open.
func TestKeyIndexHeldByAnotherProcess(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 holds the LOCK file here (a POSIX lock like pebble's); install it")
	}
	dir := filepath.Join(t.TempDir(), "index")
	cfg := &config.Config{Pipeline: "p", Deletes: config.Deletes{IndexDir: dir, IndexCache: 1 << 20}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	k, err := openKeyIndex(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	k.Close()

	// Another process takes the LOCK file, as pebble does (fcntl).
	holder := exec.Command("python3", "-c", `import fcntl, sys
f = open(sys.argv[1], "r+")
fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked", flush=True)
sys.stdin.read()`, filepath.Join(dir, "LOCK"))
	stdin, _ := holder.StdinPipe()
	stdout, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "locked\n" {
		t.Fatalf("the holder did not lock: %q", line)
	}
	k, err = openKeyIndex(cfg, log)
	if err != nil {
		t.Fatalf("a held index: %v", err)
	}
	own := k.remove
	if own == "" || filepath.Dir(own) != filepath.Dir(dir) {
		t.Fatalf("a held index opened %q, want a directory of this process's own beside %s", own, dir)
	}
	k.Close()
	if _, err := os.Stat(own); !os.IsNotExist(err) {
		t.Errorf("this process's own index %s is still there after Close (%v)", own, err)
	}
	stdin.Close()
	holder.Wait()

	// A directory of its own that a killed process left is removed.
	stale := dir + ".pid-999999999"
	db, err := pkindex.Open(stale, pkindex.Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	k, err = openKeyIndex(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	k.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the index directory of a dead process %s is still there (%v)", stale, err)
	}
}
