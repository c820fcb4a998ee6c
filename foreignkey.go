package cdcsync

// ForeignKey is a foreign key of a mirrored table. Its referential action
// changes rows that the binlog does not record: MariaDB and MySQL before
// 9.6 apply ON DELETE/ON UPDATE CASCADE and SET NULL inside InnoDB, so
// cdcsync applies them itself (merge/cascade.go). Keys without an action
// are kept too, so that a later DROP FOREIGN KEY can be followed by name.
type ForeignKey struct {
	Name       string   // the constraint's name
	Child      TableID  // the table with the foreign key
	ChildCols  []string // its columns, in key order
	Parent     TableID  // the referenced table
	ParentCols []string // the referenced columns, in the same order
	OnDelete   FKAction
	OnUpdate   FKAction
}

// Acts says whether the key changes child rows on a parent's delete or
// update.
func (fk *ForeignKey) Acts() bool { return fk.OnDelete != FKNoAction || fk.OnUpdate != FKNoAction }

// FKAction is a referential action.
type FKAction int

const (
	FKNoAction FKAction = iota // RESTRICT, NO ACTION: nothing changes in the child
	FKCascade                  // the child rows are deleted, or get the parent's new key
	FKSetNull                  // the child rows' foreign-key columns become NULL
)

func (a FKAction) String() string {
	switch a {
	case FKCascade:
		return "CASCADE"
	case FKSetNull:
		return "SET NULL"
	}
	return "NO ACTION"
}

// TableKeys are a table's foreign keys as of a position.
type TableKeys struct {
	Keys []ForeignKey
	Pos  Position
}
