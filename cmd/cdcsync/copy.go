package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/lake"
	"github.com/cdcsync/cdcsync/merge"
)

// watchCopies publishes the progress of the initial copies: metrics every
// second, a log line per table every 15 seconds, and a live progress line
// when stderr is a terminal. It also keeps /readyz: ready once the binlog is
// read, no copy runs and no commit waits out an outage.
func (d *daemon) watchCopies(ctx context.Context, pipe *merge.Pipeline, lk *lake.Lake) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	defer d.st.setReady("restarting the pipeline")
	var lastLog time.Time
	shown := map[cdcsync.TableID]bool{}
	bar := d.bar != nil
	for {
		cps := pipe.Copying()
		slices.SortFunc(cps, func(a, b merge.CopyProgress) int { return strings.Compare(a.Table.String(), b.Table.String()) })
		d.st.setReady(notReadyReason(d.streaming.Load(), pipe.LastSeen(), cps, pipe.Stalled(), lk))
		d.m.CopyTables.Set(float64(len(cps)))
		now := time.Now()
		logNow := now.Sub(lastLog) >= 15*time.Second
		seen := map[cdcsync.TableID]bool{}
		var line []string
		for _, cp := range cps {
			name := cp.Table.String()
			seen[cp.Table] = true
			shown[cp.Table] = true
			rate, eta := copyRate(cp, now)
			d.m.CopyRows.WithLabelValues(name).Set(float64(cp.Rows))
			d.m.CopyRowsEstimate.WithLabelValues(name).Set(float64(cp.Estimate))
			d.m.CopyRate.WithLabelValues(name).Set(rate)
			d.m.CopyETA.WithLabelValues(name).Set(eta.Seconds())
			if logNow {
				d.log.Info("initial copy progress", "table", name, "rows", cp.Rows, "estimated_rows", cp.Estimate,
					"percent", percent(cp), "rows_per_second", int64(rate), "eta", eta.Round(time.Second).String())
			}
			line = append(line, fmt.Sprintf("%s %s %d/%s rows %s/s ETA %s", name, progressBar(percent(cp), 12), cp.Rows,
				humanCount(cp.Estimate), humanCount(int64(rate)), eta.Round(time.Second)))
		}
		if logNow {
			lastLog = now
		}
		for id := range shown {
			if !seen[id] {
				name := id.String()
				d.m.CopyRows.DeleteLabelValues(name)
				d.m.CopyRowsEstimate.DeleteLabelValues(name)
				d.m.CopyRate.DeleteLabelValues(name)
				d.m.CopyETA.DeleteLabelValues(name)
				delete(shown, id)
			}
		}
		if bar {
			d.bar.show(strings.Join(line, " | "))
		}
		select {
		case <-ctx.Done():
			if bar {
				d.bar.show("")
			}
			return
		case <-tick.C:
		}
	}
}

// notReadyReason says why the daemon is not ready, or "" when it is.
func notReadyReason(streaming bool, seen time.Time, cps []merge.CopyProgress, stalls []merge.Stall, lk *lake.Lake) string {
	if since, err, down := lk.Unreachable(); down {
		return fmt.Sprintf("commits stalled for %s: the warehouse or the catalog does not answer (%v)", time.Since(since).Round(time.Second), err)
	}
	switch {
	case len(stalls) > 0:
		st := stalls[0]
		return fmt.Sprintf("commits stalled for %s: the warehouse or the catalog is unavailable: unreachable, failing or full (%d commits wait; %s: %v)",
			time.Since(st.Since).Round(time.Second), len(stalls), st.What, st.Err)
	case !streaming:
		return "connecting to the source"
	case !seen.IsZero() && time.Since(seen) > silenceLimit:
		// An idle server sends a heartbeat every second.
		return fmt.Sprintf("the binlog stream has delivered nothing, not even a heartbeat, for %s", time.Since(seen).Round(time.Second))
	case len(cps) > 0:
		names := make([]string, len(cps))
		for i, cp := range cps {
			names[i] = cp.Table.String()
		}
		return "initial copy running: " + strings.Join(names, ", ")
	}
	return ""
}

// silenceLimit is how long a binlog stream may deliver nothing before
// /readyz says streaming does not progress.
const silenceLimit = 30 * time.Second

// copyRate is the copy's rate in this session and the time left at it.
func copyRate(cp merge.CopyProgress, now time.Time) (float64, time.Duration) {
	secs := now.Sub(cp.Started).Seconds()
	if secs <= 0 || cp.Session == 0 {
		return 0, 0
	}
	rate := float64(cp.Session) / secs
	left := cp.Estimate - cp.Rows
	if left <= 0 {
		return rate, 0
	}
	return rate, time.Duration(float64(left) / rate * float64(time.Second))
}

// percent is the share copied, by the server's estimate; it stays below
// 100 until the copy is done, since the estimate may be low.
func percent(cp merge.CopyProgress) int {
	if cp.Estimate <= 0 {
		return 0
	}
	return int(min(99, cp.Rows*100/cp.Estimate))
}

func progressBar(pct, width int) string {
	full := pct * width / 100
	return "[" + strings.Repeat("#", full) + strings.Repeat(".", width-full) + fmt.Sprintf("] %2d%%", pct)
}

func humanCount(n int64) string {
	switch {
	case n >= 10_000_000:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 10_000:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// statusLine draws one line that rewrites itself at the bottom of a
// terminal. The log writes through it (Write), so a log line clears the
// status line and it is drawn again below.
type statusLine struct {
	mu   sync.Mutex
	f    *os.File
	last string
}

// newStatusLine returns nil unless w is a terminal.
func newStatusLine(w io.Writer) *statusLine {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return &statusLine{f: f}
}

func (s *statusLine) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != "" {
		fmt.Fprint(s.f, "\r\033[K")
	}
	n, err := s.f.Write(p)
	if s.last != "" {
		fmt.Fprint(s.f, "copying: "+s.last)
	}
	return n, err
}

func (s *statusLine) show(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if line == s.last {
		return
	}
	s.last = line
	fmt.Fprint(s.f, "\r\033[K")
	if line != "" {
		fmt.Fprint(s.f, "copying: "+line)
	}
}
