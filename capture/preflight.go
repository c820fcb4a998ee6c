package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
)

// Finding is the result of one preflight check.
type Finding struct {
	// Check is a short id: "version", "tls", "binlog", "binlog_format",
	// "binlog_row_image", "binlog_row_metadata", "binlog_row_value_options",
	// "privileges", "server_id", "tables", "primary_key", "column_types",
	// "gtid".
	Check   string
	OK      bool
	Warning bool   // advice that does not block (e.g. GTIDs off); OK is false
	Message string // one sentence, with the fix when not OK
	// Table is set for a failure about one table (primary_key,
	// column_types): the daemon can go on without that table.
	Table cdcsync.TableID
}

func (f Finding) String() string {
	status := "ok"
	switch {
	case f.Warning:
		status = "warning"
	case !f.OK:
		status = "FAILED"
	}
	return fmt.Sprintf("[%s] %s: %s", status, f.Check, f.Message)
}

// Failed returns the findings that block replication: !OK && !Warning.
func Failed(fs []Finding) []Finding {
	var out []Finding
	for _, f := range fs {
		if !f.OK && !f.Warning {
			out = append(out, f)
		}
	}
	return out
}

// Minimum server versions.
const (
	MinMySQLVersion   = "5.7"
	MinMariaDBVersion = "10.6"
)

// ServerFlavor tells MariaDB (binlogpos.FlavorMariaDB) from MySQL and its
// forks (binlogpos.FlavorMySQL) by @@version and @@version_comment, and
// returns the numeric version ("10.11.19", "8.0.36").
func ServerFlavor(ctx context.Context, conn *client.Conn) (flavor string, version string, err error) {
	r, err := connQuery(ctx, conn, "SELECT @@version, @@version_comment")
	if err != nil {
		return "", "", fmt.Errorf("read the server version: %w", err)
	}
	if len(r.Values) == 0 {
		return "", "", errors.New("read the server version: SELECT @@version returned no row")
	}
	v, comment := connText(r.Values[0][0]), connText(r.Values[0][1])
	flavor = binlogpos.FlavorMySQL
	if strings.Contains(strings.ToLower(v+" "+comment), "mariadb") {
		flavor = binlogpos.FlavorMariaDB
	}
	return flavor, pfNumericVersion(v), nil
}

// pfNumericVersion extracts "10.11.19" from "10.11.19-MariaDB-0+deb12u1-log"
// (and from the "5.5.5-10.11.19-MariaDB" handshake form).
func pfNumericVersion(v string) string {
	v = strings.TrimSpace(v)
	if rest, ok := strings.CutPrefix(v, "5.5.5-"); ok && rest != "" && rest[0] >= '0' && rest[0] <= '9' {
		v = rest
	}
	end := 0
	for end < len(v) && (v[end] == '.' || (v[end] >= '0' && v[end] <= '9')) {
		end++
	}
	return strings.Trim(v[:end], ".")
}

// pfVersionLess compares dotted numeric versions.
func pfVersionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// pfVars are the global variables the checks read.
var pfVars = []string{"log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata",
	"binlog_row_value_options", "server_id", "gtid_mode", "gtid_strict_mode"}

// Preflight runs every check against the connected server and the tables
// src selects, and returns all findings (OK ones too, for `cdcsync check` to
// print) and the schemas of the selected tables, unsupported columns
// included (Kind == KindInvalid). err is only for failures to run the checks
// at all (a lost connection); use Failed to see whether replication can
// start.
func Preflight(ctx context.Context, conn *client.Conn, src *config.Source) ([]Finding, []*cdcsync.TableSchema, error) {
	p := &pfRun{ctx: ctx, conn: conn, src: src, addr: net.JoinHostPort(src.Host, strconv.Itoa(src.Port))}
	var err error
	p.flavor, p.version, err = ServerFlavor(ctx, conn)
	if err != nil {
		return nil, nil, err
	}
	if p.vars, err = pfGlobalVars(ctx, conn); err != nil {
		return nil, nil, err
	}
	p.checkVersion()
	p.checkTLS()
	p.checkBinlog()
	p.checkServerID()
	p.checkGTID()
	if err := p.checkPrivileges(); err != nil {
		return nil, nil, err
	}
	schemas, err := p.checkTables()
	if err != nil {
		return nil, nil, err
	}
	return p.out, schemas, nil
}

type pfRun struct {
	ctx     context.Context
	conn    *client.Conn
	src     *config.Source
	addr    string
	flavor  string
	version string
	vars    map[string]string // lower-case name -> value; absent when the server has no such variable
	out     []Finding

	selected []cdcsync.TableID // filled by checkTables, before the SELECT privilege check

	grants     []pfGrant // parsed SHOW GRANTS lines
	grantee    string    // 'user'@'host'
	hasRoles   bool      // SHOW GRANTS lists roles, whose privileges may be missing from grants
	grantsRead bool
}

func (p *pfRun) ok(check, format string, args ...any) {
	p.out = append(p.out, Finding{Check: check, OK: true, Message: fmt.Sprintf(format, args...)})
}

func (p *pfRun) fail(check, format string, args ...any) {
	p.out = append(p.out, Finding{Check: check, Message: fmt.Sprintf(format, args...)})
}

func (p *pfRun) warn(check, format string, args ...any) {
	p.out = append(p.out, Finding{Check: check, Warning: true, Message: fmt.Sprintf(format, args...)})
}

func (p *pfRun) serverName() string {
	if p.flavor == binlogpos.FlavorMariaDB {
		return "MariaDB"
	}
	return "MySQL"
}

func pfGlobalVars(ctx context.Context, conn *client.Conn) (map[string]string, error) {
	q := "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('" + strings.Join(pfVars, "', '") + "')"
	r, err := connQuery(ctx, conn, q)
	if err != nil {
		return nil, fmt.Errorf("read the server's binlog settings (%s): %w", q, err)
	}
	vars := map[string]string{}
	for _, row := range r.Values {
		vars[strings.ToLower(connText(row[0]))] = connText(row[1])
	}
	return vars, nil
}

// checkTLS says how the connection is encrypted and what of the server's
// certificate was verified; a plaintext or unverified connection is a
// warning. The chunks of the initial copy connect the same way; the binlog
// connection too (ProbeBinlog reports it).
func (p *pfRun) checkTLS() {
	st, err := ReadTLSState(p.ctx, p.conn)
	if err != nil {
		p.warn("tls", "cannot tell whether the connection is encrypted: %v", err)
		return
	}
	msg, warn := DescribeTLS(p.src, st)
	if warn {
		p.warn("tls", "queries and the initial copy: %s", msg)
		return
	}
	p.ok("tls", "queries and the initial copy: %s", msg)
}

func (p *pfRun) checkVersion() {
	min := MinMySQLVersion
	if p.flavor == binlogpos.FlavorMariaDB {
		min = MinMariaDBVersion
	}
	if p.version == "" || pfVersionLess(p.version, min) {
		p.fail("version", "%s %s on %s is too old: cdcsync needs %s %s or later; upgrade the server", p.serverName(), p.version, p.addr, p.serverName(), min)
		return
	}
	p.ok("version", "%s %s on %s", p.serverName(), p.version, p.addr)
}

// checkVar reports one variable that must have a given value, if the server
// has it. fix is what to run.
func (p *pfRun) checkVar(check, name string, good func(string) bool, want, why, fix string) {
	v, exists := p.vars[name]
	if !exists {
		return
	}
	if good(strings.ToUpper(v)) {
		p.ok(check, "%s is %s", name, v)
		return
	}
	p.fail(check, "%s is %s on %s; cdcsync needs %s%s: %s", name, pfShow(v), p.addr, want, why, fix)
}

// setPersistently is how to set a global variable so that it survives a
// restart of the server: SET PERSIST on MySQL 8 (MySQL 8.4 ships with
// binlog_row_metadata=MINIMAL), SET GLOBAL plus the configuration file on
// MariaDB and MySQL 5.7.
func (p *pfRun) setPersistently(name, value string) string {
	if p.flavor == binlogpos.FlavorMySQL && !pfVersionLess(p.version, "8.0") {
		return fmt.Sprintf("SET PERSIST %s='%s'", name, value)
	}
	return fmt.Sprintf("SET GLOBAL %s='%s' (and %s=%s in my.cnf)", name, value, name, value)
}

func pfShow(v string) string {
	if v == "" {
		return "empty"
	}
	return v
}

func (p *pfRun) checkBinlog() {
	if lb, ok := p.vars["log_bin"]; !ok || !strings.EqualFold(lb, "ON") && lb != "1" {
		p.fail("binlog", "the binary log is off on %s; cdcsync reads it as a replica: start the server with log_bin (e.g. log_bin=mysql-bin and server_id=1 in my.cnf) and restart it", p.addr)
	} else {
		p.ok("binlog", "the binary log is on")
	}
	p.checkVar("binlog_format", "binlog_format", func(v string) bool { return v == "ROW" }, "ROW",
		" (row-based replication)",
		p.setPersistently("binlog_format", "ROW")+"; sessions already open keep their format until they reconnect")
	p.checkVar("binlog_row_image", "binlog_row_image", func(v string) bool { return v == "FULL" }, "FULL",
		" (whole rows before and after each change)",
		p.setPersistently("binlog_row_image", "FULL"))
	p.checkVar("binlog_row_metadata", "binlog_row_metadata", func(v string) bool { return v == "FULL" }, "FULL",
		" (column names and signedness in the binlog)",
		p.setPersistently("binlog_row_metadata", "FULL"))
	if v, exists := p.vars["binlog_row_value_options"]; exists {
		if strings.Contains(strings.ToUpper(v), "PARTIAL_JSON") {
			p.fail("binlog_row_value_options", "binlog_row_value_options is %s on %s; cdcsync cannot apply partial JSON updates: %s", v, p.addr,
				p.setPersistently("binlog_row_value_options", ""))
		} else {
			p.ok("binlog_row_value_options", "binlog_row_value_options is %s", pfShow(v))
		}
	}
}

func (p *pfRun) checkServerID() {
	sid, _ := strconv.ParseUint(p.vars["server_id"], 10, 32)
	switch {
	case p.src.ServerID == 0:
		p.fail("server_id", "source.server_id is not set: pick a number that no server or replica of %s uses (its own server_id is %d)", p.addr, sid)
		return
	case uint64(p.src.ServerID) == sid:
		p.fail("server_id", "source.server_id %d is the server_id of %s itself; a replica must use another: set source.server_id to a number no server or replica uses, e.g. %d", p.src.ServerID, p.addr, sid+1000)
		return
	}
	// Other replicas: SHOW SLAVE HOSTS needs REPLICATION SLAVE (MySQL) or
	// REPLICATION MASTER ADMIN (MariaDB); skip it when not allowed.
	if r, err := connQuery(p.ctx, p.conn, "SHOW SLAVE HOSTS"); err == nil && len(r.Fields) > 1 {
		for _, row := range r.Values {
			if id, err := strconv.ParseUint(connText(row[0]), 10, 32); err == nil && id == uint64(p.src.ServerID) {
				p.warn("server_id", "a replica registered as host %q already uses server_id %d on %s; unless it is this cdcsync, set source.server_id to another number (two replicas with one id disconnect each other)", connText(row[1]), id, p.addr)
				return
			}
		}
	}
	p.ok("server_id", "source.server_id %d differs from the server's %d", p.src.ServerID, sid)
}

func (p *pfRun) checkGTID() {
	if p.flavor == binlogpos.FlavorMariaDB {
		if v := strings.ToUpper(p.vars["gtid_strict_mode"]); v == "ON" || v == "1" {
			p.ok("gtid", "MariaDB always writes GTIDs; positions are GTIDs, and gtid_strict_mode is ON")
			return
		}
		p.warn("gtid", "gtid_strict_mode is OFF on %s: MariaDB then lets a domain's GTID sequence numbers go back (a replica taking writes, SET gtid_seq_no), "+
			"which cdcsync's positions cannot express; cdcsync stops if it sees that happen. Turn it on: SET GLOBAL gtid_strict_mode=ON (and gtid_strict_mode=1 in my.cnf)", p.addr)
		return
	}
	mode := strings.ToUpper(p.vars["gtid_mode"])
	if mode == "ON" {
		p.ok("gtid", "gtid_mode is ON; positions are GTIDs")
		return
	}
	p.warn("gtid", "gtid_mode is %s on %s: cdcsync uses binlog file/offset positions, which do not survive a failover to another server; GTIDs are recommended (gtid_mode=ON and enforce_gtid_consistency=ON)", pfShow(mode), p.addr)
}

// pfGrant is one parsed "GRANT privs ON object TO ..." line.
type pfGrant struct {
	privs  []string // upper case; "ALL PRIVILEGES" for ALL; column privileges keep their "(...)"
	db     string   // "*" for *.*; unquoted
	table  string   // "*" for db.*; unquoted
	dbLike bool     // db is a LIKE pattern (a quoted database grant may use % and _)
}

// pfParseGrant parses one line of SHOW GRANTS. ok is false for lines that
// grant no object privileges (roles, PROXY, routines).
func pfParseGrant(line string) (g pfGrant, ok bool) {
	s := strings.TrimSpace(line)
	if !strings.HasPrefix(strings.ToUpper(s), "GRANT ") {
		return g, false
	}
	s = s[len("GRANT "):]
	// Find " ON " outside parentheses and backquotes.
	depth, inQuote, on := 0, false, -1
	for i := 0; i < len(s) && on < 0; i++ {
		switch ch := s[i]; {
		case ch == '`':
			inQuote = !inQuote
		case inQuote:
		case ch == '(':
			depth++
		case ch == ')':
			depth--
		case depth == 0 && (ch == ' ') && i+4 <= len(s) && strings.EqualFold(s[i:i+4], " ON "):
			on = i
		}
	}
	if on < 0 {
		return g, false // a role grant: GRANT `r` TO ...
	}
	privText, rest := s[:on], strings.TrimSpace(s[on+4:])
	upper := strings.ToUpper(rest)
	if strings.HasPrefix(upper, "PROCEDURE ") || strings.HasPrefix(upper, "FUNCTION ") || strings.HasPrefix(upper, "PACKAGE ") {
		return g, false
	}
	if strings.HasPrefix(upper, "TABLE ") {
		rest = strings.TrimSpace(rest[len("TABLE "):])
	}
	// Object: *.*, `db`.*, `db`.`t`, db.t, * (current database: ignored).
	obj, ok := pfCutObject(rest)
	if !ok {
		return g, false
	}
	g.db, g.table = obj[0], obj[1]
	g.dbLike = g.table == "*" && g.db != "*"
	// Privileges, split at commas outside parentheses.
	depth = 0
	start := 0
	for i := 0; i <= len(privText); i++ {
		if i < len(privText) {
			switch privText[i] {
			case '(':
				depth++
				continue
			case ')':
				depth--
				continue
			case ',':
				if depth != 0 {
					continue
				}
			default:
				continue
			}
		}
		pr := strings.ToUpper(strings.Join(strings.Fields(privText[start:i]), " "))
		if pr == "ALL" {
			pr = "ALL PRIVILEGES"
		}
		if pr != "" {
			g.privs = append(g.privs, pr)
		}
		start = i + 1
	}
	return g, true
}

// pfCutObject parses "db.table" at the start of s, each part `quoted` or
// bare or "*".
func pfCutObject(s string) ([2]string, bool) {
	var parts [2]string
	for k := 0; k < 2; k++ {
		if s == "" {
			return parts, false
		}
		if s[0] == '`' {
			var b strings.Builder
			i := 1
			for ; i < len(s); i++ {
				if s[i] == '`' {
					if i+1 < len(s) && s[i+1] == '`' {
						b.WriteByte('`')
						i++
						continue
					}
					break
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return parts, false
			}
			parts[k], s = b.String(), s[i+1:]
		} else {
			i := 0
			for i < len(s) && s[i] != '.' && s[i] != ' ' {
				i++
			}
			parts[k], s = s[:i], s[i:]
		}
		if k == 0 {
			if !strings.HasPrefix(s, ".") {
				return parts, false
			}
			s = s[1:]
		}
	}
	return parts, true
}

// pfLike matches a MySQL LIKE pattern with % and _ and \ escapes, as used
// by database-level grants.
func pfLike(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch pattern[0] {
	case '%':
		for i := 0; i <= len(s); i++ {
			if pfLike(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case '_':
		return s != "" && pfLike(pattern[1:], s[1:])
	case '\\':
		if len(pattern) > 1 {
			return s != "" && s[0] == pattern[1] && pfLike(pattern[2:], s[1:])
		}
	}
	return s != "" && s[0] == pattern[0] && pfLike(pattern[1:], s[1:])
}

func (g pfGrant) has(priv string) bool {
	for _, p := range g.privs {
		if p == priv || p == "ALL PRIVILEGES" {
			return true
		}
	}
	return false
}

func (g pfGrant) coversTable(db, table string) bool {
	switch {
	case g.db == "*":
		return true
	case g.table == "*":
		return g.db == db || (g.dbLike && pfLike(g.db, db))
	default:
		return g.db == db && g.table == table
	}
}

func (p *pfRun) checkPrivileges() error {
	r, err := connQuery(p.ctx, p.conn, "SELECT CURRENT_USER()")
	if err != nil {
		return fmt.Errorf("read the current user: %w", err)
	}
	account := p.src.User
	if len(r.Values) > 0 {
		account = connText(r.Values[0][0])
	}
	grantee := pfGrantee(account)
	// SHOW GRANTS without FOR includes the privileges of the roles active
	// in this session (the default roles).
	r, err = connQuery(p.ctx, p.conn, "SHOW GRANTS")
	if err != nil {
		var myErr *mysql.MyError
		if errors.As(err, &myErr) {
			p.fail("privileges", "cannot read the grants of %s on %s (%s): run SHOW GRANTS as that user to check it has REPLICATION SLAVE, %s and SELECT", grantee, p.addr, myErr.Message, p.replClientPriv())
			return nil
		}
		return fmt.Errorf("read the grants of %s: %w", grantee, err)
	}
	hasRoles := false
	for _, row := range r.Values {
		line := connText(row[0])
		if g, ok := pfParseGrant(line); ok {
			p.grants = append(p.grants, g)
		} else if pfIsRoleGrant(line) {
			hasRoles = true
		}
	}
	p.grantee, p.hasRoles, p.grantsRead = grantee, hasRoles, true
	var missing []string
	if !p.hasGlobal("REPLICATION SLAVE") {
		missing = append(missing, "REPLICATION SLAVE")
	}
	clientPriv := p.replClientPriv()
	if !p.hasGlobal("REPLICATION CLIENT") && !p.hasGlobal("BINLOG MONITOR") && !p.hasGlobal("SUPER") {
		missing = append(missing, clientPriv)
	}
	if len(missing) == 0 {
		p.ok("privileges", "%s has REPLICATION SLAVE and %s", grantee, clientPriv)
		return nil
	}
	msg := fmt.Sprintf("%s on %s lacks %s, which cdcsync needs to read the binlog as a replica (and its position): run GRANT %s ON *.* TO %s",
		grantee, p.addr, strings.Join(missing, " and "), strings.Join(missing, ", "), grantee)
	if hasRoles {
		p.warn("privileges", "%s (if a role grants them, make it a default role: SET DEFAULT ROLE)", msg)
		return nil
	}
	p.fail("privileges", "%s", msg)
	return nil
}

// replClientPriv names the privilege for SHOW MASTER STATUS / SHOW BINARY
// LOGS: REPLICATION CLIENT, called BINLOG MONITOR by MariaDB 10.5 and later.
func (p *pfRun) replClientPriv() string {
	if p.flavor == binlogpos.FlavorMariaDB && !pfVersionLess(p.version, "10.5") {
		return "BINLOG MONITOR"
	}
	return "REPLICATION CLIENT"
}

func (p *pfRun) hasGlobal(priv string) bool {
	for _, g := range p.grants {
		if g.db == "*" && g.has(priv) {
			return true
		}
	}
	return false
}

func pfIsRoleGrant(line string) bool {
	u := strings.ToUpper(strings.TrimSpace(line))
	return strings.HasPrefix(u, "GRANT ") && !strings.Contains(u, " ON ") && strings.Contains(u, " TO ")
}

// pfGrantee formats "user@host" from CURRENT_USER() as 'user'@'host'.
func pfGrantee(account string) string {
	user, host := account, "%"
	if i := strings.LastIndexByte(account, '@'); i >= 0 {
		user, host = account[:i], account[i+1:]
	}
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	return q(user) + "@" + q(host)
}

// checkSelect reports the selected tables the user cannot SELECT.
func (p *pfRun) checkSelect() {
	if !p.grantsRead || len(p.selected) == 0 {
		return
	}
	var missing []cdcsync.TableID
	for _, id := range p.selected {
		ok := false
		for _, g := range p.grants {
			if g.has("SELECT") && g.coversTable(id.Database, id.Table) {
				ok = true
				break
			}
		}
		if !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		p.ok("privileges", "%s may SELECT the %d selected tables", p.grantee, len(p.selected))
		return
	}
	var names, dbs []string
	seen := map[string]bool{}
	for _, id := range missing {
		names = append(names, id.String())
		if !seen[id.Database] {
			seen[id.Database] = true
			dbs = append(dbs, id.Database)
		}
	}
	var stmts []string
	for _, db := range dbs {
		stmts = append(stmts, fmt.Sprintf("GRANT SELECT ON %s.* TO %s", QuoteIdent(db), p.grantee))
	}
	msg := fmt.Sprintf("%s on %s lacks SELECT on %d selected table(s) (%s), which cdcsync needs for the initial copy: run %s",
		p.grantee, p.addr, len(missing), pfList(names, 5), strings.Join(stmts, "; "))
	if p.hasRoles {
		p.warn("privileges", "%s (if a role grants it, make it a default role: SET DEFAULT ROLE)", msg)
		return
	}
	p.fail("privileges", "%s", msg)
}

// invisibleHint explains that information_schema hides the tables a user
// has no privilege on, with the GRANT for the databases that patterns name
// literally.
func (p *pfRun) invisibleHint(quotedPatterns []string) string {
	if len(quotedPatterns) == 0 {
		return ""
	}
	var stmts []string
	seen := map[string]bool{}
	for _, qp := range quotedPatterns {
		pat, err := strconv.Unquote(qp)
		if err != nil {
			continue
		}
		db, _, ok := strings.Cut(pat, ".")
		if !ok || db == "" || strings.ContainsAny(db, "*?[\\") || seen[db] {
			continue
		}
		seen[db] = true
		grantee := p.grantee
		if grantee == "" {
			grantee = pfGrantee(p.src.User)
		}
		stmts = append(stmts, fmt.Sprintf("GRANT SELECT ON %s.* TO %s", QuoteIdent(db), grantee))
	}
	hint := "; if the tables exist, the user may lack privileges on them (the server hides such tables)"
	if len(stmts) > 0 {
		hint += ": " + strings.Join(stmts, "; ")
	}
	return hint
}

// pfAnd lists items as "a, b and c", at most n of them.
func pfAnd(items []string, n int) string {
	if len(items) > n {
		return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
	}
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func pfList(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

func (p *pfRun) checkTables() ([]*cdcsync.TableSchema, error) {
	all, err := schemaAllTables(p.ctx, p.conn)
	if err != nil {
		return nil, err
	}
	for _, id := range all {
		if p.src.Selects(id.Database, id.Table) {
			p.selected = append(p.selected, id)
		}
	}
	// Include patterns that match no table at all are likely typos.
	var unmatched []string
	for _, pat := range p.src.Include {
		if strings.HasPrefix(pat, "!") {
			continue
		}
		one := config.Source{Include: []string{pat}}
		found := false
		for _, id := range all {
			if one.Selects(id.Database, id.Table) {
				found = true
				break
			}
		}
		if !found {
			unmatched = append(unmatched, strconv.Quote(pat))
		}
	}
	if len(p.selected) == 0 {
		dbs, err := p.databases()
		if err != nil {
			return nil, err
		}
		why := "every table they match is excluded"
		if len(unmatched) > 0 {
			why = fmt.Sprintf("%s matched no table", pfAnd(unmatched, 5))
		}
		dbText := "the user sees no database"
		if len(dbs) > 0 {
			dbText = "the databases the user sees are " + pfList(dbs, 8)
		}
		// Not a failure: a mirror is often started before the application
		// creates its tables, and a table created later that the patterns
		// select is picked up (its CREATE TABLE restarts the session).
		p.warn("tables", "source.include selects no table on %s yet: %s; %s; cdcsync mirrors the tables it selects as they are created; "+
			"if that is not what you expect, fix the patterns (\"db.table\" with * and ? wildcards, e.g. \"shop.*\")%s",
			p.addr, why, dbText, p.invisibleHint(unmatched))
		p.checkSelect()
		return nil, nil
	}
	names := make([]string, len(p.selected))
	for i, id := range p.selected {
		names[i] = id.String()
	}
	p.ok("tables", "%d table(s) selected: %s", len(p.selected), pfList(names, 10))
	if len(unmatched) > 0 {
		p.warn("tables", "source.include pattern(s) %s match no table on %s: check them for typos%s",
			pfAnd(unmatched, 5), p.addr, p.invisibleHint(unmatched))
	}
	p.checkSelect()

	schemas, unsupported, err := schemaLoad(p.ctx, p.conn, p.selected)
	if err != nil {
		return nil, err
	}
	noPK := 0
	for _, s := range schemas {
		if len(s.PrimaryKey) == 0 {
			noPK++
			p.fail("primary_key", "table %s has no primary key; cdcsync needs one to apply updates and deletes: add %q to source.include or add a primary key", s.ID, "!"+s.ID.String())
			p.out[len(p.out)-1].Table = s.ID
		}
	}
	if noPK == 0 {
		p.ok("primary_key", "all %d selected tables have a primary key", len(schemas))
	}
	bad := 0
	for _, s := range schemas {
		for _, e := range unsupported[s.ID] {
			bad++
			p.fail("column_types", "%s", e.Error())
			p.out[len(p.out)-1].Table = s.ID
		}
	}
	if bad == 0 {
		p.ok("column_types", "every column of the selected tables has a supported type")
	}
	if err := p.checkForeignKeys(); err != nil {
		return nil, err
	}
	return schemas, nil
}

// checkForeignKeys reports the foreign keys of selected tables whose
// referential actions change rows that the binlog does not record (see
// CascadesLogged): cdcsync applies those between selected tables itself
// (merge/cascade.go), and warns about those whose parent is not selected,
// whose changes it never sees.
func (p *pfRun) checkForeignKeys() error {
	if CascadesLogged(p.flavor, p.version) {
		return nil
	}
	fks, unsupported, err := ForeignKeys(p.ctx, p.conn, p.selected)
	if err != nil {
		return err
	}
	selected := map[cdcsync.TableID]bool{}
	for _, id := range p.selected {
		selected[id] = true
	}
	var applied, unseen []string
	for _, fk := range fks {
		if !fk.Acts() {
			continue
		}
		if selected[fk.Parent] {
			applied = append(applied, describeFK(fk))
		} else {
			unseen = append(unseen, describeFK(fk))
		}
	}
	if len(unseen) > 0 || len(unsupported) > 0 {
		p.warn("foreign_keys", "%s does not write the changes of cascading foreign-key actions to the binlog, and cdcsync applies them only when it mirrors the parent table too, "+
			"so the mirror keeps the rows they delete or change in %s; add the referenced tables to source.include, "+
			"or delete or update the child rows explicitly before the parent's (then the cascade finds nothing), or replace the action with ON DELETE RESTRICT",
			p.serverName()+" "+p.version, pfAnd(append(unseen, unsupported...), 5))
	}
	if len(applied) > 0 {
		p.ok("foreign_keys", "%s does not write the changes of cascading foreign-key actions to the binlog; cdcsync applies them itself for %s "+
			"(each cascade reads the child table's committed rows: see docs/architecture.md, \"Foreign-key cascades\")",
			p.serverName()+" "+p.version, pfAnd(applied, 5))
	} else if len(unseen) == 0 && len(unsupported) == 0 {
		p.ok("foreign_keys", "no selected table has a foreign key with a cascading action")
	}
	return nil
}

func (p *pfRun) databases() ([]string, error) {
	r, err := connQuery(p.ctx, p.conn, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA"+
		" WHERE SCHEMA_NAME NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys') ORDER BY SCHEMA_NAME")
	if err != nil {
		return nil, fmt.Errorf("list the databases: %w", err)
	}
	var out []string
	for _, row := range r.Values {
		out = append(out, connText(row[0]))
	}
	return out, nil
}
