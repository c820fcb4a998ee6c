package binlogpos

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/cdcsync/cdcsync"
)

// oldPosition is cdcsync.Position as it was a struct: stored positions and
// checkpoints hold what encoding/json made of it.
type oldPosition struct {
	Flavor     string `json:"flavor"`
	GTIDSet    string `json:"gtid_set,omitempty"`
	File       string `json:"file,omitempty"`
	Offset     uint32 `json:"offset,omitempty"`
	ServerUUID string `json:"server_uuid,omitempty"`
}

func TestEncodingMatchesOldJSON(t *testing.T) {
	strs := []string{"", "mysql", "mariadb", "0-1-5", "0-1-5,1-2-7", "binlog.000003", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-20",
		`q"uote`, `back\slash`, "<html>&", "tab\tnew\nline\r\x00\x1f\b\f", "é ü 日本", "bad\xffutf8\xc3", "\u2028\u2029", "\x7f"}
	offsets := []uint32{0, 1, 4, 77, 4294967295}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return strs[rng.IntN(len(strs))] }
	for i := range 5000 {
		p := Pos{Flavor: pick(), GTIDSet: pick(), File: pick(), Offset: offsets[rng.IntN(len(offsets))], ServerUUID: pick()}
		if i%3 == 0 {
			p.GTIDSet = ""
		}
		want, err := json.Marshal(oldPosition(p))
		if err != nil {
			t.Fatal(err)
		}
		got := p.Position()
		if p.IsZero() {
			// Whatever its flavor, it names no position.
			if !got.IsZero() || got.Encode() != `{"flavor":""}` {
				t.Fatalf("%#v: zero position encoded as %q", p, got.Encode())
			}
			continue
		}
		if got.Encode() != string(want) {
			t.Fatalf("%#v: encoded %s, encoding/json gives %s", p, got.Encode(), want)
		}
		// It reads back the same, by the fast path or encoding/json's.
		var back oldPosition
		if err := json.Unmarshal(want, &back); err != nil {
			t.Fatal(err)
		}
		q, err := Decode(got)
		if err != nil || q != Pos(back) {
			t.Fatalf("%s decoded as %#v, %v; want %#v", want, q, err, back)
		}
		// And as the core reads it back from storage, it is == what the
		// source makes.
		d, err := cdcsync.DecodePosition(string(want))
		if err != nil || d != got {
			t.Fatalf("%s read back as %v, %v", want, d, err)
		}
	}
}

// TestOldStoredPositions: a checkpoint file and a snapshot summary property
// written by the cdcsync whose Position was a struct decode to positions ==
// the ones the source makes now, and a checkpoint's checksum still holds
// (it is of json.Marshal of the checkpoint).
func TestOldStoredPositions(t *testing.T) {
	const summary = `{"flavor":"mysql","file":"binlog.000003","offset":77,"server_uuid":"3e11fa47-71ca-11e1-9e33-c80aa9429562"}`
	p, err := cdcsync.DecodePosition(summary)
	want := Pos{Flavor: FlavorMySQL, File: "binlog.000003", Offset: 77, ServerUUID: "3e11fa47-71ca-11e1-9e33-c80aa9429562"}
	if err != nil || p != want.Position() || p.Encode() != summary {
		t.Fatalf("summary position read as %v, %v", p, err)
	}
	// The core renders a position it cannot read as its values in order.
	if p.String() != "mysql:binlog.000003:77:3e11fa47-71ca-11e1-9e33-c80aa9429562" || want.String() != "mysql:binlog.000003:77" {
		t.Fatalf("String() = %q, Pos.String() = %q", p.String(), want.String())
	}
	if s := (cdcsync.Position{}).String(); s != "none" {
		t.Fatalf("zero Position renders as %q", s)
	}
	// An indented checkpoint as lake writes it (MarshalIndent).
	const ckpt = `{
  "pipeline": "main",
  "epoch": 12,
  "position": {
    "flavor": "mariadb",
    "gtid_set": "0-1-42,1-2-7"
  },
  "time": "2024-05-01T10:00:00Z",
  "tables": [
    {
      "table": {
        "Database": "shop",
        "Table": "orders"
      },
      "epoch": 12
    }
  ]
}`
	var c cdcsync.Checkpoint
	if err := json.Unmarshal([]byte(ckpt), &c); err != nil {
		t.Fatal(err)
	}
	if c.Pos != (Pos{Flavor: FlavorMariaDB, GTIDSet: "0-1-42,1-2-7"}.Position()) || c.Pos.String() != "mariadb:0-1-42,1-2-7" {
		t.Fatalf("checkpoint position read as %v", c.Pos)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil || string(b) != ckpt {
		t.Fatalf("checkpoint written back as\n%s\n%v", b, err)
	}
	// A zero position, in a stop record say, is written as before.
	var z struct {
		P cdcsync.Position `json:"position"`
	}
	if b, _ := json.Marshal(z); string(b) != `{"position":{"flavor":""}}` {
		t.Fatalf("zero position written as %s", b)
	}
	if err := json.Unmarshal([]byte(`{"position":{"flavor":""}}`), &z); err != nil || !z.P.IsZero() {
		t.Fatalf("zero position read as %v, %v", z.P, err)
	}
}
