package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The cached build of the Debezium peer is redone when any of its files
// changes, and only then.
func TestDebeziumStamp(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src", "main", "java", "cdcsync", "bench")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "pom.xml"), "<project/>")
	write(filepath.Join(src, "DebeziumPeer.java"), "class DebeziumPeer {}")
	a, err := debeziumStamp(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := debeziumStamp(dir); b != a {
		t.Fatalf("the stamp of unchanged files changed: %s, then %s", a, b)
	}
	write(filepath.Join(src, "DebeziumPeer.java"), "class DebeziumPeer { }")
	b, _ := debeziumStamp(dir)
	if b == a {
		t.Fatal("the stamp did not change with the Java source")
	}
	write(filepath.Join(dir, "pom.xml"), "<project></project>")
	if c, _ := debeziumStamp(dir); c == b {
		t.Fatal("the stamp did not change with the pom")
	}
}
