package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	"golang.org/x/sys/unix"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/lake"
	"github.com/cdcsync/cdcsync/merge"
)

// runCheck runs every preflight check of `run` and prints all findings. It
// exits 1 when any check fails.
func runCheck(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer) error {
	log := newLogger(cfg, stderr)
	failed := 0
	report := func(ok, warn bool, check, msg string) {
		mark := "ok  "
		switch {
		case warn:
			mark = "warn"
		case !ok:
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(stdout, "%s  %-24s %s\n", mark, check, msg)
	}
	conn, err := capture.Connect(ctx, &cfg.Source)
	if err != nil {
		report(false, false, "connect", err.Error())
	} else {
		findings, schemas, err := capture.Preflight(ctx, conn, &cfg.Source)
		if err != nil {
			report(false, false, "preflight", err.Error())
		}
		global := false
		for _, f := range findings {
			report(f.OK, f.Warning, f.Check, f.Message)
			global = global || (!f.OK && !f.Warning && f.Table == cdcsync.TableID{})
		}
		checkPartitions(ctx, cfg, conn, schemas, report)
		conn.Close()
		if err == nil && !global {
			checkBinlogStream(ctx, cfg, report)
		}
	}
	checkAdmin(cfg, report)
	checkKeyIndex(cfg, report)
	if of, err := openFilesOf(cfg); err != nil {
		report(false, true, "open files", err.Error())
	} else {
		// A warning: the estimate is generous, and a write that finds no
		// descriptor fails its commit, which loses nothing.
		report(true, !of.enough(), "open files", of.String())
	}
	lk, err := lake.Open(ctx, lake.OptionsFrom(cfg), log)
	if err != nil {
		report(false, false, "catalog", err.Error())
	} else {
		defer lk.Close()
		if err := lk.Check(ctx); err != nil {
			report(false, false, "warehouse", err.Error())
		} else {
			report(true, false, "catalog+warehouse", fmt.Sprintf("catalog %q answers and the warehouse %s accepts writes", cfg.Catalog.Name, cfg.Warehouse.Location))
			checkPositions(ctx, cfg, lk, report)
		}
	}
	if failed > 0 {
		return exitError{1, fmt.Errorf("%d check(s) failed", failed)}
	}
	fmt.Fprintln(stdout, "all checks passed")
	return nil
}

// checkBinlogStream opens a short binlog connection as run does (the same
// account, server_id and TLS) and reads its first events, so that a check
// that passes means run can stream; it says how that connection is
// encrypted, and warns when it is plaintext or unverified.
func checkBinlogStream(ctx context.Context, cfg *config.Config, report func(ok, warn bool, check, msg string)) {
	pr, err := capture.ProbeBinlog(ctx, &cfg.Source)
	switch {
	case err != nil:
		report(false, false, "binlog stream", err.Error())
	case pr.Busy != "":
		report(true, false, "binlog stream", fmt.Sprintf("not opened: %s, and a second binlog connection with server_id %d could cut it off", pr.Busy, cfg.Source.ServerID))
	default:
		msg, warn := capture.DescribeTLS(&cfg.Source, pr.TLS)
		report(true, warn, "binlog stream", fmt.Sprintf("read the binlog at %s as replica server_id %d (%s); the connection is %s",
			pr.Pos, cfg.Source.ServerID, strings.Join(pr.Events, ", "), msg))
	}
}

// checkAdmin says where `cdcsync resync` reaches the daemon.
func checkAdmin(cfg *config.Config, report func(ok, warn bool, check, msg string)) {
	a := &cfg.Admin
	if _, err := a.ResolveToken(); err != nil {
		report(false, false, "admin", err.Error())
		return
	}
	var msg string
	switch a.Network() {
	case "":
		report(true, false, "admin", "admin.listen is off: cdcsync resync cannot reach a running daemon, only mark tables for its next start (--offline)")
		return
	case "unix":
		msg = fmt.Sprintf("cdcsync resync reaches the daemon at the socket %s (mode 0600: the daemon's user and root only)", a.Listen)
	default:
		msg = fmt.Sprintf("cdcsync resync reaches the daemon at %s, with the token", a.Listen)
	}
	if a.PProf {
		msg += "; Go's profiler is served there (admin.pprof)"
	}
	report(true, false, "admin", msg)
}

// checkKeyIndex reports where the key index of position-mode tables goes
// and whether this user can write there. It does not open the index: a
// running daemon holds it.
func checkKeyIndex(cfg *config.Config, report func(ok, warn bool, check, msg string)) {
	dir, err := cfg.IndexPath()
	if err != nil {
		report(false, false, "key index", err.Error())
		return
	}
	// The nearest existing ancestor must be a writable directory.
	p := dir
	for {
		st, err := os.Stat(p)
		if err == nil {
			if !st.IsDir() {
				report(false, false, "key index", fmt.Sprintf("deletes.index_dir %s: %s is not a directory; choose another path", dir, p))
				return
			}
			if err := unix.Access(p, unix.W_OK|unix.X_OK); err != nil {
				report(false, false, "key index", fmt.Sprintf("the key index goes to %s, but this user cannot write %s (%v); set deletes.index_dir to a local directory the user running cdcsync may write", dir, p, err))
				return
			}
			break
		}
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	report(true, false, "key index", fmt.Sprintf("the key index of position- and dv-mode tables (deletes.mode: %s by default) goes to %s", cfg.Deletes.Mode, dir))
}

// checkPartitions reports, for every selected table with a partition
// layout, how many partitions it gives and how many files an epoch would
// write, as a warning with a coarser layout when that is thousands.
func checkPartitions(ctx context.Context, cfg *config.Config, conn *client.Conn, schemas []*cdcsync.TableSchema, report func(ok, warn bool, check, msg string)) {
	flavor, _, err := capture.ServerFlavor(ctx, conn)
	if err != nil {
		return // preflight reported it
	}
	for _, ts := range schemas {
		r := cfg.Rule(ts.ID.Database, ts.ID.Table)
		if r == nil || len(r.Partition) == 0 {
			continue
		}
		if err := lake.CheckRule(r, ts); err != nil {
			report(false, false, "partitions", err.Error())
			continue
		}
		fields, err := r.PartitionFields()
		if err != nil {
			continue // config validation reports it
		}
		est, err := capture.EstimatePartitions(ctx, conn, flavor, ts.ID, fields)
		if err != nil {
			report(false, true, "partitions", err.Error())
			continue
		}
		mode := cfg.Deletes.Mode
		if r.Deletes != "" {
			mode = r.Deletes
		}
		report(true, est.Warn(), "partitions", partitionAdvice(est, mode, cfg.StageAboveFor(ts.ID.Database, ts.ID.Table)))
	}
}

// partitionAdvice is check's message about a table's layout in deletes
// mode mode, staging rows above stageAbove partition files: position mode
// writes a delete file per partition an epoch's updates touch, dv mode a
// Puffin file per 128 vectors.
func partitionAdvice(est capture.PartitionEstimate, mode string, stageAbove int) string {
	msg := est.String()
	if !est.Warn() {
		return msg
	}
	if mode != config.DeletesEquality && stageAbove > 0 {
		msg += fmt.Sprintf("; cdcsync stages the rows of an epoch over more than %d partitions in one file (tables[].stage_above) and maintenance moves them to their partitions, a file each, so that cost falls on compaction and a partition filter cannot skip staged rows until then", stageAbove)
	}
	if mode == config.DeletesPosition {
		msg += "; in position mode (deletes.mode) updates of rows in their partitions write a delete file per partition they touch: deletes: dv (Iceberg format v3) writes an epoch's deletes as a few files"
	}
	return msg
}

// checkPositions reports whether the server still has the binlog after
// every mirrored table's committed position (nothing purged, and its
// history contains them), as run requires before it streams.
func checkPositions(ctx context.Context, cfg *config.Config, lk *lake.Lake, report func(ok, warn bool, check, msg string)) {
	tables, err := lk.PipelineTables(ctx)
	if err != nil {
		report(false, false, "binlog positions", err.Error())
		return
	}
	if len(tables) == 0 {
		return // a new pipeline: it starts at the server's current position
	}
	conn, err := capture.Connect(ctx, &cfg.Source)
	if err != nil {
		return // the connect check reported it
	}
	defer conn.Close()
	flavor, _, err := capture.ServerFlavor(ctx, conn)
	if err != nil {
		return
	}
	uuid, err := capture.ServerIdentity(ctx, conn, flavor)
	if err != nil {
		return
	}
	b, err := capture.ReadBinlog(ctx, conn, flavor, uuid)
	if err != nil {
		report(false, false, "binlog positions", err.Error())
		return
	}
	ckpt, _, err := lk.LoadCheckpoint(ctx)
	if err != nil {
		report(false, false, "binlog positions", err.Error())
		return
	}
	committed := map[cdcsync.TableID]cdcsync.Committed{}
	for _, t := range tables {
		if !t.Stopped {
			c := t.Committed
			c.Pos = ckpt.Effective(t.ID, c, binlogpos.Order{})
			committed[t.ID] = c
		}
	}
	lost, err := merge.LostPositions(b, committed, nil)
	if err != nil {
		report(false, false, "binlog positions", err.Error())
		return
	}
	for _, t := range tables {
		if msg, ok := lost[t.ID]; ok {
			report(false, false, "binlog positions", fmt.Sprintf("%s is committed up to %s, but %s; copy it again: cdcsync resync --offline --config FILE %s",
				t.ID, t.Committed.Pos, msg, t.ID))
		}
	}
	if len(lost) == 0 {
		report(true, false, "binlog positions", fmt.Sprintf("the server has the binlog after the committed position of every table (%d)", len(tables)))
	}
}
