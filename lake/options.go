package lake

import (
	"time"

	"github.com/cdcsync/cdcsync/config"
)

// Options is what a Lake takes from the configuration: where the tables
// live, the pipeline it commits for, and the settings of each table. It
// holds nothing of the source (no MySQL address or password).
type Options struct {
	Pipeline  string
	Warehouse config.Warehouse
	Catalog   config.Catalog
	// LeaseTTL bounds how long a PostgreSQL catalog connection may sit
	// idle in a transaction (lease.ttl; see pgIdleInTxTimeout).
	LeaseTTL time.Duration
	Cut      config.Cut
	// Maintenance is what the session's maintainer runs after commits.
	Maintenance config.Maintenance
	// DeletesMode is how new tables record updates and deletes unless
	// their rule says otherwise (deletes.mode).
	DeletesMode string
	// DropTable is ddl.drop_table: "drop" drops the Iceberg table of a
	// dropped MySQL table, "keep" keeps it.
	DropTable string
	// Tables answers what the configuration says of one MySQL table.
	Tables TableRules
	// MemoryLimit is memory_limit in bytes (0: none): the caches the
	// tables share are sized from it (budget.go).
	MemoryLimit int64
}

// TableRules is what the lake asks the configuration about one MySQL
// table; *config.Config implements it.
type TableRules interface {
	// Rule is the tables[] entry of db.table, or nil.
	Rule(db, table string) *config.TableRule
	// Selects reports whether db.table is mirrored (source.include and
	// source.exclude).
	Selects(db, table string) bool
	ParquetFor(db, table string) config.Parquet
	StageAboveFor(db, table string) int
	IncompatiblePolicy(db, table string) string
}

// OptionsFrom takes a Lake's options from a loaded configuration.
func OptionsFrom(cfg *config.Config) Options {
	return Options{
		Pipeline:    cfg.Pipeline,
		Warehouse:   cfg.Warehouse,
		Catalog:     cfg.Catalog,
		LeaseTTL:    cfg.Lease.TTL.Duration,
		Cut:         cfg.Cut,
		Maintenance: cfg.Maintenance,
		DeletesMode: cfg.Deletes.Mode,
		DropTable:   cfg.DDL.DropTable,
		Tables:      cfg,
		MemoryLimit: cfg.MemoryLimit.Int64(),
	}
}
