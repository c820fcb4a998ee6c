package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// parseOK parses src and fails the test on error.
func parseOK(t *testing.T, src string) *Config {
	t.Helper()
	c, err := Parse([]byte(src), "test.yaml")
	if err != nil {
		t.Fatalf("Parse: unexpected error:\n%v", err)
	}
	return c
}

// parseErr parses src, expects an error and returns its text.
func parseErr(t *testing.T, src string) string {
	t.Helper()
	c, err := Parse([]byte(src), "test.yaml")
	if err == nil {
		t.Fatalf("Parse: expected an error, got config %+v", c)
	}
	if c != nil {
		t.Errorf("Parse returned a config along with the error")
	}
	return err.Error()
}

func wantContains(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("error text lacks %q; full text:\n%s", w, got)
		}
	}
}

const minimal = `
source:
  user: cdcsync
  server_id: 4242
  include: ["shop.*"]
`

const full = `
pipeline: orders-prod
source:
  host: db.internal
  port: 3307
  user: repl
  password: hunter2-secret
  server_id: 4242
  include: ["shop.*", "!shop.tmp_*", "crm.customers"]
  exclude: ["shop.audit_log"]
  connect_timeout: 30s
  on_position_lost: Recopy
  tls:
    mode: verify-full
    ca_file: /etc/cdcsync/ca.pem
    cert_file: /etc/cdcsync/client.pem
    key_file: /etc/cdcsync/client.key
    server_name: mysql.internal
warehouse:
  location: s3://lake/cdc
  max_open_files: 16
  request_timeout: 45s
  s3:
    endpoint: http://127.0.0.1:9000
    region: eu-west-1
    path_style: true
    access_key_id: minioadmin
    secret_access_key: s3-secret-value
    session_token: s3-session-token
    ca_file: /etc/cdcsync/minio-ca.pem
catalog:
  type: sql
  name: lake
  sql:
    driver: postgres
    dsn: postgres://iceberg:pg-secret@pg:5432/iceberg
  rest:
    uri: http://127.0.0.1:8181
    warehouse: wh1
    credential: client:rest-credential-secret
    token: rest-token-secret
tables:
  - match: shop.orders
    namespace: sales
    name: orders_v1
    partition: ["day(created_at)", "bucket(16, id)"]
    ddl_incompatible: recopy
    deletes: position
    stage_above: 128
    parquet:
      compression: gzip
      level: 9
  - match: crm.customers
    partition: [country, "truncate(4, zip)"]
epoch:
  interval: 2s
  max_rows: 100000
  max_bytes: 64MiB
  commit_concurrency: 8
snapshot:
  chunk_rows: 10000
  workers: 3
log:
  level: debug
  format: json
http:
  listen: "0.0.0.0:9999"
lease:
  ttl: 1m
  wait: false
admin:
  listen: 127.0.0.1:9998
  token: admin-token-secret-value
  pprof: true
deletes:
  mode: Equality
  index_dir: /var/lib/cdcsync/orders
  index_cache: 16MiB
cut:
  tag_every: 1h
  tag_keep: 720h
  tag_prefix: daily-
parquet:
  compression: ZSTD
  level: 1
memory_limit: 1GiB
gc_percent: 80
maintenance:
  enabled: false
  every_epochs: 5
  idle_after: 2m
  compaction:
    delete_files: 8
    delete_ratio: 0.05
    small_files: 10
    small_file_size: 8MiB
    target_file_size: 64MiB
    max_bytes: 1GiB
    max_manifests: 20
    max_lock: 500ms
    max_files: 500
  snapshots:
    max_age: 30m
    min_keep: 5
  orphans:
    min_age: 2h
    interval: 10m
ddl:
  incompatible: recopy
  drop_table: drop
  rename_table: keep
  online_schema_change: "off"
types:
  zero_date: to_null
  zero_datetime: To_Epoch
  zero_timestamp: "null"
`

var fullWant = Config{
	Pipeline: "orders-prod",
	Source: Source{
		Host: "db.internal", Port: 3307, User: "repl", Password: "hunter2-secret", ServerID: 4242,
		Include:        []string{"shop.*", "!shop.tmp_*", "crm.customers"},
		Exclude:        []string{"shop.audit_log"},
		ConnectTimeout: Duration{30 * time.Second},
		OnPositionLost: "recopy",
		TLS: TLS{Mode: "verify-full", CAFile: "/etc/cdcsync/ca.pem", CertFile: "/etc/cdcsync/client.pem",
			KeyFile: "/etc/cdcsync/client.key", ServerName: "mysql.internal"},
		keepShadows: true, // ddl.online_schema_change: off
	},
	Warehouse: Warehouse{Location: "s3://lake/cdc", S3: S3{
		Endpoint: "http://127.0.0.1:9000", Region: "eu-west-1", PathStyle: true, AccessKeyID: "minioadmin",
		SecretAccessKey: "s3-secret-value", SessionToken: "s3-session-token", CAFile: "/etc/cdcsync/minio-ca.pem",
	}, MaxOpenFiles: 16, RequestTimeout: Duration{45 * time.Second}},
	Catalog: Catalog{Type: "sql", Name: "lake",
		SQL:  SQLCatalog{Driver: "postgres", DSN: "postgres://iceberg:pg-secret@pg:5432/iceberg"},
		REST: RESTCatalog{URI: "http://127.0.0.1:8181", Warehouse: "wh1", Credential: "client:rest-credential-secret", Token: "rest-token-secret"},
	},
	Tables: []TableRule{
		{Match: "shop.orders", Namespace: "sales", Name: "orders_v1", Partition: []string{"day(created_at)", "bucket(16, id)"}, DDLIncompatible: "recopy", Deletes: "position", StageAbove: new(128), Parquet: &Parquet{Compression: "gzip", Level: 9}},
		{Match: "crm.customers", Namespace: "crm", Name: "customers", Partition: []string{"country", "truncate(4, zip)"}},
	},
	Epoch:       Epoch{Interval: Duration{2 * time.Second}, MaxRows: 100000, MaxBytes: 64 << 20, CommitConcurrency: 8},
	Snapshot:    Snapshot{ChunkRows: 10000, Workers: 3},
	Log:         Log{Level: "debug", Format: "json"},
	HTTP:        HTTP{Listen: "0.0.0.0:9999"},
	Lease:       Lease{TTL: Duration{time.Minute}, Wait: false},
	Admin:       Admin{Listen: "127.0.0.1:9998", Token: "admin-token-secret-value", PProf: true},
	Deletes:     Deletes{Mode: "equality", IndexDir: "/var/lib/cdcsync/orders", IndexCache: 16 << 20},
	Cut:         Cut{TagEvery: Duration{time.Hour}, TagKeep: Duration{720 * time.Hour}, TagPrefix: "daily-"},
	Parquet:     Parquet{Compression: "zstd", Level: 1},
	MemoryLimit: 1 << 30,
	GCPercent:   80,
	Maintenance: Maintenance{Enabled: false, EveryEpochs: 5, IdleAfter: Duration{2 * time.Minute},
		Compaction: Compaction{DeleteFiles: 8, DeleteRatio: 0.05, SmallFiles: 10, SmallFileSize: 8 << 20,
			TargetFileSize: 64 << 20, MaxBytes: 1 << 30, MaxFiles: 500, MaxManifests: 20, MaxLock: Duration{500 * time.Millisecond}},
		Snapshots: SnapshotExpiry{MaxAge: Duration{30 * time.Minute}, MinKeep: 5},
		Orphans:   OrphanCleanup{MinAge: Duration{2 * time.Hour}, Interval: Duration{10 * time.Minute}},
	},
	DDL:   DDL{Incompatible: "recopy", DropTable: "drop", RenameTable: "keep", OnlineSchemaChange: "off"},
	Types: Types{ZeroDate: TypeToNull, ZeroDatetime: TypeToEpoch, ZeroTimestamp: TypeToNull},
}

// secrets are the secret values of the full config.
var secrets = []string{"hunter2-secret", "s3-secret-value", "s3-session-token", "pg-secret", "rest-credential-secret", "rest-token-secret", "admin-token-secret-value"}

func stripMeta(c *Config) Config {
	v := *c
	v.meta = nil
	return v
}

func TestFullConfig(t *testing.T) {
	c := parseOK(t, full)
	if got := stripMeta(c); !reflect.DeepEqual(got, fullWant) {
		t.Fatalf("full config decoded wrongly:\n got %#v\nwant %#v", got, fullWant)
	}
	// Every key of every section is exercised by the full config.
	var check func(rt reflect.Type, prefix string)
	check = func(rt reflect.Type, prefix string) {
		info := infoOf(rt)
		for _, key := range info.names {
			p := joinPath(prefix, key)
			if p != "source.password_file" && p != "admin.token_file" && !c.explicit(p) && !c.explicit(p+"[0]") && !c.explicit(strings.Replace(p, "tables.", "tables[0].", 1)) {
				t.Errorf("the full test config does not set %s", p)
			}
			ft := rt.Field(info.index[key]).Type
			if ft.Kind() == reflect.Struct && ft != durationType {
				check(ft, p)
			}
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
				check(ft.Elem(), p)
			}
		}
	}
	check(reflect.TypeOf(Config{}), "")

	// Marshal back to YAML and parse again: everything but the secrets
	// (which marshal as "[redacted]") survives.
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if bytes.Contains(out, []byte(s)) {
			t.Errorf("yaml.Marshal output contains the secret %q", s)
		}
	}
	const placeholder = "postgres://placeholder"
	c2 := parseOK(t, strings.ReplaceAll(string(out), "'"+redacted+"'", placeholder))
	want := fullWant
	want.Source.Password = placeholder
	want.Warehouse.S3.SecretAccessKey = placeholder
	want.Warehouse.S3.SessionToken = placeholder
	want.Catalog.SQL.DSN = placeholder
	want.Catalog.REST.Credential = placeholder
	want.Catalog.REST.Token = placeholder
	want.Admin.Token = placeholder
	if got := stripMeta(c2); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip through yaml.Marshal changed the config:\n got %#v\nwant %#v\nyaml:\n%s", got, want, out)
	}
}

func TestDefaults(t *testing.T) {
	c := parseOK(t, minimal)
	sockets := AdminSocketPaths("cdcsync", os.LookupEnv)
	want := Config{
		Pipeline: "cdcsync",
		Source: Source{Host: "127.0.0.1", Port: 3306, User: "cdcsync", ServerID: 4242, Include: []string{"shop.*"},
			ConnectTimeout: Duration{10 * time.Second}, TLS: TLS{Mode: "disabled"}, OnPositionLost: "fail"},
		Warehouse: Warehouse{Location: "./warehouse", S3: S3{Region: "us-east-1"}, MaxOpenFiles: 8, RequestTimeout: Duration{30 * time.Second}},
		Catalog:   Catalog{Type: "sql", Name: "cdcsync", SQL: SQLCatalog{Driver: "sqlite", DSN: "./catalog.db"}},
		Epoch:     Epoch{Interval: Duration{5 * time.Second}, MaxRows: 200000, MaxBytes: 128 << 20, CommitConcurrency: 4},
		Snapshot:  Snapshot{ChunkRows: 20000, Workers: 2},
		Log:       Log{Level: "info", Format: "text"},
		HTTP:      HTTP{Listen: "127.0.0.1:9187"},
		Lease:     Lease{TTL: Duration{DefaultLeaseTTL}, Wait: true},
		Admin:     Admin{Listen: sockets[0], sockets: sockets},
		Deletes:   Deletes{Mode: DeletesPosition, IndexCache: DefaultIndexCache},
		Cut:       Cut{TagKeep: Duration{DefaultCutTagKeep}, TagPrefix: DefaultCutTagPrefix},
		Parquet:   Parquet{Compression: CodecZstd},
		Maintenance: Maintenance{Enabled: true, EveryEpochs: 5, IdleAfter: Duration{DefaultMaintenanceIdleAfter},
			Compaction: Compaction{DeleteFiles: 5, DeleteRatio: 0.2, SmallFiles: 10, SmallFileSize: 32 << 20,
				TargetFileSize: 128 << 20, MaxBytes: 256 << 20, MaxFiles: DefaultCompactMaxFiles, MaxManifests: 50, MaxLock: Duration{DefaultCompactMaxLock}},
			Snapshots: SnapshotExpiry{MaxAge: Duration{time.Hour}, MinKeep: 20},
			Orphans:   OrphanCleanup{MinAge: Duration{24 * time.Hour}, Interval: Duration{time.Hour}},
		},
		DDL:   DDL{Incompatible: "stop", DropTable: "keep", RenameTable: "follow", OnlineSchemaChange: "follow"},
		Types: Types{ZeroDate: TypeError, ZeroDatetime: TypeError, ZeroTimestamp: TypeError},
	}
	if got := stripMeta(c); !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults:\n got %#v\nwant %#v", got, want)
	}
	// Explicit null is the same as absent.
	c = parseOK(t, minimal+"epoch:\n  max_rows:\nlog: ~\n")
	if c.Epoch.MaxRows != 200000 || c.Log.Level != "info" {
		t.Errorf("null values did not get defaults: %+v %+v", c.Epoch, c.Log)
	}
	// Enum values are case-insensitive.
	c = parseOK(t, minimal+"log:\n  level: WARN\ncatalog:\n  sql:\n    driver: postgresql\n    dsn: postgres://a@b/c\n")
	if c.Log.Level != "warn" || c.Catalog.SQL.Driver != "postgres" {
		t.Errorf("enums not normalized: %q %q", c.Log.Level, c.Catalog.SQL.Driver)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		wants []string
	}{
		{"unknown nested key with suggestion", `
source:
  user: a
  include: ["a.b"]
  host: x


  servr_id: 1
`, []string{`test.yaml: line 8: unknown key "servr_id" in source; did you mean "server_id"?`}},
		{"unknown top-level key with suggestion", "pipline: x\n" + minimal,
			[]string{`test.yaml: line 1: unknown key "pipline" at top level; did you mean "pipeline"?`}},
		{"dash instead of underscore", minimal + "epoch:\n  max-rows: 5\n",
			[]string{`line 7: unknown key "max-rows" in epoch; did you mean "max_rows"?`}},
		{"key in the wrong section", "server_id: 5\n" + minimal,
			[]string{`line 1: unknown key "server_id" at top level; it belongs in source: move it there`}},
		{"unknown key without a near one", minimal + "log:\n  colour: true\n",
			[]string{`line 7: unknown key "colour" in log; the keys allowed here are level, format`}},
		{"unknown key in a table rule", minimal + "tables:\n  - match: shop.a\n    partitions: [id]\n",
			[]string{`line 8: unknown key "partitions" in tables[0]; did you mean "partition"?`}},
		{"unknown key deep", minimal + "warehouse:\n  s3:\n    secret_key: x\n",
			[]string{`line 8: unknown key "secret_key" in warehouse.s3`}},
		{"wrong type int", "source:\n  user: a\n  server_id: 1\n  port: abc\n  include: [a.b]\n",
			[]string{`test.yaml: line 4: source.port: "abc" is not an integer`}},
		{"wrong type uint32", "source:\n  user: a\n  server_id: -1\n  include: [a.b]\n",
			[]string{`line 3: source.server_id: "-1" is not an integer from 0 to 4294967295`}},
		{"uint32 overflow", "source:\n  user: a\n  server_id: 4294967296\n  include: [a.b]\n",
			[]string{`line 3: source.server_id: "4294967296" is not an integer from 0 to 4294967295`}},
		{"wrong type bool", minimal + "warehouse:\n  s3:\n    path_style: yes\n",
			[]string{`line 8: warehouse.s3.path_style: "yes" is not a boolean: write true or false`}},
		{"list where a string is expected", minimal + "pipeline: [a]\n",
			[]string{`line 6: pipeline: expected a string, got a list`}},
		{"scalar where a list is expected", "source:\n  user: a\n  server_id: 1\n  include: shop.*\n",
			[]string{`line 4: source.include: expected a list, got a single value`}},
		{"scalar where a mapping is expected", minimal + "epoch: 5s\n",
			[]string{`line 6: epoch: expected a mapping with keys such as interval, max_rows, max_bytes, got a single value`}},
		{"bad duration", minimal + "epoch:\n  interval: 5\n",
			[]string{`line 7: epoch.interval: "5" is not a duration: write a number with a unit, e.g. "5s", "250ms" or "1m"`}},
		{"bad byte size", minimal + "epoch:\n  max_bytes: 12 parsecs\n",
			[]string{`line 7: epoch.max_bytes: "12 parsecs" is not a byte size`}},
		{"duplicate key", minimal + "log:\n  level: info\n  level: debug\n",
			[]string{`line 8: log.level is set twice (first at line 7): remove one of them`}},
		{"several errors at once", "pipline: x\nsource:\n  prot: 1\n  port: x\n",
			[]string{`line 1: unknown key "pipline"`, `line 3: unknown key "prot" in source; did you mean "port"?`, `line 4: source.port: "x" is not an integer`}},
		{"not a mapping", "- a\n- b\n",
			[]string{`line 1: the configuration must be a mapping of keys`}},
		{"syntax error", "source:\n  user: a\n bad: [\n",
			[]string{`test.yaml: line `, `(the file is not valid YAML`}},
		{"tab indentation", "source:\n\tuser: a\n",
			[]string{`YAML does not allow tabs`}},
		{"two documents", minimal + "---\npipeline: x\n",
			[]string{`a second YAML document starts here`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantContains(t, parseErr(t, tt.src), tt.wants...)
		})
	}
}

func TestMergeKeysAndAnchors(t *testing.T) {
	c := parseOK(t, minimal+`
tables:
  - &rule
    match: shop.a
    partition: [id]
  - <<: *rule
    match: shop.b
`)
	if len(c.Tables) != 2 || c.Tables[1].Match != "shop.b" || !reflect.DeepEqual(c.Tables[1].Partition, []string{"id"}) {
		t.Errorf("merge keys: %+v", c.Tables)
	}
}

func TestMissingRequiredReportedTogether(t *testing.T) {
	for _, src := range []string{"", "source: {}\n", "# only a comment\n"} {
		msg := parseErr(t, src)
		wantContains(t, msg,
			`source.user is missing: set it to the MySQL user cdcsync connects as`,
			`source.server_id is missing: set it to a number unique among the server's replicas, e.g. server_id: 4242`,
			`source.include is missing: list the tables to replicate as "db.table" patterns, e.g. include: ["shop.*"]`,
		)
		if n := strings.Count(msg, "\n") + 1; n != 3 {
			t.Errorf("want exactly 3 problems for %q, got %d:\n%s", src, n, msg)
		}
	}
	// Explicit zero values are reported as such, with their line.
	msg := parseErr(t, "source:\n  user: \"\"\n  server_id: 0\n  include: []\n")
	wantContains(t, msg,
		`test.yaml: line 2: source.user is empty: set it`,
		`test.yaml: line 3: source.server_id is 0: set it`,
		`test.yaml: line 4: source.include is empty: list the tables`)
}

func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name  string
		extra string
		wants []string
	}{
		{"bad on_position_lost", "  on_position_lost: resync\n",
			[]string{`line 6: source.on_position_lost "resync" is not valid`, `use one of fail, recopy`}},
		{"bad tls mode", "  tls:\n    mode: verify_identity\n",
			[]string{`line 7: source.tls.mode "verify_identity" is not valid (did you mean verify-full?): use one of disabled, preferred, required, verify-ca, verify-full`}},
		{"verify without ca", "  tls:\n    mode: verify-ca\n",
			[]string{`source.tls.ca_file is missing: tls mode verify-ca checks the server's certificate against a CA`}},
		{"cert without key", "  tls:\n    mode: required\n    cert_file: c.pem\n",
			[]string{`line 8: source.tls.cert_file is set without source.tls.key_file: a client certificate needs its private key; set both or neither`}},
		{"tls files with mode disabled", "  tls:\n    ca_file: ca.pem\n",
			[]string{`source.tls.mode is disabled but source.tls sets ca_file, which would be ignored`}},
		{"password and password_file", "  password: x\n  password_file: pw.txt\n",
			[]string{`line 7: source.password and source.password_file are both set: keep only one of them`}},
		{"bad port", "  port: 70000\n", []string{`line 6: source.port 70000 is out of range: use the MySQL server's TCP port, 1 to 65535 (usually 3306)`}},
		{"bad include pattern", "  include: [shop, \"a.[b\", \"!x.y\"]\n", []string{
			`source.include[0] "shop" is not a "db.table" pattern: write the database and the table separated by a dot, with * and ? as wildcards, e.g. "shop.*"`,
			`source.include[1] "a.[b" is not a valid pattern`}},
		{"only exclusions", "  include: [\"!a.b\"]\n", []string{`source.include has only exclusions ("!" patterns), so it selects nothing`}},
		{"system schema", "  include: [mysql.user, a.b]\n", []string{`source.include[0] "mysql.user" names the system schema mysql, which cdcsync never replicates: remove it`}},
		{"exclude with bang", "  exclude: [\"!a.b\"]\n", []string{`source.exclude[0] "!a.b" starts with "!": exclude entries already exclude; remove the "!"`}},
		{"tilde path", "  password_file: ~/pw\n", []string{`line 6: source.password_file starts with "~", which cdcsync does not expand: write an absolute path, a path relative to the configuration file, or ${HOME}/...`}},
		{"negative timeout", "  connect_timeout: -1s\n", []string{`line 6: source.connect_timeout must be positive (got -1s), e.g. connect_timeout: 10s`}},
	}
	base := "source:\n  user: a\n  server_id: 1\n  include: [a.b]\n"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := base + tt.extra
			if strings.Contains(tt.extra, "include:") {
				src = strings.Replace(base, "  include: [a.b]\n", "", 1) + tt.extra
			}
			// A leading blank line makes "source:" line 2, so the first line
			// of extra is line 6 (line 5 when extra replaces include).
			wantContains(t, parseErr(t, "\n"+src), tt.wants...)
		})
	}

	others := []struct {
		name  string
		src   string
		wants []string
	}{
		{"bad pipeline", "pipeline: Orders Prod\n", []string{`line 1: pipeline "Orders Prod" is not a valid name: use only lowercase letters, digits, "_" and "-", e.g. pipeline: orders-prod`}},
		{"bad enums", "catalog:\n  type: hive\nlog:\n  level: verbose\n  format: xml\n", []string{
			`line 2: catalog.type "hive" is not valid: use one of sql, rest`,
			`line 4: log.level "verbose" is not valid: use one of debug, info, warn, error`,
			`line 5: log.format "xml" is not valid: use one of text, json`}},
		{"bad deletes", "deletes:\n  mode: positon\n  index_dir: ~/idx\n  index_cache: 1KiB\ntables:\n  - match: shop.a\n    deletes: eq\n", []string{
			`line 2: deletes.mode "positon" is not valid (did you mean position?): use one of position, dv, equality`,
			`line 3: deletes.index_dir "~/idx" starts with ~, which cdcsync does not expand: write the full path`,
			`line 4: deletes.index_cache must be at least 1MiB (got 1KiB)`,
			`line 7: tables[0].deletes "eq" is not valid: use one of position, dv, equality`}},
		{"bad parquet codec", "parquet:\n  compression: lz4\ntables:\n  - match: shop.a\n    parquet:\n      compression: zstdd\n", []string{
			`line 2: parquet.compression "lz4" is not valid: use one of zstd, snappy, lz4raw, gzip, uncompressed`,
			`line 6: tables[0].parquet.compression "zstdd" is not valid (did you mean zstd?): use one of zstd, snappy, lz4raw, gzip, uncompressed`}},
		{"bad parquet level", "parquet:\n  compression: snappy\n  level: 3\ntables:\n  - match: shop.a\n    parquet:\n      level: 1\n  - match: shop.b\n    parquet:\n      compression: zstd\n      level: 23\n  - match: shop.c\n    parquet:\n      compression: gzip\n      level: -1\n", []string{
			`line 3: parquet.level is 3, but snappy has no level: remove parquet.level`,
			`line 7: tables[0].parquet.level is 1, but snappy has no level: remove tables[0].parquet.level`,
			`line 11: tables[1].parquet.level 23 is out of range for zstd: use 1 to 22, or 0 for the codec's default`,
			`line 15: tables[2].parquet.level -1 is out of range for gzip: use 1 to 9, or 0 for the codec's default`}},
		{"bad cut tags", "cut:\n  tag_every: 10s\n  tag_keep: -1h\n  tag_prefix: a b\n", []string{
			`line 2: cut.tag_every 10s is too short: each tag is a catalog commit on every table, so use at least 1m0s`,
			`line 3: cut.tag_keep must not be negative (got -1h0m0s)`,
			`line 4: cut.tag_prefix "a b" must be non-empty, without spaces or slashes`}},
		{"bad driver", "catalog:\n  sql:\n    driver: mysql\n", []string{`line 3: catalog.sql.driver "mysql" is not valid: use one of sqlite, postgres`}},
		{"postgres without dsn", "catalog:\n  sql:\n    driver: postgres\n", []string{`catalog.sql.dsn is missing: the postgres driver needs a connection URL, e.g. dsn: postgres://`}},
		{"rest without uri", "catalog:\n  type: rest\n", []string{`catalog.rest.uri is missing: catalog type rest needs the REST catalog's URL, e.g. uri: http://127.0.0.1:8181`}},
		{"rest bad uri", "catalog:\n  type: rest\n  rest:\n    uri: localhost:8181\n", []string{`line 4: catalog.rest.uri "localhost:8181" is not an http(s) URL`}},
		{"bad catalog name", "catalog:\n  name: my.cat\n", []string{`line 2: catalog.name "my.cat" is not valid`}},
		{"max_open_files zero", "warehouse:\n  max_open_files: 0\n", []string{`line 2: warehouse.max_open_files must be between 1 and 256 files written at once (got 0), e.g. max_open_files: 8`}},
		{"request_timeout too short", "warehouse:\n  request_timeout: 10ms\n", []string{`line 2: warehouse.request_timeout must be between 1s and 1h (got 10ms), e.g. request_timeout: 30s`}},
		{"max_open_files too many", "warehouse:\n  max_open_files: 5000\n", []string{`line 2: warehouse.max_open_files must be between 1 and 256 files written at once (got 5000)`}},
		{"epoch not positive", "epoch:\n  interval: 0s\n  max_rows: 0\n  max_bytes: -1\n  commit_concurrency: -2\nsnapshot:\n  chunk_rows: 0\n  workers: 65\n", []string{
			`line 2: epoch.interval must be positive (got 0s)`,
			`line 3: epoch.max_rows must be a positive number of row changes (got 0), e.g. max_rows: 200000`,
			`line 4: epoch.max_bytes must be a positive size (got -1), e.g. max_bytes: 128MiB`,
			`line 5: epoch.commit_concurrency must be a positive number of tables committed in parallel (got -2)`,
			`line 7: snapshot.chunk_rows must be a positive number of rows (got 0)`,
			`line 8: snapshot.workers must be between 1 and 64 (got 65)`}},
		{"maintenance not positive", "maintenance:\n  every_epochs: 0\n  compaction:\n    delete_files: 0\n    delete_ratio: 1.5\n    small_files: 1\n" +
			"    small_file_size: 0\n    target_file_size: 0\n    max_bytes: 0\n    max_manifests: 1\n    max_files: -3\n    max_lock: -1s\n  snapshots:\n    max_age: 0s\n    min_keep: 0\n" +
			"  orphans:\n    min_age: -1s\n    interval: 0s\n", []string{
			`line 2: maintenance.every_epochs must be a positive number of epochs (got 0)`,
			`line 4: maintenance.compaction.delete_files must be a positive number of delete files (got 0)`,
			`line 5: maintenance.compaction.delete_ratio must be a fraction above 0 and at most 1 (got 1.5)`,
			`line 6: maintenance.compaction.small_files must be at least 2 (got 1)`,
			`line 7: maintenance.compaction.small_file_size must be a positive size (got 0)`,
			`line 8: maintenance.compaction.target_file_size must be a positive size (got 0)`,
			`line 9: maintenance.compaction.max_bytes must be a positive size (got 0)`,
			`line 11: maintenance.compaction.max_files must be 0 (no limit) or more (got -3)`,
			`line 12: maintenance.compaction.max_lock must be 0 (no bound) or a positive duration (got -1s), e.g. max_lock: 1s`,
			`line 10: maintenance.compaction.max_manifests must be at least 2 (got 1)`,
			`line 14: maintenance.snapshots.max_age must be positive (got 0s)`,
			`line 15: maintenance.snapshots.min_keep must be at least 1 (got 0)`,
			`line 17: maintenance.orphans.min_age must be positive (got -1s)`,
			`line 18: maintenance.orphans.interval must be positive (got 0s)`}},
		{"maintenance sizes inconsistent", "maintenance:\n  compaction:\n    small_file_size: 64MiB\n    target_file_size: 32MiB\n    max_bytes: 16MiB\n", []string{
			`line 3: maintenance.compaction.small_file_size (64MiB) must be smaller than target_file_size (32MiB)`,
			`line 5: maintenance.compaction.max_bytes (16MiB) must be at least target_file_size (32MiB)`}},
		{"bad ratio", "maintenance:\n  compaction:\n    delete_ratio: lots\n", []string{
			`line 3: maintenance.compaction.delete_ratio: "lots" is not a number: write a decimal such as 0.2`}},
		{"gc percent out of range", "gc_percent: 0\n", []string{
			`line 1: gc_percent must be between 1 and 1000, or -1 to collect by memory_limit alone (got 0), e.g. gc_percent: 50`}},
		{"gc off without a limit", "gc_percent: -1\n", []string{
			`line 1: gc_percent: -1 turns off collections by heap growth, so it needs memory_limit; set memory_limit too`}},
		{"memory limit too small", "memory_limit: 10MiB\n", []string{
			`line 1: memory_limit must be at least 64MiB (got 10MiB), or 0 for none, e.g. memory_limit: 1GiB`}},
		{"epoch bytes over the memory limit", "memory_limit: 256MiB\nepoch:\n  max_bytes: 128MiB\n", []string{
			`line 3: epoch.max_bytes (128MiB) does not fit under memory_limit (256MiB): an epoch fills while the one before it commits, ` +
				`and writing it takes about as much again; set epoch.max_bytes to at most 85MiB`}},
		{"short lease", "lease:\n  ttl: 1s\n", []string{`line 2: lease.ttl 1s is too short: a holder renews every third of it, so use at least 3s, e.g. ttl: 30s`}},
		{"lease wait not a bool", "lease:\n  wait: maybe\n", []string{`lease.wait`}},
		{"bad listen", "http:\n  listen: 9187\n", []string{`line 2: http.listen "9187" is not an address: write host:port, e.g. 127.0.0.1:9187 or :9187, or off to disable the HTTP server`}},
		{"bad location scheme", "warehouse:\n  location: gs://b/p\n", []string{`line 2: warehouse.location "gs://b/p" uses the scheme "gs", which cdcsync does not support`}},
		{"oss without endpoint", "warehouse:\n  location: oss://b/p\n", []string{`warehouse.s3.endpoint is missing: an oss:// location needs the OSS endpoint of the bucket's region`}},
		{"bad endpoint", "warehouse:\n  s3:\n    endpoint: 127.0.0.1:9000\n", []string{`line 3: warehouse.s3.endpoint "127.0.0.1:9000" is not an http(s) URL: include the scheme, e.g. http://127.0.0.1:9000`}},
		{"key id without secret", "warehouse:\n  s3:\n    access_key_id: AK\n", []string{`warehouse.s3.secret_access_key is missing: access_key_id needs its secret`}},
		{"secret without key id", "warehouse:\n  s3:\n    secret_access_key: SK\n", []string{`line 3: warehouse.s3.access_key_id is missing: secret_access_key is set without it`}},
	}
	for _, tt := range others {
		t.Run(tt.name, func(t *testing.T) {
			msg := parseErr(t, tt.src+minimal)
			wantContains(t, msg, tt.wants...)
			if strings.Contains(msg, "source.") {
				t.Errorf("unexpected source problem:\n%s", msg)
			}
		})
	}
}

func TestValidateWithoutFile(t *testing.T) {
	// A Config built in code has no line numbers and no source name.
	var c Config
	err := c.Validate()
	if err == nil {
		t.Fatal("empty Config validated")
	}
	if !strings.HasPrefix(err.Error(), "pipeline is empty") {
		t.Errorf("first problem: %v", err)
	}
	wantContains(t, err.Error(), "\nhttp.listen is empty", "source.user is missing", "source.port 0 is out of range")
	if regexp.MustCompile(`line \d`).MatchString(err.Error()) {
		t.Errorf("line numbers without a file:\n%v", err)
	}
	c2 := parseOK(t, minimal)
	c2.Epoch.MaxRows = -1
	if err := c2.Validate(); err == nil || !strings.Contains(err.Error(), "test.yaml: epoch.max_rows must be a positive") {
		t.Errorf("Validate after a change: %v", err)
	}
}

func TestTableRules(t *testing.T) {
	base := "source:\n  user: a\n  server_id: 1\n  include: [\"shop.*\", \"!shop.tmp\"]\ntables:\n"
	tests := []struct {
		name  string
		rules string
		wants []string
	}{
		{"duplicate match", "  - match: shop.orders\n  - match: shop.items\n  - match: shop.orders\n",
			[]string{`line 8: tables[2].match "shop.orders" repeats tables[0]: merge the two rules into one`}},
		{"missing match", "  - name: x\n", []string{`tables[0].match is missing: set it to the MySQL table this rule applies to, e.g. match: shop.orders`}},
		{"wildcard match", "  - match: shop.*\n", []string{`line 6: tables[0].match "shop.*" is not a table name: write exactly "db.table", without wildcards (each rule applies to one table)`}},
		{"not selected", "  - match: crm.users\n  - match: shop.tmp\n", []string{
			`line 6: tables[0].match "crm.users" names a table that source.include and source.exclude do not select, so the rule never applies`,
			`line 7: tables[1].match "shop.tmp" names a table that source.include`}},
		{"dotted namespace", "  - match: shop.orders\n    namespace: prod.shop\n", []string{`line 7: tables[0].namespace "prod.shop" contains ".": Iceberg namespaces are single level here (Spark and Trino JDBC catalogs need that), so use e.g. "prod_shop"`}},
		{"same target", "  - match: shop.a\n    name: t\n  - match: shop.b\n    name: t\n", []string{`line 8: tables[1] writes to the Iceberg table shop.t like tables[0]`}},
		{"bad partitions", "  - match: shop.orders\n    partition:\n      - bucket(id)\n      - bucket(id, 16)\n      - truncate(0, name)\n      - days(ts)\n      - hour(ts)\n      - weekday(ts)\n      - \"\"\n      - day(\n      - a b\n      - month(x, y)\n      - bucket(16, id)\n      - bucket(16,id)\n", []string{
			`line 8: tables[0].partition[0] "bucket(id)" is not valid: bucket takes a bucket count and a column, e.g. bucket(16, id)`,
			`line 9: tables[0].partition[1] "bucket(id, 16)" is not valid: write a bucket count first, then the column, e.g. bucket(16, id)`,
			`line 10: tables[0].partition[2] "truncate(0, name)" is not valid: a width must be positive, e.g. truncate(10, name)`,
			`line 12: tables[0].partition[4] "hour(ts)" and partition[3] "days(ts)" both partition by time on ts: keep only one (Iceberg rejects redundant time partitions)`,
			`line 13: tables[0].partition[5] "weekday(ts)" uses the unknown transform "weekday": use identity, bucket, truncate, year, month, day or hour`,
			`line 14: tables[0].partition[6] "" is empty`,
			`line 15: tables[0].partition[7] "day(" has no closing ")"`,
			`line 16: tables[0].partition[8] "a b" is not a column name or a transform`,
			`line 17: tables[0].partition[9] "month(x, y)" is not valid: month takes one column, e.g. month(created_at)`,
			`line 19: tables[0].partition[11] "bucket(16,id)" repeats partition[10]: remove one of them`}},
		{"negative stage_above", "  - match: shop.orders\n    stage_above: -1\n", []string{
			`line 7: tables[0].stage_above is -1; it is a number of partition files (default 64), or 0 to never stage rows`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantContains(t, parseErr(t, base+tt.rules), tt.wants...)
		})
	}

	c := parseOK(t, base+"  - match: shop.orders\n    partition: [\"days(created_at)\", \"bucket( 16 , id )\", region, \"identity(`weird col`)\", \"truncate(8, sku)\", \"YEAR(shipped)\"]\n  - match: shop.items\n    namespace: sales\n")
	r := c.Rule("shop", "orders")
	if r == nil || r.Namespace != "shop" || r.Name != "orders" {
		t.Fatalf("Rule(shop, orders) = %+v", r)
	}
	if got := c.ParquetFor("shop", "orders"); got != (Parquet{Compression: CodecZstd}) {
		t.Errorf("parquet unset: %+v, want zstd at its default level", got)
	}
	c2 := parseOK(t, base+"  - match: shop.orders\n    parquet:\n      level: 9\n  - match: shop.items\n    parquet:\n      compression: LZ4_RAW\nparquet:\n  compression: gzip\n  level: 1\n")
	for _, tc := range []struct {
		table string
		want  Parquet
	}{{"orders", Parquet{Compression: CodecGzip, Level: 9}}, {"items", Parquet{Compression: CodecLz4Raw}}, {"other", Parquet{Compression: CodecGzip, Level: 1}}} {
		if got := c2.ParquetFor("shop", tc.table); got != tc.want {
			t.Errorf("ParquetFor(shop.%s) = %+v, want %+v", tc.table, got, tc.want)
		}
	}
	if n := c.StageAboveFor("shop", "orders"); n != DefaultStageAbove {
		t.Errorf("stage_above unset: %d, want the default %d", n, DefaultStageAbove)
	}
	if n := parseOK(t, base+"  - match: shop.orders\n    stage_above: 0\n").StageAboveFor("shop", "orders"); n != 0 {
		t.Errorf("stage_above: 0 gave %d", n)
	}
	fields, err := r.PartitionFields()
	if err != nil {
		t.Fatal(err)
	}
	want := []PartitionField{
		{Column: "created_at", Transform: "day"},
		{Column: "id", Transform: "bucket", Param: 16},
		{Column: "region", Transform: "identity"},
		{Column: "weird col", Transform: "identity"},
		{Column: "sku", Transform: "truncate", Param: 8},
		{Column: "shipped", Transform: "year"},
	}
	if !reflect.DeepEqual(fields, want) {
		t.Errorf("PartitionFields:\n got %+v\nwant %+v", fields, want)
	}
	if r := c.Rule("shop", "items"); r == nil || r.Namespace != "sales" || r.Name != "items" {
		t.Errorf("Rule(shop, items) = %+v", r)
	}
	if r := c.Rule("shop", "nothing"); r != nil {
		t.Errorf("Rule(shop, nothing) = %+v, want nil", r)
	}
	bad := TableRule{Partition: []string{"day(ts)", "bucket(x)", "nope("}}
	if _, err := bad.PartitionFields(); err == nil {
		t.Error("PartitionFields accepted bad entries")
	} else {
		wantContains(t, err.Error(), `partition[1] "bucket(x)" is not valid`, `partition[2] "nope(" has no closing ")"`)
	}
}

func TestEnvExpansion(t *testing.T) {
	t.Setenv("CDC_TEST_USER", "repl")
	t.Setenv("CDC_TEST_PASSWORD", "env-secret-pw")
	t.Setenv("CDC_TEST_PORT", "3310")
	t.Setenv("CDC_TEST_EMPTY", "")
	t.Setenv("CDC_TEST_BADPORT", "env-secret-port")
	os.Unsetenv("CDC_TEST_UNSET")

	c := parseOK(t, `
source:
  user: ${CDC_TEST_USER}
  password: "pre-${CDC_TEST_PASSWORD}-post"
  port: ${CDC_TEST_PORT}
  host: ${CDC_TEST_UNSET:-db.default}
  server_id: ${CDC_TEST_EMPTY:-77}
  include: ["${CDC_TEST_USER}.*"]
warehouse:
  location: /data/$$HOME/$x/a$$${CDC_TEST_USER}
`)
	if c.Source.User != "repl" || c.Source.Password.Value() != "pre-env-secret-pw-post" || c.Source.Port != 3310 ||
		c.Source.Host != "db.default" || c.Source.ServerID != 77 || c.Source.Include[0] != "repl.*" {
		t.Errorf("expansion: %+v", c.Source)
	}
	if c.Warehouse.Location != "/data/$HOME/$x/a$repl" {
		t.Errorf("$$ escape: %q", c.Warehouse.Location)
	}
	// A value from the environment that is "null" stays a string.
	t.Setenv("CDC_TEST_NULL", "null")
	c = parseOK(t, minimal+"  password: ${CDC_TEST_NULL}\n")
	if c.Source.Password.Value() != "null" {
		t.Errorf("password from env %q", c.Source.Password.Value())
	}

	tests := []struct {
		name   string
		extra  string
		wants  []string
		absent []string
	}{
		{"unset variable", "  host: ${CDC_TEST_UNSET}\n",
			[]string{`test.yaml: line 6: source.host: environment variable CDC_TEST_UNSET is not set: export it before starting cdcsync, or give a default with ${CDC_TEST_UNSET:-value}`}, nil},
		{"two unset variables", "  host: ${CDC_TEST_UNSET}${CDC_TEST_UNSET2}\n",
			[]string{`environment variable CDC_TEST_UNSET is not set`, `environment variable CDC_TEST_UNSET2 is not set`}, nil},
		{"unterminated", "  password: abc${CDC_TEST_PASSWORD\n",
			[]string{`line 6: source.password: "${" has no closing "}": close the variable reference, or write "$${" for a literal "${"`}, []string{"abc"}},
		{"invalid name", "  password: ${1X:-zzdefault}\n",
			[]string{`line 6: source.password: a "${...}" reference holds an invalid variable name`}, []string{"zzdefault"}},
		{"env value of the wrong type is not printed", "  port: ${CDC_TEST_BADPORT}\n",
			[]string{`line 6: source.port: the value from "${CDC_TEST_BADPORT}" is not an integer`}, []string{"env-secret-port"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := parseErr(t, minimal+tt.extra)
			wantContains(t, msg, tt.wants...)
			for _, a := range tt.absent {
				if strings.Contains(msg, a) {
					t.Errorf("error shows %q:\n%s", a, msg)
				}
			}
		})
	}
}

func TestPasswordFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pw.txt"), []byte("file-secret\r\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "cdcsync.yaml")
	if err := os.WriteFile(cfgPath, []byte(minimal+"  password_file: pw.txt\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if c.Source.PasswordFile != filepath.Join(dir, "pw.txt") {
		t.Errorf("password_file not resolved against the config directory: %q", c.Source.PasswordFile)
	}
	pw, err := c.Source.ResolvePassword()
	if err != nil || pw != "file-secret" {
		t.Errorf("ResolvePassword = %q, %v", pw, err)
	}

	s := Source{Password: "inline"}
	if pw, err := s.ResolvePassword(); err != nil || pw != "inline" {
		t.Errorf("inline ResolvePassword = %q, %v", pw, err)
	}
	missing := filepath.Join(dir, "nope.txt")
	s = Source{PasswordFile: missing}
	_, err = s.ResolvePassword()
	if err == nil {
		t.Fatal("missing password file accepted")
	}
	wantContains(t, err.Error(), fmt.Sprintf(`source.password_file %q cannot be read (no such file or directory): check the path`, missing))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error does not wrap fs.ErrNotExist: %v", err)
	}
	empty := filepath.Join(dir, "empty.txt")
	os.WriteFile(empty, []byte("\n"), 0o600)
	s = Source{PasswordFile: empty}
	if _, err := s.ResolvePassword(); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty password file: %v", err)
	}
}

func TestLoadPaths(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "cdcsync.yaml")
	src := minimal + `  tls:
    mode: verify-ca
    ca_file: certs/ca.pem
    cert_file: /abs/client.pem
    key_file: client.key
warehouse:
  s3:
    ca_file: minio.pem
`
	os.WriteFile(cfgPath, []byte(src), 0o600)
	c, err := Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ got, want string }{
		{c.Warehouse.Location, filepath.Join(dir, "warehouse")},
		{c.Catalog.SQL.DSN.Value(), filepath.Join(dir, "catalog.db")},
		{c.Source.TLS.CAFile, filepath.Join(dir, "certs/ca.pem")},
		{c.Source.TLS.CertFile, "/abs/client.pem"},
		{c.Source.TLS.KeyFile, filepath.Join(dir, "client.key")},
		{c.Warehouse.S3.CAFile, filepath.Join(dir, "minio.pem")},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("got %q, want %q", ch.got, ch.want)
		}
	}
	// Parse with a relative source leaves paths alone; with an absolute
	// source it resolves them against its directory.
	c = parseOK(t, minimal)
	if c.Warehouse.Location != "./warehouse" || c.Catalog.SQL.DSN.Value() != "./catalog.db" {
		t.Errorf("Parse resolved paths: %q %q", c.Warehouse.Location, c.Catalog.SQL.DSN.Value())
	}
	c, err = Parse([]byte(minimal+"catalog:\n  sql:\n    dsn: /var/lib/cat.db\nwarehouse:\n  location: s3://b/p\n"), "/etc/cdcsync/cdcsync.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Catalog.SQL.DSN.Value() != "/var/lib/cat.db" || c.Warehouse.Location != "s3://b/p" {
		t.Errorf("absolute paths and URLs were changed: %q %q", c.Catalog.SQL.DSN.Value(), c.Warehouse.Location)
	}
	_, err = Parse([]byte(minimal+"catalog:\n  sql:\n    dsn: \"file:cat.db?cache=shared\"\n"), "/etc/cdcsync/cdcsync.yaml")
	wantContains(t, fmt.Sprint(err), `line 8: catalog.sql.dsn for sqlite must be a plain file path, not a "file:" URI`)
	_, err = Parse([]byte(minimal+"catalog:\n  sql:\n    dsn: \"cat.db?cache=shared\"\n"), "/etc/cdcsync/cdcsync.yaml")
	wantContains(t, fmt.Sprint(err), `line 8: catalog.sql.dsn for sqlite must be a plain file path, not a "file:" URI, ":memory:" or options`)
	// A path with # or % is a path (lake/ escapes them in the SQLite URI).
	c, err = Parse([]byte(minimal+"catalog:\n  sql:\n    dsn: \"/srv/lake #2 100%/cat.db\"\n"), "/etc/cdcsync/cdcsync.yaml")
	if err != nil || c.Catalog.SQL.DSN.Value() != "/srv/lake #2 100%/cat.db" {
		t.Errorf("a catalog path with # and %%: %v", err)
	}
	c, err = Parse([]byte(minimal), "/etc/cdcsync/cdcsync.yaml")
	if err != nil || c.Warehouse.Location != "/etc/cdcsync/warehouse" {
		t.Errorf("Parse with absolute source: %v %+v", err, c)
	}

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing file: %v", err)
	}
	wantContains(t, err.Error(), "cannot read the configuration file", "missing.yaml", "no such file or directory")

	// Errors from Load name the file as given.
	os.WriteFile(cfgPath, []byte("source:\n  servr_id: 1\n"), 0o600)
	_, err = Load(cfgPath)
	wantContains(t, fmt.Sprint(err), cfgPath+`: line 2: unknown key "servr_id" in source; did you mean "server_id"?`)
}

func TestSecretsRedacted(t *testing.T) {
	c := parseOK(t, full)
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	logger.Info("config", "password", c.Source.Password, "cfg", c.Catalog.REST)
	yamlOut, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	jsonOut, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"%v":        fmt.Sprintf("%v", c),
		"%+v":       fmt.Sprintf("%+v", *c),
		"%#v":       fmt.Sprintf("%#v", *c),
		"%v source": fmt.Sprintf("%v", c.Source),
		"%d":        fmt.Sprintf("%d", c.Source.Password),
		"%x":        fmt.Sprintf("%x", c.Source.Password),
		"%q":        fmt.Sprintf("%q", c.Source.Password),
		"Sprint":    fmt.Sprint(c.Warehouse),
		"yaml":      string(yamlOut),
		"json":      string(jsonOut),
		"slog":      buf.String(),
		"String":    c.Catalog.SQL.DSN.String(),
		"GoString":  c.Catalog.SQL.DSN.GoString(),
		"validate": fmt.Sprint(func() error {
			x := *c
			x.Pipeline = "BAD"
			x.Catalog.SQL.DSN = "not-a-dsn-pg-secret"
			return x.Validate()
		}()),
	}
	for name, out := range outputs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s output contains the secret %q:\n%s", name, s, out)
			}
		}
		if name != "validate" && !strings.Contains(out, redacted) {
			t.Errorf("%s output lacks %q:\n%s", name, redacted, out)
		}
	}
	if !strings.Contains(outputs["validate"], "catalog.sql.dsn is not a PostgreSQL connection string") {
		t.Errorf("validate: %s", outputs["validate"])
	}
	if c.Source.Password.Value() != "hunter2-secret" {
		t.Errorf("Value() = %q", c.Source.Password.Value())
	}
	var empty Secret
	if empty.String() != "" || fmt.Sprintf("%v|%q", empty, empty) != `|""` {
		t.Errorf("empty secret prints %q", fmt.Sprintf("%v|%q", empty, empty))
	}
	if b, _ := json.Marshal(empty); string(b) != `""` {
		t.Errorf("empty secret JSON %s", b)
	}
}

func TestSelects(t *testing.T) {
	s := Source{
		Include: []string{"shop.*", "!shop.tmp_*", "crm.customer?", "*.audit", "mysql.*", "sys.x"},
		Exclude: []string{"shop.secret", "crm.customerz"},
	}
	tests := []struct {
		db, table string
		want      bool
	}{
		{"shop", "orders", true},
		{"shop", "tmp_orders", false}, // "!" include
		{"shop", "secret", false},     // exclude
		{"crm", "customers", true},
		{"crm", "customerz", false}, // exclude
		{"crm", "customer", false},  // ? needs one character
		{"crm", "orders", false},
		{"billing", "audit", true},
		{"Shop", "orders", false}, // case-sensitive
		{"mysql", "user", false},  // system schemas, even when a pattern matches
		{"MySQL", "user", false},
		{"information_schema", "tables", false},
		{"performance_schema", "audit", false},
		{"sys", "x", false},
	}
	for _, tt := range tests {
		if got := s.Selects(tt.db, tt.table); got != tt.want {
			t.Errorf("Selects(%q, %q) = %v, want %v", tt.db, tt.table, got, tt.want)
		}
	}
	if (&Source{}).Selects("shop", "orders") {
		t.Error("an empty include selected a table")
	}
	if (&Source{Include: []string{"*.*"}}).Selects("performance_schema", "x") {
		t.Error("*.* selected a system schema")
	}
}

func TestByteSize(t *testing.T) {
	good := map[string]ByteSize{
		"1024": 1024, "0": 0, "64MiB": 64 << 20, "1GiB": 1 << 30, "512KiB": 512 << 10, "10MB": 10e6,
		"1 GB": 1e9, "2TiB": 2 << 40, "100B": 100, "1.5GiB": 3 << 29, "128mib": 128 << 20, "200_000": 200000, "3kb": 3000,
	}
	for in, want := range good {
		got, err := parseByteSize(in)
		if err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "12 parsecs", "-5MiB", "1e3MB", "abc", "99999999TiB", "1.2.3GB"} {
		if _, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) accepted", in)
		}
	}
	for b, want := range map[ByteSize]string{128 << 20: "128MiB", 1 << 30: "1GiB", 1000: "1000B", 0: "0B", 1536: "3KiB" /* 1536 = 1.5KiB */} {
		if b == 1536 {
			want = "1536B"
		}
		if got := b.String(); got != want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(b), got, want)
		}
	}
	// Decoding through the YAML file: integers and strings.
	c := parseOK(t, minimal+"epoch:\n  max_bytes: 1048576\n")
	if c.Epoch.MaxBytes != 1<<20 {
		t.Errorf("max_bytes = %d", c.Epoch.MaxBytes)
	}
	// yaml.v3 and encoding/json can decode the type directly too.
	var v struct {
		B ByteSize `yaml:"b" json:"b"`
		D Duration `yaml:"d" json:"d"`
	}
	if err := yaml.Unmarshal([]byte("b: 2GiB\nd: 250ms\n"), &v); err != nil || v.B != 2<<30 || v.D.Duration != 250*time.Millisecond {
		t.Errorf("yaml.Unmarshal: %v %+v", err, v)
	}
	if err := json.Unmarshal([]byte(`{"b":"10MB","d":"1m"}`), &v); err != nil || v.B != 10e6 || v.D.Duration != time.Minute {
		t.Errorf("json.Unmarshal: %v %+v", err, v)
	}
	if err := yaml.Unmarshal([]byte("b: lots\n"), &v); err == nil || !strings.Contains(err.Error(), `line 1: "lots" is not a byte size`) {
		t.Errorf("yaml.Unmarshal bad size: %v", err)
	}
}

func TestDuration(t *testing.T) {
	good := map[string]time.Duration{"5s": 5 * time.Second, "250ms": 250 * time.Millisecond, "1m": time.Minute, "1h30m": 90 * time.Minute, " 2s ": 2 * time.Second}
	for in, want := range good {
		got, err := parseDuration(in)
		if err != nil || got.Duration != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "5", "five seconds", "1d", "10 s"} {
		if _, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) accepted", in)
		}
	}
	d := Duration{90 * time.Second}
	if b, _ := d.MarshalText(); string(b) != "1m30s" {
		t.Errorf("MarshalText = %s", b)
	}
	var u Duration
	if err := u.UnmarshalYAML(&yaml.Node{Kind: yaml.ScalarNode, Value: "5", Line: 3}); err == nil ||
		err.Error() != `line 3: "5" is not a duration: write a number with a unit, e.g. "5s", "250ms" or "1m"` {
		t.Errorf("UnmarshalYAML bad duration: %v", err)
	}
}

func TestWarehouseURL(t *testing.T) {
	cwd, _ := os.Getwd()
	tests := []struct {
		loc, want, err string
	}{
		{"/data/lake", "file:///data/lake", ""},
		{"/data/my lake/", "file:///data/my%20lake", ""},
		{"./warehouse", "file://" + filepath.ToSlash(filepath.Join(cwd, "warehouse")), ""},
		{"warehouse", "file://" + filepath.ToSlash(filepath.Join(cwd, "warehouse")), ""},
		{"file:///data/lake", "file:///data/lake", ""},
		{"file:///data/../lake/", "file:///lake", ""},
		{"file://localhost/data", "file:///data", ""},
		{"s3://bucket/prefix", "s3://bucket/prefix", ""},
		{"s3://bucket/prefix/", "s3://bucket/prefix", ""},
		{"s3://bucket", "s3://bucket", ""},
		{"oss://bucket/a/b", "s3://bucket/a/b", ""},
		{"OSS://bucket/a", "s3://bucket/a", ""},
		{"", "", `warehouse.location is empty: use a local directory, file:///abs/path, s3://bucket/prefix or oss://bucket/prefix`},
		{"file://data/lake", "", `warehouse.location "file://data/lake" is not an absolute file URL: write file:///abs/path (three slashes), or a plain path such as ./warehouse`},
		{"file:data", "", `is not an absolute file URL`},
		{"s3:///prefix", "", `warehouse.location "s3:///prefix" names no bucket: write s3://bucket/prefix`},
		{"s3a://bucket/p", "", `warehouse.location "s3a://bucket/p" uses the scheme "s3a": write s3:// instead`},
		{"gs://bucket/p", "", `warehouse.location "gs://bucket/p" uses the scheme "gs", which cdcsync does not support: use a local directory, file:///abs/path, s3://bucket/prefix or oss://bucket/prefix (OSS through its S3 API)`},
		{"hdfs://nn/p", "", `uses the scheme "hdfs", which cdcsync does not support`},
		{"s3://AKID:secret@bucket/p", "", `must be just s3://bucket/prefix: put credentials and options under warehouse.s3`},
	}
	for _, tt := range tests {
		w := Warehouse{Location: tt.loc}
		got, err := w.URL()
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("URL(%q) error = %v, want %q", tt.loc, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("URL(%q) = %q, %v; want %q", tt.loc, got, err, tt.want)
		}
	}
}

func TestExampleFile(t *testing.T) {
	t.Setenv("MYSQL_PASSWORD", "example-secret")
	c, err := Load(filepath.Join("..", "cdcsync.example.yaml"))
	if err != nil {
		t.Fatalf("the example configuration does not load:\n%v", err)
	}
	if c.Source.Password.Value() != "example-secret" {
		t.Errorf("password = %q", c.Source.Password.Value())
	}
	if !filepath.IsAbs(c.Warehouse.Location) && !hasScheme(c.Warehouse.Location) {
		t.Errorf("warehouse.location not resolved: %q", c.Warehouse.Location)
	}
	os.Unsetenv("MYSQL_PASSWORD")
	// Without the password the file loads (tables and cat need none); the
	// commands that connect to MySQL get the error.
	c, err = Load(filepath.Join("..", "cdcsync.example.yaml"))
	if err != nil {
		t.Fatalf("example without MYSQL_PASSWORD: %v", err)
	}
	if _, err := c.Source.ResolvePassword(); err == nil || !strings.Contains(err.Error(), "line 23: source.password: environment variable MYSQL_PASSWORD is not set") {
		t.Errorf("example without MYSQL_PASSWORD: the password resolves with %v", err)
	}
}

func TestNearest(t *testing.T) {
	keys := []string{"host", "port", "user", "password", "password_file", "server_id", "include", "exclude", "connect_timeout", "tls", "on_position_lost"}
	tests := map[string]string{
		"servr_id": "server_id", "serverid": "server_id", "ServerID": "server_id", "server-id": "server_id",
		"pasword": "password", "password-file": "password_file", "hots": "host", "connect_timout": "connect_timeout",
		"includes": "include", "bogus": "", "ssl": "", "timeout": "",
	}
	for in, want := range tests {
		if got := nearest(in, keys); got != want {
			t.Errorf("nearest(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDocs keeps docs/configuration.md honest: every key is documented and
// every complete example parses.
func TestDocs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	var walk func(rt reflect.Type, prefix string)
	walk = func(rt reflect.Type, prefix string) {
		info := infoOf(rt)
		for _, key := range info.names {
			p := joinPath(prefix, key)
			ft := rt.Field(info.index[key]).Type
			switch {
			case ft.Kind() == reflect.Struct && ft != durationType:
				walk(ft, p)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), p+"[]")
			default:
				if !bytes.Contains(doc, []byte("`"+p+"`")) {
					t.Errorf("docs/configuration.md does not document `%s`", p)
				}
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")

	for _, v := range []string{"MYSQL_PASSWORD", "MINIO_ACCESS_KEY", "MINIO_SECRET_KEY", "PG_PASSWORD"} {
		t.Setenv(v, "x")
	}
	examples := 0
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.HasPrefix(block, "source:") && !strings.HasPrefix(block, "pipeline:") {
			continue // a fragment
		}
		examples++
		if _, err := Parse([]byte(block), "example"); err != nil {
			t.Errorf("a documented example does not parse:\n%s\n%v", block, err)
		}
	}
	if examples < 3 {
		t.Errorf("found %d complete examples in the docs, want at least 3", examples)
	}
}

// TestTypes covers the types: section: its policies, synonyms, and a bare
// YAML null, which would otherwise silently mean the default.
func TestTypes(t *testing.T) {
	base := "source:\n  user: u\n  server_id: 5\n  include: [\"a.*\"]\n"
	c, err := Parse([]byte(base+"types:\n  zero_date: epoch\n  zero_timestamp: TO_NULL\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Types{ZeroDate: TypeToEpoch, ZeroDatetime: TypeError, ZeroTimestamp: TypeToNull}); c.Types != want {
		t.Errorf("types = %+v, want %+v", c.Types, want)
	}
	for yaml, wants := range map[string][]string{
		"types:\n  zero_date: null\n":      {"line 6", "types.zero_date is written as a bare null", "to_null"},
		"types:\n  zero_datetime: zero\n":  {"line 6", `types.zero_datetime "zero" is not valid`, "error, to_null, to_epoch"},
		"types:\n  zero_timestamp: \"\"\n": {"types.zero_timestamp is empty"},
		"types:\n  zero_dates: error\n":    {`unknown key "zero_dates"`, "zero_date"},
	} {
		_, err := Parse([]byte(base+yaml), "")
		for _, w := range wants {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %v lacks %q", yaml, err, w)
			}
		}
	}
}

// memory_limit sets the default of epoch.max_bytes to a quarter of it (never
// above the usual default); an explicit max_bytes that fits is kept.
func TestMemoryLimitDefaults(t *testing.T) {
	for _, tt := range []struct {
		src      string
		limit    ByteSize
		maxBytes ByteSize
	}{
		{"", 0, DefaultEpochMaxBytes},
		{"memory_limit: 256MiB\n", 256 << 20, 64 << 20},
		{"memory_limit: 4GiB\n", 4 << 30, DefaultEpochMaxBytes},
		{"memory_limit: 1GiB\nepoch:\n  max_bytes: 300MiB\n", 1 << 30, 300 << 20},
		{"memory_limit: 0\n", 0, DefaultEpochMaxBytes},
	} {
		c := parseOK(t, tt.src+minimal)
		if c.MemoryLimit != tt.limit || c.Epoch.MaxBytes != tt.maxBytes {
			t.Errorf("%q: memory_limit %s, epoch.max_bytes %s; want %s and %s", tt.src, c.MemoryLimit, c.Epoch.MaxBytes, tt.limit, tt.maxBytes)
		}
	}
}

// An unset variable in source.password does not stop the file from
// loading: tables and cat need no password. Every command that connects
// to MySQL gets the error, with its line, from ResolvePassword.
func TestUnsetPasswordVariableIsLazy(t *testing.T) {
	c := parseOK(t, minimal+"  password: ${CDC_TEST_UNSET}${CDC_TEST_UNSET2}\n")
	_, err := c.Source.ResolvePassword()
	if err == nil {
		t.Fatal("the password resolved although its variables are unset")
	}
	wantContains(t, err.Error(), `test.yaml: line 6: source.password: environment variable CDC_TEST_UNSET is not set: export it before starting cdcsync, or give a default with ${CDC_TEST_UNSET:-value}`,
		`environment variable CDC_TEST_UNSET2 is not set`)
	t.Setenv("CDC_TEST_SET", "s3cret-pw")
	c = parseOK(t, minimal+"  password: ${CDC_TEST_SET}\n")
	if pw, err := c.Source.ResolvePassword(); err != nil || pw != "s3cret-pw" {
		t.Errorf("a set variable: %q, %v", pw, err)
	}
}

// epoch.max_bytes, when left out, is a quarter of the Go runtime's share of
// memory_limit; a value the configuration sets stays.
func TestFitEpoch(t *testing.T) {
	cfg := &Config{}
	cfg.Epoch.MaxBytes = DefaultEpochMaxBytes
	cfg.FitEpoch(160 << 20)
	if cfg.Epoch.MaxBytes != 40<<20 {
		t.Errorf("max_bytes %s for 160MiB, want 40MiB", cfg.Epoch.MaxBytes)
	}
	cfg.FitEpoch(4 << 30)
	if cfg.Epoch.MaxBytes != DefaultEpochMaxBytes {
		t.Errorf("max_bytes %s for a 4GiB heap, want the default %s", cfg.Epoch.MaxBytes, DefaultEpochMaxBytes)
	}
	cfg.meta = &meta{set: map[string]bool{"epoch.max_bytes": true}}
	cfg.Epoch.MaxBytes = 16 << 20
	cfg.FitEpoch(40 << 20)
	if cfg.Epoch.MaxBytes != 16<<20 {
		t.Errorf("an explicit max_bytes changed to %s", cfg.Epoch.MaxBytes)
	}
}
