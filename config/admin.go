package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Admin configures the admin listener of `cdcsync run`: POST /v1/resync
// (what `cdcsync resync` calls) and, when PProf is set, Go's profiler
// under /debug/pprof/. It is separate from http.listen, which serves only
// the read-only /metrics, /healthz and /readyz.
type Admin struct {
	// Listen is a Unix socket path (a value with a "/"), host:port (which
	// needs a token) or "off". Default: a socket named after the pipeline
	// in a directory of its own (AdminSocketPaths).
	Listen    string `yaml:"listen"`
	Token     Secret `yaml:"token"`      // usually ${CDCSYNC_ADMIN_TOKEN}; exclusive with token_file
	TokenFile string `yaml:"token_file"` // a file whose content (trailing newlines trimmed) is the token
	PProf     bool   `yaml:"pprof"`      // serve /debug/pprof/ on the admin listener; default false

	// tokenErr is set when token names an unset environment variable:
	// only the commands that use the token (run, resync) report it.
	tokenErr error
	// sockets are the default socket paths (Listen is the first) when
	// listen is not written; nil otherwise.
	sockets []string
}

// AdminOff is the value of admin.listen that disables the admin listener.
const AdminOff = "off"

// MinAdminTokenLen is the shortest admin token accepted.
const MinAdminTokenLen = 16

// maxSocketPath is the longest Unix socket path Linux accepts (sun_path
// holds 108 bytes with the terminating NUL).
const maxSocketPath = 107

// AdminSocketPaths returns the default admin socket paths of a pipeline, in
// the order the daemon prefers them: $XDG_RUNTIME_DIR/cdcsync/NAME.sock
// when XDG_RUNTIME_DIR is set (an absolute path), then
// $TMPDIR/cdcsync-UID/NAME.sock (TMPDIR defaulting to /tmp, like
// os.TempDir). The daemon listens on the first; `cdcsync resync` tries
// each, so a daemon started without XDG_RUNTIME_DIR (a system service) is
// found from a login shell that has it. NAME is the pipeline, shortened
// with a hash when it is long, so that the path fits a socket address.
func AdminSocketPaths(pipeline string, lookup func(string) (string, bool)) []string {
	name := pipeline
	if len(name) > 40 {
		sum := sha256.Sum256([]byte(pipeline))
		name = name[:30] + "-" + hex.EncodeToString(sum[:4])
	}
	name += ".sock"
	var out []string
	if x, ok := lookup("XDG_RUNTIME_DIR"); ok && filepath.IsAbs(x) {
		out = append(out, filepath.Join(x, "cdcsync", name))
	}
	tmp, ok := lookup("TMPDIR")
	if !ok || tmp == "" {
		tmp = "/tmp"
	}
	return append(out, filepath.Join(tmp, "cdcsync-"+strconv.Itoa(os.Getuid()), name))
}

// Network says how the admin listener listens: "unix", "tcp", or "" when it
// is off.
func (a *Admin) Network() string {
	switch {
	case a.Listen == AdminOff || a.Listen == "":
		return ""
	case strings.Contains(a.Listen, "/"):
		return "unix"
	}
	return "tcp"
}

// DefaultSocket reports whether Listen is the default socket path, whose
// directory belongs to cdcsync: the daemon creates it (mode 0700) and
// refuses one that another user owns or others may write to.
func (a *Admin) DefaultSocket() bool { return len(a.sockets) > 0 }

// Sockets returns the Unix socket paths `cdcsync resync` tries, in order:
// Listen, and when it is the default, the other default paths too. It is
// nil unless the admin listener is a Unix socket.
func (a *Admin) Sockets() []string {
	if a.Network() != "unix" {
		return nil
	}
	if len(a.sockets) > 0 {
		return a.sockets
	}
	return []string{a.Listen}
}

// ResolveToken returns the admin token: the content of token_file
// (trailing newlines trimmed) when it is set, else token; "" when neither
// is set. A token shorter than MinAdminTokenLen is refused.
func (a *Admin) ResolveToken() (string, error) {
	if a.tokenErr != nil {
		return "", a.tokenErr
	}
	token, key := a.Token.Value(), "admin.token"
	if a.TokenFile != "" {
		b, err := os.ReadFile(a.TokenFile)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", fmt.Errorf("admin.token_file %q cannot be read (%w): check the path and that the user running cdcsync may read the file", a.TokenFile, err)
		}
		token, key = strings.TrimRight(string(b), "\r\n"), fmt.Sprintf("admin.token_file %q", a.TokenFile)
	}
	if token != "" && len(token) < MinAdminTokenLen {
		return "", fmt.Errorf("%s holds a token of %d characters; use at least %d random ones, e.g. the output of: openssl rand -hex 32", key, len(token), MinAdminTokenLen)
	}
	return token, nil
}

// applyAdminDefaults sets admin.listen, when it is not written, to the
// pipeline's default socket.
func (c *Config) applyAdminDefaults(lookup func(string) (string, bool)) {
	a := &c.Admin
	if a.Listen == "" && !c.explicit("admin.listen") {
		a.sockets = AdminSocketPaths(c.Pipeline, lookup)
		a.Listen = a.sockets[0]
	}
	a.Listen = strings.TrimSpace(a.Listen)
	if strings.EqualFold(a.Listen, AdminOff) {
		a.Listen = AdminOff
	}
}

func (p *problems) admin() {
	c := p.c
	a := &c.Admin
	if a.Token != "" && a.TokenFile != "" {
		p.add("admin.token_file", "admin.token and admin.token_file are both set: keep only one of them")
	}
	hasToken := a.Token != "" || a.TokenFile != "" || a.tokenErr != nil
	switch a.Network() {
	case "":
		if a.Listen == "" {
			p.add("admin.listen", "admin.listen %s: write a Unix socket path (e.g. /run/cdcsync/%s.sock), host:port with a token, or off; or remove the key for the default socket", p.absent("admin.listen", "empty"), c.Pipeline)
			return
		}
		var set []string
		for _, f := range []struct {
			key string
			on  bool
		}{{"token", a.Token != "" || a.tokenErr != nil}, {"token_file", a.TokenFile != ""}, {"pprof", a.PProf}} {
			if f.on {
				set = append(set, f.key)
			}
		}
		if len(set) > 0 {
			p.add("admin.listen", "admin.listen is off but admin sets %s, which would be ignored: remove %s, or set listen", strings.Join(set, ", "), strings.Join(set, ", "))
		}
	case "unix":
		if !a.DefaultSocket() && len(a.Listen) > maxSocketPath {
			p.add("admin.listen", "admin.listen %q is %d bytes long, more than a Unix socket path may be (%d): choose a shorter path, e.g. /run/cdcsync/%s.sock", a.Listen, len(a.Listen), maxSocketPath, c.Pipeline)
		}
	case "tcp":
		host, port, err := net.SplitHostPort(a.Listen)
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil || n < 1 || n > 65535 || strings.ContainsAny(host, " ") {
			p.add("admin.listen", `admin.listen %q is neither a Unix socket path (a path with a "/", e.g. /run/cdcsync/%s.sock or ./admin.sock) nor host:port (e.g. 127.0.0.1:9188), nor off`, a.Listen, c.Pipeline)
			return
		}
		if !hasToken {
			p.add("admin.listen", "admin.listen %q is a TCP address, which every local user (and, beyond loopback, every host that reaches it) can connect to, "+
				"so it needs a token: set admin.token_file to a file holding one (e.g. openssl rand -hex 32 > /etc/cdcsync/admin.token) or admin.token: ${CDCSYNC_ADMIN_TOKEN}; "+
				"or use a Unix socket path, which only the daemon's user can reach", a.Listen)
		}
		if l := c.HTTP.Listen; l != HTTPOff && sameAddress(l, a.Listen) {
			p.add("admin.listen", "admin.listen %q is the address of http.listen: the admin listener needs an address of its own, e.g. 127.0.0.1:%d", a.Listen, n+1)
		}
	}
}

// sameAddress reports whether two host:port listen addresses would collide.
func sameAddress(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wild(ha) || wild(hb)
}
