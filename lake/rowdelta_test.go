package lake

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// snapshotManifests returns tbl's file IO and the manifests of its
// snapshot s.
func snapshotManifests(t *testing.T, tbl *table.Table, s *table.Snapshot) (icebergio.IO, []iceberg.ManifestFile) {
	t.Helper()
	fsys, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := s.Manifests(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return fsys, mfs
}

// localPath is the file system path of a file of a local warehouse.
func localPath(p string) string { return strings.TrimPrefix(p, "file://") }

// TestEpochCommitsReadNoDataManifest: an epoch that updates and deletes
// rows by position commits without reading a data manifest of the table
// (iceberg-go's row delta read all of them at every commit to check that
// the data files its deletes name are live, the larger part of an epoch
// commit on a finely partitioned table, issue 23). The data manifests are
// moved away while the epoch commits, and the rows are the model's once
// they are back.
func TestEpochCommitsReadNoDataManifest(t *testing.T) {
	for _, mode := range []string{DeletesPosition, DeletesDV} {
		t.Run(mode, func(t *testing.T) {
			e := newKVMode(t, "p", mode)
			e.commit(nil, keys(1, 200), "v0", nil)
			e.commit(nil, keys(1, 10), "v1", []int64{20}) // a vector for the v0 file, replaced below
			tbl := e.tbl.current()
			_, mfs := snapshotManifests(t, tbl, tbl.CurrentSnapshot())
			var moved []string
			for _, mf := range mfs {
				if mf.ManifestContent() != iceberg.ManifestContentData {
					continue
				}
				p := localPath(mf.FilePath())
				if err := os.Rename(p, p+".away"); err != nil {
					t.Fatal(err)
				}
				moved = append(moved, p)
			}
			if len(moved) == 0 {
				t.Fatal("the table has no data manifest")
			}
			e.commit(nil, keys(5, 15), "v2", []int64{30, 40})
			for _, p := range moved {
				if err := os.Rename(p+".away", p); err != nil {
					t.Fatal(err)
				}
			}
			e.assertModel(e.tbl.current())
			if mode == DeletesDV {
				dvFiles(t, e.tbl.current())
			}
		})
	}
}

// TestEpochSnapshotsAddUp: the snapshots cdcsync writes for epochs keep
// the summary's totals equal to what their manifests hold, record each
// vector an epoch replaces as a DELETED entry of that epoch, and keep v3
// row lineage: each snapshot's first row id is where the table's counter
// was, and the counter moves by its added rows. Compactions (iceberg-go's
// snapshots) come between the epochs.
func TestEpochSnapshotsAddUp(t *testing.T) {
	for _, mode := range []string{DeletesEquality, DeletesPosition, DeletesDV} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			e := newKVMode(t, "p", mode)
			r := rand.New(rand.NewPCG(7, 8))
			e.commit(nil, keys(1, 300), "v0", nil)
			for i := 0; i < 24; i++ {
				before := e.tbl.current().Metadata()
				e.randomEpoch(r, nil, 300)
				after := e.tbl.current()
				checkTotals(t, after)
				checkEpochSnapshot(t, before, after)
				if i%8 == 7 {
					res, err := e.tbl.Compact(ctx, testOpts())
					if err != nil {
						t.Fatal(err)
					}
					checkTotals(t, e.tbl.current())
					if res.Committed() {
						checkRemovals(t, e.tbl.current(), res.Snapshot)
					}
				}
			}
			e.assertModel(e.tbl.current())
		})
	}
}

// checkTotals compares the current snapshot's summary totals with its
// manifests' live entries.
func checkTotals(t *testing.T, tbl *table.Table) {
	t.Helper()
	s := tbl.CurrentSnapshot()
	fsys, mfs := snapshotManifests(t, tbl, s)
	got := map[string]int64{}
	for _, mf := range mfs {
		for en, err := range mf.Entries(fsys, true) {
			if err != nil {
				t.Fatal(err)
			}
			df := en.DataFile()
			got["total-files-size"] += df.FileSizeBytes()
			switch df.ContentType() {
			case iceberg.EntryContentData:
				got["total-data-files"]++
				got["total-records"] += df.Count()
			case iceberg.EntryContentPosDeletes:
				got["total-delete-files"]++
				got["total-position-deletes"] += df.Count()
			case iceberg.EntryContentEqDeletes:
				got["total-delete-files"]++
				got["total-equality-deletes"] += df.Count()
			}
		}
	}
	for k, n := range got {
		if sum := s.Summary.Properties[k]; sum != strconv.FormatInt(n, 10) {
			t.Fatalf("snapshot %d (%s) says %s=%s; its manifests hold %d", s.SnapshotID, s.Summary.Operation, k, sum, n)
		}
	}
}

// checkEpochSnapshot checks the snapshot an epoch committed on before.
func checkEpochSnapshot(t *testing.T, before table.Metadata, after *table.Table) {
	t.Helper()
	s := after.CurrentSnapshot()
	p := s.Summary.Properties
	if parent := before.CurrentSnapshot(); s.ParentSnapshotID == nil || *s.ParentSnapshotID != parent.SnapshotID {
		t.Fatalf("the epoch's snapshot %d does not have the snapshot it was committed on (%d) as parent", s.SnapshotID, parent.SnapshotID)
	}
	if s.SequenceNumber != before.LastSequenceNumber()+1 {
		t.Fatalf("the epoch's snapshot has sequence number %d, want %d", s.SequenceNumber, before.LastSequenceNumber()+1)
	}
	fsys, mfs := snapshotManifests(t, after, s)
	var deleted, added int64
	for _, mf := range mfs {
		for en, err := range mf.Entries(fsys, false) {
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case en.SnapshotID() != s.SnapshotID:
			case en.Status() == iceberg.EntryStatusDELETED:
				deleted++
			case en.Status() == iceberg.EntryStatusADDED && en.DataFile().ContentType() == iceberg.EntryContentData:
				added += en.DataFile().Count()
			}
		}
	}
	if n, _ := strconv.ParseInt(p["removed-dvs"], 10, 64); n != deleted {
		t.Fatalf("the epoch says it removed %q vectors; its manifests record %d as deleted by it", p["removed-dvs"], deleted)
	}
	if n, _ := strconv.ParseInt(p["added-records"], 10, 64); n != added {
		t.Fatalf("the epoch says it added %q records; its manifests hold %d", p["added-records"], added)
	}
	if before.Version() < 3 {
		return
	}
	if s.FirstRowID == nil || *s.FirstRowID != before.NextRowID() || s.AddedRows == nil ||
		after.Metadata().NextRowID() != *s.FirstRowID+*s.AddedRows || *s.AddedRows < added {
		t.Fatalf("row lineage: the epoch's snapshot has first row id %v and %v added rows (table counter %d before, %d after; %d rows added)",
			s.FirstRowID, s.AddedRows, before.NextRowID(), after.Metadata().NextRowID(), added)
	}
}

// checkRemovals compares the removals a compaction's snapshot (id) counts
// in its summary with the DELETED entries its manifests attribute to it.
func checkRemovals(t *testing.T, tbl *table.Table, id int64) {
	t.Helper()
	s := tbl.Metadata().SnapshotByID(id)
	if s == nil {
		t.Fatalf("the compaction's snapshot %d is not in the table", id)
	}
	fsys, mfs := snapshotManifests(t, tbl, s)
	got := map[string]int64{}
	for _, mf := range mfs {
		for en, err := range mf.Entries(fsys, false) {
			if err != nil {
				t.Fatal(err)
			}
			if en.Status() != iceberg.EntryStatusDELETED || en.SnapshotID() != id {
				continue
			}
			if en.DataFile().ContentType() == iceberg.EntryContentData {
				got["deleted-data-files"]++
				got["deleted-records"] += en.DataFile().Count()
			} else {
				got["removed-delete-files"]++
			}
		}
	}
	for k, n := range got {
		if v := s.Summary.Properties[k]; v != strconv.FormatInt(n, 10) {
			t.Fatalf("the compaction's snapshot says %s=%s; its manifests record %d", k, v, n)
		}
	}
	if got["deleted-data-files"] == 0 && got["removed-delete-files"] == 0 {
		t.Fatalf("the compaction's snapshot %d (%s) records no removal", id, s.Summary.Operation)
	}
}

// TestDeleteManifestsSplit: a commit with more deletes than a delete
// manifest takes writes them as several manifests, and records the
// vectors it replaces, found across those manifests, in several too; rows,
// the replaced vectors and the live ones stay right, for this process and
// a restarted one.
func TestDeleteManifestsSplit(t *testing.T) {
	e := newKVMode(t, "p", DeletesDV)
	e.tbl.deleteManifestEntries = 3
	for i := int64(0); i < 10; i++ {
		e.commit(nil, keys(1+100*i, 100*(i+1)), "v1", nil) // a data file each
	}
	deleteManifests := func() (added, tombstones, live int) {
		t.Helper()
		tbl := e.tbl.Iceberg()
		snap := tbl.CurrentSnapshot()
		fsys, mans := snapshotManifests(t, tbl, snap)
		for _, mf := range mans {
			if mf.ManifestContent() != iceberg.ManifestContentDeletes || mf.SnapshotID() != snap.SnapshotID {
				continue
			}
			switch {
			case mf.HasAddedFiles():
				added++
			case mf.DeletedDataFiles() > 0 && !mf.HasExistingFiles():
				tombstones++
			}
		}
		for _, mf := range mans {
			if mf.ManifestContent() != iceberg.ManifestContentDeletes {
				continue
			}
			for _, err := range mf.Entries(fsys, true) {
				if err != nil {
					t.Fatal(err)
				}
				live++
			}
		}
		return added, tombstones, live
	}
	var del []int64
	for i := int64(0); i < 10; i++ {
		del = append(del, 1+100*i)
	}
	e.commit(nil, nil, "", del) // a vector for each of the 10 files
	e.assertModel(e.tbl.Iceberg())
	if added, _, live := deleteManifests(); added != 4 || live != 10 {
		t.Errorf("10 vectors: %d delete manifests added, %d live vectors; want 4 (at most 3 each) and 10", added, live)
	}
	for round := range 2 {
		if round == 1 {
			e.tbl = e.reopen() // reads the vectors it replaces
			e.tbl.deleteManifestEntries = 3
		}
		var set []int64
		for i := int64(0); i < 10; i++ {
			del[i]++
			set = append(set, 50+100*i)
		}
		e.commit(nil, set, fmt.Sprint("v", round+2), del) // replaces the 10 vectors
		e.assertModel(e.tbl.Iceberg())
		// The second round's updates also delete rows of the file the
		// first one added: 11 vectors.
		want := 10 + round
		added, tombs, live := deleteManifests()
		if added != 4 || tombs != 4 || live != want {
			t.Errorf("round %d: %d delete manifests added, %d of removed vectors, %d live vectors; want 4, 4 and %d", round, added, tombs, live, want)
		}
		if s := e.tbl.Iceberg().CurrentSnapshot().Summary.Properties; s["removed-dvs"] != "10" || s["added-dvs"] != fmt.Sprint(want) {
			t.Errorf("round %d: the epoch added %s and removed %s vectors, want %d and 10", round, s["added-dvs"], s["removed-dvs"], want)
		}
	}
}
