package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/lake"
	"github.com/cdcsync/cdcsync/merge"
	"github.com/cdcsync/cdcsync/metrics"
)

const adminTestToken = "s3cret-admin-token-0123456789"

// adminTestConfig parses a configuration whose admin: section is admin
// ("" for the default socket).
func adminTestConfig(t *testing.T, admin string) *config.Config {
	t.Helper()
	src := "pipeline: admintest\nsource:\n  user: u\n  server_id: 1\n  include: [\"a.*\"]\nhttp:\n  listen: \"off\"\n"
	if admin != "" {
		src += "admin:\n" + admin
	}
	cfg, err := config.Parse([]byte(src), filepath.Join(t.TempDir(), "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// resyncRecorder is the daemon's side of a resync request.
type resyncRecorder struct {
	mu   sync.Mutex
	ids  []string
	keys [][]any // of repairs
	tags []string
	err  error
}

func (r *resyncRecorder) resync(_ context.Context, id cdcsync.TableID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.ids = append(r.ids, id.String())
	return nil
}

func (r *resyncRecorder) repair(_ context.Context, id cdcsync.TableID, keys [][]any) (merge.RepairResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return merge.RepairResult{}, r.err
	}
	r.ids = append(r.ids, id.String())
	r.keys = append(r.keys, keys...)
	return merge.RepairResult{Epoch: 7, Upserted: len(keys)}, nil
}

func (r *resyncRecorder) tag(_ context.Context, cut lake.Cut, name string, keep time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	for _, t := range cut.Tables {
		r.ids = append(r.ids, fmt.Sprintf("%s=%s@%d", t.ID, t.Iceberg, t.Snapshot))
	}
	r.tags = append(r.tags, fmt.Sprintf("%s/%s", name, keep))
	return nil
}

func (r *resyncRecorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids)
}

// syncBuffer is a log destination the server's goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startAdmin(t *testing.T, cfg *config.Config, rec *resyncRecorder) (*adminServer, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	s, err := serveAdmin(cfg, rec, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, logs
}

// unixClient talks HTTP over the socket at path.
func unixClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
}

// badRequest is a request an admin endpoint refuses: the answer's code
// and a text its body holds.
type badRequest struct {
	method, body string
	code         int
	want         string
}

// badRequests sends each request (a JSON body) to url and checks the
// refusal.
func badRequests(t *testing.T, c *http.Client, url string, reqs []badRequest) {
	t.Helper()
	for _, tc := range reqs {
		if code, body := do(t, c, tc.method, url, map[string]string{"Content-Type": "application/json"}, tc.body); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %q: %d %q; want %d and %q", tc.method, tc.body, code, body, tc.code, tc.want)
		}
	}
}

func do(t *testing.T, c *http.Client, method, url string, header map[string]string, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAdminRefusesWebPages: the admin endpoints take requests from
// programs; what a web page can make a browser send is refused, whatever
// the listener.
func TestAdminRefusesWebPages(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "admin.sock")
	rec := &resyncRecorder{}
	_, logs := startAdmin(t, adminTestConfig(t, "  listen: "+sock+"\n  pprof: true\n"), rec)
	c := unixClient(sock)
	const resync = "http://cdcsync/v1/resync?table=a.t"
	cases := []struct {
		name   string
		method string
		header map[string]string
		body   string
		code   int
		want   string
	}{
		{"a program", "POST", nil, "", 200, "copying a.t afresh"},
		{"a program sending JSON", "POST", map[string]string{"Content-Type": "application/json"}, "{}", 200, "copying a.t afresh"},
		{"GET", "GET", nil, "", 405, "use POST /v1/resync?table=DB.TABLE"},
		{"fetch from another site", "POST", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, "", 403, "a request from a web page"},
		{"no-cors fetch, Origin only", "POST", map[string]string{"Origin": "null"}, "", 403, "a request from a web page"},
		{"same-origin page (DNS rebinding)", "POST", map[string]string{"Sec-Fetch-Site": "same-origin"}, "", 403, "a request from a web page"},
		{"HTML form", "POST", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "table=a.t", 415, "which web forms send"},
		{"multipart form", "POST", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, "--x--", 415, "which web forms send"},
		{"text/plain fetch", "POST", map[string]string{"Content-Type": "text/plain;charset=UTF-8"}, "x", 415, "which web forms send"},
		{"malformed content type", "POST", map[string]string{"Content-Type": ";;"}, "x", 415, "which web forms send"},
	}
	for _, tc := range cases {
		before := rec.calls()
		code, body := do(t, c, tc.method, resync, tc.header, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q; want %d and %q", tc.name, code, body, tc.code, tc.want)
		}
		if called := rec.calls() > before; called != (tc.code == 200) {
			t.Errorf("%s: resync called: %v", tc.name, called)
		}
	}
	if !strings.Contains(logs.String(), "admin request refused") {
		t.Errorf("refusals are not logged:\n%s", logs)
	}

	// Profiles: a person may open them (through a tunnel); another site's
	// page may not load them.
	for _, tc := range []struct {
		site string
		code int
	}{{"", 200}, {"none", 200}, {"same-origin", 200}, {"cross-site", 403}, {"same-site", 403}} {
		h := map[string]string{}
		if tc.site != "" {
			h["Sec-Fetch-Site"] = tc.site
		}
		if code, body := do(t, c, "GET", "http://cdcsync/debug/pprof/", h, ""); code != tc.code {
			t.Errorf("GET /debug/pprof/ with Sec-Fetch-Site %q: %d %q, want %d", tc.site, code, body, tc.code)
		}
	}

	// Errors of the pipeline keep their codes.
	for _, tc := range []struct {
		url  string
		err  error
		code int
	}{
		{"http://cdcsync/v1/resync?table=nodot", nil, 400},
		{resync, errNotRunning, 503},
		{resync, errors.New("a.t is not mirrored"), 409},
	} {
		rec.err = tc.err
		if code, body := do(t, c, "POST", tc.url, nil, ""); code != tc.code {
			t.Errorf("POST %s with %v: %d %q, want %d", tc.url, tc.err, code, body, tc.code)
		}
	}
}

// TestAdminRepair: cdcsync verify --repair finds the daemon's admin socket
// and hands it the keys; the daemon's answer comes back, and its errors
// read as what to do.
func TestAdminRepair(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "admin.sock")
	cfg := adminTestConfig(t, "  listen: "+sock+"\n")
	rec := &resyncRecorder{}
	startAdmin(t, cfg, rec)
	client, err := newAdminClient(&cfg.Admin)
	if err != nil {
		t.Fatal(err)
	}
	id := cdcsync.TableID{Database: "a", Table: "t"}
	keys := [][]any{{int64(1), "x"}, {int64(2), "y\x00z"}}
	res, err := client.repair(context.Background(), id, keys)
	if err != nil {
		t.Fatal(err)
	}
	if res.Epoch != 7 || res.Upserted != 2 {
		t.Errorf("answer %+v, want epoch 7 and 2 upserted", res)
	}
	if fmt.Sprint(rec.keys) != fmt.Sprint(keys) || fmt.Sprint(rec.ids) != "[a.t]" {
		t.Errorf("the daemon got %v %v, want a.t %v", rec.ids, rec.keys, keys)
	}

	rec.err = errNotRunning
	if _, err := client.repair(context.Background(), id, keys); err == nil || !strings.Contains(err.Error(), "not streaming right now") {
		t.Errorf("repair while the pipeline restarts: %v", err)
	}
	rec.err = nil
	badRequests(t, unixClient(sock), "http://cdcsync/v1/repair?table=a.t", []badRequest{
		{"GET", "", 405, "use POST /v1/repair"},
		{"POST", "{", 400, `the body must be {"keys": [...]}`},
		{"POST", `{"keys": ["not a key"]}`, 400, ""},
	})

	// No daemon: the error says --repair needs one.
	cfg2 := adminTestConfig(t, "  listen: "+filepath.Join(t.TempDir(), "none.sock")+"\n")
	client2, _ := newAdminClient(&cfg2.Admin)
	if _, err := client2.repair(context.Background(), id, keys); err == nil || !strings.Contains(err.Error(), "--repair goes through the running daemon") || !strings.Contains(err.Error(), "cdcsync resync a.t") {
		t.Errorf("repair without a daemon: %v", err)
	}
}

// TestAdminTag: cdcsync cut --tag hands the cut to the daemon, which tags
// it; a daemon that is not streaming, or none at all, leaves it to cut.
func TestAdminTag(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "admin.sock")
	cfg := adminTestConfig(t, "  listen: "+sock+"\n")
	rec := &resyncRecorder{}
	startAdmin(t, cfg, rec)
	client, err := newAdminClient(&cfg.Admin)
	if err != nil {
		t.Fatal(err)
	}
	cut := lake.Cut{Epoch: 9, Tables: []lake.CutTable{
		{ID: cdcsync.TableID{Database: "a", Table: "t"}, Iceberg: "a.t", Snapshot: 11},
		{ID: cdcsync.TableID{Database: "a", Table: "u"}, Iceberg: "ns.a_u", Snapshot: 12},
	}}
	if err := client.tag(context.Background(), cut, "cut-1", 168*time.Hour); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(rec.ids, rec.tags), "[a.t=a.t@11 a.u=ns.a_u@12] [cut-1/168h0m0s]"; got != want {
		t.Errorf("the daemon got %s, want %s", got, want)
	}

	rec.err = errNotRunning
	var ns notStreamingError
	if err := client.tag(context.Background(), cut, "cut-2", 0); !errors.As(err, &ns) {
		t.Errorf("tag while the pipeline restarts: %v, want the answer of a daemon not streaming", err)
	}
	rec.err = errors.New("table a.t already has a tag or branch \"cut-2\"")
	if err := client.tag(context.Background(), cut, "cut-2", 0); err == nil || !strings.Contains(err.Error(), "already has a tag") || errors.As(err, &ns) {
		t.Errorf("tag refused by the daemon: %v", err)
	}
	rec.err = nil
	badRequests(t, unixClient(sock), "http://cdcsync/v1/tag", []badRequest{
		{"GET", "", 405, "use POST /v1/tag"},
		{"POST", "{", 400, `the body must be {"tag": NAME`},
		{"POST", `{"tag": "x", "tables": []}`, 400, "names no table"},
		{"POST", `{"tag": "x", "keep": "a week", "tables": [{"table": "a.t", "iceberg": "a.t", "snapshot_id": 1}]}`, 400, `keep "a week" is not a duration`},
		{"POST", `{"tag": "x", "tables": [{"table": "t", "iceberg": "a.t", "snapshot_id": 1}]}`, 400, "DB.TABLE"},
		{"POST", `{"tag": "x", "tables": [{"table": "a.t", "iceberg": "t", "snapshot_id": 1}]}`, 400, "NAMESPACE.TABLE and a snapshot_id"},
	})

	// No daemon: cut tags by itself.
	cfg2 := adminTestConfig(t, "  listen: "+filepath.Join(t.TempDir(), "none.sock")+"\n")
	client2, _ := newAdminClient(&cfg2.Admin)
	var ue unreachableError
	if err := client2.tag(context.Background(), cut, "cut-3", 0); !errors.As(err, &ue) {
		t.Errorf("tag without a daemon: %v, want unreachable", err)
	}
}

// TestAdminToken: a TCP admin listener needs the token, compared in
// constant time and never logged.
func TestAdminToken(t *testing.T) {
	addr := freeAddr(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(adminTestToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := adminTestConfig(t, "  listen: "+addr+"\n  token_file: "+tokenFile+"\n")
	rec := &resyncRecorder{}
	_, logs := startAdmin(t, cfg, rec)
	url := "http://" + addr + "/v1/resync?table=a.t"
	for _, tc := range []struct {
		auth string
		code int
	}{
		{"", 401},
		{"Bearer wrong", 401},
		{"Bearer " + adminTestToken[:len(adminTestToken)-1] + "X", 401},
		{"Basic " + adminTestToken, 401},
		{adminTestToken, 401},
		{"Bearer " + adminTestToken, 200},
	} {
		h := map[string]string{}
		if tc.auth != "" {
			h["Authorization"] = tc.auth
		}
		if code, body := do(t, http.DefaultClient, "POST", url, h, ""); code != tc.code {
			t.Errorf("Authorization %q: %d %q, want %d", tc.auth, code, body, tc.code)
		}
	}
	if rec.calls() != 1 {
		t.Errorf("resync called %d times, want once", rec.calls())
	}
	// A web page is refused before the token is looked at.
	if code, _ := do(t, http.DefaultClient, "POST", url, map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer " + adminTestToken}, ""); code != 403 {
		t.Errorf("web page with the token: %d, want 403", code)
	}
	// The profiler is off by default.
	if code, body := do(t, http.DefaultClient, "GET", "http://"+addr+"/debug/pprof/", map[string]string{"Authorization": "Bearer " + adminTestToken}, ""); code != 404 || !strings.Contains(body, "admin.pprof: true") {
		t.Errorf("pprof off: %d %q", code, body)
	}
	if strings.Contains(logs.String(), adminTestToken) || !strings.Contains(logs.String(), "token=true") {
		t.Errorf("the log shows the token, or not that one is required:\n%s", logs)
	}

	// cdcsync resync's client sends it.
	c, err := newAdminClient(&cfg.Admin)
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := c.resync(context.Background(), cdcsync.TableID{Database: "a", Table: "u"}); err != nil || !strings.Contains(msg, "copying a.u afresh") {
		t.Errorf("client with the token: %q, %v", msg, err)
	}
	bad := cfg.Admin
	bad.TokenFile = ""
	bad.Token = "another-token-0123456789"
	c, _ = newAdminClient(&bad)
	if _, err := c.resync(context.Background(), cdcsync.TableID{Database: "a", Table: "u"}); err == nil || !strings.Contains(err.Error(), "refused the admin token") ||
		strings.Contains(err.Error(), "another-token") {
		t.Errorf("client with a wrong token: %v", err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// adminChildEnv makes the test binary a daemon that serves the admin
// socket of the configuration at its value until it is killed.
const adminChildEnv = "CDCSYNC_TEST_ADMIN_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(adminChildEnv); path != "" {
		cfg, err := config.Load(path)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		s, err := serveAdmin(cfg, &resyncRecorder{}, slog.New(slog.DiscardHandler))
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		defer s.Close()
		fmt.Println("serving")
		select {}
	}
	os.Exit(m.Run())
}

// TestAdminSocket: the default socket is private to the daemon's user, a
// second daemon is refused while the first lives, and a socket a killed
// daemon left behind is taken over.
func TestAdminSocket(t *testing.T) {
	tmp, err := os.MkdirTemp("", "adm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_RUNTIME_DIR", "")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfgPath, []byte("pipeline: admintest\nsource:\n  user: u\n  server_id: 1\n  include: [\"a.*\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(tmp, "cdcsync-"+strconv.Itoa(os.Getuid()), "admintest.sock")
	if cfg.Admin.Listen != sock {
		t.Fatalf("default socket %s, want %s", cfg.Admin.Listen, sock)
	}

	// A daemon in another process, killed with SIGKILL.
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), adminChildEnv+"="+cfgPath)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "serving\n" {
		t.Fatalf("the child daemon did not start: %q", line)
	}
	for path, want := range map[string]os.FileMode{filepath.Dir(sock): 0o700 | os.ModeDir, sock: 0o600 | os.ModeSocket} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v, %v; want mode %v", path, fi.Mode(), err, want)
		}
	}
	_, err = serveAdmin(cfg, &resyncRecorder{}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "another cdcsync daemon serves the admin socket "+sock+`: pipeline "admintest" is running already`) {
		t.Fatalf("second daemon: %v", err)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the killed daemon left no socket behind (%v); the test needs one", err)
	}
	// cdcsync resync finds no daemon behind the stale socket.
	c, _ := newAdminClient(&cfg.Admin)
	var ue unreachableError
	if _, err := c.resync(context.Background(), cdcsync.TableID{Database: "a", Table: "t"}); !errors.As(err, &ue) || !strings.Contains(err.Error(), "nothing listens on "+sock) {
		t.Errorf("resync against a stale socket: %v", err)
	}

	rec := &resyncRecorder{}
	s, _ := startAdmin(t, cfg, rec)
	c, _ = newAdminClient(&cfg.Admin)
	if msg, err := c.resync(context.Background(), cdcsync.TableID{Database: "a", Table: "t"}); err != nil || !strings.Contains(msg, "copying a.t afresh") {
		t.Fatalf("resync through the taken-over socket: %q, %v", msg, err)
	}

	// A socket removed by a cleaner of /tmp is made again.
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	s.sock.refresh()
	c, _ = newAdminClient(&cfg.Admin)
	if _, err := c.resync(context.Background(), cdcsync.TableID{Database: "a", Table: "t"}); err != nil {
		t.Errorf("resync after the socket was made again: %v", err)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the socket made again: %v, %v", fi, err)
	}
	s.Close()
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is left after Close: %v", err)
	}

	// What is not cdcsync's is not touched.
	if err := os.WriteFile(sock, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := serveAdmin(cfg, rec, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), sock+" exists and is not a socket") {
		t.Errorf("a file at the socket path: %v", err)
	}
	os.Remove(sock)
	if err := os.Chmod(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := serveAdmin(cfg, rec, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "has mode 0755: others may enter it") {
		t.Errorf("a socket directory others may enter: %v", err)
	}
}

// TestAdminSocketFallback: cdcsync resync tries every default socket, so
// it finds a daemon started without XDG_RUNTIME_DIR from a shell that has
// it.
func TestAdminSocketFallback(t *testing.T) {
	tmp, err := os.MkdirTemp("", "adm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_RUNTIME_DIR", "")
	daemonCfg := adminTestConfig(t, "")
	rec := &resyncRecorder{}
	startAdmin(t, daemonCfg, rec)
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(tmp, "run"))
	cliCfg := adminTestConfig(t, "")
	if len(cliCfg.Admin.Sockets()) != 2 || cliCfg.Admin.Sockets()[1] != daemonCfg.Admin.Listen {
		t.Fatalf("sockets %v, daemon's %s", cliCfg.Admin.Sockets(), daemonCfg.Admin.Listen)
	}
	c, _ := newAdminClient(&cliCfg.Admin)
	if msg, err := c.resync(context.Background(), cdcsync.TableID{Database: "a", Table: "t"}); err != nil || !strings.Contains(msg, "copying a.t afresh") {
		t.Errorf("resync through the second default socket: %q, %v", msg, err)
	}
}

// TestHTTPListenIsReadOnly: http.listen serves the metrics and health
// checks, and says where the admin endpoints went.
func TestHTTPListenIsReadOnly(t *testing.T) {
	addr := freeAddr(t)
	st := &status{}
	st.healthy.Store(true)
	srv, err := serveHTTP(addr, metrics.New(), st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	base := "http://" + addr
	for _, tc := range []struct {
		method, path string
		code         int
		want         string
	}{
		{"GET", "/metrics", 200, "go_goroutines"},
		{"GET", "/healthz", 200, "ok"},
		{"GET", "/readyz", 200, "ready"},
		{"POST", "/healthz", 405, ""},
		{"POST", "/v1/resync?table=a.t", 404, "on the admin listener (admin.listen"},
		{"POST", "/v1/repair?table=a.t", 404, "on the admin listener (admin.listen"},
		{"GET", "/debug/pprof/", 404, "on the admin listener"},
		{"GET", "/debug/pprof/profile?seconds=1", 404, "on the admin listener"},
	} {
		if code, body := do(t, http.DefaultClient, tc.method, base+tc.path, nil, ""); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s: %d %q; want %d and %q", tc.method, tc.path, code, body, tc.code, tc.want)
		}
	}
}

// TestAdminOff: admin.listen: off serves nothing, and cdcsync resync says
// how to go on.
func TestAdminOff(t *testing.T) {
	cfg := adminTestConfig(t, "  listen: \"off\"\n")
	s, err := serveAdmin(cfg, &resyncRecorder{}, slog.New(slog.DiscardHandler))
	if s != nil || err != nil {
		t.Fatalf("off: %v, %v", s, err)
	}
	s.Close() // a nil server closes
	var out, errOut bytes.Buffer
	err = runResync(context.Background(), cfg, []string{"a.t"}, false, false, &out, &errOut)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "admin.listen is off") || !strings.Contains(err.Error(), "--offline") {
		t.Errorf("resync with admin off: %v", err)
	}
}
