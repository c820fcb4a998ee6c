package integration

import (
	"strings"
	"testing"
	"time"
)

// TestNewTableIsPickedUp creates a table that matches the include patterns
// while cdcsync runs: cdcsync copies it and streams it without a restart by
// hand.
func TestNewTableIsPickedUp(t *testing.T) {
	e := newEnv(t, "it_newtbl", envOptions{})
	mustExec(t, "CREATE TABLE it_newtbl.a (id INT PRIMARY KEY, v INT)")
	mustExec(t, "INSERT INTO it_newtbl.a VALUES (1, 1)")
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	mustExec(t, "INSERT INTO it_newtbl.a VALUES (2, 2)")
	mustExec(t, "CREATE TABLE it_newtbl.b (id INT PRIMARY KEY, name VARCHAR(20))")
	mustExec(t, "INSERT INTO it_newtbl.b VALUES (1, 'x'), (2, 'y')")
	mustExec(t, "UPDATE it_newtbl.b SET name = 'z' WHERE id = 2")
	mustExec(t, "INSERT INTO it_newtbl.a VALUES (3, 3)")
	e.waitCaughtUp(p, 2*time.Minute)
	e.assertMirrors("a")
	e.assertMirrors("b")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), "new table") {
		t.Errorf("the log does not say why the pipeline restarted:\n%s", p.output())
	}
}

// TestSchemaChangeStopsWithAClearError: until schema evolution exists, an
// ALTER TABLE on a selected table must stop cdcsync with a message naming the
// table and the statement, after committing everything before it.
func TestSchemaChangeStopsWithAClearError(t *testing.T) {
	e := newEnv(t, "it_alter", envOptions{})
	mustExec(t, "CREATE TABLE it_alter.t (id INT PRIMARY KEY, v INT)")
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	mustExec(t, "INSERT INTO it_alter.t VALUES (1, 1), (2, 2)")
	mustExec(t, "ALTER TABLE it_alter.t ADD COLUMN w INT")
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("cdcsync kept running after ALTER TABLE; output:\n%s", p.output())
	}
	out := p.output()
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit %d, want 1; output:\n%s", code, out)
	}
	for _, want := range []string{"it_alter.t", "ALTER", "ADD COLUMN w"} {
		if !strings.Contains(out, want) {
			t.Errorf("the error lacks %q:\n%s", want, out)
		}
	}
	// The rows before the ALTER were committed.
	mustExec(t, "ALTER TABLE it_alter.t DROP COLUMN w")
	e.assertMirrors("t")
}
