package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
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
// pipeline mirrors). With a daemon running (reached at admin.listen) the
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
		lk, err = lake.Open(ctx, lake.OptionsFrom(cfg), newLogger(cfg, stderr))
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
		if cfg.Admin.Network() == "" {
			return exitError{1, fmt.Errorf("admin.listen is off, so cdcsync resync cannot reach a running daemon; " +
				"set admin.listen (see docs/configuration.md), or stop the daemon and run `cdcsync resync --offline` so that its next start copies the tables")}
		}
		c, err := newAdminClient(&cfg.Admin)
		if err != nil {
			return exitError{2, err}
		}
		for i, id := range ids {
			msg, err := c.resync(ctx, id)
			if err == nil {
				fmt.Fprint(stdout, msg)
				continue
			}
			var ue unreachableError
			if !errors.As(err, &ue) || i > 0 {
				return exitError{1, err}
			}
			fmt.Fprintf(stderr, "no cdcsync daemon answers (%v); marking the tables to be copied when cdcsync next starts\n", ue.err)
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

// adminClient calls the admin listener of a running daemon.
type adminClient struct {
	admin *config.Admin
	token string
	where string // the socket or host:port, for messages
	http  *http.Client
}

func newAdminClient(a *config.Admin) (*adminClient, error) {
	token, err := a.ResolveToken()
	if err != nil {
		return nil, err
	}
	return &adminClient{admin: a, token: token}, nil
}

// connect finds the daemon: the first default socket that answers (or the
// configured one), or the TCP address.
func (c *adminClient) connect(ctx context.Context) error {
	if c.http != nil {
		return nil
	}
	var d net.Dialer
	if c.admin.Network() == "tcp" {
		host, port, err := net.SplitHostPort(c.admin.Listen)
		if err != nil {
			return fmt.Errorf("admin.listen %q: %w", c.admin.Listen, err)
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		c.where = net.JoinHostPort(host, port)
		c.http = &http.Client{Transport: &http.Transport{DialContext: d.DialContext, Proxy: nil}}
		return nil
	}
	var missing []string
	for _, path := range c.admin.Sockets() {
		conn, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			conn.Close()
			c.where = path
			c.http = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "unix", path)
			}}}
			return nil
		}
		switch {
		case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
			missing = append(missing, path)
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
			return fmt.Errorf("cannot connect to the admin socket %s: permission denied; run cdcsync resync as the user the daemon runs as (the socket's owner) or as root", path)
		default:
			return fmt.Errorf("cannot connect to the admin socket %s: %w", path, err)
		}
	}
	return unreachableError{fmt.Errorf("nothing listens on %s", strings.Join(missing, " or "))}
}

// resync asks the daemon to copy id afresh and returns its answer.
func (c *adminClient) resync(ctx context.Context, id cdcsync.TableID) (string, error) {
	body, err := c.post(ctx, "/v1/resync", tableQuery(id), nil, 2*time.Minute)
	if err != nil {
		return "", fmt.Errorf("resync %s: %w", id, err)
	}
	return string(body), nil
}

func tableQuery(id cdcsync.TableID) url.Values { return url.Values{"table": {id.String()}} }

// notStreamingError is the answer of a daemon that holds no running
// pipeline (503): it is starting, reconnecting, or a standby.
type notStreamingError struct{ err error }

func (e notStreamingError) Error() string { return e.err.Error() }

// post sends a POST request with query to the daemon's admin endpoint path
// (with a JSON body unless body is nil) and returns the answer of a 200.
// Other answers are errors that say what to do; unreachableError when no
// daemon of this version answers.
func (c *adminClient) post(ctx context.Context, path string, query url.Values, body []byte, timeout time.Duration) ([]byte, error) {
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	host := c.where
	if c.admin.Network() == "unix" {
		host = "cdcsync" // the socket is the address; any name does
	}
	u := url.URL{Scheme: "http", Host: host, Path: path, RawQuery: query.Encode()}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return nil, unreachableError{fmt.Errorf("nothing listens at %s: %w", c.where, err)}
		}
		return nil, fmt.Errorf("ask the daemon at %s: %w", c.where, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	text := strings.TrimSpace(string(answer))
	switch resp.StatusCode {
	case http.StatusOK:
		return answer, nil
	case http.StatusNotFound:
		return nil, unreachableError{fmt.Errorf("%s does not serve %s (is it a cdcsync daemon of this version?)", c.where, path)}
	case http.StatusUnauthorized:
		return nil, fmt.Errorf("the daemon at %s refused the admin token: set admin.token or admin.token_file to the daemon's token (%s)", c.where, text)
	case http.StatusServiceUnavailable:
		return nil, notStreamingError{fmt.Errorf("the daemon at %s refused: %s", c.where, text)}
	}
	return nil, fmt.Errorf("the daemon at %s refused: %s", c.where, text)
}
