package lake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/cdcsync/cdcsync"
)

type checkpointFile struct {
	cdcsync.Checkpoint
	Sum string `json:"sha256"`
}

func checkpointSum(c cdcsync.Checkpoint) string {
	b, _ := json.Marshal(c) // plain data always marshals
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// The checkpoint lives in the warehouse, so a daemon moved to another machine
// resumes where it stopped. It alternates between two objects: a write torn
// by a crash leaves the other, older one intact, and resuming from an older
// checkpoint is safe because every table skips what it already holds.
func (l *Lake) checkpointPaths() [2]string {
	d := l.pipelineDir()
	return [2]string{d + "/checkpoint-0.json", d + "/checkpoint-1.json"}
}

// SaveCheckpoint records c.
func (l *Lake) SaveCheckpoint(ctx context.Context, c cdcsync.Checkpoint) error {
	fsys, err := l.fs(ctx)
	if err != nil {
		return err
	}
	c.Pipeline = l.opts.Pipeline
	c.Token = l.token
	c.SortTables()
	b, err := json.MarshalIndent(checkpointFile{Checkpoint: c, Sum: checkpointSum(c)}, "", "  ")
	if err != nil {
		return err
	}
	p := l.checkpointPaths()[c.Epoch%2]
	if err := fsys.WriteFile(p, b); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", p, err)
	}
	return nil
}

// LoadCheckpoint returns the newest intact checkpoint; ok is false when the
// pipeline has none yet.
func (l *Lake) LoadCheckpoint(ctx context.Context) (c cdcsync.Checkpoint, ok bool, err error) {
	fsys, err := l.fs(ctx)
	if err != nil {
		return cdcsync.Checkpoint{}, false, err
	}
	for _, p := range l.checkpointPaths() {
		f, err := fsys.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return cdcsync.Checkpoint{}, false, fmt.Errorf("read checkpoint %s: %w", p, err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return cdcsync.Checkpoint{}, false, fmt.Errorf("read checkpoint %s: %w", p, err)
		}
		var cf checkpointFile
		if json.Unmarshal(b, &cf) != nil || cf.Sum != checkpointSum(cf.Checkpoint) {
			l.log.Warn("ignoring a damaged checkpoint; the other one is used", "path", p)
			continue
		}
		if cf.Pipeline != l.opts.Pipeline {
			return cdcsync.Checkpoint{}, false, fmt.Errorf("checkpoint %s belongs to pipeline %q, not %q", p, cf.Pipeline, l.opts.Pipeline)
		}
		if !ok || cf.Epoch > c.Epoch {
			c, ok = cf.Checkpoint, true
		}
	}
	return c, ok, nil
}
