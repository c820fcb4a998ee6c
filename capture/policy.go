package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"errors"
	"log/slog"
	"sync"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

// ValuePolicy applies the types: section of the configuration to values
// Iceberg cannot hold (zero and invalid dates): it decodes rows like
// DecodeBinlogRow and DecodeSnapshotRow, but where a column's policy says
// to_null or to_epoch it writes NULL or 1970-01-01 instead of failing, counts
// every value it changed, and logs the first one of each column with the
// table, the column, the value and the binlog position.
//
// A nil *ValuePolicy is the default policy (error for every type), which is
// what DecodeBinlogRow and DecodeSnapshotRow apply. It is safe for
// concurrent use.
type ValuePolicy struct {
	zeroDate, zeroDatetime, zeroTimestamp string
	log                                   *slog.Logger
	count                                 func(table, column, policy string)

	mu   sync.Mutex
	seen map[colKey]bool
}

type colKey struct {
	table  cdcsync.TableID
	column string
}

// NewValuePolicy builds the policy of t (config.Types after its defaults).
// count, when not nil, is called for every value a policy changed, with the
// policy applied (config.TypeToNull or config.TypeToEpoch); log receives the
// first change per column.
func NewValuePolicy(t config.Types, log *slog.Logger, count func(table, column, policy string)) *ValuePolicy {
	def := func(s string) string {
		if s == "" {
			return config.TypeError
		}
		return s
	}
	return &ValuePolicy{zeroDate: def(t.ZeroDate), zeroDatetime: def(t.ZeroDatetime), zeroTimestamp: def(t.ZeroTimestamp),
		log: log, count: count, seen: map[colKey]bool{}}
}

// BinlogRow is DecodeBinlogRow with the policies applied; pos is the
// position of the rows event (for the log).
func (p *ValuePolicy) BinlogRow(s *cdcsync.TableSchema, values []any, pos binlogpos.Pos) (cdcsync.Row, error) {
	return decodeBinlogRow(s, values, p, pos)
}

// SnapshotRow is DecodeSnapshotRow with the policies applied; pos is the
// position the snapshot is consistent with (for the log).
func (p *ValuePolicy) SnapshotRow(s *cdcsync.TableSchema, values []mysql.FieldValue, pos binlogpos.Pos) (cdcsync.Row, error) {
	return decodeSnapshotRow(s, values, p, pos)
}

// policy is the configured policy for a column's kind.
func (p *ValuePolicy) policy(k cdcsync.Kind) string {
	if p == nil {
		return config.TypeError
	}
	switch k {
	case cdcsync.KindDate:
		return p.zeroDate
	case cdcsync.KindTimestamp:
		return p.zeroDatetime
	case cdcsync.KindTimestampTZ:
		return p.zeroTimestamp
	}
	return config.TypeError
}

// apply decides what to write for a value whose decoding failed with err.
// It returns the replacement and true when a policy replaced the value;
// otherwise the caller reports err.
func (p *ValuePolicy) apply(s *cdcsync.TableSchema, c *cdcsync.Column, err error, pos binlogpos.Pos, path string) (any, bool) {
	var ve *ValueError
	if !errors.As(err, &ve) || (ve.Reason != ReasonZeroDate && ve.Reason != ReasonInvalidDate) {
		return nil, false
	}
	policy := p.policy(c.Kind)
	var v any
	switch policy {
	case config.TypeToNull:
		if c.Nullable {
			break
		}
		// Iceberg holds a NOT NULL (or key) column as a required field.
		policy = config.TypeToEpoch
		fallthrough
	case config.TypeToEpoch:
		v = int64(0)
		if c.Kind == cdcsync.KindDate {
			v = int32(0)
		}
	default:
		return nil, false
	}
	if p.count != nil {
		p.count(s.ID.String(), c.Name, policy)
	}
	key := colKey{s.ID, c.Name}
	p.mu.Lock()
	first := !p.seen[key]
	p.seen[key] = true
	p.mu.Unlock()
	if first && p.log != nil {
		where := "unknown"
		if !pos.IsZero() {
			where = pos.String()
		}
		p.log.Warn("a value Iceberg cannot hold was replaced as the types policy says; further values of this column are only counted (cdcsync_type_policy_values_total)",
			"table", s.ID.String(), "column", c.Name, "type", c.ColumnType, "value", ve.Value, "policy", policy, "read_by", path, "position", where)
	}
	return v, true
}
