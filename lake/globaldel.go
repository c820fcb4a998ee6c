package lake

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Compaction of a partitioned table with global equality deletes (see
// unpartitionedSpec). Scan planning attaches a global delete to the older
// data files of every partition (unless column bounds exclude its keys), so
// by the planner's rule it would be dropped only once every older file of
// the whole table had been rewritten, and every partition would look as if
// it carried deletes. cdcsync knows more: a global delete's rows carry the
// partition source columns of the before images they delete, and the only
// live copy of such a key older than the delete is in that partition (any
// other older copy is already deleted by an earlier delete that is still
// live, or was removed by the compaction that dropped that delete). So:
//
//   - a global delete counts for a partition only when one of its rows
//     belongs there (its rows there are the partition's delete rows);
//   - a compaction of a partition applies the global deletes that count
//     for it, and its rewritten files get the sequence number of the
//     snapshot read, above every delete applied;
//   - a global delete is dead once no remaining data file of a partition it
//     counts for is older than it, and is dropped then.
//
// An untouched partition is never rewritten for a global delete.

// deleteScope says, for a delete file that scan planning matched to a data
// file of a partition, whether it can delete a live row of that file and
// how many of its rows are for that partition: a local delete counts with
// all its rows; a global delete only where its rows' partitions are.
type deleteScope struct {
	global map[int32]bool              // spec id -> unpartitioned, on a partitioned table
	staged map[string]bool             // the partition keys of staged files
	parts  map[string]map[string]int64 // global delete path -> partition -> rows
}

// localScope is the scope of a table without global deletes.
var localScope = &deleteScope{}

// count returns the rows of d for the partition part (a partKey) and
// whether d counts there at all.
func (s *deleteScope) count(part string, d iceberg.DataFile) (int64, bool) {
	if !s.global[d.SpecID()] || s.staged[part] {
		// A staged row (staged.go) is not in the partition a global
		// delete's row names: every global delete counts there.
		return d.Count(), true
	}
	n := s.parts[d.FilePath()][part]
	return n, n > 0
}

// globals is the number of global delete files in the plan.
func (s *deleteScope) globals() int { return len(s.parts) }

// globalParts caches, per global delete file (by path), the partitions of
// its rows with their row counts. Files never change once written.
type globalParts struct {
	mu    sync.Mutex
	parts map[string]map[string]int64
}

// deleteScope returns the scope of the delete files that tasks (a plan of
// tbl) carry, reading the global delete files it has not read before.
func (t *Table) deleteScope(ctx context.Context, tbl *table.Table, tasks []table.FileScanTask) (*deleteScope, error) {
	if !t.part.partitioned() {
		return localScope, nil
	}
	scope := &deleteScope{global: map[int32]bool{}, staged: map[string]bool{}, parts: map[string]map[string]int64{}}
	for _, s := range tbl.Metadata().PartitionSpecs() {
		scope.global[int32(s.ID())] = s.IsUnpartitioned()
		if s.IsUnpartitioned() {
			scope.staged[partKey(int32(s.ID()), nil)] = true
		}
	}
	gp := &t.state.global
	gp.mu.Lock()
	defer gp.mu.Unlock()
	if gp.parts == nil {
		gp.parts = map[string]map[string]int64{}
	}
	for _, tk := range tasks {
		for _, d := range tk.EqualityDeleteFiles {
			if !scope.global[d.SpecID()] {
				continue
			}
			if _, ok := scope.parts[d.FilePath()]; ok {
				continue
			}
			parts, ok := gp.parts[d.FilePath()]
			if !ok {
				var err error
				if parts, err = t.readGlobalParts(ctx, tbl, d); err != nil {
					return nil, err
				}
				gp.parts[d.FilePath()] = parts
			}
			scope.parts[d.FilePath()] = parts
		}
	}
	for path := range gp.parts {
		if _, ok := scope.parts[path]; !ok {
			delete(gp.parts, path) // dropped by a compaction
		}
	}
	return scope, nil
}

// readGlobalParts reads a global delete file's partition source columns
// and counts its rows per partition of the table's spec.
func (t *Table) readGlobalParts(ctx context.Context, tbl *table.Table, d iceberg.DataFile) (map[string]int64, error) {
	names := make([]string, 0, t.delOut.schema.NumFields())
	for _, f := range t.delOut.schema.Fields() {
		names = append(names, f.Name)
	}
	task := table.FileScanTask{File: d, Start: 0, Length: d.FileSizeBytes()}
	_, recs, err := tbl.Scan(table.WithSelectedFields(names...)).ReadTasks(ctx, []table.FileScanTask{task})
	if err != nil {
		return nil, fmt.Errorf("read the global deletes %s: %w", d.FilePath(), err)
	}
	out := map[string]int64{}
	specID := int32(t.part.spec.ID())
	vals := map[int]any{}
	for rec, err := range recs {
		if err != nil {
			return nil, fmt.Errorf("read the global deletes %s: %w", d.FilePath(), err)
		}
		rows, err := rowsFromBatch(rec, t.Schema)
		rec.Release()
		if err != nil {
			return nil, fmt.Errorf("read the global deletes %s: %w", d.FilePath(), err)
		}
		for _, r := range rows {
			pv, err := t.part.values(r)
			if err != nil {
				return nil, fmt.Errorf("the partition of a row of the global deletes %s: %w", d.FilePath(), err)
			}
			clear(vals)
			for i, v := range pv {
				vals[t.part.fields[i].fieldID] = v
			}
			out[partKey(specID, vals)]++
		}
	}
	return out, nil
}

// partitionKey names the partition of a data or delete file.
func partitionKey(df iceberg.DataFile) string { return partKey(df.SpecID(), df.Partition()) }

// partKey encodes a partition (spec id, and values by partition field id)
// so that a partition encodes alike whether its values were read from a
// manifest or computed from a row, whose Go types may differ (int32 and
// iceberg.Date for a day, int64 and iceberg.Timestamp).
func partKey(specID int32, vals map[int]any) string {
	ids := make([]int, 0, len(vals))
	for id := range vals {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(specID)))
	for _, id := range ids {
		b.WriteByte('/')
		b.WriteString(strconv.Itoa(id))
		b.WriteByte('=')
		writePartValue(&b, vals[id])
	}
	return b.String()
}

func writePartValue(b *strings.Builder, v any) {
	if v == nil {
		b.WriteString("null")
		return
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString("i" + strconv.FormatInt(rv.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString("i" + strconv.FormatUint(rv.Uint(), 10))
	case reflect.String:
		b.WriteString("s" + strconv.Quote(rv.String()))
	case reflect.Slice:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			b.WriteString("b" + strconv.Quote(string(rv.Bytes())))
			return
		}
		fmt.Fprintf(b, "%v", v)
	default:
		fmt.Fprintf(b, "%v", v)
	}
}
