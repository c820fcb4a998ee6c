package main

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/lake"
)

// daemon is one run of the cdcsync binary.
type daemon struct {
	cmd     *exec.Cmd
	started time.Time
	logPath string
	httpURL string
	// admin talks to the daemon's admin socket, where the profiles are
	// (admin.pprof: true with --pprof).
	admin   *http.Client
	done    chan struct{}
	waitErr error

	mu      sync.Mutex
	samples []rssSample
	stop    chan struct{}
}

type rssSample struct {
	at  time.Time
	rss int64 // bytes
}

func startDaemon(bin, cfgPath, logPath, httpAddr string) (*daemon, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "run", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	sock := adminSocket(cfgPath)
	admin := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	d := &daemon{cmd: cmd, logPath: logPath, httpURL: "http://" + httpAddr, admin: admin, done: make(chan struct{}), stop: make(chan struct{})}
	d.started = time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start cdcsync: %w", err)
	}
	go func() {
		d.waitErr = cmd.Wait()
		logf.Close()
		close(d.done)
	}()
	return d, nil
}

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// logTail returns the end of the daemon's log.
func (d *daemon) logTail() string {
	b, _ := os.ReadFile(d.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// sampleRSS records VmRSS every interval until stopSampling.
func (d *daemon) sampleRSS(interval time.Duration) {
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-d.stop:
				return
			case <-d.done:
				return
			case <-t.C:
			}
			st, err := procStatus(d.cmd.Process.Pid)
			if err != nil {
				continue
			}
			d.mu.Lock()
			d.samples = append(d.samples, rssSample{at: time.Now(), rss: st.rss})
			d.mu.Unlock()
		}
	}()
}

func (d *daemon) stopSampling() []rssSample {
	select {
	case <-d.stop:
	default:
		close(d.stop)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]rssSample(nil), d.samples...)
}

// terminate sends SIGTERM and waits for the process to exit.
func (d *daemon) terminate(timeout time.Duration) error {
	if d.exited() {
		return d.waitErr
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(timeout):
		_ = d.cmd.Process.Kill()
		<-d.done
		return fmt.Errorf("cdcsync did not stop within %s of SIGTERM", timeout)
	}
	return d.waitErr
}

// childMaxRSS is the peak RSS of the exited process, from its rusage.
func (d *daemon) childMaxRSS() int64 {
	if d.cmd.ProcessState == nil {
		return 0
	}
	if ru, ok := d.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024
	}
	return 0
}

// procStat is what /proc tells about a running process.
type procStat struct {
	rss, hwm int64         // bytes
	cpu      time.Duration // user+system
}

func procStatus(pid int) (procStat, error) {
	var st procStat
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		field := func(name string) (int64, bool) {
			if !strings.HasPrefix(line, name) {
				return 0, false
			}
			fs := strings.Fields(line[len(name):])
			if len(fs) == 0 {
				return 0, false
			}
			n, err := strconv.ParseInt(fs[0], 10, 64)
			return n * 1024, err == nil
		}
		if n, ok := field("VmRSS:"); ok {
			st.rss = n
		}
		if n, ok := field("VmHWM:"); ok {
			st.hwm = n
		}
	}
	cpu, err := procCPU(pid)
	st.cpu = cpu
	return st, err
}

// procCPU reads utime+stime from /proc/PID/stat (clock ticks of 1/100 s,
// USER_HZ on Linux).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	fs := strings.Fields(s[i+2:])
	// fields after ")": state(3) ... utime is field 14, stime 15 (1-based
	// over the whole line), i.e. index 11 and 12 here.
	if len(fs) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, _ := strconv.ParseInt(fs[11], 10, 64)
	stt, _ := strconv.ParseInt(fs[12], 10, 64)
	return time.Duration(ut+stt) * 10 * time.Millisecond, nil
}

// waitAdmin polls the admin socket every 50 ms until it answers. The
// daemon serves it once it holds the pipeline's lease, after its metrics
// server is up: a profile asked for at /healthz found no socket.
func (d *daemon) waitAdmin(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if d.exited() {
			return fmt.Errorf("cdcsync exited: %v\n%s", d.waitErr, d.logTail())
		}
		resp, err := d.admin.Get(adminURL + "/debug/pprof/cmdline")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("cdcsync's admin socket did not come up (admin.pprof is on with --pprof)")
}

// waitReady polls /readyz every 50 ms until it answers 200 (every initial
// copy is done and the binlog is being read) and returns when it saw it.
func (d *daemon) waitReady(timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if d.exited() {
			return time.Time{}, fmt.Errorf("cdcsync exited: %v\n%s", d.waitErr, d.logTail())
		}
		resp, err := http.Get(d.httpURL + "/readyz")
		if err == nil {
			now := time.Now()
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return now, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("cdcsync did not become ready within %s", timeout)
}

// logLines returns the daemon's log lines whose msg is msg, as key/value
// attributes (slog's text format: key=value, values quoted when needed).
func (d *daemon) logLines(msg string) []map[string]string {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		return nil
	}
	var out []map[string]string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, msg) {
			continue
		}
		if kv := logfmt(line); kv["msg"] == msg {
			out = append(out, kv)
		}
	}
	return out
}

// logfmt splits one slog text line into its attributes.
func logfmt(line string) map[string]string {
	kv := map[string]string{}
	for line != "" {
		line = strings.TrimLeft(line, " ")
		k, rest, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsRune(k, ' ') {
			break
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				break
			}
			v, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			v, rest, _ = strings.Cut(rest, " ")
		}
		kv[k] = v
		line = rest
	}
	return kv
}

// adminSocket is the admin socket of the daemon of the configuration at
// cfgPath: admin.listen in the harness's configurations, next to them.
func adminSocket(cfgPath string) string {
	return filepath.Join(filepath.Dir(cfgPath), "admin.sock")
}

// adminURL is the URL of path on the admin socket.
const adminURL = "http://cdcsync"

// profiler collects a CPU profile (and, at the end, the allocation
// profile) of the daemon into dir, from the admin socket.
type profiler struct {
	d    *daemon
	dir  string
	name string
	done chan error
}

func (d *daemon) startProfile(dir, name string, seconds int) *profiler {
	p := &profiler{d: d, dir: dir, name: name, done: make(chan error, 1)}
	go func() {
		if err := d.waitAdmin(30 * time.Second); err != nil {
			p.done <- err
			return
		}
		p.done <- fetch(d.admin, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", adminURL, seconds), filepath.Join(dir, name+".cpu.pprof"))
	}()
	return p
}

// finish saves the allocation profile now and waits for the CPU profile.
func (p *profiler) finish() error {
	err := fetch(p.d.admin, adminURL+"/debug/pprof/allocs", filepath.Join(p.dir, p.name+".allocs.pprof"))
	return errors.Join(err, <-p.done)
}

func fetch(c *http.Client, url, path string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// lakeWatcher reads the pipeline's checkpoint and the table's snapshots.
type lakeWatcher struct {
	lk  *lake.Lake
	cfg *config.Config
	// deleteFiles caches, by snapshot, the delete files a format v3
	// snapshot added: its summary counts each deletion vector, and the
	// vectors of an epoch share one Puffin file.
	deleteFiles map[int64]int64
}

func openLake(cfgPath string) (*lakeWatcher, error) {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, err
	}
	lk, err := lake.Open(context.Background(), lake.OptionsFrom(cfg), slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	return &lakeWatcher{lk: lk, cfg: cfg}, nil
}

// checkpointSeq returns the GTID sequence number (domain 0) of the
// pipeline's checkpoint; ok is false when there is none yet.
func (w *lakeWatcher) checkpointSeq() (uint64, bool, error) {
	c, ok, err := w.lk.LoadCheckpoint(context.Background())
	if err != nil || !ok {
		return 0, false, err
	}
	seq, err := posSeq(c.Pos)
	return seq, err == nil, err
}

func posSeq(at cdcsync.Position) (uint64, error) {
	p, err := binlogpos.Decode(at)
	if err != nil {
		return 0, err
	}
	for _, part := range strings.Split(p.GTIDSet, ",") {
		if strings.HasPrefix(strings.TrimSpace(part), "0-") {
			return gtidSeq(part)
		}
	}
	if p.GTIDSet == "" {
		return 0, nil // the empty table was copied before any transaction
	}
	return 0, fmt.Errorf("position %s has no domain 0", p)
}

// waitCheckpoint polls the checkpoint every 50 ms until it reaches target
// (any checkpoint when target is 0). It returns when it saw it.
func (w *lakeWatcher) waitCheckpoint(d *daemon, target uint64, any bool, timeout time.Duration, progress func(seq uint64)) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		seq, ok, err := w.checkpointSeq()
		if err != nil {
			return time.Time{}, err
		}
		now := time.Now()
		if ok {
			if progress != nil {
				progress(seq)
			}
			if any || seq >= target {
				return now, nil
			}
		}
		if d != nil && d.exited() {
			return time.Time{}, fmt.Errorf("cdcsync exited before its checkpoint reached %d: %v\n%s", target, d.waitErr, d.logTail())
		}
		if now.After(deadline) {
			return time.Time{}, fmt.Errorf("the checkpoint did not reach %d within %s (at %d)", target, timeout, seq)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// snapshotCommit is one cdcsync commit to the table.
type snapshotCommit struct {
	at    time.Time
	seq   uint64
	files int64 // data and delete files it added
}

// commits lists the table's snapshots written by the pipeline, oldest first.
func (w *lakeWatcher) commits() ([]snapshotCommit, error) {
	tbl, err := w.lk.LoadTable(context.Background(), w.lk.Identifier(benchDB, benchTable))
	if err != nil {
		return nil, err
	}
	var out []snapshotCommit
	for _, s := range tbl.Metadata().Snapshots() {
		if s.Summary == nil || s.Summary.Properties[lake.SummaryPipeline] != w.cfg.Pipeline {
			continue
		}
		pos, err := cdcsync.DecodePosition(s.Summary.Properties[lake.SummaryPosition])
		if err != nil {
			return nil, err
		}
		seq, err := posSeq(pos)
		if err != nil {
			return nil, err
		}
		dels := summaryInt(s.Summary.Properties, "added-delete-files")
		if dels > 0 && tbl.Metadata().Version() >= 3 {
			if dels, err = w.addedDeleteFiles(tbl, &s); err != nil {
				return nil, err
			}
		}
		files := summaryInt(s.Summary.Properties, "added-data-files") + dels
		out = append(out, snapshotCommit{at: time.UnixMilli(s.TimestampMs), seq: seq, files: files})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out, nil
}

// addedDeleteFiles counts the distinct delete files snapshot s added.
func (w *lakeWatcher) addedDeleteFiles(tbl *table.Table, s *table.Snapshot) (int64, error) {
	if n, ok := w.deleteFiles[s.SnapshotID]; ok {
		return n, nil
	}
	fsys, err := tbl.FS(context.Background())
	if err != nil {
		return 0, err
	}
	mfs, err := s.Manifests(fsys)
	if err != nil {
		return 0, err
	}
	paths := map[string]bool{}
	for _, mf := range mfs {
		if mf.ManifestContent() != iceberg.ManifestContentDeletes || mf.SnapshotID() != s.SnapshotID {
			continue
		}
		for e, err := range mf.Entries(fsys, true) {
			if err != nil {
				return 0, err
			}
			if e.Status() == iceberg.EntryStatusADDED && e.SnapshotID() == s.SnapshotID {
				paths[e.DataFile().FilePath()] = true
			}
		}
	}
	if w.deleteFiles == nil {
		w.deleteFiles = map[int64]int64{}
	}
	w.deleteFiles[s.SnapshotID] = int64(len(paths))
	return int64(len(paths)), nil
}

func summaryInt(p map[string]string, k string) int64 {
	n, _ := strconv.ParseInt(p[k], 10, 64)
	return n
}

// filesPerCommit is the mean and the largest number of files the commits
// in [from, to] added.
func filesPerCommit(commits []snapshotCommit, from, to time.Time) (mean float64, most int64) {
	var n, sum int64
	for _, c := range commits {
		if c.at.Before(from) || c.at.After(to) {
			continue
		}
		n++
		sum += c.files
		most = max(most, c.files)
	}
	if n == 0 {
		return 0, 0
	}
	return float64(sum) / float64(n), most
}

// copyLog reads the rows and seconds of bench.t's initial copy from the
// daemon's log line msg="initial copy finished" (attributes table, rows,
// seconds; "initial copy committed" in older daemons); zero when there is
// none. The harness does not depend on it.
func copyLog(d *daemon) (rows int64, seconds float64) {
	for _, msg := range []string{"initial copy finished", "initial copy committed"} {
		for _, kv := range d.logLines(msg) {
			if kv["table"] != benchDB+"."+benchTable {
				continue
			}
			n, _ := strconv.ParseInt(kv["rows"], 10, 64)
			sec, _ := strconv.ParseFloat(kv["seconds"], 64)
			rows += n
			seconds = max(seconds, sec)
		}
		if rows > 0 {
			return rows, seconds
		}
	}
	return 0, 0
}
