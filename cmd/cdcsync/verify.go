package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/lake"
	"github.com/cdcsync/cdcsync/merge"
	"github.com/cdcsync/cdcsync/verify"
)

// verifyFlags are the options of `cdcsync verify`.
type verifyFlags struct {
	repair, json bool
	chunkRows    int
	rate         int
	examples     int
	wait, settle time.Duration
}

func (f *verifyFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.repair, "repair", false, "copy the keys that differ afresh through the running daemon, then compare them again")
	fs.BoolVar(&f.json, "json", false, "print the report as JSON")
	fs.IntVar(&f.chunkRows, "chunk-rows", 0, "rows per checksum chunk (default snapshot.chunk_rows)")
	fs.IntVar(&f.rate, "rate", 0, "read at most this many MySQL rows a second (0: no limit)")
	fs.IntVar(&f.examples, "examples", 10, "differing keys to show with both rows, per table")
	fs.DurationVar(&f.wait, "wait", 5*time.Minute, "how long to wait for the daemon to commit what MySQL was read at")
	fs.DurationVar(&f.settle, "settle", 2*time.Minute, "how long to keep comparing keys that keep changing")
}

// runVerify compares the named tables (every table the pipeline mirrors
// when none is named) with MySQL, while both keep changing, and prints a
// report. With --repair, the keys that differ are copied afresh by the
// running daemon and compared again. The error is an exitError: 1 when a
// table differs or could not be compared, 2 for bad usage.
func runVerify(ctx context.Context, cfg *config.Config, names []string, f verifyFlags, stdout, stderr io.Writer) error {
	var ids []cdcsync.TableID
	for _, name := range names {
		id, err := parseTableID(name)
		if err != nil {
			return exitError{2, err}
		}
		ids = append(ids, id)
	}
	switch {
	case f.chunkRows < 0, f.rate < 0, f.examples < 0, f.wait <= 0, f.settle <= 0:
		return exitError{2, errors.New("verify: --chunk-rows, --rate and --examples take a number of 0 or more, --wait and --settle a positive duration; see `cdcsync help`")}
	case f.repair && cfg.Admin.Network() == "":
		return exitError{2, errors.New("verify --repair asks the running daemon on its admin listener, and admin.listen is off; set admin.listen (see docs/configuration.md), or copy a table afresh with `cdcsync resync`")}
	}
	if f.chunkRows == 0 {
		f.chunkRows = cfg.Snapshot.ChunkRows
	}
	log := newLogger(cfg, stderr)
	lk, err := lake.Open(ctx, lake.OptionsFrom(cfg), log)
	if err != nil {
		return exitError{1, err}
	}
	defer lk.Close()
	src, err := capture.NewVerifyReader(ctx, &cfg.Source, capture.NewValuePolicy(cfg.Types, log, nil))
	if err != nil {
		return exitError{1, fmt.Errorf("connect to MySQL: %w", err)}
	}
	defer src.Close()
	bar := newProgressLine(stderr)
	v := verify.New(src, lk.Verify(binlogpos.Order{}), verify.Options{
		Order: binlogpos.Order{}, ChunkRows: f.chunkRows, RowsPerSecond: f.rate, Wait: f.wait, Settle: f.settle,
		Examples: f.examples, Log: log, Progress: verifyProgress(bar),
	})
	if len(ids) == 0 {
		if ids, err = v.Tables(ctx); err != nil {
			return exitError{1, err}
		}
		if len(ids) == 0 {
			return exitError{1, fmt.Errorf("pipeline %q mirrors no table yet: nothing to verify", cfg.Pipeline)}
		}
	}
	start := time.Now()
	report := &verify.Report{OK: true}
	for _, id := range ids {
		rep := v.Table(ctx, id)
		if f.repair && rep.Differences > 0 {
			rep.Repair = repairTable(ctx, cfg, v, id, rep.DifferingKeys())
		}
		bar.show("")
		report.Tables = append(report.Tables, rep)
		if !tableOK(rep) {
			report.OK = false
		}
		if ctx.Err() != nil {
			break
		}
	}
	report.Seconds = time.Since(start).Seconds()
	if f.json {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		return exitError{1, err}
	}
	if err := ctx.Err(); err != nil {
		return exitError{1, fmt.Errorf("verify interrupted: %w", err)}
	}
	if !report.OK {
		bad := 0
		for _, t := range report.Tables {
			if !tableOK(t) {
				bad++
			}
		}
		return exitError{1, fmt.Errorf("verify: %d of %d tables differ from MySQL or could not be compared", bad, len(report.Tables))}
	}
	return nil
}

// tableOK says whether a table matched, or differed and was repaired so
// that every repaired key compared equal afterwards.
func tableOK(t *verify.TableReport) bool {
	if t.OK() {
		return true
	}
	rp := t.Repair
	return t.Status == verify.StatusDifferent && rp != nil && rp.Error == "" && rp.Still == 0 && rp.Unsettled == 0
}

// progressLine is a line on a terminal that each update overwrites; nil
// (doing nothing) when the output is not a terminal.
type progressLine struct {
	f    *os.File
	last time.Time
}

func newProgressLine(w io.Writer) *progressLine {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return &progressLine{f: f}
}

// show replaces the line with line ("" clears it), at most ten times a
// second.
func (p *progressLine) show(line string) {
	if p == nil || (line != "" && time.Since(p.last) < 100*time.Millisecond) {
		return
	}
	p.last = time.Now()
	fmt.Fprint(p.f, "\r\033[K"+line)
}

// verifyProgress shows a table's progress on the terminal's progress line.
func verifyProgress(bar *progressLine) func(verify.Progress) {
	if bar == nil {
		return nil
	}
	return func(p verify.Progress) {
		rate := ""
		if secs := time.Since(p.Start).Seconds(); secs > 0.5 && p.Rows > 0 {
			rate = fmt.Sprintf(", %.0f rows/s", float64(p.Rows)/secs)
		}
		var line string
		switch p.Phase {
		case "keys":
			line = fmt.Sprintf("verify %s: comparing %d keys again (round %d)", p.Table, p.Rows, p.Chunks)
		default:
			line = fmt.Sprintf("verify %s: %s, %d chunks, %d rows%s", p.Table, p.Phase, p.Chunks, p.Rows, rate)
		}
		bar.show(line)
	}
}

// repairKeysPerRequest bounds the keys of one repair request.
const repairKeysPerRequest = 5000

// repairTable asks the running daemon to copy the keys afresh, then
// compares them again.
func repairTable(ctx context.Context, cfg *config.Config, v *verify.Verifier, id cdcsync.TableID, keys [][]any) *verify.RepairReport {
	rp := &verify.RepairReport{Requested: len(keys)}
	client, err := newAdminClient(&cfg.Admin)
	if err != nil {
		rp.Error = err.Error()
		return rp
	}
	for start := 0; start < len(keys); start += repairKeysPerRequest {
		batch := keys[start:min(start+repairKeysPerRequest, len(keys))]
		res, err := client.repair(ctx, id, batch)
		if err != nil {
			rp.Error = err.Error()
			return rp
		}
		rp.Epoch, rp.Position = res.Epoch, res.Position
	}
	again := v.Recheck(ctx, id, keys)
	if again.Status == verify.StatusError || again.Status == verify.StatusUnverified {
		rp.Error = "compare the repaired keys again: " + again.Reason
		return rp
	}
	rp.Still, rp.Unsettled = again.Differences, again.Unsettled
	rp.Equal = len(keys) - rp.Still - rp.Unsettled
	return rp
}

// repairRequest and repairResponse are the body of POST /v1/repair and
// its answer.
type repairRequest struct {
	Keys []string `json:"keys"` // verify.EncodeKey
}

type repairResponse struct {
	Epoch    int64  `json:"epoch"`
	Position string `json:"position"`
	Upserted int    `json:"upserted"`
	Deleted  int    `json:"deleted"`
	Skipped  int    `json:"skipped"`
	Absent   int    `json:"absent"`
}

// repair asks the daemon to copy the rows of keys afresh; it answers once
// they are committed.
func (c *adminClient) repair(ctx context.Context, id cdcsync.TableID, keys [][]any) (repairResponse, error) {
	var out repairResponse
	req := repairRequest{Keys: make([]string, len(keys))}
	for i, k := range keys {
		var err error
		if req.Keys[i], err = verify.EncodeKey(k); err != nil {
			return out, err
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return out, err
	}
	answer, err := c.post(ctx, "/v1/repair", tableQuery(id), body, 10*time.Minute)
	if err != nil {
		var unreachable unreachableError
		if errors.As(err, &unreachable) {
			return out, fmt.Errorf("--repair goes through the running daemon, and %w; start `cdcsync run` (on this machine, or set admin.listen), or copy the table afresh with `cdcsync resync %s`", err, id)
		}
		return out, fmt.Errorf("repair %s: %w", id, err)
	}
	if err := json.Unmarshal(answer, &out); err != nil {
		return out, fmt.Errorf("the daemon at %s answered the repair of %s with %q: %w", c.where, id, answer, err)
	}
	return out, nil
}

// decodeRepairRequest reads the keys of a POST /v1/repair body.
func decodeRepairRequest(body io.Reader) ([][]any, error) {
	var req repairRequest
	if err := json.NewDecoder(io.LimitReader(body, 64<<20)).Decode(&req); err != nil {
		return nil, fmt.Errorf("the body must be {\"keys\": [...]}: %w", err)
	}
	keys := make([][]any, len(req.Keys))
	for i, s := range req.Keys {
		var err error
		if keys[i], err = verify.DecodeKey(s); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// repair has the running pipeline copy the rows of keys afresh
// (merge.Pipeline.Repair).
func (d *daemon) repair(ctx context.Context, id cdcsync.TableID, keys [][]any) (merge.RepairResult, error) {
	pipe := d.pipe.Load()
	if pipe == nil {
		return merge.RepairResult{}, errNotRunning
	}
	return pipe.Repair(ctx, id, keys)
}

func repairAnswer(res merge.RepairResult) repairResponse {
	pos := ""
	if !res.Pos.IsZero() {
		pos = res.Pos.String()
	}
	return repairResponse{Epoch: res.Epoch, Position: pos, Upserted: res.Upserted, Deleted: res.Deleted, Skipped: res.Skipped, Absent: res.Absent}
}
