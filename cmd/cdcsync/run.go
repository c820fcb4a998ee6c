package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/lake"
	"github.com/cdcsync/cdcsync/lease"
	"github.com/cdcsync/cdcsync/merge"
	"github.com/cdcsync/cdcsync/metrics"
	"github.com/cdcsync/cdcsync/pkindex"
)

// status is what /healthz and /readyz report.
type status struct {
	healthy atomic.Bool // false once the daemon gave up
	// notReady says why /readyz fails (checking, copying, an outage); nil
	// when the daemon streams and commits.
	notReady atomic.Pointer[string]
}

// setReady records whether the daemon streams and commits, or why not.
func (st *status) setReady(why string) {
	if why == "" {
		st.notReady.Store(nil)
	} else {
		st.notReady.Store(&why)
	}
}

// ready returns "" when ready, else why not.
func (st *status) ready() string {
	if p := st.notReady.Load(); p != nil {
		return *p
	}
	return ""
}

func runDaemon(ctx context.Context, cfg *config.Config, stderr io.Writer) error {
	bar := newStatusLine(stderr)
	if bar != nil {
		stderr = bar
	}
	log := newLogger(cfg, stderr)
	routeLibraryLog(log)
	tuneMemory(cfg)
	m := metrics.New()
	ver := readVersion()
	m.BuildInfo.WithLabelValues(ver.Version, ver.Commit, runtime.Version()).Set(1)
	st := &status{}
	st.healthy.Store(true)
	st.setReady("starting: checking the source and the warehouse")
	d := &daemon{cfg: cfg, log: log, m: m, st: st, fault: faultFromEnv(log), bar: bar, self: lease.Self(),
		values: capture.NewValuePolicy(cfg.Types, log, func(table, column, policy string) {
			m.TypePolicyValues.WithLabelValues(table, column, policy).Inc()
		})}
	// The admin token is checked now (an unset variable exits 2); the
	// listener itself is served while this daemon holds the pipeline.
	if _, err := cfg.Admin.ResolveToken(); err != nil && cfg.Admin.Network() != "" {
		return exitError{2, err}
	}
	if cfg.HTTP.Listen != config.HTTPOff {
		srv, err := serveHTTP(cfg.HTTP.Listen, m, st, log)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	of, err := openFilesOf(cfg)
	if err != nil {
		return err
	}
	log.Info("cdcsync starting", "version", ver.Version, "commit", ver.Commit, "pipeline", cfg.Pipeline, "source", fmt.Sprintf("%s:%d", cfg.Source.Host, cfg.Source.Port),
		"warehouse", cfg.Warehouse.Location, "catalog", cfg.Catalog.Type+":"+cfg.Catalog.Name,
		"memory_limit", limitText(cfg.MemoryLimit), "go_memory_limit", memoryLimit(), "gc_percent", currentGCPercent(), "epoch_max_bytes", cfg.Epoch.MaxBytes.String(),
		"open_files_limit", of.limit, "max_open_files", cfg.Warehouse.MaxOpenFiles)
	if !of.enough() {
		// Not fatal: a write that finds no descriptor fails its commit,
		// which is retried, and nothing is lost; but it will keep failing.
		log.Warn(of.String())
	}
	go d.watchLag(ctx)
	backoff := time.Second
	var held *holding
	defer func() {
		if held != nil {
			held.end(true)
		}
	}()
	for {
		if held == nil {
			h, err := d.acquire(ctx)
			if ctx.Err() != nil {
				log.Info("cdcsync stopped cleanly")
				return nil
			}
			var heldErr *lease.HeldError
			if errors.As(err, &heldErr) {
				st.healthy.Store(false)
				return exitError{1, err}
			}
			if err != nil {
				if !d.streamed.Load() {
					st.healthy.Store(false)
					st.setReady("stopped: " + err.Error())
					return err
				}
				log.Warn("cannot take the pipeline's lease; retrying", "error", err, "in", backoff.String())
				if !sleep(ctx, backoff) {
					return nil
				}
				backoff = min(backoff*2, time.Minute)
				continue
			}
			held = h
		}
		started := time.Now()
		err := d.session(held.ctx, held.ls)
		if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
			held.end(true)
			held = nil
			log.Info("cdcsync stopped cleanly")
			return nil
		}
		if lost := held.lost(err); lost != nil {
			// Another daemon holds the pipeline now, or this one could not
			// renew in time: commit nothing more, wait as a standby.
			log.Warn("this daemon no longer holds the pipeline; it waits as a standby", "error", lost)
			held.end(false)
			held = nil
			continue
		}
		reason := restartReason(err)
		if reason == "" || !d.streamed.Load() {
			// A daemon that never got to stream has a setup problem (wrong
			// password, unreachable server): say so instead of looping.
			st.healthy.Store(false)
			st.setReady("stopped: " + err.Error())
			return err
		}
		if time.Since(started) > 2*time.Minute {
			backoff = time.Second // it ran well for a while: a new problem
		}
		m.Restarts.WithLabelValues(reason).Inc()
		st.setReady(fmt.Sprintf("restarting in %s after: %v", backoff, err))
		if reason == "storage" {
			log.Warn("the warehouse or the catalog is unavailable; restarting the pipeline from its committed position once it does", "error", err, "in", backoff.String())
		} else {
			log.Warn("restarting the pipeline from its committed position", "error", err, "in", backoff.String())
		}
		if !sleep(ctx, backoff) {
			return nil
		}
		backoff = min(backoff*2, time.Minute)
	}
}

// openKeyIndex opens the pipeline's key index (deletes.index_dir), the
// cache of where each key's row is in the tables in position mode. An index
// that cannot be read is removed and built again from the tables. One that
// another process holds (a paused or hung daemon of the same pipeline on
// this machine, whose lease this one took over) is left to it: this daemon
// uses a directory of its own beside it, built from the tables and removed
// when it closes.
func openKeyIndex(cfg *config.Config, log *slog.Logger) (*keyIndex, error) {
	dir, err := cfg.IndexPath()
	if err != nil {
		return nil, err
	}
	opts := keyIndexOptions(cfg, log)
	open := func(dir string) (*pkindex.DB, error) {
		db, err := pkindex.Open(dir, opts)
		if errors.Is(err, pkindex.ErrCorrupt) {
			log.Warn("the key index cannot be read; removing it, the tables rebuild their indexes", "dir", dir, "error", err)
			if rerr := pkindex.Remove(dir); rerr != nil {
				return nil, fmt.Errorf("remove the unreadable key index %s: %w; remove the directory by hand", dir, rerr)
			}
			db, err = pkindex.Open(dir, opts)
		}
		return db, err
	}
	db, err := open(dir)
	if err == nil {
		removeStaleKeyIndexes(dir, log)
		return &keyIndex{DB: db}, nil
	}
	if !errors.Is(err, pkindex.ErrLocked) {
		return nil, fmt.Errorf("open the key index at %s: %w; set deletes.index_dir to a local directory the user running cdcsync may write", dir, err)
	}
	own := fmt.Sprintf("%s.pid-%d", dir, os.Getpid())
	log.Warn("another process holds the key index (a paused or hung cdcsync of this pipeline?); using a directory of this process's own, built from the tables",
		"dir", dir, "own", own)
	if db, err = open(own); err != nil {
		return nil, fmt.Errorf("open the key index at %s: %w", own, err)
	}
	return &keyIndex{DB: db, remove: own, log: log}, nil
}

// keyIndexOptions are the options of the pipeline's key index.
func keyIndexOptions(cfg *config.Config, log *slog.Logger) pkindex.Options {
	return pkindex.Options{CacheBytes: cfg.Deletes.IndexCache.Int64(), Log: log}
}

// keyIndex is the key index a session uses; remove is set for a directory
// of this process's own, removed when it closes.
type keyIndex struct {
	*pkindex.DB
	remove string
	log    *slog.Logger
}

func (k *keyIndex) Close() error {
	err := k.DB.Close()
	if k.remove != "" {
		if rerr := pkindex.Remove(k.remove); rerr != nil {
			k.log.Warn("cannot remove this process's key index directory", "dir", k.remove, "error", rerr)
		}
	}
	return err
}

// removeStaleKeyIndexes removes the directories of their own that killed
// processes left beside dir (see openKeyIndex).
func removeStaleKeyIndexes(dir string, log *slog.Logger) {
	matches, _ := filepath.Glob(dir + ".pid-*")
	for _, m := range matches {
		pid, err := strconv.Atoi(m[strings.LastIndex(m, "-")+1:])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		if err := pkindex.Remove(m); err != nil {
			log.Warn("cannot remove a key index directory a killed process left", "dir", m, "error", err)
		}
	}
}

// sleep waits d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// restartReason says why a session that failed with err may simply be run
// again ("source", "storage", "commit", "new_table", "schema"), or "" when it
// may not: everything that needs a person (bad data, a lost binlog
// position, another writer, failed preflight checks) ends the daemon.
// Outages of MySQL, the warehouse and the catalog are waited out, however
// long they last.
func restartReason(err error) string {
	switch {
	case err == nil:
		return "schema"
	case errors.Is(err, cdcsync.ErrPositionLost), errors.Is(err, lake.ErrConflict), cdcsync.IsPermanent(err):
		return ""
	case errors.Is(err, capture.ErrDisconnected):
		return "source"
	case errors.Is(err, capture.ErrNewTable):
		return "new_table"
	case errors.Is(err, cdcsync.ErrRestart), errors.Is(err, capture.ErrForeignKeys):
		return "schema"
	case lake.Transient(err):
		return "storage"
	case errors.Is(err, merge.ErrCommit):
		return "commit"
	}
	return ""
}

type daemon struct {
	cfg   *config.Config
	log   *slog.Logger
	m     *metrics.Metrics
	st    *status
	fault func(string)
	bar   *statusLine  // the terminal's progress line; nil when stderr is not a terminal
	self  lease.Holder // this process, as the pipeline's lease names it
	// values applies the types: policies, on both paths, for the whole
	// process (it logs the first value it changes per column once).
	values *capture.ValuePolicy

	holding   atomic.Bool                    // this daemon holds the pipeline's lease
	streamed  atomic.Bool                    // some session reached streaming
	streaming atomic.Bool                    // the current session reads the binlog
	pipe      atomic.Pointer[merge.Pipeline] // the current session's pipeline, for resync requests
	lake      atomic.Pointer[lake.Lake]      // the current session's lake, for tag requests
}

// session runs the pipeline once (merge.RunSession): checks, table setup,
// initial copy of the tables that need one, then streaming until ctx ends
// or an error occurs.
func (d *daemon) session(ctx context.Context, ls *lease.Lease) error {
	cfg, log := d.cfg, d.log
	lk, err := lake.Open(ctx, lake.OptionsFrom(cfg), log)
	if err != nil {
		return err
	}
	defer lk.Close()
	lk.SetLease(ls.Token(), ls.Valid)
	d.lake.Store(lk)
	defer d.lake.CompareAndSwap(lk, nil)
	keys, err := openKeyIndex(cfg, log)
	if err != nil {
		return err
	}
	defer keys.Close()
	lk.SetKeyIndex(keys.DB)
	src := capture.NewSource(&cfg.Source, cfg, cfg.Snapshot.Workers, d.values, log)
	return merge.RunSession(ctx, src, lk.ForSession(d.m, d.fault), merge.SessionOptions{
		Pipeline: merge.Options{
			Interval:          cfg.Epoch.Interval.Duration,
			MaxRows:           cfg.Epoch.MaxRows,
			MaxBytes:          int(cfg.Epoch.MaxBytes.Int64()),
			CommitConcurrency: cfg.Epoch.CommitConcurrency,
			IdleAfter:         cfg.Maintenance.IdleAfter.Duration,
			Transient:         lake.Transient,
			Fault:             d.fault,
			Copy:              merge.CopyOptions{ChunkRows: cfg.Snapshot.ChunkRows, Workers: cfg.Snapshot.Workers},
		},
		RecopyLost: cfg.Source.OnPositionLost == config.PositionLostRecopy,
		Running:    d.pipe.Store,
		Streaming: func(on bool) {
			d.streaming.Store(on)
			if on {
				d.streamed.Store(true)
			}
		},
		Watch: []func(context.Context, *merge.Pipeline){
			func(ctx context.Context, p *merge.Pipeline) { d.watchCopies(ctx, p, lk) },
		},
		Log:     log,
		Metrics: d.m,
	})
}

// tuneMemory applies memory_limit and gc_percent to the Go runtime (the
// daemon and cdcsync compact, the commands that hold much data).
// memory_limit bounds the process's resident memory, and the executable's
// code (over 100 MiB, nearly all of it resident once the daemon runs) is
// part of it, and so is the key index's cache where pebble allocates it
// outside the Go heap (cgo): the Go runtime gets the rest, at least half,
// and epoch.max_bytes, unless set, a quarter of what the Go heap has
// beside the index (docs/architecture.md, "Memory").
func tuneMemory(cfg *config.Config) {
	if cfg.MemoryLimit > 0 {
		index := indexMemory(cfg)
		offHeap := int64(0)
		if indexOffHeap {
			offHeap = index
		}
		heap := goMemoryLimit(cfg.MemoryLimit, residentCode(), offHeap)
		debug.SetMemoryLimit(heap.Int64())
		cfg.FitEpoch(heap - config.ByteSize(index-offHeap))
	}
	gcPercent := cfg.GCPercent
	if gcPercent == 0 && os.Getenv("GOGC") == "" {
		gcPercent = config.DefaultGCPercent
	}
	if gcPercent != 0 {
		debug.SetGCPercent(gcPercent)
	}
}

// limitText describes memory_limit.
func limitText(l config.ByteSize) string {
	if l == 0 {
		return "none"
	}
	return l.String()
}

// memoryLimit describes the Go runtime's soft memory limit.
func memoryLimit() string {
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
		return config.ByteSize(l &^ (1<<20 - 1)).String() // whole MiB
	}
	return "none"
}

// currentGCPercent reads the garbage collector's percentage back.
func currentGCPercent() int64 {
	s := []rtmetrics.Sample{{Name: "/gc/gogc:percent"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// watchLag keeps the lag gauges for the life of the process, across
// sessions: while no session streams (MySQL unreachable, a restart) the
// lag keeps growing from the last event or heartbeat the stream delivered,
// instead of freezing at its last value.
func (d *daemon) watchLag(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	probe := capture.NewLagProbe(&d.cfg.Source)
	defer probe.Close()
	seen := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pipe := d.pipe.Load()
		streaming := pipe != nil && d.streaming.Load()
		d.m.SourceConnected.Set(b2f(streaming))
		if !d.holding.Load() {
			d.m.LagSeconds.Set(0) // a standby mirrors nothing
			seen = time.Now()
			continue
		}
		var pending time.Duration
		if streaming {
			if s := pipe.LastSeen(); s.After(seen) {
				seen = s
			}
			pending = pipe.Lag()
		}
		silence := time.Since(seen)
		d.m.SourceSilence.Set(silence.Seconds())
		d.m.LagSeconds.Set(max(pending, silence).Seconds())
		if streaming {
			if b, err := probe.Bytes(ctx, pipe.Committed()); err == nil {
				d.m.LagBytes.Set(float64(b))
			}
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// faultFromEnv reads CDCSYNC_FAULT, a testing aid: "point:probability,..."
// makes the process kill itself with SIGKILL at the named protocol points
// (before-commit, between-tables, before-checkpoint; before-index: an
// epoch committed, the key index not updated; during-index-rebuild: a key
// index rebuild started, not finished; index-rebuild-chunk: part of a
// rebuild committed; after-spill: part of an open
// epoch written out, the epoch not committed) and maintenance points
// (during-compaction: rewritten files written, catalog commit not done;
// during-expiry: expiry committed, the expired snapshots' files not deleted)
// with that probability. CDCSYNC_DELAY, another: "point:duration:nth,..."
// makes the nth time the process reaches the point (default the first; 0:
// every time) sleep that long, as a slow commit would (before-checkpoint;
// before-commit@db.table holds one table's commits).
func faultFromEnv(log *slog.Logger) func(string) {
	kill := killFromEnv(log)
	delay := delayFromEnv(log)
	return func(point string) {
		delay(point)
		kill(point)
	}
}

func delayFromEnv(log *slog.Logger) func(string) {
	spec := os.Getenv("CDCSYNC_DELAY")
	if spec == "" {
		return func(string) {}
	}
	type delay struct {
		d    time.Duration
		nth  int
		seen int
	}
	var mu sync.Mutex
	delays := map[string]*delay{}
	for _, part := range strings.Split(spec, ",") {
		f := strings.Split(strings.TrimSpace(part), ":")
		dl := &delay{nth: 1}
		if len(f) > 1 {
			dl.d, _ = time.ParseDuration(f[1])
		}
		if len(f) > 2 {
			dl.nth, _ = strconv.Atoi(f[2])
		}
		delays[f[0]] = dl
	}
	log.Warn("delay injection is on (CDCSYNC_DELAY); never use it in production", "spec", spec)
	return func(point string) {
		mu.Lock()
		dl := delays[point]
		var d time.Duration
		if dl != nil {
			if dl.seen++; dl.nth == 0 || dl.seen == dl.nth {
				d = dl.d
			}
		}
		mu.Unlock()
		if d > 0 {
			log.Warn("delay injection: sleeping", "point", point, "for", d.String())
			time.Sleep(d)
		}
	}
}

func killFromEnv(log *slog.Logger) func(string) {
	spec := os.Getenv("CDCSYNC_FAULT")
	if spec == "" {
		return func(string) {}
	}
	probs := map[string]float64{}
	for _, part := range strings.Split(spec, ",") {
		name, p, _ := strings.Cut(part, ":")
		var f float64
		fmt.Sscan(p, &f)
		probs[strings.TrimSpace(name)] = f
	}
	log.Warn("fault injection is on (CDCSYNC_FAULT); never use it in production", "spec", spec)
	r := newRand()
	return func(point string) {
		if p, ok := probs[point]; ok && r.Float64() < p {
			log.Warn("fault injection: killing the process", "point", point)
			syscall.Kill(os.Getpid(), syscall.SIGKILL) //nolint:errcheck
			select {}
		}
	}
}
