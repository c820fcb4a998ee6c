package merge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/metrics"
)

// Sink is where epochs go: the lake, seen from merge.
type Sink interface {
	// Commit commits one table's share of an epoch atomically. It must be
	// idempotent for the same (table, epoch): a retry after an uncertain
	// failure must not apply the epoch twice.
	Commit(ctx context.Context, table cdcsync.TableID, d cdcsync.Delta) error
	// SaveCheckpoint records that every table is committed up to pos.
	SaveCheckpoint(ctx context.Context, epoch int64, pos cdcsync.Position) error
}

// Maintainer is implemented by a Sink that maintains its tables
// (compaction, snapshot expiry, orphan cleanup). The pipeline calls Maintain
// with the tables of an epoch once that epoch is checkpointed, in a goroutine
// of its own, and goes on collecting and committing epochs meanwhile: the
// sink must let Commit run next to Maintain on the same table. One Maintain
// runs at a time (an epoch that ends while it runs gets none), and schema
// changes, resyncs and shutdown wait for it. Tables whose initial copy runs
// are left out. ctx is cancelled when the pipeline stops. An error is logged
// and does not stop the pipeline.
type Maintainer interface {
	Maintain(ctx context.Context, epoch int64, tables []cdcsync.TableID) error
}

// IdleMaintainer is implemented by a Maintainer that also maintains tables
// no epoch changed for Options.IdleAfter, whose maintenance would wait for
// epochs that may not come (the load moved on, or stopped after a backlog,
// during which maintenance waits). It runs as Maintain does, one at a time.
type IdleMaintainer interface {
	MaintainIdle(ctx context.Context, tables []cdcsync.TableID) error
}

// Interrupter is implemented by a Sink whose commits can take long for
// work a shutdown need not wait for (rebuilding a key index). The pipeline
// calls Interrupt once it stops; the commits under way and to come give up
// such work with an error wrapping cdcsync.ErrInterrupted, and the epoch is
// left to be read again after a restart, as after a crash. A commit that
// needs no such work goes through.
type Interrupter interface {
	Interrupt()
}

// DeleteColumner is implemented by a Sink whose equality deletes need only
// some columns of the image they delete (the key and the partition source
// columns): the epoch buffer then keeps only those of each before image.
// DeleteColumns returns their indexes into the table's current schema, or
// nil for all.
type DeleteColumner interface {
	DeleteColumns(table cdcsync.TableID) []int
}

// deleteColumns asks the sink which columns a table's deletes need (nil:
// all). It is called when an epoch first touches a table, so a schema
// change, which ends the epoch before it, is seen.
func (p *Pipeline) deleteColumns(id cdcsync.TableID) []int {
	if dc, ok := p.sink.(DeleteColumner); ok {
		return dc.DeleteColumns(id)
	}
	return nil
}

// Spiller is implemented by a Sink that can write part of an open epoch
// before the epoch commits, so that a transaction larger than the epoch's
// memory budget (Options.MaxBytes) commits whole with bounded memory: the
// pipeline spills the open epoch when it holds more than that inside a
// fragmented transaction (cdcsync.Txn.More).
type Spiller interface {
	// Spill writes final rows and delete rows of table's share of the
	// open epoch (as in a Delta) under the name spill. A key may come
	// again in a later Spill or in the commit's Delta, which supersede it.
	// The commit whose Delta.Spill is spill adds all of it.
	Spill(ctx context.Context, table cdcsync.TableID, spill int64, deletes, rows []cdcsync.Row) error
	// Abandon removes what Spill wrote for spill: its epoch will not be
	// committed (the transaction did not end before the pipeline stopped,
	// or the table stopped in it).
	Abandon(ctx context.Context, table cdcsync.TableID, spill int64)
	// SpillHolds reports whether spill holds final rows of table (not
	// only deleted keys), and which of keys (primary keys encoded as
	// TableSchema.AppendKey does) it deleted: the foreign-key cascades
	// read child rows through it (cascade.go).
	SpillHolds(table cdcsync.TableID, spill int64, keys [][]byte) (rows bool, deleted []bool, err error)
}

// DDLSink is implemented by a Sink that applies schema changes. The
// pipeline calls ApplyDDL for each change a transaction carries (Txn.DDL),
// after committing everything before the transaction and before the
// transaction's own changes: a DDL statement is an epoch barrier. pos is the
// transaction's position, epoch a number for a commit the change makes. It
// must be idempotent like Commit. An error wrapping cdcsync.ErrRestart means the
// change was applied and the session must restart (to copy a table again).
type DDLSink interface {
	ApplyDDL(ctx context.Context, epoch int64, pos cdcsync.Position, change *cdcsync.SchemaChange) error
}

// ErrCommit wraps every failure to commit an epoch.
var ErrCommit = errors.New("epoch commit failed")

// Options tune sealing and committing.
type Options struct {
	// Order compares the source's positions (required).
	Order    cdcsync.Order
	Interval time.Duration // seal this long after the epoch's first transaction
	MaxRows  int           // seal at this many row changes
	MaxBytes int           // seal at this many bytes of changes
	// Received, when set, is called with every transaction Run takes from
	// its channel (the session's queue releases its bytes).
	Received          func(*cdcsync.Txn)
	CommitConcurrency int           // tables committed in parallel
	Retries           int           // attempts per table commit before giving up (default 5)
	RetryBackoff      time.Duration // first backoff (default 1s), doubled each time up to 30s
	// Transient, when set, recognises errors of an outage (storage or
	// catalog unreachable, a full disk): a commit that fails with one is
	// retried for as long as the outage lasts instead of Retries times,
	// and Stalled reports it meanwhile.
	Transient func(error) bool
	// Quit ends the waits between retries: the daemon is shutting down.
	Quit            <-chan struct{}
	ShutdownTimeout time.Duration // time allowed to commit the open epoch on shutdown (default 2m)
	// IdleAfter is how long a table goes without an epoch before an
	// IdleMaintainer maintains it (default 30s).
	IdleAfter time.Duration
	// SlowCommit is how long a full open epoch waits for the commit of the
	// one before before it is written out (spilled) so that reading goes
	// on (default 3s; see Run).
	SlowCommit time.Duration
	// Fault, when set, is called at named points of the protocol so tests can
	// kill the process there. Never set in production.
	Fault func(point string)
	// Copy configures the initial copy of the tables that have a CopyState.
	Copy CopyOptions
	// CheckpointEpoch is the epoch of the checkpoint the binlog is read
	// from (0: none). Tables that committed later epochs before a restart
	// pass over what they hold; the others' commits of those transactions
	// then span the epochs after it (cdcsync.Delta.From), which cut
	// refuses.
	CheckpointEpoch int64
	// ForeignKeys are the foreign keys between the tables whose actions
	// the binlog does not record: the pipeline applies them (cascade.go),
	// reading child rows through the sink, which must be a RowFinder.
	ForeignKeys []cdcsync.ForeignKey
}

// Pipeline turns a stream of transactions into epoch commits.
type Pipeline struct {
	sink      Sink
	schemas   map[cdcsync.TableID]*cdcsync.TableSchema
	stopped   map[cdcsync.TableID]bool             // tables a schema change stopped: their later changes are dropped
	skip      map[cdcsync.TableID]cdcsync.Position // tables still catching up to their own committed position
	nextEpoch int64                                // the number of the next epoch sealed
	// sealedEnd is where the last epoch sealed ends, sealedCkpt the
	// checkpoint of the last one sealed with saveCkpt, carryBefore the
	// position before the oldest change carried over into the open epoch
	// (zero: none is); carrying is set while tables are carried over.
	// Run's goroutine.
	sealedEnd, sealedCkpt, carryBefore cdcsync.Position
	carrying                           bool
	resumes                            map[cdcsync.TableID]cdcsync.Position // each table's committed position at New (read only)
	opts                               Options
	log                                *slog.Logger
	m                                  *metrics.Metrics

	maintDone   chan struct{}      // closed when the running Maintain returns; nil when none runs
	maintCancel context.CancelFunc // cancels the running Maintain
	stopping    atomic.Bool        // Run is committing its last epoch: start no maintenance
	maintSkips  int                // epochs in a row that skipped maintenance while catching up (committing goroutine)
	maintOwed   []cdcsync.TableID  // tables whose due maintenance could not start yet (committing goroutine)
	// unmaintained holds the tables with epochs since their last idle
	// maintenance, and when their last epoch committed (committing
	// goroutine; Run's between commits).
	unmaintained map[cdcsync.TableID]time.Time

	// The initial copies (copy.go); owned by Run's goroutine.
	copier  *copier
	copies  map[cdcsync.TableID]*copyTable
	copyCtx context.Context
	pos     cdcsync.Position // position after the last transaction read
	readPos cdcsync.Position // how far the binlog is read: pos, or a later progress marker
	// inflight is the epoch being committed in the background (its buffer
	// is read only from then on); rows finds committed rows (cascade.go).
	inflight *Buffer
	rows     RowFinder
	// recopy are tables a cascade into a copying table left behind, with
	// that table: they are copied again after the transaction.
	recopy map[cdcsync.TableID]cdcsync.TableID
	// readResume is the Resume of what was read last (cdcsync.Txn.Resume):
	// where a restart must read from while XA transactions are prepared.
	readResume cdcsync.Position
	copyEnded  bool                    // a copy's last chunk was merged into the open epoch
	repairs    map[*repairJob]struct{} // repairs in flight (repair.go)
	seq        uint64                  // transactions read
	// midTxn is set while a fragmented transaction is open: its fragments
	// so far are in the open epoch, which must not be sealed before its
	// last one. lastSpill names the last epoch that spilled.
	midTxn    bool
	lastSpill int64
	done      chan struct{} // closed when Run returns
	seen      atomic.Int64  // when (Unix ns) the stream last delivered anything: a transaction, a heartbeat

	mu        sync.Mutex
	committed cdcsync.Position // last checkpointed position, for status
	pending   time.Time        // MySQL commit time of the oldest transaction read but not committed
	openFirst time.Time        // MySQL commit time of the open epoch's first transaction (zero: none open)
	progress  map[cdcsync.TableID]*CopyProgress
	stalls    map[string]Stall // commits being retried through an outage, by what they commit
	// pendingJobs holds the MySQL commit time of the first transaction of
	// each epoch whose tables still commit.
	pendingJobs map[*commitJob]time.Time

	// lanes counts, per table, the epochs it is committing (at most one);
	// laneFree is signalled when a table's commit ends.
	laneMu   sync.Mutex
	lanes    map[cdcsync.TableID]int
	laneJobs map[*commitJob]int // tables each job still commits
	laneFree chan struct{}
}

// Stall is a commit that an outage holds up.
type Stall struct {
	What  string    // what is being committed: a table, the checkpoint, a schema change
	Since time.Time // when its first attempt failed
	Err   error     // the last attempt's error
}

// Table is a selected table and, when it already holds data, the position
// its last commit covers.
type Table struct {
	Schema    *cdcsync.TableSchema
	Committed cdcsync.Position
	// Copy is the progress of the table's initial copy when one runs (nil:
	// the table only streams).
	Copy *cdcsync.CopyState
	// CopyClean says the copy began in this session, before the stream
	// wrote any of its keys.
	CopyClean bool
}

// New returns a pipeline that starts numbering epochs at firstEpoch. start is
// the checkpoint the binlog is read from.
func New(sink Sink, tables []Table, firstEpoch int64, start cdcsync.Position, opts Options, log *slog.Logger, m *metrics.Metrics) *Pipeline {
	if opts.Order == nil {
		panic("merge.New: Options.Order is nil; the source's position order is required")
	}
	if opts.Retries <= 0 {
		opts.Retries = 5
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = time.Second
	}
	if opts.IdleAfter <= 0 {
		opts.IdleAfter = 30 * time.Second
	}
	if opts.SlowCommit <= 0 {
		opts.SlowCommit = 3 * time.Second
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 2 * time.Minute
	}
	if opts.CommitConcurrency <= 0 {
		opts.CommitConcurrency = 1
	}
	p := &Pipeline{sink: sink, schemas: map[cdcsync.TableID]*cdcsync.TableSchema{}, skip: map[cdcsync.TableID]cdcsync.Position{},
		stopped: map[cdcsync.TableID]bool{}, resumes: map[cdcsync.TableID]cdcsync.Position{},
		nextEpoch: firstEpoch, sealedEnd: start, sealedCkpt: start, committed: start, opts: opts, log: log, m: m,
		copier: newCopier(opts.Copy), copies: map[cdcsync.TableID]*copyTable{}, pos: start, readPos: start,
		done: make(chan struct{}), progress: map[cdcsync.TableID]*CopyProgress{}, stalls: map[string]Stall{},
		repairs: map[*repairJob]struct{}{}, pendingJobs: map[*commitJob]time.Time{},
		lanes: map[cdcsync.TableID]int{}, laneJobs: map[*commitJob]int{}, laneFree: make(chan struct{}, 1)}
	p.rows, _ = sink.(RowFinder)
	for _, t := range tables {
		p.schemas[t.Schema.ID] = t.Schema
		if m != nil {
			m.EpochsCarried.WithLabelValues(t.Schema.ID.String()).Add(0) // so that increase() sees the first
		}
		if !t.Committed.IsZero() {
			p.skip[t.Schema.ID] = t.Committed
			p.resumes[t.Schema.ID] = t.Committed
		}
		if t.Copy != nil {
			p.addCopy(t.Schema.ID, *t.Copy, t.CopyClean)
		}
	}
	return p
}

// Committed returns the last checkpointed position.
func (p *Pipeline) Committed() cdcsync.Position {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.committed
}

// Lag is how long ago, in MySQL, the oldest transaction that cdcsync has
// read but not yet committed to Iceberg was committed; zero when none waits.
func (p *Pipeline) Lag() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending.IsZero() {
		return 0
	}
	return time.Since(p.pending)
}

// LastSeen is when the stream last delivered a transaction or a sign of
// progress (a heartbeat of the idle server, a rotation); zero before the
// first one.
func (p *Pipeline) LastSeen() time.Time {
	if n := p.seen.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Run consumes transactions until txns is closed or ctx is done, committing
// an epoch whenever one seals. On the way out it commits the open epoch, which
// holds only whole transactions, with a fresh deadline so a shutdown signal
// does not abandon it half-way. It returns the first error that stopped it.
//
// A sealed epoch commits in the background while the next one fills (at
// most one commits at a time, so two epochs are in memory at most); a DDL
// statement, a resync and the shutdown wait for it.
func (p *Pipeline) Run(ctx context.Context, txns <-chan *cdcsync.Txn) error {
	defer close(p.done)
	defer p.endRepairs(errors.New("the pipeline stopped before the repair was committed; run verify again"))
	defer p.stopMaintenance()
	// Commits outlive a shutdown signal (the open epoch is committed on the
	// way out), up to ShutdownTimeout.
	commitCtx, cancelCommits := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCommits()
	copyCtx, stopCopies := context.WithCancel(ctx)
	p.copyCtx = copyCtx
	defer p.copier.wg.Wait()
	defer stopCopies()
	p.startCopies(copyCtx)
	var (
		buf   *Buffer
		timer *time.Timer
		tick  <-chan time.Time
		// jobs are the epochs committing in the background, oldest first.
		// Their tables' commits may overlap (a table carried over commits
		// its next epoch while another still commits one before), their
		// bookkeeping runs in order, so their results arrive in order.
		jobs []*commitJob
	)
	// oldest is the result of the oldest background commit, if any.
	oldest := func() <-chan commitResult {
		if len(jobs) == 0 {
			return nil
		}
		return jobs[0].result
	}
	// committed does the bookkeeping that follows the oldest background
	// commit, which reported r.
	committed := func(r commitResult) error {
		jobs = jobs[1:]
		p.inflight = nil
		if len(jobs) > 0 {
			p.inflight = jobs[len(jobs)-1].buf
		}
		return p.afterCommit(r)
	}
	// wait waits for every background commit and its bookkeeping; it
	// returns the first error.
	wait := func() error {
		var first error
		for len(jobs) > 0 {
			if err := committed(<-jobs[0].result); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	defer func() { _ = wait() }()
	// arm starts the interval of the open epoch buf, whose first
	// transaction committed in MySQL at first.
	arm := func(first time.Time) {
		timer = time.NewTimer(p.opts.Interval)
		tick = timer.C
		p.mu.Lock()
		p.openFirst = first
		p.refreshPending()
		p.mu.Unlock()
	}
	// open returns the open epoch, starting one when none is open; first is
	// the MySQL commit time of what starts it.
	open := func(first time.Time) *Buffer {
		if buf == nil {
			buf = NewBuffer(func(id cdcsync.TableID) *cdcsync.TableSchema { return p.schemas[id] }, p.deleteColumns)
			arm(first)
		}
		return buf
	}
	// start commits job in the background.
	start := func(job *commitJob) {
		if len(jobs) > 0 {
			job.prev = jobs[len(jobs)-1]
		}
		job.done, job.result, job.since = make(chan struct{}), make(chan commitResult, 1), time.Now()
		p.claimLanes(job)
		jobs, p.inflight = append(jobs, job), job.buf
		go func() {
			r := p.commit(commitCtx, job)
			job.err = r.err
			close(job.done)
			job.result <- r
		}()
	}
	// atBudget says the open epoch holds MaxRows or MaxBytes: it seals, or
	// is written out while the epoch before it commits (pressed in due).
	atBudget := func() bool {
		if buf == nil || p.midTxn {
			return false // spilled instead (see spill), sealed after the transaction
		}
		return buf.Rows >= p.opts.MaxRows || buf.Bytes >= p.opts.MaxBytes
	}
	// full says the open epoch should seal: at its budget, and also when
	// it completes a copy, so the copy ends (and /readyz turns) without
	// waiting out the interval.
	full := func() bool {
		if buf == nil || p.midTxn {
			return false
		}
		if p.copyEnded {
			p.copyEnded = false
			return true
		}
		// An epoch that holds rows of an initial copy seals at a quarter
		// of MaxBytes: the copy fills epochs as fast as it reads, so one
		// epoch fills while the one before commits, and two full epochs
		// (with the collector's headroom) were most of the copy's peak
		// memory. Committing it in smaller epochs costs no more CPU per
		// row; a catch-up keeps its large epochs, whose per-epoch costs
		// (index lookups, commit, maintenance) it would pay more often.
		// A copy epoch that cannot seal yet (the one before still
		// commits) is not pressed for it: atBudget decides when it is
		// written out.
		if buf.Loaded > 0 && buf.Bytes >= p.opts.MaxBytes/copyEpochShare {
			return true
		}
		return atBudget()
	}
	// sealDue is set when the interval ran out inside a fragmented
	// transaction, or while the epoch before still commits (due): the
	// epoch is sealed once the transaction, or that commit, ends.
	sealDue := false
	// behind is set when an epoch sealed full (the stream was behind the
	// server) and cleared when one runs its interval. While it is set, the
	// stream catching up with the server (an idle progress marker) seals
	// the open epoch: the tail of a catch-up commits at once instead of
	// waiting out the interval (up to epoch.interval sooner).
	behind := false
	var finish func(cause error) error
	// seal hands the open epoch to a background commit, after the ones
	// before it have finished.
	seal := func() error {
		if timer != nil {
			timer.Stop()
			tick = nil
		}
		if buf == nil {
			return nil
		}
		b := buf
		buf = nil
		p.mu.Lock()
		p.openFirst = time.Time{}
		p.mu.Unlock()
		if err := wait(); err != nil {
			return err
		}
		p.endCarry()
		if job := p.prepare(b, true); job != nil {
			start(job)
		}
		p.mu.Lock()
		p.refreshPending()
		p.mu.Unlock()
		return nil
	}
	// carry seals the open epoch without the tables that still commit an
	// epoch before (a slow table: thousands of partitions, a large
	// rewrite), which carry their changes over into the next epoch,
	// so that one slow table does not hold the others back. It reports
	// whether it sealed. The checkpoint stays before what is carried
	// over; a carried table's commit records the epochs it spans, which
	// cut refuses (cdcsync.Delta.From).
	carry := func() bool {
		if buf == nil || len(jobs) >= maxEpochsInFlight || !p.carries() || !p.laneFreeFor(buf) {
			return false
		}
		timer.Stop()
		tick = nil
		b := buf
		buf = b.Split(p.laneBusy, p.nextEpoch)
		if buf.Empty() {
			buf = nil
			p.mu.Lock()
			p.openFirst = time.Time{}
			p.mu.Unlock()
			p.endCarry()
		} else {
			if !p.carrying {
				p.carrying = true
				p.log.Info("tables still committing an epoch are carried over into the next one; the others commit this one",
					"carried", joinIDs(buf.Tables()), "epoch", p.nextEpoch)
			}
			if p.m != nil {
				for _, id := range buf.Tables() {
					p.m.EpochsCarried.WithLabelValues(id.String()).Inc()
				}
			}
			arm(b.First)
		}
		if job := p.prepare(b, buf == nil); job != nil {
			start(job)
		}
		p.mu.Lock()
		p.refreshPending()
		p.mu.Unlock()
		return true
	}
	// due seals the open epoch at a transaction boundary that is no
	// barrier: the interval ran out, or the epoch is full. While the epoch
	// before it still commits, the open one goes on collecting instead of
	// waiting, up to epoch.max_bytes (two epochs in memory, as ever). Full,
	// it waits for that commit until it has run Options.SlowCommit, and is
	// then written out (spilled, its memory freed) rather than stop
	// reading: a slow commit (a finely partitioned table, a slow object
	// store) must not stop the binlog stream long enough for the server to
	// drop the connection. It seals as soon as the commit ends. Where the
	// open epoch cannot be written out (spillsOpen), it waits as a seal
	// always did.
	due := func() error {
		if len(jobs) == 0 || buf == nil {
			sealDue = false
			return seal()
		}
		if carry() {
			sealDue = false
			return nil
		}
		sealDue = true
		if !p.spillsOpen() {
			if full() {
				sealDue = false
				return seal()
			}
			return nil
		}
		// atBudget counts every byte the epoch took; once it spilled, what it
		// holds is what counts.
		pressed := (len(buf.spilled) == 0 && atBudget()) || buf.Held >= p.opts.MaxBytes
		if left := p.opts.SlowCommit - time.Since(jobs[0].since); left > 0 {
			if !pressed {
				return nil
			}
			t := time.NewTimer(left)
			select {
			case <-jobs[len(jobs)-1].done:
				t.Stop()
				if err := wait(); err != nil {
					return err
				}
				sealDue = false
				return seal()
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		} else if !pressed && buf.Held < p.opts.MaxBytes/2 {
			// A slow commit: writing out takes about as much memory
			// again, so the open epoch is written out at half.
			return nil
		}
		if err := p.spill(commitCtx, buf, "the epoch before it is still committing"); err != nil {
			// Part of the epoch may be written: none of it commits (its
			// transactions are read again after a restart).
			p.abandon(commitCtx, buf)
			buf, sealDue = nil, false
			return finish(err)
		}
		return nil
	}
	// barrier commits everything read so far before it returns.
	barrier := func() error {
		if err := seal(); err != nil {
			return err
		}
		return wait()
	}
	finish = func(cause error) error {
		if p.midTxn {
			// The end of the open transaction was not read: nothing of
			// it is committed; a restart reads it again.
			p.log.Info("the transaction being read is not committed; it is read again on restart", "fragments_spilled", buf != nil && len(buf.spilled) > 0)
			p.abandon(commitCtx, buf)
			buf, p.midTxn = nil, false
		}
		stopCopies()
		p.stopping.Store(true)
		if in, ok := p.sink.(Interrupter); ok {
			in.Interrupt()
		}
		stop := time.AfterFunc(p.opts.ShutdownTimeout, cancelCommits)
		defer stop.Stop()
		werr := wait()
		p.stopMaintenance() // shutting down: do not make the last commit wait for it
		if errors.Is(werr, cdcsync.ErrInterrupted) {
			// The epoch after it must not commit before it: nothing of
			// the open one commits either.
			p.log.Info("stopping: an epoch's commit was interrupted; its transactions are read again after a restart", "reason", werr)
			p.abandon(commitCtx, buf)
			buf = nil
			return cause
		}
		if werr != nil {
			return errors.Join(cause, werr)
		}
		if err := barrier(); errors.Is(err, cdcsync.ErrInterrupted) {
			p.log.Info("stopping: the last epoch's commit was interrupted; its transactions are read again after a restart", "reason", err)
		} else if err != nil {
			return errors.Join(cause, err)
		}
		return cause
	}
	// mergeCopies merges the copied chunks that are ready into the open
	// epoch, and seals it when full. An error ends Run.
	mergeCopies := func() error {
		if err := p.mergeReady(func() *Buffer { return open(time.Now()) }); err != nil {
			return finish(err)
		}
		if full() {
			return seal()
		}
		return nil
	}
	// mergeRepairs commits the repairs the stream has caught up with; an
	// error is a failed commit, which ends Run like any other.
	mergeRepairs := func() error {
		if len(p.repairs) == 0 {
			return nil
		}
		return p.mergeRepairs(ctx, barrier, func() *Buffer { return open(time.Now()) })
	}
	idle := time.NewTicker(max(p.opts.IdleAfter/4, 10*time.Millisecond))
	defer idle.Stop()
	for {
		// Inside a fragmented transaction only its fragments are taken:
		// copies, repairs and resyncs wait for its end.
		opens, results, errs, resyncs, repairs, repairRead := p.copier.opens, p.copier.results, p.copier.errs, p.copier.resyncs, p.copier.repairs, p.copier.repairRead
		if p.midTxn {
			opens, results, errs, resyncs, repairs, repairRead = nil, nil, nil, nil, nil, nil
		}
		select {
		case <-ctx.Done():
			return finish(nil)
		case <-idle.C:
			if len(jobs) == 0 && !p.midTxn {
				p.maintainIdle(commitCtx)
			}
		case <-tick:
			behind = false
			if p.midTxn {
				sealDue = true
				continue
			}
			if err := due(); err != nil {
				return err
			}
		case r := <-oldest():
			if err := committed(r); err != nil {
				return err
			}
			if sealDue && !p.midTxn {
				if err := due(); err != nil {
					return err
				}
			}
		case <-p.laneFree:
			// A table's commit ended: the tables it held back may commit.
			if sealDue && !p.midTxn {
				if err := due(); err != nil {
					return err
				}
			}
		case t, ok := <-txns:
			if !ok {
				return finish(nil)
			}
			p.seen.Store(time.Now().UnixNano())
			if p.opts.Received != nil {
				p.opts.Received(t)
			}
			if t.Progress {
				// Only chunks of the initial copy wait for positions.
				if later, err := p.opts.Order.Includes(t.Pos, p.readPos); err == nil && later {
					p.readPos, p.readResume = t.Pos, t.Resume
				}
				if len(p.copies) > 0 {
					if err := mergeCopies(); err != nil {
						return err
					}
				}
				if err := mergeRepairs(); err != nil {
					return err
				}
				if t.Idle && behind && buf != nil && !p.midTxn && len(p.copies) == 0 {
					behind = false
					if err := due(); err != nil {
						return err
					}
				}
				continue
			}
			if t.More && !p.midTxn && buf != nil {
				// A fragmented transaction starts an epoch of its own, so
				// that what came before commits now, whatever becomes of it.
				if err := seal(); err != nil {
					return err
				}
			}
			switch {
			case len(t.DDL) > 0 && p.midTxn:
				// A table stopped inside a fragmented transaction.
				if err := wait(); err != nil {
					return err
				}
				if err := p.stopMidTxn(ctx, buf, t); err != nil {
					return finish(err)
				}
			case len(t.DDL) > 0:
				// A barrier: what came before commits under the old schema.
				if err := barrier(); err != nil {
					return err
				}
				if err := p.applyDDL(ctx, t); err != nil {
					return err
				}
			}
			if err := p.apply(ctx, open(t.Time), t); err != nil {
				// Part of t may be folded into the open epoch: it is not
				// committed (its transactions are read again after a
				// restart), so no table gets part of a transaction.
				p.abandon(commitCtx, buf)
				buf, p.midTxn = nil, false
				return finish(err)
			}
			if p.midTxn {
				// Half an epoch: writing it out takes about as much again.
				if buf.Held >= p.opts.MaxBytes/2 {
					if err := p.spill(commitCtx, buf, "the transaction being read outgrew epoch.max_bytes"); err != nil {
						return finish(err)
					}
				}
				continue // copies, repairs and resyncs wait for the end of the transaction
			}
			if sealDue {
				if err := due(); err != nil {
					return err
				}
			}
			for id, copying := range p.recopy {
				p.log.Warn("a foreign-key cascade reached rows the initial copy has not read yet; the tables referencing them are copied again",
					"copying", copying.String(), "table", id.String())
				if err := p.resync(ctx, id, barrier); err != nil {
					return finish(err)
				}
			}
			clear(p.recopy)
			if len(p.copies) > 0 {
				if err := mergeCopies(); err != nil {
					return err
				}
			} else if buf != nil {
				if f := full(); f || sealDue {
					behind = behind || f
					if err := due(); err != nil {
						return err
					}
				}
			}
			if err := mergeRepairs(); err != nil {
				return err
			}
		case req := <-opens:
			p.openWindow(req)
		case r := <-results:
			if stop := p.receive(r); stop != nil {
				if err := barrier(); err != nil {
					return err
				}
				if err := p.applyDDL(ctx, stop); err != nil {
					return finish(err)
				}
			}
			if err := mergeCopies(); err != nil {
				return err
			}
		case err := <-errs:
			return finish(err)
		case req := <-resyncs:
			req.reply <- p.resync(ctx, req.id, barrier)
		case req := <-repairs:
			p.startRepair(copyCtx, req)
		case r := <-repairRead:
			p.receiveRepair(copyCtx, r)
			if err := mergeRepairs(); err != nil {
				return err
			}
		}
	}
}

// applyDDL applies the schema changes of t, in order, with retries.
func (p *Pipeline) applyDDL(ctx context.Context, t *cdcsync.Txn) error {
	p.awaitMaintenance()
	ds, ok := p.sink.(DDLSink)
	if !ok {
		return fmt.Errorf("a schema change of %s at %s, and the sink cannot apply schema changes", t.DDL[0].Table, t.Pos)
	}
	for i := range t.DDL {
		ch := &t.DDL[i]
		if p.schemas[ch.Table] == nil {
			continue // not mirrored (any more)
		}
		epoch := p.nextEpoch
		p.nextEpoch++
		_, err := p.retry(ctx, "schema change of "+ch.Table.String(), func() error { return ds.ApplyDDL(ctx, epoch, t.Pos, ch) }, nil,
			"table", ch.Table.String(), "change", ch.Kind.String())
		if p.m != nil {
			result := "ok"
			if err != nil && !errors.Is(err, cdcsync.ErrRestart) {
				result = "failed"
			}
			p.m.SchemaChanges.WithLabelValues(ch.Table.String(), ch.Kind.String(), result).Inc()
		}
		if err != nil && !errors.Is(err, cdcsync.ErrRestart) {
			return fmt.Errorf("%w: apply the %s change of %s at %s: %w", ErrCommit, ch.Kind, ch.Table, t.Pos, err)
		}
		switch ch.Kind {
		case cdcsync.ChangeSchema, cdcsync.ChangeTruncate:
			if ch.Schema != nil {
				p.schemas[ch.Table] = ch.Schema
			}
			p.schemaChanged(ch.Table)
		case cdcsync.ChangeRename:
			if p.copies[ch.Table] != nil {
				// The copy resumes under the new name in the next session.
				p.cancelCopy(ch.Table)
				err = fmt.Errorf("%w: %s was renamed to %s during its initial copy", cdcsync.ErrRestart, ch.Table, ch.NewID)
			}
			delete(p.schemas, ch.Table)
			p.schemas[ch.NewID] = ch.Schema
			delete(p.stopped, ch.NewID)
			if pos, ok := p.skip[ch.Table]; ok {
				delete(p.skip, ch.Table)
				p.skip[ch.NewID] = pos
			}
		case cdcsync.ChangeForeignKeys:
			if !ch.KeysUnknown { // else the session ends after this transaction
				p.setForeignKeys(ch.Table, ch.ForeignKeys)
			}
		case cdcsync.ChangeStop, cdcsync.ChangeDrop, cdcsync.ChangeRecopy:
			p.cancelCopy(ch.Table)
			delete(p.schemas, ch.Table)
			delete(p.skip, ch.Table)
			p.stopped[ch.Table] = true
			if ch.NewID != (cdcsync.TableID{}) {
				p.stopped[ch.NewID] = true // a rename that could not be applied
			}
			if p.m != nil && ch.Kind == cdcsync.ChangeStop {
				p.m.Stopped(ch.Table.String())
			}
		}
		if err != nil {
			return err // cdcsync.ErrRestart: the change is applied
		}
	}
	return nil
}

func (p *Pipeline) apply(ctx context.Context, buf *Buffer, t *cdcsync.Txn) error {
	t, err := p.cascade(ctx, buf, t)
	if err != nil {
		return err
	}
	var covered map[cdcsync.TableID]bool
	if len(p.skip) > 0 {
		covered = map[cdcsync.TableID]bool{}
		for id, pos := range p.skip {
			c, err := p.opts.Order.Covers(pos, t)
			if err != nil {
				return fmt.Errorf("table %s: %w", id, err)
			}
			if c {
				covered[id] = true
			} else {
				// Positions only grow: every later transaction is new to it too.
				delete(p.skip, id)
				p.log.Info("table caught up with its committed position", "table", id.String(), "position", pos.String())
			}
		}
	}
	if p.m != nil && !t.More {
		p.m.Transactions.Inc()
		p.m.ReadLagSeconds.Set(time.Since(t.Time).Seconds())
	}
	skip := func(id cdcsync.TableID) bool { return covered[id] || p.stopped[id] }
	if len(covered) > 0 && p.opts.CheckpointEpoch > 0 {
		// Another table committed t in an epoch after the checkpoint,
		// before a restart: the tables that commit it now do so late.
		for i := range t.Changes {
			if id := t.Changes[i].Table; !skip(id) {
				buf.Late(id, p.opts.CheckpointEpoch+1)
			}
		}
	}
	if !p.midTxn {
		p.seq++ // every fragment of a transaction has its number
	}
	p.midTxn = t.More
	if !t.More {
		p.pos, p.readPos, p.readResume = t.Pos, t.Pos, t.Resume
	}
	if len(p.copies) > 0 {
		if err := p.track(t, skip); err != nil {
			return err
		}
	}
	if len(p.repairs) > 0 {
		if err := p.trackRepairs(t, skip); err != nil {
			return err
		}
	}
	return buf.Apply(t, skip)
}

// spill writes out what the open epoch holds (see Spiller); a sink that
// cannot spill keeps it in memory.
func (p *Pipeline) spill(ctx context.Context, buf *Buffer, why string) error {
	sp, ok := p.sink.(Spiller)
	if !ok {
		return nil
	}
	id := buf.spill
	if id == 0 {
		// Unique in the process and, being a time, across its restarts.
		id = max(time.Now().UnixNano(), p.lastSpill+1)
		p.lastSpill = id
	}
	start, held, changes := time.Now(), buf.Held, buf.Rows
	err := buf.Spill(id, func(table cdcsync.TableID, spill int64, deletes, rows []cdcsync.Row) error {
		_, err := p.retry(ctx, "spill", func() error { return sp.Spill(ctx, table, spill, deletes, rows) }, nil, "table", table.String())
		return err
	})
	if err != nil {
		return fmt.Errorf("write out part of the open epoch (%s): %w", why, err)
	}
	p.log.Info("spilled the open epoch: "+why, "bytes", held, "rows_so_far", changes,
		"seconds", time.Since(start).Seconds())
	if p.m != nil {
		p.m.SpilledBytes.Add(float64(held))
	}
	if p.opts.Fault != nil {
		p.opts.Fault("after-spill")
	}
	return nil
}

// spillsOpen reports whether the open epoch may be written out between
// transactions while the epoch before it commits (due). Not while copies
// run (their chunks' bookkeeping assumes the rows stay in memory until the
// seal), nor with foreign keys, whose cascades look for child rows in the
// buffers, nor into a sink that cannot spill.
func (p *Pipeline) spillsOpen() bool {
	_, ok := p.sink.(Spiller)
	return ok && !p.midTxn && len(p.copies) == 0 && len(p.opts.ForeignKeys) == 0
}

// abandon removes what the epoch of buf spilled: it will not be committed.
func (p *Pipeline) abandon(ctx context.Context, buf *Buffer) {
	if buf == nil {
		return
	}
	for _, id := range buf.Spilled() {
		p.dropFromEpoch(ctx, buf, id)
	}
}

// dropFromEpoch forgets a table's share of the open epoch, and what it
// spilled.
func (p *Pipeline) dropFromEpoch(ctx context.Context, buf *Buffer, id cdcsync.TableID) {
	if spill := buf.SpillID(id); spill != 0 {
		p.sink.(Spiller).Abandon(ctx, id, spill)
		delete(buf.spilled, id)
	}
	buf.Drop(id)
}

// stopMidTxn applies the schema changes a fragment of an open transaction
// carries: only tables stopped (or to be copied again) at the transaction,
// which get nothing of it; everything before the transaction is committed.
func (p *Pipeline) stopMidTxn(ctx context.Context, buf *Buffer, t *cdcsync.Txn) error {
	for _, ch := range t.DDL {
		if ch.Kind != cdcsync.ChangeStop && ch.Kind != cdcsync.ChangeRecopy {
			return fmt.Errorf("a schema change of %s (%s) inside a transaction larger than epoch.max_bytes, which cdcsync cannot apply there; "+
				"raise epoch.max_bytes (and memory_limit) above the transaction's size", ch.Table, ch.Kind)
		}
		if buf != nil {
			p.dropFromEpoch(ctx, buf, ch.Table)
		}
	}
	return p.applyDDL(ctx, t)
}

// commitJob is a sealed epoch, ready to commit.
type commitJob struct {
	buf   *Buffer
	epoch int64
	// before is the position before its oldest change: its own start, or
	// that of the oldest change carried over into it.
	before cdcsync.Position
	ckpt   cdcsync.Position // the checkpoint after it: buf.End, or before a prepared XA transaction
	// saveCkpt is false when changes before ckpt were carried over into
	// the next epoch: the checkpoint must stay before them.
	saveCkpt bool
	tables   []cdcsync.TableID
	copies   map[cdcsync.TableID]cdcsync.CopyState // progress of the copying tables, as of the seal
	// compact are the tables whose copy this commit completes after it
	// wrote an equality delete for every copied row (a resumed copy, or
	// one past MaxTrackedKeys): they are maintained right after it, even
	// when nothing else changes them, so readers do not pay for the debris.
	compact []cdcsync.TableID

	// Set when it starts (Run): the job sealed before it, whose
	// bookkeeping its own waits for; done, closed when commit returned
	// (err is then its error); result, what commit returned; since, when
	// it started.
	prev   *commitJob
	done   chan struct{}
	err    error
	result chan commitResult
	since  time.Time
}

// commitResult is what a background commit reports.
type commitResult struct {
	err     error
	copies  map[cdcsync.TableID]cdcsync.CopyState // the copy progress now committed
	stopped []cdcsync.TableID                     // tables the commit stopped (cdcsync.StopTable)
}

// prepare captures what the commit of buf needs from the pipeline's own
// state (Run's goroutine) and numbers its epoch; nil when there is
// nothing to commit. saveCkpt says that nothing read before buf.End is
// carried over into the next epoch.
func (p *Pipeline) prepare(buf *Buffer, saveCkpt bool) *commitJob {
	for id := range p.stopped {
		p.dropFromEpoch(context.Background(), buf, id) // folded before its stop was known
	}
	if buf.Empty() {
		return nil
	}
	job := &commitJob{buf: buf, ckpt: buf.End, tables: buf.Tables(), copies: map[cdcsync.TableID]cdcsync.CopyState{},
		saveCkpt: saveCkpt, before: p.sealedEnd}
	if !p.readResume.IsZero() {
		// The rows of a prepared XA transaction are in no table yet: a
		// restart must read its PREPARE again (capture/xa.go).
		job.ckpt = p.readResume
	}
	if len(job.tables) == 0 && job.ckpt == p.sealedCkpt {
		return nil // nothing to commit, no checkpoint to move
	}
	if buf.Carries() && !p.carryBefore.IsZero() {
		job.before = p.carryBefore
	}
	if saveCkpt {
		p.carryBefore = cdcsync.Position{}
		p.sealedCkpt = job.ckpt
	} else if p.carryBefore.IsZero() {
		p.carryBefore = p.sealedEnd
	}
	p.sealedEnd = buf.End
	job.epoch = p.nextEpoch
	p.nextEpoch++
	sort.Slice(job.tables, func(i, j int) bool { return job.tables[i].String() < job.tables[j].String() })
	for _, id := range job.tables {
		if ct := p.copies[id]; ct != nil {
			job.copies[id] = ct.state
			if ct.state.Done && !ct.clean {
				job.compact = append(job.compact, id)
			}
		}
	}
	return job
}

// afterCommit does, in Run's goroutine, what follows a commit: the copies
// it completed end.
func (p *Pipeline) afterCommit(r commitResult) error {
	if r.err != nil {
		return r.err
	}
	for _, id := range r.stopped {
		p.laneMu.Lock()
		p.releaseLane(id)
		p.laneMu.Unlock()
		p.cancelCopy(id)
		delete(p.schemas, id)
		delete(p.skip, id)
		p.stopped[id] = true
	}
	for id, st := range r.copies {
		if ct := p.copies[id]; ct != nil && st.Done {
			p.copyDone(ct)
		}
	}
	return nil
}

// commit commits one epoch: every table, then, after the epochs before it
// are done, the checkpoint. It runs in a goroutine of its own; the tables
// of two epochs may commit at once (Run's carry), never one table's.
func (p *Pipeline) commit(ctx context.Context, job *commitJob) commitResult {
	buf, tables, epoch := job.buf, job.tables, job.epoch
	behind := p.catchingUp(buf)
	start := time.Now()
	var (
		smu   sync.Mutex
		stops = map[cdcsync.TableID]error{}
	)
	for i, rank := range p.commitRanks(tables) {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(p.opts.CommitConcurrency)
		for j, id := range rank {
			if (i > 0 || j > 0) && p.opts.Fault != nil {
				p.opts.Fault("between-tables")
			}
			d := cdcsync.Delta{Epoch: epoch, From: buf.From(id), Pos: buf.End, Time: buf.Last, Spill: buf.SpillID(id)}
			d.Deletes, d.Rows = buf.Output(id)
			if st, ok := job.copies[id]; ok {
				d.Copy = &st
			}
			g.Go(func() error {
				err := p.commitTable(gctx, id, d)
				if cdcsync.IsStopTable(err) {
					if d.Spill != 0 {
						p.sink.(Spiller).Abandon(gctx, id, d.Spill)
					}
					smu.Lock()
					stops[id] = err
					smu.Unlock()
					p.laneDone(job, id, true)
					return nil
				}
				if err == nil {
					p.laneDone(job, id, false)
				}
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return commitResult{err: fmt.Errorf("%w: %w", ErrCommit, err)}
		}
	}
	p.mu.Lock()
	delete(p.pendingJobs, job)
	p.refreshPending()
	p.mu.Unlock()
	took := time.Since(start) // the tables' commits, not the wait below
	// What follows runs one epoch at a time, in order.
	if job.prev != nil {
		<-job.prev.done
		if job.prev.err != nil {
			return commitResult{} // the session ends with that error; no checkpoint passes it
		}
	}
	stopped, err := p.stopTables(ctx, epoch, job.before, buf.End, stops)
	if err != nil {
		return commitResult{err: fmt.Errorf("%w: %w", ErrCommit, err)}
	}
	if job.saveCkpt {
		if p.opts.Fault != nil {
			p.opts.Fault("before-checkpoint")
		}
		if _, err := p.retry(ctx, "checkpoint", func() error { return p.sink.SaveCheckpoint(ctx, epoch, job.ckpt) }, nil, "epoch", epoch); err != nil {
			return commitResult{err: fmt.Errorf("%w: save the checkpoint of epoch %d: %w", ErrCommit, epoch, err)}
		}
		p.mu.Lock()
		p.committed = buf.End
		p.mu.Unlock()
	}
	if p.unmaintained == nil {
		p.unmaintained = map[cdcsync.TableID]time.Time{}
	}
	for _, id := range tables {
		p.unmaintained[id] = time.Now()
	}
	maintain := p.maintenanceDue(buf, behind)
	if p.m != nil {
		for _, id := range tables {
			for op, n := range buf.Changes(id) {
				p.m.Rows.WithLabelValues(id.String(), op.String()).Add(float64(n))
			}
		}
		p.m.EpochsCommitted.Inc()
		p.m.CommitSeconds.Observe(took.Seconds())
		p.m.EpochRows.Observe(float64(buf.Rows))
	}
	attrs := []any{"epoch", epoch, "tables", len(tables), "transactions", buf.Txns, "rows", buf.Rows,
		"position", buf.End.String(), "seconds", took.Seconds()}
	if !job.saveCkpt {
		attrs = append(attrs, "checkpoint", "held: tables carried over")
	}
	p.log.Info("epoch committed", attrs...)
	if maintain || len(job.compact) > 0 || len(p.maintOwed) > 0 {
		var due []cdcsync.TableID
		if maintain {
			for _, id := range tables {
				if _, copying := job.copies[id]; !copying {
					due = append(due, id)
				}
			}
		}
		owed := append(p.maintOwed, job.compact...)
		for _, id := range owed {
			if !slices.Contains(due, id) {
				due = append(due, id)
			}
		}
		p.maintOwed = nil
		if !p.startMaintenance(ctx, epoch, due) {
			p.maintOwed = owed // after a later epoch
		}
	}
	return commitResult{copies: job.copies, stopped: stopped}
}

// stopTables stops the tables whose share of the epoch ending at end the
// sink refused for good (cdcsync.StopTable): each gets a ChangeStop at the
// position before the epoch (before, which includes what was carried over
// into it), before the checkpoint that passes the epoch,
// so that after a crash the table is either stopped or reads the epoch
// again. The other tables of the epoch are committed already.
func (p *Pipeline) stopTables(ctx context.Context, epoch int64, before, end cdcsync.Position, stops map[cdcsync.TableID]error) ([]cdcsync.TableID, error) {
	if len(stops) == 0 {
		return nil, nil
	}
	ids := slices.SortedFunc(maps.Keys(stops), func(a, b cdcsync.TableID) int { return strings.Compare(a.String(), b.String()) })
	ds, ok := p.sink.(DDLSink)
	if !ok {
		return nil, fmt.Errorf("%s cannot be stopped by this sink: %w", ids[0], stops[ids[0]])
	}
	p.awaitMaintenance() // a stop changes the sink's tables
	for _, id := range ids {
		at := before
		if own, ok := p.resumes[id]; ok {
			if later, err := p.opts.Order.Includes(own, at); err == nil && later {
				at = own // the table held more than the checkpoint when the session began
			}
		}
		ch := &cdcsync.SchemaChange{Table: id, Kind: cdcsync.ChangeStop, NoRecopy: true,
			Reason: fmt.Sprintf("a transaction after it, up to %s, has a row Iceberg refuses: %v", end, stops[id])}
		if _, err := p.retry(ctx, "stop of "+id.String(), func() error { return ds.ApplyDDL(ctx, epoch, at, ch) }, nil,
			"table", id.String()); err != nil {
			return nil, fmt.Errorf("stop %s, whose share of epoch %d Iceberg refuses (%v): %w", id, epoch, stops[id], err)
		}
		if p.m != nil {
			p.m.Stopped(id.String())
		}
	}
	return ids, nil
}

// catchingUp says whether the epoch in buf was sealed behind the server:
// its last transaction is more than twice the interval old when its
// commit begins (see maintenanceDue).
func (p *Pipeline) catchingUp(buf *Buffer) bool {
	return !buf.Last.IsZero() && time.Since(buf.Last) > 2*p.opts.Interval
}

// maxMaintenanceSkips bounds how many epochs in a row skip maintenance
// while catching up, so that a lag that never ends (or a server clock far
// behind cdcsync's) cannot starve it.
const maxMaintenanceSkips = 10

// copyEpochShare is the share of Options.MaxBytes at which an epoch holding
// rows of an initial copy seals (see full in Run).
const copyEpochShare = 4

// commitRanks orders the tables of an epoch for its commit: a table
// referenced by a cascading foreign key commits after the tables that
// reference it (each rank waits for the one before). After a crash between
// two tables' commits, a table that holds the epoch then has every table
// below it in the chain holding it too, so a parent change that is passed
// over when read again has no cascade left to apply (cascade.go). Without
// such keys every table is in one rank, committed in parallel.
func (p *Pipeline) commitRanks(tables []cdcsync.TableID) [][]cdcsync.TableID {
	if len(p.opts.ForeignKeys) == 0 {
		return [][]cdcsync.TableID{tables}
	}
	rank := map[cdcsync.TableID]int{}
	// Longest path from the leaves; a cycle stops growing at the number of
	// keys.
	limit := len(p.opts.ForeignKeys)
	for range limit {
		moved := false
		for i := range p.opts.ForeignKeys {
			fk := &p.opts.ForeignKeys[i]
			if fk.Child == fk.Parent {
				continue
			}
			if r := rank[fk.Child] + 1; r > rank[fk.Parent] && r <= limit {
				rank[fk.Parent], moved = r, true
			}
		}
		if !moved {
			break
		}
	}
	var out [][]cdcsync.TableID
	for _, id := range tables {
		r := rank[id]
		for len(out) <= r {
			out = append(out, nil)
		}
		out[r] = append(out[r], id)
	}
	return slices.DeleteFunc(out, func(r []cdcsync.TableID) bool { return len(r) == 0 })
}

// maintenanceDue says whether the epoch in buf is followed by maintenance
// (the committing goroutines, in epoch order). While cdcsync catches up on
// a backlog (behind, from catchingUp) it is skipped: the next commit would wait for it, and the compaction would
// rewrite files the backlog is about to add deletes to. A server clock
// ahead of cdcsync's only makes it run every maxMaintenanceSkips+1 epochs.
func (p *Pipeline) maintenanceDue(buf *Buffer, behind bool) bool {
	if !behind || p.maintSkips >= maxMaintenanceSkips {
		if p.maintSkips > 0 && !behind {
			p.log.Info("caught up: table maintenance runs again", "epochs_skipped", p.maintSkips)
		}
		p.maintSkips = 0
		return true
	}
	if p.maintSkips == 0 {
		p.log.Info("catching up on the binlog: table maintenance waits until cdcsync is caught up", "lag", time.Since(buf.Last).Round(time.Second).String())
	}
	p.maintSkips++
	return false
}

// startMaintenance runs the sink's maintenance of the epoch's tables in the
// background, unless the maintenance of an earlier epoch still runs (its
// tables stay due and are maintained after a later epoch); it says whether
// it started (or had nothing to do).
func (p *Pipeline) startMaintenance(ctx context.Context, epoch int64, tables []cdcsync.TableID) bool {
	m, ok := p.sink.(Maintainer)
	if !ok || len(tables) == 0 {
		return true
	}
	return p.launchMaintenance(ctx, func(ctx context.Context) error {
		err := m.Maintain(ctx, epoch, tables)
		if err != nil {
			err = fmt.Errorf("table maintenance after epoch %d: %w", epoch, err)
		}
		return err
	})
}

// maintainIdle hands the tables no epoch changed for Options.IdleAfter to
// an IdleMaintainer (Run's goroutine, with no commit running), when no
// maintenance runs.
func (p *Pipeline) maintainIdle(ctx context.Context) {
	m, ok := p.sink.(IdleMaintainer)
	if !ok || len(p.unmaintained) == 0 {
		return
	}
	if p.Lag() > 2*p.opts.Interval {
		// Catching up on a backlog, as maintenanceDue: the CPU goes to
		// ingestion; the tables wait until the lag is gone.
		return
	}
	var ids []cdcsync.TableID
	for id, at := range p.unmaintained {
		if time.Since(at) >= p.opts.IdleAfter {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	slices.SortFunc(ids, func(a, b cdcsync.TableID) int { return strings.Compare(a.String(), b.String()) })
	started := p.launchMaintenance(ctx, func(ctx context.Context) error {
		began := time.Now()
		if err := m.MaintainIdle(ctx, ids); err != nil {
			return fmt.Errorf("maintenance of idle tables: %w", err)
		}
		p.log.Info("idle tables maintained", "tables", len(ids), "seconds", time.Since(began).Seconds())
		return nil
	})
	if started {
		for _, id := range ids {
			delete(p.unmaintained, id)
		}
	}
}

// launchMaintenance runs fn in a goroutine of its own unless maintenance
// already runs (then it reports false) or the pipeline is stopping.
func (p *Pipeline) launchMaintenance(ctx context.Context, fn func(context.Context) error) bool {
	if p.stopping.Load() {
		return true
	}
	if p.maintDone != nil {
		select {
		case <-p.maintDone:
			p.awaitMaintenance()
		default:
			p.log.Debug("table maintenance still runs; the next waits")
			return false
		}
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	p.maintDone, p.maintCancel = done, cancel
	go func() {
		defer close(done)
		if err := fn(mctx); err != nil && mctx.Err() == nil {
			p.log.Warn("table maintenance failed; ingestion continues and maintenance is tried again later", "error", err)
		}
	}()
	return true
}

// awaitMaintenance waits for the running maintenance, if any, to return.
func (p *Pipeline) awaitMaintenance() {
	if p.maintDone == nil {
		return
	}
	<-p.maintDone
	p.maintCancel()
	p.maintDone, p.maintCancel = nil, nil
}

// stopMaintenance cancels the running maintenance and waits for it.
func (p *Pipeline) stopMaintenance() {
	if p.maintCancel != nil {
		p.maintCancel()
	}
	p.awaitMaintenance()
}

func (p *Pipeline) commitTable(ctx context.Context, id cdcsync.TableID, d cdcsync.Delta) error {
	attempts, err := p.retry(ctx, id.String(), func() error { return p.sink.Commit(ctx, id, d) },
		func(err error) { p.countCommit(id, "retry") }, "table", id.String(), "epoch", d.Epoch)
	if err != nil {
		p.countCommit(id, "failed")
		return fmt.Errorf("commit epoch %d to %s (attempt %d): %w", d.Epoch, id, attempts, err)
	}
	p.countCommit(id, "ok")
	return nil
}

// maxRetryBackoff caps the wait between two attempts while an outage lasts.
const maxRetryBackoff = 30 * time.Second

// retry runs op until it succeeds. An error that Options.Transient
// recognises (an outage) is retried for as long as it lasts, with the
// backoff doubling up to maxRetryBackoff, and the commit is reported by
// Stalled meanwhile; any other error is retried until Retries attempts
// failed. A permanent error, cdcsync.ErrRestart, the end of ctx and Options.Quit
// end it at once. failed is called after every failed attempt that is
// retried; attrs go to the log lines. It returns the attempts made.
func (p *Pipeline) retry(ctx context.Context, what string, op func() error, failed func(error), attrs ...any) (int, error) {
	backoff := p.opts.RetryBackoff
	stalled := false
	defer func() {
		if stalled {
			p.setStall(what, nil)
		}
	}()
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil {
			if stalled {
				p.log.Info("the outage is over: the commit went through", append(attrs, "attempts", attempt)...)
			}
			return attempt, nil
		}
		if errors.Is(err, cdcsync.ErrRestart) || errors.Is(err, cdcsync.ErrInterrupted) || cdcsync.IsPermanent(err) || cdcsync.IsStopTable(err) || ctx.Err() != nil {
			return attempt, err
		}
		outage := p.opts.Transient != nil && p.opts.Transient(err)
		if !outage && attempt >= p.opts.Retries {
			return attempt, err
		}
		if failed != nil {
			failed(err)
		}
		if outage {
			stalled = true
			p.setStall(what, err)
			p.log.Warn("commit failed: storage or catalog unreachable; retrying until it answers", append(attrs, "attempt", attempt, "in", backoff.String(), "error", err)...)
		} else {
			p.log.Warn("commit failed; retrying", append(attrs, "attempt", attempt, "error", err)...)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return attempt, ctx.Err()
		case <-p.opts.Quit:
			return attempt, fmt.Errorf("shutting down while retrying: %w", err)
		}
		backoff = min(backoff*2, maxRetryBackoff)
	}
}

// setStall records (err set) or clears what an outage holds up.
func (p *Pipeline) setStall(what string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		delete(p.stalls, what)
	} else {
		st, ok := p.stalls[what]
		if !ok {
			st = Stall{What: what, Since: time.Now()}
		}
		st.Err = err
		p.stalls[what] = st
	}
	if p.m != nil {
		p.m.CommitsStalled.Set(float64(len(p.stalls)))
	}
}

// Stalled returns the commits an outage holds up, oldest first.
func (p *Pipeline) Stalled() []Stall {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Stall, 0, len(p.stalls))
	for _, st := range p.stalls {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}

func (p *Pipeline) countCommit(id cdcsync.TableID, result string) {
	if p.m != nil {
		p.m.TableCommits.WithLabelValues(id.String(), result).Inc()
	}
}
