package cdcsync

import "testing"

func TestPositionRoundTrip(t *testing.T) {
	p := Position{Flavor: FlavorMySQL, File: "binlog.000003", Offset: 77, ServerUUID: "abc"}
	q, err := DecodePosition(p.Encode())
	if err != nil || q != p {
		t.Fatalf("round trip gave %v, %v", q, err)
	}
	if _, err := DecodePosition("{"); err == nil {
		t.Fatal("malformed position accepted")
	}
}
