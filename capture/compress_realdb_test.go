package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
)

// TestMariaDBCompressedEvents: with log_bin_compress=ON, MariaDB writes
// rows and query events compressed (WRITE/UPDATE/DELETE_ROWS_COMPRESSED,
// QUERY_COMPRESSED); every change and every DDL statement reaches the
// pipeline as from an uncompressed binlog (issue 13).
func TestMariaDBCompressedEvents(t *testing.T) {
	db := rdbStart(t, "--log-bin-compress=ON", "--log-bin-compress-min-len=10")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	if v := rdbQueryString(t, root, "SELECT @@log_bin_compress"); v != "1" {
		t.Fatalf("log_bin_compress = %s, want 1", v)
	}
	rdbExec(t, root, "CREATE DATABASE cz", "CREATE TABLE cz.t (id INT PRIMARY KEY, pad VARCHAR(2000), n INT)")
	id := cdcsync.TableID{Database: "cz", Table: "t"}
	schema, err := LoadSchema(ctx, root, id)
	if err != nil {
		t.Fatal(err)
	}
	start := binlogpos.Pos{Flavor: binlogpos.FlavorMariaDB, GTIDSet: rdbQueryString(t, root, "SELECT @@gtid_binlog_pos")}.Position()
	cfg := StreamConfig{Source: rdbSource(db.Host, db.Port, "root", ""), Flavor: binlogpos.FlavorMariaDB, ServerUUID: "test", Start: start,
		Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{id: schema}, SchemaPos: map[cdcsync.TableID]cdcsync.Position{id: start}}
	out := make(chan *cdcsync.Txn, 64)
	errc := make(chan error, 1)
	go func() { errc <- Stream(ctx, cfg, out) }()

	pad := strings.Repeat("compressible ", 100)
	var vals []string
	for i := 1; i <= 50; i++ {
		vals = append(vals, fmt.Sprintf("(%d, '%s', %d)", i, pad, i))
	}
	rdbExec(t, root,
		"INSERT INTO cz.t VALUES "+strings.Join(vals, ","),
		"UPDATE cz.t SET n = n + 100 WHERE id <= 20",
		"DELETE FROM cz.t WHERE id > 40",
		"ALTER TABLE cz.t ADD COLUMN note VARCHAR(100) NULL DEFAULT NULL /* a compressed query event */",
		"INSERT INTO cz.t VALUES (100, '"+pad+"', 1, 'after the alter')")
	ops := map[cdcsync.Op]int{}
	ddl := 0
	var last cdcsync.Change
	deadline := time.After(time.Minute)
	for ops[cdcsync.OpInsert] < 51 {
		select {
		case txn := <-out:
			ddl += len(txn.DDL)
			for _, c := range txn.Changes {
				ops[c.Op]++
				last = c
			}
		case err := <-errc:
			t.Fatalf("Stream: %v (changes so far %v)", err, ops)
		case <-deadline:
			t.Fatalf("after a minute: changes %v, %d DDL statements", ops, ddl)
		}
	}
	if ops[cdcsync.OpUpdate] != 20 || ops[cdcsync.OpDelete] != 10 || ddl != 1 {
		t.Errorf("changes %v and %d DDL statements; want 51 inserts, 20 updates, 10 deletes and the ALTER", ops, ddl)
	}
	if len(last.After) != 4 || last.After[3] != "after the alter" {
		t.Errorf("the row inserted after the compressed ALTER decoded as %v, want its new column", last.After)
	}
	// The server did write them compressed.
	file := rdbQueryString(t, root, "SHOW MASTER STATUS")
	r, err := root.Execute("SHOW BINLOG EVENTS IN '" + file + "'")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for i := 0; i < r.RowNumber(); i++ {
		k, _ := r.GetString(i, 2)
		kinds[k]++
	}
	for _, want := range []string{"Write_rows_compressed_v1", "Update_rows_compressed_v1", "Delete_rows_compressed_v1", "Query_compressed"} {
		if kinds[want] == 0 {
			t.Errorf("the binlog has no %s event: %v", want, kinds)
		}
	}
}
