package integration

// Filtered reads: a full scan ignores the partition values and column
// statistics cdcsync writes into the manifests, but a query with a WHERE
// clause lets the engine skip files by them. If a partition value or a
// lower/upper bound were wrong, the engine would silently drop matching rows.
// Each table is therefore also read with one predicate per column (a range
// at the column's median, IS NULL, equality on partition sources), and the
// rows each predicate returns must be exactly the MySQL rows it matches.

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cdcsync/cdcsync"
)

// engineFilter is "column op value" on canonical values.
type engineFilter struct {
	col int
	op  string // ">=", "=", "IS NULL"
	val any
}

// engineDialect is how one engine spells types, names and literals.
type engineDialect struct {
	name    string
	typeOf  func(*cdcsync.Column) string
	quote   func(string) string
	literal func(*cdcsync.Column, any) string
}

// partitionSources are the workload columns the tables are partitioned by
// (see workloadTables).
var partitionSources = map[string][]string{
	"items":  {"region"},
	"events": {"created", "id"},
}

// buildFilters makes the predicates for one table from MySQL's rows.
func buildFilters(table string, ts *cdcsync.TableSchema, rows []cdcsync.Row) []engineFilter {
	var out []engineFilter
	nullChecks := 0
	for i := range ts.Columns {
		c := &ts.Columns[i]
		var vals []any
		nulls := 0
		for _, r := range rows {
			if r[i] == nil {
				nulls++
			} else {
				vals = append(vals, r[i])
			}
		}
		if len(vals) == 0 {
			continue
		}
		sort.Slice(vals, func(a, b int) bool { return compareCanonical(c.Kind, vals[a], vals[b]) < 0 })
		out = append(out, engineFilter{col: i, op: ">=", val: vals[len(vals)/2]})
		if nulls > 0 && nullChecks < 3 {
			out = append(out, engineFilter{col: i, op: "IS NULL"})
			nullChecks++
		}
	}
	for _, name := range partitionSources[table] {
		i := ts.ColumnIndex(name)
		if i < 0 || len(rows) == 0 {
			continue
		}
		out = append(out, engineFilter{col: i, op: "=", val: rows[len(rows)/3][i]})
	}
	return out
}

func (f engineFilter) matches(c *cdcsync.Column, r cdcsync.Row) bool {
	v := r[f.col]
	switch f.op {
	case "IS NULL":
		return v == nil
	case ">=":
		return v != nil && compareCanonical(c.Kind, v, f.val) >= 0
	case "=":
		return v != nil && compareCanonical(c.Kind, v, f.val) == 0
	}
	panic("unknown filter op " + f.op)
}

func (f engineFilter) sql(d *engineDialect, ts *cdcsync.TableSchema) string {
	c := &ts.Columns[f.col]
	if f.op == "IS NULL" {
		return d.quote(c.Name) + " IS NULL"
	}
	return d.quote(c.Name) + " " + f.op + " " + d.literal(c, f.val)
}

func (f engineFilter) String(ts *cdcsync.TableSchema) string {
	c := &ts.Columns[f.col]
	if f.op == "IS NULL" {
		return c.Name + " IS NULL"
	}
	return c.Name + " " + f.op + " " + cdcsync.Format(c.Kind, f.val)
}

// compareCanonical orders two non-NULL canonical values of kind k.
func compareCanonical(k cdcsync.Kind, a, b any) int {
	switch k {
	case cdcsync.KindDecimal:
		x, _ := new(big.Rat).SetString(a.(string))
		y, _ := new(big.Rat).SetString(b.(string))
		return x.Cmp(y)
	case cdcsync.KindBinary:
		return bytes.Compare(a.([]byte), b.([]byte))
	case cdcsync.KindString:
		return strings.Compare(a.(string), b.(string))
	}
	var x, y float64
	switch a := a.(type) {
	case int32:
		return cmpInt(int64(a), int64(b.(int32)))
	case int64:
		return cmpInt(a, b.(int64))
	case float32:
		x, y = float64(a), float64(b.(float32))
	case float64:
		x, y = a, b.(float64)
	default:
		panic(fmt.Sprintf("compareCanonical: %T", a))
	}
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func tsLiteral(v any) string {
	return time.UnixMicro(v.(int64)).UTC().Format("2006-01-02 15:04:05.000000")
}

func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// commonLiteral spells the literals the three engines share.
func commonLiteral(c *cdcsync.Column, v any) (string, bool) {
	switch c.Kind {
	case cdcsync.KindInt32, cdcsync.KindInt64:
		return fmt.Sprint(v), true
	case cdcsync.KindDecimal:
		return fmt.Sprintf("CAST('%s' AS DECIMAL(%d,%d))", v, c.Precision, c.Scale), true
	case cdcsync.KindFloat64:
		return fmt.Sprintf("CAST('%s' AS DOUBLE)", strconv.FormatFloat(v.(float64), 'g', -1, 64)), true
	case cdcsync.KindDate:
		return "DATE '" + cdcsync.Format(cdcsync.KindDate, v) + "'", true
	}
	return "", false
}

var sparkDialect = &engineDialect{
	name:   "spark",
	typeOf: sparkType,
	quote:  func(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" },
	literal: func(c *cdcsync.Column, v any) string {
		if s, ok := commonLiteral(c, v); ok {
			return s
		}
		switch c.Kind {
		case cdcsync.KindFloat32:
			return fmt.Sprintf("CAST('%s' AS FLOAT)", strconv.FormatFloat(float64(v.(float32)), 'g', -1, 32))
		case cdcsync.KindString:
			// Spark SQL string literals process backslash escapes.
			return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v.(string)) + "'"
		case cdcsync.KindBinary:
			return "X'" + hex.EncodeToString(v.([]byte)) + "'"
		case cdcsync.KindTimestamp:
			return "TIMESTAMP_NTZ '" + tsLiteral(v) + "'"
		case cdcsync.KindTimestampTZ:
			return "TIMESTAMP '" + tsLiteral(v) + "+00:00'"
		}
		panic("spark literal for " + c.Kind.String())
	},
}

var duckdbDialect = &engineDialect{
	name:   "duckdb",
	typeOf: duckdbType,
	quote:  func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` },
	literal: func(c *cdcsync.Column, v any) string {
		if s, ok := commonLiteral(c, v); ok {
			return s
		}
		switch c.Kind {
		case cdcsync.KindFloat32:
			return fmt.Sprintf("CAST('%s' AS FLOAT)", strconv.FormatFloat(float64(v.(float32)), 'g', -1, 32))
		case cdcsync.KindString:
			return sqlString(v.(string))
		case cdcsync.KindBinary:
			return "from_hex('" + hex.EncodeToString(v.([]byte)) + "')"
		case cdcsync.KindTimestamp:
			return "TIMESTAMP '" + tsLiteral(v) + "'"
		case cdcsync.KindTimestampTZ:
			return "TIMESTAMPTZ '" + tsLiteral(v) + "+00'"
		}
		panic("duckdb literal for " + c.Kind.String())
	},
}

var trinoDialect = &engineDialect{
	name:   "trino",
	typeOf: trinoType,
	quote:  func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` },
	literal: func(c *cdcsync.Column, v any) string {
		if s, ok := commonLiteral(c, v); ok {
			return s
		}
		switch c.Kind {
		case cdcsync.KindFloat32:
			return fmt.Sprintf("CAST('%s' AS REAL)", strconv.FormatFloat(float64(v.(float32)), 'g', -1, 32))
		case cdcsync.KindString:
			return sqlString(v.(string))
		case cdcsync.KindBinary:
			return "X'" + hex.EncodeToString(v.([]byte)) + "'"
		case cdcsync.KindTimestamp:
			return "TIMESTAMP '" + tsLiteral(v) + "'"
		case cdcsync.KindTimestampTZ:
			return "TIMESTAMP '" + tsLiteral(v) + " UTC'"
		}
		panic("trino literal for " + c.Kind.String())
	},
}

// forDialect returns req with every table's filters spelled for d.
func (req engineRequest) forDialect(d *engineDialect, tables []*engineTable) engineRequest {
	out := req
	out.Tables = make([]engineTable, len(tables))
	for i, et := range tables {
		out.Tables[i] = *et
		out.Tables[i].Filters = nil
		for _, f := range et.filters {
			out.Tables[i].Filters = append(out.Tables[i].Filters, f.sql(d, et.schema))
		}
	}
	return out
}
