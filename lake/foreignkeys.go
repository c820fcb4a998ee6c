package lake

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/apache/iceberg-go"

	"github.com/cdcsync/cdcsync"
)

// storedKeys is the JSON of PropForeignKeys. Actions are stored by name, so
// that the numbering of cdcsync.FKAction may change.
type storedKeys struct {
	Position cdcsync.Position `json:"position"`
	Keys     []storedKey      `json:"keys"`
}

type storedKey struct {
	Name       string          `json:"name"`
	Columns    []string        `json:"columns"`
	Parent     cdcsync.TableID `json:"parent"`
	ParentCols []string        `json:"parent_columns"`
	OnDelete   string          `json:"on_delete,omitempty"`
	OnUpdate   string          `json:"on_update,omitempty"`
}

// ForeignKeys returns the table's foreign keys as of pos; ok is false when
// the table has none recorded (created by an older cdcsync, or after a
// change cdcsync could not follow): they must be read from MySQL.
func (t *Table) ForeignKeys() (keys []cdcsync.ForeignKey, pos cdcsync.Position, ok bool, err error) {
	v, found := t.current().Properties()[PropForeignKeys]
	if !found {
		return nil, cdcsync.Position{}, false, nil
	}
	var st storedKeys
	if err := json.Unmarshal([]byte(v), &st); err != nil {
		return nil, cdcsync.Position{}, false, fmt.Errorf("%s: malformed %s: %w", t.ID, PropForeignKeys, err)
	}
	for _, k := range st.Keys {
		fk := cdcsync.ForeignKey{Name: k.Name, Child: t.ID, ChildCols: k.Columns, Parent: k.Parent, ParentCols: k.ParentCols}
		if fk.OnDelete, err = parseAction(k.OnDelete); err == nil {
			fk.OnUpdate, err = parseAction(k.OnUpdate)
		}
		if err != nil {
			return nil, cdcsync.Position{}, false, fmt.Errorf("%s: malformed %s: key %s: %w", t.ID, PropForeignKeys, k.Name, err)
		}
		keys = append(keys, fk)
	}
	return keys, st.Position, true, nil
}

// SetForeignKeys records the table's foreign keys as of e.Pos, in a
// commit of their own.
func (t *Table) SetForeignKeys(ctx context.Context, e Epoch, keys []cdcsync.ForeignKey) error {
	st := storedKeys{Position: e.Pos, Keys: []storedKey{}}
	for _, k := range keys {
		st.Keys = append(st.Keys, storedKey{Name: k.Name, Columns: k.ChildCols, Parent: k.Parent, ParentCols: k.ParentCols,
			OnDelete: actionName(k.OnDelete), OnUpdate: actionName(k.OnUpdate)})
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode the foreign keys of %s: %w", t.ID, err)
	}
	return t.setProps(ctx, e, iceberg.Properties{PropForeignKeys: string(b)}, nil)
}

func actionName(a cdcsync.FKAction) string {
	if a == cdcsync.FKNoAction {
		return ""
	}
	return a.String()
}

func parseAction(s string) (cdcsync.FKAction, error) {
	switch s {
	case "":
		return cdcsync.FKNoAction, nil
	case cdcsync.FKCascade.String():
		return cdcsync.FKCascade, nil
	case cdcsync.FKSetNull.String():
		return cdcsync.FKSetNull, nil
	}
	return 0, fmt.Errorf("unknown action %q", s)
}
