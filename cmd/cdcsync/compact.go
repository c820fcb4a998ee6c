package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/lake"
	"github.com/cdcsync/cdcsync/pkindex"
)

// runCompact compacts one table by hand: every partition that has delete
// files or small files, whatever the thresholds, then merges manifests.
// maxBytes > 0 caps the data rewritten. It may run while the daemon runs:
// epoch commits that land meanwhile are replayed under the rewrite (its files
// keep the sequence number of the snapshot it read), and the daemon takes a
// rewrite that lands under its own commit in its stride.
func runCompact(ctx context.Context, cfg *config.Config, name string, maxBytes int64, stdout, stderr io.Writer) error {
	tuneMemory(cfg)
	log := newLogger(cfg, stderr)
	keys := openIdleKeyIndex(cfg, log)
	if keys != nil {
		defer keys.Close()
	}
	lk, err := lake.Open(ctx, lake.OptionsFrom(cfg), log)
	if err != nil {
		return err
	}
	defer lk.Close()
	if keys != nil {
		lk.SetKeyIndex(keys)
	}
	t, err := lk.OpenTable(ctx, name)
	if err != nil {
		return exitError{1, err}
	}
	before := t.Stats()
	opts := lake.CompactOptionsFrom(&cfg.Maintenance)
	// A command compacts what it is asked to: maintenance's per-run file
	// bound keeps epochs from waiting, which a separate process does not
	// make them do.
	opts.Force, opts.Replay, opts.MaxBytes, opts.MaxFiles, opts.MaxLock = true, true, maxBytes, 0, 0
	opts.MaxManifests = 1 // merge whenever there is more than one data manifest
	var res lake.CompactResult
	// Staged rows a run moves into their partitions get a file of their
	// own in each, next to the file the partition had: a second pass
	// merges the two, so that the command leaves one file per partition.
	for pass := 0; pass < 3; pass++ {
		next, err := t.Compact(ctx, opts)
		if err != nil {
			return exitError{1, err}
		}
		if pass == 0 {
			res = next
		} else {
			res = res.Then(next)
		}
		if !next.Committed() || next.StagedMoved == 0 || next.Deferred > 0 {
			break
		}
	}
	after := t.Stats()
	ident := fmt.Sprintf("%s.%s", t.Ident[0], t.Ident[len(t.Ident)-1])
	if !res.Committed() {
		fmt.Fprintf(stdout, "%s: nothing to compact (%d data files, %d delete files)\n", ident, before.DataFiles, before.DeleteFiles)
		return nil
	}
	fmt.Fprintf(stdout, "%s: compacted in %s\n", ident, res.Duration.Round(time.Millisecond))
	fmt.Fprintf(stdout, "  data files:     %d -> %d (rewrote %d files, %s, into %d files, %s)\n", before.DataFiles, after.DataFiles,
		res.RewrittenFiles, mib(res.BytesBefore), res.AddedFiles, mib(res.BytesAfter))
	fmt.Fprintf(stdout, "  delete files:   %d -> %d\n", before.DeleteFiles, after.DeleteFiles)
	fmt.Fprintf(stdout, "  delete rows:    %d -> %d\n", before.DeleteRows, after.DeleteRows)
	if res.ManifestsAfter < res.ManifestsBefore {
		fmt.Fprintf(stdout, "  manifests:      %d -> %d\n", res.ManifestsBefore, res.ManifestsAfter)
	}
	if res.Snapshot != 0 {
		fmt.Fprintf(stdout, "  snapshot:       %d\n", res.Snapshot)
	}
	if res.Deferred > 0 {
		fmt.Fprintf(stdout, "  left for later: %d files over --max-bytes\n", res.Deferred)
	}
	if res.Replays > 0 {
		fmt.Fprintf(stdout, "  re-staged %d time(s) on top of epochs committed meanwhile\n", res.Replays)
	}
	return nil
}

// openIdleKeyIndex opens the pipeline's key index when it exists and no
// daemon holds it, so that a compaction by hand tells it where the rows it
// moves went: otherwise the daemon reads every file the compaction wrote
// back at its next commit. Without one (a daemon running, another machine)
// the compaction runs without it.
func openIdleKeyIndex(cfg *config.Config, log *slog.Logger) *pkindex.DB {
	dir, err := cfg.IndexPath()
	if err != nil {
		return nil
	}
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	db, err := pkindex.Open(dir, keyIndexOptions(cfg, log))
	if err != nil {
		log.Info("compacting without the key index; the daemon catches it up at its next commit", "dir", dir, "reason", err)
		return nil
	}
	return db
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
