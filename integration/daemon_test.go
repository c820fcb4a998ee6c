package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDaemonOperability checks what an operator relies on: JSON logs without
// secrets, /healthz, /readyz, the metrics, and a clean exit on SIGINT.
func TestDaemonOperability(t *testing.T) {
	port := freePort(t)
	e := newEnv(t, "it_ops", envOptions{extra: "log:\n  format: json\n"})
	// Point the metrics server at a free port instead of "off".
	e.rewriteConfig(`listen: "off"`, `listen: 127.0.0.1:`+strconv.Itoa(port))
	mustExec(t, "CREATE TABLE it_ops.t (id INT PRIMARY KEY, v VARCHAR(10))")
	mustExec(t, "INSERT INTO it_ops.t VALUES (1, 'a')")
	p := e.start()
	base := "http://127.0.0.1:" + strconv.Itoa(port)

	deadline := time.Now().Add(time.Minute)
	for {
		code, _ := httpGet(base + "/readyz")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) || p.exited() {
			t.Fatalf("/readyz never became 200; output:\n%s", p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := httpGet(base + "/healthz"); code != 200 {
		t.Fatalf("/healthz = %d %s", code, body)
	}
	mustExec(t, "INSERT INTO it_ops.t VALUES (2, 'b'), (3, 'c')")
	mustExec(t, "UPDATE it_ops.t SET v = 'z' WHERE id = 1")
	mustExec(t, "DELETE FROM it_ops.t WHERE id = 2")
	e.waitCaughtUp(p, time.Minute)
	time.Sleep(2500 * time.Millisecond) // the lag gauges refresh every 2 s

	_, metrics := httpGet(base + "/metrics")
	for _, want := range []string{
		`cdcsync_rows_total{op="insert",table="it_ops.t"} 2`,
		`cdcsync_rows_total{op="update",table="it_ops.t"} 1`,
		`cdcsync_rows_total{op="delete",table="it_ops.t"} 1`,
		`cdcsync_snapshot_rows_total{table="it_ops.t"} 1`,
		"cdcsync_epochs_committed_total",
		"cdcsync_commit_duration_seconds_bucket",
		"cdcsync_replication_lag_seconds",
		"cdcsync_replication_lag_bytes",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(metrics, "cdcsync_epochs_committed_total 0") {
		t.Errorf("no epoch counted as committed:\n%s", metrics)
	}
	for _, want := range []string{"cdcsync_source_connected 1", "cdcsync_lease_held 1", "cdcsync_lease_token 1", `cdcsync_build_info{go="go`, `cdcsync_table_state{state="streaming",table="it_ops.t"} 1`,
		`cdcsync_table_last_commit_timestamp_seconds{table="it_ops.t"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// status tells who holds the pipeline and how each table is, from the
	// catalog and the daemon's endpoint, without the MySQL password.
	out, code := runCLIEnv(t, []string{"CDCSYNC_TEST_PASSWORD="}, "status", "--config", e.cfgPath)
	t.Logf("cdcsync status:\n%s", out)
	for _, want := range []string{
		fmt.Sprintf("holder:     %s pid %d since", hostname(t), p.cmd.Process.Pid),
		fmt.Sprintf("daemon:     http://127.0.0.1:%d: ready", port),
		"source:     connected, lag ",
		"checkpoint: epoch ",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status (exit %d) lacks %q:\n%s", code, want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^it_ops\.t +it_ops\.t +streaming +\d+ +20\d\d-`).MatchString(out) {
		t.Errorf("status shows no streaming line for it_ops.t:\n%s", out)
	}
	out, code = runCLIEnv(t, []string{"CDCSYNC_TEST_PASSWORD="}, "status", "--config", e.cfgPath, "--json")
	var st struct {
		Holder struct{ PID int }
		Daemon struct {
			Ready           bool
			SourceConnected *bool `json:"source_connected"`
		}
		Tables []struct{ Table, State string }
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 {
		t.Fatalf("status --json (exit %d): %v\n%s", code, err, out)
	}
	if st.Holder.PID != p.cmd.Process.Pid || !st.Daemon.Ready || st.Daemon.SourceConnected == nil || !*st.Daemon.SourceConnected ||
		len(st.Tables) != 1 || st.Tables[0].Table != "it_ops.t" || st.Tables[0].State != "streaming" {
		t.Errorf("status --json: %+v", st)
	}

	_ = p.cmd.Process.Signal(syscall.SIGINT)
	<-p.done
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d after SIGINT, want 0; output:\n%s", code, p.output())
	}
	out = p.output()
	if strings.Contains(out, testenv.ReplPassword) {
		t.Errorf("the log contains the MySQL password:\n%s", out)
	}
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line is not JSON: %q", line)
			continue
		}
		if rec["level"] == nil || rec["msg"] == nil {
			t.Errorf("log line lacks level or msg: %q", line)
		}
		lines++
	}
	if lines < 3 || !strings.Contains(out, "epoch committed") || !strings.Contains(out, "stopped cleanly") {
		t.Errorf("the log lacks the expected records:\n%s", out)
	}

	// Once the daemon is gone, status says so and shows the released lease.
	out, code = runCLI(t, "status", "--config", e.cfgPath)
	for _, want := range []string{"holder:     none (released by", "daemon:     no daemon answers at"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status after the daemon stopped (exit %d) lacks %q:\n%s", code, want, out)
		}
	}
}

// TestStartBeforeTheTablesExist starts a new pipeline whose include
// patterns select no table yet, as a user does who starts the mirror before
// the application creates its schema: run warns and streams, and picks the
// tables up as they are created (issue 16: it refused to start).
func TestStartBeforeTheTablesExist(t *testing.T) {
	e := newEnv(t, "it_late", envOptions{})
	p := e.start()
	<-p.waitFor("streaming the binlog", time.Minute)
	if out := p.output(); !strings.Contains(out, "selects no table on") || !strings.Contains(out, "as they are created") || p.exited() {
		t.Fatalf("run without tables did not warn and stream; output:\n%s", out)
	}
	mustExec(t, "CREATE TABLE it_late.orders (id INT PRIMARY KEY, v VARCHAR(20))")
	mustExec(t, "INSERT INTO it_late.orders VALUES (1, 'a'), (2, 'b')")
	mustExec(t, "UPDATE it_late.orders SET v = 'c' WHERE id = 2")
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("orders")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}
}
