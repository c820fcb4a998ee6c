package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestAdminSocketPaths(t *testing.T) {
	uid := strconv.Itoa(os.Getuid())
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	cases := []struct {
		lookup func(string) (string, bool)
		want   []string
	}{
		{env(), []string{"/tmp/cdcsync-" + uid + "/shop.sock"}},
		{env("TMPDIR", "/var/tmp"), []string{"/var/tmp/cdcsync-" + uid + "/shop.sock"}},
		{env("XDG_RUNTIME_DIR", "/run/user/1000"), []string{"/run/user/1000/cdcsync/shop.sock", "/tmp/cdcsync-" + uid + "/shop.sock"}},
		{env("XDG_RUNTIME_DIR", "relative"), []string{"/tmp/cdcsync-" + uid + "/shop.sock"}},
	}
	for _, c := range cases {
		if got := AdminSocketPaths("shop", c.lookup); strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("AdminSocketPaths = %v, want %v", got, c.want)
		}
	}
	// A long pipeline name is shortened, differently for each name.
	long := strings.Repeat("a", 90)
	p1, p2 := AdminSocketPaths(long, env())[0], AdminSocketPaths(long+"b", env())[0]
	if p1 == p2 || len(filepath.Base(p1)) > 50 || !strings.HasPrefix(filepath.Base(p1), strings.Repeat("a", 30)+"-") {
		t.Errorf("long names: %s, %s", p1, p2)
	}
}

func TestAdminConfig(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "")
	c := parseOK(t, "pipeline: shop\n"+minimal)
	a := &c.Admin
	if !a.DefaultSocket() || a.Network() != "unix" || a.Listen != AdminSocketPaths("shop", os.LookupEnv)[0] || a.PProf {
		t.Errorf("default admin: %+v", a)
	}
	if tok, err := a.ResolveToken(); tok != "" || err != nil {
		t.Errorf("default token: %q, %v", tok, err)
	}

	// A relative socket path is relative to the configuration file.
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(path, []byte(minimal+"admin:\n  listen: ./run/admin.sock\n  pprof: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Admin.Listen != filepath.Join(dir, "run", "admin.sock") || c.Admin.DefaultSocket() || !c.Admin.PProf ||
		strings.Join(c.Admin.Sockets(), " ") != c.Admin.Listen {
		t.Errorf("relative socket: %+v", c.Admin)
	}

	c = parseOK(t, minimal+"admin:\n  listen: OFF\n")
	if c.Admin.Listen != AdminOff || c.Admin.Network() != "" || c.Admin.Sockets() != nil {
		t.Errorf("off: %+v", c.Admin)
	}

	// TCP with a token from a file or from the environment.
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c = parseOK(t, minimal+"admin:\n  listen: 127.0.0.1:9188\n  token_file: "+tokenFile+"\n")
	if tok, err := c.Admin.ResolveToken(); tok != "0123456789abcdef0123" || err != nil || c.Admin.Network() != "tcp" {
		t.Errorf("token_file: %q, %v", tok, err)
	}
	t.Setenv("CDCSYNC_TEST_ADMIN_TOKEN", "short")
	c = parseOK(t, minimal+"admin:\n  listen: 127.0.0.1:9188\n  token: ${CDCSYNC_TEST_ADMIN_TOKEN}\n")
	if _, err := c.Admin.ResolveToken(); err == nil || !strings.Contains(err.Error(), "admin.token holds a token of 5 characters; use at least 16") || strings.Contains(err.Error(), "short") {
		t.Errorf("short token: %v", err)
	}
	// An unset variable is reported by the commands that use the token.
	os.Unsetenv("CDCSYNC_TEST_ADMIN_TOKEN")
	c = parseOK(t, minimal+"admin:\n  listen: 127.0.0.1:9188\n  token: ${CDCSYNC_TEST_ADMIN_TOKEN}\n")
	if _, err := c.Admin.ResolveToken(); err == nil || !strings.Contains(err.Error(), "line 8: admin.token: environment variable CDCSYNC_TEST_ADMIN_TOKEN is not set") {
		t.Errorf("unset token variable: %v", err)
	}
	if _, err := (&Admin{TokenFile: filepath.Join(dir, "none")}).ResolveToken(); err == nil || !strings.Contains(err.Error(), "admin.token_file") {
		t.Errorf("missing token file: %v", err)
	}

	for _, tc := range []struct{ src, want string }{
		{"admin:\n  listen: 127.0.0.1:9188\n", `line 7: admin.listen "127.0.0.1:9188" is a TCP address, which every local user (and, beyond loopback, every host that reaches it) can connect to, so it needs a token: set admin.token_file`},
		{"admin:\n  listen: :9188\n  pprof: true\n", `admin.listen ":9188" is a TCP address`},
		{"admin:\n  listen: admin.sock\n", `line 7: admin.listen "admin.sock" is neither a Unix socket path (a path with a "/", e.g. /run/cdcsync/cdcsync.sock or ./admin.sock) nor host:port`},
		{"admin:\n  listen: 127.0.0.1:0\n  token: 0123456789abcdef\n", `admin.listen "127.0.0.1:0" is neither`},
		{"admin:\n  listen: \"\"\n", `line 7: admin.listen is empty: write a Unix socket path`},
		{"admin:\n  listen: \"off\"\n  pprof: true\n  token_file: /t\n", `line 7: admin.listen is off but admin sets token_file, pprof, which would be ignored`},
		{"admin:\n  listen: 127.0.0.1:9188\n  token: 0123456789abcdef\n  token_file: /t\n", `line 9: admin.token and admin.token_file are both set`},
		{"http:\n  listen: :9188\nadmin:\n  listen: 127.0.0.1:9188\n  token: 0123456789abcdef\n", `line 9: admin.listen "127.0.0.1:9188" is the address of http.listen`},
		{"admin:\n  listen: /" + strings.Repeat("x", 120) + ".sock\n", `more than a Unix socket path may be (107)`},
		{"admin:\n  listen: ~/admin.sock\n", `admin.listen starts with "~"`},
	} {
		wantContains(t, parseErr(t, minimal+tc.src), tc.want)
	}
}
