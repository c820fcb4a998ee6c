package binlogpos

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/cdcsync/cdcsync"
)

// Flavors of binlog positions.
const (
	FlavorMySQL   = "mysql"
	FlavorMariaDB = "mariadb"
)

// Pos is a binlog position: a GTID set when the server has GTIDs, else a
// file and offset that only mean something on the server ServerUUID. The
// core holds it encoded, as a cdcsync.Position (Position, Decode).
type Pos struct {
	Flavor     string
	GTIDSet    string
	File       string
	Offset     uint32
	ServerUUID string
}

// IsZero reports whether p names no position at all.
func (p Pos) IsZero() bool { return p.GTIDSet == "" && p.File == "" }

// UsesGTID reports whether p is a GTID position.
func (p Pos) UsesGTID() bool { return p.GTIDSet != "" }

// String is p for people: "mariadb:0-1-5" or "mysql:binlog.000003:77".
func (p Pos) String() string {
	if p.UsesGTID() {
		return p.Flavor + ":" + p.GTIDSet
	}
	return p.Flavor + ":" + p.File + ":" + strconv.FormatUint(uint64(p.Offset), 10)
}

// Position encodes p for the core. The encoding is what encoding/json made
// of the struct cdcsync.Position was before it became opaque (keys flavor,
// gtid_set, file, offset, server_uuid; all but flavor omitted when empty),
// so stored positions and checkpoint checksums stay the same. It runs once
// per transaction, hence by hand.
func (p Pos) Position() cdcsync.Position {
	if p.IsZero() {
		return cdcsync.Position{}
	}
	b := make([]byte, 0, 24+len(p.Flavor)+len(p.GTIDSet)+len(p.File)+len(p.ServerUUID)+48)
	b = append(b, `{"flavor":`...)
	b = appendString(b, p.Flavor)
	if p.GTIDSet != "" {
		b = append(b, `,"gtid_set":`...)
		b = appendString(b, p.GTIDSet)
	}
	if p.File != "" {
		b = append(b, `,"file":`...)
		b = appendString(b, p.File)
	}
	if p.Offset != 0 {
		b = append(b, `,"offset":`...)
		b = strconv.AppendUint(b, uint64(p.Offset), 10)
	}
	if p.ServerUUID != "" {
		b = append(b, `,"server_uuid":`...)
		b = appendString(b, p.ServerUUID)
	}
	b = append(b, '}')
	// b is not touched again: the string can share its memory (as
	// strings.Builder does), saving a copy per transaction.
	return cdcsync.PositionFromEncoded(unsafe.String(unsafe.SliceData(b), len(b)))
}

// appendString quotes s as encoding/json does (HTML-safe, invalid UTF-8
// replaced, U+2028 and U+2029 escaped).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Decode reads a position that Position encoded (or that was stored by an
// older cdcsync, the same bytes).
func Decode(p cdcsync.Position) (Pos, error) {
	if p.IsZero() {
		return Pos{}, nil
	}
	s := p.Encode()
	if q, ok := decodeFast(s); ok {
		return q, nil
	}
	var j struct {
		Flavor     string `json:"flavor"`
		GTIDSet    string `json:"gtid_set,omitempty"`
		File       string `json:"file,omitempty"`
		Offset     uint32 `json:"offset,omitempty"`
		ServerUUID string `json:"server_uuid,omitempty"`
	}
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		return Pos{}, fmt.Errorf("decode binlog position %s: %w", s, err)
	}
	return Pos(j), nil
}

// decodeFast reads the form Position writes when no string needs escaping,
// without copying: the strings of the result share s's memory.
func decodeFast(s string) (Pos, bool) {
	var p Pos
	rest, ok := strings.CutPrefix(s, `{"flavor":`)
	if !ok {
		return Pos{}, false
	}
	if p.Flavor, rest, ok = cutString(rest); !ok {
		return Pos{}, false
	}
	if r, ok := strings.CutPrefix(rest, `,"gtid_set":`); ok {
		if p.GTIDSet, rest, ok = cutString(r); !ok {
			return Pos{}, false
		}
	}
	if r, ok := strings.CutPrefix(rest, `,"file":`); ok {
		if p.File, rest, ok = cutString(r); !ok {
			return Pos{}, false
		}
	}
	if r, ok := strings.CutPrefix(rest, `,"offset":`); ok {
		i := 0
		for i < len(r) && r[i] >= '0' && r[i] <= '9' {
			i++
		}
		n, err := strconv.ParseUint(r[:i], 10, 32)
		if err != nil {
			return Pos{}, false
		}
		p.Offset, rest = uint32(n), r[i:]
	}
	if r, ok := strings.CutPrefix(rest, `,"server_uuid":`); ok {
		if p.ServerUUID, rest, ok = cutString(r); !ok {
			return Pos{}, false
		}
	}
	return p, rest == "}"
}

// cutString reads a JSON string with no escapes from the start of s.
func cutString(s string) (v, rest string, ok bool) {
	if len(s) == 0 || s[0] != '"' {
		return "", "", false
	}
	i := strings.IndexByte(s[1:], '"')
	if i < 0 {
		return "", "", false
	}
	v = s[1 : 1+i]
	if strings.IndexByte(v, '\\') >= 0 {
		return "", "", false
	}
	return v, s[2+i:], true
}

// decoded is a position Order decoded last, kept because the pipeline asks
// about the same committed position once per transaction.
type decoded struct {
	raw string
	pos Pos
}

// memo holds the positions an Order's Covers decoded last: a table's
// committed position, and a transaction's, which the pipeline checks
// against each table's.
type memo struct {
	covered, txn atomic.Pointer[decoded]
}

// decodeCached decodes p, through slot when there is one.
func decodeCached(p cdcsync.Position, slot *atomic.Pointer[decoded]) (Pos, error) {
	if slot == nil {
		return Decode(p)
	}
	raw := p.Encode()
	if d := slot.Load(); d != nil && d.raw == raw {
		return d.pos, nil
	}
	q, err := Decode(p)
	if err != nil {
		return Pos{}, err
	}
	slot.Store(&decoded{raw: raw, pos: q})
	return q, nil
}
