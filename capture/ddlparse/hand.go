package ddlparse

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/internal/strutil"
)

// This file is the hand-written parser of the DDL statements that change
// tables: ALTER TABLE, CREATE TABLE, DROP TABLE, DROP DATABASE, RENAME
// TABLE and TRUNCATE TABLE, as MySQL and MariaDB write them into the
// binlog, and the lexer both parsers use. It is a small recursive descent
// parser for exactly what cdcsync needs (column definitions, primary keys,
// table names); everything inside a statement it does not need (indexes,
// constraints, table options, expressions) is skipped by balanced
// parentheses. A clause it does not know makes the whole statement "not
// understood", which stops the tables it touches: a statement is never
// skipped silently. Parse tries the TiDB parser first (tidb.go) and uses
// this one for the statements it refuses; a row event whose table map
// disagrees with the schema capture built from the parsed statement is
// caught at the next rows event (capture's checkTableMap).

type tokKind int

const (
	tkEOF    tokKind = iota
	tkWord           // a bare word: keyword or identifier
	tkQuoted         // a `quoted` identifier (or "quoted" under ANSI_QUOTES)
	tkString         // a 'string' (or "string")
	tkNumber         // 12, 1.5, .5, 1e3
	tkHex            // X'0a' or 0x0a: text is the decoded bytes
	tkBit            // b'101' or 0b101: text is the digits
	tkPunct          // one character: ( ) , . ; = and the rest
)

type token struct {
	kind tokKind
	text string // identifiers and strings unquoted, words as written
	pos  int    // byte offset in the statement
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// lex splits a statement into tokens. Comments are dropped; the content of
// executable comments (/*! ... */, /*!50100 ... */, /*M! ... */) is kept,
// since the server executed it.
func lex(q string, mode SQLMode) ([]token, error) {
	var out []token
	exec := 0 // open executable comments
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#':
			for i < len(q) && q[i] != '\n' {
				i++
			}
		case c == '-' && i+1 < len(q) && q[i+1] == '-' && (i+2 == len(q) || q[i+2] == ' ' || q[i+2] == '\t' || q[i+2] == '\n' || q[i+2] == '\r'):
			for i < len(q) && q[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			if i+2 < len(q) && q[i+2] == '!' || i+3 < len(q) && q[i+2] == 'M' && q[i+3] == '!' {
				i += 3
				if q[i-1] == 'M' {
					i++
				}
				for i < len(q) && q[i] >= '0' && q[i] <= '9' {
					i++
				}
				exec++
				continue
			}
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				return nil, errors.New("unterminated comment")
			}
			i += end + 4
		case c == '*' && exec > 0 && i+1 < len(q) && q[i+1] == '/':
			exec--
			i += 2
		case c == '`' || (c == '"' && mode.ansiQuotes):
			s, n, err := lexQuoted(q[i:], c, false)
			if err != nil {
				return nil, err
			}
			out = append(out, token{tkQuoted, s, i})
			i += n
		case c == '\'' || c == '"':
			s, n, err := lexQuoted(q[i:], c, !mode.noBackslash)
			if err != nil {
				return nil, err
			}
			out = append(out, token{tkString, s, i})
			i += n
		case (c == 'x' || c == 'X') && i+1 < len(q) && q[i+1] == '\'':
			end := strings.IndexByte(q[i+2:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated hex literal")
			}
			b, ok := decodeHex(q[i+2 : i+2+end])
			if !ok {
				return nil, fmt.Errorf("bad hex literal at offset %d", i)
			}
			out = append(out, token{tkHex, string(b), i})
			i += end + 3
		case (c == 'b' || c == 'B') && i+1 < len(q) && q[i+1] == '\'':
			end := strings.IndexByte(q[i+2:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated bit literal")
			}
			out = append(out, token{tkBit, q[i+2 : i+2+end], i})
			i += end + 3
		case c == '0' && i+2 < len(q) && (q[i+1] == 'x') && isHexDigit(q[i+2]):
			j := i + 2
			for j < len(q) && isHexDigit(q[j]) {
				j++
			}
			if j < len(q) && isIdentByte(q[j]) {
				j = lexWordEnd(q, i)
				out = append(out, token{tkWord, q[i:j], i})
				i = j
				continue
			}
			b, ok := decodeHex(q[i+2 : j])
			if !ok {
				return nil, fmt.Errorf("bad hex literal at offset %d", i)
			}
			out = append(out, token{tkHex, string(b), i})
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9' && (len(out) == 0 || out[len(out)-1].kind == tkPunct):
			j := i
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			if j < len(q) && q[j] == '.' {
				j++
				for j < len(q) && q[j] >= '0' && q[j] <= '9' {
					j++
				}
			}
			if j < len(q) && (q[j] == 'e' || q[j] == 'E') {
				k := j + 1
				if k < len(q) && (q[k] == '+' || q[k] == '-') {
					k++
				}
				if k < len(q) && q[k] >= '0' && q[k] <= '9' {
					for k < len(q) && q[k] >= '0' && q[k] <= '9' {
						k++
					}
					j = k
				}
			}
			if j < len(q) && isIdentByte(q[j]) && !strings.Contains(q[i:j], ".") {
				// An identifier that starts with digits, such as 1col.
				j = lexWordEnd(q, i)
				out = append(out, token{tkWord, q[i:j], i})
				i = j
				continue
			}
			out = append(out, token{tkNumber, q[i:j], i})
			i = j
		case isIdentByte(c):
			j := lexWordEnd(q, i)
			out = append(out, token{tkWord, q[i:j], i})
			i = j
		default:
			_, n := utf8.DecodeRuneInString(q[i:])
			out = append(out, token{tkPunct, q[i : i+n], i})
			i += n
		}
	}
	out = append(out, token{kind: tkEOF, pos: len(q)})
	return out, nil
}

func lexWordEnd(q string, i int) int {
	for i < len(q) && isIdentByte(q[i]) {
		i++
	}
	return i
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func decodeHex(s string) ([]byte, bool) {
	if len(s)%2 == 1 {
		s = "0" + s
	}
	out := make([]byte, len(s)/2)
	for i := range out {
		hi, lo := hexVal(s[2*i]), hexVal(s[2*i+1])
		if hi < 0 || lo < 0 {
			return nil, false
		}
		out[i] = byte(hi<<4 | lo)
	}
	return out, true
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// lexQuoted reads a quoted string or identifier starting at s[0] (the
// quote), with doubled quotes and, for strings, backslash escapes.
func lexQuoted(s string, quote byte, backslash bool) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == quote:
			if i+1 < len(s) && s[i+1] == quote {
				b.WriteByte(quote)
				i++
				continue
			}
			return b.String(), i + 1, nil
		case c == '\\' && backslash && i+1 < len(s):
			i++
			switch s[i] {
			case '0':
				b.WriteByte(0)
			case 'b':
				b.WriteByte('\b')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'Z':
				b.WriteByte(26)
			case '%', '_':
				// MySQL keeps the backslash before % and _ (they are LIKE escapes).
				b.WriteByte('\\')
				b.WriteByte(s[i])
			default:
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated %c", quote)
}

// ddlParser walks the tokens of one statement.
type ddlParser struct {
	q      string
	toks   []token
	i      int
	db     string // the statement's default database
	flavor string
	mode   SQLMode
}

func (p *ddlParser) peek() token { return p.toks[p.i] }
func (p *ddlParser) peekN(n int) token {
	if p.i+n < len(p.toks) {
		return p.toks[p.i+n]
	}
	return p.toks[len(p.toks)-1]
}
func (p *ddlParser) next() token {
	t := p.toks[p.i]
	if t.kind != tkEOF {
		p.i++
	}
	return t
}

// is reports whether the next token is the keyword kw (case-insensitive).
func (p *ddlParser) is(kw string) bool { return isKw(p.peek(), kw) }

func isKw(t token, kw string) bool { return t.kind == tkWord && strings.EqualFold(t.text, kw) }

// accept consumes the keywords kws if they come next, in order.
func (p *ddlParser) accept(kws ...string) bool {
	for j, kw := range kws {
		if !isKw(p.peekN(j), kw) {
			return false
		}
	}
	p.i += len(kws)
	return true
}

func (p *ddlParser) isPunct(s string) bool { t := p.peek(); return t.kind == tkPunct && t.text == s }

func (p *ddlParser) acceptPunct(s string) bool {
	if p.isPunct(s) {
		p.i++
		return true
	}
	return false
}

func (p *ddlParser) errf(format string, args ...any) error {
	t := p.peek()
	near := "the end"
	if t.kind != tkEOF {
		near = fmt.Sprintf("%q", strutil.Abbreviate(p.q[t.pos:], 40))
	}
	return fmt.Errorf("%s near %s", fmt.Sprintf(format, args...), near)
}

func (p *ddlParser) expect(kw string) error {
	if !p.accept(kw) {
		return p.errf("expected %s", kw)
	}
	return nil
}

func (p *ddlParser) expectPunct(s string) error {
	if !p.acceptPunct(s) {
		return p.errf("expected %q", s)
	}
	return nil
}

// ident reads an identifier.
func (p *ddlParser) ident() (string, error) {
	t := p.peek()
	switch t.kind {
	case tkWord, tkQuoted:
		p.i++
		return t.text, nil
	}
	return "", p.errf("expected a name")
}

// tableName reads [db.]table.
func (p *ddlParser) tableName() (cdcsync.TableID, error) {
	a, err := p.ident()
	if err != nil {
		return cdcsync.TableID{}, err
	}
	if p.acceptPunct(".") {
		b, err := p.ident()
		if err != nil {
			return cdcsync.TableID{}, err
		}
		return cdcsync.TableID{Database: a, Table: b}, nil
	}
	return cdcsync.TableID{Database: p.db, Table: a}, nil
}

// skipWait skips MariaDB's WAIT n / NOWAIT.
func (p *ddlParser) skipWait() {
	if p.accept("NOWAIT") {
		return
	}
	if p.is("WAIT") && p.peekN(1).kind == tkNumber {
		p.i += 2
	}
}

// skipBalanced skips tokens up to the next ',' or ')' at depth 0 (not
// consumed) or the end.
func (p *ddlParser) skipBalanced() {
	depth := 0
	for {
		t := p.peek()
		switch {
		case t.kind == tkEOF:
			return
		case t.kind == tkPunct && t.text == "(":
			depth++
		case t.kind == tkPunct && t.text == ")":
			if depth == 0 {
				return
			}
			depth--
		case t.kind == tkPunct && (t.text == "," || t.text == ";") && depth == 0:
			return
		}
		p.i++
	}
}

// skipParens skips a parenthesized group that comes next.
func (p *ddlParser) skipParens() error {
	if err := p.expectPunct("("); err != nil {
		return err
	}
	p.skipBalanced()
	return p.expectPunct(")")
}

func (p *ddlParser) atEnd() bool {
	for p.acceptPunct(";") {
	}
	return p.peek().kind == tkEOF
}

// parseDDLHand parses q with the hand-written parser.
func parseDDLHand(q, db, flavor string, mode SQLMode) (*Stmt, error) {
	toks, err := lex(q, mode)
	if err != nil {
		return nil, err
	}
	p := &ddlParser{q: q, toks: toks, db: db, flavor: flavor, mode: mode}
	switch {
	case p.is("ALTER"):
		return p.alter()
	case p.is("CREATE"):
		return p.createTable()
	case p.is("DROP"):
		return p.drop()
	case p.is("RENAME"):
		return p.rename()
	case p.is("TRUNCATE"):
		return p.truncate()
	}
	return &Stmt{Kind: StmtOther}, nil
}

func (p *ddlParser) alter() (*Stmt, error) {
	p.next() // ALTER
	for p.accept("ONLINE") || p.accept("IGNORE") {
	}
	if !p.accept("TABLE") {
		return &Stmt{Kind: StmtOther}, nil // ALTER DATABASE, VIEW, USER, ...
	}
	p.accept("IF", "EXISTS")
	id, err := p.tableName()
	if err != nil {
		return nil, err
	}
	p.skipWait()
	s := &Stmt{Kind: StmtAlter, Table: id}
	if p.atEnd() {
		return s, nil
	}
	for {
		start := p.peek().pos
		sp, err := p.alterSpec()
		if err != nil {
			return nil, err
		}
		end := p.peek().pos
		sp.Text = strings.TrimSpace(p.q[start:end])
		s.Specs = append(s.Specs, sp)
		if p.acceptPunct(",") {
			continue
		}
		if p.atEnd() {
			return s, nil
		}
		// Table options and partition clauses follow without a comma.
		if p.peek().kind == tkWord {
			continue
		}
		return nil, p.errf("unexpected text after %q", strutil.Abbreviate(sp.Text, 60))
	}
}

func (p *ddlParser) position(sp *AlterSpec) error {
	switch {
	case p.accept("FIRST"):
		sp.First = true
	case p.accept("AFTER"):
		n, err := p.ident()
		if err != nil {
			return err
		}
		sp.After = n
	}
	return nil
}

func (p *ddlParser) alterSpec() (AlterSpec, error) {
	var sp AlterSpec
	switch {
	case p.accept("ADD"):
		switch {
		case p.is("PRIMARY") || p.is("CONSTRAINT") && (isKw(p.peekN(1), "PRIMARY") || isKw(p.peekN(2), "PRIMARY")):
			if p.accept("CONSTRAINT") && !p.is("PRIMARY") {
				p.next() // the constraint's name
			}
			p.next() // PRIMARY
			if err := p.expect("KEY"); err != nil {
				return sp, err
			}
			cols, err := p.keyParts()
			if err != nil {
				return sp, err
			}
			p.skipBalanced() // USING BTREE, COMMENT, ...
			return AlterSpec{Op: SpecAddPK, PrimaryKey: cols}, nil
		case p.is("FOREIGN") || p.is("CONSTRAINT") && (isKw(p.peekN(1), "FOREIGN") || isKw(p.peekN(2), "FOREIGN")):
			fk, err := p.foreignKey()
			if err != nil {
				return sp, err
			}
			return AlterSpec{Op: SpecAddFK, ForeignKey: fk}, nil
		case p.is("INDEX") || p.is("KEY") || p.is("UNIQUE") || p.is("FULLTEXT") || p.is("SPATIAL") ||
			p.is("FOREIGN") || p.is("CONSTRAINT") || p.is("CHECK") || p.is("VECTOR") || p.is("PERIOD"):
			p.skipBalanced()
			return AlterSpec{Op: SpecNoop}, nil
		case p.is("PARTITION"):
			p.skipRest()
			return AlterSpec{Op: SpecNoop}, nil
		case p.is("SYSTEM"):
			return sp, p.errf("system versioning is not supported")
		}
		p.accept("COLUMN")
		sp.Op = SpecAddColumn
		if p.accept("IF", "NOT", "EXISTS") {
			sp.IfExists = true // here: IF NOT EXISTS
		}
		if p.acceptPunct("(") {
			for {
				c, err := p.columnDef()
				if err != nil {
					return sp, err
				}
				sp.Columns = append(sp.Columns, c)
				if p.acceptPunct(",") {
					continue
				}
				if err := p.expectPunct(")"); err != nil {
					return sp, err
				}
				break
			}
			return sp, nil
		}
		c, err := p.columnDef()
		if err != nil {
			return sp, err
		}
		sp.Column = c
		return sp, p.position(&sp)
	case p.accept("DROP"):
		switch {
		case p.accept("PRIMARY", "KEY"):
			return AlterSpec{Op: SpecDropPK}, nil
		case p.is("FOREIGN") || p.is("CONSTRAINT"):
			op := SpecDropConstraint
			if p.accept("FOREIGN", "KEY") {
				op = SpecDropFK
			} else {
				p.next()
			}
			ifExists := p.accept("IF", "EXISTS")
			n, err := p.ident()
			if err != nil {
				return sp, err
			}
			return AlterSpec{Op: op, Name: n, IfExists: ifExists}, nil
		case p.is("INDEX") || p.is("KEY") || p.is("CHECK") || p.is("PERIOD"):
			p.skipBalanced()
			return AlterSpec{Op: SpecNoop}, nil
		case p.is("PARTITION"):
			p.skipRest()
			return AlterSpec{Op: SpecDataChange}, nil
		case p.is("SYSTEM"):
			return sp, p.errf("system versioning is not supported")
		}
		p.accept("COLUMN")
		sp.Op = SpecDropColumn
		sp.IfExists = p.accept("IF", "EXISTS")
		n, err := p.ident()
		if err != nil {
			return sp, err
		}
		sp.Name = n
		p.accept("RESTRICT")
		p.accept("CASCADE")
		return sp, nil
	case p.accept("MODIFY"):
		p.accept("COLUMN")
		sp.Op = SpecModify
		sp.IfExists = p.accept("IF", "EXISTS")
		c, err := p.columnDef()
		if err != nil {
			return sp, err
		}
		sp.Column, sp.Name = c, c.Name
		return sp, p.position(&sp)
	case p.accept("CHANGE"):
		p.accept("COLUMN")
		sp.Op = SpecChange
		sp.IfExists = p.accept("IF", "EXISTS")
		old, err := p.ident()
		if err != nil {
			return sp, err
		}
		c, err := p.columnDef()
		if err != nil {
			return sp, err
		}
		sp.Name, sp.Column = old, c
		return sp, p.position(&sp)
	case p.accept("RENAME"):
		switch {
		case p.accept("COLUMN"):
			sp.Op = SpecRenameColumn
			sp.IfExists = p.accept("IF", "EXISTS")
			old, err := p.ident()
			if err != nil {
				return sp, err
			}
			if err := p.expect("TO"); err != nil {
				return sp, err
			}
			n, err := p.ident()
			if err != nil {
				return sp, err
			}
			sp.Name, sp.NewName = old, n
			return sp, nil
		case p.is("INDEX") || p.is("KEY"):
			p.skipBalanced()
			return AlterSpec{Op: SpecNoop}, nil
		}
		if !p.accept("TO") {
			p.accept("AS")
		}
		id, err := p.tableName()
		if err != nil {
			return sp, err
		}
		return AlterSpec{Op: SpecRenameTable, Table: id}, nil
	case p.accept("ALTER"):
		switch {
		case p.is("INDEX") || p.is("KEY") || p.is("CHECK") || p.is("CONSTRAINT"):
			p.skipBalanced()
			return AlterSpec{Op: SpecNoop}, nil
		}
		// ALTER [COLUMN] c SET DEFAULT ... / DROP DEFAULT / SET [IN]VISIBLE:
		// the default applies to new rows only, which the binlog carries.
		p.accept("COLUMN")
		if _, err := p.ident(); err != nil {
			return sp, err
		}
		if !(p.is("SET") || p.is("DROP")) {
			return sp, p.errf("unknown ALTER COLUMN clause")
		}
		p.skipBalanced()
		return AlterSpec{Op: SpecNoop}, nil
	case p.accept("CONVERT", "TO"):
		if !(p.accept("CHARACTER", "SET") || p.accept("CHARSET")) {
			return sp, p.errf("expected CHARACTER SET")
		}
		cs, err := p.ident()
		if err != nil {
			return sp, err
		}
		p.skipBalanced()
		return AlterSpec{Op: SpecConvert, Charset: strings.ToLower(cs)}, nil
	case p.is("DEFAULT") && (isKw(p.peekN(1), "CHARSET") || isKw(p.peekN(1), "CHARACTER") || isKw(p.peekN(1), "COLLATE")),
		p.is("CHARSET") || p.is("CHARACTER") || p.is("COLLATE"):
		p.accept("DEFAULT")
		if p.accept("COLLATE") {
			p.acceptPunct("=")
			coll, err := p.ident()
			if err != nil {
				return sp, err
			}
			return AlterSpec{Op: SpecCharset, Charset: CharsetOfCollation(coll)}, nil
		}
		if !(p.accept("CHARACTER", "SET") || p.accept("CHARSET")) {
			return sp, p.errf("expected CHARACTER SET")
		}
		p.acceptPunct("=")
		cs, err := p.ident()
		if err != nil {
			return sp, err
		}
		if p.accept("COLLATE") {
			p.acceptPunct("=")
			p.next()
		}
		return AlterSpec{Op: SpecCharset, Charset: strings.ToLower(cs)}, nil
	case p.is("PARTITION") || p.is("REMOVE") || p.is("COALESCE") || p.is("REORGANIZE") || p.is("REBUILD") ||
		p.is("OPTIMIZE") || p.is("ANALYZE") || p.is("CHECK") || p.is("REPAIR") || p.is("ORDER"):
		// Repartitioning and partition maintenance keep the rows; these
		// clauses end the statement.
		p.skipRest()
		return AlterSpec{Op: SpecNoop}, nil
	case p.is("TRUNCATE") || p.is("EXCHANGE") || p.is("DISCARD") || p.is("IMPORT"):
		// TRUNCATE PARTITION, EXCHANGE PARTITION, DISCARD/IMPORT TABLESPACE
		// change rows without row events.
		p.skipRest()
		return AlterSpec{Op: SpecDataChange}, nil
	case p.accept("ENGINE"):
		p.acceptPunct("=")
		if e, err := p.ident(); err == nil && strings.EqualFold(e, "BLACKHOLE") {
			return AlterSpec{Op: SpecDataChange}, nil
		}
		return AlterSpec{Op: SpecNoop}, nil
	case p.is("FORCE") || p.is("ENABLE") || p.is("DISABLE") || p.is("WITH") || p.is("WITHOUT") || p.is("ALGORITHM") || p.is("LOCK") ||
		p.is("AUTO_INCREMENT") || p.is("COMMENT") || p.is("ROW_FORMAT") || p.is("KEY_BLOCK_SIZE") ||
		p.is("AVG_ROW_LENGTH") || p.is("MAX_ROWS") || p.is("MIN_ROWS") || p.is("PACK_KEYS") || p.is("CHECKSUM") ||
		p.is("PAGE_CHECKSUM") || p.is("DELAY_KEY_WRITE") || p.is("STATS_AUTO_RECALC") || p.is("STATS_PERSISTENT") ||
		p.is("STATS_SAMPLE_PAGES") || p.is("TRANSACTIONAL") || p.is("PAGE_COMPRESSED") || p.is("PAGE_COMPRESSION_LEVEL") ||
		p.is("ENCRYPTED") || p.is("ENCRYPTION_KEY_ID") || p.is("ENCRYPTION") || p.is("COMPRESSION") ||
		p.is("INSERT_METHOD") || p.is("UNION") || p.is("TABLESPACE") || p.is("STORAGE") || p.is("DATA") ||
		p.is("INDEX") || p.is("SECONDARY_ENGINE") || p.is("AUTOEXTEND_SIZE") || p.is("SEQUENCE") ||
		p.is("IETF_QUOTES") || p.is("CONNECTION") || p.is("PASSWORD") || p.is("START"):
		p.next()
		if p.acceptPunct("=") || p.peek().kind != tkPunct {
			if !(p.is("ADD") || p.is("DROP")) { // WITH VALIDATION, ENABLE KEYS: one word
				p.next()
			}
		}
		return AlterSpec{Op: SpecNoop}, nil
	}
	return sp, p.errf("unknown ALTER TABLE clause")
}

// foreignKey parses [CONSTRAINT [name]] FOREIGN KEY [index] (cols)
// REFERENCES table (cols) [MATCH ...] [ON DELETE action] [ON UPDATE action].
func (p *ddlParser) foreignKey() (*ForeignKeyDef, error) {
	fk := &ForeignKeyDef{}
	if p.accept("CONSTRAINT") && !p.is("FOREIGN") {
		n, err := p.ident()
		if err != nil {
			return nil, err
		}
		fk.Name = n
	}
	if err := p.expect("FOREIGN"); err != nil {
		return nil, err
	}
	if err := p.expect("KEY"); err != nil {
		return nil, err
	}
	p.accept("IF", "NOT", "EXISTS")
	if !p.isPunct("(") {
		n, err := p.ident()
		if err != nil {
			return nil, err
		}
		fk.Index = n
	}
	cols, err := p.keyParts()
	if err != nil {
		return nil, err
	}
	fk.Columns = cols
	if err := p.expect("REFERENCES"); err != nil {
		return nil, err
	}
	// InnoDB takes an unqualified parent in the child's database, not the
	// session's: alterKeys fills it in.
	qualified := isPunctTok(p.peekN(1), ".")
	if fk.Parent, err = p.tableName(); err != nil {
		return nil, err
	}
	if !qualified {
		fk.Parent.Database = ""
	}
	if fk.ParentColumns, err = p.keyParts(); err != nil {
		return nil, err
	}
	if len(fk.ParentColumns) != len(fk.Columns) {
		return nil, p.errf("the foreign key has %d columns and references %d", len(fk.Columns), len(fk.ParentColumns))
	}
	if p.accept("MATCH") {
		p.next() // FULL, PARTIAL, SIMPLE
	}
	for p.accept("ON") {
		var target *cdcsync.FKAction
		switch {
		case p.accept("DELETE"):
			target = &fk.OnDelete
		case p.accept("UPDATE"):
			target = &fk.OnUpdate
		default:
			return nil, p.errf("expected ON DELETE or ON UPDATE")
		}
		switch {
		case p.accept("CASCADE"):
			*target = cdcsync.FKCascade
		case p.accept("SET", "NULL"):
			*target = cdcsync.FKSetNull
		case p.accept("SET", "DEFAULT"), p.accept("RESTRICT"), p.accept("NO", "ACTION"):
			// InnoDB refuses SET DEFAULT: none changes a child row.
		default:
			return nil, p.errf("unknown referential action")
		}
	}
	return fk, nil
}

// keyParts reads "(col [(len)] [ASC|DESC], ...)".
func (p *ddlParser) keyParts() ([]string, error) {
	if err := p.expectPunct("("); err != nil {
		return nil, err
	}
	var cols []string
	for {
		if p.isPunct("(") {
			return nil, p.errf("a functional key part cannot be a primary key")
		}
		n, err := p.ident()
		if err != nil {
			return nil, err
		}
		cols = append(cols, n)
		if p.isPunct("(") {
			if err := p.skipParens(); err != nil {
				return nil, err
			}
		}
		p.accept("ASC")
		p.accept("DESC")
		if p.acceptPunct(",") {
			continue
		}
		return cols, p.expectPunct(")")
	}
}

// typeSynonyms maps type names to information_schema's DATA_TYPE.
var typeSynonyms = map[string]string{
	"integer": "int", "int4": "int", "int1": "tinyint", "int2": "smallint", "int3": "mediumint",
	"middleint": "mediumint", "int8": "bigint", "dec": "decimal", "numeric": "decimal", "fixed": "decimal",
	"float4": "float", "float8": "double", "bool": "tinyint", "boolean": "tinyint",
	"character": "char", "varcharacter": "varchar", "nchar": "char", "nvarchar": "varchar",
}

// columnDef reads "name type [attributes]".
func (p *ddlParser) columnDef() (*ColumnDef, error) {
	name, err := p.ident()
	if err != nil {
		return nil, err
	}
	c := &ColumnDef{Name: name}
	if err := p.dataType(c); err != nil {
		return nil, err
	}
	return c, p.columnAttrs(c)
}

func (p *ddlParser) dataType(c *ColumnDef) error {
	start := p.peek().pos
	t := p.next()
	if t.kind != tkWord {
		return p.errf("expected a column type")
	}
	dt := strings.ToLower(t.text)
	switch dt {
	case "national":
		c.National = true
		w := p.next()
		dt = strings.ToLower(w.text)
		if dt == "character" && p.is("VARYING") {
			p.next()
			dt = "varchar"
		}
	case "nchar", "nvarchar":
		c.National = true
		if dt == "nchar" && p.accept("VARCHAR") || dt == "nchar" && p.accept("VARYING") {
			dt = "varchar"
		}
	case "character", "char":
		if p.accept("VARYING") {
			dt = "varchar"
		}
	case "double":
		p.accept("PRECISION")
	case "long":
		switch {
		case p.accept("VARBINARY"):
			dt = "mediumblob"
		case p.accept("VARCHAR"), p.accept("CHARACTER", "VARYING"):
			dt = "mediumtext"
		default:
			dt = "mediumtext"
		}
	case "real":
		dt = "double"
		if p.mode.realAsFloat {
			dt = "float"
		}
	case "serial":
		c.Serial = true
		dt, c.Unsigned, c.NotNull, c.AutoIncrement = "bigint", true, true, true
	}
	if s, ok := typeSynonyms[dt]; ok {
		if dt == "bool" || dt == "boolean" {
			c.Args = []string{"1"}
		}
		dt = s
	}
	if dt == "json" && p.flavor == binlogpos.FlavorMariaDB {
		// MariaDB's JSON is LONGTEXT with a json_valid check.
		dt = "longtext"
		c.Charset, c.Collate = "utf8mb4", "utf8mb4_bin"
	}
	c.DataType = dt
	if p.acceptPunct("(") {
		for {
			a := p.next()
			switch a.kind {
			case tkNumber:
				c.Args = append(c.Args, a.text)
			case tkString:
				c.Args = append(c.Args, a.text) // ENUM/SET values
			default:
				return p.errf("unexpected %q in the type's parentheses", a.text)
			}
			if p.acceptPunct(",") {
				continue
			}
			if err := p.expectPunct(")"); err != nil {
				return err
			}
			break
		}
	}
	if dt == "float" && len(c.Args) == 1 {
		// FLOAT(p): a FLOAT up to 24 bits of precision, else a DOUBLE.
		if n := strutil.AtoiOr(c.Args[0], 0); n > 24 {
			c.DataType = "double"
		}
		c.Args = nil
	}
	for {
		switch {
		case p.accept("UNSIGNED"):
			c.Unsigned = true
		case p.accept("SIGNED"):
		case p.accept("ZEROFILL"):
			c.Zerofill, c.Unsigned = true, true
		default:
			c.typeText = strings.TrimSpace(p.q[start:p.peek().pos])
			return nil
		}
	}
}

func (p *ddlParser) columnAttrs(c *ColumnDef) error {
	for {
		switch {
		case p.peek().kind == tkEOF, p.isPunct(","), p.isPunct(")"), p.isPunct(";"):
			return nil
		case p.is("FIRST"), p.is("AFTER"):
			return nil
		case p.accept("NOT", "NULL"):
			c.NotNull = true
		case p.accept("NULL"):
			c.null = true
		case p.accept("DEFAULT"):
			if c.Serial && p.accept("VALUE") {
				continue // SERIAL DEFAULT VALUE
			}
			if err := p.defaultValue(c); err != nil {
				return err
			}
		case p.accept("AUTO_INCREMENT"):
			c.AutoIncrement = true
		case p.accept("PRIMARY", "KEY"), p.accept("KEY"):
			c.PrimaryKey = true
		case p.accept("UNIQUE"):
			p.accept("KEY")
		case p.accept("COMMENT"):
			if p.next().kind != tkString {
				return p.errf("expected the comment's text")
			}
		case p.accept("CHARACTER", "SET"), p.accept("CHARSET"):
			cs, err := p.ident()
			if err != nil {
				return err
			}
			c.Charset = strings.ToLower(cs)
		case p.accept("COLLATE"):
			coll, err := p.ident()
			if err != nil {
				return err
			}
			c.Collate = strings.ToLower(coll)
		case p.accept("BINARY"):
			// CHAR(10) BINARY: a binary collation of the character set.
		case p.accept("ASCII"):
			c.Charset = "latin1"
		case p.accept("UNICODE"):
			c.Charset = "ucs2"
		case p.accept("BYTE"):
			c.Charset = "binary"
		case p.accept("ON", "UPDATE"):
			p.skipDefaultExpr()
		case p.accept("GENERATED", "ALWAYS"), p.is("AS") && isPunctTok(p.peekN(1), "("):
			p.accept("AS")
			if err := p.skipParens(); err != nil {
				return err
			}
			c.Generated = true
		case p.accept("VIRTUAL"), p.accept("STORED"), p.accept("PERSISTENT"):
		case p.accept("INVISIBLE"), p.accept("VISIBLE"):
		case p.accept("COLUMN_FORMAT"), p.accept("STORAGE"), p.accept("ENGINE_ATTRIBUTE"), p.accept("SECONDARY_ENGINE_ATTRIBUTE"):
			p.acceptPunct("=")
			p.next()
		case p.accept("CHECK"):
			if err := p.skipParens(); err != nil {
				return err
			}
		case p.accept("CONSTRAINT"):
			if !p.is("CHECK") {
				p.next()
			}
		case p.accept("REFERENCES"):
			if _, err := p.tableName(); err != nil {
				return err
			}
			if p.isPunct("(") {
				if err := p.skipParens(); err != nil {
					return err
				}
			}
			for p.accept("MATCH") || p.accept("ON") {
				for p.peek().kind == tkWord && !p.is("ON") && !p.is("MATCH") {
					p.next()
				}
			}
		case p.accept("COMPRESSED"):
			if p.acceptPunct("=") {
				p.next()
			}
		case p.accept("WITH", "SYSTEM", "VERSIONING"), p.accept("WITHOUT", "SYSTEM", "VERSIONING"):
		case p.accept("SRID"):
			p.next()
		default:
			return p.errf("unknown column attribute")
		}
	}
}

func isPunctTok(t token, s string) bool { return t.kind == tkPunct && t.text == s }

// skipDefaultExpr skips CURRENT_TIMESTAMP[(n)], NOW(), or any f(...).
func (p *ddlParser) skipDefaultExpr() {
	p.next()
	if p.isPunct("(") {
		_ = p.skipParens()
	}
}

// defaultValue reads the expression after DEFAULT: a literal (its text is
// kept) or anything else (its text goes to DefaultExpr).
func (p *ddlParser) defaultValue(c *ColumnDef) error {
	c.hasDef = true
	start := p.peek().pos
	paren := p.acceptPunct("(")
	lit, ok, err := p.literal()
	if err != nil {
		return err
	}
	if paren && ok && !p.acceptPunct(")") {
		ok = false
	}
	if ok {
		if lit == nil {
			c.DefaultNull = true
		} else {
			c.DefaultText = lit
		}
		return nil
	}
	// Not a literal: an expression, CURRENT_TIMESTAMP, NOW(), ...
	if !paren {
		p.skipDefaultExpr()
	} else {
		p.skipBalanced()
		if err := p.expectPunct(")"); err != nil {
			return err
		}
	}
	c.DefaultExpr = strings.TrimSpace(p.q[start:p.peek().pos])
	return nil
}

// literal reads a constant: NULL (nil), a number with an optional sign, a
// string with an optional character set introducer, a hex or bit literal,
// TRUE/FALSE, or DATE/TIME/TIMESTAMP 'text'. It consumes nothing and
// returns ok == false when what follows is not a literal.
func (p *ddlParser) literal() (*string, bool, error) {
	save := p.i
	str := func(s string) (*string, bool, error) { return &s, true, nil }
	t := p.next()
	switch {
	case isKw(t, "NULL"):
		return nil, true, nil
	case isKw(t, "TRUE"):
		return str("1")
	case isKw(t, "FALSE"):
		return str("0")
	case t.kind == tkNumber:
		return str(t.text)
	case t.kind == tkPunct && (t.text == "-" || t.text == "+"):
		n := p.next()
		if n.kind == tkNumber {
			if t.text == "-" {
				return str("-" + n.text)
			}
			return str(n.text)
		}
	case t.kind == tkString:
		s := t.text
		for p.peek().kind == tkString { // 'a' 'b' is 'ab'
			s += p.next().text
		}
		return str(s)
	case t.kind == tkHex:
		return str(t.text)
	case t.kind == tkBit:
		v, ok := bitsToBytes(t.text)
		if ok {
			return str(v)
		}
	case t.kind == tkWord && (strings.HasPrefix(t.text, "_") || strings.EqualFold(t.text, "N")) && p.peek().kind == tkString:
		// A character set introducer: _utf8mb4'abc', N'abc'.
		return p.literal()
	case (isKw(t, "DATE") || isKw(t, "TIME") || isKw(t, "TIMESTAMP")) && p.peek().kind == tkString:
		return str(p.next().text)
	}
	p.i = save
	return nil, false, nil
}

func bitsToBytes(bits string) (string, bool) {
	var v uint64
	if len(bits) > 64 {
		return "", false
	}
	for _, c := range bits {
		if c != '0' && c != '1' {
			return "", false
		}
		v = v<<1 | uint64(c-'0')
	}
	n := (len(bits) + 7) / 8
	out := make([]byte, n)
	for i := n - 1; i >= 0; i-- {
		out[i] = byte(v)
		v >>= 8
	}
	return string(out), true
}

func (p *ddlParser) createTable() (*Stmt, error) {
	p.next() // CREATE
	s := &Stmt{Kind: StmtCreate}
	if p.accept("OR", "REPLACE") {
		s.OrReplace = true
	}
	if p.accept("TEMPORARY") {
		s.Temporary = true
	}
	if !p.accept("TABLE") {
		return &Stmt{Kind: StmtOther}, nil // CREATE INDEX, VIEW, TRIGGER, DATABASE, ...
	}
	if p.accept("IF", "NOT", "EXISTS") {
		s.ifNotExists = true
	}
	id, err := p.tableName()
	if err != nil {
		return nil, err
	}
	s.Table = id
	if s.Temporary {
		return s, nil
	}
	switch {
	case p.accept("LIKE"):
		like, err := p.tableName()
		if err != nil {
			return nil, err
		}
		s.Like = &like
		return s, nil
	case p.isPunct("(") && isKw(p.peekN(1), "LIKE"):
		p.i += 2
		like, err := p.tableName()
		if err != nil {
			return nil, err
		}
		s.Like = &like
		return s, p.expectPunct(")")
	}
	def := &CreateDef{}
	s.Create = def
	if p.acceptPunct("(") {
		if p.is("SELECT") || p.is("WITH") || p.isPunct("(") {
			s.AsSelect = true
			return s, nil
		}
		for {
			if err := p.createItem(def); err != nil {
				return nil, err
			}
			if p.acceptPunct(",") {
				continue
			}
			if err := p.expectPunct(")"); err != nil {
				return nil, err
			}
			break
		}
	}
	// Table options, partitioning, and maybe AS SELECT.
	for !p.atEnd() {
		switch {
		case p.accept("DEFAULT"):
		case p.accept("CHARACTER", "SET"), p.accept("CHARSET"):
			p.acceptPunct("=")
			cs, err := p.ident()
			if err != nil {
				return nil, err
			}
			def.Charset = strings.ToLower(cs)
		case p.accept("COLLATE"):
			p.acceptPunct("=")
			coll, err := p.ident()
			if err != nil {
				return nil, err
			}
			if def.Charset == "" {
				def.Charset = CharsetOfCollation(coll)
			}
		case p.is("AS") || p.is("SELECT") || p.is("IGNORE") || p.is("REPLACE") || p.is("WITH"):
			s.AsSelect = true
			return s, nil
		case p.is("PARTITION"):
			p.skipRest()
		default:
			p.next()
		}
	}
	return s, nil
}

func (p *ddlParser) skipRest() {
	for p.peek().kind != tkEOF {
		p.next()
	}
}

func (p *ddlParser) createItem(def *CreateDef) error {
	switch {
	case p.is("PRIMARY") || p.is("CONSTRAINT") && (isKw(p.peekN(1), "PRIMARY") || isKw(p.peekN(2), "PRIMARY")):
		if p.accept("CONSTRAINT") && !p.is("PRIMARY") {
			p.next()
		}
		p.next()
		if err := p.expect("KEY"); err != nil {
			return err
		}
		cols, err := p.keyParts()
		if err != nil {
			return err
		}
		def.PrimaryKey = cols
		p.skipBalanced()
		return nil
	case p.is("INDEX") || p.is("KEY") || p.is("UNIQUE") || p.is("FULLTEXT") || p.is("SPATIAL") ||
		p.is("FOREIGN") || p.is("CONSTRAINT") || p.is("CHECK") || p.is("PERIOD") || p.is("VECTOR"):
		// An index or a constraint (a column named like one would be quoted
		// by SHOW CREATE TABLE, which is what tools write).
		p.skipBalanced()
		return nil
	}
	c, err := p.columnDef()
	if err != nil {
		return err
	}
	def.Columns = append(def.Columns, c)
	return nil
}

func (p *ddlParser) drop() (*Stmt, error) {
	p.next() // DROP
	if p.accept("DATABASE") || p.accept("SCHEMA") {
		p.accept("IF", "EXISTS")
		db, err := p.ident()
		if err != nil {
			return nil, err
		}
		return &Stmt{Kind: StmtDropDatabase, Database: db}, nil
	}
	s := &Stmt{Kind: StmtDrop}
	if p.accept("TEMPORARY") {
		s.Temporary = true
	}
	if !(p.accept("TABLE") || p.accept("TABLES")) {
		return &Stmt{Kind: StmtOther}, nil
	}
	p.accept("IF", "EXISTS")
	for {
		id, err := p.tableName()
		if err != nil {
			return nil, err
		}
		s.Tables = append(s.Tables, id)
		if !p.acceptPunct(",") {
			break
		}
	}
	p.skipWait()
	p.accept("RESTRICT")
	p.accept("CASCADE")
	if !p.atEnd() {
		return nil, p.errf("unexpected text")
	}
	return s, nil
}

func (p *ddlParser) rename() (*Stmt, error) {
	p.next() // RENAME
	if !(p.accept("TABLE") || p.accept("TABLES")) {
		return &Stmt{Kind: StmtOther}, nil // RENAME USER
	}
	p.accept("IF", "EXISTS")
	s := &Stmt{Kind: StmtRename}
	for {
		from, err := p.tableName()
		if err != nil {
			return nil, err
		}
		p.skipWait()
		if err := p.expect("TO"); err != nil {
			return nil, err
		}
		to, err := p.tableName()
		if err != nil {
			return nil, err
		}
		s.Renames = append(s.Renames, [2]cdcsync.TableID{from, to})
		if !p.acceptPunct(",") {
			break
		}
	}
	if !p.atEnd() {
		return nil, p.errf("unexpected text")
	}
	return s, nil
}

func (p *ddlParser) truncate() (*Stmt, error) {
	p.next() // TRUNCATE
	p.accept("TABLE")
	id, err := p.tableName()
	if err != nil {
		return nil, err
	}
	p.skipWait()
	if !p.atEnd() {
		return nil, p.errf("unexpected text")
	}
	return &Stmt{Kind: StmtTruncate, Table: id}, nil
}
