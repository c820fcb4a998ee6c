package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sort"
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
	tuneMemory(cfg)
	m := metrics.New()
	st := &status{}
	st.healthy.Store(true)
	st.setReady("starting: checking the source and the warehouse")
	d := &daemon{cfg: cfg, log: log, m: m, st: st, fault: faultFromEnv(log), bar: bar,
		values: capture.NewValuePolicy(cfg.Types, log, func(table, column, policy string) {
			m.TypePolicyValues.WithLabelValues(table, column, policy).Inc()
		})}
	if cfg.HTTP.Listen != config.HTTPOff {
		srv, err := serveHTTP(cfg.HTTP.Listen, m, st, d.resync, log)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	of, err := openFilesOf(cfg)
	if err != nil {
		return err
	}
	log.Info("cdcsync starting", "pipeline", cfg.Pipeline, "source", fmt.Sprintf("%s:%d", cfg.Source.Host, cfg.Source.Port),
		"warehouse", cfg.Warehouse.Location, "catalog", cfg.Catalog.Type+":"+cfg.Catalog.Name,
		"memory_limit", memoryLimit(), "gc_percent", currentGCPercent(), "epoch_max_bytes", cfg.Epoch.MaxBytes.String(),
		"open_files_limit", of.limit, "max_open_files", cfg.Warehouse.MaxOpenFiles)
	if !of.enough() {
		// Not fatal: a write that finds no descriptor fails its commit,
		// which is retried, and nothing is lost; but it will keep failing.
		log.Warn(of.String())
	}
	backoff := time.Second
	for {
		started := time.Now()
		err := d.session(ctx)
		if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
			log.Info("cdcsync stopped cleanly")
			return nil
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
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil
		}
		backoff = min(backoff*2, time.Minute)
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
	case errors.Is(err, capture.ErrPositionLost), errors.Is(err, lake.ErrConflict), cdcsync.IsPermanent(err):
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
	bar   *statusLine // the terminal's progress line; nil when stderr is not a terminal
	// values applies the types: policies, on both paths, for the whole
	// process (it logs the first value it changes per column once).
	values *capture.ValuePolicy

	streamed  atomic.Bool                    // some session reached streaming
	streaming atomic.Bool                    // the current session reads the binlog
	pipe      atomic.Pointer[merge.Pipeline] // the current session's pipeline, for resync requests
}

// session runs the pipeline once: checks, table setup, initial copy of the
// tables that need one, then streaming until ctx ends or an error occurs.
func (d *daemon) session(ctx context.Context) error {
	cfg, log := d.cfg, d.log
	conn, err := capture.Connect(ctx, &cfg.Source)
	if err != nil {
		return fmt.Errorf("%w: %w", capture.ErrDisconnected, err)
	}
	// The server's position before the tables are listed: a table created
	// before it that the list lacks is gone again, not new (see
	// capture.StreamConfig.Horizon).
	var horizon cdcsync.Position
	if fl, _, err := capture.ServerFlavor(ctx, conn); err == nil {
		if id, err := capture.ServerIdentity(ctx, conn, fl); err == nil {
			horizon, _ = capture.CurrentPosition(ctx, conn, fl, id)
		}
	}
	// XA transactions prepared before the horizon: a copy starting there
	// must wait for them to end (capture.AwaitPreparedXA).
	preparedXA, xaErr := capture.PreparedXA(ctx, conn)
	findings, schemas, err := capture.Preflight(ctx, conn, &cfg.Source)
	if err != nil {
		conn.Close()
		return fmt.Errorf("%w: %w", capture.ErrDisconnected, err)
	}
	// A failed check about one table (no primary key, a type cdcsync cannot
	// map) stops only that table once the pipeline runs; before its first
	// checkpoint, every failure stops cdcsync, so that setup problems show.
	failed := capture.Failed(findings)
	tableFailed := map[cdcsync.TableID][]string{}
	global := false
	for _, f := range failed {
		if f.Table != (cdcsync.TableID{}) {
			tableFailed[f.Table] = append(tableFailed[f.Table], f.Message)
		} else {
			global = true
		}
	}
	preflightFailed := func() error {
		msgs := make([]string, len(failed))
		for i, f := range failed {
			msgs[i] = "  - " + f.Message
		}
		return exitError{1, fmt.Errorf("preflight checks failed; `cdcsync check` lists them all:\n%s", strings.Join(msgs, "\n"))}
	}
	if global {
		conn.Close()
		return preflightFailed()
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
	var fks []cdcsync.ForeignKey // whose actions the binlog lacks: the pipeline applies them
	if err == nil && !capture.CascadesLogged(flavor, version) {
		ids := make([]cdcsync.TableID, 0, len(schemas))
		for _, s := range schemas {
			ids = append(ids, s.ID)
		}
		fks, _, err = capture.ForeignKeys(ctx, conn, ids)
	}
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

	ckpt, haveCkpt, err := lk.LoadCheckpoint(ctx)
	if err != nil {
		return exitError{1, err}
	}
	if len(tableFailed) > 0 && !haveCkpt {
		return preflightFailed()
	}

	tables := map[cdcsync.TableID]*lake.Table{}
	committed := map[cdcsync.TableID]cdcsync.Committed{}
	stopped := map[cdcsync.TableID]bool{}
	recopy := map[cdcsync.TableID]bool{}
	nstopped := 0
	var maxEpoch int64
	for _, s := range schemas {
		if msgs := tableFailed[s.ID]; len(msgs) > 0 {
			exists, err := lk.TableExists(ctx, s.ID)
			if err != nil {
				return exitError{1, err}
			}
			if !exists {
				log.Error("cdcsync does not mirror this table; the other tables go on: "+strings.Join(msgs, "; "), "table", s.ID.String())
				stopped[s.ID] = true
				nstopped++
				continue
			}
		}
		t, err := lk.EnsureTable(ctx, s)
		if err != nil {
			return exitError{1, err}
		}
		if info, ok := t.Stopped(); ok {
			// Resuming it from the checkpoint would lose the changes between
			// its last commit and the checkpoint: it stays stopped.
			stopped[s.ID] = true
			if info.Dropped {
				log.Warn(lk.StoppedMessage(t, info), "table", s.ID.String(), "position", info.Position.String())
			} else {
				nstopped++
				log.Error(lk.StoppedMessage(t, info), "table", s.ID.String(), "position", info.Position.String())
			}
			continue
		}
		if msgs := tableFailed[s.ID]; len(msgs) > 0 {
			if _, ok := t.NeedsRecopy(); ok {
				return preflightFailed()
			}
			// Its Iceberg table mirrors the schema recorded with it; the
			// stream stops the table when it reaches the DDL statement
			// that made the check fail.
			log.Warn("the table fails a preflight check now, but its Iceberg table mirrors an earlier schema: "+
				"it is mirrored up to the DDL statement that changed it: "+strings.Join(msgs, "; "), "table", s.ID.String())
		}
		if _, ok := t.NeedsRecopy(); ok {
			if t, err = lk.PrepareRecopy(ctx, t, s); err != nil {
				return exitError{1, err}
			}
			recopy[s.ID] = true
			log.Warn("copying the table again after a schema change Iceberg cannot express (ddl.incompatible: recopy)", "table", s.ID.String())
		}
		t.BeforeCommit = func() { d.fault("before-commit") }
		c, err := t.Committed()
		if err != nil {
			return exitError{1, err}
		}
		tables[s.ID], committed[s.ID] = t, c
		maxEpoch = max(maxEpoch, c.Epoch)
	}
	if haveCkpt {
		// Tables dropped or renamed in MySQL while cdcsync was away are
		// followed up to that statement.
		present := map[cdcsync.TableID]bool{}
		for _, s := range schemas {
			present[s.ID] = true
		}
		departed, err := lk.Departed(ctx, present)
		if err != nil {
			return exitError{1, err}
		}
		for _, t := range departed {
			c, err := t.Committed()
			if err != nil {
				return exitError{1, err}
			}
			t.BeforeCommit = func() { d.fault("before-commit") }
			tables[t.ID], committed[t.ID] = t, c
			maxEpoch = max(maxEpoch, c.Epoch)
			log.Info("the MySQL table is gone; cdcsync follows it up to the DROP or RENAME in the binlog", "table", t.ID.String())
		}
	}
	next := max(maxEpoch, ckpt.Epoch) + 1
	d.m.TablesStopped.Set(float64(nstopped))
	if haveCkpt {
		// A table that has not changed since its last commit holds what
		// the checkpoint holds.
		for id, c := range committed {
			c.Pos = ckpt.Effective(id, c)
			committed[id] = c
		}
	}

	// Tables never copied, or marked to be copied again, start a copy; one
	// that a previous session began resumes it (their commits record its
	// progress). Until the pipeline's first checkpoint exists, every table
	// starts afresh: a crash before it leaves no position all tables share.
	if horizon.IsZero() {
		return fmt.Errorf("%w: could not read the server's binlog position", capture.ErrDisconnected)
	}
	// Every table's position must still be on the server (see
	// lostPositions); source.on_position_lost says what happens otherwise.
	var binlog *capture.Binlog
	lost := map[cdcsync.TableID]string{}
	if haveCkpt {
		if binlog, err = readBinlog(ctx, cfg, flavor, serverUUID); err != nil {
			return err
		}
		if lost, err = lostPositions(binlog, committed, recopy); err != nil {
			return err
		}
	}
	present := map[cdcsync.TableID]bool{}
	for _, s := range schemas {
		present[s.ID] = true
	}
	if len(lost) > 0 && cfg.Source.OnPositionLost != config.PositionLostRecopy {
		return positionLostError(cfg, lost, committed)
	}
	for id, msg := range lost {
		if !present[id] {
			// Dropped or renamed in MySQL while cdcsync was away, and the
			// binlog up to that statement is gone: nothing to copy.
			log.Warn("the MySQL table is gone and the server no longer has its binlog up to the DROP or RENAME; its Iceberg table keeps its last contents",
				"table", id.String(), "position", committed[id].Pos.String(), "problem", msg)
			delete(tables, id)
			delete(committed, id)
			continue
		}
		log.Warn("the server no longer has this table's binlog position; copying it again from the current position (source.on_position_lost: recopy), "+
			"its Iceberg table shows its last contents until the new copy is complete",
			"table", id.String(), "position", committed[id].Pos.String(), "problem", msg)
	}
	var fresh []cdcsync.TableID
	for id, c := range committed {
		if !c.Found || !haveCkpt || recopy[id] || lost[id] != "" {
			fresh = append(fresh, id)
		}
	}
	// A table copied afresh gets the schema MySQL has now.
	info := map[cdcsync.TableID]*cdcsync.TableSchema{}
	for _, s := range schemas {
		info[s.ID] = s
	}
	clean := map[cdcsync.TableID]bool{}
	if len(fresh) > 0 {
		if xaErr != nil {
			log.Warn("cdcsync cannot list the prepared XA transactions; a table copy could miss the rows of one prepared before the copy started and committed after",
				"error", xaErr)
		} else if len(preparedXA) > 0 {
			if err := awaitPreparedXA(ctx, cfg, preparedXA, log); err != nil {
				return err
			}
		}
	}
	for _, id := range fresh {
		if s := info[id]; s != nil && !recopy[id] && !capture.SameSchema(tables[id].Schema, s) {
			t, err := lk.PrepareRecopy(ctx, tables[id], s)
			if err != nil {
				return exitError{1, err}
			}
			t.BeforeCommit = tables[id].BeforeCommit
			tables[id] = t
		}
		// The copy starts at the position read before the tables were
		// listed: the stream applies the table's changes after it, the
		// chunks show everything before.
		if err := tables[id].StartCopy(ctx, lake.Epoch{Number: next, Pos: horizon}); err != nil {
			return exitError{1, err}
		}
		committed[id] = cdcsync.Committed{Epoch: next, Pos: horizon, Found: true, Copy: &cdcsync.CopyState{}}
		clean[id] = true
	}
	start := ckpt.Pos
	// The tables' own committed positions are the truth, the checkpoint
	// only an optimisation: a table behind it (its catalog restored from a
	// backup, a checkpoint from elsewhere) is replayed from its own
	// position, never skipped, so the stream starts at or before the
	// oldest of them.
	if haveCkpt && len(committed) > 0 && len(clean) == len(committed) {
		// Every table starts a copy at the horizon (resync of them all,
		// after a purged position): the checkpoint holds nothing they need.
		start = horizon
	} else if haveCkpt {
		var behind []string
		for id, c := range committed {
			if !c.Found || clean[id] {
				continue
			}
			if ok, err := c.Pos.Includes(start); err != nil {
				return exitError{1, fmt.Errorf("compare the committed position of %s with the pipeline checkpoint: %w", id, err)}
			} else if ok {
				continue
			}
			if start, err = cdcsync.Earliest(start, c.Pos); err != nil {
				return exitError{1, fmt.Errorf("%s is behind the pipeline checkpoint (%s) at %s and the stream cannot start before both: %w; "+
					"resync the table (cdcsync resync %s)", id, ckpt.Pos, c.Pos, err, id)}
			}
			behind = append(behind, id.String()+" at "+c.Pos.String())
		}
		if len(behind) > 0 {
			sort.Strings(behind)
			log.Warn("tables are behind the pipeline checkpoint (a catalog restored from a backup?): the stream starts before them and replays what they lack",
				"checkpoint", ckpt.Pos.String(), "start", start.String(), "tables", strings.Join(behind, ", "))
		}
	}
	if !haveCkpt {
		if err := lk.SaveCheckpoint(ctx, cdcsync.Checkpoint{Epoch: next, Pos: horizon, Time: time.Now()}); err != nil {
			return exitError{1, err}
		}
		start = horizon
	}
	if len(fresh) > 0 || !haveCkpt {
		next++
	}
	if start.IsZero() {
		return exitError{1, errors.New("no binlog position to start from: the pipeline has no checkpoint and selects no table; check source.include")}
	}
	if haveCkpt {
		if err := startOnServer(binlog, &start, committed, clean); err != nil {
			return err
		}
	}

	for id, c := range committed {
		if c.Copy != nil && !clean[id] {
			log.Info("resuming the initial copy after its last committed chunk", "table", id.String(), "rows", c.Copy.Rows)
		} else if c.Copy != nil {
			log.Info("initial copy starting", "table", id.String(), "position", horizon.String())
		}
	}
	keys, actions, err := followKeys(ctx, tables, clean, fks, horizon, next, flavor, version)
	if err != nil {
		return exitError{1, err}
	}
	var ptables []merge.Table
	smap := map[cdcsync.TableID]*cdcsync.TableSchema{}
	cmap := map[cdcsync.TableID]cdcsync.Position{}
	spos := map[cdcsync.TableID]cdcsync.Position{}
	var shadows []cdcsync.ShadowAt
	for id, t := range tables {
		ptables = append(ptables, merge.Table{Schema: t.Schema, Committed: committed[id].Pos, Copy: committed[id].Copy, CopyClean: clean[id]})
		smap[id] = t.Schema
		cmap[id] = committed[id].Pos
		spos[id] = t.SchemaPos()
		sh, err := t.Shadows()
		if err != nil {
			return exitError{1, err}
		}
		for _, s := range sh {
			shadows = append(shadows, cdcsync.ShadowAt{Base: id, Shadow: s.Shadow, Pos: s.Pos})
		}
	}
	sink := lk.NewSink(tables, d.m, lk.NewMaintainer(cfg.Maintenance, d.fault))
	chunks := capture.NewChunkReader(&cfg.Source, flavor, serverUUID, d.values, cfg.Snapshot.Workers)
	defer chunks.Close()
	pipe := merge.New(sink, ptables, next, start, merge.Options{
		Interval:          cfg.Epoch.Interval.Duration,
		MaxRows:           cfg.Epoch.MaxRows,
		MaxBytes:          int(cfg.Epoch.MaxBytes.Int64()),
		CommitConcurrency: cfg.Epoch.CommitConcurrency,
		Transient:         lake.Transient,
		Quit:              ctx.Done(),
		Fault:             d.fault,
		ForeignKeys:       actions,
		Copy: merge.CopyOptions{
			Source:    chunks,
			ChunkRows: cfg.Snapshot.ChunkRows,
			Workers:   cfg.Snapshot.Workers,
		},
	}, log, d.m)
	d.pipe.Store(pipe)
	defer d.pipe.Store(nil)

	log.Info("streaming the binlog", "from", start.String(), "epoch", next)
	txns := make(chan *cdcsync.Txn, 64)
	g, gctx := errgroup.WithContext(ctx)
	streamCtx, stopStream := context.WithCancel(gctx)
	defer stopStream()
	g.Go(func() error {
		defer close(txns)
		d.streaming.Store(true)
		defer d.streaming.Store(false)
		d.streamed.Store(true)
		return capture.Stream(streamCtx, capture.StreamConfig{Source: &cfg.Source, Flavor: flavor, ServerUUID: serverUUID,
			Start: start, Schemas: smap, Committed: cmap, SchemaPos: spos, Shadows: shadows, Stopped: stopped,
			Horizon: horizon, SettledXA: preparedXA, ForeignKeys: !capture.CascadesLogged(flavor, version), Keys: keys,
			Config: cfg, Values: d.values, Log: log}, txns)
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
	g.Go(func() error { d.watchCopies(gctx, pipe, lk); return nil })
	err = g.Wait()
	if ctx.Err() != nil && err == nil {
		return ctx.Err()
	}
	return err
}

// followKeys returns the foreign keys of the mirrored tables as the stream
// starts following them (cdcsync.TableKeys), and those with an action, for
// the pipeline. A table's keys are those recorded with its Iceberg table,
// as of its position; a table copied afresh, or whose keys are not
// recorded (an older cdcsync, a change the stream could not follow), gets
// the keys MySQL has now (fromServer, read after horizon), recorded as of
// horizon.
func followKeys(ctx context.Context, tables map[cdcsync.TableID]*lake.Table, clean map[cdcsync.TableID]bool,
	fromServer []cdcsync.ForeignKey, horizon cdcsync.Position, epoch int64, flavor, version string) (map[cdcsync.TableID]cdcsync.TableKeys, []cdcsync.ForeignKey, error) {
	if capture.CascadesLogged(flavor, version) {
		return nil, nil, nil
	}
	keys := map[cdcsync.TableID]cdcsync.TableKeys{}
	var actions []cdcsync.ForeignKey
	for id, t := range tables {
		k, pos, ok, err := t.ForeignKeys()
		if err != nil {
			return nil, nil, err
		}
		if !ok || clean[id] {
			k, pos = nil, horizon
			for _, fk := range fromServer {
				if fk.Child == id {
					k = append(k, fk)
				}
			}
			if err := t.SetForeignKeys(ctx, lake.Epoch{Number: epoch, Pos: pos}, k); err != nil {
				return nil, nil, err
			}
		}
		keys[id] = cdcsync.TableKeys{Keys: k, Pos: pos}
		for _, fk := range k {
			if fk.Acts() {
				actions = append(actions, fk)
			}
		}
	}
	return keys, actions, nil
}

// readBinlog reads what the server can still stream (capture.Binlog).
func readBinlog(ctx context.Context, cfg *config.Config, flavor, serverUUID string) (*capture.Binlog, error) {
	conn, err := capture.Connect(ctx, &cfg.Source)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", capture.ErrDisconnected, err)
	}
	defer conn.Close()
	b, err := capture.ReadBinlog(ctx, conn, flavor, serverUUID)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", capture.ErrDisconnected, err)
	}
	return b, nil
}

// lostPositions returns the tables whose committed position b cannot
// serve, with why: binlog after it purged, or a history that does not
// contain it (after a failover, the new server must be a replica that has
// everything cdcsync read). Tables in skip (copied afresh anyway) are not
// asked about.
func lostPositions(b *capture.Binlog, committed map[cdcsync.TableID]cdcsync.Committed, skip map[cdcsync.TableID]bool) (map[cdcsync.TableID]string, error) {
	lost := map[cdcsync.TableID]string{}
	for id, c := range committed {
		if !c.Found || skip[id] {
			continue
		}
		msg, err := b.Missing(c.Pos)
		if err != nil {
			return nil, exitError{1, fmt.Errorf("check the committed position of %s on the server: %w", id, err)}
		}
		if msg != "" {
			lost[id] = msg
		}
	}
	return lost, nil
}

// positionLostError is the end of a session that found tables whose
// positions the server lost, under source.on_position_lost: fail.
func positionLostError(cfg *config.Config, lost map[cdcsync.TableID]string, committed map[cdcsync.TableID]cdcsync.Committed) error {
	var lines, names []string
	for id, msg := range lost {
		lines = append(lines, fmt.Sprintf("%s at %s: %s", id, committed[id].Pos, msg))
		names = append(names, id.String())
	}
	sort.Strings(lines)
	sort.Strings(names)
	return fmt.Errorf("%w: %s:%d cannot stream what these tables need:\n  - %s\n"+
		"The changes since were purged, or this server does not have them. Copy the tables again from the server's current position: "+
		"stop cdcsync, run `cdcsync resync --offline --config FILE %s`, then start it; or set source.on_position_lost: recopy so that run does it",
		capture.ErrPositionLost, cfg.Source.Host, cfg.Source.Port, strings.Join(lines, "\n  - "), strings.Join(names, " "))
}

// awaitPreparedXA waits, on a connection of its own, for the XA
// transactions prepared before the copies' start to end.
func awaitPreparedXA(ctx context.Context, cfg *config.Config, xids []string, log *slog.Logger) error {
	conn, err := capture.Connect(ctx, &cfg.Source)
	if err != nil {
		return fmt.Errorf("%w: %w", capture.ErrDisconnected, err)
	}
	defer conn.Close()
	if err := capture.AwaitPreparedXA(ctx, conn, xids, log); err != nil {
		return fmt.Errorf("%w: %w", capture.ErrDisconnected, err)
	}
	return nil
}

// startOnServer checks the stream's start on the server. The checkpoint
// is only an optimisation: when the server no longer has it but has every
// streaming table's position, the stream starts at the oldest of those.
func startOnServer(b *capture.Binlog, start *cdcsync.Position, committed map[cdcsync.TableID]cdcsync.Committed, fresh map[cdcsync.TableID]bool) error {
	msg, err := b.Missing(*start)
	if err != nil || msg == "" {
		return err
	}
	var from cdcsync.Position
	for id, c := range committed {
		if !c.Found || fresh[id] {
			continue
		}
		if from, err = cdcsync.Earliest(from, c.Pos); err != nil {
			return exitError{1, err}
		}
	}
	if !from.IsZero() {
		if m, err := b.Missing(from); err == nil && m == "" {
			*start = from
			return nil
		}
	}
	return fmt.Errorf("%w: the server cannot stream from the pipeline checkpoint at %s: %s; "+
		"copy the tables again: stop cdcsync, run `cdcsync resync --offline --config FILE --all`, then start it", capture.ErrPositionLost, *start, msg)
}

// tuneMemory applies memory_limit and gc_percent to the Go runtime (the
// daemon and cdcsync compact, the commands that hold much data).
func tuneMemory(cfg *config.Config) {
	if cfg.MemoryLimit > 0 {
		debug.SetMemoryLimit(cfg.MemoryLimit.Int64())
	}
	gcPercent := cfg.GCPercent
	if gcPercent == 0 && os.Getenv("GOGC") == "" {
		gcPercent = config.DefaultGCPercent
	}
	if gcPercent != 0 {
		debug.SetGCPercent(gcPercent)
	}
}

// memoryLimit describes the Go runtime's soft memory limit.
func memoryLimit() string {
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
		return config.ByteSize(l).String()
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

// faultFromEnv reads CDCSYNC_FAULT, a testing aid: "point:probability,..."
// makes the process kill itself with SIGKILL at the named protocol points
// (before-commit, between-tables, before-checkpoint) and maintenance points
// (during-compaction: rewritten files written, catalog commit not done;
// during-expiry: expiry committed, the expired snapshots' files not deleted)
// with that probability.
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
