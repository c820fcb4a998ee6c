package capture

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/cdcsync/cdcsync"
)

// XA transactions (two-phase commit) reach the binlog in two event groups,
// on MySQL 5.7+ and MariaDB 10.5+ alike:
//
//	GTID, XA START xid, rows..., XA END xid, XA_PREPARE_LOG_EVENT   (XA PREPARE)
//	... any number of other transactions ...
//	GTID, XA COMMIT xid                                              (or XA ROLLBACK xid)
//
// MariaDB writes no XA START statement: the flag FL_PREPARED_XA of the
// group's GTID event says it (the XID follows in the event, which go-mysql
// does not decode; the XA_PREPARE_LOG_EVENT has it too).
// The rows of the first group belong to a transaction that is not committed
// yet: they become visible at XA COMMIT, possibly much later, or never (XA
// ROLLBACK). MySQL writes XA COMMIT ... ONE PHASE as one group whose
// XA_PREPARE_LOG_EVENT has its one-phase flag set; MariaDB writes it as an
// ordinary transaction.
//
// The reader keeps each prepared group's rows events, undecoded, until its
// XA COMMIT, and then handles them exactly like the events of an ordinary
// transaction ending at the XA COMMIT, with the commit's GTID and position:
// a table compares the commit's position with its committed one, and rows
// events are decoded against the schema the table has at the commit (a
// prepared transaction holds its tables' metadata locks, so no DDL comes
// between). Every transaction the reader sends carries in Resume the
// position before the oldest group still prepared: the pipeline checkpoint
// records it, so that a restart reads that group again instead of skipping
// rows that no table holds yet.

// xaTxn is an XA transaction read up to its XA PREPARE.
type xaTxn struct {
	xid    string                     // as the binlog writes it: X'..',X'..',formatID
	before cdcsync.Position           // the position before its PREPARE group
	events []*replication.BinlogEvent // its rows events, in order
	at     time.Time                  // when the server wrote the PREPARE
}

// xaStatement is an XA statement of the binlog.
type xaStatement struct {
	verb string // START, END, COMMIT or ROLLBACK
	xid  string
	one  bool // XA COMMIT ... ONE PHASE
}

var xaPattern = regexp.MustCompile(`(?is)^XA\s+(START|BEGIN|END|COMMIT|ROLLBACK)\s+(.*?)(\s+ONE\s+PHASE)?\s*$`)

// Flags of MariaDB's GTID event that go-mysql does not name.
const (
	mariadbPreparedXA  = 64  // FL_PREPARED_XA: the group is an XA PREPARE
	mariadbCompletedXA = 128 // FL_COMPLETED_XA: the group is an XA COMMIT or ROLLBACK
)

// parseXA recognises the XA statements the server writes to the binlog.
func parseXA(q string) (xaStatement, bool) {
	m := xaPattern.FindStringSubmatch(q)
	if m == nil {
		return xaStatement{}, false
	}
	verb := strings.ToUpper(m[1])
	if verb == "BEGIN" {
		verb = "START"
	}
	return xaStatement{verb: verb, xid: normalXID(m[2]), one: m[3] != ""}, true
}

// normalXID makes the spellings of one XID equal: the binlog writes
// X'..',X'..',1 everywhere (in either case), but a statement may also
// carry JOIN, RESUME or SUSPEND after it.
func normalXID(s string) string {
	s = strings.TrimSpace(s)
	for _, suffix := range []string{" JOIN", " RESUME", " SUSPEND", " FOR MIGRATE", " SUSPEND FOR MIGRATE"} {
		if len(s) > len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix) {
			s = strings.TrimSpace(s[:len(s)-len(suffix)])
		}
	}
	return strings.ToLower(strings.Join(strings.Fields(s), ""))
}

// prepareXID decodes the XID of an XA_PREPARE_LOG_EVENT's body (one_phase
// byte, formatID, gtrid_length, bqual_length, data) in normalXID's form.
func prepareXID(data []byte) (xid string, onePhase, ok bool) {
	if len(data) < 13 {
		return "", false, false
	}
	format := int32(binary.LittleEndian.Uint32(data[1:]))
	gl, bl := binary.LittleEndian.Uint32(data[5:]), binary.LittleEndian.Uint32(data[9:])
	if gl > 64 || bl > 64 || len(data) < 13+int(gl+bl) {
		return "", false, false
	}
	g, b := data[13:13+gl], data[13+gl:13+gl+bl]
	return fmt.Sprintf("x'%x',x'%x',%d", g, b, format), data[0] != 0, true
}

// xaQuery handles an XA statement of the binlog.
func (r *reader) xaQuery(h *replication.EventHeader, st xaStatement) (*cdcsync.Txn, error) {
	switch st.verb {
	case "START":
		r.begin()
		r.inTxn = true
		if r.xa == nil { // MySQL; MariaDB opened it at the GTID event
			r.startXA(h)
		}
		r.xa.xid = st.xid
		return nil, nil
	case "END":
		if r.xa != nil && r.xa.xid == "" { // MariaDB: the XID is not in a statement before
			r.xa.xid = st.xid
		}
		return nil, nil
	case "COMMIT":
		if r.xa != nil && r.xa.xid == st.xid { // XA COMMIT ... ONE PHASE inside its own group
			x := r.xa
			r.xa = nil
			return r.commitXA(h, x)
		}
		i := slices.IndexFunc(r.prepared, func(x *xaTxn) bool { return x.xid == st.xid })
		if i < 0 {
			r.unknownXA(h, st.xid)
			return r.end(h)
		}
		x := r.prepared[i]
		r.prepared = slices.Delete(r.prepared, i, i+1)
		return r.commitXA(h, x)
	case "ROLLBACK":
		if r.xa != nil && r.xa.xid == st.xid {
			r.xa = nil
		}
		r.prepared = slices.DeleteFunc(r.prepared, func(x *xaTxn) bool { return x.xid == st.xid })
		return r.end(h)
	}
	return nil, nil
}

// startXA opens an XA PREPARE group at the event that starts it.
func (r *reader) startXA(h *replication.EventHeader) {
	r.xa = &xaTxn{before: r.mark(r.position()).Position(), at: time.Unix(int64(h.Timestamp), 0)}
}

// xaPrepare handles the XA_PREPARE_LOG_EVENT that ends a PREPARE group (or,
// with its one-phase flag, an XA COMMIT ... ONE PHASE on MySQL).
func (r *reader) xaPrepare(h *replication.EventHeader, data []byte) (*cdcsync.Txn, error) {
	x := r.xa
	r.xa = nil
	if x == nil {
		return nil, fmt.Errorf("an XA PREPARE at %s:%d without its XA START; cdcsync cannot tell which rows it prepared. "+
			"This is a binlog cdcsync does not understand: report it with the output of mysqlbinlog around that position", r.file, h.LogPos)
	}
	xid, onePhase, ok := prepareXID(data)
	if ok {
		x.xid = xid
	}
	if onePhase {
		return r.commitXA(h, x)
	}
	r.prepared = append(r.prepared, x)
	// The PREPARE group moves the position like any transaction, with no
	// changes: its rows wait for the XA COMMIT.
	return r.end(h)
}

// commitXA handles the rows events of x as the transaction that ends at h.
func (r *reader) commitXA(h *replication.EventHeader, x *xaTxn) (*cdcsync.Txn, error) {
	r.begin()
	for _, ev := range x.events {
		eh := *ev.Header
		eh.LogPos = h.LogPos
		if err := r.rows(&eh, ev.Event.(*replication.RowsEvent)); err != nil {
			return nil, err
		}
	}
	return r.end(h)
}

// unknownXA reports an XA COMMIT whose PREPARE the reader did not see: it
// came before the position the stream started from. Its rows are in no
// table unless a table's copy read them after the commit, so a table that
// does not hold the commit's position yet may miss them.
func (r *reader) unknownXA(h *replication.EventHeader, xid string) {
	probe := r.probe(h)
	var missing []string
	for id, t := range r.tables {
		if !r.stopped[id] && !r.covers(t.committed, probe) {
			missing = append(missing, id.String())
		}
	}
	if len(missing) == 0 || r.cfg.Log == nil || slices.Contains(r.cfg.SettledXA, xid) {
		return
	}
	slices.Sort(missing)
	r.cfg.Log.Error("an XA COMMIT arrived whose XA PREPARE came before the position cdcsync started reading from, so its rows could not be applied; "+
		"if that XA transaction wrote to mirrored tables, copy them again (cdcsync resync DB.TABLE)",
		"xid", xid, "at", r.eventAt(h), "tables", strings.Join(missing, ", "))
}

// resume is the position a restart must read from to see every prepared
// XA transaction again: before the oldest one, or zero when none is open.
func (r *reader) resume() cdcsync.Position {
	if len(r.prepared) == 0 {
		return cdcsync.Position{}
	}
	return r.prepared[0].before
}

// PreparedXA lists the XIDs of the XA transactions prepared on the server
// and not yet committed or rolled back (XA RECOVER), as the binlog spells
// them (normalXID).
func PreparedXA(ctx context.Context, conn *client.Conn) ([]string, error) {
	res, err := conn.Execute("XA RECOVER")
	if err != nil {
		return nil, fmt.Errorf("list the prepared XA transactions (XA RECOVER; MySQL needs the XA_RECOVER_ADMIN privilege for it): %w", err)
	}
	var xids []string
	for _, row := range res.Values {
		if len(row) < 4 { // formatID, gtrid_length, bqual_length, data
			continue
		}
		gl, err := strconv.Atoi(connText(row[1]))
		data := connText(row[3])
		if err != nil || gl < 0 || gl > len(data) {
			return nil, fmt.Errorf("XA RECOVER returned a row cdcsync does not understand: %v", row)
		}
		xids = append(xids, fmt.Sprintf("x'%x',x'%x',%s", data[:gl], data[gl:], connText(row[0])))
	}
	return xids, nil
}

// AwaitPreparedXA waits until none of the XA transactions in xids (read
// with PreparedXA after the position a copy starts from) is still prepared.
// A table copy must not read its rows before: such a transaction was
// prepared before the position the stream starts from, so the stream never
// sees its rows, and a chunk read while it is prepared does not see them
// either. Once it is committed, every chunk read sees them. It logs once a
// minute what it waits for.
func AwaitPreparedXA(ctx context.Context, conn *client.Conn, xids []string, log *slog.Logger) error {
	began := time.Now()
	var logged time.Time
	for len(xids) > 0 {
		now, err := PreparedXA(ctx, conn)
		if err != nil {
			return err
		}
		xids = slices.DeleteFunc(xids, func(x string) bool { return !slices.Contains(now, x) })
		if len(xids) == 0 {
			return nil
		}
		if time.Since(logged) >= time.Minute {
			logged = time.Now()
			log.Warn("the initial copy waits for XA transactions prepared before it started to be committed or rolled back (XA RECOVER lists them; XA COMMIT or XA ROLLBACK ends them)",
				"xids", strings.Join(xids, " "), "waiting", time.Since(began).Round(time.Second).String())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
