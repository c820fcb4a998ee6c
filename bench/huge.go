package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
)

// hugeRun is the --huge-txn phase: one UPDATE of many rows, a single
// transaction far larger than an epoch, mirrored by a fresh daemon.
type hugeRun struct {
	Rows           uint64  `json:"rows"`              // rows the UPDATE changed
	MySQLSeconds   float64 `json:"mysql_seconds"`     // the UPDATE in MySQL, to its COMMIT
	Seconds        float64 `json:"seconds"`           // COMMIT returned to the checkpoint covering it
	Rate           float64 `json:"changes_per_s"`     // Rows / Seconds
	CPUSeconds     float64 `json:"cpu_seconds"`       // the daemon's, from the UPDATE to the checkpoint
	CPUMicros      float64 `json:"cpu_us_per_change"` // CPUSeconds per row
	PeakRSSMiB     float64 `json:"peak_rss_mib"`      // the daemon's VmHWM (its whole life)
	IdleRSSMiB     float64 `json:"idle_rss_mib"`      // its VmHWM before the UPDATE
	Spills         int     `json:"spills"`            // "spilled the open epoch" log lines
	GoMemoryLimit  string  `json:"go_memory_limit"`   // from the start line
	EpochMaxBytes  string  `json:"epoch_max_bytes"`   // from the start line
	MemoryLimitCfg string  `json:"memory_limit"`      // from the start line
}

// hugeTxn runs the phase: a daemon that is caught up, then one UPDATE of
// the first n rows of bench.t.
func hugeTxn(bin, cfgPath, dir, httpAddr string, conn *client.Conn, watcher *lakeWatcher, n int64) (*hugeRun, error) {
	d, err := startDaemon(bin, cfgPath, filepath.Join(dir, "cdcsync-huge.log"), httpAddr)
	if err != nil {
		return nil, err
	}
	if _, err := d.waitReady(5 * time.Minute); err != nil {
		d.terminate(time.Minute)
		return nil, fmt.Errorf("huge transaction: %w", err)
	}
	before, _ := procStatus(d.cmd.Process.Pid)
	start := time.Now()
	res, err := conn.Execute(fmt.Sprintf("%s WHERE id <= %d", updateSet(99), n))
	if err != nil {
		d.terminate(time.Minute)
		return nil, fmt.Errorf("huge transaction: the UPDATE: %w", err)
	}
	committed := time.Now()
	run := &hugeRun{Rows: res.AffectedRows, MySQLSeconds: committed.Sub(start).Seconds(), IdleRSSMiB: float64(before.hwm) / mib}
	res.Close()
	seq, err := lastGTID(conn)
	if err != nil {
		d.terminate(time.Minute)
		return nil, err
	}
	seenAt, err := watcher.waitCheckpoint(d, seq, false, 30*time.Minute, nil)
	if err != nil {
		d.terminate(time.Minute)
		return nil, fmt.Errorf("huge transaction: %w", err)
	}
	after, _ := procStatus(d.cmd.Process.Pid)
	if err := d.terminate(2 * time.Minute); err != nil {
		return nil, fmt.Errorf("huge transaction: stop cdcsync: %w\n%s", err, d.logTail())
	}
	run.Seconds = seenAt.Sub(committed).Seconds()
	run.Rate = float64(run.Rows) / run.Seconds
	run.CPUSeconds = (after.cpu - before.cpu).Seconds()
	run.CPUMicros = run.CPUSeconds * 1e6 / float64(max(run.Rows, 1))
	run.PeakRSSMiB = float64(max(after.hwm, d.childMaxRSS())) / mib
	if b, err := os.ReadFile(d.logPath); err == nil {
		log := string(b)
		run.Spills = strings.Count(log, "spilled the open epoch")
		run.MemoryLimitCfg = logField(log, "memory_limit")
		run.GoMemoryLimit = logField(log, "go_memory_limit")
		run.EpochMaxBytes = logField(log, "epoch_max_bytes")
	}
	return run, nil
}

// logField returns the value of key=value in the daemon's start line.
func logField(log, key string) string {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `msg="cdcsync starting"`) {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, key+"="); ok {
				return v
			}
		}
	}
	return ""
}

// hugeMarkdown is the phase's row of the report; decodeMicros is baseline
// A's CPU per change.
func hugeMarkdown(h *hugeRun, decodeMicros float64) string {
	return fmt.Sprintf("| Huge transaction: one UPDATE of %d rows (MySQL %.2f s; memory_limit %s, Go's %s, epoch.max_bytes %s) | mirrored %.2f s after its COMMIT = %.0f changes/s, %d spills; %.2f CPU-µs/change; peak RSS %.0f MiB (%.0f MiB before it) | %.2f CPU-µs/change (decode) | %.1fx |\n",
		h.Rows, h.MySQLSeconds, h.MemoryLimitCfg, h.GoMemoryLimit, h.EpochMaxBytes, h.Seconds, h.Rate, h.Spills, h.CPUMicros, h.PeakRSSMiB, h.IdleRSSMiB, decodeMicros, h.CPUMicros/decodeMicros)
}
