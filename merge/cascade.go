package merge

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cdcsync/cdcsync"
)

// Foreign-key cascades. MariaDB and MySQL before 9.6 apply ON DELETE/ON
// UPDATE CASCADE and SET NULL inside InnoDB and write only the parent's
// change to the binlog, so a mirror of the child table would keep rows
// MySQL deleted or changed. The pipeline applies those actions itself:
// each change of a transaction to a parent table is followed, in the
// transaction, by the changes its foreign keys make to the child rows,
// recursively (a chain of cascades, a table referencing itself), as MySQL
// does at that statement. The child rows are the table's state at that point
// of the stream: its committed rows (RowFinder: the lake), overridden by
// the epoch being committed, by the open epoch and by the transaction's own
// earlier changes.

// RowFinder reads the committed rows of a mirrored table whose columns cols
// (indexes into its schema) hold one of the value tuples vals. The daemon's
// sink reads them from the lake.
type RowFinder interface {
	RowsWhere(ctx context.Context, id cdcsync.TableID, cols []int, vals [][]any) ([]cdcsync.Row, error)
}

// maxCascadeDepth is InnoDB's limit on nested cascades (a deeper chain
// fails the statement in MySQL, so it never reaches the binlog).
const maxCascadeDepth = 15

// ErrCascade marks a cascade the pipeline could not apply.
var ErrCascade = errors.New("cannot apply a foreign-key cascade")

// relation is a foreign key resolved against the current schemas.
type relation struct {
	fk         *cdcsync.ForeignKey
	childCols  []int
	parentCols []int
}

// relations returns the foreign keys whose parent is id, for the children
// the pipeline mirrors.
func (p *Pipeline) relations(id cdcsync.TableID) ([]relation, error) {
	var out []relation
	for i := range p.opts.ForeignKeys {
		fk := &p.opts.ForeignKeys[i]
		if fk.Parent != id || p.schemas[fk.Child] == nil || p.schemas[fk.Parent] == nil {
			continue
		}
		r := relation{fk: fk}
		for j, name := range fk.ChildCols {
			c, pc := p.schemas[fk.Child].ColumnIndex(name), p.schemas[fk.Parent].ColumnIndex(fk.ParentCols[j])
			if c < 0 || pc < 0 {
				return nil, fmt.Errorf("%w: the foreign key %s of %s names %s.%s and %s.%s, which cdcsync does not mirror (a schema change the session has not reloaded)",
					ErrCascade, fk.Name, fk.Child, fk.Child, name, fk.Parent, fk.ParentCols[j])
			}
			r.childCols, r.parentCols = append(r.childCols, c), append(r.parentCols, pc)
		}
		out = append(out, r)
	}
	return out, nil
}

// cascadeRun applies the cascades of one transaction.
type cascadeRun struct {
	p       *Pipeline
	ctx     context.Context
	bufs    []*Buffer                                          // the epochs not committed yet, oldest first
	overlay map[cdcsync.TableID]map[string]cdcsync.Row         // the transaction's changes so far: key -> final row (nil: deleted)
	cache   map[*cdcsync.ForeignKey]map[string][]cdcsync.Row   // child rows before the transaction, by foreign-key value
	index   map[*cdcsync.ForeignKey]map[string]map[string]bool // overlay rows of the child, by foreign-key value
	rels    map[cdcsync.TableID][]relation
	pos     cdcsync.Position // the transaction's
}

// cascade returns t with the changes of the foreign-key actions its
// changes trigger inserted after each of them.
func (p *Pipeline) cascade(ctx context.Context, buf *Buffer, t *cdcsync.Txn) (*cdcsync.Txn, error) {
	if !p.changesParent(t) {
		return t, nil // every transaction without foreign keys: no allocation
	}
	run := &cascadeRun{p: p, ctx: ctx, overlay: map[cdcsync.TableID]map[string]cdcsync.Row{},
		cache: map[*cdcsync.ForeignKey]map[string][]cdcsync.Row{}, index: map[*cdcsync.ForeignKey]map[string]map[string]bool{},
		rels: map[cdcsync.TableID][]relation{}, pos: t.Pos}
	if p.inflight != nil {
		run.bufs = append(run.bufs, p.inflight)
	}
	run.bufs = append(run.bufs, buf)
	// The child rows of every parent change of the transaction are read in
	// one go per foreign key (their state before the transaction does not
	// depend on the order); deeper levels as they come.
	if err := run.prefetch(t.Changes); err != nil {
		return nil, err
	}
	out := make([]cdcsync.Change, 0, len(t.Changes))
	added := 0 // changes the cascades make
	for _, c := range t.Changes {
		out = append(out, c)
		if err := run.note(c); err != nil {
			return nil, err
		}
		frontier := []cdcsync.Change{c}
		for depth := 1; len(frontier) > 0; depth++ {
			if depth > maxCascadeDepth {
				return nil, fmt.Errorf("%w: the cascades of a change to %s at %s go deeper than %d tables (InnoDB's limit)", ErrCascade, c.Table, t.Pos, maxCascadeDepth)
			}
			next, err := run.step(frontier)
			if err != nil {
				return nil, fmt.Errorf("the foreign-key cascades of the transaction at %s: %w", t.Pos, err)
			}
			out = append(out, next...)
			added += len(next)
			frontier = next
		}
	}
	if added == 0 {
		return t, nil
	}
	nt := *t
	nt.Changes = out
	return &nt, nil
}

// changesParent says whether t changes a table that a foreign key with an
// action references.
func (p *Pipeline) changesParent(t *cdcsync.Txn) bool {
	for i := range p.opts.ForeignKeys {
		fk := &p.opts.ForeignKeys[i]
		if fk.OnDelete == cdcsync.FKNoAction && fk.OnUpdate == cdcsync.FKNoAction {
			continue
		}
		for j := range t.Changes {
			if t.Changes[j].Table == fk.Parent {
				return true
			}
		}
	}
	return false
}

func (r *cascadeRun) relations(id cdcsync.TableID) ([]relation, error) {
	if rels, ok := r.rels[id]; ok {
		return rels, nil
	}
	rels, err := r.p.relations(id)
	if err != nil {
		return nil, err
	}
	r.rels[id] = rels
	return rels, nil
}

// trigger is a parent change a foreign key acts on.
type trigger struct {
	rel      relation
	old, new []any // the referenced values before and after (new: nil for a delete)
	action   cdcsync.FKAction
}

// triggers returns what the foreign keys of c's table do for c.
func (r *cascadeRun) triggers(c *cdcsync.Change) ([]trigger, error) {
	rels, err := r.relations(c.Table)
	if err != nil {
		return nil, err
	}
	var out []trigger
	for _, rel := range rels {
		switch c.Op {
		case cdcsync.OpDelete:
			if rel.fk.OnDelete != cdcsync.FKNoAction {
				out = append(out, trigger{rel: rel, old: values(c.Before, rel.parentCols), action: rel.fk.OnDelete})
			}
		case cdcsync.OpUpdate:
			old, upd := values(c.Before, rel.parentCols), values(c.After, rel.parentCols)
			if rel.fk.OnUpdate != cdcsync.FKNoAction && !sameTuple(old, upd) {
				out = append(out, trigger{rel: rel, old: old, new: upd, action: rel.fk.OnUpdate})
			}
		}
	}
	return out, nil
}

// prefetch reads the child rows of every parent change in changes.
func (r *cascadeRun) prefetch(changes []cdcsync.Change) error {
	want := map[*cdcsync.ForeignKey][][]any{}
	rels := map[*cdcsync.ForeignKey]relation{}
	for i := range changes {
		trs, err := r.triggers(&changes[i])
		if err != nil {
			return err
		}
		for _, tr := range trs {
			want[tr.rel.fk] = append(want[tr.rel.fk], tr.old)
			rels[tr.rel.fk] = tr.rel
		}
	}
	for fk, vals := range want {
		if err := r.fetch(rels[fk], vals); err != nil {
			return err
		}
	}
	return nil
}

// step applies the foreign-key actions that the changes of frontier
// trigger and returns the changes they make.
func (r *cascadeRun) step(frontier []cdcsync.Change) ([]cdcsync.Change, error) {
	var trs []trigger
	want := map[*cdcsync.ForeignKey][][]any{}
	for i := range frontier {
		t, err := r.triggers(&frontier[i])
		if err != nil {
			return nil, err
		}
		for _, tr := range t {
			trs = append(trs, tr)
			want[tr.rel.fk] = append(want[tr.rel.fk], tr.old)
		}
	}
	for _, tr := range trs {
		if vals := want[tr.rel.fk]; vals != nil {
			if err := r.fetch(tr.rel, vals); err != nil {
				return nil, err
			}
			delete(want, tr.rel.fk)
		}
	}
	var out []cdcsync.Change
	for _, tr := range trs {
		child := tr.rel.fk.Child
		if r.p.copies[child] != nil {
			r.p.partialCascade(child, r.pos)
		}
		children, err := r.children(tr.rel, tr.old)
		if err != nil {
			return nil, err
		}
		for _, ch := range children {
			c := cdcsync.Change{Table: tr.rel.fk.Child, Op: cdcsync.OpUpdate, Before: ch}
			switch {
			case tr.action == cdcsync.FKCascade && tr.new == nil:
				c.Op = cdcsync.OpDelete
			case tr.action == cdcsync.FKCascade:
				c.After = slices.Clone(ch)
				for i, col := range tr.rel.childCols {
					c.After[col] = tr.new[i]
				}
			default: // SET NULL
				c.After = slices.Clone(ch)
				for _, col := range tr.rel.childCols {
					c.After[col] = nil
				}
			}
			if err := r.note(c); err != nil {
				return nil, err
			}
			out = append(out, c)
			if r.p.m != nil {
				r.p.m.CascadedChanges.WithLabelValues(child.String()).Inc()
			}
		}
	}
	return out, nil
}

// fetch reads the child rows of rel whose foreign key holds one of vals, as
// they are before the transaction, for the values not read yet.
func (r *cascadeRun) fetch(rel relation, vals [][]any) error {
	cache := r.cache[rel.fk]
	if cache == nil {
		cache = map[string][]cdcsync.Row{}
		r.cache[rel.fk] = cache
	}
	var need [][]any
	for _, v := range vals {
		k, ok := cdcsync.AppendTuple(nil, v...)
		if !ok {
			continue // a NULL references nothing
		}
		if _, done := cache[string(k)]; !done {
			cache[string(k)] = nil
			need = append(need, v)
		}
	}
	if len(need) == 0 {
		return nil
	}
	child := rel.fk.Child
	schema := r.p.schemas[child]
	state := map[string]cdcsync.Row{} // by primary key
	if r.p.rows != nil {
		rows, err := r.p.rows.RowsWhere(r.ctx, child, rel.childCols, need)
		if err != nil {
			return fmt.Errorf("%w: read the rows of %s that %s references: %w", ErrCascade, child, rel.fk.Parent, err)
		}
		for _, row := range rows {
			k, err := schema.AppendKey(nil, row)
			if err != nil {
				return err
			}
			state[string(k)] = row
		}
	} else {
		return fmt.Errorf("%w: the sink cannot read the rows of %s", ErrCascade, child)
	}
	// The epochs not committed yet override the lake, oldest first.
	wanted := func(row cdcsync.Row) bool {
		k, ok := cdcsync.AppendTuple(nil, values(row, rel.childCols)...)
		if !ok {
			return false
		}
		rows, asked := cache[string(k)]
		return asked && rows == nil
	}
	for _, b := range r.bufs {
		if err := r.overSpill(b, child, rel, state); err != nil {
			return err
		}
		tb := b.tables[child]
		if tb == nil {
			continue
		}
		var kerr error
		tb.each(func(key, final cdcsync.Row) {
			k, err := schema.AppendKey(nil, key)
			if err != nil {
				kerr = err
				return
			}
			if final != nil && wanted(final) {
				state[string(k)] = final
			} else {
				delete(state, string(k))
			}
		})
		if kerr != nil {
			return kerr
		}
	}
	for _, row := range state {
		k, _ := cdcsync.AppendTuple(nil, values(row, rel.childCols)...)
		cache[string(k)] = append(cache[string(k)], row)
	}
	for _, v := range need {
		k, _ := cdcsync.AppendTuple(nil, v...)
		if cache[string(k)] == nil {
			cache[string(k)] = []cdcsync.Row{} // read: none
		}
	}
	return nil
}

// children returns the child rows of rel that reference old now: those of
// before the transaction that it has not changed, and those it wrote.
func (r *cascadeRun) children(rel relation, old []any) ([]cdcsync.Row, error) {
	k, ok := cdcsync.AppendTuple(nil, old...)
	if !ok {
		return nil, nil
	}
	child := rel.fk.Child
	schema := r.p.schemas[child]
	over := r.overlay[child]
	var out []cdcsync.Row
	for _, row := range r.cache[rel.fk][string(k)] {
		pk, err := schema.AppendKey(nil, row)
		if err != nil {
			return nil, err
		}
		if _, changed := over[string(pk)]; !changed {
			out = append(out, row)
		}
	}
	for pk := range r.index[rel.fk][string(k)] {
		// The index keeps a row under every value it had in the transaction.
		if row := over[pk]; row != nil {
			if now, ok := cdcsync.AppendTuple(nil, values(row, rel.childCols)...); ok && string(now) == string(k) {
				out = append(out, row)
			}
		}
	}
	return out, nil
}

// note records c in the transaction's overlay.
func (r *cascadeRun) note(c cdcsync.Change) error {
	schema := r.p.schemas[c.Table]
	if schema == nil {
		return nil
	}
	over := r.overlay[c.Table]
	if over == nil {
		over = map[string]cdcsync.Row{}
		r.overlay[c.Table] = over
	}
	set := func(row, final cdcsync.Row) error {
		pk, err := schema.AppendKey(nil, row)
		if err != nil {
			return err
		}
		over[string(pk)] = final
		if final == nil {
			return nil
		}
		// Index the row under the foreign keys it is a child of.
		for i := range r.p.opts.ForeignKeys {
			fk := &r.p.opts.ForeignKeys[i]
			if fk.Child != c.Table {
				continue
			}
			rels, err := r.relations(fk.Parent)
			if err != nil {
				return err
			}
			for _, rel := range rels {
				if rel.fk != fk {
					continue
				}
				if k, ok := cdcsync.AppendTuple(nil, values(final, rel.childCols)...); ok {
					idx := r.index[fk]
					if idx == nil {
						idx = map[string]map[string]bool{}
						r.index[fk] = idx
					}
					if idx[string(k)] == nil {
						idx[string(k)] = map[string]bool{}
					}
					idx[string(k)][string(pk)] = true
				}
			}
		}
		return nil
	}
	switch c.Op {
	case cdcsync.OpInsert:
		return set(c.After, c.After)
	case cdcsync.OpDelete:
		return set(c.Before, nil)
	case cdcsync.OpUpdate:
		if err := set(c.Before, nil); err != nil {
			return err
		}
		return set(c.After, c.After)
	}
	return nil
}

// partialCascade handles a cascade at pos into child while child is
// copied: it sees only the rows copied so far. Chunks whose snapshot
// predates it may hold rows the cascade removes or changes, which nothing
// names: they are read again (chunks read after it show its result).
// The rows it cannot see have cascades of their own, into the tables that
// reference child: those copied already (tables referencing each other)
// are copied again after this transaction (Run); those whose copy waits for
// child's read the result, and child itself, when it references itself, is
// copied in one chunk, which is read again.
func (p *Pipeline) partialCascade(child cdcsync.TableID, pos cdcsync.Position) {
	if ct := p.copies[child]; ct != nil {
		ct.cascaded = pos
		for n, r := range ct.pending {
			if !p.includes(r.pos, pos) {
				delete(ct.pending, n)
				delete(ct.windows, r.w)
				r.reply <- again
			}
		}
	}
	for i := range p.opts.ForeignKeys {
		fk := &p.opts.ForeignKeys[i]
		if fk.Parent != child || p.schemas[fk.Child] == nil || (fk.OnDelete == cdcsync.FKNoAction && fk.OnUpdate == cdcsync.FKNoAction) {
			continue
		}
		if ct := p.copies[fk.Child]; (ct != nil && !ct.started) || fk.Child == child {
			// Copies later, or (referencing itself) in one chunk, read again.
			continue
		}
		if p.recopy == nil {
			p.recopy = map[cdcsync.TableID]cdcsync.TableID{}
		}
		p.recopy[fk.Child] = child
	}
}

// setForeignKeys replaces the keys of child with keys, from the next
// transaction on (a ChangeForeignKeys); those without an action change no
// child row.
func (p *Pipeline) setForeignKeys(child cdcsync.TableID, keys []cdcsync.ForeignKey) {
	fks := slices.DeleteFunc(slices.Clone(p.opts.ForeignKeys), func(fk cdcsync.ForeignKey) bool { return fk.Child == child })
	for _, fk := range keys {
		if fk.Acts() {
			fks = append(fks, fk)
		}
	}
	p.opts.ForeignKeys = fks
}

// values returns the values of row's columns cols.
func values(row cdcsync.Row, cols []int) []any {
	out := make([]any, len(cols))
	for i, c := range cols {
		if c < len(row) {
			out[i] = row[c]
		}
	}
	return out
}

func sameTuple(a, b []any) bool {
	ka, oka := cdcsync.AppendTuple(nil, a...)
	kb, okb := cdcsync.AppendTuple(nil, b...)
	if !oka || !okb {
		return oka == okb && fmt.Sprint(a) == fmt.Sprint(b)
	}
	return string(ka) == string(kb)
}

// overSpill removes from state (child rows by primary key) the rows that
// the part of b's epoch written out before its commit deleted. Rows it
// wrote cannot be found by their foreign-key columns: a cascade that needs
// them fails, naming the fix.
func (r *cascadeRun) overSpill(b *Buffer, child cdcsync.TableID, rel relation, state map[string]cdcsync.Row) error {
	spill := b.SpillID(child)
	if spill == 0 {
		return nil
	}
	keys := make([][]byte, 0, len(state))
	for k := range state {
		keys = append(keys, []byte(k))
	}
	rows, deleted, err := r.p.sink.(Spiller).SpillHolds(child, spill, keys)
	if err != nil {
		return fmt.Errorf("%w: read what was written out of %s: %w", ErrCascade, child, err)
	}
	if rows {
		return fmt.Errorf("%w: a transaction larger than epoch.max_bytes wrote rows of %s, which a foreign-key cascade from %s reads, "+
			"and cdcsync wrote them out before the transaction ended; raise epoch.max_bytes (and memory_limit) above the transaction's size",
			ErrCascade, child, rel.fk.Parent)
	}
	for i, k := range keys {
		if deleted[i] {
			delete(state, string(k))
		}
	}
	return nil
}
