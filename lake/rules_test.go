package lake

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdcsync/cdcsync"
)

// check validates the tables[] partition rules against the live columns,
// before run would fail creating the table.
func TestCheckRule(t *testing.T) {
	dir := t.TempDir()
	cfg := loadConfig(t, filepath.Join(dir, "c.yaml"), "source:\n  user: u\n  server_id: 7\n  include: [\"shop.*\"]\n"+
		"tables:\n  - match: shop.kv\n    partition: [\"day(v)\"]\n  - match: shop.kv2\n    partition: [\"bucket(4, nosuch)\"]\n  - match: shop.kv3\n    partition: [\"bucket(4, id)\", \"truncate(2, v)\"]\n")
	ts := func(name string) *cdcsync.TableSchema {
		s := kvSchema()
		s.ID.Table = name
		return s
	}
	for _, c := range []struct{ table, want string }{
		{"kv", `applies day to column "v", whose Iceberg type is string: use a transform for that type`},
		{"kv2", `names column "nosuch", which the table does not have (its columns: id, v)`},
		{"kv3", ""},
		{"other", ""},
	} {
		s := ts(c.table)
		err := CheckRule(cfg.Rule(s.ID.Database, s.ID.Table), s)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.table, err, c.want)
		}
	}
}
