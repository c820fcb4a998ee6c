// Command bench measures cdcsync end to end against a MariaDB it starts
// itself (and MinIO with --warehouse minio), next to baselines measured in
// the same run: the initial copy against a raw SELECT, the binlog catch-up
// against two raw go-mysql decodes of the same binlog range (configured like
// cdcsync, and plain) and against Debezium's MySQL connector reading it
// (bench/debezium.go), the freshness and memory of the daemon under a paced
// load at several rates, and the read amplification of the table's delete
// files (a full scan before and after `cdcsync compact`). See
// docs/performance.md.
//
//	go run ./bench                       # full run, about 7 to 11 minutes
//	go run ./bench --quick               # smoke run: 100k rows/changes, 15 s per rate
//	go run ./bench --out bench.md        # also write the summary (and bench.json)
//	go run ./bench --pprof /tmp/prof     # also profile the daemon, through its admin socket (timings are perturbed)
//	go run ./bench --debezium=false      # without the Debezium peer (on by default; needs Java 17+ and Maven, built once into .tools/debezium)
//	go run ./bench --decode-variants     # also decode the catch-up's range with each of baseline A's options changed alone
//	go run ./bench --partition "day(created_at), bucket(8, id)"
//	                                     # two runs, unpartitioned then partitioned, compared
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

type options struct {
	rows, changes  int64
	rates          []int
	txnRows        int
	workers        int
	duration       time.Duration
	interval       time.Duration
	ampEpochs      int
	ampRate        int
	scans          int
	ampMaintained  bool
	out, warehouse string
	quick, keep    bool
	pprofDir       string
	pprofSeconds   int
	extraConfig    string
	deletesMode    string
	partition      string // the partition spec of bench.t; "" unpartitioned
	hugeTxn        int64  // rows of the --huge-txn UPDATE; 0: no such phase
	debezium       bool   // run the Debezium peer (bench/debezium.go)
	debeziumPasses int    // readings of the range by the peer; the last is reported as warm
	decodeVariants bool   // also run decodeSteps
}

func main() {
	var o options
	flag.Int64Var(&o.rows, "rows", 1_000_000, "rows in the snapshot table")
	flag.Int64Var(&o.changes, "changes", 1_000_000, "row changes for the catch-up")
	rates := flag.String("rates", "1000,10000,50000", "offered row changes per second of the freshness runs, one run each, in this order")
	rate := flag.Int("rate", 0, "one freshness rate instead of --rates (kept for old command lines)")
	flag.IntVar(&o.txnRows, "txn-rows", 10, fmt.Sprintf("row changes per transaction in the freshness runs (at least; rates above %d × this use larger transactions)", maxTxnRate))
	flag.IntVar(&o.workers, "workers", 8, "connections of the freshness load generator")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "length of each freshness run")
	flag.DurationVar(&o.interval, "interval", 0, "epoch.interval for cdcsync (0: cdcsync's default, 5s)")
	flag.IntVar(&o.ampEpochs, "amp-epochs", 20, "read amplification: epochs of upserts written before the scan (0: none, scan what the freshness runs left)")
	flag.IntVar(&o.ampRate, "amp-rate", 10_000, "read amplification: offered row changes per second while those epochs are written")
	flag.IntVar(&o.scans, "scans", 3, "read amplification: full scans before and after compaction (the best counts)")
	flag.BoolVar(&o.ampMaintained, "amp-maintained", false, "read amplification: keep in-process maintenance on while the epochs are written, and scan the table at every snapshot they and the maintenance made")
	flag.StringVar(&o.out, "out", "", "write the summary as markdown to this file, and as JSON beside it (.json)")
	flag.StringVar(&o.warehouse, "warehouse", "local", "local (a directory) or minio (S3 on a MinIO the harness starts)")
	flag.BoolVar(&o.quick, "quick", false, "smoke run: 100k rows and changes, 15 s per freshness rate, 6 read amplification epochs")
	flag.BoolVar(&o.keep, "keep", false, "keep the working directory (servers' data, warehouse, logs)")
	flag.StringVar(&o.pprofDir, "pprof", "", "save CPU and allocation profiles of the daemon's copy, catch-up and each freshness rate (fresh-RATE) here")
	flag.IntVar(&o.pprofSeconds, "pprof-seconds", 30, "length of each CPU profile")
	flag.StringVar(&o.extraConfig, "extra-config", "", "YAML appended to cdcsync's configuration, e.g. 'maintenance: {enabled: false}'")
	flag.StringVar(&o.deletesMode, "deletes", "", "deletes.mode of the bench table: position, dv or equality (default: cdcsync's default, position)")
	flag.Int64Var(&o.hugeTxn, "huge-txn", 0, "after the catch-up, one UPDATE of this many rows of bench.t as a single transaction, mirrored by a fresh daemon (0: no such phase); with --extra-config 'memory_limit: 512MiB' it shows the bound")
	flag.BoolVar(&o.debezium, "debezium", true, "read the catch-up's binlog range with Debezium's MySQL connector too (the peer; needs Java 17+ and Maven, built once into .tools/debezium)")
	flag.IntVar(&o.debeziumPasses, "debezium-passes", 3, "readings of the catch-up's range by the Debezium peer, each by a new engine in one JVM: the first is reported as cold, the last as warm")
	flag.BoolVar(&o.decodeVariants, "decode-variants", false, "also decode the catch-up's binlog range with each of baseline A's decoding options changed alone (where A's CPU per change goes)")
	flag.StringVar(&o.partition, "partition", "", `partition bench.t, e.g. "day(created_at), bucket(8, id)": the harness runs twice, unpartitioned and then partitioned, and compares the two`)
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	if set["rate"] && !set["rates"] {
		*rates = strconv.Itoa(*rate)
	}
	if o.rates, err = parseRates(*rates); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if o.txnRows < 1 || o.workers < 1 || o.scans < 1 || o.ampEpochs < 0 || o.ampRate < 1 || o.debeziumPasses < 1 {
		fmt.Fprintln(os.Stderr, "bench: --txn-rows, --workers, --scans, --amp-rate and --debezium-passes must be positive, --amp-epochs not negative")
		os.Exit(2)
	}
	if o.quick {
		if !set["rows"] {
			o.rows = 100_000
		}
		if !set["changes"] {
			o.changes = 100_000
		}
		if !set["duration"] {
			o.duration = 15 * time.Second
		}
		if !set["amp-epochs"] {
			o.ampEpochs = 6
		}
	}
	if o.warehouse != "local" && o.warehouse != "minio" {
		fmt.Fprintln(os.Stderr, "bench: --warehouse is local or minio")
		os.Exit(2)
	}
	if _, err := partitionFields(o.partition); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := runAll(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// runAll runs the harness once, or with --partition twice (bench.t
// unpartitioned, then partitioned) followed by the comparison of the two,
// and prints and writes the reports.
func runAll(o options) error {
	layouts := []string{o.partition}
	if o.partition != "" {
		layouts = []string{"", o.partition}
	}
	var all []*results
	var report strings.Builder
	for _, layout := range layouts {
		ro := o
		ro.partition = layout
		res, err := run(ro)
		if err != nil {
			return err
		}
		all = append(all, res)
		report.WriteString(markdown(res))
		report.WriteString("\n")
	}
	if len(all) == 2 {
		report.WriteString(comparePartitioned(all[0], all[1]))
	}
	fmt.Println(report.String())
	if o.out == "" {
		return nil
	}
	js, _ := json.MarshalIndent(all, "", "  ")
	if len(all) == 1 {
		js, _ = json.MarshalIndent(all[0], "", "  ")
	}
	if strings.HasSuffix(o.out, ".json") {
		return os.WriteFile(o.out, js, 0o644)
	}
	if err := os.WriteFile(o.out, []byte(report.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(strings.TrimSuffix(o.out, filepath.Ext(o.out))+".json", js, 0o644)
}

// partitionFields splits "day(created_at), bucket(8, id)" into its fields.
func partitionFields(spec string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i, c := range spec + "," {
		switch {
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			if f := strings.TrimSpace(spec[start:i]); f != "" {
				out = append(out, f)
			}
			start = i + 1
		}
		if depth < 0 {
			return nil, fmt.Errorf("--partition %q: unbalanced parentheses", spec)
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("--partition %q: unbalanced parentheses", spec)
	}
	if spec != "" && len(out) == 0 {
		return nil, fmt.Errorf("--partition %q names no field", spec)
	}
	return out, nil
}

// comparePartitioned is the table of issue 23: the partitioned run's
// catch-up and freshness next to the unpartitioned run's.
func comparePartitioned(flat, part *results) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("## Partitioned (%s) against unpartitioned, same harness invocation", part.Partition)
	w("")
	w("| Measure | Unpartitioned | Partitioned | Ratio |")
	w("|---|---|---|---|")
	w("| Catch-up rate | %.0f changes/s | %.0f changes/s | %.2f (target ≥ 0.5) |", flat.Catchup.Rate, part.Catchup.Rate, part.Catchup.Rate/flat.Catchup.Rate)
	w("| Catch-up CPU | %.2f CPU-µs/change | %.2f CPU-µs/change | %.2fx |", flat.Catchup.CPUMicros, part.Catchup.CPUMicros, part.Catchup.CPUMicros/flat.Catchup.CPUMicros)
	w("| Catch-up epochs, files added per epoch (mean, max) | %d, %.0f, %d | %d, %.0f, %d | |",
		flat.Catchup.Epochs, flat.Catchup.FilesPerEpoch, flat.Catchup.MaxEpochFiles, part.Catchup.Epochs, part.Catchup.FilesPerEpoch, part.Catchup.MaxEpochFiles)
	w("| Live files after the catch-up, before `cdcsync compact` | %d data, %d delete | %d data, %d delete | |",
		flat.Catchup.DataFilesAfter, flat.Catchup.DeleteFilesAfter, part.Catchup.DataFilesAfter, part.Catchup.DeleteFilesAfter)
	if i, j := targetRun(flat.FreshRuns), targetRun(part.FreshRuns); i >= 0 && j >= 0 {
		f, p := &flat.FreshRuns[i], &part.FreshRuns[j]
		w("| p99 freshness at %d changes/s (interval %s) | %.2f s | %.2f s (target ≤ %.1f s) | |", p.TargetRate, secs(p.Interval), f.P99, p.P99, p.Interval+2)
		w("| Files added per epoch at %d changes/s (mean, max) | %.0f, %d | %.0f, %d | |", p.TargetRate, f.FilesPerEpoch, f.MaxEpochFiles, p.FilesPerEpoch, p.MaxEpochFiles)
		w("| Steady CPU at %d changes/s | %.2f CPU-µs/change | %.2f CPU-µs/change | %.2fx |", p.TargetRate, f.CPUMicros, p.CPUMicros, p.CPUMicros/f.CPUMicros)
	}
	if flat.ReadAmp.Before.Seconds > 0 && part.ReadAmp.Before.Seconds > 0 {
		w("| Full scan before / after compaction | %.2f s / %.2f s | %.2f s / %.2f s | |",
			flat.ReadAmp.Before.Seconds, flat.ReadAmp.After.Seconds, part.ReadAmp.Before.Seconds, part.ReadAmp.After.Seconds)
	}
	return b.String()
}

// results is everything one run measured.
type results struct {
	Partition string         `json:"partition,omitempty"` // the partition spec of bench.t
	Machine   string         `json:"machine"`
	Source    string         `json:"source"`  // git HEAD and the files modified in the work tree, from which cdcsync was built
	LoadAvg   []string       `json:"loadavg"` // /proc/loadavg at the start of each phase: other work on the machine skews the figures
	Options   map[string]any `json:"options"`
	Started   time.Time      `json:"started"`
	Baselines struct {
		DecodeSeconds    float64 `json:"decode_seconds"`
		DecodeRowChanges int64   `json:"decode_row_changes"`
		DecodeRate       float64 `json:"decode_changes_per_s"`
		DecodeCPUMicros  float64 `json:"decode_cpu_us_per_change"`
		DecodeBinlogMB   float64 `json:"decode_binlog_mb"`
		// Baseline P: the plain decode (decodePlain), same range.
		PlainSeconds   float64 `json:"plain_decode_seconds"`
		PlainChanges   int64   `json:"plain_decode_row_changes"`
		PlainRate      float64 `json:"plain_decode_changes_per_s"`
		PlainCPUMicros float64 `json:"plain_decode_cpu_us_per_change"`
		// Limit is the decode baseline with the lower CPU per change (A or
		// P): the limit the catch-up is measured against.
		Limit               string          `json:"decode_limit"`
		LimitRate           float64         `json:"decode_limit_changes_per_s"`
		LimitCPUMicros      float64         `json:"decode_limit_cpu_us_per_change"`
		Variants            []decodeFigures `json:"decode_variants,omitempty"`
		SelectRows          int64           `json:"select_rows"`
		SelectGoSeconds     float64         `json:"select_go_seconds"`
		SelectGoRate        float64         `json:"select_go_rows_per_s"`
		SelectGoCPUPerMRows float64         `json:"select_go_cpu_s_per_mrows"`
		SelectCLISeconds    float64         `json:"select_cli_seconds"`
		SelectCLIRate       float64         `json:"select_cli_rows_per_s"`
		SelectCLINote       string          `json:"select_cli_note,omitempty"`
	} `json:"baselines"`
	Snapshot struct {
		Rows         int64   `json:"rows"`
		Seconds      float64 `json:"seconds"`               // start to /readyz 200
		LogRows      int64   `json:"log_rows,omitempty"`    // rows of bench.t in the daemon's "initial copy finished" log line, if any
		LogSeconds   float64 `json:"log_seconds,omitempty"` // seconds of that line
		Rate         float64 `json:"rows_per_s"`
		RatioGo      float64 `json:"ratio_to_select_go"`
		RatioCLI     float64 `json:"ratio_to_select_cli"`
		CPUSeconds   float64 `json:"cpu_seconds"`
		CPUPerMRows  float64 `json:"cpu_s_per_mrows"`
		PeakRSSMiB   float64 `json:"peak_rss_mib"`
		FillSeconds  float64 `json:"fill_seconds"`
		TableMiB     float64 `json:"table_mib"`
		StartSeconds float64 `json:"startup_seconds"`
	} `json:"snapshot"`
	Catchup struct {
		Changes     int64   `json:"row_changes"`
		Txns        int     `json:"transactions"`
		GenSeconds  float64 `json:"generate_seconds"`
		Seconds     float64 `json:"seconds"`
		Rate        float64 `json:"changes_per_s"`
		Ratio       float64 `json:"ratio_to_decode"`
		CPUSeconds  float64 `json:"cpu_seconds"`
		CPUMicros   float64 `json:"cpu_us_per_change"`
		PeakRSSMiB  float64 `json:"peak_rss_mib"`
		BodySeconds float64 `json:"body_seconds"`
		BodyChanges int64   `json:"body_changes"`
		BodyRate    float64 `json:"body_changes_per_s"`
		BodyRatio   float64 `json:"body_ratio_to_decode"`
		// Against the decode limit (the lower of A and P) and against the
		// Debezium peer's warm pass: rate ratios and CPU per change
		// multiples (cdcsync's over the baseline's).
		RatioLimit     float64 `json:"ratio_to_decode_limit"`
		CPUxA          float64 `json:"cpu_x_decode"`
		CPUxLimit      float64 `json:"cpu_x_decode_limit"`
		RatioDebezium  float64 `json:"ratio_to_debezium,omitempty"`
		CPUxDebezium   float64 `json:"cpu_x_debezium,omitempty"`
		StartupSeconds float64 `json:"startup_seconds"`
		// The epochs of the catch-up, the files each added (mean, max),
		// and the table's live files at its end.
		Epochs           int     `json:"epochs"`
		FilesPerEpoch    float64 `json:"files_per_epoch"`
		MaxEpochFiles    int64   `json:"max_epoch_files"`
		DataFilesAfter   int     `json:"data_files_after"`
		DeleteFilesAfter int     `json:"delete_files_after"`
	} `json:"catchup"`
	// FreshCompactSeconds is the `cdcsync compact` run between the catch-up
	// and the freshness runs (the catch-up's delete files are compacted
	// before the runs, so that in-process maintenance during the runs only
	// handles what they write).
	FreshCompactSeconds float64    `json:"freshness_setup_compact_seconds"`
	FreshCompactOutput  string     `json:"freshness_setup_compact_output"`
	Fresh               freshRun   `json:"freshness"`      // the run the targets apply to: 10,000 changes/s offered, or the rate nearest to it
	FreshRuns           []freshRun `json:"freshness_runs"` // every rate, in the order run
	ReadAmp             readAmp    `json:"read_amplification"`
	Huge                *hugeRun   `json:"huge_txn,omitempty"`
	// Debezium is the peer's decode of the catch-up's range (nil with
	// --debezium=false).
	Debezium *debeziumResult `json:"debezium,omitempty"`
}

// decodeFigures is one decode baseline's figures.
type decodeFigures struct {
	Name      string  `json:"name"`
	Desc      string  `json:"description"`
	Seconds   float64 `json:"seconds"`
	Changes   int64   `json:"row_changes"`
	Rate      float64 `json:"changes_per_s"`
	CPUMicros float64 `json:"cpu_us_per_change"`
}

func figures(v decodeVariant, d decodeResult) decodeFigures {
	return decodeFigures{Name: v.Name, Desc: v.Desc, Seconds: d.Wall.Seconds(), Changes: d.RowChanges,
		Rate: float64(d.RowChanges) / d.Wall.Seconds(), CPUMicros: float64(d.CPU.Microseconds()) / float64(d.RowChanges)}
}

const mib = 1 << 20

func run(o options) (*results, error) {
	var res results
	res.Partition = o.partition
	res.Started = time.Now().UTC()
	res.Machine = machine()
	res.Source = gitState()
	res.Options = map[string]any{"partition": o.partition, "extra_config": o.extraConfig, "deletes": o.deletesMode, "rows": o.rows, "changes": o.changes, "rates": o.rates, "txn_rows": o.txnRows, "workers": o.workers,
		"duration": o.duration.String(), "interval": o.interval.String(), "warehouse": o.warehouse, "pprof": o.pprofDir != "",
		"amp_epochs": o.ampEpochs, "amp_rate": o.ampRate, "amp_maintained": o.ampMaintained, "scans": o.scans, "huge_txn": o.hugeTxn,
		"debezium": o.debezium, "debezium_passes": o.debeziumPasses, "decode_variants": o.decodeVariants}
	dir, err := os.MkdirTemp("", "cdcsync-bench-")
	if err != nil {
		return nil, err
	}
	if o.keep {
		logf("working directory: %s", dir)
		defer func() {
			// A kept directory holds the servers' data and the warehouse:
			// gigabytes a run, which a few runs can fill a disk with.
			logf("kept %s (%.1f GB): remove it when done", dir, float64(dirBytes(dir))/1e9)
		}()
	} else {
		defer os.RemoveAll(dir)
	}
	if o.pprofDir != "" {
		if err := os.MkdirAll(o.pprofDir, 0o755); err != nil {
			return nil, err
		}
		logf("profiling is on: timings are perturbed by the profiler")
	}

	// Build cdcsync once.
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "cdcsync")
	logf("building cdcsync")
	build := exec.Command("go", "build", "-o", bin, "./cmd/cdcsync")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/cdcsync: %w", err)
	}
	// The Debezium peer is built (or found in its cache) before anything
	// is measured, so that a missing java or mvn fails the run at once.
	var debeziumCP string
	if o.debezium {
		if debeziumCP, err = buildDebezium(root); err != nil {
			return nil, err
		}
	}

	// Servers.
	logf("starting MariaDB")
	db, err := testenv.StartMariaDB(testenv.MariaDBOptions{Dir: filepath.Join(dir, "mariadb"), ExtraArgs: []string{
		"--innodb-buffer-pool-size=2G", "--innodb-log-file-size=1G", "--innodb-flush-log-at-trx-commit=2",
		"--sync-binlog=0", "--max-allowed-packet=256M", "--binlog-cache-size=16M", "--max-binlog-size=1G",
	}})
	if err != nil {
		return nil, err
	}
	defer db.Stop()
	warehouseYAML := "location: " + filepath.Join(dir, "warehouse")
	if o.warehouse == "minio" {
		logf("starting MinIO")
		m, err := testenv.StartMinIO(filepath.Join(dir, "minio"))
		if err != nil {
			return nil, err
		}
		defer m.Stop()
		if err := m.CreateBucket("bench"); err != nil {
			return nil, err
		}
		warehouseYAML = fmt.Sprintf(`location: s3://bench/lake
  s3:
    endpoint: %s
    region: %s
    path_style: true
    access_key_id: %s
    secret_access_key: %s`, m.Endpoint, testenv.MinIORegion, testenv.MinIOAccessKey, testenv.MinIOSecretKey)
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	epochYAML := ""
	if o.interval > 0 {
		epochYAML = fmt.Sprintf("epoch:\n  interval: %s\n", o.interval)
	}
	tablesYAML := ""
	if o.partition != "" {
		fields, _ := partitionFields(o.partition)
		quoted := make([]string, len(fields))
		for i, f := range fields {
			quoted[i] = strconv.Quote(f)
		}
		tablesYAML = fmt.Sprintf("tables:\n  - match: %s.%s\n    partition: [%s]\n", benchDB, benchTable, strings.Join(quoted, ", "))
	}
	// The key index lives in the run's directory (the default is under
	// $HOME, shared by every run).
	deletesYAML := "deletes:\n  index_dir: " + filepath.Join(dir, "index") + "\n"
	if o.deletesMode != "" {
		deletesYAML += "  mode: " + o.deletesMode + "\n"
	}
	cfgPath := filepath.Join(dir, "cdcsync.yaml")
	cfgYAML := fmt.Sprintf(`pipeline: bench
source:
  host: 127.0.0.1
  port: %d
  user: %s
  password: %s
  server_id: 4242
  include: ["bench.*"]
warehouse:
  %s
catalog:
  type: sql
  name: cdcsync
  sql:
    driver: sqlite
    dsn: %s
%s%s%shttp:
  listen: %s
admin:
  listen: %s
  pprof: %t
%s
`, db.Port, testenv.ReplUser, testenv.ReplPassword, warehouseYAML, filepath.Join(dir, "catalog.db"), epochYAML, tablesYAML, deletesYAML, httpAddr,
		adminSocket(cfgPath), o.pprofDir != "", o.extraConfig)
	if err := os.WriteFile(cfgPath, []byte(cfgYAML), 0o600); err != nil {
		return nil, err
	}

	conn, err := db.Connect(testenv.RootUser, "", "")
	if err != nil {
		return nil, err
	}
	defer conn.Close()

	// Fill the snapshot table.
	logf("filling bench.t with %d rows", o.rows)
	t0 := time.Now()
	if err := fillTable(conn, o.rows); err != nil {
		return nil, err
	}
	res.Snapshot.FillSeconds = time.Since(t0).Seconds()
	if r, err := conn.Execute("ANALYZE TABLE bench.t"); err == nil {
		r.Close()
	}
	if r, err := conn.Execute("SELECT data_length + index_length FROM information_schema.TABLES WHERE table_schema = 'bench' AND table_name = 't'"); err == nil {
		n, _ := r.GetInt(0, 0)
		res.Snapshot.TableMiB = float64(n) / mib
		r.Close()
	}

	// Baseline B: raw SELECT (twice for the Go client: the first run warms
	// the buffer pool, as the fill already did).
	logf("baseline B: raw SELECT")
	res.LoadAvg = append(res.LoadAvg, "baseline B: "+loadAvg())
	sel, err := rawSelect(db)
	if err != nil {
		return nil, err
	}
	if sel2, err := rawSelect(db); err == nil && sel2.GoWall < sel.GoWall {
		sel = sel2
	}
	res.Baselines.SelectRows = sel.Rows
	res.Baselines.SelectGoSeconds = sel.GoWall.Seconds()
	res.Baselines.SelectGoRate = float64(sel.Rows) / sel.GoWall.Seconds()
	res.Baselines.SelectGoCPUPerMRows = sel.GoCPU.Seconds() / (float64(sel.Rows) / 1e6)
	res.Baselines.SelectCLISeconds = sel.CLIWall.Seconds()
	if sel.CLIWall > 0 {
		res.Baselines.SelectCLIRate = float64(sel.Rows) / sel.CLIWall.Seconds()
	}
	res.Baselines.SelectCLINote = sel.CLIStatus

	// Snapshot: the initial copy.
	watcher, err := openLake(cfgPath)
	if err != nil {
		return nil, err
	}
	interval := watcher.cfg.Epoch.Interval.Duration // --interval, --extra-config or cdcsync's default
	logf("snapshot: cdcsync copies %d rows", o.rows)
	res.LoadAvg = append(res.LoadAvg, "snapshot: "+loadAvg())
	d, err := startDaemon(bin, cfgPath, filepath.Join(dir, "cdcsync-snapshot.log"), httpAddr)
	if err != nil {
		return nil, err
	}
	var prof *profiler
	if o.pprofDir != "" {
		prof = d.startProfile(o.pprofDir, "snapshot", o.pprofSeconds)
	}
	// The copy is done when /readyz answers 200: every initial copy is
	// finished and the binlog is being read. (The pipeline's checkpoint may
	// exist long before that: the copy commits in chunks.)
	seenAt, err := d.waitReady(30 * time.Minute)
	if err != nil {
		d.terminate(time.Minute)
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	st, _ := procStatus(d.cmd.Process.Pid)
	res.Snapshot.Rows = o.rows
	res.Snapshot.Seconds = seenAt.Sub(d.started).Seconds()
	res.Snapshot.LogRows, res.Snapshot.LogSeconds = copyLog(d)
	if res.Snapshot.LogRows > 0 && res.Snapshot.LogRows != o.rows {
		logf("snapshot: the daemon's log says %d rows were copied, the table has %d", res.Snapshot.LogRows, o.rows)
	}
	res.Snapshot.Rate = float64(o.rows) / res.Snapshot.Seconds
	res.Snapshot.RatioGo = res.Snapshot.Rate / res.Baselines.SelectGoRate
	if res.Baselines.SelectCLIRate > 0 {
		res.Snapshot.RatioCLI = res.Snapshot.Rate / res.Baselines.SelectCLIRate
	}
	res.Snapshot.CPUSeconds = st.cpu.Seconds()
	res.Snapshot.CPUPerMRows = st.cpu.Seconds() / (float64(o.rows) / 1e6)
	res.Snapshot.PeakRSSMiB = float64(st.hwm) / mib
	res.Snapshot.StartSeconds = logDelay(d, "msg=\"initial copy") // "initial copy starting" or, in the chunked copy, its first "initial copy progress"
	if prof != nil {
		if err := prof.finish(); err != nil {
			logf("profile: %v", err)
		}
	}
	if err := d.terminate(2 * time.Minute); err != nil {
		return nil, fmt.Errorf("snapshot: stop cdcsync: %w\n%s", err, d.logTail())
	}
	if rss := d.childMaxRSS(); float64(rss)/mib > res.Snapshot.PeakRSSMiB {
		res.Snapshot.PeakRSSMiB = float64(rss) / mib
	}
	ckSeq, _, err := watcher.checkpointSeq()
	if err != nil {
		return nil, err
	}

	// Generate the catch-up changes while cdcsync is stopped.
	startPos, err := binlogPos(conn)
	if err != nil {
		return nil, err
	}
	logf("catch-up: generating %d row changes (binlog from %s:%d)", o.changes, startPos.Name, startPos.Pos)
	gen := &changeGen{r: rand.New(rand.NewPCG(7, 8)), maxID: o.rows, update: 70}
	t0 = time.Now()
	txns, err := generateChanges(conn, gen, o.changes)
	if err != nil {
		return nil, fmt.Errorf("generate changes: %w", err)
	}
	res.Catchup.GenSeconds = time.Since(t0).Seconds()
	target := txns[len(txns)-1].seq
	for _, t := range txns {
		res.Catchup.Changes += t.rows
	}
	res.Catchup.Txns = len(txns)
	if gp, err := gtidBinlogPos(conn); err == nil {
		logf("catch-up: target @@gtid_binlog_pos %s (checkpoint was at sequence %d)", gp, ckSeq)
	}

	// Baselines A and P: raw decodes of the same binlog range, configured
	// like cdcsync and plain.
	logf("baseline A: raw binlog decode")
	res.LoadAvg = append(res.LoadAvg, "baseline A: "+loadAvg())
	dec, err := bestDecode(db, decodeA, startPos, target)
	if err != nil {
		return nil, err
	}
	res.Baselines.DecodeSeconds = dec.Wall.Seconds()
	res.Baselines.DecodeRowChanges = dec.RowChanges
	res.Baselines.DecodeRate = float64(dec.RowChanges) / dec.Wall.Seconds()
	res.Baselines.DecodeCPUMicros = float64(dec.CPU.Microseconds()) / float64(dec.RowChanges)
	res.Baselines.DecodeBinlogMB = float64(dec.Bytes) / mib
	logf("baseline P: plain binlog decode")
	plain, err := bestDecode(db, decodePlain, startPos, target)
	if err != nil {
		return nil, err
	}
	pf := figures(decodePlain, plain)
	res.Baselines.PlainSeconds, res.Baselines.PlainChanges, res.Baselines.PlainRate, res.Baselines.PlainCPUMicros = pf.Seconds, pf.Changes, pf.Rate, pf.CPUMicros
	res.Baselines.Limit, res.Baselines.LimitRate, res.Baselines.LimitCPUMicros = "A", res.Baselines.DecodeRate, res.Baselines.DecodeCPUMicros
	if pf.CPUMicros < res.Baselines.DecodeCPUMicros {
		res.Baselines.Limit, res.Baselines.LimitRate, res.Baselines.LimitCPUMicros = "P", pf.Rate, pf.CPUMicros
	}
	if o.decodeVariants {
		for _, v := range decodeSteps {
			logf("decode variant %s: %s", v.Name, v.Desc)
			d, err := bestDecode(db, v, startPos, target)
			if err != nil {
				return nil, err
			}
			res.Baselines.Variants = append(res.Baselines.Variants, figures(v, d))
		}
	}

	// The Debezium peer: the same range, into a consumer that discards it.
	if o.debezium {
		logf("Debezium peer: the MySQL connector reads the same range %d times in one JVM (the first cold, the last warm)", o.debeziumPasses)
		res.LoadAvg = append(res.LoadAvg, "Debezium: "+loadAvg())
		dz, err := runDebezium(debeziumCP, db, startPos, dec.RowChanges, o.debeziumPasses, filepath.Join(dir, "debezium.log"))
		if err != nil {
			// Keep the run: report the failure in the summary.
			logf("Debezium peer: %v", err)
			dz.Error = err.Error()
		}
		res.Debezium = &dz
	}

	// Catch-up: cdcsync from its checkpoint to the target.
	logf("catch-up: cdcsync applies %d row changes", res.Catchup.Changes)
	res.LoadAvg = append(res.LoadAvg, "catch-up: "+loadAvg())
	d, err = startDaemon(bin, cfgPath, filepath.Join(dir, "cdcsync-catchup.log"), httpAddr)
	if err != nil {
		return nil, err
	}
	prof = nil
	if o.pprofDir != "" {
		prof = d.startProfile(o.pprofDir, "catchup", o.pprofSeconds)
	}
	type progress struct {
		at  time.Time
		seq uint64
	}
	var prog []progress
	seenAt, err = watcher.waitCheckpoint(d, target, false, 30*time.Minute, func(seq uint64) {
		if len(prog) == 0 || prog[len(prog)-1].seq != seq {
			prog = append(prog, progress{time.Now(), seq})
		}
	})
	if err != nil {
		d.terminate(time.Minute)
		return nil, fmt.Errorf("catch-up: %w", err)
	}
	st, _ = procStatus(d.cmd.Process.Pid)
	res.Catchup.Seconds = seenAt.Sub(d.started).Seconds()
	res.Catchup.Rate = float64(res.Catchup.Changes) / res.Catchup.Seconds
	res.Catchup.Ratio = res.Catchup.Rate / res.Baselines.DecodeRate
	res.Catchup.CPUSeconds = st.cpu.Seconds()
	res.Catchup.CPUMicros = float64(st.cpu.Microseconds()) / float64(res.Catchup.Changes)
	res.Catchup.RatioLimit = res.Catchup.Rate / res.Baselines.LimitRate
	res.Catchup.CPUxA = res.Catchup.CPUMicros / res.Baselines.DecodeCPUMicros
	res.Catchup.CPUxLimit = res.Catchup.CPUMicros / res.Baselines.LimitCPUMicros
	if dz := res.Debezium; dz != nil && dz.Error == "" {
		res.Catchup.RatioDebezium = res.Catchup.Rate / dz.Rate
		res.Catchup.CPUxDebezium = res.Catchup.CPUMicros / dz.CPUMicros
	}
	res.Catchup.PeakRSSMiB = float64(st.hwm) / mib
	res.Catchup.StartupSeconds = logDelay(d, "streaming the binlog")
	// The body: up to the last checkpoint before the final one, which may
	// have waited out the epoch interval after the binlog was read.
	if len(prog) >= 3 {
		last := prog[len(prog)-2]
		var n int64
		for _, t := range txns {
			if t.seq <= last.seq {
				n += t.rows
			}
		}
		res.Catchup.BodyChanges = n
		res.Catchup.BodySeconds = last.at.Sub(d.started).Seconds()
		res.Catchup.BodyRate = float64(n) / res.Catchup.BodySeconds
		res.Catchup.BodyRatio = res.Catchup.BodyRate / res.Baselines.DecodeRate
	}
	if commits, err := watcher.commits(); err == nil {
		for _, c := range commits {
			if !c.at.Before(d.started) && !c.at.After(seenAt) {
				res.Catchup.Epochs++
			}
		}
		res.Catchup.FilesPerEpoch, res.Catchup.MaxEpochFiles = filesPerCommit(commits, d.started, seenAt)
	}
	if prof != nil {
		if err := prof.finish(); err != nil {
			logf("profile: %v", err)
		}
	}
	if err := d.terminate(2 * time.Minute); err != nil {
		return nil, fmt.Errorf("catch-up: stop cdcsync: %w\n%s", err, d.logTail())
	}
	if fs, err := watcher.tableFiles(context.Background()); err == nil {
		res.Catchup.DataFilesAfter, res.Catchup.DeleteFilesAfter = fs.DataFiles, fs.DeleteFiles
	}
	if rss := d.childMaxRSS(); float64(rss)/mib > res.Catchup.PeakRSSMiB {
		res.Catchup.PeakRSSMiB = float64(rss) / mib
	}

	if o.hugeTxn > 0 {
		logf("huge transaction: one UPDATE of %d rows", o.hugeTxn)
		res.LoadAvg = append(res.LoadAvg, "huge transaction: "+loadAvg())
		if res.Huge, err = hugeTxn(bin, cfgPath, dir, httpAddr, conn, watcher, o.hugeTxn); err != nil {
			return nil, err
		}
	}

	// Freshness and steady state at each rate, in one fresh daemon, on a
	// table without the catch-up's delete files: otherwise in-process
	// maintenance (on by default) compacts them during the first rate.
	logf("freshness: compacting the catch-up's delete files first (cdcsync compact)")
	out, wall, err := compactTable(bin, cfgPath)
	res.FreshCompactSeconds, res.FreshCompactOutput = wall.Seconds(), out
	if err != nil {
		logf("freshness: %v (the runs go on without it)", err)
	}
	logf("freshness: %v changes/s, %s each (epoch interval %s)", o.rates, o.duration, interval)
	d, err = startDaemon(bin, cfgPath, filepath.Join(dir, "cdcsync-fresh.log"), httpAddr)
	if err != nil {
		return nil, err
	}
	if _, err := d.waitReady(5 * time.Minute); err != nil {
		d.terminate(time.Minute)
		return nil, fmt.Errorf("freshness: %w", err)
	}
	d.sampleRSS(time.Second)
	nextID := gen.maxID + 10_000_000 // fresh ids for inserts, far above the catch-up's
	var windows []rateWindow
	for _, rate := range o.rates {
		w, err := freshnessAt(o, db, d, watcher, gen.maxID, &nextID, rate)
		if err != nil {
			d.terminate(time.Minute)
			return nil, err
		}
		res.LoadAvg = append(res.LoadAvg, fmt.Sprintf("freshness %d/s: %s", rate, w.loadAvg))
		windows = append(windows, w)
	}
	samples := d.stopSampling()
	if err := d.terminate(2 * time.Minute); err != nil {
		return nil, fmt.Errorf("freshness: stop cdcsync: %w\n%s", err, d.logTail())
	}
	commits, err := watcher.commits()
	if err != nil {
		return nil, err
	}
	for i := range windows {
		res.FreshRuns = append(res.FreshRuns, windows[i].summarize(interval, commits, samples))
	}
	if i := targetRun(res.FreshRuns); i >= 0 {
		res.Fresh = res.FreshRuns[i]
	}

	// Read amplification: the table with its upsert epochs' delete files,
	// scanned before and after `cdcsync compact`.
	res.LoadAvg = append(res.LoadAvg, "read amplification: "+loadAvg())
	ra, err := readAmplification(o, &ampEnv{bin: bin, dir: dir, cfgPath: cfgPath, cfgYAML: cfgYAML, httpAddr: httpAddr,
		db: db, conn: conn, watcher: watcher, interval: interval, maxID: gen.maxID, nextID: &nextID})
	if err != nil {
		// Keep the figures measured so far: report the failure instead.
		logf("read amplification: %v", err)
		ra.Error = err.Error()
	}
	res.ReadAmp = ra

	return &res, nil
}

// logDelay is the time from the daemon's start to the first log line that
// contains msg (slog text handler's time= field), or 0.
func logDelay(d *daemon, msg string) float64 {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, msg) || !strings.HasPrefix(line, "time=") {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return 0
		}
		return t.Sub(d.started).Seconds()
	}
	return 0
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				_, model, _ = strings.Cut(line, ":")
				model = strings.TrimSpace(model)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb)
		mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
	}
	return fmt.Sprintf("%d CPUs (%s), %s, %s %s/%s", runtime.NumCPU(), model, mem, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// gitState describes the source cdcsync was built from: HEAD and how many
// files differ from it (other work in progress changes the figures).
func gitState() string {
	head, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown (no git)"
	}
	st, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	n := 0
	for _, l := range strings.Split(string(st), "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return fmt.Sprintf("%s with %d modified files", strings.TrimSpace(string(head)), n)
}

// loadAvg is the 1-minute load average.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// sustained says whether the load generator reached the offered rate and
// the daemon kept up with it.
func sustained(f *freshRun) string {
	s := "sustained"
	if !f.Sustained {
		s = fmt.Sprintf("**not sustained**: %.0f%% of the offered rate", 100*f.AchievedRate/float64(f.TargetRate))
	}
	if f.DaemonBehind {
		s += fmt.Sprintf(", **the daemon fell behind** (last txn visible %.1f s after the load ended)", f.DrainSeconds)
	}
	return s
}

func secs(s float64) string { return strconv.FormatFloat(s, 'f', -1, 64) + " s" }

// files describes what a scan reads, and the harness's memory meanwhile.
func files(s *scanStats) string {
	f := fmt.Sprintf("%d data files (%d rows), %d delete files (%d equality, %d rows), %.1f MiB", s.DataFiles, s.DataRecords, s.DeleteFiles, s.EqDeleteFiles, s.DeleteRecords, s.FilesMiB)
	if s.PeakRSSMiB > 0 {
		f += fmt.Sprintf("; harness RSS %.0f MiB before, peak %.0f MiB", s.BaseRSSMiB, s.PeakRSSMiB)
	}
	return f
}

func markdown(r *results) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	b2 := &r.Baselines
	layout := "unpartitioned"
	if r.Partition != "" {
		layout = "partitioned by " + r.Partition
	}
	w("## cdcsync bench, %s, bench.t %s", r.Started.Format("2006-01-02 15:04 UTC"), layout)
	w("")
	w("Source: %s.", r.Source)
	w("")
	w("Machine: %s. Options: %v. 1-minute load average at the start of each phase: %s.", r.Machine, r.Options, strings.Join(r.LoadAvg, ", "))
	w("")
	w("| Measure | Figure | Baseline (same run) | Ratio |")
	w("|---|---|---|---|")
	w("| Baseline A: raw binlog decode (go-mysql BinlogSyncer configured like capture/stream.go, events discarded) | %d row changes in %.2f s = %.0f changes/s, %.2f CPU-µs/change, %.0f MiB of binlog | | |",
		b2.DecodeRowChanges, b2.DecodeSeconds, b2.DecodeRate, b2.DecodeCPUMicros, b2.DecodeBinlogMB)
	w("| Baseline P: plain binlog decode (go-mysql BinlogSyncer, library defaults, ParseTime on, UseDecimal off, events discarded) | %d row changes in %.2f s = %.0f changes/s, %.2f CPU-µs/change | %.2f CPU-µs/change (A) | %.2fx A's CPU |",
		b2.PlainChanges, b2.PlainSeconds, b2.PlainRate, b2.PlainCPUMicros, b2.DecodeCPUMicros, b2.PlainCPUMicros/b2.DecodeCPUMicros)
	if dz := r.Debezium; dz != nil && dz.Error != "" {
		w("| Debezium peer | failed: %s | | |", strings.ReplaceAll(strings.TrimSpace(strings.SplitN(dz.Error, "\n", 2)[0]), "|", "\\|"))
	} else if dz != nil {
		w("| Debezium peer: %s %s, embedded engine, events discarded; warm: pass %d of %d, each a new engine in the same JVM | %d row changes in %.2f s = %.0f changes/s, %.2f CPU-s = %.2f CPU-µs/change | %.2f CPU-µs/change (decode limit, %s) | %.1fx the limit's CPU |",
			dz.Connector[strings.LastIndexByte(dz.Connector, '.')+1:], dz.Version, len(dz.Passes), len(dz.Passes), dz.Changes, dz.Seconds, dz.Rate, dz.CPUSeconds, dz.CPUMicros, b2.LimitCPUMicros, b2.Limit, dz.CPUMicros/b2.LimitCPUMicros)
		var mid []string
		for _, p := range dz.Passes[1 : len(dz.Passes)-1] {
			mid = append(mid, fmt.Sprintf("%.2f", p.CPU*1e6/float64(p.Changes)))
		}
		between := ""
		if len(mid) > 0 {
			between = fmt.Sprintf(" (passes between: %s CPU-µs/change)", strings.Join(mid, ", "))
		}
		w("| Debezium peer: cold pass (the JVM's first engine, JIT compiling) | %.2f s = %.0f changes/s, %.2f CPU-s = %.2f CPU-µs/change%s; before the timer: JVM start %.2f s, engine start and schema capture %.2f s; the JVM's CPU from start to exit %.2f s over %.1f s | | |",
			dz.ColdSeconds, dz.ColdRate, dz.ColdCPUSeconds, dz.ColdCPUMicros, between, dz.JVMStartSeconds, dz.ReadySeconds, dz.ProcessCPUSeconds, dz.WallSeconds)
	}
	w("| Baseline B: raw SELECT, go-mysql ExecuteSelectStreaming | %d rows in %.2f s = %.0f rows/s, %.2f CPU-s/M rows | | |",
		b2.SelectRows, b2.SelectGoSeconds, b2.SelectGoRate, b2.SelectGoCPUPerMRows)
	if b2.SelectCLISeconds > 0 {
		w("| Baseline B: `mariadb --quick -e 'select * from bench.t' > /dev/null` | %.2f s = %.0f rows/s | | |", b2.SelectCLISeconds, b2.SelectCLIRate)
	} else {
		w("| Baseline B: mariadb client | %s | | |", b2.SelectCLINote)
	}
	s := &r.Snapshot
	copyLog := ""
	if s.LogRows > 0 {
		copyLog = fmt.Sprintf(" (daemon log: %d rows copied in %.2f s)", s.LogRows, s.LogSeconds)
	}
	w("| Snapshot (initial copy, start to /readyz 200) | %d rows in %.2f s = %.0f rows/s%s | %.0f rows/s (Go SELECT) | %.2f (CLI: %.2f) |",
		s.Rows, s.Seconds, s.Rate, copyLog, b2.SelectGoRate, s.RatioGo, s.RatioCLI)
	w("| Snapshot CPU, peak RSS | %.2f CPU-s = %.2f CPU-s/M rows; peak RSS %.0f MiB | %.2f CPU-s/M rows (Go SELECT) | |",
		s.CPUSeconds, s.CPUPerMRows, s.PeakRSSMiB, b2.SelectGoCPUPerMRows)
	c := &r.Catchup
	w("| Catch-up (start to checkpoint ≥ target) | %d row changes in %.2f s = %.0f changes/s | %.0f changes/s (decode) | %.2f |",
		c.Changes, c.Seconds, c.Rate, b2.DecodeRate, c.Ratio)
	if c.BodySeconds > 0 {
		w("| Catch-up without the last epoch's interval wait | %d changes by %.2f s = %.0f changes/s | | %.2f |", c.BodyChanges, c.BodySeconds, c.BodyRate, c.BodyRatio)
	}
	w("| Catch-up CPU, peak RSS | %.2f CPU-s = %.2f CPU-µs/change; peak RSS %.0f MiB | %.2f CPU-µs/change (decode) | %.1fx |",
		c.CPUSeconds, c.CPUMicros, c.PeakRSSMiB, b2.DecodeCPUMicros, c.CPUMicros/b2.DecodeCPUMicros)
	w("| Catch-up against the decode limit (baseline %s, the lower CPU of A and P) | %.0f changes/s, %.2f CPU-µs/change | %.0f changes/s, %.2f CPU-µs/change | rate %.2f, CPU %.1fx |",
		b2.Limit, c.Rate, c.CPUMicros, b2.LimitRate, b2.LimitCPUMicros, c.RatioLimit, c.CPUxLimit)
	if dz := r.Debezium; dz != nil && dz.Error == "" {
		w("| Catch-up end to end (decode, merge, Parquet, commit) against Debezium's decode alone (warm) | %.0f changes/s, %.2f CPU-µs/change | %.0f changes/s, %.2f CPU-µs/change | rate %.2f, CPU %.2fx |",
			c.Rate, c.CPUMicros, dz.Rate, dz.CPUMicros, c.RatioDebezium, c.CPUxDebezium)
	}
	if r.Huge != nil {
		b.WriteString(hugeMarkdown(r.Huge, b2.DecodeCPUMicros))
	}
	target := targetRun(r.FreshRuns)
	for i := range r.FreshRuns {
		f := &r.FreshRuns[i]
		goal, rssGoal := "", ""
		if i == target {
			goal = fmt.Sprintf("target p99 ≤ %.1f s", f.Interval+1)
			rssGoal = "target RSS ≤ 256 MiB"
		}
		w("| Freshness at %d changes/s offered (%d-row txns), epoch interval %s | p50 %.2f s, p95 %.2f s, p99 %.2f s, max %.2f s over %d txns (%d uncovered), %d commits; last txn visible %.1f s after the load ended | %s | |",
			f.TargetRate, f.TxnRows, secs(f.Interval), f.P50, f.P95, f.P99, f.Max, f.Txns, f.Uncovered, f.Commits, f.DrainSeconds, goal)
		failed := ""
		if f.FailedTxns > 0 {
			failed = fmt.Sprintf(", %d rolled back by deadlocks", f.FailedTxns)
		}
		w("| Steady state at %d changes/s offered | achieved %.0f changes/s over %.0f s (%s; %d late txns%s); RSS max %.0f MiB, median %.0f MiB; %.2f CPU-µs/change | %s | |",
			f.TargetRate, f.AchievedRate, f.DurationSecs, sustained(f), f.LateTxns, failed, f.RSSMaxMiB, f.RSSMedianMiB, f.CPUMicros, rssGoal)
	}
	a := &r.ReadAmp
	if a.Error != "" {
		w("| Read amplification | failed: %s | | |", strings.ReplaceAll(strings.TrimSpace(strings.SplitN(a.Error, "\n", 2)[0]), "|", "\\|"))
	}
	if a.Before.Seconds > 0 {
		load := "no load of its own: what the freshness runs left"
		if a.LoadRate > 0 {
			load = fmt.Sprintf("after %d more epochs at %d changes/s offered (%.0f achieved, %d row changes)", a.Epochs, a.LoadRate, a.LoadAchieved, a.LoadChanges)
		}
		w("| Read amplification: full iceberg-go scan, %s; maintenance %s | best of %d: %.2f s for %d rows (%.2f CPU-s; plan %.2f s); %s | | |",
			load, a.Maintenance, len(a.Before.AllSeconds), a.Before.Seconds, a.Before.Rows, a.Before.CPUSeconds, a.Before.PlanSeconds, files(&a.Before))
	}
	if a.After.Seconds > 0 {
		w("| Read amplification: the same scan after `cdcsync compact` (%.1f s) | best of %d: %.2f s for %d rows (%.2f CPU-s; plan %.2f s); %s | %.2f s before | %.2fx |",
			a.CompactSeconds, len(a.After.AllSeconds), a.After.Seconds, a.After.Rows, a.After.CPUSeconds, a.After.PlanSeconds, files(&a.After), a.Before.Seconds, a.Ratio)
	}
	if len(a.Snapshots) > 0 {
		epochs, others := snapshotCells(a.Snapshots, func(sn snapshotScan) float64 { return sn.Ratio })
		w("| Read amplification at every snapshot of the phase (maintenance on), per row against the compacted table | epochs: %s; maintenance: %s | | max %.2fx |",
			strings.Join(epochs, ", "), strings.Join(others, ", "), a.MaxSnapRatio)
		switch {
		case a.DuckError != "":
			w("| Read amplification at every snapshot, DuckDB | not measured: %s | | |", strings.ReplaceAll(strings.TrimSpace(strings.SplitN(a.DuckError, "\n", 2)[0]), "|", "\\|"))
		case a.DuckMaxSnapRatio > 0:
			epochs, others = snapshotCells(a.Snapshots, func(sn snapshotScan) float64 { return sn.DuckRatio })
			w("| Read amplification at every snapshot, DuckDB %s (`iceberg_scan`, every column read; best of 2; compacted table %.2f s for %d rows) | epochs: %s; maintenance: %s | | max %.2fx |",
				a.DuckDB, a.DuckCompacted.Seconds, a.DuckCompacted.Rows, strings.Join(epochs, ", "), strings.Join(others, ", "), a.DuckMaxSnapRatio)
		}
	}
	if a.Note != "" {
		w("| Read amplification: row counts | %s | | |", a.Note)
	}
	if len(b2.Variants) > 0 {
		w("")
		w("| Decode variant (--decode-variants), same range, best of two | Figure | Against A | Against P |")
		w("|---|---|---|---|")
		w("| A: %s | %.0f changes/s, %.2f CPU-µs/change | | %+.2f CPU-µs/change |", decodeA.Desc, b2.DecodeRate, b2.DecodeCPUMicros, b2.DecodeCPUMicros-b2.PlainCPUMicros)
		for _, v := range b2.Variants {
			w("| %s: %s | %.0f changes/s, %.2f CPU-µs/change | %+.2f CPU-µs/change | %+.2f CPU-µs/change |", v.Name, v.Desc, v.Rate, v.CPUMicros, v.CPUMicros-b2.DecodeCPUMicros, v.CPUMicros-b2.PlainCPUMicros)
		}
		w("| P: %s | %.0f changes/s, %.2f CPU-µs/change | %+.2f CPU-µs/change | |", decodePlain.Desc, b2.PlainRate, b2.PlainCPUMicros, b2.PlainCPUMicros-b2.DecodeCPUMicros)
	}
	w("")
	w("Setup: fill %.1f s (table %.0f MiB in InnoDB), catch-up changes generated in %.1f s (%d transactions), daemon startup before copying %.2f s, before streaming %.2f s; `cdcsync compact` of the catch-up's delete files before the freshness runs %.1f s.",
		s.FillSeconds, s.TableMiB, c.GenSeconds, c.Txns, s.StartSeconds, c.StartupSeconds, r.FreshCompactSeconds)
	w("")
	w("| Target | Measured | Verdict |")
	w("|---|---|---|")
	w("| Catch-up ≥ 50%% of raw decode | %.0f%% | %s |", c.Ratio*100, verdict(c.Ratio >= 0.5))
	w("| ≤ 5 CPU-µs per row change end to end (catch-up) | %.2f | %s |", c.CPUMicros, verdict(c.CPUMicros <= 5))
	w("| Snapshot ≥ 70%% of raw SELECT (go-mysql) | %.0f%% | %s |", s.RatioGo*100, verdict(s.RatioGo >= 0.7))
	if target >= 0 {
		f := &r.FreshRuns[target]
		w("| p99 freshness ≤ interval + 1 s at %d changes/s | %.2f s (achieved %.0f changes/s) | %s |", f.TargetRate, f.P99, f.AchievedRate,
			verdict(f.P99 <= f.Interval+1 && f.Sustained && f.Uncovered == 0))
		w("| Steady RSS ≤ 256 MiB (at %d changes/s) | median %.0f MiB, max %.0f MiB | %s |", f.TargetRate, f.RSSMedianMiB, f.RSSMaxMiB, verdict(f.RSSMedianMiB <= 256))
		w("| Steady RSS max ≤ 384 MiB, maintenance on (issue 18) | %.0f MiB | %s |", f.RSSMaxMiB, verdict(f.RSSMaxMiB <= 384))
	}
	if a.MaxSnapRatio > 0 {
		w("| Read amplification ≤ 1.2x the compacted table at every snapshot (issue 18), iceberg-go | max %.2fx | %s |", a.MaxSnapRatio, verdict(a.MaxSnapRatio <= 1.2))
	}
	if a.DuckMaxSnapRatio > 0 {
		w("| The same, DuckDB %s | max %.2fx | %s |", a.DuckDB, a.DuckMaxSnapRatio, verdict(a.DuckMaxSnapRatio <= 1.2))
	}
	return b.String()
}

// snapshotCells formats a ratio of each snapshot scan, epochs' apart from
// maintenance's (named by their kind).
func snapshotCells(snaps []snapshotScan, ratio func(snapshotScan) float64) (epochs, others []string) {
	for _, sn := range snaps {
		cell := fmt.Sprintf("%.2f", ratio(sn))
		if sn.Maintenance != "" {
			others = append(others, sn.Maintenance+" "+cell)
		} else {
			epochs = append(epochs, cell)
		}
	}
	return epochs, others
}

// dirBytes returns the bytes of the files under dir (0 when it cannot be
// walked).
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
