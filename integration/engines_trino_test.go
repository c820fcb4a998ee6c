package integration

// Trino reads the tables of TestEngines' PostgreSQL-catalog pipeline through
// its Iceberg connector (JDBC catalog on PostgreSQL, native S3 on MinIO).
// Optional: it runs only with CDCSYNC_TRINO=1, after
// `CDCSYNC_TRINO=1 scripts/engines.sh` installed Trino (an 820 MB download,
// a JDK 24+, and about a minute of server start on 2 cores).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/lake"
)

func trinoWanted() bool { return os.Getenv("CDCSYNC_TRINO") == "1" }

type trinoServer struct {
	url  string
	log  string
	cmd  *exec.Cmd
	done chan error
}

// startTrino starts a single-node Trino whose catalogs are the PostgreSQL
// catalogs of cats, each a Trino catalog of the same name.
func startTrino(t *testing.T, m *engineManifest, cats []engineCatalog) *trinoServer {
	t.Helper()
	if m.Trino == nil {
		t.Fatal("CDCSYNC_TRINO=1 but Trino is not installed: run CDCSYNC_TRINO=1 scripts/engines.sh")
	}
	dir := t.TempDir()
	etc := filepath.Join(dir, "etc")
	if err := os.MkdirAll(filepath.Join(etc, "catalog"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	files := map[string]string{
		"node.properties": "node.environment=cdcsync_test\nnode.id=cdcsync-test-1\nnode.data-dir=" + filepath.Join(dir, "data") + "\n",
		"jvm.config": strings.Join([]string{"-server", "-Xmx1500M", "-XX:+UseG1GC", "-XX:+ExitOnOutOfMemoryError",
			"-Djdk.attach.allowAttachSelf=true", "-Duser.timezone=UTC", "-XX:TieredStopAtLevel=1"}, "\n") + "\n",
		"config.properties": fmt.Sprintf("coordinator=true\nnode-scheduler.include-coordinator=true\n"+
			"http-server.http.port=%d\ndiscovery.uri=http://127.0.0.1:%d\n"+
			"query.max-memory=1GB\nquery.max-memory-per-node=512MB\n", port, port),
		"log.properties": "io.trino=WARN\n",
	}
	for _, c := range cats {
		if c.Postgres == nil {
			continue
		}
		props := []string{
			"connector.name=iceberg",
			"iceberg.catalog.type=jdbc",
			// The name cdcsync's catalog.name wrote into iceberg_tables.
			"iceberg.jdbc-catalog.catalog-name=" + c.Name,
			"iceberg.jdbc-catalog.driver-class=org.postgresql.Driver",
			fmt.Sprintf("iceberg.jdbc-catalog.connection-url=jdbc:postgresql://%s:%d/%s", c.Postgres.Host, c.Postgres.Port, c.Postgres.Database),
			"iceberg.jdbc-catalog.connection-user=" + c.Postgres.User,
			"iceberg.jdbc-catalog.default-warehouse-dir=" + c.Warehouse,
		}
		if c.Postgres.Password != "" {
			props = append(props, "iceberg.jdbc-catalog.connection-password="+c.Postgres.Password)
		}
		if c.S3 != nil {
			props = append(props,
				"fs.native-s3.enabled=true",
				"s3.endpoint="+c.S3.Endpoint,
				"s3.region="+c.S3.Region,
				"s3.path-style-access="+strconv.FormatBool(c.S3.PathStyle),
				"s3.aws-access-key="+c.S3.AccessKeyID,
				"s3.aws-secret-key="+c.S3.SecretAccessKey,
			)
		} else {
			t.Fatalf("catalog %s: the Trino test reads warehouses on MinIO only", c.Name)
		}
		files["catalog/"+c.Name+".properties"] = strings.Join(props, "\n") + "\n"
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	logPath := filepath.Join(dir, "trino.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(m.Trino.Home, "bin", "launcher"), "run", "--etc-dir="+etc, "--data-dir="+filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(), "JAVA_HOME="+m.Trino.JavaHome,
		"PATH="+filepath.Join(m.Trino.JavaHome, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &trinoServer{url: fmt.Sprintf("http://127.0.0.1:%d", port), log: logPath, cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	})
	start := time.Now()
	for {
		select {
		case err := <-s.done:
			t.Fatalf("trino exited during startup (%v); log:\n%s", err, engineTailFile(logPath, 60))
		default:
		}
		if resp, err := http.Get(s.url + "/v1/info"); err == nil {
			var info struct {
				Starting bool `json:"starting"`
			}
			err = json.NewDecoder(resp.Body).Decode(&info)
			resp.Body.Close()
			if err == nil && !info.Starting {
				break
			}
		}
		if time.Since(start) > 4*time.Minute {
			t.Fatalf("trino did not start within 4 minutes; log:\n%s", engineTailFile(logPath, 60))
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Wait until the coordinator has registered itself as a worker.
	for {
		_, rows, err := s.query(context.Background(), "SELECT count(*) FROM system.runtime.nodes WHERE state = 'active'")
		if err == nil && len(rows) == 1 && fmt.Sprint(rows[0][0]) != "0" {
			break
		}
		if time.Since(start) > 4*time.Minute {
			t.Fatalf("trino has no active node after 4 minutes (%v); log:\n%s", err, engineTailFile(s.log, 60))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("trino %s started in %s", m.Trino.Version, time.Since(start).Round(time.Millisecond))
	return s
}

func engineTailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	return engineTailLines(string(b), n)
}

type trinoColumn struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// query runs one statement through Trino's client protocol (POST
// /v1/statement, then follow nextUri) and returns its columns and rows.
func (s *trinoServer) query(ctx context.Context, sql string) ([]trinoColumn, [][]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/statement", strings.NewReader(sql))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("X-Trino-User", "cdcsync-test")
	req.Header.Set("X-Trino-Time-Zone", "UTC")
	// Without it Trino rounds timestamps to milliseconds for old clients.
	req.Header.Set("X-Trino-Client-Capabilities", "PARAMETRIC_DATETIME")
	var cols []trinoColumn
	var rows [][]any
	for {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, nil, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, nil, err
		}
		if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			return nil, nil, fmt.Errorf("HTTP %s: %s", resp.Status, body)
		}
		var r struct {
			NextURI string          `json:"nextUri"`
			Columns []trinoColumn   `json:"columns"`
			Data    [][]any         `json:"data"`
			Error   json.RawMessage `json:"error"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&r); err != nil {
			return nil, nil, fmt.Errorf("decode %s: %w", body, err)
		}
		if len(r.Error) > 0 && string(r.Error) != "null" {
			return nil, nil, fmt.Errorf("trino: %s", r.Error)
		}
		if r.Columns != nil {
			cols = r.Columns
		}
		rows = append(rows, r.Data...)
		if r.NextURI == "" {
			return cols, rows, nil
		}
		if req, err = http.NewRequestWithContext(ctx, http.MethodGet, r.NextURI, nil); err != nil {
			return nil, nil, err
		}
		req.Header.Set("X-Trino-User", "cdcsync-test")
	}
}

// readWithTrino reads every table of tables from a Trino catalog and
// encodes the values like integration/engines/rowjson.py does.
func readWithTrino(t *testing.T, s *trinoServer, tables []*engineTable) *engineAnswer {
	t.Helper()
	ans := &engineAnswer{Engine: "trino"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	q := trinoDialect.quote
	for _, et := range tables {
		quoted := make([]string, len(et.Columns))
		for i, c := range et.Columns {
			quoted[i] = q(c)
		}
		cols := strings.Join(quoted, ", ")
		ref := q(et.Catalog) + "." + q(et.Namespace) + "." + q(et.Table)
		start := time.Now()
		entry := engineAnswerTable{Catalog: et.Catalog, Namespace: et.Namespace, Table: et.Table}
		types, rows, err := s.queryEncoded(ctx, "SELECT "+cols+" FROM "+ref)
		if err == nil && len(et.filters) > 0 {
			var parts []string
			for i, f := range et.filters {
				parts = append(parts, fmt.Sprintf("SELECT %d AS cdcsync_filter, %s FROM %s WHERE %s", i, cols, ref, f.sql(trinoDialect, et.schema)))
			}
			_, entry.Filtered, err = s.queryEncoded(ctx, strings.Join(parts, " UNION ALL "))
		}
		if err != nil {
			entry.Error = err.Error()
		} else {
			entry.Types, entry.Rows = types, rows
		}
		entry.Seconds = time.Since(start).Seconds()
		ans.Tables = append(ans.Tables, entry)
	}
	return ans
}

// queryEncoded runs a query and encodes its values like rowjson.py does.
func (s *trinoServer) queryEncoded(ctx context.Context, sql string) ([]string, [][]any, error) {
	start := time.Now()
	cols, rows, err := s.query(ctx, sql)
	// Right after start-up the coordinator may not list itself as a worker yet.
	for err != nil && strings.Contains(err.Error(), "NO_NODES_AVAILABLE") && time.Since(start) < time.Minute {
		time.Sleep(time.Second)
		cols, rows, err = s.query(ctx, sql)
	}
	if err != nil {
		return nil, nil, err
	}
	var types []string
	for _, c := range cols {
		types = append(types, c.Type)
	}
	out := make([][]any, 0, len(rows))
	for _, r := range rows {
		enc := make([]any, len(r))
		for i, v := range r {
			if i < len(cols) {
				if enc[i], err = trinoEncode(cols[i].Type, v); err != nil {
					enc[i] = map[string]any{"unsupported": err.Error()}
				}
			}
		}
		out = append(out, enc)
	}
	return types, out, nil
}

// trinoEncode rewrites a value of Trino's client protocol in rowjson.py's
// encoding: floats as strings, timestamps as microseconds since the epoch.
func trinoEncode(typ string, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch {
	case typ == "real" || typ == "double":
		switch x := v.(type) {
		case json.Number:
			bits := 64
			if typ == "real" {
				bits = 32
			}
			f, err := strconv.ParseFloat(x.String(), bits)
			if err != nil {
				return nil, err
			}
			return strconv.FormatFloat(f, 'g', -1, 64), nil
		case string: // NaN, Infinity, -Infinity
			return strings.TrimSuffix(strings.ToLower(x), "inity"), nil
		}
	case strings.HasPrefix(typ, "timestamp("):
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s value %v is not a string", typ, v)
		}
		zone := "UTC"
		if strings.HasSuffix(typ, "with time zone") {
			i := strings.LastIndexByte(s, ' ')
			s, zone = s[:i], s[i+1:]
		}
		loc, err := time.LoadLocation(zone)
		if err != nil {
			return nil, err
		}
		ts, err := time.ParseInLocation("2006-01-02 15:04:05.999999", s, loc)
		if err != nil {
			return nil, err
		}
		return json.Number(strconv.FormatInt(ts.UnixMicro(), 10)), nil
	}
	return v, nil // integers, decimals, varchar, varbinary (base64), date
}

// trinoType is the Trino type of a column that cdcsync mapped to c.Kind.
func trinoType(c *cdcsync.Column) string {
	switch c.Kind {
	case cdcsync.KindInt32:
		return "integer"
	case cdcsync.KindInt64:
		return "bigint"
	case cdcsync.KindDecimal:
		return fmt.Sprintf("decimal(%d, %d)", c.Precision, c.Scale)
	case cdcsync.KindFloat32:
		return "real"
	case cdcsync.KindFloat64:
		return "double"
	case cdcsync.KindString:
		return "varchar"
	case cdcsync.KindBinary:
		return "varbinary"
	case cdcsync.KindDate:
		return "date"
	case cdcsync.KindTimestamp:
		return "timestamp(6)"
	case cdcsync.KindTimestampTZ:
		return "timestamp(6) with time zone"
	}
	return "?" + c.Kind.String()
}

// runTrino is TestEngines' trino subtest: it reads the tables of the
// PostgreSQL-catalog pipelines.
func runTrino(t *testing.T, m *engineManifest, req engineRequest, tables []*engineTable) {
	if !trinoWanted() {
		t.Skip("Trino is optional: run `CDCSYNC_TRINO=1 scripts/engines.sh` and the tests with CDCSYNC_TRINO=1 " +
			"(820 MB download, JDK 24+, about a minute more per run)")
	}
	var pgTables []*engineTable
	pgCats := map[string]bool{}
	for _, c := range req.Catalogs {
		if c.Postgres != nil {
			pgCats[c.Name] = true
		}
	}
	for _, et := range tables {
		if pgCats[et.Catalog] {
			pgTables = append(pgTables, et)
		}
	}
	if len(pgTables) == 0 {
		t.Fatal("no table in a PostgreSQL catalog for Trino to read")
	}
	start := time.Now()
	s := startTrino(t, m, req.Catalogs)
	ans := readWithTrino(t, s, pgTables)
	t.Logf("trino %s: started and read %d tables in %s", m.Trino.Version, len(pgTables), time.Since(start).Round(time.Millisecond))
	// Trino 476 (the newest Maven Central serves here) reads no deletion
	// vectors: a dv table must fail with that reason, and be read in
	// full by a Trino that does (docs/query.md).
	var read []*engineTable
	var answered []engineAnswerTable
	for i, et := range pgTables {
		a := ans.Tables[i]
		if et.mode == lake.DeletesDV && strings.Contains(a.Error, "Unexpected PUFFIN file format") {
			t.Logf("trino %s cannot read %s.%s (dv mode): it reads no deletion vectors", m.Trino.Version, et.Namespace, et.Table)
			continue
		}
		read = append(read, et)
		answered = append(answered, a)
	}
	ans.Tables = answered
	compareEngineAnswer(t, trinoDialect, ans, read)
}
