package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/capture/binlogpos"
	"github.com/cdcsync/cdcsync/capture/ddlparse"
	"github.com/cdcsync/cdcsync/capture/internal/strutil"
	"github.com/cdcsync/cdcsync/config"
)

// tracked is a mirrored table as the stream sees it.
type tracked struct {
	schema    *cdcsync.TableSchema
	schemaPos cdcsync.Position // its Iceberg schema reflects every DDL statement up to here
	committed cdcsync.Position // its Iceberg rows reflect every transaction up to here
	catching  bool             // rows events may still be covered by committed
	charset   string           // the table's default character set, when known
	mapSeen   *replication.TableMapEvent
	// images decodes the row images of mapSeen's table map into
	// imagesSchema (rowimage.go); nil when go-mysql decodes them. The
	// reader drops it when a table map differs from mapSeen.
	images       *rowDecoder
	imagesSchema *cdcsync.TableSchema
	imagesTried  bool
}

// rowDecoder returns the decoder of the row images of t.mapSeen into t's
// schema, compiled once per table map and schema (the server writes a
// table map for every transaction; they are compared, not compiled).
func (t *tracked) rowDecoder() *rowDecoder {
	if !t.imagesTried || t.imagesSchema != t.schema {
		t.images, t.imagesSchema, t.imagesTried = compileRowDecoder(t.mapSeen, t.schema), t.schema, true
	}
	return t.images
}

// shadowState is a shadow table of gh-ost or pt-online-schema-change.
type shadowState struct {
	base cdcsync.TableID
	sh   cdcsync.Shadow // Schema nil: unknown
	pos  cdcsync.Position
}

func (r *reader) initTracking() {
	r.tables = map[cdcsync.TableID]*tracked{}
	r.shadows = map[cdcsync.TableID]*shadowState{}
	r.stopped = map[cdcsync.TableID]bool{}
	r.initKeys()
	for id, s := range r.cfg.Schemas {
		t := &tracked{schema: s, schemaPos: r.cfg.SchemaPos[id], committed: r.cfg.Committed[id]}
		t.catching = !t.committed.IsZero()
		r.tables[id] = t
	}
	for id := range r.cfg.Stopped {
		r.stopped[id] = true
	}
	for _, s := range r.cfg.Shadows {
		if s.Shadow.Dropped || r.tables[s.Base] == nil {
			continue
		}
		r.shadows[s.Shadow.ID] = &shadowState{base: s.Base, sh: s.Shadow, pos: s.Pos}
	}
}

// probe is a transaction that ends at the current event, for Covers.
func (r *reader) probe(h *replication.EventHeader) *cdcsync.Txn {
	at := r.position()
	if h != nil && h.LogPos > 0 {
		at.Offset = h.LogPos
	}
	p := &cdcsync.Txn{Pos: r.mark(at).Position()}
	if r.txn != nil {
		p.GTID = r.txn.GTID
	}
	return p
}

// covers reports whether pos includes the transaction probe ends. The
// reader's Order remembers the positions it decoded last: a table catching
// up asks about its committed position at every rows event.
func (r *reader) covers(pos cdcsync.Position, probe *cdcsync.Txn) bool {
	if pos.IsZero() {
		return false
	}
	ok, err := r.order.Covers(pos, probe)
	return err == nil && ok
}

// covered reports whether the table's Iceberg state already reflects the
// statement or transaction probe ends.
func (r *reader) covered(id cdcsync.TableID, probe *cdcsync.Txn) bool {
	t := r.tables[id]
	return t != nil && (r.covers(t.schemaPos, probe) || r.covers(t.committed, probe))
}

func (r *reader) ddlPolicies() DDLPolicies {
	if r.cfg.DDL != nil {
		return r.cfg.DDL
	}
	return &config.Config{}
}

func (r *reader) selects(id cdcsync.TableID) bool {
	return r.cfg.Source.Selects(id.Database, id.Table)
}

// untrack stops decoding the table's rows; a stopped table also never
// makes the stream restart for a CREATE TABLE of its name.
func (r *reader) untrack(id cdcsync.TableID, stopped bool) {
	delete(r.tables, id)
	if stopped {
		r.stopped[id] = true
	}
	for sid, s := range r.shadows {
		if s.base == id {
			delete(r.shadows, sid)
		}
	}
}

// policyChange is the change for a statement cdcsync cannot follow on
// table id: stop it, or copy it again under the recopy policy. A type
// cdcsync cannot map always stops the table (a new copy could not map it
// either).
func (r *reader) policyChange(id cdcsync.TableID, stmt, reason string, recopyOK bool) cdcsync.SchemaChange {
	kind := cdcsync.ChangeStop
	if recopyOK && r.ddlPolicies().IncompatiblePolicy(id.Database, id.Table) == config.DDLRecopy {
		kind = cdcsync.ChangeRecopy
	}
	r.untrack(id, kind == cdcsync.ChangeStop)
	r.cfg.logf("schema change cdcsync cannot follow", "table", id.String(), "action", kind.String(), "reason", reason)
	return cdcsync.SchemaChange{Table: id, Kind: kind, Statement: stmt, Reason: reason, NoRecopy: !recopyOK}
}

var alterIgnore = regexp.MustCompile(`(?i)^\s*ALTER\s+(ONLINE\s+)?IGNORE\b`)

var tableDDLStart = regexp.MustCompile(`(?is)^\s*(?:(?:/\*[^!M].*?\*/|#[^\n]*\n|--\s[^\n]*\n)\s*)*(ALTER|CREATE|DROP|RENAME|TRUNCATE)\b`)

// queryDDL handles a statement that is not BEGIN/COMMIT: it parses DDL that
// changes tables and records its effects on the mirrored tables in the
// open transaction.
func (r *reader) queryDDL(h *replication.EventHeader, db, q string, status []byte) error {
	if !tableDDLStart.MatchString(q) {
		return nil
	}
	mode := ddlparse.ParseSQLMode(status)
	probe := r.probe(h)
	st, err := ddlparse.Parse(q, db, r.cfg.Flavor, mode)
	var changes []cdcsync.SchemaChange
	if err != nil {
		st = nil
		changes, err = r.unparsed(probe, db, q, mode, err)
	} else {
		changes, err = r.apply(probe, st, q, mode)
	}
	if err != nil {
		return err
	}
	if r.cfg.ForeignKeys {
		// After the statement's own changes: a rename moves the table first.
		changes = append(changes, r.foreignKeyDDL(probe, db, q, st)...)
	}
	if len(changes) > 0 {
		r.begin()
		for i := range changes {
			if changes[i].Statement == "" {
				changes[i].Statement = q
			}
		}
		r.txn.DDL = append(r.txn.DDL, changes...)
	}
	return nil
}

// unparsed handles a DDL statement that cannot be parsed: every mirrored
// table it names stops (or is copied again under the recopy policy).
func (r *reader) unparsed(probe *cdcsync.Txn, db, q string, mode ddlparse.SQLMode, perr error) ([]cdcsync.SchemaChange, error) {
	named := map[cdcsync.TableID]bool{}
	if m := ddlTable.FindStringSubmatch(q); m != nil {
		named[parseTableName(db, m[2])] = true
		verb := strings.ToUpper(strings.Fields(m[1])[0])
		id := parseTableName(db, m[2])
		if verb == "CREATE" && r.tables[id] == nil && !r.stopped[id] && r.selects(id) && !r.covers(r.cfg.Horizon, probe) {
			return nil, fmt.Errorf("%w: %s was created at %s", ErrNewTable, id, r.position())
		}
	}
	if ids, err := ddlparse.CandidateTables(q, db, mode); err == nil {
		for _, id := range ids {
			named[id] = true
		}
	} else {
		for id := range r.tables {
			if strings.Contains(q, id.Table) {
				named[id] = true
			}
		}
	}
	var out []cdcsync.SchemaChange
	ids := sortedIDs(named)
	for _, id := range ids {
		if r.tables[id] != nil && !r.covered(id, probe) {
			out = append(out, r.policyChange(id, q, fmt.Sprintf("cdcsync cannot parse the statement (%v)", perr), true))
		}
		if s := r.shadows[id]; s != nil && !r.covers(s.pos, probe) {
			s.sh.Schema, s.sh.Sources = nil, nil
			out = append(out, cdcsync.SchemaChange{Table: s.base, Kind: cdcsync.ChangeShadow, Shadow: cloneShadow(&s.sh),
				Reason: fmt.Sprintf("cdcsync cannot parse the statement (%v)", perr)})
		}
	}
	return out, nil
}

func sortedIDs(m map[cdcsync.TableID]bool) []cdcsync.TableID {
	ids := make([]cdcsync.TableID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	schemaSortIDs(ids)
	return ids
}

func cloneShadow(s *cdcsync.Shadow) *cdcsync.Shadow {
	c := *s
	c.Schema = cloneSchema(s.Schema)
	c.Sources = slices.Clone(s.Sources)
	return &c
}

func (r *reader) apply(probe *cdcsync.Txn, st *ddlparse.Stmt, q string, mode ddlparse.SQLMode) ([]cdcsync.SchemaChange, error) {
	switch st.Kind {
	case ddlparse.StmtAlter:
		return r.alter(probe, st, q, mode)
	case ddlparse.StmtCreate:
		return r.create(probe, st, q)
	case ddlparse.StmtDrop:
		if st.Temporary {
			return nil, nil
		}
		var out []cdcsync.SchemaChange
		for _, id := range st.Tables {
			out = append(out, r.dropped(probe, id, "DROP TABLE")...)
		}
		return out, nil
	case ddlparse.StmtDropDatabase:
		named := map[cdcsync.TableID]bool{}
		for id := range r.tables {
			if id.Database == st.Database {
				named[id] = true
			}
		}
		for id := range r.shadows {
			if id.Database == st.Database {
				named[id] = true
			}
		}
		var out []cdcsync.SchemaChange
		for _, id := range sortedIDs(named) {
			out = append(out, r.dropped(probe, id, "DROP DATABASE")...)
		}
		return out, nil
	case ddlparse.StmtTruncate:
		if r.tables[st.Table] != nil && !r.covered(st.Table, probe) {
			return []cdcsync.SchemaChange{{Table: st.Table, Kind: cdcsync.ChangeTruncate}}, nil
		}
		return nil, nil
	case ddlparse.StmtRename:
		return r.rename(probe, st.Renames, q)
	}
	return nil, nil
}

// dropped handles DROP TABLE id.
func (r *reader) dropped(probe *cdcsync.Txn, id cdcsync.TableID, why string) []cdcsync.SchemaChange {
	return r.droppedKeep(probe, id, why, false)
}

// droppedKeep is dropped; keep keeps the Iceberg table whatever
// ddl.drop_table says.
func (r *reader) droppedKeep(probe *cdcsync.Txn, id cdcsync.TableID, why string, keep bool) []cdcsync.SchemaChange {
	if r.tables[id] != nil {
		if r.covered(id, probe) {
			return nil
		}
		keep = keep || r.ddlPolicies().DropTablePolicy() != config.DDLDrop
		r.untrack(id, keep)
		return []cdcsync.SchemaChange{{Table: id, Kind: cdcsync.ChangeDrop, Reason: why + " in MySQL", Keep: keep}}
	}
	if s := r.shadows[id]; s != nil {
		delete(r.shadows, id)
		if r.covers(s.pos, probe) {
			return nil
		}
		sh := cdcsync.Shadow{ID: id, Dropped: true}
		return []cdcsync.SchemaChange{{Table: s.base, Kind: cdcsync.ChangeShadow, Shadow: &sh}}
	}
	return nil
}

func (r *reader) alter(probe *cdcsync.Txn, st *ddlparse.Stmt, q string, mode ddlparse.SQLMode) ([]cdcsync.SchemaChange, error) {
	id := st.Table
	ignore := alterIgnore.MatchString(q)
	var out []cdcsync.SchemaChange
	switch {
	case r.tables[id] != nil:
		t := r.tables[id]
		if r.covered(id, probe) {
			return nil, nil
		}
		res, err := applyAlter(t.schema, t.charset, st.Specs, mode, ignore)
		switch {
		case err != nil:
			return []cdcsync.SchemaChange{r.policyChange(id, q, fmt.Sprintf("the statement does not apply to the schema cdcsync holds %s: %v", describeSchema(t.schema), err), true)}, nil
		case res.unsupported != "":
			return []cdcsync.SchemaChange{r.policyChange(id, q, res.unsupported, false)}, nil
		case len(res.schema.PrimaryKey) == 0:
			return []cdcsync.SchemaChange{r.policyChange(id, q, "the table has no primary key any more; cdcsync needs one to apply updates and deletes", false)}, nil
		case res.problem != "":
			return []cdcsync.SchemaChange{r.policyChange(id, q, res.problem, true)}, nil
		}
		vals, problem := fills(res.schema, res.sources)
		if problem != "" {
			return []cdcsync.SchemaChange{r.policyChange(id, q, problem, true)}, nil
		}
		t.charset = res.charset
		if !t.schema.Same(res.schema) || !isIdentity(res.schema, res.sources) {
			t.schema = res.schema
			t.mapSeen = nil
			out = append(out, cdcsync.SchemaChange{Table: id, Kind: cdcsync.ChangeSchema, Schema: cloneSchema(res.schema),
				Sources: res.sources, Fills: vals})
		}
		if res.renameTo != nil && *res.renameTo != id {
			more, err := r.rename(probe, [][2]cdcsync.TableID{{id, *res.renameTo}}, q)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		}
		return out, nil
	case r.shadows[id] != nil:
		s := r.shadows[id]
		if r.covers(s.pos, probe) {
			return nil, nil
		}
		if s.sh.Schema != nil {
			res, err := applyAlter(s.sh.Schema, "", st.Specs, mode, ignore)
			switch {
			case err != nil:
				s.sh.Schema, s.sh.Sources = nil, nil
			case res.unsupported != "":
				s.sh.Schema, s.sh.Sources = nil, nil
			default:
				s.sh.Sources = composeSources(s.sh.Sources, s.sh.Schema, res.sources)
				s.sh.Schema = res.schema
			}
			out = append(out, cdcsync.SchemaChange{Table: s.base, Kind: cdcsync.ChangeShadow, Shadow: cloneShadow(&s.sh)})
			if err == nil && res.renameTo != nil && *res.renameTo != id {
				more, err := r.rename(probe, [][2]cdcsync.TableID{{id, *res.renameTo}}, q)
				if err != nil {
					return nil, err
				}
				out = append(out, more...)
			}
		}
		return out, nil
	}
	// A table cdcsync does not follow; only a rename into a mirrored name
	// matters.
	for _, sp := range st.Specs {
		if sp.Op == ddlparse.SpecRenameTable {
			return r.rename(probe, [][2]cdcsync.TableID{{id, sp.Table}}, q)
		}
	}
	return nil, nil
}

func (r *reader) create(probe *cdcsync.Txn, st *ddlparse.Stmt, q string) ([]cdcsync.SchemaChange, error) {
	if st.Temporary {
		return nil, nil
	}
	id := st.Table
	if r.stopped[id] {
		return nil, nil
	}
	if r.tables[id] != nil {
		if st.OrReplace && !r.covered(id, probe) {
			// The table was replaced by a new one: copy it again.
			r.untrack(id, false)
			return []cdcsync.SchemaChange{{Table: id, Kind: cdcsync.ChangeRecopy, Reason: "CREATE OR REPLACE TABLE replaced the table"}}, nil
		}
		return nil, nil
	}
	if base, suffix, ok := config.ShadowOf(id.Table); ok && r.cfg.Source.FollowsShadows() && (suffix == "_gho" || suffix == "_new") {
		bid := cdcsync.TableID{Database: id.Database, Table: base}
		bt := r.tables[bid]
		if bt == nil {
			return nil, nil
		}
		if old := r.shadows[id]; old != nil && r.covers(old.pos, probe) {
			return nil, nil
		}
		s := &shadowState{base: bid, sh: cdcsync.Shadow{ID: id}}
		switch {
		case st.Like != nil:
			switch src := *st.Like; {
			case r.tables[src] != nil && src == bid:
				s.sh.Schema = cloneSchema(bt.schema)
				s.sh.Sources = identitySources(bt.schema)
			case r.shadows[src] != nil && r.shadows[src].base == bid && r.shadows[src].sh.Schema != nil:
				s.sh.Schema = cloneSchema(r.shadows[src].sh.Schema)
				s.sh.Sources = slices.Clone(r.shadows[src].sh.Sources)
			}
		case st.Create != nil && !st.AsSelect:
			schema, defs, _, err := schemaFromCreate(id, st.Create, bt.charset)
			if err == nil {
				s.sh.Schema = schema
				for i, c := range schema.Columns {
					src := cdcsync.ColumnSource{}
					if j := bt.schema.ColumnIndex(c.Name); j >= 0 {
						src.From = c.Name
					} else {
						src.Fill, src.Unknown = newColumnFill(defs[i], &schema.Columns[i])
					}
					s.sh.Sources = append(s.sh.Sources, src)
				}
			}
		}
		if s.sh.Schema != nil {
			s.sh.Schema.ID = id
		}
		r.shadows[id] = s
		return []cdcsync.SchemaChange{{Table: bid, Kind: cdcsync.ChangeShadow, Shadow: cloneShadow(&s.sh)}}, nil
	}
	if r.selects(id) && !r.covers(r.cfg.Horizon, probe) {
		return nil, fmt.Errorf("%w: %s was created at %s", ErrNewTable, id, r.position())
	}
	return nil, nil
}

// rename applies RENAME TABLE pairs, in order, as one atomic statement.
func (r *reader) rename(probe *cdcsync.Txn, pairs [][2]cdcsync.TableID, q string) ([]cdcsync.SchemaChange, error) {
	const (
		entNone = iota
		entTracked
		entShadow
		entOther
	)
	type ent struct {
		kind int
		id   cdcsync.TableID
	}
	loc := map[cdcsync.TableID]ent{}
	get := func(n cdcsync.TableID) ent {
		if e, ok := loc[n]; ok {
			return e
		}
		switch {
		case r.tables[n] != nil:
			return ent{entTracked, n}
		case r.shadows[n] != nil:
			return ent{entShadow, n}
		}
		return ent{entOther, n}
	}
	var out []cdcsync.SchemaChange
	for _, pr := range pairs {
		from, to := pr[0], pr[1]
		if r.covered(to, probe) && r.tables[from] != nil && !r.covered(from, probe) {
			// The new name was copied after this statement (cdcsync was not
			// running): the old name's Iceberg table ends here.
			out = append(out, r.dropped(probe, from, "RENAME TABLE "+from.String()+" TO "+to.String())...)
			continue
		}
		if r.covered(to, probe) || r.covered(from, probe) || r.stopped[from] || r.stopped[to] {
			continue // applied before this session, or not followed
		}
		if _, moved := loc[to]; r.tables[to] != nil && !moved && r.tables[from] == nil && r.shadows[from] == nil {
			// MySQL had the new name when the session started: the rename
			// happened before (an Iceberg rename whose commit of the new
			// schema position did not complete).
			continue
		}
		e := get(from)
		loc[from] = ent{kind: entNone}
		loc[to] = e
	}
	names := make([]cdcsync.TableID, 0, len(loc))
	for n := range loc {
		names = append(names, n)
	}
	schemaSortIDs(names)
	swapped := map[cdcsync.TableID]bool{}
	// 1. A shadow table swapped in for the table it shadows.
	for _, n := range names {
		e := loc[n]
		if e.id == n || r.tables[n] == nil {
			continue
		}
		switch e.kind {
		case entShadow:
			if s := r.shadows[e.id]; s.base == n {
				swapped[n] = true
				out = append(out, r.swap(n, s, q)...)
			}
		case entOther:
			if base, suffix, ok := config.ShadowOf(e.id.Table); ok && r.cfg.Source.FollowsShadows() && e.id.Database == n.Database &&
				base == n.Table && (suffix == "_gho" || suffix == "_new") {
				swapped[n] = true
				out = append(out, r.policyChange(n, q, fmt.Sprintf("the shadow table %s replaced %s, but cdcsync does not know how %s was built "+
					"(it was created before the position cdcsync resumed from, or with a statement cdcsync cannot apply)", e.id, n, e.id), true))
			}
		}
	}
	// 2. Mirrored tables that moved to another name. A rename onto the name
	// of another mirrored table waits for that table to move first.
	type move struct{ from, to cdcsync.TableID }
	var moves []move
	for _, n := range names {
		if e := loc[n]; e.kind == entTracked && e.id != n && !swapped[e.id] {
			moves = append(moves, move{e.id, n})
		}
	}
	newTable := false
	for len(moves) > 0 {
		progressed := false
		for i := 0; i < len(moves); i++ {
			mv := moves[i]
			if r.tables[mv.to] != nil && !swapped[mv.to] {
				continue // its current occupant moves first
			}
			moves = slices.Delete(moves, i, i+1)
			i--
			progressed = true
			t := r.tables[mv.from]
			if r.selects(mv.to) && r.ddlPolicies().RenameTablePolicy() != config.DDLKeep {
				if swapped[mv.to] {
					// The name is taken by the table the shadow became.
					out = append(out, r.dropped(probe, mv.from, "RENAME TABLE")...)
					continue
				}
				s := cloneSchema(t.schema)
				s.ID = mv.to
				delete(r.tables, mv.from)
				t.schema = s
				t.mapSeen = nil
				r.tables[mv.to] = t
				out = append(out, cdcsync.SchemaChange{Table: mv.from, Kind: cdcsync.ChangeRename, NewID: mv.to, Schema: cloneSchema(s)})
				continue
			}
			// Renamed out of the selection (a DROP), or under
			// rename_table: keep (the Iceberg table stays as it is and the
			// new name is copied as a new table).
			out = append(out, r.droppedKeep(probe, mv.from, "RENAME TABLE "+mv.from.String()+" TO "+mv.to.String(), r.selects(mv.to))...)
			if r.selects(mv.to) {
				newTable = true
			}
		}
		if !progressed {
			for _, mv := range moves {
				out = append(out, r.policyChange(mv.from, q, "mirrored tables swap names in one RENAME TABLE, which cdcsync cannot follow", true))
			}
			break
		}
	}
	// 3. Names that now hold a table cdcsync knows nothing about.
	for _, n := range names {
		e := loc[n]
		if e.id == n || swapped[n] || r.stopped[n] {
			continue
		}
		switch e.kind {
		case entOther:
			if r.selects(n) {
				newTable = true
			}
		case entShadow:
			s := r.shadows[e.id]
			delete(r.shadows, e.id)
			if base, suffix, ok := config.ShadowOf(n.Table); ok && n.Database == s.base.Database && base == s.base.Table && (suffix == "_gho" || suffix == "_new") {
				s.sh.ID = n
				r.shadows[n] = s
				out = append(out, cdcsync.SchemaChange{Table: s.base, Kind: cdcsync.ChangeShadow, Shadow: &cdcsync.Shadow{ID: e.id, Dropped: true}},
					cdcsync.SchemaChange{Table: s.base, Kind: cdcsync.ChangeShadow, Shadow: cloneShadow(&s.sh)})
			} else {
				out = append(out, cdcsync.SchemaChange{Table: s.base, Kind: cdcsync.ChangeShadow, Shadow: &cdcsync.Shadow{ID: e.id, Dropped: true}})
				if r.selects(n) {
					newTable = true
				}
			}
		}
	}
	if newTable && !r.covers(r.cfg.Horizon, probe) {
		r.restart = fmt.Errorf("%w: %q at %s gives a mirrored name a table cdcsync has not copied", ErrNewTable, strutil.Abbreviate(q, 120), r.position())
	}
	return out, nil
}

// swap applies the final rename of an online schema change: the shadow s
// becomes table b, with the same rows and the shadow's schema.
func (r *reader) swap(b cdcsync.TableID, s *shadowState, q string) []cdcsync.SchemaChange {
	t := r.tables[b]
	delete(r.shadows, s.sh.ID)
	forget := cdcsync.SchemaChange{Table: b, Kind: cdcsync.ChangeShadow, Shadow: &cdcsync.Shadow{ID: s.sh.ID, Dropped: true}}
	if s.sh.Schema == nil {
		return []cdcsync.SchemaChange{forget, r.policyChange(b, q, fmt.Sprintf("the shadow table %s replaced %s, but cdcsync could not follow how %s was built", s.sh.ID, b, s.sh.ID), true)}
	}
	next := cloneSchema(s.sh.Schema)
	next.ID = b
	if len(next.PrimaryKey) == 0 {
		return []cdcsync.SchemaChange{forget, r.policyChange(b, q, "the table that replaced it has no primary key", false)}
	}
	for i, src := range s.sh.Sources {
		if src.From == "" {
			continue
		}
		j := t.schema.ColumnIndex(src.From)
		if j < 0 {
			return []cdcsync.SchemaChange{forget, r.policyChange(b, q, fmt.Sprintf("column %s of the shadow table %s comes from column %s, which %s no longer has", next.Columns[i].Name, s.sh.ID, src.From, b), true)}
		}
		if p := columnChangeProblem(&t.schema.Columns[j], &next.Columns[i], true); p != "" {
			return []cdcsync.SchemaChange{forget, r.policyChange(b, q, p, true)}
		}
	}
	vals, problem := fills(next, s.sh.Sources)
	if problem != "" {
		return []cdcsync.SchemaChange{forget, r.policyChange(b, q, problem, true)}
	}
	t.schema = next
	t.mapSeen = nil
	return []cdcsync.SchemaChange{{Table: b, Kind: cdcsync.ChangeSchema, Schema: cloneSchema(next), Sources: s.sh.Sources, Fills: vals,
		Reason: fmt.Sprintf("%s replaced %s (online schema change)", s.sh.ID, b)}, forget}
}

// ErrTableMap marks a rows event whose table map disagrees with the schema
// cdcsync holds.
var ErrTableMap = errors.New("the binlog's table map disagrees with the schema cdcsync holds")

// checkTableMap compares a table map event (with binlog_row_metadata=FULL:
// column names, signedness, character sets, primary key) with the schema
// the rows are about to be decoded with.
func checkTableMap(s *cdcsync.TableSchema, m *replication.TableMapEvent) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s (cdcsync holds %s)", ErrTableMap, fmt.Sprintf(format, args...), describeSchema(s))
	}
	if int(m.ColumnCount) != len(s.Columns) {
		return bad("the binlog has %d columns, cdcsync %d", m.ColumnCount, len(s.Columns))
	}
	names := m.ColumnNameString()
	unsigned := m.UnsignedMap()
	collations := m.CollationMap()
	for i := range s.Columns {
		c := &s.Columns[i]
		if len(names) == len(s.Columns) && names[i] != c.Name {
			return bad("column %d is %s in the binlog and %s in cdcsync", i+1, names[i], c.Name)
		}
		if !typeCodeMatches(m.ColumnType[i], m.ColumnMeta[i], c) {
			return bad("column %s has binlog type %d (meta %d), which is not %s", c.Name, m.ColumnType[i], m.ColumnMeta[i], c.ColumnType)
		}
		if u, ok := unsigned[i]; ok && u != c.Unsigned && signedType(c) {
			return bad("column %s is %s in the binlog and %s in cdcsync", c.Name, signedness(u), signedness(c.Unsigned))
		}
		if coll, ok := collations[i]; ok && !CollationMatches(c, coll) {
			return bad("column %s has collation id %d in the binlog, which is not of the character set cdcsync decodes it in (%s)", c.Name, coll, c.ColumnType)
		}
	}
	if len(m.PrimaryKey) > 0 || len(names) > 0 {
		pk := make([]int, len(m.PrimaryKey))
		for i, k := range m.PrimaryKey {
			pk[i] = int(k)
		}
		if len(names) > 0 && !slices.Equal(pk, s.PrimaryKey) {
			return bad("the primary key is %v in the binlog and %v in cdcsync", pk, s.PrimaryKey)
		}
	}
	return nil
}

// signedType reports whether a column's type is signed or unsigned in
// MySQL's sense (the binlog also flags YEAR and BIT, which are not).
func signedType(c *cdcsync.Column) bool {
	switch strings.ToLower(c.DataType) {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "numeric", "fixed", "float", "double", "double precision", "real":
		return true
	}
	return false
}

func signedness(u bool) string {
	if u {
		return "unsigned"
	}
	return "signed"
}

// typeCodeMatches checks a binlog column type code against a column. Types
// it has no rule for are not judged.
func typeCodeMatches(code byte, meta uint16, c *cdcsync.Column) bool {
	dt := strings.ToLower(c.DataType)
	switch dt {
	case "tinyint":
		return code == 1
	case "smallint":
		return code == 2
	case "mediumint":
		return code == 9
	case "int", "integer":
		return code == 3
	case "bigint":
		return code == 8
	case "decimal", "numeric", "fixed":
		return code == 246 && int(meta>>8) == c.Precision && int(meta&0xff) == c.Scale
	case "float":
		return code == 4
	case "double", "double precision", "real":
		return code == 5
	case "varchar", "varbinary":
		return code == 15 || code == 253
	case "char", "binary":
		// STRING carries the real type in meta's high byte (ENUM, SET).
		return code == 254 && meta>>8 != 247 && meta>>8 != 248
	case "enum":
		return code == 247 || code == 254 && meta>>8 == 247
	case "set":
		return code == 248 || code == 254 && meta>>8 == 248
	case "tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob", "longblob":
		return code == 252
	case "json":
		return code == 245 || code == 252 // MySQL's binary JSON; MariaDB's LONGTEXT
	case "date":
		return code == 10 || code == 14
	case "datetime":
		return code == 12 || code == 18
	case "timestamp":
		return code == 7 || code == 17
	case "time":
		return code == 11 || code == 19
	case "year":
		return code == 13
	case "bit":
		return code == 16
	}
	return true
}

// sameTableMap reports whether two table map events describe the same
// columns, so that a table map already checked need not be checked again
// (the server writes one per transaction). It allocates nothing.
func sameTableMap(a, b *replication.TableMapEvent) bool {
	if a == nil || b == nil || a.ColumnCount != b.ColumnCount || !bytes.Equal(a.ColumnType, b.ColumnType) ||
		!slices.Equal(a.ColumnMeta, b.ColumnMeta) || !bytes.Equal(a.SignednessBitmap, b.SignednessBitmap) ||
		!slices.Equal(a.DefaultCharset, b.DefaultCharset) || !slices.Equal(a.ColumnCharset, b.ColumnCharset) ||
		!slices.Equal(a.PrimaryKey, b.PrimaryKey) || len(a.ColumnName) != len(b.ColumnName) {
		return false
	}
	for i := range a.ColumnName {
		if !bytes.Equal(a.ColumnName[i], b.ColumnName[i]) {
			return false
		}
	}
	return true
}

// stopForTableMap stops a table whose rows event does not match its schema:
// its changes in the open transaction are dropped, and a ChangeStop is
// recorded in it.
func (r *reader) stopForTableMap(id cdcsync.TableID, err error) {
	r.stopTable(id, fmt.Sprintf("a rows event at %s does not match the table's schema: %v", r.position(), err), true)
}

// stopTable stops a table at the open transaction (or, with recopyOK and
// ddl.incompatible: recopy, copies it again): the table's changes of the
// transaction are dropped, so it holds nothing of it. recopyOK is false
// for reasons a new copy does not cure (a server setting, a value).
func (r *reader) stopTable(id cdcsync.TableID, reason string, recopyOK bool) {
	r.begin()
	r.txn.Changes = slices.DeleteFunc(r.txn.Changes, func(c cdcsync.Change) bool { return c.Table == id })
	r.txn.DDL = append(r.txn.DDL, r.policyChange(id, "", reason, recopyOK))
}

// eventAt names where an event is, for messages: the binlog file and the
// event's end offset, and the transaction's GTID when it has one.
func (r *reader) eventAt(h *replication.EventHeader) string {
	at := fmt.Sprintf("%s:%d", r.file, h.LogPos)
	if r.txn != nil && r.txn.GTID != "" {
		at += " (GTID " + r.txn.GTID + ")"
	}
	return at
}

// CurrentPosition reads the server's current binlog position: its file and
// offset, and its GTID set.
func CurrentPosition(ctx context.Context, conn *client.Conn, flavor, serverUUID string) (cdcsync.Position, error) {
	pos, err := currentPos(conn, flavor, serverUUID)
	return pos.Position(), err
}

func currentPos(conn *client.Conn, flavor, serverUUID string) (binlogpos.Pos, error) {
	pos := binlogpos.Pos{Flavor: flavor, ServerUUID: serverUUID}
	res, err := conn.Execute("SHOW BINARY LOG STATUS") // MySQL 8.4 renamed SHOW MASTER STATUS
	if err != nil {
		if res, err = conn.Execute("SHOW MASTER STATUS"); err != nil {
			return pos, fmt.Errorf("read the binlog position: %w", err)
		}
	}
	if res.RowNumber() == 0 {
		return pos, errors.New("SHOW MASTER STATUS returned nothing: the binlog is off; enable log_bin")
	}
	pos.File, _ = res.GetString(0, 0)
	off, _ := res.GetUint(0, 1)
	pos.Offset = uint32(off)
	if flavor == binlogpos.FlavorMariaDB {
		r, err := conn.Execute("SELECT @@gtid_binlog_pos")
		if err != nil {
			return pos, fmt.Errorf("read the GTID position: %w", err)
		}
		pos.GTIDSet, _ = r.GetString(0, 0)
	} else if res.ColumnNumber() >= 5 {
		// A server that had GTIDs once keeps them in gtid_executed after
		// gtid_mode goes OFF, and then writes anonymous transactions:
		// positions are files then (ErrAnonymousTransaction).
		r, err := conn.Execute("SELECT @@GLOBAL.gtid_mode")
		if err != nil {
			return pos, fmt.Errorf("read gtid_mode: %w", err)
		}
		if mode, _ := r.GetString(0, 0); strings.EqualFold(mode, "ON") {
			g, _ := res.GetString(0, 4)
			pos.GTIDSet = strings.ReplaceAll(g, "\n", "")
		}
	}
	pos.File, pos.GTIDSet = strings.Clone(pos.File), strings.Clone(pos.GTIDSet)
	return pos, nil
}

// SameSchemas checks that the tables ids still have the schemas want gives,
// as information_schema shows them now.
func SameSchemas(ctx context.Context, src *config.Source, ids []cdcsync.TableID, want func(cdcsync.TableID) *cdcsync.TableSchema) error {
	if len(ids) == 0 {
		return nil
	}
	conn, err := Connect(ctx, src)
	if err != nil {
		return err
	}
	defer conn.Close()
	now, err := LoadSchemas(ctx, conn, ids)
	if err != nil {
		return err
	}
	for i, id := range ids {
		if w := want(id); !w.Same(now[i]) {
			return fmt.Errorf("table %s changed while its copy started (now %s, cdcsync read %s); the copy starts again", id, describeSchema(now[i]), describeSchema(w))
		}
	}
	return nil
}
