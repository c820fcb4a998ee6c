package testenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// RESTCatalogMainClass is the server the REST catalog tests run: the Iceberg
// project's own REST catalog fixture (the program behind the
// apache/iceberg-rest-fixture image), a JdbcCatalog on SQLite behind the
// Iceberg REST protocol.
const RESTCatalogMainClass = "org.apache.iceberg.rest.RESTCatalogServer"

const restCatalogNotFound = "run scripts/test.sh (or scripts/rest-catalog.sh), which copies its jars into .tools/rest-catalog with Maven; or set CDCSYNC_REST_CATALOG_JARS to a directory holding them"

// RESTCatalogOptions configures StartRESTCatalog.
type RESTCatalogOptions struct {
	// Warehouse is where the server puts new tables (its "warehouse" catalog
	// property), s3://bucket/prefix on MinIO; the bucket must exist. The
	// server writes table metadata there with Iceberg's S3FileIO, and
	// cdcsync writes data files at the table locations the server hands
	// out. (A file:// warehouse would need Iceberg's HadoopFileIO and the
	// whole Hadoop client on the server's classpath; it is not supported.)
	Warehouse string
	// MinIO is the S3 endpoint and credentials of the warehouse.
	MinIO *MinIO
	// Dir holds the server's SQLite catalog (catalog.db) and its output
	// (rest-catalog.log). Default: a new temporary directory, removed by Stop.
	Dir string
}

// RESTCatalog is a running Iceberg REST catalog server started by
// StartRESTCatalog.
//
// The fixture accepts any OAuth2 client credential (it issues a token for
// whatever client id it is given) and checks no Authorization header, so it
// exercises cdcsync's token exchange but cannot reject a bad secret. It
// listens on every interface (RESTCatalogServer has no bind-address
// setting), on a free port chosen here.
type RESTCatalog struct {
	URI       string // http://127.0.0.1:PORT, the value of catalog.rest.uri
	Port      int
	Warehouse string
	Dir       string
	Log       string // the server's output

	ownsDir bool
	proc    *proc
}

// RESTCatalogJars returns the directory holding the REST catalog server's
// classpath: $CDCSYNC_REST_CATALOG_JARS if set, else <repo>/.tools/rest-catalog.
// It checks that the directory holds the fixture's jar.
func RESTCatalogJars() (string, error) {
	dir := os.Getenv("CDCSYNC_REST_CATALOG_JARS")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, ".tools", "rest-catalog")
	}
	fixture, _ := filepath.Glob(filepath.Join(dir, "iceberg-open-api-*-test-fixtures.jar"))
	if len(fixture) == 0 {
		return "", fmt.Errorf("testenv: the Iceberg REST catalog server is not installed (no iceberg-open-api-*-test-fixtures.jar in %s): %s", dir, restCatalogNotFound)
	}
	return dir, nil
}

// javaBinary returns $JAVA_HOME/bin/java if set, else java on PATH.
func javaBinary() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("java"); err == nil {
		return p, nil
	}
	return "", errors.New("testenv: java not found (the Iceberg REST catalog server needs Java 17 or newer): install openjdk-17-jre-headless, or set JAVA_HOME")
}

// StartRESTCatalog starts Iceberg's REST catalog server on a free port and
// waits until GET /v1/config answers 200.
func StartRESTCatalog(o RESTCatalogOptions) (*RESTCatalog, error) {
	jars, err := RESTCatalogJars()
	if err != nil {
		return nil, err
	}
	java, err := javaBinary()
	if err != nil {
		return nil, err
	}
	r := &RESTCatalog{}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "cdcsync-rest-")
		if err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		r.Dir, r.ownsDir = d, true
	} else {
		d, err := filepath.Abs(o.Dir)
		if err == nil {
			err = os.MkdirAll(d, 0o755)
		}
		if err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		r.Dir = d
	}
	r.Warehouse = o.Warehouse
	r.Log = filepath.Join(r.Dir, "rest-catalog.log")
	if !strings.HasPrefix(r.Warehouse, "s3://") || o.MinIO == nil {
		r.cleanup()
		return nil, fmt.Errorf("testenv: REST catalog warehouse %q: want s3://bucket/prefix and RESTCatalogOptions.MinIO set", r.Warehouse)
	}
	if !strings.HasPrefix(o.MinIO.Endpoint, "http://") {
		// The JVM would need the test CA in a trust store.
		r.cleanup()
		return nil, fmt.Errorf("testenv: REST catalog: MinIO at %s: only a plain-HTTP MinIO is supported", o.MinIO.Endpoint)
	}

	// RESTCatalogServer reads its catalog properties from CATALOG_*
	// variables (RCKUtils.environmentCatalogConfig: drop the prefix, "__"
	// becomes "-", "_" becomes ".", lower case). Inherited CATALOG_* and
	// AWS_* variables are dropped so the host's settings do not leak in.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CATALOG_") && !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"CATALOG_CATALOG__IMPL=org.apache.iceberg.jdbc.JdbcCatalog",
		"CATALOG_URI=jdbc:sqlite:"+filepath.Join(r.Dir, "catalog.db"),
		"CATALOG_JDBC_SCHEMA__VERSION=V1",
		"CATALOG_WAREHOUSE="+r.Warehouse,
		"CATALOG_IO__IMPL=org.apache.iceberg.aws.s3.S3FileIO",
		"CATALOG_S3_ENDPOINT="+o.MinIO.Endpoint,
		"CATALOG_S3_PATH__STYLE__ACCESS=true",
		"CATALOG_S3_ACCESS__KEY__ID="+o.MinIO.AccessKey,
		"CATALOG_S3_SECRET__ACCESS__KEY="+o.MinIO.SecretKey,
		"CATALOG_CLIENT_REGION="+MinIORegion,
		"AWS_REGION="+MinIORegion,
	)

	hc := &http.Client{Timeout: 2 * time.Second}
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := freePort()
		if err != nil {
			r.cleanup()
			return nil, err
		}
		args := []string{
			// A small, quick-starting JVM: the server handles one test's
			// requests, it does not need the C2 compiler or a parallel GC.
			"-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-cp", filepath.Join(jars, "*"), RESTCatalogMainClass,
		}
		logStart := fileSize(r.Log)
		pr, err := startProc(java, args, append(env, "CATALOG_REST_PORT="+strconv.Itoa(port)), r.Log)
		if err != nil {
			r.cleanup()
			return nil, err
		}
		// Jetty binds with SO_REUSEPORT here, so a port taken by another
		// such server does not fail the bind; freePort's random ephemeral
		// ports make that collision unlikely.
		uri := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err = waitRESTCatalog(pr, hc, uri, r.Log, logStart); err == nil {
			r.proc, r.Port, r.URI = pr, port, uri
			return r, nil
		}
		pr.kill()
		lastErr = err
		if !strings.Contains(readFrom(r.Log, logStart), "Address already in use") {
			break
		}
	}
	r.cleanup()
	return nil, lastErr
}

func waitRESTCatalog(pr *proc, hc *http.Client, uri, logPath string, logStart int64) error {
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		if pr.exited() {
			return fmt.Errorf("testenv: the REST catalog server exited during startup (%v); its output:\n%s",
				pr.err, tailString(readFrom(logPath, logStart), 30))
		}
		resp, err := hc.Get(uri + "/v1/config")
		if err == nil {
			var cfg struct {
				Defaults map[string]string `json:"defaults"`
			}
			err = json.NewDecoder(resp.Body).Decode(&cfg)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET /v1/config: HTTP %d (%v)", resp.StatusCode, err)
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("testenv: the REST catalog server at %s not ready after %s (last error: %v); its output:\n%s",
		uri, startTimeout, lastErr, tailString(readFrom(logPath, logStart), 30))
}

// Stop shuts the server down (SIGTERM), waits for it to exit and, when
// StartRESTCatalog created the directory, removes it. It is safe to call
// more than once.
func (r *RESTCatalog) Stop() error {
	var err error
	if r.proc != nil {
		if e := r.proc.stop(30 * time.Second); e != nil {
			err = fmt.Errorf("testenv: REST catalog server %s", e)
		}
	}
	r.cleanup()
	return err
}

// Kill sends SIGKILL to the server and waits for it to exit; its directory
// stays until Stop.
func (r *RESTCatalog) Kill() {
	if r.proc != nil {
		r.proc.kill()
	}
}

func (r *RESTCatalog) cleanup() {
	if r.ownsDir {
		_ = os.RemoveAll(r.Dir)
	}
}
