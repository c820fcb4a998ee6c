// Package config owns cdcsync's YAML configuration: strict decoding,
// defaults, environment expansion for secrets and validation with messages a
// user can act on.
//
// Load reads a file; Parse decodes bytes. Both expand ${NAME} and
// ${NAME:-default} references from the environment, decode strictly (an
// unknown key is an error naming its line and the nearest valid key), apply
// the defaults, resolve relative paths and run Validate. Every error message
// names the key path and says how to fix it; no message ever contains a
// secret or the value of an environment variable.
//
// Relative paths (warehouse.location without a scheme, the sqlite catalog
// DSN, source.password_file and every TLS/CA file) are resolved against the
// directory of the configuration file by Load. Parse resolves them against
// the directory of source only when source is an absolute file path; with an
// empty source, a relative name or a label such as "<stdin>" it leaves them
// as written, that is relative to the process's working directory.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config is the whole configuration file.
type Config struct {
	Pipeline  string      `yaml:"pipeline"` // default "cdcsync"; [a-z0-9_-]+, it is stored in Iceberg snapshot summaries
	Source    Source      `yaml:"source"`
	Warehouse Warehouse   `yaml:"warehouse"`
	Catalog   Catalog     `yaml:"catalog"`
	Tables    []TableRule `yaml:"tables"`
	Epoch     Epoch       `yaml:"epoch"`
	Snapshot  Snapshot    `yaml:"snapshot"`
	Log       Log         `yaml:"log"`
	HTTP      HTTP        `yaml:"http"`
	Lease     Lease       `yaml:"lease"`
	Admin     Admin       `yaml:"admin"`
	Deletes   Deletes     `yaml:"deletes"`
	Cut       Cut         `yaml:"cut"`
	Parquet   Parquet     `yaml:"parquet"`

	Maintenance Maintenance `yaml:"maintenance"`
	DDL         DDL         `yaml:"ddl"`
	Types       Types       `yaml:"types"`

	// MemoryLimit is the daemon's soft memory limit (Go's GOMEMLIMIT): the
	// garbage collector works harder as the heap nears it. 0 (the default)
	// sets none (GOMEMLIMIT from the environment still applies). When set,
	// epoch.max_bytes defaults to a quarter of it.
	MemoryLimit ByteSize `yaml:"memory_limit"`
	// GCPercent is Go's GOGC for the daemon: the heap grows by this
	// percentage of the live data before a collection. 0 (unset) means
	// DefaultGCPercent, or GOGC when the environment sets it; -1 turns the
	// percentage off (collections then follow memory_limit alone).
	GCPercent int `yaml:"gc_percent"`

	meta *meta // where each key was written; nil for a Config built in code
}

// Source is the MySQL or MariaDB server cdcsync replicates from.
type Source struct {
	Host           string   `yaml:"host"`            // default "127.0.0.1"
	Port           int      `yaml:"port"`            // default 3306
	User           string   `yaml:"user"`            // required
	Password       Secret   `yaml:"password"`        // may be "${ENV}"; or use password_file
	PasswordFile   string   `yaml:"password_file"`   // file whose content (trailing newline trimmed) is the password; mutually exclusive with password
	ServerID       uint32   `yaml:"server_id"`       // required, non-zero: the replica server id cdcsync registers with
	Include        []string `yaml:"include"`         // required: "db.table" patterns with * and ? wildcards; "!" prefix excludes
	Exclude        []string `yaml:"exclude"`         // patterns that exclude
	ConnectTimeout Duration `yaml:"connect_timeout"` // default 10s
	// passwordErr is set when password names an unset environment
	// variable; ResolvePassword returns it.
	passwordErr error
	TLS         TLS `yaml:"tls"`
	// OnPositionLost is what run does with a table whose committed binlog
	// position the server no longer has (purged, or a server without its
	// history): fail (default: exit with the tables and the recovery) or
	// recopy (copy it again from the server's current position, its last
	// contents visible meanwhile, while the other tables stream).
	OnPositionLost string `yaml:"on_position_lost"`

	keepShadows bool // ddl.online_schema_change: off (see ddl.go)
}

// TLS configures the connection to the MySQL server.
type TLS struct {
	Mode       string `yaml:"mode"`        // disabled (default) | preferred | required | verify-ca | verify-full
	CAFile     string `yaml:"ca_file"`     // required for verify-ca / verify-full
	CertFile   string `yaml:"cert_file"`   // client cert, optional, with key_file
	KeyFile    string `yaml:"key_file"`    // client key, with cert_file
	ServerName string `yaml:"server_name"` // overrides the host name checked in verify-full
}

// source.on_position_lost policies.
const (
	PositionLostFail   = "fail"
	PositionLostRecopy = "recopy"
)

// TLS modes.
const (
	TLSDisabled   = "disabled"
	TLSPreferred  = "preferred"
	TLSRequired   = "required"
	TLSVerifyCA   = "verify-ca"
	TLSVerifyFull = "verify-full"
)

// Warehouse is where the Iceberg data and metadata files are written.
type Warehouse struct {
	Location string `yaml:"location"` // default "./warehouse"; a local path, file:///abs, s3://bucket/prefix or oss://bucket/prefix
	S3       S3     `yaml:"s3"`
	// MaxOpenFiles bounds the data and delete files cdcsync writes at
	// once, across all tables (a file descriptor each on a local
	// warehouse, an upload each on S3); default 8. Whatever an epoch's
	// partition count, an epoch's files are written partition after
	// partition within it.
	MaxOpenFiles int `yaml:"max_open_files"`
	// RequestTimeout bounds how long one request to the warehouse or the
	// catalog may go without an answer (a blackholed connection, a server
	// that stopped): the request then fails and the commit is retried,
	// for as long as the outage lasts. Default 30s.
	RequestTimeout Duration `yaml:"request_timeout"`
}

// S3 configures access to S3-compatible object storage (AWS S3, MinIO, OSS).
type S3 struct {
	Endpoint        string `yaml:"endpoint"`          // e.g. http://127.0.0.1:9000 for MinIO; empty = AWS
	Region          string `yaml:"region"`            // default "us-east-1"
	PathStyle       bool   `yaml:"path_style"`        // true for MinIO; default false (virtual-host style)
	AccessKeyID     string `yaml:"access_key_id"`     // optional; empty means the standard AWS chain
	SecretAccessKey Secret `yaml:"secret_access_key"` // with access_key_id
	SessionToken    Secret `yaml:"session_token"`     // optional, with access_key_id
	CAFile          string `yaml:"ca_file"`           // extra CA for a TLS endpoint with a private CA
}

// Catalog is the Iceberg catalog the tables are registered in.
type Catalog struct {
	Type string      `yaml:"type"` // sql (default) | rest
	Name string      `yaml:"name"` // default "cdcsync"; must equal the catalog name Spark/Trino use
	SQL  SQLCatalog  `yaml:"sql"`
	REST RESTCatalog `yaml:"rest"`
}

// Catalog types and SQL drivers.
const (
	CatalogSQL     = "sql"
	CatalogREST    = "rest"
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// SQLCatalog is a JDBC-compatible catalog stored in SQLite or PostgreSQL.
type SQLCatalog struct {
	Driver string `yaml:"driver"` // sqlite (default) | postgres
	DSN    Secret `yaml:"dsn"`    // default "./catalog.db" for sqlite; required for postgres
}

// RESTCatalog is an Iceberg REST catalog.
type RESTCatalog struct {
	URI        string `yaml:"uri"`        // required when type is rest
	Warehouse  string `yaml:"warehouse"`  // optional warehouse identifier sent to the REST server
	Credential Secret `yaml:"credential"` // OAuth2 client credential "id:secret"
	Token      Secret `yaml:"token"`      // bearer token
}

// TableRule overrides how one MySQL table is mapped to Iceberg.
type TableRule struct {
	Match     string   `yaml:"match"`     // required: exact "db.table" (no wildcards)
	Namespace string   `yaml:"namespace"` // Iceberg namespace; default the MySQL database name; single level
	Name      string   `yaml:"name"`      // Iceberg table name; default the MySQL table name
	Partition []string `yaml:"partition"` // "col", "identity(col)", "bucket(N, col)", "truncate(W, col)", "year(col)", "month(col)", "day(col)", "hour(col)"
	// DDLIncompatible overrides ddl.incompatible for this table.
	DDLIncompatible string `yaml:"ddl_incompatible"`
	// Deletes sets how this table records updates and deletes (position or
	// equality), also when the table exists: setting it switches the
	// table. Empty: deletes.mode for a new table, and an existing table
	// keeps its mode.
	Deletes string `yaml:"deletes"`
	// StageAbove is the number of partition files above which an epoch of
	// this partitioned table (position or dv deletes) writes the rows of
	// its partitions with fewer than 1,024 rows as one staged file, which
	// compaction moves to their partitions (docs/configuration.md). Nil:
	// DefaultStageAbove; 0: never stage.
	StageAbove *int `yaml:"stage_above"`
	// Parquet replaces the top-level parquet settings for this table;
	// its compression defaults to parquet.compression, its level to the
	// codec's default. Nil: parquet applies.
	Parquet *Parquet `yaml:"parquet"`
}

// Parquet is how the data and delete files cdcsync writes are compressed:
// the Iceberg table properties write.parquet.compression-codec and
// write.parquet.compression-level. Tables created before a change switch
// at the next start, for the files written from then on.
type Parquet struct {
	// Compression is the codec: zstd (the default, Iceberg's), snappy,
	// lz4raw, gzip or uncompressed.
	Compression string `yaml:"compression"`
	// Level is the codec's level: zstd 1 to 22, gzip 1 to 9; 0 (the
	// default) is the codec's own default (zstd 3, gzip 6). The other
	// codecs have none.
	Level int `yaml:"level"`
}

// Parquet codecs, as the table property spells them.
const (
	CodecZstd         = "zstd"
	CodecSnappy       = "snappy"
	CodecLz4Raw       = "lz4raw"
	CodecGzip         = "gzip"
	CodecUncompressed = "uncompressed"
)

// parquetCodecs are the values of parquet.compression.
var parquetCodecs = []string{CodecZstd, CodecSnappy, CodecLz4Raw, CodecGzip, CodecUncompressed}

// parquetLevels are the levels each codec accepts besides 0 (its
// default); a codec missing here has no level.
var parquetLevels = map[string][2]int{CodecZstd: {1, 22}, CodecGzip: {1, 9}}

// ParquetFor returns the Parquet settings of db.table: its rule's, else
// the top-level ones.
func (c *Config) ParquetFor(db, table string) Parquet {
	if r := c.Rule(db, table); r != nil && r.Parquet != nil {
		p := *r.Parquet
		if p.Compression == "" {
			p.Compression = c.Parquet.Compression
		}
		return p
	}
	return c.Parquet
}

// DefaultStageAbove is tables[].stage_above when a rule does not set it.
const DefaultStageAbove = 64

// StageAboveFor returns the stage_above of db.table's rule or the default.
func (c *Config) StageAboveFor(db, table string) int {
	if r := c.Rule(db, table); r != nil && r.StageAbove != nil {
		return *r.StageAbove
	}
	return DefaultStageAbove
}

// Deletes is how the tables record updates and deletes, and where the key
// index that position deletes need lives.
type Deletes struct {
	// Mode is how a new table records updates and deletes: "position"
	// (the default: a position delete of the row replaced, found in a
	// local key index) or "equality" (an equality delete on the primary
	// key). Tables keep the mode they were created with unless their
	// tables[] rule sets deletes.
	Mode string `yaml:"mode"`
	// IndexDir is the directory of the pipeline's key index, a cache
	// rebuilt from the tables when missing. Default: $STATE_DIRECTORY
	// (systemd's StateDirectory=), else $XDG_STATE_HOME/cdcsync, else
	// ~/.local/state/cdcsync, followed by /PIPELINE.
	IndexDir string `yaml:"index_dir"`
	// IndexCache is the key index's block cache (default 64MiB).
	IndexCache ByteSize `yaml:"index_cache"`
}

// Cut configures the tags the daemon puts on consistent cuts (see
// docs/query.md, "One consistent view across tables").
type Cut struct {
	// TagEvery tags the cut of the pipeline's checkpoint on every table
	// once per period of this length (periods start at multiples of it
	// since the Unix epoch, in UTC). 0, the default, tags nothing; at
	// least 1m.
	TagEvery Duration `yaml:"tag_every"`
	// TagKeep is how long the scheduled tags live (the tag's
	// max-ref-age; snapshot expiry keeps tagged snapshots until then).
	// Default 168h; 0 keeps them until removed.
	TagKeep Duration `yaml:"tag_keep"`
	// TagPrefix starts each scheduled tag's name, followed by the
	// period's start in UTC, e.g. cut-20261205T0200Z. Default "cut-".
	TagPrefix string `yaml:"tag_prefix"`
}

// Scheduled cut tags' defaults and limits.
const (
	DefaultCutTagKeep   = 7 * 24 * time.Hour
	DefaultCutTagPrefix = "cut-"
	MinCutTagEvery      = time.Minute
)

// Deletes modes.
const (
	DeletesPosition = "position"
	DeletesEquality = "equality"
	DeletesDV       = "dv"
)

// DefaultIndexCache is deletes.index_cache's default.
const DefaultIndexCache = 64 << 20

// IndexPath returns the directory of the pipeline's key index: index_dir,
// or the default under the user's state directory (see Deletes.IndexDir).
func (c *Config) IndexPath() (string, error) {
	if c.Deletes.IndexDir != "" {
		return c.Deletes.IndexDir, nil
	}
	if d := os.Getenv("STATE_DIRECTORY"); d != "" {
		// systemd may list several, separated by colons: the first.
		d, _, _ = strings.Cut(d, ":")
		return filepath.Join(d, c.Pipeline), nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "cdcsync", c.Pipeline), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" || home == "/" {
		return "", fmt.Errorf("cannot choose a directory for the key index (no $HOME, $XDG_STATE_HOME or $STATE_DIRECTORY): set deletes.index_dir, e.g. /var/lib/cdcsync/%s", c.Pipeline)
	}
	return filepath.Join(home, ".local", "state", "cdcsync", c.Pipeline), nil
}

// Epoch bounds how many changes are collected before one Iceberg commit.
type Epoch struct {
	Interval          Duration `yaml:"interval"`           // default 5s; seal an epoch this long after its first transaction
	MaxRows           int      `yaml:"max_rows"`           // default 200000 row changes
	MaxBytes          ByteSize `yaml:"max_bytes"`          // default 128MiB
	CommitConcurrency int      `yaml:"commit_concurrency"` // default 4 tables committed in parallel
}

// Snapshot configures the initial copy of existing rows, which runs in
// primary-key chunks while the binlog streams.
type Snapshot struct {
	ChunkRows int `yaml:"chunk_rows"` // default 20000 rows per chunk; bounds the copy's memory
	Workers   int `yaml:"workers"`    // default 2 chunks read at once, across all tables
}

// Log configures cdcsync's own log.
type Log struct {
	Level  string `yaml:"level"`  // debug | info (default) | warn | error
	Format string `yaml:"format"` // text (default) | json
}

// HTTP configures the metrics and health endpoint.
type HTTP struct {
	Listen string `yaml:"listen"` // default "127.0.0.1:9187"; serves the read-only /metrics, /healthz, /readyz; "off" disables
}

// Maintenance configures the table maintenance cdcsync runs in process,
// between its own commits: compaction, snapshot expiry and orphan cleanup.
type Maintenance struct {
	Enabled     bool           `yaml:"enabled"`      // default true
	EveryEpochs int            `yaml:"every_epochs"` // default 5: at most one compaction (and one expiry) per table per this many of its epochs
	IdleAfter   Duration       `yaml:"idle_after"`   // default 30s: a table no epoch changed for this long is compacted until nothing is due
	Compaction  Compaction     `yaml:"compaction"`
	Snapshots   SnapshotExpiry `yaml:"snapshots"`
	Orphans     OrphanCleanup  `yaml:"orphans"`
}

// Compaction decides when a table's files are rewritten and bounds the work.
type Compaction struct {
	DeleteFiles    int      `yaml:"delete_files"`     // default 5: compact a partition that has this many delete files
	DeleteRatio    float64  `yaml:"delete_ratio"`     // default 0.2: ... or whose delete rows reach this fraction of its data rows
	SmallFiles     int      `yaml:"small_files"`      // default 10: ... or that has this many small data files
	SmallFileSize  ByteSize `yaml:"small_file_size"`  // default 32MiB: a data file below this size is small
	TargetFileSize ByteSize `yaml:"target_file_size"` // default 128MiB: size of the rewritten files
	MaxBytes       ByteSize `yaml:"max_bytes"`        // default 256MiB: data rewritten per epoch, across tables, at most
	MaxFiles       int      `yaml:"max_files"`        // default 1000: data files a table's compaction rewrites per run, at most (0: no limit)
	MaxManifests   int      `yaml:"max_manifests"`    // default 50: merge data manifests when a table has more than this many manifests
	MaxLock        Duration `yaml:"max_lock"`         // default 1s: how long a run may hold a table's commit lock while it rewrites (0: no bound)
}

// SnapshotExpiry says which snapshots are kept.
type SnapshotExpiry struct {
	MaxAge  Duration `yaml:"max_age"`  // default 1h: snapshots older than this are expired ...
	MinKeep int      `yaml:"min_keep"` // default 20: ... except the newest min_keep (and always cdcsync's last epoch commit)
}

// OrphanCleanup configures the removal of files no snapshot references.
type OrphanCleanup struct {
	MinAge   Duration `yaml:"min_age"`  // default 24h: only files older than this are removed
	Interval Duration `yaml:"interval"` // default 1h: time between two cleanups of a table
}

// Lease configures how daemons share a pipeline: one holds it and commits,
// the others wait as standbys (see docs/architecture.md, "One writer per
// pipeline").
type Lease struct {
	// TTL is how long a holder that stops renewing keeps the pipeline:
	// a standby takes over once it has seen no renewal for this long
	// (measured on its own clock). Default 30s; the holder renews every
	// third of it. At least 3s.
	TTL Duration `yaml:"ttl"`
	// Wait makes a daemon that finds the pipeline held wait as a standby
	// (default true); false makes it exit with the holder's name.
	Wait bool `yaml:"wait"`
}

// HTTPOff is the value of http.listen that disables the HTTP server.
const HTTPOff = "off"

// Defaults.
const (
	DefaultPipeline       = "cdcsync"
	DefaultHost           = "127.0.0.1"
	DefaultPort           = 3306
	DefaultConnectTimeout = 10 * time.Second
	DefaultLocation       = "./warehouse"
	DefaultRegion         = "us-east-1"
	DefaultCatalogName    = "cdcsync"
	DefaultSQLiteDSN      = "./catalog.db"
	DefaultEpochInterval  = 5 * time.Second
	DefaultEpochMaxRows   = 200000
	DefaultEpochMaxBytes  = ByteSize(128 << 20)
	MinMemoryLimit        = ByteSize(64 << 20)
	// DefaultGCPercent halves the garbage collector's headroom over Go's
	// 100: measured, the steady RSS falls by 20 to 40% for 2 to 20% more
	// CPU (docs/performance.md).
	DefaultGCPercent         = 50
	DefaultCommitConcurrency = 4
	DefaultMaxOpenFiles      = 8
	DefaultRequestTimeout    = 30 * time.Second
	// MaxMaxOpenFiles keeps max_open_files well under the smallest common
	// RLIMIT_NOFILE (1024).
	MaxMaxOpenFiles        = 256
	DefaultChunkRows       = 20000
	DefaultSnapshotWorkers = 2
	DefaultHTTPListen      = "127.0.0.1:9187"
	DefaultLeaseTTL        = 30 * time.Second
	MinLeaseTTL            = 3 * time.Second

	DefaultMaintenanceEveryEpochs = 5
	DefaultMaintenanceIdleAfter   = 30 * time.Second
	DefaultCompactDeleteFiles     = 5
	DefaultCompactDeleteRatio     = 0.2
	DefaultCompactSmallFiles      = 10
	DefaultCompactSmallFileSize   = ByteSize(32 << 20)
	DefaultCompactTargetFileSize  = ByteSize(128 << 20)
	DefaultCompactMaxBytes        = ByteSize(256 << 20)
	DefaultCompactMaxFiles        = 1000
	DefaultCompactMaxManifests    = 50
	DefaultCompactMaxLock         = time.Second
	DefaultSnapshotMaxAge         = time.Hour
	DefaultSnapshotMinKeep        = 20
	DefaultOrphanMinAge           = 24 * time.Hour
	DefaultOrphanInterval         = time.Hour
)

// meta remembers where the keys of a parsed file were, so that Validate can
// point at lines, and which keys were written, so that an explicit value
// (even 0 or "") is validated instead of replaced by a default.
type meta struct {
	source string
	lines  map[string]int  // key path ("source.port", "tables[0].match") -> line of the key
	set    map[string]bool // key paths given a non-null value
}

func (c *Config) explicit(path string) bool { return c.meta != nil && c.meta.set[path] }

// FitEpoch sets epoch.max_bytes, when the configuration leaves it out, to
// a quarter of heap, the memory the epochs may use: an epoch fills while
// the one before it is written out, and each takes about as much again
// while it is written.
func (c *Config) FitEpoch(heap ByteSize) {
	if heap > 0 && !c.explicit("epoch.max_bytes") {
		c.Epoch.MaxBytes = min(DefaultEpochMaxBytes, max(heap/4, 4<<20))
	}
}

func (c *Config) line(path string) int {
	if c.meta == nil {
		return 0
	}
	return c.meta.lines[path]
}

// Load reads the configuration file at path, expands environment variables,
// decodes it strictly, applies defaults, resolves relative paths against the
// file's directory and validates it.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot read the configuration file %q: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve the configuration file path %q: %w", path, err)
	}
	return parse(data, path, filepath.Dir(abs), os.LookupEnv)
}

// Parse is Load from bytes. source names the file in error messages; when it
// is an absolute path, relative paths in the configuration are resolved
// against its directory, otherwise they are left as written.
func Parse(data []byte, source string) (*Config, error) {
	base := ""
	if source != "" && filepath.IsAbs(source) {
		base = filepath.Dir(source)
	}
	return parse(data, source, base, os.LookupEnv)
}

func parse(data []byte, source, baseDir string, lookup func(string) (string, bool)) (*Config, error) {
	c := &Config{}
	d := newDecoder(source, lookup)
	if err := d.decodeFile(data, c); err != nil {
		return nil, err
	}
	c.meta = &meta{source: source, lines: d.lines, set: d.set}
	c.Source.passwordErr = d.deferred["source.password"]
	c.Admin.tokenErr = d.deferred["admin.token"]
	c.applyDefaults()
	c.applyAdminDefaults(lookup)
	if baseDir != "" {
		c.resolvePaths(baseDir)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// applyDefaults fills every key that was not written (or written as null)
// with its default. Keys written explicitly keep their value, even when it
// is zero, so that Validate can report it.
func (c *Config) applyDefaults() {
	str := func(p string, v *string, def string) {
		if *v == "" && !c.explicit(p) {
			*v = def
		}
	}
	num := func(p string, v *int, def int) {
		if *v == 0 && !c.explicit(p) {
			*v = def
		}
	}
	dur := func(p string, v *Duration, def time.Duration) {
		if v.Duration == 0 && !c.explicit(p) {
			v.Duration = def
		}
	}
	str("pipeline", &c.Pipeline, DefaultPipeline)

	s := &c.Source
	str("source.host", &s.Host, DefaultHost)
	num("source.port", &s.Port, DefaultPort)
	dur("source.connect_timeout", &s.ConnectTimeout, DefaultConnectTimeout)
	str("source.tls.mode", &s.TLS.Mode, TLSDisabled)
	str("source.on_position_lost", &s.OnPositionLost, PositionLostFail)
	s.OnPositionLost = strings.ToLower(strings.TrimSpace(s.OnPositionLost))
	s.TLS.Mode = strings.ToLower(strings.TrimSpace(s.TLS.Mode))

	str("warehouse.location", &c.Warehouse.Location, DefaultLocation)
	str("warehouse.s3.region", &c.Warehouse.S3.Region, DefaultRegion)
	num("warehouse.max_open_files", &c.Warehouse.MaxOpenFiles, DefaultMaxOpenFiles)
	dur("warehouse.request_timeout", &c.Warehouse.RequestTimeout, DefaultRequestTimeout)

	cat := &c.Catalog
	str("catalog.type", &cat.Type, CatalogSQL)
	cat.Type = strings.ToLower(strings.TrimSpace(cat.Type))
	str("catalog.name", &cat.Name, DefaultCatalogName)
	str("catalog.sql.driver", &cat.SQL.Driver, DriverSQLite)
	cat.SQL.Driver = strings.ToLower(strings.TrimSpace(cat.SQL.Driver))
	if cat.SQL.Driver == "postgresql" {
		cat.SQL.Driver = DriverPostgres
	}
	if cat.SQL.Driver == DriverSQLite && cat.SQL.DSN == "" && !c.explicit("catalog.sql.dsn") {
		cat.SQL.DSN = DefaultSQLiteDSN
	}

	for i := range c.Tables {
		r := &c.Tables[i]
		db, table, ok := splitExact(r.Match)
		if !ok {
			continue
		}
		str(fmt.Sprintf("tables[%d].namespace", i), &r.Namespace, db)
		str(fmt.Sprintf("tables[%d].name", i), &r.Name, table)
	}

	e := &c.Epoch
	dur("epoch.interval", &e.Interval, DefaultEpochInterval)
	num("epoch.max_rows", &e.MaxRows, DefaultEpochMaxRows)
	if e.MaxBytes == 0 && !c.explicit("epoch.max_bytes") {
		e.MaxBytes = DefaultEpochMaxBytes
		if c.MemoryLimit > 0 {
			e.MaxBytes = min(e.MaxBytes, c.MemoryLimit/4)
		}
	}
	num("epoch.commit_concurrency", &e.CommitConcurrency, DefaultCommitConcurrency)
	num("snapshot.chunk_rows", &c.Snapshot.ChunkRows, DefaultChunkRows)
	num("snapshot.workers", &c.Snapshot.Workers, DefaultSnapshotWorkers)

	str("log.level", &c.Log.Level, "info")
	c.Log.Level = strings.ToLower(strings.TrimSpace(c.Log.Level))
	str("log.format", &c.Log.Format, "text")
	c.Log.Format = strings.ToLower(strings.TrimSpace(c.Log.Format))

	str("http.listen", &c.HTTP.Listen, DefaultHTTPListen)
	str("deletes.mode", &c.Deletes.Mode, DeletesPosition)
	c.Deletes.Mode = strings.ToLower(strings.TrimSpace(c.Deletes.Mode))
	if c.Deletes.IndexCache == 0 && !c.explicit("deletes.index_cache") {
		c.Deletes.IndexCache = DefaultIndexCache
	}
	str("parquet.compression", &c.Parquet.Compression, CodecZstd)
	c.Parquet.Compression = normalizeCodec(c.Parquet.Compression)
	for i := range c.Tables {
		if pq := c.Tables[i].Parquet; pq != nil {
			pq.Compression = normalizeCodec(pq.Compression)
		}
	}
	dur("cut.tag_keep", &c.Cut.TagKeep, DefaultCutTagKeep)
	str("cut.tag_prefix", &c.Cut.TagPrefix, DefaultCutTagPrefix)
	dur("lease.ttl", &c.Lease.TTL, DefaultLeaseTTL)
	if !c.explicit("lease.wait") {
		c.Lease.Wait = true
	}
	c.applyDDLDefaults()
	c.applyTypesDefaults()

	size := func(p string, v *ByteSize, def ByteSize) {
		if *v == 0 && !c.explicit(p) {
			*v = def
		}
	}
	m := &c.Maintenance
	if !c.explicit("maintenance.enabled") {
		m.Enabled = true
	}
	num("maintenance.every_epochs", &m.EveryEpochs, DefaultMaintenanceEveryEpochs)
	dur("maintenance.idle_after", &m.IdleAfter, DefaultMaintenanceIdleAfter)
	mc := &m.Compaction
	num("maintenance.compaction.delete_files", &mc.DeleteFiles, DefaultCompactDeleteFiles)
	if mc.DeleteRatio == 0 && !c.explicit("maintenance.compaction.delete_ratio") {
		mc.DeleteRatio = DefaultCompactDeleteRatio
	}
	num("maintenance.compaction.small_files", &mc.SmallFiles, DefaultCompactSmallFiles)
	size("maintenance.compaction.small_file_size", &mc.SmallFileSize, DefaultCompactSmallFileSize)
	size("maintenance.compaction.target_file_size", &mc.TargetFileSize, DefaultCompactTargetFileSize)
	size("maintenance.compaction.max_bytes", &mc.MaxBytes, DefaultCompactMaxBytes)
	num("maintenance.compaction.max_files", &mc.MaxFiles, DefaultCompactMaxFiles)
	num("maintenance.compaction.max_manifests", &mc.MaxManifests, DefaultCompactMaxManifests)
	dur("maintenance.compaction.max_lock", &mc.MaxLock, DefaultCompactMaxLock)
	dur("maintenance.snapshots.max_age", &m.Snapshots.MaxAge, DefaultSnapshotMaxAge)
	num("maintenance.snapshots.min_keep", &m.Snapshots.MinKeep, DefaultSnapshotMinKeep)
	dur("maintenance.orphans.min_age", &m.Orphans.MinAge, DefaultOrphanMinAge)
	dur("maintenance.orphans.interval", &m.Orphans.Interval, DefaultOrphanInterval)
}

// resolvePaths makes the relative local paths absolute against dir.
func (c *Config) resolvePaths(dir string) {
	abs := func(p *string) {
		// "~" is not expanded; Validate reports it, so leave it as written.
		if *p != "" && !filepath.IsAbs(*p) && !strings.HasPrefix(*p, "~") {
			*p = filepath.Join(dir, *p)
		}
	}
	if !hasScheme(c.Warehouse.Location) {
		abs(&c.Warehouse.Location)
	}
	if c.Catalog.SQL.Driver == DriverSQLite {
		dsn := string(c.Catalog.SQL.DSN)
		if isSQLitePath(dsn) {
			abs(&dsn)
			c.Catalog.SQL.DSN = Secret(dsn)
		}
	}
	abs(&c.Source.PasswordFile)
	abs(&c.Source.TLS.CAFile)
	abs(&c.Source.TLS.CertFile)
	abs(&c.Source.TLS.KeyFile)
	abs(&c.Warehouse.S3.CAFile)
	abs(&c.Admin.TokenFile)
	abs(&c.Deletes.IndexDir)
	if c.Admin.Network() == "unix" {
		abs(&c.Admin.Listen)
	}
}

// isSQLitePath reports whether a sqlite DSN is a plain file path (not a
// "file:" URI or the in-memory database, which Validate rejects: lake/ builds
// the URI itself).
func isSQLitePath(dsn string) bool {
	return dsn != "" && !strings.HasPrefix(dsn, "file:") && !strings.HasPrefix(dsn, ":memory:")
}

// hasScheme reports whether location is a URL ("s3://...", "file:/...")
// rather than a local path.
func hasScheme(location string) bool {
	if strings.Contains(location, "://") {
		return true
	}
	return strings.HasPrefix(strings.ToLower(location), "file:")
}

// normalizeCodec lowercases a codec name and accepts the spellings of
// Iceberg Java and Parquet for lz4raw and uncompressed.
func normalizeCodec(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "lz4_raw":
		return CodecLz4Raw
	case "none":
		return CodecUncompressed
	}
	return s
}
