package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/cdcsync/cdcsync"
)

// CascadesLogged says whether the server writes the row changes of
// cascading foreign-key actions to the binlog: MySQL 9.6 does (its SQL
// layer applies them); MariaDB (MDEV-38243) and earlier MySQL apply them
// inside InnoDB, where the binlog never sees them.
func CascadesLogged(flavor, version string) bool {
	return flavor == binlogpos.FlavorMySQL && !pfVersionLess(version, "9.6")
}

// ForeignKeys reads the foreign keys of the tables ids, from SHOW CREATE
// TABLE rather than information_schema.REFERENTIAL_CONSTRAINTS, which
// MariaDB shows to an account with SELECT privileges only partly (an empty
// result for cdcsync's replication account). Every key is returned, those
// without an action too (their names let a later DROP FOREIGN KEY be
// followed); unsupported holds the descriptions of SET DEFAULT actions
// (InnoDB refuses them, other engines have no foreign keys), which count
// as none.
func ForeignKeys(ctx context.Context, conn *client.Conn, ids []cdcsync.TableID) (fks []cdcsync.ForeignKey, unsupported []string, err error) {
	for _, id := range ids {
		r, err := connQuery(ctx, conn, "SHOW CREATE TABLE "+QuoteIdent(id.Database)+"."+QuoteIdent(id.Table))
		if err != nil {
			return nil, nil, fmt.Errorf("read the definition of %s: %w", id, err)
		}
		if len(r.Values) == 0 || len(r.Values[0]) < 2 {
			continue
		}
		for _, m := range fkClause.FindAllStringSubmatch(connText(r.Values[0][1]), -1) {
			fk := cdcsync.ForeignKey{Name: unquoteIdent(m[1]), Child: id, ChildCols: identList(m[2]), ParentCols: identList(m[4])}
			fk.Parent = parseQualified(m[3], id.Database)
			for _, a := range fkAction.FindAllStringSubmatch(m[5], -1) {
				act := strings.ToUpper(strings.Join(strings.Fields(a[2]), " "))
				var action cdcsync.FKAction
				switch act {
				case "CASCADE":
					action = cdcsync.FKCascade
				case "SET NULL":
					action = cdcsync.FKSetNull
				case "SET DEFAULT":
					unsupported = append(unsupported, fmt.Sprintf("%s (%s ON %s SET DEFAULT)", id, fk.Name, strings.ToUpper(a[1])))
					continue
				default:
					continue
				}
				if strings.EqualFold(a[1], "DELETE") {
					fk.OnDelete = action
				} else {
					fk.OnUpdate = action
				}
			}
			fks = append(fks, fk)
		}
	}
	return fks, unsupported, nil
}

// describeFK is a foreign key as the preflight names it.
func describeFK(fk cdcsync.ForeignKey) string {
	var actions []string
	if fk.OnDelete != cdcsync.FKNoAction {
		actions = append(actions, "ON DELETE "+fk.OnDelete.String())
	}
	if fk.OnUpdate != cdcsync.FKNoAction {
		actions = append(actions, "ON UPDATE "+fk.OnUpdate.String())
	}
	return fmt.Sprintf("%s (%s %s, referencing %s)", fk.Child, fk.Name, strings.Join(actions, ", "), fk.Parent)
}

// fkClause matches a FOREIGN KEY clause of SHOW CREATE TABLE: its name, its
// columns, the referenced table and columns, and the actions that follow.
var fkClause = regexp.MustCompile("(?i)CONSTRAINT (`(?:[^`]|``)+`) FOREIGN KEY \\(([^)]*)\\) REFERENCES ((?:`(?:[^`]|``)+`\\.)?`(?:[^`]|``)+`) \\(([^)]*)\\)((?: ON (?:DELETE|UPDATE) (?:CASCADE|SET NULL|SET DEFAULT|RESTRICT|NO ACTION))*)")

var fkAction = regexp.MustCompile(`(?i)ON (DELETE|UPDATE) (CASCADE|SET NULL|SET DEFAULT|RESTRICT|NO ACTION)`)

var quotedIdent = regexp.MustCompile("`((?:[^`]|``)+)`")

// identList parses "`a`, `b`".
func identList(s string) []string {
	var out []string
	for _, m := range quotedIdent.FindAllStringSubmatch(s, -1) {
		out = append(out, strings.ReplaceAll(m[1], "``", "`"))
	}
	return out
}

func unquoteIdent(s string) string {
	return strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(s, "`"), "`"), "``", "`")
}

// parseQualified parses "`db`.`t`" or "`t`" (in db).
func parseQualified(s, db string) cdcsync.TableID {
	parts := identList(s)
	if len(parts) == 2 {
		return cdcsync.TableID{Database: parts[0], Table: parts[1]}
	}
	return cdcsync.TableID{Database: db, Table: parts[0]}
}
