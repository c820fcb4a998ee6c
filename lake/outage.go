package lake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
)

// Transient reports whether err is an outage of the warehouse or the
// catalog that may end by itself: a connection refused, reset or cut by a
// timeout, a server error (HTTP 5xx, S3 SlowDown), a full disk, a database
// that is busy or restarting. The daemon waits such errors out, retrying
// for as long as they last. Errors that need a person (bad credentials, a
// missing bucket, another writer, a request the server refuses) are not
// transient, and neither is anything this function does not recognise.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, ErrConflict) || refused(err) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	for _, e := range []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ENETDOWN, syscall.ENOSPC, syscall.EDQUOT} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		if s := re.HTTPStatusCode(); s >= 500 || s == http.StatusTooManyRequests || s == http.StatusRequestTimeout {
			return true
		}
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "XMinioServerNotInitialized", "XMinioStorageFull":
			return true
		}
	}
	var rse *awshttp.ResponseError
	if errors.As(err, &rse) && rse.HTTPStatusCode() >= 500 {
		return true
	}
	if errors.Is(err, rest.ErrServiceUnavailable) || errors.Is(err, rest.ErrServerError) {
		return true
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // the primary result code
		case 5, 6, 10, 13: // SQLITE_BUSY, SQLITE_LOCKED, SQLITE_IOERR, SQLITE_FULL
			return true
		}
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Connection exceptions, the server shutting down or out of room.
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "53") || strings.HasPrefix(pe.Code, "57P")
	}
	// Some layers flatten the error they got into text.
	msg := err.Error()
	for _, s := range []string{"connection refused", "connection reset", "broken pipe", "i/o timeout", "no space left on device",
		"server closed the connection", "timeout awaiting response headers", "database is locked"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// refused reports the errors of S3 and the REST catalog that no wait mends.
func refused(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "NoSuchBucket", "InvalidBucketName", "AllAccessDisabled", "ExpiredToken", "InvalidToken":
			return true
		}
	}
	return errors.Is(err, rest.ErrUnauthorized) || errors.Is(err, rest.ErrForbidden) || errors.Is(err, rest.ErrBadRequest)
}

// dialTimeout bounds the connection set-up to the warehouse and the catalog.
const dialTimeout = 10 * time.Second

// s3HTTPClient is the HTTP client of every S3 request: a request whose
// connection stays silent for timeout (no response headers, no byte of the
// body) fails, so a blackholed endpoint surfaces as a retried error within
// that time instead of hanging on the kernel's TCP timers.
func s3HTTPClient(timeout time.Duration) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithTransportOptions(func(t *http.Transport) {
			// iceberg-go's tuning for parallel uploads, plus the timeouts.
			t.MaxIdleConns, t.MaxIdleConnsPerHost, t.IdleConnTimeout = 256, 256, 90*time.Second
			t.ResponseHeaderTimeout = timeout
			t.TLSHandshakeTimeout = dialTimeout
		}).
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = dialTimeout }).
		WithReadTimeout(timeout)
}

// restTransport is the transport of the REST catalog's requests, with the
// same bounds as S3's.
func restTransport(timeout time.Duration) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = dialTimeout
	t.ResponseHeaderTimeout = timeout
	return t
}

// idleConn fails a read or a write that makes no progress for timeout. The
// PostgreSQL catalog's connections use it: a catalog query never
// legitimately waits that long, and a server that vanished (a blackholed
// route) would otherwise hold a commit until the kernel gives up.
type idleConn struct {
	net.Conn
	timeout time.Duration
	reach   *reach
}

func (c *idleConn) Read(b []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(b)
	c.observe(n, err)
	return n, err
}

func (c *idleConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(b)
	if err != nil {
		c.reach.observe(err)
	}
	return n, err
}

// observe counts an answer of the server as a success; a write that the
// kernel buffered proves nothing (a blackholed route accepts them).
func (c *idleConn) observe(n int, err error) {
	if n > 0 {
		c.reach.observe(nil)
	} else if err != nil {
		c.reach.observe(err)
	}
}

// reach tracks whether the warehouse and the catalog answer, from the
// outcome of every request to them (S3, REST, PostgreSQL): a request that
// fails with an outage before the SDK's own retries, or gets a 5xx, counts
// as a failure, any other answer as a success. It lets the daemon say
// within one request timeout that the storage stopped answering, where the
// commit that waits on it reports only once all its retries failed.
type reach struct {
	mu        sync.Mutex
	failSince time.Time // first failure since the last success; zero when answering
	lastErr   error
	warned    bool
	log       *slog.Logger
}

// unreachableAfter is how long requests must fail, with no success in
// between, before the storage counts as unreachable.
const unreachableAfter = 5 * time.Second

func (r *reach) observe(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		if r.warned && r.log != nil {
			r.log.Info("the warehouse and the catalog answer again", "after", time.Since(r.failSince).Round(time.Second).String())
		}
		r.failSince, r.lastErr, r.warned = time.Time{}, nil, false
		return
	}
	if r.failSince.IsZero() {
		r.failSince = time.Now()
	}
	r.lastErr = err
	if !r.warned && time.Since(r.failSince) >= unreachableAfter && r.log != nil {
		r.warned = true
		r.log.Warn("the warehouse or the catalog does not answer; commits wait until it does", "since", r.failSince.Format(time.RFC3339), "error", err)
	}
}

// Unreachable says since when every request to the warehouse or the
// catalog has failed, and the last error; ok is false while they answer.
func (r *reach) Unreachable() (since time.Time, err error, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failSince.IsZero() || time.Since(r.failSince) < unreachableAfter {
		return time.Time{}, nil, false
	}
	return r.failSince, r.lastErr, true
}

// observedClient reports the outcome of every S3 request to a reach.
type observedClient struct {
	inner interface {
		Do(*http.Request) (*http.Response, error)
	}
	reach *reach
}

func (c observedClient) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.inner.Do(req)
	c.reach.observe(requestOutcome(resp, err))
	return resp, err
}

// observedTransport reports the outcome of every REST catalog request.
type observedTransport struct {
	inner http.RoundTripper
	reach *reach
}

func (t observedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.inner.RoundTrip(req)
	t.reach.observe(requestOutcome(resp, err))
	return resp, err
}

func requestOutcome(resp *http.Response, err error) error {
	switch {
	case err != nil:
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	case resp.StatusCode >= 500:
		return fmt.Errorf("HTTP %s from %s", resp.Status, resp.Request.URL.Host)
	}
	return nil
}
