package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/cdcsync/cdcsync/integration/testenv"
)

// TestTLSEverywhere mirrors a table from a MariaDB whose cdcsync account
// REQUIRES SSL into a MinIO that serves only HTTPS, both with certificates
// of a private CA, verified in full (chain and host name).
func TestTLSEverywhere(t *testing.T) {
	pki, err := testenv.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	server, err := testenv.StartMariaDB(testenv.MariaDBOptions{ExtraArgs: pki.MariaDBArgs()})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Stop()
	if err := server.Exec("ALTER USER '" + testenv.ReplUser + "'@'%' REQUIRE SSL"); err != nil {
		t.Fatal(err)
	}
	s3, err := testenv.StartMinIOTLS("", pki)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Stop()
	if !strings.HasPrefix(s3.Endpoint, "https://") {
		t.Fatalf("MinIO endpoint %s is not HTTPS", s3.Endpoint)
	}

	e := newEnv(t, "it_tls", envOptions{server: server, minio: s3, onMinIO: true, s3CA: pki.CA,
		sourceTLS: "mode: verify-full\n    ca_file: " + pki.CA})
	e.exec("CREATE TABLE it_tls.t (id INT PRIMARY KEY, secret VARCHAR(20))")
	e.exec("INSERT INTO it_tls.t VALUES (1, 'a'), (2, 'b')")
	out, code := runCLI(t, "check", "--config", e.cfgPath)
	if code != 0 {
		t.Fatalf("check over TLS exited %d:\n%s", code, out)
	}
	// check reads the binlog too, over TLS verified the same way.
	for _, want := range []string{
		"ok    tls                      queries and the initial copy: encrypted (TLSv1.",
		"certificate verified: signed by source.tls.ca_file and issued to 127.0.0.1 (verify-full)",
		"ok    binlog stream            read the binlog at mariadb:",
		"FormatDescriptionEvent); the connection is encrypted (TLSv1.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check over TLS: the output lacks %q:\n%s", want, out)
		}
	}
	p := e.start()
	e.waitCaughtUp(p, time.Minute)
	e.exec("UPDATE it_tls.t SET secret = 'z' WHERE id = 1")
	e.exec("INSERT INTO it_tls.t VALUES (3, 'c')")
	e.waitCaughtUp(p, time.Minute)
	e.assertMirrors("t")
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, p.output())
	}

	// Without TLS the account is refused; with another CA the server's
	// certificate is not trusted. Both are reported by check, clearly.
	e.rewriteConfig("mode: verify-full\n    ca_file: "+pki.CA+"\n", "mode: disabled\n")
	if out, code := runCLI(t, "check", "--config", e.cfgPath); code != 1 || !strings.Contains(strings.ToLower(out), "access denied") {
		t.Errorf("check without TLS exited %d:\n%s", code, out)
	}
	other, err := testenv.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e.rewriteConfig("mode: disabled\n", "mode: verify-full\n    ca_file: "+other.CA+"\n")
	out, code = runCLI(t, "check", "--config", e.cfgPath)
	if code != 1 || !strings.Contains(strings.ToLower(out), "certificate") {
		t.Errorf("check with an untrusted server certificate exited %d:\n%s", code, out)
	}

	// required encrypts without verifying, like the mysql client's
	// --ssl-mode=REQUIRED: check passes and says so, for both connections.
	e.rewriteConfig("mode: verify-full\n    ca_file: "+other.CA+"\n", "mode: required\n")
	out, code = runCLI(t, "check", "--config", e.cfgPath)
	if code != 0 || strings.Count(out, "certificate not verified (source.tls.mode: required)") != 2 ||
		!strings.Contains(out, "warn  tls") || !strings.Contains(out, "warn  binlog stream") {
		t.Errorf("check with tls mode required exited %d; want 0 and two warnings saying the certificate is not verified:\n%s", code, out)
	}
}
