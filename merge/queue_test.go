package merge

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// The stream waits once the transactions it read but the pipeline has not
// taken hold the budget; a transaction larger than the budget passes alone.
func TestTxnQueueBoundsBytes(t *testing.T) {
	var queued atomic.Int64
	q := newTxnQueue(3<<20, func(d int64) { queued.Add(d) })
	in := make(chan *cdcsync.Txn)
	go q.feed(context.Background(), in)
	sent := make(chan int, 16)
	go func() {
		for i, size := range []int{1 << 20, 1 << 20, 1 << 20, 1 << 20, 10 << 20, 1 << 20} {
			in <- &cdcsync.Txn{Bytes: size}
			sent <- i
		}
		close(in)
	}()
	// Nothing is taken: the feeder holds three 1 MiB transactions (the
	// budget), the stream has handed over the fourth and waits on the fifth.
	time.Sleep(200 * time.Millisecond)
	if n := len(sent); n != 4 {
		t.Fatalf("the stream handed over %d transactions with nothing taken, want 4 (3 MiB queued, one waiting for room)", n)
	}
	if n := queued.Load(); n != 3<<20 {
		t.Errorf("queued %d bytes, want %d", n, 3<<20)
	}
	var got []int
	for tx := range q.out {
		got = append(got, tx.Bytes)
		q.received(tx)
	}
	if len(got) != 6 || got[4] != 10<<20 {
		t.Errorf("received %v, want all six in order, the 10 MiB one included", got)
	}
	if n := queued.Load(); n != 0 {
		t.Errorf("%d bytes still counted as queued", n)
	}
}

// A feeder whose pipeline stopped ends when its context does.
func TestTxnQueueStopsWithItsContext(t *testing.T) {
	q := newTxnQueue(1<<20, nil)
	in := make(chan *cdcsync.Txn, 4)
	for range 4 {
		in <- &cdcsync.Txn{Bytes: 1 << 20}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.feed(ctx, in); close(done) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the feeder did not stop with its context")
	}
}
