package lake

import (
	"context"
	"fmt"
	"sort"
	"testing"
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
