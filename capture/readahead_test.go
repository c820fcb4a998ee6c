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
	ra.took(32 << 10)
	if n := settle(); n < 96<<10 || n > 112<<10 {
		t.Fatalf("read %d bytes after 32 KiB were taken, want about 96 KiB", n)
	}
	ra.starve(true)
	time.Sleep(50 * time.Millisecond)
	ra.starve(false)
	if n := read.Load(); n < 1<<20 {
		t.Fatalf("read %d bytes while the reader waited, want reads to go on", n)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
}
