package capture

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/integration/testenv"
)

// connTestPKI holds PEM files of a test CA, a server certificate for
// 127.0.0.1 and "localhost", and a client certificate.
type connTestPKI = testenv.PKI

func connNewPKI(t *testing.T, dir string) connTestPKI {
	t.Helper()
	p, err := testenv.NewPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	return *p
}

func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	pki := connNewPKI(t, dir)
	src := func(mode string) *config.Source {
		s := &config.Source{Host: "db.example.com", Port: 3306, User: "u", TLS: config.TLS{Mode: mode}}
		if strings.HasPrefix(mode, "verify") {
			s.TLS.CAFile = pki.CA
		}
		return s
	}
	for _, mode := range []string{"", "disabled"} {
		cfg, err := TLSConfig(src(mode))
		if cfg != nil || err != nil {
			t.Errorf("mode %q: %v, %v", mode, cfg, err)
		}
	}
	for _, mode := range []string{"preferred", "required"} {
		cfg, err := TLSConfig(src(mode))
		if err != nil || cfg == nil || !cfg.InsecureSkipVerify {
			t.Errorf("mode %s: %+v, %v", mode, cfg, err)
		}
	}
	cfg, err := TLSConfig(src("verify-ca"))
	if err != nil || !cfg.InsecureSkipVerify || cfg.VerifyConnection == nil || cfg.RootCAs == nil {
		t.Errorf("verify-ca: %+v, %v", cfg, err)
	}
	cfg, err = TLSConfig(src("verify-full"))
	if err != nil || cfg.InsecureSkipVerify || cfg.ServerName != "db.example.com" || cfg.RootCAs == nil {
		t.Errorf("verify-full: %+v, %v", cfg, err)
	}
	s := src("verify-full")
	s.TLS.ServerName = "mysql.internal"
	if cfg, _ := TLSConfig(s); cfg.ServerName != "mysql.internal" {
		t.Errorf("server_name not used: %s", cfg.ServerName)
	}
	s = src("required")
	s.TLS.CertFile, s.TLS.KeyFile = pki.ClientCert, pki.ClientKey
	if cfg, err := TLSConfig(s); err != nil || len(cfg.Certificates) != 1 {
		t.Errorf("client certificate: %v", err)
	}

	// Errors name the file and the key.
	bad := filepath.Join(dir, "missing.pem")
	s = src("verify-ca")
	s.TLS.CAFile = bad
	if _, err := TLSConfig(s); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "ca_file") {
		t.Errorf("missing CA: %v", err)
	}
	s.TLS.CAFile = pki.ClientKey // not a certificate
	if _, err := TLSConfig(s); err == nil || !strings.Contains(err.Error(), pki.ClientKey) {
		t.Errorf("CA file without certificate: %v", err)
	}
	s.TLS.CAFile = ""
	if _, err := TLSConfig(s); err == nil || !strings.Contains(err.Error(), "ca_file") {
		t.Errorf("verify-ca without CA: %v", err)
	}
	s = src("required")
	s.TLS.CertFile, s.TLS.KeyFile = bad, pki.ClientKey
	if _, err := TLSConfig(s); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("missing client cert: %v", err)
	}
	s.TLS.CertFile, s.TLS.KeyFile = pki.ClientCert, ""
	if _, err := TLSConfig(s); err == nil || !strings.Contains(err.Error(), "key_file") {
		t.Errorf("cert without key: %v", err)
	}
	s.TLS.CertFile, s.TLS.KeyFile = pki.ClientCert, pki.ServerKey // key of another cert
	if _, err := TLSConfig(s); err == nil || !strings.Contains(err.Error(), pki.ServerKey) {
		t.Errorf("mismatched key: %v", err)
	}
	if _, err := TLSConfig(src("sometimes")); err == nil || !strings.Contains(err.Error(), "verify-full") {
		t.Errorf("bad mode: %v", err)
	}
	// What a mode would not check is refused rather than ignored.
	for _, mode := range []string{"preferred", "required"} {
		s = src(mode)
		s.TLS.CAFile = pki.CA
		if _, err := TLSConfig(s); err == nil || !strings.Contains(err.Error(), "does not check the server's certificate") {
			t.Errorf("%s with ca_file: %v", mode, err)
		}
	}
	for _, mode := range []string{"preferred", "required", "verify-ca"} {
		s = src(mode)
		s.TLS.ServerName = "db"
		if _, err := TLSConfig(s); err == nil || !strings.Contains(err.Error(), "server_name") {
			t.Errorf("%s with server_name: %v", mode, err)
		}
	}
}

// TestTLSVerifyCA checks verify-ca against a TLS server: the chain is
// checked, the host name is not.
func TestTLSVerifyCA(t *testing.T) {
	dir := t.TempDir()
	pki := connNewPKI(t, dir)
	other := connNewPKI(t, t.TempDir())
	cert, err := tls.LoadX509KeyPair(pki.ServerCert, pki.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	dial := func(caFile, mode, host string) error {
		cfg, err := TLSConfig(&config.Source{Host: host, TLS: config.TLS{Mode: mode, CAFile: caFile}})
		if err != nil {
			return err
		}
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(pki.CA, "verify-ca", "wrong.example.com"); err != nil {
		t.Errorf("verify-ca with the right CA and another host name: %v", err)
	}
	if err := dial(other.CA, "verify-ca", "127.0.0.1"); err == nil || !strings.Contains(err.Error(), other.CA) {
		t.Errorf("verify-ca with another CA: %v", err)
	}
	if err := dial(pki.CA, "verify-full", "127.0.0.1"); err != nil {
		t.Errorf("verify-full: %v", err)
	}
	if err := dial(pki.CA, "verify-full", "wrong.example.com"); err == nil {
		t.Error("verify-full accepted a wrong host name")
	}
}

const connTestPassword = "S3cret-Passw0rd!"

func connAssertNoPassword(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), connTestPassword) {
		t.Errorf("error contains the password: %s", err)
	}
	var ce *ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil && strings.Contains(ce.Unwrap().Error(), connTestPassword) {
		t.Errorf("wrapped error contains the password: %s", ce.Unwrap())
	}
}

func TestConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	src := &config.Source{Host: "127.0.0.1", Port: port, User: "cdc", Password: connTestPassword, ConnectTimeout: config.Duration{Duration: 2 * time.Second}}
	_, err = Connect(context.Background(), src)
	connAssertNoPassword(t, err)
	for _, want := range []string{"127.0.0.1:", `user "cdc"`, "connection refused", "source.port"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

// A server that accepts but never speaks: the handshake must time out.
func TestConnectTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	src := &config.Source{Host: "127.0.0.1", Port: port, User: "cdc", Password: connTestPassword, ConnectTimeout: config.Duration{Duration: 300 * time.Millisecond}}
	start := time.Now()
	_, err = Connect(context.Background(), src)
	connAssertNoPassword(t, err)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
	if !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Errorf("message: %s", err)
	}
	// Cancelling the context aborts the handshake too.
	src.ConnectTimeout.Duration = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = Connect(ctx, src)
	if err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("cancelled connect: %v after %s", err, time.Since(start))
	}
}

func TestConnectPasswordFileError(t *testing.T) {
	src := &config.Source{Host: "127.0.0.1", Port: 1, User: "cdc", PasswordFile: filepath.Join(t.TempDir(), "nope")}
	_, err := Connect(context.Background(), src)
	if err == nil || !strings.Contains(err.Error(), "password_file") {
		t.Errorf("Connect with a missing password file: %v", err)
	}
}
