package verify

import (
	"context"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
)

// settleSource answers Rows with a scripted sequence of reads of one key.
type settleSource struct {
	Source
	reads []settleRead
	n     int
}

type settleRead struct {
	pos     string
	present bool
}

func (s *settleSource) Rows(_ context.Context, ts *cdcsync.TableSchema, keys [][]any) ([]cdcsync.Row, Read, error) {
	r := s.reads[min(s.n, len(s.reads)-1)]
	s.n++
	read := Read{Pos: gtid(r.pos), Low: gtid(r.pos), Exact: true}
	if !r.present {
		return nil, read, nil
	}
	return []cdcsync.Row{{keys[0][0], "v"}}, read, nil
}

// settleLake holds a table whose commits never hold the key and never
// touch it.
type settleLake struct {
	Lake
	ts *cdcsync.TableSchema
}

func (l *settleLake) State(context.Context, cdcsync.TableID) (*TableState, error) {
	return &TableState{
		Schema: l.ts,
		Epochs: []Epoch{
			{Snapshot: 1, Epoch: 1, Pos: gtid("10")},
			{Snapshot: 2, Epoch: 2, Pos: gtid("20")},
			{Snapshot: 3, Epoch: 3, Pos: gtid("30")},
		},
		Head:      3,
		Effective: gtid("30"),
	}, nil
}

func (l *settleLake) Scan(context.Context, cdcsync.TableID, *cdcsync.TableSchema, int64, func(cdcsync.Row) error) error {
	return nil
}

func (l *settleLake) Touched(context.Context, cdcsync.TableID, *cdcsync.TableSchema, int64) (map[string]bool, bool, error) {
	return map[string]bool{}, false, nil
}

// TestSettleKeyInsertedAndDeletedInOneEpoch: a row inserted and deleted
// between two commits leaves no trace in a position-mode commit (nothing
// to write, nothing to delete), so a read between them that saw the row
// proves nothing on its own. It must not be reported unless a later read
// still sees it; a row the lake really lacks still is.
func TestSettleKeyInsertedAndDeletedInOneEpoch(t *testing.T) {
	ts := &cdcsync.TableSchema{
		ID:         cdcsync.TableID{Database: "db", Table: "t"},
		Columns:    []cdcsync.Column{{Name: "id", DataType: "bigint", ColumnType: "bigint", Kind: cdcsync.KindInt64}, {Name: "v", DataType: "varchar", ColumnType: "varchar(8)", Kind: cdcsync.KindString, Nullable: true}},
		PrimaryKey: []int{0},
	}
	for _, tc := range []struct {
		name  string
		reads []settleRead
		diffs int
	}{
		// Read inside epoch 2 (10, 20] saw the row; MySQL deleted it
		// before 20, and the next read no longer sees it.
		{"in flight", []settleRead{{"15", true}, {"25", false}}, 0},
		// The lake lost the row: every read sees it.
		{"lost", []settleRead{{"15", true}, {"25", true}}, 1},
		// A read exactly at a commit's position is decisive at once.
		{"at a commit", []settleRead{{"20", true}, {"25", false}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := New(&settleSource{reads: tc.reads}, &settleLake{ts: ts}, Options{
				Order: binlogpos.Order{}, Poll: time.Millisecond, Settle: 10 * time.Second,
			})
			rep := v.Recheck(context.Background(), ts.ID, [][]any{{int64(7)}})
			if rep.Status == StatusError {
				t.Fatal(rep.Reason)
			}
			if rep.Differences != tc.diffs || rep.Unsettled != 0 {
				t.Errorf("%d differences, %d unsettled; want %d, 0", rep.Differences, rep.Unsettled, tc.diffs)
			}
		})
	}
}
