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
	o := NewOrder()
	// Each transaction is new to Covers: the committed position repeats,
	// the transaction's does not.
	b.Run("file-new-txn", func(b *testing.B) {
		p := benchPos(FlavorMySQL, "", "binlog.000012", 123456)
		ts := []cdcsync.Txn{{Pos: benchPos(FlavorMySQL, "", "binlog.000012", 120000)}, {Pos: benchPos(FlavorMySQL, "", "binlog.000012", 120100)}}
		i := 0
		for b.Loop() {
			if ok, err := o.Covers(p, &ts[i&1]); !ok || err != nil {
				b.Fatal(ok, err)
			}
			i++
		}
	})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if ok, err := o.Covers(c.p, &c.t); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}

func benchPos(flavor, set, file string, off uint32) cdcsync.Position {
	return Pos{Flavor: flavor, GTIDSet: set, File: file, Offset: off, ServerUUID: "3e11fa47-71ca-11e1-9e33-c80aa9429562"}.Position()
}

// BenchmarkPosition measures the encoding of a transaction's position,
// done once per transaction by the stream.
func BenchmarkPosition(b *testing.B) {
	p := Pos{Flavor: FlavorMySQL, GTIDSet: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-1000", File: "binlog.000012", Offset: 123456, ServerUUID: "3e11fa47-71ca-11e1-9e33-c80aa9429562"}
	for b.Loop() {
		_ = p.Position()
	}
}
