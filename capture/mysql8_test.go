package capture

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
)

// readFixture feeds a binlog file written by a real MySQL server through
// the stream's reader, as Stream would, and returns the transactions.
func readFixture(t *testing.T, name string, cfg StreamConfig) []*cdcsync.Txn {
	t.Helper()
	txns, err := decodeFixture(name, cfg)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out []*cdcsync.Txn
	for _, txn := range txns {
		if !txn.Progress {
			out = append(out, txn)
		}
	}
	return out
}

// decodeFixture is readFixture returning the progress markers too, and the
// error that ended the file (as Stream would return it).
func decodeFixture(name string, cfg StreamConfig) ([]*cdcsync.Txn, error) {
	// The parser gets the stream's decoding options, as NewBinlogSyncer
	// passes them to its own.
	sc := DecodingSyncerConfig(replication.BinlogSyncerConfig{Flavor: binlogpos.FlavorMySQL})
	p := replication.NewBinlogParser()
	p.SetFlavor(sc.Flavor)
	p.SetParseTime(sc.ParseTime)
	p.SetTimestampStringLocation(sc.TimestampStringLocation)
	p.SetUseDecimal(sc.UseDecimal)
	p.SetUseFloatWithTrailingZero(sc.UseFloatWithTrailingZero)
	p.SetRenderJSONAsMySQLText(sc.RenderJSONAsMySQLText)
	// Some files were copied while their server had them open: the FDE
	// carries the in-use flag, and its CRC only verifies with the flag
	// cleared (as the server does). Their CRCs were checked when they were
	// collected (testdata/mysql8/PROVENANCE.md).
	p.SetVerifyChecksum(false)
	// As the stream does, the reader decodes the rows itself (and checks
	// each image against go-mysql's decoding).
	p.SetRowsEventDecodeFunc(deferRows)
	cfg.CheckRowImages = true
	r, err := newReader(cfg)
	if err != nil {
		return nil, err
	}
	var out []*cdcsync.Txn
	err = p.ParseFile(filepath.Join("testdata", "mysql8", name), 4, func(ev *replication.BinlogEvent) error {
		txn, err := r.handle(ev)
		if txn != nil {
			out = append(out, txn)
			if err == nil && r.restart != nil {
				err = r.restart // Stream ends after the transaction, as follow does
			}
		}
		return err
	})
	return out, err
}

// TestCompressedTransaction: with binlog_transaction_compression=ON
// (MySQL 8.0.20+) a transaction arrives as one TRANSACTION_PAYLOAD event;
// its rows reach the pipeline like those of an uncompressed transaction,
// at the position after the payload (issue 13: they were dropped).
func TestCompressedTransaction(t *testing.T) {
	id := cdcsync.TableID{Database: "test", Table: "tb1"}
	schema := &cdcsync.TableSchema{ID: id, Columns: []cdcsync.Column{
		{Name: "a", DataType: "int", ColumnType: "int", Kind: cdcsync.KindInt32},
	}, PrimaryKey: []int{0}}
	cfg := StreamConfig{Flavor: binlogpos.FlavorMySQL, ServerUUID: "fixture",
		Start:   binlogpos.Pos{Flavor: binlogpos.FlavorMySQL, File: "transaction_compression.000001", Offset: 4}.Position(),
		Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{id: schema}}
	txns := readFixture(t, "transaction_compression.000001", cfg)
	var changes []cdcsync.Change
	for _, txn := range txns {
		changes = append(changes, txn.Changes...)
	}
	if len(txns) != 1 || len(changes) != 1 {
		t.Fatalf("%d transactions with %d changes, want the one compressed transaction with its insert", len(txns), len(changes))
	}
	c := changes[0]
	if c.Table != id || c.Op != cdcsync.OpInsert || len(c.After) != 1 {
		t.Fatalf("change %+v, want an insert into test.tb1", c)
	}
	if _, ok := c.After[0].(int32); !ok {
		t.Fatalf("value %#v, want an int32", c.After[0])
	}
	if dec(txns[0].Pos).Offset <= 4 || dec(txns[0].Pos).File != "transaction_compression.000001" {
		t.Errorf("the transaction ends at %s, want the end of its payload event", txns[0].Pos)
	}
	t.Logf("transaction at %s: %v", txns[0].Pos, c.After)
}

// TestCompressedTransactionCatchingUp: a table whose committed position
// already holds the compressed transaction passes it over, and one whose
// position is just before it applies it: the payload's rows are compared
// at the transaction's end.
func TestCompressedTransactionCatchingUp(t *testing.T) {
	id := cdcsync.TableID{Database: "test", Table: "tb1"}
	schema := &cdcsync.TableSchema{ID: id, Columns: []cdcsync.Column{
		{Name: "a", DataType: "int", ColumnType: "int", Kind: cdcsync.KindInt32},
	}, PrimaryKey: []int{0}}
	const file = "transaction_compression.000001"
	for _, c := range []struct {
		committed uint32
		want      int
	}{{431, 0}, {430, 1}, {200, 1}} {
		cfg := StreamConfig{Flavor: binlogpos.FlavorMySQL, ServerUUID: "fixture",
			Start:     binlogpos.Pos{Flavor: binlogpos.FlavorMySQL, File: file, Offset: 4}.Position(),
			Schemas:   map[cdcsync.TableID]*cdcsync.TableSchema{id: schema},
			Committed: map[cdcsync.TableID]cdcsync.Position{id: binlogpos.Pos{Flavor: binlogpos.FlavorMySQL, File: file, Offset: c.committed, ServerUUID: "fixture"}.Position()}}
		n := 0
		for _, txn := range readFixture(t, file, cfg) {
			n += len(txn.Changes)
		}
		if n != c.want {
			t.Errorf("committed at offset %d: %d changes applied, want %d", c.committed, n, c.want)
		}
	}
}

// TestPartialJSONStopsTable: a PARTIAL_UPDATE_ROWS event (the server's
// binlog_row_value_options was set to PARTIAL_JSON while cdcsync ran) holds
// JSON diffs and a minimal before image that cdcsync cannot apply: the
// table stops at that transaction, with the position and the fix, and
// nothing of the transaction reaches it; the transactions before it are
// applied (issue 13).
func TestPartialJSONStopsTable(t *testing.T) {
	id := cdcsync.TableID{Database: "mysql", Table: "t"}
	schema := &cdcsync.TableSchema{ID: id, Columns: []cdcsync.Column{
		{Name: "id", DataType: "int", ColumnType: "int", Kind: cdcsync.KindInt32},
		{Name: "json_col", DataType: "json", ColumnType: "json", Kind: cdcsync.KindString, Nullable: true},
		{Name: "name", DataType: "varchar", ColumnType: "varchar(100)", Kind: cdcsync.KindString, Nullable: true},
		{Name: "age", DataType: "int", ColumnType: "int", Kind: cdcsync.KindInt32, Nullable: true},
	}, PrimaryKey: []int{0}}
	cfg := StreamConfig{Flavor: binlogpos.FlavorMySQL, ServerUUID: "fixture",
		Start:   binlogpos.Pos{Flavor: binlogpos.FlavorMySQL, File: "json.binlog.000001", Offset: 4}.Position(),
		Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{id: schema}}
	txns := readFixture(t, "json.binlog.000001", cfg)
	ops := map[cdcsync.Op]int{}
	var stop *cdcsync.SchemaChange
	for _, txn := range txns {
		for _, c := range txn.Changes {
			if stop != nil {
				t.Fatalf("a change of %s after it stopped: %+v", c.Table, c)
			}
			ops[c.Op]++
		}
		for i := range txn.DDL {
			if txn.DDL[i].Kind == cdcsync.ChangeStop {
				stop = &txn.DDL[i]
				if len(txn.Changes) > 0 {
					t.Errorf("the stopping transaction still carries %d changes", len(txn.Changes))
				}
			}
		}
	}
	if ops[cdcsync.OpInsert] != 6 || ops[cdcsync.OpUpdate] != 6 {
		t.Errorf("changes before the partial update: %v, want 6 inserts and 6 updates", ops)
	}
	if stop == nil || stop.Table != id {
		t.Fatalf("the table was not stopped at the partial JSON update (DDL %+v)", stop)
	}
	for _, want := range []string{"PARTIAL_JSON", "binlog_row_value_options", "json.binlog.000001", "cdcsync resync mysql.t"} {
		if !strings.Contains(stop.Reason, want) {
			t.Errorf("the reason lacks %q: %s", want, stop.Reason)
		}
	}
}

// TestTaggedGTID: a MySQL 8.4+ tagged GTID (uuid:tag:N, a
// GTID_TAGGED_LOG_EVENT) names its transaction, enters the stream's GTID
// set, and a committed position holding it covers the transaction (issue
// 13: the event was ignored, so the transaction carried no GTID).
func TestTaggedGTID(t *testing.T) {
	id := cdcsync.TableID{Database: "test", Table: "orders"}
	schema := &cdcsync.TableSchema{ID: id, Columns: []cdcsync.Column{
		{Name: "id", DataType: "int", ColumnType: "int", Kind: cdcsync.KindInt32},
		{Name: "qty", DataType: "int", ColumnType: "int", Kind: cdcsync.KindInt32, Nullable: true},
		{Name: "price", DataType: "decimal", ColumnType: "decimal(10,2)", Kind: cdcsync.KindDecimal, Nullable: true, Precision: 10, Scale: 2},
	}, PrimaryKey: []int{0}}
	const uuid = "55778904-0299-11f1-b1b8-4ef0c4956feb"
	start := binlogpos.Pos{Flavor: binlogpos.FlavorMySQL, GTIDSet: uuid + ":1-13:mytag:1-2"}.Position()
	cfg := StreamConfig{Flavor: binlogpos.FlavorMySQL, Start: start, Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{id: schema}}
	txns := readFixture(t, "binlog_transaction_with_GTID_TAG.000001", cfg)
	if len(txns) != 1 || len(txns[0].Changes) != 1 {
		t.Fatalf("%d transactions, want the one tagged transaction with its insert", len(txns))
	}
	txn := txns[0]
	if txn.GTID != uuid+":mytag:3" {
		t.Errorf("GTID %q, want %s:mytag:3", txn.GTID, uuid)
	}
	if got := txn.Changes[0].After; got[0] != int32(3) || got[1] != int32(100) {
		t.Errorf("row %v, want id 3, qty 100", got)
	}
	if covered, err := (binlogpos.Order{}).Covers(start, txn); err != nil || covered {
		t.Errorf("the start position covers the new transaction: %v, %v", covered, err)
	}
	if covered, err := (binlogpos.Order{}).Covers(txn.Pos, txn); err != nil || !covered {
		t.Errorf("its own position %s does not cover it: %v, %v", txn.Pos, covered, err)
	}
	if ok, err := (binlogpos.Order{}).Includes(txn.Pos, start); err != nil || !ok {
		t.Errorf("its position %s does not include the start %s: %v", txn.Pos, start, err)
	}
}
