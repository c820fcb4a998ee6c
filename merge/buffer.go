// Package merge owns the epoch: it buffers whole transactions, collapses all
// changes of an epoch to one final state per primary key, seals the epoch at
// a transaction boundary by time, rows or bytes, and drives the exactly-once
// commit protocol (per-table commits, then the pipeline checkpoint).
package merge

import (
	"encoding/binary"
	"fmt"
	"math"
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
type tableBuffer struct {
	schema  *cdcsync.TableSchema
	entries map[string]*entry
	order   []string // keys in first-touch order, for deterministic output
	changes map[cdcsync.Op]int
}

func newTableBuffer(s *cdcsync.TableSchema) *tableBuffer {
	return &tableBuffer{schema: s, entries: map[string]*entry{}, changes: map[cdcsync.Op]int{}}
}

func (b *tableBuffer) touch(key string, first cdcsync.Row) *entry {
	e := b.entries[key]
	if e == nil {
		e = &entry{first: first}
		b.entries[key] = e
		b.order = append(b.order, key)
	}
	return e
}

// apply folds one change into the buffer.
func (b *tableBuffer) apply(c *cdcsync.Change) error {
	b.changes[c.Op]++
	switch c.Op {
	case cdcsync.OpInsert:
		k, err := b.key(c.After)
		if err != nil {
			return err
		}
		b.touch(k, c.After).final = c.After
	case cdcsync.OpDelete:
		k, err := b.key(c.Before)
		if err != nil {
			return err
		}
		b.touch(k, c.Before).final = nil
	case cdcsync.OpUpdate:
		kb, err := b.key(c.Before)
		if err != nil {
			return err
		}
		ka, err := b.key(c.After)
		if err != nil {
			return err
		}
		if kb == ka {
			b.touch(kb, c.Before).final = c.After
			return nil
		}
		// A primary-key change is a delete of the old key and an insert of
		// the new one.
		b.touch(kb, c.Before).final = nil
		b.touch(ka, c.After).final = c.After
	default:
		return fmt.Errorf("unknown change %d on %s", c.Op, b.schema.ID)
	}
	return nil
}

// output returns the equality-delete rows (one per touched key) and the
// final rows to insert.
func (b *tableBuffer) output() (deletes, rows []cdcsync.Row) {
	deletes = make([]cdcsync.Row, 0, len(b.order))
	for _, k := range b.order {
		e := b.entries[k]
		deletes = append(deletes, e.first)
		if e.final != nil {
			rows = append(rows, e.final)
		}
	}
	return deletes, rows
}

// key encodes the primary-key values of row so that distinct keys never
// collide: each value is tagged with its type and length-prefixed.
func (b *tableBuffer) key(row cdcsync.Row) (string, error) {
	if len(row) != len(b.schema.Columns) {
		return "", fmt.Errorf("row of %s has %d values but the table has %d columns", b.schema.ID, len(row), len(b.schema.Columns))
	}
	buf := make([]byte, 0, 16*len(b.schema.PrimaryKey))
	for _, i := range b.schema.PrimaryKey {
		switch v := row[i].(type) {
		case int32:
			buf = append(buf, 'i')
			buf = binary.BigEndian.AppendUint32(buf, uint32(v))
		case int64:
			buf = append(buf, 'l')
			buf = binary.BigEndian.AppendUint64(buf, uint64(v))
		case float32:
			buf = append(buf, 'f')
			buf = binary.BigEndian.AppendUint32(buf, math.Float32bits(v))
		case float64:
			buf = append(buf, 'd')
			buf = binary.BigEndian.AppendUint64(buf, math.Float64bits(v))
		case string:
			buf = append(buf, 's')
			buf = binary.AppendUvarint(buf, uint64(len(v)))
			buf = append(buf, v...)
		case []byte:
			buf = append(buf, 'b')
			buf = binary.AppendUvarint(buf, uint64(len(v)))
			buf = append(buf, v...)
		case nil:
			return "", fmt.Errorf("primary key column %s of %s is NULL", b.schema.Columns[i].Name, b.schema.ID)
		default:
			return "", fmt.Errorf("primary key column %s of %s has an unexpected value %v (%T)", b.schema.Columns[i].Name, b.schema.ID, v, v)
		}
	}
	return string(buf), nil
}

// Buffer is the open epoch: the collapsed changes of whole transactions.
type Buffer struct {
	tables  map[cdcsync.TableID]*tableBuffer
	schemas func(cdcsync.TableID) *cdcsync.TableSchema
	Rows    int // row changes applied
	Bytes   int // approximate bytes of the applied transactions
	Txns    int
	End     cdcsync.Position // position after the last transaction applied or passed
	First   time.Time        // MySQL commit time of the epoch's first transaction
}

// NewBuffer returns an empty epoch buffer; schemas resolves a table's schema.
func NewBuffer(schemas func(cdcsync.TableID) *cdcsync.TableSchema) *Buffer {
	return &Buffer{tables: map[cdcsync.TableID]*tableBuffer{}, schemas: schemas}
}

// Apply folds the changes of one transaction, except those of tables for
// which skip returns true (changes a table already committed).
func (b *Buffer) Apply(t *cdcsync.Txn, skip func(cdcsync.TableID) bool) error {
	for i := range t.Changes {
		c := &t.Changes[i]
		if skip != nil && skip(c.Table) {
			continue
		}
		tb := b.tables[c.Table]
		if tb == nil {
			s := b.schemas(c.Table)
			if s == nil {
				return fmt.Errorf("change to %s, which is not a selected table", c.Table)
			}
			tb = newTableBuffer(s)
			b.tables[c.Table] = tb
		}
		if err := tb.apply(c); err != nil {
			return err
		}
		b.Rows++
	}
	b.Bytes += t.Bytes
	if b.Txns == 0 {
		b.First = t.Time
	}
	b.Txns++
	b.End = t.Pos
	return nil
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
		return tb.changes
	}
	return nil
}
