package lake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/cdcsync/cdcsync"
	"github.com/cdcsync/cdcsync/config"
	"github.com/cdcsync/cdcsync/pkindex"
)

// Table is one MySQL table's Iceberg mirror, as cdcsync last loaded or
// committed it.
//
// Epoch commits and table maintenance may run in different goroutines: the
// heavy part of a compaction (reading and writing files) runs while epochs
// commit, and every catalog commit of cdcsync's writers takes the table's
// commit lock, so they never race each other in the catalog (a compaction
// that finds anything but this pipeline's epochs committed since it read
// the table, a copy's start for one, drops its rewrite). Schema changes
// (ApplyChange, PrepareRecopy, MarkRecopy) must not run while maintenance
// runs; the pipeline waits for it first.
type Table struct {
	ID     cdcsync.TableID
	Ident  table.Identifier
	Schema *cdcsync.TableSchema

	state    *tableState
	cat      catalog.Catalog // for the catalog commits a transaction cannot express (promote)
	scope    func(context.Context) context.Context
	pipeline string
	token    int64        // the fencing token of the pipeline's lease, recorded with every commit (0: none)
	valid    func() error // whether the lease still allows commits
	dataOut  *rowLayout   // data files: every column
	delOut   *rowLayout   // equality deletes: key columns plus partition sources
	// The files of an epoch commit: data files under the table's partition
	// spec, equality delete files, and the process's open-file budget. On
	// a partitioned table the equality deletes are global (see "Global
	// equality deletes" below); else, or on a table without an
	// unpartitioned spec,
	// they hold the key columns only and go to the partition of delOut's
	// partition sources.
	dataFile, eqFile *fileOut
	// partFile is dataFile without staging (staged.go): every row in its
	// partition, as compaction writes them. stageFile is the staged data
	// files' (nil on a table that cannot have any); dataFile stages rows
	// there when tables[].stage_above allows.
	partFile, stageFile *fileOut
	// mode is how the table records updates and deletes: DeletesPosition
	// (through the key index, state.keys) or DeletesEquality.
	mode  string
	part  *partitioner // the table's partition spec
	files chan struct{}
	// dvs keeps the deletion vectors the process wrote (dvcache.go),
	// shared by its tables.
	dvs *dvCache
	// spills is the database of the spill stores (spill.go): the
	// pipeline's key index database; nil in processes that commit no
	// epochs.
	spills *pkindex.DB

	schemaPos cdcsync.Position // Schema is as of this binlog position (see evolve.go)

	// BeforeCommit, when set, runs after the files are written and before
	// the catalog commit; tests use it to crash in that window.
	BeforeCommit func()
	// deleteManifestEntries, when set, replaces the constant of that name
	// (tests split small delete sets across manifests with it).
	deleteManifestEntries int
}

// tableState is what the goroutines that commit to a table share.
type tableState struct {
	// commitMu serializes cdcsync's catalog commits to the table (epochs,
	// the copy's start, compaction, manifest merges, snapshot expiry), so
	// that each one stages on the table as the previous one left it.
	commitMu sync.Mutex
	// built is the last table commitRowDelta returned, and builtFS the
	// file IO opener it gave it (under commitMu).
	built   *table.Table
	builtFS table.FSysF
	// epochsWaiting counts the epoch commits waiting for commitMu: a
	// compaction that holds it yields to them between groups.
	epochsWaiting atomic.Int32
	tbl           atomic.Pointer[table.Table] // the table as last loaded or committed
	// copying is the progress of the table's initial copy, recorded with
	// every commit while it runs; nil when no copy runs.
	copying atomic.Pointer[cdcsync.CopyState]
	// lost is set when a newer holder of the pipeline's lease fenced the
	// table: nothing may be committed to it any more.
	lost   atomic.Pointer[error]
	global globalParts // the partitions of the global delete files compaction read
	// pending are the files of an epoch whose commit failed (under commitMu).
	pending *pendingFiles
	// keys is the key index of a table in position mode (keyindex.go), nil
	// in equality mode and where no index is open (commands that do not
	// commit epochs). Used under commitMu.
	keys *keyIndex
	// spills are the spilled parts of epochs not committed yet (spill.go),
	// by spill: the open epoch's, and the one being committed; under
	// spillMu, which a commit takes under commitMu.
	spillMu sync.Mutex
	spills  map[int64]*spill
	// dvs are the live deletion vectors of a table in dv mode as of one
	// snapshot (dv.go); under commitMu.
	dvs *liveDVSet
	// staged says the table may hold staged files (staged.go), which
	// make compaction due: set when rows are staged (and at open),
	// cleared by a compaction that leaves none.
	staged     atomic.Bool
	stagedRows atomic.Int64 // see Table.StagedRows
	// manifests caches the entries of the manifests last planned (plan.go).
	manifests manifestCache
	// deletes keeps the entries of the live delete manifests cdcsync's
	// commits wrote or read (entrycache.go).
	deletes deleteEntries
	// clock times the phases of the epoch commit under way (nil outside
	// one); under commitMu. times are the last one's, under timesMu.
	clock   *clock
	timesMu sync.Mutex
	times   CommitTimes
}

func newTableState(tbl *table.Table, copying *cdcsync.CopyState, entries *entryBudget) *tableState {
	st := &tableState{}
	st.manifests.held = &st.deletes
	st.claimFor(entries)
	st.tbl.Store(tbl)
	st.copying.Store(copying)
	return st
}

func (t *Table) current() *table.Table     { return t.state.tbl.Load() }
func (t *Table) setCurrent(x *table.Table) { t.state.tbl.Store(x) }

// DeleteColumns returns the columns an equality delete of the table needs,
// as indexes into Schema.Columns: the primary key and the partition source
// columns. Nil means every column.
func (t *Table) DeleteColumns() []int {
	if t.delOut == nil {
		return nil
	}
	return slices.Clone(t.delOut.cols)
}

// Iceberg returns the underlying iceberg-go table.
func (t *Table) Iceberg() *table.Table { return t.current() }

// IcebergSchema maps a MySQL table schema to an Iceberg schema whose field ids
// are the column ordinals and whose identifier fields are the primary key.
func IcebergSchema(ts *cdcsync.TableSchema) (*iceberg.Schema, error) {
	if len(ts.PrimaryKey) == 0 {
		return nil, fmt.Errorf("table %s has no primary key; cdcsync needs one to apply updates and deletes: add a primary key or exclude the table", ts.ID)
	}
	fields := make([]iceberg.NestedField, len(ts.Columns))
	for i, c := range ts.Columns {
		typ, err := icebergType(&c)
		if err != nil {
			return nil, fmt.Errorf("column %s.%s: %w", ts.ID, c.Name, err)
		}
		fields[i] = iceberg.NestedField{ID: i + 1, Name: c.Name, Type: typ, Required: !c.Nullable}
	}
	ids := make([]int, len(ts.PrimaryKey))
	for i, k := range ts.PrimaryKey {
		ids[i] = k + 1
		fields[k].Required = true
	}
	return iceberg.NewSchemaWithIdentifiers(0, ids, fields...), nil
}

func icebergType(c *cdcsync.Column) (iceberg.Type, error) {
	switch c.Kind {
	case cdcsync.KindInt32:
		return iceberg.PrimitiveTypes.Int32, nil
	case cdcsync.KindInt64:
		return iceberg.PrimitiveTypes.Int64, nil
	case cdcsync.KindDecimal:
		return iceberg.DecimalTypeOf(c.Precision, c.Scale), nil
	case cdcsync.KindFloat32:
		return iceberg.PrimitiveTypes.Float32, nil
	case cdcsync.KindFloat64:
		return iceberg.PrimitiveTypes.Float64, nil
	case cdcsync.KindString:
		return iceberg.PrimitiveTypes.String, nil
	case cdcsync.KindBinary:
		return iceberg.PrimitiveTypes.Binary, nil
	case cdcsync.KindDate:
		return iceberg.PrimitiveTypes.Date, nil
	case cdcsync.KindTimestamp:
		return iceberg.PrimitiveTypes.Timestamp, nil
	case cdcsync.KindTimestampTZ:
		return iceberg.PrimitiveTypes.TimestampTz, nil
	case cdcsync.KindBool:
		return iceberg.PrimitiveTypes.Bool, nil
	case cdcsync.KindTime:
		// Iceberg's time holds 00:00:00 to 23:59:59.999999 only; MySQL's
		// TIME is a signed duration up to 838 hours: microseconds in a long.
		return iceberg.PrimitiveTypes.Int64, nil
	}
	return nil, fmt.Errorf("MySQL type %s has no Iceberg mapping", c.ColumnType)
}

// tableProperties makes tables merge-on-read, format v2, and keeps
// iceberg-go from replaying a commit on top of another writer's. The
// Parquet codec comes from the configuration (parquetProperties).
var tableProperties = iceberg.Properties{
	"format-version":          "2",
	"write.delete.mode":       "merge-on-read",
	"write.update.mode":       "merge-on-read",
	"write.merge.mode":        "merge-on-read",
	table.CommitNumRetriesKey: "0",
}

// parquetProperties are the table properties of a parquet configuration:
// the codec and, unless it is the codec's default (0), its level. Both
// cdcsync's writer (files.go) and iceberg-go's (compaction, rewrites) read
// them.
func parquetProperties(pq config.Parquet) iceberg.Properties {
	props := iceberg.Properties{table.ParquetCompressionKey: pq.Compression}
	if pq.Level != 0 {
		props[table.ParquetCompressionLevelKey] = strconv.Itoa(pq.Level)
	}
	return props
}

// switchParquet sets the table's Parquet codec and level to the
// configured ones when they differ (a metadata-only commit, as
// switchDeletes does) and returns the table as reloaded. The files
// written from then on use them; older files keep theirs, and readers
// read each file with its own codec.
func (l *Lake) switchParquet(ctx context.Context, ident table.Identifier, tbl *table.Table, id cdcsync.TableID) (*table.Table, error) {
	pq := l.opts.Tables.ParquetFor(id.Database, id.Table)
	if pq.Compression == "" {
		return tbl, nil // a Config built in code without defaults
	}
	have := tbl.Properties()
	want := parquetProperties(pq)
	set := iceberg.Properties{}
	for k, v := range want {
		if have[k] != v {
			set[k] = v
		}
	}
	_, hasLevel := have[table.ParquetCompressionLevelKey]
	dropLevel := hasLevel && pq.Level == 0
	if len(set) == 0 && !dropLevel {
		return tbl, nil
	}
	var updates []table.Update
	if len(set) > 0 {
		updates = append(updates, table.NewSetPropertiesUpdate(set))
	}
	if dropLevel {
		updates = append(updates, table.NewRemovePropertiesUpdate([]string{table.ParquetCompressionLevelKey}))
	}
	fresh, err := l.commitMetadata(ctx, ident, tbl, updates)
	if err != nil {
		return nil, fmt.Errorf("set the Parquet codec of %s to %s (level %d), as the parquet configuration asks: %w", id, pq.Compression, pq.Level, err)
	}
	l.log.Info("switched the table's Parquet codec, as the configuration asks; the files written from now on use it, older files keep theirs",
		"table", id.String(), "from", have.Get(table.ParquetCompressionKey, table.ParquetCompressionDefault),
		"from_level", have.Get(table.ParquetCompressionLevelKey, "default"), "to", pq.Compression, "to_level", pq.Level)
	return fresh, nil
}

// EnsureTable loads the Iceberg table for ts, creating its namespace and the
// table (with the configured partition spec) when they do not exist.
//
// ts is the MySQL schema as information_schema shows it now. A table that
// exists already is returned with the MySQL schema recorded with it
// (PropMySQLSchema), which may be older than ts when cdcsync lags behind a
// DDL statement: the stream applies the statement when it reaches it. The
// Iceberg columns must match that recorded schema. A table without a
// recorded schema (created by an earlier cdcsync) must match ts. A table
// cdcsync stopped mirroring, or that is marked to be copied again, is
// returned as it is: see Stopped and NeedsRecopy.
func (l *Lake) EnsureTable(ctx context.Context, ts *cdcsync.TableSchema) (*Table, error) {
	ctx = l.Scope(ctx)
	ident := l.Identifier(ts.ID.Database, ts.ID.Table)
	tbl, err := l.cat.LoadTable(ctx, ident)
	switch {
	case errors.Is(err, catalog.ErrNoSuchTable):
		want, err := IcebergSchema(ts)
		if err != nil {
			return nil, err
		}
		tbl, err = l.createTable(ctx, ident, ts, want)
		if err != nil {
			return nil, err
		}
		if tbl, err = l.ensureUnpartitionedSpec(ctx, ident, tbl); err != nil {
			return nil, err
		}
		return l.newTable(ts, ident, tbl)
	case err != nil:
		return nil, fmt.Errorf("load table %s: %w", strings.Join(ident, "."), err)
	}
	if err := l.refuseOtherPipeline(tbl, ts.ID); err != nil {
		return nil, err
	}
	stored, pos, ok, err := storedState(tbl)
	if err != nil {
		return nil, err
	}
	props := tbl.Properties()
	_, stopped := props[PropStopped]
	_, recopy := props[PropRecopy]
	if ok {
		stored.ID = ts.ID
	}
	if stopped || recopy {
		// Its columns may not match anything: it is not written to as it is.
		s := ts
		if ok {
			s = stored
		}
		if t, err := l.newTable(s, ident, tbl); err == nil {
			t.schemaPos = pos
			return t, nil
		}
		return &Table{ID: ts.ID, Ident: ident, Schema: s, state: newTableState(tbl, nil, l.entries), scope: l.Scope, pipeline: l.opts.Pipeline, token: l.token, valid: l.leaseValid, cat: l.cat, schemaPos: pos}, nil
	}
	if tbl, err = l.switchDeletes(ctx, ident, tbl, ts.ID); err != nil {
		return nil, err
	}
	if tbl, err = l.switchParquet(ctx, ident, tbl, ts.ID); err != nil {
		return nil, err
	}
	if tbl, err = l.ensureUnpartitionedSpec(ctx, ident, tbl); err != nil {
		return nil, err
	}
	if !ok {
		if err := compatibleColumns(ts, tbl.Schema()); err != nil {
			return nil, fmt.Errorf("the Iceberg table %s no longer matches MySQL table %s: %w; it was created by a cdcsync that did not "+
				"record the MySQL schema with it, so the change cannot be followed: drop the Iceberg table to copy it again", strings.Join(ident, "."), ts.ID, err)
		}
		return l.newTable(ts, ident, tbl)
	}
	if err := compatibleColumns(stored, tbl.Schema()); err != nil {
		return nil, fmt.Errorf("the Iceberg table %s does not match the MySQL schema cdcsync recorded with it (%s): %w; "+
			"another writer changed its schema: drop the Iceberg table to copy it again", strings.Join(ident, "."), PropMySQLSchema, err)
	}
	t, err := l.newTable(stored, ident, tbl)
	if err != nil {
		return nil, err
	}
	t.schemaPos = pos
	if refOf(tbl.Metadata()) == CopyBranch && t.Copying() == nil {
		// A recopy whose last commit completed it, then a crash before
		// main moved to it: finish the switch.
		if err := t.promote(ctx); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// OpenTable loads an existing Iceberg table for maintenance without its
// MySQL source: name is the MySQL "db.table" (mapped through the table
// rules) or the Iceberg "namespace.table".
func (l *Lake) OpenTable(ctx context.Context, name string) (*Table, error) {
	db, tbl, ok := strings.Cut(name, ".")
	if !ok || db == "" || tbl == "" {
		return nil, fmt.Errorf("name a table as DB.TABLE, got %q", name)
	}
	ctx = l.Scope(ctx)
	ident := l.Identifier(db, tbl)
	it, err := l.cat.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		ident = table.Identifier{db, tbl}
		it, err = l.cat.LoadTable(ctx, ident)
	}
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, fmt.Errorf("no table %s in catalog %q; `cdcsync tables` lists the tables", name, l.opts.Catalog.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("load table %s: %w", name, err)
	}
	ts, err := SchemaFromIceberg(it)
	if err != nil {
		return nil, err
	}
	if src := it.Properties()["cdcsync.source"]; src != "" {
		if d, n, ok := strings.Cut(src, "."); ok {
			ts.ID = cdcsync.TableID{Database: d, Table: n}
		}
	}
	return l.newTable(ts, ident, it)
}

func (l *Lake) createTable(ctx context.Context, ident table.Identifier, ts *cdcsync.TableSchema, sc *iceberg.Schema) (*table.Table, error) {
	ns := table.Identifier{ident[0]}
	if err := l.cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, fmt.Errorf("create namespace %s: %w", ident[0], err)
	}
	spec, err := l.partitionSpec(ts, sc)
	if err != nil {
		return nil, err
	}
	mode := l.opts.DeletesMode
	if r := l.opts.Tables.Rule(ts.ID.Database, ts.ID.Table); r != nil && r.Deletes != "" {
		mode = r.Deletes
	}
	props := iceberg.Properties{PropSource: ts.ID.String(), PropMySQLSchema: EncodeSchema(ts, cdcsync.Position{}), PropPipeline: l.opts.Pipeline, PropDeletes: mode}
	for k, v := range tableProperties {
		props[k] = v
	}
	if pq := l.opts.Tables.ParquetFor(ts.ID.Database, ts.ID.Table); pq.Compression != "" {
		for k, v := range parquetProperties(pq) {
			props[k] = v
		}
	} else {
		props[table.ParquetCompressionKey] = table.ParquetCompressionDefault
	}
	if mode == DeletesDV {
		props["format-version"] = strconv.Itoa(dvFormatVersion)
	}
	tbl, err := l.cat.CreateTable(ctx, ident, sc, catalog.WithPartitionSpec(spec), catalog.WithProperties(props))
	if err != nil {
		return nil, fmt.Errorf("create Iceberg table %s for %s: %w", strings.Join(ident, "."), ts.ID, err)
	}
	l.log.Info("created Iceberg table", "table", ts.ID.String(), "iceberg", strings.Join(ident, "."), "partition", spec.String(), "deletes", mode)
	return tbl, nil
}

func (l *Lake) partitionSpec(ts *cdcsync.TableSchema, sc *iceberg.Schema) (*iceberg.PartitionSpec, error) {
	return partitionSpecOf(l.opts.Tables.Rule(ts.ID.Database, ts.ID.Table), ts, sc)
}

// CheckRule says whether the tables[] rule that matches ts (if any) can
// be applied to it as the table is now: the partition columns exist and
// their transforms fit the columns' types. `cdcsync check` reports it
// before `run` would fail creating the table.
func CheckRule(r *config.TableRule, ts *cdcsync.TableSchema) error {
	if r == nil || len(r.Partition) == 0 {
		return nil
	}
	sc, err := IcebergSchema(ts)
	if err != nil {
		return err
	}
	_, err = partitionSpecOf(r, ts, sc)
	return err
}

func partitionSpecOf(r *config.TableRule, ts *cdcsync.TableSchema, sc *iceberg.Schema) (*iceberg.PartitionSpec, error) {
	if r == nil || len(r.Partition) == 0 {
		return iceberg.UnpartitionedSpec, nil
	}
	fields, err := r.PartitionFields()
	if err != nil {
		return nil, err
	}
	var opts []iceberg.PartitionOption
	for _, f := range fields {
		src, ok := sc.FindFieldByName(f.Column)
		if !ok {
			return nil, fmt.Errorf("tables: partition of %s names column %q, which the table does not have (its columns: %s); fix the rule's partition list",
				ts.ID, f.Column, strings.Join(allColumnNames(ts), ", "))
		}
		expr := f.Transform
		if f.Transform == "bucket" || f.Transform == "truncate" {
			expr = fmt.Sprintf("%s[%d]", f.Transform, f.Param)
		}
		tr, err := iceberg.ParseTransform(expr)
		if err != nil {
			return nil, fmt.Errorf("tables: partition of %s: %w", ts.ID, err)
		}
		if !tr.CanTransform(src.Type) {
			return nil, fmt.Errorf("tables: partition of %s applies %s to column %q, whose Iceberg type is %s: use a transform for that type "+
				"(year, month, day, hour for dates and timestamps; bucket, truncate or identity for the others)", ts.ID, expr, f.Column, src.Type)
		}
		name := f.Column
		if f.Transform != "identity" {
			name = f.Column + "_" + f.Transform
		}
		opts = append(opts, iceberg.AddPartitionFieldBySourceID(src.ID, name, tr, sc, nil))
	}
	spec, err := iceberg.NewPartitionSpecOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("tables: partition of %s: %w", ts.ID, err)
	}
	return &spec, nil
}

func (l *Lake) newTable(ts *cdcsync.TableSchema, ident table.Identifier, tbl *table.Table) (*Table, error) {
	sc := tbl.Schema()
	dataOut, err := newRowLayout(ts, sc)
	if err != nil {
		return nil, err
	}
	eqIDs := sc.IdentifierFieldIDs
	if len(eqIDs) == 0 {
		return nil, fmt.Errorf("Iceberg table %s has no identifier fields; cdcsync creates tables with the primary key as identifier fields", strings.Join(ident, "."))
	}
	names := make([]string, 0, len(eqIDs))
	seen := map[int]bool{}
	for _, id := range eqIDs {
		n, _ := sc.FindColumnName(id)
		names = append(names, n)
		seen[id] = true
	}
	spec := tbl.Spec()
	for _, f := range spec.Fields() {
		if !seen[f.SourceID()] {
			n, _ := sc.FindColumnName(f.SourceID())
			names = append(names, n)
			seen[f.SourceID()] = true
		}
	}
	delSchema, err := sc.Select(true, names...)
	if err != nil {
		return nil, fmt.Errorf("delete schema of %s: %w", ts.ID, err)
	}
	delOut, err := newRowLayout(ts, delSchema)
	if err != nil {
		return nil, err
	}
	eqSchema, err := sc.Select(true, names[:len(eqIDs)]...)
	if err != nil {
		return nil, fmt.Errorf("equality delete schema of %s: %w", ts.ID, err)
	}
	eqOut, err := newRowLayout(ts, eqSchema)
	if err != nil {
		return nil, err
	}
	part, err := newPartitioner(ts, sc, spec)
	if err != nil {
		return nil, err
	}
	eqFile := &fileOut{layout: eqOut, schema: eqSchema, content: iceberg.EntryContentEqDeletes, eqIDs: eqIDs, part: part}
	partFile := &fileOut{layout: dataOut, schema: sc, content: iceberg.EntryContentData, part: part}
	dataFile, stageFile := partFile, (*fileOut)(nil)
	if global, ok := unpartitionedSpec(tbl.Metadata()); ok {
		gp, err := newPartitioner(ts, sc, global)
		if err != nil {
			return nil, err
		}
		eqFile = &fileOut{layout: delOut, schema: delSchema, content: iceberg.EntryContentEqDeletes, eqIDs: eqIDs, part: gp}
		stageFile = &fileOut{layout: dataOut, schema: sc, content: iceberg.EntryContentData, part: gp}
		if above := l.opts.Tables.StageAboveFor(ts.ID.Database, ts.ID.Table); byPosition(deletesMode(tbl)) && above > 0 {
			staging := *partFile
			staging.stage, staging.stageAbove = stageFile, above
			dataFile = &staging
		}
	}
	c, err := committedIn(tbl, l.opts.Pipeline)
	if err != nil {
		return nil, err
	}
	t := &Table{ID: ts.ID, Ident: ident, Schema: ts, state: newTableState(tbl, c.Copy, l.entries), scope: l.Scope, pipeline: l.opts.Pipeline, token: l.token, valid: l.leaseValid, cat: l.cat,
		dataOut: dataOut, delOut: delOut,
		dataFile:  dataFile,
		partFile:  partFile,
		stageFile: stageFile,
		eqFile:    eqFile,
		part:      part, files: l.files, dvs: l.dvs,
		mode: deletesMode(tbl), spills: l.keys}
	t.state.staged.Store(stageFile != nil)
	if byPosition(t.mode) && l.keys != nil {
		if err := t.attachIndex(l.keys, l.log, l.indexFault); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// commitMetadata commits metadata-only updates to tbl, asserting that it
// is still the same table, and returns the table as reloaded.
func (l *Lake) commitMetadata(ctx context.Context, ident table.Identifier, tbl *table.Table, updates []table.Update) (*table.Table, error) {
	reqs := []table.Requirement{table.AssertTableUUID(tbl.Metadata().TableUUID())}
	if _, _, err := l.cat.CommitTable(ctx, ident, reqs, updates); err != nil {
		return nil, err
	}
	fresh, err := l.cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, fmt.Errorf("load table %s: %w", strings.Join(ident, "."), err)
	}
	return fresh, nil
}

// switchDeletes sets the table's deletes mode to what its tables[] rule
// asks, when the rule sets one that differs, and returns the table as
// reloaded.
func (l *Lake) switchDeletes(ctx context.Context, ident table.Identifier, tbl *table.Table, id cdcsync.TableID) (*table.Table, error) {
	r := l.opts.Tables.Rule(id.Database, id.Table)
	if r == nil || r.Deletes == "" || r.Deletes == deletesMode(tbl) {
		return tbl, nil
	}
	from := deletesMode(tbl)
	if from == DeletesDV {
		// Format v3 takes no position delete files, and a table's format
		// version never goes down.
		l.log.Warn("the table stays in dv mode: its tables[] rule asks for another, but a format v3 table cannot go back; drop the Iceberg table to have it copied again in the new mode",
			"table", id.String(), "rule", r.Deletes)
		return tbl, nil
	}
	updates := []table.Update{table.NewSetPropertiesUpdate(iceberg.Properties{PropDeletes: r.Deletes})}
	if r.Deletes == DeletesDV {
		// A data file with a deletion vector has its position delete files
		// ignored by readers (the vector must hold them), so the switch
		// waits until none is left.
		if n := positionDeleteCount(tbl.CurrentSnapshot()); n != 0 {
			l.log.Warn("the table stays in its deletes mode: its tables[] rule asks for dv, which needs a table without position delete files; "+
				"compact them away with `cdcsync compact "+id.String()+"` and restart",
				"table", id.String(), "mode", from, "position_deletes", n)
			return tbl, nil
		}
		if tbl.Metadata().Version() < dvFormatVersion {
			updates = append(updates, table.NewUpgradeFormatVersionUpdate(dvFormatVersion))
		}
	}
	fresh, err := l.commitMetadata(ctx, ident, tbl, updates)
	if err != nil {
		return nil, fmt.Errorf("switch %s to %s deletes (its tables[] rule sets deletes: %s): %w", id, r.Deletes, r.Deletes, err)
	}
	l.log.Info("switched the table's deletes mode, as its tables[] rule asks; its older deletes stay until compaction clears them",
		"table", id.String(), "from", from, "to", r.Deletes, "format_version", fresh.Metadata().Version())
	return fresh, nil
}

// Global equality deletes. An equality delete file written under an
// unpartitioned spec applies to the older data files of every partition
// (Iceberg spec, "Scan Planning"), so on a partitioned table an epoch
// writes its deletes as one file (rolled at the target size) instead of
// one per partition its before images live in: an epoch that touches
// thousands of partitions writes half the files (issue 23). A key's
// delete still removes its old copy wherever it lives, a partition move
// included. The files also carry the partition source columns of the
// before images (extra columns of an equality delete file are allowed and
// not compared), from which compaction learns the partitions a global
// delete needs rewritten before it can be dropped (compact.go).
//
// The table keeps its partitioned spec as the default; the unpartitioned
// spec is added next to it (ensureUnpartitionedSpec), as Iceberg Java's
// UpdatePartitionSpec.addNonDefaultSpec does. Staged rows (staged.go) are
// written under it too.

// unpartitionedSpec returns the unpartitioned spec that a partitioned
// table's global equality deletes and staged rows are written under, if
// it has one.
func unpartitionedSpec(meta table.Metadata) (iceberg.PartitionSpec, bool) {
	if meta.PartitionSpec().IsUnpartitioned() {
		return iceberg.PartitionSpec{}, false
	}
	for _, s := range meta.PartitionSpecs() {
		if s.IsUnpartitioned() {
			return s, true
		}
	}
	return iceberg.PartitionSpec{}, false
}

// ensureUnpartitionedSpec adds an unpartitioned spec, not the default, to a
// partitioned table that has none, and returns the table as reloaded.
func (l *Lake) ensureUnpartitionedSpec(ctx context.Context, ident table.Identifier, tbl *table.Table) (*table.Table, error) {
	meta := tbl.Metadata()
	if meta.PartitionSpec().IsUnpartitioned() {
		return tbl, nil
	}
	if _, ok := unpartitionedSpec(meta); ok {
		return tbl, nil
	}
	lastID := iceberg.PartitionDataIDStart - 1
	if p := meta.LastPartitionSpecID(); p != nil {
		lastID = *p
	}
	reqs := []table.Requirement{table.AssertTableUUID(meta.TableUUID()), table.AssertLastAssignedPartitionID(lastID),
		table.AssertDefaultSpecID(meta.DefaultPartitionSpec())}
	updates := []table.Update{table.NewAddPartitionSpecUpdate(iceberg.UnpartitionedSpec, false)}
	if _, _, err := l.cat.CommitTable(ctx, ident, reqs, updates); err != nil {
		return nil, fmt.Errorf("add an unpartitioned spec (for global equality deletes and staged rows) to %s: %w", strings.Join(ident, "."), err)
	}
	fresh, err := l.cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, fmt.Errorf("load table %s: %w", strings.Join(ident, "."), err)
	}
	if _, ok := unpartitionedSpec(fresh.Metadata()); !ok {
		return nil, fmt.Errorf("the catalog accepted the unpartitioned spec of %s but its metadata does not show it", strings.Join(ident, "."))
	}
	return fresh, nil
}

// rowLayout maps an Arrow schema derived from the Iceberg schema to the
// MySQL column each of its fields is filled from.
type rowLayout struct {
	schema *arrow.Schema
	cols   []int // cols[i] is the row index feeding arrow field i
	table  *cdcsync.TableSchema
}

// key names a row by its primary key, for messages.
func (l *rowLayout) key(row cdcsync.Row) string { return l.table.KeyText(row) }

func newRowLayout(ts *cdcsync.TableSchema, sc *iceberg.Schema) (*rowLayout, error) {
	as, err := table.SchemaToArrowSchema(sc, nil, true, false)
	if err != nil {
		return nil, fmt.Errorf("arrow schema of %s: %w", ts.ID, err)
	}
	cols := make([]int, as.NumFields())
	for i, f := range as.Fields() {
		cols[i] = ts.ColumnIndex(f.Name)
		if cols[i] < 0 {
			return nil, fmt.Errorf("Iceberg column %s is not in MySQL table %s", f.Name, ts.ID)
		}
	}
	return &rowLayout{schema: as, cols: cols, table: ts}, nil
}

func allColumnNames(ts *cdcsync.TableSchema) []string {
	all := make([]int, len(ts.Columns))
	for i := range all {
		all[i] = i
	}
	return columnNames(ts, all)
}
