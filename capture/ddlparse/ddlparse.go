// Package ddlparse parses the DDL statements MySQL and MariaDB write into
// the binlog into a small statement model, Stmt: the statements that
// change tables (ALTER TABLE, CREATE TABLE, DROP TABLE, DROP DATABASE,
// RENAME TABLE, TRUNCATE TABLE), with what cdcsync needs of them (column
// definitions, primary keys, foreign keys, character sets, table names).
// Everything else a statement says (indexes, constraints, table options,
// expressions) is skipped; any other statement is StmtOther.
//
// Parse parses with the TiDB parser (github.com/pingcap/tidb/pkg/parser)
// and builds the Stmt from its AST (tidb.go). The TiDB grammar is MySQL's
// and TiDB's, not MariaDB's, and its AST drops a few spellings cdcsync
// needs; so the statement is first split into tokens (lex.go: string
// literals, quoted identifiers, comments and executable comments, under the
// statement's ANSI_QUOTES and NO_BACKSLASH_ESCAPES) and rewritten token by
// token (rewrite.go), at the place in the statement where each construct
// can be, into SQL the TiDB parser takes; what the rewrite takes away and
// the Stmt needs comes back through the adapter. The constructs, and why:
//
//   - MariaDB-only syntax the TiDB grammar lacks, taken out (and what it
//     means recorded): ALTER ONLINE TABLE; ALTER TABLE IF EXISTS; WAIT n and
//     NOWAIT after the table of ALTER, TRUNCATE, RENAME (before TO) and the
//     tables of DROP; CREATE OR REPLACE (Stmt.OrReplace); RENAME TABLES
//     (made TABLE) and RENAME TABLE IF EXISTS; IF EXISTS after DROP FOREIGN
//     KEY, DROP CONSTRAINT, DROP CHECK and RENAME COLUMN
//     (AlterSpec.IfExists); INVISIBLE and VISIBLE columns (TiDB has no
//     invisible columns); PERSISTENT generated columns (made STORED);
//     WITH/WITHOUT SYSTEM VERSIONING on a column, and on a CREATE TABLE,
//     which makes it AsSelect (the table has row_start and row_end columns
//     its definition does not list).
//   - MariaDB's types INET4, INET6, UUID and the spatial types (GEOMETRY,
//     POINT, ..., with SRID n), which the TiDB grammar lacks: the column
//     goes as INT with a marker, a COMMENT '@ddlparse:type=...' after the
//     type that the AST keeps with the column, and the adapter restores
//     the type.
//   - Spellings the AST does not keep, marked the same way: NATIONAL,
//     NCHAR and NVARCHAR (ColumnDef.National: TiDB keeps no character set
//     for them), SERIAL (ColumnDef.Serial; its DEFAULT VALUE is taken out),
//     BIT and YEAR without a length (TiDB gives BIT a length of 1).
//   - Defaults: a number goes as the string of its text (the AST keeps 1e3
//     as a float and 007 as 7); DATE 'x', TIME 'x' and TIMESTAMP 'x' as 'x'
//     (the TiDB grammar refuses them after DEFAULT); an expression in
//     parentheses other than a literal or a function call, which the TiDB
//     grammar refuses, as NULL with a marker holding its text.
//   - Character set and collation names after CHARACTER SET, CHARSET and
//     COLLATE that the TiDB parser does not take as written: utf8mb3 and its
//     collations (which it renames utf8), CHARACTER SET binary (which it
//     turns into a binary type) and the names it does not know (swe7, big5,
//     MariaDB's uca1400 collations) go as ddlparse_<name>, registered with
//     the parser's charset package (AddCharset, AddCollation: its extension
//     point for custom character sets); the adapter takes the prefix off.
//   - Executable comments: the body of /*!...*/ and MariaDB's /*M!...*/ is
//     parsed (the server ran it), a TiDB-only /*T!...*/ is not.
//
// The tokens also give what the AST drops: the CONSTRAINT name versus the
// index name of a FOREIGN KEY, and DROP CHECK versus DROP CONSTRAINT.
// Anything else goes to the TiDB parser as written, so a clause that it
// does not know makes the statement an error, never a statement skipped
// silently. The golden test (golden_test.go, testdata/parse.golden) holds
// Parse to its results on every DDL statement of the tests and binlogs.
//
// What a statement means for the tables cdcsync mirrors (schema changes,
// key and foreign-key tracking) is decided by package capture, which is the
// only importer.
package ddlparse

import (
	"strings"

	"github.com/cdcsync/cdcsync"
)

// SQLMode is the subset of a statement's sql_mode that matters to parsing
// it and to applying it: whether strings may be in double quotes
// (ANSI_QUOTES), whether backslash escapes (NO_BACKSLASH_ESCAPES), whether
// REAL is a FLOAT (REAL_AS_FLOAT), and whether it is strict. Only Strict is
// exported; the rest only the parser reads. Make one with ParseSQLMode.
type SQLMode struct {
	known       bool // the binlog said what the sql_mode was
	ansiQuotes  bool
	noBackslash bool
	// Strict is STRICT_TRANS_TABLES or STRICT_ALL_TABLES: a change that
	// would truncate values fails instead of truncating them.
	Strict      bool
	realAsFloat bool
}

// sql_mode bits as the binlog's Q_SQL_MODE_CODE carries them.
const (
	modeRealAsFloat       = 1 << 0
	modeANSIQuotes        = 1 << 2
	modeNoBackslashEscape = 1 << 20
	modeStrictTrans       = 1 << 21
	modeStrictAll         = 1 << 22
)

// ParseSQLMode reads the sql_mode from the status variables of a query
// event. The server writes Q_FLAGS2_CODE (0, 4 bytes) and Q_SQL_MODE_CODE
// (1, 8 bytes) first; anything else before it means the mode is unknown,
// which is taken as the default (strict) mode.
func ParseSQLMode(status []byte) SQLMode {
	m := SQLMode{Strict: true}
	for i := 0; i < len(status); {
		switch status[i] {
		case 0:
			i += 5
		case 1:
			if i+9 > len(status) {
				return m
			}
			var v uint64
			for j := 0; j < 8; j++ {
				v |= uint64(status[i+1+j]) << (8 * j)
			}
			return SQLMode{
				known:       true,
				ansiQuotes:  v&modeANSIQuotes != 0,
				noBackslash: v&modeNoBackslashEscape != 0,
				Strict:      v&(modeStrictTrans|modeStrictAll) != 0,
				realAsFloat: v&modeRealAsFloat != 0,
			}
		default:
			return m
		}
	}
	return m
}

// StmtKind says which statement a Stmt is.
type StmtKind int

// Statement kinds.
const (
	// StmtOther is a statement that does not change tables: CREATE INDEX,
	// ALTER DATABASE, CREATE VIEW, RENAME USER, ...
	StmtOther StmtKind = iota
	// StmtAlter is ALTER TABLE: Table, Specs.
	StmtAlter
	// StmtCreate is CREATE TABLE: Table, Temporary, OrReplace and one of
	// Like, Create (with AsSelect for CREATE TABLE (...) SELECT); a
	// temporary table's statement has neither.
	StmtCreate
	// StmtDrop is DROP [TEMPORARY] TABLE: Tables, Temporary.
	StmtDrop
	// StmtDropDatabase is DROP DATABASE (or SCHEMA): Database.
	StmtDropDatabase
	// StmtRename is RENAME TABLE: Renames.
	StmtRename
	// StmtTruncate is TRUNCATE TABLE: Table.
	StmtTruncate
)

// Stmt is a parsed statement. Table names that the statement does not
// qualify are in the database Parse was given.
type Stmt struct {
	// Kind says which statement it is and so which fields are set.
	Kind StmtKind
	// Table is the table of an ALTER, CREATE or TRUNCATE.
	Table cdcsync.TableID
	// Tables are the tables of a DROP TABLE, in the statement's order.
	Tables []cdcsync.TableID
	// Database is the database of a DROP DATABASE.
	Database string
	// Renames are the pairs (from, to) of a RENAME TABLE, in order.
	Renames [][2]cdcsync.TableID
	// Temporary is set for CREATE TEMPORARY TABLE and DROP TEMPORARY TABLE.
	Temporary   bool
	ifNotExists bool // CREATE TABLE IF NOT EXISTS
	// OrReplace is set for MariaDB's CREATE OR REPLACE TABLE.
	OrReplace bool
	// Like is the source table of CREATE TABLE ... LIKE.
	Like *cdcsync.TableID
	// Create is the definition of CREATE TABLE (...).
	Create *CreateDef
	// AsSelect is set for CREATE TABLE ... SELECT, whose columns are not
	// all in Create.
	AsSelect bool
	// Specs are the clauses of an ALTER TABLE, in order.
	Specs []AlterSpec
}

// CreateDef is the definition of a CREATE TABLE.
type CreateDef struct {
	// Columns are the column definitions, in order.
	Columns []*ColumnDef
	// PrimaryKey are the primary key's column names, from a PRIMARY KEY
	// clause (a column's own PRIMARY KEY is ColumnDef.PrimaryKey).
	PrimaryKey []string
	// Charset is the table's DEFAULT CHARSET (or the character set of its
	// COLLATE), "" if the statement does not say.
	Charset string
}

// ColumnDef is a column definition.
type ColumnDef struct {
	// Name is the column's name.
	Name string
	// DataType is the canonical lower-case type name, as
	// information_schema's DATA_TYPE says it: int, varchar, decimal, ...
	// (synonyms such as INTEGER or BOOL resolved).
	DataType string
	// Args are the numbers (or ENUM/SET labels) in parentheses after the
	// type.
	Args []string
	// Unsigned is UNSIGNED (implied by ZEROFILL and SERIAL).
	Unsigned bool
	// Zerofill is ZEROFILL.
	Zerofill bool
	// Charset is the column's CHARACTER SET, "" if not given.
	Charset string
	// Collate is the column's COLLATE, "" if not given.
	Collate string
	// NotNull is NOT NULL.
	NotNull bool
	null    bool // NULL written explicitly
	// PrimaryKey is PRIMARY KEY in the column definition.
	PrimaryKey bool
	// AutoIncrement is AUTO_INCREMENT.
	AutoIncrement bool
	// Generated is a generated column (GENERATED ALWAYS AS, AS (...)).
	Generated bool
	hasDef    bool // a DEFAULT clause
	// DefaultNull is DEFAULT NULL.
	DefaultNull bool
	// DefaultText is the text of a literal default, nil if there is none.
	DefaultText *string
	// DefaultExpr is the text of a default that is not a literal
	// (CURRENT_TIMESTAMP, an expression), "" if there is none.
	DefaultExpr string
	typeText    string // the type as written, for messages
	// National is NCHAR, NATIONAL VARCHAR and the like: utf8mb3.
	National bool
	// Serial is the type SERIAL (or SERIAL DEFAULT VALUE), which also sets
	// DataType bigint, Unsigned, NotNull and AutoIncrement.
	Serial bool
}

// SpecOp says what an ALTER TABLE clause does.
type SpecOp int

// ALTER TABLE clauses.
const (
	// SpecAddColumn is ADD [COLUMN]: Column (or Columns), First, After,
	// IfExists.
	SpecAddColumn SpecOp = iota + 1
	// SpecDropColumn is DROP [COLUMN]: Name, IfExists.
	SpecDropColumn
	// SpecModify is MODIFY [COLUMN]: Column, First, After, IfExists.
	SpecModify
	// SpecChange is CHANGE [COLUMN]: Name (the old name), Column, First,
	// After, IfExists.
	SpecChange
	// SpecRenameColumn is RENAME COLUMN: Name, NewName, IfExists.
	SpecRenameColumn
	// SpecAddPK is ADD PRIMARY KEY: PrimaryKey.
	SpecAddPK
	// SpecDropPK is DROP PRIMARY KEY.
	SpecDropPK
	// SpecRenameTable is RENAME [TO|AS]: Table.
	SpecRenameTable
	// SpecConvert is CONVERT TO CHARACTER SET: Charset.
	SpecConvert
	// SpecCharset is [DEFAULT] CHARACTER SET = x (or COLLATE): Charset.
	SpecCharset
	// SpecNoop is a clause that changes nothing cdcsync mirrors: indexes,
	// constraints, table options.
	SpecNoop
	// SpecDataChange is a clause that changes rows without row events
	// (DROP PARTITION, TRUNCATE PARTITION, ...): Text.
	SpecDataChange
	// SpecAddFK is ADD [CONSTRAINT [name]] FOREIGN KEY ...: ForeignKey.
	SpecAddFK
	// SpecDropFK is DROP FOREIGN KEY name: Name, IfExists.
	SpecDropFK
	// SpecDropConstraint is DROP CONSTRAINT name (which can be a foreign
	// key): Name, IfExists.
	SpecDropConstraint
)

// ForeignKeyDef is a FOREIGN KEY clause.
type ForeignKeyDef struct {
	// Name is the constraint's name if the statement gives one
	// (CONSTRAINT name); Index is the index name after FOREIGN KEY, which
	// MariaDB takes as the constraint's name otherwise.
	Name, Index string
	// Columns are the referencing columns.
	Columns []string
	// Parent is the referenced table.
	Parent cdcsync.TableID
	// ParentColumns are the referenced columns.
	ParentColumns []string
	// OnDelete is the ON DELETE action.
	OnDelete cdcsync.FKAction
	// OnUpdate is the ON UPDATE action.
	OnUpdate cdcsync.FKAction
}

// AlterSpec is one clause of an ALTER TABLE; Op says which fields are set.
type AlterSpec struct {
	// Op is what the clause does.
	Op SpecOp
	// Column is the column definition of ADD, MODIFY and CHANGE.
	Column *ColumnDef
	// Columns are the definitions of ADD COLUMN (a ..., b ...).
	Columns []*ColumnDef
	// Name is the column of DROP COLUMN, the old name of CHANGE and RENAME
	// COLUMN, the constraint of DROP FOREIGN KEY and DROP CONSTRAINT.
	Name string
	// NewName is the new name of RENAME COLUMN.
	NewName string
	// First is FIRST.
	First bool
	// After is the column of AFTER, "" if none.
	After string
	// IfExists is IF EXISTS (IF NOT EXISTS for ADD COLUMN).
	IfExists bool
	// PrimaryKey are the column names of ADD PRIMARY KEY.
	PrimaryKey []string
	// Table is the new name of RENAME TO.
	Table cdcsync.TableID
	// ForeignKey is the clause of ADD FOREIGN KEY.
	ForeignKey *ForeignKeyDef
	// Charset is the character set of CONVERT TO and CHARACTER SET.
	Charset string
	// Text is the clause as written (as the TiDB parser renders it, for a
	// statement it parsed), for messages.
	Text string
}

// Parse parses the statement q, run in database db (which qualifies the
// table names it does not qualify) on a server of the flavor
// (binlogpos.FlavorMySQL or binlogpos.FlavorMariaDB) under the sql_mode mode.
// A statement that is not about tables comes back as StmtOther; a
// statement about tables that cannot be parsed is an error.
func Parse(q, db, flavor string, mode SQLMode) (*Stmt, error) {
	return parse(q, db, flavor, mode)
}

// CandidateTables returns every table a statement that Parse refuses
// could name, erring on the side of too many: each word and quoted
// identifier as a table in db, and each a.b as table b in database a. The
// error is that of splitting q into tokens (an unterminated string, say),
// when not even that is possible.
func CandidateTables(q, db string, mode SQLMode) ([]cdcsync.TableID, error) {
	toks, err := lex(q, mode)
	if err != nil {
		return nil, err
	}
	var ids []cdcsync.TableID
	for i, t := range toks {
		if t.kind != tkWord && t.kind != tkQuoted {
			continue
		}
		if i+2 < len(toks) && isPunctTok(toks[i+1], ".") && (toks[i+2].kind == tkWord || toks[i+2].kind == tkQuoted) {
			ids = append(ids, cdcsync.TableID{Database: t.text, Table: toks[i+2].text})
		}
		ids = append(ids, cdcsync.TableID{Database: db, Table: t.text})
	}
	return ids, nil
}

// CharsetOfCollation returns the character set a collation name belongs to
// (its prefix up to the first '_'; "binary" for binary).
func CharsetOfCollation(coll string) string {
	coll = strings.ToLower(coll)
	if coll == "binary" {
		return "binary"
	}
	cs, _, _ := strings.Cut(coll, "_")
	return cs
}
