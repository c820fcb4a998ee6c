package main

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

// loadResult is what the paced load generator did.
type loadResult struct {
	Txns     []txnRecord
	Rows     int64
	Elapsed  time.Duration
	Late     int // transactions that started more than 100 ms after their slot
	Failures int // transactions rolled back by a deadlock or lock wait timeout (not retried)
}

// pacedLoad runs small autocommit transactions of txnRows row changes each
// (80% updates, 10% inserts, 10% deletes; the updates and deletes take the
// first txnRows rows from a random id on, so each changes txnRows rows
// however many ids earlier deletes removed) at rate row changes per second for
// duration, over workers connections. Transaction i is due at
// start + i*txnRows/rate; a worker that is behind starts it at once. No
// transaction starts after duration has passed, so a rate the machine cannot
// sustain shows as a lower achieved rate, not as a longer run. After each
// COMMIT the worker reads @@last_gtid on the same session. Inserted ids are
// taken from *nextID, which it advances.
func pacedLoad(db *testenv.MariaDB, maxID int64, nextID *int64, rate, txnRows, workers int, duration time.Duration) (loadResult, error) {
	var res loadResult
	period := time.Duration(float64(time.Second) * float64(txnRows) / float64(rate))
	total := int(duration / period)
	conns := make([]*client.Conn, workers)
	for i := range conns {
		c, err := db.Connect(testenv.RootUser, "", "")
		if err != nil {
			return res, err
		}
		defer c.Close()
		conns[i] = c
	}
	var mu sync.Mutex
	ins := *nextID
	defer func() { *nextID = ins }()
	next := make(chan int)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(conn *client.Conn, seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 99))
			for i := range next {
				due := start.Add(time.Duration(i) * period)
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				} else if d < -100*time.Millisecond {
					mu.Lock()
					res.Late++
					mu.Unlock()
				}
				var q string
				switch p := r.IntN(100); {
				case p < 80:
					a := 1 + r.Int64N(maxID-int64(txnRows))
					q = updateFrom(a, int64(txnRows), i)
				case p < 90:
					mu.Lock()
					off := ins
					ins += int64(txnRows)
					mu.Unlock()
					q = insertRows(off, int64(txnRows))
				default:
					a := 1 + r.Int64N(maxID-int64(txnRows))
					q = deleteFrom(a, int64(txnRows))
				}
				rr, err := conn.Execute(q)
				var me *mysql.MyError
				if errors.As(err, &me) && (me.Code == mysql.ER_LOCK_DEADLOCK || me.Code == mysql.ER_LOCK_WAIT_TIMEOUT) {
					mu.Lock()
					res.Failures++
					mu.Unlock()
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("load: %w", err)
					return
				}
				now := time.Now()
				n := int64(rr.AffectedRows)
				rr.Close()
				if n == 0 {
					continue
				}
				seq, err := lastGTID(conn)
				if err != nil {
					errs <- fmt.Errorf("load: %w", err)
					return
				}
				mu.Lock()
				res.Txns = append(res.Txns, txnRecord{seq: seq, commit: now, rows: n})
				res.Rows += n
				mu.Unlock()
			}
		}(conns[w], uint64(w+1))
	}
	var err error
feed:
	for i := 0; i < total; i++ {
		if time.Since(start) >= duration {
			break // behind: the rest of the run is not offered late
		}
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	res.Elapsed = time.Since(start)
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	sort.Slice(res.Txns, func(i, j int) bool { return res.Txns[i].seq < res.Txns[j].seq })
	return res, err
}

// freshness returns, for each transaction, the time from its COMMIT in
// MariaDB to the first Iceberg snapshot whose position covers it; -1 when
// no snapshot covers it.
func freshness(txns []txnRecord, commits []snapshotCommit) []time.Duration {
	out := make([]time.Duration, 0, len(txns))
	for _, t := range txns {
		f := time.Duration(-1)
		for _, c := range commits {
			if c.seq >= t.seq {
				f = c.at.Sub(t.commit)
				break
			}
		}
		out = append(out, f)
	}
	return out
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// freshRun is the freshness and steady state at one offered rate.
type freshRun struct {
	Interval      float64 `json:"epoch_interval_s"`
	TargetRate    int     `json:"target_changes_per_s"` // offered
	TxnRows       int     `json:"txn_rows"`
	AchievedRate  float64 `json:"achieved_changes_per_s"` // what the load generator sustained
	Sustained     bool    `json:"sustained"`              // achieved ≥ 95% of offered
	DaemonBehind  bool    `json:"daemon_behind"`          // the last transaction became visible more than 2 epoch intervals after the load ended
	Txns          int     `json:"transactions"`
	LateTxns      int     `json:"late_transactions"`
	FailedTxns    int     `json:"failed_transactions"` // rolled back by a deadlock or lock wait timeout
	P50           float64 `json:"p50_s"`
	P95           float64 `json:"p95_s"`
	P99           float64 `json:"p99_s"`
	Max           float64 `json:"max_s"`
	Uncovered     int     `json:"uncovered"`
	Commits       int     `json:"commits"`
	FilesPerEpoch float64 `json:"files_per_epoch"` // data and delete files an epoch commit added, mean
	MaxEpochFiles int64   `json:"max_epoch_files"`
	RSSMaxMiB     float64 `json:"rss_max_mib"`
	RSSMedianMiB  float64 `json:"rss_median_mib"`
	CPUSeconds    float64 `json:"cpu_seconds"`
	CPUMicros     float64 `json:"cpu_us_per_change"`
	DurationSecs  float64 `json:"duration_s"`
	DrainSeconds  float64 `json:"drain_s"` // from the end of the load to the checkpoint covering its last transaction
	RSSSampleSecs float64 `json:"rss_sample_s"`
	LoadAvg       string  `json:"loadavg"`
}

// sustainedShare is the share of the offered rate the load generator must
// reach for a rate to count as sustained.
const sustainedShare = 0.95

// maxTxnRate bounds the transactions per second of a freshness run: a rate
// above maxTxnRate × --txn-rows runs larger transactions (50,000 changes/s
// as 50-row transactions), so the generator's round trips do not decide
// the rate alone.
const maxTxnRate = 1000

func txnRowsFor(rate, minRows int) int {
	return max(minRows, (rate+maxTxnRate-1)/maxTxnRate)
}

// rateWindow is what the harness recorded around one rate's load.
type rateWindow struct {
	rate, txnRows int
	load          loadResult
	from, drained time.Time // load start; checkpoint covering its last transaction seen
	loadEnd       time.Time
	cpu0, cpu1    time.Duration
	loadAvg       string
}

// summarize turns a window into its figures; commits are the table's
// pipeline commits (oldest first), samples the daemon's RSS samples.
func (w *rateWindow) summarize(interval time.Duration, commits []snapshotCommit, samples []rssSample) freshRun {
	fr := freshRun{Interval: interval.Seconds(), TargetRate: w.rate, TxnRows: w.txnRows, LoadAvg: w.loadAvg, RSSSampleSecs: 1}
	var in []snapshotCommit
	for _, c := range commits {
		if !c.at.Before(w.from) && !c.at.After(w.drained.Add(time.Second)) {
			in = append(in, c)
		}
	}
	var covered []time.Duration
	for _, f := range freshness(w.load.Txns, commits) {
		if f >= 0 {
			covered = append(covered, f)
		} else {
			fr.Uncovered++
		}
	}
	slices.Sort(covered)
	fr.AchievedRate = float64(w.load.Rows) / w.load.Elapsed.Seconds()
	fr.Sustained = fr.AchievedRate >= sustainedShare*float64(w.rate)
	fr.Txns = len(w.load.Txns)
	fr.LateTxns = w.load.Late
	fr.FailedTxns = w.load.Failures
	fr.P50 = percentile(covered, 0.50).Seconds()
	fr.P95 = percentile(covered, 0.95).Seconds()
	fr.P99 = percentile(covered, 0.99).Seconds()
	if len(covered) > 0 {
		fr.Max = covered[len(covered)-1].Seconds()
	}
	fr.Commits = len(in)
	fr.FilesPerEpoch, fr.MaxEpochFiles = filesPerCommit(in, w.from, w.drained.Add(time.Second))
	fr.DurationSecs = w.load.Elapsed.Seconds()
	fr.DrainSeconds = w.drained.Sub(w.loadEnd).Seconds()
	fr.DaemonBehind = fr.DrainSeconds > 2*fr.Interval
	var rss []int64
	for _, s := range samples {
		if !s.at.Before(w.from) && !s.at.After(w.drained) {
			rss = append(rss, s.rss)
		}
	}
	slices.Sort(rss)
	if len(rss) > 0 {
		fr.RSSMaxMiB = float64(rss[len(rss)-1]) / mib
		fr.RSSMedianMiB = float64(rss[len(rss)/2]) / mib
	}
	fr.CPUSeconds = (w.cpu1 - w.cpu0).Seconds()
	if w.load.Rows > 0 {
		fr.CPUMicros = float64((w.cpu1 - w.cpu0).Microseconds()) / float64(w.load.Rows)
	}
	return fr
}

// targetRun is the index of the run the freshness and memory targets apply
// to: the one offered 10,000 changes/s, else the one offered the rate
// nearest to it.
func targetRun(runs []freshRun) int {
	best := -1
	dist := func(r int) float64 { return math.Abs(math.Log(float64(r) / 10_000)) }
	for i, r := range runs {
		if best < 0 || dist(r.TargetRate) < dist(runs[best].TargetRate) {
			best = i
		}
	}
	return best
}

// parseRates parses "1000,10000,50000".
func parseRates(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.ReplaceAll(f, "_", ""))
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--rates: %q is not a positive number of row changes per second", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--rates: no rate given")
	}
	return out, nil
}

// freshnessAt drives one rate against the running daemon d for
// o.duration and waits until the daemon's checkpoint covers the last
// transaction, recording what summarize needs.
func freshnessAt(o options, db *testenv.MariaDB, d *daemon, watcher *lakeWatcher, maxID int64, nextID *int64, rate int) (rateWindow, error) {
	w := rateWindow{rate: rate, txnRows: txnRowsFor(rate, o.txnRows), loadAvg: loadAvg()}
	logf("freshness: %d changes/s offered in %d-row transactions for %s (load average %s)", rate, w.txnRows, o.duration, w.loadAvg)
	before, err := procStatus(d.cmd.Process.Pid)
	if err != nil {
		return w, fmt.Errorf("freshness: %w", err)
	}
	w.cpu0 = before.cpu
	var prof *profiler
	if o.pprofDir != "" {
		prof = d.startProfile(o.pprofDir, fmt.Sprintf("fresh-%d", rate), int(o.duration.Seconds()))
	}
	w.from = time.Now()
	w.load, err = pacedLoad(db, maxID, nextID, rate, w.txnRows, o.workers, o.duration)
	w.loadEnd = time.Now()
	if err != nil {
		return w, fmt.Errorf("freshness at %d changes/s: %w", rate, err)
	}
	if len(w.load.Txns) == 0 {
		return w, fmt.Errorf("freshness at %d changes/s: the load generator committed nothing", rate)
	}
	lastSeq := w.load.Txns[len(w.load.Txns)-1].seq
	if w.drained, err = watcher.waitCheckpoint(d, lastSeq, false, 10*time.Minute, nil); err != nil {
		return w, fmt.Errorf("freshness at %d changes/s: %w", rate, err)
	}
	after, err := procStatus(d.cmd.Process.Pid)
	if err != nil {
		return w, fmt.Errorf("freshness: %w", err)
	}
	w.cpu1 = after.cpu
	if prof != nil {
		if err := prof.finish(); err != nil {
			logf("profile: %v", err)
		}
	}
	logf("freshness: %d changes/s offered, %.0f achieved (%d late, %d failed transactions); checkpoint covered the last one %.1f s after the load",
		rate, float64(w.load.Rows)/w.load.Elapsed.Seconds(), w.load.Late, w.load.Failures, w.drained.Sub(w.loadEnd).Seconds())
	return w, nil
}
