package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/cdcsync/cdcsync/config"
	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// BinlogProbe is what ProbeBinlog saw.
type BinlogProbe struct {
	Pos    binlogpos.Pos // where it asked for the binlog: the server's current position
	Events []string      // the types of the first events the server sent
	TLS    TLSState      // how the binlog connection was encrypted
	// Busy says why the probe did not read (a replica with the configured
	// server_id, or this account, is reading the binlog already); "" when
	// it read.
	Busy string
}

// ProbeBinlog opens a binlog connection the way Stream does (the same
// account, server_id and TLS, with the same plaintext fallback for
// preferred), asks for the binlog at the server's current position, reads
// the first events and closes, so that a check it passes means the stream
// can start. It does not ask when the binlog is read already by a replica
// with the configured server_id or, when the account may not list the
// replicas, by this account (a running cdcsync): MariaDB drops the older
// of two binlog connections with one server_id.
func ProbeBinlog(ctx context.Context, src *config.Source) (*BinlogProbe, error) {
	conn, flavor, uuid, err := connectIdentified(ctx, src)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	pr := &BinlogProbe{}
	if pr.Pos, err = currentPos(conn, flavor, uuid); err != nil {
		return nil, err
	}
	if pr.Busy = binlogReaders(ctx, conn, src.ServerID); pr.Busy != "" {
		return pr, nil
	}
	syncCfg, err := binlogSyncerConfig(src, flavor)
	if err != nil {
		return nil, err
	}
	syncCfg.Option = func(c *client.Conn) error {
		r, err := c.Execute(tlsStateQuery)
		if err != nil {
			return fmt.Errorf("read the binlog connection's encryption: %w", err)
		}
		pr.TLS = tlsStateOf(r.Values)
		return nil
	}
	timeout := src.ConnectTimeout.Duration
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pr.Events, err = probeEvents(ctx, syncCfg, pr.Pos)
	if err != nil && plainFallback(src, &syncCfg, err) {
		pr.Events, err = probeEvents(ctx, syncCfg, pr.Pos)
	}
	if err != nil {
		return nil, probeExplain(ctx, src, syncCfg.Password, timeout, err)
	}
	return pr, nil
}

// probeEvents asks for the binlog at pos and returns the types of the
// events up to the first FORMAT_DESCRIPTION_EVENT, which every binlog dump
// sends first (after a ROTATE_EVENT naming the file).
func probeEvents(ctx context.Context, syncCfg replication.BinlogSyncerConfig, pos binlogpos.Pos) ([]string, error) {
	syncer := replication.NewBinlogSyncer(syncCfg)
	defer syncer.Close()
	var (
		streamer *replication.BinlogStreamer
		err      error
	)
	if pos.UsesGTID() {
		var set mysql.GTIDSet
		if syncCfg.Flavor == binlogpos.FlavorMariaDB {
			set, err = mysql.ParseMariadbGTIDSet(pos.GTIDSet)
		} else {
			set, err = mysql.ParseMysqlGTIDSet(pos.GTIDSet)
		}
		if err != nil {
			return nil, fmt.Errorf("parse the server's GTID position %q: %w", pos.GTIDSet, err)
		}
		streamer, err = syncer.StartSyncGTID(set)
	} else {
		streamer, err = syncer.StartSync(mysql.Position{Name: pos.File, Pos: pos.Offset})
	}
	if err != nil {
		return nil, err
	}
	var events []string
	for len(events) < 8 {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			return events, err
		}
		events = append(events, ev.Header.EventType.String())
		if ev.Header.EventType == replication.FORMAT_DESCRIPTION_EVENT {
			break
		}
	}
	return events, nil
}

// binlogReaders says who reads the binlog already such that a probe with
// serverID would cut them off, or "".
func binlogReaders(ctx context.Context, conn *client.Conn, serverID uint32) string {
	// SHOW SLAVE HOSTS lists the replicas with their ids, when the account
	// may (MySQL: REPLICATION SLAVE; MariaDB: REPLICATION MASTER ADMIN).
	if r, err := connQuery(ctx, conn, "SHOW SLAVE HOSTS"); err == nil && len(r.Fields) > 1 {
		for _, row := range r.Values {
			if id, err := strconv.ParseUint(connText(row[0]), 10, 32); err == nil && id == uint64(serverID) {
				return fmt.Sprintf("a replica with server_id %d (registered as host %q) is reading the binlog", serverID, connText(row[1]))
			}
		}
		return ""
	}
	// Otherwise the binlog dumps of this account, which it may always see.
	r, err := connQuery(ctx, conn, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%' AND USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1)")
	if err == nil && len(r.Values) == 1 && connText(r.Values[0][0]) != "0" {
		return "this account is reading the binlog already (a running cdcsync?)"
	}
	return ""
}

// probeExplain makes a failed probe a sentence with the fix: a failure to
// connect as Connect explains it, a refusal of the binlog by what it says.
func probeExplain(ctx context.Context, src *config.Source, password string, timeout time.Duration, err error) error {
	addr := net.JoinHostPort(src.Host, strconv.Itoa(src.Port))
	var my *mysql.MyError
	if errors.As(err, &my) && !connRefusedLogin(my) {
		return fmt.Errorf("%s refused to send its binlog to replica server_id %d (error %d: %s): fix what the server says (the checks of the settings and privileges name the usual causes)",
			addr, src.ServerID, my.Code, config.Redact(my.Message, password))
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("%s accepted the binlog connection but sent no event within %s: check that the account may read the binlog (REPLICATION SLAVE)", addr, timeout)
	}
	return connExplain(ctx, src, addr, password, timeout, err)
}

// explainBinlogStart explains the failure of a binlog connection to start
// as Connect explains its own: a failure to connect (TLS, the login, the
// network) becomes a sentence with the fix; an error the server sent about
// the binlog stays as it is.
func explainBinlogStart(src *config.Source, password string, err error) error {
	var my *mysql.MyError
	if errors.As(err, &my) && !connRefusedLogin(my) {
		return err
	}
	timeout := src.ConnectTimeout.Duration
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	return connExplain(context.Background(), src, net.JoinHostPort(src.Host, strconv.Itoa(src.Port)), password, timeout, err)
}

// connRefusedLogin says whether the server refused the login itself (the
// account, the host), as opposed to a command.
func connRefusedLogin(my *mysql.MyError) bool {
	switch my.Code {
	case mysql.ER_ACCESS_DENIED_ERROR, 1698, mysql.ER_HOST_NOT_PRIVILEGED, mysql.ER_HOST_IS_BLOCKED, mysql.ER_CON_COUNT_ERROR:
		return true
	}
	return false
}
