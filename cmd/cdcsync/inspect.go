package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/lake"
)

// runTables lists the catalog's tables with what cdcsync last committed.
func runTables(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer) error {
	lk, err := lake.Open(ctx, cfg, newLogger(cfg, stderr))
	if err != nil {
		return err
	}
	defer lk.Close()
	ids, err := lk.ListTables(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TABLE\tSOURCE\tSTATE\tEPOCH\tCOMMITTED AT\tDATA FILES\tDELETE FILES\tPOSITION")
	var stops []string // why each stopped table stopped, printed below the table
	for _, id := range ids {
		t, err := lk.LoadTable(ctx, id)
		if err != nil {
			return err
		}
		epoch, when, pos, data, dels, state := "-", "-", "-", "0", "0", "-"
		if s := t.CurrentSnapshot(); s != nil {
			when = time.UnixMilli(s.TimestampMs).UTC().Format(time.RFC3339)
			if s.Summary != nil {
				data = orDash(s.Summary.Properties["total-data-files"])
				dels = orDash(s.Summary.Properties["total-delete-files"])
			}
		}
		if c, err := lake.CommittedBy(t, cfg.Pipeline); err == nil && c.Found {
			epoch, pos, state = fmt.Sprint(c.Epoch), c.Pos.String(), "streaming"
			if c.Copy != nil {
				state = fmt.Sprintf("copying (%d rows)", c.Copy.Rows)
				if t.Metadata().SnapshotByName(lake.CopyBranch) != nil {
					state = fmt.Sprintf("copying again (%d rows; readers see the last contents)", c.Copy.Rows)
				}
			}
		}
		switch props := t.Properties(); {
		case props[lake.PropStopped] != "":
			state = "stopped"
			if info, ok := lake.StoppedIn(props); ok {
				stops = append(stops, fmt.Sprintf("%s stopped at %s: %s", strings.Join(id, "."), info.Position, info.Reason))
			}
		case props[lake.PropRecopy] != "":
			state = "marked for a new copy"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", strings.Join(id, "."), orDash(t.Properties()["cdcsync.source"]), state, epoch, when, data, dels, pos)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(stops) > 0 {
		fmt.Fprintf(stdout, "\n%s\n", strings.Join(stops, "\n"))
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// runCat prints a table's rows, read through an iceberg-go scan that applies
// every delete file. name is the MySQL "db.table" or the Iceberg
// "namespace.table".
func runCat(ctx context.Context, cfg *config.Config, name string, limit int64, stdout, stderr io.Writer) error {
	db, tbl, ok := strings.Cut(name, ".")
	if !ok || db == "" || tbl == "" {
		return exitError{2, fmt.Errorf("cat needs a table as DB.TABLE, got %q", name)}
	}
	lk, err := lake.Open(ctx, cfg, newLogger(cfg, stderr))
	if err != nil {
		return err
	}
	defer lk.Close()
	var t *table.Table
	if t, err = lk.LoadTable(ctx, lk.Identifier(db, tbl)); err != nil {
		if t, err = lk.LoadTable(ctx, table.Identifier{db, tbl}); err != nil {
			return err
		}
	}
	ts, err := lake.SchemaFromIceberg(t)
	if err != nil {
		return err
	}
	rows, err := lake.ReadRows(lk.Scope(ctx), t, ts, limit)
	if err != nil {
		return err
	}
	cdcsync.SortRows(ts, rows)
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for i, c := range ts.Columns {
		if i > 0 {
			fmt.Fprint(w, "\t")
		}
		fmt.Fprint(w, c.Name)
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		for i, c := range ts.Columns {
			if i > 0 {
				fmt.Fprint(w, "\t")
			}
			fmt.Fprint(w, cdcsync.Format(c.Kind, r[i]))
		}
		fmt.Fprintln(w)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "(%d rows)\n", len(rows))
	return nil
}
