package main

import (
	"bufio"
	"container/heap"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
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
	lk, err := lake.Open(ctx, lake.OptionsFrom(cfg), newLogger(cfg, stderr))
	if err != nil {
		return err
	}
	defer lk.Close()
	ids, err := lk.ListTables(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TABLE\tSOURCE\tSTATE\tEPOCH\tCOMMITTED AT\tDELETES\tDATA FILES\tDELETE FILES\tPOSITION")
	var stops []string // why each stopped table stopped, printed below the table
	for _, id := range ids {
		if len(id) == 2 && id[0] == lake.LeaseNamespace && strings.HasSuffix(id[1], "_lease") {
			continue // a pipeline's lease (cdcsync status shows who holds it)
		}
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
		mode := lake.DeletesMode(t)
		if mode == lake.DeletesDV {
			mode += fmt.Sprintf(" (v%d)", t.Metadata().Version())
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", strings.Join(id, "."), orDash(t.Properties()["cdcsync.source"]), state, epoch, when, mode, data, dels, pos)
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

// runCat prints a table's rows in primary-key order, read through an
// iceberg-go scan that applies every delete file. name is the MySQL
// "db.table" or the Iceberg "namespace.table". With limit > 0 it prints
// the first limit rows by key, holding no more than those while it scans.
func runCat(ctx context.Context, cfg *config.Config, name string, limit int64, format string, stdout, stderr io.Writer) error {
	db, tbl, ok := strings.Cut(name, ".")
	if !ok || db == "" || tbl == "" {
		return exitError{2, fmt.Errorf("cat needs a table as DB.TABLE, got %q", name)}
	}
	lk, err := lake.Open(ctx, lake.OptionsFrom(cfg), newLogger(cfg, stderr))
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
	first := &firstRows{ts: ts, limit: int(limit)}
	if err := lake.EachRow(lk.Scope(ctx), t, ts, first.add); err != nil {
		return err
	}
	rows := first.sorted()
	if err := writeRows(stdout, format, ts, rows); err != nil {
		return err
	}
	if len(rows) < first.seen {
		fmt.Fprintf(stderr, "(%d of %d rows; --limit 0 prints all)\n", len(rows), first.seen)
	} else {
		fmt.Fprintf(stderr, "(%d rows)\n", len(rows))
	}
	return nil
}

// firstRows keeps the limit rows with the smallest primary keys of those
// added (all of them when limit <= 0), in a max-heap by key.
type firstRows struct {
	ts    *cdcsync.TableSchema
	limit int
	rows  []cdcsync.Row
	seen  int
}

func (f *firstRows) Len() int           { return len(f.rows) }
func (f *firstRows) Less(i, j int) bool { return cdcsync.CompareKeys(f.ts, f.rows[i], f.rows[j]) > 0 }
func (f *firstRows) Swap(i, j int)      { f.rows[i], f.rows[j] = f.rows[j], f.rows[i] }
func (f *firstRows) Push(x any)         { f.rows = append(f.rows, x.(cdcsync.Row)) }
func (f *firstRows) Pop() any {
	r := f.rows[len(f.rows)-1]
	f.rows = f.rows[:len(f.rows)-1]
	return r
}

func (f *firstRows) add(r cdcsync.Row) {
	f.seen++
	switch {
	case f.limit <= 0:
		f.rows = append(f.rows, r)
	case len(f.rows) < f.limit:
		heap.Push(f, r)
	case cdcsync.CompareKeys(f.ts, r, f.rows[0]) < 0:
		f.rows[0] = r
		heap.Fix(f, 0)
	}
}

// sorted returns the rows kept, in primary-key order.
func (f *firstRows) sorted() []cdcsync.Row {
	cdcsync.SortRows(f.ts, f.rows)
	return f.rows
}

// writeRows prints rows of ts in format: text, json or csv.
func writeRows(w io.Writer, format string, ts *cdcsync.TableSchema, rows []cdcsync.Row) error {
	switch format {
	case "json":
		bw := bufio.NewWriter(w)
		var line []byte
		for _, r := range rows {
			line = appendJSONRow(line[:0], ts, r)
			line = append(line, '\n')
			if _, err := bw.Write(line); err != nil {
				return err
			}
		}
		return bw.Flush()
	case "csv":
		cw := csv.NewWriter(w)
		rec := make([]string, len(ts.Columns))
		for i, c := range ts.Columns {
			rec[i] = c.Name
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
		for _, r := range rows {
			for i, c := range ts.Columns {
				rec[i] = ""
				if r[i] != nil {
					rec[i] = cdcsync.Format(c.Kind, r[i])
				}
			}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, c := range ts.Columns {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, escapeText(c.Name))
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		for i, c := range ts.Columns {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, escapeText(cdcsync.Format(c.Kind, r[i])))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// textEscaper keeps a value on one line and its own column: backslash,
// newline, carriage return and tab are written as \\, \n, \r and \t.
var textEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`, "\t", `\t`)

func escapeText(s string) string { return textEscaper.Replace(s) }

// appendJSONRow appends r as one JSON object, its columns in table order,
// with exact values: integers, decimals and floats as JSON numbers (a NaN
// or an infinity, which JSON has no number for, as the strings "NaN",
// "Infinity" and "-Infinity"), binary as base64, dates and times as
// cdcsync.Format writes them, NULL as null.
func appendJSONRow(b []byte, ts *cdcsync.TableSchema, r cdcsync.Row) []byte {
	b = append(b, '{')
	for i, c := range ts.Columns {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, c.Name)
		b = append(b, ':')
		b = appendJSONValue(b, c.Kind, r[i])
	}
	return append(b, '}')
}

func appendJSONValue(b []byte, k cdcsync.Kind, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case int32:
		if k == cdcsync.KindInt32 {
			return strconv.AppendInt(b, int64(x), 10)
		}
	case int64:
		if k == cdcsync.KindInt64 {
			return strconv.AppendInt(b, x, 10)
		}
	case bool:
		return strconv.AppendBool(b, x)
	case float32:
		return appendJSONFloat(b, float64(x), 32)
	case float64:
		return appendJSONFloat(b, x, 64)
	case string:
		if k == cdcsync.KindDecimal && json.Valid([]byte(x)) {
			return append(b, x...)
		}
		return appendJSONString(b, x)
	case []byte:
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, x)
		return append(b, '"')
	}
	return appendJSONString(b, cdcsync.Format(k, v))
}

func appendJSONFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}
