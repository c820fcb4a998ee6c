package merge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/metrics"
)

// A session is one run of the pipeline from its committed state: it asks
// the source what is there and the lake what is committed, decides where
// each table resumes (streaming, copying afresh, stopped, gone), writes
// the first checkpoint, and streams until the context ends or an error
// occurs. The daemon runs sessions one after another (cmd/cdcsync).

// Source is the database a session mirrors (capture.Source: MySQL and
// MariaDB).
type Source interface {
	// Inspect checks the source and reads what a session starts from. It
	// fails when the source cannot be read; failed checks are reported in
	// the Inspection.
	Inspect(ctx context.Context) (*Inspection, error)
	// History reads what the source can still stream.
	History(ctx context.Context) (History, error)
	// AwaitPrepared waits for the prepared XA transactions xids to end.
	AwaitPrepared(ctx context.Context, xids []string) error
	// Chunks returns the reader of the initial copies and its release.
	Chunks() (ChunkSource, func())
	// Order compares the source's positions.
	Order() cdcsync.Order
	// Stream sends whole transactions from spec.Start to out (which it
	// does not close) until ctx ends or an error occurs.
	Stream(ctx context.Context, spec StreamSpec, out chan<- *cdcsync.Txn) error
}

// Inspection is what a Source found when a session began.
type Inspection struct {
	Server  string                 // host:port, for messages
	Schemas []*cdcsync.TableSchema // the selected tables
	Horizon cdcsync.Position       // the source's position before the tables were listed
	// Failures are the checks that failed, with the fix; Global says one
	// is about the whole source (else each is about a table of Failed).
	Failures []string
	Global   bool
	Failed   map[cdcsync.TableID][]string
	// PreparedXA are the XA transactions prepared at the horizon (a copy
	// starting there waits for them); PreparedXAErr says they could not be
	// listed.
	PreparedXA    []string
	PreparedXAErr error
	// KeysLogged says the source logs the row changes of foreign-key
	// actions; else ForeignKeys are the selected tables' keys as of now,
	// whose actions the pipeline applies (cascade.go).
	KeysLogged  bool
	ForeignKeys []cdcsync.ForeignKey
}

// History says what a source can still stream.
type History interface {
	// Missing says why the source cannot stream from pos ("" when it can).
	Missing(pos cdcsync.Position) (string, error)
}

// StreamSpec is where a stream starts and what it knows of each table.
type StreamSpec struct {
	Start   cdcsync.Position
	Horizon cdcsync.Position // see Inspection.Horizon
	Schemas map[cdcsync.TableID]*cdcsync.TableSchema
	// Committed and SchemaPos hold each table's committed position and the
	// position its schema is as of: what they cover is passed over.
	Committed map[cdcsync.TableID]cdcsync.Position
	SchemaPos map[cdcsync.TableID]cdcsync.Position
	Shadows   []cdcsync.ShadowAt
	Stopped   map[cdcsync.TableID]bool
	// SettledXA are XA transactions prepared before Start that the copies
	// waited for.
	SettledXA []string
	// Keys are each table's foreign keys as of a position, for the stream
	// to follow; nil when the source logs their actions.
	Keys map[cdcsync.TableID]cdcsync.TableKeys
	// FragmentBytes is the size past which a transaction is sent in
	// fragments (cdcsync.Txn.More); 0 sends every transaction whole.
	FragmentBytes int
}

// Lake is where a session's tables are committed (lake.SessionLake).
type Lake interface {
	// Check says whether the catalog and the warehouse answer.
	Check(ctx context.Context) error
	LoadCheckpoint(ctx context.Context) (c cdcsync.Checkpoint, ok bool, err error)
	SaveCheckpoint(ctx context.Context, c cdcsync.Checkpoint) error
	TableExists(ctx context.Context, id cdcsync.TableID) (bool, error)
	// Table opens a table's lake table, creating it when missing.
	Table(ctx context.Context, s *cdcsync.TableSchema) (LakeTable, error)
	// Departed returns the tables of the pipeline that present lacks
	// (dropped or renamed in the source while cdcsync was away).
	Departed(ctx context.Context, present map[cdcsync.TableID]bool) ([]LakeTable, error)
	// Recopy prepares t to be copied again under schema s; the table
	// keeps showing its last contents until the copy completes.
	Recopy(ctx context.Context, t LakeTable, s *cdcsync.TableSchema) (LakeTable, error)
	// Sink returns the sink that commits to tables.
	Sink(tables map[cdcsync.TableID]LakeTable) Sink
}

// LakeTable is a table in the lake as a session sees it.
type LakeTable interface {
	Schema() *cdcsync.TableSchema
	Committed() (cdcsync.Committed, error)
	// Stopped says why cdcsync stopped mirroring the table, if it did;
	// StoppedMessage says that to a person, with how to resume.
	Stopped() (cdcsync.StopInfo, bool)
	StoppedMessage(info cdcsync.StopInfo) string
	// NeedsRecopy says a schema change asked for a new copy.
	NeedsRecopy() bool
	// StartCopy empties the table and commits the start of a copy at pos.
	StartCopy(ctx context.Context, epoch int64, pos cdcsync.Position) error
	SchemaPos() cdcsync.Position
	Shadows() ([]cdcsync.ShadowAt, error)
	// ForeignKeys are the keys recorded with the table; ok is false when
	// none are.
	ForeignKeys() (keys cdcsync.TableKeys, ok bool, err error)
	SetForeignKeys(ctx context.Context, epoch int64, keys cdcsync.TableKeys) error
}

// SessionOptions configure a session.
type SessionOptions struct {
	// Pipeline are the pipeline's options; the session sets Copy.Source,
	// ForeignKeys and Quit.
	Pipeline Options
	// RecopyLost copies a table again from the current position when the
	// source lost its position (source.on_position_lost: recopy); else
	// the session fails with ErrPositionLost.
	RecopyLost bool
	// Running is called with the pipeline once it runs, and with nil when
	// the session ends.
	Running func(*Pipeline)
	// Streaming is called with true when the stream starts, false when it
	// ends.
	Streaming func(bool)
	// Watch run next to the pipeline until the session ends (status, lag).
	Watch []func(ctx context.Context, p *Pipeline)
	Log   *slog.Logger
	// Metrics may be nil.
	Metrics *metrics.Metrics
}

// RunSession runs one session.
func RunSession(ctx context.Context, src Source, lk Lake, opts SessionOptions) error {
	s := &session{src: src, lk: lk, opts: opts, log: opts.Log, order: src.Order()}
	return s.run(ctx)
}

type session struct {
	src  Source
	lk   Lake
	opts SessionOptions
	log  *slog.Logger
	in   *Inspection
	// order compares the source's positions.
	order cdcsync.Order

	ckpt      cdcsync.Checkpoint
	haveCkpt  bool
	tables    map[cdcsync.TableID]LakeTable
	committed map[cdcsync.TableID]cdcsync.Committed
	stopped   map[cdcsync.TableID]bool
	recopy    map[cdcsync.TableID]bool
	lost      map[cdcsync.TableID]string
	clean     map[cdcsync.TableID]bool // copied afresh from the horizon in this session
	history   History
	next      int64 // the first epoch of the session
}

// preflightFailed is the end of a session whose checks failed.
func (s *session) preflightFailed() error {
	msgs := make([]string, len(s.in.Failures))
	for i, m := range s.in.Failures {
		msgs[i] = "  - " + m
	}
	return fmt.Errorf("preflight checks failed; `cdcsync check` lists them all:\n%s", strings.Join(msgs, "\n"))
}

func (s *session) run(ctx context.Context) error {
	in, err := s.src.Inspect(ctx)
	if err != nil {
		return err
	}
	s.in = in
	// A failed check about one table (no primary key, a type cdcsync cannot
	// map) stops only that table once the pipeline runs; before its first
	// checkpoint, every failure stops cdcsync, so that setup problems show.
	if in.Global {
		return s.preflightFailed()
	}
	if err := s.lk.Check(ctx); err != nil {
		return err
	}
	if s.ckpt, s.haveCkpt, err = s.lk.LoadCheckpoint(ctx); err != nil {
		return err
	}
	if len(in.Failed) > 0 && !s.haveCkpt {
		return s.preflightFailed()
	}
	if err := s.openTables(ctx); err != nil {
		return err
	}
	if err := s.checkPositions(ctx); err != nil {
		return err
	}
	start, err := s.startCopies(ctx)
	if err != nil {
		return err
	}
	return s.stream(ctx, start)
}

// openTables opens the lake table of every selected table and of every
// table that departed while cdcsync was away, and sorts them into stopped
// ones, ones to copy again and ones that resume.
func (s *session) openTables(ctx context.Context) error {
	s.tables = map[cdcsync.TableID]LakeTable{}
	s.committed = map[cdcsync.TableID]cdcsync.Committed{}
	s.stopped = map[cdcsync.TableID]bool{}
	s.recopy = map[cdcsync.TableID]bool{}
	nstopped := 0
	if s.opts.Metrics != nil {
		// A daemon that held the pipeline before may have stale states.
		s.opts.Metrics.TableStopped.Reset()
		s.opts.Metrics.TableState.Reset()
	}
	var maxEpoch int64
	for _, ts := range s.in.Schemas {
		if msgs := s.in.Failed[ts.ID]; len(msgs) > 0 {
			exists, err := s.lk.TableExists(ctx, ts.ID)
			if err != nil {
				return err
			}
			if !exists {
				s.log.Error("cdcsync does not mirror this table; the other tables go on: "+strings.Join(msgs, "; "), "table", ts.ID.String())
				s.stopped[ts.ID] = true
				nstopped++
				s.stoppedMetric(ts.ID)
				continue
			}
		}
		t, err := s.lk.Table(ctx, ts)
		if err != nil {
			return err
		}
		if info, ok := t.Stopped(); ok {
			// Resuming it from the checkpoint would lose the changes between
			// its last commit and the checkpoint: it stays stopped.
			s.stopped[ts.ID] = true
			if info.Dropped {
				s.log.Warn(t.StoppedMessage(info), "table", ts.ID.String(), "position", info.Position.String())
			} else {
				nstopped++
				s.stoppedMetric(ts.ID)
				s.log.Error(t.StoppedMessage(info), "table", ts.ID.String(), "position", info.Position.String())
			}
			continue
		}
		if msgs := s.in.Failed[ts.ID]; len(msgs) > 0 {
			if t.NeedsRecopy() {
				return s.preflightFailed()
			}
			// Its lake table mirrors the schema recorded with it; the
			// stream stops the table when it reaches the DDL statement
			// that made the check fail.
			s.log.Warn("the table fails a preflight check now, but its Iceberg table mirrors an earlier schema: "+
				"it is mirrored up to the DDL statement that changed it: "+strings.Join(msgs, "; "), "table", ts.ID.String())
		}
		if t.NeedsRecopy() {
			if t, err = s.lk.Recopy(ctx, t, ts); err != nil {
				return err
			}
			s.recopy[ts.ID] = true
			s.log.Warn("copying the table again after a schema change Iceberg cannot express (ddl.incompatible: recopy)", "table", ts.ID.String())
		}
		c, err := t.Committed()
		if err != nil {
			return err
		}
		s.tables[ts.ID], s.committed[ts.ID] = t, c
		maxEpoch = max(maxEpoch, c.Epoch)
	}
	if s.haveCkpt {
		// Tables dropped or renamed in the source while cdcsync was away
		// are followed up to that statement.
		departed, err := s.lk.Departed(ctx, s.present())
		if err != nil {
			return err
		}
		for _, t := range departed {
			c, err := t.Committed()
			if err != nil {
				return err
			}
			id := t.Schema().ID
			s.tables[id], s.committed[id] = t, c
			maxEpoch = max(maxEpoch, c.Epoch)
			s.log.Info("the MySQL table is gone; cdcsync follows it up to the DROP or RENAME in the binlog", "table", id.String())
		}
	}
	s.next = max(maxEpoch, s.ckpt.Epoch) + 1
	if s.opts.Metrics != nil {
		s.opts.Metrics.TablesStopped.Set(float64(nstopped))
	}
	if s.haveCkpt {
		// A table that has not changed since its last commit holds what
		// the checkpoint holds.
		for id, c := range s.committed {
			c.Pos = s.ckpt.Effective(id, c, s.order)
			s.committed[id] = c
		}
	}
	return nil
}

// present are the tables the source has now.
func (s *session) present() map[cdcsync.TableID]bool {
	out := map[cdcsync.TableID]bool{}
	for _, ts := range s.in.Schemas {
		out[ts.ID] = true
	}
	return out
}

// checkPositions finds the tables whose committed position the source can
// no longer stream from, and fails or copies them again
// (SessionOptions.RecopyLost).
func (s *session) checkPositions(ctx context.Context) error {
	s.lost = map[cdcsync.TableID]string{}
	if !s.haveCkpt {
		return nil
	}
	var err error
	if s.history, err = s.src.History(ctx); err != nil {
		return err
	}
	if s.lost, err = LostPositions(s.history, s.committed, s.recopy); err != nil {
		return err
	}
	if len(s.lost) > 0 && !s.opts.RecopyLost {
		return s.positionLost()
	}
	present := s.present()
	for id, msg := range s.lost {
		if !present[id] {
			// Dropped or renamed in the source while cdcsync was away, and
			// the binlog up to that statement is gone: nothing to copy.
			s.log.Warn("the MySQL table is gone and the server no longer has its binlog up to the DROP or RENAME; its Iceberg table keeps its last contents",
				"table", id.String(), "position", s.committed[id].Pos.String(), "problem", msg)
			delete(s.tables, id)
			delete(s.committed, id)
			continue
		}
		s.log.Warn("the server no longer has this table's binlog position; copying it again from the current position (source.on_position_lost: recopy), "+
			"its Iceberg table shows its last contents until the new copy is complete",
			"table", id.String(), "position", s.committed[id].Pos.String(), "problem", msg)
	}
	return nil
}

// LostPositions returns the tables whose committed position h cannot
// serve, with why: the binlog after it purged, or a history that does not
// contain it (after a failover, the new server must be a replica that has
// everything cdcsync read). Tables in skip (copied afresh anyway) are not
// asked about.
func LostPositions(h History, committed map[cdcsync.TableID]cdcsync.Committed, skip map[cdcsync.TableID]bool) (map[cdcsync.TableID]string, error) {
	lost := map[cdcsync.TableID]string{}
	for id, c := range committed {
		if !c.Found || skip[id] {
			continue
		}
		msg, err := h.Missing(c.Pos)
		if err != nil {
			return nil, fmt.Errorf("check the committed position of %s on the server: %w", id, err)
		}
		if msg != "" {
			lost[id] = msg
		}
	}
	return lost, nil
}

// positionLost is the end of a session that found tables whose positions
// the source lost, without RecopyLost.
func (s *session) positionLost() error {
	var lines, names []string
	for id, msg := range s.lost {
		lines = append(lines, fmt.Sprintf("%s at %s: %s", id, s.committed[id].Pos, msg))
		names = append(names, id.String())
	}
	sort.Strings(lines)
	sort.Strings(names)
	return fmt.Errorf("%w: %s cannot stream what these tables need:\n  - %s\n"+
		"The changes since were purged, or this server does not have them. Copy the tables again from the server's current position: "+
		"stop cdcsync, run `cdcsync resync --offline --config FILE %s`, then start it; or set source.on_position_lost: recopy so that run does it",
		cdcsync.ErrPositionLost, s.in.Server, strings.Join(lines, "\n  - "), strings.Join(names, " "))
}

// startCopies starts a copy of every table never copied, marked to be
// copied again or whose position is lost (one that a previous session
// began resumes it: its commits record its progress), writes the first
// checkpoint of a new pipeline, and returns where the stream starts. Until
// the pipeline's first checkpoint exists, every table starts afresh: a
// crash before it leaves no position all tables share.
func (s *session) startCopies(ctx context.Context) (cdcsync.Position, error) {
	horizon := s.in.Horizon
	var fresh []cdcsync.TableID
	for id, c := range s.committed {
		if !c.Found || !s.haveCkpt || s.recopy[id] || s.lost[id] != "" {
			fresh = append(fresh, id)
		}
	}
	s.clean = map[cdcsync.TableID]bool{}
	if len(fresh) > 0 {
		if s.in.PreparedXAErr != nil {
			s.log.Warn("cdcsync cannot list the prepared XA transactions; a table copy could miss the rows of one prepared before the copy started and committed after",
				"error", s.in.PreparedXAErr)
		} else if len(s.in.PreparedXA) > 0 {
			if err := s.src.AwaitPrepared(ctx, s.in.PreparedXA); err != nil {
				return cdcsync.Position{}, err
			}
		}
	}
	// A table copied afresh gets the schema the source has now.
	now := map[cdcsync.TableID]*cdcsync.TableSchema{}
	for _, ts := range s.in.Schemas {
		now[ts.ID] = ts
	}
	for _, id := range fresh {
		if ts := now[id]; ts != nil && !s.recopy[id] && !s.tables[id].Schema().Same(ts) {
			t, err := s.lk.Recopy(ctx, s.tables[id], ts)
			if err != nil {
				return cdcsync.Position{}, err
			}
			s.tables[id] = t
		}
		// The copy starts at the position read before the tables were
		// listed: the stream applies the table's changes after it, the
		// chunks show everything before.
		if err := s.tables[id].StartCopy(ctx, s.next, horizon); err != nil {
			return cdcsync.Position{}, err
		}
		s.committed[id] = cdcsync.Committed{Epoch: s.next, Pos: horizon, Found: true, Copy: &cdcsync.CopyState{}}
		s.clean[id] = true
	}
	start, err := s.start()
	if err != nil {
		return start, err
	}
	if !s.haveCkpt {
		if err := s.lk.SaveCheckpoint(ctx, cdcsync.Checkpoint{Epoch: s.next, Pos: horizon, Time: time.Now()}); err != nil {
			return start, err
		}
		start = horizon
	}
	if len(fresh) > 0 || !s.haveCkpt {
		s.next++
	}
	if start.IsZero() {
		return start, errors.New("no binlog position to start from: the pipeline has no checkpoint and selects no table; check source.include")
	}
	if s.haveCkpt {
		if err := s.startOnServer(&start); err != nil {
			return start, err
		}
	}
	for id, c := range s.committed {
		if c.Copy != nil && !s.clean[id] {
			s.log.Info("resuming the initial copy after its last committed chunk", "table", id.String(), "rows", c.Copy.Rows)
		} else if c.Copy != nil {
			s.log.Info("initial copy starting", "table", id.String(), "position", horizon.String())
		}
	}
	return start, nil
}

// start is where the stream starts. The tables' own committed positions
// are the truth, the checkpoint only an optimisation: a table behind it
// (its catalog restored from a backup, a checkpoint from elsewhere) is
// replayed from its own position, never skipped, so the stream starts at
// or before the oldest of them.
func (s *session) start() (cdcsync.Position, error) {
	start := s.ckpt.Pos
	if !s.haveCkpt {
		return start, nil
	}
	if len(s.committed) > 0 && len(s.clean) == len(s.committed) {
		// Every table starts a copy at the horizon (resync of them all,
		// after a purged position): the checkpoint holds nothing they need.
		return s.in.Horizon, nil
	}
	var behind []string
	for id, c := range s.committed {
		if !c.Found || s.clean[id] {
			continue
		}
		if ok, err := s.order.Includes(c.Pos, start); err != nil {
			return start, fmt.Errorf("compare the committed position of %s with the pipeline checkpoint: %w", id, err)
		} else if ok {
			continue
		}
		var err error
		if start, err = s.order.Earliest(start, c.Pos); err != nil {
			return start, fmt.Errorf("%s is behind the pipeline checkpoint (%s) at %s and the stream cannot start before both: %w; "+
				"resync the table (cdcsync resync %s)", id, s.ckpt.Pos, c.Pos, err, id)
		}
		behind = append(behind, id.String()+" at "+c.Pos.String())
	}
	if len(behind) > 0 {
		sort.Strings(behind)
		s.log.Warn("tables are behind the pipeline checkpoint (a catalog restored from a backup?): the stream starts before them and replays what they lack",
			"checkpoint", s.ckpt.Pos.String(), "start", start.String(), "tables", strings.Join(behind, ", "))
	}
	return start, nil
}

// startOnServer checks the stream's start on the server. The checkpoint
// is only an optimisation: when the server no longer has it but has every
// streaming table's position, the stream starts at the oldest of those.
func (s *session) startOnServer(start *cdcsync.Position) error {
	msg, err := s.history.Missing(*start)
	if err != nil || msg == "" {
		return err
	}
	var from cdcsync.Position
	for id, c := range s.committed {
		if !c.Found || s.clean[id] {
			continue
		}
		if from, err = s.order.Earliest(from, c.Pos); err != nil {
			return err
		}
	}
	if !from.IsZero() {
		if m, err := s.history.Missing(from); err == nil && m == "" {
			*start = from
			return nil
		}
	}
	return fmt.Errorf("%w: the server cannot stream from the pipeline checkpoint at %s: %s; "+
		"copy the tables again: stop cdcsync, run `cdcsync resync --offline --config FILE --all`, then start it", cdcsync.ErrPositionLost, *start, msg)
}

// followKeys returns the foreign keys of the tables as the stream starts
// following them, and those with an action, for the pipeline. A table's
// keys are those recorded with its lake table, as of its position; a table
// copied afresh, or whose keys are not recorded (an older cdcsync, a
// change the stream could not follow), gets the keys the source has now,
// recorded as of the horizon.
func (s *session) followKeys(ctx context.Context) (map[cdcsync.TableID]cdcsync.TableKeys, []cdcsync.ForeignKey, error) {
	if s.in.KeysLogged {
		return nil, nil, nil
	}
	keys := map[cdcsync.TableID]cdcsync.TableKeys{}
	var actions []cdcsync.ForeignKey
	for id, t := range s.tables {
		k, ok, err := t.ForeignKeys()
		if err != nil {
			return nil, nil, err
		}
		if !ok || s.clean[id] {
			k = cdcsync.TableKeys{Pos: s.in.Horizon}
			for _, fk := range s.in.ForeignKeys {
				if fk.Child == id {
					k.Keys = append(k.Keys, fk)
				}
			}
			if err := t.SetForeignKeys(ctx, s.next, k); err != nil {
				return nil, nil, err
			}
		}
		keys[id] = k
		for _, fk := range k.Keys {
			if fk.Acts() {
				actions = append(actions, fk)
			}
		}
	}
	return keys, actions, nil
}

// stream runs the stream and the pipeline from start until ctx ends or
// either fails.
func (s *session) stream(ctx context.Context, start cdcsync.Position) error {
	keys, actions, err := s.followKeys(ctx)
	if err != nil {
		return err
	}
	spec := StreamSpec{Start: start, Horizon: s.in.Horizon, Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{},
		Committed: map[cdcsync.TableID]cdcsync.Position{}, SchemaPos: map[cdcsync.TableID]cdcsync.Position{},
		Stopped: s.stopped, SettledXA: s.in.PreparedXA, Keys: keys}
	var ptables []Table
	for id, t := range s.tables {
		c := s.committed[id]
		ptables = append(ptables, Table{Schema: t.Schema(), Committed: c.Pos, Copy: c.Copy, CopyClean: s.clean[id]})
		spec.Schemas[id] = t.Schema()
		spec.Committed[id] = c.Pos
		spec.SchemaPos[id] = t.SchemaPos()
		sh, err := t.Shadows()
		if err != nil {
			return err
		}
		spec.Shadows = append(spec.Shadows, sh...)
	}
	chunks, release := s.src.Chunks()
	defer release()
	popts := s.opts.Pipeline
	popts.Quit = ctx.Done()
	popts.Order = s.order
	popts.ForeignKeys = actions
	if s.haveCkpt {
		popts.CheckpointEpoch = s.ckpt.Epoch
	}
	popts.Copy.Source = chunks
	// The transactions read but not yet taken by the pipeline wait within
	// a quarter of an epoch's bytes (see docs/architecture.md, "Memory").
	queue := newTxnQueue(int64(max(popts.MaxBytes/4, 1<<20)), func(d int64) {
		if s.opts.Metrics != nil {
			s.opts.Metrics.QueuedBytes.Add(float64(d))
		}
	})
	popts.Received = queue.received
	// A transaction arrives in fragments of an eighth of an epoch, so that
	// the pipeline can write a huge one out (Spiller) instead of holding
	// it whole.
	sink := s.lk.Sink(s.tables)
	if _, ok := sink.(Spiller); ok {
		spec.FragmentBytes = max(popts.MaxBytes/8, 64<<10)
	}
	pipe := New(sink, ptables, s.next, start, popts, s.log, s.opts.Metrics)
	if s.opts.Running != nil {
		s.opts.Running(pipe)
		defer s.opts.Running(nil)
	}

	s.log.Info("streaming the binlog", "from", start.String(), "epoch", s.next)
	read := make(chan *cdcsync.Txn)
	g, gctx := errgroup.WithContext(ctx)
	streamCtx, stopStream := context.WithCancel(gctx)
	defer stopStream()
	g.Go(func() error {
		defer close(read)
		if s.opts.Streaming != nil {
			s.opts.Streaming(true)
			defer s.opts.Streaming(false)
		}
		return s.src.Stream(streamCtx, spec, read)
	})
	// What was read reaches the pipeline even after ctx ends, until the
	// pipeline itself stops.
	feedCtx, stopFeed := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFeed()
	g.Go(func() error {
		queue.feed(feedCtx, read)
		return nil
	})
	g.Go(func() error {
		// The pipeline ends by itself when the queue closes; it must not
		// see gctx's cancellation first, or it would stop before committing
		// the transactions already read.
		err := pipe.Run(context.WithoutCancel(ctx), queue.out)
		stopStream()
		stopFeed()
		return err
	})
	for _, w := range s.opts.Watch {
		g.Go(func() error { w(gctx, pipe); return nil })
	}
	err = g.Wait()
	if ctx.Err() != nil && err == nil {
		return ctx.Err()
	}
	return err
}

func (s *session) stoppedMetric(id cdcsync.TableID) {
	if s.opts.Metrics != nil {
		s.opts.Metrics.TableStopped.WithLabelValues(id.String()).Set(1)
		s.opts.Metrics.SetTableState(id.String(), metrics.StateStopped)
	}
}
