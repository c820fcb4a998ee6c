package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
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
	case f.repair && cfg.HTTP.Listen == config.HTTPOff:
		return exitError{2, errors.New("verify --repair asks the running daemon (http.listen), which is off; set http.listen, or copy a table afresh with `cdcsync resync`")}
	}
	if f.chunkRows == 0 {
		f.chunkRows = cfg.Snapshot.ChunkRows
	}
	log := newLogger(cfg, stderr)
	lk, err := lake.Open(ctx, cfg, log)
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
	for start := 0; start < len(keys); start += repairKeysPerRequest {
		batch := keys[start:min(start+repairKeysPerRequest, len(keys))]
		res, err := askRepair(ctx, cfg.HTTP.Listen, id, batch)
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

func askRepair(ctx context.Context, listen string, id cdcsync.TableID, keys [][]any) (repairResponse, error) {
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
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return out, fmt.Errorf("http.listen %q: %w", listen, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(host, port), Path: "/v1/repair", RawQuery: url.Values{"table": {id.String()}}.Encode()}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return out, fmt.Errorf("no cdcsync daemon answers at %s (%v): --repair goes through the running daemon; start `cdcsync run`, or copy the table afresh with `cdcsync resync %s`", u.Host, err, id)
		}
		return out, fmt.Errorf("ask the daemon at %s to repair %s: %w", u.Host, id, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return out, fmt.Errorf("%s does not serve /v1/repair (is it a cdcsync daemon of this version?); copy the table afresh with `cdcsync resync %s`", u.Host, id)
	default:
		return out, fmt.Errorf("the daemon at %s refused to repair %s: %s", u.Host, id, strings.TrimSpace(string(b)))
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("the daemon at %s answered the repair of %s with %q: %w", u.Host, id, b, err)
	}
	return out, nil
}

// repairHandler serves POST /v1/repair?table=DB.TABLE with a JSON body
// {"keys": [...]} (verify.EncodeKey): the running pipeline copies those
// rows afresh and answers once they are committed (merge.Pipeline.Repair).
func (d *daemon) repairHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST /v1/repair?table=DB.TABLE with {\"keys\": [...]}", http.StatusMethodNotAllowed)
			return
		}
		id, err := parseTableID(r.URL.Query().Get("table"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req repairRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&req); err != nil {
			http.Error(w, "the body must be {\"keys\": [...]}: "+err.Error(), http.StatusBadRequest)
			return
		}
		keys := make([][]any, len(req.Keys))
		for i, s := range req.Keys {
			if keys[i], err = verify.DecodeKey(s); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		pipe := d.pipe.Load()
		if pipe == nil {
			http.Error(w, errNotRunning.Error(), http.StatusServiceUnavailable)
			return
		}
		res, err := pipe.Repair(r.Context(), id, keys)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		d.log.Info("repair requested over HTTP", "table", id.String(), "keys", len(keys), "remote", r.RemoteAddr,
			"upserted", res.Upserted, "deleted", res.Deleted, "skipped", res.Skipped, "epoch", res.Epoch)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(repairAnswer(res))
	})
}

func repairAnswer(res merge.RepairResult) repairResponse {
	pos := ""
	if !res.Pos.IsZero() {
		pos = res.Pos.String()
	}
	return repairResponse{Epoch: res.Epoch, Position: pos, Upserted: res.Upserted, Deleted: res.Deleted, Skipped: res.Skipped, Absent: res.Absent}
}
