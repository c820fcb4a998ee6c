// Package pkindex keeps, on local disk, the index of where each primary
// key's live row is in a mirrored Iceberg table: primary key → (data file,
// row position). It lets the lake turn an update or a delete into a
// position delete (file path, position) instead of an equality delete.
//
// One DB (one pebble database in one directory, opened by one process) holds
// the indexes of one pipeline's tables; each Iceberg table, named by its
// UUID, is a separate keyspace (Table), with its own file table (the data
// files its locations point into, by a small id) and its State: the Iceberg
// snapshot the index is exactly up to date with, and whether it is complete.
//
// The index is a cache, never the source of truth. The consistency rule: a
// Batch (its key puts and deletes, its files) and the State it brings the
// table to are written atomically and synced (Batch.Commit), so after any
// crash the index is exactly at some committed State, and the State says
// which. A rebuild starts with Table.Reset and commits its chunks with
// Complete false, so a crash in the middle leaves Complete false. The
// caller (the lake) rebuilds or catches the index up from the Iceberg table
// when it is missing, behind, incomplete or of unknown lineage, and when
// Open returns ErrCorrupt (Remove the directory and start over). Reads that
// meet corrupt blocks return ErrCorrupt too, and mark the directory so
// that the next Open does; where pebble stops the process (a failed sync
// of its log or manifest), the mark is left first.
//
// This package does not read Iceberg, nor decide anything about it: the
// keys are the caller's encoding of primary key values, the partitions the
// caller's encoding of partition values, opaque byte strings here.
//
// One batch per table at a time: NewBatch while another batch of the same
// table is open gives a batch whose Commit fails. Reads (Lookup, File,
// State) may run concurrently with each other and with a batch.
//
// Memory is bounded: the block cache (Options.CacheBytes, 64 MiB by
// default), two memtables of 16 MiB at most, the file table cache of each
// table (one entry per data file), and the open batch (the caller commits
// large rebuilds in chunks, see Batch.Len).
//
// Measured (docs/performance.md, one million keys, 2 vCPUs, no cgo): a
// Lookup of 10,000 keys costs 0.9 to 1.3 µs per key while the index fits
// in the block cache, about 2 µs when it does not; a committed batch of
// 10,000 puts 0.8 to 1 µs per key; an index takes 12 (sorted 24-byte
// strings) to 16.5 (random 8-byte integers) bytes per key on disk once
// compacted; the process peaked at 73 to 85 MiB RSS loading a million
// keys.
//
// Keys and values: every key starts with the table's number (a uvarint,
// assigned on first use), then a kind byte (meta, file, key); a key's
// value is uvarint(file id) uvarint(position). File ids start at 1 (a zero
// Loc points nowhere). See encoding.go.
package pkindex

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrCorrupt marks a database that cannot be read: corrupt files, or data
// this version does not understand. The index is a cache: Remove the
// directory and open it again, and rebuild the indexes from the tables.
var ErrCorrupt = errors.New("the primary-key index is corrupt or unreadable")

// ErrLocked is wrapped by the error of Open when another process has the
// directory open.
var ErrLocked = errors.New("another process has the primary-key index open")

// Options configure a DB.
type Options struct {
	CacheBytes int64        // pebble block cache; default 64 MiB when 0
	Log        *slog.Logger // nil: discard
}

const defaultCacheBytes = 64 << 20

// MemTableBytes is the size of a memtable; a DB holds two at most.
const MemTableBytes = 16 << 20

// DB is one pebble database holding the indexes of one pipeline's tables.
type DB struct {
	dir  string
	pdb  *pebble.DB
	lock *pebble.Lock
	log  *slog.Logger

	mu     sync.Mutex
	tables map[string]*Table // by UUID, created on first use
	closed bool
}

// Open opens (creates if missing, mode 0700) the index database in dir. A
// corrupt or unreadable database gives an error wrapping ErrCorrupt; a
// directory another process has open gives an error that says so.
func Open(dir string, opts Options) (*DB, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("index", dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the primary-key index directory: %w", err)
	}
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		return nil, lockError(dir, err)
	}
	if msg, err := os.ReadFile(filepath.Join(dir, corruptMarker)); err == nil {
		_ = lock.Close()
		return nil, fmt.Errorf("%w: %s: %s; remove the directory and the indexes are rebuilt from the tables", ErrCorrupt, dir, bytes.TrimSpace(msg))
	}
	cacheBytes := opts.CacheBytes
	if cacheBytes <= 0 {
		cacheBytes = defaultCacheBytes
	}
	var marked atomic.Bool
	popts := &pebble.Options{
		CacheSize:                   cacheBytes,
		MemTableSize:                MemTableBytes,
		MemTableStopWritesThreshold: 2,
		FormatMajorVersion:          pebble.FormatNewest,
		Lock:                        lock,
		Logger:                      pebbleLogger{log: log, dir: dir},
		EventListener: &pebble.EventListener{
			BackgroundError: func(err error) {
				log.Error("pebble: background error: " + err.Error())
			},
			// Pebble's default stops the process; the reader gets the error
			// (ErrCorrupt) anyway, and the next Open must say so.
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				msg := "data corruption in " + info.Path + ": " + info.Details.Error()
				log.Error("pebble: " + msg)
				if !marked.Swap(true) {
					markCorrupt(dir, msg)
				}
			},
		},
	}
	for i := range popts.Levels {
		// Lookups use SeekPrefixGE: absent keys (new rows) mostly stop at
		// the filter.
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	pdb, err := pebble.Open(dir, popts)
	if err != nil {
		_ = lock.Close()
		return nil, openError(dir, err)
	}
	db := &DB{dir: dir, pdb: pdb, lock: lock, log: log, tables: map[string]*Table{}}
	if err := db.checkVersion(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

func lockError(dir string, err error) error {
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe):
		return fmt.Errorf("create the LOCK file of the primary-key index in %s (check the directory's owner and permissions): %w", dir, err)
	case strings.Contains(err.Error(), "held by current process"):
		return fmt.Errorf("the primary-key index in %s is already open in this process: close it before opening it again: %w", dir, err)
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EWOULDBLOCK):
		return fmt.Errorf("another cdcsync process uses the primary-key index in %s (its LOCK file is held): stop that process, or give each pipeline its own index directory: %w (%w)", dir, ErrLocked, err)
	default:
		return fmt.Errorf("lock the primary-key index in %s (the file system must support POSIX locks: use a local directory): %w", dir, err)
	}
}

// openError classifies an error of pebble.Open: what removing the
// directory cannot fix (a full disk, no file descriptors, no permission) is
// not ErrCorrupt.
func openError(dir string, err error) error {
	for _, e := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return fmt.Errorf("open the primary-key index in %s: %w (free the resource and start again)", dir, err)
		}
	}
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("open the primary-key index in %s (check the owner and permissions of the directory and its files): %w", dir, err)
	}
	return fmt.Errorf("%w: open %s: %w; remove the directory and the indexes are rebuilt from the tables", ErrCorrupt, dir, err)
}

// checkVersion reads the format version, writing it into an empty
// database.
func (db *DB) checkVersion() error {
	v, err := db.get(keyVersion)
	if err != nil {
		return err
	}
	if v == nil {
		it, err := db.pdb.NewIter(nil)
		if err != nil {
			return db.readError("read the primary-key index", err)
		}
		empty := !it.First()
		err = it.Close()
		if err != nil {
			return db.readError("read the primary-key index", err)
		}
		if !empty {
			return fmt.Errorf("%w: %s holds data but no format version; remove the directory and the indexes are rebuilt from the tables", ErrCorrupt, db.dir)
		}
		if err := db.pdb.Set(keyVersion, encodeUvarint(formatVersion), pebble.Sync); err != nil {
			return fmt.Errorf("write the format version of the primary-key index in %s: %w", db.dir, err)
		}
		return nil
	}
	ver, err := decodeUvarint(v)
	if err != nil {
		return corrupt("the format version", keyVersion, err)
	}
	if ver != formatVersion {
		return fmt.Errorf("%w: %s has format version %d, this cdcsync reads version %d; remove the directory and the indexes are rebuilt from the tables", ErrCorrupt, db.dir, ver, formatVersion)
	}
	return nil
}

func encodeUvarint(x uint64) []byte {
	return binary.AppendUvarint(nil, x)
}

// get returns a copy of the value of key, nil when absent.
func (db *DB) get(key []byte) ([]byte, error) {
	v, closer, err := db.pdb.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, db.readError("read the primary-key index", err)
	}
	out := append(make([]byte, 0, len(v)), v...)
	if err := closer.Close(); err != nil {
		return nil, db.readError("read the primary-key index", err)
	}
	return out, nil
}

// readError wraps an error of a read, marking pebble's corruption errors
// with ErrCorrupt.
func (db *DB) readError(what string, err error) error {
	if pebble.IsCorruptionError(err) {
		return fmt.Errorf("%w: %s in %s: %w; remove the directory and the indexes are rebuilt from the tables", ErrCorrupt, what, db.dir, firstLine{err})
	}
	return fmt.Errorf("%s in %s: %w", what, db.dir, err)
}

// firstLine shows the first line of an error: pebble appends "\n<corruption
// detail carrier>" to corruption errors.
type firstLine struct{ err error }

func (e firstLine) Error() string {
	msg, _, _ := strings.Cut(e.err.Error(), "\n")
	return msg
}

func (e firstLine) Unwrap() error { return e.err }

// Close closes the database. Tables and batches must not be used after.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil
	}
	db.closed = true
	db.mu.Unlock()
	err := db.pdb.Close()
	if lerr := db.lock.Close(); err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("close the primary-key index in %s: %w", db.dir, err)
	}
	return nil
}

// Remove deletes the index database in dir (after ErrCorrupt, or to start
// over). It refuses a directory that another process has open, and one
// that does not look like an index (it holds a subdirectory, or none of
// pebble's files), so that a wrong path does not delete anything else. A
// missing directory is not an error.
func Remove(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove the primary-key index in %s: %w", dir, err)
	}
	pebbleFiles := false
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			return fmt.Errorf("remove the primary-key index in %s: it holds the directory %s, which pebble does not create: check the path, and remove it by hand if it is right", dir, name)
		}
		if name == "LOCK" || name == "CURRENT" || strings.HasPrefix(name, "MANIFEST-") || strings.HasPrefix(name, "OPTIONS-") || strings.HasPrefix(name, "marker.") {
			pebbleFiles = true
		}
	}
	if !pebbleFiles && len(ents) > 0 {
		return fmt.Errorf("remove the primary-key index in %s: the directory holds no pebble database (no LOCK, MANIFEST or OPTIONS file): check the path, and remove it by hand if it is right", dir)
	}
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		return lockError(dir, err)
	}
	err = os.RemoveAll(dir)
	_ = lock.Close()
	if err != nil {
		return fmt.Errorf("remove the primary-key index in %s: %w", dir, err)
	}
	return nil
}

// Table returns the index of the Iceberg table whose UUID is uuid, giving
// it a keyspace on first use. The same *Table is returned for the same
// UUID until Drop.
func (db *DB) Table(uuid string) (*Table, error) {
	if uuid == "" {
		return nil, errors.New("pkindex: a table needs a UUID: the table's metadata has none")
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil, errClosed
	}
	if t := db.tables[uuid]; t != nil {
		return t, nil
	}
	regKey := keyTable(uuid)
	v, err := db.get(regKey)
	if err != nil {
		return nil, err
	}
	var n uint64
	if v != nil {
		if n, err = decodeUvarint(v); err != nil || n == 0 {
			return nil, corrupt("the number of table "+uuid, regKey, errBadValue)
		}
	} else {
		nv, err := db.get(keyNextTable)
		if err != nil {
			return nil, err
		}
		n = 1
		if nv != nil {
			if n, err = decodeUvarint(nv); err != nil || n == 0 {
				return nil, corrupt("the next table number", keyNextTable, errBadValue)
			}
		}
		b := db.pdb.NewBatch()
		_ = b.Set(regKey, encodeUvarint(n), nil)
		_ = b.Set(keyNextTable, encodeUvarint(n+1), nil)
		err = b.Commit(pebble.Sync)
		_ = b.Close()
		if err != nil {
			return nil, fmt.Errorf("register table %s in the primary-key index in %s: %w", uuid, db.dir, err)
		}
	}
	t := &Table{db: db, uuid: uuid, prefix: tablePrefix(n)}
	t.keysFrom = withKind(t.prefix, kindKey)
	t.keysTo = prefixEnd(t.keysFrom)
	nf, err := db.get(t.nextFileKey())
	if err != nil {
		return nil, err
	}
	t.nextFile = 1
	if nf != nil {
		x, err := decodeUvarint(nf)
		if err != nil || x == 0 || x > 1<<32 {
			return nil, corrupt("the next file id of table "+uuid, t.nextFileKey(), errBadValue)
		}
		t.nextFile = x
	}
	db.tables[uuid] = t
	return t, nil
}

var errClosed = errors.New("pkindex: the primary-key index is closed")

// Tables lists the UUIDs of the tables present, in byte order.
func (db *DB) Tables() ([]string, error) {
	if err := db.usable(); err != nil {
		return nil, err
	}
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: keyTablesFrom, UpperBound: keyTablesTo})
	if err != nil {
		return nil, db.readError("list the tables of the primary-key index", err)
	}
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, string(bytes.TrimPrefix(it.Key(), keyTablesFrom)))
	}
	if err := it.Close(); err != nil {
		return nil, db.readError("list the tables of the primary-key index", err)
	}
	return out, nil
}

// Stats are figures for metrics and logs.
type Stats struct {
	DiskBytes     uint64 // on disk: sstables, WAL (with recycled WAL files), manifests
	TableBytes    uint64 // live sstables
	MemTableBytes uint64 // memtables allocated
	CacheBytes    int64  // block cache in use
	CacheHits     int64  // block cache hits since Open
	CacheMisses   int64  // block cache misses since Open
}

// Stats returns the current figures (zeros after Close).
func (db *DB) Stats() Stats {
	if db.usable() != nil {
		return Stats{}
	}
	m := db.pdb.Metrics()
	return Stats{
		DiskBytes:     m.DiskSpaceUsage(),
		TableBytes:    m.Table.Local.LiveSize,
		MemTableBytes: m.MemTable.Size,
		CacheBytes:    m.BlockCache.Size,
		CacheHits:     m.BlockCache.Hits,
		CacheMisses:   m.BlockCache.Misses,
	}
}

// Compact flushes the memtables and compacts the whole database, which
// drops deleted keys and removed tables from disk. It is slow (it rewrites
// everything); pebble compacts in the background anyway.
func (db *DB) Compact(ctx context.Context) error {
	if err := db.usable(); err != nil {
		return err
	}
	if err := db.pdb.Flush(); err != nil {
		return fmt.Errorf("flush the primary-key index in %s: %w", db.dir, err)
	}
	// Every key is below ten 0xff bytes: uvarint(n) is at most nine bytes
	// for n < 2^63, the last below 0x80.
	if err := db.pdb.Compact(ctx, []byte{0x00}, bytes.Repeat([]byte{0xff}, 10), true); err != nil {
		return fmt.Errorf("compact the primary-key index in %s: %w", db.dir, err)
	}
	return nil
}

// Dir is the directory of the database.
func (db *DB) Dir() string { return db.dir }

// corruptMarker is the file that says the database must not be trusted
// any more: written when pebble detects corruption or stops the process
// (Fatalf), it makes the next Open return ErrCorrupt instead of failing
// the same way again and again.
const corruptMarker = "PKINDEX-CORRUPT"

func markCorrupt(dir, msg string) {
	f, err := os.OpenFile(filepath.Join(dir, corruptMarker), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return
	}
	_, _ = f.WriteString(msg + "\n")
	_ = f.Sync()
	_ = f.Close()
}

// pebbleLogger sends pebble's messages to slog. Pebble calls Fatalf when
// continuing would risk the data (a failed WAL or MANIFEST sync, a broken
// invariant, an sstable of the wrong size); like pebble's own logger it
// does not return: it marks the database corrupt, logs, and panics.
type pebbleLogger struct {
	log *slog.Logger
	dir string
}

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug("pebble: " + strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("pebble: " + strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	markCorrupt(l.dir, "pebble stopped the process: "+msg)
	l.log.Error("pebble: fatal: " + msg + " (the process stops; the next Open returns ErrCorrupt and the index is rebuilt)")
	panic("pkindex: pebble: " + msg)
}
