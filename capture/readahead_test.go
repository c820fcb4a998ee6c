package capture

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// Reads stop once the bytes read and not taken reach the limit, go on as
// events are taken, and go on whatever the count while the reader waits
// for an event (an event larger than the limit must be read whole).
func TestReadAheadBoundsReads(t *testing.T) {
	server, client := net.Pipe()
	defer server.Close()
	ra := newReadAhead(64 << 10)
	conn := &aheadConn{Conn: client, ra: ra}
	defer conn.Close()
	go func() {
		buf := make([]byte, 16<<10)
		for {
			if _, err := server.Write(buf); err != nil {
				return
			}
		}
	}()
	var read atomic.Int64
	go func() {
		buf := make([]byte, 16<<10)
		for {
			n, err := conn.Read(buf)
			read.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	settle := func() int64 {
		for last := int64(-1); ; {
			time.Sleep(50 * time.Millisecond)
			if n := read.Load(); n == last {
				return n
			} else {
				last = n
			}
		}
	}
	if n := settle(); n < 64<<10 || n > 80<<10 {
		t.Fatalf("read %d bytes with nothing taken, want the 64 KiB limit (and one read more)", n)
	}
	ra.begin()
	ra.end(32 << 10)
	if n := settle(); n < 96<<10 || n > 112<<10 {
		t.Fatalf("read %d bytes after 32 KiB were taken, want about 96 KiB", n)
	}
	ra.starve(ra.begin())
	time.Sleep(50 * time.Millisecond)
	ra.end(0)
	if n := read.Load(); n < 1<<20 {
		t.Fatalf("read %d bytes while the reader waited, want reads to go on", n)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
}

// A timer that marks the reader as waiting may run after the reader's
// call returned (on a loaded machine): it must not lift the bound while
// the reader is busy with the event it got. (It did: go-mysql read 64
// LONGBLOB events of 2 MiB ahead while the pipeline wrote out an epoch.)
func TestReadAheadLateTimer(t *testing.T) {
	ra := newReadAhead(1 << 20)
	var late []func()
	ra.afterFunc = func(_ time.Duration, f func()) *time.Timer {
		late = append(late, f)
		return time.AfterFunc(time.Hour, func() {})
	}
	ra.read(4 << 20)
	if err := ra.next(func() (int, error) { return 1 << 20, nil }); err != nil {
		t.Fatal(err)
	}
	if len(late) != 1 {
		t.Fatalf("next set %d timers, want 1", len(late))
	}
	late[0]() // the reader is busy now
	admitted := make(chan struct{})
	go func() {
		ra.admit()
		close(admitted)
	}()
	select {
	case <-admitted:
		t.Fatal("a read was admitted with 3 MiB read ahead (limit 1 MiB) after a late timer: the reader's wait had ended")
	case <-time.After(100 * time.Millisecond):
	}
	// The reader waits for its next event: reads go on.
	ra.starve(ra.begin())
	select {
	case <-admitted:
	case <-time.After(5 * time.Second):
		t.Fatal("no read admitted while the reader waits for an event")
	}
	ra.end(0)
	ra.close()
}
