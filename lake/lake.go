// Package lake owns Iceberg: it opens the catalog and the warehouse, creates
// tables from MySQL schemas, writes data and equality-delete files, commits
// one row delta per table per epoch with the epoch's binlog position in the
// snapshot summary, reads committed positions back, and stores the pipeline
// checkpoint in the warehouse.
package lake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/utils"
	"github.com/aws/aws-sdk-go-v2/aws"

	// Register the s3:// file IO and the database/sql drivers of the SQL catalog.
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // S3, MinIO, OSS: the schemes config accepts
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/pkindex"
)

// Snapshot summary keys written on every cdcsync commit.
const (
	SummaryPipeline = "cdcsync.pipeline"
	SummaryEpoch    = "cdcsync.epoch"
	SummaryPosition = "cdcsync.position"
	// While a table's initial copy runs, every commit also records its
	// progress: the bound after the last chunk committed, and the rows
	// copied. A commit without them ends the copy.
	SummaryCopyAfter = "cdcsync.copy-after"
	SummaryCopyRows  = "cdcsync.copy-rows"
	// SummarySourceTime is when the epoch's last transaction committed in
	// MySQL, in Unix milliseconds (cdcsync cut --as-of reads it).
	SummarySourceTime = "cdcsync.source-time"
	// SummaryEpochFrom, on a commit that also holds transactions of
	// earlier epochs (cdcsync.Delta.From), is the first of them: no cut of
	// an epoch from it up to the commit's own is consistent.
	SummaryEpochFrom = "cdcsync.epoch-from"
)

// Lake is an open catalog plus the warehouse it writes to.
type Lake struct {
	cat       catalog.Catalog
	opts      Options
	warehouse string // URL of the warehouse root
	ioProps   iceberg.Properties
	aws       *aws.Config // the S3 client's settings (timeouts, a private CA); nil for a local warehouse
	log       *slog.Logger
	release   func() // forgets the catalog's registered connection settings
	reach     *reach // whether the warehouse and the catalog answer
	// files is the budget of files written at once, shared by every table
	// (warehouse.max_open_files): a slot is held while a file is open.
	files chan struct{}
	// dvs keeps the deletion vectors this process wrote, for the epochs
	// that replace them (dvcache.go).
	dvs *dvCache
	// entries bounds the manifest entries the tables keep between
	// commits (budget.go).
	entries *entryBudget
	// token is the fencing token of the pipeline's lease this process
	// holds (SetLease), recorded with every commit; 0 when it holds none.
	// valid says whether the lease still allows commits.
	token int64
	valid func() error
	// keys holds the key indexes of the tables in position mode
	// (SetKeyIndex); nil in processes that do not commit epochs.
	keys *pkindex.DB
	// indexFault, when set, is the key index's testing hook: tests crash
	// between an epoch's catalog commit and its index update, and during
	// a rebuild (ForSession; see keyIndex.fault).
	indexFault func(string)
	// cutTags tags consistent cuts on a schedule (cut.tag_every); nil
	// when none is configured.
	cutTags *cutTags
	// sink is the session's sink once the pipeline runs (NewSink): a cut
	// tagged on request (TagCut) holds its tables' commits meanwhile.
	sink atomic.Pointer[Sink]
}

// SetKeyIndex gives the tables opened afterwards their key indexes in db
// (keyindex.go); the daemon calls it once it holds the pipeline's lease.
func (l *Lake) SetKeyIndex(db *pkindex.DB) { l.keys = db }

// SetLease records the lease this process holds: the tables opened
// afterwards carry its fencing token in every commit, ask valid before
// every catalog commit (an error stops the commit), and a commit that finds
// a newer holder's snapshot fails with lease.ErrLost.
func (l *Lake) SetLease(token int64, valid func() error) { l.token, l.valid = token, valid }

// leaseValid is the tables' check before a catalog commit.
func (l *Lake) leaseValid() error {
	if l.valid == nil {
		return nil
	}
	return l.valid()
}

// sqliteURI is the SQLite URI of the database file at path with query: the
// path's % and # escaped, which SQLite's URI parser would take for an
// escape and the start of a fragment (config rejects a ? in the path).
func sqliteURI(path, query string) string {
	return "file:" + strings.NewReplacer("%", "%25", "#", "%23").Replace(path) + "?" + query
}

// Open connects to the catalog of opts (OptionsFrom takes them from the
// configuration). It creates the SQL catalog's tables when they do not
// exist yet.
func Open(ctx context.Context, opts Options, log *slog.Logger) (*Lake, error) {
	if opts.Tables == nil {
		return nil, errors.New("lake.Open: Options.Tables is nil (use OptionsFrom)")
	}
	wh, err := opts.Warehouse.URL()
	if err != nil {
		return nil, err
	}
	ioProps := s3Props(&opts.Warehouse.S3)
	if strings.HasPrefix(wh, "file://") {
		// The URL escapes what a path may hold (spaces, parentheses, %):
		// the directory is its unescaped path, where iceberg-go writes.
		u, err := url.Parse(wh)
		if err != nil {
			return nil, fmt.Errorf("warehouse location %s: %w", wh, err)
		}
		if err := os.MkdirAll(u.Path, 0o755); err != nil {
			return nil, fmt.Errorf("create warehouse directory: %w", err)
		}
	}
	rch := &reach{log: log}
	var awsCfg *aws.Config
	if !strings.HasPrefix(wh, "file://") {
		if awsCfg, err = s3Config(ctx, &opts.Warehouse.S3, opts.Warehouse.RequestTimeout.Duration); err != nil {
			return nil, err
		}
		awsCfg.HTTPClient = observedClient{inner: awsCfg.HTTPClient, reach: rch}
		ctx = utils.WithAwsConfig(ctx, awsCfg)
	}
	props := iceberg.Properties{"warehouse": wh}
	for k, v := range ioProps {
		props[k] = v
	}
	var cat catalog.Catalog
	release := func() {}
	switch opts.Catalog.Type {
	case "rest":
		cat, err = openREST(ctx, &opts, props, rch)
	default:
		cat, release, err = openSQL(ctx, &opts, props, rch)
	}
	if err != nil {
		return nil, err
	}
	return &Lake{cat: cat, release: release, reach: rch, opts: opts, warehouse: strings.TrimRight(wh, "/"), ioProps: ioProps, aws: awsCfg, log: log,
		files: make(chan struct{}, max(1, opts.Warehouse.MaxOpenFiles)), dvs: newDVCache(dvCacheBudget(opts.MemoryLimit)), entries: newEntryBudget(entryBudgetBytes(opts.MemoryLimit)), cutTags: newCutTags(&opts.Cut)}, nil
}

func s3Props(s *config.S3) iceberg.Properties {
	p := iceberg.Properties{}
	if s.Endpoint != "" {
		p[icebergio.S3EndpointURL] = s.Endpoint
	}
	if s.Region != "" {
		p[icebergio.S3Region] = s.Region
	}
	if s.AccessKeyID != "" {
		p[icebergio.S3AccessKeyID] = s.AccessKeyID
		p[icebergio.S3SecretAccessKey] = s.SecretAccessKey.Value()
		if s.SessionToken.Value() != "" {
			p[icebergio.S3SessionToken] = s.SessionToken.Value()
		}
	}
	if !s.PathStyle {
		p[icebergio.S3ForceVirtualAddressing] = "true"
	}
	return p
}

// pgIdleInTxParam is PostgreSQL's bound on a session idle inside a
// transaction; catalog.sql.dsn may set it (…?idle_in_transaction_session_timeout=…).
const pgIdleInTxParam = "idle_in_transaction_session_timeout"

// pgIdleInTxTimeout is the default bound: a third of the lease's TTL, so
// that a standby, which fences after a full TTL without renewals, finds
// the paused holder's locks gone; at least a second, which no live commit
// comes near between two statements.
func pgIdleInTxTimeout(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		ttl = config.DefaultLeaseTTL
	}
	return max(ttl/3, time.Second)
}

// pgConnConfig is the connection configuration of a PostgreSQL catalog:
// catalog.sql.dsn with cdcsync's bounds on connecting, on every read and
// write, and on a session idle inside a transaction.
func pgConnConfig(opts *Options, rch *reach) (*pgx.ConnConfig, error) {
	c := &opts.Catalog.SQL
	pc, err := pgx.ParseConfig(c.DSN.Value())
	if err != nil {
		return nil, fmt.Errorf("catalog.sql.dsn is not a PostgreSQL connection string (postgres://user:password@host:5432/db): %s",
			config.Redact(err.Error(), c.DSN.Value()))
	}
	if pc.ConnectTimeout == 0 {
		pc.ConnectTimeout = dialTimeout
	}
	if _, set := pc.RuntimeParams[pgIdleInTxParam]; !set {
		// A catalog commit is BEGIN, UPDATE, COMMIT: a holder paused
		// (SIGSTOP, a frozen VM) between the last two keeps the row
		// lock of the table, and a standby's fencing commit would wait
		// for it until TCP keepalive gives up, hours later. The server
		// ends such a session well within lease.ttl instead; the
		// paused holder's commit is then rolled back.
		pc.RuntimeParams[pgIdleInTxParam] = strconv.FormatInt(pgIdleInTxTimeout(opts.LeaseTTL).Milliseconds(), 10)
	}
	// Every read and write on the catalog's connections is bounded, so
	// a server that vanished fails the commit instead of hanging it.
	dial, timeout := pc.DialFunc, opts.Warehouse.RequestTimeout.Duration
	pc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil || timeout <= 0 {
			if err != nil {
				rch.observe(err)
			}
			return conn, err
		}
		return &idleConn{Conn: conn, timeout: timeout, reach: rch}, nil
	}
	return pc, nil
}

func openSQL(ctx context.Context, opts *Options, props iceberg.Properties, rch *reach) (catalog.Catalog, func(), error) {
	c := &opts.Catalog.SQL
	var driver, dsn string
	var dialect sqlcat.SupportedDialect
	release := func() {}
	switch c.Driver {
	case "postgres":
		pc, err := pgConnConfig(opts, rch)
		if err != nil {
			return nil, nil, err
		}
		driver, dialect, dsn = "pgx", sqlcat.Postgres, stdlib.RegisterConnConfig(pc)
		release = func() { stdlib.UnregisterConnConfig(dsn) }
	default:
		// WAL and a busy timeout let `cdcsync cat` read while the daemon writes.
		driver, dialect = "sqlite", sqlcat.SQLite
		dsn = sqliteURI(c.DSN.Value(), "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	}
	props[sqlcat.DriverKey] = driver
	props[sqlcat.DialectKey] = string(dialect)
	props["uri"] = dsn
	props["init_catalog_tables"] = "true"
	props["type"] = "sql"
	cat, err := catalog.Load(ctx, opts.Catalog.Name, props)
	for try := 0; err != nil && try < 3 && strings.Contains(err.Error(), "SQLSTATE 23505"); try++ {
		// Two processes that open a new PostgreSQL catalog at once both
		// create its tables; the loser's CREATE TABLE IF NOT EXISTS fails
		// on a unique violation: the tables exist now.
		time.Sleep(100 * time.Millisecond)
		cat, err = catalog.Load(ctx, opts.Catalog.Name, props)
	}
	if err != nil {
		release()
		return nil, nil, redactedError{fmt.Sprintf("open the %s SQL catalog %q: %s; check catalog.sql.dsn and that the database is reachable",
			c.Driver, opts.Catalog.Name, config.Redact(err.Error(), c.DSN.Value())), err}
	}
	return cat, release, nil
}

func openREST(ctx context.Context, o *Options, props iceberg.Properties, rch *reach) (catalog.Catalog, error) {
	r := &o.Catalog.REST
	var opts []rest.Option
	if r.Warehouse != "" {
		opts = append(opts, rest.WithWarehouseLocation(r.Warehouse))
	}
	if v := r.Credential.Value(); v != "" {
		opts = append(opts, rest.WithCredential(v))
	}
	if v := r.Token.Value(); v != "" {
		opts = append(opts, rest.WithOAuthToken(v))
	}
	opts = append(opts, rest.WithAdditionalProps(props), rest.WithCustomTransport(observedTransport{restTransport(o.Warehouse.RequestTimeout.Duration), rch}))
	cat, err := rest.NewCatalog(ctx, o.Catalog.Name, r.URI, opts...)
	if err != nil {
		msg := err.Error()
		if errors.Is(err, rest.ErrOAuthError) {
			// iceberg-go keeps only the OAuth2 error code of a refused token
			// request (often none: the message can end in an empty string),
			// so say which request failed.
			msg = fmt.Sprintf("getting an OAuth2 token for catalog.rest.credential from %s/v1/oauth/tokens failed (%s)", strings.TrimRight(config.RedactURL(r.URI), "/"), msg)
		}
		for _, s := range restSecrets(r) {
			msg = config.Redact(msg, s)
		}
		return nil, redactedError{fmt.Sprintf("connect to the REST catalog at %s: %s; check catalog.rest.uri and credentials", config.RedactURL(r.URI), msg), err}
	}
	return cat, nil
}

// restSecrets are the strings no message about the REST catalog may show:
// the credential, its secret part alone (the client secret is sent on its
// own, form-encoded, in the token request), the token and a password in
// the URI.
func restSecrets(r *config.RESTCatalog) []string {
	out := []string{r.Credential.Value(), r.Token.Value()}
	if _, secret, ok := strings.Cut(r.Credential.Value(), ":"); ok && secret != "" {
		out = append(out, secret, url.QueryEscape(secret))
	}
	if u, err := url.Parse(r.URI); err == nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			out = append(out, pw, url.QueryEscape(pw))
		}
	}
	return out
}

// redactedError is an error whose message had secrets removed; it still
// unwraps to the original, so that callers can classify it (Transient).
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// Unreachable says since when every request to the warehouse (S3) or the
// catalog (REST, PostgreSQL) has failed, with the last error; ok is false
// while they answer (and always for a local warehouse with SQLite).
func (l *Lake) Unreachable() (since time.Time, err error, ok bool) { return l.reach.Unreachable() }

// Close releases the catalog's connections.
func (l *Lake) Close() error {
	defer l.release()
	if c, ok := l.cat.(catalog.Closer); ok {
		return c.Close()
	}
	return nil
}

// Check verifies that the catalog answers and that the warehouse accepts
// writes, by listing namespaces and writing, reading and removing a probe
// object under the pipeline's own prefix.
func (l *Lake) Check(ctx context.Context) error {
	ctx = l.Scope(ctx)
	if _, err := l.cat.ListNamespaces(ctx, nil); err != nil {
		return fmt.Errorf("the catalog %q does not answer: %w", l.opts.Catalog.Name, err)
	}
	fs, err := l.fs(ctx)
	if err != nil {
		return err
	}
	probe := l.pipelineDir() + "/probe"
	if err := fs.WriteFile(probe, []byte("ok")); err != nil {
		if Transient(err) {
			return fmt.Errorf("cannot reach the warehouse %s: %w; check that the storage is up and reachable (warehouse.s3.endpoint) and has room", l.warehouse, err)
		}
		return fmt.Errorf("cannot write to the warehouse %s: %w; check warehouse.location, the bucket and the credentials", l.warehouse, err)
	}
	if err := fs.Remove(probe); err != nil {
		return fmt.Errorf("cannot delete from the warehouse %s: %w", l.warehouse, err)
	}
	return nil
}

func (l *Lake) fs(ctx context.Context) (icebergio.WriteFileIO, error) {
	ctx = l.Scope(ctx)
	fs, err := icebergio.LoadFS(ctx, l.ioProps, l.warehouse)
	if err != nil {
		return nil, fmt.Errorf("open the warehouse %s: %w", l.warehouse, err)
	}
	wfs, ok := fs.(icebergio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("the warehouse %s is read-only", l.warehouse)
	}
	return wfs, nil
}

// PipelineDir is where the pipeline keeps its own objects (checkpoints); no
// table maintenance ever touches it.
func (l *Lake) PipelineDir() string { return l.pipelineDir() }

func (l *Lake) pipelineDir() string {
	return l.warehouse + "/_cdcsync/" + l.opts.Pipeline
}

// Identifier returns the Iceberg identifier for a MySQL table, following the
// table rules of the configuration.
func (l *Lake) Identifier(db, tbl string) table.Identifier {
	ns, name := db, tbl
	if r := l.opts.Tables.Rule(db, tbl); r != nil {
		if r.Namespace != "" {
			ns = r.Namespace
		}
		if r.Name != "" {
			name = r.Name
		}
	}
	return table.Identifier{ns, name}
}

// ListTables lists every table of the catalog as "namespace.table".
func (l *Lake) ListTables(ctx context.Context) ([]table.Identifier, error) {
	ctx = l.Scope(ctx)
	nss, err := l.cat.ListNamespaces(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	var out []table.Identifier
	for _, ns := range nss {
		for id, err := range l.cat.ListTables(ctx, ns) {
			if err != nil {
				return nil, fmt.Errorf("list tables of %s: %w", strings.Join(ns, "."), err)
			}
			out = append(out, id)
		}
	}
	return out, nil
}

// LoadTable loads an Iceberg table by identifier.
func (l *Lake) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	ctx = l.Scope(ctx)
	t, err := l.cat.LoadTable(ctx, id)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, fmt.Errorf("no table %s in catalog %q; `cdcsync tables` lists the tables", strings.Join(id, "."), l.opts.Catalog.Name)
	}
	return t, err
}

// PipelineTable is a table this pipeline has committed to.
type PipelineTable struct {
	ID        cdcsync.TableID // the MySQL table
	Committed cdcsync.Committed
	Stopped   bool // cdcsync stopped mirroring it (see Table.Stopped)
}

// PipelineTables returns the tables this pipeline has committed to, sorted
// by MySQL name.
func (l *Lake) PipelineTables(ctx context.Context) ([]PipelineTable, error) {
	idents, err := l.ListTables(ctx)
	if err != nil {
		return nil, err
	}
	var out []PipelineTable
	for _, ident := range idents {
		tbl, err := l.LoadTable(ctx, ident)
		if err != nil {
			return nil, err
		}
		c, err := CommittedBy(tbl, l.opts.Pipeline)
		if err != nil {
			return nil, err
		}
		props := tbl.Properties()
		db, name, ok := strings.Cut(props[PropSource], ".")
		if !c.Found || !ok {
			continue
		}
		_, stopped := props[PropStopped]
		out = append(out, PipelineTable{ID: cdcsync.TableID{Database: db, Table: name}, Committed: c, Stopped: stopped})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID.String() < out[j].ID.String() })
	return out, nil
}
