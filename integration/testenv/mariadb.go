package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// Accounts that StartMariaDB creates. Root has no password and is reachable
// over TCP from 127.0.0.1.
const (
	// RootUser is the server's superuser; it has no password.
	RootUser = "root"

	// ReplUser is the account cdcsync uses in tests: SELECT, REPLICATION
	// SLAVE and REPLICATION CLIENT (BINLOG MONITOR on MariaDB) on *.*, enough
	// to read the binlog over a replica connection and to run SHOW MASTER
	// STATUS, SHOW BINARY LOGS and SELECT @@gtid_binlog_pos.
	ReplUser     = "cdcsync"
	ReplPassword = "cdcsync-secret"

	// NoReplUser has SELECT on *.* and nothing else, for preflight tests of
	// missing replication privileges.
	NoReplUser     = "cdcsync_noslave"
	NoReplPassword = "x"
)

// ReplGrants are the privileges granted to ReplUser on *.*.
const ReplGrants = "SELECT, REPLICATION SLAVE, REPLICATION CLIENT"

const (
	startTimeout    = 60 * time.Second
	stopGrace       = 60 * time.Second
	startAttempts   = 5
	maxSocketPath   = 100 // sun_path is 108 bytes
	maxIdleConns    = 4
	mariadbNotFound = "not found: run scripts/test.sh, which installs mariadb-server (or apt-get install mariadb-server)"
)

// MariaDBOptions configures StartMariaDB.
type MariaDBOptions struct {
	// Dir is the server's directory (data in Dir/data, error log, pid file
	// and socket beside it). Default: a new temporary directory, removed by
	// Stop. If Dir/data already holds a database it is reused as is, which
	// lets a test start a server again on the data of a stopped or killed one.
	Dir string
	// ExtraArgs are appended to the mariadbd arguments; later arguments win,
	// so tests can override defaults, e.g. "--binlog-format=STATEMENT",
	// "--skip-log-bin", "--binlog-row-image=MINIMAL",
	// "--default-time-zone=+08:00".
	ExtraArgs []string
}

// MariaDB is a running mariadbd started by StartMariaDB.
// Its methods are safe for concurrent use.
type MariaDB struct {
	Host     string // always 127.0.0.1
	Port     int
	Dir      string // see MariaDBOptions.Dir
	DataDir  string // Dir/data; the binlog is DataDir/binlog.NNNNNN
	Socket   string // unix socket path
	ErrorLog string // mariadbd's error log

	mariadbd  string
	extraArgs []string
	ownsDir   bool   // Dir was created by StartMariaDB; Stop removes it
	sockDir   string // separate short directory for the socket, removed by Stop

	mu   sync.Mutex
	proc *proc
	idle []*client.Conn // root connections for Exec/Query
}

// StartMariaDB initialises a data directory with mariadb-install-db, starts
// mariadbd on a free 127.0.0.1 port with the binlog on (ROW, FULL row image,
// FULL row metadata, server id 1, gtid_strict_mode on; MariaDB always writes GTIDs), waits until
// it answers SELECT 1, and creates the ReplUser and NoReplUser accounts.
func StartMariaDB(opts MariaDBOptions) (*MariaDB, error) {
	mariadbd, err := findBinary("mariadbd", "/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin")
	if err != nil {
		return nil, fmt.Errorf("testenv: mariadbd %s", mariadbNotFound)
	}
	m := &MariaDB{Host: "127.0.0.1", mariadbd: mariadbd, extraArgs: append([]string(nil), opts.ExtraArgs...)}
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "cdcsync-mariadb-")
		if err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		m.Dir, m.ownsDir = d, true
	} else {
		d, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		m.Dir = d
	}
	m.DataDir = filepath.Join(m.Dir, "data")
	m.ErrorLog = filepath.Join(m.Dir, "error.log")
	m.Socket = filepath.Join(m.Dir, "sock")
	if len(m.Socket) >= maxSocketPath {
		d, err := os.MkdirTemp("/tmp", "cdcsync-sock-")
		if err != nil {
			m.cleanup()
			return nil, fmt.Errorf("testenv: %w", err)
		}
		m.sockDir = d
		m.Socket = filepath.Join(d, "sock")
	}

	if _, err := os.Stat(filepath.Join(m.DataDir, "mysql")); err != nil {
		if err := m.installDB(); err != nil {
			m.cleanup()
			return nil, err
		}
	}
	if err := m.start(0); err != nil {
		m.cleanup()
		return nil, err
	}
	if err := m.createAccounts(); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

func (m *MariaDB) installDB() error {
	installDB, err := findBinary("mariadb-install-db", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin")
	if err != nil {
		return fmt.Errorf("testenv: mariadb-install-db %s", mariadbNotFound)
	}
	// --no-defaults must come first; it keeps /etc/mysql and ~/.my.cnf out.
	args := []string{"--no-defaults"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	// A private tmpdir: two installs at once in the shared /tmp collide on
	// their temporary table names.
	if err := os.MkdirAll(m.tmpDir(), 0o755); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	args = append(args,
		"--datadir="+m.DataDir,
		"--tmpdir="+m.tmpDir(),
		"--auth-root-authentication-method=normal",
		"--skip-test-db",
		"--skip-name-resolve",
	)
	cmd := exec.Command(installDB, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("testenv: mariadb-install-db --datadir=%s: %v\n%s", m.DataDir, err, tailString(string(out), 40))
	}
	return nil
}

func (m *MariaDB) tmpDir() string { return filepath.Join(m.Dir, "tmp") }

// args returns the mariadbd command line for port.
func (m *MariaDB) args(port int) []string {
	args := []string{"--no-defaults"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	args = append(args,
		"--datadir="+m.DataDir,
		"--port="+strconv.Itoa(port),
		"--tmpdir="+m.tmpDir(),
		"--socket="+m.Socket,
		"--bind-address=127.0.0.1",
		"--log-bin="+filepath.Join(m.DataDir, "binlog"),
		"--binlog-format=ROW",
		"--binlog-row-image=FULL",
		"--binlog-row-metadata=FULL",
		"--server-id=1",
		"--gtid-strict-mode=ON", // as cdcsync's check recommends
		"--skip-name-resolve",
		"--log-error="+m.ErrorLog,
		"--pid-file="+filepath.Join(m.Dir, "mariadbd.pid"),
		"--innodb-buffer-pool-size=128M",
		"--max-connections=200",
		// --no-defaults drops Debian's utf8mb4 default; keep what a typical
		// server has (override with ExtraArgs).
		"--character-set-server=utf8mb4",
		"--collation-server=utf8mb4_general_ci",
	)
	return append(args, m.extraArgs...)
}

// start runs mariadbd and waits until it answers. port 0 picks a free port
// and retries with another one when the port was taken meanwhile.
func (m *MariaDB) start(port int) error {
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		p := port
		if p == 0 {
			var err error
			if p, err = freePort(); err != nil {
				return err
			}
		}
		logStart := fileSize(m.ErrorLog)
		pr, err := startProc(m.mariadbd, m.args(p), os.Environ(), filepath.Join(m.Dir, "mariadbd.out"))
		if err != nil {
			return err
		}
		err = m.waitReady(pr, p)
		if err == nil {
			m.mu.Lock()
			m.proc = pr
			if m.Port != p { // Restart keeps the port: no write, no race with readers
				m.Port = p
			}
			m.mu.Unlock()
			return nil
		}
		pr.kill()
		lastErr = err
		newLog := readFrom(m.ErrorLog, logStart)
		bindFailed := strings.Contains(newLog, "Address already in use") || strings.Contains(newLog, "Bind on TCP/IP port")
		if port != 0 || !bindFailed {
			break
		}
	}
	return lastErr
}

func (m *MariaDB) waitReady(pr *proc, port int) error {
	addr := net.JoinHostPort(m.Host, strconv.Itoa(port))
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		if pr.exited() {
			return fmt.Errorf("testenv: mariadbd exited during startup (%v); tail of %s:\n%s",
				pr.err, m.ErrorLog, tailFile(m.ErrorLog, 30))
		}
		c, err := connect(addr, RootUser, "", "", time.Second)
		if err == nil {
			_, err = c.Execute("SELECT 1")
			c.Close()
			if err == nil {
				return nil
			}
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("testenv: mariadbd on %s not ready after %s (last error: %v); tail of %s:\n%s",
		addr, startTimeout, lastErr, m.ErrorLog, tailFile(m.ErrorLog, 30))
}

func (m *MariaDB) createAccounts() error {
	stmts := []string{
		fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s'", ReplUser, ReplPassword),
		fmt.Sprintf("GRANT %s ON *.* TO '%s'@'%%'", ReplGrants, ReplUser),
		fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s'", NoReplUser, NoReplPassword),
		fmt.Sprintf("GRANT SELECT ON *.* TO '%s'@'%%'", NoReplUser),
	}
	for _, s := range stmts {
		if err := m.Exec(s); err != nil {
			return fmt.Errorf("testenv: creating accounts: %w", err)
		}
	}
	return nil
}

// Addr returns "127.0.0.1:PORT".
func (m *MariaDB) Addr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return net.JoinHostPort(m.Host, strconv.Itoa(m.Port))
}

// Connect opens a new connection as user (database db may be "").
// The caller closes it.
func (m *MariaDB) Connect(user, password, db string) (*client.Conn, error) {
	return connect(m.Addr(), user, password, db, 10*time.Second)
}

func connect(addr, user, password, db string, timeout time.Duration) (*client.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := &net.Dialer{Timeout: timeout}
	return client.ConnectWithDialer(ctx, "tcp", addr, user, password, db, d.DialContext)
}

// Exec runs one statement as root and discards its result. With args it is
// a prepared statement. Multi-statement strings are not supported.
func (m *MariaDB) Exec(sql string, args ...any) error {
	r, err := m.Query(sql, args...)
	if err != nil {
		return err
	}
	r.Close()
	return nil
}

// PurgeOldBinlogs purges every binlog file before the current one and
// waits until they are gone: MariaDB skips a file its binlog checkpoint
// still needs (the engine has not flushed it yet, under load) or that a
// dump thread still reads, without an error.
func (m *MariaDB) PurgeOldBinlogs() error {
	r, err := m.Query("SHOW MASTER STATUS")
	if err != nil {
		return err
	}
	current, _ := r.GetString(0, 0)
	current = strings.Clone(current)
	r.Close()
	for attempt := 0; ; attempt++ {
		if err := m.Exec("PURGE BINARY LOGS TO '" + current + "'"); err != nil {
			return err
		}
		logs, err := m.Query("SHOW BINARY LOGS")
		if err != nil {
			return err
		}
		n := logs.RowNumber()
		logs.Close()
		if n == 1 {
			return nil
		}
		if attempt == 50 {
			return fmt.Errorf("testenv: %d binlogs are still there 10 s after PURGE BINARY LOGS TO '%s'", n, current)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Query runs one statement as root and returns go-mysql's result
// (r.Resultset holds the rows of a SELECT). r.Close is optional; it returns
// the result's buffers to go-mysql's pool, and strings or byte slices read
// from r (GetString, RowValues) may alias those buffers: copy them
// (strings.Clone) before calling Close.
func (m *MariaDB) Query(sql string, args ...any) (*mysql.Result, error) {
	c, err := m.rootConn()
	if err != nil {
		return nil, err
	}
	r, err := c.Execute(sql, args...)
	var myErr *mysql.MyError
	if err != nil && !errors.As(err, &myErr) {
		// Not a server error: the connection may be broken; drop it.
		c.Close()
		return nil, fmt.Errorf("testenv: %s: %w", abbrev(sql), err)
	}
	m.putRootConn(c)
	if err != nil {
		return nil, fmt.Errorf("testenv: %s: %w", abbrev(sql), err)
	}
	return r, nil
}

func (m *MariaDB) rootConn() (*client.Conn, error) {
	m.mu.Lock()
	if n := len(m.idle); n > 0 {
		c := m.idle[n-1]
		m.idle = m.idle[:n-1]
		m.mu.Unlock()
		return c, nil
	}
	addr := net.JoinHostPort(m.Host, strconv.Itoa(m.Port))
	m.mu.Unlock()
	c, err := connect(addr, RootUser, "", "", 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("testenv: connect to mariadb %s as root: %w", addr, err)
	}
	return c, nil
}

func (m *MariaDB) putRootConn(c *client.Conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.idle) < maxIdleConns && c.IsAutoCommit() && !c.IsInTransaction() {
		m.idle = append(m.idle, c)
		return
	}
	c.Close()
}

func (m *MariaDB) closeIdle() {
	m.mu.Lock()
	idle := m.idle
	m.idle = nil
	m.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

func (m *MariaDB) current() *proc {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

// Stop shuts mariadbd down cleanly (SIGTERM), waits for it to exit and, when
// StartMariaDB created the directory, removes it. It is safe to call more
// than once and after Kill.
func (m *MariaDB) Stop() error {
	m.closeIdle()
	var err error
	if p := m.current(); p != nil {
		if e := p.stop(stopGrace); e != nil {
			err = fmt.Errorf("testenv: mariadbd %s", e)
		}
	}
	m.cleanup()
	return err
}

// Kill sends SIGKILL to mariadbd (a crash) and waits for it to exit. The
// data stays; Restart starts the server again on it (crash recovery).
func (m *MariaDB) Kill() {
	m.closeIdle()
	if p := m.current(); p != nil {
		p.kill()
	}
}

// Restart starts mariadbd again on the same data directory and port after
// Kill, or stops it cleanly first if it is running. It does not work after
// Stop removed a temporary directory.
func (m *MariaDB) Restart() error {
	m.closeIdle()
	if p := m.current(); p != nil && !p.exited() {
		if err := p.stop(stopGrace); err != nil {
			return fmt.Errorf("testenv: mariadbd %s", err)
		}
	}
	if _, err := os.Stat(filepath.Join(m.DataDir, "mysql")); err != nil {
		return fmt.Errorf("testenv: restart: no data directory at %s", m.DataDir)
	}
	if err := os.MkdirAll(filepath.Dir(m.Socket), 0o755); err != nil {
		return fmt.Errorf("testenv: restart: %w", err)
	}
	return m.start(m.Port)
}

func (m *MariaDB) cleanup() {
	if m.ownsDir {
		_ = os.RemoveAll(m.Dir)
	}
	if m.sockDir != "" {
		_ = os.RemoveAll(m.sockDir)
	}
}

func abbrev(sql string) string {
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > 120 {
		return sql[:117] + "..."
	}
	return sql
}

// ReplicateFrom makes m a GTID replica of primary that writes what it
// applies to its own binlog (start m with --log-slave-updates and its own
// --server-id), continuing primary's history from now on: m's binlog is
// reset to primary's current GTID state, so that a position cdcsync read
// on primary means the same on m. Only what primary writes after the call
// is replicated; databases a test uses must be created afterwards.
func (m *MariaDB) ReplicateFrom(primary *MariaDB) error {
	r, err := primary.Query("SELECT @@gtid_binlog_pos")
	if err != nil {
		return err
	}
	pos, _ := r.GetString(0, 0)
	for _, q := range []string{
		"STOP SLAVE",
		"RESET MASTER",
		fmt.Sprintf("SET GLOBAL gtid_binlog_state = '%s'", pos),
		fmt.Sprintf("SET GLOBAL gtid_slave_pos = '%s'", pos),
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos",
			primary.Port, ReplUser, ReplPassword),
		"START SLAVE",
	} {
		if err := m.Exec(q); err != nil {
			return fmt.Errorf("testenv: set up replication: %w", err)
		}
	}
	return nil
}

// WaitReplicated waits until m has applied everything primary has written
// so far.
func (m *MariaDB) WaitReplicated(primary *MariaDB, timeout time.Duration) error {
	r, err := primary.Query("SELECT @@gtid_binlog_pos")
	if err != nil {
		return err
	}
	pos, _ := r.GetString(0, 0)
	res, err := m.Query("SELECT MASTER_GTID_WAIT(?, ?)", pos, timeout.Seconds())
	if err != nil {
		return err
	}
	if v, _ := res.GetInt(0, 0); v != 0 {
		st, _ := m.Query("SHOW SLAVE STATUS")
		detail := ""
		if st != nil && st.RowNumber() > 0 {
			e1, _ := st.GetStringByName(0, "Last_SQL_Error")
			e2, _ := st.GetStringByName(0, "Last_IO_Error")
			detail = fmt.Sprintf(" (SQL error: %q, IO error: %q)", e1, e2)
		}
		return fmt.Errorf("testenv: the replica did not reach %s within %s%s", pos, timeout, detail)
	}
	return nil
}
