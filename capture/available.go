package capture

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
)

// Binlog is what a server can still stream: where its oldest binlog
// starts, and how far its history goes.
type Binlog struct {
	Flavor string
	Files  map[string]uint64 // binlog files on the server and their sizes
	Oldest string            // the oldest binlog file
	// Purged is the GTID state before the oldest binlog: MariaDB's
	// Gtid_list of that file, MySQL's @@gtid_purged. A position must
	// include it for the server to stream after it.
	Purged string
	// Executed is the server's GTID history: MariaDB's @@gtid_binlog_pos,
	// MySQL's @@gtid_executed. A position it does not include holds
	// transactions this server never had.
	Executed   string
	ServerUUID string
}

// ReadBinlog reads what the server can stream.
func ReadBinlog(ctx context.Context, conn *client.Conn, flavor, serverUUID string) (*Binlog, error) {
	b := &Binlog{Flavor: flavor, Files: map[string]uint64{}, ServerUUID: serverUUID}
	res, err := conn.Execute("SHOW BINARY LOGS")
	if err != nil {
		return nil, fmt.Errorf("list the binlogs (SHOW BINARY LOGS; grant REPLICATION CLIENT or BINLOG MONITOR): %w", err)
	}
	for i := 0; i < res.RowNumber(); i++ {
		name, _ := res.GetString(i, 0)
		size, _ := res.GetUint(i, 1)
		b.Files[strings.Clone(name)] = size
		if i == 0 {
			b.Oldest = strings.Clone(name)
		}
	}
	if b.Oldest == "" {
		return nil, fmt.Errorf("SHOW BINARY LOGS lists no binlog: the binlog is off; enable log_bin")
	}
	switch flavor {
	case binlogpos.FlavorMariaDB:
		// The oldest binlog opens with a Gtid_list event: the GTID state
		// as the server had it before that file.
		ev, err := conn.Execute(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' LIMIT 4", strings.ReplaceAll(b.Oldest, "'", "''")))
		if err != nil {
			return nil, fmt.Errorf("read the start of the oldest binlog %s: %w", b.Oldest, err)
		}
		for i := 0; i < ev.RowNumber(); i++ {
			typ, _ := ev.GetStringByName(i, "Event_type")
			if typ == "Gtid_list" {
				info, _ := ev.GetStringByName(i, "Info")
				b.Purged = strings.Trim(strings.TrimSpace(info), "[]")
			}
		}
		r, err := conn.Execute("SELECT @@gtid_binlog_pos")
		if err != nil {
			return nil, fmt.Errorf("read @@gtid_binlog_pos: %w", err)
		}
		s, _ := r.GetString(0, 0)
		b.Executed = strings.Clone(s)
	default:
		r, err := conn.Execute("SELECT @@GLOBAL.gtid_purged, @@GLOBAL.gtid_executed")
		if err != nil {
			return nil, fmt.Errorf("read @@gtid_purged and @@gtid_executed: %w", err)
		}
		p, _ := r.GetString(0, 0)
		x, _ := r.GetString(0, 1)
		b.Purged = strings.ReplaceAll(p, "\n", "")
		b.Executed = strings.ReplaceAll(x, "\n", "")
	}
	b.Purged, b.Executed = strings.Clone(b.Purged), strings.Clone(b.Executed)
	return b, nil
}

// Missing says why the server cannot stream what follows pos, or "" when
// it can: the binlog after pos was purged, or pos holds transactions the
// server never had (another server's history, a binlog that was reset), or
// pos is a file of another server or one no longer on it.
func (b *Binlog) Missing(at cdcsync.Position) (string, error) {
	pos, err := binlogpos.Decode(at)
	if err != nil {
		return "", err
	}
	if pos.UsesGTID() {
		if b.Purged != "" {
			purged := binlogpos.Pos{Flavor: b.Flavor, GTIDSet: b.Purged}.Position()
			ok, err := binlogpos.Order{}.Includes(at, purged)
			if err != nil {
				return "", err
			}
			if !ok {
				return fmt.Sprintf("the server purged the binlog after it (its oldest binlog, %s, starts after %s)", b.Oldest, b.Purged), nil
			}
		}
		exec := binlogpos.Pos{Flavor: b.Flavor, GTIDSet: b.Executed}.Position()
		ok, err := binlogpos.Order{}.Includes(exec, at)
		if err != nil {
			return "", err
		}
		if !ok {
			return fmt.Sprintf("the server's history (%s) does not contain it: this server never had some of those transactions "+
				"(it is not the server cdcsync read, nor a replica that has caught up with it, or its binlog was reset)", b.Executed), nil
		}
		return "", nil
	}
	if pos.ServerUUID != "" && b.ServerUUID != "" && pos.ServerUUID != b.ServerUUID {
		return fmt.Sprintf("it is a file position of server %s and this is server %s: file positions do not carry across servers (enable GTIDs to fail over)", pos.ServerUUID, b.ServerUUID), nil
	}
	size, ok := b.Files[pos.File]
	if !ok {
		return fmt.Sprintf("the binlog file %s is no longer on the server (its oldest is %s)", pos.File, b.Oldest), nil
	}
	if uint64(pos.Offset) > size {
		return fmt.Sprintf("the binlog file %s is only %d bytes long", pos.File, size), nil
	}
	return "", nil
}
