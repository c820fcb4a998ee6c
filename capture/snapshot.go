package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

// Snapshotter copies tables as of one binlog position: every SELECT runs in
// one consistent-snapshot transaction whose position is known exactly.
type Snapshotter struct {
	conn *client.Conn
	pos  binlogpos.Pos
	// Values applies the types: policies; nil means the defaults.
	Values *ValuePolicy
}

// BeginSnapshot opens a consistent-snapshot transaction and reads its binlog
// position. On MariaDB this takes no lock: the server reports the binlog
// position of the snapshot itself. On MySQL it holds FLUSH TABLES WITH READ
// LOCK for the instant it takes to start the transaction and read the
// position. The daemon copies tables with ChunkReader, which takes no lock;
// this single snapshot reads whole tables at one position (the integration
// tests compare with it).
func BeginSnapshot(ctx context.Context, src *config.Source, flavor, serverUUID string) (*Snapshotter, error) {
	conn, err := Connect(ctx, src)
	if err != nil {
		return nil, err
	}
	s := &Snapshotter{conn: conn}
	if err := s.begin(ctx, flavor, serverUUID); err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

func (s *Snapshotter) begin(ctx context.Context, flavor, serverUUID string) error {
	stmts := append([]string{}, SnapshotSessionSQL...)
	stmts = append(stmts, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
	for _, q := range stmts {
		if _, err := s.conn.Execute(q); err != nil {
			return fmt.Errorf("prepare the snapshot session (%s): %w", q, err)
		}
	}
	s.pos = binlogpos.Pos{Flavor: flavor, ServerUUID: serverUUID}
	if flavor == binlogpos.FlavorMariaDB {
		if _, err := s.conn.Execute("START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
			return fmt.Errorf("start the snapshot transaction: %w", err)
		}
		pos, err := mariadbSnapshotPosition(ctx, s.conn, flavor, serverUUID)
		if err != nil {
			return err
		}
		res, err := s.conn.Execute("SELECT BINLOG_GTID_POS(?, ?)", pos.File, pos.Offset)
		if err != nil {
			return fmt.Errorf("convert the snapshot position to a GTID position: %w", err)
		}
		pos.GTIDSet, _ = res.GetString(0, 0)
		s.pos = pos
		return nil
	}
	if _, err := s.conn.Execute("FLUSH TABLES WITH READ LOCK"); err != nil {
		return fmt.Errorf("take the brief read lock for a consistent snapshot: %w; grant RELOAD to the cdcsync user", err)
	}
	defer s.conn.Execute("UNLOCK TABLES") //nolint:errcheck // the transaction keeps its snapshot either way
	if _, err := s.conn.Execute("START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		return fmt.Errorf("start the snapshot transaction: %w", err)
	}
	// MySQL 8.4 renamed SHOW MASTER STATUS.
	res, err := s.conn.Execute("SHOW BINARY LOG STATUS")
	if err != nil {
		if res, err = s.conn.Execute("SHOW MASTER STATUS"); err != nil {
			return fmt.Errorf("read the binlog position: %w", err)
		}
	}
	if res.RowNumber() == 0 {
		return fmt.Errorf("SHOW MASTER STATUS returned nothing: the binlog is off; enable log_bin")
	}
	s.pos.File, _ = res.GetString(0, 0)
	off, _ := res.GetUint(0, 1)
	s.pos.Offset = uint32(off)
	if res.ColumnNumber() >= 5 {
		g, _ := res.GetString(0, 4)
		s.pos.GTIDSet = strings.ReplaceAll(g, "\n", "")
	}
	return nil
}

// Position is the binlog position the snapshot is consistent with.
func (s *Snapshotter) Position() cdcsync.Position { return s.pos.Position() }

// Copy streams every row of the table, decoded, to add.
func (s *Snapshotter) Copy(ctx context.Context, ts *cdcsync.TableSchema, add func(cdcsync.Row) error) error {
	q := fmt.Sprintf("SELECT %s FROM %s.%s", SelectList(ts), QuoteIdent(ts.ID.Database), QuoteIdent(ts.ID.Table))
	var res mysql.Result
	err := s.conn.ExecuteSelectStreaming(q, &res, func(raw []mysql.FieldValue) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		row, err := s.Values.SnapshotRow(ts, raw, s.pos)
		if err != nil {
			return fmt.Errorf("initial copy at %s: %w", s.pos, err)
		}
		return add(row)
	}, nil)
	if err != nil {
		return fmt.Errorf("copy %s: %w", ts.ID, err)
	}
	return nil
}

// Close ends the snapshot transaction.
func (s *Snapshotter) Close() {
	s.conn.Execute("ROLLBACK") //nolint:errcheck // closing anyway
	s.conn.Close()
}
