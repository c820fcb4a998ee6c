package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/lake"
)

// cutOptions are the flags of `cdcsync cut`.
type cutOptions struct {
	epoch   int64
	asOf    string // RFC 3339 time: the newest cut whose transactions all committed in MySQL by then
	format  string // text, json, trino, spark, duckdb
	catalog string // the engine's name for the catalog, in the SQL printed
	tag     string
	keep    time.Duration
}

// runCut prints a transactionally consistent cut of the pipeline's tables:
// for every table the snapshot that holds the same transactions, and the
// SQL that reads it in each engine; with a tag, it also tags those
// snapshots so that the cut can be read again by name.
func runCut(ctx context.Context, cfg *config.Config, o cutOptions, stdout, stderr io.Writer) error {
	lk, err := lake.Open(ctx, lake.OptionsFrom(cfg), newLogger(cfg, stderr))
	if err != nil {
		return exitError{1, err}
	}
	defer lk.Close()
	if o.asOf != "" {
		if o.epoch != 0 {
			return exitError{2, fmt.Errorf("cut takes --epoch or --as-of, not both")}
		}
		t, err := time.Parse(time.RFC3339, o.asOf)
		if err != nil {
			return exitError{2, fmt.Errorf("--as-of %q is not a time: write it as RFC 3339, e.g. 2026-12-03T17:00:00Z", o.asOf)}
		}
		if o.epoch, err = lk.EpochAsOf(ctx, t); err != nil {
			return exitError{1, err}
		}
	}
	cut, err := lk.Cut(ctx, o.epoch)
	if err != nil {
		return exitError{1, err}
	}
	if o.tag != "" {
		if err := tagCut(ctx, cfg, lk, cut, o.tag, o.keep, stderr); err != nil {
			return exitError{1, err}
		}
	}
	for _, x := range cut.Excluded {
		fmt.Fprintf(stderr, "cdcsync: %s is not in the cut: %s\n", x.ID, x.Reason)
	}
	// Snapshot ids read the same in every engine version; the tag, when
	// one was set, names the same snapshots.
	tagged := ""
	if o.tag != "" {
		tagged = fmt.Sprintf(" (tag %s)", o.tag)
	}
	switch o.format {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(cut)
	case "trino":
		for _, t := range cut.Tables {
			ns, name := splitIceberg(t.Iceberg)
			fmt.Fprintf(stdout, "SELECT * FROM %s.%s.%s FOR VERSION AS OF %d; -- %s, epoch %d%s\n", quoteSQL(o.catalog), quoteSQL(ns), quoteSQL(name), t.Snapshot, t.ID, t.Epoch, tagged)
		}
	case "spark":
		for _, t := range cut.Tables {
			ns, name := splitIceberg(t.Iceberg)
			fmt.Fprintf(stdout, "SELECT * FROM %s.%s.%s VERSION AS OF %d; -- %s, epoch %d%s\n", quoteSpark(o.catalog), quoteSpark(ns), quoteSpark(name), t.Snapshot, t.ID, t.Epoch, tagged)
		}
	case "duckdb":
		// DuckDB's iceberg extension 1.5.5 misreads the deletion vectors of
		// a Puffin file that holds several through this cache (docs/query.md).
		fmt.Fprintln(stdout, "SET enable_external_file_cache = false; -- iceberg extension 1.5.5 misreads deletion vectors through it (docs/query.md)")
		for _, t := range cut.Tables {
			fmt.Fprintf(stdout, "SELECT * FROM iceberg_scan('%s', snapshot_from_id => %d); -- %s, epoch %d%s\n", strings.ReplaceAll(t.Metadata, "'", "''"), t.Snapshot, t.ID, t.Epoch, tagged)
		}
	default:
		fmt.Fprintf(stdout, "cut of pipeline %s at epoch %d", cfg.Pipeline, cut.Epoch)
		if !cut.Position.IsZero() {
			fmt.Fprintf(stdout, " (binlog position %s)", cut.Position)
		}
		if o.tag != "" {
			fmt.Fprintf(stdout, ", tagged %q", o.tag)
		}
		fmt.Fprintln(stdout)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TABLE\tICEBERG\tSNAPSHOT\tEPOCH\tCOMMITTED AT")
		for _, t := range cut.Tables {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", t.ID, t.Iceberg, t.Snapshot, t.Epoch, t.Committed.Format(time.RFC3339))
		}
		return tw.Flush()
	}
	return nil
}

// tagCut tags the cut's snapshots through the running daemon when one
// answers on admin.listen: it pauses each table's commits while the tag is
// committed, where a tag committed from here races the daemon's commits
// (with epochs back to back it can lose every try). Without a daemon, or
// one not streaming, the tag is committed from here.
func tagCut(ctx context.Context, cfg *config.Config, lk *lake.Lake, cut lake.Cut, name string, keep time.Duration, stderr io.Writer) error {
	if cfg.Admin.Network() != "" {
		c, err := newAdminClient(&cfg.Admin)
		if err != nil {
			return err
		}
		err = c.tag(ctx, cut, name, keep)
		var ue unreachableError
		var ns notStreamingError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ue), errors.As(err, &ns):
			fmt.Fprintf(stderr, "cdcsync: no streaming daemon takes the tag (%v); tagging from here\n", err)
		default:
			return err
		}
	}
	return lk.TagCut(ctx, cut, name, keep)
}

// tagRequest is the body of POST /v1/tag.
type tagRequest struct {
	Tag    string           `json:"tag"`
	Keep   string           `json:"keep,omitempty"` // a Go duration; empty: kept until removed
	Tables []tagRequestItem `json:"tables"`
}

type tagRequestItem struct {
	Table    string `json:"table"` // DB.TABLE in MySQL
	Iceberg  string `json:"iceberg"`
	Snapshot int64  `json:"snapshot_id"`
}

// tag asks the daemon to tag the cut's snapshots.
func (c *adminClient) tag(ctx context.Context, cut lake.Cut, name string, keep time.Duration) error {
	req := tagRequest{Tag: name}
	if keep > 0 {
		req.Keep = keep.String()
	}
	for _, t := range cut.Tables {
		req.Tables = append(req.Tables, tagRequestItem{Table: t.ID.String(), Iceberg: t.Iceberg, Snapshot: t.Snapshot})
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := c.post(ctx, "/v1/tag", nil, body, 5*time.Minute); err != nil {
		return fmt.Errorf("tag the cut as %q: %w", name, err)
	}
	return nil
}

// decodeTagRequest reads a POST /v1/tag body.
func decodeTagRequest(body io.Reader) (tagRequest, lake.Cut, time.Duration, error) {
	var req tagRequest
	var cut lake.Cut
	if err := json.NewDecoder(io.LimitReader(body, 16<<20)).Decode(&req); err != nil {
		return req, cut, 0, fmt.Errorf(`the body must be {"tag": NAME, "keep": DURATION, "tables": [{"table": DB.TABLE, "iceberg": NS.TABLE, "snapshot_id": N}, ...]}: %w`, err)
	}
	var keep time.Duration
	if req.Keep != "" {
		var err error
		if keep, err = time.ParseDuration(req.Keep); err != nil || keep < 0 {
			return req, cut, 0, fmt.Errorf("keep %q is not a duration: write it as e.g. 168h", req.Keep)
		}
	}
	if len(req.Tables) == 0 {
		return req, cut, 0, errors.New("the request names no table to tag")
	}
	for _, t := range req.Tables {
		id, err := parseTableID(t.Table)
		if err != nil {
			return req, cut, 0, err
		}
		if !strings.Contains(t.Iceberg, ".") || t.Snapshot == 0 {
			return req, cut, 0, fmt.Errorf("table %s: give its Iceberg table as NAMESPACE.TABLE and a snapshot_id", t.Table)
		}
		cut.Tables = append(cut.Tables, lake.CutTable{ID: id, Iceberg: t.Iceberg, Snapshot: t.Snapshot})
	}
	return req, cut, keep, nil
}

// tag tags the cut's snapshots with the running session's lake, which
// pauses each table's commits meanwhile (lake.Lake.TagCut).
func (d *daemon) tag(ctx context.Context, cut lake.Cut, name string, keep time.Duration) error {
	lk := d.lake.Load()
	if lk == nil {
		return errNotRunning
	}
	return lk.TagCut(ctx, cut, name, keep)
}

func splitIceberg(name string) (ns, table string) {
	i := strings.LastIndexByte(name, '.')
	return name[:i], name[i+1:]
}

// quoteSQL quotes an identifier for Trino (standard SQL double quotes).
func quoteSQL(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// quoteSpark quotes an identifier for Spark SQL (backticks).
func quoteSpark(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
