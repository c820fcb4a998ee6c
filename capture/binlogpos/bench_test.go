package binlogpos

import (
	"testing"

	"github.com/cdcsync/cdcsync"
)

// BenchmarkCovers measures Covers as the pipeline calls it: once per
// transaction of a resume window, against a table's committed position.
func BenchmarkCovers(b *testing.B) {
	cases := []struct {
		name string
		p    cdcsync.Position
		t    cdcsync.Txn
	}{
		{"mariadb", benchPos(FlavorMariaDB, "0-1-1000,1-2-5", "", 0),
			cdcsync.Txn{GTID: "0-1-999", Pos: benchPos(FlavorMariaDB, "0-1-999,1-2-5", "", 0)}},
		{"mysql", benchPos(FlavorMySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-1000", "", 0),
			cdcsync.Txn{GTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:999", Pos: benchPos(FlavorMySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-999", "", 0)}},
		{"file", benchPos(FlavorMySQL, "", "binlog.000012", 123456),
			cdcsync.Txn{Pos: benchPos(FlavorMySQL, "", "binlog.000012", 120000)}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if ok, err := (Order{}).Covers(c.p, &c.t); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}

func benchPos(flavor, set, file string, off uint32) cdcsync.Position {
	return Pos{Flavor: flavor, GTIDSet: set, File: file, Offset: off, ServerUUID: "3e11fa47-71ca-11e1-9e33-c80aa9429562"}.Position()
}
