package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync/integration/testenv"
	"github.com/cdcsync/cdcsync/lake"
)

// TestTwoDaemonsOnePipeline runs two daemons on one pipeline under the
// randomized workload: one holds the pipeline, the other waits as a
// standby. The holder is stopped with SIGTERM, killed with SIGKILL, or
// paused with SIGSTOP and resumed with SIGCONT after the standby took
// over. The standby must take over (at once after a release or a death on
// this machine, after lease.ttl for a paused holder), the paused holder
// must never commit after it resumes, and the tables must equal MySQL.
func TestTwoDaemonsOnePipeline(t *testing.T) {
	const dbName = "it_lease"
	// Short enough for a quick test, long enough for renewals of a loaded
	// CI machine (a holder gives up after two thirds of it).
	const ttl = 5 * time.Second
	// Two machines share a catalog database and an object store: the
	// daemons here do the same (PostgreSQL, MinIO). A SQLite catalog is one
	// file: a holder paused in the middle of a catalog commit keeps its
	// lock, and the standby waits until it resumes or dies. PostgreSQL
	// ends a paused holder's open transaction after a third of the TTL.
	pg, err := testenv.StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	if err := pg.CreateDatabase("leasecat"); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, dbName, envOptions{onMinIO: true, pgDSN: pg.DSN("leasecat"), tables: fmt.Sprintf(workloadTables, dbName),
		epoch: "interval: 200ms", extra: "lease:\n  ttl: " + ttl.String()})
	createWorkloadSchema(t, dbName)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	w := newWorkload(t, dbName, seed)
	w.run(t, 100)
	stopLoad := inBackground(t, func() error {
		if err := w.txn(); err != nil {
			return err
		}
		time.Sleep(time.Duration(w.r.IntN(3)) * time.Millisecond)
		return nil
	})
	r := rand.New(rand.NewPCG(seed, 3))

	const held = "holding the pipeline"
	holder := e.start()
	select {
	case <-holder.waitFor(held, time.Minute):
	case <-holder.done:
	}
	if !strings.Contains(holder.output(), held) {
		t.Fatalf("the first daemon does not hold the pipeline; output:\n%s", holder.output())
	}
	e.waitCaughtUp(holder, 3*time.Minute) // the initial copies are done
	standby := e.start()
	want := fmt.Sprintf("pipeline it-lease is held by %s pid %d since", hostname(t), holder.cmd.Process.Pid)
	<-standby.waitFor(want, 30*time.Second)
	if out := standby.output(); !strings.Contains(out, want) || strings.Contains(out, held) {
		t.Fatalf("the second daemon does not wait for the first (want %q); output:\n%s", want, out)
	}

	acquired := 1
	for i, act := range []string{"term", "stop", "kill", "stop", "term", "kill"} {
		time.Sleep(time.Duration(500+r.IntN(1500)) * time.Millisecond)
		before := strings.Count(standby.output(), held)
		start := time.Now()
		switch act {
		case "term":
			if code := holder.stop(t); code != 0 {
				t.Fatalf("round %d: holder exited %d after SIGTERM; output:\n%s", i, code, holder.output())
			}
		case "kill":
			holder.kill()
		case "stop":
			if err := holder.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}
		for strings.Count(standby.output(), held) == before {
			if standby.exited() || time.Since(start) > time.Minute {
				t.Fatalf("round %d (%s): the standby did not take over; output:\n%s", i, act, standby.output())
			}
			time.Sleep(10 * time.Millisecond)
		}
		took := time.Since(start)
		acquired++
		t.Logf("round %d: SIG%s of the holder, the standby took over in %s", i, strings.ToUpper(act), took.Round(time.Millisecond))
		switch {
		case act != "stop" && took > 15*time.Second:
			// A SIGTERM'd holder commits what it has read before it
			// releases the lease; one that took over a paused holder
			// seconds before may still be building its key indexes
			// (15 s once on CI), which a shutdown interrupts.
			t.Errorf("round %d: takeover after SIG%s took %s, want a few seconds; the old holder's output:\n%s", i, strings.ToUpper(act), took, holder.output())
		case act == "stop" && took < ttl*2/3:
			// The standby waits lease.ttl from the last renewal it saw,
			// which came at most a third of it before the pause.
			t.Errorf("round %d: the standby took over from a paused holder after %s, before two thirds of lease.ttl %s", i, took, ttl)
		}
		next := standby
		if act == "stop" {
			// Let the new holder commit, then wake the old one: it must
			// notice and wait as a standby instead of committing.
			time.Sleep(time.Duration(300+r.IntN(1000)) * time.Millisecond)
			if err := holder.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			<-holder.waitFor("no longer holds the pipeline", 30*time.Second)
			if !strings.Contains(holder.output(), "no longer holds the pipeline") || holder.exited() {
				t.Fatalf("round %d: the resumed holder did not step down; output:\n%s", i, holder.output())
			}
			standby = holder
		} else {
			standby = e.start()
		}
		holder = next
	}
	if err := stopLoad(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	e.waitCaughtUp(holder, 3*time.Minute)
	for _, tbl := range mirroredTables {
		e.assertMirrors(tbl)
	}

	// No commit of an older holder follows one of a newer holder, in any
	// table; the fences of the paused holders' successors are there.
	lk := e.openLake()
	fences := 0
	for _, name := range mirroredTables {
		tbl, err := lk.LoadTable(context.Background(), lk.Identifier(dbName, name))
		if err != nil {
			t.Fatal(err)
		}
		last := int64(0)
		for _, s := range ancestry(tbl) {
			props := s.Summary.Properties
			if props[lake.SummaryPipeline] != "it-lease" && props[lake.SummaryFence] != "it-lease" {
				continue
			}
			if props[lake.SummaryFence] != "" {
				fences++
			}
			tok, _ := strconv.ParseInt(props[lake.SummaryToken], 10, 64)
			if tok < last {
				t.Errorf("%s: snapshot %d was committed with lease token %d after one with token %d: a holder committed after a newer one took over",
					name, s.SnapshotID, tok, last)
			}
			last = max(last, tok)
		}
	}
	rec, _, err := lk.LeaseStore().Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Token != int64(acquired) || rec.Holder.PID != holder.cmd.Process.Pid {
		t.Errorf("lease record %+v: want token %d held by pid %d", rec, acquired, holder.cmd.Process.Pid)
	}
	if fences == 0 {
		t.Error("no table carries a fence: the takeovers from paused holders did not fence")
	}

	// A daemon told not to wait exits with the holder's name.
	e.rewriteConfig("lease:\n", "lease:\n  wait: false\n")
	third := e.start()
	third.expectExit(t, 1, fmt.Sprintf("pipeline it-lease is held by %s pid %d", hostname(t), holder.cmd.Process.Pid), "lease.wait is false")

	if code := standby.stop(t); code != 0 {
		t.Errorf("standby exited %d after SIGTERM; output:\n%s", code, standby.output())
	}
	if code := holder.stop(t); code != 0 {
		t.Errorf("holder exited %d after SIGTERM; output:\n%s", code, holder.output())
	}
	if t.Failed() {
		t.Logf("holder output:\n%s", holder.output())
	}
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
