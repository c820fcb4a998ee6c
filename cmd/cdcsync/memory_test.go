package main

import (
	"testing"

	"github.com/cdcsync/cdcsync/config"
)

// The executable's code counts in the resident memory memory_limit
// bounds: the Go runtime gets what it leaves, at least half.
func TestGoMemoryLimit(t *testing.T) {
	code := residentCode()
	if code < 1<<20 {
		t.Fatalf("residentCode() = %d bytes, want the test binary's mapped size (megabytes)", code)
	}
	for _, c := range []struct {
		limit         config.ByteSize
		code, offHeap int64
		want          config.ByteSize
	}{
		{512 << 20, 112 << 20, 0, 400 << 20},
		{512 << 20, 112 << 20, 96 << 20, 304 << 20},
		{256 << 20, 200 << 20, 0, 128 << 20},
		{1 << 30, 0, 0, 1 << 30},
	} {
		if got := goMemoryLimit(c.limit, c.code, c.offHeap); got != c.want {
			t.Errorf("goMemoryLimit(%s, %d, %d) = %s, want %s", c.limit, c.code, c.offHeap, got, c.want)
		}
	}
}
