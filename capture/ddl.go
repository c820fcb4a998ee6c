package capture

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/ddlparse"
	"github.com/cdcsync/cdcsync/capture/internal/strutil"
)

// This file turns parsed DDL statements into schema changes of the mirrored
// tables (cdcsync.SchemaChange): the new schema, where each column comes
// from, the value the existing rows get in a new column, and whether Iceberg
// can express the change at all.

// errNotUnderstood marks a statement cdcsync could parse but not apply (it
// names a column the table does not have, for example).
var errNotUnderstood = errors.New("not understood")

// wcol is a column while an ALTER TABLE is applied.
type wcol struct {
	col     cdcsync.Column
	from    string // name before the statement; "" for a new column
	def     *ddlparse.ColumnDef
	fill    *string // new column: the text of the value existing rows get
	unknown string  // new column: why that value cannot be known
	changed bool    // MODIFY/CHANGE redefined it
}

// alterResult is the effect of an ALTER TABLE on one table.
type alterResult struct {
	schema      *cdcsync.TableSchema
	sources     []cdcsync.ColumnSource
	charset     string // the table's default character set afterwards
	problem     string // a change Iceberg cannot express (empty: none)
	unsupported string // a column type cdcsync cannot map
	renameTo    *cdcsync.TableID
}

// columnFromDef maps a column definition to a cdcsync.Column the way
// LoadSchema maps information_schema. tableCharset is the table's default
// character set when known; a text column without one is taken as utf8mb4,
// which the table map of the next rows event verifies (checkTableMap).
func columnFromDef(d *ddlparse.ColumnDef, tableCharset string) (cdcsync.Column, error) {
	dt := d.DataType
	charset := d.Charset
	if charset == "" && d.Collate != "" {
		charset = ddlparse.CharsetOfCollation(d.Collate)
	}
	if charset == "" && d.National {
		charset = "utf8mb3"
	}
	if charset == "binary" {
		switch dt {
		case "char":
			dt = "binary"
		case "varchar":
			dt = "varbinary"
		case "tinytext", "text", "mediumtext", "longtext":
			dt = strings.TrimSuffix(dt, "text") + "blob"
		}
	}
	if charset == "" {
		charset = tableCharset
	}
	if charset == "" {
		charset = "utf8mb4"
	}
	args := d.Args
	switch dt {
	case "decimal":
		switch len(args) {
		case 0:
			args = []string{"10", "0"}
		case 1:
			args = []string{args[0], "0"}
		}
	case "char", "binary":
		if len(args) == 0 {
			args = []string{"1"}
		}
	}
	ct := dt
	if len(args) > 0 {
		if dt == "enum" || dt == "set" {
			q := make([]string, len(args))
			for i, a := range args {
				q[i] = "'" + strings.ReplaceAll(a, "'", "''") + "'"
			}
			ct += "(" + strings.Join(q, ",") + ")"
		} else {
			ct += "(" + strings.Join(args, ",") + ")"
		}
	}
	if d.Unsigned && !d.Zerofill {
		ct += " unsigned"
	}
	if d.Zerofill {
		ct += " unsigned zerofill"
	}
	c := cdcsync.Column{Name: d.Name, DataType: dt, ColumnType: ct,
		Nullable: !(d.NotNull || d.PrimaryKey || d.Serial)}
	if err := MapColumn(&c, charset); err != nil {
		return c, err
	}
	return c, nil
}

// implicitFill is the value MySQL gives the existing rows in a new NOT NULL
// column without a DEFAULT.
func implicitFill(d *ddlparse.ColumnDef, c *cdcsync.Column) (*string, string) {
	zero := "0"
	empty := ""
	str := func(s string) (*string, string) { return &s, "" }
	if ddlIsJSON(c) {
		return nil, "a new NOT NULL JSON column without a default"
	}
	switch strings.ToLower(c.DataType) {
	case "enum":
		if len(d.Args) > 0 {
			return str(d.Args[0]) // the first label
		}
	case "set":
		return str("")
	case "bit":
		return str(strings.Repeat("\x00", (strutil.AtoiOr(firstArg(c.ColumnType), 1)+7)/8))
	case "time":
		return str("00:00:00")
	case "year":
		return str("0")
	}
	switch c.Kind {
	case cdcsync.KindInt32, cdcsync.KindInt64, cdcsync.KindDecimal, cdcsync.KindFloat32, cdcsync.KindFloat64:
		return &zero, ""
	case cdcsync.KindString:
		if ddlIsDecimal(c) {
			return &zero, ""
		}
		return &empty, ""
	case cdcsync.KindBinary:
		return &empty, ""
	}
	return nil, "a new NOT NULL " + c.ColumnType + " column without a default gets the zero date, which Iceberg cannot store"
}

// newColumnFill says what the rows that already exist get in a new column.
func newColumnFill(d *ddlparse.ColumnDef, c *cdcsync.Column) (*string, string) {
	switch {
	case d.AutoIncrement:
		return nil, "AUTO_INCREMENT numbers the existing rows"
	case d.Generated:
		return nil, "a generated column's values are computed by MySQL"
	case d.DefaultExpr != "":
		return nil, fmt.Sprintf("its default %s is an expression, evaluated by MySQL when the column was added", d.DefaultExpr)
	case d.DefaultNull:
		return nil, ""
	case d.DefaultText != nil:
		s := *d.DefaultText
		switch {
		case c.Kind == cdcsync.KindTimestampTZ:
			return nil, "a TIMESTAMP default is read in the session's time zone"
		case strings.EqualFold(c.DataType, "char"):
			s = strings.TrimRight(s, " ")
		case c.Kind == cdcsync.KindTimestamp:
			fsp := strutil.AtoiOr(firstArg(c.ColumnType), 0)
			if _, frac, ok := strings.Cut(s, "."); ok && len(strings.TrimRight(frac, "0")) > fsp {
				return nil, fmt.Sprintf("its default %q has more fractional digits than the column keeps", s)
			}
		}
		return &s, ""
	case !c.Nullable:
		return implicitFill(d, c)
	}
	return nil, ""
}

func firstArg(ct string) string {
	open := strings.IndexByte(ct, '(')
	end := strings.IndexByte(ct, ')')
	if open < 0 || end < open {
		return ""
	}
	a, _, _ := strings.Cut(ct[open+1:end], ",")
	return strings.TrimSpace(a)
}

// FillValue converts the text of a new column's fill value (see
// cdcsync.ColumnSource) to its canonical value.
func FillValue(c *cdcsync.Column, text *string) (any, error) {
	if text == nil {
		return nil, nil
	}
	return DecodeSnapshot(c, mysql.NewFieldValue(mysql.FieldValueTypeString, 0, []byte(*text)))
}

// fills computes the canonical fill values of sources; a source whose value
// is unknown, or whose text does not convert, is a problem.
func fills(s *cdcsync.TableSchema, src []cdcsync.ColumnSource) ([]any, string) {
	out := make([]any, len(src))
	for i, cs := range src {
		if cs.From != "" {
			continue
		}
		c := &s.Columns[i]
		if cs.Unknown != "" {
			return nil, fmt.Sprintf("new column %s: the value the existing rows get is unknown: %s", c.Name, cs.Unknown)
		}
		v, err := FillValue(c, cs.Fill)
		if err != nil {
			return nil, fmt.Sprintf("new column %s: its default %q does not convert to %s: %v", c.Name, *cs.Fill, c.ColumnType, err)
		}
		out[i] = v
	}
	return out, ""
}

// applyAlter applies the clauses of an ALTER TABLE to cur. An error means
// the statement does not apply to cur (a column it names is missing); a
// change Iceberg cannot express comes back as res.problem, a type cdcsync
// cannot map as res.unsupported.
func applyAlter(cur *cdcsync.TableSchema, charset string, specs []ddlparse.AlterSpec, mode ddlparse.SQLMode, ignore bool) (*alterResult, error) {
	cols := make([]*wcol, len(cur.Columns))
	for i, c := range cur.Columns {
		cols[i] = &wcol{col: c, from: c.Name}
	}
	var pk []string
	for _, k := range cur.PrimaryKey {
		pk = append(pk, cur.Columns[k].Name)
	}
	res := &alterResult{charset: charset}
	find := func(name string) int {
		for i, c := range cols {
			if strings.EqualFold(c.col.Name, name) {
				return i
			}
		}
		return -1
	}
	place := func(w *wcol, first bool, after string) error {
		switch {
		case first:
			cols = slices.Insert(cols, 0, w)
		case after != "":
			i := find(after)
			if i < 0 {
				return fmt.Errorf("%w: AFTER names column %s, which the table does not have", errNotUnderstood, after)
			}
			cols = slices.Insert(cols, i+1, w)
		default:
			cols = append(cols, w)
		}
		return nil
	}
	renamePK := func(old, new string) {
		for i, k := range pk {
			if strings.EqualFold(k, old) {
				pk[i] = new
			}
		}
	}
	unsupported := func(err error) {
		var ue *UnsupportedColumnError
		if errors.As(err, &ue) {
			ue.Table = cur.ID
		}
		if res.unsupported == "" {
			res.unsupported = err.Error()
		}
	}
	build := func(d *ddlparse.ColumnDef) (cdcsync.Column, bool) {
		c, err := columnFromDef(d, res.charset)
		if err != nil {
			unsupported(err)
			return c, false
		}
		return c, true
	}
	for _, sp := range specs {
		switch sp.Op {
		case ddlparse.SpecAddColumn:
			defs := sp.Columns
			if sp.Column != nil {
				defs = []*ddlparse.ColumnDef{sp.Column}
			}
			for j, d := range defs {
				if find(d.Name) >= 0 {
					if sp.IfExists { // ADD COLUMN IF NOT EXISTS
						continue
					}
					return nil, fmt.Errorf("%w: column %s already exists", errNotUnderstood, d.Name)
				}
				c, ok := build(d)
				w := &wcol{col: c, def: d}
				if ok {
					w.fill, w.unknown = newColumnFill(d, &c)
				}
				first, after := sp.First && j == 0, sp.After
				if j > 0 {
					first, after = false, ""
				}
				if err := place(w, first, after); err != nil {
					return nil, err
				}
				if d.PrimaryKey {
					pk = []string{d.Name}
				}
			}
		case ddlparse.SpecDropColumn:
			i := find(sp.Name)
			if i < 0 {
				if sp.IfExists {
					continue
				}
				return nil, fmt.Errorf("%w: DROP COLUMN names column %s, which the table does not have", errNotUnderstood, sp.Name)
			}
			cols = slices.Delete(cols, i, i+1)
			pk = slices.DeleteFunc(pk, func(k string) bool { return strings.EqualFold(k, sp.Name) })
		case ddlparse.SpecModify, ddlparse.SpecChange:
			i := find(sp.Name)
			if i < 0 {
				if sp.IfExists {
					continue
				}
				return nil, fmt.Errorf("%w: %s names column %s, which the table does not have", errNotUnderstood, opName(sp.Op), sp.Name)
			}
			w := cols[i]
			c, _ := build(sp.Column)
			old := w.col.Name
			w.col, w.def, w.changed = c, sp.Column, true
			if !strings.EqualFold(old, c.Name) {
				if j := find(c.Name); j >= 0 && j != i {
					return nil, fmt.Errorf("%w: column %s already exists", errNotUnderstood, c.Name)
				}
			}
			renamePK(old, c.Name)
			if sp.First || sp.After != "" {
				cols = slices.Delete(cols, i, i+1)
				if err := place(w, sp.First, sp.After); err != nil {
					return nil, err
				}
			}
			if sp.Column.PrimaryKey {
				pk = []string{c.Name}
			}
		case ddlparse.SpecRenameColumn:
			i := find(sp.Name)
			if i < 0 {
				if sp.IfExists {
					continue
				}
				return nil, fmt.Errorf("%w: RENAME COLUMN names column %s, which the table does not have", errNotUnderstood, sp.Name)
			}
			if j := find(sp.NewName); j >= 0 && j != i {
				return nil, fmt.Errorf("%w: column %s already exists", errNotUnderstood, sp.NewName)
			}
			renamePK(cols[i].col.Name, sp.NewName)
			cols[i].col.Name = sp.NewName
		case ddlparse.SpecAddPK:
			for _, k := range sp.PrimaryKey {
				i := find(k)
				if i < 0 {
					return nil, fmt.Errorf("%w: PRIMARY KEY names column %s, which the table does not have", errNotUnderstood, k)
				}
				cols[i].col.Nullable = false
			}
			pk = slices.Clone(sp.PrimaryKey)
		case ddlparse.SpecDropPK:
			pk = nil
		case ddlparse.SpecConvert:
			res.charset = sp.Charset
			for _, w := range cols {
				switch w.col.Kind {
				case cdcsync.KindString, cdcsync.KindInvalid:
					if ddlIsJSON(&w.col) || ddlIsDecimal(&w.col) {
						continue
					}
					c := w.col
					if err := MapColumn(&c, sp.Charset); err != nil {
						unsupported(err)
					}
				}
			}
		case ddlparse.SpecCharset:
			res.charset = sp.Charset
		case ddlparse.SpecDataChange:
			if res.problem == "" {
				res.problem = fmt.Sprintf("%q changes rows without writing them to the binlog", strutil.Abbreviate(sp.Text, 80))
			}
		case ddlparse.SpecRenameTable:
			id := sp.Table
			res.renameTo = &id
		case ddlparse.SpecNoop, ddlparse.SpecAddFK, ddlparse.SpecDropFK, ddlparse.SpecDropConstraint:
		}
	}
	s := &cdcsync.TableSchema{ID: cur.ID}
	for _, w := range cols {
		s.Columns = append(s.Columns, w.col)
		src := cdcsync.ColumnSource{From: w.from}
		if w.from == "" {
			src.Fill, src.Unknown = w.fill, w.unknown
		}
		res.sources = append(res.sources, src)
	}
	for _, k := range pk {
		i := s.ColumnIndex(k)
		if i < 0 {
			for j, c := range s.Columns {
				if strings.EqualFold(c.Name, k) {
					i = j
				}
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("%w: primary key column %s is not in the table", errNotUnderstood, k)
		}
		s.Columns[i].Nullable = false
		s.PrimaryKey = append(s.PrimaryKey, i)
	}
	res.schema = s
	if res.problem == "" {
		strict := mode.Strict && !ignore
		for i, w := range cols {
			if w.from == "" {
				continue
			}
			old := cur.Columns[cur.ColumnIndex(w.from)]
			if p := columnChangeProblem(&old, &s.Columns[i], strict); p != "" {
				res.problem = p
				break
			}
		}
	}
	return res, nil
}

func opName(op ddlparse.SpecOp) string {
	if op == ddlparse.SpecChange {
		return "CHANGE COLUMN"
	}
	return "MODIFY COLUMN"
}

// intRange is the range of values of an integer column.
func intRange(c *cdcsync.Column) (lo, hi float64) {
	bits := decIntWidth(c)
	if bits == 0 {
		bits = 64
	}
	if c.Unsigned {
		return 0, float64(uint64(1)<<(bits-1)) * 2
	}
	return -float64(uint64(1) << (bits - 1)), float64(uint64(1) << (bits - 1))
}

// textLimit is the maximum length of a text or binary column (characters
// for CHAR/VARCHAR, bytes for the others).
func textLimit(c *cdcsync.Column) int {
	switch strings.ToLower(c.DataType) {
	case "char", "varchar", "binary", "varbinary":
		return strutil.AtoiOr(firstArg(c.ColumnType), 1)
	case "tinytext", "tinyblob":
		return 255
	case "text", "blob":
		return 65535
	case "mediumtext", "mediumblob":
		return 16777215
	}
	return 1 << 32
}

// columnChangeProblem says why a change of a column's definition cannot be
// expressed in Iceberg, or returns "". strict is the statement's sql_mode
// strictness: in strict mode MySQL refuses an ALTER that would truncate or
// clip a value, so a narrowing that succeeded changed no value.
func columnChangeProblem(old, nw *cdcsync.Column, strict bool) string {
	if old.Kind == cdcsync.KindInvalid || nw.Kind == cdcsync.KindInvalid {
		return "" // reported as unsupported
	}
	bad := func(why string) string {
		return fmt.Sprintf("column %s changes from %s to %s: %s", old.Name, old.ColumnType, nw.ColumnType, why)
	}
	if old.Nullable && !nw.Nullable && !strict {
		return bad("NULL values become the type's zero value outside strict sql_mode")
	}
	if ddlIsJSON(old) != ddlIsJSON(nw) {
		return bad("the values change between JSON and text")
	}
	if ddlIsDecimal(old) != ddlIsDecimal(nw) && (old.Kind == cdcsync.KindString || nw.Kind == cdcsync.KindString) {
		return bad("Iceberg has no promotion between these types")
	}
	switch {
	case old.Kind == nw.Kind:
		switch old.Kind {
		case cdcsync.KindInt32, cdcsync.KindInt64:
			lo1, hi1 := intRange(old)
			lo2, hi2 := intRange(nw)
			if (lo2 > lo1 || hi2 < hi1) && !strict {
				return bad("values that do not fit are clipped outside strict sql_mode")
			}
		case cdcsync.KindDecimal, cdcsync.KindString:
			if ddlIsDecimal(old) {
				if old.Scale != nw.Scale {
					return bad("a DECIMAL's scale cannot change in Iceberg (the values are rounded or padded)")
				}
				if nw.Precision < old.Precision && !strict {
					return bad("values that do not fit are clipped outside strict sql_mode")
				}
				return ""
			}
			if strings.EqualFold(nw.DataType, "char") && !strings.EqualFold(old.DataType, "char") {
				return bad("CHAR drops the values' trailing spaces")
			}
			if textLimit(nw) < textLimit(old) && !strict {
				return bad("longer values are truncated outside strict sql_mode")
			}
		case cdcsync.KindBinary:
			ob, nb := strings.EqualFold(old.DataType, "binary"), strings.EqualFold(nw.DataType, "binary")
			if nb && (!ob || textLimit(nw) != textLimit(old)) {
				return bad("BINARY(n) pads the values with zero bytes to a new length")
			}
			if textLimit(nw) < textLimit(old) && !strict {
				return bad("longer values are truncated outside strict sql_mode")
			}
		case cdcsync.KindFloat32, cdcsync.KindFloat64:
			if (strings.Contains(old.ColumnType, "(") || strings.Contains(nw.ColumnType, "(")) && old.ColumnType != nw.ColumnType {
				return bad("FLOAT(M,D)/DOUBLE(M,D) round the values")
			}
		case cdcsync.KindTimestamp, cdcsync.KindTimestampTZ, cdcsync.KindTime:
			if strutil.AtoiOr(firstArg(nw.ColumnType), 0) < strutil.AtoiOr(firstArg(old.ColumnType), 0) {
				return bad("fewer fractional seconds round the values")
			}
		}
		return ""
	case old.Kind == cdcsync.KindInt32 && nw.Kind == cdcsync.KindInt64:
		lo1, hi1 := intRange(old)
		lo2, hi2 := intRange(nw)
		if (lo2 > lo1 || hi2 < hi1) && !strict {
			return bad("values that do not fit are clipped outside strict sql_mode")
		}
		return ""
	case old.Kind == cdcsync.KindFloat32 && nw.Kind == cdcsync.KindFloat64:
		if strings.Contains(old.ColumnType, "(") || strings.Contains(nw.ColumnType, "(") {
			return bad("FLOAT(M,D)/DOUBLE(M,D) round the values")
		}
		return ""
	}
	return bad(fmt.Sprintf("Iceberg cannot promote %s to %s", old.Kind, nw.Kind))
}

// schemaFromCreate builds the schema of a CREATE TABLE (...). It returns
// the table's default character set too.
func schemaFromCreate(id cdcsync.TableID, def *ddlparse.CreateDef, dbCharset string) (*cdcsync.TableSchema, []*ddlparse.ColumnDef, string, error) {
	cs := def.Charset
	if cs == "" {
		cs = dbCharset
	}
	s := &cdcsync.TableSchema{ID: id}
	pk := def.PrimaryKey
	for _, d := range def.Columns {
		c, err := columnFromDef(d, cs)
		if err != nil {
			return nil, nil, cs, err
		}
		s.Columns = append(s.Columns, c)
		if d.PrimaryKey {
			pk = []string{d.Name}
		}
	}
	for _, k := range pk {
		i := -1
		for j, c := range s.Columns {
			if strings.EqualFold(c.Name, k) {
				i = j
			}
		}
		if i < 0 {
			return nil, nil, cs, fmt.Errorf("%w: primary key column %s is not in the table", errNotUnderstood, k)
		}
		s.Columns[i].Nullable = false
		s.PrimaryKey = append(s.PrimaryKey, i)
	}
	return s, def.Columns, cs, nil
}

// sameSchema reports whether two schemas have the same columns (name, kind,
// type, nullability) and primary key.

func identitySources(s *cdcsync.TableSchema) []cdcsync.ColumnSource {
	out := make([]cdcsync.ColumnSource, len(s.Columns))
	for i, c := range s.Columns {
		out[i].From = c.Name
	}
	return out
}

func isIdentity(s *cdcsync.TableSchema, src []cdcsync.ColumnSource) bool {
	for i, c := range s.Columns {
		if src[i].From != c.Name {
			return false
		}
	}
	return true
}

// composeSources maps the sources of a shadow table (relative to its base)
// through an ALTER of the shadow (sources relative to the shadow before it).
func composeSources(prev []cdcsync.ColumnSource, prevSchema *cdcsync.TableSchema, step []cdcsync.ColumnSource) []cdcsync.ColumnSource {
	out := make([]cdcsync.ColumnSource, len(step))
	for i, s := range step {
		if s.From == "" {
			out[i] = s
			continue
		}
		j := prevSchema.ColumnIndex(s.From)
		if j < 0 {
			out[i] = cdcsync.ColumnSource{Unknown: "the shadow table's history is incomplete"}
			continue
		}
		out[i] = prev[j]
	}
	return out
}

func cloneSchema(s *cdcsync.TableSchema) *cdcsync.TableSchema {
	if s == nil {
		return nil
	}
	c := *s
	c.Columns = slices.Clone(s.Columns)
	c.PrimaryKey = slices.Clone(s.PrimaryKey)
	return &c
}

// describeSchema renders a schema for messages: "(id int PK, v varchar(10))".
func describeSchema(s *cdcsync.TableSchema) string {
	parts := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		parts[i] = c.Name + " " + c.ColumnType
		if slices.Contains(s.PrimaryKey, i) {
			parts[i] += " PK"
		}
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func ddlIsJSON(c *cdcsync.Column) bool { return strings.EqualFold(c.DataType, "json") }

func ddlIsDecimal(c *cdcsync.Column) bool {
	switch strings.ToLower(c.DataType) {
	case "decimal", "numeric", "fixed":
		return true
	}
	return false
}
