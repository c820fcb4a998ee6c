package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
)

// The benchmark table: 15 columns, about 200 bytes a row, with the types
// cdcsync maps most often. lake/writer_bench_test.go, merge/bench_test.go and
// capture/bench_test.go use the same shape.
const (
	benchDB    = "bench"
	benchTable = "t"
)

const createTable = `CREATE TABLE bench.t (
  id         BIGINT        NOT NULL PRIMARY KEY,
  account_id INT           NOT NULL,
  qty        INT           NULL,
  amount     DECIMAL(12,2) NOT NULL,
  price      DECIMAL(18,4) NULL,
  ratio      DOUBLE        NULL,
  status     VARCHAR(16)   NOT NULL,
  name       VARCHAR(64)   NULL,
  email      VARCHAR(100)  NULL,
  note       TEXT          NULL,
  created_at DATETIME(6)   NOT NULL,
  updated_at TIMESTAMP(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  birth      DATE          NULL,
  flags      TINYINT       NULL,
  attrs      JSON          NULL
) ENGINE=InnoDB`

// rowSelect is the select list that makes row seq+off from the SEQUENCE
// engine's seq column. created_at is spread over ten years in no order of
// id (a multiplicative hash), like the orders of a shop whose old orders
// keep changing: an update of consecutive ids touches a day each, which is
// what --partition "day(created_at), ..." measures.
func rowSelect(off int64) string {
	id := fmt.Sprintf("(seq+%d)", off)
	r := strings.NewReplacer("ID", id)
	return r.Replace(`ID, ID % 100000, IF(ID % 10 = 0, NULL, ID % 1000),
  (ID * 7919 % 10000000) / 100, IF(ID % 10 = 0, NULL, (ID * 104729 % 10000000000) / 10000),
  IF(ID % 10 = 0, NULL, (ID * 37 % 100000) / 100.0),
  ELT(1 + ID % 6, 'new', 'paid', 'shipped', 'delivered', 'cancelled', 'refunded'),
  CONCAT('customer ', LPAD(ID, 8, '0')), CONCAT('user', ID, '@example', ID % 97, '.com'),
  CONCAT('order ', ID, ' note: lorem ipsum dolor sit amet ', MD5(ID)),
  TIMESTAMP('2016-01-01 00:00:00') + INTERVAL (ID * 2654435761 % 315360000) SECOND + INTERVAL ID % 1000000 MICROSECOND,
  TIMESTAMP('2021-01-01 00:00:00') + INTERVAL ID % 86400000 * 1000 MICROSECOND,
  IF(ID % 10 = 0, NULL, DATE('1960-01-01') + INTERVAL ID % 20000 DAY),
  IF(ID % 10 = 0, NULL, ID % 128),
  JSON_OBJECT('k', ID % 1000, 'tags', JSON_ARRAY('a', 'b'), 'v', ELT(1 + ID % 3, 'new', 'paid', 'shipped'))`)
}

// insertRows inserts ids off+1 .. off+n.
func insertRows(off, n int64) string {
	return fmt.Sprintf("INSERT INTO bench.t SELECT %s FROM bench.seq_1_to_%d", rowSelect(off), n)
}

// updateRows changes several columns of the rows with ids in [a, a+n).
func updateRows(a, n int64, gen int) string {
	return fmt.Sprintf("%s WHERE id BETWEEN %d AND %d", updateSet(gen), a, a+n-1)
}

// updateFrom changes the same columns of the first n rows with ids ≥ a:
// exactly n row changes while the table has them, whatever ids earlier
// deletes removed.
func updateFrom(a, n int64, gen int) string {
	return fmt.Sprintf("%s WHERE id >= %d ORDER BY id LIMIT %d", updateSet(gen), a, n)
}

func updateSet(gen int) string {
	return fmt.Sprintf(`UPDATE bench.t SET qty = IFNULL(qty, 0) + 1, amount = amount + 0.01, status = ELT(1 + (id + %d) %% 6,
  'new', 'paid', 'shipped', 'delivered', 'cancelled', 'refunded'), updated_at = NOW(6),
  note = CONCAT(LEFT(note, 70), ' u%d')`, gen, gen)
}

func deleteRows(a, n int64) string {
	return fmt.Sprintf("DELETE FROM bench.t WHERE id BETWEEN %d AND %d", a, a+n-1)
}

// deleteFrom deletes the first n rows with ids ≥ a.
func deleteFrom(a, n int64) string {
	return fmt.Sprintf("DELETE FROM bench.t WHERE id >= %d ORDER BY id LIMIT %d", a, n)
}

// fillTable creates bench.t with rows 1..n.
func fillTable(conn *client.Conn, n int64) error {
	for _, q := range []string{"DROP DATABASE IF EXISTS bench", "CREATE DATABASE bench", createTable} {
		if _, err := conn.Execute(q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	const chunk = 100_000
	for off := int64(0); off < n; off += chunk {
		if _, err := conn.Execute(insertRows(off, min(chunk, n-off))); err != nil {
			return fmt.Errorf("fill bench.t: %w", err)
		}
	}
	return nil
}

// txnRecord is one transaction of a load generator.
type txnRecord struct {
	seq    uint64    // sequence number of its MariaDB GTID (domain 0)
	commit time.Time // when COMMIT returned
	rows   int64     // row changes
}

// lastGTID reads the session's last GTID (MariaDB) and returns its
// sequence number.
func lastGTID(conn *client.Conn) (uint64, error) {
	r, err := conn.Execute("SELECT @@last_gtid")
	if err != nil {
		return 0, err
	}
	defer r.Close()
	s, err := r.GetString(0, 0)
	if err != nil {
		return 0, err
	}
	return gtidSeq(s)
}

func gtidSeq(g string) (uint64, error) {
	var d, srv uint32
	var seq uint64
	if _, err := fmt.Sscanf(strings.TrimSpace(g), "%d-%d-%d", &d, &srv, &seq); err != nil {
		return 0, fmt.Errorf("GTID %q: %w", g, err)
	}
	if d != 0 {
		return 0, fmt.Errorf("GTID %q is not in domain 0", g)
	}
	return seq, nil
}

// changeGen generates a mix of row changes on bench.t: multi-row UPDATEs,
// INSERTs of new ids and DELETEs by id range.
type changeGen struct {
	r      *rand.Rand
	maxID  int64 // highest id ever inserted
	gen    int
	update int // percent of updates; the rest is split between inserts and deletes
}

// statement returns the next statement for about n rows.
func (g *changeGen) statement(n int64) string {
	g.gen++
	p := g.r.IntN(100)
	switch {
	case p < g.update:
		a := 1 + g.r.Int64N(max(1, g.maxID-n))
		return updateRows(a, n, g.gen)
	case p < g.update+(100-g.update)/2:
		q := insertRows(g.maxID, n)
		g.maxID += n
		return q
	default:
		a := 1 + g.r.Int64N(max(1, g.maxID-n))
		return deleteRows(a, n)
	}
}

// generateChanges runs transactions of 100 to 1000 row changes (one or two
// statements each) until at least total rows changed. It returns the
// transactions it ran.
func generateChanges(conn *client.Conn, g *changeGen, total int64) ([]txnRecord, error) {
	var txns []txnRecord
	var done int64
	for done < total {
		size := 100 + g.r.Int64N(901)
		stmts := 1 + g.r.IntN(2)
		if _, err := conn.Execute("BEGIN"); err != nil {
			return nil, err
		}
		var rows int64
		for i := 0; i < stmts; i++ {
			r, err := conn.Execute(g.statement(size / int64(stmts)))
			if err != nil {
				return nil, err
			}
			rows += int64(r.AffectedRows)
			r.Close()
		}
		if _, err := conn.Execute("COMMIT"); err != nil {
			return nil, err
		}
		now := time.Now()
		if rows == 0 {
			continue // nothing was written: no GTID
		}
		seq, err := lastGTID(conn)
		if err != nil {
			return nil, err
		}
		txns = append(txns, txnRecord{seq: seq, commit: now, rows: rows})
		done += rows
	}
	return txns, nil
}
