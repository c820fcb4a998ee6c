package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync/integration/testenv"
	"github.com/cdcsync/cdcsync/lease"
)

// restSecret is the OAuth2 client secret cdcsync is configured with (through
// an environment variable); no output may ever show it.
const restSecret = "rest-oauth-secret-5f3a9c"

// startRESTCatalog starts Iceberg's REST catalog fixture with its warehouse
// at s3://bucket/lake on the shared MinIO. A server that does not start
// fails the test; on failure the server's output is logged.
func startRESTCatalog(t *testing.T, bucket string) *testenv.RESTCatalog {
	t.Helper()
	start := time.Now()
	rc, err := testenv.StartRESTCatalog(testenv.RESTCatalogOptions{Warehouse: "s3://" + bucket + "/lake", MinIO: minio})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("REST catalog server ready at %s after %s", rc.URI, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("REST catalog server output (%s):\n%s", rc.Log, restLogTail(rc.Log, 60))
		}
		if err := rc.Stop(); err != nil {
			t.Errorf("stop the REST catalog server: %v", err)
		}
	})
	return rc
}

// useRESTCatalog switches the env's config from its SQLite catalog to the
// REST catalog at uri, with an OAuth2 client credential whose secret comes
// from the environment.
func (e *env) useRESTCatalog(uri string) {
	e.t.Helper()
	e.t.Setenv("CDCSYNC_TEST_REST_SECRET", restSecret)
	e.rewriteConfig("  type: sql\n  name: cdcsync\n  sql:\n    driver: sqlite\n    dsn: "+filepath.Join(e.dir, "catalog.db")+"\n",
		"  type: rest\n  name: cdcsync\n  rest:\n    uri: "+uri+"\n    credential: cdcsync-it:${CDCSYNC_TEST_REST_SECRET}\n")
	if e.cfg.Catalog.Type != "rest" || e.cfg.Catalog.REST.URI != uri {
		e.t.Fatalf("config after the rewrite: catalog %+v", e.cfg.Catalog)
	}
}

// TestMirrorRESTCatalog runs the mirror scenario through an Iceberg REST
// catalog (Iceberg's own REST server, a JdbcCatalog on SQLite behind it) with
// the warehouse on MinIO: the server writes table metadata with Java's
// S3FileIO, cdcsync writes data and delete files at the locations the server
// hands out. Then it restarts cdcsync on more changes, so the committed
// positions are read back through the REST catalog.
func TestMirrorRESTCatalog(t *testing.T) {
	const dbName, bucket = "it_rest", "it-rest"
	e := newEnv(t, dbName, envOptions{onMinIO: true, tables: fmt.Sprintf(workloadTables, dbName)})
	rc := startRESTCatalog(t, bucket)
	e.useRESTCatalog(rc.URI)

	createWorkloadSchema(t, dbName)
	w := newWorkload(t, dbName, uint64(time.Now().UnixNano()))
	w.run(t, 150)

	out, code := runCLI(t, "check", "--config", e.cfgPath)
	if code != 0 || !strings.Contains(out, "catalog+warehouse") {
		t.Fatalf("check against the REST catalog exited %d:\n%s", code, out)
	}
	restAssertNoSecret(t, "check", out)

	p := e.start()
	e.waitCaughtUp(p, 2*time.Minute)
	for _, tbl := range mirroredTables {
		e.assertMirrors(tbl)
	}
	w.run(t, 400)
	e.waitCaughtUp(p, 2*time.Minute)
	for _, tbl := range mirroredTables {
		e.assertMirrors(tbl)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("cdcsync exited %d after SIGTERM, want 0; output:\n%s", code, p.output())
	}
	restAssertNoSecret(t, "run", p.output())
	if t.Failed() {
		t.Logf("cdcsync output:\n%s", p.output())
	}

	// A restart resumes from the positions committed through the catalog.
	w.run(t, 100)
	p = e.start()
	e.waitCaughtUp(p, 2*time.Minute)
	// The lease lives in the REST catalog too: a second daemon finds the
	// pipeline held.
	second := e.startCmd(exec.Command(binary, "run", "--config", e.cfgPath))
	<-second.waitFor("is held by", time.Minute)
	if out := second.output(); !strings.Contains(out, fmt.Sprintf("pipeline it-rest is held by %s pid %d", hostname(t), p.cmd.Process.Pid)) {
		t.Errorf("a second daemon on the REST catalog does not wait for the holder; output:\n%s", out)
	}
	second.kill()
	for _, tbl := range mirroredTables {
		e.assertMirrors(tbl)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("restarted cdcsync exited %d after SIGTERM, want 0; output:\n%s", code, p.output())
	}
	restAssertNoSecret(t, "run after restart", p.output())
	// Daemons that swap the same lease record at once: the REST server
	// lets exactly one through.
	ctx := context.Background()
	var wg sync.WaitGroup
	results := make(chan error, 6)
	_, version, err := e.openLake().LeaseStore().Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		store := e.openLake().LeaseStore()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := store.Swap(ctx, version, lease.Record{Holder: lease.Holder{Host: "racer", PID: i, Instance: fmt.Sprint("racer", i)}, Token: 99})
			results <- err
		}()
	}
	wg.Wait()
	close(results)
	won := 0
	for err := range results {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, lease.ErrContended):
			t.Errorf("a racing swap through REST: %v", err)
		}
	}
	if won > 1 {
		t.Errorf("%d racing swaps of one lease version went through the REST catalog, want at most 1", won)
	}
	if out := p.output(); strings.Contains(out, "initial copy finished") || strings.Contains(out, "initial copy progress") || !strings.Contains(out, "streaming the binlog") {
		t.Errorf("the restarted cdcsync did not resume streaming from its checkpoint without a new copy; output:\n%s", out)
	}

	// The REST server itself lists the tables (read with plain HTTP, not
	// through iceberg-go).
	var listed struct {
		Identifiers []struct {
			Namespace []string `json:"namespace"`
			Name      string   `json:"name"`
		} `json:"identifiers"`
	}
	restGetJSON(t, rc.URI+"/v1/namespaces/"+dbName+"/tables", &listed)
	var names []string
	for _, id := range listed.Identifiers {
		names = append(names, strings.Join(id.Namespace, ".")+"."+id.Name)
	}
	for _, tbl := range mirroredTables {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+dbName+"."+tbl+" ") {
			t.Errorf("the REST server lists %v in namespace %s; want %s.%s", names, dbName, dbName, tbl)
		}
	}

	// What an analyst checks in the table metadata, loaded through REST.
	lk := e.openLake()
	ctx = context.Background()
	tbl, err := lk.LoadTable(ctx, lk.Identifier(dbName, "items"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "s3://" + bucket + "/lake/" + dbName + "/items"; tbl.Location() != want {
		t.Errorf("items location = %s, want %s (the server's warehouse)", tbl.Location(), want)
	}
	if ids := tbl.Schema().IdentifierFieldIDs; len(ids) != 1 || ids[0] != 1 {
		t.Errorf("items identifier fields = %v, want [1] (the primary key id)", ids)
	}
	if spec := tbl.Spec(); spec.NumFields() != 1 {
		t.Errorf("items partition spec = %s, want identity(region)", spec.String())
	}
	assertEpochSnapshots(t, tbl, e.cfg.Pipeline)

	// Metadata (written by the server), data and delete files (written by
	// cdcsync) and the checkpoint all live in the bucket.
	objs, err := minio.ListObjects(bucket, "lake/")
	if err != nil {
		t.Fatal(err)
	}
	var meta, data, ckpt int
	for _, o := range objs {
		switch {
		case strings.HasPrefix(o, "lake/"+dbName+"/") && strings.Contains(o, "/metadata/") && strings.HasSuffix(o, ".metadata.json"):
			meta++
		case strings.HasPrefix(o, "lake/"+dbName+"/") && strings.Contains(o, "/data/") && strings.HasSuffix(o, ".parquet"):
			data++
		case strings.HasPrefix(o, "lake/_cdcsync/") && strings.Contains(o, "checkpoint"):
			ckpt++
		}
	}
	if meta == 0 || data == 0 || ckpt == 0 {
		t.Errorf("bucket %s holds %d table metadata files, %d parquet files under data/ and %d checkpoints; want all three", bucket, meta, data, ckpt)
	}

	out, code = runCLI(t, "tables", "--config", e.cfgPath)
	if code != 0 || !strings.Contains(out, dbName+".items") || !strings.Contains(out, "mariadb:0-1-") {
		t.Errorf("tables through the REST catalog exited %d:\n%s", code, out)
	}
	restAssertNoSecret(t, "tables", out)
}

// TestRESTCatalogUnreachable: a REST catalog URI where nothing answers, or
// where a server that is not an Iceberg REST catalog answers, makes `check`
// and `run` exit 1 with a message that names catalog.rest.uri and never shows
// the credential's secret.
func TestRESTCatalogUnreachable(t *testing.T) {
	mustExec(t, "CREATE DATABASE IF NOT EXISTS it_restbad")
	mustExec(t, "CREATE TABLE IF NOT EXISTS it_restbad.t (id INT PRIMARY KEY)")
	t.Setenv("CDCSYNC_TEST_REST_SECRET", restSecret)
	t.Setenv("CDCSYNC_TEST_S3_SECRET", testenv.MinIOSecretKey)
	if err := minio.CreateBucket("it-restbad"); err != nil && !strings.Contains(err.Error(), "BucketAlreadyOwnedByYou") {
		t.Fatal(err)
	}
	config := func(uri, auth string) string {
		return writeConfig(t, fmt.Sprintf(`source:
  host: 127.0.0.1
  port: %d
  user: %s
  password: ${CDCSYNC_TEST_PASSWORD}
  server_id: 9501
  include: ["it_restbad.*"]
warehouse:
  location: s3://it-restbad/lake
  s3:
    endpoint: %s
    region: %s
    path_style: true
    access_key_id: %s
    secret_access_key: ${CDCSYNC_TEST_S3_SECRET}
catalog:
  type: rest
  rest:
    uri: %s
    %s
http:
  listen: "off"
admin:
  listen: %s
`, db.Port, testenv.ReplUser, minio.Endpoint, testenv.MinIORegion, testenv.MinIOAccessKey, uri, auth, filepath.Join(t.TempDir(), "admin.sock")))
	}
	t.Setenv("CDCSYNC_TEST_PASSWORD", testenv.ReplPassword)
	const credential = "credential: cdcsync-it:${CDCSYNC_TEST_REST_SECRET}"

	// Nothing listens on this port.
	closed := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	restExpectFails(t, config(closed, credential), "catalog.rest.uri", closed, "connection refused")

	// MinIO answers HTTP but is no Iceberg REST catalog: it refuses the
	// OAuth2 token request, as a real catalog refuses a bad credential.
	restExpectFails(t, config(minio.Endpoint, credential), "catalog.rest.uri", minio.Endpoint, "OAuth2 token", "catalog.rest.credential")

	// With a bearer token there is no token request: MinIO refuses
	// GET /v1/config itself.
	restExpectFails(t, config(minio.Endpoint, "token: ${CDCSYNC_TEST_REST_SECRET}"), "catalog.rest.uri", minio.Endpoint)
}

// restExpectFails runs check and run on cfg: both must exit 1 with every
// want in their output, and show none of the test's secrets.
func restExpectFails(t *testing.T, cfg string, wants ...string) {
	t.Helper()
	for _, sub := range []string{"check", "run"} {
		out, code := runCLI(t, sub, "--config", cfg)
		if code != 1 {
			t.Errorf("%s exited %d, want 1; output:\n%s", sub, code, out)
		}
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("%s output lacks %q:\n%s", sub, w, out)
			}
		}
		for _, secret := range []string{restSecret, testenv.ReplPassword, testenv.MinIOSecretKey} {
			if strings.Contains(out, secret) {
				t.Errorf("%s output shows the secret %q:\n%s", sub, secret, out)
			}
		}
	}
}

func restAssertNoSecret(t *testing.T, what, out string) {
	t.Helper()
	if strings.Contains(out, restSecret) {
		t.Errorf("%s output shows the REST catalog credential's secret:\n%s", what, out)
	}
}

func restGetJSON(t *testing.T, url string, v any) {
	t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// restLogTail returns the last n lines of a file, for failure logs.
func restLogTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
