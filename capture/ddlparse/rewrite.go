package ddlparse

import (
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser/charset"

	"github.com/cdcsync/cdcsync/capture/internal/strutil"
)

// This file rewrites a statement's tokens into SQL the TiDB parser takes
// (see the package documentation for the list). Only what the layer
// recognizes at its place in the statement is rewritten; anything else
// goes to the TiDB parser as written, so a clause neither knows is still
// an error. What a rewrite takes away and the Stmt needs is kept in
// rewritten, or carried to the adapter by a column marker: a COMMENT
// '@ddlparse:...' after the column's type, which the AST keeps with the
// column.

// markerPrefix starts the COMMENT of a column marker.
const markerPrefix = "@ddlparse:"

// placeholderPrefix starts the name under which a character set or
// collation the TiDB parser does not take as written goes to it.
const placeholderPrefix = "ddlparse_"

// rewritten is a statement as the TiDB parser gets it.
type rewritten struct {
	sql       string
	orReplace bool // CREATE OR REPLACE
	// versioned is CREATE TABLE ... WITH SYSTEM VERSIONING, whose table
	// has columns its definition does not list (row_start, row_end) as
	// CREATE ... SELECT has: the Stmt says AsSelect.
	versioned bool
	err       error // what the rewrite finds wrong, before the TiDB parser would not
	// other is a statement that does not change tables (CREATE TRIGGER,
	// GRANT, ...): it is StmtOther without going to the TiDB parser, which
	// does not know them all.
	other    bool
	ifExists []bool // IF EXISTS of each DROP FOREIGN KEY/CONSTRAINT/CHECK and RENAME COLUMN, in order
}

// editor collects the edits of the tokens.
type editor struct {
	q     string
	toks  []token
	out   []string // the replacement of each token, if set
	set   []bool
	after []string // text inserted after each token
}

func (e *editor) drop(i, n int) {
	for j := i; j < i+n && j < len(e.toks); j++ {
		e.out[j], e.set[j] = "", true
	}
}

func (e *editor) replace(i int, s string) { e.out[i], e.set[i] = s, true }

func (e *editor) render(q string) string {
	var b strings.Builder
	for i, t := range e.toks[:len(e.toks)-1] {
		if i > 0 && !(e.toks[i-1].end == t.pos && !e.set[i-1] && !e.set[i] && e.after[i-1] == "") {
			b.WriteByte(' ')
		}
		if e.set[i] {
			b.WriteString(e.out[i])
		} else {
			b.WriteString(q[t.pos:t.end])
		}
		b.WriteString(e.after[i])
	}
	return b.String()
}

func (e *editor) kw(i int, kws ...string) bool {
	for j, kw := range kws {
		if i+j >= len(e.toks) || !isKw(e.toks[i+j], kw) {
			return false
		}
	}
	return true
}

func (e *editor) punct(i int, s string) bool { return i < len(e.toks) && isPunctTok(e.toks[i], s) }

func isName(t token) bool { return t.kind == tkWord || t.kind == tkQuoted }

// tableName returns the index after [db.]table at i.
func (e *editor) tableName(i int) int {
	if e.punct(i+1, ".") {
		return i + 3
	}
	return i + 1
}

// wait drops MariaDB's WAIT n / NOWAIT at i, if there, and returns the
// index after it.
func (e *editor) wait(i int) int {
	switch {
	case e.kw(i, "NOWAIT"):
		e.drop(i, 1)
		return i + 1
	case e.kw(i, "WAIT") && e.toks[i+1].kind == tkNumber:
		e.drop(i, 2)
		return i + 2
	}
	return i
}

func (e *editor) atEnd(i int) bool {
	for e.punct(i, ";") {
		i++
	}
	return e.toks[i].kind == tkEOF
}

// rewrite makes q's tokens into the SQL the TiDB parser gets.
func rewrite(q string, toks []token) rewritten {
	e := &editor{q: q, toks: toks, out: make([]string, len(toks)), set: make([]bool, len(toks)), after: make([]string, len(toks))}
	var r rewritten
	i := 1
	switch {
	case e.kw(0, "CREATE"):
		if e.kw(1, "OR", "REPLACE") {
			r.orReplace = true
			e.drop(1, 2)
			i = 3
		}
		if e.kw(i, "TEMPORARY") {
			i++
		}
		if !e.kw(i, "TABLE") {
			r.other = true
			break
		}
		if i++; e.kw(i, "IF", "NOT", "EXISTS") {
			i += 3
		}
		i = e.tableName(i)
		if e.punct(i, "(") && !e.kw(i+1, "LIKE") && !e.kw(i+1, "SELECT") {
			i = e.columnList(i + 1)
		}
		for ; e.toks[i].kind != tkEOF; i++ {
			if e.kw(i, "WITH", "SYSTEM", "VERSIONING") {
				e.drop(i, 3)
				r.versioned = true
			}
		}
	case e.kw(0, "ALTER"):
		if e.kw(1, "ONLINE") {
			e.drop(1, 1)
			i = 2
		}
		if e.kw(i, "IGNORE") {
			i++
		}
		if !e.kw(i, "TABLE") {
			r.other = true
			break
		}
		if i++; e.kw(i, "IF", "EXISTS") {
			e.drop(i, 2)
			i += 2
		}
		i = e.wait(e.tableName(i))
		e.alterSpecs(i, &r)
	case e.kw(0, "DROP") && (e.kw(1, "DATABASE") || e.kw(1, "SCHEMA")):
	case e.kw(0, "DROP") && (e.kw(1, "TABLE") || e.kw(1, "TEMPORARY") || e.kw(1, "TABLES")):
		for ; e.toks[i].kind != tkEOF; i++ {
			if (e.kw(i, "WAIT") || e.kw(i, "NOWAIT")) && (e.atEnd(e.wait(i)) || e.kw(e.wait(i), "RESTRICT") || e.kw(e.wait(i), "CASCADE")) {
				i = e.wait(i) - 1
			}
		}
	case e.kw(0, "TRUNCATE"):
		for ; e.toks[i].kind != tkEOF; i++ {
			if (e.kw(i, "WAIT") || e.kw(i, "NOWAIT")) && e.atEnd(e.wait(i)) {
				i = e.wait(i) - 1
			}
		}
	case e.kw(0, "RENAME") && (e.kw(1, "TABLE") || e.kw(1, "TABLES")):
		e.replace(1, "TABLE")
		if e.kw(2, "IF", "EXISTS") {
			e.drop(2, 2)
		}
		for ; e.toks[i].kind != tkEOF; i++ {
			if e.kw(i, "WAIT") || e.kw(i, "NOWAIT") {
				if !e.kw(e.wait(i), "TO") {
					r.err = fmt.Errorf("WAIT or NOWAIT where RENAME TABLE does not take it (near %q)", strutil.Abbreviate(q[toks[i].pos:], 40))
				}
				i = e.wait(i) - 1
			}
		}
	default:
		r.other = true
	}
	e.names()
	r.sql = e.render(q)
	return r
}

// alterSpecs rewrites the clauses of an ALTER TABLE from i.
func (e *editor) alterSpecs(i int, r *rewritten) {
	for i < len(e.toks) && e.toks[i].kind != tkEOF {
		switch {
		case e.kw(i, "ADD"):
			if i++; e.kw(i, "COLUMN") {
				i++
			}
			if e.kw(i, "IF", "NOT", "EXISTS") {
				i += 3
			}
			if e.punct(i, "(") {
				i = e.columnList(i + 1)
			} else if !isKeyItem(e.toks[i]) && !e.kw(i, "PARTITION") && !e.kw(i, "SYSTEM") {
				i = e.column(i, 0)
			}
		case e.kw(i, "MODIFY"), e.kw(i, "CHANGE"):
			change := e.kw(i, "CHANGE")
			if i++; e.kw(i, "COLUMN") {
				i++
			}
			if e.kw(i, "IF", "EXISTS") {
				i += 2
			}
			if change {
				i++
			}
			i = e.column(i, 0)
		case e.kw(i, "DROP", "FOREIGN", "KEY"), e.kw(i, "DROP", "CONSTRAINT"), e.kw(i, "DROP", "CHECK"), e.kw(i, "RENAME", "COLUMN"):
			i += 2
			if e.kw(i, "KEY") {
				i++
			}
			ifExists := e.kw(i, "IF", "EXISTS")
			if ifExists {
				e.drop(i, 2)
			}
			r.ifExists = append(r.ifExists, ifExists)
		}
		// On to the next clause.
		for depth := 0; i < len(e.toks) && e.toks[i].kind != tkEOF; i++ {
			if e.punct(i, "(") {
				depth++
			} else if e.punct(i, ")") {
				depth--
			} else if e.punct(i, ",") && depth == 0 {
				i++
				break
			}
		}
	}
}

// isKeyItem says whether an item of a column list, or what follows ADD,
// is an index or a constraint rather than a column.
func isKeyItem(t token) bool {
	switch strings.ToUpper(t.text) {
	case "PRIMARY", "KEY", "INDEX", "UNIQUE", "FULLTEXT", "SPATIAL", "FOREIGN", "CONSTRAINT", "CHECK", "PERIOD", "VECTOR":
		return t.kind == tkWord
	}
	return false
}

// columnList rewrites the columns of "(col, col, KEY ..., ...)" from i,
// after the '(', and returns the index after the ')'.
func (e *editor) columnList(i int) int {
	for {
		if !isKeyItem(e.toks[i]) {
			i = e.column(i, 1)
		}
		depth := 1
		for ; e.toks[i].kind != tkEOF; i++ {
			if e.punct(i, "(") {
				depth++
			} else if e.punct(i, ")") {
				if depth--; depth == 0 {
					return i + 1
				}
			} else if e.punct(i, ",") && depth == 1 {
				i++
				break
			}
		}
		if e.toks[i].kind == tkEOF {
			return i
		}
	}
}

// marked types: the MariaDB types the TiDB grammar lacks, which go to it
// as INT and come back by their marker, and the spatial types.
var markedTypes = map[string]bool{
	"inet4": true, "inet6": true, "uuid": true, "geometry": true, "point": true, "linestring": true, "polygon": true,
	"multipoint": true, "multilinestring": true, "multipolygon": true, "geometrycollection": true,
}

// column rewrites the column definition whose name is at i, inside depth
// parentheses, and returns the index where it ends.
func (e *editor) column(i, depth int) int {
	if !isName(e.toks[i]) {
		return i
	}
	i++ // the name
	t := e.toks[i]
	if t.kind != tkWord {
		return i
	}
	mark := func(i int, what string) {
		e.after[i] += " COMMENT '" + markerPrefix + what + "'"
	}
	typ := strings.ToLower(t.text)
	end := i // the type's last token
	switch {
	case e.kw(i, "NATIONAL") || e.kw(i, "NCHAR") || e.kw(i, "NVARCHAR"):
		for e.kw(end+1, "CHAR") || e.kw(end+1, "CHARACTER") || e.kw(end+1, "VARCHAR") || e.kw(end+1, "VARYING") {
			end++
		}
		typ = "national"
	case e.kw(i, "LONG") || e.kw(i, "DOUBLE") || e.kw(i, "CHAR") || e.kw(i, "CHARACTER"):
		for e.kw(end+1, "VARBINARY") || e.kw(end+1, "VARCHAR") || e.kw(end+1, "CHARACTER") || e.kw(end+1, "VARYING") || e.kw(end+1, "PRECISION") {
			end++
		}
	}
	hasLen := e.punct(end+1, "(")
	if hasLen {
		for d := 0; e.toks[end+1].kind != tkEOF; {
			end++
			if e.punct(end, "(") {
				d++
			} else if e.punct(end, ")") {
				if d--; d == 0 {
					break
				}
			}
		}
	}
	switch {
	case markedTypes[typ]:
		e.replace(i, "INT")
		mark(end, "type="+typ)
	case typ == "national", typ == "serial":
		mark(end, typ)
	case (typ == "bit" || typ == "year") && !hasLen:
		mark(end, "nolen")
	}
	// The attributes, up to the ',' or ')' that ends the definition.
	for i = end + 1; e.toks[i].kind != tkEOF; i++ {
		switch {
		case e.punct(i, "(") || e.punct(i, ")") && depth > 0 || e.punct(i, ",") || e.kw(i, "FIRST") || e.kw(i, "AFTER"):
			if e.punct(i, "(") {
				i = e.skipParens(i)
				continue
			}
			return i
		case e.kw(i, "INVISIBLE"), e.kw(i, "VISIBLE"):
			e.drop(i, 1)
		case e.kw(i, "PERSISTENT"):
			e.replace(i, "STORED")
		case e.kw(i, "WITH", "SYSTEM", "VERSIONING"), e.kw(i, "WITHOUT", "SYSTEM", "VERSIONING"):
			e.drop(i, 3)
			i += 2
		case e.kw(i, "SRID") && e.toks[i+1].kind == tkNumber:
			e.drop(i, 2)
			i++
		case e.kw(i, "DEFAULT", "VALUE") && typ == "serial":
			e.drop(i, 2)
			i++
		case e.kw(i, "DEFAULT"):
			i = e.defaultValue(i+1, end)
		}
	}
	return i
}

// skipParens returns the index of the ')' closing the '(' at i.
func (e *editor) skipParens(i int) int {
	for d := 0; e.toks[i].kind != tkEOF; i++ {
		if e.punct(i, "(") {
			d++
		} else if e.punct(i, ")") {
			if d--; d == 0 {
				return i
			}
		}
	}
	return i
}

// defaultValue rewrites the value of a DEFAULT at i: a number goes as the
// string of its text (the AST does not keep 1e3 or 007 as written), DATE
// 'x' (and TIME, TIMESTAMP) as 'x', and an expression in parentheses as
// NULL with a marker holding its text (the TiDB grammar takes only some).
// It returns the index of the value's last token.
func (e *editor) defaultValue(i, typeEnd int) int {
	t := e.toks[i]
	switch {
	case t.kind == tkNumber:
		e.replace(i, quote(t.text))
	case (isPunctTok(t, "-") || isPunctTok(t, "+")) && e.toks[i+1].kind == tkNumber:
		sign := strings.TrimPrefix(t.text, "+")
		e.drop(i, 1)
		e.replace(i+1, quote(sign+e.toks[i+1].text))
		return i + 1
	case (isKw(t, "DATE") || isKw(t, "TIME") || isKw(t, "TIMESTAMP")) && e.toks[i+1].kind == tkString:
		e.drop(i, 1)
		return i + 1
	case isPunctTok(t, "("):
		end := e.skipParens(i)
		inner := e.toks[i+1 : end]
		if len(inner) > 2 && inner[0].kind == tkWord && isPunctTok(inner[1], "(") && e.skipParens(i+2) == end-1 {
			return end // a function call, which the TiDB grammar takes
		}
		if len(inner) == 1 && inner[0].kind != tkWord || len(inner) == 2 && inner[1].kind == tkNumber && (isPunctTok(inner[0], "-") || isPunctTok(inner[0], "+")) {
			e.defaultValue(i+1, typeEnd) // a literal in parentheses
			return end
		}
		e.drop(i, end-i+1)
		e.replace(i, "NULL")
		e.after[typeEnd] += " COMMENT '" + markerPrefix + "default=" + hex.EncodeToString([]byte(e.sqlText(i, end))) + "'"
		return end
	}
	return i
}

// sqlText is the statement's text from token i to token j.
func (e *editor) sqlText(i, j int) string {
	var b strings.Builder
	for k := i; k <= j; k++ {
		if k > i && e.toks[k-1].end != e.toks[k].pos {
			b.WriteByte(' ')
		}
		b.WriteString(e.srcOf(k))
	}
	return b.String()
}

func (e *editor) srcOf(k int) string { return e.q[e.toks[k].pos:e.toks[k].end] }

func quote(s string) string { return "'" + s + "'" }

// names rewrites the names after CHARACTER SET, CHARSET and COLLATE that
// the TiDB parser does not take as written (see placeholder).
func (e *editor) names() {
	for i := 0; e.toks[i].kind != tkEOF; i++ {
		coll := e.kw(i, "COLLATE")
		switch {
		case e.kw(i, "CHARACTER", "SET"):
			i++
		case !coll && !e.kw(i, "CHARSET"):
			continue
		}
		j := i + 1
		if e.punct(j, "=") {
			j++
		}
		t := e.toks[j]
		if t.kind != tkWord && t.kind != tkQuoted && t.kind != tkString {
			continue
		}
		if name := placeholder(t.text, coll); name != "" {
			e.replace(j, name)
		}
		i = j
	}
}

var (
	// tidbMu serializes the TiDB parser's use of its character set tables
	// with the additions of placeholder.
	tidbMu       sync.Mutex
	placeholders = map[string]bool{}
)

// placeholder returns the name under which a character set (or collation)
// name goes to the TiDB parser, "" for the name itself: the TiDB parser
// takes utf8mb3 for utf8 and a column's CHARACTER SET binary for a binary
// type, and refuses the names it does not know (swe7, big5, MariaDB's
// uca1400 collations). A placeholder is the name with the prefix
// ddlparse_, added to the parser's tables (charset.AddCharset and
// AddCollation, its extension point); the adapter takes the prefix off.
func placeholder(name string, collation bool) string {
	name = strings.ToLower(name)
	tidbMu.Lock()
	defer tidbMu.Unlock()
	if collation {
		if _, err := charset.GetCollationByName(name); err == nil && !strings.HasPrefix(name, "utf8mb3") {
			return ""
		}
	} else if _, err := charset.GetCharsetInfo(name); err == nil && name != "utf8mb3" && name != "binary" {
		return ""
	}
	ph := placeholderPrefix + name
	if !placeholders[ph] {
		placeholders[ph] = true
		if collation {
			charset.AddCollation(&charset.Collation{ID: 100000 + len(placeholders), CharsetName: placeholderPrefix + CharsetOfCollation(name), Name: ph})
		} else {
			charset.AddCharset(&charset.Charset{Name: ph, Collations: map[string]*charset.Collation{}})
		}
	}
	return ph
}
