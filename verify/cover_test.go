package verify

import (
	"testing"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
)

func gtid(seq string) cdcsync.Position {
	return binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: "0-1-" + seq}.Position()
}

// TestCovering checks which lake snapshot a MySQL read is compared with.
func TestCovering(t *testing.T) {
	v := New(nil, nil, Options{Order: binlogpos.Order{}})
	st := &TableState{
		Epochs: []Epoch{
			{Snapshot: 1, Epoch: 1, Pos: gtid("8")},  // a copy starts: the table is emptied
			{Snapshot: 2, Epoch: 2, Pos: gtid("8")},  // its chunk, at the same position
			{Snapshot: 3, Epoch: 3, Pos: gtid("8")},  // its last chunk
			{Snapshot: 4, Epoch: 4, Pos: gtid("20")}, // streaming
			{Snapshot: 6, Epoch: 6, Pos: gtid("30")},
			{Snapshot: 7, Epoch: 7, Pos: gtid("30")}, // a repair
		},
		Head:      9, // a compaction after epoch 7
		Effective: gtid("45"),
	}
	for _, tc := range []struct {
		read   string
		ok     bool
		snap   int64
		epochs int
	}{
		{"8", true, 3, 3},   // after every commit at the read's position
		{"5", true, 3, 3},   // the first commit covering it is the copy's start: the table as of 8, after its chunks
		{"9", true, 4, 4},   // inside epoch 4
		{"20", true, 4, 4},  // exactly epoch 4
		{"25", true, 7, 6},  // epoch 6, and the repair at its position
		{"40", true, 9, 6},  // no commit since 30, the checkpoint covers 40: the current snapshot
		{"45", true, 9, 6},  // the checkpoint itself
		{"46", false, 0, 0}, // not yet
	} {
		a, ok, err := v.covering(st, gtid(tc.read))
		if err != nil {
			t.Fatal(err)
		}
		if ok != tc.ok || (ok && (a.snapshot != tc.snap || len(a.epochs) != tc.epochs)) {
			t.Errorf("read at %s: covered %v by snapshot %d with %d epochs, want %v, %d, %d", tc.read, ok, a.snapshot, len(a.epochs), tc.ok, tc.snap, tc.epochs)
		}
	}
}
