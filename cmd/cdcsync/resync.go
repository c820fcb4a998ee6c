package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/lake"
)

// errNotRunning says the daemon has no running pipeline to take a request.
var errNotRunning = errors.New("the pipeline is not streaming right now (checking the source, or reconnecting); try again in a few seconds")

// resync asks the running pipeline to copy a table afresh.
func (d *daemon) resync(ctx context.Context, id cdcsync.TableID) error {
	pipe := d.pipe.Load()
	if pipe == nil {
		return errNotRunning
	}
	return pipe.Resync(ctx, id)
}

func parseTableID(name string) (cdcsync.TableID, error) {
	db, tbl, ok := strings.Cut(name, ".")
	if !ok || db == "" || tbl == "" || strings.Contains(tbl, ".") {
		return cdcsync.TableID{}, fmt.Errorf("name the MySQL table as DB.TABLE, got %q", name)
	}
	return cdcsync.TableID{Database: db, Table: tbl}, nil
}

// runResync copies tables afresh (names, or with all every table the
// pipeline mirrors). With a daemon running (reached at http.listen) the
// copies start at once, online: the other tables keep streaming. Without
// one, or with --offline, the Iceberg tables are marked and the next
// `cdcsync run` copies them; a table cdcsync stopped mirroring (after a
// schema change it could not follow, or a binlog position the server lost)
// is resumed that way.
func runResync(ctx context.Context, cfg *config.Config, names []string, all, offline bool, stdout, stderr io.Writer) error {
	if all == (len(names) > 0) {
		return exitError{2, errors.New("resync takes the tables to copy (DB.TABLE ...) or --all; see `cdcsync help`")}
	}
	var ids []cdcsync.TableID
	for _, name := range names {
		id, err := parseTableID(name)
		if err != nil {
			return exitError{2, err}
		}
		ids = append(ids, id)
	}
	var lk *lake.Lake
	openLake := func() error {
		if lk != nil {
			return nil
		}
		var err error
		lk, err = lake.Open(ctx, cfg, newLogger(cfg, stderr))
		return err
	}
	defer func() {
		if lk != nil {
			lk.Close()
		}
	}()
	if all {
		if err := openLake(); err != nil {
			return exitError{1, err}
		}
		tables, err := lk.PipelineTables(ctx)
		if err != nil {
			return exitError{1, err}
		}
		for _, t := range tables {
			ids = append(ids, t.ID)
		}
		if len(ids) == 0 {
			return exitError{1, fmt.Errorf("pipeline %q mirrors no table yet: nothing to copy again", cfg.Pipeline)}
		}
	}
	if !offline {
		if cfg.HTTP.Listen == config.HTTPOff {
			return exitError{1, fmt.Errorf("http.listen is off, so cdcsync resync cannot reach a running daemon; " +
				"set http.listen, or stop the daemon and run `cdcsync resync --offline` so that its next start copies the tables")}
		}
		for i, id := range ids {
			msg, err := askDaemon(ctx, cfg.HTTP.Listen, id)
			if err == nil {
				fmt.Fprint(stdout, msg)
				continue
			}
			var ue unreachableError
			if !errors.As(err, &ue) || i > 0 {
				return exitError{1, err}
			}
			fmt.Fprintf(stderr, "no cdcsync daemon answers at %s (%v); marking the tables to be copied when cdcsync next starts\n", cfg.HTTP.Listen, ue.err)
			offline = true
			break
		}
		if !offline {
			return nil
		}
	}
	if err := openLake(); err != nil {
		return exitError{1, err}
	}
	for _, id := range ids {
		t, err := lk.OpenTable(ctx, id.String())
		if err != nil {
			return exitError{1, err}
		}
		if err := t.MarkRecopy(ctx, "cdcsync resync"); err != nil {
			return exitError{1, err}
		}
		fmt.Fprintf(stdout, "%s is marked: the next `cdcsync run` copies it afresh from MySQL\n", id)
	}
	return nil
}

// unreachableError says no daemon answered.
type unreachableError struct{ err error }

func (e unreachableError) Error() string { return e.err.Error() }

func askDaemon(ctx context.Context, listen string, id cdcsync.TableID) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("http.listen %q: %w", listen, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(host, port), Path: "/v1/resync", RawQuery: url.Values{"table": {id.String()}}.Encode()}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return "", unreachableError{err}
		}
		return "", fmt.Errorf("ask the daemon at %s to resync %s: %w", u.Host, id, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusNotFound {
		return "", unreachableError{fmt.Errorf("%s does not serve /v1/resync (is it a cdcsync daemon of this version?)", u.Host)}
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the daemon at %s refused to resync %s: %s", u.Host, id, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}
