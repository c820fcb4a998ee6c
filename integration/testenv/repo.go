package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModulePath is the module path of the cdcsync repository; RepoRoot looks for
// the go.mod that declares it.
const ModulePath = "github.com/cdcsync/cdcsync"

// RepoRoot returns the root of the cdcsync repository: the nearest directory
// at or above the working directory whose go.mod declares ModulePath. Tests
// run in their package directory, so this works from any package.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testenv: repo root: %w", err)
	}
	for dir := wd; ; {
		if modulePathOf(filepath.Join(dir, "go.mod")) == ModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testenv: no go.mod declaring module %s at or above %s", ModulePath, wd)
		}
		dir = parent
	}
}

// modulePathOf returns the module path declared by a go.mod file, or "".
func modulePathOf(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// findBinary looks name up on PATH, then in the extra directories.
func findBinary(name string, extraDirs ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range extraDirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New(name + " not found")
}

// toolBinary returns the pinned tool name that scripts/test.sh builds: $env
// if set, else <repo>/.tools/bin/name, else name on PATH; notFound says
// how to get it.
func toolBinary(env, name, notFound string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("testenv: %s=%s: %w", env, p, err)
		}
		return p, nil
	}
	var extra []string
	if root, err := RepoRoot(); err == nil {
		p := filepath.Join(root, ".tools", "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		extra = append(extra, filepath.Join(root, ".tools", "bin"))
	}
	if p, err := findBinary(name, extra...); err == nil {
		return p, nil
	}
	return "", errors.New("testenv: " + notFound)
}

// freePort asks the kernel for a free TCP port on 127.0.0.1. Another process
// may take it before the server binds it; callers retry on a bind failure.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testenv: free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("testenv: free port: %w", err)
	}
	return port, nil
}

// tailFile returns the last n lines of a file, for error messages.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return tailString(string(b), n)
}

func tailString(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// readFrom returns the content of path from byte offset off on.
func readFrom(path string, off int64) string {
	b, err := os.ReadFile(path)
	if err != nil || off > int64(len(b)) {
		return ""
	}
	return string(b[off:])
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}
