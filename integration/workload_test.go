package integration

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

// The workload schema covers the types of this stage, an integer key on a
// table partitioned by a string column (so updates move rows between
// partitions), a composite string+int key, and a BIGINT UNSIGNED key on a
// table partitioned by day and bucket.
var workloadSchema = []string{
	`CREATE TABLE items (
		id INT NOT NULL PRIMARY KEY,
		region VARCHAR(8) NOT NULL,
		name VARCHAR(64),
		qty INT UNSIGNED,
		price DECIMAL(12,2),
		big BIGINT UNSIGNED,
		ratio DOUBLE,
		f FLOAT,
		born DATE,
		updated DATETIME(6),
		seen TIMESTAMP(3) NULL,
		payload BLOB,
		doc JSON
	)`,
	`CREATE TABLE pairs (a VARCHAR(16) NOT NULL, b INT NOT NULL, v BIGINT, note TEXT, PRIMARY KEY (a, b))`,
	`CREATE TABLE events (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, created DATETIME NOT NULL, kind CHAR(10), amount DECIMAL(8,3), code VARBINARY(8))`,
}

const workloadTables = `tables:
  - match: %[1]s.items
    partition: ["region"]
  - match: %[1]s.events
    partition: ["day(created)", "bucket(4, id)"]`

func createWorkloadSchema(t *testing.T, dbName string) {
	t.Helper()
	createWorkloadSchemaOn(t, db, dbName)
}

func createWorkloadSchemaOn(t *testing.T, server *testenv.MariaDB, dbName string) {
	t.Helper()
	for _, q := range workloadSchema {
		q = strings.Replace(q, "CREATE TABLE ", "CREATE TABLE "+dbName+".", 1)
		if err := server.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// workload issues random transactions against one database.
type workload struct {
	db   string
	r    *rand.Rand
	conn *client.Conn
}

func newWorkload(t *testing.T, dbName string, seed uint64) *workload {
	t.Helper()
	return newWorkloadOn(t, db, dbName, seed)
}

func newWorkloadOn(t *testing.T, server *testenv.MariaDB, dbName string, seed uint64) *workload {
	t.Helper()
	conn, err := server.Connect(testenv.RootUser, "", dbName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Logf("workload on %s with seed %d", dbName, seed)
	return &workload{db: dbName, r: rand.New(rand.NewPCG(seed, 1)), conn: conn}
}

var regions = []string{"eu", "us", "apac", "latam"}

func (w *workload) itemValues() []any {
	r := w.r
	var seen any
	if r.IntN(4) > 0 {
		seen = fmt.Sprintf("2024-%02d-%02d %02d:%02d:%02d.%03d", 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000))
	}
	var payload any
	if r.IntN(3) > 0 {
		payload = []byte{byte(r.IntN(256)), 0, byte(r.IntN(256))}
	}
	return []any{
		regions[r.IntN(len(regions))],
		fmt.Sprintf("item-%d-é🙂", r.IntN(1000)),
		r.Uint32(),
		fmt.Sprintf("%d.%02d", r.IntN(100000)-50000, r.IntN(100)),
		fmt.Sprintf("%d", r.Uint64()),
		float64(r.IntN(1<<20)) / 8,
		float64(r.IntN(1<<12)) / 4,
		fmt.Sprintf("%04d-%02d-%02d", 1950+r.IntN(100), 1+r.IntN(12), 1+r.IntN(28)),
		fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d.%06d", 1960+r.IntN(80), 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000000)),
		seen,
		payload,
		fmt.Sprintf(`{"n": %d, "s": "ü%d", "a": [1, 2]}`, r.IntN(100), r.IntN(9)),
	}
}

// statement returns one random data change.
func (w *workload) statement() (string, []any) {
	r := w.r
	id := 1 + r.IntN(150)
	switch r.IntN(16) {
	case 0, 1, 2:
		return "INSERT IGNORE INTO items (id, region, name, qty, price, big, ratio, f, born, updated, seen, payload, doc) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
			append([]any{id}, w.itemValues()...)
	case 3:
		return "UPDATE items SET name = ?, qty = qty DIV 2, price = price + 1 WHERE id = ?", []any{fmt.Sprintf("renamed-%d", r.IntN(100)), id}
	case 4:
		// Moves the row to another partition.
		return "UPDATE items SET region = ? WHERE id = ?", []any{regions[r.IntN(len(regions))], id}
	case 5:
		// Changes the primary key.
		return "UPDATE IGNORE items SET id = ? WHERE id = ?", []any{1 + r.IntN(150), id}
	case 6:
		return "DELETE FROM items WHERE id = ?", []any{id}
	case 7:
		lo := 1 + r.IntN(150)
		return "UPDATE items SET ratio = ratio + 0.5, seen = NULL WHERE id BETWEEN ? AND ?", []any{lo, lo + r.IntN(20)}
	case 8, 9:
		return "INSERT INTO pairs (a, b, v, note) VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE v = v + 1, note = VALUES(note)",
			[]any{string(rune('a' + r.IntN(5))), r.IntN(30), r.Int64() - r.Int64(), strings.Repeat("x", r.IntN(50))}
	case 10:
		return "UPDATE IGNORE pairs SET a = ? WHERE a = ? AND b = ?", []any{string(rune('a' + r.IntN(5))), string(rune('a' + r.IntN(5))), r.IntN(30)}
	case 11:
		return "DELETE FROM pairs WHERE a = ? AND b < ?", []any{string(rune('a' + r.IntN(5))), r.IntN(5)}
	case 12, 13:
		return "INSERT IGNORE INTO events (id, created, kind, amount, code) VALUES (?, ?, ?, ?, ?)",
			[]any{fmt.Sprintf("%d", uint64(1)<<63+uint64(r.IntN(150))), fmt.Sprintf("2024-05-%02d %02d:00:00", 1+r.IntN(5), r.IntN(24)),
				fmt.Sprintf("k%d", r.IntN(5)), fmt.Sprintf("%d.%03d", r.IntN(99999)-50000, r.IntN(1000)), []byte{1, byte(r.IntN(256))}}
	case 14:
		// Moves the event to another day partition.
		return "UPDATE events SET created = created + INTERVAL ? DAY, kind = 'moved' WHERE id = ?",
			[]any{1 + r.IntN(3), fmt.Sprintf("%d", uint64(1)<<63+uint64(r.IntN(150)))}
	default:
		return "DELETE FROM events WHERE id = ?", []any{fmt.Sprintf("%d", uint64(1)<<63+uint64(r.IntN(150)))}
	}
}

// txn runs one transaction of 1 to 6 statements; one in ten rolls back.
// Single statements run in autocommit mode half of the time.
func (w *workload) txn() error {
	n := 1 + w.r.IntN(6)
	if n == 1 && w.r.IntN(2) == 0 {
		q, args := w.statement()
		_, err := w.conn.Execute(q, args...)
		return err
	}
	if err := w.conn.Begin(); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		q, args := w.statement()
		if _, err := w.conn.Execute(q, args...); err != nil {
			_ = w.conn.Rollback()
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	if w.r.IntN(10) == 0 {
		return w.conn.Rollback()
	}
	return w.conn.Commit()
}

func (w *workload) run(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := w.txn(); err != nil {
			t.Fatalf("workload transaction %d: %v", i, err)
		}
	}
}
