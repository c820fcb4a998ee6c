package pkindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// Loc is where a key's live row is.
type Loc struct {
	File uint32 // id of the data file in this table's file table
	Pos  int64  // row position within the file (0-based)
}

// File is a data file of the table's file table.
type File struct {
	Path      string
	SpecID    int32
	Partition []byte // opaque to pkindex: the caller's encoding of the partition values
	Live      bool   // false once the file left the table (compaction, a foreign rewrite)
}

// State is what the index reflects.
type State struct {
	SnapshotID int64 // the Iceberg snapshot the index is exactly up to date with
	Complete   bool  // false while a rebuild is under way (a crash mid-rebuild leaves Complete false: the caller rebuilds)
	// Through, while Complete is false, is where the rebuild has got to:
	// the caller's name for the last part of the table whose keys are all
	// in (a data file, in path order), so that a rebuild of the same
	// snapshot cut short resumes after it. Empty: nothing yet.
	Through string
}

// Table is the index of one Iceberg table.
type Table struct {
	db               *DB
	uuid             string
	prefix           []byte // uvarint(table number)
	keysFrom, keysTo []byte // the range of the table's keys

	dropped atomic.Bool

	// mu is held by a batch's commit, so that the file table in memory
	// changes with the keys that point into it.
	mu        sync.Mutex
	nextFile  uint64          // the id the next AddFile assigns, as committed
	files     map[uint32]File // the file table, nil until first read
	batchOpen bool
}

func (t *Table) stateKey() []byte    { return withKind(t.prefix, kindMeta, 's') }
func (t *Table) nextFileKey() []byte { return withKind(t.prefix, kindMeta, 'f') }

// UUID is the table's UUID.
func (t *Table) UUID() string { return t.uuid }

func (t *Table) usable() error {
	if t.dropped.Load() {
		return fmt.Errorf("pkindex: table %s was dropped from the primary-key index: call DB.Table again", t.uuid)
	}
	return t.db.usable()
}

func (db *DB) usable() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return errClosed
	}
	return nil
}

// State returns what the index reflects; ok is false when the table has
// no state (it was never built, or it was Reset).
func (t *Table) State() (s State, ok bool, err error) {
	if err := t.usable(); err != nil {
		return State{}, false, err
	}
	v, err := t.db.get(t.stateKey())
	if err != nil || v == nil {
		return State{}, false, err
	}
	s, err = decodeState(v)
	if err != nil {
		return State{}, false, corrupt("the state of table "+t.uuid, t.stateKey(), err)
	}
	return s, true, nil
}

// Lookup finds the locations of keys. found[i] says whether keys[i] is
// present, locs[i] is its location. Duplicate keys are allowed.
//
// The keys are looked up in byte order (a sorted copy) on one iterator,
// each with a prefix seek, which consults the bloom filters of the
// sstables above the last level. The filters of the last level (most of
// the keys) are not read: they make absent keys three times faster while
// the index fits in the block cache, and every lookup twenty times slower
// once it does not (they are large, and thrash the cache). The benchmarks
// compare the alternatives (docs/performance.md).
func (t *Table) Lookup(keys [][]byte) (locs []Loc, found []bool, err error) {
	return t.lookup(keys, lookupSortedPrefix)
}

// lookupMode is how lookup seeks; the benchmarks compare them.
type lookupMode int

const (
	lookupSortedPrefix   lookupMode = iota // sorted keys, SeekPrefixGE (bloom filters)
	lookupSortedSeek                       // sorted keys, SeekGE (no bloom filters)
	lookupUnsortedPrefix                   // keys in the caller's order, SeekPrefixGE
	lookupSortedPrefixL6                   // sorted keys, SeekPrefixGE, bloom filters of L6 too
	lookupGet                              // DB.Get of each key, in the caller's order
)

func (t *Table) lookup(keys [][]byte, mode lookupMode) (locs []Loc, found []bool, err error) {
	if err := t.usable(); err != nil {
		return nil, nil, err
	}
	locs = make([]Loc, len(keys))
	found = make([]bool, len(keys))
	if len(keys) == 0 {
		return locs, found, nil
	}
	if mode == lookupGet {
		return t.lookupGets(keys)
	}
	type indexed struct {
		key []byte
		i   int
	}
	order := make([]indexed, len(keys))
	for i, k := range keys {
		order[i] = indexed{k, i}
	}
	if mode != lookupUnsortedPrefix {
		slices.SortFunc(order, func(a, b indexed) int { return bytes.Compare(a.key, b.key) })
	}
	it, err := t.db.pdb.NewIter(&pebble.IterOptions{LowerBound: t.keysFrom, UpperBound: t.keysTo, UseL6Filters: mode == lookupSortedPrefixL6})
	if err != nil {
		return nil, nil, t.db.readError("look keys up in the primary-key index of table "+t.uuid, err)
	}
	buf := make([]byte, 0, len(t.keysFrom)+64)
	var derr error
	for _, o := range order {
		i := o.i
		buf = append(append(buf[:0], t.keysFrom...), o.key...)
		var ok bool
		if mode == lookupSortedSeek {
			ok = it.SeekGE(buf)
		} else {
			ok = it.SeekPrefixGE(buf)
		}
		if !ok {
			if it.Error() != nil {
				break // it.Close returns it (the next seek would clear it)
			}
			continue
		}
		if !bytes.Equal(it.Key(), buf) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			break // it.Close returns it
		}
		loc, err := decodeLoc(v)
		if err != nil {
			derr = corrupt("the location of a key of table "+t.uuid, buf, err)
			break
		}
		locs[i], found[i] = loc, true
	}
	if err := it.Close(); err != nil {
		return nil, nil, t.db.readError("look keys up in the primary-key index of table "+t.uuid, err)
	}
	if derr != nil {
		return nil, nil, derr
	}
	return locs, found, nil
}

// lookupGets is lookup by DB.Get, for the benchmarks.
func (t *Table) lookupGets(keys [][]byte) (locs []Loc, found []bool, err error) {
	locs = make([]Loc, len(keys))
	found = make([]bool, len(keys))
	buf := make([]byte, 0, len(t.keysFrom)+64)
	for i, k := range keys {
		buf = append(append(buf[:0], t.keysFrom...), k...)
		v, closer, err := t.db.pdb.Get(buf)
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, t.db.readError("look keys up in the primary-key index of table "+t.uuid, err)
		}
		locs[i], err = decodeLoc(v)
		_ = closer.Close()
		if err != nil {
			return nil, nil, corrupt("the location of a key of table "+t.uuid, buf, err)
		}
		found[i] = true
	}
	return locs, found, nil
}

// Scan calls fn with every key of the table and its location, in byte
// order of the keys, until fn returns an error (which Scan returns). The
// key is valid only during the call.
func (t *Table) Scan(fn func(key []byte, loc Loc) error) error {
	if err := t.usable(); err != nil {
		return err
	}
	it, err := t.db.pdb.NewIter(&pebble.IterOptions{LowerBound: t.keysFrom, UpperBound: t.keysTo})
	if err != nil {
		return t.db.readError("scan the primary-key index of table "+t.uuid, err)
	}
	var ferr error
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			break
		}
		loc, err := decodeLoc(v)
		if err != nil {
			ferr = corrupt("the location of a key of table "+t.uuid, it.Key(), err)
			break
		}
		if ferr = fn(it.Key()[len(t.keysFrom):], loc); ferr != nil {
			break
		}
	}
	if err := it.Close(); err != nil {
		return t.db.readError("scan the primary-key index of table "+t.uuid, err)
	}
	return ferr
}

// loadFilesLocked reads the file table into t.files if it is not there.
func (t *Table) loadFilesLocked() error {
	if t.files != nil {
		return nil
	}
	from := withKind(t.prefix, kindFile)
	it, err := t.db.pdb.NewIter(&pebble.IterOptions{LowerBound: from, UpperBound: prefixEnd(from)})
	if err != nil {
		return t.db.readError("read the file table of table "+t.uuid, err)
	}
	files := map[uint32]File{}
	var derr error
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			break
		}
		if len(k) != len(from)+4 {
			derr = corrupt("a file id of table "+t.uuid, k, errBadValue)
			break
		}
		f, err := decodeFile(v)
		if err != nil {
			derr = corrupt("a file of table "+t.uuid, k, err)
			break
		}
		files[binary.BigEndian.Uint32(k[len(from):])] = f
	}
	if err := it.Close(); err != nil {
		return t.db.readError("read the file table of table "+t.uuid, err)
	}
	if derr != nil {
		return derr
	}
	t.files = files
	return nil
}

// ErrNoFile is returned (wrapped) by File for an id the table does not have.
var ErrNoFile = errors.New("no such file in the file table")

// File returns the file whose id is id (from memory after the first read
// of the file table). The Partition slice must not be modified.
func (t *Table) File(id uint32) (File, error) {
	if err := t.usable(); err != nil {
		return File{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.loadFilesLocked(); err != nil {
		return File{}, err
	}
	f, ok := t.files[id]
	if !ok {
		return File{}, fmt.Errorf("file %d of table %s: %w", id, t.uuid, ErrNoFile)
	}
	return f, nil
}

// Files returns the file table: every file, live or not, by id (a copy;
// the Partition slices must not be modified).
func (t *Table) Files() (map[uint32]File, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.loadFilesLocked(); err != nil {
		return nil, err
	}
	return maps.Clone(t.files), nil
}

// Reset removes everything of the table (keys, files, state), with a range
// deletion; a rebuild starts with it. File ids are not reused after it. It
// fails while a batch of the table is open.
func (t *Table) Reset() error {
	if err := t.usable(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.batchOpen {
		return fmt.Errorf("pkindex: reset table %s while one of its batches is open: commit or close the batch first", t.uuid)
	}
	b := t.db.pdb.NewBatch()
	defer b.Close()
	_ = b.DeleteRange(t.prefix, prefixEnd(t.prefix), nil)
	if t.nextFile > 1 {
		_ = b.Set(t.nextFileKey(), encodeUvarint(t.nextFile), nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("reset the primary-key index of table %s in %s: %w", t.uuid, t.db.dir, err)
	}
	t.files = map[uint32]File{}
	return nil
}

// Drop removes the table entirely, its keyspace too. The Table must not be
// used after; DB.Table gives the UUID a new, empty keyspace.
func (t *Table) Drop() error {
	db := t.db
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return errClosed
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped.Load() {
		return nil
	}
	if t.batchOpen {
		return fmt.Errorf("pkindex: drop table %s while one of its batches is open: commit or close the batch first", t.uuid)
	}
	b := db.pdb.NewBatch()
	defer b.Close()
	_ = b.DeleteRange(t.prefix, prefixEnd(t.prefix), nil)
	_ = b.Delete(keyTable(t.uuid), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("drop table %s from the primary-key index in %s: %w", t.uuid, db.dir, err)
	}
	t.dropped.Store(true)
	t.files = nil
	delete(db.tables, t.uuid)
	return nil
}
