package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAdminEndpoints: `cdcsync resync` reaches a running daemon through
// the default admin socket, with no setting; http.listen, which a
// Prometheus setup may expose, does not serve /v1/resync or the profiler;
// a second daemon of the pipeline waits as a standby; the socket a daemon killed
// with SIGKILL leaves is taken over by the next; and a TCP admin listener
// works with its token only.
func TestAdminEndpoints(t *testing.T) {
	const dbName = "it_admin"
	// The default socket is $TMPDIR/cdcsync-UID/PIPELINE.sock: a TMPDIR of
	// this test's own keeps it apart from other runs on the machine.
	tmp, err := os.MkdirTemp("", "adm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_RUNTIME_DIR", "")
	port := freePort(t)
	e := newEnv(t, dbName, envOptions{admin: adminDefault, httpListen: "127.0.0.1:" + strconv.Itoa(port)})
	sock := filepath.Join(tmp, "cdcsync-"+strconv.Itoa(os.Getuid()), "it-admin.sock")
	if e.cfg.Admin.Listen != sock {
		t.Fatalf("default admin socket %s, want %s", e.cfg.Admin.Listen, sock)
	}
	e.exec(fmt.Sprintf("CREATE TABLE %s.t (id INT PRIMARY KEY, v INT NOT NULL)", dbName))
	e.exec(fmt.Sprintf("INSERT INTO %s.t SELECT seq, seq FROM %s.seq_1_to_500", dbName, dbName))
	resync := func() (string, int) {
		return runCLI(t, "resync", "--config", e.cfgPath, dbName+".t")
	}

	p := e.start()
	e.waitCaughtUp(p, 2*time.Minute)
	if fi, err := os.Stat(sock); err != nil || fi.Mode() != os.ModeSocket|0o600 {
		t.Fatalf("admin socket %s: %v, %v; want a socket of mode 0600", sock, fi, err)
	}
	if out, code := resync(); code != 0 || !strings.Contains(out, "copying "+dbName+".t afresh") {
		t.Fatalf("resync through the admin socket: exit %d, output %q; daemon output:\n%s", code, out, p.output())
	}
	// http.listen serves what it should, and not the admin endpoints.
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	if code, _ := httpGet(base + "/healthz"); code != 200 {
		t.Errorf("/healthz on http.listen: %d", code)
	}
	resp, err := http.Post(base+"/v1/resync?table="+dbName+".t", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /v1/resync on http.listen: %s, want 404", resp.Status)
	}
	if code, body := httpGet(base + "/debug/pprof/"); code != http.StatusNotFound || !strings.Contains(body, "admin listener") {
		t.Errorf("/debug/pprof/ on http.listen: %d %q, want 404 naming the admin listener", code, body)
	}
	e.waitCaughtUp(p, 2*time.Minute)
	if n := strings.Count(p.output(), "copying the table afresh (resync)"); n != 1 {
		t.Errorf("the daemon logged %d resyncs, want 1 (the POST on http.listen must not count); output:\n%s", n, p.output())
	}

	// A second daemon of the pipeline waits as a standby: it leaves the
	// admin socket and http.listen to the holder, which goes on.
	second := e.start()
	<-second.waitFor("is held by", time.Minute)
	if out := second.output(); !strings.Contains(out, "is held by") || !strings.Contains(out, "http.listen is in use") ||
		strings.Contains(out, "serving admin requests") || second.exited() {
		t.Errorf("a second daemon of the pipeline does not wait as a standby without the admin socket; output:\n%s", out)
	}
	if out, code := resync(); code != 0 || !strings.Contains(out, "copying "+dbName+".t afresh") {
		t.Fatalf("resync while a standby runs: exit %d, output %q", code, out)
	}
	second.kill()
	if p.exited() {
		t.Fatalf("the first daemon exited; output:\n%s", p.output())
	}
	e.waitCaughtUp(p, 2*time.Minute)

	// SIGKILL leaves the socket file; the next daemon takes it over.
	p.kill()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("the killed daemon left no socket (%v); the test needs one", err)
	}
	p = e.start()
	<-p.waitFor("streaming the binlog", time.Minute)
	e.exec(fmt.Sprintf("UPDATE %s.t SET v = v + 1 WHERE id %% 5 = 0", dbName))
	if out, code := resync(); code != 0 || !strings.Contains(out, "copying "+dbName+".t afresh") {
		t.Fatalf("resync after a SIGKILL and a restart: exit %d, output %q; daemon output:\n%s", code, out, p.output())
	}
	e.waitCaughtUp(p, 2*time.Minute)
	e.assertCopiedAgain("t", 2)
	e.assertMirrors("t")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket is left after a clean stop: %v", err)
	}

	// TCP with a token from a file.
	tokenFile := filepath.Join(e.dir, "admin.token")
	if err := os.WriteFile(tokenFile, []byte("it-admin-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	adminPort := freePort(t)
	e.rewriteConfig("http:\n", fmt.Sprintf("admin:\n  listen: 127.0.0.1:%d\n  token_file: %s\nhttp:\n", adminPort, tokenFile))
	p = e.start()
	<-p.waitFor("streaming the binlog", time.Minute)
	resp, err = http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/resync?table=%s.t", adminPort, dbName), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /v1/resync without the token: %s, want 401", resp.Status)
	}
	e.waitCaughtUp(p, 2*time.Minute)
	if out, code := resync(); code != 0 || !strings.Contains(out, "copying "+dbName+".t afresh") {
		t.Fatalf("resync over TCP with the token: exit %d, output %q; daemon output:\n%s", code, out, p.output())
	}
	e.waitCaughtUp(p, 2*time.Minute)
	e.assertMirrors("t")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, p.output())
	}
	if strings.Contains(p.output(), "it-admin-token-0123456789") {
		t.Errorf("the daemon's log shows the admin token:\n%s", p.output())
	}

	// No daemon: the table is marked for the next start, as before.
	if out, code := resync(); code != 0 || !strings.Contains(out, "next `cdcsync run` copies it") || !strings.Contains(out, "no cdcsync daemon answers") {
		t.Errorf("resync without a daemon: exit %d, output %q", code, out)
	}
}
