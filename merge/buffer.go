// Package merge owns the epoch: it buffers whole transactions, collapses all
// changes of an epoch to one final state per primary key, seals the epoch at
// a transaction boundary by time, rows or bytes, and drives the exactly-once
// commit protocol (per-table commits, then the pipeline checkpoint).
package merge

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/cdcsync/cdcsync"
)

// entry is the collapsed state of one primary key within an epoch.
type entry struct {
	// first is the image the key had before the epoch, when the epoch's first
	// change to it was an update or delete; else the first inserted image.
	// The equality delete is written from it, so it lands in the partition
	// the committed row lives in.
	first cdcsync.Row
	// final is the image at the end of the epoch; nil when deleted.
	final cdcsync.Row
}

// tableBuffer collapses the changes of one table.
//
// Entries live in fixed-size chunks in first-touch order (the output
// order), indexed by primary key. A single-column integer key, the common case, is looked up
// in a map keyed by the integer itself; other keys by their encoding (see
// appendKey), built in a stack buffer so that a key already in the epoch
// costs no allocation. Profiles of the catch-up showed the earlier
// map[string]*entry (a key string, an entry and a map slot allocated per
// key, plus a string per lookup) as the buffer's main cost.
type tableBuffer struct {
	schema *cdcsync.TableSchema
	chunks [][]entry // entries in first-touch order (for deterministic output), entryChunk per chunk
	n      int       // entries
	ints   map[int64]int32
	ints32 map[int32]int32
	strs   map[string]int32
	counts [4]int             // changes by Op (OpInsert..OpDelete)
	others map[cdcsync.Op]int // changes with any other Op (an error follows)
	intKey bool               // the key is one column
	// delCols are the columns an equality delete needs (the key and the
	// partition source columns); nil keeps whole before images.
	delCols []int
	// The table's share of the buffer's Rows, Bytes and Held (a
	// transaction's bytes are shared out by its changes), for Split.
	rows, bytes, held int
}

func newTableBuffer(s *cdcsync.TableSchema, delCols []int) *tableBuffer {
	if len(delCols) >= len(s.Columns) {
		delCols = nil
	}
	return &tableBuffer{schema: s, intKey: len(s.PrimaryKey) == 1, delCols: delCols}
}

// trim returns what an equality delete needs of a before image: its
// delete columns, with strings and bytes copied, since a decoded row's
// values share one buffer that would otherwise stay alive. An epoch of
// updates holds about a quarter less memory (TestBufferTrimsBeforeImages).
func (b *tableBuffer) trim(row cdcsync.Row) cdcsync.Row {
	if b.delCols == nil {
		return row
	}
	out := make(cdcsync.Row, len(row))
	for _, c := range b.delCols {
		switch v := row[c].(type) {
		case string:
			out[c] = strings.Clone(v)
		case []byte:
			out[c] = bytes.Clone(v)
		default:
			out[c] = v
		}
	}
	return out
}

// touch returns the entry of row's key, creating it with first when the
// key is new to the epoch (trimmed when before says first is a before
// image that no final image shares).
func (b *tableBuffer) touch(row cdcsync.Row, first cdcsync.Row, before bool) (*entry, error) {
	if len(row) != len(b.schema.Columns) {
		return nil, fmt.Errorf("row of %s has %d values but the table has %d columns", b.schema.ID, len(row), len(b.schema.Columns))
	}
	if b.intKey {
		switch v := row[b.schema.PrimaryKey[0]].(type) {
		case int64:
			if b.ints == nil {
				b.ints = map[int64]int32{}
			}
			if i, ok := b.ints[v]; ok {
				return b.at(i), nil
			}
			b.ints[v] = int32(b.n)
			return b.add(first, before), nil
		case int32:
			if b.ints32 == nil {
				b.ints32 = map[int32]int32{}
			}
			if i, ok := b.ints32[v]; ok {
				return b.at(i), nil
			}
			b.ints32[v] = int32(b.n)
			return b.add(first, before), nil
		}
	}
	var arr [64]byte
	k, err := b.appendKey(arr[:0], row)
	if err != nil {
		return nil, err
	}
	if i, ok := b.strs[string(k)]; ok { // no allocation for the lookup
		return b.at(i), nil
	}
	if b.strs == nil {
		b.strs = map[string]int32{}
	}
	b.strs[string(k)] = int32(b.n)
	return b.add(first, before), nil
}

// entryChunk is the number of entries per chunk. Fixed-size chunks, unlike
// one growing slice, never copy entries and allocate only what is used
// (append grows large slices by 1.25x, which allocated about five times the
// final size in the 1M-change benchmark).
const entryChunk = 1024

func (b *tableBuffer) at(i int32) *entry {
	return &b.chunks[i/entryChunk][i%entryChunk]
}

func (b *tableBuffer) add(first cdcsync.Row, before bool) *entry {
	if before {
		first = b.trim(first)
	}
	if b.n%entryChunk == 0 {
		b.chunks = append(b.chunks, make([]entry, 0, entryChunk))
	}
	c := &b.chunks[len(b.chunks)-1]
	*c = append(*c, entry{first: first})
	b.n++
	return &(*c)[len(*c)-1]
}

// apply folds one change into the buffer.
func (b *tableBuffer) apply(c *cdcsync.Change) error {
	if c.Op >= cdcsync.OpInsert && c.Op <= cdcsync.OpDelete {
		b.counts[c.Op]++
	} else {
		if b.others == nil {
			b.others = map[cdcsync.Op]int{}
		}
		b.others[c.Op]++
	}
	switch c.Op {
	case cdcsync.OpInsert:
		e, err := b.touch(c.After, c.After, false)
		if err != nil {
			return err
		}
		e.final = c.After
	case cdcsync.OpDelete:
		e, err := b.touch(c.Before, c.Before, true)
		if err != nil {
			return err
		}
		e.final = nil
	case cdcsync.OpUpdate:
		same, err := b.sameKey(c.Before, c.After)
		if err != nil {
			return err
		}
		if same {
			e, err := b.touch(c.Before, c.Before, true)
			if err != nil {
				return err
			}
			e.final = c.After
			return nil
		}
		// A primary-key change is a delete of the old key and an insert of
		// the new one.
		e, err := b.touch(c.Before, c.Before, true)
		if err != nil {
			return err
		}
		e.final = nil
		if e, err = b.touch(c.After, c.After, false); err != nil {
			return err
		}
		e.final = c.After
	default:
		return fmt.Errorf("unknown change %d on %s", c.Op, b.schema.ID)
	}
	return nil
}

// load adds a row of the initial copy. needDelete says whether the key may
// already be in the table (the stream wrote it since the copy began); only
// then does the row need an equality delete. A key the epoch already holds
// keeps its first image.
func (b *tableBuffer) load(row cdcsync.Row, needDelete bool) error {
	var first cdcsync.Row
	if needDelete {
		first = row
	}
	e, err := b.touch(row, first, false)
	if err != nil {
		return err
	}
	e.final = row
	return nil
}

// sameKey reports whether two rows have the same primary key (the same
// encoding), checking both rows as key would.
func (b *tableBuffer) sameKey(x, y cdcsync.Row) (bool, error) {
	var ax, ay [64]byte
	kx, err := b.appendKey(ax[:0], x)
	if err != nil {
		return false, err
	}
	ky, err := b.appendKey(ay[:0], y)
	if err != nil {
		return false, err
	}
	return string(kx) == string(ky), nil
}

// output returns the equality-delete rows (one per touched key) and the
// final rows to insert.
func (b *tableBuffer) output() (deletes, rows []cdcsync.Row) {
	live, dead := 0, 0
	for _, c := range b.chunks {
		for i := range c {
			if c[i].final != nil {
				live++
			}
			if c[i].first != nil {
				dead++
			}
		}
	}
	if dead > 0 {
		deletes = make([]cdcsync.Row, 0, dead)
	}
	if live > 0 {
		rows = make([]cdcsync.Row, 0, live)
	}
	for _, c := range b.chunks {
		for i := range c {
			e := &c[i]
			if e.first != nil { // nil: a copied row whose key the table cannot hold yet
				deletes = append(deletes, e.first)
			}
			if e.final != nil {
				rows = append(rows, e.final)
			}
		}
	}
	return deletes, rows
}

// each calls fn with every key of the epoch: a row holding its key (the
// final image, or else the first) and its final image (nil: deleted). A
// copied row deleted again in the epoch, whose key the table never held,
// is left out.
func (b *tableBuffer) each(fn func(key, final cdcsync.Row)) {
	for _, c := range b.chunks {
		for i := range c {
			e := &c[i]
			switch {
			case e.final != nil:
				fn(e.final, e.final)
			case e.first != nil:
				fn(e.first, nil)
			}
		}
	}
}

// release forgets the entries (they were spilled), keeping the counts
// of changes received.
func (b *tableBuffer) release() {
	b.chunks, b.n, b.held = nil, 0, 0
	b.ints, b.ints32, b.strs = nil, nil, nil
}

// changeCounts returns how many changes of each operation the table
// received (operations it never received are absent).
func (b *tableBuffer) changeCounts() map[cdcsync.Op]int {
	m := map[cdcsync.Op]int{}
	for op, n := range b.counts {
		if n > 0 {
			m[cdcsync.Op(op)] = n
		}
	}
	for op, n := range b.others {
		m[op] = n
	}
	return m
}

// key encodes the primary-key values of row so that distinct keys never
// collide: each value is tagged with its type and length-prefixed.
func (b *tableBuffer) key(row cdcsync.Row) (string, error) {
	k, err := b.appendKey(make([]byte, 0, 16*len(b.schema.PrimaryKey)), row)
	return string(k), err
}

// appendKey appends the encoding of row's primary key (see key) to buf.
func (b *tableBuffer) appendKey(buf []byte, row cdcsync.Row) ([]byte, error) {
	return b.schema.AppendKey(buf, row)
}

// Buffer is the open epoch: the collapsed changes of whole transactions.
type Buffer struct {
	tables        map[cdcsync.TableID]*tableBuffer
	schemas       func(cdcsync.TableID) *cdcsync.TableSchema
	deleteColumns func(cdcsync.TableID) []int
	Rows          int // row changes applied
	Bytes         int // approximate bytes of the applied transactions
	// Held is the part of Bytes still in memory: Spill writes the rest out.
	Held int
	// spill names what Spill writes of the tables it writes first (0:
	// nothing yet), and spilled the spill of each table written; a table
	// carried over from a buffer before (Split) keeps the spill it had.
	spill   int64
	spilled map[cdcsync.TableID]int64
	// from holds, for tables whose changes were carried over from an
	// earlier epoch (Split), the first epoch whose transactions they hold.
	from   map[cdcsync.TableID]int64
	Txns   int
	Loaded int              // rows of the initial copy loaded (see Load)
	End    cdcsync.Position // position after the last transaction applied or passed
	First  time.Time        // MySQL commit time of the epoch's first transaction
	Last   time.Time        // MySQL commit time of the epoch's last transaction
}

// NewBuffer returns an empty epoch buffer; schemas resolves a table's
// schema, deleteColumns (may be nil) the columns its equality deletes need
// (see DeleteColumner).
func NewBuffer(schemas func(cdcsync.TableID) *cdcsync.TableSchema, deleteColumns func(cdcsync.TableID) []int) *Buffer {
	return &Buffer{tables: map[cdcsync.TableID]*tableBuffer{}, schemas: schemas, deleteColumns: deleteColumns}
}

// Apply folds the changes of one transaction, except those of tables for
// which skip returns true (changes a table already committed).
func (b *Buffer) Apply(t *cdcsync.Txn, skip func(cdcsync.TableID) bool) error {
	share := 0
	if len(t.Changes) > 0 {
		share = t.Bytes / len(t.Changes)
	}
	for i := range t.Changes {
		c := &t.Changes[i]
		if skip != nil && skip(c.Table) {
			continue
		}
		tb, err := b.table(c.Table)
		if err != nil {
			return err
		}
		if err := tb.apply(c); err != nil {
			return err
		}
		tb.rows++
		tb.bytes += share
		tb.held += share
		b.Rows++
	}
	b.Bytes += t.Bytes
	b.Held += t.Bytes
	if t.More {
		return nil // a fragment: the transaction is counted with its last one
	}
	if b.First.IsZero() {
		b.First = t.Time // a buffer carried over (Split) keeps its first
	}
	b.Last = t.Time
	b.Txns++
	b.End = t.Pos
	return nil
}

// Spill hands the changes the buffer holds to write, table by table, as
// final rows and delete rows (as Output), with the spill that holds the
// table's share, then forgets them: the epoch's commit then carries what
// write wrote under SpillID. id names the epoch's spill for the tables
// that have none yet; it must be unique among the epochs of the process
// and the same on every call for one buffer.
func (b *Buffer) Spill(id int64, write func(table cdcsync.TableID, spill int64, deletes, rows []cdcsync.Row) error) error {
	if b.spill != 0 && b.spill != id {
		return fmt.Errorf("epoch spilled as %d and then as %d; this is a bug", b.spill, id)
	}
	b.spill = id
	for tid, tb := range b.tables {
		if tb.n == 0 {
			continue
		}
		deletes, rows := tb.output()
		if b.spilled == nil {
			b.spilled = map[cdcsync.TableID]int64{}
		}
		// Marked before the write: a write that fails half way leaves
		// files that Abandon must remove.
		sid := b.spilled[tid]
		if sid == 0 {
			sid = id
			b.spilled[tid] = id
		}
		if err := write(tid, sid, deletes, rows); err != nil {
			return err
		}
		tb.release()
	}
	b.Held = 0
	return nil
}

// SpillID returns the spill that holds part of table's share of the
// epoch, 0 when none does.
func (b *Buffer) SpillID(table cdcsync.TableID) int64 {
	return b.spilled[table]
}

// Split moves the tables for which move returns true, with what they
// spilled, into a new buffer that goes on collecting the epoch after this
// one: this buffer is sealed without them while they still commit an
// epoch before (a table's epochs commit one at a time, in order).
// carriedFrom is the epoch this buffer commits as: the moved tables hold
// its transactions from then on, unless they held older ones already.
func (b *Buffer) Split(move func(cdcsync.TableID) bool, carriedFrom int64) *Buffer {
	nb := NewBuffer(b.schemas, b.deleteColumns)
	nb.First, nb.Last, nb.End = b.First, b.Last, b.End
	for id, tb := range b.tables {
		if !move(id) {
			continue
		}
		nb.tables[id] = tb
		delete(b.tables, id)
		nb.Rows, b.Rows = nb.Rows+tb.rows, b.Rows-tb.rows
		nb.Bytes, b.Bytes = nb.Bytes+tb.bytes, max(b.Bytes-tb.bytes, 0)
		nb.Held, b.Held = nb.Held+tb.held, max(b.Held-tb.held, 0)
		if sid := b.spilled[id]; sid != 0 {
			if nb.spilled == nil {
				nb.spilled = map[cdcsync.TableID]int64{}
			}
			nb.spilled[id] = sid
			delete(b.spilled, id)
		}
		nb.Late(id, carriedFrom)
		if f := b.from[id]; f != 0 {
			nb.Late(id, f)
			delete(b.from, id)
		}
	}
	return nb
}

// Late records that the table's share of the buffer holds transactions
// of epoch from and later (see From), unless it holds older ones already.
func (b *Buffer) Late(table cdcsync.TableID, from int64) {
	if b.from == nil {
		b.from = map[cdcsync.TableID]int64{}
	}
	if f := b.from[table]; f == 0 || from < f {
		b.from[table] = from
	}
}

// From returns the first epoch whose transactions the table's share of
// the buffer holds when they belong to an earlier epoch (Split, Late); 0
// otherwise.
func (b *Buffer) From(table cdcsync.TableID) int64 {
	return b.from[table]
}

// Carries reports whether the buffer holds changes of an earlier epoch
// (Split, Late).
func (b *Buffer) Carries() bool { return len(b.from) > 0 }

// Spilled returns the tables Spill wrote part of.
func (b *Buffer) Spilled() []cdcsync.TableID {
	out := make([]cdcsync.TableID, 0, len(b.spilled))
	for id := range b.spilled {
		out = append(out, id)
	}
	return out
}

// Load adds rows of a table's initial copy at position pos, the position
// of the last transaction read. needDelete[i] says whether rows[i] needs an
// equality delete (see tableBuffer.load).
func (b *Buffer) Load(id cdcsync.TableID, rows []cdcsync.Row, bytes int, pos cdcsync.Position, needDelete []bool) error {
	tb, err := b.table(id)
	if err != nil {
		return err
	}
	for i, r := range rows {
		if err := tb.load(r, needDelete[i]); err != nil {
			return err
		}
	}
	b.Rows += len(rows)
	b.Loaded += len(rows)
	b.Bytes += bytes
	b.Held += bytes
	tb.rows += len(rows)
	tb.bytes += bytes
	tb.held += bytes
	b.End = pos
	return nil
}

// Release lets go of a table's rows once its commit is done; its change
// counts stay, for the epoch's metrics.
func (b *Buffer) Release(id cdcsync.TableID) {
	if tb := b.tables[id]; tb != nil {
		tb.release()
	}
}

// Drop forgets a table's changes: it stopped after they were folded.
func (b *Buffer) Drop(id cdcsync.TableID) {
	delete(b.tables, id)
	delete(b.from, id)
}

// Empty reports whether the epoch holds nothing to commit.
func (b *Buffer) Empty() bool { return b.Txns == 0 && len(b.tables) == 0 }

func (b *Buffer) table(id cdcsync.TableID) (*tableBuffer, error) {
	tb := b.tables[id]
	if tb == nil {
		s := b.schemas(id)
		if s == nil {
			return nil, fmt.Errorf("change to %s, which is not a selected table", id)
		}
		var del []int
		if b.deleteColumns != nil {
			del = b.deleteColumns(id)
		}
		tb = newTableBuffer(s, del)
		b.tables[id] = tb
	}
	return tb, nil
}

// Tables returns the tables with changes in the epoch.
func (b *Buffer) Tables() []cdcsync.TableID {
	out := make([]cdcsync.TableID, 0, len(b.tables))
	for id := range b.tables {
		out = append(out, id)
	}
	return out
}

// Output returns one table's equality-delete rows and final rows.
func (b *Buffer) Output(id cdcsync.TableID) (deletes, rows []cdcsync.Row) {
	tb := b.tables[id]
	if tb == nil {
		return nil, nil
	}
	return tb.output()
}

// Changes returns how many changes of each operation the table received.
func (b *Buffer) Changes(id cdcsync.TableID) map[cdcsync.Op]int {
	if tb := b.tables[id]; tb != nil {
		return tb.changeCounts()
	}
	return nil
}
