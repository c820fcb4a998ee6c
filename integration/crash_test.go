package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCrashRecovery kills cdcsync with SIGKILL again and again while the
// workload runs: at random moments, and at the protocol's critical points
// (after writing files but before the catalog commit, between two tables'
// commits of one epoch, before the checkpoint, after a commit and before
// the key index records it), and deletes the key index between some rounds.
// In every other round one table's commits are slow, so that its changes
// are carried over into later epochs while the others commit (commit
// lanes).
// At the end every table must
// equal MySQL: no duplicate, no missing and no stale row.
func TestCrashRecovery(t *testing.T) {
	const dbName = "it_crash"
	// events (day x bucket partitions) in dv mode, the others in
	// position mode: both modes under every fault.
	e := newEnv(t, dbName, envOptions{tables: fmt.Sprintf(workloadTables, dbName) + "\n    deletes: dv", epoch: "interval: 200ms\n  commit_concurrency: 1"})
	createWorkloadSchema(t, dbName)
	seed := uint64(time.Now().UnixNano())
	w := newWorkload(t, dbName, seed)
	w.run(t, 100)

	stopLoad := inBackground(t, func() error {
		if err := w.txn(); err != nil {
			return err
		}
		time.Sleep(time.Duration(w.r.IntN(3)) * time.Millisecond)
		return nil
	})

	r := rand.New(rand.NewPCG(seed, 2))
	faults := []string{
		"", // killed from outside at a random moment
		"CDCSYNC_FAULT=before-commit:0.3",
		"CDCSYNC_FAULT=between-tables:0.5",
		"CDCSYNC_FAULT=before-checkpoint:0.4",
		"CDCSYNC_FAULT=before-index:0.3",
	}
	const rounds = 24
	selfKills, carried := 0, 0
	for i := 0; i < rounds; i++ {
		f := faults[i%len(faults)]
		if i%6 == 5 {
			// A wiped disk, or a daemon moved to another machine: the key
			// index is rebuilt from the tables, and the rebuild may be
			// cut short (the next round starts it again).
			if err := os.RemoveAll(e.cfg.Deletes.IndexDir); err != nil {
				t.Fatal(err)
			}
			if f == "" {
				f = "CDCSYNC_FAULT=during-index-rebuild:0.5"
			} else {
				f += ",during-index-rebuild:0.5"
			}
		}
		var env []string
		if f != "" {
			env = append(env, f)
		}
		slow := i%2 == 1
		if slow {
			// pairs, the last table committed (commit_concurrency: 1),
			// takes three intervals a commit: its changes are carried
			// over while events and items commit each epoch.
			env = append(env, "CDCSYNC_DELAY=before-commit@"+dbName+".pairs:600ms:0")
		}
		p := e.start(env...)
		deadline := time.After(time.Duration(300+r.IntN(2500)) * time.Millisecond)
		select {
		case <-deadline:
			p.kill()
		case <-p.done:
			code := p.cmd.ProcessState.ExitCode()
			if f == "" || code != -1 { // a fault kill shows as signal, exit code -1
				t.Fatalf("round %d: cdcsync exited by itself (code %d); output:\n%s", i, code, p.output())
			}
			selfKills++
		}
		if slow && strings.Contains(p.output(), "carried over into the next one") {
			carried++
		}
	}
	if carried == 0 {
		// No carry while the initial copies ran (they stop it), and on a
		// loaded machine they can outlast every slow round: one more,
		// killed once it has carried pairs over.
		p := e.start("CDCSYNC_DELAY=before-commit@" + dbName + ".pairs:600ms:0")
		deadline := time.After(2 * time.Minute)
	wait:
		for !strings.Contains(p.output(), "carried over into the next one") {
			select {
			case <-p.done:
				t.Fatalf("the extra slow round: cdcsync exited by itself; output:\n%s", p.output())
			case <-deadline:
				break wait
			case <-time.After(100 * time.Millisecond):
			}
		}
		p.kill()
		if strings.Contains(p.output(), "carried over into the next one") {
			carried++
		}
	}
	if selfKills == 0 {
		// On a loaded machine every round can be killed from outside
		// before its first commit reaches a fault point: one more, whose
		// first commit kills it.
		p := e.start("CDCSYNC_FAULT=before-commit:1")
		select {
		case <-p.done:
			if code := p.cmd.ProcessState.ExitCode(); code != -1 {
				t.Fatalf("the extra fault round: cdcsync exited by itself (code %d); output:\n%s", code, p.output())
			}
			selfKills++
		case <-time.After(2 * time.Minute):
			p.kill()
		}
	}
	if err := stopLoad(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("%d rounds, %d killed at a protocol point by fault injection, the rest from outside", rounds, selfKills)
	if selfKills == 0 {
		t.Errorf("no round reached a fault point: the crash test did not exercise the commit protocol")
	}
	t.Logf("%d rounds carried pairs over while the other tables committed", carried)
	if carried == 0 {
		t.Errorf("no round carried the slow table over: the crash test did not exercise commit lanes")
	}

	p := e.start()
	e.waitCaughtUp(p, 3*time.Minute)
	for _, tbl := range mirroredTables {
		e.assertMirrors(tbl)
	}
	// events took its rows' deletes as deletion vectors.
	lk := e.openLake()
	ev, err := lk.LoadTable(context.Background(), lk.Identifier(dbName, "events"))
	if err != nil {
		t.Fatal(err)
	}
	dvs := false
	for _, s := range ev.Metadata().Snapshots() {
		if s.Summary != nil && s.Summary.Properties["added-position-deletes"] != "" && s.Summary.Properties["added-position-deletes"] != "0" {
			dvs = true
		}
	}
	if v := ev.Metadata().Version(); v != 3 || !dvs {
		t.Errorf("events is format v%d and deletion vectors in its snapshots: %v; want v3 (dv mode) with some", v, dvs)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}
	if t.Failed() {
		t.Logf("final cdcsync output:\n%s", p.output())
	}
}
