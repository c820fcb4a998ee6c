package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/integration/testenv"
)

// source.tls.mode: preferred against a server without TLS works the same
// on every connection: queries (Connect), check's binlog probe and the
// binlog stream fall back to a plain connection (issue 15: check passed
// and run looped on "the MySQL Server does not support TLS required by the
// client"), and required is refused on each.
func TestPreferredTLSWithoutServerTLS(t *testing.T) {
	db := rdbStart(t)
	src := rdbSource(db.Host, db.Port, "root", "")
	src.TLS = config.TLS{Mode: config.TLSPreferred}
	conn := rdbConnect(t, src) // queries fall back already
	rdbExec(t, conn, "CREATE DATABASE tp", "CREATE TABLE tp.t (id INT PRIMARY KEY, v VARCHAR(10))")
	id := cdcsync.TableID{Database: "tp", Table: "t"}
	schemas, err := LoadSchemas(context.Background(), conn, []cdcsync.TableID{id})
	if err != nil {
		t.Fatal(err)
	}
	start, err := CurrentPosition(context.Background(), conn, binlogpos.FlavorMariaDB, "test")
	if err != nil {
		t.Fatal(err)
	}
	// check's binlog probe falls back too, and says the connection is
	// plaintext; with required, it is refused like every connection.
	pr, err := ProbeBinlog(context.Background(), src)
	if err != nil {
		t.Fatalf("probe with preferred: %v", err)
	}
	if msg, warn := DescribeTLS(src, pr.TLS); pr.TLS.Encrypted() || !warn || !strings.Contains(msg, "plaintext: the server offers no TLS") {
		t.Errorf("probe with preferred: %+v: %q", pr.TLS, msg)
	}
	req := *src
	req.TLS.Mode = config.TLSRequired
	if _, err := ProbeBinlog(context.Background(), &req); err == nil || !strings.Contains(err.Error(), "does not offer TLS") {
		t.Errorf("probe with required: %v", err)
	}
	if err := Stream(context.Background(), StreamConfig{Source: &req, Flavor: binlogpos.FlavorMariaDB, ServerUUID: "test", Start: start,
		Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{id: schemas[0]}}, make(chan *cdcsync.Txn, 1)); err == nil || !strings.Contains(err.Error(), "does not offer TLS") {
		t.Errorf("stream with required: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := make(chan *cdcsync.Txn, 16)
	done := make(chan error, 1)
	go func() {
		done <- Stream(ctx, StreamConfig{Source: src, Flavor: binlogpos.FlavorMariaDB, ServerUUID: "test", Start: start,
			Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{id: schemas[0]}}, out)
	}()
	rdbExec(t, conn, "INSERT INTO tp.t VALUES (1, 'plain')")
	for {
		select {
		case txn := <-out:
			if len(txn.Changes) == 1 && txn.Changes[0].After[1] == "plain" {
				cancel()
				<-done
				return
			}
		case err := <-done:
			t.Fatalf("the stream ended before the row arrived: %v", err)
		case <-ctx.Done():
			t.Fatal("no row from the binlog stream in 30 s with source.tls.mode: preferred and a server without TLS")
		}
	}
}

// tlsStreamRow streams the binlog of src from the server's current
// position until the row with value v of tm.t arrives, or returns the
// stream's error.
func tlsStreamRow(t *testing.T, root *client.Conn, src *config.Source, ts *cdcsync.TableSchema, v string) error {
	t.Helper()
	start, err := CurrentPosition(context.Background(), root, binlogpos.FlavorMariaDB, "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := make(chan *cdcsync.Txn, 16)
	done := make(chan error, 1)
	go func() {
		done <- Stream(ctx, StreamConfig{Source: src, Flavor: binlogpos.FlavorMariaDB, ServerUUID: "test", Start: start,
			Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{ts.ID: ts}}, out)
	}()
	rdbExec(t, root, fmt.Sprintf("INSERT INTO tm.t (v) VALUES ('%s')", v))
	for {
		select {
		case txn := <-out:
			if len(txn.Changes) == 1 && txn.Changes[0].After[1] == v {
				cancel()
				<-done
				return nil
			}
		case err := <-done:
			if err == nil {
				err = errors.New("the stream ended without an error before the row arrived")
			}
			return err
		case <-ctx.Done():
			t.Fatalf("no row from the binlog stream in 30 s (source.tls: %+v)", src.TLS)
		}
	}
}

// TestTLSEveryConnection: against a MariaDB serving TLS with the
// certificate of a CA the test makes, every connection (queries, the
// chunks of the initial copy, the binlog stream and check's binlog probe)
// encrypts and verifies as its source.tls.mode says, and refuses what the
// mode must refuse, with a clear error: a certificate for another host
// name (verify-full), a certificate of another CA (verify-ca,
// verify-full), plaintext for an account that REQUIRES SSL.
func TestTLSEveryConnection(t *testing.T) {
	pki := connNewPKI(t, t.TempDir())
	other := connNewPKI(t, t.TempDir())
	db := rdbStart(t, pki.MariaDBArgs()...)
	root := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	const user, password = "tlsonly", "Tls-0nly-Secret"
	rdbExec(t, root,
		"CREATE USER '"+user+"'@'%' IDENTIFIED BY '"+password+"' REQUIRE SSL",
		// REPLICATION MASTER ADMIN lets the probe list the replicas
		// (SHOW SLAVE HOSTS) and tell them by server_id.
		"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR, REPLICATION MASTER ADMIN ON *.* TO '"+user+"'@'%'",
		"CREATE DATABASE tm", "CREATE TABLE tm.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(100))")
	id := cdcsync.TableID{Database: "tm", Table: "t"}
	schemas, err := LoadSchemas(context.Background(), root, []cdcsync.TableID{id})
	if err != nil {
		t.Fatal(err)
	}
	ts := schemas[0]
	serverID := uint32(7000)
	src := func(mode, caFile, serverName string) *config.Source {
		serverID++
		s := rdbSource(db.Host, db.Port, user, password)
		s.ServerID = serverID
		s.TLS = config.TLS{Mode: mode, CAFile: caFile, ServerName: serverName}
		return s
	}
	ctx := context.Background()

	for _, tc := range []struct {
		mode, ca, name string
		warn           string // what DescribeTLS warns about; "" for a verified connection
		want           string
	}{
		{"preferred", "", "", "certificate not verified", "certificate not verified (source.tls.mode: preferred)"},
		{"required", "", "", "certificate not verified", "certificate not verified (source.tls.mode: required)"},
		{"verify-ca", pki.CA, "", "", "certificate verified: signed by source.tls.ca_file; its host name is not checked"},
		{"verify-full", pki.CA, "", "", "certificate verified: signed by source.tls.ca_file and issued to 127.0.0.1 (verify-full)"},
		{"verify-full", pki.CA, "localhost", "", "issued to localhost (verify-full)"},
	} {
		t.Run(tc.mode+tc.name, func(t *testing.T) {
			s := src(tc.mode, tc.ca, tc.name)
			// Queries.
			conn := rdbConnect(t, s)
			st, err := ReadTLSState(ctx, conn)
			if err != nil || !st.Encrypted() || !strings.HasPrefix(st.Version, "TLSv1.") {
				t.Fatalf("query connection: %+v, %v", st, err)
			}
			msg, warn := DescribeTLS(s, st)
			if warn != (tc.warn != "") || !strings.Contains(msg, tc.want) || !strings.Contains(msg, st.Cipher) {
				t.Errorf("DescribeTLS = %q, %v; want %q (warning: %v)", msg, warn, tc.want, tc.warn != "")
			}
			// The preflight says the same.
			fs, _, err := Preflight(ctx, conn, s)
			if err != nil {
				t.Fatal(err)
			}
			if f := findingOf(fs, "tls"); f == nil || f.Warning != (tc.warn != "") || !strings.Contains(f.Message, "queries and the initial copy: encrypted") {
				t.Errorf("preflight tls finding: %+v", f)
			}
			// The initial copy's chunks (the account requires TLS).
			r := NewChunkReader(s, binlogpos.FlavorMariaDB, "test", nil, 1)
			_, _, err = r.ReadChunk(ctx, ts, "", "", true)
			r.Close()
			if err != nil {
				t.Errorf("chunk: %v", err)
			}
			// check's binlog probe.
			pr, err := ProbeBinlog(ctx, s)
			if err != nil {
				t.Fatalf("ProbeBinlog: %v", err)
			}
			if pr.Busy != "" || pr.TLS != st || len(pr.Events) == 0 || pr.Events[len(pr.Events)-1] != "FormatDescriptionEvent" {
				t.Errorf("probe: %+v; want the query connection's encryption %+v and events up to the format description", pr, st)
			}
			// The binlog stream.
			if err := tlsStreamRow(t, root, s, ts, "row "+tc.mode+tc.name); err != nil {
				t.Errorf("stream: %v", err)
			}
		})
	}

	// Refusals, the same on every connection.
	for _, tc := range []struct {
		name  string
		s     *config.Source
		wants []string
	}{
		{"wrong host name", src("verify-full", pki.CA, "db.example.com"),
			[]string{"certificate", "db.example.com"}},
		{"untrusted CA, verify-ca", src("verify-ca", other.CA, ""),
			[]string{"not signed by the CA in source.tls.ca_file", other.CA}},
		{"untrusted CA, verify-full", src("verify-full", other.CA, ""),
			[]string{"certificate", "unknown authority"}},
		{"plaintext for an account that requires TLS", src("disabled", "", ""),
			[]string{"ccess denied"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				if err == nil {
					t.Errorf("%s: accepted", what)
					return
				}
				t.Logf("%s: %v", what, err)
				if strings.Contains(err.Error(), password) {
					t.Errorf("%s: the error shows the password: %v", what, err)
				}
				for _, w := range tc.wants {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %q lacks %q", what, err, w)
					}
				}
			}
			_, err := Connect(ctx, tc.s)
			check("Connect", err)
			if err != nil && !strings.Contains(tc.name, "plaintext") && !strings.Contains(err.Error(), "source.tls.ca_file") {
				t.Errorf("Connect: the message does not point at source.tls: %v", err)
			}
			r := NewChunkReader(tc.s, binlogpos.FlavorMariaDB, "test", nil, 1)
			_, _, err = r.ReadChunk(ctx, ts, "", "", true)
			r.Close()
			check("chunk", err)
			_, err = ProbeBinlog(ctx, tc.s)
			check("ProbeBinlog", err)
			check("Stream", tlsStreamRow(t, root, tc.s, ts, "refused "+tc.name))
		})
	}

	// Plaintext where the account allows it: the probe says so, as a
	// warning.
	s := rdbSource(db.Host, db.Port, "root", "")
	s.ServerID = 7100
	pr, err := ProbeBinlog(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if msg, warn := DescribeTLS(s, pr.TLS); pr.TLS.Encrypted() || !warn || !strings.HasPrefix(msg, "plaintext (source.tls.mode: disabled)") {
		t.Errorf("plaintext probe: %+v: %q, %v", pr.TLS, msg, warn)
	}
}

func findingOf(fs []Finding, check string) *Finding {
	for i := range fs {
		if fs[i].Check == check {
			return &fs[i]
		}
	}
	return nil
}

// TestProbeBinlogBusy: the probe never cuts off a replica reading the
// binlog with the configured server_id (MariaDB drops the older of two
// binlog connections with one id).
func TestProbeBinlogBusy(t *testing.T) {
	db := rdbStart(t)
	root := rdbConnect(t, rdbSource(db.Host, db.Port, "root", ""))
	rdbExec(t, root, "CREATE DATABASE tm", "CREATE TABLE tm.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(100))",
		// The harness's account cannot list the replicas on MariaDB.
		"CREATE USER 'lister'@'%' IDENTIFIED BY 'Lister-Pass-1'",
		"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR, REPLICATION MASTER ADMIN ON *.* TO 'lister'@'%'")
	ts, err := LoadSchema(context.Background(), root, cdcsync.TableID{Database: "tm", Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	running := rdbSource(db.Host, db.Port, testenv.ReplUser, testenv.ReplPassword)
	running.ServerID = 8001
	start, err := CurrentPosition(context.Background(), root, binlogpos.FlavorMariaDB, "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	out := make(chan *cdcsync.Txn, 16)
	go func() {
		done <- Stream(ctx, StreamConfig{Source: running, Flavor: binlogpos.FlavorMariaDB, ServerUUID: "test", Start: start,
			Schemas: map[cdcsync.TableID]*cdcsync.TableSchema{ts.ID: ts}}, out)
	}()
	defer func() { cancel(); <-done }()
	rdbExec(t, root, "INSERT INTO tm.t (v) VALUES ('x')")
	select {
	case <-out:
	case err := <-done:
		t.Fatalf("stream: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no transaction from the stream")
	}

	// The same account, which cannot list the replicas: its own dump shows.
	pr, err := ProbeBinlog(context.Background(), running)
	if err != nil || !strings.Contains(pr.Busy, "this account is reading the binlog already") || pr.Events != nil {
		t.Errorf("probe by the streaming account: %+v, %v", pr, err)
	}
	// An account that lists the replicas: the same id is busy, another is
	// free.
	lister := rdbSource(db.Host, db.Port, "lister", "Lister-Pass-1")
	lister.ServerID = 8001
	if pr, err := ProbeBinlog(context.Background(), lister); err != nil || !strings.Contains(pr.Busy, "a replica with server_id 8001") {
		t.Errorf("probe with the streaming replica's id: %+v, %v", pr, err)
	}
	lister.ServerID = 8002
	if pr, err := ProbeBinlog(context.Background(), lister); err != nil || pr.Busy != "" || len(pr.Events) == 0 {
		t.Errorf("probe with another id: %+v, %v", pr, err)
	}
	// The stream was not cut off.
	rdbExec(t, root, "INSERT INTO tm.t (v) VALUES ('y')")
	select {
	case <-out:
	case err := <-done:
		t.Fatalf("the stream ended after the probes: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no transaction from the stream after the probes")
	}
}
