package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// systemSchemas are never replicated, whatever the patterns say.
var systemSchemas = []string{"mysql", "information_schema", "performance_schema", "sys"}

func isSystemSchema(db string) bool {
	for _, s := range systemSchemas {
		if strings.EqualFold(db, s) {
			return true
		}
	}
	return false
}

// ResolvePassword returns the MySQL password: the content of password_file
// (trailing newlines trimmed) when it is set, else password.
// PasswordUnset returns the error of an unset environment variable in
// source.password (nil when there is none): the commands that connect to
// MySQL refuse the file with it, the others need no password.
func (s *Source) PasswordUnset() error { return s.passwordErr }

func (s *Source) ResolvePassword() (string, error) {
	if s.passwordErr != nil {
		return "", s.passwordErr
	}
	if s.PasswordFile == "" {
		return s.Password.Value(), nil
	}
	if s.Password != "" {
		return "", errors.New("source.password and source.password_file are both set: keep only one of them")
	}
	b, err := os.ReadFile(s.PasswordFile)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("source.password_file %q cannot be read (%w): check the path and that the user running cdcsync may read the file", s.PasswordFile, err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("source.password_file %q is empty: write the password into it, or remove password_file if the user has no password", s.PasswordFile)
	}
	return pw, nil
}

// Rule returns the table rule whose match equals db.table, or nil.
func (c *Config) Rule(db, table string) *TableRule {
	want := db + "." + table
	for i := range c.Tables {
		if c.Tables[i].Match == want {
			return &c.Tables[i]
		}
	}
	return nil
}

// Selects reports whether the table db.table is replicated (Source.Selects).
func (c *Config) Selects(db, table string) bool { return c.Source.Selects(db, table) }

// Selects reports whether the table db.table is replicated: it matches some
// include pattern and neither a "!"-prefixed include pattern nor an exclude
// pattern. The system schemas (mysql, information_schema,
// performance_schema, sys) are never selected. Names are compared
// case-sensitively, as MySQL does on Linux.
func (s *Source) Selects(db, table string) bool {
	if isSystemSchema(db) {
		return false
	}
	included := false
	for _, p := range s.Include {
		if neg, ok := strings.CutPrefix(p, "!"); ok {
			if matchPattern(neg, db, table) {
				return false
			}
			continue
		}
		if matchPattern(p, db, table) {
			included = true
		}
	}
	if !included {
		return false
	}
	if !s.keepShadows {
		if _, _, shadow := ShadowOf(table); shadow {
			return false // a shadow table of gh-ost or pt-online-schema-change (ddl.online_schema_change)
		}
	}
	for _, p := range s.Exclude {
		if matchPattern(p, db, table) {
			return false
		}
	}
	return true
}

// matchPattern matches "dbpattern.tablepattern" with path.Match semantics
// for each part. A malformed pattern matches nothing (Validate reports it).
func matchPattern(pattern, db, table string) bool {
	dp, tp, ok := strings.Cut(strings.TrimSpace(pattern), ".")
	if !ok {
		return false
	}
	if m, err := path.Match(dp, db); err != nil || !m {
		return false
	}
	m, err := path.Match(tp, table)
	return err == nil && m
}

// checkPattern explains what is wrong with a "db.table" pattern, or "".
func checkPattern(p string) string {
	dp, tp, ok := strings.Cut(p, ".")
	if !ok || dp == "" || tp == "" {
		example := "shop.*"
		if !ok && p != "" && !strings.ContainsAny(p, "*?[") {
			example = p + ".*"
		}
		return fmt.Sprintf(`is not a "db.table" pattern: write the database and the table separated by a dot, with * and ? as wildcards, e.g. %q`, example)
	}
	if _, err := path.Match(dp, ""); err != nil {
		return `is not a valid pattern (an unclosed "[" or a trailing "\"): use * and ? as wildcards, [abc] for a set of characters`
	}
	if _, err := path.Match(tp, ""); err != nil {
		return `is not a valid pattern (an unclosed "[" or a trailing "\"): use * and ? as wildcards, [abc] for a set of characters`
	}
	return ""
}

// splitExact splits an exact "db.table" (no wildcards) at its first dot.
func splitExact(match string) (db, table string, ok bool) {
	if strings.ContainsAny(match, "*?[]\\ \t") {
		return "", "", false
	}
	db, table, ok = strings.Cut(match, ".")
	if !ok || db == "" || table == "" {
		return "", "", false
	}
	return db, table, true
}

// PartitionField is one parsed entry of a table rule's partition list.
type PartitionField struct {
	Column    string // the MySQL column the partition is derived from
	Transform string // identity | bucket | truncate | year | month | day | hour
	Param     int    // the bucket count N or the truncate width W; 0 otherwise
}

// Partition transforms.
const (
	TransformIdentity = "identity"
	TransformBucket   = "bucket"
	TransformTruncate = "truncate"
	TransformYear     = "year"
	TransformMonth    = "month"
	TransformDay      = "day"
	TransformHour     = "hour"
)

func (f PartitionField) String() string {
	switch f.Transform {
	case TransformIdentity:
		return f.Column
	case TransformBucket, TransformTruncate:
		return fmt.Sprintf("%s(%d, %s)", f.Transform, f.Param, f.Column)
	default:
		return fmt.Sprintf("%s(%s)", f.Transform, f.Column)
	}
}

func isTimeTransform(t string) bool {
	return t == TransformYear || t == TransformMonth || t == TransformDay || t == TransformHour
}

// PartitionFields parses the rule's partition entries. All bad entries are
// reported, joined.
func (r *TableRule) PartitionFields() ([]PartitionField, error) {
	var fields []PartitionField
	var errs []error
	for i, p := range r.Partition {
		f, msg := parsePartition(p)
		if msg != "" {
			errs = append(errs, fmt.Errorf("partition[%d] %q %s", i, p, msg))
			continue
		}
		fields = append(fields, f)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return fields, nil
}

var transformAliases = map[string]string{
	"years": TransformYear, "months": TransformMonth, "days": TransformDay, "hours": TransformHour,
}

var transformNames = []string{TransformIdentity, TransformBucket, TransformTruncate, TransformYear, TransformMonth, TransformDay, TransformHour}

// parsePartition parses one entry; msg explains what is wrong, or is "".
func parsePartition(entry string) (f PartitionField, msg string) {
	t := strings.TrimSpace(entry)
	if t == "" {
		return f, "is empty: write a column name or a transform such as day(created_at)"
	}
	open := strings.IndexByte(t, '(')
	if open < 0 {
		col, ok := column(t)
		if !ok {
			return f, `is not a column name or a transform: write "col", "bucket(16, col)", "day(col)", ...`
		}
		return PartitionField{Column: col, Transform: TransformIdentity}, ""
	}
	if !strings.HasSuffix(t, ")") {
		return f, `has no closing ")": write it like bucket(16, id) or day(created_at)`
	}
	fn := strings.ToLower(strings.TrimSpace(t[:open]))
	if a, ok := transformAliases[fn]; ok {
		fn = a
	}
	args := strings.Split(t[open+1:len(t)-1], ",")
	for i := range args {
		args[i] = strings.TrimSpace(args[i])
	}
	switch fn {
	case TransformIdentity, TransformYear, TransformMonth, TransformDay, TransformHour:
		col, ok := "", len(args) == 1
		if ok {
			col, ok = column(args[0])
		}
		if !ok {
			return f, fmt.Sprintf("is not valid: %s takes one column, e.g. %s(created_at)", fn, fn)
		}
		return PartitionField{Column: col, Transform: fn}, ""
	case TransformBucket, TransformTruncate:
		what, ex := "a bucket count", "bucket(16, id)"
		if fn == TransformTruncate {
			what, ex = "a width", "truncate(10, name)"
		}
		if len(args) != 2 {
			return f, fmt.Sprintf("is not valid: %s takes %s and a column, e.g. %s", fn, what, ex)
		}
		n, err := strconv.ParseInt(args[0], 10, 32)
		if err != nil {
			if _, err2 := strconv.ParseInt(args[1], 10, 32); err2 == nil {
				return f, fmt.Sprintf("is not valid: write %s first, then the column, e.g. %s", what, ex)
			}
			return f, fmt.Sprintf("is not valid: %q is not %s; write e.g. %s", args[0], what, ex)
		}
		if n <= 0 {
			return f, fmt.Sprintf("is not valid: %s must be positive, e.g. %s", what, ex)
		}
		col, ok := column(args[1])
		if !ok {
			return f, fmt.Sprintf("is not valid: %q is not a column name; write e.g. %s", args[1], ex)
		}
		return PartitionField{Column: col, Transform: fn, Param: int(n)}, ""
	default:
		hint := ""
		if s := nearest(fn, transformNames); s != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", s)
		}
		return f, fmt.Sprintf("uses the unknown transform %q%s: use identity, bucket, truncate, year, month, day or hour", fn, hint)
	}
}

// column validates a column name, allowing MySQL backquotes.
func column(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`' {
		s = s[1 : len(s)-1]
		return s, s != "" && !strings.Contains(s, "`")
	}
	if s == "" || strings.ContainsAny(s, "(),` \t") {
		return "", false
	}
	return s, true
}

const locationHelp = "use a local directory, file:///abs/path, s3://bucket/prefix or oss://bucket/prefix"

// URL returns the warehouse location as a URL iceberg-go accepts:
// "file:///abs/path" for a local path (made absolute against the working
// directory; Load has already resolved it against the config file's
// directory), "s3://bucket/prefix" for s3:// and for oss:// (Alibaba OSS is
// used through its S3-compatible API). Other schemes are rejected.
func (w *Warehouse) URL() (string, error) {
	loc := strings.TrimSpace(w.Location)
	if loc == "" {
		return "", errors.New("warehouse.location is empty: " + locationHelp)
	}
	if !hasScheme(loc) {
		abs, err := filepath.Abs(loc)
		if err != nil {
			return "", fmt.Errorf("warehouse.location %q cannot be made absolute: %v", loc, err)
		}
		return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), nil
	}
	u, err := url.Parse(loc)
	if err != nil {
		return "", fmt.Errorf("warehouse.location %q is not a valid URL: %s", loc, locationHelp)
	}
	switch scheme := strings.ToLower(u.Scheme); scheme {
	case "file":
		if (u.Host != "" && !strings.EqualFold(u.Host, "localhost")) || !strings.HasPrefix(u.Path, "/") {
			return "", fmt.Errorf("warehouse.location %q is not an absolute file URL: write file:///abs/path (three slashes), or a plain path such as ./warehouse", loc)
		}
		return (&url.URL{Scheme: "file", Path: path.Clean(u.Path)}).String(), nil
	case "s3", "oss":
		if u.Host == "" {
			return "", fmt.Errorf("warehouse.location %q names no bucket: write %s://bucket/prefix", loc, scheme)
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return "", fmt.Errorf("warehouse.location %q must be just %s://bucket/prefix: put credentials and options under warehouse.s3", loc, scheme)
		}
		out := "s3://" + u.Host
		if prefix := strings.Trim(u.Path, "/"); prefix != "" {
			out += "/" + prefix
		}
		return out, nil
	case "s3a", "s3n":
		return "", fmt.Errorf("warehouse.location %q uses the scheme %q: write s3:// instead", loc, scheme)
	default:
		return "", fmt.Errorf("warehouse.location %q uses the scheme %q, which cdcsync does not support: %s (OSS through its S3 API)", loc, scheme, locationHelp)
	}
}

// scheme returns "file", "s3" or "oss" for a location URL() accepts.
func (w *Warehouse) scheme() string {
	loc := strings.TrimSpace(w.Location)
	if !hasScheme(loc) {
		return "file"
	}
	if u, err := url.Parse(loc); err == nil {
		return strings.ToLower(u.Scheme)
	}
	return ""
}
