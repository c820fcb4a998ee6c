package lake

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
)

// This file reads what the key index is built from: the primary keys of a
// table's live rows with the data file and position of each, straight from
// the Parquet files (key columns only) and their delete files.

// keyColumns names a table's primary-key columns by Iceberg field id, in
// key order.
type keyColumns struct {
	ids    []int
	schema *cdcsync.TableSchema
}

func newKeyColumns(sc *iceberg.Schema, ts *cdcsync.TableSchema) (keyColumns, error) {
	kc := keyColumns{schema: ts}
	for _, c := range ts.PrimaryKey {
		f, ok := sc.FindFieldByName(ts.Columns[c].Name)
		if !ok {
			return kc, fmt.Errorf("primary key column %s of %s is not in the Iceberg schema", ts.Columns[c].Name, ts.ID)
		}
		kc.ids = append(kc.ids, f.ID)
	}
	return kc, nil
}

// readFileKeys reads the key columns of the Parquet file at path in row
// order and calls fn with each row's position and key encoding (valid until
// fn returns). Columns are found by their Iceberg field ids.
func readFileKeys(ctx context.Context, fsys icebergio.IO, path string, kc keyColumns, fn func(pos int64, key []byte) error) error {
	pr, err := openParquetReader(fsys, path, 1<<16, writeBuffers)
	if err != nil {
		return err
	}
	defer pr.close()
	pf, fr := pr.pf, pr.fr
	leaves := make([]int, len(kc.ids))
	for i := range leaves {
		leaves[i] = -1
	}
	sch := pf.MetaData().Schema
	for c := 0; c < sch.NumColumns(); c++ {
		node := sch.Column(c).SchemaNode()
		if node.Parent() != sch.Root() {
			continue // nested: never a key
		}
		for i, id := range kc.ids {
			if int(node.FieldID()) == id {
				leaves[i] = c
			}
		}
	}
	for i, l := range leaves {
		if l < 0 {
			return fmt.Errorf("%s has no column with field id %d (primary key column %s of %s)", path, kc.ids[i], kc.schema.Columns[kc.schema.PrimaryKey[i]].Name, kc.schema.ID)
		}
	}
	// The reader returns the columns in file order; map them back to key
	// order by field id.
	uniq := slices.Compact(slices.Sorted(slices.Values(leaves)))
	rr, err := fr.GetRecordReader(ctx, uniq, nil)
	if err != nil {
		return fmt.Errorf("read the key columns of %s: %w", path, err)
	}
	defer rr.Release()
	order := make([]int, len(kc.ids)) // key column i is record column order[i]
	for i, l := range leaves {
		for j, u := range uniq {
			if u == l {
				order[i] = j
			}
		}
	}
	var pos int64
	var key []byte
	for rr.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec := rr.RecordBatch()
		cols := make([]arrow.Array, len(order))
		for i, j := range order {
			cols[i] = rec.Column(j)
		}
		for r := 0; r < int(rec.NumRows()); r++ {
			key = key[:0]
			for i, col := range cols {
				if col.IsNull(r) {
					return fmt.Errorf("%s row %d: primary key column %s is null", path, pos, kc.schema.Columns[kc.schema.PrimaryKey[i]].Name)
				}
				v, err := arrowValue(col, r)
				if err != nil {
					return fmt.Errorf("%s: primary key column %s: %w", path, kc.schema.Columns[kc.schema.PrimaryKey[i]].Name, err)
				}
				var ok bool
				if key, ok = cdcsync.AppendValue(key, v); !ok {
					return fmt.Errorf("%s row %d: primary key value %v (%T) has no encoding", path, pos, v, v)
				}
			}
			if err := fn(pos, key); err != nil {
				return err
			}
			pos++
		}
	}
	if err := rr.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// eachPositionDelete calls fn with every (path, position) of the position
// delete file or deletion vector del, until fn returns false. fn may keep
// the path.
func eachPositionDelete(ctx context.Context, fsys icebergio.IO, del iceberg.DataFile, fn func(path string, pos int64) bool) error {
	return eachPositionDeleteWith(ctx, fsys, del, writeBuffers, fn)
}

// eachPositionDeleteWith is eachPositionDelete reading into mem.
func eachPositionDeleteWith(ctx context.Context, fsys icebergio.IO, del iceberg.DataFile, mem memory.Allocator, fn func(path string, pos int64) bool) error {
	if table.IsDeletionVector(del) {
		return eachDVDelete(fsys, nil, del, fn)
	}
	pr, err := openParquetReader(fsys, del.FilePath(), 1<<16, mem)
	if err != nil {
		return err
	}
	defer pr.close()
	pathCol, posCol := -1, -1
	sch := pr.pf.MetaData().Schema
	for c := 0; c < sch.NumColumns(); c++ {
		switch int(sch.Column(c).SchemaNode().FieldID()) {
		case iceberg.PositionalDeleteSchema.Field(0).ID:
			pathCol = c
		case iceberg.PositionalDeleteSchema.Field(1).ID:
			posCol = c
		}
	}
	if pathCol < 0 || posCol < 0 {
		return fmt.Errorf("position delete file %s has no file_path or pos column", del.FilePath())
	}
	// The paths repeat (a file's rows are in path order): read as a
	// dictionary, each is decoded once a batch instead of once a row.
	if err := pr.readDict(pathCol); err != nil {
		return fmt.Errorf("read %s: %w", del.FilePath(), err)
	}
	rr, err := pr.fr.GetRecordReader(ctx, []int{pathCol, posCol}, nil)
	if err != nil {
		return fmt.Errorf("read %s: %w", del.FilePath(), err)
	}
	defer rr.Release()
	first := 0
	if pathCol > posCol {
		first = 1
	}
	var last string // the path of the previous row, fn's to keep
	for rr.Next() {
		rec := rr.RecordBatch()
		paths, ok1 := rec.Column(first).(*array.Dictionary)
		poss, ok2 := rec.Column(1 - first).(*array.Int64)
		var dict *array.String
		if ok1 {
			dict, ok1 = paths.Dictionary().(*array.String)
		}
		if !ok1 || !ok2 {
			return fmt.Errorf("position delete file %s has columns of types %s and %s, want string and int64", del.FilePath(), rec.Column(first).DataType(), rec.Column(1-first).DataType())
		}
		for r := 0; r < paths.Len(); r++ {
			if paths.IsNull(r) {
				return fmt.Errorf("position delete file %s: row %d has no file_path", del.FilePath(), r)
			}
			// The reader's buffers are recycled (writeBuffers): fn gets
			// a copy, made once for each run of rows of a path.
			if v := dict.Value(paths.GetValueIndex(r)); v != last {
				last = strings.Clone(v)
			}
			if !fn(last, poss.Value(r)) {
				return nil
			}
		}
	}
	if err := rr.Err(); err != nil {
		return fmt.Errorf("read %s: %w", del.FilePath(), err)
	}
	return nil
}

// liveKeys calls fn with the key, data file and position of every live row
// of tbl at snapshot snap (the rows a reader sees): the rows of each data
// file less its position and equality deletes. It goes through the data
// files in path order, skips those up to after (a rebuild that resumes),
// and calls done, when set, with the path of each file it finished. It
// returns the number of position delete files and deletion vectors it
// read, each once however many data files it applies to.
func liveKeys(ctx context.Context, tbl *table.Table, snap int64, ts *cdcsync.TableSchema, after string,
	fn func(key []byte, df iceberg.DataFile, pos int64) error, done func(path string) error) (deleteReads int, err error) {
	kc, err := newKeyColumns(tbl.Schema(), ts)
	if err != nil {
		return 0, err
	}
	scan := tbl.Scan(table.WithSnapshotID(snap))
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return 0, fmt.Errorf("plan a scan of %s at snapshot %d: %w", ts.ID, snap, err)
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return 0, fmt.Errorf("open the file IO of %s: %w", ts.ID, err)
	}
	slices.SortStableFunc(tasks, func(a, b table.FileScanTask) int { return strings.Compare(a.File.FilePath(), b.File.FilePath()) })
	if after != "" {
		tasks = slices.DeleteFunc(tasks, func(tk table.FileScanTask) bool { return tk.File.FilePath() <= after })
	}
	eqKeys := map[string]map[string]struct{}{} // per equality delete file
	posDels := newPosDeletes([]table.CompactionTaskGroup{{Tasks: tasks}})
	defer func() { deleteReads = posDels.reads }()
	if err := posDels.prefetchDVs(ctx, fsys, tasks); err != nil {
		return 0, err
	}
	for _, task := range tasks {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := posDels.load(ctx, fsys, task.DeleteFiles); err != nil {
			return 0, err
		}
		if err := posDels.loadDVs(fsys, task.DeletionVectorFiles); err != nil {
			return 0, err
		}
		gone := posDels.of(task.File.FilePath()) // ascending
		var eqs []map[string]struct{}
		for _, d := range task.EqualityDeleteFiles {
			set, ok := eqKeys[d.FilePath()]
			if !ok {
				if !sameIDs(d.EqualityFieldIDs(), kc.ids) {
					return 0, fmt.Errorf("equality delete file %s of %s deletes by field ids %v, not by the primary key %v; cdcsync's key index cannot follow it: compact the table (cdcsync compact %s) and restart",
						d.FilePath(), ts.ID, d.EqualityFieldIDs(), kc.ids, ts.ID)
				}
				set = map[string]struct{}{}
				if err := readFileKeys(ctx, fsys, d.FilePath(), kc, func(_ int64, key []byte) error {
					set[string(key)] = struct{}{}
					return nil
				}); err != nil {
					return 0, err
				}
				eqKeys[d.FilePath()] = set
			}
			eqs = append(eqs, set)
		}
		if err := readFileKeys(ctx, fsys, task.File.FilePath(), kc, func(pos int64, key []byte) error { // pos ascending
			for len(gone) > 0 && gone[0] < pos {
				gone = gone[1:]
			}
			if len(gone) > 0 && gone[0] == pos {
				return nil
			}
			for _, set := range eqs {
				if _, ok := set[string(key)]; ok {
					return nil
				}
			}
			return fn(key, task.File, pos)
		}); err != nil {
			return 0, err
		}
		if done != nil {
			if err := done(task.File.FilePath()); err != nil {
				return 0, err
			}
		}
	}
	return 0, nil
}

func sameIDs(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[int]bool{}
	for _, x := range a {
		seen[x] = true
	}
	for _, x := range b {
		if !seen[x] {
			return false
		}
	}
	return true
}

// parquetReader is a Parquet file open for reading as Arrow.
type parquetReader struct {
	f   icebergio.File
	pf  *file.Reader
	fr  *pqarrow.FileReader
	mem memory.Allocator
}

// openParquetReader opens the Parquet file at path, to read it in batches
// of batch rows into Arrow buffers from mem; props, when set, are the
// reader's properties. With writeBuffers, the buffers are recycled when
// released: a value kept past its record's Release must be a copy.
// Records handed to iceberg-go's writers must not be: its partitioned
// writer keeps string partition values that point into them.
func openParquetReader(fsys icebergio.IO, path string, batch int64, mem memory.Allocator, props ...*parquet.ReaderProperties) (*parquetReader, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	var opts []file.ReadOption
	for _, p := range props {
		opts = append(opts, file.WithReadProps(p))
	}
	pf, err := file.NewParquetReader(f, opts...)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read the Parquet footer of %s: %w", path, err)
	}
	r := &parquetReader{f: f, pf: pf, mem: mem}
	if err := r.newArrowReader(pqarrow.ArrowReadProperties{BatchSize: batch}); err != nil {
		r.close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return r, nil
}

func (r *parquetReader) newArrowReader(props pqarrow.ArrowReadProperties) error {
	fr, err := pqarrow.NewFileReader(r.pf, props, r.mem)
	if err != nil {
		return err
	}
	r.fr = fr
	return nil
}

// readDict makes the Arrow reader read the leaf columns cols as
// dictionary arrays.
func (r *parquetReader) readDict(cols ...int) error {
	props := r.fr.Props
	for _, c := range cols {
		props.SetReadDict(c, true)
	}
	return r.newArrowReader(props)
}

func (r *parquetReader) close() {
	r.pf.Close()
	r.f.Close()
}
