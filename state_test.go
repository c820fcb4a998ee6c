package cdcsync_test

import (
	"testing"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
)

// TestCheckpointEffective: a table that has not committed since the
// checkpoint listed it holds what the checkpoint holds; one whose epoch is
// older than listed (its catalog restored from a backup), one the
// checkpoint does not list, and one being copied keep their own position.
func TestCheckpointEffective(t *testing.T) {
	pos := func(gtids string) cdcsync.Position {
		return binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: gtids}.Position()
	}
	quiet := cdcsync.TableID{Database: "d", Table: "quiet"}
	busy := cdcsync.TableID{Database: "d", Table: "busy"}
	restored := cdcsync.TableID{Database: "d", Table: "restored"}
	ck := cdcsync.Checkpoint{Epoch: 9, Pos: pos("0-1-100"), Tables: []cdcsync.TableEpoch{{Table: restored, Epoch: 8}, {Table: quiet, Epoch: 3}, {Table: busy, Epoch: 9}}}
	ck.SortTables()
	for _, c := range []struct {
		name string
		id   cdcsync.TableID
		c    cdcsync.Committed
		want string
	}{
		{"quiet", quiet, cdcsync.Committed{Found: true, Epoch: 3, Pos: pos("0-1-10")}, "0-1-100"},
		{"ahead of the checkpoint", busy, cdcsync.Committed{Found: true, Epoch: 10, Pos: pos("0-1-120")}, "0-1-120"},
		{"restored from a backup", restored, cdcsync.Committed{Found: true, Epoch: 5, Pos: pos("0-1-50")}, "0-1-50"},
		{"not listed", cdcsync.TableID{Database: "d", Table: "new"}, cdcsync.Committed{Found: true, Epoch: 9, Pos: pos("0-1-60")}, "0-1-60"},
		{"copying", quiet, cdcsync.Committed{Found: true, Epoch: 3, Pos: pos("0-1-10"), Copy: &cdcsync.CopyState{}}, "0-1-10"},
	} {
		if got := ck.Effective(c.id, c.c, binlogpos.Order{}); got != pos(c.want) {
			t.Errorf("%s: effective position %s, want %s", c.name, got, c.want)
		}
	}
	if (cdcsync.Checkpoint{Pos: pos("0-1-100")}).Holds(quiet, 100) {
		t.Error("a checkpoint that lists no tables holds a table")
	}
}
