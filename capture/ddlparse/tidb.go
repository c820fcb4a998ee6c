package ddlparse

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver" // literal values in the AST

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
	"github.com/cdcsync/cdcsync/capture/internal/strutil"
)

// This file builds a Stmt from the TiDB parser's AST of a statement that
// rewrite.go has made into SQL the TiDB parser takes. Source text the AST
// does not keep is taken from the statement's tokens (lex): the names
// around FOREIGN KEY and which keyword a DROP CHECK or DROP CONSTRAINT
// used.

var tidbParser = parser.New() // guarded by tidbMu

// parse parses q as Parse does.
func parse(q, db, flavor string, mode SQLMode) (*Stmt, error) {
	toks, err := lex(q, mode)
	if err != nil {
		return nil, err
	}
	rw := rewrite(q, toks)
	if rw.err != nil {
		return nil, rw.err
	}
	if rw.other {
		return &Stmt{Kind: StmtOther}, nil
	}
	var m mysql.SQLMode
	if mode.ansiQuotes {
		m |= mysql.ModeANSIQuotes
	}
	if mode.noBackslash {
		m |= mysql.ModeNoBackslashEscapes
	}
	if mode.realAsFloat {
		m |= mysql.ModeRealAsFloat
	}
	tidbMu.Lock()
	tidbParser.SetSQLMode(m)
	stmts, _, err := tidbParser.Parse(rw.sql, "", "")
	tidbMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%v (in %q)", err, strutil.Abbreviate(rw.sql, 200))
	}
	if len(stmts) != 1 {
		return nil, fmt.Errorf("%d statements", len(stmts))
	}
	a := &tidbAdapter{q: q, toks: toks, db: db, flavor: flavor, ifExists: rw.ifExists}
	switch n := stmts[0].(type) {
	case *ast.AlterTableStmt:
		return a.alter(n)
	case *ast.CreateTableStmt:
		s, err := a.create(n)
		if s != nil {
			s.OrReplace = rw.orReplace
			s.AsSelect = s.AsSelect || rw.versioned && s.Create != nil
		}
		return s, err
	case *ast.DropTableStmt:
		if n.IsView {
			return &Stmt{Kind: StmtOther}, nil
		}
		s := &Stmt{Kind: StmtDrop, Temporary: n.TemporaryKeyword != ast.TemporaryNone}
		for _, t := range n.Tables {
			s.Tables = append(s.Tables, a.table(t))
		}
		return s, nil
	case *ast.DropDatabaseStmt:
		return &Stmt{Kind: StmtDropDatabase, Database: n.Name.O}, nil
	case *ast.RenameTableStmt:
		s := &Stmt{Kind: StmtRename}
		for _, tt := range n.TableToTables {
			s.Renames = append(s.Renames, [2]cdcsync.TableID{a.table(tt.OldTable), a.table(tt.NewTable)})
		}
		return s, nil
	case *ast.TruncateTableStmt:
		return &Stmt{Kind: StmtTruncate, Table: a.table(n.Table)}, nil
	}
	return &Stmt{Kind: StmtOther}, nil
}

// tidbAdapter builds a Stmt from the TiDB AST of one statement.
type tidbAdapter struct {
	q      string
	toks   []token
	db     string
	flavor string
	fks    int // FOREIGN KEY clauses taken from toks so far
	drops  int // DROP CHECK/CONSTRAINT clauses taken from toks so far
	// ifExists is rewritten.ifExists, taken in order.
	ifExists []bool
}

// nextIfExists takes the IF EXISTS the rewrite took out of the next DROP
// FOREIGN KEY, DROP CONSTRAINT, DROP CHECK or RENAME COLUMN.
func (a *tidbAdapter) nextIfExists() bool {
	if len(a.ifExists) == 0 {
		return false
	}
	v := a.ifExists[0]
	a.ifExists = a.ifExists[1:]
	return v
}

// realName is the character set or collation name a placeholder (see
// placeholder) stands for, lower-case.
func realName(s string) string { return strings.TrimPrefix(strings.ToLower(s), placeholderPrefix) }

func (a *tidbAdapter) table(t *ast.TableName) cdcsync.TableID {
	if t.Schema.O != "" {
		return cdcsync.TableID{Database: t.Schema.O, Table: t.Name.O}
	}
	return cdcsync.TableID{Database: a.db, Table: t.Name.O}
}

// restore renders a node for messages.
func restore(n ast.Node) string {
	var b strings.Builder
	ctx := format.NewRestoreCtx(format.RestoreStringSingleQuotes|format.RestoreKeyWordUppercase|format.RestoreNameBackQuotes, &b)
	if err := n.Restore(ctx); err != nil {
		return ""
	}
	return b.String()
}

func (a *tidbAdapter) alter(n *ast.AlterTableStmt) (*Stmt, error) {
	s := &Stmt{Kind: StmtAlter, Table: a.table(n.Table)}
	for _, sp := range n.Specs {
		out, err := a.alterSpec(sp)
		if err != nil {
			return nil, err
		}
		s.Specs = append(s.Specs, out...)
	}
	return s, nil
}

func noop(text string) AlterSpec { return AlterSpec{Op: SpecNoop, Text: text} }

func (a *tidbAdapter) position(sp *AlterSpec, pos *ast.ColumnPosition) {
	if pos == nil {
		return
	}
	switch pos.Tp {
	case ast.ColumnPositionFirst:
		sp.First = true
	case ast.ColumnPositionAfter:
		sp.After = pos.RelativeColumn.Name.O
	}
}

func (a *tidbAdapter) alterSpec(sp *ast.AlterTableSpec) ([]AlterSpec, error) {
	text := restore(sp)
	switch sp.Tp {
	case ast.AlterTableAddColumns:
		out := AlterSpec{Op: SpecAddColumn, IfExists: sp.IfNotExists, Text: text}
		var cols []*ColumnDef
		for _, c := range sp.NewColumns {
			d, err := a.column(c)
			if err != nil {
				return nil, err
			}
			cols = append(cols, d)
		}
		if sp.Position == nil { // ADD (a ..., b ...)
			out.Columns = cols
		} else {
			if len(cols) != 1 {
				return nil, fmt.Errorf("ADD COLUMN with %d columns", len(cols))
			}
			out.Column = cols[0]
			a.position(&out, sp.Position)
		}
		return []AlterSpec{out}, nil
	case ast.AlterTableAddConstraint:
		c := sp.Constraint
		switch c.Tp {
		case ast.ConstraintPrimaryKey:
			pk, err := keyNames(c.Keys)
			if err != nil {
				return nil, err
			}
			return []AlterSpec{{Op: SpecAddPK, PrimaryKey: pk}}, nil
		case ast.ConstraintForeignKey:
			fk, err := a.foreignKey(c)
			if err != nil {
				return nil, err
			}
			return []AlterSpec{{Op: SpecAddFK, ForeignKey: fk}}, nil
		}
		return []AlterSpec{noop(text)}, nil
	case ast.AlterTableDropColumn:
		return []AlterSpec{{Op: SpecDropColumn, Name: sp.OldColumnName.Name.O, IfExists: sp.IfExists, Text: text}}, nil
	case ast.AlterTableDropPrimaryKey:
		return []AlterSpec{{Op: SpecDropPK}}, nil
	case ast.AlterTableDropForeignKey:
		return []AlterSpec{{Op: SpecDropFK, Name: sp.Name, IfExists: sp.IfExists || a.nextIfExists()}}, nil
	case ast.AlterTableDropCheck:
		// DROP CONSTRAINT c and DROP CHECK c come out alike: the keyword
		// is in the tokens.
		kw, err := a.nextDropCheck()
		if err != nil {
			return nil, err
		}
		ifExists := a.nextIfExists()
		if kw == "CHECK" {
			return []AlterSpec{noop(text)}, nil
		}
		return []AlterSpec{{Op: SpecDropConstraint, Name: sp.Constraint.Name, IfExists: sp.IfExists || ifExists}}, nil
	case ast.AlterTableModifyColumn, ast.AlterTableChangeColumn:
		if len(sp.NewColumns) != 1 {
			return nil, fmt.Errorf("MODIFY/CHANGE with %d columns", len(sp.NewColumns))
		}
		d, err := a.column(sp.NewColumns[0])
		if err != nil {
			return nil, err
		}
		out := AlterSpec{Op: SpecModify, Column: d, Name: d.Name, IfExists: sp.IfExists, Text: text}
		if sp.Tp == ast.AlterTableChangeColumn {
			out.Op, out.Name = SpecChange, sp.OldColumnName.Name.O
		}
		a.position(&out, sp.Position)
		return []AlterSpec{out}, nil
	case ast.AlterTableRenameColumn:
		return []AlterSpec{{Op: SpecRenameColumn, Name: sp.OldColumnName.Name.O, NewName: sp.NewColumnName.Name.O,
			IfExists: sp.IfExists || a.nextIfExists(), Text: text}}, nil
	case ast.AlterTableRenameTable:
		return []AlterSpec{{Op: SpecRenameTable, Table: a.table(sp.NewTable)}}, nil
	case ast.AlterTableOption:
		return a.tableOptions(sp.Options)
	case ast.AlterTableDropPartition, ast.AlterTableTruncatePartition, ast.AlterTableExchangePartition,
		ast.AlterTableImportPartitionTablespace, ast.AlterTableDiscardPartitionTablespace,
		ast.AlterTableImportTablespace, ast.AlterTableDiscardTablespace:
		return []AlterSpec{{Op: SpecDataChange, Text: text}}, nil
	case ast.AlterTableAlterColumn, ast.AlterTableLock, ast.AlterTableAlgorithm, ast.AlterTableRenameIndex,
		ast.AlterTableForce, ast.AlterTableAddPartitions, ast.AlterTableCoalescePartitions, ast.AlterTablePartition,
		ast.AlterTableEnableKeys, ast.AlterTableDisableKeys, ast.AlterTableRemovePartitioning,
		ast.AlterTableWithValidation, ast.AlterTableWithoutValidation, ast.AlterTableRebuildPartition,
		ast.AlterTableReorganizePartition, ast.AlterTableCheckPartitions, ast.AlterTableOptimizePartition,
		ast.AlterTableRepairPartition, ast.AlterTableAlterCheck, ast.AlterTableIndexInvisible,
		ast.AlterTableOrderByColumns, ast.AlterTableDropIndex:
		return []AlterSpec{noop(text)}, nil
	}
	return nil, fmt.Errorf("ALTER TABLE clause %d", sp.Tp)
}

// tableOptions maps table options: a
// character set (with the collation after it) is one SpecCharset, CONVERT
// TO one SpecConvert, ENGINE=BLACKHOLE a data change, anything else a noop.
func (a *tidbAdapter) tableOptions(opts []*ast.TableOption) ([]AlterSpec, error) {
	var out []AlterSpec
	for i := 0; i < len(opts); i++ {
		o := opts[i]
		switch o.Tp {
		case ast.TableOptionCharset:
			op := SpecCharset
			if o.UintValue == ast.TableOptionCharsetWithConvertTo {
				op = SpecConvert
			}
			out = append(out, AlterSpec{Op: op, Charset: realName(o.StrValue)})
			if i+1 < len(opts) && opts[i+1].Tp == ast.TableOptionCollate {
				i++
			}
		case ast.TableOptionCollate:
			out = append(out, AlterSpec{Op: SpecCharset, Charset: CharsetOfCollation(realName(o.StrValue))})
		case ast.TableOptionEngine:
			if strings.EqualFold(o.StrValue, "BLACKHOLE") {
				out = append(out, AlterSpec{Op: SpecDataChange, Text: restore(o)})
			} else {
				out = append(out, noop(restore(o)))
			}
		default:
			out = append(out, noop(restore(o)))
		}
	}
	return out, nil
}

func keyNames(keys []*ast.IndexPartSpecification) ([]string, error) {
	var cols []string
	for _, k := range keys {
		if k.Column == nil {
			return nil, fmt.Errorf("a functional key part")
		}
		cols = append(cols, k.Column.Name.O)
	}
	return cols, nil
}

// foreignKey maps a FOREIGN KEY constraint. The AST keeps one name for
// CONSTRAINT name and the index name after FOREIGN KEY; both come from
// the tokens.
func (a *tidbAdapter) foreignKey(c *ast.Constraint) (*ForeignKeyDef, error) {
	name, index, err := a.nextForeignKey()
	if err != nil {
		return nil, err
	}
	fk := &ForeignKeyDef{Name: name, Index: index}
	if fk.Columns, err = keyNames(c.Keys); err != nil {
		return nil, err
	}
	r := c.Refer
	fk.Parent = cdcsync.TableID{Database: r.Table.Schema.O, Table: r.Table.Name.O}
	if fk.ParentColumns, err = keyNames(r.IndexPartSpecifications); err != nil {
		return nil, err
	}
	if len(fk.Columns) != len(fk.ParentColumns) {
		return nil, fmt.Errorf("column counts differ")
	}
	action := func(o ast.ReferOptionType) cdcsync.FKAction {
		switch o {
		case ast.ReferOptionCascade:
			return cdcsync.FKCascade
		case ast.ReferOptionSetNull:
			return cdcsync.FKSetNull
		}
		return cdcsync.FKAction(0)
	}
	if r.OnDelete != nil {
		fk.OnDelete = action(r.OnDelete.ReferOpt)
	}
	if r.OnUpdate != nil {
		fk.OnUpdate = action(r.OnUpdate.ReferOpt)
	}
	return fk, nil
}

// nextForeignKey finds the next [CONSTRAINT [name]] FOREIGN KEY [IF NOT
// EXISTS] [index] in the tokens.
func (a *tidbAdapter) nextForeignKey() (name, index string, err error) {
	seen := 0
	for i := 0; i+1 < len(a.toks); i++ {
		if !isKw(a.toks[i], "FOREIGN") || !isKw(a.toks[i+1], "KEY") {
			continue
		}
		if seen++; seen <= a.fks {
			continue
		}
		a.fks++
		if i >= 2 && isKw(a.toks[i-2], "CONSTRAINT") && (a.toks[i-1].kind == tkWord || a.toks[i-1].kind == tkQuoted) {
			name = a.toks[i-1].text
		}
		j := i + 2
		if isKw(a.toks[j], "IF") {
			j += 3
		}
		if j < len(a.toks) && (a.toks[j].kind == tkWord || a.toks[j].kind == tkQuoted) {
			index = a.toks[j].text
		}
		return name, index, nil
	}
	return "", "", fmt.Errorf("FOREIGN KEY not found in the tokens")
}

// nextDropCheck finds the keyword of the next DROP CHECK / DROP CONSTRAINT.
func (a *tidbAdapter) nextDropCheck() (string, error) {
	seen := 0
	for i := 0; i+1 < len(a.toks); i++ {
		if !isKw(a.toks[i], "DROP") || !(isKw(a.toks[i+1], "CHECK") || isKw(a.toks[i+1], "CONSTRAINT")) {
			continue
		}
		if seen++; seen <= a.drops {
			continue
		}
		a.drops++
		return strings.ToUpper(a.toks[i+1].text), nil
	}
	return "", fmt.Errorf("DROP CHECK not found in the tokens")
}

func (a *tidbAdapter) create(n *ast.CreateTableStmt) (*Stmt, error) {
	s := &Stmt{Kind: StmtCreate, Table: a.table(n.Table), ifNotExists: n.IfNotExists}
	if n.TemporaryKeyword != ast.TemporaryNone {
		s.Temporary = true
		return s, nil
	}
	if n.ReferTable != nil {
		like := a.table(n.ReferTable)
		s.Like = &like
		return s, nil
	}
	def := &CreateDef{}
	s.Create = def
	if n.Select != nil {
		s.AsSelect = true
	}
	for _, c := range n.Cols {
		d, err := a.column(c)
		if err != nil {
			return nil, err
		}
		def.Columns = append(def.Columns, d)
	}
	for _, c := range n.Constraints {
		switch c.Tp {
		case ast.ConstraintPrimaryKey:
			pk, err := keyNames(c.Keys)
			if err != nil {
				return nil, err
			}
			def.PrimaryKey = pk
		case ast.ConstraintForeignKey:
			// Table-level foreign keys of CREATE TABLE are skipped; the
			// tokens still count this one.
			if _, _, err := a.nextForeignKey(); err != nil {
				return nil, err
			}
		}
	}
	if s.AsSelect {
		return s, nil
	}
	for _, o := range n.Options {
		switch o.Tp {
		case ast.TableOptionCharset:
			def.Charset = realName(o.StrValue)
		case ast.TableOptionCollate:
			if def.Charset == "" {
				def.Charset = CharsetOfCollation(realName(o.StrValue))
			}
		}
	}
	return s, nil
}

// tidbTypes maps the AST's type codes to the type names of ColumnDef.
var tidbTypes = map[byte]string{
	mysql.TypeTiny: "tinyint", mysql.TypeShort: "smallint", mysql.TypeInt24: "mediumint", mysql.TypeLong: "int",
	mysql.TypeLonglong: "bigint", mysql.TypeNewDecimal: "decimal", mysql.TypeFloat: "float", mysql.TypeDouble: "double",
	mysql.TypeBit: "bit", mysql.TypeDate: "date", mysql.TypeDatetime: "datetime", mysql.TypeTimestamp: "timestamp",
	mysql.TypeDuration: "time", mysql.TypeYear: "year", mysql.TypeString: "char", mysql.TypeVarchar: "varchar",
	mysql.TypeVarString: "varchar", mysql.TypeTinyBlob: "tinytext", mysql.TypeBlob: "text",
	mysql.TypeMediumBlob: "mediumtext", mysql.TypeLongBlob: "longtext", mysql.TypeEnum: "enum", mysql.TypeSet: "set",
	mysql.TypeJSON: "json",
}

func (a *tidbAdapter) column(c *ast.ColumnDef) (*ColumnDef, error) {
	ft := c.Tp
	if ft == nil {
		return nil, fmt.Errorf("a column without a type")
	}
	d := &ColumnDef{Name: c.Name.Name.O}
	dt, ok := tidbTypes[ft.GetType()]
	if !ok {
		return nil, fmt.Errorf("column type %d", ft.GetType())
	}
	binary := ft.GetCharset() == "binary"
	switch dt {
	case "char", "varchar":
		if binary {
			dt = strings.Replace(dt, "char", "binary", 1)
		}
	case "tinytext", "text", "mediumtext", "longtext":
		if binary {
			dt = strings.TrimSuffix(dt, "text") + "blob"
		}
	}
	flen, dec := ft.GetFlen(), ft.GetDecimal()
	switch dt {
	case "decimal", "float", "double":
		if flen >= 0 {
			d.Args = append(d.Args, strconv.Itoa(flen))
			if dec >= 0 {
				d.Args = append(d.Args, strconv.Itoa(dec))
			}
		}
	case "datetime", "timestamp", "time":
		if dec >= 0 {
			d.Args = []string{strconv.Itoa(dec)}
		}
	case "enum", "set":
		d.Args = append([]string(nil), ft.GetElems()...)
	case "json":
		if a.flavor == binlogpos.FlavorMariaDB {
			dt = "longtext"
			d.Charset, d.Collate = "utf8mb4", "utf8mb4_bin"
		}
	default:
		if flen >= 0 {
			d.Args = []string{strconv.Itoa(flen)}
		}
	}
	d.DataType = dt
	flag := ft.GetFlag()
	d.Unsigned = flag&mysql.UnsignedFlag != 0
	d.Zerofill = flag&mysql.ZerofillFlag != 0
	if d.Zerofill {
		d.Unsigned = true
	}
	if !binary && dt != "json" {
		d.Charset = realName(ft.GetCharset())
		d.Collate = realName(ft.GetCollate())
	}
	d.typeText = ft.String()
	var marks []string
	for _, o := range c.Options {
		switch o.Tp {
		case ast.ColumnOptionNotNull:
			d.NotNull = true
		case ast.ColumnOptionNull:
			d.null = true
		case ast.ColumnOptionPrimaryKey:
			d.PrimaryKey = true
		case ast.ColumnOptionAutoIncrement:
			d.AutoIncrement = true
		case ast.ColumnOptionDefaultValue:
			if err := defaultOf(d, o.Expr); err != nil {
				return nil, err
			}
		case ast.ColumnOptionGenerated:
			d.Generated = true
		case ast.ColumnOptionCollate:
			d.Collate = realName(o.StrValue)
		case ast.ColumnOptionComment:
			if v, ok := o.Expr.(*test_driver.ValueExpr); ok && strings.HasPrefix(v.GetString(), markerPrefix) {
				marks = append(marks, strings.TrimPrefix(v.GetString(), markerPrefix))
			}
		case ast.ColumnOptionUniqKey, ast.ColumnOptionReference, ast.ColumnOptionCheck,
			ast.ColumnOptionColumnFormat, ast.ColumnOptionStorage, ast.ColumnOptionOnUpdate,
			ast.ColumnOptionSecondaryEngineAttribute, ast.ColumnOptionNoOption:
		default:
			return nil, fmt.Errorf("column option %d", o.Tp)
		}
	}
	for _, m := range marks {
		if err := marked(d, m); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// marked applies a column marker of the rewrite to d.
func marked(d *ColumnDef, m string) error {
	k, v, _ := strings.Cut(m, "=")
	switch k {
	case "type": // INET6 and the like, given as INT
		d.DataType, d.typeText, d.Args = v, v, nil
	case "national":
		d.National = true
	case "serial":
		d.Serial, d.Args = true, nil
	case "nolen": // BIT or YEAR without a length
		d.Args = nil
	case "default": // DEFAULT (expression), given as DEFAULT NULL
		text, err := hex.DecodeString(v)
		if err != nil {
			return err
		}
		d.DefaultNull, d.DefaultExpr = false, string(text)
	}
	return nil
}

// defaultOf sets the default of d from the expression after DEFAULT: a
// literal's text, or an expression's text in DefaultExpr.
func defaultOf(d *ColumnDef, e ast.ExprNode) error {
	d.hasDef = true
	lit := e
	if p, ok := lit.(*ast.ParenthesesExpr); ok {
		lit = p.Expr
	}
	sign := ""
	if u, ok := lit.(*ast.UnaryOperationExpr); ok && (u.Op == opcode.Minus || u.Op == opcode.Plus) {
		if v, ok := u.V.(*test_driver.ValueExpr); ok && isNumberDatum(v) {
			if u.Op == opcode.Minus {
				sign = "-"
			}
			lit = v
		}
	}
	v, ok := lit.(*test_driver.ValueExpr)
	if !ok {
		d.DefaultExpr = e.Text()
		if d.DefaultExpr == "" {
			d.DefaultExpr = restore(e)
		}
		return nil
	}
	var s string
	switch v.Kind() {
	case test_driver.KindNull:
		d.DefaultNull = true
		return nil
	case test_driver.KindInt64:
		s = strconv.FormatInt(v.GetInt64(), 10)
	case test_driver.KindUint64:
		s = strconv.FormatUint(v.GetUint64(), 10)
	case test_driver.KindMysqlDecimal:
		s = v.GetMysqlDecimal().String()
	case test_driver.KindString, test_driver.KindBytes:
		s = v.GetString()
	case test_driver.KindBinaryLiteral, test_driver.KindMysqlBit:
		s = string(v.GetBytes())
	default:
		return fmt.Errorf("a default of kind %d", v.Kind())
	}
	if sign != "" && strings.HasPrefix(s, "-") {
		return fmt.Errorf("a double minus")
	}
	s = sign + s
	d.DefaultText = &s
	return nil
}

func isNumberDatum(v *test_driver.ValueExpr) bool {
	switch v.Kind() {
	case test_driver.KindInt64, test_driver.KindUint64, test_driver.KindMysqlDecimal, test_driver.KindFloat64:
		return true
	}
	return false
}
