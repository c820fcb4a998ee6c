package capture

import (
	"context"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

// source.tls.mode: preferred against a server without TLS works the same
// on every connection: queries (Connect) and the binlog stream fall back
// to a plain connection (issue 15: check passed and run looped on "the
// MySQL Server does not support TLS required by the client").
func TestPreferredTLSWithoutServerTLS(t *testing.T) {
	db := rdbStart(t)
	src := rdbSource(db.Host, db.Port, "root", "")
	src.TLS = config.TLS{Mode: config.TLSPreferred}
	conn := rdbConnect(t, src) // queries fall back already
	rdbExec(t, conn, "CREATE DATABASE tp", "CREATE TABLE tp.t (id INT PRIMARY KEY, v VARCHAR(10))")
	id := cdcsync.TableID{Database: "tp", Table: "t"}
	schemas, err := LoadSchemas(context.Background(), conn, []cdcsync.TableID{id})
	if err != nil {
		t.Fatal(err)
	}
	start, err := CurrentPosition(context.Background(), conn, cdcsync.FlavorMariaDB, "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := make(chan *cdcsync.Txn, 16)
	done := make(chan error, 1)
	go func() {
		done <- Stream(ctx, StreamConfig{Source: src, Flavor: cdcsync.FlavorMariaDB, ServerUUID: "test", Start: start,
			Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{id: schemas[0]}}, out)
	}()
	rdbExec(t, conn, "INSERT INTO tp.t VALUES (1, 'plain')")
	for {
		select {
		case txn := <-out:
			if len(txn.Changes) == 1 && txn.Changes[0].After[1] == "plain" {
				cancel()
				<-done
				return
			}
		case err := <-done:
			t.Fatalf("the stream ended before the row arrived: %v", err)
		case <-ctx.Done():
			t.Fatal("no row from the binlog stream in 30 s with source.tls.mode: preferred and a server without TLS")
		}
	}
}
