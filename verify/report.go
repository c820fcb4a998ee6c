package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cdcsync/cdcsync"
)

// Statuses of a table's comparison.
const (
	StatusEqual      = "equal"      // every row matched
	StatusDifferent  = "different"  // some keys differ (Differences)
	StatusUnsettled  = "unsettled"  // no difference found, but some keys kept changing and were not compared
	StatusUnverified = "unverified" // the table cannot be compared now (Reason)
	StatusError      = "error"      // the comparison failed (Reason)
)

// TableReport is the outcome of one table's comparison.
type TableReport struct {
	Table  string `json:"table"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Rows is the number of MySQL rows compared by checksum; Chunks the
	// number of chunks, ChunksDiffering those whose checksums differed
	// (changes in flight, or a difference).
	Rows            int64 `json:"rows"`
	Chunks          int   `json:"chunks"`
	ChunksDiffering int   `json:"chunks_differing"`
	// KeysRechecked counts the keys compared row by row because their
	// row hashes differed.
	KeysRechecked int `json:"keys_rechecked"`
	// Differences counts the keys that differ once the lake had applied
	// every change up to a MySQL read that saw them; Examples shows the
	// first few with both rows.
	Differences int          `json:"differences"`
	Examples    []Difference `json:"examples,omitempty"`
	// Unsettled counts keys that changed in every comparison until the
	// settle time ran out: not compared, so not known to differ.
	Unsettled int `json:"unsettled"`
	// Positions compared at: the first and last MySQL reads, and the lake
	// snapshots (with the positions they hold) compared with them.
	MySQLFirst string   `json:"mysql_first_position,omitempty"`
	MySQLLast  string   `json:"mysql_last_position,omitempty"`
	Lake       []LakeAt `json:"lake_snapshots,omitempty"`
	// Repair says what --repair did.
	Repair  *RepairReport `json:"repair,omitempty"`
	Elapsed time.Duration `json:"-"`
	Seconds float64       `json:"seconds"`
	// Of those, the time spent reading MySQL and reading the lake (the
	// rest is mostly waiting for the lake to cover MySQL's reads).
	MySQLSeconds float64 `json:"mysql_seconds"`
	LakeSeconds  float64 `json:"lake_seconds"`

	mysqlTime time.Duration
	lakeTime  time.Duration
	keys      map[string][]any // every differing key, by encoding
	order     []string         // their encodings in the order found
	unsettled [][]any
}

// Difference is one key whose rows differ.
type Difference struct {
	Key     string `json:"key"`
	MySQL   string `json:"mysql"` // the row, or "absent"
	Lake    string `json:"lake"`
	MySQLAt string `json:"mysql_position"`
	LakeAt  string `json:"lake_position"`
}

// LakeAt is a lake snapshot a comparison read.
type LakeAt struct {
	Snapshot int64  `json:"snapshot"`
	Position string `json:"position"`
}

// RepairReport is what --repair did for a table.
type RepairReport struct {
	Requested int    `json:"requested"` // keys sent to the daemon
	Epoch     int64  `json:"epoch,omitempty"`
	Position  string `json:"position,omitempty"`
	Equal     int    `json:"equal_after"`     // of those, equal when compared again
	Still     int    `json:"still_different"` // still different
	Unsettled int    `json:"unsettled"`
	Error     string `json:"error,omitempty"`
}

// DifferingKeys returns every key found different, in the order found.
func (r *TableReport) DifferingKeys() [][]any {
	out := make([][]any, 0, len(r.order))
	for _, enc := range r.order {
		out = append(out, r.keys[enc])
	}
	return out
}

// UnsettledKeys returns the keys that kept changing.
func (r *TableReport) UnsettledKeys() [][]any { return r.unsettled }

// OK reports whether the table matched.
func (r *TableReport) OK() bool { return r.Status == StatusEqual }

func (r *TableReport) finish(err error) {
	r.Seconds = r.Elapsed.Seconds()
	r.MySQLSeconds, r.LakeSeconds = r.mysqlTime.Seconds(), r.lakeTime.Seconds()
	if err != nil {
		if why, ok := isUnverifiable(err); ok {
			r.Status, r.Reason = StatusUnverified, why
		} else {
			r.Status, r.Reason = StatusError, err.Error()
		}
		return
	}
	switch {
	case r.Differences > 0:
		r.Status = StatusDifferent
	case r.Unsettled > 0:
		r.Status = StatusUnsettled
	default:
		r.Status = StatusEqual
	}
}

func (r *TableReport) difference(ts *cdcsync.TableSchema, key []any, my, lake cdcsync.Row, pos cdcsync.Position, a at, examples int) {
	enc, err := encodeKey(key)
	if err != nil {
		return
	}
	if _, dup := r.keys[enc]; dup {
		return
	}
	r.keys[enc] = key
	r.order = append(r.order, enc)
	r.Differences++
	if len(r.Examples) < examples {
		r.Examples = append(r.Examples, Difference{Key: keyText(ts, key), MySQL: rowText(ts, my), Lake: rowText(ts, lake),
			MySQLAt: pos.String(), LakeAt: fmt.Sprintf("snapshot %d (%s)", a.snapshot, a.pos)})
	}
}

func (r *TableReport) mysqlRead(pos cdcsync.Position) {
	if r.MySQLFirst == "" {
		r.MySQLFirst = pos.String()
	}
	r.MySQLLast = pos.String()
}

func (r *TableReport) lakeAt(a at) {
	l := LakeAt{Snapshot: a.snapshot, Position: a.pos.String()}
	if n := len(r.Lake); n > 0 && r.Lake[n-1] == l {
		return
	}
	if len(r.Lake) >= 20 { // a long settle: keep the first and the latest ones
		r.Lake = append(r.Lake[:10], r.Lake[len(r.Lake)-9:]...)
	}
	r.Lake = append(r.Lake, l)
}

// Report is the outcome of a verify run.
type Report struct {
	OK      bool           `json:"ok"`
	Tables  []*TableReport `json:"tables"`
	Seconds float64        `json:"seconds"`
}

// WriteJSON writes r as JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// WriteText writes r for people.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, t := range r.Tables {
		fmt.Fprintf(&b, "%s: %s", t.Table, t.Status)
		switch t.Status {
		case StatusUnverified, StatusError:
			fmt.Fprintf(&b, ": %s\n", t.Reason)
			continue
		}
		fmt.Fprintf(&b, ", %s in %s compared in %.1fs (reading MySQL %.1fs, the lake %.1fs)", plural(t.Rows, "row"), plural(int64(t.Chunks), "chunk"),
			t.Seconds, t.MySQLSeconds, t.LakeSeconds)
		if t.ChunksDiffering > 0 {
			fmt.Fprintf(&b, "; %s differed at first, %s compared row by row", plural(int64(t.ChunksDiffering), "chunk"), plural(int64(t.KeysRechecked), "key"))
		}
		b.WriteString("\n")
		if t.Differences > 0 {
			fmt.Fprintf(&b, "  %s differ", plural(int64(t.Differences), "key"))
			if len(t.Examples) < t.Differences {
				fmt.Fprintf(&b, " (the first %d shown)", len(t.Examples))
			}
			b.WriteString(":\n")
			for _, d := range t.Examples {
				fmt.Fprintf(&b, "    key %s\n      MySQL:   %s\n               at %s\n      Iceberg: %s\n               at %s\n", d.Key, d.MySQL, d.MySQLAt, d.Lake, d.LakeAt)
			}
		}
		if t.Unsettled > 0 {
			fmt.Fprintf(&b, "  %s changed in every comparison and were not compared (raise --settle, or run verify when the load is lower)\n", plural(int64(t.Unsettled), "key"))
		}
		if t.MySQLFirst != "" {
			fmt.Fprintf(&b, "  MySQL read at %s", t.MySQLFirst)
			if t.MySQLLast != t.MySQLFirst {
				fmt.Fprintf(&b, " .. %s", t.MySQLLast)
			}
			b.WriteString("\n")
		}
		for _, l := range t.Lake {
			fmt.Fprintf(&b, "  Iceberg snapshot %d (holds %s)\n", l.Snapshot, l.Position)
		}
		if rp := t.Repair; rp != nil {
			if rp.Error != "" {
				fmt.Fprintf(&b, "  repair of %d keys failed: %s\n", rp.Requested, rp.Error)
			} else {
				fmt.Fprintf(&b, "  repaired %d keys in epoch %d (at %s): %d equal when compared again, %d still different, %d unsettled\n",
					rp.Requested, rp.Epoch, rp.Position, rp.Equal, rp.Still, rp.Unsettled)
			}
		}
	}
	verdict := "every table matches MySQL"
	if !r.OK {
		verdict = "differences found or tables not verified"
	}
	fmt.Fprintf(&b, "%s (%.1fs)\n", verdict, r.Seconds)
	_, err := io.WriteString(w, b.String())
	return err
}

// plural writes n and noun, with an s unless n is 1.
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
