package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSlowCommitKeepsTheStream holds one epoch's commit for 25 s (as a
// finely partitioned table or a slow object store would) while 40 MB of
// transactions arrive, on a server that drops a binlog reader after 5 s
// without reads (net_write_timeout; 60 s by default). The daemon must go
// on reading, write out (spill) the next epoch as it grows past
// epoch.max_bytes, keep its binlog connection, and end with the table
// equal to MySQL. Before, the next seal waited for the commit, reading
// stopped, and the server dropped the connection (issue 23).
func TestSlowCommitKeepsTheStream(t *testing.T) {
	const dbName = "it_slowcommit"
	e := newEnv(t, dbName, envOptions{epoch: "interval: 500ms\n  max_bytes: 4MiB"})
	e.exec(fmt.Sprintf("CREATE TABLE %s.docs (id INT PRIMARY KEY, grp INT NOT NULL, body LONGTEXT NOT NULL)", dbName))
	e.exec(fmt.Sprintf("INSERT INTO %s.docs VALUES (1, 0, 'first')", dbName))

	r, err := e.server.Query("SELECT @@GLOBAL.net_write_timeout")
	if err != nil {
		t.Fatal(err)
	}
	was, _ := r.GetInt(0, 0)
	e.exec("SET GLOBAL net_write_timeout = 5")
	t.Cleanup(func() { e.exec(fmt.Sprintf("SET GLOBAL net_write_timeout = %d", was)) })

	// The first commit is the initial copy's; the second, the first
	// epoch of the load, is held.
	p := e.start("CDCSYNC_DELAY=before-checkpoint:25s:2")
	e.waitCaughtUp(p, time.Minute)
	held := p.waitFor("delay injection: sleeping", time.Minute)
	e.exec(fmt.Sprintf("INSERT INTO %s.docs VALUES (2, 0, 'second')", dbName))
	select {
	case <-held:
	case <-p.done:
		t.Fatalf("cdcsync exited; output:\n%s", p.output())
	}
	start := time.Now()
	for i := 0; i < 400; i++ {
		// About 96 KiB of row image per transaction, changing rows
		// written before too.
		e.exec(fmt.Sprintf("INSERT INTO %s.docs VALUES (?, ?, REPEAT(MD5(?), 3000)) ON DUPLICATE KEY UPDATE grp = grp + 1, body = VALUES(body)", dbName),
			10+i%300, i, i)
	}
	t.Logf("40 MB of transactions in %s while the commit was held", time.Since(start).Round(time.Millisecond))
	e.waitCaughtUp(p, 2*time.Minute)
	out := p.output()
	if strings.Contains(out, "the binlog connection was lost") || strings.Contains(out, "restarting the pipeline") {
		t.Errorf("the slow commit cost the binlog connection; output:\n%s", out)
	}
	if !strings.Contains(out, "spilled the open epoch: the epoch before it is still committing") {
		t.Errorf("the epoch after the slow one was not written out as it grew; output:\n%s", out)
	}
	e.assertMirrors("docs")
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d; output:\n%s", code, p.output())
	}
}
