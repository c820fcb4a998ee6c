package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
