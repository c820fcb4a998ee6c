package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// problems collects validation errors, each located at the line of its key
// when the Config came from a file.
type problems struct {
	c              *Config
	errs           []error
	badIncludeList bool // source.include/exclude have errors: do not judge rules by them
}

func (p *problems) add(path, format string, args ...any) {
	source := ""
	if p.c.meta != nil {
		source = p.c.meta.source
	}
	p.errs = append(p.errs, located(source, p.lineOf(path), fmt.Sprintf(format, args...)))
}

// lineOf is the line of path's key or, for a key that is not written, of
// its nearest written parent ("source.user" missing points at "source:").
func (p *problems) lineOf(path string) int {
	for path != "" {
		if l := p.c.line(path); l > 0 {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// absent describes a required key that has no usable value: "is missing"
// when it was not written, "is empty" or "is 0" when it was.
func (p *problems) absent(path, zero string) string {
	if p.c.explicit(path) {
		return "is " + zero
	}
	return "is missing"
}

var (
	pipelineRE    = regexp.MustCompile(`^[a-z0-9_-]+$`)
	catalogNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

var (
	tlsModes    = []string{TLSDisabled, TLSPreferred, TLSRequired, TLSVerifyCA, TLSVerifyFull}
	catalogs    = []string{CatalogSQL, CatalogREST}
	sqlDrivers  = []string{DriverSQLite, DriverPostgres}
	logLevels   = []string{"debug", "info", "warn", "error"}
	logFormats  = []string{"text", "json"}
	enumAliases = map[string]string{
		"verify-identity": TLSVerifyFull, "verify_identity": TLSVerifyFull, "verify_full": TLSVerifyFull,
		"verify_ca": TLSVerifyCA, "warning": "warn", "console": "text", "logfmt": "text",
	}
)

func oneOf(v string, allowed []string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

// enum checks v against allowed and reports a message listing them.
func (p *problems) enum(path, v string, allowed []string) {
	if oneOf(v, allowed) {
		return
	}
	hint := ""
	if a, ok := enumAliases[v]; ok && oneOf(a, allowed) {
		hint = fmt.Sprintf(" (did you mean %s?)", a)
	} else if s := nearest(v, allowed); s != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", s)
	}
	if v == "" {
		p.add(path, "%s is empty: use one of %s, or remove the key for the default", path, strings.Join(allowed, ", "))
		return
	}
	p.add(path, "%s %q is not valid%s: use one of %s", path, v, hint, strings.Join(allowed, ", "))
}

// Validate checks the whole configuration and returns every problem found,
// joined with errors.Join. Each message names the key path, says what is
// wrong and how to fix it, and never contains a secret.
func (c *Config) Validate() error {
	p := &problems{c: c}

	switch {
	case c.Pipeline == "":
		p.add("pipeline", `pipeline is empty: set a name made of lowercase letters, digits, "_" and "-", or remove the key for the default %q`, DefaultPipeline)
	case !pipelineRE.MatchString(c.Pipeline):
		p.add("pipeline", `pipeline %q is not a valid name: use only lowercase letters, digits, "_" and "-", e.g. pipeline: orders-prod`, c.Pipeline)
	}

	p.source()
	p.tildes()
	p.warehouse()
	p.catalog()
	p.tables()

	e := c.Epoch
	if e.Interval.Duration <= 0 {
		p.add("epoch.interval", "epoch.interval must be positive (got %s): it is how long after its first transaction an epoch is committed, e.g. interval: 5s", e.Interval.Duration)
	}
	if e.MaxRows <= 0 {
		p.add("epoch.max_rows", "epoch.max_rows must be a positive number of row changes (got %d), e.g. max_rows: 200000", e.MaxRows)
	}
	if e.MaxBytes <= 0 {
		p.add("epoch.max_bytes", "epoch.max_bytes must be a positive size (got %d), e.g. max_bytes: 128MiB", int64(e.MaxBytes))
	}
	switch {
	case c.MemoryLimit < 0 || (c.MemoryLimit > 0 && c.MemoryLimit < MinMemoryLimit):
		p.add("memory_limit", "memory_limit must be at least %s (got %s), or 0 for none, e.g. memory_limit: 1GiB", MinMemoryLimit, c.MemoryLimit)
	case c.MemoryLimit > 0 && e.MaxBytes > 0 && e.MaxBytes > c.MemoryLimit/3:
		p.add("epoch.max_bytes", "epoch.max_bytes (%s) does not fit under memory_limit (%s): an epoch fills while the one before it commits, "+
			"and writing it takes about as much again; set epoch.max_bytes to at most %s, or leave it out (it then defaults to a quarter of memory_limit), or raise memory_limit",
			e.MaxBytes, c.MemoryLimit, (c.MemoryLimit/3)&^(1<<20-1))
	}
	if c.GCPercent < -1 || c.GCPercent > 1000 || (c.GCPercent == 0 && c.explicit("gc_percent")) {
		p.add("gc_percent", "gc_percent must be between 1 and 1000, or -1 to collect by memory_limit alone (got %d), e.g. gc_percent: 50", c.GCPercent)
	}
	if c.GCPercent == -1 && c.MemoryLimit == 0 {
		p.add("gc_percent", "gc_percent: -1 turns off collections by heap growth, so it needs memory_limit; set memory_limit too, e.g. memory_limit: 1GiB")
	}
	if n := c.Warehouse.MaxOpenFiles; n <= 0 || n > MaxMaxOpenFiles {
		p.add("warehouse.max_open_files", "warehouse.max_open_files must be between 1 and %d files written at once (got %d), e.g. max_open_files: %d", MaxMaxOpenFiles, n, DefaultMaxOpenFiles)
	}
	if d := c.Warehouse.RequestTimeout.Duration; d < time.Second || d > time.Hour {
		p.add("warehouse.request_timeout", "warehouse.request_timeout must be between 1s and 1h (got %s), e.g. request_timeout: 30s", d)
	}
	if e.CommitConcurrency <= 0 {
		p.add("epoch.commit_concurrency", "epoch.commit_concurrency must be a positive number of tables committed in parallel (got %d), e.g. commit_concurrency: 4", e.CommitConcurrency)
	}
	if c.Snapshot.ChunkRows <= 0 {
		p.add("snapshot.chunk_rows", "snapshot.chunk_rows must be a positive number of rows (got %d), e.g. chunk_rows: 20000", c.Snapshot.ChunkRows)
	}
	if c.Snapshot.Workers <= 0 || c.Snapshot.Workers > 64 {
		p.add("snapshot.workers", "snapshot.workers must be between 1 and 64 (got %d), e.g. workers: 2", c.Snapshot.Workers)
	}

	p.maintenance()
	p.ddl()
	p.types()

	p.enum("deletes.mode", c.Deletes.Mode, deletesModes)
	p.parquet("parquet", c.Parquet)
	if c.Deletes.IndexCache < 1<<20 {
		p.add("deletes.index_cache", "deletes.index_cache must be at least 1MiB (got %s), e.g. index_cache: 64MiB", c.Deletes.IndexCache)
	}
	if strings.HasPrefix(c.Deletes.IndexDir, "~") {
		p.add("deletes.index_dir", "deletes.index_dir %q starts with ~, which cdcsync does not expand: write the full path", c.Deletes.IndexDir)
	}
	if d := c.Cut.TagEvery.Duration; d != 0 && d < MinCutTagEvery {
		p.add("cut.tag_every", "cut.tag_every %s is too short: each tag is a catalog commit on every table, so use at least %s, e.g. tag_every: 1h (or 0 for no scheduled tags)", d, MinCutTagEvery)
	}
	if c.Cut.TagKeep.Duration < 0 {
		p.add("cut.tag_keep", "cut.tag_keep must not be negative (got %s): 0 keeps the tags until removed, e.g. tag_keep: 168h", c.Cut.TagKeep.Duration)
	}
	if pr := c.Cut.TagPrefix; pr == "" || strings.ContainsAny(pr, " /\\\t\n") {
		p.add("cut.tag_prefix", "cut.tag_prefix %q must be non-empty, without spaces or slashes, e.g. tag_prefix: cut-", pr)
	}
	p.enum("log.level", c.Log.Level, logLevels)
	p.enum("log.format", c.Log.Format, logFormats)

	if l := c.HTTP.Listen; l == "" {
		p.add("http.listen", "http.listen is empty: write host:port, e.g. 127.0.0.1:9187 or :9187, or off to disable the HTTP server")
	} else if l != HTTPOff {
		host, port, err := net.SplitHostPort(l)
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil || n < 0 || n > 65535 || strings.ContainsAny(host, " /") {
			p.add("http.listen", "http.listen %q is not an address: write host:port, e.g. 127.0.0.1:9187 or :9187, or off to disable the HTTP server", l)
		}
	}
	if c.Lease.TTL.Duration < MinLeaseTTL {
		p.add("lease.ttl", "lease.ttl %s is too short: a holder renews every third of it, so use at least %s, e.g. ttl: 30s", c.Lease.TTL.Duration, MinLeaseTTL)
	}
	p.admin()
	return errors.Join(p.errs...)
}

func (p *problems) source() {
	s := &p.c.Source
	if strings.TrimSpace(s.Host) == "" {
		p.add("source.host", "source.host is empty: set it to the MySQL server's host name or IP address, e.g. host: db.internal, or remove the key for %s", DefaultHost)
	}
	if s.Port < 1 || s.Port > 65535 {
		p.add("source.port", "source.port %d is out of range: use the MySQL server's TCP port, 1 to 65535 (usually 3306)", s.Port)
	}
	if strings.TrimSpace(s.User) == "" {
		p.add("source.user", "source.user %s: set it to the MySQL user cdcsync connects as (it needs the REPLICATION SLAVE, REPLICATION CLIENT and SELECT privileges), e.g. user: cdcsync", p.absent("source.user", "empty"))
	}
	if s.Password != "" && s.PasswordFile != "" {
		p.add("source.password_file", "source.password and source.password_file are both set: keep only one of them")
	}
	if s.ServerID == 0 {
		p.add("source.server_id", "source.server_id %s: set it to a number unique among the server's replicas, e.g. server_id: 4242", p.absent("source.server_id", "0"))
	}

	if len(s.Include) == 0 {
		p.add("source.include", `source.include %s: list the tables to replicate as "db.table" patterns, e.g. include: ["shop.*"]`, p.absent("source.include", "empty"))
	} else {
		positive := false
		for i, pat := range s.Include {
			path := fmt.Sprintf("source.include[%d]", i)
			body, neg := strings.CutPrefix(pat, "!")
			if !neg {
				positive = true
			}
			if msg := checkPattern(body); msg != "" {
				p.add(path, "%s %q %s", path, pat, msg)
				p.badIncludeList = true
				continue
			}
			if db, _, _ := strings.Cut(body, "."); !neg && isSystemSchema(db) {
				p.add(path, "%s %q names the system schema %s, which cdcsync never replicates: remove it", path, pat, db)
			}
		}
		if !positive {
			p.add("source.include", `source.include has only exclusions ("!" patterns), so it selects nothing: add a pattern that selects tables, e.g. "shop.*"`)
		}
	}
	for i, pat := range s.Exclude {
		path := fmt.Sprintf("source.exclude[%d]", i)
		if strings.HasPrefix(pat, "!") {
			p.add(path, `%s %q starts with "!": exclude entries already exclude; remove the "!"`, path, pat)
			p.badIncludeList = true
			continue
		}
		if msg := checkPattern(pat); msg != "" {
			p.add(path, "%s %q %s", path, pat, msg)
			p.badIncludeList = true
		}
	}
	if s.ConnectTimeout.Duration <= 0 {
		p.add("source.connect_timeout", "source.connect_timeout must be positive (got %s), e.g. connect_timeout: 10s", s.ConnectTimeout.Duration)
	}

	t := &s.TLS
	p.enum("source.tls.mode", t.Mode, tlsModes)
	p.enum("source.on_position_lost", s.OnPositionLost, []string{PositionLostFail, PositionLostRecopy})
	if (t.Mode == TLSVerifyCA || t.Mode == TLSVerifyFull) && t.CAFile == "" {
		p.add("source.tls.ca_file", "source.tls.ca_file is missing: tls mode %s checks the server's certificate against a CA; set ca_file to the CA certificate (PEM), or use mode: required to encrypt without verifying", t.Mode)
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		if t.CertFile == "" {
			p.add("source.tls.key_file", "source.tls.key_file is set without source.tls.cert_file: a client key needs its certificate; set both or neither")
		} else {
			p.add("source.tls.cert_file", "source.tls.cert_file is set without source.tls.key_file: a client certificate needs its private key; set both or neither")
		}
	}
	// A CA file or a server name the mode does not check would look like a
	// verification that does not happen.
	if (t.Mode == TLSPreferred || t.Mode == TLSRequired) && t.CAFile != "" {
		p.add("source.tls.ca_file", "source.tls.ca_file is set but tls mode %s does not check the server's certificate (it only encrypts, like the mysql client's --ssl-mode=%s): "+
			"set mode: verify-ca (the certificate must be signed by ca_file) or verify-full (and name the host), or remove ca_file", t.Mode, strings.ToUpper(t.Mode))
	}
	if t.ServerName != "" && (t.Mode == TLSPreferred || t.Mode == TLSRequired || t.Mode == TLSVerifyCA) {
		p.add("source.tls.server_name", "source.tls.server_name is set but only tls mode verify-full checks the name in the server's certificate (the mode is %s): set mode: verify-full, or remove server_name", t.Mode)
	}
	if t.Mode == TLSDisabled {
		var set []string
		for _, f := range []struct{ key, v string }{{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"key_file", t.KeyFile}, {"server_name", t.ServerName}} {
			if f.v != "" {
				set = append(set, f.key)
			}
		}
		if len(set) > 0 {
			p.add("source.tls.mode", "source.tls.mode is disabled but source.tls sets %s, which would be ignored: set mode (e.g. mode: verify-full), or remove %s", strings.Join(set, ", "), strings.Join(set, ", "))
		}
	}
}

// tildes reports paths starting with "~", which a shell would expand but
// cdcsync does not.
func (p *problems) tildes() {
	c := p.c
	paths := []struct{ key, v string }{
		{"source.password_file", c.Source.PasswordFile},
		{"source.tls.ca_file", c.Source.TLS.CAFile},
		{"source.tls.cert_file", c.Source.TLS.CertFile},
		{"source.tls.key_file", c.Source.TLS.KeyFile},
		{"warehouse.location", c.Warehouse.Location},
		{"warehouse.s3.ca_file", c.Warehouse.S3.CAFile},
		{"admin.token_file", c.Admin.TokenFile},
	}
	if c.Admin.Network() == "unix" {
		paths = append(paths, struct{ key, v string }{"admin.listen", c.Admin.Listen})
	}
	if c.Catalog.Type == CatalogSQL && c.Catalog.SQL.Driver == DriverSQLite {
		paths = append(paths, struct{ key, v string }{"catalog.sql.dsn", c.Catalog.SQL.DSN.Value()})
	}
	for _, f := range paths {
		if strings.HasPrefix(f.v, "~") {
			p.add(f.key, `%s starts with "~", which cdcsync does not expand: write an absolute path, a path relative to the configuration file, or ${HOME}/...`, f.key)
		}
	}
}

func (p *problems) warehouse() {
	w := &p.c.Warehouse
	if _, err := w.URL(); err != nil {
		p.add("warehouse.location", "%s", err.Error())
	}
	s3 := &w.S3
	if s3.Endpoint != "" {
		u, err := url.Parse(s3.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			p.add("warehouse.s3.endpoint", "warehouse.s3.endpoint %q is not an http(s) URL: include the scheme, e.g. http://127.0.0.1:9000 for MinIO or https://oss-cn-hangzhou.aliyuncs.com for OSS", RedactURL(s3.Endpoint))
		}
	} else if w.scheme() == "oss" {
		p.add("warehouse.s3.endpoint", "warehouse.s3.endpoint is missing: an oss:// location needs the OSS endpoint of the bucket's region, e.g. endpoint: https://oss-cn-hangzhou.aliyuncs.com")
	}
	if strings.TrimSpace(s3.Region) == "" {
		p.add("warehouse.s3.region", "warehouse.s3.region is empty: set the bucket's region, e.g. region: us-east-1 (MinIO accepts any value), or remove the key for the default")
	}
	if s3.AccessKeyID != "" && s3.SecretAccessKey == "" {
		p.add("warehouse.s3.secret_access_key", "warehouse.s3.secret_access_key is missing: access_key_id needs its secret; set secret_access_key: ${AWS_SECRET_ACCESS_KEY}, or remove access_key_id to use the standard AWS credential chain")
	}
	if s3.AccessKeyID == "" && (s3.SecretAccessKey != "" || s3.SessionToken != "") {
		key := "secret_access_key"
		if s3.SecretAccessKey == "" {
			key = "session_token"
		}
		p.add("warehouse.s3."+key, "warehouse.s3.access_key_id is missing: %s is set without it; set access_key_id, or remove %s to use the standard AWS credential chain", key, key)
	}
}

// RedactURL drops the user information (a user name and password) from a
// URL before it is shown.
func RedactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		u.User = url.User("redacted")
		return u.String()
	}
	return s
}

func (p *problems) catalog() {
	c := &p.c.Catalog
	p.enum("catalog.type", c.Type, catalogs)
	switch {
	case c.Name == "":
		p.add("catalog.name", "catalog.name is empty: set it to the catalog name Spark and Trino use for this catalog, or remove the key for %q", DefaultCatalogName)
	case !catalogNameRE.MatchString(c.Name):
		p.add("catalog.name", `catalog.name %q is not valid: use letters, digits, "_" and "-"; it must equal the catalog name Spark and Trino use for this catalog`, c.Name)
	}
	switch c.Type {
	case CatalogSQL:
		p.enum("catalog.sql.driver", c.SQL.Driver, sqlDrivers)
		dsn := c.SQL.DSN.Value()
		switch c.SQL.Driver {
		case DriverSQLite:
			switch {
			case strings.TrimSpace(dsn) == "":
				p.add("catalog.sql.dsn", "catalog.sql.dsn is empty: set the SQLite database file, e.g. dsn: ./catalog.db, or remove the key for the default")
			case !isSQLitePath(dsn) || strings.Contains(dsn, "?"):
				p.add("catalog.sql.dsn", `catalog.sql.dsn for sqlite must be a plain file path, not a "file:" URI, ":memory:" or options (cdcsync sets its own): write e.g. dsn: ./catalog.db`)
			}
		case DriverPostgres:
			switch {
			case strings.TrimSpace(dsn) == "":
				p.add("catalog.sql.dsn", "catalog.sql.dsn %s: the postgres driver needs a connection URL, e.g. dsn: postgres://cdcsync:${PG_PASSWORD}@db.internal:5432/iceberg", p.absent("catalog.sql.dsn", "empty"))
			case !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") && !strings.Contains(dsn, "="):
				p.add("catalog.sql.dsn", "catalog.sql.dsn is not a PostgreSQL connection string (its value is not shown, it may hold a password): use postgres://user:password@host:5432/database")
			}
		}
	case CatalogREST:
		r := &c.REST
		if strings.TrimSpace(r.URI) == "" {
			p.add("catalog.rest.uri", "catalog.rest.uri %s: catalog type rest needs the REST catalog's URL, e.g. uri: http://127.0.0.1:8181", p.absent("catalog.rest.uri", "empty"))
		} else if u, err := url.Parse(r.URI); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add("catalog.rest.uri", "catalog.rest.uri %q is not an http(s) URL: write e.g. uri: http://127.0.0.1:8181", RedactURL(r.URI))
		}
	}
}

func (p *problems) tables() {
	s := &p.c.Source
	matches := map[string]int{}
	targets := map[string]int{}
	for i := range p.c.Tables {
		r := &p.c.Tables[i]
		at := func(key string) string { return fmt.Sprintf("tables[%d].%s", i, key) }
		db, table, ok := splitExact(r.Match)
		switch {
		case strings.TrimSpace(r.Match) == "":
			p.add(at("match"), "%s %s: set it to the MySQL table this rule applies to, e.g. match: shop.orders", at("match"), p.absent(at("match"), "empty"))
		case !ok:
			p.add(at("match"), `%s %q is not a table name: write exactly "db.table", without wildcards (each rule applies to one table)`, at("match"), r.Match)
		default:
			if j, dup := matches[r.Match]; dup {
				p.add(at("match"), "%s %q repeats tables[%d]: merge the two rules into one", at("match"), r.Match, j)
			} else {
				matches[r.Match] = i
				if len(s.Include) > 0 && !p.badIncludeList && !s.Selects(db, table) {
					p.add(at("match"), "%s %q names a table that source.include and source.exclude do not select, so the rule never applies: add it to source.include, or remove the rule", at("match"), r.Match)
				}
			}
		}
		nsOK, nameOK := p.identifier(at("namespace"), r.Namespace, "namespace"), p.identifier(at("name"), r.Name, "table name")
		if ok && nsOK && nameOK && matches[r.Match] == i {
			target := r.Namespace + "." + r.Name
			if j, dup := targets[target]; dup {
				p.add(fmt.Sprintf("tables[%d]", i), "tables[%d] writes to the Iceberg table %s like tables[%d]: give one of them another namespace or name", i, target, j)
			} else {
				targets[target] = i
			}
		}
		p.partition(i, r)
		if r.Deletes != "" {
			p.enum(fmt.Sprintf("tables[%d].deletes", i), r.Deletes, deletesModes)
		}
		if r.Parquet != nil {
			pq := *r.Parquet
			if pq.Compression == "" {
				pq.Compression = p.c.Parquet.Compression
			}
			p.parquet(fmt.Sprintf("tables[%d].parquet", i), pq)
		}
		if r.StageAbove != nil && *r.StageAbove < 0 {
			p.add(fmt.Sprintf("tables[%d].stage_above", i), "tables[%d].stage_above is %d; it is a number of partition files (default %d), or 0 to never stage rows", i, *r.StageAbove, DefaultStageAbove)
		}
	}
}

var deletesModes = []string{DeletesPosition, DeletesDV, DeletesEquality}

// parquet checks the codec and level of parquet (at is its path).
func (p *problems) parquet(at string, pq Parquet) {
	codec, level := at+".compression", at+".level"
	if !oneOf(pq.Compression, parquetCodecs) {
		p.enum(codec, pq.Compression, parquetCodecs)
		return
	}
	if pq.Level == 0 {
		return
	}
	r, ok := parquetLevels[pq.Compression]
	switch {
	case !ok:
		p.add(level, "%s is %d, but %s has no level: remove %s", level, pq.Level, pq.Compression, level)
	case pq.Level < r[0] || pq.Level > r[1]:
		p.add(level, "%s %d is out of range for %s: use %d to %d, or 0 for the codec's default", level, pq.Level, pq.Compression, r[0], r[1])
	}
}

// identifier checks an Iceberg namespace or table name of a rule.
func (p *problems) identifier(path, v, what string) bool {
	switch {
	case v == "" && p.c.explicit(path):
		p.add(path, "%s is empty: remove the key to use the MySQL name, or set a %s", path, what)
		return false
	case strings.Contains(v, "."):
		p.add(path, `%s %q contains ".": Iceberg namespaces are single level here (Spark and Trino JDBC catalogs need that), so use e.g. %q`, path, v, strings.ReplaceAll(v, ".", "_"))
		return false
	case strings.ContainsAny(v, "/\\ \t"):
		p.add(path, `%s %q contains a space or a slash: use letters, digits and "_"`, path, v)
		return false
	}
	return true
}

func (p *problems) partition(i int, r *TableRule) {
	type seen struct {
		idx   int
		entry string
	}
	exact := map[string]seen{}
	timeCol := map[string]seen{}
	for j, entry := range r.Partition {
		path := fmt.Sprintf("tables[%d].partition[%d]", i, j)
		f, msg := parsePartition(entry)
		if msg != "" {
			p.add(path, "%s %q %s", path, entry, msg)
			continue
		}
		key := f.String()
		if prev, dup := exact[key]; dup {
			p.add(path, "%s %q repeats partition[%d]: remove one of them", path, entry, prev.idx)
			continue
		}
		exact[key] = seen{j, entry}
		if isTimeTransform(f.Transform) {
			if prev, dup := timeCol[f.Column]; dup {
				p.add(path, "%s %q and partition[%d] %q both partition by time on %s: keep only one (Iceberg rejects redundant time partitions)", path, entry, prev.idx, prev.entry, f.Column)
				continue
			}
			timeCol[f.Column] = seen{j, entry}
		}
	}
}

func (p *problems) maintenance() {
	m := &p.c.Maintenance
	if m.EveryEpochs <= 0 {
		p.add("maintenance.every_epochs", "maintenance.every_epochs must be a positive number of epochs (got %d), e.g. every_epochs: 10", m.EveryEpochs)
	}
	if m.IdleAfter.Duration <= 0 {
		p.add("maintenance.idle_after", "maintenance.idle_after must be a positive duration (got %s), e.g. idle_after: 30s", m.IdleAfter.Duration)
	}
	c := &m.Compaction
	if c.DeleteFiles <= 0 {
		p.add("maintenance.compaction.delete_files", "maintenance.compaction.delete_files must be a positive number of delete files (got %d), e.g. delete_files: 20", c.DeleteFiles)
	}
	if !(c.DeleteRatio > 0 && c.DeleteRatio <= 1) {
		p.add("maintenance.compaction.delete_ratio", "maintenance.compaction.delete_ratio must be a fraction above 0 and at most 1 (got %g), e.g. delete_ratio: 0.2", c.DeleteRatio)
	}
	if c.SmallFiles < 2 {
		p.add("maintenance.compaction.small_files", "maintenance.compaction.small_files must be at least 2 (got %d): it is how many small files of a partition are merged, e.g. small_files: 20", c.SmallFiles)
	}
	if c.TargetFileSize <= 0 {
		p.add("maintenance.compaction.target_file_size", "maintenance.compaction.target_file_size must be a positive size (got %d), e.g. target_file_size: 128MiB", int64(c.TargetFileSize))
	}
	switch {
	case c.SmallFileSize <= 0:
		p.add("maintenance.compaction.small_file_size", "maintenance.compaction.small_file_size must be a positive size (got %d), e.g. small_file_size: 32MiB", int64(c.SmallFileSize))
	case c.TargetFileSize > 0 && c.SmallFileSize >= c.TargetFileSize:
		p.add("maintenance.compaction.small_file_size", "maintenance.compaction.small_file_size (%s) must be smaller than target_file_size (%s), or rewritten files would count as small again", c.SmallFileSize, c.TargetFileSize)
	}
	switch {
	case c.MaxBytes <= 0:
		p.add("maintenance.compaction.max_bytes", "maintenance.compaction.max_bytes must be a positive size (got %d), e.g. max_bytes: 256MiB", int64(c.MaxBytes))
	case c.TargetFileSize > 0 && c.MaxBytes < c.TargetFileSize:
		p.add("maintenance.compaction.max_bytes", "maintenance.compaction.max_bytes (%s) must be at least target_file_size (%s), or a run could not rewrite one full file", c.MaxBytes, c.TargetFileSize)
	}
	if c.MaxFiles < 0 {
		p.add("maintenance.compaction.max_files", "maintenance.compaction.max_files must be 0 (no limit) or more (got %d), e.g. max_files: 1000", c.MaxFiles)
	}
	if c.MaxLock.Duration < 0 {
		p.add("maintenance.compaction.max_lock", "maintenance.compaction.max_lock must be 0 (no bound) or a positive duration (got %s), e.g. max_lock: 1s", c.MaxLock.Duration)
	}
	if c.MaxManifests < 2 {
		p.add("maintenance.compaction.max_manifests", "maintenance.compaction.max_manifests must be at least 2 (got %d), e.g. max_manifests: 50", c.MaxManifests)
	}
	if m.Snapshots.MaxAge.Duration <= 0 {
		p.add("maintenance.snapshots.max_age", "maintenance.snapshots.max_age must be positive (got %s): snapshots older than this are expired, e.g. max_age: 1h", m.Snapshots.MaxAge.Duration)
	}
	if m.Snapshots.MinKeep <= 0 {
		p.add("maintenance.snapshots.min_keep", "maintenance.snapshots.min_keep must be at least 1 (got %d), e.g. min_keep: 20", m.Snapshots.MinKeep)
	}
	if m.Orphans.MinAge.Duration <= 0 {
		p.add("maintenance.orphans.min_age", "maintenance.orphans.min_age must be positive (got %s): it protects files other writers are still writing, e.g. min_age: 24h", m.Orphans.MinAge.Duration)
	}
	if m.Orphans.Interval.Duration <= 0 {
		p.add("maintenance.orphans.interval", "maintenance.orphans.interval must be positive (got %s), e.g. interval: 1h", m.Orphans.Interval.Duration)
	}
}
