package merge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cdcsync/cdcsync"
)

// The initial copy runs while the binlog streams, the way DBLog and Flink
// CDC's incremental snapshots do. A table is read in primary-key chunks, each
// in a consistent snapshot whose binlog position P the source reports. The
// stream keeps applying every change of a copying table (its rows are full
// images, so an update of a row not copied yet simply inserts it). A chunk is
// merged into the epoch at the point of the stream where every transaction up
// to P has been read; its rows that the stream changed since the chunk's
// window opened (just before the snapshot began) are dropped, because the
// stream already holds a newer image of them. Every other copied row is the
// row's image at the merge point. So a committed table never shows an image
// older than one committed before, and once the last chunk is merged it
// equals MySQL. Keys are only compared for equality, in the canonical
// encoding both paths share: ranges are MySQL's business (collations).
//
// A copied row needs an equality delete only if the stream may have written
// its key before (tracked per table while the copy runs; after a restart, or
// past MaxTrackedKeys, every copied row gets one). Chunks of a table merge in
// order, so the table's committed progress is one bound (CopyState.After).

// ChunkSource reads tables in primary-key chunks (capture.ChunkReader).
type ChunkSource interface {
	// Estimate is the approximate row count, for progress reports.
	Estimate(ctx context.Context, ts *cdcsync.TableSchema) (int64, error)
	// NextBound returns the bound closing the chunk of about rows rows that
	// follows after ("" = the table's start); last when it runs to the end.
	NextBound(ctx context.Context, ts *cdcsync.TableSchema, after string, rows int) (hi string, last bool, err error)
	// ReadChunk reads the rows after < key <= hi (no upper bound when last) in
	// one consistent snapshot and returns them with that snapshot's position.
	ReadChunk(ctx context.Context, ts *cdcsync.TableSchema, after, hi string, last bool) ([]cdcsync.Row, cdcsync.Position, error)
}

// CopySink is implemented by a Sink that can start a table's copy afresh
// (Pipeline.Resync).
type CopySink interface {
	// StartCopy empties the table and commits it at pos as epoch epoch, with
	// a fresh copy state.
	StartCopy(ctx context.Context, table cdcsync.TableID, epoch int64, pos cdcsync.Position) error
}

// CopyOptions configure the initial copy.
type CopyOptions struct {
	Source         ChunkSource
	ChunkRows      int // rows per chunk (default 20000)
	Workers        int // chunks read at once, across all tables (default 2)
	MaxTrackedKeys int // keys remembered per table before every copied row gets an equality delete (default 1M)
	// Retries is how often a chunk read that failed is tried again before
	// the pipeline stops (default 3).
	Retries int
}

// ErrCopy wraps failures of the initial copy.
var ErrCopy = errors.New("initial copy failed")

// copyTable is the state of one table's running copy; the pipeline's
// goroutine owns it.
type copyTable struct {
	id    cdcsync.TableID
	state cdcsync.CopyState // progress merged so far (what the next commit records)
	// clean means the stream wrote none of the table's keys before this
	// session's tracking began, so untouched copied keys need no delete.
	clean   bool
	touched map[string]uint64 // key -> sequence number of the last transaction that changed it
	gen     int               // bumped by schema changes: chunks read before are read again
	next    int               // the chunk merged next
	pending map[int]*chunkResult
	windows map[*window]struct{}
	cancel  context.CancelFunc // stops this copy's goroutines
	started bool               // its splitter runs (see startWaiting)
	// cascaded is the position of the last foreign-key cascade into the
	// table: a chunk whose snapshot predates it is read again (cascade.go).
	cascaded cdcsync.Position
}

// window is opened before a chunk's snapshot begins.
type window struct {
	ct     *copyTable
	seq    uint64           // transactions read when it opened
	pos    cdcsync.Position // position of the last transaction read then
	gen    int
	schema *cdcsync.TableSchema
}

type chunkJob struct {
	ct        *copyTable
	n         int
	after, hi string
	last      bool
}

type chunkResult struct {
	job   chunkJob
	w     *window
	rows  []cdcsync.Row
	pos   cdcsync.Position
	err   error
	reply chan verdict
}

type verdict int

const (
	merged verdict = iota
	again          // read the chunk again
	gone           // the table's copy ended (dropped, stopped, copied afresh)
)

type openReq struct {
	ct    *copyTable
	reply chan *window // nil window: the copy is gone
}

type resyncReq struct {
	id    cdcsync.TableID
	reply chan error
}

// CopyProgress is a table's copy progress, for logs, metrics and the
// terminal.
type CopyProgress struct {
	Table    cdcsync.TableID
	Rows     int64 // rows copied, including earlier sessions
	Estimate int64 // the server's estimate of the table's rows (0: unknown)
	Session  int64 // rows copied by this session
	Started  time.Time
}

// copier holds what the copy goroutines share.
type copier struct {
	opts    CopyOptions
	jobs    chan chunkJob
	opens   chan openReq
	results chan *chunkResult
	errs    chan error
	resyncs chan resyncReq
	// repairs are Pipeline.Repair's requests, repairRead the rows their
	// goroutines read (repair.go).
	repairs    chan repairReq
	repairRead chan *repairRead
	wg         sync.WaitGroup
}

func newCopier(opts CopyOptions) *copier {
	if opts.ChunkRows <= 0 {
		opts.ChunkRows = 20000
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.MaxTrackedKeys <= 0 {
		opts.MaxTrackedKeys = 1 << 20
	}
	if opts.Retries <= 0 {
		opts.Retries = 3
	}
	return &copier{opts: opts, jobs: make(chan chunkJob), opens: make(chan openReq), results: make(chan *chunkResult),
		errs: make(chan error, 1), resyncs: make(chan resyncReq), repairs: make(chan repairReq), repairRead: make(chan *repairRead)}
}

func (c *copier) fail(err error) {
	select {
	case c.errs <- err:
	default:
	}
}

// startCopies starts the workers and one splitter per copying table.
func (p *Pipeline) startCopies(ctx context.Context) {
	c := p.copier
	if c.opts.Source == nil {
		return
	}
	for range c.opts.Workers {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			p.work(ctx)
		}()
	}
	p.startWaiting(ctx)
}

// startWaiting starts the copies that wait for nothing. A table copies once
// the tables its cascading foreign keys reference are copied (unless they
// reference each other): a cascade from a parent finds only the child rows
// copied so far, so the rows it cannot see must not have descendants
// copied already (cascade.go).
func (p *Pipeline) startWaiting(ctx context.Context) {
	var ready []*copyTable
	waiting := 0
	for _, ct := range p.copies {
		if ct.started {
			continue
		}
		if p.parentCopying(ct.id) {
			waiting++
			continue
		}
		ready = append(ready, ct)
	}
	if len(ready) == 0 && waiting > 0 {
		// Tables referencing each other: they copy together.
		for _, ct := range p.copies {
			if !ct.started {
				ready = append(ready, ct)
			}
		}
	}
	for _, ct := range ready {
		p.startSplitter(ctx, ct)
	}
}

// selfReferencing says whether a cascading foreign key of id references
// id itself.
func (p *Pipeline) selfReferencing(id cdcsync.TableID) bool {
	for i := range p.opts.ForeignKeys {
		fk := &p.opts.ForeignKeys[i]
		if fk.Child == id && fk.Parent == id {
			return true
		}
	}
	return false
}

// parentCopying says whether a table that id's cascading foreign keys
// reference, other than id itself, is being copied.
func (p *Pipeline) parentCopying(id cdcsync.TableID) bool {
	for i := range p.opts.ForeignKeys {
		fk := &p.opts.ForeignKeys[i]
		if fk.Child == id && fk.Parent != id && p.copies[fk.Parent] != nil && p.schemas[fk.Parent] != nil {
			return true
		}
	}
	return false
}

func (p *Pipeline) startSplitter(ctx context.Context, ct *copyTable) {
	ct.started = true
	c := p.copier
	tctx, cancel := context.WithCancel(ctx)
	ct.cancel = cancel
	schema := p.schemas[ct.id]
	after := ct.state.After
	p.setProgress(ct.id, func(cp *CopyProgress) {
		cp.Rows, cp.Started, cp.Session = ct.state.Rows, time.Now(), 0
	})
	// A table whose cascading foreign key references itself is read in one
	// chunk: a cascade finds the child rows merged so far, and with several
	// chunks a row merged early could descend from one a later chunk no
	// longer has (cascade.go). Such tables (trees: categories, staff) are
	// small as a rule; the copy of a large one holds it whole in memory.
	whole := p.selfReferencing(ct.id)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if n, err := c.opts.Source.Estimate(tctx, schema); err == nil {
			p.setProgress(ct.id, func(cp *CopyProgress) { cp.Estimate = n })
		}
		for n := 0; ; n++ {
			hi, last, err := "", true, error(nil)
			if !whole {
				hi, last, err = c.opts.Source.NextBound(tctx, schema, after, c.opts.ChunkRows)
			}
			if err != nil {
				if tctx.Err() == nil {
					c.fail(fmt.Errorf("%w: split %s after %s: %w", ErrCopy, ct.id, describeBound(after), err))
				}
				return
			}
			select {
			case c.jobs <- chunkJob{ct: ct, n: n, after: after, hi: hi, last: last}:
			case <-tctx.Done():
				return
			}
			if last {
				return
			}
			after = hi
		}
	}()
}

func describeBound(b string) string {
	if b == "" {
		return "the table's start"
	}
	return b
}

// work reads chunks until ctx ends.
func (p *Pipeline) work(ctx context.Context) {
	c := p.copier
	for {
		select {
		case <-ctx.Done():
			return
		case job := <-c.jobs:
			if err := p.copyChunk(ctx, job); err != nil {
				if ctx.Err() == nil {
					c.fail(err)
				}
				return
			}
		}
	}
}

// copyChunk reads one chunk and hands it to the pipeline, again if needed,
// until it is merged or the table's copy is gone.
func (p *Pipeline) copyChunk(ctx context.Context, job chunkJob) error {
	c := p.copier
	failures := 0
	backoff := 200 * time.Millisecond
	for {
		req := openReq{ct: job.ct, reply: make(chan *window, 1)}
		select {
		case c.opens <- req:
		case <-ctx.Done():
			return nil
		}
		var w *window
		select {
		case w = <-req.reply:
		case <-ctx.Done():
			return nil
		}
		if w == nil {
			return nil
		}
		rows, pos, err := c.opts.Source.ReadChunk(ctx, w.schema, job.after, job.hi, job.last)
		res := &chunkResult{job: job, w: w, rows: rows, pos: pos, err: err, reply: make(chan verdict, 1)}
		select {
		case c.results <- res:
		case <-ctx.Done():
			return nil
		}
		var v verdict
		select {
		case v = <-res.reply:
		case <-ctx.Done():
			return nil
		}
		if v == gone { // the copy ended, or this chunk's value stopped the table
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			failures++
			if failures > c.opts.Retries {
				return fmt.Errorf("%w: read %s after %s: %w", ErrCopy, job.ct.id, describeBound(job.after), err)
			}
			p.log.Warn("reading a chunk of the initial copy failed; retrying", "table", job.ct.id.String(), "attempt", failures, "error", err)
			v = again
		}
		switch v {
		case merged, gone:
			return nil
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// openWindow answers a worker about to read a chunk (pipeline goroutine).
func (p *Pipeline) openWindow(req openReq) {
	ct := req.ct
	if p.copies[ct.id] != ct {
		req.reply <- nil
		return
	}
	w := &window{ct: ct, seq: p.seq, pos: p.readPos, gen: ct.gen, schema: p.schemas[ct.id]}
	ct.windows[w] = struct{}{}
	req.reply <- w
}

// tableStopper is a read error that stops only the table it names (a
// value the table cannot mirror, capture.ValueError): the other tables go
// on.
type tableStopper interface {
	error
	StopsTable() cdcsync.TableID
}

// receive takes a chunk a worker read (pipeline goroutine): it is queued
// until it can merge, or sent back to be read again. A chunk holding a
// value its table cannot mirror returns the change that stops the table.
func (p *Pipeline) receive(r *chunkResult) *cdcsync.Txn {
	ct := r.job.ct
	delete(ct.windows, r.w)
	var stop tableStopper
	switch {
	case p.copies[ct.id] != ct:
		r.reply <- gone
		return nil
	case errors.As(r.err, &stop) && stop.StopsTable() == ct.id:
		r.reply <- gone
		reason := fmt.Sprintf("the initial copy read a value it cannot mirror: %v; then copy the table again: cdcsync resync %s", stop, ct.id)
		p.log.Error("a table stops: it holds a value cdcsync cannot mirror; the other tables go on", "table", ct.id.String(), "reason", reason)
		return &cdcsync.Txn{Pos: p.pos, DDL: []cdcsync.SchemaChange{{Table: ct.id, Kind: cdcsync.ChangeStop, Reason: reason, NoRecopy: true}}}
	case r.err != nil:
		r.reply <- again
		return nil
	case r.w.gen != ct.gen:
		// A schema change or TRUNCATE came between: the rows may predate it.
		r.reply <- again
		return nil
	case !ct.cascaded.IsZero() && !p.includes(r.pos, ct.cascaded):
		// A cascade it could not see the rows of came after its snapshot.
		r.reply <- again
		return nil
	}
	// The snapshot must not predate the window: a transaction the stream
	// had read then, but that the snapshot does not show yet (InnoDB makes
	// it visible just after the binlog has it), would be missed.
	ok, err := p.opts.Order.Includes(r.pos, r.w.pos)
	if err != nil || !ok {
		if err != nil {
			p.log.Warn("cannot order a chunk's snapshot with the stream; reading it again", "table", ct.id.String(), "error", err)
		}
		r.reply <- again
		return nil
	}
	ct.windows[r.w] = struct{}{} // stays open until merged
	ct.pending[r.job.n] = r
	return nil
}

// mergeReady merges every queued chunk whose snapshot position the stream
// has reached, in chunk order per table (pipeline goroutine).
func (p *Pipeline) mergeReady(buffer func() *Buffer) error {
	for _, ct := range p.copies {
		for {
			r := ct.pending[ct.next]
			if r == nil {
				break
			}
			ok, err := p.opts.Order.Includes(p.readPos, r.pos)
			if err != nil {
				return fmt.Errorf("%w: order a chunk of %s with the stream: %w", ErrCopy, ct.id, err)
			}
			if !ok {
				break
			}
			delete(ct.pending, ct.next)
			delete(ct.windows, r.w)
			if err := p.mergeChunk(buffer(), ct, r); err != nil {
				return err
			}
			ct.next++
			r.reply <- merged
			if ct.state.Done {
				break
			}
		}
	}
	return nil
}

func (p *Pipeline) mergeChunk(buf *Buffer, ct *copyTable, r *chunkResult) error {
	schema := p.schemas[ct.id]
	var key []byte
	kept := r.rows[:0]
	needDelete := make([]bool, 0, len(r.rows))
	dropped := 0
	for _, row := range r.rows {
		var err error
		if key, err = schema.AppendKey(key[:0], row); err != nil {
			return fmt.Errorf("%w: %w", ErrCopy, err)
		}
		s, touched := ct.touched[string(key)]
		if touched && s > r.w.seq {
			dropped++ // the stream has a newer image
			continue
		}
		kept = append(kept, row)
		needDelete = append(needDelete, touched || !ct.clean)
	}
	if err := buf.Load(ct.id, kept, rowsBytes(kept), p.pos, needDelete); err != nil {
		return fmt.Errorf("%w: %w", ErrCopy, err)
	}
	ct.state.After = r.job.hi
	ct.state.Rows += int64(len(kept))
	ct.state.Done = r.job.last
	p.copyEnded = p.copyEnded || r.job.last
	p.setProgress(ct.id, func(cp *CopyProgress) {
		cp.Rows = ct.state.Rows
		cp.Session += int64(len(kept))
	})
	if p.m != nil {
		p.m.SnapshotRows.WithLabelValues(ct.id.String()).Add(float64(len(kept)))
	}
	p.log.Debug("chunk merged", "table", ct.id.String(), "chunk", r.job.n, "rows", len(kept), "superseded", dropped, "position", r.pos.String())
	p.pruneTouched(ct)
	return nil
}

// rowsBytes is the Go heap rows hold, for sealing epochs by size.
func rowsBytes(rows []cdcsync.Row) int {
	n := 0
	for _, r := range rows {
		n += r.MemSize()
	}
	return n
}

// changeKeys calls fn with the primary key encoding of c's before and
// after images (valid until fn returns), encoded into buf, which it
// returns for reuse.
func (p *Pipeline) changeKeys(c *cdcsync.Change, buf []byte, fn func(key []byte)) ([]byte, error) {
	for _, row := range []cdcsync.Row{c.Before, c.After} {
		if row == nil {
			continue
		}
		var err error
		if buf, err = p.schemas[c.Table].AppendKey(buf[:0], row); err != nil {
			return buf, err
		}
		fn(buf)
	}
	return buf, nil
}

// track records the keys a transaction changed in copying tables
// (pipeline goroutine); skip says which tables it does not apply to.
func (p *Pipeline) track(t *cdcsync.Txn, skip func(cdcsync.TableID) bool) error {
	var key []byte
	for i := range t.Changes {
		c := &t.Changes[i]
		ct := p.copies[c.Table]
		if ct == nil || skip(c.Table) {
			continue
		}
		var err error
		if key, err = p.changeKeys(c, key, func(k []byte) { ct.touched[string(k)] = p.seq }); err != nil {
			return err
		}
		if len(ct.touched) > p.copier.opts.MaxTrackedKeys && ct.clean {
			// Too many keys to remember which the stream wrote: from now on
			// every copied row gets an equality delete.
			ct.clean = false
			p.log.Info("the initial copy stops tracking which keys the stream wrote; copied rows get equality deletes from now on",
				"table", c.Table.String(), "keys", len(ct.touched))
			p.pruneTouched(ct)
		}
	}
	return nil
}

// pruneTouched forgets keys no open window needs, once they are not needed
// to decide equality deletes.
func (p *Pipeline) pruneTouched(ct *copyTable) {
	if ct.clean {
		return
	}
	if len(ct.windows) == 0 {
		clear(ct.touched)
		return
	}
	oldest := uint64(1<<64 - 1)
	for w := range ct.windows {
		oldest = min(oldest, w.seq)
	}
	for k, s := range ct.touched {
		if s <= oldest {
			delete(ct.touched, k)
		}
	}
}

// copyDone forgets a table whose copy the last commit completed.
func (p *Pipeline) copyDone(ct *copyTable) {
	if ct.cancel != nil {
		ct.cancel()
	}
	delete(p.copies, ct.id)
	p.mu.Lock()
	cp := p.progress[ct.id]
	delete(p.progress, ct.id)
	p.mu.Unlock()
	secs := 0.0
	if cp != nil {
		secs = time.Since(cp.Started).Seconds()
	}
	p.log.Info("initial copy finished", "table", ct.id.String(), "rows", ct.state.Rows, "seconds", secs)
	if len(p.copies) == 0 {
		p.log.Info("all initial copies finished")
	}
	if p.copyCtx != nil {
		p.startWaiting(p.copyCtx)
	}
}

// cancelCopy ends a table's copy without completing it (pipeline goroutine).
func (p *Pipeline) cancelCopy(id cdcsync.TableID) {
	ct := p.copies[id]
	if ct == nil {
		return
	}
	if ct.cancel != nil {
		ct.cancel()
	}
	for _, r := range ct.pending {
		r.reply <- gone
	}
	delete(p.copies, id)
	p.mu.Lock()
	delete(p.progress, id)
	p.mu.Unlock()
	if p.copyCtx != nil {
		p.startWaiting(p.copyCtx)
	}
}

func (p *Pipeline) setProgress(id cdcsync.TableID, f func(*CopyProgress)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cp := p.progress[id]
	if cp == nil {
		cp = &CopyProgress{Table: id}
		p.progress[id] = cp
	}
	f(cp)
}

// Copying returns the progress of the copies running now.
func (p *Pipeline) Copying() []CopyProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]CopyProgress, 0, len(p.progress))
	for _, cp := range p.progress {
		out = append(out, *cp)
	}
	return out
}

// Resync copies a table afresh while the others stream: the pipeline
// commits what it holds, empties the table at the current position and
// copies it again in chunks. The sink must implement CopySink.
func (p *Pipeline) Resync(ctx context.Context, id cdcsync.TableID) error {
	req := resyncReq{id: id, reply: make(chan error, 1)}
	select {
	case p.copier.resyncs <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.done:
		return errors.New("the pipeline is not running")
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// resync starts a fresh copy of id (pipeline goroutine); barrier commits
// everything read before.
func (p *Pipeline) resync(ctx context.Context, id cdcsync.TableID, barrier func() error) error {
	cs, ok := p.sink.(CopySink)
	if !ok || p.copier.opts.Source == nil {
		return errors.New("this pipeline cannot copy tables")
	}
	if p.schemas[id] == nil {
		return fmt.Errorf("%s is not mirrored by this pipeline now (not selected, stopped or dropped); "+
			"a stopped table is copied again when its Iceberg table is dropped and cdcsync restarted", id)
	}
	if err := barrier(); err != nil {
		return err
	}
	p.awaitMaintenance()
	epoch := p.nextEpoch
	if err := cs.StartCopy(ctx, id, epoch, p.pos); err != nil {
		return fmt.Errorf("%w: start copying %s afresh: %w", ErrCommit, id, err)
	}
	p.nextEpoch++
	p.cancelCopy(id)
	delete(p.skip, id)
	p.addCopy(id, cdcsync.CopyState{}, true)
	p.startWaiting(p.copyCtx)
	p.log.Info("copying the table afresh (resync)", "table", id.String(), "position", p.pos.String())
	return nil
}

func (p *Pipeline) addCopy(id cdcsync.TableID, st cdcsync.CopyState, clean bool) *copyTable {
	ct := &copyTable{id: id, state: st, clean: clean, touched: map[string]uint64{},
		pending: map[int]*chunkResult{}, windows: map[*window]struct{}{}}
	p.copies[id] = ct
	p.setProgress(id, func(cp *CopyProgress) { cp.Rows = st.Rows })
	return ct
}

// includes says whether position a includes b (false when they cannot be
// compared).
func (p *Pipeline) includes(a, b cdcsync.Position) bool {
	ok, err := p.opts.Order.Includes(a, b)
	return err == nil && ok
}

// schemaChanged makes chunks read before a schema change or TRUNCATE of a
// copying table be read again.
func (p *Pipeline) schemaChanged(id cdcsync.TableID) {
	if ct := p.copies[id]; ct != nil {
		ct.gen++
		for n, r := range ct.pending {
			delete(ct.pending, n)
			delete(ct.windows, r.w)
			r.reply <- again
		}
	}
}
