package cdcsync

// ChangeKind says what a DDL statement does to one mirrored table.
type ChangeKind int

const (
	// ChangeSchema: the table's columns or primary key changed; Schema is the
	// schema after the statement and Sources says where each column comes
	// from.
	ChangeSchema ChangeKind = iota + 1
	// ChangeTruncate: every row of the table was deleted (TRUNCATE TABLE).
	ChangeTruncate
	// ChangeDrop: the table was dropped (DROP TABLE, DROP DATABASE, or a
	// RENAME to a name that is not mirrored).
	ChangeDrop
	// ChangeRename: the table was renamed to NewID, which is mirrored too.
	ChangeRename
	// ChangeStop: cdcsync cannot follow the table any more (Reason says why);
	// it stops mirroring it and keeps its Iceberg table as it is.
	ChangeStop
	// ChangeRecopy: the table must be copied again from MySQL (a change
	// Iceberg cannot express, under the recopy policy, or a table replaced
	// by another one).
	ChangeRecopy
	// ChangeShadow: the schema of a shadow table of an online schema change
	// tool (gh-ost, pt-online-schema-change) that derives from Table changed
	// (Shadow is set); the shadow is remembered with the table, so that the
	// final swap can be applied after a restart too.
	ChangeShadow
	// ChangeForeignKeys: the foreign keys of Table changed (ForeignKeys
	// holds them all after the statement), or, with KeysUnknown, changed in
	// a way cdcsync did not follow, so that the next session reads them
	// from MySQL.
	ChangeForeignKeys
)

var changeKindNames = [...]string{"invalid", "schema", "truncate", "drop", "rename", "stop", "recopy", "shadow", "foreign-keys"}

func (k ChangeKind) String() string {
	if k >= 0 && int(k) < len(changeKindNames) {
		return changeKindNames[k]
	}
	return "unknown"
}

// ColumnSource says where a column of a table's new schema comes from.
type ColumnSource struct {
	// From is the column's name before the change; empty for a new column.
	From string `json:"from,omitempty"`
	// Fill is, for a new column, the MySQL text of the value the rows that
	// already exist get (its default); nil means NULL.
	Fill *string `json:"fill,omitempty"`
	// Unknown, when set, says why the value the existing rows get cannot be
	// known (an expression default, AUTO_INCREMENT, a generated column...).
	Unknown string `json:"unknown,omitempty"`
}

// Shadow is what cdcsync knows of a shadow table: its schema and, per
// column, where the column comes from in the table it shadows.
type Shadow struct {
	ID      TableID        `json:"id"`
	Schema  *TableSchema   `json:"schema"`
	Sources []ColumnSource `json:"sources"`
	// Dropped is set when the shadow was dropped or renamed away (the
	// change forgets it).
	Dropped bool `json:"dropped,omitempty"`
}

// SchemaChange is the effect of one DDL statement on one mirrored table, at
// the position of the transaction that carries it (Txn.DDL). Changes of the
// rows before it are committed under the old schema, changes after it under
// the new one.
type SchemaChange struct {
	Table TableID
	Kind  ChangeKind
	// Schema is the table's schema after the statement (ChangeSchema,
	// ChangeRename; ChangeRecopy when known).
	Schema *TableSchema
	// Sources has one entry per column of Schema (ChangeSchema).
	Sources []ColumnSource
	// Fills has one entry per column of Schema: the canonical value the rows
	// that already exist get in a new column (nil: NULL, nothing to write).
	Fills []any
	// NewID is the table's new name (ChangeRename).
	NewID TableID
	// Shadow is the shadow table's new state (ChangeShadow).
	Shadow *Shadow
	// ForeignKeys are the table's foreign keys after the statement
	// (ChangeForeignKeys), KeysUnknown set when cdcsync cannot tell them.
	ForeignKeys []ForeignKey
	KeysUnknown bool
	// Statement is the DDL statement, Reason why the table stops or is
	// copied again (ChangeStop, ChangeRecopy).
	Statement string
	Reason    string
	// NoRecopy is set on a ChangeStop that a new copy would not help (a
	// column type cdcsync cannot map, a table without a primary key).
	NoRecopy bool
	// Keep is set on a ChangeDrop whose Iceberg table is kept whatever
	// ddl.drop_table says (a rename under ddl.rename_table: keep).
	Keep bool
}

// NeedsRewrite reports whether the rows that already exist must be
// rewritten because a new column gets a non-NULL value in them.
func (c *SchemaChange) NeedsRewrite() bool {
	for _, v := range c.Fills {
		if v != nil {
			return true
		}
	}
	return false
}

// ShadowAt is a shadow table remembered with its base table in Iceberg.
type ShadowAt struct {
	Base   TableID
	Shadow Shadow
	Pos    Position
}
