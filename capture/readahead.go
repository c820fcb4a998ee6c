package capture

import (
	"context"
	"net"
	"sync"
	"time"
)

// readAhead bounds the binlog that go-mysql reads and decodes ahead of the
// reader. Its channel of decoded events is bounded in events, not bytes:
// with rows of large values (a LONGBLOB of 8 MiB is an event of 8 MiB)
// its 256 events held gigabytes. The connection's reads wait while more
// than limit bytes were read that the reader has not taken as events yet;
// they go on whenever the reader waits for an event (everything read is
// taken then, but the event being read, which may be larger than limit).
type readAhead struct {
	limit int64
	// afterFunc is time.AfterFunc (tests delay its functions).
	afterFunc func(time.Duration, func()) *time.Timer

	mu       sync.Mutex
	cond     *sync.Cond
	ahead    int64  // bytes read and not yet taken as events (approximate: packet headers, TLS)
	starving bool   // the reader waits for an event
	calls    uint64 // the reader's calls of next so far
	waiting  uint64 // the call of next in progress, 0 between calls
	closed   bool
}

func newReadAhead(limit int64) *readAhead {
	ra := &readAhead{limit: limit, afterFunc: time.AfterFunc}
	ra.cond = sync.NewCond(&ra.mu)
	return ra
}

// dialer wraps d so that the connections it makes read within the bound.
func (ra *readAhead) dialer(d func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &aheadConn{Conn: c, ra: ra}, nil
	}
}

// admit waits until a read may go on; it returns how long it waited.
func (ra *readAhead) admit() time.Duration {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if ra.ahead < ra.limit || ra.starving || ra.closed {
		return 0
	}
	start := time.Now()
	for ra.ahead >= ra.limit && !ra.starving && !ra.closed {
		ra.cond.Wait()
	}
	return time.Since(start)
}

func (ra *readAhead) read(n int) {
	ra.mu.Lock()
	ra.ahead += int64(n)
	ra.mu.Unlock()
}

// begin records that the reader asks for an event, and returns the call.
func (ra *readAhead) begin() uint64 {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	ra.calls++
	ra.waiting = ra.calls
	return ra.calls
}

// starve says that the reader waits for an event in call, if that call is
// still in progress. Once it waits, every event read has been taken: what
// is counted is the event in progress or what the approximation missed,
// and the count starts over. The check matters: the timer that calls
// starve may run late, after the call returned (a loaded machine), and
// marking the reader as waiting then let go-mysql read unbounded while
// the reader was busy (64 LONGBLOB events of 2 MiB, 130 MB, under a
// memory_limit of 384 MiB).
func (ra *readAhead) starve(call uint64) {
	ra.mu.Lock()
	if ra.waiting != call {
		ra.mu.Unlock()
		return
	}
	ra.starving, ra.ahead = true, 0
	ra.mu.Unlock()
	ra.cond.Broadcast()
}

// end records that the reader's call returned with an event of n bytes
// (0 for none).
func (ra *readAhead) end(n int) {
	ra.mu.Lock()
	ra.waiting, ra.starving = 0, false
	ra.ahead = max(ra.ahead-int64(n), 0)
	ra.mu.Unlock()
	ra.cond.Broadcast()
}

func (ra *readAhead) close() {
	ra.mu.Lock()
	ra.closed = true
	ra.mu.Unlock()
	ra.cond.Broadcast()
}

// next takes the next event from get, telling the bound when the reader
// starts to wait for one (after a moment: an event already decoded comes
// back at once).
func (ra *readAhead) next(get func() (int, error)) error {
	call := ra.begin()
	t := ra.afterFunc(2*time.Millisecond, func() { ra.starve(call) })
	n, err := get()
	t.Stop()
	ra.end(n)
	return err
}

// aheadConn is a connection whose reads wait for the reader (readAhead).
type aheadConn struct {
	net.Conn
	ra *readAhead

	mu       sync.Mutex
	deadline time.Time // the read deadline go-mysql set
}

func (c *aheadConn) Read(p []byte) (int, error) {
	if waited := c.ra.admit(); waited > 0 {
		// The wait is not the server's silence: move go-mysql's read
		// deadline (a minute) past it.
		c.mu.Lock()
		if !c.deadline.IsZero() {
			c.deadline = c.deadline.Add(waited)
			_ = c.Conn.SetReadDeadline(c.deadline)
		}
		c.mu.Unlock()
	}
	n, err := c.Conn.Read(p)
	c.ra.read(n)
	return n, err
}

func (c *aheadConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *aheadConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *aheadConn) Close() error {
	c.ra.close()
	return c.Conn.Close()
}
