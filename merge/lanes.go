package merge

import (
	"slices"
	"strings"

	"github.com/cdcsync/cdcsync"
)

// Commit lanes: each table commits its epochs one at a time and in order,
// but not in step with the other tables. When the next epoch is due while
// a table still commits an earlier one (a finely partitioned table, a
// large rewrite), Run seals the epoch without it and carries its changes
// over into the next (Buffer.Split): the other tables commit on time
// instead of waiting for the slowest one (issue 23). The checkpoint stays
// before the oldest change carried over, so a restart reads it again and
// each table passes over what it holds; the carried table's commit records
// the epochs it spans, which cut refuses.

// maxEpochsInFlight bounds the epochs sealed and not yet done: while one
// table's commit takes many intervals, each epoch the others commit
// waits for it to finish its bookkeeping (checkpoint, maintenance) in
// order. Their rows are let go as their tables commit, so each costs
// little; past the bound every table waits, as before carrying.
const maxEpochsInFlight = 64

// carries reports whether the open epoch may be sealed without the tables
// that still commit: not inside a fragmented transaction, nor while copies
// or repairs run (their chunks are merged into the open epoch with
// bookkeeping that assumes one epoch at a time), nor with foreign-key
// cascades, whose tables must commit each epoch in rank order.
func (p *Pipeline) carries() bool {
	return !p.midTxn && len(p.copies) == 0 && len(p.repairs) == 0 && len(p.opts.ForeignKeys) == 0
}

// claimLanes records that job's tables are committing.
func (p *Pipeline) claimLanes(job *commitJob) {
	p.laneMu.Lock()
	for _, id := range job.tables {
		p.lanes[id]++
	}
	if len(job.tables) > 0 {
		p.laneJobs[job] = len(job.tables)
	}
	p.laneMu.Unlock()
	p.mu.Lock()
	if !job.buf.First.IsZero() {
		p.pendingJobs[job] = job.buf.First
	}
	p.refreshPending()
	p.mu.Unlock()
}

// laneDone records that table id's commit of job ended; stopped keeps its
// lane taken until Run has stopped the table (afterCommit). Without
// foreign keys, whose cascades read the buffers of committing epochs, the
// table's rows are let go at once: a carry keeps the job's buffer alive
// while its slowest table commits.
func (p *Pipeline) laneDone(job *commitJob, id cdcsync.TableID, stopped bool) {
	p.laneMu.Lock()
	if !stopped {
		p.releaseLane(id)
	}
	if p.laneJobs[job]--; p.laneJobs[job] <= 0 {
		delete(p.laneJobs, job)
	}
	p.laneMu.Unlock()
	if len(p.opts.ForeignKeys) == 0 {
		job.buf.Release(id)
	}
	select {
	case p.laneFree <- struct{}{}:
	default:
	}
}

// releaseLane frees table id's lane; laneMu is held.
func (p *Pipeline) releaseLane(id cdcsync.TableID) {
	if p.lanes[id]--; p.lanes[id] <= 0 {
		delete(p.lanes, id)
	}
}

// laneFreeFor reports whether the open epoch buf has a table that commits
// no earlier epoch, and at most one epoch has tables committing: two
// would be held in memory beside the open one. Run calls it after every
// transaction while a commit is slow, so it allocates nothing.
func (p *Pipeline) laneFreeFor(buf *Buffer) bool {
	p.laneMu.Lock()
	defer p.laneMu.Unlock()
	if len(p.laneJobs) > 1 {
		return false
	}
	for id := range buf.tables {
		if p.lanes[id] == 0 {
			return true
		}
	}
	return false
}

// laneBusy reports whether table id is committing an epoch.
func (p *Pipeline) laneBusy(id cdcsync.TableID) bool {
	p.laneMu.Lock()
	defer p.laneMu.Unlock()
	return p.lanes[id] > 0
}

// endCarry notes that no table is carried over any more.
func (p *Pipeline) endCarry() {
	if p.carrying {
		p.carrying = false
		p.log.Info("the tables carried over have committed: every table commits each epoch again", "epoch", p.nextEpoch)
	}
}

// refreshPending sets pending, the MySQL commit time of the oldest
// transaction read but not committed, from the open epoch and the epochs
// whose tables still commit; p.mu is held.
func (p *Pipeline) refreshPending() {
	oldest := p.openFirst
	for _, t := range p.pendingJobs {
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	p.pending = oldest
}

// joinIDs lists tables for a log line.
func joinIDs(ids []cdcsync.TableID) string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = id.String()
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}
