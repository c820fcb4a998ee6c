package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/go-mysql-org/go-mysql/client"

	"github.com/cdcsync/cdcsync/integration/testenv"
	"github.com/cdcsync/cdcsync/lake"
)

// readAmp is the read amplification phase: the full scan of the table with
// the delete files its upsert epochs left, and again after `cdcsync compact`.
type readAmp struct {
	Maintenance    string    `json:"maintenance"`        // how in-process maintenance was set while the epochs were written
	LoadRate       int       `json:"load_changes_per_s"` // offered rate of the phase's own load (0: none)
	LoadAchieved   float64   `json:"load_achieved_changes_per_s"`
	LoadChanges    int64     `json:"load_row_changes"`
	LoadSeconds    float64   `json:"load_seconds"`
	Epochs         int       `json:"epochs"`     // pipeline commits during the phase's load
	MySQLRows      int64     `json:"mysql_rows"` // SELECT COUNT(*) on the source at the end of the load
	Before         scanStats `json:"before"`
	After          scanStats `json:"after"`
	Ratio          float64   `json:"ratio"` // best scan before / best scan after
	CompactSeconds float64   `json:"compact_seconds"`
	CompactOutput  string    `json:"compact_output"`
	// Snapshots are the scans at every snapshot of the phase, with
	// --amp-maintained: the read amplification a reader sees with
	// maintenance on, snapshot by snapshot rather than time-weighted.
	Snapshots    []snapshotScan `json:"snapshots,omitempty"`
	MaxSnapRatio float64        `json:"max_snapshot_ratio,omitempty"`
	// DuckDB is the version of DuckDB that scanned the same snapshots and
	// the compacted table (duckscan.go), DuckCompacted its scan of the
	// compacted table, DuckMaxSnapRatio the most amplified snapshot it read,
	// and DuckError why it did not, if it did not.
	DuckDB           string         `json:"duckdb,omitempty"`
	DuckCompacted    duckScanResult `json:"duckdb_compacted"`
	DuckMaxSnapRatio float64        `json:"duckdb_max_snapshot_ratio,omitempty"`
	DuckError        string         `json:"duckdb_error,omitempty"`
	Note             string         `json:"note,omitempty"`  // a row count that does not match
	Error            string         `json:"error,omitempty"` // the phase failed here
}

// scanStats describes the table's current snapshot as a scan reads it, and
// how long the scan took.
type scanStats struct {
	DataFiles      int       `json:"data_files"`         // data files the scan plan reads
	DeleteFiles    int       `json:"delete_files"`       // distinct delete files the scan plan applies
	EqDeleteFiles  int       `json:"eq_delete_files"`    // of which equality deletes
	DataRecords    int64     `json:"data_records"`       // rows in those data files, before deletes
	DeleteRecords  int64     `json:"delete_records"`     // rows in those delete files
	FilesMiB       float64   `json:"files_mib"`          // data and delete files the scan reads
	SummaryData    int64     `json:"summary_data_files"` // total-data-files of the snapshot summary
	SummaryDeletes int64     `json:"summary_delete_files"`
	PlanSeconds    float64   `json:"plan_seconds"` // PlanFiles alone
	Rows           int64     `json:"rows"`         // rows the scan returned
	Seconds        float64   `json:"seconds"`      // best of the scans
	AllSeconds     []float64 `json:"all_seconds"`
	CPUSeconds     float64   `json:"cpu_seconds"`  // the harness's CPU during the best scan
	BaseRSSMiB     float64   `json:"base_rss_mib"` // the harness's RSS before the scans, after returning free memory to the OS
	PeakRSSMiB     float64   `json:"peak_rss_mib"` // the harness's peak RSS during the scans (VmHWM after clear_refs), 0 if unknown
	SnapshotID     int64     `json:"snapshot_id"`
}

// tableFiles plans a scan of the table's current snapshot and counts what
// it would read.
func (w *lakeWatcher) tableFiles(ctx context.Context) (scanStats, error) {
	var st scanStats
	ctx = w.lk.Scope(ctx)
	tbl, err := w.lk.LoadTable(ctx, w.lk.Identifier(benchDB, benchTable))
	if err != nil {
		return st, err
	}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return st, nil
	}
	st.SnapshotID = snap.SnapshotID
	if snap.Summary != nil {
		n := func(k string) int64 {
			v, _ := strconv.ParseInt(snap.Summary.Properties[k], 10, 64)
			return v
		}
		st.SummaryData, st.SummaryDeletes = n("total-data-files"), n("total-delete-files")
	}
	t0 := time.Now()
	scan := tbl.Scan()
	tasks, err := scan.PlanFiles(ctx)
	st.PlanSeconds = time.Since(t0).Seconds()
	_ = scan.Close()
	if err != nil {
		return st, fmt.Errorf("plan a scan of %s.%s: %w", benchDB, benchTable, err)
	}
	data := map[string]bool{}
	dels := map[string]iceberg.DataFile{}
	var bytes int64
	for _, tk := range tasks {
		if p := tk.File.FilePath(); !data[p] {
			data[p] = true
			st.DataRecords += tk.File.Count()
			bytes += tk.File.FileSizeBytes()
		}
		for _, group := range [][]iceberg.DataFile{tk.DeleteFiles, tk.EqualityDeleteFiles, tk.DeletionVectorFiles} {
			for _, f := range group {
				// The deletion vectors of one Puffin file share its path.
				k := f.FilePath()
				if ref := f.ReferencedDataFile(); ref != nil {
					k += "\x00" + *ref
				}
				dels[k] = f
			}
		}
	}
	files := map[string]bool{}
	for _, f := range dels {
		st.DeleteRecords += f.Count()
		if files[f.FilePath()] {
			continue
		}
		files[f.FilePath()] = true
		if f.ContentType() == iceberg.EntryContentEqDeletes {
			st.EqDeleteFiles++
		}
		bytes += f.FileSizeBytes()
	}
	st.DataFiles, st.DeleteFiles = len(data), len(files)
	st.FilesMiB = float64(bytes) / mib
	return st, nil
}

// scanTable reads the whole table as of its current snapshot with
// iceberg-go (load the metadata, plan, read the Parquet files and apply the
// deletes, to Arrow record batches) and counts the rows.
func (w *lakeWatcher) scanTable(ctx context.Context) (rows int64, wall, cpu time.Duration, err error) {
	runtime.GC()
	ctx = w.lk.Scope(ctx)
	cpu0, t0 := cpuSelf(), time.Now()
	tbl, err := w.lk.LoadTable(ctx, w.lk.Identifier(benchDB, benchTable))
	if err != nil {
		return 0, 0, 0, err
	}
	scan := tbl.Scan()
	defer scan.Close()
	_, recs, err := scan.ToArrowRecords(ctx)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("scan %s.%s: %w", benchDB, benchTable, err)
	}
	for rec, err := range recs {
		if err != nil {
			return 0, 0, 0, fmt.Errorf("scan %s.%s: %w", benchDB, benchTable, err)
		}
		rows += rec.NumRows()
		rec.Release()
	}
	return rows, time.Since(t0), cpuSelf() - cpu0, nil
}

// measureScan counts the table's files and scans it n times; the figures
// are those of the fastest scan.
func (w *lakeWatcher) measureScan(ctx context.Context, n int) (scanStats, error) {
	st, err := w.tableFiles(ctx)
	if err != nil {
		return st, err
	}
	if base, ok := resetPeakRSS(); ok {
		st.BaseRSSMiB = float64(base) / mib
	}
	for i := 0; i < n; i++ {
		rows, wall, cpu, err := w.scanTable(ctx)
		if err != nil {
			return st, err
		}
		if i > 0 && rows != st.Rows {
			return st, fmt.Errorf("scan %d of %s.%s returned %d rows, the first %d", i+1, benchDB, benchTable, rows, st.Rows)
		}
		st.Rows = rows
		st.AllSeconds = append(st.AllSeconds, wall.Seconds())
		if i == 0 || wall.Seconds() < st.Seconds {
			st.Seconds, st.CPUSeconds = wall.Seconds(), cpu.Seconds()
		}
	}
	if self, err := procStatus(os.Getpid()); err == nil && st.BaseRSSMiB > 0 {
		st.PeakRSSMiB = float64(self.hwm) / mib
	}
	return st, nil
}

// resetPeakRSS returns free memory to the OS and resets this process's
// VmHWM to its current RSS (Linux clear_refs "5"), so that VmHWM afterwards
// is the peak of what follows; it returns that RSS.
func resetPeakRSS() (int64, bool) {
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return 0, false
	}
	st, err := procStatus(os.Getpid())
	return st.rss, err == nil
}

// compactTable runs `cdcsync compact --config cfgPath DB.TABLE` and returns
// its output and wall time.
func compactTable(bin, cfgPath string) (string, time.Duration, error) {
	cmd := exec.Command(bin, "compact", "--config", cfgPath, benchDB+"."+benchTable)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	if err != nil {
		return out.String(), wall, fmt.Errorf("cdcsync compact: %w\n%s%s", err, out.String(), errOut.String())
	}
	return strings.TrimSpace(out.String()), wall, nil
}

// ampEnv is what the read amplification phase needs of the run.
type ampEnv struct {
	bin, dir, cfgPath, cfgYAML, httpAddr string
	db                                   *testenv.MariaDB
	conn                                 *client.Conn
	watcher                              *lakeWatcher
	interval                             time.Duration
	maxID                                int64
	nextID                               *int64
}

// readAmplification writes o.ampEpochs epochs of upserts on top of what the
// freshness runs left, with in-process maintenance off so that their delete
// files stay, stops the daemon, scans the table o.scans times, runs
// `cdcsync compact` and scans it again.
func readAmplification(o options, e *ampEnv) (readAmp, error) {
	var ra readAmp
	ctx := context.Background()
	cfgPath := e.cfgPath
	switch {
	case o.ampMaintained && e.watcher.cfg.Maintenance.Enabled:
		ra.Maintenance = "on (--amp-maintained): every snapshot of the phase is scanned"
	case o.ampEpochs == 0 && e.watcher.cfg.Maintenance.Enabled:
		ra.Maintenance = "on during the freshness runs, whose epochs are all this phase scans: in-process compaction may have removed delete files"
	case !e.watcher.cfg.Maintenance.Enabled:
		ra.Maintenance = "off in the configuration (also during the freshness runs)"
	case strings.Contains(o.extraConfig, "maintenance"):
		ra.Maintenance = "on, as --extra-config sets it: in-process compaction may have removed delete files before the scan"
	default:
		// Maintenance is on by default (config.Maintenance.Enabled): it
		// would compact the deletes away while the epochs are written.
		cfgPath = filepath.Join(e.dir, "cdcsync-nomaint.yaml")
		if err := os.WriteFile(cfgPath, []byte(e.cfgYAML+"maintenance:\n  enabled: false\n"), 0o600); err != nil {
			return ra, err
		}
		ra.Maintenance = "off for this phase (the harness appends `maintenance: {enabled: false}`; on during the freshness runs, the default)"
	}
	if o.ampEpochs > 0 {
		ra.LoadRate = o.ampRate
		txnRows := txnRowsFor(o.ampRate, o.txnRows)
		dur := time.Duration(o.ampEpochs) * e.interval
		logf("read amplification: %d epochs of upserts, %d changes/s in %d-row transactions for %s, maintenance %s", o.ampEpochs, o.ampRate, txnRows, dur, ra.Maintenance)
		d, err := startDaemon(e.bin, cfgPath, filepath.Join(e.dir, "cdcsync-amp.log"), e.httpAddr)
		if err != nil {
			return ra, err
		}
		if _, err := d.waitReady(5 * time.Minute); err != nil {
			d.terminate(time.Minute)
			return ra, err
		}
		from := time.Now()
		load, err := pacedLoad(e.db, e.maxID, e.nextID, o.ampRate, txnRows, o.workers, dur)
		if err == nil && len(load.Txns) == 0 {
			err = fmt.Errorf("the load generator committed nothing")
		}
		if err != nil {
			d.terminate(time.Minute)
			return ra, err
		}
		ra.LoadChanges, ra.LoadSeconds = load.Rows, load.Elapsed.Seconds()
		ra.LoadAchieved = float64(load.Rows) / load.Elapsed.Seconds()
		drained, err := e.watcher.waitCheckpoint(d, load.Txns[len(load.Txns)-1].seq, false, 10*time.Minute, nil)
		if err != nil {
			d.terminate(time.Minute)
			return ra, err
		}
		if err := d.terminate(2 * time.Minute); err != nil {
			return ra, fmt.Errorf("stop cdcsync: %w\n%s", err, d.logTail())
		}
		commits, err := e.watcher.commits()
		if err != nil {
			return ra, err
		}
		for _, c := range commits {
			if !c.at.Before(from) && !c.at.After(drained) {
				ra.Epochs++
			}
		}
		if o.ampMaintained {
			logf("read amplification: scanning every snapshot of the phase")
			if ra.Snapshots, err = e.watcher.scanSnapshots(ctx, from, drained); err != nil {
				return ra, err
			}
			logf("read amplification: scanning every snapshot of the phase with DuckDB")
			if err := e.watcher.duckSnapshots(ctx, &ra); err != nil {
				ra.DuckError = err.Error()
				logf("read amplification: %v", err)
			}
		}
	}
	if r, err := e.conn.Execute("SELECT COUNT(*) FROM " + benchDB + "." + benchTable); err == nil {
		ra.MySQLRows, _ = r.GetInt(0, 0)
		r.Close()
	}

	logf("read amplification: %d scans of %s.%s before compaction", o.scans, benchDB, benchTable)
	before, err := e.watcher.measureScan(ctx, o.scans)
	ra.Before = before
	if err != nil {
		return ra, err
	}
	logf("read amplification: %d data files, %d delete files (%d equality), %d delete rows: best scan %.2f s (%d rows)",
		before.DataFiles, before.DeleteFiles, before.EqDeleteFiles, before.DeleteRecords, before.Seconds, before.Rows)
	out, wall, err := compactTable(e.bin, cfgPath)
	ra.CompactSeconds, ra.CompactOutput = wall.Seconds(), out
	if err != nil {
		return ra, err
	}
	logf("read amplification: cdcsync compact took %.1f s:\n%s", wall.Seconds(), out)
	after, err := e.watcher.measureScan(ctx, o.scans)
	ra.After = after
	if err != nil {
		return ra, err
	}
	if after.Seconds > 0 {
		ra.Ratio = before.Seconds / after.Seconds
	}
	logf("read amplification: after compaction %d data files, %d delete files: best scan %.2f s (%d rows); ratio %.2f",
		after.DataFiles, after.DeleteFiles, after.Seconds, after.Rows, ra.Ratio)
	if after.Seconds > 0 && after.Rows > 0 {
		// Per live row, so that the rows the load inserted meanwhile do
		// not count as amplification.
		base := after.Seconds / float64(after.Rows)
		for i := range ra.Snapshots {
			sn := &ra.Snapshots[i]
			if sn.Rows > 0 {
				sn.Ratio = sn.Seconds / float64(sn.Rows) / base
				ra.MaxSnapRatio = max(ra.MaxSnapRatio, sn.Ratio)
			}
		}
		if len(ra.Snapshots) > 0 {
			logf("read amplification: %d snapshots scanned, the most amplified read %.2fx the compacted table per row", len(ra.Snapshots), ra.MaxSnapRatio)
		}
	}
	if ra.DuckDB != "" {
		if err := e.watcher.duckCompacted(ctx, &ra); err != nil {
			ra.DuckError = err.Error()
			logf("read amplification: %v", err)
		} else {
			logf("read amplification: with DuckDB, the most amplified snapshot read %.2fx the compacted table per row", ra.DuckMaxSnapRatio)
		}
	}
	switch {
	case before.Rows != after.Rows:
		ra.Note = fmt.Sprintf("the scan returned %d rows before compaction and %d after", before.Rows, after.Rows)
	case ra.MySQLRows > 0 && before.Rows != ra.MySQLRows:
		ra.Note = fmt.Sprintf("the scan returned %d rows, the source table has %d", before.Rows, ra.MySQLRows)
	}
	if ra.Note != "" {
		logf("read amplification: %s", ra.Note)
	}
	return ra, nil
}

// snapshotScan is the scan of the table at one snapshot.
type snapshotScan struct {
	ID          int64   `json:"id"`
	Operation   string  `json:"operation"`   // append, overwrite (epochs), replace (compaction)
	Maintenance string  `json:"maintenance"` // cdcsync.maintenance of the snapshot, if any
	DataFiles   int     `json:"data_files"`
	DeleteFiles int     `json:"delete_files"`
	Rows        int64   `json:"rows"`
	Seconds     float64 `json:"seconds"` // best of two
	Ratio       float64 `json:"ratio"`   // seconds per row against the compacted table's
	// The same with DuckDB, when it ran.
	DuckSeconds float64 `json:"duckdb_seconds,omitempty"`
	DuckRatio   float64 `json:"duckdb_ratio,omitempty"`
}

// scanSnapshots scans the table at every snapshot made in [from, to]
// (best of two each).
func (w *lakeWatcher) scanSnapshots(ctx context.Context, from, to time.Time) ([]snapshotScan, error) {
	ctx = w.lk.Scope(ctx)
	tbl, err := w.lk.LoadTable(ctx, w.lk.Identifier(benchDB, benchTable))
	if err != nil {
		return nil, err
	}
	var out []snapshotScan
	for _, s := range tbl.Metadata().Snapshots() {
		at := time.UnixMilli(s.TimestampMs)
		if at.Before(from) || at.After(to) {
			continue
		}
		sc := snapshotScan{ID: s.SnapshotID}
		if s.Summary != nil {
			sc.Operation = string(s.Summary.Operation)
			sc.Maintenance = s.Summary.Properties[lake.SummaryMaintenance]
		}
		tasks, err := tbl.Scan(table.WithSnapshotID(s.SnapshotID)).PlanFiles(ctx)
		if err != nil {
			return nil, fmt.Errorf("plan a scan at snapshot %d: %w", s.SnapshotID, err)
		}
		dels := map[string]bool{}
		for _, tk := range tasks {
			sc.DataFiles++
			for _, group := range [][]iceberg.DataFile{tk.DeleteFiles, tk.EqualityDeleteFiles, tk.DeletionVectorFiles} {
				for _, f := range group {
					dels[f.FilePath()] = true
				}
			}
		}
		sc.DeleteFiles = len(dels)
		for i := 0; i < 2; i++ {
			runtime.GC()
			t0 := time.Now()
			var rows int64
			scan := tbl.Scan(table.WithSnapshotID(s.SnapshotID))
			_, recs, err := scan.ToArrowRecords(ctx)
			if err != nil {
				scan.Close()
				return nil, fmt.Errorf("scan at snapshot %d: %w", s.SnapshotID, err)
			}
			for rec, err := range recs {
				if err != nil {
					scan.Close()
					return nil, fmt.Errorf("scan at snapshot %d: %w", s.SnapshotID, err)
				}
				rows += rec.NumRows()
				rec.Release()
			}
			scan.Close()
			if sec := time.Since(t0).Seconds(); i == 0 || sec < sc.Seconds {
				sc.Seconds = sec
			}
			sc.Rows = rows
		}
		out = append(out, sc)
	}
	return out, nil
}

// duckSnapshots scans the phase's snapshots (ra.Snapshots) with DuckDB,
// best of two each, as scanSnapshots did with iceberg-go.
func (w *lakeWatcher) duckSnapshots(ctx context.Context, ra *readAmp) error {
	tbl, err := w.lk.LoadTable(w.lk.Scope(ctx), w.lk.Identifier(benchDB, benchTable))
	if err != nil {
		return err
	}
	ids := make([]int64, len(ra.Snapshots))
	for i, sn := range ra.Snapshots {
		ids[i] = sn.ID
	}
	scans, version, err := duckScans(tbl.MetadataLocation(), ids, 2)
	if err != nil {
		return err
	}
	for i := range scans {
		if scans[i].Rows != ra.Snapshots[i].Rows {
			return fmt.Errorf("DuckDB read %d rows at snapshot %d, iceberg-go %d", scans[i].Rows, ids[i], ra.Snapshots[i].Rows)
		}
		ra.Snapshots[i].DuckSeconds = scans[i].Seconds
	}
	ra.DuckDB = version
	return nil
}

// duckCompacted scans the compacted table with DuckDB, as many times as
// the iceberg-go scans, and sets each snapshot's DuckDB ratio against it.
func (w *lakeWatcher) duckCompacted(ctx context.Context, ra *readAmp) error {
	tbl, err := w.lk.LoadTable(w.lk.Scope(ctx), w.lk.Identifier(benchDB, benchTable))
	if err != nil {
		return err
	}
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return fmt.Errorf("the compacted table has no snapshot")
	}
	scans, _, err := duckScans(tbl.MetadataLocation(), []int64{cur.SnapshotID}, max(len(ra.After.AllSeconds), 2))
	if err != nil {
		return err
	}
	ra.DuckCompacted = scans[0]
	if scans[0].Rows == 0 || scans[0].Seconds <= 0 {
		return fmt.Errorf("DuckDB's scan of the compacted table read %d rows", scans[0].Rows)
	}
	base := scans[0].Seconds / float64(scans[0].Rows)
	for i := range ra.Snapshots {
		sn := &ra.Snapshots[i]
		if sn.Rows > 0 && sn.DuckSeconds > 0 {
			sn.DuckRatio = sn.DuckSeconds / float64(sn.Rows) / base
			ra.DuckMaxSnapRatio = max(ra.DuckMaxSnapRatio, sn.DuckRatio)
		}
	}
	return nil
}
