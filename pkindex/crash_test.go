package pkindex

import (
	"bufio"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The crash test re-executes the test binary (TestMain dispatches on
// childEnv) as a child that commits batches in a loop, and kills it with
// SIGKILL at a random moment.
const (
	childEnv    = "PKINDEX_TEST_CHILD"
	childDirEnv = "PKINDEX_TEST_DIR"
	crashKeys   = 2000
	crashTable  = "crash"
)

// crashOp says what batch i does to key j: 0 put, 1 delete, else nothing.
func crashOp(i int64, j int) int {
	h := fnv.New32a()
	fmt.Fprintf(h, "%d/%d", i, j)
	return int(h.Sum32() % 3)
}

func crashKey(j int) []byte { return []byte("key-" + strconv.Itoa(j)) }

// crashBatch is batch i: it adds file i (file ids start at 1, one per
// batch), retires file i-1, and puts or deletes keys with locations
// derived from i.
func crashBatch(tb *Table, i int64) error {
	b := tb.NewBatch()
	defer b.Close()
	id := b.AddFile(File{Path: fmt.Sprintf("f%d", i), Live: true})
	if int64(id) != i {
		return fmt.Errorf("batch %d got file id %d", i, id)
	}
	if i > 1 {
		b.SetFileLive(uint32(i-1), false)
	}
	for j := range crashKeys {
		switch crashOp(i, j) {
		case 0:
			b.Put(crashKey(j), Loc{File: id, Pos: i*crashKeys + int64(j)})
		case 1:
			b.Delete(crashKey(j))
		}
	}
	return b.Commit(State{SnapshotID: i, Complete: true})
}

// crashModel is the content after batches 1..n.
func crashModel(n int64) map[string]Loc {
	m := map[string]Loc{}
	for i := int64(1); i <= n; i++ {
		for j := range crashKeys {
			switch crashOp(i, j) {
			case 0:
				m[string(crashKey(j))] = Loc{File: uint32(i), Pos: i*crashKeys + int64(j)}
			case 1:
				delete(m, string(crashKey(j)))
			}
		}
	}
	return m
}

func crashChild(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	db, err := Open(dir, Options{})
	if err != nil {
		fail(err)
	}
	tb, err := db.Table(crashTable)
	if err != nil {
		fail(err)
	}
	s, _, err := tb.State()
	if err != nil {
		fail(err)
	}
	out := bufio.NewWriter(os.Stdout)
	for i := s.SnapshotID + 1; ; i++ {
		if err := crashBatch(tb, i); err != nil {
			fail(err)
		}
		fmt.Fprintln(out, i)
		out.Flush()
	}
}

func holdChild(dir string) {
	db, err := Open(dir, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Println("open")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes stdin or kills us
	db.Close()
	os.Exit(0)
}

func startChild(t *testing.T, mode, dir string) (*exec.Cmd, *bufio.Scanner, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childDirEnv+"="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("child stderr:\n%s", stderr.String())
		}
	})
	return cmd, bufio.NewScanner(stdout), stdin
}

func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var before int64 // the state at the start of the round
	sawInFlight := false
	for round := range 4 {
		cmd, lines, _ := startChild(t, "crash", dir)
		first := make(chan struct{})
		last := make(chan int64, 1)
		go func() {
			var n int64 = -1
			for lines.Scan() {
				v, err := strconv.ParseInt(lines.Text(), 10, 64)
				if err != nil {
					continue
				}
				if n < 0 {
					close(first)
				}
				n = v
			}
			last <- n
		}()
		select {
		case <-first:
		case n := <-last:
			t.Fatalf("round %d: the child stopped before committing (%d)", round, n)
		case <-time.After(time.Minute):
			t.Fatalf("round %d: the child committed nothing in a minute", round)
		}
		time.Sleep(time.Duration(r.IntN(300)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		printed := <-last // every line written before the kill
		if printed <= before {
			t.Fatalf("round %d: printed %d, started at %d", round, printed, before)
		}

		db := openT(t, dir)
		tb := tableT(t, db, crashTable)
		s, ok, err := tb.State()
		if err != nil || !ok {
			t.Fatalf("round %d: State = %v %v %v", round, s, ok, err)
		}
		// The last printed batch committed; the next one may have
		// committed before its line was printed.
		if s.SnapshotID != printed && s.SnapshotID != printed+1 {
			t.Fatalf("round %d: state %d after the child printed %d", round, s.SnapshotID, printed)
		}
		sawInFlight = sawInFlight || s.SnapshotID == printed+1
		t.Logf("round %d: killed after batch %d, state %d", round, printed, s.SnapshotID)
		checkModel(t, tb, crashModel(s.SnapshotID), nil)
		files, err := tb.Files()
		if err != nil {
			t.Fatal(err)
		}
		wantFiles := map[uint32]File{}
		for i := int64(1); i <= s.SnapshotID; i++ {
			wantFiles[uint32(i)] = File{Path: fmt.Sprintf("f%d", i), Live: i == s.SnapshotID}
		}
		if !maps.EqualFunc(files, wantFiles, fileEqual) {
			t.Fatalf("round %d: %d files, want %d (or other contents)", round, len(files), len(wantFiles))
		}
		before = s.SnapshotID
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("a kill between a commit and its line: %v", sawInFlight)
}

func TestSecondOpenOtherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	dir := t.TempDir()
	cmd, lines, stdin := startChild(t, "hold", dir)
	if !lines.Scan() || lines.Text() != "open" {
		t.Fatalf("the child did not open the index: %q %v", lines.Text(), lines.Err())
	}
	_, err := Open(dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "another cdcsync process uses the primary-key index in "+dir) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open while another process has it open = %v", err)
	}
	if err := Remove(dir); err == nil {
		t.Fatal("Remove while another process has it open succeeded")
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	db := openT(t, dir)
	db.Close()
}
