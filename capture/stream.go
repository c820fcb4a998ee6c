package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
	"github.com/cdcsync/cdcsync/capture/internal/strutil"
	"github.com/cdcsync/cdcsync/config"
)

// StreamConfig says what to read from the binlog and from where.
type StreamConfig struct {
	Source     *config.Source
	Flavor     string // binlogpos.FlavorMariaDB or FlavorMySQL
	ServerUUID string // identity of the server, for file/offset positions
	Start      cdcsync.Position
	Schemas    map[cdcsync.TableID]*cdcsync.TableSchema
	// Committed holds each table's committed position: rows events and DDL
	// statements that a table's Iceberg rows already reflect are passed over
	// (rows events without being decoded, since they may predate the
	// schema in Schemas).
	Committed map[cdcsync.TableID]cdcsync.Position
	// SchemaPos holds the position each table's schema in Schemas is as of:
	// a DDL statement it covers is passed over.
	SchemaPos map[cdcsync.TableID]cdcsync.Position
	// Shadows are the shadow tables of online schema change tools that
	// cdcsync remembers with their base tables.
	Shadows []cdcsync.ShadowAt
	// Stopped tables are no longer mirrored: their events are passed over,
	// and a CREATE TABLE of their name does not restart the stream.
	Stopped map[cdcsync.TableID]bool
	// Horizon is the server's position when the session listed the tables:
	// a table created before it that the session does not know was dropped
	// or renamed since, and is not a new table.
	Horizon cdcsync.Position
	// ForeignKeys says that the pipeline applies foreign-key actions
	// (merge/cascade.go): the stream follows the foreign keys of the
	// mirrored tables through the binlog (fktrack.go), starting from Keys.
	ForeignKeys bool
	// Keys are each mirrored table's foreign keys and the position they
	// are as of; a table missing here has unknown keys.
	Keys map[cdcsync.TableID]cdcsync.TableKeys
	// SettledXA are XA transactions prepared before Start that the copies
	// starting there waited for (AwaitPreparedXA): their XA COMMIT needs
	// no PREPARE, since the copies read their rows.
	SettledXA []string
	// DDL supplies the ddl: policies (a *config.Config); nil means the
	// defaults.
	DDL DDLPolicies
	// Values applies the types: policies to values Iceberg cannot hold;
	// nil means the defaults (an error).
	Values *ValuePolicy
	// CheckRowImages decodes every row image the reader decodes itself
	// (rowimage.go) with go-mysql too and panics on a difference. For
	// tests: scripts/test.sh sets CDCSYNC_CHECK_ROW_IMAGES=1, which turns
	// it on in every stream, so that every test that streams (the type
	// suites, the randomized workload, the crash tests) compares the two.
	CheckRowImages bool
	Log            *slog.Logger
	// FragmentBytes is the size (cdcsync.Txn.Bytes) past which the open
	// transaction is sent in fragments, so that a huge one is never held
	// whole; 0 sends every transaction whole.
	FragmentBytes int
}

// DDLPolicies are the ddl: settings the stream applies to schema changes.
type DDLPolicies interface {
	// IncompatiblePolicy is config.DDLStop or config.DDLRecopy for a change
	// of db.table that Iceberg cannot express.
	IncompatiblePolicy(db, table string) string
	// DropTablePolicy is ddl.drop_table, RenameTablePolicy ddl.rename_table.
	DropTablePolicy() string
	RenameTablePolicy() string
}

func (c *StreamConfig) logf(msg string, args ...any) {
	if c.Log != nil {
		c.Log.Warn(msg, args...)
	}
}

// ErrDisconnected wraps failures to reach or read from the server; the
// caller may restart from its committed position.
var ErrDisconnected = errors.New("lost the connection to the source")

// ErrNewTable means a table matching the include patterns was created; the
// caller restarts the pipeline so the table is copied and streamed.
var ErrNewTable = errors.New("a new table matches the include patterns")

// Stream reads the binlog from cfg.Start and sends every whole transaction
// that commits after it, decoded, to out. Transactions that touch no
// selected table are sent without changes so that the position advances.
// It returns when ctx is done (nil), or on the first error that a new
// connection cannot cure.
//
// A connection the server or the network drops (the server drops a reader
// that stops reading for net_write_timeout seconds, which a slow commit
// downstream causes) is opened again at the end of the last transaction
// sent: the transaction that was open is read again whole, nothing is sent
// twice, and the caller's session goes on. When the first connection
// fails, after reconnectAttempts failed attempts in a row, or on an error
// of the server (a purged binlog, a refused account), it returns the
// error, wrapping ErrDisconnected.
func Stream(ctx context.Context, cfg StreamConfig, out chan<- *cdcsync.Txn) error {
	syncCfg, err := binlogSyncerConfig(cfg.Source, cfg.Flavor)
	if err != nil {
		return err
	}
	if os.Getenv("CDCSYNC_CHECK_ROW_IMAGES") == "1" {
		cfg.CheckRowImages = true
	}
	r, err := newReader(cfg)
	if err != nil {
		return err
	}
	failed, streamed := 0, false
	for {
		read, progressed, err := r.follow(ctx, syncCfg, out)
		if err == nil || ctx.Err() != nil {
			return nil
		}
		var lost *lostConnection
		if !errors.As(err, &lost) {
			return err
		}
		if plainFallback(cfg.Source, &syncCfg, lost.err) {
			cfg.logf("the server does not offer TLS; the binlog connection is plain (source.tls.mode: preferred)",
				"source", fmt.Sprintf("%s:%d", cfg.Source.Host, cfg.Source.Port))
			continue
		}
		if positionLost(lost.err) {
			return fmt.Errorf("%w: %s:%d does not have %s any more (%v): the changes since were purged before cdcsync read them; "+
				"copy the tables again (cdcsync resync --config FILE --offline DB.TABLE for each table; cdcsync tables lists them), then start cdcsync: it copies them from the server's current position",
				cdcsync.ErrPositionLost, cfg.Source.Host, cfg.Source.Port, r.position(), lost.err)
		}
		streamed = streamed || read
		if progressed {
			failed = 0
		}
		failed++
		// A first connection that never read is the caller's to report
		// (a stopped server, a wrong password): the session knows whether
		// it ever streamed.
		if !streamed || failed > reconnectAttempts || !reconnectable(lost.err) {
			err := lost.err
			if lost.what == whatStart {
				err = explainBinlogStart(cfg.Source, syncCfg.Password, err)
			}
			return fmt.Errorf("%w: %s %s:%d at %s: %w", ErrDisconnected, lost.what, cfg.Source.Host, cfg.Source.Port, r.position(), err)
		}
		// The open transaction is read again whole from its start.
		r.txn, r.inTxn, r.xa = nil, false, nil
		wait := reconnectBackoff(failed)
		cfg.logf("the binlog connection was lost; reconnecting at the end of the last transaction read",
			"source", fmt.Sprintf("%s:%d", cfg.Source.Host, cfg.Source.Port), "position", r.position().String(),
			"attempt", failed, "in", wait.String(), "error", lost.err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
	}
}

// reconnectAttempts is how many connections in a row Stream opens that
// fail before they make progress (send a transaction, or stay up for
// healthyConnection) before it gives up and returns the error.
const reconnectAttempts = 5

// healthyConnection is how long a connection that sent no transaction (an
// idle server) must last to count as progress.
const healthyConnection = 5 * time.Second

// reconnectBackoff is the wait before the nth connection attempt in a row:
// none for the first (a dropped idle reader reconnects at once), then 1, 2,
// 4 and 8 seconds.
func reconnectBackoff(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	return time.Second << (n - 2)
}

// lostConnection is a failure of the binlog connection itself, as opposed
// to an event cdcsync cannot apply.
type lostConnection struct {
	what string // whatStart or "read the binlog of"
	err  error
}

// whatStart is the lostConnection of a binlog connection that did not
// start: connecting, logging in, registering as a replica.
const whatStart = "start reading the binlog of"

func (e *lostConnection) Error() string { return e.what + ": " + e.err.Error() }
func (e *lostConnection) Unwrap() error { return e.err }

// reconnectable says whether a new connection may cure err: a network
// failure, or the server ending the connection (killed, shutting down, a
// write timeout), but not an error about what was asked (a purged binlog
// position, a refused account, an unknown GTID).
func reconnectable(err error) bool {
	var my *mysql.MyError
	if errors.As(err, &my) {
		switch my.Code {
		case mysql.ER_SERVER_SHUTDOWN, mysql.ER_NET_READ_INTERRUPTED, mysql.ER_NET_WRITE_INTERRUPTED,
			mysql.ER_NET_READ_ERROR, mysql.ER_NET_ERROR_ON_WRITE, mysql.ER_QUERY_INTERRUPTED,
			mysql.ER_CON_COUNT_ERROR, mysql.ER_TOO_MANY_USER_CONNECTIONS,
			erConnectionKilled, erSessionWasKilled:
			return true
		}
		return false
	}
	return true
}

// positionLost says whether err is the server's refusal to send a binlog
// position it no longer has (ERROR 1236 from a purged binlog or GTID).
func positionLost(err error) bool {
	var my *mysql.MyError
	if !errors.As(err, &my) || my.Code != mysql.ER_MASTER_FATAL_ERROR_READING_BINLOG {
		return false
	}
	m := strings.ToLower(my.Message)
	return strings.Contains(m, "purged") || strings.Contains(m, "could not find") || strings.Contains(m, "not find first log") ||
		strings.Contains(m, "no longer") || strings.Contains(m, "gtid")
}

// Server error codes go-mysql does not name: MariaDB's
// ER_CONNECTION_KILLED and MySQL's ER_SESSION_WAS_KILLED.
const (
	erConnectionKilled = 1927
	erSessionWasKilled = 3169
)

// follow opens one binlog connection at the end of the last transaction
// read and sends transactions until an error; read reports whether it got
// any event, progressed whether it sent a transaction or lasted
// healthyConnection. A failure of the connection comes back as
// *lostConnection.
func (r *reader) follow(ctx context.Context, syncCfg replication.BinlogSyncerConfig, out chan<- *cdcsync.Txn) (read, progressed bool, err error) {
	began := time.Now()
	defer func() { progressed = progressed || time.Since(began) >= healthyConnection }()
	cfg := r.cfg
	// The binlog read ahead of the reader is bounded in bytes (readahead.go):
	// a fragment's worth, at least 1 MiB.
	ahead := newReadAhead(int64(max(cfg.FragmentBytes, 1<<20)))
	if syncCfg.Dialer == nil {
		syncCfg.Dialer = (&net.Dialer{}).DialContext
	}
	syncCfg.Dialer = ahead.dialer(syncCfg.Dialer)
	// go-mysql decodes the headers of rows events, the reader their rows
	// (rowimage.go).
	syncCfg.RowsEventDecodeFunc = deferRows
	syncer := replication.NewBinlogSyncer(syncCfg)
	defer syncer.Close()
	var streamer *replication.BinlogStreamer
	if r.gtid {
		var set mysql.GTIDSet
		if cfg.Flavor == binlogpos.FlavorMariaDB {
			set, err = mysql.ParseMariadbGTIDSet(r.gtids)
		} else {
			set, err = mysql.ParseMysqlGTIDSet(r.gtids)
		}
		if err != nil {
			return false, false, fmt.Errorf("parse start GTID set %q: %w", r.gtids, err)
		}
		streamer, err = syncer.StartSyncGTID(set)
	} else {
		streamer, err = syncer.StartSync(mysql.Position{Name: r.file, Pos: r.pos})
	}
	if err != nil {
		return false, false, &lostConnection{what: whatStart, err: err}
	}
	for {
		var ev *replication.BinlogEvent
		err := ahead.next(func() (int, error) {
			var err error
			ev, err = streamer.GetEvent(ctx)
			if ev == nil {
				return 0, err
			}
			return len(ev.RawData), err
		})
		if err != nil {
			if ctx.Err() != nil {
				return read, progressed, nil
			}
			return read, progressed, &lostConnection{what: "read the binlog of", err: err}
		}
		read = true
		txn, err := r.handle(ev)
		if err != nil {
			return read, progressed, err
		}
		for _, frag := range r.frags {
			select {
			case out <- frag:
				progressed = true
			case <-ctx.Done():
				return read, progressed, nil
			}
		}
		clear(r.frags)
		r.frags = r.frags[:0]
		if txn != nil {
			select {
			case out <- txn:
				progressed = progressed || !txn.Progress
			case <-ctx.Done():
				return read, progressed, nil
			}
			if r.restart != nil {
				return read, progressed, r.restart
			}
		}
	}
}

// binlogSyncerConfig is the configuration of every binlog connection
// (Stream, ProbeBinlog): src's account, with the TLS of the query
// connections (TLSConfig, so every tls mode verifies the same on both),
// and DecodingSyncerConfig's decoding options.
func binlogSyncerConfig(src *config.Source, flavor string) (replication.BinlogSyncerConfig, error) {
	pw, err := src.ResolvePassword()
	if err != nil {
		return replication.BinlogSyncerConfig{}, err
	}
	tlsCfg, err := TLSConfig(src)
	if err != nil {
		return replication.BinlogSyncerConfig{}, err
	}
	return DecodingSyncerConfig(replication.BinlogSyncerConfig{
		ServerID:  src.ServerID,
		Flavor:    flavor,
		Host:      src.Host,
		Port:      uint16(src.Port),
		User:      src.User,
		Password:  pw,
		TLSConfig: tlsCfg,
	}), nil
}

// plainFallback says whether a binlog connection that failed with err is
// to be opened again without TLS, and then drops TLS from syncCfg:
// source.tls.mode preferred against a server that has no TLS connects in
// plaintext, like Connect does for queries.
func plainFallback(src *config.Source, syncCfg *replication.BinlogSyncerConfig, err error) bool {
	if syncCfg.TLSConfig == nil || !tlsPreferred(src) || !connNoServerTLS(err) {
		return false
	}
	syncCfg.TLSConfig = nil
	return true
}

// DecodingSyncerConfig completes a BinlogSyncerConfig that names the server
// and the account with the decoding and retry options the stream relies on,
// so the bench harness's raw-decode baseline decodes exactly as cdcsync does.
func DecodingSyncerConfig(c replication.BinlogSyncerConfig) replication.BinlogSyncerConfig {
	// Dates and times as text (TIMESTAMP in UTC): with ParseTime, go-mysql
	// builds a time.Time from a DATETIME, which turns an invalid day
	// (ALLOW_INVALID_DATES) into another date.
	c.ParseTime = false
	c.TimestampStringLocation = time.UTC
	c.UseDecimal = true
	// MySQL's binary JSON as MySQL itself prints it (what a SELECT of the
	// copy returns): opaque DATE, DECIMAL and other values would otherwise
	// come out as different text (json-opaque.binlog in the fixtures).
	c.RenderJSONAsMySQLText = true
	// An idle server sends a heartbeat this often: the daemon's lag and
	// /readyz tell a quiet source from a stream that delivers nothing.
	c.HeartbeatPeriod = HeartbeatPeriod
	c.ReadTimeout = 60 * time.Second
	// Never resume by itself: after a reconnect in file/offset mode the
	// stream could restart mid-transaction; cdcsync restarts from its own
	// committed position instead.
	// The library decodes events ahead of the reader into a channel of
	// this many; its default of 10,240 events of up to 8 KiB each (more for
	// a row larger than binlog_row_event_max_size) held up to hundreds of
	// MiB outside the memory budget while a commit was slow.
	c.EventCacheCount = eventCacheCount
	c.MaxReconnectAttempts = 1
	c.DisableRetrySync = true
	c.Logger = slog.New(slog.DiscardHandler)
	return c
}

// eventCacheCount is how many decoded events go-mysql reads ahead.
const eventCacheCount = 256

// reader assembles binlog events into transactions.
type reader struct {
	cfg   StreamConfig
	order binlogpos.Order
	gtid  bool   // positions are GTID sets (the start position is one)
	gtids string // GTID set up to the last finished transaction
	file  string
	pos   uint32
	txn   *cdcsync.Txn
	inTxn bool
	// inPayload: the events handled are those of a compressed transaction.
	inPayload bool
	// frags are fragments of the open transaction to send before what
	// handle returns (StreamConfig.FragmentBytes).
	frags []*cdcsync.Txn

	// Schema tracking (ddltrack.go).
	tables  map[cdcsync.TableID]*tracked
	shadows map[cdcsync.TableID]*shadowState
	stopped map[cdcsync.TableID]bool
	keys    map[cdcsync.TableID]*cdcsync.TableKeys // fktrack.go
	restart error                                  // returned once the open transaction is sent
	marked  binlogpos.Pos                          // the last progress marker's position

	// XA transactions (xa.go).
	xa       *xaTxn   // the XA transaction being read up to its PREPARE
	prepared []*xaTxn // prepared and not yet committed or rolled back, oldest first
}

// newReader starts reading at cfg.Start.
func newReader(cfg StreamConfig) (*reader, error) {
	start, err := binlogpos.Decode(cfg.Start)
	if err != nil {
		return nil, err
	}
	r := &reader{cfg: cfg, order: binlogpos.NewOrder(), gtid: start.UsesGTID(), gtids: start.GTIDSet, file: start.File, pos: start.Offset}
	r.initTracking()
	return r, nil
}

func (r *reader) position() binlogpos.Pos {
	return binlogpos.Pos{Flavor: r.cfg.Flavor, GTIDSet: r.gtids, File: r.file, Offset: r.pos, ServerUUID: r.cfg.ServerUUID}
}

// mark is the position p as transactions carry it: file/offset positions
// keep the GTID set empty so they compare as files.
func (r *reader) mark(p binlogpos.Pos) binlogpos.Pos {
	if !r.gtid {
		p.GTIDSet = ""
	}
	return p
}

func (r *reader) begin() {
	if r.txn == nil {
		r.txn = &cdcsync.Txn{}
	}
}

// end finishes the open transaction at the event's position.
func (r *reader) end(h *replication.EventHeader) (*cdcsync.Txn, error) {
	r.begin()
	t := r.txn
	r.txn, r.inTxn = nil, false
	if h.LogPos > 0 {
		r.pos = h.LogPos
	}
	if t.GTID != "" {
		var err error
		r.gtids, err = advanceGTIDs(r.cfg.Flavor, r.gtids, t.GTID)
		if err != nil {
			return nil, err
		}
	} else if r.gtid && (len(t.Changes) > 0 || len(t.DDL) > 0) {
		// After a restart its rows would be replayed or passed over by
		// chance: stop rather than guess.
		return nil, fmt.Errorf("%w at %s:%d while cdcsync's positions are GTID sets (gtid_mode is no longer ON on the server?); "+
			"set gtid_mode back to ON (through ON_PERMISSIVE), or copy every table again from a file position "+
			"(cdcsync resync --offline --all) after setting gtid_mode=OFF for good", ErrAnonymousTransaction, r.file, h.LogPos)
	}
	t.Pos = r.mark(r.position()).Position()
	t.Time = time.Unix(int64(h.Timestamp), 0)
	t.Resume = r.resume()
	return t, nil
}

// progress returns a progress marker (cdcsync.Txn.Progress) for the
// position between transactions, or nil inside one or when the position
// did not move. idle says that the server has nothing newer (a
// heartbeat): such a marker is sent even at the same position, since the
// pipeline seals the tail of a catch-up on it.
func (r *reader) progress(idle bool) *cdcsync.Txn {
	if r.txn != nil || r.inTxn {
		return nil
	}
	pos := r.mark(r.position())
	if pos == r.marked && !idle {
		return nil
	}
	r.marked = pos
	return &cdcsync.Txn{Progress: true, Idle: idle, Pos: pos.Position(), Resume: r.resume()}
}

// ErrGTIDOrder means MariaDB wrote a GTID whose sequence number is not
// above the last one of its domain (possible without gtid_strict_mode).
// A position is the last GTID of each domain, so such a transaction would
// count as already applied after a restart: cdcsync stops instead.
var ErrGTIDOrder = errors.New("a GTID sequence number went back")

// mariadbInOrder checks that gtid follows the GTIDs of set in its domain.
func mariadbInOrder(set, gtid string, at binlogpos.Pos) error {
	if set == "" {
		return nil
	}
	covered, err := binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: set}.Contains(gtid)
	if err != nil || !covered {
		return err
	}
	return fmt.Errorf("%w: MariaDB wrote GTID %s after %s (at %s); cdcsync's positions hold the last sequence number of each domain, "+
		"so such a transaction would be skipped after a restart. Turn on gtid_strict_mode (SET GLOBAL gtid_strict_mode=ON, and gtid_strict_mode=1 in my.cnf) "+
		"so that the server refuses such writes, then copy the tables again (cdcsync resync --offline --all)", ErrGTIDOrder, gtid, set, at)
}

func advanceGTIDs(flavor, set, gtid string) (string, error) {
	if flavor == binlogpos.FlavorMariaDB {
		return binlogpos.AdvanceMariaDBGTIDSet(set, gtid)
	}
	s, err := mysql.ParseMysqlGTIDSet(set)
	if err != nil {
		return "", fmt.Errorf("parse GTID set %q: %w", set, err)
	}
	if err := s.(*mysql.MysqlGTIDSet).Update(gtid); err != nil {
		return "", fmt.Errorf("add GTID %s to %q: %w", gtid, set, err)
	}
	return s.String(), nil
}

func (r *reader) handle(ev *replication.BinlogEvent) (*cdcsync.Txn, error) {
	h := ev.Header
	switch e := ev.Event.(type) {
	case *replication.RotateEvent:
		r.file = string(e.NextLogName)
		r.pos = uint32(e.Position)
		return r.progress(false), nil
	case *replication.HeartbeatEvent:
		// Sent while the server has nothing new: its position is the end
		// of the binlog.
		if e.Filename != "" && h.LogPos > 0 {
			r.file, r.pos = e.Filename, h.LogPos
			return r.progress(true), nil
		}
	case *replication.FormatDescriptionEvent, *replication.MariadbGTIDListEvent, *replication.MariadbBinlogCheckPointEvent,
		*replication.PreviousGTIDsEvent:
		// The events that open a binlog file move the position past the
		// last transaction.
		if h.LogPos > 0 && r.txn == nil && !r.inTxn {
			r.pos = h.LogPos
			return r.progress(false), nil
		}
	case *replication.MariadbGTIDEvent:
		gtid := fmt.Sprintf("%d-%d-%d", e.GTID.DomainID, e.GTID.ServerID, e.GTID.SequenceNumber)
		if err := mariadbInOrder(r.gtids, gtid, r.position()); err != nil {
			return nil, err
		}
		r.txn = &cdcsync.Txn{GTID: gtid}
		r.inTxn = !e.IsStandalone()
		if e.Flags&mariadbPreparedXA != 0 {
			r.startXA(h)
		}
	case *replication.GTIDEvent:
		return nil, r.mysqlGTID(e)
	case *replication.GtidTaggedLogEvent: // MySQL 8.4+: uuid:tag:N
		return nil, r.mysqlGTID(&e.GTIDEvent)
	case *replication.QueryEvent:
		q := strings.TrimSpace(string(e.Query))
		if st, ok := parseXA(q); ok {
			return r.xaQuery(h, st)
		}
		switch strings.ToUpper(q) {
		case "BEGIN":
			r.begin()
			r.inTxn = true
			return nil, nil
		case "COMMIT":
			return r.end(h)
		}
		if err := r.queryDDL(h, string(e.Schema), q, e.StatusVars); err != nil {
			return nil, err
		}
		if !r.inTxn {
			// A statement outside BEGIN..COMMIT (DDL) is a transaction of its own.
			return r.end(h)
		}
	case *replication.XIDEvent:
		return r.end(h)
	case *replication.RowsEvent:
		if r.xa != nil {
			// Prepared rows wait for the XA COMMIT (xa.go).
			r.xa.events = append(r.xa.events, ev)
			return nil, nil
		}
		return nil, r.rows(h, e)
	case *replication.GenericEvent:
		if h.EventType == replication.XA_PREPARE_LOG_EVENT {
			return r.xaPrepare(h, e.Data)
		}
	case *replication.TransactionPayloadEvent:
		return r.payload(h, e)
	}
	return nil, nil
}

// payload handles a compressed transaction (binlog_transaction_compression
// on MySQL 8.0.20+): one event whose payload go-mysql decompresses into the
// transaction's events after its GTID (BEGIN, table maps, rows, XID). They
// are handled like uncompressed ones, each at the position after the
// payload, which is where the transaction ends: the inner events carry no
// position of their own, and a rows event of a table catching up must be
// compared with the committed position at its transaction's end.
func (r *reader) payload(h *replication.EventHeader, e *replication.TransactionPayloadEvent) (*cdcsync.Txn, error) {
	var done *cdcsync.Txn
	r.inPayload = true
	defer func() { r.inPayload = false }()
	for _, inner := range e.Events {
		if done != nil {
			return nil, fmt.Errorf("the compressed transaction that ends at %s:%d holds events after its commit; cdcsync cannot apply it: "+
				"set binlog_transaction_compression=OFF on the server, then resync the tables it touches", r.file, h.LogPos)
		}
		ih := *inner.Header
		ih.LogPos = h.LogPos
		txn, err := r.handle(&replication.BinlogEvent{RawData: inner.RawData, Header: &ih, Event: inner.Event})
		if err != nil {
			return nil, err
		}
		done = txn
	}
	if done == nil || r.inTxn {
		return nil, fmt.Errorf("the compressed transaction that ends at %s:%d does not end with a commit (%d events, %d bytes uncompressed); cdcsync cannot apply it: "+
			"set binlog_transaction_compression=OFF on the server, then resync the tables it touches", r.file, h.LogPos, len(e.Events), e.UncompressedSize)
	}
	return done, nil
}

// mysqlGTID opens the transaction a MySQL GTID event starts. An
// ANONYMOUS_GTID event (gtid_mode OFF or *_PERMISSIVE) opens one without a
// GTID: its null UUID is no GTID, and in a GTID set it would cover every
// later anonymous transaction.
func (r *reader) mysqlGTID(e *replication.GTIDEvent) error {
	if e.GNO == 0 && bytes.Equal(e.SID, make([]byte, len(e.SID))) {
		r.txn = &cdcsync.Txn{}
		return nil
	}
	next, err := e.GTIDNext()
	if err != nil {
		return fmt.Errorf("decode GTID event at %s: %w", r.position(), err)
	}
	r.txn = &cdcsync.Txn{GTID: next.String()}
	return nil
}

// ErrAnonymousTransaction means MySQL wrote a transaction without a GTID
// while cdcsync's positions are GTID sets, which cannot record it.
var ErrAnonymousTransaction = errors.New("the server wrote a transaction without a GTID")

func (r *reader) rows(h *replication.EventHeader, e *replication.RowsEvent) error {
	id := cdcsync.TableID{Database: string(e.Table.Schema), Table: string(e.Table.Table)}
	t := r.tables[id]
	if t == nil {
		return nil
	}
	if t.catching {
		// Events the table's Iceberg rows already hold are passed over
		// without decoding: they may predate the schema cdcsync holds.
		if r.covers(t.committed, r.probe(h)) {
			return nil
		}
		t.catching = false
	}
	s := t.schema
	r.begin()
	if t.mapSeen != e.Table && !sameTableMap(t.mapSeen, e.Table) {
		if err := checkTableMap(s, e.Table); err != nil {
			r.stopForTableMap(id, err)
			return nil
		}
		t.imagesTried = false
	}
	t.mapSeen = e.Table
	// Events whose rows cdcsync cannot rebuild whole (the server's settings
	// changed while it ran; preflight refuses them at the start) stop the
	// table at this transaction, with nothing of it applied to the table.
	at := r.eventAt(h)
	if h.EventType == replication.PARTIAL_UPDATE_ROWS_EVENT {
		r.stopTable(id, fmt.Sprintf("a partial JSON update of %s (a PARTIAL_UPDATE_ROWS event: binlog_row_value_options=PARTIAL_JSON) at %s, which cdcsync cannot apply; "+
			"on the server: SET PERSIST binlog_row_value_options=''; then copy the table again: cdcsync resync %s", id, at, id), false)
		return nil
	}
	// Rows the stream left undecoded (deferRows) are decoded here: by the
	// table's compiled decoder when it can, else by go-mysql.
	var images []cdcsync.Row
	if body, ok := deferredOf(e); ok {
		if dec := t.rowDecoder(); dec != nil && fastEventType(h.EventType) {
			images, ok = dec.decode(e, body, !r.inPayload)
			if ok && r.cfg.CheckRowImages {
				if err := checkImages(s, e, body, images, r.cfg.Values, r.position()); err != nil {
					// A test setting: end the process loudly rather than
					// have the session retry the same event for ever.
					panic(fmt.Sprintf("CDCSYNC_CHECK_ROW_IMAGES: %v at %s", err, at))
				}
			}
		}
		if images == nil {
			if err := decodeDeferred(e, body); err != nil {
				return fmt.Errorf("decode the rows event of %s at %s: %w", id, at, err)
			}
		}
	}
	for _, skipped := range e.SkippedColumns {
		if len(skipped) > 0 {
			r.stopTable(id, fmt.Sprintf("a rows event of %s at %s lacks columns: binlog_row_image is not FULL; "+
				"on the server: SET PERSIST binlog_row_image='FULL' (SET GLOBAL on MariaDB, and in its configuration file); then copy the table again: cdcsync resync %s", id, at, id), false)
			return nil
		}
	}
	var op cdcsync.Op
	switch e.Type() {
	case replication.EnumRowsEventTypeInsert:
		op = cdcsync.OpInsert
	case replication.EnumRowsEventTypeUpdate:
		op = cdcsync.OpUpdate
	case replication.EnumRowsEventTypeDelete:
		op = cdcsync.OpDelete
	default:
		return fmt.Errorf("unknown rows event for %s at %s", id, r.position())
	}
	step := 1
	if op == cdcsync.OpUpdate {
		step = 2
	}
	// image decodes (or takes) the i-th row image.
	image := func(i int) (cdcsync.Row, int, error) {
		if images != nil {
			return images[i], images[i].MemSize(), nil
		}
		return r.decodeRow(s, e.Rows[i])
	}
	count := len(e.Rows)
	if images != nil {
		count = len(images)
	}
	for i := 0; i+step <= count; i += step {
		first, n, err := image(i)
		if err != nil {
			r.stopForValue(id, s, h, e.Rows[i], err)
			return nil
		}
		c := cdcsync.Change{Table: id, Op: op}
		switch op {
		case cdcsync.OpInsert:
			c.After = first
		case cdcsync.OpDelete:
			c.Before = first
		case cdcsync.OpUpdate:
			after, n2, err := image(i + 1)
			if err != nil {
				r.stopForValue(id, s, h, e.Rows[i+1], err)
				return nil
			}
			c.Before, c.After = first, after
			n += n2
		}
		r.txn.Changes = append(r.txn.Changes, c)
		r.txn.Bytes += n + cdcsync.ChangeMemSize
		if r.cfg.FragmentBytes > 0 && r.txn.Bytes >= r.cfg.FragmentBytes {
			r.fragment(h)
		}
	}
	return nil
}

// fragment cuts the changes of the open transaction read so far into a
// fragment (cdcsync.Txn.More), placed inside the transaction by the event
// at h.
func (r *reader) fragment(h *replication.EventHeader) {
	f := r.txn
	f.More = true
	f.Pos = r.probe(h).Pos
	r.frags = append(r.frags, f)
	r.txn = &cdcsync.Txn{GTID: f.GTID}
}

func (r *reader) decodeRow(s *cdcsync.TableSchema, raw []any) (cdcsync.Row, int, error) {
	row, err := r.cfg.Values.BinlogRow(s, raw, r.position())
	if err != nil {
		return nil, 0, err
	}
	return row, row.MemSize(), nil
}

// stopForValue stops a table at the transaction holding a value it cannot
// mirror (a zero date under types.zero_date: error, say): that table only,
// with nothing of the transaction, naming the transaction, the row's
// primary key and the value (err names the column and the value).
func (r *reader) stopForValue(id cdcsync.TableID, s *cdcsync.TableSchema, h *replication.EventHeader, raw []any, err error) {
	var key []string
	for _, k := range s.PrimaryKey {
		if k < len(raw) {
			key = append(key, s.Columns[k].Name+"="+strutil.Abbreviate(fmt.Sprint(raw[k]), 64))
		}
	}
	r.stopTable(id, fmt.Sprintf("the row with primary key (%s) in the transaction at %s: %v; then copy the table again: cdcsync resync %s",
		strings.Join(key, ", "), r.eventAt(h), err, id), false)
}

var ddlTable = regexp.MustCompile("(?is)^\\s*(?:/\\*.*?\\*/\\s*)*" +
	"(ALTER\\s+(?:ONLINE\\s+|IGNORE\\s+)*TABLE|DROP\\s+(?:TEMPORARY\\s+)?TABLE(?:\\s+IF\\s+EXISTS)?|RENAME\\s+TABLES?|TRUNCATE(?:\\s+TABLE)?|CREATE\\s+(?:OR\\s+REPLACE\\s+)?TABLE(?:\\s+IF\\s+NOT\\s+EXISTS)?)" +
	"\\s+((?:`[^`]+`|[\\w$]+)(?:\\s*\\.\\s*(?:`[^`]+`|[\\w$]+))?)")

func parseTableName(schema, name string) cdcsync.TableID {
	parts := strings.SplitN(name, ".", 2)
	for i := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(parts[i]), "`")
	}
	if len(parts) == 2 {
		return cdcsync.TableID{Database: parts[0], Table: parts[1]}
	}
	return cdcsync.TableID{Database: schema, Table: parts[0]}
}

// connectIdentified connects to src and returns the connection with the
// server's flavor and identity (see ServerIdentity).
func connectIdentified(ctx context.Context, src *config.Source) (conn *client.Conn, flavor, uuid string, err error) {
	if conn, err = Connect(ctx, src); err != nil {
		return nil, "", "", err
	}
	if flavor, _, err = ServerFlavor(ctx, conn); err == nil {
		uuid, err = ServerIdentity(ctx, conn, flavor)
	}
	if err != nil {
		conn.Close()
		return nil, "", "", err
	}
	return conn, flavor, uuid, nil
}

// ServerIdentity names the server for file/offset positions: @@server_uuid on
// MySQL; MariaDB has none, so its @@server_id stands in.
func ServerIdentity(ctx context.Context, conn *client.Conn, flavor string) (string, error) {
	q := "SELECT @@server_uuid"
	if flavor == binlogpos.FlavorMariaDB {
		q = "SELECT CONCAT('mariadb-server-id-', @@server_id)"
	}
	res, err := conn.Execute(q)
	if err != nil {
		return "", fmt.Errorf("read the server identity: %w", err)
	}
	return res.GetString(0, 0)
}

// HeartbeatPeriod is how often an idle server sends the binlog stream a
// heartbeat.
const HeartbeatPeriod = time.Second

// LagProbe measures how many binlog bytes the server has written after a
// position, over one connection kept open between calls: the daemon asks
// every second, and a connection a second (a TLS handshake each, with TLS)
// is a load a production server notices. Not safe for concurrent use.
type LagProbe struct {
	src  *config.Source
	conn *client.Conn
}

// NewLagProbe returns a probe of the server src names; it connects at the
// first call.
func NewLagProbe(src *config.Source) *LagProbe { return &LagProbe{src: src} }

// Bytes returns the rest of pos's binlog file plus every later file. A
// failed query drops the connection; the next call connects again.
func (p *LagProbe) Bytes(ctx context.Context, at cdcsync.Position) (int64, error) {
	pos, err := binlogpos.Decode(at)
	if err != nil {
		return 0, err
	}
	if pos.File == "" {
		return 0, errors.New("position has no binlog file")
	}
	if p.conn == nil {
		conn, err := Connect(ctx, p.src)
		if err != nil {
			return 0, err
		}
		p.conn = conn
	}
	// A server that stops answering (a network cut) must not hold the
	// caller, who also keeps the lag gauges.
	_ = p.conn.SetDeadline(time.Now().Add(lagProbeTimeout))
	res, err := p.conn.Execute("SHOW BINARY LOGS")
	if err != nil {
		p.Close()
		return 0, err
	}
	var lag int64
	seen := false
	for i := 0; i < res.RowNumber(); i++ {
		name, _ := res.GetString(i, 0)
		size, _ := res.GetInt(i, 1)
		switch {
		case name == pos.File:
			seen = true
			lag += max(0, size-int64(pos.Offset))
		case seen:
			lag += size
		}
	}
	if !seen {
		return 0, fmt.Errorf("binlog file %s is no longer on the server", pos.File)
	}
	return lag, nil
}

// lagProbeTimeout bounds one LagProbe query.
const lagProbeTimeout = 5 * time.Second

// Close closes the probe's connection, if it has one.
func (p *LagProbe) Close() {
	if p.conn != nil {
		p.conn.Close()
		p.conn = nil
	}
}
