package cdcsync

import (
	"encoding/json"
	"testing"
)

func TestPositionRoundTrip(t *testing.T) {
	p := PositionFromEncoded(`{"flavor":"mysql","file":"binlog.000003","offset":77,"server_uuid":"abc"}`)
	q, err := DecodePosition(p.Encode())
	if err != nil || q != p {
		t.Fatalf("round trip gave %v, %v", q, err)
	}
	// Read back from storage in another layout, it is the same position.
	if q, err := DecodePosition("{ \"flavor\": \"mysql\",\n \"file\": \"binlog.000003\", \"offset\": 77, \"server_uuid\": \"abc\" }"); err != nil || q != p {
		t.Fatalf("indented position gave %v, %v", q, err)
	}
	for _, bad := range []string{"{", "", `"x"`, "7"} {
		if _, err := DecodePosition(bad); err == nil {
			t.Fatalf("malformed position %q accepted", bad)
		}
	}
}

// TestZeroPosition: no position is stored as it was when Position was a
// struct of MySQL fields, and reads back as the zero Position.
func TestZeroPosition(t *testing.T) {
	var z Position
	if !z.IsZero() || z.Encode() != `{"flavor":""}` {
		t.Fatalf("zero position: %v %q", z.IsZero(), z.Encode())
	}
	b, err := json.Marshal(StopInfo{Reason: "r"})
	if err != nil || string(b) != `{"position":{"flavor":""},"reason":"r","time":"0001-01-01T00:00:00Z"}` {
		t.Fatalf("stop info written as %s, %v", b, err)
	}
	var s StopInfo
	if err := json.Unmarshal(b, &s); err != nil || s.Position != z {
		t.Fatalf("stop info read as %+v, %v", s, err)
	}
	for _, enc := range []string{`{"flavor":""}`, `{}`, `null`} {
		if p, err := DecodePosition(enc); err != nil || p != z {
			t.Fatalf("%s decoded as %v, %v", enc, p, err)
		}
	}
}
