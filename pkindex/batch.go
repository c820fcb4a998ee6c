package pkindex

import (
	"errors"
	"fmt"
	"maps"

	"github.com/cockroachdb/pebble/v2"
)

// Batch collects changes of one table; Commit writes them with the State
// they bring the table to, atomically and durably. A batch is used once:
// after Commit or Close, its other methods panic (Close is a no-op).
//
// One batch per table at a time: a batch made while another batch of the
// table is open refuses to commit. Errors of Put, AddFile and SetFileLive
// (an unknown file id, a negative position) are returned by Commit, which
// then writes nothing.
type Batch struct {
	t        *Table
	pb       *pebble.Batch // nil when the batch was refused
	err      error         // the first error; Commit returns it
	n        int
	nextFile uint64          // the id the next AddFile assigns
	files    map[uint32]File // files added or changed by this batch
	kbuf     []byte
	vbuf     []byte
	done     bool
}

// NewBatch starts a batch of the table.
func (t *Table) NewBatch() *Batch {
	b := &Batch{t: t}
	if err := t.usable(); err != nil {
		b.err = err
		return b
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.batchOpen {
		b.err = fmt.Errorf("pkindex: a batch of table %s is already open: commit or close it before starting another (one batch per table at a time)", t.uuid)
		return b
	}
	t.batchOpen = true
	b.pb = t.db.pdb.NewBatch()
	b.nextFile = t.nextFile
	b.kbuf = append(make([]byte, 0, len(t.keysFrom)+64), t.keysFrom...)
	return b
}

func (b *Batch) check(op string) bool {
	if b.done {
		panic("pkindex: Batch." + op + " after Commit or Close")
	}
	return b.err == nil
}

func (b *Batch) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// AddFile adds a file to the table's file table and returns its id: the
// next id of the table (ids start at 1 and are never reused, even after
// Reset; an id assigned by a batch that is not committed is assigned
// again).
func (b *Batch) AddFile(f File) uint32 {
	if !b.check("AddFile") {
		return 0
	}
	if b.nextFile > 1<<32-1 {
		b.fail(fmt.Errorf("pkindex: table %s has used all 2^32-1 file ids: Reset it is not enough, Drop it and rebuild", b.t.uuid))
		return 0
	}
	id := uint32(b.nextFile)
	b.nextFile++
	if b.files == nil {
		b.files = map[uint32]File{}
	}
	f.Partition = append([]byte(nil), f.Partition...)
	b.files[id] = f
	b.set(fileKey(b.t.prefix, id), encodeFile(f))
	return id
}

// SetFileLive marks the file live or not (a file that left the table).
func (b *Batch) SetFileLive(id uint32, live bool) {
	if !b.check("SetFileLive") {
		return
	}
	f, ok := b.files[id]
	if !ok {
		var err error
		if f, err = b.t.File(id); err != nil {
			b.fail(fmt.Errorf("pkindex: set file %d live=%t: %w", id, live, err))
			return
		}
		if b.files == nil {
			b.files = map[uint32]File{}
		}
	}
	f.Live = live
	b.files[id] = f
	b.set(fileKey(b.t.prefix, id), encodeFile(f))
}

// Put sets the location of key. The file must be in the file table (added
// by this batch or before).
func (b *Batch) Put(key []byte, loc Loc) {
	if !b.check("Put") {
		return
	}
	if loc.Pos < 0 {
		b.fail(fmt.Errorf("pkindex: put key %x of table %s at position %d: positions are not negative", key, b.t.uuid, loc.Pos))
		return
	}
	if loc.File == 0 || uint64(loc.File) >= b.nextFile {
		b.fail(fmt.Errorf("pkindex: put key %x of table %s in file %d: the table has no such file (add it with AddFile first)", key, b.t.uuid, loc.File))
		return
	}
	b.kbuf = append(b.kbuf[:len(b.t.keysFrom)], key...)
	b.vbuf = encodeLoc(b.vbuf[:0], loc)
	b.set(b.kbuf, b.vbuf)
}

// Delete removes key (a key that is absent is no error).
func (b *Batch) Delete(key []byte) {
	if !b.check("Delete") {
		return
	}
	b.kbuf = append(b.kbuf[:len(b.t.keysFrom)], key...)
	if err := b.pb.Delete(b.kbuf, nil); err != nil {
		b.fail(fmt.Errorf("pkindex: delete a key of table %s: %w", b.t.uuid, err))
		return
	}
	b.n++
}

func (b *Batch) set(k, v []byte) {
	if err := b.pb.Set(k, v, nil); err != nil {
		b.fail(fmt.Errorf("pkindex: batch of table %s: %w", b.t.uuid, err))
		return
	}
	b.n++
}

// Len is the number of operations so far (files and keys): the caller
// commits large rebuilds in chunks of a few hundred thousand.
func (b *Batch) Len() int { return b.n }

var errUsed = errors.New("pkindex: Batch.Commit after Commit or Close: a batch is used once")

// Commit writes the batch and s, the state the table is in with it,
// atomically and durably (synced). On an error nothing is written. The
// batch is finished either way.
func (b *Batch) Commit(s State) error {
	if b.done {
		return errUsed
	}
	defer b.finish()
	if b.err != nil {
		return b.err
	}
	t := b.t
	if err := b.pb.Set(t.stateKey(), encodeState(s), nil); err != nil {
		return fmt.Errorf("pkindex: batch of table %s: %w", t.uuid, err)
	}
	if b.nextFile != t.nextFile {
		if err := b.pb.Set(t.nextFileKey(), encodeUvarint(b.nextFile), nil); err != nil {
			return fmt.Errorf("pkindex: batch of table %s: %w", t.uuid, err)
		}
	}
	if err := t.db.usable(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := b.pb.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("commit a batch of table %s to the primary-key index in %s: %w", t.uuid, t.db.dir, err)
	}
	t.nextFile = b.nextFile
	if t.files != nil {
		maps.Copy(t.files, b.files)
	}
	return nil
}

// Close discards the batch if it was not committed.
func (b *Batch) Close() {
	if b.done {
		return
	}
	b.finish()
}

func (b *Batch) finish() {
	b.done = true
	if b.pb == nil {
		return
	}
	_ = b.pb.Close()
	b.pb = nil
	b.files = nil
	b.t.mu.Lock()
	b.t.batchOpen = false
	b.t.mu.Unlock()
}
