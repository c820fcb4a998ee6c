package lake

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// tableParquetFiles lists the data and delete files of tbl's current
// snapshot.
func tableParquetFiles(t *testing.T, tbl *table.Table) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if tbl.CurrentSnapshot() == nil {
		return out
	}
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		out[tk.File.FilePath()] = true
		for _, d := range append(append([]iceberg.DataFile{}, tk.DeleteFiles...), tk.EqualityDeleteFiles...) {
			out[d.FilePath()] = true
		}
	}
	return out
}

// columnChunks returns the row groups of a Parquet file and the column
// chunks of all of them, from its footer.
func columnChunks(t *testing.T, path string) (groups int, chunks []*metadata.ColumnChunkMetaData) {
	t.Helper()
	pf, err := file.OpenParquetFile(strings.TrimPrefix(path, "file://"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	md := pf.MetaData()
	for rg := 0; rg < md.NumRowGroups(); rg++ {
		g := md.RowGroup(rg)
		for c := 0; c < g.NumColumns(); c++ {
			cc, err := g.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			chunks = append(chunks, cc)
		}
	}
	return md.NumRowGroups(), chunks
}

// fileCodecs returns the codecs of every column chunk in a Parquet
// file's footer.
func fileCodecs(t *testing.T, path string) map[compress.Compression]int {
	t.Helper()
	out := map[compress.Compression]int{}
	_, chunks := columnChunks(t, path)
	for _, cc := range chunks {
		out[cc.Compression()]++
	}
	return out
}

// newFilesCodec checks that every file of tbl's current snapshot not in
// before is written with want only, and returns the files now.
func newFilesCodec(t *testing.T, tbl *table.Table, before map[string]bool, want compress.Compression) map[string]bool {
	t.Helper()
	now := tableParquetFiles(t, tbl)
	var added []string
	for p := range now {
		if !before[p] {
			added = append(added, p)
		}
	}
	sort.Strings(added)
	if len(added) == 0 {
		t.Fatal("the epoch added no files")
	}
	for _, p := range added {
		got := fileCodecs(t, p)
		if len(got) != 1 || got[want] == 0 {
			t.Errorf("%s: column chunk codecs %v, want only %s", filepath.Base(p), got, want)
		}
	}
	return now
}

// TestParquetCodec: a table created under parquet.compression snappy
// writes its data and delete files with snappy; a tables[] rule setting
// zstd level 1 on the existing table switches its properties at the next
// open and the next epoch's files are zstd, while the snappy rows still
// read back; the default configuration then puts it back to zstd at its
// default level (the level property removed).
func TestParquetCodec(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	yaml := func(name, extra string) string {
		return fmt.Sprintf("pipeline: p\nsource:\n  user: u\n  server_id: 7\n  include: [\"shop.*\"]\nwarehouse:\n  location: %s\ncatalog:\n  sql:\n    dsn: %s\n%s",
			filepath.Join(dir, "warehouse"), filepath.Join(dir, "catalog.db"), extra)
	}
	open := func(name, extra string) *Table {
		t.Helper()
		tb, err := openLake(t, loadConfig(t, filepath.Join(dir, name+".yaml"), yaml(name, extra))).EnsureTable(ctx, kvSchema())
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	props := func(tb *Table) (string, string) {
		p := tb.current().Properties()
		return p[table.ParquetCompressionKey], p[table.ParquetCompressionLevelKey]
	}

	e := &kvEnv{t: t, dir: dir, model: map[int64]string{}}
	e.tbl = open("snappy", "parquet:\n  compression: snappy\n")
	if c, l := props(e.tbl); c != "snappy" || l != "" {
		t.Fatalf("created with codec %q level %q, want snappy and no level", c, l)
	}
	e.commit(nil, keys(1, 100), "v0", nil)
	files := newFilesCodec(t, e.tbl.current(), nil, compress.Codecs.Snappy)
	e.commit(nil, keys(1, 30), "v1", []int64{99})
	files = newFilesCodec(t, e.tbl.current(), files, compress.Codecs.Snappy)
	if pos, _ := deleteFiles(t, e.tbl.current()); pos == 0 {
		t.Fatal("the updates wrote no position delete file")
	}

	e.tbl = open("zstd1", "parquet:\n  compression: snappy\ntables:\n  - match: shop.kv\n    parquet:\n      compression: zstd\n      level: 1\n")
	if c, l := props(e.tbl); c != "zstd" || l != "1" {
		t.Fatalf("after the rule: codec %q level %q, want zstd 1", c, l)
	}
	e.assertModel(e.tbl.current())
	e.commit(nil, keys(20, 60), "v2", []int64{1, 2})
	files = newFilesCodec(t, e.tbl.current(), files, compress.Codecs.Zstd)
	e.assertModel(e.tbl.current())
	// Opening again with the same settings commits nothing.
	snap := e.tbl.current().Metadata().LastUpdatedMillis()
	if e.tbl = open("zstd1", "parquet:\n  compression: snappy\ntables:\n  - match: shop.kv\n    parquet:\n      compression: zstd\n      level: 1\n"); e.tbl.current().Metadata().LastUpdatedMillis() != snap {
		t.Error("opening with unchanged parquet settings changed the table's metadata")
	}

	e.tbl = open("default", "")
	if c, l := props(e.tbl); c != "zstd" || l != "" {
		t.Fatalf("under the default: codec %q level %q, want zstd and no level", c, l)
	}
	e.commit(nil, keys(50, 120), "v3", []int64{3})
	newFilesCodec(t, e.tbl.current(), files, compress.Codecs.Zstd)
	e.assertModel(e.tbl.current())

	// Compaction (iceberg-go's writer) reads the same properties.
	e.tbl = open("gzip", "parquet:\n  compression: gzip\n  level: 9\n")
	files = tableParquetFiles(t, e.tbl.current())
	if _, err := e.tbl.Compact(ctx, testOpts()); err != nil {
		t.Fatal(err)
	}
	if err := e.tbl.reloadForTest(ctx); err != nil {
		t.Fatal(err)
	}
	newFilesCodec(t, e.tbl.current(), files, compress.Codecs.Gzip)
	e.assertModel(e.tbl.current())
}
