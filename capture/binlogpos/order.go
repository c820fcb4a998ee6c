// Package binlogpos owns what a MySQL or MariaDB binlog position means: it
// orders positions (GTID sets of either flavor, or binlog file and offset
// on one server) for the core, which stores positions without looking
// inside them (cdcsync.Order).
package binlogpos

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync"
)

// Order orders MySQL and MariaDB positions (cdcsync.Order). The zero Order
// works; one from NewOrder also remembers the positions it decoded last,
// for a pipeline that asks Covers once per transaction.
type Order struct {
	memo *memo
}

// NewOrder returns an Order that remembers the positions it decoded last.
func NewOrder() Order { return Order{memo: &memo{}} }

// Covers reports whether the transaction t, which ends at t.Pos and carries
// t.GTID, is already included in the position p: that is, whether a table
// committed at p already holds t's changes.
func (o Order) Covers(committed cdcsync.Position, t *cdcsync.Txn) (bool, error) {
	if committed.IsZero() {
		return false, nil
	}
	var coveredSlot, txnSlot *atomic.Pointer[decoded]
	if o.memo != nil {
		coveredSlot, txnSlot = &o.memo.covered, &o.memo.txn
	}
	p, err := decodeCached(committed, coveredSlot)
	if err != nil || p.IsZero() {
		return false, err
	}
	var tp Pos
	if t.GTID == "" || !p.UsesGTID() {
		if tp, err = decodeCached(t.Pos, txnSlot); err != nil {
			return false, err
		}
	}
	switch {
	case p.UsesGTID() && t.GTID != "":
		return gtidSetContains(p.Flavor, p.GTIDSet, t.GTID)
	case !p.UsesGTID() && !tp.UsesGTID():
		if p.ServerUUID != "" && tp.ServerUUID != "" && p.ServerUUID != tp.ServerUUID {
			return false, fmt.Errorf("committed position %s is from server %s but the binlog is from server %s; "+
				"file positions do not carry across servers: resync the tables or enable GTIDs", p, p.ServerUUID, tp.ServerUUID)
		}
		return compareFilePos(tp.File, tp.Offset, p.File, p.Offset) <= 0, nil
	default:
		return false, fmt.Errorf("committed position %s and binlog position %s are of different kinds (GTID and file/offset); "+
			"cdcsync cannot compare them: keep gtid mode as it was when the tables were created, or resync them", p, tp)
	}
}

// compareFilePos orders binlog file/offset pairs. Binlog file names share a
// base name and differ in a numeric suffix.
func compareFilePos(f1 string, o1 uint32, f2 string, o2 uint32) int {
	if f1 != f2 {
		n1, n2 := fileSeq(f1), fileSeq(f2)
		if n1 != n2 {
			if n1 < n2 {
				return -1
			}
			return 1
		}
		return strings.Compare(f1, f2)
	}
	switch {
	case o1 < o2:
		return -1
	case o1 > o2:
		return 1
	}
	return 0
}

func fileSeq(f string) int64 {
	i := strings.LastIndexByte(f, '.')
	n, err := strconv.ParseInt(f[i+1:], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// Contains reports whether the GTID position p includes the transaction
// gtid (what Covers asks of a committed position, without encoding p).
func (p Pos) Contains(gtid string) (bool, error) { return gtidSetContains(p.Flavor, p.GTIDSet, gtid) }

func gtidSetContains(flavor, set, gtid string) (bool, error) {
	switch flavor {
	case FlavorMariaDB:
		// MariaDB sequence numbers grow monotonically within a replication
		// domain, so a set covers a GTID when it holds the same domain at an
		// equal or higher sequence number.
		d, _, n, err := ParseMariaDBGTID(gtid)
		if err != nil {
			return false, err
		}
		for _, part := range strings.Split(set, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			pd, _, pn, err := ParseMariaDBGTID(part)
			if err != nil {
				return false, err
			}
			if pd == d {
				return pn >= n, nil
			}
		}
		return false, nil
	case FlavorMySQL:
		s, err := mysql.ParseMysqlGTIDSet(set)
		if err != nil {
			return false, fmt.Errorf("parse GTID set %q: %w", set, err)
		}
		g, err := mysql.ParseMysqlGTIDSet(gtid)
		if err != nil {
			return false, fmt.Errorf("parse GTID %q: %w", gtid, err)
		}
		return s.Contain(g), nil
	}
	return false, fmt.Errorf("unknown position flavor %q", flavor)
}

// ParseMariaDBGTID splits a MariaDB GTID "domain-server-sequence".
func ParseMariaDBGTID(s string) (domain, server uint32, seq uint64, err error) {
	parts := strings.Split(strings.TrimSpace(s), "-")
	if len(parts) != 3 {
		return 0, 0, 0, fmt.Errorf("malformed MariaDB GTID %q: want domain-server-sequence", s)
	}
	d, err1 := strconv.ParseUint(parts[0], 10, 32)
	sv, err2 := strconv.ParseUint(parts[1], 10, 32)
	n, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, 0, fmt.Errorf("malformed MariaDB GTID %q: want domain-server-sequence", s)
	}
	return uint32(d), uint32(sv), n, nil
}

// AdvanceMariaDBGTIDSet returns set with the GTID g recorded as the latest of
// its domain.
func AdvanceMariaDBGTIDSet(set, g string) (string, error) {
	d, _, _, err := ParseMariaDBGTID(g)
	if err != nil {
		return "", err
	}
	var out []string
	replaced := false
	for _, part := range strings.Split(set, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		pd, _, _, err := ParseMariaDBGTID(part)
		if err != nil {
			return "", err
		}
		if pd == d {
			out = append(out, g)
			replaced = true
		} else {
			out = append(out, part)
		}
	}
	if !replaced {
		out = append(out, g)
	}
	return strings.Join(out, ","), nil
}

// Includes reports whether p is at or after q: whether every transaction
// before q is also before p. Both must come from the same server. GTID sets
// are compared when both have one, else file and offset.
func (o Order) Includes(pp, qq cdcsync.Position) (bool, error) {
	p, err := Decode(pp)
	if err != nil {
		return false, err
	}
	q, err := Decode(qq)
	if err != nil {
		return false, err
	}
	return includes(p, q)
}

func includes(p, q Pos) (bool, error) {
	if q.IsZero() {
		return true, nil
	}
	if p.IsZero() {
		return false, nil
	}
	if p.UsesGTID() && q.UsesGTID() {
		switch p.Flavor {
		case FlavorMariaDB:
			for _, part := range strings.Split(q.GTIDSet, ",") {
				if strings.TrimSpace(part) == "" {
					continue
				}
				ok, err := gtidSetContains(p.Flavor, p.GTIDSet, part)
				if err != nil || !ok {
					return false, err
				}
			}
			return true, nil
		case FlavorMySQL:
			ps, err := mysql.ParseMysqlGTIDSet(p.GTIDSet)
			if err != nil {
				return false, fmt.Errorf("parse GTID set %q: %w", p.GTIDSet, err)
			}
			qs, err := mysql.ParseMysqlGTIDSet(q.GTIDSet)
			if err != nil {
				return false, fmt.Errorf("parse GTID set %q: %w", q.GTIDSet, err)
			}
			return ps.Contain(qs), nil
		}
		return false, fmt.Errorf("unknown position flavor %q", p.Flavor)
	}
	if p.File == "" || q.File == "" {
		return false, fmt.Errorf("positions %s and %s cannot be compared: one has no binlog file", p, q)
	}
	if p.ServerUUID != "" && q.ServerUUID != "" && p.ServerUUID != q.ServerUUID {
		return false, fmt.Errorf("positions %s and %s are from different servers (%s, %s)", p, q, p.ServerUUID, q.ServerUUID)
	}
	return compareFilePos(p.File, p.Offset, q.File, q.Offset) >= 0, nil
}

// Earliest returns a position at or before both a and b: where a stream
// must start so that a table committed at a and one committed at b both
// see every transaction they lack. A zero position is ignored. Two GTID
// sets neither of which includes the other meet in their intersection.
func (o Order) Earliest(ea, eb cdcsync.Position) (cdcsync.Position, error) {
	a, err := Decode(ea)
	if err != nil {
		return cdcsync.Position{}, err
	}
	b, err := Decode(eb)
	if err != nil {
		return cdcsync.Position{}, err
	}
	switch {
	case a.IsZero():
		return eb, nil
	case b.IsZero():
		return ea, nil
	}
	if ok, err := includes(b, a); err != nil {
		return cdcsync.Position{}, err
	} else if ok {
		return ea, nil
	}
	if ok, err := includes(a, b); err != nil {
		return cdcsync.Position{}, err
	} else if ok {
		return eb, nil
	}
	if !a.UsesGTID() || !b.UsesGTID() {
		return cdcsync.Position{}, fmt.Errorf("positions %s and %s cannot be ordered", a, b)
	}
	out := a
	switch a.Flavor {
	case FlavorMariaDB:
		// Per replication domain the lower sequence number; a domain only
		// one of them has is left out (read from its start).
		seqs := map[uint32]string{}
		for _, part := range strings.Split(b.GTIDSet, ",") {
			if part = strings.TrimSpace(part); part != "" {
				d, _, _, err := ParseMariaDBGTID(part)
				if err != nil {
					return cdcsync.Position{}, err
				}
				seqs[d] = part
			}
		}
		var parts []string
		for _, part := range strings.Split(a.GTIDSet, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			d, _, n, err := ParseMariaDBGTID(part)
			if err != nil {
				return cdcsync.Position{}, err
			}
			other, ok := seqs[d]
			if !ok {
				continue
			}
			_, _, m, _ := ParseMariaDBGTID(other)
			if m < n {
				part = other
			}
			parts = append(parts, part)
		}
		out.GTIDSet = strings.Join(parts, ",")
	case FlavorMySQL:
		as, err := mysql.ParseMysqlGTIDSet(a.GTIDSet)
		if err != nil {
			return cdcsync.Position{}, fmt.Errorf("parse GTID set %q: %w", a.GTIDSet, err)
		}
		bs, err := mysql.ParseMysqlGTIDSet(b.GTIDSet)
		if err != nil {
			return cdcsync.Position{}, fmt.Errorf("parse GTID set %q: %w", b.GTIDSet, err)
		}
		meet := mysql.NewMysqlGTIDSet()
		for sid, tags := range *as.(*mysql.MysqlGTIDSet) {
			for tag, ivs := range tags {
				other, ok := (*bs.(*mysql.MysqlGTIDSet))[sid][tag]
				if !ok {
					continue
				}
				if both := intersectIntervals(ivs.Normalize(), other.Normalize()); len(both) > 0 {
					if meet[sid] == nil {
						meet[sid] = map[mysql.Tag]mysql.IntervalSlice{}
					}
					meet[sid][tag] = both
				}
			}
		}
		out.GTIDSet = meet.String()
	default:
		return cdcsync.Position{}, fmt.Errorf("unknown position flavor %q", a.Flavor)
	}
	if out.GTIDSet == "" {
		return cdcsync.Position{}, fmt.Errorf("positions %s and %s share no transaction: cdcsync cannot start a stream before both", a, b)
	}
	return out.Position(), nil
}

// intersectIntervals intersects two sorted, merged interval lists (Stop
// exclusive).
func intersectIntervals(a, b mysql.IntervalSlice) mysql.IntervalSlice {
	var out mysql.IntervalSlice
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i].Start, b[j].Start), min(a[i].Stop, b[j].Stop)
		if lo < hi {
			out = append(out, mysql.Interval{Start: lo, Stop: hi})
		}
		if a[i].Stop < b[j].Stop {
			i++
		} else {
			j++
		}
	}
	return out
}
