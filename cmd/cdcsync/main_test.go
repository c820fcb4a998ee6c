package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture"
	"github.com/cdcsync/cdcsync/lake"
	"github.com/cdcsync/cdcsync/merge"
)

func runArgs(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func exitCode(err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return 1
	}
	return 0
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "no subcommand"},
		{[]string{"frob"}, `unknown subcommand "frob"`},
		{[]string{"run"}, "needs --config FILE"},
		{[]string{"run", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"cat", "--config", "x.yaml"}, "cat takes 1 argument(s), got 0"},
		{[]string{"run", "--config", "x.yaml", "extra"}, "run takes 0 argument(s), got 1 (extra)"},
		{[]string{"run", "--config", "/nonexistent/cdcsync.yaml"}, "/nonexistent/cdcsync.yaml"},
	}
	for _, tc := range cases {
		_, _, err := runArgs(t, tc.args...)
		if exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: exit %d, error %v; want exit 2 and %q", tc.args, exitCode(err), err, tc.want)
		}
	}
	out, _, err := runArgs(t, "help")
	if err != nil || !strings.Contains(out, "cdcsync run") {
		t.Errorf("help: %v\n%s", err, out)
	}
}

// Flags may follow the positional argument, as in the README:
// cdcsync cat --config F db.table --limit 5.
func TestFlagsAfterArguments(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("source:\n  user: u\n  server_id: 1\n  include: [\"a.*\"]\nhttp:\n  listen: \"off\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := runArgs(t, "cat", "--config", cfg, "notadottedname", "--limit", "5")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), `cat needs a table as DB.TABLE, got "notadottedname"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestRestartReason(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("x: %w", capture.ErrDisconnected), "source"},
		{fmt.Errorf("x: %w", capture.ErrNewTable), "new_table"},
		{fmt.Errorf("x: %w", capture.ErrForeignKeys), "schema"},
		{fmt.Errorf("%w: catalog down", merge.ErrCommit), "commit"},
		{fmt.Errorf("%w: %w", merge.ErrCommit, cdcsync.Permanent(errors.New("other writer"))), ""},
		{fmt.Errorf("%w: %w", merge.ErrCommit, lake.ErrConflict), ""},
		{fmt.Errorf("%w: %w", capture.ErrDisconnected, cdcsync.ErrPositionLost), ""},
		// A warehouse that went away while cdcsync was restarting: the
		// setup's check fails with an outage, which is waited out.
		{exitError{1, fmt.Errorf("cannot reach the warehouse: %w", syscall.ECONNREFUSED)}, "storage"},
		{exitError{1, errors.New("preflight checks failed")}, ""},
		{errors.New("decode error"), ""},
	}
	for _, tc := range cases {
		if got := restartReason(tc.err); got != tc.want {
			t.Errorf("restartReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// Every subcommand prints its usage and flags to stdout and exits 0 on
// --help, -h and `cdcsync help NAME`, also after other arguments, without
// reading a configuration.
func TestHelpOfEverySubcommand(t *testing.T) {
	for _, c := range commands {
		fs, _, _ := c.flagSet()
		var flags []string
		fs.VisitAll(func(f *flag.Flag) { flags = append(flags, "--"+f.Name) })
		after := []string{c.name, "x.y", "--help"}
		if !c.noConfig {
			after = []string{c.name, "--config", "/nonexistent.yaml", "x.y", "--help"}
		}
		for _, args := range [][]string{
			{c.name, "--help"},
			{c.name, "-h"},
			{c.name, "-help"},
			{"help", c.name},
			after,
		} {
			out, errOut, err := runArgs(t, args...)
			if err != nil || errOut != "" {
				t.Errorf("%v: error %v, stderr %q; want exit 0 and nothing on stderr", args, err, errOut)
				continue
			}
			if !strings.HasPrefix(out, "Usage: cdcsync "+c.name+" ") || !strings.Contains(out, "--help") {
				t.Errorf("%v: stdout lacks the usage line:\n%s", args, out)
			}
			for _, f := range flags {
				if !strings.Contains(out, "\n  "+f) {
					t.Errorf("%v: stdout lacks the flag %s:\n%s", args, f, out)
				}
			}
		}
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		out, _, err := runArgs(t, args...)
		if err != nil {
			t.Errorf("%v: %v", args, err)
		}
		for _, c := range commands {
			if !strings.Contains(out, "\n  cdcsync "+c.name+" ") {
				t.Errorf("%v: the usage lacks %s:\n%s", args, c.name, out)
			}
		}
	}
	if _, _, err := runArgs(t, "help", "frob"); exitCode(err) != 2 || !strings.Contains(err.Error(), `unknown subcommand "frob"`) {
		t.Errorf("help frob: %v", err)
	}
	_, _, err := runArgs(t, "cat", "--format", "xml", "--config", "x.yaml", "a.b")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), `"xml" is not one of text, json, csv`) ||
		!strings.Contains(err.Error(), "cdcsync cat --help") {
		t.Errorf("cat --format xml: exit %d, %v", exitCode(err), err)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		out, _, err := runArgs(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for _, want := range []string{"cdcsync ", "\ncommit:", "\ncommit time:", "\nbuild date:", "\ngo:          " + runtime.Version() + " "} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out)
			}
		}
	}
	// What -ldflags -X sets wins over the build information.
	defer func(v, c, d string) { version, commit, date = v, c, d }(version, commit, date)
	version, commit, date = "v9.8.7", "0123456789abcdef", "2026-12-01T10:00:00Z"
	out, _, err := runArgs(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cdcsync v9.8.7\n", "commit:      0123456789abcdef\n", "build date:  2026-12-01T10:00:00Z\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The completion scripts parse in their shells and complete subcommands,
// flags, --format's values and --config files (bash and fish are run; zsh
// loads the script into its completion system). scripts/test.sh installs
// zsh and fish.
func TestCompletion(t *testing.T) {
	scripts := map[string]string{}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, _, err := runArgs(t, "completion", sh)
		if err != nil || !strings.Contains(out, "cdcsync") {
			t.Fatalf("completion %s: %v\n%s", sh, err, out)
		}
		path := filepath.Join(t.TempDir(), "cdcsync."+sh)
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		scripts[sh] = path
		if _, err := exec.LookPath(sh); err != nil {
			t.Fatalf("%s is not installed (scripts/test.sh installs it): %v", sh, err)
		}
		if out, err := exec.Command(sh, "-n", path).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v\n%s", sh, err, out)
		}
	}
	if _, _, err := runArgs(t, "completion", "tcsh"); exitCode(err) != 2 {
		t.Errorf("completion tcsh: %v; want exit 2", err)
	}
	dir := t.TempDir()
	for _, f := range []string{"a.yaml", "b.yml", "c.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}

	bash := func(words ...string) string {
		t.Helper()
		var q []string
		for _, w := range words {
			q = append(q, "'"+w+"'")
		}
		script := fmt.Sprintf(`source %q; COMP_WORDS=(%s); COMP_CWORD=%d; _cdcsync; printf '%%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '`,
			scripts["bash"], strings.Join(q, " "), len(words)-1)
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash %v: %v\n%s", words, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	fish := func(line string) string {
		t.Helper()
		cmd := exec.Command("fish", "--no-config", "-c", fmt.Sprintf("source %s; complete -C%s | string replace -r '\\t.*' '' | sort | string join ' '; true", scripts["fish"], fishQuote(line)))
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fish %q: %v\n%s", line, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	cases := []struct {
		words []string
		want  string
	}{
		{[]string{"cdcsync", "c"}, "cat check compact completion cut"},
		{[]string{"cdcsync", "cat", "--"}, "--config --format --help --limit"},
		{[]string{"cdcsync", "resync", "--o"}, "--offline"},
		{[]string{"cdcsync", "cat", "--format", ""}, "csv json text"},
		{[]string{"cdcsync", "cut", "--format", ""}, "duckdb json spark text trino"},
		{[]string{"cdcsync", "run", "--config", ""}, "a.yaml b.yml sub"},
		{[]string{"cdcsync", "completion", ""}, "bash fish zsh"},
		{[]string{"cdcsync", "help", "re"}, "resync"},
	}
	for _, tc := range cases {
		if got := bash(tc.words...); got != tc.want {
			t.Errorf("bash: %q completes to %q, want %q", tc.words, got, tc.want)
		}
		line := strings.Join(tc.words, " ")
		want := tc.want
		if tc.words[len(tc.words)-2] == "--config" {
			want = "a.yaml b.yml c.txt sub/" // fish offers every file
		}
		if got := fish(line); got != want {
			t.Errorf("fish: %q completes to %q, want %q", line, got, want)
		}
	}
	cmd := exec.Command("zsh", "-fc", fmt.Sprintf("autoload -Uz compinit && compinit -u -D && source %s && print -r -- ${_comps[cdcsync]}", scripts["zsh"]))
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "_cdcsync" {
		t.Errorf("zsh did not register the completion function: %v\n%s", err, out)
	}
}
