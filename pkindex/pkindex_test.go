package pkindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "crash":
		crashChild(os.Getenv(childDirEnv))
	case "hold":
		holdChild(os.Getenv(childDirEnv))
	default:
		fmt.Fprintln(os.Stderr, "unknown", childEnv)
		os.Exit(2)
	}
}

func openT(t testing.TB, dir string) *DB {
	t.Helper()
	db, err := Open(dir, Options{CacheBytes: 8 << 20})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return db
}

func tableT(t testing.TB, db *DB, uuid string) *Table {
	t.Helper()
	tb, err := db.Table(uuid)
	if err != nil {
		t.Fatalf("Table(%s): %v", uuid, err)
	}
	return tb
}

// testKeys are keys that stress the encoding: the empty key, keys that
// are prefixes of each other, bytes 0x00 and 0xff, 8-byte integers.
func testKeys(n int) [][]byte {
	keys := [][]byte{
		{}, {0}, {0, 0}, {0xff}, {0xff, 0xff}, {0xff, 0}, {1}, {1, 0}, {1, 0xff},
		[]byte("a"), []byte("ab"), []byte("abc"), []byte("abcd"), []byte("b"),
		{0x03}, {0x02}, {0x01, 0x03}, // bytes that are kind bytes
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; len(keys) < n; i++ {
		switch i % 3 {
		case 0:
			keys = append(keys, binary.BigEndian.AppendUint64(nil, r.Uint64()))
		case 1:
			k := make([]byte, r.IntN(40))
			for j := range k {
				k[j] = byte(r.Uint32())
			}
			keys = append(keys, k)
		default:
			keys = append(keys, fmt.Appendf(nil, "customer-%d", i))
		}
	}
	// Drop duplicates (random short keys may collide).
	seen := map[string]bool{}
	out := keys[:0]
	for _, k := range keys {
		if !seen[string(k)] {
			seen[string(k)] = true
			out = append(out, k)
		}
	}
	return out
}

// checkModel checks that tb holds exactly the keys of model, through
// Lookup (with absent keys mixed in) and Scan.
func checkModel(t *testing.T, tb *Table, model map[string]Loc, absent [][]byte) {
	t.Helper()
	var keys [][]byte
	for k := range model {
		keys = append(keys, []byte(k))
	}
	keys = append(keys, absent...)
	rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, mode := range []lookupMode{lookupSortedPrefix, lookupSortedSeek, lookupUnsortedPrefix, lookupSortedPrefixL6, lookupGet} {
		locs, found, err := tb.lookup(keys, mode)
		if err != nil {
			t.Fatalf("Lookup (mode %d): %v", mode, err)
		}
		for i, k := range keys {
			want, ok := model[string(k)]
			if found[i] != ok || locs[i] != want {
				t.Fatalf("Lookup(%x) (mode %d) = %v %v, want %v %v", k, mode, locs[i], found[i], want, ok)
			}
		}
	}
	got := map[string]Loc{}
	if err := tb.Scan(func(k []byte, loc Loc) error {
		got[string(k)] = loc
		return nil
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	if !maps.Equal(got, model) {
		t.Fatalf("Scan: %d keys, want %d (or different locations)", len(got), len(model))
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	db := openT(t, dir)
	tb := tableT(t, db, "t1")
	keys := testKeys(5000)
	absent := [][]byte{[]byte("abcde"), {0, 0, 0}, []byte("customer-"), {0xfe}, []byte("zz")}

	model := map[string]Loc{}
	b := tb.NewBatch()
	f1 := b.AddFile(File{Path: "s3://b/data/1.parquet", Live: true})
	for i, k := range keys {
		b.Put(k, Loc{File: f1, Pos: int64(i)})
		model[string(k)] = Loc{File: f1, Pos: int64(i)}
	}
	if b.Len() != len(keys)+1 {
		t.Fatalf("Len = %d, want %d", b.Len(), len(keys)+1)
	}
	if err := b.Commit(State{SnapshotID: 10, Complete: true}); err != nil {
		t.Fatal(err)
	}
	checkModel(t, tb, model, absent)

	// Move a third, delete a third, in one batch; a position > 2^32.
	b = tb.NewBatch()
	f2 := b.AddFile(File{Path: "s3://b/data/2.parquet", Live: true})
	for i, k := range keys {
		switch i % 3 {
		case 0:
			b.Delete(k)
			delete(model, string(k))
			absent = append(absent, k)
		case 1:
			loc := Loc{File: f2, Pos: 1<<33 + int64(i)}
			b.Put(k, loc)
			model[string(k)] = loc
		}
	}
	b.Delete([]byte("never there"))
	if err := b.Commit(State{SnapshotID: 11, Complete: true}); err != nil {
		t.Fatal(err)
	}
	checkModel(t, tb, model, absent)

	// Nothing and duplicates.
	if locs, found, err := tb.Lookup(nil); err != nil || len(locs) != 0 || len(found) != 0 {
		t.Fatalf("Lookup(nil) = %v %v %v", locs, found, err)
	}
	k := keys[1]
	locs, found, err := tb.Lookup([][]byte{k, []byte("zz"), k})
	if err != nil || !found[0] || found[1] || !found[2] || locs[0] != model[string(k)] || locs[2] != locs[0] {
		t.Fatalf("Lookup with duplicates = %v %v %v", locs, found, err)
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir)
	defer db.Close()
	tb = tableT(t, db, "t1")
	checkModel(t, tb, model, absent)
	s, ok, err := tb.State()
	if err != nil || !ok || s != (State{SnapshotID: 11, Complete: true}) {
		t.Fatalf("State after reopen = %v %v %v", s, ok, err)
	}
}

func TestTablesAreSeparate(t *testing.T) {
	dir := t.TempDir()
	db := openT(t, dir)
	keys := testKeys(300)
	models := map[string]map[string]Loc{}
	for n, uuid := range []string{"6f1d1f6e-0000-4000-8000-000000000001", "6f1d1f6e-0000-4000-8000-000000000002"} {
		tb := tableT(t, db, uuid)
		b := tb.NewBatch()
		f := b.AddFile(File{Path: uuid})
		models[uuid] = map[string]Loc{}
		for i, k := range keys {
			if (i+n)%2 == 0 { // each table has half the keys, the halves overlap
				continue
			}
			loc := Loc{File: f, Pos: int64(100*n + i)}
			b.Put(k, loc)
			models[uuid][string(k)] = loc
		}
		if err := b.Commit(State{SnapshotID: int64(n + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	t1 := tableT(t, db, "6f1d1f6e-0000-4000-8000-000000000001")
	t2 := tableT(t, db, "6f1d1f6e-0000-4000-8000-000000000002")
	if t1b := tableT(t, db, "6f1d1f6e-0000-4000-8000-000000000001"); t1b != t1 {
		t.Fatal("Table returned two *Table for one UUID")
	}
	checkModel(t, t1, models[t1.UUID()], nil)
	checkModel(t, t2, models[t2.UUID()], nil)
	if got, err := db.Tables(); err != nil || !slices.Equal(got, []string{t1.UUID(), t2.UUID()}) {
		t.Fatalf("Tables = %v %v", got, err)
	}

	// Reset of one leaves the other; the reset one is empty and has no
	// state; its file ids are not reused.
	if err := t1.Reset(); err != nil {
		t.Fatal(err)
	}
	checkModel(t, t1, map[string]Loc{}, keys)
	checkModel(t, t2, models[t2.UUID()], nil)
	if _, ok, err := t1.State(); ok || err != nil {
		t.Fatalf("State after Reset: ok %v err %v", ok, err)
	}
	if s, ok, _ := t2.State(); !ok || s.SnapshotID != 2 {
		t.Fatalf("State of the other table after Reset: %v %v", s, ok)
	}
	if files, err := t1.Files(); err != nil || len(files) != 0 {
		t.Fatalf("Files after Reset = %v %v", files, err)
	}
	b := t1.NewBatch()
	if id := b.AddFile(File{Path: "after reset"}); id != 2 {
		t.Fatalf("first file id after Reset = %d, want 2", id)
	}
	b.Put([]byte("x"), Loc{File: 2, Pos: 7})
	if err := b.Commit(State{SnapshotID: 5}); err != nil {
		t.Fatal(err)
	}

	// Drop of one leaves the other.
	if err := t2.Drop(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := t2.Lookup(keys); err == nil || !strings.Contains(err.Error(), "dropped") {
		t.Fatalf("Lookup on a dropped table: %v", err)
	}
	checkModel(t, t1, map[string]Loc{"x": {File: 2, Pos: 7}}, keys)
	if got, err := db.Tables(); err != nil || !slices.Equal(got, []string{t1.UUID()}) {
		t.Fatalf("Tables after Drop = %v %v", got, err)
	}
	t2 = tableT(t, db, t2.UUID())
	checkModel(t, t2, map[string]Loc{}, keys)
	if _, ok, _ := t2.State(); ok {
		t.Fatal("a dropped and recreated table has a state")
	}
	if files, _ := t2.Files(); len(files) != 0 {
		t.Fatalf("a dropped and recreated table has files %v", files)
	}
	b = t2.NewBatch()
	if id := b.AddFile(File{Path: "new"}); id != 1 {
		t.Fatalf("first file id of a recreated table = %d, want 1", id)
	}
	b.Close()

	// After reopen, every table finds its keys again.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir)
	defer db.Close()
	checkModel(t, tableT(t, db, t1.UUID()), map[string]Loc{"x": {File: 2, Pos: 7}}, keys)
	if got, err := db.Tables(); err != nil || len(got) != 2 {
		t.Fatalf("Tables after reopen = %v %v", got, err)
	}
}

func TestBatchAtomicity(t *testing.T) {
	dir := t.TempDir()
	db := openT(t, dir)
	tb := tableT(t, db, "t")
	if _, ok, err := tb.State(); ok || err != nil {
		t.Fatalf("State of a new table: ok %v err %v", ok, err)
	}

	// A batch closed without Commit leaves nothing.
	b := tb.NewBatch()
	f := b.AddFile(File{Path: "discarded", Live: true})
	b.Put([]byte("k"), Loc{File: f, Pos: 1})
	b.Close()
	b.Close() // twice is fine
	checkModel(t, tb, map[string]Loc{}, [][]byte{[]byte("k")})
	if _, ok, _ := tb.State(); ok {
		t.Fatal("a discarded batch left a state")
	}
	if files, _ := tb.Files(); len(files) != 0 {
		t.Fatalf("a discarded batch left files: %v", files)
	}

	// The discarded id is assigned again; the state advances on Commit.
	b = tb.NewBatch()
	if id := b.AddFile(File{Path: "kept", Live: true}); id != f {
		t.Fatalf("id after a discarded batch = %d, want %d", id, f)
	}
	b.Put([]byte("k"), Loc{File: f, Pos: 2})
	if _, ok, _ := tb.State(); ok {
		t.Fatal("state visible before Commit")
	}
	if _, found, _ := tb.Lookup([][]byte{[]byte("k")}); found[0] {
		t.Fatal("key visible before Commit")
	}
	if err := b.Commit(State{SnapshotID: 1, Complete: false}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(State{SnapshotID: 2}); err == nil {
		t.Fatal("a second Commit of a batch succeeded")
	}
	if s, ok, _ := tb.State(); !ok || s != (State{SnapshotID: 1}) {
		t.Fatalf("State = %v %v", s, ok)
	}
	// A state-only commit, a negative snapshot id.
	b = tb.NewBatch()
	if err := b.Commit(State{SnapshotID: -42, Complete: true}); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := tb.State(); s != (State{SnapshotID: -42, Complete: true}) {
		t.Fatalf("State = %v", s)
	}

	// A batch with a bad operation writes nothing, not even its good ones.
	for name, bad := range map[string]func(b *Batch){
		"unknown file":      func(b *Batch) { b.Put([]byte("q"), Loc{File: 99, Pos: 1}) },
		"file 0":            func(b *Batch) { b.Put([]byte("q"), Loc{File: 0, Pos: 1}) },
		"negative position": func(b *Batch) { b.Put([]byte("q"), Loc{File: 1, Pos: -1}) },
		"live of unknown":   func(b *Batch) { b.SetFileLive(77, false) },
	} {
		b = tb.NewBatch()
		b.Put([]byte("good"), Loc{File: 1, Pos: 5})
		b.AddFile(File{Path: "x"})
		bad(b)
		b.Delete([]byte("k"))
		if err := b.Commit(State{SnapshotID: 3}); err == nil {
			t.Fatalf("%s: Commit succeeded", name)
		}
		checkModel(t, tb, map[string]Loc{"k": {File: 1, Pos: 2}}, [][]byte{[]byte("good"), []byte("q")})
		if s, _, _ := tb.State(); s.SnapshotID != -42 {
			t.Fatalf("%s: State moved to %v", name, s)
		}
	}
	if files, _ := tb.Files(); len(files) != 1 {
		t.Fatalf("failed batches left files: %v", files)
	}

	// One batch per table at a time; Reset and Drop wait for it too.
	b = tb.NewBatch()
	b2 := tb.NewBatch()
	b2.Put([]byte("z"), Loc{File: 1, Pos: 1})
	if err := b2.Commit(State{SnapshotID: 9}); err == nil || !strings.Contains(err.Error(), "already open") {
		t.Fatalf("second open batch: Commit = %v", err)
	}
	if err := tb.Reset(); err == nil {
		t.Fatal("Reset with an open batch succeeded")
	}
	if err := tb.Drop(); err == nil {
		t.Fatal("Drop with an open batch succeeded")
	}
	other := tableT(t, db, "other").NewBatch() // other tables are free
	other.Close()
	b.Close()
	b = tb.NewBatch()
	b.Put([]byte("z"), Loc{File: 1, Pos: 1})
	if err := b.Commit(State{SnapshotID: 9}); err != nil {
		t.Fatalf("batch after the open one closed: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Put after Commit did not panic")
			}
		}()
		b.Put([]byte("late"), Loc{File: 1})
	}()

	// Durable across Open.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.State(); err == nil {
		t.Fatal("State after Close succeeded")
	}
	db = openT(t, dir)
	defer db.Close()
	tb = tableT(t, db, "t")
	checkModel(t, tb, map[string]Loc{"k": {File: 1, Pos: 2}, "z": {File: 1, Pos: 1}}, nil)
	if s, ok, _ := tb.State(); !ok || s != (State{SnapshotID: 9}) {
		t.Fatalf("State after reopen = %v %v", s, ok)
	}
}

func TestFileTable(t *testing.T) {
	dir := t.TempDir()
	db := openT(t, dir)
	tb := tableT(t, db, "t")
	want := map[uint32]File{}
	var last uint32
	for round := range 3 {
		b := tb.NewBatch()
		for i := range 4 {
			f := File{
				Path:      fmt.Sprintf("s3://bucket/t/data/%d-%d.parquet", round, i),
				SpecID:    int32(round - 1), // -1 too
				Partition: []byte{byte(i), 0, 0xff},
				Live:      i%2 == 0,
			}
			if i == 3 {
				f.Partition = nil
				f.Path = ""
			}
			id := b.AddFile(f)
			if id <= last {
				t.Fatalf("file id %d after %d", id, last)
			}
			last = id
			want[id] = f
		}
		if round > 0 {
			b.SetFileLive(1, round%2 == 0) // a file of an earlier batch
			f := want[1]
			f.Live = round%2 == 0
			want[1] = f
			b.SetFileLive(last, true) // a file of this batch
			f = want[last]
			f.Live = true
			want[last] = f
		}
		if err := b.Commit(State{SnapshotID: int64(round)}); err != nil {
			t.Fatal(err)
		}
		if round == 1 {
			// Reopen in the middle: ids continue, the cache is rebuilt.
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openT(t, dir)
			tb = tableT(t, db, "t")
		}
	}
	check := func() {
		t.Helper()
		got, err := tb.Files()
		if err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(got, want, fileEqual) {
			t.Fatalf("Files = %v\nwant %v", got, want)
		}
		for id, w := range want {
			if f, err := tb.File(id); err != nil || !fileEqual(f, w) {
				t.Fatalf("File(%d) = %v %v, want %v", id, f, err, w)
			}
		}
		if _, err := tb.File(last + 1); !errors.Is(err, ErrNoFile) {
			t.Fatalf("File(unknown) = %v, want ErrNoFile", err)
		}
	}
	check()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir)
	defer db.Close()
	tb = tableT(t, db, "t")
	check()
	b := tb.NewBatch()
	if id := b.AddFile(File{}); id != last+1 {
		t.Fatalf("id after reopen = %d, want %d", id, last+1)
	}
	b.Close()
}

func fileEqual(a, b File) bool {
	return a.Path == b.Path && a.SpecID == b.SpecID && bytes.Equal(a.Partition, b.Partition) && a.Live == b.Live
}

func TestSecondOpenInProcess(t *testing.T) {
	dir := t.TempDir()
	db := openT(t, dir)
	_, err := Open(dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "already open in this process") || errors.Is(err, ErrCorrupt) {
		t.Fatalf("second Open = %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir)
	db.Close()
}

func TestCorruptDirectory(t *testing.T) {
	for _, pattern := range []string{"MANIFEST-*", "OPTIONS-*"} {
		t.Run(pattern, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "index")
			db := openT(t, dir)
			tb := tableT(t, db, "t")
			b := tb.NewBatch()
			b.Put([]byte("k"), Loc{File: b.AddFile(File{}), Pos: 1})
			if err := b.Commit(State{SnapshotID: 1}); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(dir, pattern))
			if len(files) == 0 {
				t.Fatalf("no %s in %s", pattern, dir)
			}
			garbage := bytes.Repeat([]byte("garbage\x00\xff"), 300)
			for _, f := range files {
				if err := os.WriteFile(f, garbage, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Open(dir, Options{})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open of a corrupt directory = %v, want ErrCorrupt", err)
			}
			if err := Remove(dir); err != nil {
				t.Fatal(err)
			}
			db = openT(t, dir)
			defer db.Close()
			if _, ok, err := tableT(t, db, "t").State(); ok || err != nil {
				t.Fatalf("State after Remove: %v %v", ok, err)
			}
		})
	}
}

func TestFormatVersion(t *testing.T) {
	dir := t.TempDir()
	db := openT(t, dir)
	if err := db.pdb.Set(keyVersion, encodeUvarint(formatVersion+1), nil); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "format version 2") {
		t.Fatalf("Open of a newer format = %v", err)
	}
}

func TestRemove(t *testing.T) {
	if err := Remove(filepath.Join(t.TempDir(), "missing")); err != nil {
		t.Fatalf("Remove(missing) = %v", err)
	}
	notIndex := t.TempDir()
	os.WriteFile(filepath.Join(notIndex, "notes.txt"), []byte("mine"), 0o600)
	if err := Remove(notIndex); err == nil || !strings.Contains(err.Error(), "no pebble database") {
		t.Fatalf("Remove of a directory that is no index = %v", err)
	}
	if _, err := os.Stat(filepath.Join(notIndex, "notes.txt")); err != nil {
		t.Fatal("Remove deleted a file of a directory that is no index")
	}
	dir := t.TempDir()
	db := openT(t, dir)
	if err := Remove(dir); err == nil {
		t.Fatal("Remove of an open index succeeded")
	}
	db.Close()
	if err := Remove(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("directory still there: %v", err)
	}
}

func TestOpenCreatesPrivateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	db := openT(t, dir)
	defer db.Close()
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v %v", st.Mode(), err)
	}
	s := db.Stats()
	if s.DiskBytes == 0 {
		t.Fatalf("Stats = %+v", s)
	}
}

func TestEncoding(t *testing.T) {
	for _, loc := range []Loc{{}, {File: 1, Pos: 0}, {File: 1<<32 - 1, Pos: 1<<63 - 1}} {
		if got, err := decodeLoc(encodeLoc(nil, loc)); err != nil || got != loc {
			t.Fatalf("Loc %v → %v %v", loc, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {0x80}, {1}, {1, 2, 3}, {0xff, 0xff, 0xff, 0xff, 0x7f, 0}} {
		if _, err := decodeLoc(bad); err == nil {
			t.Fatalf("decodeLoc(%x) succeeded", bad)
		}
	}
	for _, s := range []State{{}, {SnapshotID: -1}, {SnapshotID: 1<<63 - 1, Complete: true},
		{SnapshotID: 7, Through: "s3://b/t/data/00001-0-x.parquet"}, {SnapshotID: -9, Through: strings.Repeat("é", 300)}} {
		if got, err := decodeState(encodeState(s)); err != nil || got != s {
			t.Fatalf("State %v → %v %v", s, got, err)
		}
	}
	// A state written before Through existed reads the same.
	if got, err := decodeState([]byte{1, 0x0e}); err != nil || got != (State{SnapshotID: 7, Complete: true}) {
		t.Fatalf("an older state reads %v, %v", got, err)
	}
	for _, bad := range [][]byte{{4, 2}, {2, 2}, {2, 2, 3, 'a'}, {2, 2, 0}, {0, 2, 'x'}} {
		if s, err := decodeState(bad); err == nil {
			t.Fatalf("decodeState(%x) = %v, want an error", bad, s)
		}
	}
	// Table prefixes: every table's range holds only its own keys.
	for _, n := range []uint64{1, 127, 128, 255, 256, 16383, 16384} {
		p := tablePrefix(n)
		end := prefixEnd(p)
		for _, m := range []uint64{n - 1, n + 1, n * 128, n*128 + 1, n + 128} {
			q := append(tablePrefix(m), kindKey, 0xff, 0xff)
			if m != n && bytes.Compare(q, p) >= 0 && bytes.Compare(q, end) < 0 {
				t.Fatalf("a key of table %d is in the range of table %d", m, n)
			}
		}
		if k := append(tablePrefix(n), kindKey, 0xff, 0xff, 0xff); bytes.Compare(k, end) >= 0 {
			t.Fatalf("a key of table %d is out of its range", n)
		}
	}
}

// TestCorruptSSTable damages the data blocks of an sstable: lookups return
// ErrCorrupt (not a crash), and so does the next Open, until Remove.
func TestCorruptSSTable(t *testing.T) {
	dir := t.TempDir()
	db := openT(t, dir)
	tb := tableT(t, db, "t")
	b := tb.NewBatch()
	f := b.AddFile(File{Path: "f"})
	var keys [][]byte
	for i := range 50000 {
		k := fmt.Appendf(nil, "key-%08d", i)
		keys = append(keys, k)
		b.Put(k, Loc{File: f, Pos: int64(i)})
	}
	if err := b.Commit(State{SnapshotID: 1, Complete: true}); err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	var biggest string
	var size int64
	for _, p := range ssts {
		if st, err := os.Stat(p); err == nil && st.Size() > size {
			biggest, size = p, st.Size()
		}
	}
	if size < 64<<10 {
		t.Fatalf("no sstable of 64 KiB or more: %v", ssts)
	}
	fh, err := os.OpenFile(biggest, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	for off := size / 4; off < size/2; off += 4096 { // not the first block: it holds the format version
		fh.WriteAt([]byte("garbage!"), off)
	}
	fh.Close()

	db, err = Open(dir, Options{})
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open = %v, want nil or ErrCorrupt", err)
		}
		t.Logf("Open: %v", err)
	} else {
		tb = tableT(t, db, "t")
		_, _, err := tb.Lookup(keys)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Lookup over corrupt blocks = %v, want ErrCorrupt", err)
		}
		t.Logf("Lookup: %v", err)
		if err := tb.Scan(func([]byte, Loc) error { return nil }); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Scan over corrupt blocks = %v, want ErrCorrupt", err)
		}
		db.Close()
		if _, err := Open(dir, Options{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open after a lookup found corruption = %v, want ErrCorrupt", err)
		}
	}
	if err := Remove(dir); err != nil {
		t.Fatal(err)
	}
	db = openT(t, dir)
	db.Close()
}

// TestConcurrent runs lookups next to commits on two tables: a lookup (one
// iterator) sees a batch whole or not at all, and never goes back.
func TestConcurrent(t *testing.T) {
	db := openT(t, t.TempDir())
	defer db.Close()
	const nkeys, batches = 100, 150
	keys := make([][]byte, nkeys)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "k%d", i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, uuid := range []string{"a", "b"} {
		tb := tableT(t, db, uuid)
		wg.Add(1)
		go func() { // writer
			defer wg.Done()
			for i := int64(1); i <= batches; i++ {
				b := tb.NewBatch()
				f := b.AddFile(File{Path: uuid})
				for _, k := range keys {
					b.Put(k, Loc{File: f, Pos: i})
				}
				if err := b.Commit(State{SnapshotID: i}); err != nil {
					errs <- err
					return
				}
			}
		}()
		for range 2 {
			wg.Add(1)
			go func() { // reader
				defer wg.Done()
				var last int64
				for last < batches {
					locs, found, err := tb.Lookup(keys)
					if err != nil {
						errs <- err
						return
					}
					if !found[0] {
						continue
					}
					for i := range locs {
						if !found[i] || locs[i].Pos != locs[0].Pos || locs[i].File != uint32(locs[0].Pos) {
							errs <- fmt.Errorf("table %s: key %d at %v, key 0 at %v: a batch seen in part", uuid, i, locs[i], locs[0])
							return
						}
					}
					if locs[0].Pos < last {
						errs <- fmt.Errorf("table %s: went back from %d to %d", uuid, last, locs[0].Pos)
						return
					}
					last = locs[0].Pos
					if _, err := tb.File(locs[0].File); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
