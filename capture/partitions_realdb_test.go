package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"strings"
	"testing"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

// TestEstimatePartitionsRealDB: on a real MariaDB, the layout of issue 23
// over 20,000 orders spread across ten years warns and proposes a month
// layout; an identity field counts its distinct values.
func TestEstimatePartitionsRealDB(t *testing.T) {
	db := rdbStart(t)
	conn := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	rdbExec(t, conn, "CREATE DATABASE shop",
		"CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, created_at DATETIME(6) NOT NULL, region VARCHAR(8))",
		"INSERT INTO shop.orders SELECT seq, TIMESTAMP('2016-01-01') + INTERVAL (seq * 2654435761 % 315360000) SECOND, ELT(1 + seq % 5, 'eu', 'us', 'ap', 'sa', 'af') FROM shop.seq_1_to_20000",
		"ANALYZE TABLE shop.orders")
	id := cdcsync.TableID{Database: "shop", Table: "orders"}
	fields := []config.PartitionField{{Column: "created_at", Transform: config.TransformDay}, {Column: "id", Transform: config.TransformBucket, Param: 8}}
	est, err := EstimatePartitions(context.Background(), conn, binlogpos.FlavorMariaDB, id, fields)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(est.String())
	if est.Rows < 15_000 || est.Rows > 25_000 {
		t.Errorf("rows %d, want about 20,000", est.Rows)
	}
	if d := est.Fields[0].Distinct; d < 3600 || d > 3660 {
		t.Errorf("day(created_at) has %v values, want about 3,650 (ten years)", d)
	}
	if !est.Warn() || !strings.Contains(est.String(), `partition: ["month(created_at)"]`) || !strings.Contains(est.String(), "created_at spans 10.0 years") {
		t.Errorf("no warning with a month layout: %s", est.String())
	}
	est, err = EstimatePartitions(context.Background(), conn, binlogpos.FlavorMariaDB, id, []config.PartitionField{{Column: "region", Transform: config.TransformIdentity}})
	if err != nil {
		t.Fatal(err)
	}
	if est.Partitions != 5 || est.Warn() {
		t.Errorf("identity(region): %v partitions, warn %v; want 5 and no warning: %s", est.Partitions, est.Warn(), est.String())
	}
}
