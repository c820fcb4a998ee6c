package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/pkindex"
)

// goMemoryLimit is the Go runtime's share of memory_limit: what the
// executable's mapped code and the memory allocated outside the Go heap
// leave, and at least half.
func goMemoryLimit(limit config.ByteSize, code, offHeap int64) config.ByteSize {
	return max(limit-config.ByteSize(code+offHeap), limit/2)
}

// indexMemory is what the key index holds at most: its block cache
// (deletes.index_cache) and two memtables (pkindex).
func indexMemory(cfg *config.Config) int64 {
	return cfg.Deletes.IndexCache.Int64() + 2*pkindex.MemTableBytes
}

// residentCode returns the bytes of the executable mapped into the
// process (text, read-only data, data): file pages that count in its
// resident memory as they are touched. 0 when /proc cannot tell.
func residentCode() int64 {
	exe, err := os.Executable()
	if err != nil {
		return 0
	}
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0
	}
	defer f.Close()
	var total int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/cdcsync
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe {
			continue
		}
		from, to, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(from, 16, 64)
		b, err2 := strconv.ParseUint(to, 16, 64)
		if err1 == nil && err2 == nil && b > a {
			total += int64(b - a)
		}
	}
	return total
}
