package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/lake"
	"github.com/cdcsync/cdcsync/merge"
	"github.com/cdcsync/cdcsync/metrics"
)

// status is what /healthz and /readyz report.
type status struct {
	ready   atomic.Bool // streaming: the initial copy is done and the binlog is being read
	healthy atomic.Bool // false once the daemon gave up
}

func runDaemon(ctx context.Context, cfg *config.Config, stderr io.Writer) error {
	log := newLogger(cfg, stderr)
	m := metrics.New()
	st := &status{}
	st.healthy.Store(true)
	if cfg.HTTP.Listen != config.HTTPOff {
		srv, err := serveHTTP(cfg.HTTP.Listen, m, st, log)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	log.Info("cdcsync starting", "pipeline", cfg.Pipeline, "source", fmt.Sprintf("%s:%d", cfg.Source.Host, cfg.Source.Port),
		"warehouse", cfg.Warehouse.Location, "catalog", cfg.Catalog.Type+":"+cfg.Catalog.Name)
	d := &daemon{cfg: cfg, log: log, m: m, st: st, fault: faultFromEnv(log)}
	backoff := time.Second
	for {
		started := time.Now()
		err := d.session(ctx)
		st.ready.Store(false)
		if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
			log.Info("cdcsync stopped cleanly")
			return nil
		}
		if !restartable(err) || !d.streamed.Load() {
			// A daemon that never got to stream has a setup problem (wrong
			// password, unreachable server): say so instead of looping.
			st.healthy.Store(false)
			return err
		}
		if time.Since(started) > 5*time.Minute {
			backoff = time.Second
		}
		log.Warn("restarting the pipeline from its committed position", "error", err, "in", backoff.String())
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil
		}
		backoff = min(backoff*2, time.Minute)
	}
}

// restartable says whether a session that failed with err may simply be run
// again: lost connections, new tables and commits that kept failing are;
// everything that needs a person (bad data, schema changes, another writer,
// failed preflight checks) is not.
func restartable(err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, capture.ErrDisconnected), errors.Is(err, capture.ErrNewTable):
		return true
	case errors.Is(err, merge.ErrCommit):
		return !merge.IsPermanent(err)
	}
	return false
}

type daemon struct {
	cfg   *config.Config
	log   *slog.Logger
	m     *metrics.Metrics
	st    *status
	fault func(string)

	streamed atomic.Bool // some session reached streaming
}

// session runs the pipeline once: checks, table setup, initial copy of the
// tables that need one, then streaming until ctx ends or an error occurs.
func (d *daemon) session(ctx context.Context) error {
	cfg, log := d.cfg, d.log
	conn, err := capture.Connect(ctx, &cfg.Source)
	if err != nil {
		return fmt.Errorf("%w: %w", capture.ErrDisconnected, err)
	}
	findings, schemas, err := capture.Preflight(ctx, conn, &cfg.Source)
	if err != nil {
		conn.Close()
		return fmt.Errorf("%w: %w", capture.ErrDisconnected, err)
	}
	if failed := capture.Failed(findings); len(failed) > 0 {
		conn.Close()
		msgs := make([]string, len(failed))
		for i, f := range failed {
			msgs[i] = "  - " + f.Message
		}
		return exitError{1, fmt.Errorf("preflight checks failed; `cdcsync check` lists them all:\n%s", strings.Join(msgs, "\n"))}
	}
	for _, f := range findings {
		if f.Warning {
			log.Warn(f.Message, "check", f.Check)
		}
	}
	flavor, version, err := capture.ServerFlavor(ctx, conn)
	if err != nil {
		conn.Close()
		return fmt.Errorf("%w: %w", capture.ErrDisconnected, err)
	}
	serverUUID, err := capture.ServerIdentity(ctx, conn, flavor)
	conn.Close()
	if err != nil {
		return fmt.Errorf("%w: %w", capture.ErrDisconnected, err)
	}
	log.Info("source checked", "flavor", flavor, "version", version, "tables", len(schemas))

	lk, err := lake.Open(ctx, cfg, log)
	if err != nil {
		return exitError{1, err}
	}
	defer lk.Close()
	if err := lk.Check(ctx); err != nil {
		return exitError{1, err}
	}

	tables := map[cdcsync.TableID]*lake.Table{}
	committed := map[cdcsync.TableID]lake.Committed{}
	var maxEpoch int64
	for _, s := range schemas {
		t, err := lk.EnsureTable(ctx, s)
		if err != nil {
			return exitError{1, err}
		}
		t.BeforeCommit = func() { d.fault("before-commit") }
		c, err := t.Committed()
		if err != nil {
			return exitError{1, err}
		}
		tables[s.ID], committed[s.ID] = t, c
		maxEpoch = max(maxEpoch, c.Epoch)
	}
	ckpt, haveCkpt, err := lk.LoadCheckpoint(ctx)
	if err != nil {
		return exitError{1, err}
	}
	next := max(maxEpoch, ckpt.Epoch) + 1

	// Tables never copied need an initial copy. Until the pipeline's first
	// checkpoint exists, every table is copied again: a crash during the first
	// copy leaves no position that all tables share.
	var toCopy []cdcsync.TableID
	for id, c := range committed {
		if !c.Found || !haveCkpt {
			toCopy = append(toCopy, id)
		}
	}
	start := ckpt.Pos
	if len(toCopy) > 0 {
		pos, err := d.copyTables(ctx, flavor, serverUUID, tables, toCopy, next)
		if err != nil {
			return err
		}
		for _, id := range toCopy {
			committed[id] = lake.Committed{Epoch: next, Pos: pos, Found: true}
		}
		if !haveCkpt {
			if err := lk.SaveCheckpoint(ctx, lake.Checkpoint{Epoch: next, Pos: pos, Time: time.Now()}); err != nil {
				return exitError{1, err}
			}
			start = pos
		}
		next++
	}
	if start.IsZero() {
		return exitError{1, errors.New("no binlog position to start from: the pipeline has no checkpoint and selects no table; check source.include")}
	}

	var ptables []merge.Table
	smap := map[cdcsync.TableID]*cdcsync.TableSchema{}
	cmap := map[cdcsync.TableID]cdcsync.Position{}
	for id, t := range tables {
		ptables = append(ptables, merge.Table{Schema: t.Schema, Committed: committed[id].Pos})
		smap[id] = t.Schema
		cmap[id] = committed[id].Pos
	}
	pipe := merge.New(&lakeSink{lake: lk, tables: tables}, ptables, next, start, merge.Options{
		Interval:          cfg.Epoch.Interval.Duration,
		MaxRows:           cfg.Epoch.MaxRows,
		MaxBytes:          int(cfg.Epoch.MaxBytes.Int64()),
		CommitConcurrency: cfg.Epoch.CommitConcurrency,
		Fault:             d.fault,
	}, log, d.m)

	log.Info("streaming the binlog", "from", start.String(), "epoch", next)
	txns := make(chan *cdcsync.Txn, 64)
	g, gctx := errgroup.WithContext(ctx)
	streamCtx, stopStream := context.WithCancel(gctx)
	defer stopStream()
	g.Go(func() error {
		defer close(txns)
		d.st.ready.Store(true)
		d.streamed.Store(true)
		return capture.Stream(streamCtx, capture.StreamConfig{Source: &cfg.Source, Flavor: flavor, ServerUUID: serverUUID,
			Start: start, Schemas: smap, Committed: cmap, Log: log}, txns)
	})
	g.Go(func() error {
		// The pipeline ends by itself when the stream closes txns; it must not
		// see gctx's cancellation first, or it would stop before committing
		// the transactions already read.
		err := pipe.Run(context.WithoutCancel(ctx), txns)
		stopStream()
		return err
	})
	g.Go(func() error { return d.watchLag(gctx, lk, pipe) })
	err = g.Wait()
	if ctx.Err() != nil && err == nil {
		return ctx.Err()
	}
	return err
}

// copyTables copies the given tables in one consistent snapshot and returns
// its binlog position.
func (d *daemon) copyTables(ctx context.Context, flavor, serverUUID string, tables map[cdcsync.TableID]*lake.Table, ids []cdcsync.TableID, epoch int64) (cdcsync.Position, error) {
	snap, err := capture.BeginSnapshot(ctx, &d.cfg.Source, flavor, serverUUID)
	if err != nil {
		return cdcsync.Position{}, err
	}
	defer snap.Close()
	pos := snap.Position()
	d.log.Info("initial copy starting", "tables", len(ids), "position", pos.String())
	for _, id := range ids {
		t := tables[id]
		began := time.Now()
		n, err := t.CopyInto(ctx, lake.Epoch{Number: epoch, Pos: pos}, d.cfg.Snapshot.BatchRows, func(add func(cdcsync.Row) error) error {
			return snap.Copy(ctx, t.Schema, add)
		})
		if err != nil {
			return cdcsync.Position{}, fmt.Errorf("initial copy of %s: %w", id, err)
		}
		d.m.SnapshotRows.WithLabelValues(id.String()).Add(float64(n))
		d.log.Info("initial copy committed", "table", id.String(), "rows", n, "seconds", time.Since(began).Seconds())
	}
	return pos, nil
}

// watchLag updates the lag gauges every few seconds.
func (d *daemon) watchLag(ctx context.Context, lk *lake.Lake, pipe *merge.Pipeline) error {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		d.m.LagSeconds.Set(pipe.Lag().Seconds())
		if b, err := capture.LagBytes(ctx, &d.cfg.Source, pipe.Committed()); err == nil {
			d.m.LagBytes.Set(float64(b))
		}
	}
}

// lakeSink adapts lake tables to merge.Sink.
type lakeSink struct {
	lake   *lake.Lake
	tables map[cdcsync.TableID]*lake.Table
}

func (s *lakeSink) Commit(ctx context.Context, id cdcsync.TableID, epoch int64, pos cdcsync.Position, deletes, rows []cdcsync.Row) error {
	err := s.tables[id].Commit(ctx, lake.Epoch{Number: epoch, Pos: pos}, deletes, rows)
	if errors.Is(err, lake.ErrConflict) {
		return merge.Permanent(err)
	}
	return err
}

func (s *lakeSink) SaveCheckpoint(ctx context.Context, epoch int64, pos cdcsync.Position) error {
	return s.lake.SaveCheckpoint(ctx, lake.Checkpoint{Epoch: epoch, Pos: pos, Time: time.Now()})
}

// faultFromEnv reads CDCSYNC_FAULT, a testing aid: "point:probability,..."
// makes the process kill itself with SIGKILL at the named protocol points
// (before-commit, between-tables, before-checkpoint) with that probability.
func faultFromEnv(log *slog.Logger) func(string) {
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
