package merge

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// ReadKeys reads rows by key at the moment of the read (KeyReader), and
// returns them only after a while, so that the stream has moved on past
// the read's position and changed some of them again by then.
func (f *fakeMySQL) ReadKeys(_ context.Context, _ *cdcsync.TableSchema, keys [][]any) ([]cdcsync.Row, cdcsync.Position, error) {
	f.mu.Lock()
	var out []cdcsync.Row
	for _, k := range keys {
		if v, ok := f.rows[k[0].(int64)]; ok {
			out = append(out, cdcsync.Row{k[0], v})
		}
	}
	pos := mariaPos(f.seq)
	f.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	return out, pos, nil
}

// RowsWhere answers from the table's committed rows (RowFinder).
func (m *icebergModel) RowsWhere(_ context.Context, _ cdcsync.TableID, cols []int, vals [][]any) ([]cdcsync.Row, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []cdcsync.Row
	for _, v := range vals {
		if ver, ok := m.rows[v[0].(int64)]; ok {
			out = append(out, cdcsync.Row{v[0], ver})
		}
	}
	return out, nil
}

// TestRepairWhileStreaming repairs keys whose rows differ from MySQL (rows
// the lake lacks, holds stale, holds although MySQL has none, changed in
// MySQL without the binlog) while a workload changes the same keys: the
// repairs and the stream together leave the table equal to MySQL, no
// snapshot shows a row older than one shown before, and every inserted row
// has its equality delete.
func TestRepairWhileStreaming(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 21))
	db := newFakeMySQL(400)
	db.seq = 100 // the stream writes versions above 100; the divergences are older
	sink := &icebergModel{rows: map[int64]int64{}, seen: map[int64]int64{}}
	for k := range db.rows {
		db.rows[k] = 10
		sink.rows[k] = 10
	}
	var broken [][]any
	for k := int64(1); k <= 400; k += 7 {
		switch k % 4 {
		case 0:
			delete(sink.rows, k) // missing in the lake
		case 1:
			sink.rows[k] = 5 // stale in the lake
		case 2:
			db.rows[k] = 7 // changed in MySQL, not in the binlog
			sink.rows[k] = 6
		case 3:
			delete(db.rows, k) // deleted in MySQL, not in the binlog
		}
		broken = append(broken, []any{k})
	}
	sink.rows[1000] = 1 // a key MySQL never had
	broken = append(broken, []any{int64(1000)}, []any{int64(2000)})

	start := mariaPos(db.seq)
	p := New(sink, []Table{{Schema: items, Committed: start}}, 1, start,
		Options{Order: order, Interval: 20 * time.Millisecond, MaxRows: 500, MaxBytes: 1 << 30, CommitConcurrency: 1,
			Copy: CopyOptions{Source: db, Workers: 1}}, quiet(), nil)
	txns := make(chan *cdcsync.Txn, 16)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), txns) }()
	type result struct {
		res RepairResult
		err error
	}
	repaired := make(chan result, 1)
	stream := func(n int) {
		for range n {
			select {
			case txns <- db.change(r, 600): // the workload also touches keys 401..600, some broken ones among 1..400
			case err := <-done:
				t.Fatalf("the pipeline stopped: %v", err)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	stream(200)
	go func() {
		res, err := p.Repair(context.Background(), items.ID, broken)
		repaired <- result{res, err}
	}()
	stream(300)
	var got result
	select {
	case got = <-repaired:
	case <-time.After(20 * time.Second):
		t.Fatal("the repair did not return")
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	res := got.res
	if res.Epoch == 0 || res.Upserted+res.Deleted+res.Skipped+res.Absent != len(broken) || res.Absent < 1 {
		t.Errorf("repair result %+v for %d keys", res, len(broken))
	}
	t.Logf("repair: %+v", res)
	stream(100)
	close(txns)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, e := range sink.errs {
		t.Error(e)
	}
	if len(sink.rows) != len(db.rows) {
		t.Errorf("the table holds %d rows, MySQL %d", len(sink.rows), len(db.rows))
	}
	for k, v := range db.rows {
		if got, ok := sink.rows[k]; !ok || got != v {
			t.Errorf("key %d: the table holds version %d (present %v), MySQL %d", k, got, ok, v)
		}
	}

	// A table the pipeline does not mirror is refused; so is a wrong key.
	p2 := New(sink, []Table{{Schema: items, Committed: mariaPos(db.seq)}}, 1000, mariaPos(db.seq),
		Options{Order: order, Interval: time.Hour, MaxRows: 500, MaxBytes: 1 << 30, Copy: CopyOptions{Source: db}}, quiet(), nil)
	txns2 := make(chan *cdcsync.Txn)
	done2 := make(chan error, 1)
	go func() { done2 <- p2.Run(context.Background(), txns2) }()
	if _, err := p2.Repair(context.Background(), cdcsync.TableID{Database: "shop", Table: "other"}, broken); err == nil {
		t.Error("a repair of a table the pipeline does not mirror was taken")
	}
	if _, err := p2.Repair(context.Background(), items.ID, [][]any{{"7"}}); err == nil {
		t.Error("a key of the wrong type was taken")
	}
	close(txns2)
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
}
