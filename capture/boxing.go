package capture

import (
	"math"
	"unsafe"
)

// Boxing a row's values with few allocations.
//
// cdcsync.Row holds its values as interfaces, and converting an int64 or a
// string to an interface allocates a copy of it: one allocation per value,
// which was 80% of the objects the binlog catch-up allocated and most of
// the garbage collector's work. A rowBlock holds the numbers and temporals
// of one row in one allocation and its string headers in another, and the
// row's interfaces point into them (boxedAt), as a conversion would point
// into its own copy.

// eface is the layout of an interface value (runtime.eface): its dynamic
// type, and a pointer to the value for types that are not pointers.
type eface struct{ typ, data unsafe.Pointer }

func dynamicType(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

// The dynamic types of the values boxedAt makes (constants once set).
var (
	efaceInt32   = dynamicType(int32(0))
	efaceInt64   = dynamicType(int64(0))
	efaceFloat32 = dynamicType(float32(0))
	efaceFloat64 = dynamicType(float64(0))
	efaceString  = dynamicType("")
)

// boxedAt returns the interface value of type typ whose value is at p,
// without copying it to an allocation of its own. p must hold a value of
// that type (the bits of a number, little-endian, at its start) and must
// never change afterwards.
func boxedAt(typ, p unsafe.Pointer) (v any) {
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = typ, p
	return v
}

// rowBlock boxes the values of one row. Its slices are made with their
// final capacity and only grow within it, so the values already boxed
// never move; past the capacity a value is boxed the usual way.
type rowBlock struct {
	nums []uint64
	strs []string
}

// newRowBlock makes a block for up to nums numbers or temporals and strs
// strings.
func newRowBlock(nums, strs int) rowBlock {
	var b rowBlock
	if nums > 0 {
		b.nums = make([]uint64, 0, nums)
	}
	if strs > 0 {
		b.strs = make([]string, 0, strs)
	}
	return b
}

// num boxes the bits of a number of type typ, or returns false when the
// block is full.
func (b *rowBlock) num(typ unsafe.Pointer, bits uint64) (any, bool) {
	i := len(b.nums)
	if i == cap(b.nums) {
		return nil, false
	}
	b.nums = b.nums[:i+1]
	b.nums[i] = bits
	return boxedAt(typ, unsafe.Pointer(&b.nums[i])), true
}

func (b *rowBlock) int32(v int32) any {
	if x, ok := b.num(efaceInt32, uint64(uint32(v))); ok {
		return x
	}
	return v
}

func (b *rowBlock) int64(v int64) any {
	if x, ok := b.num(efaceInt64, uint64(v)); ok {
		return x
	}
	return v
}

func (b *rowBlock) float32(v float32) any {
	if x, ok := b.num(efaceFloat32, uint64(math.Float32bits(v))); ok {
		return x
	}
	return v
}

func (b *rowBlock) float64(v float64) any {
	if x, ok := b.num(efaceFloat64, math.Float64bits(v)); ok {
		return x
	}
	return v
}

// string boxes s, whose bytes must never change.
func (b *rowBlock) string(s string) any {
	i := len(b.strs)
	if i == cap(b.strs) {
		return s
	}
	b.strs = b.strs[:i+1]
	b.strs[i] = s
	return boxedAt(efaceString, unsafe.Pointer(&b.strs[i]))
}
