// Command bench measures cdcsync end to end against a MariaDB it starts
// itself (and MinIO with --warehouse minio), next to baselines measured in
// the same run: the initial copy against a raw SELECT, the binlog catch-up
// against a raw go-mysql decode of the same binlog range, and the freshness
// and memory of the daemon under a paced load. See docs/performance.md.
//
//	go run ./bench                       # full run, about 5 to 10 minutes
//	go run ./bench --quick               # smoke run: 100k rows/changes, 15 s
//	go run ./bench --out bench.md        # also write the summary (and bench.json)
//	go run ./bench --pprof /tmp/prof     # also profile the daemon (timings are perturbed)
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

type options struct {
	rows, changes  int64
	rate, txnRows  int
	workers        int
	duration       time.Duration
	interval       time.Duration
	out, warehouse string
	quick, keep    bool
	pprofDir       string
	pprofSeconds   int
	extraConfig    string
}

func main() {
	var o options
	flag.Int64Var(&o.rows, "rows", 1_000_000, "rows in the snapshot table")
	flag.Int64Var(&o.changes, "changes", 1_000_000, "row changes for the catch-up")
	flag.IntVar(&o.rate, "rate", 10_000, "row changes per second in the freshness run")
	flag.IntVar(&o.txnRows, "txn-rows", 10, "row changes per transaction in the freshness run")
	flag.IntVar(&o.workers, "workers", 8, "connections of the freshness load generator")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "length of the freshness run")
	flag.DurationVar(&o.interval, "interval", 0, "epoch.interval for cdcsync (0: cdcsync's default, 5s)")
	flag.StringVar(&o.out, "out", "", "write the summary as markdown to this file, and as JSON beside it (.json)")
	flag.StringVar(&o.warehouse, "warehouse", "local", "local (a directory) or minio (S3 on a MinIO the harness starts)")
	flag.BoolVar(&o.quick, "quick", false, "smoke run: 100k rows and changes, 15 s freshness run")
	flag.BoolVar(&o.keep, "keep", false, "keep the working directory (servers' data, warehouse, logs)")
	flag.StringVar(&o.pprofDir, "pprof", "", "save CPU and allocation profiles of the daemon's copy, catch-up and freshness run here")
	flag.IntVar(&o.pprofSeconds, "pprof-seconds", 30, "length of each CPU profile")
	flag.StringVar(&o.extraConfig, "extra-config", "", "YAML appended to cdcsync's configuration, e.g. 'maintenance: {enabled: false}'")
	flag.Parse()
	if o.quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["rows"] {
			o.rows = 100_000
		}
		if !set["changes"] {
			o.changes = 100_000
		}
		if !set["duration"] {
			o.duration = 15 * time.Second
		}
	}
	if o.warehouse != "local" && o.warehouse != "minio" {
		fmt.Fprintln(os.Stderr, "bench: --warehouse is local or minio")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// results is everything one run measured.
type results struct {
	Machine   string         `json:"machine"`
	Source    string         `json:"source"`  // git HEAD and the files modified in the work tree, from which cdcsync was built
	LoadAvg   []string       `json:"loadavg"` // /proc/loadavg at the start of each phase: other work on the machine skews the figures
	Options   map[string]any `json:"options"`
	Started   time.Time      `json:"started"`
	Baselines struct {
		DecodeSeconds       float64 `json:"decode_seconds"`
		DecodeRowChanges    int64   `json:"decode_row_changes"`
		DecodeRate          float64 `json:"decode_changes_per_s"`
		DecodeCPUMicros     float64 `json:"decode_cpu_us_per_change"`
		DecodeBinlogMB      float64 `json:"decode_binlog_mb"`
		SelectRows          int64   `json:"select_rows"`
		SelectGoSeconds     float64 `json:"select_go_seconds"`
		SelectGoRate        float64 `json:"select_go_rows_per_s"`
		SelectGoCPUPerMRows float64 `json:"select_go_cpu_s_per_mrows"`
		SelectCLISeconds    float64 `json:"select_cli_seconds"`
		SelectCLIRate       float64 `json:"select_cli_rows_per_s"`
		SelectCLINote       string  `json:"select_cli_note,omitempty"`
	} `json:"baselines"`
	Snapshot struct {
		Rows         int64   `json:"rows"`
		Seconds      float64 `json:"seconds"`
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
		Changes        int64   `json:"row_changes"`
		Txns           int     `json:"transactions"`
		GenSeconds     float64 `json:"generate_seconds"`
		Seconds        float64 `json:"seconds"`
		Rate           float64 `json:"changes_per_s"`
		Ratio          float64 `json:"ratio_to_decode"`
		CPUSeconds     float64 `json:"cpu_seconds"`
		CPUMicros      float64 `json:"cpu_us_per_change"`
		PeakRSSMiB     float64 `json:"peak_rss_mib"`
		BodySeconds    float64 `json:"body_seconds"`
		BodyChanges    int64   `json:"body_changes"`
		BodyRate       float64 `json:"body_changes_per_s"`
		BodyRatio      float64 `json:"body_ratio_to_decode"`
		StartupSeconds float64 `json:"startup_seconds"`
	} `json:"catchup"`
	Fresh struct {
		Interval      float64 `json:"epoch_interval_s"`
		TargetRate    int     `json:"target_changes_per_s"`
		AchievedRate  float64 `json:"achieved_changes_per_s"`
		Txns          int     `json:"transactions"`
		LateTxns      int     `json:"late_transactions"`
		P50           float64 `json:"p50_s"`
		P99           float64 `json:"p99_s"`
		Max           float64 `json:"max_s"`
		Uncovered     int     `json:"uncovered"`
		Commits       int     `json:"commits"`
		RSSMaxMiB     float64 `json:"rss_max_mib"`
		RSSMedianMiB  float64 `json:"rss_median_mib"`
		CPUSeconds    float64 `json:"cpu_seconds"`
		CPUMicros     float64 `json:"cpu_us_per_change"`
		DurationSecs  float64 `json:"duration_s"`
		RSSSampleSecs float64 `json:"rss_sample_s"`
	} `json:"freshness"`
}

const mib = 1 << 20

func run(o options) error {
	var res results
	res.Started = time.Now().UTC()
	res.Machine = machine()
	res.Source = gitState()
	res.Options = map[string]any{"extra_config": o.extraConfig, "rows": o.rows, "changes": o.changes, "rate": o.rate, "txn_rows": o.txnRows, "workers": o.workers,
		"duration": o.duration.String(), "interval": o.interval.String(), "warehouse": o.warehouse, "pprof": o.pprofDir != ""}
	interval := o.interval
	if interval == 0 {
		interval = 5 * time.Second // config.DefaultEpochInterval
	}
	res.Fresh.Interval = interval.Seconds()
	dir, err := os.MkdirTemp("", "cdcsync-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		logf("working directory: %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if o.pprofDir != "" {
		if err := os.MkdirAll(o.pprofDir, 0o755); err != nil {
			return err
		}
		logf("profiling is on: timings are perturbed by the profiler")
	}

	// Build cdcsync once.
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(dir, "cdcsync")
	logf("building cdcsync")
	build := exec.Command("go", "build", "-o", bin, "./cmd/cdcsync")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/cdcsync: %w", err)
	}

	// Servers.
	logf("starting MariaDB")
	db, err := testenv.StartMariaDB(testenv.MariaDBOptions{Dir: filepath.Join(dir, "mariadb"), ExtraArgs: []string{
		"--innodb-buffer-pool-size=2G", "--innodb-log-file-size=1G", "--innodb-flush-log-at-trx-commit=2",
		"--sync-binlog=0", "--max-allowed-packet=256M", "--binlog-cache-size=16M", "--max-binlog-size=1G",
	}})
	if err != nil {
		return err
	}
	defer db.Stop()
	warehouseYAML := "location: " + filepath.Join(dir, "warehouse")
	if o.warehouse == "minio" {
		logf("starting MinIO")
		m, err := testenv.StartMinIO(filepath.Join(dir, "minio"))
		if err != nil {
			return err
		}
		defer m.Stop()
		if err := m.CreateBucket("bench"); err != nil {
			return err
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
		return err
	}
	epochYAML := ""
	if o.interval > 0 {
		epochYAML = fmt.Sprintf("epoch:\n  interval: %s\n", o.interval)
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
%shttp:
  listen: %s
%s
`, db.Port, testenv.ReplUser, testenv.ReplPassword, warehouseYAML, filepath.Join(dir, "catalog.db"), epochYAML, httpAddr, o.extraConfig)
	if err := os.WriteFile(cfgPath, []byte(cfgYAML), 0o600); err != nil {
		return err
	}

	conn, err := db.Connect(testenv.RootUser, "", "")
	if err != nil {
		return err
	}
	defer conn.Close()

	// Fill the snapshot table.
	logf("filling bench.t with %d rows", o.rows)
	t0 := time.Now()
	if err := fillTable(conn, o.rows); err != nil {
		return err
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
		return err
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
		return err
	}
	logf("snapshot: cdcsync copies %d rows", o.rows)
	res.LoadAvg = append(res.LoadAvg, "snapshot: "+loadAvg())
	d, err := startDaemon(bin, cfgPath, filepath.Join(dir, "cdcsync-snapshot.log"), httpAddr)
	if err != nil {
		return err
	}
	var prof *profiler
	if o.pprofDir != "" {
		prof = d.startProfile(o.pprofDir, "snapshot", o.pprofSeconds)
	}
	seenAt, err := watcher.waitCheckpoint(d, 0, true, 30*time.Minute, nil)
	if err != nil {
		d.terminate(time.Minute)
		return fmt.Errorf("snapshot: %w", err)
	}
	st, _ := procStatus(d.cmd.Process.Pid)
	res.Snapshot.Rows = o.rows
	res.Snapshot.Seconds = seenAt.Sub(d.started).Seconds()
	res.Snapshot.Rate = float64(o.rows) / res.Snapshot.Seconds
	res.Snapshot.RatioGo = res.Snapshot.Rate / res.Baselines.SelectGoRate
	if res.Baselines.SelectCLIRate > 0 {
		res.Snapshot.RatioCLI = res.Snapshot.Rate / res.Baselines.SelectCLIRate
	}
	res.Snapshot.CPUSeconds = st.cpu.Seconds()
	res.Snapshot.CPUPerMRows = st.cpu.Seconds() / (float64(o.rows) / 1e6)
	res.Snapshot.PeakRSSMiB = float64(st.hwm) / mib
	res.Snapshot.StartSeconds = logDelay(d, "initial copy starting")
	if prof != nil {
		if err := prof.finish(); err != nil {
			logf("profile: %v", err)
		}
	}
	if err := d.terminate(2 * time.Minute); err != nil {
		return fmt.Errorf("snapshot: stop cdcsync: %w\n%s", err, d.logTail())
	}
	if rss := d.childMaxRSS(); float64(rss)/mib > res.Snapshot.PeakRSSMiB {
		res.Snapshot.PeakRSSMiB = float64(rss) / mib
	}
	ckSeq, _, err := watcher.checkpointSeq()
	if err != nil {
		return err
	}

	// Generate the catch-up changes while cdcsync is stopped.
	startPos, err := binlogPos(conn)
	if err != nil {
		return err
	}
	logf("catch-up: generating %d row changes (binlog from %s:%d)", o.changes, startPos.Name, startPos.Pos)
	gen := &changeGen{r: rand.New(rand.NewPCG(7, 8)), maxID: o.rows, update: 70}
	t0 = time.Now()
	txns, err := generateChanges(conn, gen, o.changes)
	if err != nil {
		return fmt.Errorf("generate changes: %w", err)
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

	// Baseline A: raw decode of the same binlog range.
	logf("baseline A: raw binlog decode")
	res.LoadAvg = append(res.LoadAvg, "baseline A: "+loadAvg())
	dec, err := rawDecode(db, startPos, target)
	if err != nil {
		return err
	}
	if dec2, err := rawDecode(db, startPos, target); err == nil && dec2.Wall < dec.Wall {
		dec = dec2
	}
	res.Baselines.DecodeSeconds = dec.Wall.Seconds()
	res.Baselines.DecodeRowChanges = dec.RowChanges
	res.Baselines.DecodeRate = float64(dec.RowChanges) / dec.Wall.Seconds()
	res.Baselines.DecodeCPUMicros = float64(dec.CPU.Microseconds()) / float64(dec.RowChanges)
	res.Baselines.DecodeBinlogMB = float64(dec.Bytes) / mib

	// Catch-up: cdcsync from its checkpoint to the target.
	logf("catch-up: cdcsync applies %d row changes", res.Catchup.Changes)
	res.LoadAvg = append(res.LoadAvg, "catch-up: "+loadAvg())
	d, err = startDaemon(bin, cfgPath, filepath.Join(dir, "cdcsync-catchup.log"), httpAddr)
	if err != nil {
		return err
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
		return fmt.Errorf("catch-up: %w", err)
	}
	st, _ = procStatus(d.cmd.Process.Pid)
	res.Catchup.Seconds = seenAt.Sub(d.started).Seconds()
	res.Catchup.Rate = float64(res.Catchup.Changes) / res.Catchup.Seconds
	res.Catchup.Ratio = res.Catchup.Rate / res.Baselines.DecodeRate
	res.Catchup.CPUSeconds = st.cpu.Seconds()
	res.Catchup.CPUMicros = float64(st.cpu.Microseconds()) / float64(res.Catchup.Changes)
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
	if prof != nil {
		if err := prof.finish(); err != nil {
			logf("profile: %v", err)
		}
	}
	if err := d.terminate(2 * time.Minute); err != nil {
		return fmt.Errorf("catch-up: stop cdcsync: %w\n%s", err, d.logTail())
	}
	if rss := d.childMaxRSS(); float64(rss)/mib > res.Catchup.PeakRSSMiB {
		res.Catchup.PeakRSSMiB = float64(rss) / mib
	}

	// Freshness and steady state, in a fresh daemon.
	logf("freshness: %d changes/s for %s (epoch interval %s)", o.rate, o.duration, interval)
	res.LoadAvg = append(res.LoadAvg, "freshness: "+loadAvg())
	d, err = startDaemon(bin, cfgPath, filepath.Join(dir, "cdcsync-fresh.log"), httpAddr)
	if err != nil {
		return err
	}
	if err := d.waitReady(5 * time.Minute); err != nil {
		d.terminate(time.Minute)
		return fmt.Errorf("freshness: %w", err)
	}
	before, err := procStatus(d.cmd.Process.Pid)
	if err != nil {
		return err
	}
	d.sampleRSS(time.Second)
	prof = nil
	if o.pprofDir != "" {
		prof = d.startProfile(o.pprofDir, "fresh", int(o.duration.Seconds()))
	}
	load, err := pacedLoad(db, gen.maxID, o.rate, o.txnRows, o.workers, o.duration)
	if err != nil {
		d.terminate(time.Minute)
		return err
	}
	if len(load.Txns) == 0 {
		d.terminate(time.Minute)
		return fmt.Errorf("freshness: the load generator committed nothing")
	}
	lastSeq := load.Txns[len(load.Txns)-1].seq
	if _, err := watcher.waitCheckpoint(d, lastSeq, false, 5*time.Minute, nil); err != nil {
		d.terminate(time.Minute)
		return fmt.Errorf("freshness: %w", err)
	}
	samples := d.stopSampling()
	after, _ := procStatus(d.cmd.Process.Pid)
	if prof != nil {
		if err := prof.finish(); err != nil {
			logf("profile: %v", err)
		}
	}
	if err := d.terminate(2 * time.Minute); err != nil {
		return fmt.Errorf("freshness: stop cdcsync: %w\n%s", err, d.logTail())
	}
	commits, err := watcher.commits()
	if err != nil {
		return err
	}
	var since []snapshotCommit
	for _, c := range commits {
		if c.at.After(d.started) {
			since = append(since, c)
		}
	}
	fr := freshness(load.Txns, since)
	var covered []time.Duration
	for _, f := range fr {
		if f >= 0 {
			covered = append(covered, f)
		} else {
			res.Fresh.Uncovered++
		}
	}
	slices.Sort(covered)
	res.Fresh.TargetRate = o.rate
	res.Fresh.AchievedRate = float64(load.Rows) / load.Elapsed.Seconds()
	res.Fresh.Txns = len(load.Txns)
	res.Fresh.LateTxns = load.Late
	res.Fresh.P50 = percentile(covered, 0.50).Seconds()
	res.Fresh.P99 = percentile(covered, 0.99).Seconds()
	if len(covered) > 0 {
		res.Fresh.Max = covered[len(covered)-1].Seconds()
	}
	res.Fresh.Commits = len(since)
	res.Fresh.DurationSecs = load.Elapsed.Seconds()
	res.Fresh.RSSSampleSecs = 1
	var rss []int64
	for _, s := range samples {
		rss = append(rss, s.rss)
	}
	slices.Sort(rss)
	if len(rss) > 0 {
		res.Fresh.RSSMaxMiB = float64(rss[len(rss)-1]) / mib
		res.Fresh.RSSMedianMiB = float64(rss[len(rss)/2]) / mib
	}
	res.Fresh.CPUSeconds = (after.cpu - before.cpu).Seconds()
	if load.Rows > 0 {
		res.Fresh.CPUMicros = float64((after.cpu - before.cpu).Microseconds()) / float64(load.Rows)
	}

	report := markdown(&res)
	fmt.Println(report)
	if o.out != "" {
		js, _ := json.MarshalIndent(&res, "", "  ")
		if strings.HasSuffix(o.out, ".json") {
			return os.WriteFile(o.out, js, 0o644)
		}
		if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
			return err
		}
		return os.WriteFile(strings.TrimSuffix(o.out, filepath.Ext(o.out))+".json", js, 0o644)
	}
	return nil
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

func markdown(r *results) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	b2 := &r.Baselines
	w("## cdcsync bench, %s", r.Started.Format("2006-01-02 15:04 UTC"))
	w("")
	w("Source: %s.", r.Source)
	w("")
	w("Machine: %s. Options: %v. 1-minute load average at the start of each phase: %s.", r.Machine, r.Options, strings.Join(r.LoadAvg, ", "))
	w("")
	w("| Measure | Figure | Baseline (same run) | Ratio |")
	w("|---|---|---|---|")
	w("| Baseline A: raw binlog decode (go-mysql BinlogSyncer, events discarded) | %d row changes in %.2f s = %.0f changes/s, %.2f CPU-µs/change, %.0f MiB of binlog | | |",
		b2.DecodeRowChanges, b2.DecodeSeconds, b2.DecodeRate, b2.DecodeCPUMicros, b2.DecodeBinlogMB)
	w("| Baseline B: raw SELECT, go-mysql ExecuteSelectStreaming | %d rows in %.2f s = %.0f rows/s, %.2f CPU-s/M rows | | |",
		b2.SelectRows, b2.SelectGoSeconds, b2.SelectGoRate, b2.SelectGoCPUPerMRows)
	if b2.SelectCLISeconds > 0 {
		w("| Baseline B: `mariadb --quick -e 'select * from bench.t' > /dev/null` | %.2f s = %.0f rows/s | | |", b2.SelectCLISeconds, b2.SelectCLIRate)
	} else {
		w("| Baseline B: mariadb client | %s | | |", b2.SelectCLINote)
	}
	s := &r.Snapshot
	w("| Snapshot (initial copy, start to first checkpoint) | %d rows in %.2f s = %.0f rows/s | %.0f rows/s (Go SELECT) | %.2f (CLI: %.2f) |",
		s.Rows, s.Seconds, s.Rate, b2.SelectGoRate, s.RatioGo, s.RatioCLI)
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
	f := &r.Fresh
	w("| Freshness at %d changes/s (%d-row txns), epoch interval %.0f s | p50 %.2f s, p99 %.2f s, max %.2f s over %d txns (%d uncovered), %d commits | target p99 ≤ %.1f s | |",
		f.TargetRate, r.Options["txn_rows"], f.Interval, f.P50, f.P99, f.Max, f.Txns, f.Uncovered, f.Commits, f.Interval+1)
	w("| Steady state | achieved %.0f changes/s over %.0f s (%d late txns); RSS max %.0f MiB, median %.0f MiB; %.2f CPU-µs/change | | |",
		f.AchievedRate, f.DurationSecs, f.LateTxns, f.RSSMaxMiB, f.RSSMedianMiB, f.CPUMicros)
	w("")
	w("Setup: fill %.1f s (table %.0f MiB in InnoDB), catch-up changes generated in %.1f s (%d transactions), daemon startup before copying %.2f s, before streaming %.2f s.",
		s.FillSeconds, s.TableMiB, c.GenSeconds, c.Txns, s.StartSeconds, c.StartupSeconds)
	w("")
	w("| Target | Measured | Verdict |")
	w("|---|---|---|")
	w("| Catch-up ≥ 50%% of raw decode | %.0f%% | %s |", c.Ratio*100, verdict(c.Ratio >= 0.5))
	w("| ≤ 5 CPU-µs per row change end to end (catch-up) | %.2f | %s |", c.CPUMicros, verdict(c.CPUMicros <= 5))
	w("| Snapshot ≥ 70%% of raw SELECT (go-mysql) | %.0f%% | %s |", s.RatioGo*100, verdict(s.RatioGo >= 0.7))
	w("| p99 freshness ≤ interval + 1 s at %d changes/s | %.2f s (achieved %.0f changes/s) | %s |", f.TargetRate, f.P99, f.AchievedRate,
		verdict(f.P99 <= f.Interval+1 && f.AchievedRate >= 0.95*float64(f.TargetRate) && f.Uncovered == 0))
	w("| Steady RSS ≤ 256 MiB | median %.0f MiB, max %.0f MiB | %s |", f.RSSMedianMiB, f.RSSMaxMiB, verdict(f.RSSMedianMiB <= 256))
	return b.String()
}
