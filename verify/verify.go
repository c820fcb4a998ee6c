package verify

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cdcsync/cdcsync"
)

// Options tune a Verifier.
type Options struct {
	// Order compares the source's positions (required).
	Order cdcsync.Order
	// ChunkRows is the number of rows per chunk (default 20000).
	ChunkRows int
	// RowsPerSecond caps the rows MySQL reads a second for checksums and
	// hashes (0: no cap).
	RowsPerSecond int
	// Wait bounds how long a read waits for the lake to cover its position
	// (default 5 minutes).
	Wait time.Duration
	// Settle bounds how long keys that keep changing are read again
	// (default 2 minutes): those still changing then are reported as
	// unsettled, not as differences.
	Settle time.Duration
	// Poll is how often the catalog is read while waiting (default 250ms).
	Poll time.Duration
	// Examples is how many differing keys a report shows with both rows
	// (default 10); every differing key is counted and kept for repair.
	Examples int
	// Progress, when set, is called as chunks are read.
	Progress func(Progress)
	Log      *slog.Logger
}

// Progress is how far a table's comparison has got.
type Progress struct {
	Table  cdcsync.TableID
	Phase  string // "checksums", "rows", "keys"
	Chunks int    // chunks read so far
	Rows   int64  // MySQL rows summed so far
	Start  time.Time
}

// Verifier compares tables of a pipeline with MySQL.
type Verifier struct {
	src  Source
	lake Lake
	opts Options
	// pacing of RowsPerSecond
	paceStart time.Time
	paceRows  int64
}

// New returns a Verifier of the tables lake holds against src.
func New(src Source, lake Lake, opts Options) *Verifier {
	if opts.Order == nil {
		panic("verify.New: Options.Order is nil")
	}
	if opts.ChunkRows <= 0 {
		opts.ChunkRows = 20000
	}
	if opts.Wait <= 0 {
		opts.Wait = 5 * time.Minute
	}
	if opts.Settle <= 0 {
		opts.Settle = 2 * time.Minute
	}
	if opts.Poll <= 0 {
		opts.Poll = 250 * time.Millisecond
	}
	if opts.Examples <= 0 {
		opts.Examples = 10
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Verifier{src: src, lake: lake, opts: opts}
}

// Tables lists the tables the pipeline mirrors.
func (v *Verifier) Tables(ctx context.Context) ([]cdcsync.TableID, error) {
	return v.lake.Tables(ctx)
}

// chunk is one primary-key range of a table.
type chunk struct {
	after, hi string
	last      bool
	hiKey     []any // the key hi stands for; nil for the last chunk
	mysql     Sum
	read      Read
	lake      Sum
	differs   bool
}

// table is the state of one table's comparison.
type table struct {
	id     cdcsync.TableID
	ts     *cdcsync.TableSchema
	rep    *TableReport
	chunks []*chunk
	// touched caches Lake.Touched by snapshot.
	touched map[int64]touchedSet
}

type touchedSet struct {
	keys map[string]bool
	all  bool
}

// errUnverifiable marks a table that cannot be compared now.
type errUnverifiable struct{ why string }

func (e errUnverifiable) Error() string { return e.why }

// Table compares one table and reports the outcome. Errors are in the
// report (Status StatusError or StatusUnverified), so that the other
// tables go on.
func (v *Verifier) Table(ctx context.Context, id cdcsync.TableID) *TableReport {
	start := time.Now()
	rep := &TableReport{Table: id.String(), keys: map[string][]any{}}
	t := &table{id: id, rep: rep, touched: map[int64]touchedSet{}}
	err := v.compare(ctx, t)
	rep.Elapsed = time.Since(start)
	rep.finish(err)
	return rep
}

func (v *Verifier) compare(ctx context.Context, t *table) error {
	st, err := v.lake.State(ctx, t.id)
	if err != nil {
		return err
	}
	if st.Unverifiable != "" {
		return errUnverifiable{st.Unverifiable}
	}
	ts := *st.Schema
	ts.ID = t.id
	t.ts = &ts
	my, err := v.src.Schema(ctx, t.id)
	if err != nil {
		return err
	}
	if !my.Same(t.ts) {
		return errUnverifiable{"MySQL's schema of the table differs from the one its Iceberg table mirrors: a schema change cdcsync has not applied yet (or one it stopped at); run verify again once cdcsync has caught up"}
	}
	if err := v.checksums(ctx, t); err != nil {
		return err
	}
	pending, err := v.rows(ctx, t)
	if err != nil {
		return err
	}
	t.rep.KeysRechecked = len(pending)
	return v.settle(ctx, t, pending)
}

// checksums reads every chunk's checksum from MySQL, then the lake's as of
// a snapshot that covers the last read, and marks the chunks that differ.
func (v *Verifier) checksums(ctx context.Context, t *table) error {
	ordered := v.src.Ordered(t.ts)
	start := time.Now()
	after := ""
	for {
		c := &chunk{after: after, last: true}
		var err error
		if ordered {
			began := time.Now()
			c.hi, c.last, err = v.src.NextBound(ctx, t.ts, after, v.opts.ChunkRows)
			t.rep.mysqlTime += time.Since(began)
			if err != nil {
				return err
			}
			if !c.last {
				if c.hiKey, err = v.src.BoundKey(t.ts, c.hi); err != nil {
					return err
				}
			}
		}
		began := time.Now()
		c.mysql, c.read, err = v.src.Checksum(ctx, t.ts, c.after, c.hi, c.last)
		t.rep.mysqlTime += time.Since(began)
		if err != nil {
			return err
		}
		t.chunks = append(t.chunks, c)
		t.rep.Rows += c.mysql.Rows
		t.rep.Chunks++
		t.rep.mysqlRead(c.read.Pos)
		v.progress(Progress{Table: t.id, Phase: "checksums", Chunks: len(t.chunks), Rows: t.rep.Rows, Start: start})
		if err := v.pace(ctx, c.mysql.Rows); err != nil {
			return err
		}
		if c.last {
			break
		}
		after = c.hi
	}
	at, err := v.cover(ctx, t, v.latest(t.chunks, func(c *chunk) bool { return true }))
	if err != nil {
		return err
	}
	began := time.Now()
	defer func() { t.rep.lakeTime += time.Since(began) }()
	err = v.lake.Scan(ctx, t.id, t.ts, at.snapshot, func(row cdcsync.Row) error {
		c, err := t.chunkOf(row)
		if err != nil {
			return err
		}
		c.lake.Add(RowHash(t.ts, row))
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range t.chunks {
		if c.mysql != c.lake {
			c.differs = true
			t.rep.ChunksDiffering++
		}
	}
	return nil
}

// latest returns the latest read position of the chunks keep selects.
func (v *Verifier) latest(chunks []*chunk, keep func(*chunk) bool) cdcsync.Position {
	var pos cdcsync.Position
	for _, c := range chunks {
		if !keep(c) {
			continue
		}
		if ok, err := v.opts.Order.Includes(pos, c.read.Pos); err != nil || !ok {
			pos = c.read.Pos
		}
	}
	return pos
}

// keyOf returns the primary-key values of row.
func keyOf(ts *cdcsync.TableSchema, row cdcsync.Row) []any {
	key := make([]any, len(ts.PrimaryKey))
	for i, k := range ts.PrimaryKey {
		key[i] = row[k]
	}
	return key
}

// encodeKey encodes key values for maps (cdcsync.AppendTuple).
func encodeKey(key []any) (string, error) {
	b, ok := cdcsync.AppendTuple(nil, key...)
	if !ok {
		return "", fmt.Errorf("a primary key holds NULL or a value that is not canonical: %v", key)
	}
	return string(b), nil
}

// chunkOf returns the chunk a lake row belongs to.
func (t *table) chunkOf(row cdcsync.Row) (*chunk, error) {
	if len(t.chunks) == 1 {
		return t.chunks[0], nil
	}
	key := keyOf(t.ts, row)
	var err error
	i := sort.Search(len(t.chunks)-1, func(i int) bool {
		c, e := CompareKeys(key, t.chunks[i].hiKey)
		if e != nil {
			err = e
		}
		return c <= 0
	})
	return t.chunks[i], err
}

// CompareKeys orders two keys of a table whose key Source.Ordered
// accepts, as MySQL orders them.
func CompareKeys(a, b []any) (int, error) {
	if len(a) != len(b) {
		return 0, fmt.Errorf("keys of %d and %d values", len(a), len(b))
	}
	for i := range a {
		var c int
		switch x := a[i].(type) {
		case int32:
			y, ok := b[i].(int32)
			if !ok {
				return 0, fmt.Errorf("cannot order %T and %T", a[i], b[i])
			}
			c = cmp.Compare(x, y)
		case int64:
			y, ok := b[i].(int64)
			if !ok {
				return 0, fmt.Errorf("cannot order %T and %T", a[i], b[i])
			}
			c = cmp.Compare(x, y)
		case string: // a canonical decimal
			y, ok := b[i].(string)
			if !ok {
				return 0, fmt.Errorf("cannot order %T and %T", a[i], b[i])
			}
			c = compareDecimals(x, y)
		case []byte:
			y, ok := b[i].([]byte)
			if !ok {
				return 0, fmt.Errorf("cannot order %T and %T", a[i], b[i])
			}
			c = bytes.Compare(x, y)
		default:
			return 0, fmt.Errorf("cannot order a key value of type %T", a[i])
		}
		if c != 0 {
			return c, nil
		}
	}
	return 0, nil
}

// compareDecimals orders two canonical decimals of one column (the same
// scale: [-]digits[.digits], no leading zeros, no negative zero).
func compareDecimals(x, y string) int {
	nx, ny := strings.HasPrefix(x, "-"), strings.HasPrefix(y, "-")
	if nx != ny {
		if nx {
			return -1
		}
		return 1
	}
	ax, ay := strings.TrimPrefix(x, "-"), strings.TrimPrefix(y, "-")
	ix, _, _ := strings.Cut(ax, ".")
	iy, _, _ := strings.Cut(ay, ".")
	c := cmp.Compare(len(ix), len(iy))
	if c == 0 {
		c = strings.Compare(ax, ay)
	}
	if nx {
		c = -c
	}
	return c
}

// rows compares the keys and row hashes of the chunks whose checksums
// differed, and returns the keys that differ (by encoding).
func (v *Verifier) rows(ctx context.Context, t *table) (map[string][]any, error) {
	if t.rep.ChunksDiffering == 0 {
		return nil, nil
	}
	type mine struct {
		key  []any
		hash uint64
		seen bool
	}
	my := map[string]*mine{}
	start := time.Now()
	n := 0
	var rows int64
	for _, c := range t.chunks {
		if !c.differs {
			continue
		}
		began := time.Now()
		read, err := v.src.Hashes(ctx, t.ts, c.after, c.hi, c.last, func(key []any, hash uint64) error {
			enc, err := encodeKey(key)
			if err != nil {
				return err
			}
			my[enc] = &mine{key: key, hash: hash}
			rows++
			return nil
		})
		t.rep.mysqlTime += time.Since(began)
		if err != nil {
			return nil, err
		}
		c.read = read
		t.rep.mysqlRead(read.Pos)
		n++
		v.progress(Progress{Table: t.id, Phase: "rows", Chunks: n, Rows: rows, Start: start})
		if err := v.pace(ctx, rows); err != nil {
			return nil, err
		}
	}
	at, err := v.cover(ctx, t, v.latest(t.chunks, func(c *chunk) bool { return c.differs }))
	if err != nil {
		return nil, err
	}
	pending := map[string][]any{}
	began := time.Now()
	defer func() { t.rep.lakeTime += time.Since(began) }()
	err = v.lake.Scan(ctx, t.id, t.ts, at.snapshot, func(row cdcsync.Row) error {
		c, err := t.chunkOf(row)
		if err != nil || !c.differs {
			return err
		}
		key := keyOf(t.ts, row)
		enc, err := encodeKey(key)
		if err != nil {
			return err
		}
		m := my[enc]
		if m == nil {
			pending[enc] = key // only in the lake
			return nil
		}
		m.seen = true
		if m.hash != RowHash(t.ts, row) {
			pending[enc] = key
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for enc, m := range my {
		if !m.seen {
			pending[enc] = m.key // only in MySQL
		}
	}
	return pending, nil
}

// settle compares the pending keys row by row, reading them again until
// each is decided: equal, or different in a comparison that no change in
// flight can explain. A read takes the keys' rows from MySQL; once the
// lake covers it, they are compared with the lake's rows as of the first
// commit that covers the read. A key that commit (or, for a read whose
// exact position is unknown, any commit after the read began) changed is
// undecided: the lake may show it as of a later point than MySQL did.
// While a read waits for the lake, the undecided keys are read again every
// readEvery (at most maxReads reads wait at once), so a key that changes
// often gets a chance with every commit instead of one per wait. Keys still
// undecided after Options.Settle are reported as unsettled.
func (v *Verifier) settle(ctx context.Context, t *table, pending map[string][]any) error {
	if len(pending) == 0 {
		return nil
	}
	deadline := time.Now().Add(v.opts.Settle)
	// A difference that must repeat (see below): the rows, and the
	// position of the commit it was first compared with.
	type seen struct {
		my, lake string
		after    cdcsync.Position
	}
	prev := map[string]seen{}
	type mysqlRead struct {
		read  Read
		rows  map[string]cdcsync.Row
		asked []string // the keys read, by encoding, sorted
		at    time.Time
	}
	var queue []*mysqlRead
	lake := map[string]cdcsync.Row{} // the pending keys' rows as of snapshot scanned
	scanned := int64(-2)
	start := time.Now()
	reads := 0
	for len(pending) > 0 {
		if len(queue) < maxReads && (len(queue) == 0 || time.Since(queue[len(queue)-1].at) >= readEvery) {
			r := &mysqlRead{rows: map[string]cdcsync.Row{}, at: time.Now()}
			r.asked = slices.Sorted(func(yield func(string) bool) {
				for enc := range pending {
					if !yield(enc) {
						return
					}
				}
			})
			keys := make([][]any, len(r.asked))
			for i, enc := range r.asked {
				keys[i] = pending[enc]
			}
			began := time.Now()
			rows, read, err := v.src.Rows(ctx, t.ts, keys)
			t.rep.mysqlTime += time.Since(began)
			if err != nil {
				return err
			}
			r.read = read
			for _, row := range rows {
				enc, err := encodeKey(keyOf(t.ts, row))
				if err != nil {
					return err
				}
				r.rows[enc] = row
			}
			queue = append(queue, r)
			reads++
			t.rep.mysqlRead(read.Pos)
			v.progress(Progress{Table: t.id, Phase: "keys", Chunks: reads, Rows: int64(len(pending)), Start: start})
		}
		r := queue[0]
		st, err := v.state(ctx, t)
		if err != nil {
			return err
		}
		a, ok, err := v.covering(st, r.read.Pos)
		if err != nil {
			return err
		}
		if !ok {
			if time.Since(r.at) > v.opts.Wait {
				return v.notCovered(t, r.read.Pos, st)
			}
			if err := sleep(ctx, v.opts.Poll); err != nil {
				return err
			}
			continue
		}
		queue = queue[1:]
		t.rep.lakeAt(a)
		busy, all, err := v.touchedSince(ctx, t, a, r.read.Low)
		if err != nil {
			return err
		}
		// Reads compared with the same snapshot share its scan (the
		// pending keys only ever shrink).
		if a.snapshot != scanned {
			clear(lake)
			began := time.Now()
			err = v.lake.Scan(ctx, t.id, t.ts, a.snapshot, func(row cdcsync.Row) error {
				enc, err := encodeKey(keyOf(t.ts, row))
				if err != nil {
					return err
				}
				if _, ok := pending[enc]; ok {
					lake[enc] = row
				}
				return nil
			})
			t.rep.lakeTime += time.Since(began)
			if err != nil {
				return err
			}
			scanned = a.snapshot
		}
		for _, enc := range r.asked {
			if _, ok := pending[enc]; !ok || all || busy[enc] {
				continue // decided by an earlier read, or in flight
			}
			m, l := r.rows[enc], lake[enc]
			if rowsEqual(m, l) {
				delete(pending, enc)
				continue
			}
			// A row MySQL shows and the lake lacks proves nothing when
			// the read fell inside the commit it is compared with: a key
			// inserted and deleted again within one epoch leaves no trace
			// in a position or dv commit (nothing to write or delete), so
			// Touched cannot name it. Such a difference, and any from a
			// read that is not exact, counts only when a read that began
			// after that commit's position shows it again.
			if !r.read.Exact || (m != nil && l == nil && !v.samePos(a.pos, r.read.Pos)) {
				s := seen{my: rowText(t.ts, m), lake: rowText(t.ts, l)}
				p, ok := prev[enc]
				if !ok || p.my != s.my || p.lake != s.lake {
					s.after = a.pos
					prev[enc] = s
					continue
				}
				if after, err := v.opts.Order.Includes(r.read.Low, p.after); err != nil || !after {
					continue
				}
			}
			t.rep.difference(t.ts, pending[enc], m, l, r.read.Pos, a, v.opts.Examples)
			delete(pending, enc)
		}
		if len(pending) > 0 && time.Now().After(deadline) {
			t.rep.Unsettled = len(pending)
			for _, enc := range slices.Sorted(func(yield func(string) bool) {
				for enc := range pending {
					if !yield(enc) {
						return
					}
				}
			}) {
				t.rep.unsettled = append(t.rep.unsettled, pending[enc])
			}
			break
		}
	}
	return nil
}

// While keys settle, they are read again every readEvery, with at most
// maxReads reads waiting for the lake at once.
const (
	readEvery = time.Second
	maxReads  = 8
)

// at is the lake snapshot a read is compared with.
type at struct {
	snapshot int64
	pos      cdcsync.Position // the position it holds everything up to
	// epochs are the pipeline's commits up to and including snapshot.
	epochs []Epoch
}

// state reads the table's state from the lake and checks that it can
// still be compared with the schema verify began with.
func (v *Verifier) state(ctx context.Context, t *table) (*TableState, error) {
	st, err := v.lake.State(ctx, t.id)
	if err != nil {
		return nil, err
	}
	if st.Unverifiable != "" {
		return nil, errUnverifiable{st.Unverifiable + " (since verify began)"}
	}
	if !st.Schema.Same(t.ts) {
		return nil, errUnverifiable{"its schema changed while verify ran; run verify again"}
	}
	return st, nil
}

// covering returns the first snapshot of st that covers pos: the first
// epoch commit at or after pos, or, when the table has not changed since
// its last commit and the checkpoint covers pos, the current snapshot. ok
// is false while the lake does not cover pos.
func (v *Verifier) covering(st *TableState, pos cdcsync.Position) (a at, ok bool, err error) {
	ok, err = v.opts.Order.Includes(st.Effective, pos)
	if err != nil {
		return a, false, fmt.Errorf("compare the lake's position %s with MySQL's %s: %w", st.Effective, pos, err)
	}
	if !ok {
		return a, false, nil
	}
	for i, e := range st.Epochs {
		if in, err := v.opts.Order.Includes(e.Pos, pos); err != nil || !in {
			continue
		}
		// Commits at the same position (the chunks of a copy, a repair)
		// follow one another with no transaction between: the table is
		// at e.Pos after the last of them.
		for i+1 < len(st.Epochs) && v.samePos(st.Epochs[i+1].Pos, e.Pos) {
			i++
		}
		return at{snapshot: st.Epochs[i].Snapshot, pos: e.Pos, epochs: st.Epochs[:i+1]}, true, nil
	}
	return at{snapshot: st.Head, pos: st.Effective, epochs: st.Epochs}, true, nil
}

// samePos reports whether two positions name the same point.
func (v *Verifier) samePos(a, b cdcsync.Position) bool {
	ab, err1 := v.opts.Order.Includes(a, b)
	ba, err2 := v.opts.Order.Includes(b, a)
	return err1 == nil && err2 == nil && ab && ba
}

// cover waits until the lake covers pos and returns the first snapshot
// that does (covering).
func (v *Verifier) cover(ctx context.Context, t *table, pos cdcsync.Position) (at, error) {
	deadline := time.Now().Add(v.opts.Wait)
	for {
		st, err := v.state(ctx, t)
		if err != nil {
			return at{}, err
		}
		a, ok, err := v.covering(st, pos)
		if err != nil {
			return at{}, err
		}
		if ok {
			t.rep.lakeAt(a)
			return a, nil
		}
		if time.Now().After(deadline) {
			return at{}, v.notCovered(t, pos, st)
		}
		if err := sleep(ctx, v.opts.Poll); err != nil {
			return at{}, err
		}
	}
}

func (v *Verifier) notCovered(t *table, pos cdcsync.Position, st *TableState) error {
	return fmt.Errorf("the lake has not committed %s up to MySQL's position %s within %s (it holds up to %s): is `cdcsync run` streaming this pipeline? (--wait sets how long verify waits)", t.id, pos, v.opts.Wait, st.Effective)
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// touchedSince returns the keys the commits of a after low changed (all:
// any key may have).
func (v *Verifier) touchedSince(ctx context.Context, t *table, a at, low cdcsync.Position) (map[string]bool, bool, error) {
	out := map[string]bool{}
	for _, e := range a.epochs {
		if in, err := v.opts.Order.Includes(low, e.Pos); err == nil && in {
			continue // at or before the read: the read saw it
		}
		ts, ok := t.touched[e.Snapshot]
		if !ok {
			keys, all, err := v.lake.Touched(ctx, t.id, t.ts, e.Snapshot)
			if err != nil {
				return nil, false, err
			}
			ts = touchedSet{keys: keys, all: all}
			t.touched[e.Snapshot] = ts
		}
		if ts.all {
			return nil, true, nil
		}
		for k := range ts.keys {
			out[k] = true
		}
	}
	return out, false, nil
}

// Recheck compares the given keys of a table again, row by row (after a
// repair): the report counts those that still differ.
func (v *Verifier) Recheck(ctx context.Context, id cdcsync.TableID, keys [][]any) *TableReport {
	start := time.Now()
	rep := &TableReport{Table: id.String(), keys: map[string][]any{}}
	t := &table{id: id, rep: rep, touched: map[int64]touchedSet{}}
	err := func() error {
		st, err := v.lake.State(ctx, id)
		if err != nil {
			return err
		}
		if st.Unverifiable != "" {
			return errUnverifiable{st.Unverifiable}
		}
		ts := *st.Schema
		ts.ID = id
		t.ts = &ts
		pending := map[string][]any{}
		for _, k := range keys {
			enc, err := encodeKey(k)
			if err != nil {
				return err
			}
			pending[enc] = k
		}
		rep.KeysRechecked = len(pending)
		return v.settle(ctx, t, pending)
	}()
	rep.Elapsed = time.Since(start)
	rep.finish(err)
	return rep
}

// pace sleeps as long as RowsPerSecond asks after rows more rows were read.
func (v *Verifier) pace(ctx context.Context, rows int64) error {
	if v.opts.RowsPerSecond <= 0 {
		return nil
	}
	if v.paceStart.IsZero() {
		v.paceStart = time.Now()
	}
	v.paceRows += rows
	due := v.paceStart.Add(time.Duration(float64(v.paceRows) / float64(v.opts.RowsPerSecond) * float64(time.Second)))
	wait := time.Until(due)
	if wait <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}

func (v *Verifier) progress(p Progress) {
	if v.opts.Progress != nil {
		v.opts.Progress(p)
	}
}

// rowsEqual reports whether two canonical rows (nil: absent) are equal.
func rowsEqual(a, b cdcsync.Row) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if len(a) != len(b) {
		return false
	}
	var x, y []byte
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) {
			return false
		}
		if a[i] == nil {
			continue
		}
		var okx, oky bool
		x, okx = cdcsync.AppendValue(x[:0], a[i])
		y, oky = cdcsync.AppendValue(y[:0], b[i])
		if !okx || !oky || !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}

// rowText renders a row for reports; "absent" for no row.
func rowText(ts *cdcsync.TableSchema, r cdcsync.Row) string {
	if r == nil {
		return "absent"
	}
	parts := make([]string, len(ts.Columns))
	for i, c := range ts.Columns {
		var v any
		if i < len(r) {
			v = r[i]
		}
		s := cdcsync.Format(c.Kind, v)
		if len(s) > 64 {
			s = s[:64] + "..."
		}
		parts[i] = c.Name + "=" + s
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// keyText renders a key for reports: "id=5, region=eu".
func keyText(ts *cdcsync.TableSchema, key []any) string {
	parts := make([]string, len(ts.PrimaryKey))
	for i, k := range ts.PrimaryKey {
		s := cdcsync.Format(ts.Columns[k].Kind, key[i])
		if len(s) > 64 {
			s = s[:64] + "..."
		}
		parts[i] = ts.Columns[k].Name + "=" + s
	}
	return strings.Join(parts, ", ")
}

// isUnverifiable reports whether err says a table cannot be compared now.
func isUnverifiable(err error) (string, bool) {
	var u errUnverifiable
	if errors.As(err, &u) {
		return u.why, true
	}
	return "", false
}
