package merge

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

var (
	users = &cdcsync.TableSchema{
		ID: cdcsync.TableID{Database: "shop", Table: "users"},
		Columns: []cdcsync.Column{
			{Name: "id", Kind: cdcsync.KindInt64},
			{Name: "region", Kind: cdcsync.KindString, Nullable: true},
			{Name: "name", Kind: cdcsync.KindString, Nullable: true},
		},
		PrimaryKey: []int{0},
	}
	orders = &cdcsync.TableSchema{
		ID: cdcsync.TableID{Database: "shop", Table: "orders"},
		Columns: []cdcsync.Column{
			{Name: "shop", Kind: cdcsync.KindString},
			{Name: "no", Kind: cdcsync.KindInt32},
			{Name: "amount", Kind: cdcsync.KindDecimal, Precision: 10, Scale: 2},
		},
		PrimaryKey: []int{0, 1},
	}
)

func schemaOf(id cdcsync.TableID) *cdcsync.TableSchema {
	switch id {
	case users.ID:
		return users
	case orders.ID:
		return orders
	}
	return nil
}

func u(id int64, region, name string) cdcsync.Row { return cdcsync.Row{id, region, name} }

func ins(r cdcsync.Row) cdcsync.Change {
	return cdcsync.Change{Table: users.ID, Op: cdcsync.OpInsert, After: r}
}
func upd(b, a cdcsync.Row) cdcsync.Change {
	return cdcsync.Change{Table: users.ID, Op: cdcsync.OpUpdate, Before: b, After: a}
}
func del(r cdcsync.Row) cdcsync.Change {
	return cdcsync.Change{Table: users.ID, Op: cdcsync.OpDelete, Before: r}
}

// lakeModel applies epoch outputs with Iceberg's semantics for equality
// deletes in a table partitioned by users.region: a delete removes older rows
// with the same key in the same partition only.
type lakeModel struct {
	rows map[string]cdcsync.Row // "region/id" -> row
}

func newLakeModel() *lakeModel { return &lakeModel{rows: map[string]cdcsync.Row{}} }

func (m *lakeModel) slot(r cdcsync.Row) string { return fmt.Sprintf("%v/%v", r[1], r[0]) }

func (m *lakeModel) commit(b *Buffer, id cdcsync.TableID) {
	deletes, rows := b.Output(id)
	for _, d := range deletes {
		delete(m.rows, m.slot(d))
	}
	for _, r := range rows {
		m.rows[m.slot(r)] = r
	}
}

func (m *lakeModel) sorted() []cdcsync.Row {
	var out []cdcsync.Row
	for _, r := range m.rows {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0].(int64) < out[j][0].(int64) })
	return out
}

// runEpochs applies each epoch (a list of transactions, each a list of
// changes) to a fresh buffer and commits it to the model.
func runEpochs(t *testing.T, epochs ...[][]cdcsync.Change) []cdcsync.Row {
	t.Helper()
	m := newLakeModel()
	for _, ep := range epochs {
		b := NewBuffer(schemaOf, nil)
		for _, txn := range ep {
			if err := b.Apply(&cdcsync.Txn{Changes: txn}, nil); err != nil {
				t.Fatal(err)
			}
		}
		m.commit(b, users.ID)
	}
	return m.sorted()
}

func TestEpochCollapse(t *testing.T) {
	a1, a2, a3 := u(1, "eu", "ann"), u(1, "eu", "anna"), u(1, "eu", "annie")
	b1 := u(2, "us", "bob")
	tests := []struct {
		name   string
		epochs [][][]cdcsync.Change
		want   []cdcsync.Row
	}{
		{"insert", [][][]cdcsync.Change{{{ins(a1)}}}, []cdcsync.Row{a1}},
		{"insert then update in one epoch", [][][]cdcsync.Change{{{ins(a1)}, {upd(a1, a2)}}}, []cdcsync.Row{a2}},
		{"insert then delete in one epoch", [][][]cdcsync.Change{{{ins(a1), del(a1)}}}, nil},
		{"insert, update, delete across epochs",
			[][][]cdcsync.Change{{{ins(a1), ins(b1)}}, {{upd(a1, a2)}}, {{del(b1)}}}, []cdcsync.Row{a2}},
		{"delete then re-insert in one epoch",
			[][][]cdcsync.Change{{{ins(a1)}}, {{del(a1)}, {ins(a3)}}}, []cdcsync.Row{a3}},
		{"delete then re-insert across epochs",
			[][][]cdcsync.Change{{{ins(a1)}}, {{del(a1)}}, {{ins(a3)}}}, []cdcsync.Row{a3}},
		{"several updates in one transaction",
			[][][]cdcsync.Change{{{ins(a1)}}, {{upd(a1, a2), upd(a2, a3)}}}, []cdcsync.Row{a3}},
		{"primary key change",
			[][][]cdcsync.Change{{{ins(a1)}}, {{upd(a1, u(7, "eu", "ann"))}}}, []cdcsync.Row{u(7, "eu", "ann")}},
		{"primary key change onto a key deleted in the same epoch",
			[][][]cdcsync.Change{{{ins(a1), ins(b1)}}, {{del(b1), upd(a1, u(2, "eu", "ann"))}}}, []cdcsync.Row{u(2, "eu", "ann")}},
		{"primary key swap through a temporary key",
			[][][]cdcsync.Change{{{ins(a1), ins(b1)}}, {{upd(a1, u(9, "eu", "ann")), upd(b1, u(1, "us", "bob")), upd(u(9, "eu", "ann"), u(2, "eu", "ann"))}}},
			[]cdcsync.Row{u(1, "us", "bob"), u(2, "eu", "ann")}},
		{"update moves the row to another partition",
			[][][]cdcsync.Change{{{ins(a1)}}, {{upd(a1, u(1, "us", "ann"))}}}, []cdcsync.Row{u(1, "us", "ann")}},
		{"row moves twice in one epoch",
			[][][]cdcsync.Change{{{ins(a1)}}, {{upd(a1, u(1, "us", "ann"))}, {upd(u(1, "us", "ann"), u(1, "apac", "ann"))}}},
			[]cdcsync.Row{u(1, "apac", "ann")}},
		{"row moves and back in one epoch",
			[][][]cdcsync.Change{{{ins(a1)}}, {{upd(a1, u(1, "us", "ann")), upd(u(1, "us", "ann"), a2)}}}, []cdcsync.Row{a2}},
		{"inserted, moved and deleted in one epoch", [][][]cdcsync.Change{{{ins(a1), upd(a1, u(1, "us", "ann")), del(u(1, "us", "ann"))}}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := runEpochs(t, tc.epochs...)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("table holds %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeleteGoesToBeforeImagePartition(t *testing.T) {
	b := NewBuffer(schemaOf, nil)
	old := u(1, "eu", "ann")
	if err := b.Apply(&cdcsync.Txn{Changes: []cdcsync.Change{upd(old, u(1, "us", "ann")), upd(u(1, "us", "ann"), u(1, "apac", "ann"))}}, nil); err != nil {
		t.Fatal(err)
	}
	deletes, rows := b.Output(users.ID)
	if len(deletes) != 1 || deletes[0][1] != "eu" {
		t.Fatalf("deletes = %v, want one delete carrying the committed image's partition eu", deletes)
	}
	if len(rows) != 1 || rows[0][1] != "apac" {
		t.Fatalf("rows = %v, want the final image in apac", rows)
	}
}

func TestOneTransactionSeveralTables(t *testing.T) {
	b := NewBuffer(schemaOf, nil)
	o := cdcsync.Row{"berlin", int32(1), "10.00"}
	o2 := cdcsync.Row{"berlin", int32(1), "12.50"}
	txn := &cdcsync.Txn{Changes: []cdcsync.Change{
		ins(u(1, "eu", "ann")),
		{Table: orders.ID, Op: cdcsync.OpInsert, After: o},
		{Table: orders.ID, Op: cdcsync.OpUpdate, Before: o, After: o2},
		{Table: orders.ID, Op: cdcsync.OpInsert, After: cdcsync.Row{"paris", int32(1), "3.00"}},
	}, Bytes: 100}
	if err := b.Apply(txn, nil); err != nil {
		t.Fatal(err)
	}
	tables := b.Tables()
	if len(tables) != 2 {
		t.Fatalf("tables = %v, want users and orders", tables)
	}
	deletes, rows := b.Output(orders.ID)
	if len(deletes) != 2 || len(rows) != 2 || !reflect.DeepEqual(rows[0], o2) {
		t.Fatalf("orders: deletes %v rows %v; want 2 keys (composite keys kept apart) with berlin/1 at 12.50", deletes, rows)
	}
	if b.Rows != 4 || b.Txns != 1 || b.Bytes != 100 {
		t.Fatalf("counters rows=%d txns=%d bytes=%d", b.Rows, b.Txns, b.Bytes)
	}
}

func TestSkipCommittedTables(t *testing.T) {
	b := NewBuffer(schemaOf, nil)
	txn := &cdcsync.Txn{Changes: []cdcsync.Change{ins(u(1, "eu", "ann")), {Table: orders.ID, Op: cdcsync.OpInsert, After: cdcsync.Row{"x", int32(1), "1.00"}}}}
	if err := b.Apply(txn, func(id cdcsync.TableID) bool { return id == users.ID }); err != nil {
		t.Fatal(err)
	}
	if d, r := b.Output(users.ID); d != nil || r != nil {
		t.Fatalf("skipped table got changes: %v %v", d, r)
	}
	if _, r := b.Output(orders.ID); len(r) != 1 {
		t.Fatalf("orders rows = %v", r)
	}
}

func TestBadChanges(t *testing.T) {
	b := NewBuffer(schemaOf, nil)
	cases := []struct {
		name string
		c    cdcsync.Change
	}{
		{"unknown table", cdcsync.Change{Table: cdcsync.TableID{Database: "x", Table: "y"}, Op: cdcsync.OpInsert, After: u(1, "", "")}},
		{"null key", ins(cdcsync.Row{nil, "eu", "x"})},
		{"short row", ins(cdcsync.Row{int64(1)})},
	}
	for _, tc := range cases {
		if err := b.Apply(&cdcsync.Txn{Changes: []cdcsync.Change{tc.c}}, nil); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func TestKeysDoNotCollide(t *testing.T) {
	tb := newTableBuffer(orders, nil)
	k1, _ := tb.key(cdcsync.Row{"a\x00", int32(1), nil})
	k2, _ := tb.key(cdcsync.Row{"a", int32(1), nil})
	k3, _ := tb.key(cdcsync.Row{"a", int32(256), nil})
	if k1 == k2 || k2 == k3 {
		t.Fatal("distinct composite keys encode equal")
	}
}

// With the sink's delete columns, an update's or a delete's before image
// keeps only those columns: the deletes carry the same keys, the final
// rows are the same, and an update-heavy epoch holds much less memory.
func TestBufferTrimsBeforeImages(t *testing.T) {
	s := benchTableSchema()
	id := s.ID
	schemas := func(cdcsync.TableID) *cdcsync.TableSchema { return s }
	const n = 20000
	fill := func(delCols func(cdcsync.TableID) []int) (*Buffer, uint64) {
		r := rand.New(rand.NewPCG(8, 9))
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		buf := NewBuffer(schemas, delCols)
		for i := int64(1); i <= n; i++ {
			// Each transaction is dropped once applied, as in the pipeline.
			var c cdcsync.Change
			if i%10 == 0 {
				c = cdcsync.Change{Table: id, Op: cdcsync.OpDelete, Before: benchRow(i, 0, r)}
			} else {
				c = cdcsync.Change{Table: id, Op: cdcsync.OpUpdate, Before: benchRow(i, 0, r), After: benchRow(i, 1, r)}
			}
			if err := buf.Apply(&cdcsync.Txn{Changes: []cdcsync.Change{c}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		return buf, after.HeapAlloc - before.HeapAlloc
	}
	whole, wholeBytes := fill(nil)
	trimmed, trimmedBytes := fill(func(got cdcsync.TableID) []int {
		if got != id {
			t.Errorf("delete columns asked for %s", got)
		}
		return []int{0}
	})
	wd, wr := whole.Output(id)
	td, tr := trimmed.Output(id)
	if fmt.Sprint(wr) != fmt.Sprint(tr) {
		t.Fatal("trimming changed the final rows")
	}
	if len(td) != len(wd) || len(td) != n {
		t.Fatalf("%d and %d deletes, want %d", len(td), len(wd), n)
	}
	for i := range td {
		if len(td[i]) != len(s.Columns) || td[i][0] != wd[i][0] {
			t.Fatalf("delete %d: %v, want the key of %v", i, td[i], wd[i])
		}
		for c := 1; c < len(td[i]); c++ {
			if td[i][c] != nil {
				t.Fatalf("delete %d keeps column %d: %v", i, c, td[i])
			}
		}
	}
	t.Logf("%d changes (90%% updates): %d bytes held with whole before images, %d trimmed (%.2f)", n, wholeBytes, trimmedBytes, float64(trimmedBytes)/float64(wholeBytes))
	// Measured 0.77: a trimmed image keeps its slice of interfaces.
	if float64(trimmedBytes) > 0.85*float64(wholeBytes) {
		t.Errorf("trimmed before images hold %d bytes, whole ones %d: want at most 85%%", trimmedBytes, wholeBytes)
	}
	runtime.KeepAlive(whole)
	runtime.KeepAlive(trimmed)
}

// Split moves a table's share of the epoch, with its counters, its spill
// and the epoch its changes began in, into a buffer that goes on
// collecting: the rest is sealed without it, and nothing is lost or
// counted twice.
func TestBufferSplitCarriesTablesOver(t *testing.T) {
	b := NewBuffer(schemaOf, nil)
	oIns := func(shop string, no int32) cdcsync.Change {
		return cdcsync.Change{Table: orders.ID, Op: cdcsync.OpInsert, After: cdcsync.Row{shop, no, "1.00"}}
	}
	apply := func(b *Buffer, bytes int, changes ...cdcsync.Change) {
		t.Helper()
		if err := b.Apply(&cdcsync.Txn{Changes: changes, Bytes: bytes, Time: time.Now(), Pos: mariaPos(1)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	apply(b, 40, ins(u(1, "eu", "a")), oIns("x", 1), oIns("x", 2), ins(u(2, "eu", "b")))
	var spilled []string
	if err := b.Spill(7, func(id cdcsync.TableID, spill int64, _, rows []cdcsync.Row) error {
		spilled = append(spilled, fmt.Sprint(id, "@", spill, "/", len(rows)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	apply(b, 30, ins(u(3, "eu", "c")), oIns("x", 3), upd(u(1, "eu", "a"), u(1, "eu", "a2")))
	first := b.First
	nb := b.Split(func(id cdcsync.TableID) bool { return id == users.ID }, 9)

	if b.Rows != 3 || nb.Rows != 4 || b.Bytes != 30 || nb.Bytes != 40 || b.Held != 10 || nb.Held != 20 {
		t.Errorf("sealed rows=%d bytes=%d held=%d, carried rows=%d bytes=%d held=%d; want 3/30/10 and 4/40/20",
			b.Rows, b.Bytes, b.Held, nb.Rows, nb.Bytes, nb.Held)
	}
	if got := fmt.Sprint(b.Tables(), nb.Tables()); got != "[shop.orders] [shop.users]" {
		t.Errorf("tables sealed, carried: %s", got)
	}
	if b.SpillID(orders.ID) != 7 || nb.SpillID(users.ID) != 7 || b.SpillID(users.ID) != 0 {
		t.Errorf("spills: orders %d (sealed), users %d (carried), %d (sealed); want 7, 7, 0", b.SpillID(orders.ID), nb.SpillID(users.ID), b.SpillID(users.ID))
	}
	if nb.From(users.ID) != 9 || b.From(orders.ID) != 0 || b.Carries() || !nb.Carries() {
		t.Errorf("from: users %d, orders %d; want 9 and 0", nb.From(users.ID), b.From(orders.ID))
	}
	if !nb.First.Equal(first) || nb.End != b.End {
		t.Errorf("the carried buffer starts at %v and ends at %v; want %v and %v", nb.First, nb.End, first, b.End)
	}

	// The carried buffer goes on: its own spill names the tables that had
	// none, and a second split keeps the oldest epoch.
	apply(nb, 20, upd(u(3, "eu", "c"), u(3, "eu", "c2")), oIns("y", 1))
	spilled = spilled[:0]
	if err := nb.Spill(8, func(id cdcsync.TableID, spill int64, _, rows []cdcsync.Row) error {
		spilled = append(spilled, fmt.Sprint(id, "@", spill))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(spilled)
	if got := fmt.Sprint(spilled); got != "[shop.orders@8 shop.users@7]" {
		t.Errorf("second spill wrote %s; users keeps spill 7, orders starts 8", got)
	}
	nb2 := nb.Split(func(id cdcsync.TableID) bool { return true }, 10)
	if nb2.From(users.ID) != 9 || nb2.From(orders.ID) != 10 {
		t.Errorf("from after a second split: users %d, orders %d; want 9 and 10", nb2.From(users.ID), nb2.From(orders.ID))
	}
	if _, r := b.Output(orders.ID); len(r) != 1 {
		t.Errorf("the sealed orders hold %d rows after its spill; want the one added since", len(r))
	}
}
