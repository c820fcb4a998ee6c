package lake

import (
	"math/bits"
	"os"
	"sync"
	"unsafe"
)

// bufPool is the Arrow allocator (memory.Allocator) of the record batches
// cdcsync builds to write its files (rows.go). The Parquet writer keeps
// arrow-go's GoAllocator: pooling its page buffers too saved a little more
// but kept the 2 MiB pages of a LONGBLOB table alive, over memory_limit.
// Arrow's GoAllocator leaves every released buffer to the garbage
// collector; writing a row's values that way allocates several times the
// row (2.6 kB per 200-byte row of the bench table), and each collection
// it triggers scans the open epoch's rows, the largest live heap of the
// daemon. bufPool recycles released buffers by power-of-two size class
// instead. Like GoAllocator it returns zeroed memory aligned to 64 bytes.
//
// A buffer used after it was released would now hold another batch's
// values instead of being kept alive by the collector. With poison set
// (CDCSYNC_POISON_FREED_BUFFERS=1, which scripts/test.sh sets) Free fills
// a buffer with 0xA5 before pooling it, so that such a use shows in every
// test that reads back what was written.
type bufPool struct {
	classes [poolClasses]sync.Pool
	poison  bool
}

const (
	poolMinShift = 6 // 64 bytes, the smallest class
	// poolMaxShift is the largest pooled class, 4 MiB: the buffers of a
	// batch of ordinary rows (64k rows of a few hundred bytes) fit, and
	// larger ones (a batch of LONGBLOBs) are left to the collector, as
	// GoAllocator leaves them, without rounding them up to a class: a
	// pool of them would hold memory_limit's worth of idle buffers.
	poolMaxShift = 22
	poolClasses  = poolMaxShift - poolMinShift + 1
	poolAlign    = 64
)

// writeBuffers is the pool every table's writes share.
var writeBuffers = &bufPool{poison: os.Getenv("CDCSYNC_POISON_FREED_BUFFERS") == "1"}

// classOf returns the class whose buffers hold size bytes, or -1 when
// size is larger than any class.
func classOf(size int) int {
	if size <= 1<<poolMinShift {
		return 0
	}
	c := bits.Len(uint(size-1)) - poolMinShift
	if c >= poolClasses {
		return -1
	}
	return c
}

func (p *bufPool) Allocate(size int) []byte {
	c := classOf(size)
	if c < 0 {
		return aligned(size)
	}
	if v := p.classes[c].Get(); v != nil {
		b := (*v.(*[]byte))[:size]
		clear(b)
		return b
	}
	return aligned(1 << (c + poolMinShift))[:size]
}

func (p *bufPool) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		old := len(b)
		b = b[:size]
		if size > old {
			clear(b[old:])
		}
		return b
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free takes back a buffer Allocate or Reallocate returned: into the pool
// of its class, or to the collector when it is larger than any class.
func (p *bufPool) Free(b []byte) {
	if p.poison {
		b = b[:cap(b)]
		for i := range b {
			b[i] = 0xA5
		}
	}
	if c := freedClass(cap(b)); c >= 0 {
		b = b[:0]
		p.classes[c].Put(&b)
	}
}

// freedClass is the class a freed buffer of capacity n goes back to, or
// -1 when it goes to the collector: Allocate gives a class's buffers a
// capacity of exactly the class's size, a power of two, and a buffer too
// large for any class its requested size.
func freedClass(n int) int {
	if n < 1<<poolMinShift || n&(n-1) != 0 {
		return -1
	}
	if c := bits.Len(uint(n)) - 1 - poolMinShift; c < poolClasses {
		return c
	}
	return -1
}

// aligned returns n zeroed bytes starting at a multiple of poolAlign,
// with a capacity of exactly n (see freedClass).
func aligned(n int) []byte {
	buf := make([]byte, n+poolAlign)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(buf))) % poolAlign); r != 0 {
		off = poolAlign - r
	}
	return buf[off : off+n : off+n]
}
