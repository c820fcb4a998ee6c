package cdcsync

import "testing"

// TestCheckpointEffective: a table that has not committed since the
// checkpoint listed it holds what the checkpoint holds; one whose epoch is
// older than listed (its catalog restored from a backup), one the
// checkpoint does not list, and one being copied keep their own position.
func TestCheckpointEffective(t *testing.T) {
	pos := func(gtids string) Position {
		return Position{Flavor: FlavorMariaDB, GTIDSet: gtids}
	}
	quiet := TableID{Database: "d", Table: "quiet"}
	busy := TableID{Database: "d", Table: "busy"}
	restored := TableID{Database: "d", Table: "restored"}
	ck := Checkpoint{Epoch: 9, Pos: pos("0-1-100"), Tables: []TableEpoch{{Table: restored, Epoch: 8}, {Table: quiet, Epoch: 3}, {Table: busy, Epoch: 9}}}
	ck.SortTables()
	for _, c := range []struct {
		name string
		id   TableID
		c    Committed
		want string
	}{
		{"quiet", quiet, Committed{Found: true, Epoch: 3, Pos: pos("0-1-10")}, "0-1-100"},
		{"ahead of the checkpoint", busy, Committed{Found: true, Epoch: 10, Pos: pos("0-1-120")}, "0-1-120"},
		{"restored from a backup", restored, Committed{Found: true, Epoch: 5, Pos: pos("0-1-50")}, "0-1-50"},
		{"not listed", TableID{Database: "d", Table: "new"}, Committed{Found: true, Epoch: 9, Pos: pos("0-1-60")}, "0-1-60"},
		{"copying", quiet, Committed{Found: true, Epoch: 3, Pos: pos("0-1-10"), Copy: &CopyState{}}, "0-1-10"},
	} {
		if got := ck.Effective(c.id, c.c); got.GTIDSet != c.want {
			t.Errorf("%s: effective position %s, want %s", c.name, got, c.want)
		}
	}
	if (Checkpoint{Pos: pos("0-1-100")}).Holds(quiet, 100) {
		t.Error("a checkpoint that lists no tables holds a table")
	}
}
