// Package docker holds the container image (Dockerfile) and the quick start
// (compose.yaml). Docker cannot run where the tests run, so these tests check
// the files: the compose file's services against the cdcsync configuration it
// mounts (loaded with config.Load), the Dockerfiles with hadolint and against
// go.mod, and the quick start's configuration, sample database and DuckDB
// query script natively, against the MariaDB and MinIO of integration/testenv.
package docker

import (
	"bufio"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/cdcsync/cdcsync/config"
)

// compose is the part of a compose file the tests read.
type compose struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       *composeBuild     `yaml:"build"`
	Command     []string          `yaml:"command"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

func readCompose(t *testing.T) compose {
	t.Helper()
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	d := yaml.NewDecoder(strings.NewReader(string(raw)))
	d.KnownFields(false)
	if err := d.Decode(&c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return c
}

// mount returns the host side of svc's volume mounted at target.
func (s composeService) mount(target string) (string, bool) {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == target {
			return parts[0], true
		}
	}
	return "", false
}

// loadComposeConfig loads the cdcsync configuration the compose file mounts
// into the cdcsync service, with the service's environment.
func loadComposeConfig(t *testing.T, c compose) (*config.Config, string) {
	t.Helper()
	svc := c.Services["cdcsync"]
	i := slices.Index(svc.Command, "--config")
	if i < 0 || i+1 >= len(svc.Command) {
		t.Fatalf("the cdcsync service's command %q has no --config FILE", svc.Command)
	}
	host, ok := svc.mount(svc.Command[i+1])
	if !ok {
		t.Fatalf("the cdcsync service runs with --config %s, which no volume mounts", svc.Command[i+1])
	}
	for k, v := range svc.Environment {
		t.Setenv(k, v)
	}
	cfg, err := config.Load(host)
	if err != nil {
		t.Fatalf("the quick start's configuration does not load: %v", err)
	}
	if err := cfg.Source.PasswordUnset(); err != nil {
		t.Fatalf("the cdcsync service does not set the password's variable: %v", err)
	}
	return cfg, host
}

func TestComposeQuickStart(t *testing.T) {
	c := readCompose(t)
	for _, name := range []string{"mariadb", "minio", "create-bucket", "cdcsync", "query"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("compose.yaml lacks the service %s", name)
		}
	}
	for name, s := range c.Services {
		if s.Build != nil {
			dir := filepath.Clean(s.Build.Context)
			df := filepath.Join(dir, "Dockerfile")
			if s.Build.Dockerfile != "" {
				df = filepath.Join(dir, s.Build.Dockerfile)
			}
			if _, err := os.Stat(df); err != nil {
				t.Errorf("service %s builds %s: %v", name, df, err)
			}
		} else if !pinnedImage(s.Image) {
			t.Errorf("service %s: image %q is not pinned to a tag or digest", name, s.Image)
		}
		for dep, d := range s.DependsOn {
			other, ok := c.Services[dep]
			if !ok {
				t.Errorf("service %s depends on %s, which compose.yaml lacks", name, dep)
			}
			if d.Condition == "service_healthy" && other.Healthcheck == nil {
				t.Errorf("service %s waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
		for _, v := range s.Volumes {
			src := strings.Split(v, ":")[0]
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("service %s mounts the volume %s, which compose.yaml does not declare", name, src)
			}
		}
	}

	cfg, _ := loadComposeConfig(t, c)
	maria, minio, cdc, query := c.Services["mariadb"], c.Services["minio"], c.Services["cdcsync"], c.Services["query"]

	// MariaDB: the binlog as cdcsync needs it, the account the
	// configuration uses, the database it mirrors.
	for _, want := range []string{"--log-bin=binlog", "--binlog-format=ROW", "--binlog-row-image=FULL", "--binlog-row-metadata=FULL", "--server-id=1"} {
		if !slices.Contains(maria.Command, want) {
			t.Errorf("mariadb's command lacks %s: %q", want, maria.Command)
		}
	}
	if cfg.Source.Host != "mariadb" || cfg.Source.Port != 3306 {
		t.Errorf("source is %s:%d, want the mariadb service on 3306", cfg.Source.Host, cfg.Source.Port)
	}
	if cfg.Source.User != maria.Environment["MARIADB_USER"] || cfg.Source.Password.Value() != maria.Environment["MARIADB_PASSWORD"] {
		t.Errorf("cdcsync logs in as %s with another password than mariadb's MARIADB_USER %s and MARIADB_PASSWORD",
			cfg.Source.User, maria.Environment["MARIADB_USER"])
	}
	if db := maria.Environment["MARIADB_DATABASE"]; !slices.Contains(cfg.Source.Include, db+".*") {
		t.Errorf("source.include %q does not mirror the database %s", cfg.Source.Include, db)
	}
	if uint32(cfg.Source.ServerID) == 1 {
		t.Error("source.server_id is mariadb's own --server-id=1")
	}
	if src, ok := maria.mount("/docker-entrypoint-initdb.d"); !ok {
		t.Error("mariadb mounts no sample database into /docker-entrypoint-initdb.d")
	} else if sql, err := os.ReadFile(filepath.Join(src, "10-shop.sql")); err != nil {
		t.Error(err)
	} else if !strings.Contains(string(sql), "REPLICATION SLAVE") || !strings.Contains(string(sql), "TO '"+cfg.Source.User+"'@'%'") {
		t.Errorf("initdb/10-shop.sql grants %s no REPLICATION SLAVE", cfg.Source.User)
	}

	// MinIO: the endpoint, the credentials and the bucket.
	u, err := url.Parse(cfg.Warehouse.S3.Endpoint)
	if err != nil || u.Hostname() != "minio" || u.Port() != "9000" || !cfg.Warehouse.S3.PathStyle {
		t.Errorf("warehouse.s3 is %s (path_style %v), want http://minio:9000 with path-style requests", cfg.Warehouse.S3.Endpoint, cfg.Warehouse.S3.PathStyle)
	}
	if cfg.Warehouse.S3.AccessKeyID != minio.Environment["MINIO_ROOT_USER"] || cfg.Warehouse.S3.SecretAccessKey.Value() != minio.Environment["MINIO_ROOT_PASSWORD"] {
		t.Error("cdcsync's S3 credentials are not minio's MINIO_ROOT_USER and MINIO_ROOT_PASSWORD")
	}
	wu, err := url.Parse(cfg.Warehouse.Location)
	if err != nil || wu.Scheme != "s3" {
		t.Fatalf("warehouse.location %q is not on S3", cfg.Warehouse.Location)
	}
	mb := strings.Join(c.Services["create-bucket"].Command, " ")
	if !strings.Contains(mb, "mc mb --ignore-existing quickstart/"+wu.Host) || !strings.Contains(mb, "http://minio:9000") {
		t.Errorf("create-bucket does not create the bucket %s on minio: %s", wu.Host, mb)
	}

	// cdcsync: HTTP reachable from outside, the catalog on the volume the
	// query service reads, started after MariaDB and the bucket.
	host, port, err := net.SplitHostPort(cfg.HTTP.Listen)
	if err != nil || host != "0.0.0.0" {
		t.Errorf("http.listen is %q; in a container it must listen on 0.0.0.0", cfg.HTTP.Listen)
	}
	if !slices.ContainsFunc(cdc.Ports, func(p string) bool { return strings.HasSuffix(p, ":"+port) }) {
		t.Errorf("the cdcsync service publishes %q, not http.listen's port %s", cdc.Ports, port)
	}
	if cdc.DependsOn["mariadb"].Condition != "service_healthy" || cdc.DependsOn["create-bucket"].Condition != "service_completed_successfully" {
		t.Errorf("cdcsync must wait for mariadb to be healthy and the bucket to exist: %+v", cdc.DependsOn)
	}
	if cfg.Catalog.Type != "sql" || cfg.Catalog.SQL.Driver != "sqlite" {
		t.Fatalf("catalog is %s/%s; the query service reads a SQLite catalog", cfg.Catalog.Type, cfg.Catalog.SQL.Driver)
	}
	dsn := cfg.Catalog.SQL.DSN.Value()
	vol, ok := cdc.mount(filepath.Dir(dsn))
	if !ok {
		t.Fatalf("the SQLite catalog %s is on no volume of the cdcsync service", dsn)
	}
	if qv, ok := query.mount(filepath.Dir(dsn)); !ok || qv != vol {
		t.Errorf("the query service does not mount the catalog's volume %s at %s", vol, filepath.Dir(dsn))
	}
	if query.Environment["CATALOG_DB"] != dsn || query.Environment["CATALOG_NAME"] != cfg.Catalog.Name {
		t.Errorf("the query service reads %s catalog %s, cdcsync writes %s catalog %s",
			query.Environment["CATALOG_DB"], query.Environment["CATALOG_NAME"], dsn, cfg.Catalog.Name)
	}
	if query.Environment["S3_ENDPOINT"] != u.Host || query.Environment["S3_ACCESS_KEY"] != cfg.Warehouse.S3.AccessKeyID ||
		query.Environment["S3_SECRET_KEY"] != cfg.Warehouse.S3.SecretAccessKey.Value() {
		t.Error("the query service's S3 settings differ from cdcsync's warehouse.s3")
	}
}

// pinnedImage reports whether an image reference names a version: a digest,
// or a tag other than latest (distroless publishes no version tags: its
// static-debian12:nonroot is as pinned as a tag gets there).
func pinnedImage(ref string) bool {
	if strings.Contains(ref, "@sha256:") {
		return true
	}
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return false
	}
	tag := ref[i+1:]
	return tag != "" && tag != "latest"
}

// dockerfile is a parsed Dockerfile: its instructions, continuation lines
// joined, comments dropped.
type instruction struct {
	cmd  string // upper case
	args string
}

func readDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []instruction
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// goVersion is the go directive of go.mod.
func goVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}

func TestDockerfile(t *testing.T) {
	ins := readDockerfile(t, "Dockerfile")
	var froms []string
	var build, final []instruction
	for _, in := range ins {
		if in.cmd == "FROM" {
			froms = append(froms, in.args)
		}
		switch {
		case len(froms) == 1:
			build = append(build, in)
		case len(froms) >= 2:
			final = append(final, in)
		}
	}
	if len(froms) != 2 {
		t.Fatalf("want a two-stage build, got FROM %q", froms)
	}
	for _, f := range froms {
		if !pinnedImage(strings.Fields(f)[0]) {
			t.Errorf("FROM %s is not pinned to a version", f)
		}
	}
	if want := "golang:" + goVersion(t) + " AS build"; froms[0] != want {
		t.Errorf("the build stage is FROM %s; want %s, the Go of go.mod", froms[0], want)
	}
	if !strings.HasPrefix(froms[1], "gcr.io/distroless/static") || !strings.HasSuffix(froms[1], ":nonroot") {
		t.Errorf("the final stage is FROM %s; want distroless/static (a static binary needs no libc) as nonroot", froms[1])
	}
	var buildText string
	for _, in := range build {
		buildText += in.cmd + " " + in.args + "\n"
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.date=${DATE}"`, "./cmd/cdcsync"} {
		if !strings.Contains(buildText, want) {
			t.Errorf("the build stage lacks %s:\n%s", want, buildText)
		}
	}
	var user, entry string
	for _, in := range final {
		switch in.cmd {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entry = in.args
		case "COPY":
			if !strings.Contains(in.args, "--from=build") {
				t.Errorf("the final stage copies from the context: COPY %s", in.args)
			}
		case "RUN":
			t.Errorf("the final stage has no shell to RUN %s", in.args)
		}
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("the image runs as %q; want a non-root user", user)
	}
	if entry != `["/usr/local/bin/cdcsync"]` {
		t.Errorf("ENTRYPOINT %s; want the binary, in exec form", entry)
	}

	q := readDockerfile(t, filepath.Join("query", "Dockerfile"))
	for _, in := range q {
		switch in.cmd {
		case "FROM":
			if !pinnedImage(in.args) {
				t.Errorf("query/Dockerfile: FROM %s is not pinned", in.args)
			}
		case "RUN":
			for _, pkg := range regexp.MustCompile(`\b(duckdb[a-z-]*|pytz)(==\S+)?`).FindAllStringSubmatch(in.args, -1) {
				if pkg[2] == "" {
					t.Errorf("query/Dockerfile installs %s without a pinned version", pkg[1])
				}
			}
		case "USER":
			if strings.HasPrefix(in.args, "0") || strings.HasPrefix(in.args, "root") {
				t.Errorf("query/Dockerfile runs as %s", in.args)
			}
		}
	}
}

// hadolint (scripts/test.sh installs it into .tools/bin) finds nothing in
// either Dockerfile.
func TestHadolint(t *testing.T) {
	bin := hadolint(t)
	for _, df := range []string{"Dockerfile", filepath.Join("query", "Dockerfile")} {
		out, err := execOutput(bin, "--no-color", df)
		if err != nil {
			t.Errorf("hadolint %s: %v\n%s", df, err, out)
		}
	}
}

// The build context leaves out what the build does not read, the git
// directory and the tools in particular.
func TestDockerignore(t *testing.T) {
	raw, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	for _, want := range []string{".git", ".tools", ".demo", "warehouse", "integration", "docker"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore does not leave out %s", want)
		}
	}
	for _, keep := range []string{"go.mod", "go.sum", "cmd", "lake", "capture", "merge", "config", "metrics"} {
		if slices.Contains(lines, keep) {
			t.Errorf(".dockerignore leaves out %s, which the build needs", keep)
		}
	}
}
