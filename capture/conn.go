// Package capture owns MySQL: connections, preflight checks of server
// settings, table schemas, the binlog stream, the initial snapshot and
// decoding of every MySQL type into canonical cdcsync values.
package capture

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync/config"
)

// DefaultConnectTimeout bounds dialing and the handshake when
// source.connect_timeout is not set.
const DefaultConnectTimeout = 10 * time.Second

// connCollation is sent in the handshake. go-mysql's default is collation id
// 255 (utf8mb4_0900_ai_ci), which MariaDB before 11.4 does not know: it then
// silently falls back to the server's default character set (often latin1).
// utf8mb4_general_ci (id 45) exists on every MySQL and MariaDB version.
const connCollation = "utf8mb4_general_ci"

// TLSConfig builds the TLS configuration for src.TLS, used by every
// connection to the server: queries, the chunks of the initial copy and
// the binlog stream. It returns nil, nil when TLS is disabled. Modes, as
// the mysql client's --ssl-mode:
//
//   - preferred (PREFERRED): TLS when the server offers it (Connect and
//     Stream fall back to plaintext otherwise), certificate not verified;
//   - required (REQUIRED): TLS or no connection, certificate not verified;
//   - verify-ca (VERIFY_CA): TLS, the certificate chain must lead to
//     ca_file, the host name is not checked;
//   - verify-full (VERIFY_IDENTITY): like verify-ca and the certificate
//     must name server_name (default: source.host).
//
// A ca_file with preferred or required, or a server_name with another mode
// than verify-full, is refused: it would look like a check that does not
// happen. cert_file and key_file, when set, are the client certificate.
func TLSConfig(src *config.Source) (*tls.Config, error) {
	t := src.TLS
	mode := strings.ToLower(strings.TrimSpace(t.Mode))
	if mode == "" || mode == config.TLSDisabled {
		return nil, nil
	}
	if (mode == config.TLSPreferred || mode == config.TLSRequired) && t.CAFile != "" {
		return nil, fmt.Errorf("source.tls.ca_file is set but source.tls.mode %s does not check the server's certificate: set mode verify-ca or verify-full to check it against ca_file, or remove ca_file", mode)
	}
	if t.ServerName != "" && mode != config.TLSVerifyFull {
		return nil, fmt.Errorf("source.tls.server_name is set but source.tls.mode %s does not check the name in the server's certificate: set mode verify-full, or remove server_name", mode)
	}
	cfg := &tls.Config{}
	switch mode {
	case config.TLSPreferred, config.TLSRequired:
		cfg.InsecureSkipVerify = true
	case config.TLSVerifyCA, config.TLSVerifyFull:
		if t.CAFile == "" {
			return nil, fmt.Errorf("source.tls.mode is %s but source.tls.ca_file is not set: set ca_file to the PEM file of the CA that signed the server's certificate, or use mode required to encrypt without verifying", mode)
		}
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("source.tls.ca_file %q cannot be read (%v): check the path and its permissions", t.CAFile, connPathErr(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("source.tls.ca_file %q holds no PEM certificate: it must contain the CA certificate(s) in PEM form (-----BEGIN CERTIFICATE-----)", t.CAFile)
		}
		cfg.RootCAs = pool
		if mode == config.TLSVerifyFull {
			cfg.ServerName = t.ServerName
			if cfg.ServerName == "" {
				cfg.ServerName = src.Host
			}
		} else {
			// Verify the chain ourselves, without the host name.
			caFile := t.CAFile
			cfg.InsecureSkipVerify = true
			cfg.VerifyConnection = func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("the server sent no certificate")
				}
				opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool()}
				for _, c := range cs.PeerCertificates[1:] {
					opts.Intermediates.AddCert(c)
				}
				if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
					return fmt.Errorf("the server's certificate is not signed by the CA in source.tls.ca_file %q: %w", caFile, err)
				}
				return nil
			}
		}
	default:
		return nil, fmt.Errorf("source.tls.mode %q is not a TLS mode: use disabled, preferred, required, verify-ca or verify-full", t.Mode)
	}
	if cfg.ServerName == "" && net.ParseIP(src.Host) == nil && src.Host != "" {
		cfg.ServerName = src.Host // SNI
	}
	if t.CertFile != "" || t.KeyFile != "" {
		if t.CertFile == "" || t.KeyFile == "" {
			return nil, errors.New("source.tls.cert_file and source.tls.key_file go together: set both (the client certificate and its private key) or neither")
		}
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate source.tls.cert_file %q with key source.tls.key_file %q cannot be loaded (%v): both must be PEM files and the key must match the certificate", t.CertFile, t.KeyFile, connPathErr(err))
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func connPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ConnectError is the error of Connect. Its message names the server and
// the user, says how to fix the problem and never contains the password.
// Unwrap gives the underlying error (a *mysql.MyError for errors the server
// sent, e.g. code 1045 for a wrong password).
type ConnectError struct {
	Addr string // host:port
	User string
	msg  string
	err  error
}

func (e *ConnectError) Error() string { return e.msg }
func (e *ConnectError) Unwrap() error { return e.err }

// Connect opens a client connection to the source server: dial and
// handshake within src.ConnectTimeout (default 10s, and ctx), TLS per
// TLSConfig (mode preferred falls back to a plain connection when the server
// has no TLS), character set utf8mb4. Errors are sentences naming host:port
// and the user with the fix; they never contain the password.
func Connect(ctx context.Context, src *config.Source) (*client.Conn, error) {
	addr := net.JoinHostPort(src.Host, strconv.Itoa(src.Port))
	password, err := src.ResolvePassword()
	if err != nil {
		return nil, err
	}
	tlsCfg, err := TLSConfig(src)
	if err != nil {
		return nil, err
	}
	timeout := src.ConnectTimeout.Duration
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	conn, err := connDial(ctx, addr, src.User, password, tlsCfg, timeout)
	if err != nil && tlsCfg != nil && tlsPreferred(src) && connNoServerTLS(err) {
		conn, err = connDial(ctx, addr, src.User, password, nil, timeout)
	}
	if err != nil {
		return nil, connExplain(ctx, src, addr, password, timeout, err)
	}
	return conn, nil
}

// tlsPreferred says whether src uses TLS only when the server offers it.
func tlsPreferred(src *config.Source) bool {
	return strings.EqualFold(strings.TrimSpace(src.TLS.Mode), config.TLSPreferred)
}

func connNoServerTLS(err error) bool {
	return err != nil && strings.Contains(err.Error(), "does not support TLS")
}

// connDial connects with a deadline on the whole handshake (go-mysql only
// bounds the dial) and aborts it when ctx is done.
func connDial(ctx context.Context, addr, user, password string, tlsCfg *tls.Config, timeout time.Duration) (*client.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		mu  sync.Mutex
		raw net.Conn
	)
	dialer := func(ctx context.Context, network, address string) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout}
		c, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		deadline, _ := ctx.Deadline()
		_ = c.SetDeadline(deadline)
		mu.Lock()
		raw = c
		mu.Unlock()
		return c, nil
	}
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if raw != nil {
			_ = raw.SetDeadline(time.Unix(1, 0))
		}
	})
	opts := []client.Option{func(c *client.Conn) error { return c.SetCollation(connCollation) }}
	if tlsCfg != nil {
		opts = append(opts, func(c *client.Conn) error { c.SetTLSConfig(tlsCfg); return nil })
	}
	conn, err := client.ConnectWithDialer(ctx, "tcp", addr, user, password, "", dialer, opts...)
	if !stop() {
		// ctx ended during the handshake: the deadline was forced into the
		// past, so the connection is unusable even if the handshake won.
		if conn != nil {
			conn.Close()
		}
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	if err != nil {
		if time.Now().After(connDeadlineOf(ctx)) {
			// The socket's deadline (the same instant) may fire before ctx's
			// timer; go-mysql then reports a bare "i/o timeout" string.
			return nil, fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
		}
		return nil, err
	}
	mu.Lock()
	if raw != nil {
		_ = raw.SetDeadline(time.Time{})
	}
	mu.Unlock()
	return conn, nil
}

func connDeadlineOf(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(time.Hour)
	}
	return d
}

// connExplain turns a connection failure into a sentence with the fix.
func connExplain(ctx context.Context, src *config.Source, addr, password string, timeout time.Duration, err error) error {
	who := fmt.Sprintf("MySQL at %s as user %q", addr, src.User)
	var msg string
	var myErr *mysql.MyError
	var netErr net.Error
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	// Only the libraries' text is redacted (config.Redact): ours never
	// holds the password, and redacting it would show a password that is
	// a common word by its surroundings.
	lib := func(s string) string { return config.Redact(s, password) }
	detail := lib(err.Error())
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()) && !errors.Is(err, context.DeadlineExceeded):
		msg = fmt.Sprintf("connecting to %s was cancelled", who)
	case errors.As(err, &myErr):
		switch myErr.Code {
		case mysql.ER_ACCESS_DENIED_ERROR, 1698 /* ER_ACCESS_DENIED_NO_PASSWORD_ERROR */ :
			msg = fmt.Sprintf("%s: access denied (%s): the password is wrong or the account does not exist for this client host; check source.user and source.password (or source.password_file), and that the account '%s'@'<this host>' or '%s'@'%%' exists", who, lib(myErr.Message), src.User, src.User)
			if m := strings.ToLower(strings.TrimSpace(src.TLS.Mode)); m == "" || m == config.TLSDisabled {
				// The server refuses an account that requires TLS the same
				// way over a plaintext connection.
				msg += "; an account created with REQUIRE SSL (or X509) is refused this way too over a plaintext connection: then set source.tls.mode (e.g. verify-full with ca_file)"
			}
		case mysql.ER_HOST_NOT_PRIVILEGED:
			msg = fmt.Sprintf("%s: the server does not let this host connect (%s): create the account for this client host, e.g. CREATE USER '%s'@'%%' ...", who, lib(myErr.Message), src.User)
		case mysql.ER_HOST_IS_BLOCKED:
			msg = fmt.Sprintf("%s: this host is blocked after too many failed connections (%s): run FLUSH HOSTS on the server (and raise max_connect_errors)", who, lib(myErr.Message))
		case mysql.ER_CON_COUNT_ERROR:
			msg = fmt.Sprintf("%s: the server has too many connections (%s): raise max_connections or close idle clients", who, lib(myErr.Message))
		default:
			msg = fmt.Sprintf("%s: the server refused the connection (error %d: %s)", who, myErr.Code, lib(myErr.Message))
		}
	case connNoServerTLS(err):
		msg = fmt.Sprintf("%s: the server does not offer TLS but source.tls.mode is %s: enable TLS on the server (ssl_cert/ssl_key), or set source.tls.mode to preferred or disabled", who, src.TLS.Mode)
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr),
		strings.Contains(detail, "certificate"):
		msg = fmt.Sprintf("%s: the server's TLS certificate was not accepted (%s): check source.tls.ca_file (the CA that signed the server certificate) and, for verify-full, that source.tls.server_name (default source.host) is a name in the certificate", who, detail)
	case strings.Contains(detail, "tls:"):
		msg = fmt.Sprintf("%s: the TLS handshake failed (%s): check the server's TLS setup and source.tls", who, detail)
	case errors.As(err, &dnsErr):
		msg = fmt.Sprintf("%s: the host name cannot be resolved (%s): check source.host", who, lib(dnsErr.Err))
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) || strings.Contains(detail, "i/o timeout"):
		msg = fmt.Sprintf("%s: no answer within %s: check source.host and source.port, that the server is running and that no firewall blocks the port (or raise source.connect_timeout)", who, timeout)
	case strings.Contains(detail, "connection refused"):
		msg = fmt.Sprintf("%s: connection refused: nothing listens on that port; check source.host and source.port and that the server is running", who)
	case strings.Contains(detail, "auth plugin"):
		msg = fmt.Sprintf("%s: authentication failed (%s): use an account with mysql_native_password, caching_sha2_password, sha256_password or ed25519", who, detail)
	default:
		msg = fmt.Sprintf("cannot connect to %s: %s; check source.host, source.port and that the server is reachable", who, detail)
	}
	return &ConnectError{Addr: addr, User: src.User, msg: msg, err: err}
}

// connQuery runs one statement (a prepared statement when args are given)
// and aborts it when ctx is done by forcing the socket's deadline into the
// past; the connection is unusable afterwards.
func connQuery(ctx context.Context, conn *client.Conn, query string, args ...any) (*mysql.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	r, err := conn.Execute(query, args...)
	if !stop() {
		return nil, fmt.Errorf("%w (query %q: %v)", ctx.Err(), connAbbrev(query), err)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

func connAbbrev(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 80 {
		q = q[:77] + "..."
	}
	return q
}

// connText returns the text of a result value: strings as they are,
// numbers formatted, NULL as "".
func connText(fv mysql.FieldValue) string {
	switch fv.Type {
	case mysql.FieldValueTypeString:
		return string(fv.AsString())
	case mysql.FieldValueTypeSigned:
		return strconv.FormatInt(fv.AsInt64(), 10)
	case mysql.FieldValueTypeUnsigned:
		return strconv.FormatUint(fv.AsUint64(), 10)
	case mysql.FieldValueTypeFloat:
		return strconv.FormatFloat(fv.AsFloat64(), 'g', -1, 64)
	}
	return ""
}

// QuoteIdent quotes a MySQL identifier with backquotes.
func QuoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}
