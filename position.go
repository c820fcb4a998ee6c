package cdcsync

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Position is a point in the source's change stream (a binlog position for
// MySQL; a Kafka offset or a PostgreSQL LSN would fit too). It holds the
// source's canonical encoded form, a JSON object, and nothing else, so that
// the core stores positions and compares equal ones with == without
// knowing what they mean; it orders them only through the source's Order.
// The zero Position names no position.
type Position struct {
	raw string
}

// zeroJSON is how a zero Position is stored: what cdcsync wrote for it when
// Position was a struct of MySQL fields, kept so that stored checkpoints
// (and their checksums) and snapshot summaries stay byte for byte the same.
const zeroJSON = `{"flavor":""}`

// PositionFromEncoded makes a Position from a source's canonical encoding
// of it: the source must encode equal positions to equal strings, and a
// position that names nothing to "". The encoding must be compact JSON.
func PositionFromEncoded(s string) Position {
	if s == zeroJSON {
		s = ""
	}
	return Position{raw: s}
}

// IsZero reports whether p names no position at all.
func (p Position) IsZero() bool { return p.raw == "" }

// String renders p for people without knowing what it means: the values
// of its encoded object, in order, joined by colons ("mariadb:0-1-5",
// "mysql:binlog.000003:77:<server uuid>"); "none" for the zero Position.
func (p Position) String() string {
	if p.raw == "" {
		return "none"
	}
	dec := json.NewDecoder(strings.NewReader(p.raw))
	dec.UseNumber()
	var parts []string
	for key := true; ; {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return p.raw
		}
		switch v := tok.(type) {
		case json.Delim:
			continue
		case string:
			if !key && v != "" {
				parts = append(parts, v)
			}
		default:
			if !key {
				parts = append(parts, fmt.Sprint(v))
			}
		}
		key = !key
	}
	return strings.Join(parts, ":")
}

// Encode returns the form stored in snapshot summaries and checkpoints.
func (p Position) Encode() string {
	if p.raw == "" {
		return zeroJSON
	}
	return p.raw
}

// DecodePosition parses the form written by Encode.
func DecodePosition(s string) (Position, error) {
	p, err := decodePosition([]byte(s))
	if err != nil {
		return Position{}, fmt.Errorf("decode binlog position %q: %w", s, err)
	}
	return p, nil
}

// decodePosition compacts b, so that a position read back from storage is
// == the same position as the source produces it.
func decodePosition(b []byte) (Position, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return Position{}, err
	}
	s := buf.String()
	switch {
	case s == "null" || s == "{}":
		return Position{}, nil
	case s[0] != '{':
		return Position{}, fmt.Errorf("position %s is not a JSON object", s)
	}
	return PositionFromEncoded(s), nil
}

// MarshalJSON writes p as the JSON object of its encoding.
func (p Position) MarshalJSON() ([]byte, error) { return []byte(p.Encode()), nil }

// UnmarshalJSON reads what MarshalJSON wrote.
func (p *Position) UnmarshalJSON(b []byte) error {
	q, err := decodePosition(b)
	if err != nil {
		return fmt.Errorf("decode binlog position: %w", err)
	}
	*p = q
	return nil
}

// Order compares the positions of one source. The source owns what a
// position means (GTID sets and binlog files for MySQL; an offset or an
// LSN would fit too): the core only stores positions and asks it.
type Order interface {
	// Includes reports whether p is at or after q: every transaction
	// before q is also before p.
	Includes(p, q Position) (bool, error)
	// Covers reports whether the transaction t is included in p: a table
	// committed at p already holds t's changes.
	Covers(p Position, t *Txn) (bool, error)
	// Earliest returns a position at or before both a and b (a zero one
	// is ignored): where a stream must start so that tables committed at
	// a and at b both see every transaction they lack.
	Earliest(a, b Position) (Position, error)
}
