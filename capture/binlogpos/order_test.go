package binlogpos

import (
	"testing"

	"github.com/cdcsync/cdcsync"
)

func TestCovers(t *testing.T) {
	maria := func(set string) cdcsync.Position {
		return Pos{Flavor: FlavorMariaDB, GTIDSet: set}.Position()
	}
	file := func(f string, off uint32) cdcsync.Position {
		return Pos{Flavor: FlavorMySQL, File: f, Offset: off, ServerUUID: "u1"}.Position()
	}
	mysqlSet := func(set string) cdcsync.Position { return Pos{Flavor: FlavorMySQL, GTIDSet: set}.Position() }
	cases := []struct {
		name      string
		committed cdcsync.Position
		txn       cdcsync.Txn
		want      bool
		wantErr   bool
	}{
		{"zero position covers nothing", cdcsync.Position{}, cdcsync.Txn{GTID: "0-1-1", Pos: maria("0-1-1")}, false, false},
		{"mariadb same seq", maria("0-1-10"), cdcsync.Txn{GTID: "0-1-10"}, true, false},
		{"mariadb older seq", maria("0-1-10"), cdcsync.Txn{GTID: "0-1-9"}, true, false},
		{"mariadb newer seq", maria("0-1-10"), cdcsync.Txn{GTID: "0-1-11"}, false, false},
		{"mariadb other domain", maria("0-1-10"), cdcsync.Txn{GTID: "1-1-2"}, false, false},
		{"mariadb several domains", maria("0-1-10,1-2-5"), cdcsync.Txn{GTID: "1-3-5"}, true, false},
		{"mysql gtid contained", mysqlSet("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-20"), cdcsync.Txn{GTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:7"}, true, false},
		{"mysql gtid not contained", mysqlSet("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-20"), cdcsync.Txn{GTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:21"}, false, false},
		{"file same", file("binlog.000002", 500), cdcsync.Txn{Pos: file("binlog.000002", 500)}, true, false},
		{"file later offset", file("binlog.000002", 500), cdcsync.Txn{Pos: file("binlog.000002", 501)}, false, false},
		{"file later file", file("binlog.000002", 500), cdcsync.Txn{Pos: file("binlog.000010", 4)}, false, false},
		{"file earlier file", file("binlog.000010", 4), cdcsync.Txn{Pos: file("binlog.000002", 900)}, true, false},
		{"file other server", file("binlog.000002", 500), cdcsync.Txn{Pos: Pos{Flavor: FlavorMySQL, File: "binlog.000001", Offset: 1, ServerUUID: "u2"}.Position()}, false, true},
		{"gtid against file", maria("0-1-10"), cdcsync.Txn{Pos: file("binlog.000002", 500)}, false, true},
		{"malformed gtid", maria("0-1-10"), cdcsync.Txn{GTID: "garbage"}, false, true},
	}
	for _, tc := range cases {
		got, err := order.Covers(tc.committed, &tc.txn)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: Covers = %v, %v; want %v, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestAdvanceMariaDBGTIDSet(t *testing.T) {
	s, err := AdvanceMariaDBGTIDSet("0-1-10,1-2-5", "1-3-6")
	if err != nil || s != "0-1-10,1-3-6" {
		t.Fatalf("got %q, %v", s, err)
	}
	s, err = AdvanceMariaDBGTIDSet("", "0-1-1")
	if err != nil || s != "0-1-1" {
		t.Fatalf("got %q, %v", s, err)
	}
}

func TestIncludes(t *testing.T) {
	maria := func(set, file string, off uint32) cdcsync.Position {
		return Pos{Flavor: FlavorMariaDB, GTIDSet: set, File: file, Offset: off, ServerUUID: "s1"}.Position()
	}
	cases := []struct {
		name string
		p, q cdcsync.Position
		want bool
		err  bool
	}{
		{"same GTID set", maria("0-1-10", "b.000001", 500), maria("0-1-10", "b.000001", 500), true, false},
		{"later sequence", maria("0-1-11", "", 0), maria("0-1-10", "", 0), true, false},
		{"earlier sequence", maria("0-1-9", "", 0), maria("0-1-10", "", 0), false, false},
		{"a domain missing", maria("0-1-10", "", 0), maria("0-1-10,1-2-3", "", 0), false, false},
		{"every domain ahead", maria("0-1-12,1-2-3", "", 0), maria("1-2-3,0-1-10", "", 0), true, false},
		{"file order beats offsets", maria("", "b.000002", 4), maria("", "b.000001", 9999), true, false},
		{"earlier offset", maria("", "b.000001", 400), maria("", "b.000001", 500), false, false},
		{"GTID against file only compares files", maria("0-1-10", "b.000002", 339), maria("", "b.000002", 339), true, false},
		{"no file to compare", maria("0-1-10", "", 0), maria("", "b.000001", 4), false, true},
		{"zero is before everything", maria("", "b.000001", 4), cdcsync.Position{}, true, false},
		{"other server", maria("", "b.000001", 4), Pos{Flavor: FlavorMariaDB, File: "b.000001", Offset: 4, ServerUUID: "s2"}.Position(), false, true},
		{"MySQL GTID sets", Pos{Flavor: FlavorMySQL, GTIDSet: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10"}.Position(),
			Pos{Flavor: FlavorMySQL, GTIDSet: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-7"}.Position(), true, false},
		{"MySQL GTID set behind", Pos{Flavor: FlavorMySQL, GTIDSet: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-7"}.Position(),
			Pos{Flavor: FlavorMySQL, GTIDSet: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10"}.Position(), false, false},
	}
	for _, c := range cases {
		got, err := order.Includes(c.p, c.q)
		if (err != nil) != c.err || (err == nil && got != c.want) {
			t.Errorf("%s: %s includes %s = %v, %v; want %v (error %v)", c.name, c.p, c.q, got, err, c.want, c.err)
		}
	}
}

func TestEarliest(t *testing.T) {
	const u1, u2 = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4e11fa47-71ca-11e1-9e33-c80aa9429562"
	maria := func(s string) cdcsync.Position { return Pos{Flavor: FlavorMariaDB, GTIDSet: s}.Position() }
	my := func(s string) cdcsync.Position { return Pos{Flavor: FlavorMySQL, GTIDSet: s}.Position() }
	file := func(f string, o uint32) cdcsync.Position {
		return Pos{Flavor: FlavorMariaDB, File: f, Offset: o, ServerUUID: "s"}.Position()
	}
	for _, c := range []struct {
		a, b, want cdcsync.Position
	}{
		{maria("0-1-100"), maria("0-1-50"), maria("0-1-50")},
		{maria("0-1-50"), maria("0-1-100"), maria("0-1-50")},
		{maria("0-1-100,1-1-5"), maria("0-1-50,1-1-9"), maria("0-1-50,1-1-5")},
		{maria("0-1-100,1-1-5"), maria("0-1-50"), maria("0-1-50")},
		{maria("0-1-7"), cdcsync.Position{}, maria("0-1-7")},
		{file("binlog.000002", 400), file("binlog.000001", 900), file("binlog.000001", 900)},
		{file("binlog.000001", 100), file("binlog.000001", 900), file("binlog.000001", 100)},
		{my(u1 + ":1-100"), my(u1 + ":1-50"), my(u1 + ":1-50")},
		{my(u1 + ":1-10," + u2 + ":1-5"), my(u1 + ":1-20"), my(u1 + ":1-10")},
		{my(u1 + ":1-10:20-30"), my(u1 + ":1-25"), my(u1 + ":1-10:20-25")},
	} {
		got, err := order.Earliest(c.a, c.b)
		if err != nil {
			t.Errorf("Earliest(%s, %s): %v", c.a, c.b, err)
			continue
		}
		if got != c.want {
			t.Errorf("Earliest(%s, %s) = %s, want %s", c.a, c.b, got, c.want)
		}
		// It is at or before both.
		for _, p := range []cdcsync.Position{c.a, c.b} {
			if p.IsZero() {
				continue
			}
			if ok, err := order.Includes(p, got); err != nil || !ok {
				t.Errorf("Earliest(%s, %s) = %s is not at or before %s", c.a, c.b, got, p)
			}
		}
	}
	if _, err := order.Earliest(maria("0-1-5"), maria("1-1-5")); err == nil {
		t.Error("two GTID sets of different domains have an earliest position")
	}
}

var order Order
