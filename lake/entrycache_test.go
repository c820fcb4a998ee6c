package lake

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// checkHeldEntries compares the delete manifest entries the table holds
// (deleteEntries) with what a reader of the current snapshot's manifests
// gets: the next commit writes the held ones again as they are, so any
// difference (a sequence number, above all: a vector with too low a one
// no longer applies to its file) would be written into the table.
func checkHeldEntries(t *testing.T, tbl *Table) (held int) {
	t.Helper()
	cur := tbl.current()
	fsys, mfs := snapshotManifests(t, cur, cur.CurrentSnapshot())
	for _, mf := range mfs {
		es, ok := tbl.state.deletes.get(mf.FilePath())
		if !ok {
			continue
		}
		var want []string
		for en, err := range mf.Entries(fsys, true) {
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, describeEntry(en))
		}
		if len(want) != len(es) {
			t.Fatalf("%s holds %d live entries; %d are held for it", mf.FilePath(), len(want), len(es))
		}
		for i, e := range es {
			if got := describeEntry(e); got != want[i] {
				t.Fatalf("entry %d of %s is held as\n%s\nand reads as\n%s", i, mf.FilePath(), got, want[i])
			}
		}
		held += len(es)
	}
	return held
}

// describeEntry says what writing e again as an existing entry writes.
func describeEntry(e iceberg.ManifestEntry) string {
	df := e.DataFile()
	fseq := int64(-1)
	if p := e.FileSequenceNum(); p != nil {
		fseq = *p
	}
	s := fmt.Sprintf("snapshot %d seq %d fileseq %d content %d path %s format %s spec %d partition %v count %d size %d"+
		" sizes %v values %v nulls %v nans %v lower %v upper %v key %x splits %v eq %v",
		e.SnapshotID(), e.SequenceNum(), fseq, df.ContentType(), df.FilePath(), df.FileFormat(), df.SpecID(), df.Partition(),
		df.Count(), df.FileSizeBytes(), df.ColumnSizes(), df.ValueCounts(), df.NullValueCounts(), df.NaNValueCounts(),
		df.LowerBoundValues(), df.UpperBoundValues(), df.KeyMetadata(), df.SplitOffsets(), df.EqualityFieldIDs())
	if p := df.SortOrderID(); p != nil {
		s += fmt.Sprintf(" sort %d", *p)
	}
	if p := df.FirstRowID(); p != nil {
		s += fmt.Sprintf(" firstrow %d", *p)
	}
	if p := df.ReferencedDataFile(); p != nil {
		s += " ref " + *p
	}
	if p := df.ContentOffset(); p != nil {
		s += fmt.Sprintf(" offset %d", *p)
	}
	if p := df.ContentSizeInBytes(); p != nil {
		s += fmt.Sprintf(" length %d", *p)
	}
	return s
}

// The entries of delete manifests a commit wrote are held for the next
// one, equal to what a reader of the manifests gets, so a dv epoch that
// replaces vectors reads no manifest; compactions between epochs (which
// also remove vectors) leave what is held true, and the rows stay the
// model's.
func TestDeleteEntriesHeldBetweenCommits(t *testing.T) {
	for _, mode := range []string{DeletesPosition, DeletesDV} {
		t.Run(mode, func(t *testing.T) {
			e := newKVMode(t, "p", mode)
			e.tbl.deleteManifestEntries = 16 // several delete manifests an epoch
			r := rand.New(rand.NewPCG(3, 4))
			e.commit(nil, keys(1, 400), "v0", nil)
			for i := 0; i < 16; i++ {
				forgot := i == 10 // as after a restart
				if forgot {
					e.tbl.state.deletes.committed(nil, nil)
				}
				e.randomEpoch(r, nil, 400)
				held := checkHeldEntries(t, e.tbl)
				c := e.tbl.LastCommitTimes()
				if live := liveDeleteEntries(t, e.tbl.current()); held != live {
					t.Fatalf("epoch %d: %d delete entries held of %d live", i, held, live)
				}
				switch {
				case forgot && e.tbl.current().CurrentSnapshot().Summary.Properties["removed-dvs"] != "" && c.EntriesRead == 0:
					t.Fatalf("epoch %d read no manifest entry; none was held, and it replaced vectors", i)
				case !forgot && i > 0 && c.EntriesRead != 0:
					t.Fatalf("epoch %d read %d manifest entries; its parent's were held", i, c.EntriesRead)
				}
				if i%5 == 4 {
					if _, err := e.tbl.Compact(t.Context(), testOpts()); err != nil {
						t.Fatal(err)
					}
					checkHeldEntries(t, e.tbl)
				}
			}
			e.assertModel(e.tbl.current())
		})
	}
}

// liveDeleteEntries counts the live entries of tbl's delete manifests.
func liveDeleteEntries(t *testing.T, tbl *table.Table) int {
	t.Helper()
	fsys, mfs := snapshotManifests(t, tbl, tbl.CurrentSnapshot())
	n := 0
	for _, mf := range mfs {
		if mf.ManifestContent() != iceberg.ManifestContentDeletes {
			continue
		}
		for _, err := range mf.Entries(fsys, true) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	return n
}

// The held entries are bounded by the Lake's budget: a snapshot whose
// live delete entries do not fit holds none (its commits read them, as
// before), and gives back what it held.
func TestDeleteEntriesBounded(t *testing.T) {
	const each = 100
	manifest := func(path string, c iceberg.ManifestContent) iceberg.ManifestFile {
		return iceberg.NewManifestFile(2, path, 1, 0, 1).Content(c).Build()
	}
	mans := []iceberg.ManifestFile{
		manifest("a", iceberg.ManifestContentDeletes),
		manifest("b", iceberg.ManifestContentDeletes),
		manifest("data", iceberg.ManifestContentData),
	}
	b := newEntryBudget(2 * each * heldEntryBytes)
	c := deleteEntries{claim: &claim{b: b}}
	c.committed(mans, map[string][]iceberg.ManifestEntry{
		"a":    make([]iceberg.ManifestEntry, each),
		"b":    make([]iceberg.ManifestEntry, each),
		"data": make([]iceberg.ManifestEntry, 10),
		"gone": make([]iceberg.ManifestEntry, 10),
	})
	for path, want := range map[string]bool{"a": true, "b": true, "data": false, "gone": false} {
		if _, ok := c.get(path); ok != want {
			t.Errorf("%s held: %t, want %t", path, ok, want)
		}
	}
	if got, want := b.Used(), int64(2*each*heldEntryBytes); got != want {
		t.Errorf("the budget counts %d bytes used; the held entries take %d", got, want)
	}
	// b is carried over as it was; a grows past the budget.
	c.committed(mans, map[string][]iceberg.ManifestEntry{"a": make([]iceberg.ManifestEntry, each+1)})
	if _, ok := c.get("b"); ok {
		t.Errorf("%d entries held; the budget has room for %d", 2*each+1, 2*each)
	}
	if got := b.Used(); got != 0 {
		t.Errorf("the budget counts %d bytes used; nothing is held", got)
	}
}
