package lake

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/cdcsync/cdcsync"
)

// TestRowsWhere: the rows a foreign-key cascade reads by a non-key column
// are exactly the live rows with those values, through equality deletes
// (which carry only the key), before and after compaction.
func TestRowsWhere(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	for i := range 12 {
		lo := int64(1 + (i*13)%90)
		e.commit(nil, keys(lo, lo+9), fmt.Sprintf("v%d", i%4), []int64{(lo+40)%100 + 1})
	}
	check := func(when string) {
		t.Helper()
		for _, vals := range [][]string{{"v0"}, {"v1", "v3"}, {"none"}} {
			var args [][]any
			want := map[int64]bool{}
			for _, v := range vals {
				args = append(args, []any{v})
				for k, mv := range e.model {
					if mv == v {
						want[k] = true
					}
				}
			}
			rows, err := e.tbl.RowsWhere(ctx, []int{1}, args)
			if err != nil {
				t.Fatal(err)
			}
			var got, exp []int64
			for _, r := range rows {
				got = append(got, r[0].(int64))
			}
			for k := range want {
				exp = append(exp, k)
			}
			sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
			sort.Slice(exp, func(i, j int) bool { return exp[i] < exp[j] })
			if fmt.Sprint(got) != fmt.Sprint(exp) {
				t.Errorf("%s: RowsWhere(v in %v) = %v, want %v", when, vals, got, exp)
			}
		}
	}
	check("before compaction")
	if _, err := e.tbl.Compact(ctx, testOpts()); err != nil {
		t.Fatal(err)
	}
	e.commit(nil, keys(1, 5), "v1", nil)
	check("after compaction")
}

// RowsWhere finds rows by columns outside the primary key (a foreign
// key's) while the commit's equality deletes are live, on the handle that
// committed them and on a fresh one. It found none of them when the scan
// filtered on those columns (a missed cascade into rows of an earlier
// epoch, issue 13).
func TestRowsWhereOutsideTheKey(t *testing.T) {
	ctx := context.Background()
	e := newKV(t, "p")
	ts := &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "staff"}, Columns: []cdcsync.Column{
		{Name: "id", DataType: "int", ColumnType: "int(11)", Kind: cdcsync.KindInt32},
		{Name: "boss", DataType: "int", ColumnType: "int(11)", Kind: cdcsync.KindInt32, Nullable: true},
	}, PrimaryKey: []int{0}}
	tb, err := e.lk.EnsureTable(ctx, ts)
	if err != nil {
		t.Fatal(err)
	}
	rows := []cdcsync.Row{{int32(2688), nil}, {int32(2689), int32(2688)}, {int32(10), nil}, {int32(11), int32(10)}}
	var dels []cdcsync.Row
	for _, r := range rows {
		dels = append(dels, cdcsync.Row{r[0], nil})
	}
	if err := tb.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, dels, rows, nil); err != nil {
		t.Fatal(err)
	}
	fresh, err := openLake(t, e.cfg).EnsureTable(ctx, ts)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]*Table{"the committing handle": tb, "a fresh handle": fresh} {
		for _, c := range []struct {
			vals [][]any
			want int
		}{
			{[][]any{{int32(2688)}}, 1},
			{[][]any{{int32(10)}}, 1},
			{[][]any{{int32(10)}, {int32(2688)}}, 2},
			{[][]any{{int32(99)}}, 0},
		} {
			got, err := h.RowsWhere(ctx, []int{1}, c.vals)
			if err != nil || len(got) != c.want {
				t.Errorf("%s: rows with boss in %v: %v (%v), want %d rows", name, c.vals, got, err, c.want)
			}
		}
	}
}
