package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/lake"
)

// pipelineStatus is what `cdcsync status --json` prints.
type pipelineStatus struct {
	Pipeline   string         `json:"pipeline"`
	Holder     *holderStatus  `json:"holder"` // nil when no daemon ever held the pipeline
	Daemon     daemonStatus   `json:"daemon"`
	Checkpoint *checkpointOut `json:"checkpoint"`
	Tables     []tableStatus  `json:"tables"`
}

type holderStatus struct {
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Since    time.Time `json:"since"`
	Renewed  time.Time `json:"renewed"` // on the holder's clock
	Token    int64     `json:"token"`
	Released bool      `json:"released"`
}

// daemonStatus is what the daemon answering at http.listen reports.
type daemonStatus struct {
	Endpoint        string   `json:"endpoint"`
	Answering       bool     `json:"answering"`
	Error           string   `json:"error,omitempty"` // why it does not answer
	Ready           bool     `json:"ready"`
	NotReady        string   `json:"not_ready,omitempty"` // /readyz's reason
	Holding         *bool    `json:"holding,omitempty"`   // it holds the lease (else it is a standby)
	SourceConnected *bool    `json:"source_connected,omitempty"`
	LagSeconds      *float64 `json:"lag_seconds,omitempty"`
	LagBytes        *float64 `json:"lag_bytes,omitempty"`
	Restarts        *float64 `json:"restarts,omitempty"`
}

type checkpointOut struct {
	Epoch    int64     `json:"epoch"`
	Position string    `json:"position"`
	Time     time.Time `json:"time"`
}

type tableStatus struct {
	Table      string     `json:"table"`
	Iceberg    string     `json:"iceberg"`
	State      string     `json:"state"` // streaming, copying, copying again, marked for a new copy, stopped, dropped
	Epoch      int64      `json:"epoch"`
	Position   string     `json:"position"`
	LastCommit *time.Time `json:"last_commit,omitempty"`
	CopyRows   int64      `json:"copy_rows,omitempty"`
	CopyOf     int64      `json:"copy_estimate,omitempty"` // the server's estimate, from the running daemon
	Stopped    string     `json:"stopped,omitempty"`       // why, and how to resume
}

// runStatus prints the pipeline's state: who holds it, what the running
// daemon reports (readiness, source connection, lag), the checkpoint, and
// one line per table. It reads the catalog, the warehouse and the daemon's
// http.listen; it needs no MySQL password.
func runStatus(ctx context.Context, cfg *config.Config, asJSON bool, stdout, stderr io.Writer) error {
	lk, err := lake.Open(ctx, lake.OptionsFrom(cfg), newLogger(cfg, stderr))
	if err != nil {
		return exitError{1, err}
	}
	defer lk.Close()
	st := pipelineStatus{Pipeline: cfg.Pipeline, Tables: []tableStatus{}}
	if rec, version, err := lk.LeaseStore().Load(ctx); err != nil {
		return exitError{1, err}
	} else if version != "" {
		st.Holder = &holderStatus{Host: rec.Holder.Host, PID: rec.Holder.PID, Since: rec.Acquired, Renewed: rec.Renewed, Token: rec.Token, Released: rec.Released}
	}
	if ck, ok, err := lk.LoadCheckpoint(ctx); err != nil {
		return exitError{1, err}
	} else if ok {
		st.Checkpoint = &checkpointOut{Epoch: ck.Epoch, Position: ck.Pos.String(), Time: ck.Time}
	}
	fams := st.Daemon.read(ctx, cfg.HTTP.Listen)
	tables, err := lk.Status(ctx)
	if err != nil {
		return exitError{1, err}
	}
	for _, t := range tables {
		ts := tableStatus{Table: t.ID.String(), Iceberg: t.Iceberg, State: "streaming", Epoch: t.Committed.Epoch, Position: t.Committed.Pos.String()}
		if !t.LastCommit.IsZero() {
			ts.LastCommit = &t.LastCommit
		}
		switch {
		case t.Stopped != nil && t.Stopped.Dropped:
			ts.State, ts.Stopped = "dropped", t.StopNote
		case t.Stopped != nil:
			ts.State, ts.Stopped = "stopped", t.StopNote
		case t.Recopy:
			ts.State = "marked for a new copy"
		case t.Committed.Copy != nil:
			ts.State, ts.CopyRows = "copying", t.Committed.Copy.Rows
			if t.Recopying {
				ts.State = "copying again"
			}
			if v, ok := gauge(fams, "cdcsync_copy_rows", t.ID.String()); ok {
				ts.CopyRows = int64(v)
			}
			if v, ok := gauge(fams, "cdcsync_copy_rows_estimate", t.ID.String()); ok {
				ts.CopyOf = int64(v)
			}
		}
		st.Tables = append(st.Tables, ts)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	st.print(stdout)
	return nil
}

// read fills d from the daemon answering at listen (http.listen): its
// /readyz and /metrics. It returns the metric families, nil when it does
// not answer.
func (d *daemonStatus) read(ctx context.Context, listen string) map[string]*dto.MetricFamily {
	if listen == config.HTTPOff {
		d.Error = "http.listen is off: the running daemon cannot be asked"
		return nil
	}
	host, port, _ := net.SplitHostPort(listen)
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	d.Endpoint = "http://" + net.JoinHostPort(host, port)
	client := http.Client{Timeout: 3 * time.Second}
	get := func(path string) (int, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.Endpoint+path, nil)
		if err != nil {
			return 0, nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		return resp.StatusCode, b, err
	}
	code, body, err := get("/readyz")
	if err != nil {
		d.Error = fmt.Sprintf("no daemon answers at %s (%v): none runs on this machine, or its http.listen differs", d.Endpoint, err)
		return nil
	}
	d.Answering = true
	d.Ready = code == http.StatusOK
	if !d.Ready {
		d.NotReady = strings.TrimPrefix(strings.TrimSpace(string(body)), "not ready: ")
	}
	_, body, err = get("/metrics")
	if err != nil {
		d.Error = fmt.Sprintf("read %s/metrics: %v", d.Endpoint, err)
		return nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		d.Error = fmt.Sprintf("read %s/metrics: %v", d.Endpoint, err)
		return nil
	}
	opt := func(name string) *float64 {
		if v, ok := gauge(fams, name, ""); ok {
			return &v
		}
		return nil
	}
	flag := func(name string) *bool {
		if v := opt(name); v != nil {
			b := *v == 1
			return &b
		}
		return nil
	}
	d.Holding = flag("cdcsync_lease_held")
	d.SourceConnected = flag("cdcsync_source_connected")
	d.LagSeconds = opt("cdcsync_replication_lag_seconds")
	d.LagBytes = opt("cdcsync_replication_lag_bytes")
	if f := fams["cdcsync_restarts_total"]; f != nil {
		var n float64
		for _, m := range f.GetMetric() {
			n += m.GetCounter().GetValue()
		}
		d.Restarts = &n
	}
	return fams
}

// gauge returns the value of a gauge (or counter), the one whose table
// label is table when table is set.
func gauge(fams map[string]*dto.MetricFamily, name, table string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if table != "" {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == "table" && l.GetValue() == table {
					found = true
				}
			}
			if !found {
				continue
			}
		}
		if g := m.GetGauge(); g != nil {
			return g.GetValue(), true
		}
		if c := m.GetCounter(); c != nil {
			return c.GetValue(), true
		}
	}
	return 0, false
}

func (st *pipelineStatus) print(w io.Writer) {
	fmt.Fprintf(w, "pipeline %s\n", st.Pipeline)
	switch h := st.Holder; {
	case h == nil:
		fmt.Fprintln(w, "holder:     none yet (no daemon has run this pipeline)")
	case h.Released:
		fmt.Fprintf(w, "holder:     none (released by %s pid %d at %s; lease token %d)\n", h.Host, h.PID, h.Renewed.Format(time.RFC3339), h.Token)
	default:
		fmt.Fprintf(w, "holder:     %s pid %d since %s (lease token %d, last renewed %s ago by its clock)\n",
			h.Host, h.PID, h.Since.Format(time.RFC3339), h.Token, time.Since(h.Renewed).Round(time.Second))
	}
	d := st.Daemon
	switch {
	case !d.Answering:
		fmt.Fprintf(w, "daemon:     %s\n", d.Error)
	default:
		role := ""
		if d.Holding != nil && !*d.Holding {
			role = " (a standby)"
		}
		state := "ready"
		if !d.Ready {
			state = "not ready: " + d.NotReady
		}
		fmt.Fprintf(w, "daemon:     %s%s: %s\n", d.Endpoint, role, state)
		if d.SourceConnected != nil {
			conn := "connected"
			if !*d.SourceConnected {
				conn = "not connected"
			}
			fmt.Fprintf(w, "source:     %s", conn)
			if d.LagSeconds != nil {
				fmt.Fprintf(w, ", lag %s", (time.Duration(*d.LagSeconds * float64(time.Second))).Round(100*time.Millisecond))
			}
			if d.LagBytes != nil {
				fmt.Fprintf(w, " (%d binlog bytes)", int64(*d.LagBytes))
			}
			if d.Restarts != nil && *d.Restarts > 0 {
				fmt.Fprintf(w, ", %d restarts", int64(*d.Restarts))
			}
			fmt.Fprintln(w)
		}
	}
	if c := st.Checkpoint; c != nil {
		fmt.Fprintf(w, "checkpoint: epoch %d at %s, %s\n", c.Epoch, c.Time.Format(time.RFC3339), c.Position)
	} else {
		fmt.Fprintln(w, "checkpoint: none yet")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tICEBERG\tSTATE\tEPOCH\tLAST COMMIT\tPOSITION")
	var notes []string
	for _, t := range st.Tables {
		state := t.State
		switch {
		case t.CopyOf > 0:
			state = fmt.Sprintf("%s %d/%d rows", t.State, t.CopyRows, t.CopyOf)
		case t.CopyRows > 0:
			state = fmt.Sprintf("%s (%d rows)", t.State, t.CopyRows)
		}
		last := "-"
		if t.LastCommit != nil {
			last = t.LastCommit.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", t.Table, t.Iceberg, state, t.Epoch, last, t.Position)
		if t.Stopped != "" {
			notes = append(notes, t.Stopped)
		}
	}
	tw.Flush()
	if len(notes) > 0 {
		fmt.Fprintf(w, "\n%s\n", strings.Join(notes, "\n"))
	}
}
