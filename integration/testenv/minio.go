package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Fixed MinIO test credentials and region. They protect nothing: the server
// listens on 127.0.0.1 only and lives as long as the test.
const (
	MinIOAccessKey = "cdcsync-test"
	MinIOSecretKey = "cdcsync-test-secret-key"
	MinIORegion    = "us-east-1"
)

const minioNotFound = "minio not found: run scripts/test.sh, which builds it into .tools/bin (or set CDCSYNC_MINIO to a minio binary)"

// MinIO is a running MinIO server started by StartMinIO. Use it as an S3
// endpoint with path-style addressing, region MinIORegion and the static
// credentials AccessKey/SecretKey.
type MinIO struct {
	Endpoint  string // http://127.0.0.1:PORT
	AccessKey string
	SecretKey string
	Dir       string // the objects live in Dir/data; the server's output is Dir/minio.log
	Port      int

	ownsDir bool
	proc    *proc
	s3      *s3.Client
}

// MinIOBinary returns the minio binary the tests use: $CDCSYNC_MINIO if set,
// else <repo>/.tools/bin/minio, else minio on PATH.
func MinIOBinary() (string, error) {
	return toolBinary("CDCSYNC_MINIO", "minio", minioNotFound)
}

// StartMinIO starts a single-drive MinIO server on a free 127.0.0.1 port,
// storing objects under dir/data ("" = a new temporary directory, removed by
// Stop), and waits until /minio/health/live answers 200.
func StartMinIO(dir string) (*MinIO, error) { return startMinIO(dir, nil) }

// StartMinIOTLS starts MinIO serving HTTPS with pki's server certificate;
// Endpoint is then https://127.0.0.1:PORT.
func StartMinIOTLS(dir string, pki *PKI) (*MinIO, error) { return startMinIO(dir, pki) }

func startMinIO(dir string, pki *PKI) (*MinIO, error) {
	bin, err := MinIOBinary()
	if err != nil {
		return nil, err
	}
	m := &MinIO{AccessKey: MinIOAccessKey, SecretKey: MinIOSecretKey}
	if dir == "" {
		d, err := os.MkdirTemp("", "cdcsync-minio-")
		if err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		m.Dir, m.ownsDir = d, true
	} else {
		d, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		m.Dir = d
	}
	for _, d := range []string{filepath.Join(m.Dir, "data"), filepath.Join(m.Dir, "certs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			m.cleanup()
			return nil, fmt.Errorf("testenv: %w", err)
		}
	}
	hc := &http.Client{Timeout: time.Second}
	scheme := "http://"
	if pki != nil {
		tlsCfg, err := pki.ClientTLS()
		if err == nil {
			err = copyFile(pki.ServerCert, filepath.Join(m.Dir, "certs", "public.crt"))
		}
		if err == nil {
			err = copyFile(pki.ServerKey, filepath.Join(m.Dir, "certs", "private.key"))
		}
		if err != nil {
			m.cleanup()
			return nil, fmt.Errorf("testenv: minio certificates: %w", err)
		}
		hc.Transport = &http.Transport{TLSClientConfig: tlsCfg}
		scheme = "https://"
	}
	env := append(os.Environ(),
		"MINIO_ROOT_USER="+m.AccessKey,
		"MINIO_ROOT_PASSWORD="+m.SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
	)
	logPath := filepath.Join(m.Dir, "minio.log")

	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := freePort()
		if err != nil {
			m.cleanup()
			return nil, err
		}
		consolePort, err := freePort()
		if err != nil {
			m.cleanup()
			return nil, err
		}
		args := []string{"server", filepath.Join(m.Dir, "data"),
			"--address", "127.0.0.1:" + strconv.Itoa(port),
			"--console-address", "127.0.0.1:" + strconv.Itoa(consolePort),
			"--certs-dir", filepath.Join(m.Dir, "certs"),
		}
		logStart := fileSize(logPath)
		pr, err := startProc(bin, args, env, logPath)
		if err != nil {
			m.cleanup()
			return nil, err
		}
		endpoint := scheme + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err = waitMinIO(pr, hc, endpoint, logPath); err == nil {
			m.proc, m.Port, m.Endpoint = pr, port, endpoint
			m.s3 = newS3Client(hc, endpoint, m.AccessKey, m.SecretKey)
			return m, nil
		}
		pr.kill()
		lastErr = err
		out := readFrom(logPath, logStart)
		if !strings.Contains(out, "already in use") && !strings.Contains(out, "address already in use") {
			break
		}
	}
	m.cleanup()
	return nil, lastErr
}

func waitMinIO(pr *proc, hc *http.Client, endpoint, logPath string) error {
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		if pr.exited() {
			return fmt.Errorf("testenv: minio exited during startup (%v); its output:\n%s", pr.err, tailFile(logPath, 30))
		}
		resp, err := hc.Get(endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("health check: HTTP %d", resp.StatusCode)
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("testenv: minio at %s not ready after %s (last error: %v); its output:\n%s",
		endpoint, startTimeout, lastErr, tailFile(logPath, 30))
}

func newS3Client(hc *http.Client, endpoint, accessKey, secretKey string) *s3.Client {
	return s3.New(s3.Options{
		HTTPClient:   &http.Client{Transport: hc.Transport},
		BaseEndpoint: aws.String(endpoint),
		Region:       MinIORegion,
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
		UsePathStyle: true,
	})
}

// S3Client returns an S3 client for this server (path-style, MinIORegion,
// static credentials).
func (m *MinIO) S3Client() *s3.Client { return m.s3 }

// CreateBucket creates a bucket.
func (m *MinIO) CreateBucket(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, err := m.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
		// A MinIO that answers /minio/health/live may still be
		// initializing its storage (XMinioServerNotInitialized, 503).
		if err != nil && strings.Contains(err.Error(), "XMinioServerNotInitialized") && ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("testenv: create bucket %q: %w", name, err)
		}
		return nil
	}
}

// ListObjects returns the keys of all objects in bucket under prefix, in
// lexicographic order.
func (m *MinIO) ListObjects(bucket, prefix string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var keys []string
	pg := s3.NewListObjectsV2Paginator(m.s3, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("testenv: list s3://%s/%s: %w", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

// Stop shuts MinIO down (SIGTERM), waits for it to exit and, when StartMinIO
// created the directory, removes it. It is safe to call more than once.
func (m *MinIO) Stop() error {
	var err error
	if m.proc != nil {
		if e := m.proc.stop(30 * time.Second); e != nil {
			err = fmt.Errorf("testenv: minio %s", e)
		}
	}
	m.cleanup()
	return err
}

// Kill sends SIGKILL to MinIO and waits for it to exit; the data stays until
// Stop.
func (m *MinIO) Kill() {
	if m.proc != nil {
		m.proc.kill()
	}
}

func (m *MinIO) cleanup() {
	if m.ownsDir {
		_ = os.RemoveAll(m.Dir)
	}
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}
