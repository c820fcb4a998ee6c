package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/aws/smithy-go"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestTransient(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"refused", fmt.Errorf("write data files: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), true},
		{"reset", fmt.Errorf("commit: %w", syscall.ECONNRESET), true},
		{"disk full", &os.PathError{Op: "write", Path: "/w/data/x.parquet", Err: syscall.ENOSPC}, true},
		{"deadline", fmt.Errorf("load table: %w", context.DeadlineExceeded), true},
		{"canceled", fmt.Errorf("load table: %w", context.Canceled), false},
		{"S3 SlowDown", &smithy.GenericAPIError{Code: "SlowDown", Message: "reduce your request rate"}, true},
		{"S3 access denied", fmt.Errorf("put: %w", &smithy.GenericAPIError{Code: "AccessDenied"}), false},
		{"S3 no bucket", &smithy.GenericAPIError{Code: "NoSuchBucket"}, false},
		{"S3 bad key", &smithy.GenericAPIError{Code: "InvalidAccessKeyId"}, false},
		{"REST 503", fmt.Errorf("commit: %w", rest.ErrServiceUnavailable), true},
		{"REST 500", rest.ErrServerError, true},
		{"REST 401", rest.ErrUnauthorized, false},
		{"REST conflict", rest.ErrCommitFailed, false},
		{"conflict", fmt.Errorf("commit: %w", ErrConflict), false},
		{"pg shutdown", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, true},
		{"pg connection", &pgconn.PgError{Code: "08006"}, true},
		{"pg syntax", &pgconn.PgError{Code: "42601"}, false},
		{"flattened", errors.New("open the catalog: dial tcp 127.0.0.1:5432: connect: connection refused"), true},
		{"unknown", errors.New("field id 7 is not in the schema"), false},
	}
	for _, c := range cases {
		if got := Transient(c.err); got != c.want {
			t.Errorf("%s: Transient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// blackhole accepts connections and never answers, like a route that drops
// every packet after the handshake; it returns its address.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// A warehouse or a catalog that stops answering fails the request within
// warehouse.request_timeout (plus the SDK's own retries), with an error the
// daemon waits out, instead of hanging on the kernel's TCP timers.
func TestRequestTimeoutCutsBlackholes(t *testing.T) {
	addr := blackhole(t)
	for _, c := range []struct{ name, yaml string }{
		{"s3", "warehouse:\n  location: s3://bucket/wh\n  request_timeout: 1s\n  s3:\n    endpoint: http://" + addr +
			"\n    path_style: true\n    access_key_id: k\n    secret_access_key: s\ncatalog:\n  sql:\n    dsn: %s\n"},
		{"postgres", "warehouse:\n  location: %s\n  request_timeout: 1s\ncatalog:\n  sql:\n    driver: postgres\n    dsn: postgres://u:p@" + addr + "/db\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			arg := filepath.Join(dir, "catalog.db")
			if c.name == "postgres" {
				arg = filepath.Join(dir, "warehouse")
			}
			cfg := loadConfig(t, filepath.Join(dir, "c.yaml"), "source:\n  user: u\n  server_id: 7\n  include: [\"shop.*\"]\n"+fmt.Sprintf(c.yaml, arg))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			start := time.Now()
			lk, err := Open(ctx, OptionsFrom(cfg), slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil {
				defer lk.Close()
				err = lk.Check(ctx)
			}
			took := time.Since(start)
			if err == nil {
				t.Fatal("a blackholed endpoint passed the check")
			}
			if ctx.Err() != nil || took > 45*time.Second {
				t.Fatalf("the request took %s to fail (request_timeout 1s): %v", took, err)
			}
			if !Transient(err) {
				t.Errorf("a timed-out request is not classified as transient: %v", err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows a secret: %v", err)
			}
			t.Logf("failed after %s: %v", took.Round(time.Millisecond), err)
		})
	}
}

// The storage counts as unreachable once every request failed for
// unreachableAfter, and as reachable again at the first answer.
func TestReachability(t *testing.T) {
	r := &reach{}
	down := errors.New("connection refused")
	r.observe(down)
	if _, _, ok := r.Unreachable(); ok {
		t.Fatal("one failed request made the storage unreachable")
	}
	r.failSince = time.Now().Add(-unreachableAfter - time.Second) // failing for a while
	r.observe(down)
	since, err, ok := r.Unreachable()
	if !ok || err != down || time.Since(since) < unreachableAfter {
		t.Fatalf("Unreachable() = %v, %v, %v after failing for %s", since, err, ok, unreachableAfter)
	}
	r.observe(nil)
	if _, _, ok := r.Unreachable(); ok {
		t.Fatal("still unreachable after a request succeeded")
	}
}
