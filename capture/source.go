package capture

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/merge"
)

// Source is a MySQL or MariaDB server as the source of a session
// (merge.Source). Inspect learns the server's flavor and identity, which
// the other methods use: call it first.
type Source struct {
	cfg     *config.Source
	ddl     DDLPolicies
	workers int // connections of the initial copy
	values  *ValuePolicy
	log     *slog.Logger
	flavor  string
	version string
	uuid    string
	order   binlogpos.Order
}

// NewSource returns the source cfg describes. ddl supplies the ddl:
// policies, workers is the number of connections of the initial copy
// (snapshot.workers), values applies the types: policies on both the
// binlog and the copy path.
func NewSource(cfg *config.Source, ddl DDLPolicies, workers int, values *ValuePolicy, log *slog.Logger) *Source {
	return &Source{cfg: cfg, ddl: ddl, workers: workers, values: values, log: log, order: binlogpos.NewOrder()}
}

func (s *Source) addr() string {
	return net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port))
}

// Inspect runs the preflight checks and reads the selected tables, the
// server's position before it listed them (the horizon), the XA
// transactions prepared then, and the foreign keys whose actions the
// binlog lacks. Warnings are logged.
func (s *Source) Inspect(ctx context.Context) (*merge.Inspection, error) {
	// A password that cannot be had is the configuration's problem, not a
	// lost connection: said as it is, and never retried.
	if _, err := s.cfg.ResolvePassword(); err != nil {
		return nil, err
	}
	conn, err := Connect(ctx, s.cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDisconnected, err)
	}
	defer conn.Close()
	in := &merge.Inspection{Server: s.addr(), Failed: map[cdcsync.TableID][]string{}}
	// The position before the tables are listed: a table created before it
	// that the list lacks is gone again, not new (StreamConfig.Horizon).
	if fl, _, err := ServerFlavor(ctx, conn); err == nil {
		if id, err := ServerIdentity(ctx, conn, fl); err == nil {
			in.Horizon, _ = CurrentPosition(ctx, conn, fl, id)
		}
	}
	// XA transactions prepared before the horizon: a copy starting there
	// must wait for them to end (AwaitPreparedXA).
	in.PreparedXA, in.PreparedXAErr = PreparedXA(ctx, conn)
	findings, schemas, err := Preflight(ctx, conn, s.cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDisconnected, err)
	}
	in.Schemas = schemas
	for _, f := range Failed(findings) {
		in.Failures = append(in.Failures, f.Message)
		if f.Table != (cdcsync.TableID{}) {
			in.Failed[f.Table] = append(in.Failed[f.Table], f.Message)
		} else {
			in.Global = true
		}
	}
	if in.Global {
		return in, nil
	}
	for _, f := range findings {
		if f.Warning {
			s.log.Warn(f.Message, "check", f.Check)
		}
	}
	if s.flavor, s.version, err = ServerFlavor(ctx, conn); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDisconnected, err)
	}
	if s.uuid, err = ServerIdentity(ctx, conn, s.flavor); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDisconnected, err)
	}
	in.KeysLogged = CascadesLogged(s.flavor, s.version)
	if !in.KeysLogged {
		ids := make([]cdcsync.TableID, 0, len(schemas))
		for _, ts := range schemas {
			ids = append(ids, ts.ID)
		}
		if in.ForeignKeys, _, err = ForeignKeys(ctx, conn, ids); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrDisconnected, err)
		}
	}
	if in.Horizon.IsZero() {
		return nil, fmt.Errorf("%w: could not read the server's binlog position", ErrDisconnected)
	}
	s.log.Info("source checked", "flavor", s.flavor, "version", s.version, "tables", len(schemas))
	return in, nil
}

// History reads what the server can still stream (Binlog).
func (s *Source) History(ctx context.Context) (merge.History, error) {
	conn, err := Connect(ctx, s.cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDisconnected, err)
	}
	defer conn.Close()
	b, err := ReadBinlog(ctx, conn, s.flavor, s.uuid)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDisconnected, err)
	}
	return b, nil
}

// AwaitPrepared waits, on a connection of its own, for the XA transactions
// xids to end.
func (s *Source) AwaitPrepared(ctx context.Context, xids []string) error {
	conn, err := Connect(ctx, s.cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDisconnected, err)
	}
	defer conn.Close()
	if err := AwaitPreparedXA(ctx, conn, xids, s.log); err != nil {
		return fmt.Errorf("%w: %w", ErrDisconnected, err)
	}
	return nil
}

// Chunks returns a reader of table chunks for the initial copies.
func (s *Source) Chunks() (merge.ChunkSource, func()) {
	r := NewChunkReader(s.cfg, s.flavor, s.uuid, s.values, s.workers)
	return r, r.Close
}

// Order orders the server's positions.
func (s *Source) Order() cdcsync.Order { return s.order }

// Stream reads the binlog from spec.Start (see Stream).
func (s *Source) Stream(ctx context.Context, spec merge.StreamSpec, out chan<- *cdcsync.Txn) error {
	if s.flavor == "" {
		return errors.New("capture.Source.Stream called before Inspect")
	}
	return Stream(ctx, StreamConfig{Source: s.cfg, Flavor: s.flavor, ServerUUID: s.uuid,
		Start: spec.Start, Schemas: spec.Schemas, Committed: spec.Committed, SchemaPos: spec.SchemaPos, Shadows: spec.Shadows,
		Stopped: spec.Stopped, Horizon: spec.Horizon, SettledXA: spec.SettledXA, ForeignKeys: spec.Keys != nil, Keys: spec.Keys,
		DDL: s.ddl, Values: s.values, Log: s.log, FragmentBytes: spec.FragmentBytes}, out)
}
