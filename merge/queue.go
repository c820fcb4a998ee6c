package merge

import (
	"context"

	"golang.org/x/sync/semaphore"

	"github.com/cdcsync/cdcsync"
)

// txnQueue carries whole transactions from the source's stream to the
// pipeline within a budget of bytes (the decoded changes' Go heap,
// Txn.Bytes), so that a backlog of large transactions waits in the binlog,
// not in memory: the stream blocks once the queued transactions hold the
// budget. A transaction larger than the whole budget passes alone.
type txnQueue struct {
	budget int64
	sem    *semaphore.Weighted
	out    chan *cdcsync.Txn
	queued func(delta int64) // reports the bytes queued (a metric); may be nil
}

func newTxnQueue(budget int64, queued func(int64)) *txnQueue {
	budget = max(budget, 1)
	return &txnQueue{budget: budget, sem: semaphore.NewWeighted(budget), out: make(chan *cdcsync.Txn, 64), queued: queued}
}

func (q *txnQueue) weight(t *cdcsync.Txn) int64 {
	return min(max(int64(t.Bytes), 1), q.budget)
}

// feed moves the stream's transactions from in into the queue until in is
// closed, then closes the queue; it stops early when ctx ends.
func (q *txnQueue) feed(ctx context.Context, in <-chan *cdcsync.Txn) {
	defer close(q.out)
	for t := range in {
		n := q.weight(t)
		if err := q.sem.Acquire(ctx, n); err != nil {
			return
		}
		if q.queued != nil {
			q.queued(n)
		}
		select {
		case q.out <- t:
		case <-ctx.Done():
			return
		}
	}
}

// received releases t's bytes: the pipeline took it (its changes now count
// in the open epoch, which epoch.max_bytes bounds).
func (q *txnQueue) received(t *cdcsync.Txn) {
	n := q.weight(t)
	q.sem.Release(n)
	if q.queued != nil {
		q.queued(-n)
	}
}
