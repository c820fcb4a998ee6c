package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdcsync/cdcsync/config"
)

// cdcsync check says where the key index goes, and fails a path that
// cannot be a directory.
func TestCheckKeyIndex(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		indexDir string
		ok       bool
		want     string
	}{
		{filepath.Join(dir, "new", "index"), true, "goes to " + filepath.Join(dir, "new", "index")},
		{filepath.Join(file, "index"), false, "is not a directory"},
	} {
		cfg := &config.Config{Pipeline: "p", Deletes: config.Deletes{Mode: "position", IndexDir: tc.indexDir}}
		var got string
		var ok bool
		checkKeyIndex(cfg, func(o, _ bool, check, msg string) { ok, got = o, check+": "+msg })
		if ok != tc.ok || !strings.Contains(got, tc.want) {
			t.Errorf("index_dir %s: ok %v %q; want %v and %q", tc.indexDir, ok, got, tc.ok, tc.want)
		}
	}
}
