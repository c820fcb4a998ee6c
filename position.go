package cdcsync

import (
	"encoding/json"
	"fmt"
)

// Flavors of binlog positions.
const (
	FlavorMySQL   = "mysql"
	FlavorMariaDB = "mariadb"
)

// Position is a point in the binlog: a GTID set when the server has GTIDs,
// else a file and offset that only mean something on the server ServerUUID.
// The core stores positions and compares them only through the source's
// Order (capture/binlogpos for MySQL and MariaDB).
type Position struct {
	Flavor     string `json:"flavor"`
	GTIDSet    string `json:"gtid_set,omitempty"`
	File       string `json:"file,omitempty"`
	Offset     uint32 `json:"offset,omitempty"`
	ServerUUID string `json:"server_uuid,omitempty"`
}

// IsZero reports whether p names no position at all.
func (p Position) IsZero() bool { return p.GTIDSet == "" && p.File == "" }

// UsesGTID reports whether p is a GTID position.
func (p Position) UsesGTID() bool { return p.GTIDSet != "" }

func (p Position) String() string {
	if p.UsesGTID() {
		return p.Flavor + ":" + p.GTIDSet
	}
	return fmt.Sprintf("%s:%s:%d", p.Flavor, p.File, p.Offset)
}

// Encode returns the JSON form stored in snapshot summaries and checkpoints.
func (p Position) Encode() string {
	b, _ := json.Marshal(p) // a struct of strings and ints always marshals
	return string(b)
}

// DecodePosition parses the form written by Encode.
func DecodePosition(s string) (Position, error) {
	var p Position
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return Position{}, fmt.Errorf("decode binlog position %q: %w", s, err)
	}
	return p, nil
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
