package ddlparse

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// This file splits a statement into tokens (lex), which is what lets the
// rewrite of rewrite.go, the adapter of tidb.go and CandidateTables look
// at a statement's words without being fooled by string literals, quoted
// identifiers and comments, under the statement's ANSI_QUOTES and
// NO_BACKSLASH_ESCAPES.

type tokKind int

const (
	tkEOF    tokKind = iota
	tkWord           // a bare word: keyword or identifier
	tkQuoted         // a `quoted` identifier (or "quoted" under ANSI_QUOTES)
	tkString         // a 'string' (or "string")
	tkNumber         // 12, 1.5, .5, 1e3
	tkHex            // X'0a' or 0x0a, as written
	tkBit            // b'101', as written
	tkPunct          // one character: ( ) , . ; = and the rest
)

type token struct {
	kind tokKind
	text string // identifiers and strings unquoted, words as written
	pos  int    // byte offset in the statement
	end  int    // byte offset after it
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
			out = append(out, token{tkQuoted, s, i, i + n})
			i += n
		case c == '\'' || c == '"':
			s, n, err := lexQuoted(q[i:], c, !mode.noBackslash)
			if err != nil {
				return nil, err
			}
			out = append(out, token{tkString, s, i, i + n})
			i += n
		case (c == 'x' || c == 'X' || c == 'b' || c == 'B') && i+1 < len(q) && q[i+1] == '\'':
			// X'0a' or b'101', kept as written.
			kind, what := tkHex, "hex"
			if c == 'b' || c == 'B' {
				kind, what = tkBit, "bit"
			}
			end := strings.IndexByte(q[i+2:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated %s literal", what)
			}
			out = append(out, token{kind, q[i : i+end+3], i, i + end + 3})
			i += end + 3
		case c == '0' && i+2 < len(q) && (q[i+1] == 'x') && isHexDigit(q[i+2]):
			j := i + 2
			for j < len(q) && isHexDigit(q[j]) {
				j++
			}
			if j < len(q) && isIdentByte(q[j]) {
				j = lexWordEnd(q, i)
				out = append(out, token{tkWord, q[i:j], i, j})
				i = j
				continue
			}
			out = append(out, token{tkHex, q[i:j], i, j})
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
				out = append(out, token{tkWord, q[i:j], i, j})
				i = j
				continue
			}
			out = append(out, token{tkNumber, q[i:j], i, j})
			i = j
		case isIdentByte(c):
			j := lexWordEnd(q, i)
			out = append(out, token{tkWord, q[i:j], i, j})
			i = j
		default:
			_, n := utf8.DecodeRuneInString(q[i:])
			out = append(out, token{tkPunct, q[i : i+n], i, i + n})
			i += n
		}
	}
	out = append(out, token{kind: tkEOF, pos: len(q), end: len(q)})
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

func isKw(t token, kw string) bool { return t.kind == tkWord && strings.EqualFold(t.text, kw) }

func isPunctTok(t token, s string) bool { return t.kind == tkPunct && t.text == s }
