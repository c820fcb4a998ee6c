package lake

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
)

// zstdPage is n bytes of text-like data that compresses about 3:1.
func zstdPage(n int) []byte {
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	words := []string{"order ", "paid ", "2026-12-06 ", "customer ", "42 ", "refund ", "shipped "}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(byte('a' + rng.IntN(26)))
	}
	return b.Bytes()[:n]
}

// The zstd codec that Parquet writers get is pageZstd: pages round-trip
// at the default and explicit levels, and compressing a page after a
// collection does not make a new encoder (arrow-go's made one of 16 MiB
// of history per page after each collection).
func TestPageZstd(t *testing.T) {
	codec, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	z, ok := codec.(*pageZstd)
	if !ok {
		t.Fatalf("the registered zstd codec is %T, want *pageZstd", codec)
	}
	for _, n := range []int{100, 64 << 10, 1 << 20, 3 << 20} {
		src := zstdPage(n)
		for _, level := range []int{compress.DefaultCompressionLevel, 1, 9} {
			enc := codec.EncodeLevel(nil, src, level)
			dec, err := compress.Decode(codec, make([]byte, n), enc)
			if err != nil {
				t.Fatalf("%d bytes at level %d: %v", n, level, err)
			}
			if !bytes.Equal(dec, src) {
				t.Fatalf("%d bytes at level %d: decoded differs", n, level)
			}
			if n >= 64<<10 && len(enc) > n/2 {
				t.Errorf("%d bytes at level %d compressed to %d", n, level, len(enc))
			}
		}
	}

	// allocated returns the bytes allocated by 10 pages compressed each
	// after a collection.
	page := zstdPage(1 << 20)
	allocated := func(c compress.Codec) uint64 {
		var before, after runtime.MemStats
		dst := make([]byte, 0, c.CompressBound(int64(len(page))))
		c.EncodeLevel(dst, page, compress.DefaultCompressionLevel) // warm
		runtime.ReadMemStats(&before)
		for range 10 {
			runtime.GC()
			c.EncodeLevel(dst, page, compress.DefaultCompressionLevel)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	ours, theirs := allocated(z), allocated(z.Codec)
	t.Logf("10 pages of 1 MiB, each after a collection: %d KiB allocated (arrow-go's codec: %d KiB)", ours>>10, theirs>>10)
	if ours > 4<<20 {
		t.Errorf("10 pages of 1 MiB, each after a collection, allocated %d KiB: the encoders are not kept", ours>>10)
	}
}
