package lake

// Benchmarks of writing Iceberg data files for a realistic row shape (the
// 15-column, ~200-byte row of the bench harness, see bench/schema.go), two
// ways:
//
//   - BenchmarkWriteArrow: what cdcsync does today (lake/commit.go): canonical
//     rows -> Arrow record batches (rows.go) -> iceberg-go's
//     table.WriteRecords (arrow-go's pqarrow writer, zstd, field ids and
//     column statistics) -> iceberg.DataFile.
//   - BenchmarkWriteParquetGo: github.com/parquet-go/parquet-go writing the
//     same rows with the Iceberg field ids in the Parquet schema and column
//     statistics, then table.FileToDataFile to build the DataFile (with
//     metrics) that a commit needs, the cheapest way iceberg-go offers.
//
// Both report ns/row, B/row (allocated) and file-bytes/row. The setup of the
// parquet-go benchmark inspects the file it wrote and fails unless every
// column carries its field id and min/max/null-count statistics, and the
// DataFile has bounds for every column.
//
// Run: go test ./lake/ -run '^$' -bench 'Write|ArrowBuild|Commit' -benchmem

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/cdcsync/cdcsync"
)

const benchFileRows = 100_000 // rows per data file in one benchmark op

// benchSchema is the bench harness's table (bench/schema.go) as capture
// maps it from MariaDB.
func benchSchema() *cdcsync.TableSchema {
	col := func(name, dt, ct string, k cdcsync.Kind, null bool, p, s int) cdcsync.Column {
		return cdcsync.Column{Name: name, DataType: dt, ColumnType: ct, Kind: k, Nullable: null, Precision: p, Scale: s}
	}
	return &cdcsync.TableSchema{
		ID: cdcsync.TableID{Database: "bench", Table: "t"},
		Columns: []cdcsync.Column{
			col("id", "bigint", "bigint(20)", cdcsync.KindInt64, false, 0, 0),
			col("account_id", "int", "int(11)", cdcsync.KindInt32, false, 0, 0),
			col("qty", "int", "int(11)", cdcsync.KindInt32, true, 0, 0),
			col("amount", "decimal", "decimal(12,2)", cdcsync.KindDecimal, false, 12, 2),
			col("price", "decimal", "decimal(18,4)", cdcsync.KindDecimal, true, 18, 4),
			col("ratio", "double", "double", cdcsync.KindFloat64, true, 0, 0),
			col("status", "varchar", "varchar(16)", cdcsync.KindString, false, 0, 0),
			col("name", "varchar", "varchar(64)", cdcsync.KindString, true, 0, 0),
			col("email", "varchar", "varchar(100)", cdcsync.KindString, true, 0, 0),
			col("note", "text", "text", cdcsync.KindString, true, 0, 0),
			col("created_at", "datetime", "datetime(6)", cdcsync.KindTimestamp, false, 0, 0),
			col("updated_at", "timestamp", "timestamp(6)", cdcsync.KindTimestampTZ, false, 0, 0),
			col("birth", "date", "date", cdcsync.KindDate, true, 0, 0),
			col("flags", "tinyint", "tinyint(4)", cdcsync.KindInt32, true, 0, 0),
			col("attrs", "longtext", "longtext", cdcsync.KindString, true, 0, 0),
		},
		PrimaryKey: []int{0},
	}
}

var benchStatuses = []string{"new", "paid", "shipped", "delivered", "cancelled", "refunded"}

// benchRow is row id in canonical form, like the harness generates it.
func benchRow(id int64, r *rand.Rand) cdcsync.Row {
	created := int64(1_600_000_000_000_000) + id*1_000_003
	var qty, price, birth, flags any
	if id%10 != 0 {
		qty = int32(id % 1000)
		price = fmt.Sprintf("%d.%04d", r.IntN(1_000_000), r.IntN(10000))
		birth = int32(-3650 + int(id%20000))
		flags = int32(id % 128)
	}
	return cdcsync.Row{
		id,
		int32(id % 100_000),
		qty,
		fmt.Sprintf("%d.%02d", r.IntN(100_000), r.IntN(100)),
		price,
		r.Float64() * 1000,
		benchStatuses[id%int64(len(benchStatuses))],
		fmt.Sprintf("customer %08d", id),
		fmt.Sprintf("user%d@example%d.com", id, id%97),
		fmt.Sprintf("order %d note: lorem ipsum dolor sit amet %x", id, r.Uint64()),
		created,
		created + 1_500_000,
		birth,
		flags,
		fmt.Sprintf(`{"k": %d, "tags": ["a", "b"], "v": %q}`, id%1000, benchStatuses[id%3]),
	}
}

func benchRows(n int) []cdcsync.Row {
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([]cdcsync.Row, n)
	for i := range rows {
		rows[i] = benchRow(int64(i+1), r)
	}
	return rows
}

// benchTable creates the table in a fresh local warehouse with a SQLite
// catalog, as cdcsync would.
func benchTable(b *testing.B) (*Lake, *Table) {
	b.Helper()
	lk := benchLake(b)
	t, err := lk.EnsureTable(context.Background(), benchSchema())
	if err != nil {
		b.Fatal(err)
	}
	return lk, t
}

// benchLake opens a fresh local warehouse with a SQLite catalog.
func benchLake(b *testing.B) *Lake {
	b.Helper()
	return benchLakeIn(b, b.TempDir(), "")
}

// benchLakeIn opens a fresh local warehouse with a SQLite catalog in dir,
// with extra appended to its configuration.
func benchLakeIn(tb testing.TB, dir, extra string) *Lake {
	tb.Helper()
	yaml := fmt.Sprintf(`pipeline: bench
source:
  user: u
  server_id: 77
  include: ["bench.*"]
warehouse:
  location: %s
catalog:
  sql:
    dsn: %s
`, filepath.Join(dir, "warehouse"), filepath.Join(dir, "catalog.db")) + extra
	return openLake(tb, loadConfig(tb, filepath.Join(dir, "cdcsync.yaml"), yaml))
}

// perRow reports ns/row, cpu-ns/row, B/row and, when size > 0, file-B/row.
func perRow(b *testing.B, rows int, before runtime.MemStats, elapsed, cpu time.Duration, size int64) {
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	n := float64(b.N) * float64(rows)
	b.ReportMetric(float64(elapsed.Nanoseconds())/n, "ns/row")
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/row")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/row")
	if size > 0 {
		b.ReportMetric(float64(size)/float64(rows), "file-B/row")
	}
}

// BenchmarkArrowBuild measures rows.go alone: canonical rows to Arrow
// record batches of 64k rows, as the file writer builds them.
func BenchmarkArrowBuild(b *testing.B) {
	_, t := benchTable(b)
	rows := benchRows(benchFileRows)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuNow()
	for i := 0; i < b.N; i++ {
		bb := newBatchBuilder(t.dataOut)
		for j, r := range rows {
			if err := bb.add(r); err != nil {
				b.Fatal(err)
			}
			if bb.n == writeBatchRows || j == len(rows)-1 {
				bb.flush().Release()
			}
		}
		bb.release()
	}
	elapsed, cpu := time.Since(start), cpuNow()-cpu0
	b.StopTimer()
	perRow(b, len(rows), ms, elapsed, cpu, 0)
}

// BenchmarkWriteArrow is cdcsync's data-file path: rows -> Arrow ->
// pqarrow -> DataFile (with metrics, files.go), one file per op.
func BenchmarkWriteArrow(b *testing.B) {
	_, t := benchTable(b)
	rows := benchRows(benchFileRows)
	ctx := context.Background()
	var size int64
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuNow()
	for i := 0; i < b.N; i++ {
		files, err := t.writeFiles(ctx, t.current(), t.dataFile, rows, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(files) != 1 || files[0].Count() != int64(len(rows)) {
			b.Fatalf("wrote %d files", len(files))
		}
		size = files[0].FileSizeBytes()
	}
	elapsed, cpu := time.Since(start), cpuNow()-cpu0
	b.StopTimer()
	perRow(b, len(rows), ms, elapsed, cpu, size)
}

// pqSchema is the Parquet schema parquet-go writes: every column with its
// Iceberg field id, the physical types Iceberg specifies.
type pqColumn struct {
	name  string
	leaf  int // index of the column among the sorted leaves
	field int // Iceberg field id
	kind  cdcsync.Kind
	scale int
}

func parquetGoSchema(ts *cdcsync.TableSchema) (*parquet.Schema, []pqColumn) {
	g := parquet.Group{}
	for i, c := range ts.Columns {
		var n parquet.Node
		switch c.Kind {
		case cdcsync.KindInt32:
			n = parquet.Int(32)
		case cdcsync.KindInt64:
			n = parquet.Int(64)
		case cdcsync.KindDecimal:
			// Iceberg: INT32 for precision <= 9, INT64 for <= 18, else fixed.
			typ := parquet.Int64Type
			if c.Precision <= 9 {
				typ = parquet.Int32Type
			}
			n = parquet.Decimal(c.Scale, c.Precision, typ)
		case cdcsync.KindFloat32:
			n = parquet.Leaf(parquet.FloatType)
		case cdcsync.KindFloat64:
			n = parquet.Leaf(parquet.DoubleType)
		case cdcsync.KindString:
			n = parquet.String()
		case cdcsync.KindBinary:
			n = parquet.Leaf(parquet.ByteArrayType)
		case cdcsync.KindDate:
			n = parquet.Date()
		case cdcsync.KindTimestamp:
			n = parquet.TimestampAdjusted(parquet.Microsecond, false)
		case cdcsync.KindTimestampTZ:
			n = parquet.TimestampAdjusted(parquet.Microsecond, true)
		}
		n = parquet.Compressed(n, &zstd.Codec{})
		if c.Nullable {
			n = parquet.Optional(n)
		} else {
			n = parquet.Required(n)
		}
		g[c.Name] = parquet.FieldID(n, i+1)
	}
	sc := parquet.NewSchema("table", g)
	cols := make([]pqColumn, len(ts.Columns))
	for li, path := range sc.Columns() {
		i := ts.ColumnIndex(path[0])
		cols[i] = pqColumn{name: path[0], leaf: li, field: i + 1, kind: ts.Columns[i].Kind, scale: ts.Columns[i].Scale}
	}
	return sc, cols
}

// decimalUnscaled parses a canonical decimal text (exactly scale fraction
// digits) into its unscaled integer.
func decimalUnscaled(s string) int64 {
	var n int64
	neg := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '-':
			neg = true
		case c >= '0' && c <= '9':
			n = n*10 + int64(c-'0')
		}
	}
	if neg {
		n = -n
	}
	return n
}

// writeParquetGo writes rows to w with parquet-go and returns the rows
// written.
func writeParquetGo(w io.Writer, sc *parquet.Schema, cols []pqColumn, ts *cdcsync.TableSchema, rows []cdcsync.Row) error {
	pw := parquet.NewWriter(w, sc, parquet.PageBufferSize(1<<20))
	buf := make([]parquet.Row, 0, 1024)
	prow := func(r cdcsync.Row, into parquet.Row) parquet.Row {
		into = into[:0]
		for i := range cols {
			c := &cols[i]
			v := r[i]
			def := 0
			if ts.Columns[i].Nullable {
				def = 1
			}
			var pv parquet.Value
			switch {
			case v == nil:
				pv = parquet.NullValue().Level(0, 0, c.leaf)
				into = append(into, pv)
				continue
			case c.kind == cdcsync.KindDecimal:
				un := decimalUnscaled(v.(string))
				if ts.Columns[i].Precision <= 9 {
					pv = parquet.Int32Value(int32(un))
				} else {
					pv = parquet.Int64Value(un)
				}
			default:
				switch x := v.(type) {
				case int32:
					pv = parquet.Int32Value(x)
				case int64:
					pv = parquet.Int64Value(x)
				case float32:
					pv = parquet.FloatValue(x)
				case float64:
					pv = parquet.DoubleValue(x)
				case string:
					pv = parquet.ByteArrayValue([]byte(x))
				case []byte:
					pv = parquet.ByteArrayValue(x)
				}
			}
			into = append(into, pv.Level(0, def, c.leaf))
		}
		// parquet-go wants the values in leaf order.
		sortByColumn(into)
		return into
	}
	var pool []parquet.Row
	for i, r := range rows {
		if len(pool) <= len(buf) {
			pool = append(pool, make(parquet.Row, 0, len(cols)))
		}
		buf = append(buf, prow(r, pool[len(buf)]))
		if len(buf) == cap(buf) || i == len(rows)-1 {
			if _, err := pw.WriteRows(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	return pw.Close()
}

func sortByColumn(r parquet.Row) {
	for i := 1; i < len(r); i++ {
		for j := i; j > 0 && r[j].Column() < r[j-1].Column(); j-- {
			r[j], r[j-1] = r[j-1], r[j]
		}
	}
}

// BenchmarkWriteParquetGo writes the same rows with parquet-go (field ids,
// statistics, zstd) to a local file and builds the DataFile with
// table.FileToDataFile, one file per op.
func BenchmarkWriteParquetGo(b *testing.B) {
	_, t := benchTable(b)
	ts := t.Schema
	rows := benchRows(benchFileRows)
	sc, cols := parquetGoSchema(ts)
	ctx := context.Background()
	dir := b.TempDir()
	fio := icebergio.LocalFS{}
	meta := t.current().Metadata()

	// Setup check: field ids and statistics in the file, bounds in the DataFile.
	var check bytes.Buffer
	if err := writeParquetGo(&check, sc, cols, ts, rows[:1000]); err != nil {
		b.Fatal(err)
	}
	if err := checkParquetGoFile(check.Bytes(), ts); err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(dir, "check.parquet")
	if err := os.WriteFile(p, check.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	df, err := table.FileToDataFile(ctx, fio, p, meta.CurrentSchema(), meta.PartitionSpec(), 0, meta.Properties())
	if err != nil {
		b.Fatal(err)
	}
	if err := checkDataFile(df, ts, 1000); err != nil {
		b.Fatal(err)
	}

	var size int64
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuNow()
	for i := 0; i < b.N; i++ {
		p := filepath.Join(dir, fmt.Sprintf("%d.parquet", i))
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		if err := writeParquetGo(f, sc, cols, ts, rows); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		df, err := table.FileToDataFile(ctx, fio, p, meta.CurrentSchema(), meta.PartitionSpec(), 0, meta.Properties())
		if err != nil {
			b.Fatal(err)
		}
		size = df.FileSizeBytes()
	}
	elapsed, cpu := time.Since(start), cpuNow()-cpu0
	b.StopTimer()
	perRow(b, len(rows), ms, elapsed, cpu, size)
}

// checkParquetGoFile fails unless every leaf column has its Iceberg field id
// and the column chunks carry min/max and null-count statistics.
func checkParquetGoFile(data []byte, ts *cdcsync.TableSchema) error {
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	md := f.Metadata()
	ids := map[string]int32{}
	for _, el := range md.Schema[1:] {
		ids[el.Name] = el.FieldID
	}
	for i, c := range ts.Columns {
		if ids[c.Name] != int32(i+1) {
			return fmt.Errorf("parquet-go wrote column %s with field id %d, want %d", c.Name, ids[c.Name], i+1)
		}
	}
	var missing []string
	for _, rg := range md.RowGroups {
		for _, cc := range rg.Columns {
			st := cc.MetaData.Statistics
			name := strings.Join(cc.MetaData.PathInSchema, ".")
			if len(st.MinValue) == 0 && len(st.Min) == 0 {
				missing = append(missing, name+" min")
			}
			if len(st.MaxValue) == 0 && len(st.Max) == 0 {
				missing = append(missing, name+" max")
			}
			if st.NullCount < 0 {
				missing = append(missing, name+" null_count")
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("parquet-go file lacks statistics: %s", strings.Join(missing, ", "))
	}
	return nil
}

// checkDataFile fails unless the DataFile has counts and bounds for every
// column.
func checkDataFile(df iceberg.DataFile, ts *cdcsync.TableSchema, rows int64) error {
	if df.Count() != rows {
		return fmt.Errorf("DataFile counts %d rows, want %d", df.Count(), rows)
	}
	for i := range ts.Columns {
		id := i + 1
		if _, ok := df.NullValueCounts()[id]; !ok {
			return fmt.Errorf("DataFile lacks the null count of field %d", id)
		}
		if _, ok := df.LowerBoundValues()[id]; !ok {
			return fmt.Errorf("DataFile lacks the lower bound of field %d (%s)", id, ts.Columns[i].Name)
		}
		if _, ok := df.UpperBoundValues()[id]; !ok {
			return fmt.Errorf("DataFile lacks the upper bound of field %d (%s)", id, ts.Columns[i].Name)
		}
	}
	return nil
}

// BenchmarkCommit is one whole epoch commit (Table.Commit) of 50k upserts
// on a local warehouse: data file, equality-delete file, manifests,
// metadata and the SQLite catalog.
func BenchmarkCommit(b *testing.B) {
	_, t := benchTable(b)
	const n = 50_000
	rows := benchRows(n)
	ctx := context.Background()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuNow()
	for i := 0; i < b.N; i++ {
		pos := binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: fmt.Sprintf("0-1-%d", i+1)}.Position()
		if err := t.Commit(ctx, Epoch{Number: int64(i + 1), Pos: pos}, rows, rows, nil); err != nil {
			b.Fatal(err)
		}
	}
	elapsed, cpu := time.Since(start), cpuNow()-cpu0
	b.StopTimer()
	perRow(b, n, ms, elapsed, cpu, 0)
}

// TestDecimalFromCanonical checks the fast decimal path of rows.go against
// decimal128.FromString, which it replaces for canonical text.
func TestDecimalFromCanonical(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cases := []struct {
		s           string
		prec, scale int32
	}{
		{"0", 10, 0}, {"-0.50", 5, 2}, {"0.00", 3, 2}, {"123.45", 5, 2}, {"-99999999.99", 10, 2},
		{"12345678901234567890", 20, 0}, {"18446744073709551615", 20, 0},
		{"99999999999999999999999999999999999999", 38, 0}, {"-9999999999999999999999999999.9999999999", 38, 10},
		{"0.0000000000000000000000000000000000001", 38, 37}, {"007.10", 5, 2},
	}
	for range 2000 {
		p := int32(1 + r.IntN(38))
		sc := int32(r.IntN(int(p) + 1))
		digits := make([]byte, p)
		for i := range digits {
			digits[i] = byte('0' + r.IntN(10))
		}
		s := string(digits[:p-sc])
		if s == "" {
			s = "0"
		}
		if sc > 0 {
			s += "." + string(digits[p-sc:])
		}
		if r.IntN(2) == 0 {
			s = "-" + s
		}
		cases = append(cases, struct {
			s           string
			prec, scale int32
		}{s, p, sc})
	}
	for _, c := range cases {
		got, ok := decimalFromCanonical(c.s, c.prec, c.scale)
		if !ok {
			t.Errorf("decimalFromCanonical(%q, %d, %d) refused a canonical value", c.s, c.prec, c.scale)
			continue
		}
		if txt := got.ToString(c.scale); strings.TrimLeft(strings.TrimPrefix(txt, "-"), "0") != strings.TrimLeft(strings.TrimPrefix(c.s, "-"), "0") {
			t.Errorf("decimalFromCanonical(%q, %d, %d) = %s", c.s, c.prec, c.scale, txt)
		}
		if c.prec <= 30 { // FromString parses through a 128-bit float: exact to ~38 digits only
			want, err := decimal128.FromString(c.s, c.prec, c.scale)
			if err == nil && want != got {
				t.Errorf("decimalFromCanonical(%q, %d, %d) = %v, FromString %v", c.s, c.prec, c.scale, got, want)
			}
		}
	}
	for _, bad := range []struct {
		s           string
		prec, scale int32
	}{{"1.5", 5, 2}, {"1.500", 5, 2}, {"123.45", 4, 2}, {"1e5", 10, 0}, {"", 5, 0}, {"-", 5, 0}, {".50", 5, 2}, {"1,00", 5, 2}, {"+1.00", 5, 2}} {
		if _, ok := decimalFromCanonical(bad.s, bad.prec, bad.scale); ok {
			t.Errorf("decimalFromCanonical(%q, %d, %d) accepted a non-canonical or too wide value", bad.s, bad.prec, bad.scale)
		}
	}
}

// cpuNow is the process's user+system CPU time. The benchmarks report CPU
// time per unit next to wall time: on a shared 2-core machine wall time
// swings with the load, CPU time much less.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWriteManyPartitions writes 20,000 rows spread over 2,000
// partitions (ten rows a file), the shape of an epoch on a finely
// partitioned table: per-file costs dominate.
func BenchmarkWriteManyPartitions(b *testing.B) {
	ctx := context.Background()
	lk := openLake(b, partitionedConfig(b, b.TempDir(), "", "bucket(2000, id)"))
	tb, err := lk.EnsureTable(ctx, ordersSchema())
	if err != nil {
		b.Fatal(err)
	}
	var rows []cdcsync.Row
	for id := int64(1); id <= 20000; id++ {
		rows = append(rows, orderRow(id, id, "v1"))
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	files, elapsed, cpu := benchWriteFiles(b, tb, rows)
	perRow(b, len(rows), ms, elapsed, cpu, 0)
	b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N*files), "µs/file")
}

// benchWriteFiles writes rows as tb's data files b.N times and returns the
// files of one write, the time and the CPU.
func benchWriteFiles(b *testing.B, tb *Table, rows []cdcsync.Row) (files int, elapsed, cpu time.Duration) {
	ctx := context.Background()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuNow()
	for i := 0; i < b.N; i++ {
		fs, err := tb.writeFiles(ctx, tb.Iceberg(), tb.dataFile, rows, nil)
		if err != nil {
			b.Fatal(err)
		}
		files = len(fs)
	}
	elapsed, cpu = time.Since(start), cpuNow()-cpu0
	b.StopTimer()
	return files, elapsed, cpu
}
