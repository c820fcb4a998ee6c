package lake

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table/dv"
)

// puffinFiles lists the Puffin files under the warehouse.
func (e *kvEnv) puffinFiles() map[string]bool {
	e.t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(e.dir, "warehouse"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".puffin") {
			out[p] = true
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// An epoch that replaces the deletion vectors an earlier epoch of the same
// process wrote merges their positions from memory: it reads no Puffin
// file (here the earlier vectors' file is gone, and the epoch still
// commits, with the earlier deletes kept). A process that did not write
// them (a restart) reads them.
func TestEpochsReplaceVectorsFromMemory(t *testing.T) {
	e := newKVMode(t, "p", DeletesDV)
	e.commit(nil, keys(1, 100), "v1", nil)
	e.commit(nil, nil, "", keys(1, 10)) // a vector for the data file
	first := e.puffinFiles()
	if len(first) != 1 {
		t.Fatalf("%d Puffin files after the first deletes, want 1", len(first))
	}
	// A restarted process cannot merge with a vector whose file is
	// unreadable: it reads it.
	restarted := e.reopen()
	for p := range first {
		if err := os.Rename(p, p+".away"); err != nil {
			t.Fatal(err)
		}
	}
	e.epoch++
	d, r := e.change(keys(20, 25), "v2", keys(11, 12))
	if err := restarted.Commit(t.Context(), Epoch{Number: e.epoch, Pos: pos(e.epoch)}, d, r, nil); err == nil {
		t.Fatal("a restarted process committed without reading the vector it replaces")
	}
	e.epoch--
	// The process that wrote the vector replaces it without reading it.
	e.commit(nil, keys(20, 25), "v2", keys(11, 12))
	for p := range first {
		if err := os.Rename(p+".away", p); err != nil {
			t.Fatal(err)
		}
	}
	e.assertModel(e.tbl.Iceberg())
	for p := range first {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	// No snapshot to come needs the first vector's file: the current one
	// reads without it.
	e.assertModel(e.tbl.Iceberg())
}

// An epoch whose deletion vectors fail leaves none of the data files it
// wrote at the same time.
func TestFailedVectorsLeaveNoDataFiles(t *testing.T) {
	e := newKVMode(t, "p", DeletesDV)
	e.commit(nil, keys(1, 100), "v1", nil)
	e.commit(nil, nil, "", keys(1, 10)) // a vector for the data file
	// A restarted process, its key index caught up, then the vector's file
	// unreadable: the next epoch that replaces it fails writing vectors.
	e.tbl = e.reopen()
	e.commit(nil, keys(200, 210), "v2", nil)
	puffin := e.puffinFiles()
	for p := range puffin {
		if err := os.Rename(p, p+".away"); err != nil {
			t.Fatal(err)
		}
	}
	before := e.parquetFiles()
	d, r := e.change(keys(20, 25), "v3", keys(11, 12))
	err := e.tbl.Commit(t.Context(), Epoch{Number: e.epoch + 1, Pos: pos(e.epoch + 1)}, d, r, nil)
	if err == nil || !strings.Contains(err.Error(), "deletion vector") {
		t.Fatalf("the epoch committed, or failed elsewhere than its vectors (%v)", err)
	}
	if after := e.parquetFiles(); !slices.Equal(after, before) {
		t.Errorf("the failed epoch left data files: %d before, %d after", len(before), len(after))
	}
	for p := range puffin {
		if err := os.Rename(p+".away", p); err != nil {
			t.Fatal(err)
		}
	}
	e.commit(nil, keys(20, 25), "v3", keys(11, 12))
	e.assertModel(e.tbl.Iceberg())
}

func testDV(path string, offset, size int64) iceberg.DataFile {
	b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentPosDeletes, path, iceberg.PuffinFile, nil, nil, nil, 1, 100)
	if err != nil {
		panic(err)
	}
	b.ContentOffset(offset).ContentSizeInBytes(size).ReferencedDataFile("data-" + path)
	return b.Build()
}

// The cache keeps what fits in its budget, dropping the oldest first, and
// forgets superseded vectors.
func TestDVCacheBudget(t *testing.T) {
	one := dvMemory(testDV("a", 4, 10))
	c := newDVCache(3 * one)
	bm := dv.NewRoaringPositionBitmap()
	bm.Set(7)
	var dvs []iceberg.DataFile
	for i := range 5 {
		d := testDV("f"+string(rune('a'+i)), int64(4+i), 10)
		dvs = append(dvs, d)
		c.put(d, bm)
	}
	for i, d := range dvs {
		if got, want := c.get(d) != nil, i >= 2; got != want {
			t.Errorf("vector %d kept: %v, want %v (the budget holds the last three)", i, got, want)
		}
	}
	if c.bytes != 3*one {
		t.Errorf("bytes %d, want %d", c.bytes, 3*one)
	}
	c.drop(dvs[3:4])
	if c.get(dvs[3]) != nil || c.bytes != 2*one {
		t.Errorf("a dropped vector is still kept (%d bytes)", c.bytes)
	}
	// Same file, other offset: another vector.
	if c.get(testDV("fe", 5, 10)) != nil {
		t.Error("a vector at another offset of a kept one's file was found")
	}
	big := testDV("huge", 4, 10*one)
	if c.put(big, bm); c.get(big) != nil {
		t.Error("a vector larger than the budget was kept")
	}
	var nilCache *dvCache
	if nilCache.get(dvs[4]) != nil {
		t.Error("a nil cache found a vector")
	}
}

// A process that did not write the vectors it replaces reads them, each
// Puffin file once: here three vectors of one file and one of another.
func TestEpochsReadTheVectorsTheyReplace(t *testing.T) {
	e := newKVMode(t, "p", DeletesDV)
	for i := int64(0); i < 4; i++ {
		e.commit(nil, keys(1+100*i, 100*(i+1)), "v1", nil) // a data file each
	}
	e.commit(nil, nil, "", []int64{1, 101, 201})
	e.commit(nil, nil, "", []int64{301})
	if n := len(e.puffinFiles()); n != 2 {
		t.Fatalf("%d Puffin files, want 2", n)
	}
	e.tbl = e.reopen()
	e.commit(nil, []int64{2, 102}, "v2", []int64{3, 103, 203, 303})
	e.assertModel(e.tbl.Iceberg())
	if s := e.tbl.Iceberg().CurrentSnapshot().Summary.Properties; s["removed-dvs"] != "4" {
		t.Errorf("the epoch removed %s vectors, want the 4 it replaced", s["removed-dvs"])
	}
}
