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

// exitError carries the process exit code of a failure.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// usageError is a bad command line: exit 2, pointing at the help of cmd.
func usageError(cmd, format string, args ...any) error {
	help := "cdcsync help"
	if cmd != "" {
		help = "cdcsync " + cmd + " --help"
	}
	return exitError{2, fmt.Errorf(format+"; see `%s`", append(args, help)...)}
}

// command is a subcommand: its help and how it runs.
type command struct {
	name    string
	args    string // the positional arguments, for the usage line
	summary string // one line, for `cdcsync help`
	detail  string // what `cdcsync NAME --help` adds to the summary
	nargs   int    // positional arguments it takes, or anyArgs
	// noConfig marks the commands that read no configuration file.
	noConfig bool
	// password marks the commands that connect to MySQL: they refuse a
	// source.password whose environment variable is unset.
	password bool
	// setup defines the command's own flags on fs and returns the function
	// that runs it once they are parsed (cfg is nil for noConfig commands).
	setup func(fs *flag.FlagSet) func(ctx context.Context, cfg *config.Config, args []string, stdout, stderr io.Writer) error
}

// anyArgs lets a command take any number of positional arguments.
const anyArgs = -1

// commands lists the subcommands in the order `cdcsync help` shows them
// (set by init: the completion command reads the list).
var commands []*command

func init() {
	commands = []*command{
		{
			name: "run", summary: "run the daemon: stream every change, copying existing rows meanwhile",
			detail: "Streams the binlog into Iceberg and copies the tables that are not copied yet, while serving /metrics, " +
				"/healthz and /readyz on http.listen and resync requests on admin.listen. One daemon holds a pipeline: another one " +
				"started with the same configuration waits as a standby and takes over when the holder stops, dies or stops " +
				"renewing its lease (lease.ttl); with lease.wait: false it exits instead. Stops cleanly on SIGTERM or SIGINT " +
				"(the open epoch is committed and the lease released).",
			password: true,
			setup: func(fs *flag.FlagSet) func(context.Context, *config.Config, []string, io.Writer, io.Writer) error {
				return func(ctx context.Context, cfg *config.Config, _ []string, _, stderr io.Writer) error {
					return runDaemon(ctx, cfg, stderr)
				}
			},
		},
		{
			name: "check", summary: "check the source server, the tables, the catalog and the warehouse",
			detail: "Checks the server's settings and privileges, the selected tables, the catalog, the warehouse and that " +
				"the server still has the binlog after every table's committed position, and prints every problem with how to fix it.",
			password: true,
			setup: func(fs *flag.FlagSet) func(context.Context, *config.Config, []string, io.Writer, io.Writer) error {
				return func(ctx context.Context, cfg *config.Config, _ []string, stdout, stderr io.Writer) error {
					return runCheck(ctx, cfg, stdout, stderr)
				}
			},
		},
		{
			name: "status", summary: "show who holds the pipeline, what the running daemon reports and each table's state",
			detail: "Prints the lease holder (host, pid, since, token), what the daemon at http.listen reports (ready or why not, " +
				"source connected, lag, restarts), the checkpoint, and one line per table: its state (streaming, copying with " +
				"progress, stopped with the reason and how to resume), epoch, last commit and position. Reads the catalog, the " +
				"warehouse and the daemon's endpoint. Needs no MySQL password.",
			setup: func(fs *flag.FlagSet) func(context.Context, *config.Config, []string, io.Writer, io.Writer) error {
				asJSON := fs.Bool("json", false, "print JSON")
				return func(ctx context.Context, cfg *config.Config, _ []string, stdout, stderr io.Writer) error {
					return runStatus(ctx, cfg, *asJSON, stdout, stderr)
				}
			},
		},
		{
			name: "cut", summary: "print one transactionally consistent snapshot of every table, and how to read it",
			detail: "Prints, for every table of the pipeline, the snapshot that holds the same transactions as the others " +
				"(a transaction that changed two tables is in both snapshots or in neither): by default the cut of the newest " +
				"checkpoint, of an older epoch with --epoch, or the newest one whose transactions all committed in MySQL by a time " +
				"with --as-of. --format trino|spark|duckdb prints ready-to-run SQL for that " +
				"engine; --tag NAME also tags those snapshots in every table (kept by snapshot expiry; for --tag-keep, if " +
				"set). Tables whose copy runs, or that joined the pipeline later, are left out with the reason on stderr. " +
				"Needs no MySQL password.",
			setup: func(fs *flag.FlagSet) func(context.Context, *config.Config, []string, io.Writer, io.Writer) error {
				var o cutOptions
				fs.Int64Var(&o.epoch, "epoch", 0, "the cut of epoch `N` (at most the checkpoint's); 0: the newest checkpoint's")
				fs.StringVar(&o.asOf, "as-of", "", "the newest cut whose transactions all committed in MySQL by `TIME` (RFC 3339, e.g. 2026-12-03T17:00:00Z)")
				format := newChoice("text", "text", "json", "trino", "spark", "duckdb")
				fs.Var(format, "format", "output: "+format.list())
				fs.StringVar(&o.catalog, "catalog", "iceberg", "the engine's `NAME` for the catalog, in the SQL printed")
				fs.StringVar(&o.tag, "tag", "", "also tag the cut's snapshot in every table as `NAME`")
				fs.DurationVar(&o.keep, "tag-keep", 0, "keep the tag this long (e.g. 168h), then snapshot expiry drops it; 0 keeps it")
				return func(ctx context.Context, cfg *config.Config, _ []string, stdout, stderr io.Writer) error {
					o.format = format.value
					return runCut(ctx, cfg, o, stdout, stderr)
				}
			},
		},
		{
			name: "tables", summary: "list the Iceberg tables and their committed binlog positions",
			detail: "Lists the catalog's tables with their state (streaming, copying, stopped), last epoch, commit time, " +
				"file counts and committed binlog position, and why each stopped table stopped. Needs no MySQL password.",
			setup: func(fs *flag.FlagSet) func(context.Context, *config.Config, []string, io.Writer, io.Writer) error {
				return func(ctx context.Context, cfg *config.Config, _ []string, stdout, stderr io.Writer) error {
					return runTables(ctx, cfg, stdout, stderr)
				}
			},
		},
		{
			name: "cat", args: "DB.TABLE", nargs: 1,
			summary: "print the rows of a mirrored table, read through Iceberg, by primary key",
			detail: "Prints the table's rows in primary-key order (strings by their bytes), read through Iceberg with every " +
				"delete applied; with --limit it scans the whole table and keeps the first rows. DB.TABLE is the MySQL table " +
				"or the Iceberg namespace.table. Needs no MySQL password.\n\n" +
				"Formats (--format):\n" +
				"  text  a header, then one row a line in aligned columns; a backslash,\n" +
				"        newline, carriage return and tab in a value are written \\\\, \\n,\n" +
				"        \\r and \\t; NULL for null\n" +
				"  json  one object a line, columns in table order, exact values: integers,\n" +
				"        decimals and floats as numbers (NaN and infinities as strings),\n" +
				"        binary as base64, dates and times as strings, null\n" +
				"  csv   RFC 4180 with a header line; binary as 0x-prefixed hex, null as an\n" +
				"        empty field (like an empty string: use json to tell them apart)",
			setup: func(fs *flag.FlagSet) func(context.Context, *config.Config, []string, io.Writer, io.Writer) error {
				limit := fs.Int64("limit", 20, "print the first `N` rows by primary key; 0 prints all")
				format := newChoice("text", "text", "json", "csv")
				fs.Var(format, "format", "output format: "+format.list())
				return func(ctx context.Context, cfg *config.Config, args []string, stdout, stderr io.Writer) error {
					return runCat(ctx, cfg, args[0], *limit, format.value, stdout, stderr)
				}
			},
		},
		{
			name: "compact", args: "DB.TABLE", nargs: 1,
			summary: "compact a table now: rewrite the data files that carry deletes or are small",
			detail:  "Rewrites the data files that carry deletes or are small, drops delete files that no longer apply and merges manifests.",
			setup: func(fs *flag.FlagSet) func(context.Context, *config.Config, []string, io.Writer, io.Writer) error {
				var maxBytes config.ByteSize
				fs.TextVar(&maxBytes, "max-bytes", config.ByteSize(0), "rewrite at most `SIZE` of data, e.g. 1GiB; 0 rewrites all")
				return func(ctx context.Context, cfg *config.Config, args []string, stdout, stderr io.Writer) error {
					return runCompact(ctx, cfg, args[0], maxBytes.Int64(), stdout, stderr)
				}
			},
		},
		{
			name: "resync", args: "(DB.TABLE ... | --all)", nargs: anyArgs,
			summary: "copy tables afresh from MySQL, online, while the other tables keep streaming",
			detail: "Asks the running daemon (admin.listen; on the same machine it is found by itself) to copy the tables afresh while the other tables keep streaming; " +
				"with --offline, or when no daemon answers, marks them so that the next `cdcsync run` copies them. " +
				"This is also how a table cdcsync stopped is mirrored again, and the way out when the server purged the binlog a table needs.",
			setup: func(fs *flag.FlagSet) func(context.Context, *config.Config, []string, io.Writer, io.Writer) error {
				offline := fs.Bool("offline", false, "only mark the tables; the next `cdcsync run` copies them")
				all := fs.Bool("all", false, "every table the pipeline mirrors")
				return func(ctx context.Context, cfg *config.Config, args []string, stdout, stderr io.Writer) error {
					return runResync(ctx, cfg, args, *all, *offline, stdout, stderr)
				}
			},
		},
		{
			name: "verify", args: "[DB.TABLE ...]", nargs: anyArgs,
			summary: "compare tables with MySQL while both keep changing; --repair copies the keys that differ afresh",
			detail: "Compares the named tables (default: every table the pipeline mirrors) with MySQL without locks and without " +
				"stopping the daemon: checksums of primary-key chunks computed by MySQL, then the rows of the chunks that differ, " +
				"then each differing key until the lake covers a read that saw it, so that changes in flight are never reported. " +
				"Prints the differing keys with both rows; exits 0 only when everything matches. With --repair, the running " +
				"daemon (admin.listen) copies the differing keys afresh and they are compared again. Cost and options: docs/verify.md.",
			password: true,
			setup: func(fs *flag.FlagSet) func(context.Context, *config.Config, []string, io.Writer, io.Writer) error {
				var f verifyFlags
				f.register(fs)
				return func(ctx context.Context, cfg *config.Config, args []string, stdout, stderr io.Writer) error {
					return runVerify(ctx, cfg, args, f, stdout, stderr)
				}
			},
		},
		{
			name: "version", summary: "print the version, commit, build date and Go version",
			noConfig: true,
			setup: func(fs *flag.FlagSet) func(context.Context, *config.Config, []string, io.Writer, io.Writer) error {
				return func(_ context.Context, _ *config.Config, _ []string, stdout, _ io.Writer) error {
					_, err := fmt.Fprint(stdout, readVersion().String())
					return err
				}
			},
		},
		{
			name: "completion", args: "bash|zsh|fish", nargs: 1,
			summary: "print a shell completion script",
			detail: "Prints a completion script for the shell: subcommands, their flags, the values of --format and files for --config.\n\n" +
				"  bash: source <(cdcsync completion bash)      (or save it in /etc/bash_completion.d/cdcsync)\n" +
				"  zsh:  cdcsync completion zsh > \"${fpath[1]}/_cdcsync\"\n" +
				"  fish: cdcsync completion fish > ~/.config/fish/completions/cdcsync.fish",
			noConfig: true,
			setup: func(fs *flag.FlagSet) func(context.Context, *config.Config, []string, io.Writer, io.Writer) error {
				return func(_ context.Context, _ *config.Config, args []string, stdout, _ io.Writer) error {
					return writeCompletion(stdout, args[0])
				}
			},
		},
	}
}

func lookupCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// usage is what `cdcsync help` prints.
func usage() string {
	var b strings.Builder
	b.WriteString("cdcsync keeps Apache Iceberg tables in step with MySQL/MariaDB tables by reading the binlog.\n\nUsage:\n")
	for _, c := range commands {
		line := "  cdcsync " + c.name
		if !c.noConfig {
			line += " --config FILE"
		}
		if c.args != "" {
			line += " " + c.args
		}
		if len(line) > 46 {
			fmt.Fprintf(&b, "%s\n  %-44s  %s\n", line, "", c.summary)
		} else {
			fmt.Fprintf(&b, "%-46s  %s\n", line, c.summary)
		}
	}
	fmt.Fprintf(&b, "  %-44s  %s\n", "cdcsync help [COMMAND]", "show this help, or a command's (also cdcsync COMMAND --help)")
	b.WriteString("\n`cdcsync COMMAND --help` lists a command's flags. Exit codes: 0 success, 1 failure, 2 bad usage or configuration.\n")
	return b.String()
}

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
		fmt.Fprint(stderr, usage())
		return exitError{2, errors.New("no subcommand given")}
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			c := lookupCommand(rest[0])
			if c == nil {
				return usageError("", "unknown subcommand %q", rest[0])
			}
			c.printHelp(stdout)
			return nil
		}
		fmt.Fprint(stdout, usage())
		return nil
	case "-version", "--version":
		name = "version"
	}
	c := lookupCommand(name)
	if c == nil {
		fmt.Fprint(stderr, usage())
		return usageError("", "unknown subcommand %q", name)
	}
	return c.run(ctx, rest, stdout, stderr)
}

// flagSet is the command's flags, --config included unless it reads no
// configuration; runFn runs the command once they are parsed.
func (c *command) flagSet() (fs *flag.FlagSet, cfgPath *string, runFn func(context.Context, *config.Config, []string, io.Writer, io.Writer) error) {
	fs = flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if !c.noConfig {
		cfgPath = fs.String("config", "", "the configuration `FILE` (YAML); cdcsync.example.yaml is a commented example")
	}
	return fs, cfgPath, c.setup(fs)
}

// printHelp writes the command's usage line, description and flags.
func (c *command) printHelp(w io.Writer) {
	fs, _, _ := c.flagSet()
	line := "cdcsync " + c.name
	if !c.noConfig {
		line += " --config FILE"
	}
	if c.args != "" {
		line += " " + c.args
	}
	fmt.Fprintf(w, "Usage: %s [flags]\n\n%s\n", line, wrap(capitalize(c.summary)+".", 78))
	if c.detail != "" {
		fmt.Fprintf(w, "\n%s\n", wrap(c.detail, 78))
	}
	fmt.Fprintln(w, "\nFlags:")
	fs.VisitAll(func(f *flag.Flag) {
		arg, help := flag.UnquoteUsage(f)
		if ch, ok := f.Value.(*choice); ok {
			arg = strings.Join(ch.choices, "|")
		}
		if arg != "" {
			arg = " " + arg
		}
		switch f.DefValue {
		case "", "0", "0B", "false":
		default:
			help += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "  --%s%s\n%s\n", f.Name, arg, indent(wrap(help, 72), "        "))
	})
	fmt.Fprintf(w, "  -h, --help\n        show this help\n")
}

// wrap breaks the lines of s at spaces so that they fit in width columns;
// lines that start with a space are left as they are.
func wrap(s string, width int) string {
	var b strings.Builder
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		if strings.HasPrefix(line, " ") {
			b.WriteString(line)
			continue
		}
		n := 0
		for j, word := range strings.Fields(line) {
			if j > 0 && n+1+len(word) > width {
				b.WriteByte('\n')
				n = 0
			} else if j > 0 {
				b.WriteByte(' ')
				n++
			}
			b.WriteString(word)
			n += len(word)
		}
	}
	return b.String()
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// run parses the command's flags (which may follow its positional
// arguments), loads the configuration and runs the command.
func (c *command) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, path, fn := c.flagSet()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.printHelp(stdout)
				return nil
			}
			return usageError(c.name, "%s: %v", c.name, err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if c.nargs != anyArgs && len(pos) != c.nargs {
		return usageError(c.name, "%s takes %d argument(s), got %d (%s)", c.name, c.nargs, len(pos), strings.Join(pos, " "))
	}
	if c.noConfig {
		return fn(ctx, nil, pos, stdout, stderr)
	}
	if *path == "" {
		return exitError{2, fmt.Errorf("%s needs --config FILE; cdcsync.example.yaml is a commented example", c.name)}
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return exitError{2, err}
	}
	if c.password {
		if err := cfg.Source.PasswordUnset(); err != nil {
			return exitError{2, err}
		}
	}
	return fn(ctx, cfg, pos, stdout, stderr)
}

// choice is a flag whose value is one of a fixed list.
type choice struct {
	value   string
	choices []string
}

func newChoice(def string, choices ...string) *choice { return &choice{value: def, choices: choices} }

func (c *choice) String() string {
	if c == nil {
		return ""
	}
	return c.value
}

func (c *choice) Set(s string) error {
	for _, v := range c.choices {
		if s == v {
			c.value = s
			return nil
		}
	}
	return fmt.Errorf("%q is not one of %s", s, c.list())
}

func (c *choice) list() string { return strings.Join(c.choices, ", ") }

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
