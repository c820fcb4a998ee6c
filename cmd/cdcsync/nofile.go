package main

import (
	"fmt"
	"syscall"

	"github.com/cdcsync/cdcsync/config"
)

// fdReserve is the file descriptors cdcsync uses besides the files it
// writes: MySQL connections (the binlog stream, the copy's readers), the
// catalog's connections, the files scans and compactions read (iceberg-go
// reads a few at a time), the HTTP listener and logs.
// TestCopyManyPartitionsLowFileLimit checks that the daemon stays within
// max_open_files plus this.
const fdReserve = 128

// openFiles is the process's open-file limit as it stands (the Go runtime
// raises the soft limit to the hard one at start) and what the
// configuration needs.
type openFiles struct {
	limit, need uint64
}

func openFilesOf(cfg *config.Config) (openFiles, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return openFiles{}, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	return openFiles{limit: rl.Cur, need: uint64(cfg.Warehouse.MaxOpenFiles) + fdReserve}, nil
}

func (o openFiles) enough() bool { return o.limit >= o.need }

// String says what the limit is, what cdcsync needs, and how to fix it.
func (o openFiles) String() string {
	s := fmt.Sprintf("RLIMIT_NOFILE is %d; cdcsync needs about %d (warehouse.max_open_files plus %d for connections and reads)", o.limit, o.need, fdReserve)
	if !o.enough() {
		s += fmt.Sprintf(": raise it (ulimit -n %d, or LimitNOFILE=%d in the systemd unit) or lower warehouse.max_open_files", o.need*2, o.need*2)
	}
	return s
}
