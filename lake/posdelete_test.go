package lake

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/cdcsync/cdcsync"
)

// TestPositionDeletesByHand: the writer reports where each row landed,
// position delete files written for some of those places hide exactly
// those rows from iceberg-go's reader, and liveKeys, what the key index is
// built from, finds every other row at its place.
func TestPositionDeletesByHand(t *testing.T) {
	for _, spec := range [][]string{nil, {"bucket(4, id)"}, {"day(created_at)", "bucket(2, id)"}} {
		t.Run(fmt.Sprint(spec), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			cfg := partitionedConfig(t, dir, "", spec...)
			if spec == nil {
				cfg.Tables = nil
			}
			lk := openLake(t, cfg)
			tb, err := lk.EnsureTable(ctx, ordersSchema())
			if err != nil {
				t.Fatal(err)
			}
			const n = 500
			rows := make([]cdcsync.Row, n)
			model := map[int64]cdcsync.Row{}
			for i := range rows {
				rows[i] = orderRow(int64(i+1), int64(i%7), fmt.Sprint("v", i))
				model[int64(i+1)] = rows[i]
			}
			base := tb.current()
			locs := make([]rowLoc, n)
			data, err := tb.writeFiles(ctx, base, tb.dataFile, rows, locs)
			if err != nil {
				t.Fatal(err)
			}
			tx, err := tb.newTx(base, refOf(base.Metadata()))
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.NewRowDelta(nil).AddRows(data...).Commit(ctx); err != nil {
				t.Fatal(err)
			}
			next, err := tx.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tb.setCurrent(next)

			// Delete every third row by position.
			var targets []posTarget
			for i := 0; i < n; i += 3 {
				df := data[locs[i].file]
				vals, err := partitionTuple(next.Metadata(), df)
				if err != nil {
					t.Fatal(err)
				}
				targets = append(targets, posTarget{path: df.FilePath(), pos: locs[i].pos, spec: int(df.SpecID()), values: vals})
				delete(model, rows[i][0].(int64))
			}
			dels, err := tb.writePositionDeletes(ctx, next, targets)
			if err != nil {
				t.Fatal(err)
			}
			var got int64
			for _, d := range dels {
				if d.ContentType() != iceberg.EntryContentPosDeletes {
					t.Fatalf("%s: content %v", d.FilePath(), d.ContentType())
				}
				got += d.Count()
			}
			if got != int64(len(targets)) {
				t.Fatalf("the delete files hold %d rows, want %d", got, len(targets))
			}
			if spec != nil && len(dels) < 2 {
				t.Errorf("%d position delete files for deletes in several partitions, want one per partition", len(dels))
			}
			tx, err = tb.newTx(next, refOf(next.Metadata()))
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.NewRowDelta(nil).AddDeletes(dels...).Commit(ctx); err != nil {
				t.Fatal(err)
			}
			next, err = tx.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tb.setCurrent(next)
			assertOrders(t, next, model)

			// liveKeys: each live key once, at the place the writer said.
			want := map[string]rowLoc{}
			for i, r := range rows {
				if _, ok := model[r[0].(int64)]; ok {
					k, _ := ordersSchema().AppendKey(nil, r)
					want[string(k)] = locs[i]
				}
			}
			seen := 0
			_, err = liveKeys(ctx, next, next.CurrentSnapshot().SnapshotID, ordersSchema(), "", func(key []byte, df iceberg.DataFile, pos int64) error {
				l, ok := want[string(key)]
				if !ok {
					return fmt.Errorf("liveKeys found key %x, which is deleted or unknown", key)
				}
				if data[l.file].FilePath() != df.FilePath() || l.pos != pos {
					return fmt.Errorf("key %x at %s:%d, the writer put it at %s:%d", key, df.FilePath(), pos, data[l.file].FilePath(), l.pos)
				}
				delete(want, string(key))
				seen++
				return nil
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) > 0 || seen != len(model) {
				t.Fatalf("liveKeys saw %d keys, missed %d; want %d", seen, len(want), len(model))
			}
		})
	}
}

func TestPartitionTupleEncoding(t *testing.T) {
	for _, vals := range []partitionRecord{
		nil,
		{nil},
		{int32(-5), int64(1) << 40, iceberg.Date(19000), "eu", []byte{0, 1}, true, false},
		{float32(1.5), float64(-2.25), iceberg.Timestamp(1), iceberg.Time(3), iceberg.TimestampNano(9)},
	} {
		b, err := encodePartitionTuple(vals)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodePartitionTuple(b)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%#v", back) != fmt.Sprintf("%#v", vals) && !(len(vals) == 0 && len(back) == 0) {
			t.Errorf("%#v came back as %#v", vals, back)
		}
	}
	if _, err := decodePartitionTuple([]byte{'S', 9, 'a'}); err == nil {
		t.Error("a truncated tuple decoded")
	}
	if _, err := encodePartitionTuple(partitionRecord{struct{}{}}); err == nil {
		t.Error("an unknown type encoded")
	}
}

// TestPositionDeletePathsOutliveTheReader: the paths eachPositionDelete
// hands over stay right after the reader's buffers are recycled (callers
// keep them as map keys); with a poisoned pool, a path that pointed into
// them would read 0xA5.
func TestPositionDeletePathsOutliveTheReader(t *testing.T) {
	ctx := context.Background()
	lk := openLake(t, partitionedConfig(t, t.TempDir(), ""))
	tb, err := lk.EnsureTable(ctx, ordersSchema())
	if err != nil {
		t.Fatal(err)
	}
	var all []cdcsync.Row
	for e := int64(1); e <= 3; e++ {
		var rows []cdcsync.Row
		for i := range int64(100) {
			rows = append(rows, orderRow(100*e+i, i%7, fmt.Sprint("v", e)))
		}
		if err := tb.Commit(ctx, Epoch{Number: e, Pos: pos(e)}, nil, rows, nil); err != nil {
			t.Fatal(err)
		}
		all = append(all, rows...)
	}
	// One epoch updates every other row of the three files.
	var ups []cdcsync.Row
	for i, r := range all {
		if i%2 == 0 {
			ups = append(ups, cdcsync.Row{r[0], r[1], "again"})
		}
	}
	if err := tb.Commit(ctx, Epoch{Number: 4, Pos: pos(4)}, ups, ups, nil); err != nil {
		t.Fatal(err)
	}
	tasks, fsys := planWithFS(t, tb.Iceberg())
	data := map[string]bool{}
	dels := map[string]iceberg.DataFile{}
	for _, tk := range tasks {
		data[tk.File.FilePath()] = true
		for _, d := range tk.DeleteFiles {
			dels[d.FilePath()] = d
		}
	}
	if len(dels) == 0 {
		t.Fatal("the update wrote no position delete file")
	}
	pool := &bufPool{poison: true}
	kept := map[string]int{}
	for _, d := range dels {
		if err := eachPositionDeleteWith(ctx, fsys, d, pool, func(path string, _ int64) bool {
			kept[path]++
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for path, c := range kept {
		if !data[path] {
			t.Errorf("a kept path reads %q, not one of the table's data files", path)
		}
		n += c
	}
	if n != len(ups) || len(kept) != 3 {
		t.Fatalf("%d deletes over %d files, want %d over 3", n, len(kept), len(ups))
	}
}

// TestEpochDeletingOnlyAbsentRows: an epoch whose only changes delete rows
// the table does not hold (another writer deleted them first; verify's
// repair meets it) commits a snapshot that records its position, in every
// deletes mode, instead of failing on a row delta with no file at every
// retry.
func TestEpochDeletingOnlyAbsentRows(t *testing.T) {
	for _, mode := range []string{DeletesPosition, DeletesDV, DeletesEquality} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			tb := dayTable(t, mode)
			rows := []cdcsync.Row{orderRow(1, 1, "a"), orderRow(2, 2, "b")}
			if err := tb.Commit(ctx, Epoch{Number: 1, Pos: pos(1)}, nil, rows, nil); err != nil {
				t.Fatal(err)
			}
			absent := []cdcsync.Row{orderRow(7, 7, "x")}
			if err := tb.Commit(ctx, Epoch{Number: 2, Pos: pos(2)}, absent, nil, nil); err != nil {
				t.Fatalf("an epoch deleting only a row the table lacks: %v", err)
			}
			c, err := tb.Committed()
			if err != nil {
				t.Fatal(err)
			}
			if c.Epoch != 2 {
				t.Fatalf("the table records epoch %d, want 2", c.Epoch)
			}
			assertOrders(t, tb.Iceberg(), map[int64]cdcsync.Row{1: rows[0], 2: rows[1]})
		})
	}
}
