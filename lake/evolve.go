package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
)

// Table properties in which cdcsync keeps, with each Iceberg table, what it
// needs to follow the MySQL table's schema after a restart. They change in
// the same commit as the Iceberg schema.
const (
	// PropMySQLSchema is the MySQL schema the Iceberg table mirrors and the
	// binlog position of the DDL statement that produced it (JSON).
	PropMySQLSchema = "cdcsync.mysql-schema"
	// PropStopped marks a table cdcsync stopped mirroring (JSON: why, where).
	PropStopped = "cdcsync.stopped"
	// PropRecopy marks a table that must be copied again from MySQL.
	PropRecopy = "cdcsync.recopy"
	// PropShadows holds the shadow tables of online schema change tools
	// that derive from the table (JSON list).
	PropShadows = "cdcsync.shadows"
	// PropSource names the MySQL table (db.table).
	PropSource = "cdcsync.source"
	// PropForeignKeys holds the table's foreign keys and the binlog
	// position they are as of (JSON, storedKeys): a restart follows the
	// keys as they were at the table's position, not as MySQL has them now.
	PropForeignKeys = "cdcsync.foreign-keys"
	// PropPipeline names the pipeline that created the table and alone
	// writes to it.
	PropPipeline = "cdcsync.pipeline"
)

// storedSchema is the JSON of PropMySQLSchema. Kinds are stored by name, so
// that the numbering of cdcsync.Kind may change.
type storedSchema struct {
	Position *cdcsync.Position `json:"position,omitempty"`
	Database string            `json:"database"`
	Table    string            `json:"table"`
	Columns  []storedColumn    `json:"columns"`
	Key      []string          `json:"primary_key"`
}

type storedColumn struct {
	Name       string `json:"name"`
	DataType   string `json:"data_type"`
	ColumnType string `json:"column_type"`
	Kind       string `json:"kind"`
	Nullable   bool   `json:"nullable,omitempty"`
	Unsigned   bool   `json:"unsigned,omitempty"`
	Precision  int    `json:"precision,omitempty"`
	Scale      int    `json:"scale,omitempty"`
}

// EncodeSchema is the JSON form of a MySQL schema kept in PropMySQLSchema.
func EncodeSchema(ts *cdcsync.TableSchema, pos cdcsync.Position) string {
	s := storedSchema{Database: ts.ID.Database, Table: ts.ID.Table}
	if !pos.IsZero() {
		s.Position = &pos
	}
	for _, c := range ts.Columns {
		s.Columns = append(s.Columns, storedColumn{Name: c.Name, DataType: c.DataType, ColumnType: c.ColumnType,
			Kind: c.Kind.String(), Nullable: c.Nullable, Unsigned: c.Unsigned, Precision: c.Precision, Scale: c.Scale})
	}
	for _, k := range ts.PrimaryKey {
		s.Key = append(s.Key, ts.Columns[k].Name)
	}
	b, _ := json.Marshal(s) // strings, ints and bools always marshal
	return string(b)
}

// DecodeSchema reads the form EncodeSchema writes.
func DecodeSchema(text string) (*cdcsync.TableSchema, cdcsync.Position, error) {
	var s storedSchema
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return nil, cdcsync.Position{}, fmt.Errorf("malformed %s: %w", PropMySQLSchema, err)
	}
	ts := &cdcsync.TableSchema{ID: cdcsync.TableID{Database: s.Database, Table: s.Table}}
	for _, c := range s.Columns {
		k, ok := kindByName(c.Kind)
		if !ok {
			return nil, cdcsync.Position{}, fmt.Errorf("malformed %s: column %s has unknown kind %q", PropMySQLSchema, c.Name, c.Kind)
		}
		ts.Columns = append(ts.Columns, cdcsync.Column{Name: c.Name, DataType: c.DataType, ColumnType: c.ColumnType, Kind: k,
			Nullable: c.Nullable, Unsigned: c.Unsigned, Precision: c.Precision, Scale: c.Scale})
	}
	for _, k := range s.Key {
		i := ts.ColumnIndex(k)
		if i < 0 {
			return nil, cdcsync.Position{}, fmt.Errorf("malformed %s: key column %s is not a column", PropMySQLSchema, k)
		}
		ts.PrimaryKey = append(ts.PrimaryKey, i)
	}
	var pos cdcsync.Position
	if s.Position != nil {
		pos = *s.Position
	}
	return ts, pos, nil
}

func kindByName(name string) (cdcsync.Kind, bool) {
	for k := cdcsync.KindInvalid + 1; ; k++ {
		n := k.String()
		if strings.HasPrefix(n, "kind(") {
			return cdcsync.KindInvalid, false
		}
		if n == name {
			return k, true
		}
	}
}

// storedShadow is one entry of PropShadows.
type storedShadow struct {
	ID       cdcsync.TableID        `json:"id"`
	Position cdcsync.Position       `json:"position"`
	Schema   json.RawMessage        `json:"schema,omitempty"`
	Sources  []cdcsync.ColumnSource `json:"sources,omitempty"`
}

// ShadowState is a shadow table remembered with its base table.
type ShadowState struct {
	Shadow cdcsync.Shadow
	Pos    cdcsync.Position
}

// Stopped returns why cdcsync stopped mirroring the table, if it did.
func (t *Table) Stopped() (cdcsync.StopInfo, bool) { return StoppedIn(t.current().Properties()) }

// StoppedIn reads the stop record of a table's properties, if it has one.
func StoppedIn(props iceberg.Properties) (cdcsync.StopInfo, bool) {
	v, ok := props[PropStopped]
	if !ok {
		return cdcsync.StopInfo{}, false
	}
	var s cdcsync.StopInfo
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		s.Reason = v
	}
	return s, true
}

// NeedsRecopy reports whether the table is marked to be copied again.
func (t *Table) NeedsRecopy() (string, bool) {
	v, ok := t.current().Properties()[PropRecopy]
	return v, ok
}

// SchemaPos is the binlog position the table's MySQL schema is as of.
func (t *Table) SchemaPos() cdcsync.Position { return t.schemaPos }

// Shadows returns the shadow tables remembered with the table.
func (t *Table) Shadows() ([]ShadowState, error) {
	v, ok := t.current().Properties()[PropShadows]
	if !ok || v == "" {
		return nil, nil
	}
	var list []storedShadow
	if err := json.Unmarshal([]byte(v), &list); err != nil {
		return nil, fmt.Errorf("malformed %s of %s: %w", PropShadows, t.ID, err)
	}
	var out []ShadowState
	for _, s := range list {
		st := ShadowState{Shadow: cdcsync.Shadow{ID: s.ID, Sources: s.Sources}, Pos: s.Position}
		if len(s.Schema) > 0 {
			ts, _, err := DecodeSchema(string(s.Schema))
			if err != nil {
				return nil, err
			}
			st.Shadow.Schema = ts
		}
		out = append(out, st)
	}
	return out, nil
}

// storedState reads the table's PropMySQLSchema.
func storedState(tbl *table.Table) (*cdcsync.TableSchema, cdcsync.Position, bool, error) {
	v, ok := tbl.Properties()[PropMySQLSchema]
	if !ok {
		return nil, cdcsync.Position{}, false, nil
	}
	ts, pos, err := DecodeSchema(v)
	if err != nil {
		return nil, cdcsync.Position{}, false, fmt.Errorf("Iceberg table %s: %w", strings.Join(tbl.Identifier(), "."), err)
	}
	return ts, pos, true, nil
}

// compatibleColumns checks that the Iceberg schema holds exactly the
// columns of ts, each with the type ts maps to (or, for a DECIMAL, a wider
// precision: a narrowed MySQL column keeps its Iceberg type).
func compatibleColumns(ts *cdcsync.TableSchema, sc *iceberg.Schema) error {
	if len(sc.Fields()) != len(ts.Columns) {
		return fmt.Errorf("MySQL has %d columns, Iceberg %d", len(ts.Columns), len(sc.Fields()))
	}
	for _, c := range ts.Columns {
		f, ok := sc.FindFieldByName(c.Name)
		if !ok {
			return fmt.Errorf("column %s is not in the Iceberg table", c.Name)
		}
		want, err := icebergType(&c)
		if err != nil {
			return fmt.Errorf("column %s: %w", c.Name, err)
		}
		if !typeHolds(f.Type, want) {
			return fmt.Errorf("column %s is %s in MySQL and %s in Iceberg", c.Name, want, f.Type)
		}
	}
	return nil
}

// typeHolds reports whether an Iceberg column of type have holds the values
// of type want.
func typeHolds(have, want iceberg.Type) bool {
	if have.Equals(want) {
		return true
	}
	h, ok1 := have.(iceberg.DecimalType)
	w, ok2 := want.(iceberg.DecimalType)
	return ok1 && ok2 && h.Scale() == w.Scale() && h.Precision() >= w.Precision()
}

// ErrIncompatible reports a schema change Iceberg cannot express.
var ErrIncompatible = errors.New("Iceberg cannot express the schema change")

// ApplyChange applies a schema change to the table at the epoch's position.
// t is updated in place (for a rename it gets its new name and identifier);
// dropped reports that the Iceberg table was dropped (ddl.drop_table: drop).
// Every change commits atomically with the table's properties, and is
// idempotent: after a failed commit that the catalog applied anyway, it
// succeeds.
func (l *Lake) ApplyChange(ctx context.Context, t *Table, e Epoch, ch *cdcsync.SchemaChange) (dropped bool, err error) {
	ctx = l.Scope(ctx)
	switch ch.Kind {
	case cdcsync.ChangeSchema:
		out, err := l.evolve(ctx, t, e, ch)
		if err != nil {
			return false, err
		}
		t.adopt(out)
		return false, nil
	case cdcsync.ChangeTruncate:
		return false, t.truncate(ctx, e)
	case cdcsync.ChangeStop, cdcsync.ChangeDrop:
		if ch.Kind == cdcsync.ChangeDrop && !ch.Keep && l.opts.DropTable == "drop" {
			if err := l.cat.DropTable(ctx, t.Ident); err != nil && !errors.Is(err, catalog.ErrNoSuchTable) {
				return false, fmt.Errorf("drop the Iceberg table %s of %s: %w", strings.Join(t.Ident, "."), t.ID, err)
			}
			l.log.Warn("dropped the Iceberg table of a table dropped in MySQL (ddl.drop_table: drop)", "table", t.ID.String(),
				"iceberg", strings.Join(t.Ident, "."), "position", e.Pos.String())
			return true, nil
		}
		info := cdcsync.StopInfo{Position: e.Pos, Reason: ch.Reason, Statement: abbreviate(ch.Statement, 2000), Time: time.Now().UTC(),
			Dropped: ch.Kind == cdcsync.ChangeDrop, NoRecopy: ch.NoRecopy}
		b, _ := json.Marshal(info)
		return false, t.setProps(ctx, e, iceberg.Properties{PropStopped: string(b)}, nil)
	case cdcsync.ChangeRecopy:
		info := cdcsync.StopInfo{Position: e.Pos, Reason: ch.Reason, Statement: abbreviate(ch.Statement, 2000), Time: time.Now().UTC()}
		b, _ := json.Marshal(info)
		return false, t.setProps(ctx, e, iceberg.Properties{PropRecopy: string(b)}, nil)
	case cdcsync.ChangeShadow:
		return false, t.updateShadow(ctx, e, ch.Shadow)
	case cdcsync.ChangeForeignKeys:
		if ch.KeysUnknown {
			if _, ok := t.current().Properties()[PropForeignKeys]; !ok {
				return false, nil
			}
			return false, t.setProps(ctx, e, nil, []string{PropForeignKeys})
		}
		return false, t.SetForeignKeys(ctx, e, ch.ForeignKeys)
	case cdcsync.ChangeRename:
		out, err := l.rename(ctx, t, e, ch)
		if out != nil {
			t.adopt(out)
		}
		return false, err
	}
	return false, fmt.Errorf("unknown schema change %s of %s", ch.Kind, t.ID)
}

// adopt makes t the table o describes, keeping its hooks.
func (t *Table) adopt(o *Table) {
	bc := t.BeforeCommit
	*t = *o
	t.BeforeCommit = bc
}

func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// setProps commits property changes (and removals) alone. It succeeds when
// a reload shows them applied.
func (t *Table) setProps(ctx context.Context, e Epoch, set iceberg.Properties, remove []string) error {
	ctx = t.scope(ctx)
	tx := t.current().NewTransaction()
	if len(set) > 0 {
		if err := tx.SetProperties(set); err != nil {
			return fmt.Errorf("%s: %w", t.ID, err)
		}
	}
	if len(remove) > 0 {
		if err := tx.RemoveProperties(remove); err != nil {
			return fmt.Errorf("%s: %w", t.ID, err)
		}
	}
	if err := t.mayCommit(); err != nil {
		return fmt.Errorf("%s: %w", t.ID, err)
	}
	next, err := tx.Commit(ctx)
	if err == nil {
		t.setCurrent(next)
		return nil
	}
	fresh, lerr := t.reload(ctx)
	if lerr != nil {
		return fmt.Errorf("update the properties of %s at %s: %w (and reloading the table failed: %v)", t.ID, e.Pos, err, lerr)
	}
	props := fresh.Properties()
	applied := true
	for k, v := range set {
		if props[k] != v {
			applied = false
		}
	}
	for _, k := range remove {
		if _, ok := props[k]; ok {
			applied = false
		}
	}
	t.setCurrent(fresh)
	if applied {
		return nil
	}
	return fmt.Errorf("update the properties of %s at %s: %w", t.ID, e.Pos, err)
}

func (t *Table) updateShadow(ctx context.Context, e Epoch, sh *cdcsync.Shadow) error {
	cur, err := t.Shadows()
	if err != nil {
		return err
	}
	var list []storedShadow
	for _, s := range cur {
		if s.Shadow.ID == sh.ID {
			continue
		}
		list = append(list, toStored(s.Shadow, s.Pos))
	}
	if !sh.Dropped {
		list = append(list, toStored(*sh, e.Pos))
	}
	if len(list) == 0 {
		if _, ok := t.current().Properties()[PropShadows]; !ok {
			return nil
		}
		return t.setProps(ctx, e, nil, []string{PropShadows})
	}
	b, err := json.Marshal(list)
	if err != nil {
		return fmt.Errorf("encode the shadow tables of %s: %w", t.ID, err)
	}
	return t.setProps(ctx, e, iceberg.Properties{PropShadows: string(b)}, nil)
}

func toStored(s cdcsync.Shadow, pos cdcsync.Position) storedShadow {
	st := storedShadow{ID: s.ID, Position: pos, Sources: s.Sources}
	if s.Schema != nil {
		st.Schema = json.RawMessage(EncodeSchema(s.Schema, cdcsync.Position{}))
	}
	return st
}

// truncate deletes every row at the epoch's position: one delete snapshot
// whose summary carries the epoch, so the position is read back like any
// commit's.
func (t *Table) truncate(ctx context.Context, e Epoch) error {
	ctx = t.scope(ctx)
	base := t.current()
	ref := refOf(base.Metadata()) // a table being copied again is truncated on its copy branch
	tx, err := t.newTx(base, ref)
	if err != nil {
		return err
	}
	if head(base.Metadata(), ref) != nil {
		if err := tx.Delete(ctx, iceberg.AlwaysTrue{}, t.summary(e, t.Copying())); err != nil {
			return fmt.Errorf("truncate %s: %w", t.ID, err)
		}
	}
	if err := tx.AddFiles(ctx, nil, t.summary(e, t.Copying()), false); err != nil {
		return fmt.Errorf("record the truncation of %s: %w", t.ID, err)
	}
	return t.finish(ctx, tx, e, base, t.summary(e, t.Copying()))
}

// rename renames the Iceberg table to the identifier of the MySQL table's
// new name and records the new name and schema.
func (l *Lake) rename(ctx context.Context, t *Table, e Epoch, ch *cdcsync.SchemaChange) (*Table, error) {
	to := l.Identifier(ch.NewID.Database, ch.NewID.Table)
	tbl := t.current()
	if !slices.Equal(to, t.Ident) {
		if err := l.cat.CreateNamespace(ctx, table.Identifier{to[0]}, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
			return nil, fmt.Errorf("create namespace %s: %w", to[0], err)
		}
		if other, err := l.cat.LoadTable(ctx, to); err == nil && other.Metadata().TableUUID() != t.current().Metadata().TableUUID() {
			return nil, fmt.Errorf("%w: cannot rename the Iceberg table %s to %s (MySQL %s renamed to %s): an Iceberg table of that name exists; "+
				"drop it if it is stale", ErrIncompatible, strings.Join(t.Ident, "."), strings.Join(to, "."), t.ID, ch.NewID)
		}
		var err error
		tbl, err = l.cat.RenameTable(ctx, t.Ident, to)
		if err != nil {
			// Maybe the rename was applied and the answer lost.
			fresh, lerr := l.cat.LoadTable(ctx, to)
			if lerr != nil || fresh.Metadata().TableUUID() != t.current().Metadata().TableUUID() {
				return nil, fmt.Errorf("rename the Iceberg table %s to %s (MySQL %s renamed to %s): %w", strings.Join(t.Ident, "."),
					strings.Join(to, "."), t.ID, ch.NewID, err)
			}
			tbl = fresh
		}
	}
	ts := ch.Schema
	if ts == nil {
		c := *t.Schema
		ts = &c
	}
	ts.ID = ch.NewID
	nt, err := l.newTable(ts, to, tbl)
	if err != nil {
		return nil, err
	}
	nt.BeforeCommit = t.BeforeCommit
	if err := nt.setProps(ctx, e, iceberg.Properties{PropSource: ch.NewID.String(), PropMySQLSchema: EncodeSchema(ts, e.Pos)}, nil); err != nil {
		return nt, err
	}
	nt.schemaPos = e.Pos
	l.log.Info("renamed the Iceberg table of a renamed MySQL table", "from", t.ID.String(), "to", ch.NewID.String(),
		"iceberg", strings.Join(to, "."), "position", e.Pos.String())
	return nt, nil
}

// evolve applies a ChangeSchema: the Iceberg schema follows the MySQL one
// (renames keep the field id, promotions change the type in place, new
// columns are added as optional fields, the primary key becomes the
// identifier fields), and the MySQL schema is recorded, in one commit. When
// new columns get a value in the existing rows, the same commit rewrites
// them.
func (l *Lake) evolve(ctx context.Context, t *Table, e Epoch, ch *cdcsync.SchemaChange) (*Table, error) {
	if len(ch.Sources) != len(ch.Schema.Columns) {
		return nil, fmt.Errorf("schema change of %s: %d sources for %d columns", t.ID, len(ch.Sources), len(ch.Schema.Columns))
	}
	base := t.current()
	tx := base.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return nil, fmt.Errorf("%s: %w", t.ID, err)
	}
	// Staging is deterministic: an error here is Iceberg refusing the change.
	readd, err := evolveSchema(tx, base.Schema(), t.Schema, ch)
	if err != nil {
		if errors.Is(err, ErrIncompatible) {
			return nil, fmt.Errorf("evolve the Iceberg schema of %s: %w", t.ID, err)
		}
		return nil, fmt.Errorf("evolve the Iceberg schema of %s: %w: %w", t.ID, ErrIncompatible, err)
	}
	if err := tx.SetProperties(iceberg.Properties{PropMySQLSchema: EncodeSchema(ch.Schema, e.Pos)}); err != nil {
		return nil, fmt.Errorf("%s: %w", t.ID, err)
	}
	staged, err := tx.StagedTable()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.ID, err)
	}
	nt, err := l.newTable(ch.Schema, t.Ident, staged.Table)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIncompatible, err)
	}
	nt.BeforeCommit = t.BeforeCommit
	rewritten := int64(0)
	if (ch.NeedsRewrite() || readd) && base.CurrentSnapshot() != nil {
		rewritten, err = t.rewriteRows(ctx, tx, staged.Table, nt, e, ch)
		if err != nil {
			return nil, err
		}
		if err := t.recordCommitted(tx, t.summary(e, t.Copying())); err != nil {
			return nil, err
		}
	}
	if nt.BeforeCommit != nil {
		nt.BeforeCommit()
	}
	next, err := tx.Commit(ctx)
	if err != nil {
		fresh, lerr := t.reload(ctx)
		if lerr != nil {
			return nil, fmt.Errorf("evolve %s at %s: %w (and reloading the table failed: %v)", t.ID, e.Pos, err, lerr)
		}
		got, pos, ok, _ := storedState(fresh)
		if !ok || pos != e.Pos || EncodeSchema(got, pos) != EncodeSchema(ch.Schema, e.Pos) {
			t.setCurrent(fresh)
			return nil, fmt.Errorf("evolve %s at %s: %w", t.ID, e.Pos, err)
		}
		next = fresh
	}
	out, err := l.newTable(ch.Schema, t.Ident, next)
	if err != nil {
		return nil, err
	}
	out.BeforeCommit = t.BeforeCommit
	out.schemaPos = e.Pos
	l.log.Info("evolved the Iceberg schema", "table", t.ID.String(), "schema_id", next.Schema().ID, "position", e.Pos.String(),
		"rows_rewritten", rewritten)
	return out, nil
}

// evolveSchema stages the Iceberg schema change from old (the MySQL schema
// the Iceberg schema cur mirrors) to ch.Schema in tx, as one schema update
// (a transaction holds one): drops, renames (which keep the field id),
// promotions, nullability, new columns (optional, or required when they
// join the primary key), MySQL's column order and the identifier fields.
//
// A column renamed to a name another kept column still has (a swap of two
// names) cannot be renamed in place: it is dropped and added again under a
// new field id, and readd reports that the rows must be rewritten to carry
// its values over.
func evolveSchema(tx *table.Transaction, cur *iceberg.Schema, old *cdcsync.TableSchema, ch *cdcsync.SchemaChange) (readd bool, err error) {
	nw := ch.Schema
	kept := map[string]bool{} // original names renamed in place or kept
	inKey := map[string]bool{}
	for _, k := range nw.PrimaryKey {
		inKey[nw.Columns[k].Name] = true
	}
	type plan struct {
		field  iceberg.NestedField
		inKept bool // keeps its field id
		want   iceberg.Type
	}
	plans := make([]plan, len(nw.Columns))
	keptNames := map[string]bool{}
	for _, s := range ch.Sources {
		if s.From != "" {
			keptNames[s.From] = true
		}
	}
	needIncompatible := false
	for i, s := range ch.Sources {
		c := &nw.Columns[i]
		want, err := icebergType(c)
		if err != nil {
			return false, fmt.Errorf("column %s: %w", c.Name, err)
		}
		plans[i].want = want
		if s.From == "" {
			if inKey[c.Name] {
				needIncompatible = true // a required column without a default
			}
			continue
		}
		f, ok := cur.FindFieldByName(s.From)
		if !ok {
			return false, fmt.Errorf("column %s is not in the Iceberg table", s.From)
		}
		if c.Name != s.From && keptNames[c.Name] {
			readd = true // its new name is another kept column's old name
			if inKey[c.Name] {
				needIncompatible = true
			}
			continue
		}
		if !typeHolds(f.Type, want) {
			if _, err := iceberg.PromoteType(f.Type, want); err != nil {
				return false, fmt.Errorf("%w: column %s from %s to %s", ErrIncompatible, c.Name, f.Type, want)
			}
		}
		if !f.Required && inKey[c.Name] {
			needIncompatible = true
		}
		plans[i].field, plans[i].inKept = f, true
		kept[s.From] = true
	}
	u := tx.UpdateSchema(true, needIncompatible)
	for _, c := range old.Columns {
		if !kept[c.Name] {
			u.DeleteColumn([]string{c.Name})
		}
	}
	moveName := make([]string, len(nw.Columns)) // how a move finds the column
	movable := make([]bool, len(nw.Columns))
	for i, s := range ch.Sources {
		c := &nw.Columns[i]
		pl := plans[i]
		if !pl.inKept {
			u.AddColumn([]string{c.Name}, pl.want, "", inKey[c.Name], nil)
			moveName[i] = c.Name
			// A move looks a name up in the old schema first.
			_, taken := cur.FindFieldByName(c.Name)
			movable[i] = !taken
			continue
		}
		moveName[i], movable[i] = s.From, true
		var upd table.ColumnUpdate
		if c.Name != s.From {
			upd.Name = iceberg.Optional[string]{Valid: true, Val: c.Name}
		}
		if !typeHolds(pl.field.Type, pl.want) {
			upd.FieldType = iceberg.Optional[iceberg.Type]{Valid: true, Val: pl.want}
		}
		switch {
		case pl.field.Required && c.Nullable && !inKey[c.Name]:
			upd.Required = iceberg.Optional[bool]{Valid: true, Val: false}
		case !pl.field.Required && inKey[c.Name]:
			// A new primary key column: MySQL made it NOT NULL, so no row
			// holds NULL.
			upd.Required = iceberg.Optional[bool]{Valid: true, Val: true}
		}
		if upd.Name.Valid || upd.FieldType.Valid || upd.Required.Valid {
			u.UpdateColumn([]string{s.From}, upd)
		}
	}
	// MySQL's column order. A new column whose name an old column had
	// cannot be named in a move and stays last.
	prev := ""
	for i := range nw.Columns {
		if !movable[i] {
			continue
		}
		if prev == "" {
			u.MoveFirst([]string{moveName[i]})
		} else {
			u.MoveAfter([]string{moveName[i]}, []string{prev})
		}
		prev = moveName[i]
	}
	var ids [][]string
	for _, k := range nw.PrimaryKey {
		ids = append(ids, []string{nw.Columns[k].Name})
	}
	u.SetIdentifierField(ids)
	return readd, u.Commit()
}

// rewriteRows stages, in tx, the replacement of every row of the table by
// the same row under the new schema, with the fill values in the new
// columns. It streams: rows are read, mapped and written batch by batch.
func (t *Table) rewriteRows(ctx context.Context, tx *table.Transaction, staged *table.Table, nt *Table, e Epoch, ch *cdcsync.SchemaChange) (int64, error) {
	old := t.Schema
	from := make([]int, len(ch.Schema.Columns))
	for i, s := range ch.Sources {
		from[i] = -1
		if s.From != "" {
			from[i] = old.ColumnIndex(s.From)
			if from[i] < 0 {
				return 0, fmt.Errorf("rewrite %s: column %s is not in the old schema", t.ID, s.From)
			}
		}
	}
	mapRow := func(r cdcsync.Row) cdcsync.Row {
		out := make(cdcsync.Row, len(from))
		for i, j := range from {
			if j < 0 {
				if i < len(ch.Fills) {
					out[i] = ch.Fills[i]
				}
				continue
			}
			out[i] = convertValue(r[j], ch.Schema.Columns[i].Kind)
		}
		return out
	}
	// Staged rows (staged.go) are in no order of partition: they are
	// written staged again, below, and the clustered writer gets the rest.
	recs, err := scanByPartition(ctx, t.current(), func(df iceberg.DataFile) bool { return !t.isStaged(df) })
	if err != nil {
		return 0, fmt.Errorf("read %s to rewrite it: %w", t.ID, err)
	}
	var n int64
	var readErr error
	batches := func(yield func(arrow.RecordBatch, error) bool) {
		bb := newBatchBuilder(nt.dataOut)
		defer bb.release()
		for rec, err := range recs {
			if err != nil {
				readErr = err
				yield(nil, err)
				return
			}
			rows, err := rowsFromBatch(rec, old)
			rec.Release()
			if err != nil {
				readErr = err
				yield(nil, err)
				return
			}
			for _, r := range rows {
				out := mapRow(r)
				if err := bb.add(out); err != nil {
					readErr = fmt.Errorf("%s: %w", t.ID, err)
					yield(nil, readErr)
					return
				}
				n++
			}
			if bb.full() {
				if !yield(bb.flush(), nil) {
					return
				}
			}
		}
		if bb.n > 0 {
			yield(bb.flush(), nil)
		}
	}
	var files []iceberg.DataFile
	// The rows come partition after partition, so the clustered writer
	// keeps one file open (iceberg-go's fanout writer keeps one per
	// partition and loses the rows of one that fails to open).
	for f, err := range table.WriteRecords(ctx, staged, nt.dataOut.schema, iter.Seq2[arrow.RecordBatch, error](batches),
		table.WithClusteredWrite(), table.WithRecordBatchBufferSize(rewriteQueuedBatches)) {
		if err != nil {
			return 0, fmt.Errorf("write the rewritten rows of %s: %w", t.ID, err)
		}
		files = append(files, f)
	}
	if readErr != nil {
		return 0, readErr
	}
	if err := checkRowCount(files, n); err != nil {
		return 0, fmt.Errorf("the rewritten rows of %s: %w", t.ID, err)
	}
	if t.stageFile != nil {
		more, rows, err := t.rewriteStagedRows(ctx, staged, nt, mapRow)
		files = append(files, more...)
		n += rows
		if err != nil {
			t.removeFiles(ctx, staged, files)
			return 0, err
		}
	}
	if err := tx.Delete(ctx, iceberg.AlwaysTrue{}, t.summary(e, t.Copying())); err != nil {
		return 0, fmt.Errorf("replace the rows of %s: %w", t.ID, err)
	}
	if len(files) > 0 {
		if err := tx.NewRowDelta(t.summary(e, t.Copying())).AddRows(files...).Commit(ctx); err != nil {
			return 0, fmt.Errorf("stage the rewritten rows of %s: %w", t.ID, err)
		}
	}
	return n, nil
}

// rewriteStagedRows writes the live rows of t's staged files, mapped to
// nt's schema, as staged files of nt, a chunk at a time.
func (t *Table) rewriteStagedRows(ctx context.Context, tbl *table.Table, nt *Table, mapRow func(cdcsync.Row) cdcsync.Row) ([]iceberg.DataFile, int64, error) {
	recs, err := scanByPartition(ctx, t.current(), t.isStaged)
	if err != nil {
		return nil, 0, fmt.Errorf("read the staged rows of %s to rewrite them: %w", t.ID, err)
	}
	var (
		files []iceberg.DataFile
		n     int64
	)
	err = inChunks(recs, t.Schema, nil, mapRow, func(rows []cdcsync.Row) error {
		fs, err := nt.writeFiles(ctx, tbl, nt.stageFile, rows, nil)
		files = append(files, fs...)
		n += int64(len(rows))
		return err
	})
	if err != nil {
		return files, n, fmt.Errorf("rewrite the staged rows of %s: %w", t.ID, err)
	}
	return files, n, nil
}

// convertValue converts a canonical value to a promoted kind.
func convertValue(v any, k cdcsync.Kind) any {
	switch x := v.(type) {
	case int32:
		if k == cdcsync.KindInt64 {
			return int64(x)
		}
	case float32:
		if k == cdcsync.KindFloat64 {
			return float64(x)
		}
	}
	return v
}

// PrepareRecopy gets a table marked for a new copy ready for it: the
// Iceberg schema is evolved to ts, the MySQL schema as information_schema
// shows it now (a column whose type cannot be promoted is dropped and added
// again, under a new field id, so old snapshots still read their values).
// StartCopy then empties the table and removes the mark, and the copy
// refills it.
func (l *Lake) PrepareRecopy(ctx context.Context, t *Table, ts *cdcsync.TableSchema) (*Table, error) {
	ctx = l.Scope(ctx)
	cur := t.current().Schema()
	old := t.Schema
	ch := &cdcsync.SchemaChange{Table: ts.ID, Kind: cdcsync.ChangeSchema, Schema: ts}
	for _, c := range ts.Columns {
		src := cdcsync.ColumnSource{}
		if f, ok := cur.FindFieldByName(c.Name); ok && old.ColumnIndex(c.Name) >= 0 {
			want, err := icebergType(&c)
			if err != nil {
				return nil, fmt.Errorf("column %s.%s: %w", ts.ID, c.Name, err)
			}
			if _, err := iceberg.PromoteType(f.Type, want); err == nil || typeHolds(f.Type, want) {
				src.From = c.Name
			}
		}
		ch.Sources = append(ch.Sources, src)
	}
	tx := t.current().NewTransaction()
	if _, err := evolveSchema(tx, cur, old, ch); err != nil {
		return nil, fmt.Errorf("evolve the Iceberg schema of %s for its new copy: %w", t.ID, err)
	}
	if err := tx.SetProperties(iceberg.Properties{PropMySQLSchema: EncodeSchema(ts, cdcsync.Position{})}); err != nil {
		return nil, err
	}
	next, err := tx.Commit(ctx)
	if err != nil {
		return nil, fmt.Errorf("evolve the Iceberg schema of %s for its new copy: %w", t.ID, err)
	}
	nt, err := l.newTable(ts, t.Ident, next)
	if err != nil {
		return nil, err
	}
	nt.BeforeCommit = t.BeforeCommit
	return nt, nil
}

// MarkRecopy marks the table to be copied afresh when cdcsync next starts
// (`cdcsync resync --offline`); a table cdcsync stopped mirroring is
// mirrored again that way, so its stop mark goes.
func (t *Table) MarkRecopy(ctx context.Context, reason string) error {
	var remove []string
	if _, ok := t.Stopped(); ok {
		remove = append(remove, PropStopped)
	}
	return t.setProps(ctx, Epoch{}, iceberg.Properties{PropRecopy: reason}, remove)
}

// Logger is the lake's logger.
func (l *Lake) Logger() *slog.Logger { return l.log }

// TableExists reports whether the MySQL table id has an Iceberg table.
func (l *Lake) TableExists(ctx context.Context, id cdcsync.TableID) (bool, error) {
	ctx = l.Scope(ctx)
	ident := l.Identifier(id.Database, id.Table)
	_, err := l.cat.LoadTable(ctx, ident)
	switch {
	case errors.Is(err, catalog.ErrNoSuchTable):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("load table %s: %w", strings.Join(ident, "."), err)
	}
	return true, nil
}

// DropTable drops the Iceberg table of the MySQL table id from the catalog
// (its files stay). cdcsync copies the table again on its next start.
func (l *Lake) DropTable(ctx context.Context, id cdcsync.TableID) error {
	ctx = l.Scope(ctx)
	ident := l.Identifier(id.Database, id.Table)
	if err := l.cat.DropTable(ctx, ident); err != nil {
		return fmt.Errorf("drop table %s: %w", strings.Join(ident, "."), err)
	}
	return nil
}

// Departed returns the Iceberg tables this pipeline mirrors whose MySQL
// table is not among present although source.include selects its name:
// tables dropped or renamed in MySQL while cdcsync was not running (or
// lagging). The stream follows them, with the schema recorded with them,
// up to their DROP or RENAME, so that the changes before it are not lost.
// Stopped tables and tables never committed are left out.
func (l *Lake) Departed(ctx context.Context, present map[cdcsync.TableID]bool) ([]*Table, error) {
	ctx = l.Scope(ctx)
	known := map[string]bool{}
	for id := range present {
		known[strings.Join(l.Identifier(id.Database, id.Table), ".")] = true
	}
	idents, err := l.ListTables(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Table
	for _, ident := range idents {
		if known[strings.Join(ident, ".")] {
			continue
		}
		tbl, err := l.cat.LoadTable(ctx, ident)
		if err != nil {
			return nil, fmt.Errorf("load table %s: %w", strings.Join(ident, "."), err)
		}
		props := tbl.Properties()
		db, name, ok := strings.Cut(props[PropSource], ".")
		if !ok {
			continue
		}
		id := cdcsync.TableID{Database: db, Table: name}
		if present[id] || !l.opts.Tables.Selects(db, name) || !slices.Equal(l.Identifier(db, name), ident) {
			continue
		}
		if _, stopped := props[PropStopped]; stopped {
			continue
		}
		if _, recopy := props[PropRecopy]; recopy {
			continue
		}
		ts, pos, ok, err := storedState(tbl)
		if err != nil || !ok {
			continue
		}
		if c, err := committedIn(tbl, l.opts.Pipeline); err != nil || !c.Found {
			continue
		}
		ts.ID = id
		if compatibleColumns(ts, tbl.Schema()) != nil {
			continue
		}
		t, err := l.newTable(ts, ident, tbl)
		if err != nil {
			continue
		}
		t.schemaPos = pos
		out = append(out, t)
	}
	return out, nil
}

// scanByPartition reads every live row (deletes applied) of the data files
// of tbl that keep selects, one file after another, the files of a
// partition next to each other.
func scanByPartition(ctx context.Context, tbl *table.Table, keep func(iceberg.DataFile) bool) (iter.Seq2[arrow.RecordBatch, error], error) {
	scan := tbl.Scan(table.WithArrowBatchSize(rewriteBatchRows))
	all, err := scan.PlanFiles(ctx)
	if err != nil {
		return nil, err
	}
	var tasks []table.FileScanTask
	for _, tk := range all {
		if keep(tk.File) {
			tasks = append(tasks, tk)
		}
	}
	keys := make([]string, len(tasks))
	for i, tk := range tasks {
		keys[i] = partitionKey(tk.File)
	}
	order := make([]int, len(tasks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	return func(yield func(arrow.RecordBatch, error) bool) {
		for _, i := range order {
			_, recs, err := scan.ReadTasks(ctx, tasks[i:i+1])
			if err != nil {
				yield(nil, fmt.Errorf("read %s: %w", tasks[i].File.FilePath(), err))
				return
			}
			for rec, err := range recs {
				if err != nil {
					yield(nil, fmt.Errorf("read %s: %w", tasks[i].File.FilePath(), err))
					return
				}
				if !yield(rec, nil) {
					rec.Release()
					return
				}
			}
		}
	}, nil
}
