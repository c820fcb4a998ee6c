package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

// A partition is a set of files: an epoch writes a data file into every
// partition its changes touch, so a layout finer than the changes are
// spread (day x bucket over years of orders whose old rows keep changing)
// writes thousands of files an epoch and leaves a table no engine reads
// well (issue 23). `cdcsync check` estimates, from a few bounded queries,
// how many partitions a table's layout gives for its rows and how many an
// epoch would touch, and proposes a coarser layout when that is thousands.

// EstimateEpochChanges is the epoch the estimate is made for: 10,000 row
// changes, two seconds at 5,000 changes/s or a catch-up's small epoch.
const EstimateEpochChanges = 10_000

// ManyFilesPerEpoch is the number of data files an epoch may write before
// check warns.
const ManyFilesPerEpoch = 1000

// estimateSampleRows bounds the rows read to count the distinct values of
// an identity or truncate field.
const estimateSampleRows = 100_000

// FieldEstimate is how many distinct values one partition field takes.
type FieldEstimate struct {
	Field    config.PartitionField
	Distinct float64 // distinct partition values among the rows (an estimate)
	Note     string  // how it was found, e.g. "created_at spans 10.0 years"
}

// PartitionEstimate is what a table's layout gives for its rows.
type PartitionEstimate struct {
	Table      cdcsync.TableID
	Rows       int64 // the table's rows, as information_schema estimates them
	Fields     []FieldEstimate
	Partitions float64 // partitions holding rows
	PerEpoch   float64 // partitions (data files) an epoch of EstimateEpochChanges touches
}

// partitionsOf combines field estimates: the product of their distinct
// values, at most one partition a row.
func partitionsOf(fields []FieldEstimate, rows int64) float64 {
	p := 1.0
	for _, f := range fields {
		p *= math.Max(f.Distinct, 1)
	}
	if rows > 0 {
		p = math.Min(p, float64(rows))
	}
	return p
}

// touched is how many of p partitions n changes to rows chosen at random
// touch: p(1 - (1-1/p)^n).
func touched(p float64, n int) float64 {
	if p <= 1 {
		return p
	}
	return p * (1 - math.Pow(1-1/p, float64(n)))
}

// Warn says whether the layout writes too many files an epoch.
func (e *PartitionEstimate) Warn() bool { return e.PerEpoch >= ManyFilesPerEpoch }

// String is check's message about the layout.
func (e *PartitionEstimate) String() string {
	var notes []string
	for _, f := range e.Fields {
		if f.Note != "" {
			notes = append(notes, f.Note)
		}
	}
	msg := fmt.Sprintf("%s partitioned [%s] has about %s partitions for its %d rows (%s); an epoch of %d row changes spread over them writes about %s data files",
		e.Table, layoutString(fieldsOf(e.Fields)), round(e.Partitions), e.Rows, strings.Join(notes, "; "), EstimateEpochChanges, round(e.PerEpoch))
	if !e.Warn() {
		return msg
	}
	msg += ", which is slow to commit and to read (one file per partition touched); "
	if alt, est, ok := e.coarser(); ok {
		return msg + fmt.Sprintf("a coarser layout such as partition: [%s] gives about %s partitions and %s files an epoch: set it in the tables: rule of %s before its first copy (a table already mirrored keeps the layout it was created with: drop its Iceberg table and cdcsync copies it again with the new one)",
			layoutString(alt), round(est.Partitions), round(est.PerEpoch), e.Table)
	}
	return msg + fmt.Sprintf("use fewer partition fields or coarser ones in the tables: rule of %s", e.Table)
}

// coarser proposes a layout with fewer partitions: each step drops a bucket
// or coarsens a time field (hour, day, month, year), until an epoch writes
// fewer than ManyFilesPerEpoch/4 files.
func (e *PartitionEstimate) coarser() ([]config.PartitionField, PartitionEstimate, bool) {
	cur := PartitionEstimate{Table: e.Table, Rows: e.Rows, Fields: append([]FieldEstimate(nil), e.Fields...)}
	coarserTime := map[string]struct {
		next   string
		factor float64
	}{
		config.TransformHour:  {config.TransformDay, 24},
		config.TransformDay:   {config.TransformMonth, 365.25 / 12},
		config.TransformMonth: {config.TransformYear, 12},
	}
	for step := 0; step < 8; step++ {
		changed := false
		// Drop a bucket first: it multiplies the files of every time unit.
		for i, f := range cur.Fields {
			if f.Field.Transform == config.TransformBucket && len(cur.Fields) > 1 {
				cur.Fields = append(cur.Fields[:i:i], cur.Fields[i+1:]...)
				changed = true
				break
			}
		}
		if !changed {
			for i, f := range cur.Fields {
				if c, ok := coarserTime[f.Field.Transform]; ok {
					nf := f
					nf.Field.Transform = c.next
					nf.Distinct = math.Max(1, math.Ceil(f.Distinct/c.factor))
					cur.Fields[i] = nf
					changed = true
					break
				}
			}
		}
		if !changed {
			return nil, PartitionEstimate{}, false
		}
		cur.Partitions = partitionsOf(cur.Fields, cur.Rows)
		cur.PerEpoch = touched(cur.Partitions, EstimateEpochChanges)
		if cur.PerEpoch < ManyFilesPerEpoch/4 {
			return fieldsOf(cur.Fields), cur, true
		}
	}
	return nil, PartitionEstimate{}, false
}

func fieldsOf(fs []FieldEstimate) []config.PartitionField {
	out := make([]config.PartitionField, len(fs))
	for i, f := range fs {
		out[i] = f.Field
	}
	return out
}

// layoutString writes fields as a tables: rule's partition list.
func layoutString(fs []config.PartitionField) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		switch f.Transform {
		case config.TransformIdentity:
			parts[i] = fmt.Sprintf("%q", f.Column)
		case config.TransformBucket, config.TransformTruncate:
			parts[i] = fmt.Sprintf("%q", fmt.Sprintf("%s(%d, %s)", f.Transform, f.Param, f.Column))
		default:
			parts[i] = fmt.Sprintf("%q", fmt.Sprintf("%s(%s)", f.Transform, f.Column))
		}
	}
	return strings.Join(parts, ", ")
}

func round(x float64) string {
	switch {
	case x >= 10_000:
		return fmt.Sprintf("%.0fk", x/1000)
	case x >= 100:
		return fmt.Sprintf("%.0f", math.Round(x/10)*10)
	}
	return fmt.Sprintf("%.0f", x)
}

// EstimatePartitions estimates the partitions of table id under fields with
// bounded queries: the row count from information_schema, MIN and MAX of
// each time or integer truncate column, and the distinct values of other
// identity and truncate fields among at most estimateSampleRows rows. Each
// query stops after a few seconds (max_statement_time on MariaDB,
// MAX_EXECUTION_TIME on MySQL); a field whose query fails counts as one
// value, so the estimate errs low.
func EstimatePartitions(ctx context.Context, conn *client.Conn, flavor string, id cdcsync.TableID, fields []config.PartitionField) (PartitionEstimate, error) {
	e := PartitionEstimate{Table: id}
	r, err := conn.Execute("SELECT IFNULL(TABLE_ROWS, 0) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", id.Database, id.Table)
	if err != nil {
		return e, fmt.Errorf("read the row count of %s: %w", id, err)
	}
	if r.RowNumber() > 0 {
		e.Rows, _ = r.GetInt(0, 0)
	}
	r.Close()
	table := QuoteIdent(id.Database) + "." + QuoteIdent(id.Table)
	for _, f := range fields {
		fe := FieldEstimate{Field: f, Distinct: 1}
		col := QuoteIdent(f.Column)
		switch f.Transform {
		case config.TransformBucket:
			fe.Distinct = float64(f.Param)
		case config.TransformYear, config.TransformMonth, config.TransformDay, config.TransformHour:
			lo, hi, ok := minMaxTime(conn, flavor, table, col)
			if ok {
				span := hi.Sub(lo)
				unit := map[string]time.Duration{config.TransformYear: 8766 * time.Hour, config.TransformMonth: 730 * time.Hour,
					config.TransformDay: 24 * time.Hour, config.TransformHour: time.Hour}[f.Transform]
				fe.Distinct = math.Floor(float64(span)/float64(unit)) + 1
				fe.Note = fmt.Sprintf("%s spans %s", f.Column, humanSpan(span))
			}
		default: // identity, truncate
			expr := col
			if f.Transform == config.TransformTruncate {
				expr = fmt.Sprintf("IF(%s REGEXP '^-?[0-9]+$', FLOOR(%s / %d), LEFT(%s, %d))", col, col, f.Param, col, f.Param)
			}
			q := fmt.Sprintf("SELECT COUNT(DISTINCT v), COUNT(*) FROM (SELECT %s AS v FROM %s LIMIT %d) s", expr, table, estimateSampleRows)
			if res, err := conn.Execute(boundedQuery(flavor, q)); err == nil {
				n, _ := res.GetInt(0, 0)
				sampled, _ := res.GetInt(0, 1)
				res.Close()
				fe.Distinct = float64(max(n, 1))
				fe.Note = fmt.Sprintf("%s has %d distinct values in %d rows read", f.Column, n, sampled)
				if sampled < e.Rows && sampled > 0 {
					fe.Note = fmt.Sprintf("%s has at least %d distinct values (%d rows read)", f.Column, n, sampled)
				}
			}
		}
		e.Fields = append(e.Fields, fe)
	}
	e.Partitions = partitionsOf(e.Fields, e.Rows)
	e.PerEpoch = touched(e.Partitions, EstimateEpochChanges)
	return e, nil
}

// minMaxTime reads the range of a date or time column.
func minMaxTime(conn *client.Conn, flavor, table, col string) (lo, hi time.Time, ok bool) {
	q := fmt.Sprintf("SELECT DATE_FORMAT(MIN(%s), '%%Y-%%m-%%d %%H:%%i:%%s'), DATE_FORMAT(MAX(%s), '%%Y-%%m-%%d %%H:%%i:%%s') FROM %s", col, col, table)
	res, err := conn.Execute(boundedQuery(flavor, q))
	if err != nil || res.RowNumber() == 0 {
		return lo, hi, false
	}
	defer res.Close()
	a, _ := res.GetString(0, 0)
	b, _ := res.GetString(0, 1)
	lo, err1 := time.Parse(time.DateTime, a)
	hi, err2 := time.Parse(time.DateTime, b)
	return lo, hi, err1 == nil && err2 == nil && !hi.Before(lo)
}

// boundedQuery stops q after five seconds on the server.
func boundedQuery(flavor, q string) string {
	if flavor == binlogpos.FlavorMariaDB {
		return "SET STATEMENT max_statement_time = 5 FOR " + q
	}
	return strings.Replace(q, "SELECT ", "SELECT /*+ MAX_EXECUTION_TIME(5000) */ ", 1)
}

func humanSpan(d time.Duration) string {
	days := d.Hours() / 24
	switch {
	case days >= 730:
		return fmt.Sprintf("%.1f years", days/365.25)
	case days >= 2:
		return fmt.Sprintf("%.0f days", days)
	}
	return fmt.Sprintf("%.0f hours", d.Hours())
}
