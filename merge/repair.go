package merge

import (
	"context"
	"errors"
	"fmt"

	"github.com/cdcsync/cdcsync"
)

// Repair (`cdcsync verify --repair`) copies chosen rows of a streaming
// table again, through the epoch protocol, the way the initial copy merges
// a chunk. Before the rows are read, a window opens that notes the
// stream's position W and transaction count; the rows are read in one
// consistent snapshot at position P (read again when P is before W); once
// the stream has read up to P, every key the stream changed since the
// window opened is left alone (the stream holds a newer image, and its
// equality delete replaces whatever the lake had), and every other key
// gets the row MySQL has, or is deleted when MySQL has none. The pipeline
// first commits what it read (a barrier), reads the lake's current rows of
// those keys (their equality deletes carry the partition values of the
// rows they remove), then commits the repair as an epoch of its own at the
// stream's position, and the request returns once that epoch and its
// checkpoint are committed. A crash before that loses the repair, never
// part of it: the table either holds the epoch or not, and the request
// failed.

// KeyReader is implemented by a ChunkSource that reads rows by primary key
// in one consistent snapshot (capture.ChunkReader); Pipeline.Repair needs
// it. Keys are canonical values in key order; keys without a row are left
// out of the result.
type KeyReader interface {
	ReadKeys(ctx context.Context, ts *cdcsync.TableSchema, keys [][]any) ([]cdcsync.Row, cdcsync.Position, error)
}

// RepairResult says what a repair committed.
type RepairResult struct {
	Epoch    int64            // the epoch that holds the repair (0: nothing to commit)
	Pos      cdcsync.Position // its position
	Upserted int              // keys given MySQL's row
	Deleted  int              // keys MySQL has no row for, deleted
	Skipped  int              // keys the stream changed meanwhile: its image is newer
	Absent   int              // keys neither MySQL nor the lake has
}

type repairReq struct {
	id    cdcsync.TableID
	keys  [][]any
	reply chan repairReply
}

type repairReply struct {
	res RepairResult
	err error
}

// repairJob is a repair in flight (pipeline goroutine).
type repairJob struct {
	req     repairReq
	want    map[string]bool   // the keys' encodings
	touched map[string]uint64 // key -> sequence number of the last transaction that changed it
	seq     uint64            // transactions read when the window opened
	pos     cdcsync.Position  // the stream's position then
	schema  *cdcsync.TableSchema
	read    *repairRead // the rows read, once they can merge
	tries   int
	kr      KeyReader
}

type repairRead struct {
	job  *repairJob
	rows []cdcsync.Row
	pos  cdcsync.Position
	err  error
}

// Repair copies the rows of the given primary keys of a streaming table
// afresh from MySQL and returns once they are committed (see the top of
// this file). The copy source must be a KeyReader and the sink a RowFinder.
func (p *Pipeline) Repair(ctx context.Context, id cdcsync.TableID, keys [][]any) (RepairResult, error) {
	req := repairReq{id: id, keys: keys, reply: make(chan repairReply, 1)}
	select {
	case p.copier.repairs <- req:
	case <-ctx.Done():
		return RepairResult{}, ctx.Err()
	case <-p.done:
		return RepairResult{}, errors.New("the pipeline is not running")
	}
	select {
	case r := <-req.reply:
		return r.res, r.err
	case <-ctx.Done():
		return RepairResult{}, ctx.Err()
	case <-p.done:
		select {
		case r := <-req.reply:
			return r.res, r.err
		default:
		}
		return RepairResult{}, errors.New("the pipeline stopped before the repair was committed; run verify again")
	}
}

// startRepair checks a request and starts reading its rows (pipeline
// goroutine).
func (p *Pipeline) startRepair(ctx context.Context, req repairReq) {
	fail := func(err error) { req.reply <- repairReply{err: err} }
	ts := p.schemas[req.id]
	kr, ok := p.copier.opts.Source.(KeyReader)
	switch {
	case !ok || p.rows == nil:
		fail(errors.New("this pipeline cannot read rows by key"))
		return
	case ts == nil:
		fail(fmt.Errorf("%s is not mirrored by this pipeline now (not selected, stopped or dropped)", req.id))
		return
	case p.copies[req.id] != nil:
		fail(fmt.Errorf("%s is being copied; its copy brings every row, verify it once the copy is done", req.id))
		return
	case len(req.keys) == 0:
		req.reply <- repairReply{}
		return
	}
	if _, behind := p.skip[req.id]; behind {
		fail(fmt.Errorf("%s is still catching up with its committed position after a restart; try again in a moment", req.id))
		return
	}
	job := &repairJob{req: req, want: map[string]bool{}, touched: map[string]uint64{}, schema: ts, kr: kr}
	for _, k := range req.keys {
		if err := checkKey(ts, k); err != nil {
			fail(fmt.Errorf("%s: %w", req.id, err))
			return
		}
		enc, _ := cdcsync.AppendTuple(nil, k...)
		job.want[string(enc)] = true
	}
	p.repairs[job] = struct{}{}
	p.readRepair(ctx, job)
}

// checkKey checks that key holds one canonical value of each primary-key
// column's kind.
func checkKey(ts *cdcsync.TableSchema, key []any) error {
	if len(key) != len(ts.PrimaryKey) {
		return fmt.Errorf("a key has %d values, the primary key %d columns", len(key), len(ts.PrimaryKey))
	}
	for i, k := range ts.PrimaryKey {
		c := &ts.Columns[k]
		ok := false
		switch key[i].(type) {
		case int32:
			ok = c.Kind == cdcsync.KindInt32 || c.Kind == cdcsync.KindDate
		case int64:
			ok = c.Kind == cdcsync.KindInt64 || c.Kind == cdcsync.KindTimestamp || c.Kind == cdcsync.KindTimestampTZ || c.Kind == cdcsync.KindTime
		case string:
			ok = c.Kind == cdcsync.KindString || c.Kind == cdcsync.KindDecimal
		case []byte:
			ok = c.Kind == cdcsync.KindBinary
		case float32:
			ok = c.Kind == cdcsync.KindFloat32
		case float64:
			ok = c.Kind == cdcsync.KindFloat64
		case bool:
			ok = c.Kind == cdcsync.KindBool
		}
		if !ok {
			return fmt.Errorf("key value %v (%T) does not fit column %s (%s)", key[i], key[i], c.Name, c.Kind)
		}
	}
	return nil
}

// readRepair opens the job's window and reads its rows in the background.
func (p *Pipeline) readRepair(ctx context.Context, job *repairJob) {
	job.seq, job.pos, job.read = p.seq, p.readPos, nil
	clear(job.touched)
	job.tries++
	c := p.copier
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		rows, pos, err := job.kr.ReadKeys(ctx, job.schema, job.req.keys)
		select {
		case c.repairRead <- &repairRead{job: job, rows: rows, pos: pos, err: err}:
		case <-ctx.Done():
		}
	}()
}

// receiveRepair takes the rows a repair read (pipeline goroutine): they
// wait until the stream reaches their position, or are read again.
func (p *Pipeline) receiveRepair(ctx context.Context, r *repairRead) {
	job := r.job
	if _, ok := p.repairs[job]; !ok {
		return
	}
	if r.err != nil {
		p.endRepair(job, RepairResult{}, fmt.Errorf("read the rows to repair: %w", r.err))
		return
	}
	if ok, err := p.opts.Order.Includes(r.pos, job.pos); err != nil || !ok {
		// The snapshot predates the window: read again.
		if job.tries >= 10 {
			p.endRepair(job, RepairResult{}, fmt.Errorf("the rows to repair could not be read after the stream's position (%v)", err))
			return
		}
		p.readRepair(ctx, job)
		return
	}
	job.read = r
}

// mergeRepairs commits the repairs whose rows the stream has caught up
// with (pipeline goroutine). barrier commits what was read before; open
// returns the open epoch.
func (p *Pipeline) mergeRepairs(ctx context.Context, barrier func() error, open func() *Buffer) error {
	for job := range p.repairs {
		if job.read == nil {
			continue
		}
		ok, err := p.opts.Order.Includes(p.readPos, job.read.pos)
		if err != nil {
			p.endRepair(job, RepairResult{}, fmt.Errorf("order the repair's read with the stream: %w", err))
			continue
		}
		if !ok {
			continue
		}
		res, fatal, err := p.mergeRepair(ctx, job, barrier, open)
		p.endRepair(job, res, err)
		if fatal {
			return err
		}
	}
	return nil
}

// mergeRepair commits one repair; fatal says that err is a failed commit,
// which ends the pipeline.
func (p *Pipeline) mergeRepair(ctx context.Context, job *repairJob, barrier func() error, open func() *Buffer) (res RepairResult, fatal bool, err error) {
	id, ts := job.req.id, job.schema
	if p.schemas[id] != ts || p.copies[id] != nil {
		return res, false, fmt.Errorf("%s changed (a schema change, a copy, a stop or a drop) while its rows were read; run verify again", id)
	}
	if err := barrier(); err != nil {
		return res, true, err
	}
	if p.schemas[id] != ts {
		return res, false, fmt.Errorf("%s stopped while its rows were read; run verify again", id)
	}
	cols := ts.PrimaryKey
	lakeRows, err := p.rows.RowsWhere(ctx, id, cols, job.req.keys)
	if err != nil {
		return res, false, fmt.Errorf("read the lake's rows of the keys to repair: %w", err)
	}
	lake := map[string]cdcsync.Row{}
	var key []byte
	for _, r := range lakeRows {
		if key, err = ts.AppendKey(key[:0], r); err != nil {
			return res, false, err
		}
		lake[string(key)] = r
	}
	mine := map[string]cdcsync.Row{}
	for _, r := range job.read.rows {
		if key, err = ts.AppendKey(key[:0], r); err != nil {
			return res, false, err
		}
		if job.want[string(key)] {
			mine[string(key)] = r
		}
	}
	var entries []repairEntry
	for enc := range job.want {
		if s, ok := job.touched[enc]; ok && s > job.seq {
			res.Skipped++
			continue
		}
		l, m := lake[enc], mine[enc]
		switch {
		case l == nil && m == nil:
			res.Absent++
			continue
		case m == nil:
			res.Deleted++
		default:
			res.Upserted++
		}
		entries = append(entries, repairEntry{lake: l, mysql: m})
	}
	if len(entries) == 0 {
		return res, false, nil
	}
	if err := open().Repair(id, entries, p.pos); err != nil {
		return res, false, err
	}
	if err := barrier(); err != nil {
		return res, true, err
	}
	res.Epoch, res.Pos = p.nextEpoch-1, p.pos
	p.log.Info("rows repaired", "table", id.String(), "upserted", res.Upserted, "deleted", res.Deleted,
		"skipped", res.Skipped, "epoch", res.Epoch, "position", res.Pos.String())
	return res, false, nil
}

// endRepair answers a repair and forgets it.
func (p *Pipeline) endRepair(job *repairJob, res RepairResult, err error) {
	delete(p.repairs, job)
	job.req.reply <- repairReply{res: res, err: err}
}

// endRepairs answers every repair in flight: the pipeline stops.
func (p *Pipeline) endRepairs(err error) {
	for job := range p.repairs {
		p.endRepair(job, RepairResult{}, err)
	}
}

// trackRepairs records the keys a transaction changed in tables being
// repaired (pipeline goroutine).
func (p *Pipeline) trackRepairs(t *cdcsync.Txn, skip func(cdcsync.TableID) bool) error {
	var key []byte
	for job := range p.repairs {
		for i := range t.Changes {
			c := &t.Changes[i]
			if c.Table != job.req.id || skip(c.Table) {
				continue
			}
			var err error
			if key, err = p.changeKeys(c, key, func(k []byte) {
				if job.want[string(k)] {
					job.touched[string(k)] = p.seq
				}
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// repairEntry is one key of a repair: the lake's row (nil: none) and
// MySQL's (nil: none).
type repairEntry struct {
	lake, mysql cdcsync.Row
}

// Repair adds the rows of a repair at position pos: each key's equality
// delete is written from the lake's row (so it carries the partition values
// of the row it removes), or from MySQL's when the lake has none, and its
// final image is MySQL's row (none: deleted). A key the epoch already
// holds keeps its first image.
func (b *Buffer) Repair(id cdcsync.TableID, entries []repairEntry, pos cdcsync.Position) error {
	tb, err := b.table(id)
	if err != nil {
		return err
	}
	for _, e := range entries {
		at, first, before := e.mysql, e.mysql, false
		if e.lake != nil {
			at, first, before = e.lake, e.lake, true
		}
		en, err := tb.touch(at, first, before)
		if err != nil {
			return err
		}
		en.final = e.mysql
		b.Rows++
		if e.mysql != nil {
			b.Bytes += e.mysql.MemSize()
		}
	}
	b.End = pos
	return nil
}
