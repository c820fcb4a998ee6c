// Package verify compares the tables a pipeline mirrors with MySQL while
// both keep changing (`cdcsync verify`): per primary-key chunk a checksum
// of canonical row texts computed by MySQL against the same checksum over
// the Iceberg rows of a snapshot that covers the chunk's read position;
// the rows of a chunk that differs; and each key that differs, read again
// until the lake covers a read that saw it, so that changes in flight are
// never reported. It knows neither MySQL nor Iceberg: Source (capture) and
// Lake (lake) are the two sides, and cmd/cdcsync wires them.
package verify

import (
	"context"

	"github.com/cdcsync/cdcsync"
)

// Sum is the checksum of a set of rows: how many, and the XOR of their
// row hashes (RowHash).
type Sum struct {
	Rows int64
	Hash uint64
}

// Add adds a row hash to s.
func (s *Sum) Add(hash uint64) {
	s.Rows++
	s.Hash ^= hash
}

// Read says where a MySQL read saw the table. Every transaction it shows is
// before Pos. With Exact, the read shows exactly the transactions up to Pos
// (MariaDB reports a consistent snapshot's position) and Low equals Pos;
// else it shows every transaction before Low and possibly some of those
// between Low and Pos.
type Read struct {
	Pos   cdcsync.Position
	Low   cdcsync.Position
	Exact bool
}

// Source is MySQL (capture.VerifyReader). Bounds are the opaque chunk
// bounds of the initial copy ("" is the start of the table); keys are the
// canonical values of a primary key, in key order.
type Source interface {
	// Schema is the table's current schema.
	Schema(ctx context.Context, id cdcsync.TableID) (*cdcsync.TableSchema, error)
	// Ordered reports whether Go orders ts's keys as the server does
	// (CompareKeys): only then is a table split into chunks.
	Ordered(ts *cdcsync.TableSchema) bool
	// NextBound returns the bound closing the chunk of about rows rows
	// after after; last when that chunk runs to the end of the table.
	NextBound(ctx context.Context, ts *cdcsync.TableSchema, after string, rows int) (hi string, last bool, err error)
	// BoundKey returns the key a bound stands for.
	BoundKey(ts *cdcsync.TableSchema, bound string) ([]any, error)
	// Checksum sums the rows after < key <= hi (to the end when last),
	// on the server.
	Checksum(ctx context.Context, ts *cdcsync.TableSchema, after, hi string, last bool) (Sum, Read, error)
	// Hashes calls fn with the key and the row hash of each of those rows.
	Hashes(ctx context.Context, ts *cdcsync.TableSchema, after, hi string, last bool, fn func(key []any, hash uint64) error) (Read, error)
	// Rows reads the rows with the given keys (absent: no such row) in one
	// read, exact where the server can tell its position.
	Rows(ctx context.Context, ts *cdcsync.TableSchema, keys [][]any) ([]cdcsync.Row, Read, error)
}

// Epoch is one commit of the pipeline on a table's lineage.
type Epoch struct {
	Snapshot int64
	Epoch    int64
	Pos      cdcsync.Position
}

// TableState is what the lake holds of a table now.
type TableState struct {
	// Schema is the MySQL schema the Iceberg table mirrors.
	Schema *cdcsync.TableSchema
	// Epochs are the pipeline's commits on the lineage readers see,
	// oldest first, as far back as snapshots are kept.
	Epochs []Epoch
	// Head is the snapshot readers see (-1: none).
	Head int64
	// Effective is the position up to which the table holds every
	// transaction: its last commit's, or the pipeline checkpoint's when
	// the table did not change since.
	Effective cdcsync.Position
	// Unverifiable, when set, says why the table cannot be compared now
	// (stopped, being copied).
	Unverifiable string
}

// Lake is the Iceberg side (lake.VerifyView).
type Lake interface {
	// Tables lists the tables the pipeline mirrors.
	Tables(ctx context.Context) ([]cdcsync.TableID, error)
	// State reads the table's state from the catalog, afresh.
	State(ctx context.Context, id cdcsync.TableID) (*TableState, error)
	// Scan calls fn with every row of the table as of snapshot, in the
	// schema of ts.
	Scan(ctx context.Context, id cdcsync.TableID, ts *cdcsync.TableSchema, snapshot int64, fn func(cdcsync.Row) error) error
	// Touched returns the keys (cdcsync.AppendTuple encodings) that the
	// commit of snapshot changed; all is true when it may have changed
	// any row (it removed data files, as TRUNCATE does).
	Touched(ctx context.Context, id cdcsync.TableID, ts *cdcsync.TableSchema, snapshot int64) (keys map[string]bool, all bool, err error)
}
