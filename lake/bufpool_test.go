package lake

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/array"
)

func TestBufPool(t *testing.T) {
	p := &bufPool{poison: true}
	for _, size := range []int{0, 1, 63, 64, 65, 1000, 4096, 1<<20 + 3, 1<<poolMaxShift + 1} {
		b := p.Allocate(size)
		if len(b) != size {
			t.Fatalf("Allocate(%d) gave %d bytes", size, len(b))
		}
		if size > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%poolAlign != 0 {
			t.Fatalf("Allocate(%d) is not aligned to %d", size, poolAlign)
		}
		if c := classOf(size); c >= 0 && (cap(b) < size || cap(b) >= 2*max(size, 1<<poolMinShift)) {
			t.Fatalf("Allocate(%d) has capacity %d", size, cap(b))
		}
		for i := range b {
			b[i] = byte(i)
		}
		p.Free(b)
		// A buffer of the class again, recycled or not, comes back zeroed.
		if b2 := p.Allocate(size); bytes.Count(b2, []byte{0}) != size {
			t.Fatalf("Allocate(%d) after a Free is not zeroed", size)
		}
	}
}

// Only the buffers of a class go back to the pool; one larger than every
// class (a batch of LONGBLOBs) goes to the collector, whatever its size.
func TestBufPoolFreedClass(t *testing.T) {
	p := &bufPool{}
	for _, size := range []int{1, 64, 100, 4096, 1 << poolMaxShift} {
		if c := freedClass(cap(p.Allocate(size))); c != classOf(size) {
			t.Errorf("a buffer of %d bytes goes back to class %d, want %d", size, c, classOf(size))
		}
	}
	for _, size := range []int{1<<poolMaxShift + 1, 5 << 20, 1 << (poolMaxShift + 1), 1 << 30} {
		if c := freedClass(cap(p.Allocate(size))); c != -1 {
			t.Errorf("a buffer of %d bytes, larger than every class, goes back to class %d", size, c)
		}
	}
}

func TestBufPoolReallocate(t *testing.T) {
	p := &bufPool{}
	b := p.Allocate(10)
	copy(b, "0123456789")
	b = p.Reallocate(40, b) // within its class: same memory
	if string(b[:10]) != "0123456789" || bytes.Count(b[10:], []byte{0}) != 30 {
		t.Fatalf("grown in place: %q", b)
	}
	b = p.Reallocate(5000, b) // a larger class: copied
	if len(b) != 5000 || string(b[:10]) != "0123456789" || bytes.Count(b[10:], []byte{0}) != 4990 {
		t.Fatalf("grown to a larger class: %q", b[:20])
	}
	b = p.Reallocate(3, b)
	if string(b) != "012" {
		t.Fatalf("shrunk: %q", b)
	}
	// Bytes beyond a shrink come back zeroed when it grows again.
	if b = p.Reallocate(10, b); string(b[:3]) != "012" || bytes.Count(b[3:], []byte{0}) != 7 {
		t.Fatalf("grown after a shrink: %q", b)
	}
}

// A freed buffer is poisoned, so a use after its release reads 0xA5, not
// the values it held.
func TestBufPoolPoisons(t *testing.T) {
	p := &bufPool{poison: true}
	b := p.Allocate(100)
	copy(b, "values")
	p.Free(b)
	if b[0] != 0xA5 || b[99] != 0xA5 {
		t.Fatalf("freed buffer holds %q", b[:6])
	}
}

// Arrow hands a builder's buffers back to the pool when the array built
// from them is released: the memory an array read from is poisoned then.
func TestBufPoolGetsArrowBuffersBack(t *testing.T) {
	p := &bufPool{poison: true}
	b := array.NewInt64Builder(p)
	for i := range 1000 {
		b.Append(int64(i))
	}
	arr := b.NewInt64Array()
	b.Release()
	vals := arr.Int64Values()
	if vals[999] != 999 {
		t.Fatalf("built %d", vals[999])
	}
	arr.Release()
	if uint64(vals[999]) != 0xA5A5A5A5A5A5A5A5 {
		t.Fatalf("released array's memory holds %x, not the poison", vals[999])
	}
}
