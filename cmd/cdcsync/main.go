// Command cdcsync mirrors MySQL/MariaDB tables into Apache Iceberg tables by
// reading the binlog. See `cdcsync help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cdcsync/cdcsync/config"
)

const usage = `cdcsync keeps Apache Iceberg tables in step with MySQL/MariaDB tables by reading the binlog.

Usage:
  cdcsync run    --config FILE            run the daemon: stream every change, copying existing rows meanwhile
  cdcsync check  --config FILE            check the source server, the tables, the catalog and the warehouse
  cdcsync tables --config FILE            list the Iceberg tables and their committed binlog positions
  cdcsync cat    --config FILE DB.TABLE [--limit N]
                                          print the rows of a mirrored table, read through Iceberg
  cdcsync compact --config FILE DB.TABLE [--max-bytes SIZE]
                                          compact a table now: rewrite the data files that carry deletes
                                          or are small, drop dead delete files, merge manifests
  cdcsync resync --config FILE (DB.TABLE ... | --all) [--offline]
                                          copy tables afresh from MySQL: online, through the running
                                          daemon (http.listen), while the other tables keep streaming;
                                          with --offline (or no daemon answering) the next run copies them
  cdcsync verify --config FILE [DB.TABLE ...] [--repair] [--json] [--rate ROWS/S] [--chunk-rows N]
                                          compare tables with MySQL while both keep changing (default: every
                                          table the pipeline mirrors); --repair copies the differing keys
                                          afresh through the running daemon
  cdcsync help                            show this help

Exit codes: 0 success, 1 failure, 2 bad usage or configuration.
`

// exitError carries the process exit code of a failure.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cdcsync:", err)
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitError{2, errors.New("no subcommand given")}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "run":
		return withConfig(cmd, rest, 0, withPassword(func(cfg *config.Config, _ *flag.FlagSet) error { return runDaemon(ctx, cfg, stderr) }))
	case "check":
		return withConfig(cmd, rest, 0, withPassword(func(cfg *config.Config, _ *flag.FlagSet) error { return runCheck(ctx, cfg, stdout, stderr) }))
	case "tables":
		return withConfig(cmd, rest, 0, func(cfg *config.Config, _ *flag.FlagSet) error { return runTables(ctx, cfg, stdout, stderr) })
	case "cat":
		var limit int64
		return withConfig(cmd, rest, 1, func(cfg *config.Config, fs *flag.FlagSet) error {
			return runCat(ctx, cfg, fs.Arg(0), limit, stdout, stderr)
		}, func(fs *flag.FlagSet) { fs.Int64Var(&limit, "limit", 20, "rows to print; 0 prints all") })
	case "resync":
		var offline, all bool
		return withConfig(cmd, rest, anyArgs, func(cfg *config.Config, fs *flag.FlagSet) error {
			return runResync(ctx, cfg, fs.Args(), all, offline, stdout, stderr)
		}, func(fs *flag.FlagSet) {
			fs.BoolVar(&offline, "offline", false, "only mark the tables; the next `cdcsync run` copies them")
			fs.BoolVar(&all, "all", false, "every table the pipeline mirrors")
		})
	case "verify":
		var f verifyFlags
		return withConfig(cmd, rest, anyArgs, withPassword(func(cfg *config.Config, fs *flag.FlagSet) error {
			return runVerify(ctx, cfg, fs.Args(), f, stdout, stderr)
		}), f.register)
	case "compact":
		var maxBytes config.ByteSize
		return withConfig(cmd, rest, 1, func(cfg *config.Config, fs *flag.FlagSet) error {
			return runCompact(ctx, cfg, fs.Arg(0), maxBytes.Int64(), stdout, stderr)
		}, func(fs *flag.FlagSet) {
			fs.TextVar(&maxBytes, "max-bytes", config.ByteSize(0), "data to rewrite at most, e.g. 1GiB; 0 rewrites all")
		})
	}
	fmt.Fprint(stderr, usage)
	return exitError{2, fmt.Errorf("unknown subcommand %q", cmd)}
}

// withPassword makes fn, a command that connects to MySQL, refuse a
// configuration whose source.password names an unset environment variable
// (exit 2, like every other unset variable when the file loads); the
// commands that only read the lake need no password.
func withPassword(fn func(*config.Config, *flag.FlagSet) error) func(*config.Config, *flag.FlagSet) error {
	return func(cfg *config.Config, fs *flag.FlagSet) error {
		if err := cfg.Source.PasswordUnset(); err != nil {
			return exitError{2, err}
		}
		return fn(cfg, fs)
	}
}

// anyArgs lets withConfig take any number of positional arguments.
const anyArgs = -1

// withConfig parses the subcommand's flags (which may follow its positional
// arguments), loads the configuration and calls fn.
func withConfig(name string, args []string, nargs int, fn func(*config.Config, *flag.FlagSet) error, extra ...func(*flag.FlagSet)) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("config", "", "configuration file (YAML)")
	for _, e := range extra {
		e(fs)
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return exitError{2, fmt.Errorf("%s: %w; see `cdcsync help`", name, err)}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if nargs != anyArgs && len(pos) != nargs {
		return exitError{2, fmt.Errorf("%s takes %d argument(s), got %d (%s); see `cdcsync help`", name, nargs, len(pos), strings.Join(pos, " "))}
	}
	if *path == "" {
		return exitError{2, fmt.Errorf("%s needs --config FILE; cdcsync.example.yaml is a commented example", name)}
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return exitError{2, err}
	}
	_ = fs.Parse(pos) // leave the positional arguments where fn finds them
	return fn(cfg, fs)
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
