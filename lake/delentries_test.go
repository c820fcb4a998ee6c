package lake

import (
	"fmt"
	"testing"

	"github.com/apache/iceberg-go"
)

// The delete manifest entries a table keeps are those a reader decodes
// from the files: same files, sequence numbers and snapshot ids. Checked
// after every epoch of a churn with compactions between, in each mode that
// writes delete files; and the table keeps some (else the check is empty).
func TestKeptDeleteEntriesMatchTheManifests(t *testing.T) {
	for _, mode := range []string{DeletesEquality, DeletesPosition, DeletesDV} {
		t.Run(mode, func(t *testing.T) {
			e := newKVMode(t, "p", mode)
			checked := 0
			for i := range 12 {
				e.churn(1)
				if i%5 == 4 {
					if _, err := e.tbl.Compact(t.Context(), testOpts()); err != nil {
						t.Fatal(err)
					}
				}
				checked += checkKeptEntries(t, e.tbl)
			}
			e.assertModel(e.tbl.Iceberg())
			if checked == 0 {
				t.Fatal("the table kept no delete manifest's entries")
			}
		})
	}
}

// checkKeptEntries compares the entries tb keeps with the decoded ones and
// returns how many manifests it compared.
func checkKeptEntries(t *testing.T, tb *Table) int {
	t.Helper()
	tbl := tb.Iceberg()
	fsys, err := tbl.FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mans, err := tbl.CurrentSnapshot().Manifests(fsys)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mans {
		kept := tb.state.delEntries.get(mf.FilePath())
		if kept == nil {
			continue
		}
		n++
		var decoded []string
		for e, err := range mf.Entries(fsys, true) {
			if err != nil {
				t.Fatal(err)
			}
			decoded = append(decoded, entryString(e))
		}
		if len(decoded) != len(kept) {
			t.Fatalf("%s: %d entries kept, %d decoded", mf.FilePath(), len(kept), len(decoded))
		}
		for i, e := range kept {
			if got := entryString(e); got != decoded[i] {
				t.Errorf("%s entry %d: kept %s, decoded %s", mf.FilePath(), i, got, decoded[i])
			}
		}
	}
	return n
}

func entryString(e iceberg.ManifestEntry) string {
	df := e.DataFile()
	off, size := int64(-1), int64(-1)
	if p := df.ContentOffset(); p != nil {
		off = *p
	}
	if p := df.ContentSizeInBytes(); p != nil {
		size = *p
	}
	ref := ""
	if p := df.ReferencedDataFile(); p != nil {
		ref = *p
	}
	return fmt.Sprintf("%s@%d+%d ref=%s content=%d rows=%d bytes=%d spec=%d part=%v snap=%d seq=%d fseq=%v eq=%v lower=%v upper=%v",
		df.FilePath(), off, size, ref, df.ContentType(), df.Count(), df.FileSizeBytes(), df.SpecID(), df.Partition(),
		e.SnapshotID(), e.SequenceNum(), deref(e.FileSequenceNum()), df.EqualityFieldIDs(), df.LowerBoundValues(), df.UpperBoundValues())
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
