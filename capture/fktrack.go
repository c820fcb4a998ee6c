package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/ddlparse"
	"github.com/cdcsync/cdcsync/capture/internal/strutil"
)

// Foreign keys through the binlog. Where the server does not log cascades
// (CascadesLogged), the pipeline applies a parent change's cascades with
// the child's keys as they were at that change: a restart that replays
// transactions from before an ALTER TABLE ... ADD or DROP FOREIGN KEY must
// not apply the keys MySQL has now. Each table's keys are recorded with
// the position they are as of (lake.PropForeignKeys); the stream follows
// the statements that change them and sends the new set as a
// ChangeForeignKeys, which the pipeline commits and applies from that
// transaction on. A statement whose effect on the keys the stream cannot
// tell (a rename of a column or table a key names, a DROP of a key it does
// not know, a statement it cannot parse) marks the keys unknown and ends
// the session after it (ErrForeignKeys), so that the next one reads them
// from MySQL.

// ErrForeignKeys means a statement changed the foreign keys of a mirrored
// table in a way the stream cannot follow: the session ends after it, and
// the next one reads them again.
var ErrForeignKeys = errors.New("the foreign keys of a mirrored table changed")

// fkMention matches a statement that may add or drop a foreign key.
var fkMention = regexp.MustCompile(`(?i)\bFOREIGN\s+KEY\b|\bREFERENCES\b|\bCONSTRAINT\b`)

func (r *reader) initKeys() {
	r.keys = map[cdcsync.TableID]*cdcsync.TableKeys{}
	for id, k := range r.cfg.Keys {
		r.keys[id] = &cdcsync.TableKeys{Keys: slices.Clone(k.Keys), Pos: k.Pos}
	}
}

// foreignKeyDDL returns the key changes of the DDL statement q (st nil:
// not parsed).
func (r *reader) foreignKeyDDL(probe *cdcsync.Txn, db, q string, st *ddlparse.Stmt) []cdcsync.SchemaChange {
	if st == nil {
		if !fkMention.MatchString(q) {
			return nil
		}
		m := ddlTable.FindStringSubmatch(q)
		if m == nil {
			return nil
		}
		return r.keysUnknown(probe, q, parseTableName(db, m[2]))
	}
	switch st.Kind {
	case ddlparse.StmtAlter:
		return r.alterKeys(probe, q, st)
	case ddlparse.StmtRename:
		var touched []cdcsync.TableID
		for _, p := range st.Renames {
			touched = append(touched, r.keyTables(p[0])...)
			touched = append(touched, p[1])
			delete(r.keys, p[0])
		}
		return r.keysUnknown(probe, q, touched...)
	case ddlparse.StmtCreate:
		// A table created anew is copied, its keys read with it; CREATE OR
		// REPLACE of a mirrored table is copied again too.
		if st.OrReplace && fkMention.MatchString(q) {
			return r.keysUnknown(probe, q, st.Table)
		}
	}
	return nil
}

// keyTables returns the tables whose keys name id: id, and the children
// of its keys.
func (r *reader) keyTables(id cdcsync.TableID) []cdcsync.TableID {
	out := []cdcsync.TableID{}
	if k := r.keys[id]; k != nil && len(k.Keys) > 0 {
		out = append(out, id)
	}
	for child, k := range r.keys {
		for _, fk := range k.Keys {
			if fk.Parent == id && child != id {
				out = append(out, child)
				break
			}
		}
	}
	return out
}

// keysCovered reports whether the keys cdcsync holds for id already
// reflect the statement probe ends.
func (r *reader) keysCovered(id cdcsync.TableID, probe *cdcsync.Txn) bool {
	k := r.keys[id]
	return r.covered(id, probe) || k != nil && r.covers(k.Pos, probe)
}

func (r *reader) alterKeys(probe *cdcsync.Txn, q string, st *ddlparse.Stmt) []cdcsync.SchemaChange {
	id := st.Table
	// Renamed columns and tables are renamed in the keys that name them
	// by InnoDB; cdcsync reads those keys again.
	var renamed []string
	for _, sp := range st.Specs {
		switch sp.Op {
		case ddlparse.SpecChange:
			if sp.Column != nil && !strings.EqualFold(sp.Column.Name, sp.Name) {
				renamed = append(renamed, sp.Name)
			}
		case ddlparse.SpecRenameColumn:
			renamed = append(renamed, sp.Name)
		case ddlparse.SpecRenameTable:
			return r.keysUnknown(probe, q, append(r.keyTables(id), sp.Table)...)
		}
	}
	if len(renamed) > 0 {
		var touched []cdcsync.TableID
		for child, k := range r.keys {
			for _, fk := range k.Keys {
				if child == id && namesAny(fk.ChildCols, renamed) || fk.Parent == id && namesAny(fk.ParentCols, renamed) {
					touched = append(touched, child)
					break
				}
			}
		}
		if len(touched) > 0 {
			return r.keysUnknown(probe, q, touched...)
		}
	}
	if r.tables[id] == nil || r.keysCovered(id, probe) {
		return nil
	}
	k := r.keys[id]
	if k == nil {
		return nil // unknown already: the next session reads them
	}
	keys := slices.Clone(k.Keys)
	changed := false
	for _, sp := range st.Specs {
		switch sp.Op {
		case ddlparse.SpecAddFK:
			if sp.ForeignKey.Parent.Database == "" {
				sp.ForeignKey.Parent.Database = id.Database
			}
			fk := cdcsync.ForeignKey{Name: r.keyName(id, sp.ForeignKey, keys), Child: id, ChildCols: sp.ForeignKey.Columns, Parent: sp.ForeignKey.Parent,
				ParentCols: sp.ForeignKey.ParentColumns, OnDelete: sp.ForeignKey.OnDelete, OnUpdate: sp.ForeignKey.OnUpdate}
			keys = slices.DeleteFunc(keys, func(x cdcsync.ForeignKey) bool { return strings.EqualFold(x.Name, fk.Name) })
			keys = append(keys, fk)
			changed = true
		case ddlparse.SpecDropFK, ddlparse.SpecDropConstraint:
			n := len(keys)
			keys = slices.DeleteFunc(keys, func(x cdcsync.ForeignKey) bool { return strings.EqualFold(x.Name, sp.Name) })
			switch {
			case len(keys) < n:
				changed = true
			case sp.Op == ddlparse.SpecDropFK && !sp.IfExists:
				// A key cdcsync does not know (a generated name it
				// predicted otherwise): MySQL knows which went.
				return r.keysUnknown(probe, q, id)
			}
		}
	}
	if !changed {
		return nil
	}
	r.keys[id] = &cdcsync.TableKeys{Keys: keys, Pos: probe.Pos}
	return []cdcsync.SchemaChange{{Table: id, Kind: cdcsync.ChangeForeignKeys, ForeignKeys: slices.Clone(keys)}}
}

// keyName is the name the server gives a key ADD FOREIGN KEY creates:
// CONSTRAINT's, else (MariaDB) the index name, else table_ibfk_N with N
// one above the highest such number of the table.
func (r *reader) keyName(id cdcsync.TableID, fk *ddlparse.ForeignKeyDef, keys []cdcsync.ForeignKey) string {
	switch {
	case fk.Name != "":
		return fk.Name
	case fk.Index != "" && r.cfg.Flavor == binlogpos.FlavorMariaDB:
		return fk.Index
	}
	prefix := strings.ToLower(id.Table) + "_ibfk_"
	n := 0
	for _, k := range keys {
		if rest, ok := strings.CutPrefix(strings.ToLower(k.Name), prefix); ok {
			if v, err := strconv.Atoi(rest); err == nil {
				n = max(n, v)
			}
		}
	}
	return fmt.Sprintf("%s_ibfk_%d", id.Table, n+1)
}

// keysUnknown marks the keys of the mirrored tables ids unknown and ends
// the session after the statement, unless every one of them already
// reflects it.
func (r *reader) keysUnknown(probe *cdcsync.Txn, q string, ids ...cdcsync.TableID) []cdcsync.SchemaChange {
	var out []cdcsync.SchemaChange
	seen := map[cdcsync.TableID]bool{}
	for _, id := range ids {
		if seen[id] || r.tables[id] == nil || r.keysCovered(id, probe) {
			continue
		}
		seen[id] = true
		delete(r.keys, id)
		out = append(out, cdcsync.SchemaChange{Table: id, Kind: cdcsync.ChangeForeignKeys, KeysUnknown: true})
	}
	if len(out) > 0 && r.restart == nil {
		r.restart = fmt.Errorf("%w: %q at %s", ErrForeignKeys, strutil.Abbreviate(q, 120), r.position())
	}
	return out
}

func namesAny(cols, names []string) bool {
	for _, c := range cols {
		for _, n := range names {
			if strings.EqualFold(c, n) {
				return true
			}
		}
	}
	return false
}
