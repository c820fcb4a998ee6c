package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdcsync/cdcsync/verify"
)

// verify's bad usage exits 2 before it connects anywhere.
func TestVerifyUsageErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte("source:\n  user: u\n  server_id: 1\n  include: [\"a.*\"]\nadmin:\n  listen: \"off\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"verify"}, "needs --config FILE"},
		{[]string{"verify", "--config", cfg, "nodot"}, `name the MySQL table as DB.TABLE, got "nodot"`},
		{[]string{"verify", "--config", cfg, "a.t", "--repair"}, "admin.listen is off"},
		{[]string{"verify", "--config", cfg, "--rate", "-1"}, "--rate"},
		{[]string{"verify", "--config", cfg, "--settle", "0s"}, "--settle"},
		{[]string{"verify", "--config", cfg, "--bogus"}, "flag provided but not defined: -bogus"},
	} {
		_, _, err := runArgs(t, tc.args...)
		if exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: exit %d, error %v; want exit 2 and %q", tc.args, exitCode(err), err, tc.want)
		}
	}
}

// A table is fine when it matched, or differed and every repaired key
// compared equal afterwards.
func TestVerifyTableOK(t *testing.T) {
	for _, tc := range []struct {
		t    verify.TableReport
		want bool
	}{
		{verify.TableReport{Status: verify.StatusEqual}, true},
		{verify.TableReport{Status: verify.StatusDifferent}, false},
		{verify.TableReport{Status: verify.StatusDifferent, Repair: &verify.RepairReport{Requested: 2, Equal: 2}}, true},
		{verify.TableReport{Status: verify.StatusDifferent, Repair: &verify.RepairReport{Requested: 2, Equal: 1, Still: 1}}, false},
		{verify.TableReport{Status: verify.StatusDifferent, Repair: &verify.RepairReport{Requested: 2, Error: "no daemon"}}, false},
		{verify.TableReport{Status: verify.StatusUnsettled}, false},
		{verify.TableReport{Status: verify.StatusUnverified}, false},
	} {
		if got := tableOK(&tc.t); got != tc.want {
			t.Errorf("tableOK(%+v) = %v, want %v", tc.t, got, tc.want)
		}
	}
}
