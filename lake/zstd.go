package lake

import (
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// Parquet pages are compressed one at a time (EncodeAll), and a page is
// about 1 MiB (the writers' data page size). arrow-go's zstd codec makes
// its encoders with zstd's default window of 8 MiB, so each holds a
// 16 MiB history buffer to compress a 1 MiB page, and it keeps them in a
// sync.Pool, which the collector empties: the daemon made a new encoder,
// and 16 MiB of garbage, about once a second at 10,000 changes/s (880 MB
// of its 8.1 GB of allocations in a minute), and three writers at once
// held 48 MiB of history. pageZstd encodes with a window of pageWindow
// (the output differs only for pages larger than that, whose matches may
// not reach further back) and keeps up to keptEncoders encoders per level
// across collections. Decoding and streams stay arrow-go's.
//
// The codec registry is arrow-go's and process-wide: every Parquet file
// the process writes with zstd, cdcsync's and iceberg-go's (compaction),
// goes through pageZstd.
func init() {
	base, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		panic(fmt.Sprintf("arrow-go has no zstd codec: %v", err))
	}
	compress.RegisterCodec(compress.Codecs.Zstd, &pageZstd{Codec: base, free: map[zstd.EncoderLevel]chan *zstd.Encoder{}})
}

const (
	pageWindow   = 1 << 20
	keptEncoders = 4
)

type pageZstd struct {
	compress.Codec // arrow-go's: Decode, CompressBound

	mu   sync.Mutex
	free map[zstd.EncoderLevel]chan *zstd.Encoder
}

func (z *pageZstd) Encode(dst, src []byte) []byte {
	return z.EncodeLevel(dst, src, compress.DefaultCompressionLevel)
}

func (z *pageZstd) EncodeLevel(dst, src []byte, level int) []byte {
	l := zstd.SpeedDefault
	if level != compress.DefaultCompressionLevel {
		l = zstd.EncoderLevelFromZstd(level)
	}
	z.mu.Lock()
	free := z.free[l]
	if free == nil {
		free = make(chan *zstd.Encoder, keptEncoders)
		z.free[l] = free
	}
	z.mu.Unlock()
	var enc *zstd.Encoder
	select {
	case enc = <-free:
	default:
		var err error
		enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(l), zstd.WithWindowSize(pageWindow),
			zstd.WithZeroFrames(true), zstd.WithEncoderConcurrency(1), zstd.WithAllLitEntropyCompression(true))
		if err != nil {
			panic(fmt.Sprintf("zstd encoder at level %d: %v", level, err)) // constant options: cannot happen
		}
	}
	out := enc.EncodeAll(src, dst[:0])
	select {
	case free <- enc:
	default:
	}
	return out
}

// DecodeWithError, NewReader, NewWriter and NewWriterLevel are arrow-go's
// (compress.ErrorCodec and compress.StreamingCodec).

func (z *pageZstd) DecodeWithError(dst, src []byte) ([]byte, error) {
	if c, ok := z.Codec.(compress.ErrorCodec); ok {
		return c.DecodeWithError(dst, src)
	}
	return compress.Decode(z.Codec, dst, src)
}

func (z *pageZstd) NewReader(r io.Reader) io.ReadCloser {
	return z.Codec.(compress.StreamingCodec).NewReader(r)
}

func (z *pageZstd) NewWriter(w io.Writer) io.WriteCloser {
	return z.Codec.(compress.StreamingCodec).NewWriter(w)
}

func (z *pageZstd) NewWriterLevel(w io.Writer, level int) (io.WriteCloser, error) {
	return z.Codec.(compress.StreamingCodec).NewWriterLevel(w, level)
}
