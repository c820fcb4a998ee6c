package lake

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/cdcsync/cdcsync"
)

// Checkpoint is the position up to which every table of the pipeline is
// committed. cdcsync resumes reading the binlog there.
type Checkpoint struct {
	Pipeline string           `json:"pipeline"`
	Epoch    int64            `json:"epoch"`
	Pos      cdcsync.Position `json:"position"`
	Time     time.Time        `json:"time"`
	// Tables holds each table's last committed epoch when the checkpoint
	// was written: a table that has not changed since holds everything up
	// to Pos, however old its own last commit (see Holds).
	Tables []TableEpoch `json:"tables,omitempty"`
}

// TableEpoch is a table's last committed epoch.
type TableEpoch struct {
	Table cdcsync.TableID `json:"table"`
	Epoch int64           `json:"epoch"`
}

// Holds reports whether a table whose last commit is epoch holds every
// transaction up to c.Pos: c recorded its last commit at that epoch or an
// earlier one. A table whose catalog was restored from a backup shows an
// older epoch and does not; nor does one c does not list (written by an
// older cdcsync, or a table that joined the pipeline since), whose own
// position is all that is known.
func (c Checkpoint) Holds(id cdcsync.TableID, epoch int64) bool {
	i, ok := slices.BinarySearchFunc(c.Tables, id, func(e TableEpoch, id cdcsync.TableID) int { return compareIDs(e.Table, id) })
	return ok && epoch >= c.Tables[i].Epoch
}

// Effective is the position up to which a table with committed state
// holds every transaction: its own position, or c.Pos when it holds that
// (Holds) and its own is older. A quiet table would otherwise make every
// restart replay the binlog from its last change, and fail once the
// server expired that binlog.
func (c Checkpoint) Effective(id cdcsync.TableID, committed Committed) cdcsync.Position {
	if !committed.Found || committed.Copy != nil || !c.Holds(id, committed.Epoch) {
		return committed.Pos
	}
	if ok, err := committed.Pos.Includes(c.Pos); err == nil && ok {
		return committed.Pos
	}
	return c.Pos
}

// SortTables orders Tables for Holds.
func (c *Checkpoint) SortTables() {
	slices.SortFunc(c.Tables, func(a, b TableEpoch) int { return compareIDs(a.Table, b.Table) })
}

func compareIDs(a, b cdcsync.TableID) int {
	return cmp.Or(strings.Compare(a.Database, b.Database), strings.Compare(a.Table, b.Table))
}

type checkpointFile struct {
	Checkpoint
	Sum string `json:"sha256"`
}

func (c Checkpoint) sum() string {
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
func (l *Lake) SaveCheckpoint(ctx context.Context, c Checkpoint) error {
	fsys, err := l.fs(ctx)
	if err != nil {
		return err
	}
	c.Pipeline = l.cfg.Pipeline
	c.SortTables()
	b, err := json.MarshalIndent(checkpointFile{Checkpoint: c, Sum: c.sum()}, "", "  ")
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
func (l *Lake) LoadCheckpoint(ctx context.Context) (c Checkpoint, ok bool, err error) {
	fsys, err := l.fs(ctx)
	if err != nil {
		return Checkpoint{}, false, err
	}
	for _, p := range l.checkpointPaths() {
		f, err := fsys.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return Checkpoint{}, false, fmt.Errorf("read checkpoint %s: %w", p, err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return Checkpoint{}, false, fmt.Errorf("read checkpoint %s: %w", p, err)
		}
		var cf checkpointFile
		if json.Unmarshal(b, &cf) != nil || cf.Sum != cf.Checkpoint.sum() {
			l.log.Warn("ignoring a damaged checkpoint; the other one is used", "path", p)
			continue
		}
		if cf.Pipeline != l.cfg.Pipeline {
			return Checkpoint{}, false, fmt.Errorf("checkpoint %s belongs to pipeline %q, not %q", p, cf.Pipeline, l.cfg.Pipeline)
		}
		if !ok || cf.Epoch > c.Epoch {
			c, ok = cf.Checkpoint, true
		}
	}
	return c, ok, nil
}
