package merge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// tablesModel is a sink that keeps each table's rows by primary key and
// answers RowsWhere from them, as the lake does.
type tablesModel struct {
	mu      sync.Mutex
	schemas map[cdcsync.TableID]*cdcsync.TableSchema
	rows    map[cdcsync.TableID]map[string]cdcsync.Row
	reads   int
}

func newTablesModel(schemas ...*cdcsync.TableSchema) *tablesModel {
	m := &tablesModel{schemas: map[cdcsync.TableID]*cdcsync.TableSchema{}, rows: map[cdcsync.TableID]map[string]cdcsync.Row{}}
	for _, s := range schemas {
		m.schemas[s.ID] = s
		m.rows[s.ID] = map[string]cdcsync.Row{}
	}
	return m
}

func (m *tablesModel) Commit(_ context.Context, id cdcsync.TableID, d cdcsync.Delta) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range d.Deletes {
		k, err := m.schemas[id].AppendKey(nil, r)
		if err != nil {
			return err
		}
		delete(m.rows[id], string(k))
	}
	for _, r := range d.Rows {
		k, err := m.schemas[id].AppendKey(nil, r)
		if err != nil {
			return err
		}
		m.rows[id][string(k)] = r
	}
	return nil
}

func (m *tablesModel) SaveCheckpoint(context.Context, int64, cdcsync.Position) error { return nil }

func (m *tablesModel) RowsWhere(_ context.Context, id cdcsync.TableID, cols []int, vals [][]any) ([]cdcsync.Row, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	want := map[string]bool{}
	for _, v := range vals {
		if k, ok := cdcsync.AppendTuple(nil, v...); ok {
			want[string(k)] = true
		}
	}
	var out []cdcsync.Row
	for _, r := range m.rows[id] {
		if k, ok := cdcsync.AppendTuple(nil, values(r, cols)...); ok && want[string(k)] {
			out = append(out, r)
		}
	}
	return out, nil
}

// dump renders a table sorted by key.
func (m *tablesModel) dump(id cdcsync.TableID) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.rows[id] {
		out = append(out, fmt.Sprint(r))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

var (
	fkOrders = &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "orders"},
		Columns:    []cdcsync.Column{{Name: "id", Kind: cdcsync.KindInt64}, {Name: "region", Kind: cdcsync.KindString}},
		PrimaryKey: []int{0}}
	fkItems = &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "items"},
		Columns: []cdcsync.Column{{Name: "id", Kind: cdcsync.KindInt64}, {Name: "order_id", Kind: cdcsync.KindInt64, Nullable: true},
			{Name: "region", Kind: cdcsync.KindString, Nullable: true}},
		PrimaryKey: []int{0}}
	fkNotes = &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "notes"},
		Columns:    []cdcsync.Column{{Name: "id", Kind: cdcsync.KindInt64}, {Name: "item_id", Kind: cdcsync.KindInt64, Nullable: true}},
		PrimaryKey: []int{0}}
	fkStaff = &cdcsync.TableSchema{ID: cdcsync.TableID{Database: "shop", Table: "staff"},
		Columns:    []cdcsync.Column{{Name: "id", Kind: cdcsync.KindInt64}, {Name: "boss", Kind: cdcsync.KindInt64, Nullable: true}},
		PrimaryKey: []int{0}}
	shopFKs = []cdcsync.ForeignKey{
		{Name: "fk_items", Child: fkItems.ID, ChildCols: []string{"order_id", "region"}, Parent: fkOrders.ID, ParentCols: []string{"id", "region"},
			OnDelete: cdcsync.FKCascade, OnUpdate: cdcsync.FKCascade},
		{Name: "fk_notes", Child: fkNotes.ID, ChildCols: []string{"item_id"}, Parent: fkItems.ID, ParentCols: []string{"id"}, OnDelete: cdcsync.FKSetNull},
		{Name: "fk_boss", Child: fkStaff.ID, ChildCols: []string{"boss"}, Parent: fkStaff.ID, ParentCols: []string{"id"}, OnDelete: cdcsync.FKCascade},
	}
)

func chg(s *cdcsync.TableSchema, op cdcsync.Op, before, after cdcsync.Row) cdcsync.Change {
	return cdcsync.Change{Table: s.ID, Op: op, Before: before, After: after}
}

// TestForeignKeyCascades: the pipeline applies ON DELETE CASCADE, ON
// UPDATE CASCADE (a composite key), SET NULL, a chain of them, a table
// referencing itself, and the order of a transaction's own changes (a child
// inserted before its parent's delete goes with it; one inserted after the
// parent is inserted again stays), reading the child rows from the
// committed tables, the epoch being committed and the open epoch alike:
// every epoch size gives MySQL's result.
func TestForeignKeyCascades(t *testing.T) {
	for _, maxRows := range []int{1, 3, 1000} {
		t.Run(fmt.Sprintf("epochs of %d rows", maxRows), func(t *testing.T) {
			sink := newTablesModel(fkOrders, fkItems, fkNotes, fkStaff)
			tables := []Table{{Schema: fkOrders}, {Schema: fkItems}, {Schema: fkNotes}, {Schema: fkStaff}}
			opts := Options{Order: order, Interval: time.Hour, MaxRows: 1000, MaxBytes: 1 << 30, CommitConcurrency: 2, ForeignKeys: shopFKs}
			o := func(id int64, region string) cdcsync.Row { return cdcsync.Row{id, region} }
			it := func(id int64, order any, region any) cdcsync.Row { return cdcsync.Row{id, order, region} }
			n := func(id int64, item any) cdcsync.Row { return cdcsync.Row{id, item} }
			s := func(id int64, boss any) cdcsync.Row { return cdcsync.Row{id, boss} }
			I, D, U := cdcsync.OpInsert, cdcsync.OpDelete, cdcsync.OpUpdate
			// The committed state.
			err := runPipeline(t, New(sink, tables, 1, mariaPos(0), opts, quiet(), nil), txnAt(1,
				chg(fkOrders, I, nil, o(1, "eu")), chg(fkOrders, I, nil, o(2, "eu")), chg(fkOrders, I, nil, o(3, "us")),
				chg(fkItems, I, nil, it(10, int64(1), "eu")), chg(fkItems, I, nil, it(11, int64(1), "eu")),
				chg(fkItems, I, nil, it(12, int64(2), "eu")), chg(fkItems, I, nil, it(13, int64(3), "us")),
				chg(fkItems, I, nil, it(16, nil, nil)),
				chg(fkNotes, I, nil, n(100, int64(10))), chg(fkNotes, I, nil, n(101, int64(12))),
				chg(fkNotes, I, nil, n(102, int64(13))), chg(fkNotes, I, nil, n(103, nil)),
				chg(fkStaff, I, nil, s(1, nil)), chg(fkStaff, I, nil, s(2, int64(1))), chg(fkStaff, I, nil, s(3, int64(2))), chg(fkStaff, I, nil, s(4, nil)),
			))
			if err != nil {
				t.Fatal(err)
			}
			opts.MaxRows = maxRows
			p := New(sink, tables, 2, mariaPos(1), opts, quiet(), nil)
			err = runPipeline(t, p,
				// A child inserted in the transaction goes with its parent.
				txnAt(2, chg(fkItems, I, nil, it(14, int64(2), "eu")), chg(fkOrders, D, o(2, "eu"), nil)),
				// The parent's key changes: the children follow.
				txnAt(3, chg(fkOrders, U, o(1, "eu"), o(5, "eu"))),
				// ... and are deleted with it; their notes keep no item.
				txnAt(4, chg(fkNotes, I, nil, n(104, int64(11))), chg(fkOrders, D, o(5, "eu"), nil)),
				// Deleted and inserted again: a child inserted after stays.
				txnAt(5, chg(fkOrders, D, o(3, "us"), nil), chg(fkOrders, I, nil, o(3, "us")), chg(fkItems, I, nil, it(15, int64(3), "us"))),
				// A table referencing itself, three levels deep.
				txnAt(6, chg(fkStaff, D, s(1, nil), nil)),
			)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				s    *cdcsync.TableSchema
				want string
			}{
				{fkOrders, "[3 us]"},
				{fkItems, "[15 3 us] [16 <nil> <nil>]"},
				{fkNotes, "[100 <nil>] [101 <nil>] [102 <nil>] [103 <nil>] [104 <nil>]"},
				{fkStaff, "[4 <nil>]"},
			} {
				if got := sink.dump(c.s.ID); got != c.want {
					t.Errorf("%s = %s, want %s", c.s.ID, got, c.want)
				}
			}
		})
	}
}

// TestForeignKeyCascadesNeedARowFinder: a sink that cannot read rows makes
// a cascade fail loudly rather than be skipped.
func TestForeignKeyCascadesNeedARowFinder(t *testing.T) {
	p := New(&memSink{}, []Table{{Schema: fkOrders}, {Schema: fkItems}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 100, MaxBytes: 1 << 30, ForeignKeys: shopFKs[:1]}, quiet(), nil)
	err := runPipeline(t, p, txnAt(1, chg(fkOrders, cdcsync.OpDelete, cdcsync.Row{int64(1), "eu"}, nil)))
	if err == nil || !strings.Contains(err.Error(), "cannot read the rows of shop.items") {
		t.Fatalf("Run = %v", err)
	}
}

// TestForeignKeyCascadesRandom checks a table referencing itself against
// a model of MySQL under random chains and deletes, over epochs of every
// size.
func TestForeignKeyCascadesRandom(t *testing.T) {
	for _, maxRows := range []int{1, 2, 7, 50} {
		r := rand.New(rand.NewPCG(uint64(maxRows), 9))
		mysql := map[int64]any{} // id -> boss
		var txns []*cdcsync.Txn
		next := int64(0)
		for seq := 1; seq <= 400; seq++ {
			var changes []cdcsync.Change
			if r.IntN(2) == 0 {
				var boss any
				for range 1 + r.IntN(3) {
					next++
					mysql[next] = boss
					changes = append(changes, chg(fkStaff, cdcsync.OpInsert, nil, cdcsync.Row{next, boss}))
					boss = next
				}
			} else {
				id := 1 + r.Int64N(next+1)
				b, ok := mysql[id]
				if !ok {
					continue
				}
				changes = append(changes, chg(fkStaff, cdcsync.OpDelete, cdcsync.Row{id, b}, nil))
				// MySQL's cascade.
				gone := []int64{id}
				for len(gone) > 0 {
					g := gone[0]
					gone = gone[1:]
					delete(mysql, g)
					for k, v := range mysql {
						if v == g {
							gone = append(gone, k)
						}
					}
				}
			}
			txns = append(txns, txnAt(seq, changes...))
		}
		sink := newTablesModel(fkStaff)
		p := New(sink, []Table{{Schema: fkStaff}}, 1, mariaPos(0),
			Options{Order: order, Interval: time.Hour, MaxRows: maxRows, MaxBytes: 1 << 30, ForeignKeys: shopFKs}, quiet(), nil)
		if err := runPipeline(t, p, txns...); err != nil {
			t.Fatal(err)
		}
		var want []string
		for id, b := range mysql {
			want = append(want, fmt.Sprint(cdcsync.Row{id, b}))
		}
		sort.Strings(want)
		if got := sink.dump(fkStaff.ID); got != strings.Join(want, " ") {
			t.Fatalf("epochs of %d rows: staff =\n%s\nwant\n%s", maxRows, got, strings.Join(want, " "))
		}
	}
}

// TestCommitRanks: tables commit children first along cascading keys.
func TestCommitRanks(t *testing.T) {
	p := New(&memSink{}, nil, 1, mariaPos(0), Options{Order: order, ForeignKeys: shopFKs}, quiet(), nil)
	got := p.commitRanks([]cdcsync.TableID{fkOrders.ID, fkItems.ID, fkNotes.ID, fkStaff.ID, users.ID})
	want := "[[shop.notes shop.staff shop.users] [shop.items] [shop.orders]]"
	if fmt.Sprint(got) != want {
		t.Fatalf("ranks %v, want %s", got, want)
	}
}

// TestForeignKeyChainRandom checks the orders -> items -> notes chain
// against a model of MySQL under random changes, over epochs of every size.
func TestForeignKeyChainRandom(t *testing.T) {
	type item struct {
		order  any
		region any
	}
	for _, maxRows := range []int{1, 3, 10, 100} {
		r := rand.New(rand.NewPCG(uint64(maxRows), 11))
		orders := map[int64]string{}
		items := map[int64]item{}
		notes := map[int64]any{}
		next := int64(0)
		id := func() int64 { next++; return next }
		some := func() int64 { return 1 + r.Int64N(next+1) }
		var txns []*cdcsync.Txn
		for seq := 1; seq <= 600; seq++ {
			var ch []cdcsync.Change
			switch r.IntN(6) {
			case 0, 1:
				o, reg := id(), []string{"eu", "us"}[r.IntN(2)]
				orders[o] = reg
				ch = append(ch, chg(fkOrders, cdcsync.OpInsert, nil, cdcsync.Row{o, reg}))
				for range r.IntN(3) {
					i := id()
					items[i] = item{o, reg}
					ch = append(ch, chg(fkItems, cdcsync.OpInsert, nil, cdcsync.Row{i, o, reg}))
					for range r.IntN(3) {
						n := id()
						notes[n] = i
						ch = append(ch, chg(fkNotes, cdcsync.OpInsert, nil, cdcsync.Row{n, i}))
					}
				}
			case 2:
				o := some()
				reg, ok := orders[o]
				if !ok {
					continue
				}
				ch = append(ch, chg(fkOrders, cdcsync.OpDelete, cdcsync.Row{o, reg}, nil))
				delete(orders, o)
				for i, it := range items {
					if it.order == o && it.region == reg {
						delete(items, i)
						for n, ni := range notes {
							if ni == i {
								notes[n] = nil
							}
						}
					}
				}
			case 3:
				o := some()
				reg, ok := orders[o]
				if !ok {
					continue
				}
				no := id()
				ch = append(ch, chg(fkOrders, cdcsync.OpUpdate, cdcsync.Row{o, reg}, cdcsync.Row{no, reg}))
				delete(orders, o)
				orders[no] = reg
				for i, it := range items {
					if it.order == o && it.region == reg {
						items[i] = item{no, reg}
					}
				}
			case 4:
				i := some()
				it, ok := items[i]
				if !ok {
					continue
				}
				ch = append(ch, chg(fkItems, cdcsync.OpDelete, cdcsync.Row{i, it.order, it.region}, nil))
				delete(items, i)
				for n, ni := range notes {
					if ni == i {
						notes[n] = nil
					}
				}
			default:
				// A child inserted, then its parent deleted.
				o := some()
				reg, ok := orders[o]
				if !ok {
					continue
				}
				i := id()
				ch = append(ch, chg(fkItems, cdcsync.OpInsert, nil, cdcsync.Row{i, o, reg}), chg(fkOrders, cdcsync.OpDelete, cdcsync.Row{o, reg}, nil))
				items[i] = item{o, reg}
				delete(orders, o)
				for i, it := range items {
					if it.order == o && it.region == reg {
						delete(items, i)
						for n, ni := range notes {
							if ni == i {
								notes[n] = nil
							}
						}
					}
				}
			}
			txns = append(txns, txnAt(seq, ch...))
		}
		sink := newTablesModel(fkOrders, fkItems, fkNotes)
		p := New(sink, []Table{{Schema: fkOrders}, {Schema: fkItems}, {Schema: fkNotes}}, 1, mariaPos(0),
			Options{Order: order, Interval: time.Hour, MaxRows: maxRows, MaxBytes: 1 << 30, CommitConcurrency: 3, ForeignKeys: shopFKs}, quiet(), nil)
		if err := runPipeline(t, p, txns...); err != nil {
			t.Fatal(err)
		}
		var want []string
		for n, i := range notes {
			want = append(want, fmt.Sprint(cdcsync.Row{n, i}))
		}
		sort.Strings(want)
		if got := sink.dump(fkNotes.ID); got != strings.Join(want, " ") {
			t.Fatalf("epochs of %d rows: notes =\n%s\nwant\n%s", maxRows, got, strings.Join(want, " "))
		}
		want = want[:0]
		for i, it := range items {
			want = append(want, fmt.Sprint(cdcsync.Row{i, it.order, it.region}))
		}
		sort.Strings(want)
		if got := sink.dump(fkItems.ID); got != strings.Join(want, " ") {
			t.Fatalf("epochs of %d rows: items =\n%s\nwant\n%s", maxRows, got, strings.Join(want, " "))
		}
	}
}
