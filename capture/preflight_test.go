package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"reflect"
	"testing"
)

func TestPfParseGrant(t *testing.T) {
	cases := []struct {
		line  string
		ok    bool
		privs []string
		db    string
		table string
	}{
		{"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION", true, []string{"ALL PRIVILEGES"}, "*", "*"},
		{"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%` IDENTIFIED BY PASSWORD '*ABC'", true, []string{"SELECT", "REPLICATION SLAVE", "BINLOG MONITOR"}, "*", "*"},
		{"GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%'", true, []string{"SELECT", "REPLICATION SLAVE", "REPLICATION CLIENT"}, "*", "*"},
		{"GRANT APPLICATION_PASSWORD_ADMIN,AUDIT_ADMIN,BACKUP_ADMIN ON *.* TO `root`@`localhost`", true, []string{"APPLICATION_PASSWORD_ADMIN", "AUDIT_ADMIN", "BACKUP_ADMIN"}, "*", "*"},
		{"GRANT SELECT ON `shop`.* TO `cdc`@`%`", true, []string{"SELECT"}, "shop", "*"},
		{"GRANT ALL ON `shop`.`orders` TO `cdc`@`%`", true, []string{"ALL PRIVILEGES"}, "shop", "orders"},
		{"GRANT SELECT (`a`, `b`), INSERT ON `shop`.`t` TO `cdc`@`%`", true, []string{"SELECT (`A`, `B`)", "INSERT"}, "shop", "t"},
		{"GRANT SELECT ON `we``ird.db`.* TO `cdc`@`%`", true, []string{"SELECT"}, "we`ird.db", "*"},
		{"GRANT SELECT ON shop.orders TO cdc@'%'", true, []string{"SELECT"}, "shop", "orders"},
		{"GRANT SELECT, INSERT ON `test\\_%`.* TO PUBLIC", true, []string{"SELECT", "INSERT"}, "test\\_%", "*"},
		{"GRANT EXECUTE ON PROCEDURE `shop`.`p` TO `cdc`@`%`", false, nil, "", ""},
		{"GRANT PROXY ON ''@'%' TO 'root'@'localhost' WITH GRANT OPTION", false, nil, "", ""},
		{"GRANT `reader`@`%` TO `cdc`@`%`", false, nil, "", ""},
		{"GRANT `reader` TO `cdc`@`%`", false, nil, "", ""},
	}
	for _, tc := range cases {
		g, ok := pfParseGrant(tc.line)
		if ok != tc.ok {
			t.Errorf("%s: ok = %v", tc.line, ok)
			continue
		}
		if !ok {
			continue
		}
		if !reflect.DeepEqual(g.privs, tc.privs) || g.db != tc.db || g.table != tc.table {
			t.Errorf("%s:\n got %q %q.%q\nwant %q %q.%q", tc.line, g.privs, g.db, g.table, tc.privs, tc.db, tc.table)
		}
	}
	if !pfIsRoleGrant("GRANT `reader` TO `cdc`@`%`") || pfIsRoleGrant("GRANT SELECT ON *.* TO x") {
		t.Error("pfIsRoleGrant")
	}
}

func TestPfGrantCoverage(t *testing.T) {
	g, _ := pfParseGrant("GRANT SELECT ON `test\\_%`.* TO PUBLIC")
	if !g.coversTable("test_1", "x") || g.coversTable("testx1", "x") || g.coversTable("other", "x") {
		t.Error("database LIKE grant")
	}
	g, _ = pfParseGrant("GRANT SELECT ON `shop`.`orders` TO `cdc`@`%`")
	if !g.coversTable("shop", "orders") || g.coversTable("shop", "items") {
		t.Error("table grant")
	}
	g, _ = pfParseGrant("GRANT SELECT (`a`) ON `shop`.`orders` TO `cdc`@`%`")
	if g.has("SELECT") {
		t.Error("a column grant counted as table SELECT")
	}
	g, _ = pfParseGrant("GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost`")
	if !g.has("REPLICATION SLAVE") || !g.coversTable("a", "b") {
		t.Error("ALL PRIVILEGES ON *.*")
	}
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"abc", "abc", true}, {"a%", "abc", true}, {"a_c", "abc", true}, {"a\\_c", "abc", false},
		{"a\\_c", "a_c", true}, {"%", "", true}, {"_", "", false}, {"%c%", "abcd", true}, {"ab", "abc", false},
	} {
		if got := pfLike(tc.pattern, tc.s); got != tc.want {
			t.Errorf("pfLike(%q, %q) = %v", tc.pattern, tc.s, got)
		}
	}
}

func TestPfGrantee(t *testing.T) {
	if g := pfGrantee("cdc@%"); g != "'cdc'@'%'" {
		t.Error(g)
	}
	if g := pfGrantee("o'neil@10.0.0.%"); g != "'o''neil'@'10.0.0.%'" {
		t.Error(g)
	}
}

func TestPfVersions(t *testing.T) {
	for in, want := range map[string]string{
		"10.11.19-MariaDB-0+deb12u1-log": "10.11.19",
		"5.5.5-10.6.12-MariaDB":          "10.6.12",
		"8.0.36":                         "8.0.36",
		"5.7.44-log":                     "5.7.44",
		"8.4.0-commercial":               "8.4.0",
	} {
		if got := pfNumericVersion(in); got != want {
			t.Errorf("pfNumericVersion(%q) = %q, want %q", in, got, want)
		}
	}
	less := [][2]string{{"5.6.51", "5.7"}, {"10.5.9", "10.6"}, {"8.0.36", "8.4"}, {"10.6", "10.11.1"}}
	for _, p := range less {
		if !pfVersionLess(p[0], p[1]) || pfVersionLess(p[1], p[0]) {
			t.Errorf("pfVersionLess(%s, %s)", p[0], p[1])
		}
	}
	if pfVersionLess("5.7", "5.7.0") || pfVersionLess("10.6.0", "10.6") {
		t.Error("equal versions")
	}
}

func TestFailed(t *testing.T) {
	fs := []Finding{
		{Check: "binlog", OK: true, Message: "on"},
		{Check: "gtid", Warning: true, Message: "off"},
		{Check: "binlog_format", Message: "STATEMENT"},
	}
	got := Failed(fs)
	if len(got) != 1 || got[0].Check != "binlog_format" {
		t.Errorf("Failed = %v", got)
	}
	if s := fs[2].String(); s != "[FAILED] binlog_format: STATEMENT" {
		t.Error(s)
	}
	if s := fs[1].String(); s != "[warning] gtid: off" {
		t.Error(s)
	}
}

// TestSetPersistently: the fix a failed binlog setting names survives a
// restart of the server: SET PERSIST on MySQL 8 (8.4 ships with
// binlog_row_metadata=MINIMAL), SET GLOBAL and the configuration file
// elsewhere.
func TestSetPersistently(t *testing.T) {
	for _, c := range []struct{ flavor, version, want string }{
		{binlogpos.FlavorMySQL, "8.4.3", "SET PERSIST binlog_row_metadata='FULL'"},
		{binlogpos.FlavorMySQL, "8.0.36", "SET PERSIST binlog_row_metadata='FULL'"},
		{binlogpos.FlavorMySQL, "5.7.44", "SET GLOBAL binlog_row_metadata='FULL' (and binlog_row_metadata=FULL in my.cnf)"},
		{binlogpos.FlavorMariaDB, "10.11.9", "SET GLOBAL binlog_row_metadata='FULL' (and binlog_row_metadata=FULL in my.cnf)"},
	} {
		p := &pfRun{flavor: c.flavor, version: c.version}
		if got := p.setPersistently("binlog_row_metadata", "FULL"); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.flavor, c.version, got, c.want)
		}
	}
}
