package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// Postgres is a private PostgreSQL server, for cdcsync's SQL catalog on
// PostgreSQL (the database Spark's and Trino's JDBC catalogs read).
type Postgres struct {
	Port int
	Dir  string

	proc *proc
}

// StartPostgres initialises a cluster in a temporary directory and starts
// postgres on a free 127.0.0.1 port with trust authentication for the user
// "postgres". PostgreSQL refuses to run as root, so it runs as the
// "postgres" system user that the Debian package creates.
func StartPostgres() (*Postgres, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		return nil, fmt.Errorf("testenv: initdb not found under /usr/lib/postgresql: run scripts/test.sh, which installs postgresql")
	}
	sort.Strings(bins)
	binDir := filepath.Dir(bins[len(bins)-1])
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("testenv: the postgres system user is missing (%w): install the postgresql package", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}

	dir, err := os.MkdirTemp("", "cdcsync-postgres-")
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	p := &Postgres{Dir: dir}
	if err := os.Chown(dir, uid, gid); err != nil {
		p.cleanup()
		return nil, fmt.Errorf("testenv: %w", err)
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(binDir, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		p.cleanup()
		return nil, fmt.Errorf("testenv: initdb: %w\n%s", err, out)
	}
	logPath := filepath.Join(dir, "postgres.log")
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := freePort()
		if err != nil {
			p.cleanup()
			return nil, err
		}
		pr, err := startProcAs(cred, filepath.Join(binDir, "postgres"), []string{"-D", data, "-p", strconv.Itoa(port),
			"-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off"}, os.Environ(), logPath)
		if err != nil {
			p.cleanup()
			return nil, err
		}
		if lastErr = waitPostgres(pr, port, logPath); lastErr == nil {
			p.proc, p.Port = pr, port
			return p, nil
		}
		pr.kill()
	}
	p.cleanup()
	return nil, lastErr
}

func waitPostgres(pr *proc, port int, logPath string) error {
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		if pr.exited() {
			return fmt.Errorf("testenv: postgres exited during startup (%v); its log:\n%s", pr.err, tailFile(logPath, 30))
		}
		db, err := sql.Open("pgx", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = db.PingContext(ctx)
			cancel()
			db.Close()
			if err == nil {
				return nil
			}
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("testenv: postgres on port %d not ready after %s (last error: %v); its log:\n%s", port, startTimeout, lastErr, tailFile(logPath, 30))
}

// DSN returns a connection URL for database name as user postgres.
func (p *Postgres) DSN(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.Port, name)
}

// CreateDatabase creates a database.
func (p *Postgres) CreateDatabase(name string) error {
	db, err := sql.Open("pgx", p.DSN("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		return fmt.Errorf("testenv: create database %s: %w", name, err)
	}
	return nil
}

// Stop shuts postgres down and removes its directory.
func (p *Postgres) Stop() error {
	var err error
	if p.proc != nil {
		err = p.proc.stop(30 * time.Second)
	}
	p.cleanup()
	return err
}

func (p *Postgres) cleanup() { os.RemoveAll(p.Dir) }
