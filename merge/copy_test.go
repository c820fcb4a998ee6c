package merge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// items is the table of the copy tests: a key and a version, where the
// version is the number of the transaction that wrote the row, so that a
// row image older than another has a smaller version.
var items = &cdcsync.TableSchema{
	ID: cdcsync.TableID{Database: "shop", Table: "items"},
	Columns: []cdcsync.Column{
		{Name: "id", Kind: cdcsync.KindInt64},
		{Name: "ver", Kind: cdcsync.KindInt64},
	},
	PrimaryKey: []int{0},
}

// fakeMySQL is a table that a workload changes while it is copied: each
// transaction changes it and is then sent to the pipeline, the way a binlog
// reader sees committed transactions. Chunks read its state at the moment
// of the read, with the position of the last transaction committed.
type fakeMySQL struct {
	mu    sync.Mutex
	rows  map[int64]int64 // id -> ver
	seq   int
	log   []*cdcsync.Txn // every transaction, as the binlog keeps them
	reads int
	// lagging makes a chunk's snapshot miss the last transaction: the
	// snapshot position then predates what the stream may have read.
	lagging bool
	// readDelay is how long a chunk read takes (1ms when zero), which lets
	// the workload move on meanwhile.
	readDelay time.Duration
}

func (f *fakeMySQL) Estimate(context.Context, *cdcsync.TableSchema) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.rows)), nil
}

func (f *fakeMySQL) keys() []int64 {
	ks := make([]int64, 0, len(f.rows))
	for k := range f.rows {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func bound(s string) int64 {
	if s == "" {
		return -1 << 62
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func (f *fakeMySQL) NextBound(_ context.Context, _ *cdcsync.TableSchema, after string, rows int) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lo := bound(after)
	n := 0
	for _, k := range f.keys() {
		if k > lo {
			n++
			if n == rows {
				return strconv.FormatInt(k, 10), false, nil
			}
		}
	}
	return "", true, nil
}

func (f *fakeMySQL) ReadChunk(_ context.Context, _ *cdcsync.TableSchema, after, hi string, last bool) ([]cdcsync.Row, cdcsync.Position, error) {
	if f.readDelay > 0 {
		time.Sleep(f.readDelay)
	} else {
		time.Sleep(time.Millisecond)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	lo, up := bound(after), bound(hi)
	var out []cdcsync.Row
	for _, k := range f.keys() {
		if k > lo && (last || k <= up) {
			out = append(out, cdcsync.Row{k, f.rows[k]})
		}
	}
	pos := mariaPos(f.seq)
	if f.lagging && f.reads%3 == 0 && f.seq > 0 {
		pos = mariaPos(f.seq - 1) // its rows are as of seq, which makes this case pessimistic
	}
	return out, pos, nil
}

// change makes one random transaction and returns it.
func (f *fakeMySQL) change(r *rand.Rand, keys int64) *cdcsync.Txn {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	var changes []cdcsync.Change
	for range 1 + r.IntN(3) {
		k := 1 + r.Int64N(keys)
		old, ok := f.rows[k]
		switch {
		case !ok:
			f.rows[k] = int64(f.seq)
			changes = append(changes, cdcsync.Change{Table: items.ID, Op: cdcsync.OpInsert, After: cdcsync.Row{k, int64(f.seq)}})
		case r.IntN(4) == 0:
			delete(f.rows, k)
			changes = append(changes, cdcsync.Change{Table: items.ID, Op: cdcsync.OpDelete, Before: cdcsync.Row{k, old}})
		default:
			f.rows[k] = int64(f.seq)
			changes = append(changes, cdcsync.Change{Table: items.ID, Op: cdcsync.OpUpdate, Before: cdcsync.Row{k, old}, After: cdcsync.Row{k, int64(f.seq)}})
		}
	}
	t := &cdcsync.Txn{GTID: fmt.Sprintf("0-1-%d", f.seq), Pos: mariaPos(f.seq), Time: time.Now(), Changes: changes, Bytes: 40}
	f.log = append(f.log, t)
	return t
}

// icebergModel applies deltas as Iceberg does (an equality delete removes
// older rows of its key) and checks what a reader of each snapshot could
// see: no duplicate key, and no row image older than one seen before.
type icebergModel struct {
	mu      sync.Mutex
	rows    map[int64]int64
	seen    map[int64]int64 // the newest version any snapshot showed
	copy    *cdcsync.CopyState
	pos     cdcsync.Position // of the last commit
	commits int
	errs    []string
	copyEnd bool
}

func (m *icebergModel) Commit(_ context.Context, id cdcsync.TableID, d cdcsync.Delta) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id != items.ID {
		return fmt.Errorf("commit to %s", id)
	}
	for _, r := range d.Deletes {
		delete(m.rows, r[0].(int64))
	}
	for _, r := range d.Rows {
		k, v := r[0].(int64), r[1].(int64)
		if _, dup := m.rows[k]; dup {
			m.errs = append(m.errs, fmt.Sprintf("epoch %d inserts key %d, which the table holds, without an equality delete", d.Epoch, k))
		}
		m.rows[k] = v
	}
	for k, v := range m.rows {
		if v < m.seen[k] {
			m.errs = append(m.errs, fmt.Sprintf("epoch %d shows key %d at version %d after a snapshot showed version %d", d.Epoch, k, v, m.seen[k]))
		}
		m.seen[k] = max(m.seen[k], v)
	}
	m.copy, m.pos = d.Copy, d.Pos
	if d.Copy != nil && d.Copy.Done {
		m.copyEnd = true
	}
	m.commits++
	return nil
}

func (m *icebergModel) SaveCheckpoint(context.Context, int64, cdcsync.Position) error { return nil }

func (m *icebergModel) StartCopy(_ context.Context, _ cdcsync.TableID, _ int64, _ cdcsync.Position) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.rows)
	m.copy, m.copyEnd = &cdcsync.CopyState{}, false
	return nil
}

// runCopy runs a pipeline over a workload of n transactions on keys
// 1..keys until the copy is done and the workload over; stopAfter > 0 stops
// it after that many transactions instead. The stream starts after the
// sink's last commit, replaying the transactions the binlog holds after it.
func runCopy(t *testing.T, db *fakeMySQL, sink *icebergModel, st *cdcsync.CopyState, clean bool, r *rand.Rand, n int, keys int64, stopAfter int) {
	t.Helper()
	from := sink.pos
	if from.IsZero() {
		from = mariaPos(db.seq)
	}
	p := New(sink, []Table{{Schema: items, Committed: from, Copy: st, CopyClean: clean}}, int64(sink.commits+1), from,
		Options{Order: order, Interval: 20 * time.Millisecond, MaxRows: 500, MaxBytes: 1 << 30, CommitConcurrency: 1,
			Copy: CopyOptions{Source: db, ChunkRows: 37, Workers: 3, MaxTrackedKeys: 1 << 20}}, quiet(), nil)
	txns := make(chan *cdcsync.Txn, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, txns) }()
	for _, x := range db.log {
		if ok, _ := order.Covers(from, x); !ok {
			txns <- x
		}
	}
	for i := 0; i < n; i++ {
		if stopAfter > 0 && i == stopAfter {
			cancel()
			<-done
			return
		}
		select {
		case txns <- db.change(r, keys):
		case err := <-done:
			t.Fatalf("the pipeline stopped: %v", err)
		}
		if i%20 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	// Let the copy finish with the stream idle.
	waitFor(t, "the copy to finish", func() bool { return len(p.Copying()) == 0 })
	close(txns)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func newFakeMySQL(rows int64) *fakeMySQL {
	db := &fakeMySQL{rows: map[int64]int64{}}
	for k := int64(1); k <= rows; k++ {
		db.rows[k] = 0
	}
	return db
}

func (m *icebergModel) check(t *testing.T, db *fakeMySQL) {
	t.Helper()
	for _, e := range m.errs {
		t.Error(e)
	}
	if len(m.rows) != len(db.rows) {
		t.Errorf("the table holds %d rows, MySQL %d", len(m.rows), len(db.rows))
	}
	for k, v := range db.rows {
		if got, ok := m.rows[k]; !ok || got != v {
			t.Errorf("key %d: the table holds version %d (present %v), MySQL %d", k, got, ok, v)
		}
	}
	if !m.copyEnd || (m.copy != nil && !m.copy.Done) {
		t.Errorf("no commit ended the copy, or a later one records it running: %+v", m.copy)
	}
}

func TestCopyWhileStreamingConverges(t *testing.T) {
	for _, lagging := range []bool{false, true} {
		t.Run(fmt.Sprintf("lagging=%v", lagging), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(len(fmt.Sprint(lagging)))))
			db := newFakeMySQL(2000)
			db.lagging = lagging
			sink := &icebergModel{rows: map[int64]int64{}, seen: map[int64]int64{}}
			runCopy(t, db, sink, &cdcsync.CopyState{}, true, r, 3000, 2600, 0)
			sink.check(t, db)
			if sink.commits < 3 {
				t.Errorf("only %d commits: the copy should span several epochs", sink.commits)
			}
		})
	}
}

// A copy interrupted several times resumes after its last committed chunk
// and still converges; the rows copied are counted once.
func TestCopyResumesAfterCrashes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	db := newFakeMySQL(8000)
	db.readDelay = 10 * time.Millisecond // slow enough that no session copies it all before its crash, even under -race on a busy machine
	sink := &icebergModel{rows: map[int64]int64{}, seen: map[int64]int64{}}
	st, clean := &cdcsync.CopyState{}, true
	var afters []string
	for crash := 0; crash < 4; crash++ {
		runCopy(t, db, sink, st, clean, r, 400, 9000, 50+r.IntN(100))
		if sink.copyEnd {
			if crash < 2 {
				t.Fatalf("the copy ended before crash %d; make the table larger", crash)
			}
			break
		}
		c := *sink.copy
		st, clean = &c, false // a new session does not know which keys the stream wrote
		afters = append(afters, c.After)
	}
	runCopy(t, db, sink, st, false, r, 500, 9000, 0)
	sink.check(t, db)
	for i := 1; i < len(afters); i++ {
		if bound(afters[i]) < bound(afters[i-1]) {
			t.Errorf("the copy went back: %v", afters)
		}
	}
	if bound(afters[len(afters)-1]) <= 0 {
		t.Errorf("the copy made no progress before the crashes: %v", afters)
	}
}

// Rows copied with no key the stream wrote carry no equality delete.
func TestCopyAddsNoDeletesForUntouchedKeys(t *testing.T) {
	db := newFakeMySQL(500)
	var deletes, rows int
	sink := &countingSink{icebergModel: icebergModel{rows: map[int64]int64{}, seen: map[int64]int64{}}, deletes: &deletes, rows: &rows}
	p := New(sink, []Table{{Schema: items, Committed: mariaPos(0), Copy: &cdcsync.CopyState{}, CopyClean: true}}, 1, mariaPos(0),
		Options{Order: order, Interval: 10 * time.Millisecond, MaxRows: 1000, MaxBytes: 1 << 30, Copy: CopyOptions{Source: db, ChunkRows: 100, Workers: 2}}, quiet(), nil)
	runUntilCopied(t, p)
	sink.check(t, db)
	if deletes != 0 || rows != 500 {
		t.Errorf("the copy wrote %d rows and %d equality deletes; want 500 rows and no deletes", rows, deletes)
	}
}

// runUntilCopied runs p with an idle stream until its copies are done.
func runUntilCopied(t *testing.T, p *Pipeline) {
	t.Helper()
	txns := make(chan *cdcsync.Txn)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), txns) }()
	waitFor(t, "the copy to finish", func() bool { return len(p.Copying()) == 0 })
	close(txns)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

type countingSink struct {
	icebergModel
	deletes, rows *int
}

func (s *countingSink) Commit(ctx context.Context, id cdcsync.TableID, d cdcsync.Delta) error {
	*s.deletes += len(d.Deletes)
	*s.rows += len(d.Rows)
	return s.icebergModel.Commit(ctx, id, d)
}

// Resync empties the table and copies it again while the stream goes on.
func TestResyncCopiesAgain(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	db := newFakeMySQL(800)
	sink := &icebergModel{rows: map[int64]int64{}, seen: map[int64]int64{}}
	p := New(sink, []Table{{Schema: items, Committed: mariaPos(0), Copy: &cdcsync.CopyState{}, CopyClean: true}}, 1, mariaPos(0),
		Options{Order: order, Interval: 10 * time.Millisecond, MaxRows: 300, MaxBytes: 1 << 30, Copy: CopyOptions{Source: db, ChunkRows: 50, Workers: 2}}, quiet(), nil)
	txns := make(chan *cdcsync.Txn, 8)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), txns) }()
	for i := 0; i < 600; i++ {
		txns <- db.change(r, 1000)
		if i == 300 {
			sink.mu.Lock()
			sink.seen = map[int64]int64{} // emptying the table is allowed to go back
			sink.mu.Unlock()
			if err := p.Resync(context.Background(), items.ID); err != nil {
				t.Fatal(err)
			}
			sink.mu.Lock()
			if len(sink.rows) != 0 {
				t.Errorf("after the resync the table holds %d rows; want it emptied", len(sink.rows))
			}
			sink.mu.Unlock()
		}
	}
	waitFor(t, "the copy to finish", func() bool { return len(p.Copying()) == 0 })
	if err := p.Resync(context.Background(), cdcsync.TableID{Database: "shop", Table: "nope"}); err == nil {
		t.Error("a resync of a table the pipeline does not mirror succeeded")
	}
	close(txns)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sink.check(t, db)
}

// maintainedSink is an icebergModel that records which tables it was asked
// to maintain.
type maintainedSink struct {
	icebergModel
	mmu        sync.Mutex
	maintained []cdcsync.TableID
}

func (s *maintainedSink) Maintain(_ context.Context, _ int64, ids []cdcsync.TableID) error {
	s.mmu.Lock()
	defer s.mmu.Unlock()
	s.maintained = append(s.maintained, ids...)
	return nil
}

// A copy that wrote an equality delete for every copied row (it resumed
// after a restart) is maintained as soon as it ends, even with no other
// change to the table: readers must not pay for its deletes until the next
// change arrives. A clean copy wrote no such debris and waits for the usual
// schedule.
func TestResumedCopyIsMaintainedWhenItEnds(t *testing.T) {
	for _, clean := range []bool{false, true} {
		db := newFakeMySQL(300)
		sink := &maintainedSink{icebergModel: icebergModel{rows: map[int64]int64{}, seen: map[int64]int64{}}}
		p := New(sink, []Table{{Schema: items, Committed: mariaPos(0), Copy: &cdcsync.CopyState{}, CopyClean: clean}}, 1, mariaPos(0),
			Options{Order: order, Interval: 10 * time.Millisecond, MaxRows: 1000, MaxBytes: 1 << 30, Copy: CopyOptions{Source: db, ChunkRows: 50, Workers: 2}}, quiet(), nil)
		runUntilCopied(t, p)
		sink.check(t, db)
		sink.mmu.Lock()
		got := fmt.Sprint(sink.maintained)
		sink.mmu.Unlock()
		want := "[shop.items]"
		if clean {
			want = "[]"
		}
		if got != want {
			t.Errorf("clean=%v: maintained %s, want %s", clean, got, want)
		}
	}
}

// An epoch that holds rows of an initial copy seals at a quarter of
// MaxBytes (copyEpochShare), so that the copy's two epochs in memory (one
// filling, one committing) hold half of MaxBytes, not twice it.
func TestCopyEpochsSealAtAShareOfMaxBytes(t *testing.T) {
	const rows, chunk = 2000, 50
	db := newFakeMySQL(rows)
	perRow := cdcsync.Row{int64(1), int64(0)}.MemSize()
	maxBytes := 800 * perRow
	var sizes []int
	sink := &sizingSink{icebergModel: icebergModel{rows: map[int64]int64{}, seen: map[int64]int64{}}, sizes: &sizes}
	p := New(sink, []Table{{Schema: items, Committed: mariaPos(0), Copy: &cdcsync.CopyState{}, CopyClean: true}}, 1, mariaPos(0),
		Options{Order: order, Interval: time.Hour, MaxRows: 1 << 20, MaxBytes: maxBytes, Copy: CopyOptions{Source: db, ChunkRows: chunk, Workers: 2}}, quiet(), nil)
	runUntilCopied(t, p)
	sink.check(t, db)
	limit := maxBytes/copyEpochShare/perRow + chunk // a chunk is merged whole before the check
	for i, n := range sizes {
		if n > limit {
			t.Errorf("epoch %d of the copy holds %d rows, more than %d (a quarter of max_bytes, plus a chunk): %v", i+1, n, limit, sizes)
		}
	}
	if len(sizes) < rows/limit {
		t.Errorf("the copy committed %d epochs %v; want at least %d", len(sizes), sizes, rows/limit)
	}
}

type sizingSink struct {
	icebergModel
	sizes *[]int
}

func (s *sizingSink) Commit(ctx context.Context, id cdcsync.TableID, d cdcsync.Delta) error {
	*s.sizes = append(*s.sizes, len(d.Rows))
	return s.icebergModel.Commit(ctx, id, d)
}
