package lake

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/cdcsync/cdcsync"
)

// This file writes position delete files: (file_path, pos) pairs naming the
// rows of older data files that an epoch replaces or deletes. A position
// delete file applies only to data files of its own partition, under the
// same spec (Iceberg spec, "Scan Planning"), so the deletes are grouped by
// the spec and partition of the data file they name, and each group is
// written sorted by path, then position, as the spec requires.

// posDeleteSchema is the MySQL-side description of a position delete row,
// so that the rows go through the same writer as data rows.
var posDeleteSchema = &cdcsync.TableSchema{
	ID: cdcsync.TableID{Database: "iceberg", Table: "position_deletes"},
	Columns: []cdcsync.Column{
		{Name: "file_path", DataType: "varchar", ColumnType: "varchar(4096)", Kind: cdcsync.KindString},
		{Name: "pos", DataType: "bigint", ColumnType: "bigint", Kind: cdcsync.KindInt64},
	},
}

// posTarget is one row to delete by position: the data file it lives in
// (with that file's spec and partition) and its position.
type posTarget struct {
	path   string
	pos    int64
	spec   int
	values partitionRecord // the data file's partition tuple, in spec field order
}

// writePositionDeletes writes targets as position delete files of tbl, one
// file (rolled at the target size) per spec and partition of the data
// files they name, and returns the files.
func (t *Table) writePositionDeletes(ctx context.Context, tbl *table.Table, targets []posTarget) ([]iceberg.DataFile, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	layout, err := newRowLayout(posDeleteSchema, iceberg.PositionalDeleteSchema)
	if err != nil {
		return nil, err
	}
	// Sorted by spec, partition, path and position: the groups fall out
	// in order and each is sorted as the spec wants.
	keys := make([][]byte, len(targets))
	for i, tg := range targets {
		keys[i] = appendPartitionKey(nil, tg.values)
	}
	order := make([]int, len(targets))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		x, y := &targets[a], &targets[b]
		if c := cmp.Compare(x.spec, y.spec); c != 0 {
			return c
		}
		if c := slices.Compare(keys[a], keys[b]); c != 0 {
			return c
		}
		if c := cmp.Compare(x.path, y.path); c != 0 {
			return c
		}
		return cmp.Compare(x.pos, y.pos)
	})
	rows := make([]cdcsync.Row, len(targets))
	var written []iceberg.DataFile
	fail := func(err error) ([]iceberg.DataFile, error) {
		t.removeFiles(ctx, tbl, written)
		return nil, err
	}
	for start := 0; start < len(order); {
		spec := targets[order[start]].spec
		end := start
		var groups []*group
		for end < len(order) && targets[order[end]].spec == spec {
			i := order[end]
			if len(groups) == 0 || !slices.Equal(keys[i], keys[groups[len(groups)-1].rows[0]]) {
				groups = append(groups, &group{values: targets[i].values})
			}
			g := groups[len(groups)-1]
			g.rows = append(g.rows, i)
			rows[i] = cdcsync.Row{targets[i].path, targets[i].pos}
			end++
		}
		part, err := specPartitioner(tbl.Metadata(), spec)
		if err != nil {
			return fail(fmt.Errorf("position deletes of %s: %w", t.ID, err))
		}
		w, err := t.newFileWriter(ctx, tbl, &fileOut{layout: layout, schema: iceberg.PositionalDeleteSchema, content: iceberg.EntryContentPosDeletes, part: part})
		if err != nil {
			return fail(err)
		}
		sub := make([]cdcsync.Row, 0, end-start)
		for _, g := range groups {
			for j, i := range g.rows {
				g.rows[j] = len(sub)
				sub = append(sub, rows[i])
			}
		}
		files, err := w.writeGroups(ctx, groups, sub, nil)
		if err != nil {
			return fail(fmt.Errorf("write position deletes of %s: %w", t.ID, err))
		}
		written = append(written, files...)
		start = end
	}
	return written, nil
}

// specPartitioner describes the partition spec specID of a table for
// writing files under it: paths and manifest partition values only (the
// rows' partition is known, not computed).
func specPartitioner(meta table.Metadata, specID int) (*partitioner, error) {
	spec := meta.PartitionSpecByID(specID)
	if spec == nil {
		return nil, fmt.Errorf("the table has no partition spec %d", specID)
	}
	p := &partitioner{spec: *spec, schema: meta.CurrentSchema()}
	for _, f := range spec.Fields() {
		p.fields = append(p.fields, partField{fieldID: f.FieldID, col: -1, transform: f.Transform})
	}
	return p, nil
}

// partitionTuple returns a data file's partition values in spec field
// order, as the writer records them.
func partitionTuple(meta table.Metadata, df iceberg.DataFile) (partitionRecord, error) {
	spec := meta.PartitionSpecByID(int(df.SpecID()))
	if spec == nil {
		return nil, fmt.Errorf("data file %s names partition spec %d, which the table does not have", df.FilePath(), df.SpecID())
	}
	vals := df.Partition()
	out := make(partitionRecord, 0, spec.NumFields())
	for _, f := range spec.Fields() {
		out = append(out, vals[f.FieldID])
	}
	return out, nil
}

// encodePartitionTuple encodes a partition tuple for the key index's file
// table (decodePartitionTuple reverses it). Each value is tagged with its
// Go type, so the tuple comes back exactly as the manifest gave it.
func encodePartitionTuple(vals partitionRecord) ([]byte, error) {
	var b []byte
	for i, v := range vals {
		switch x := v.(type) {
		case nil:
			b = append(b, 'n')
		case bool:
			c := byte('f')
			if x {
				c = 't'
			}
			b = append(b, c)
		case int32:
			b = binary.AppendVarint(append(b, 'i'), int64(x))
		case int64:
			b = binary.AppendVarint(append(b, 'l'), x)
		case iceberg.Date:
			b = binary.AppendVarint(append(b, 'd'), int64(x))
		case iceberg.Time:
			b = binary.AppendVarint(append(b, 'T'), int64(x))
		case iceberg.Timestamp:
			b = binary.AppendVarint(append(b, 's'), int64(x))
		case iceberg.TimestampNano:
			b = binary.AppendVarint(append(b, 'N'), int64(x))
		case float32:
			b = binary.BigEndian.AppendUint32(append(b, 'F'), math.Float32bits(x))
		case float64:
			b = binary.BigEndian.AppendUint64(append(b, 'D'), math.Float64bits(x))
		case string:
			b = append(binary.AppendUvarint(append(b, 'S'), uint64(len(x))), x...)
		case []byte:
			b = append(binary.AppendUvarint(append(b, 'B'), uint64(len(x))), x...)
		case uuid.UUID:
			b = append(append(b, 'U'), x[:]...)
		case iceberg.Decimal:
			b = binary.AppendVarint(append(b, 'M'), int64(x.Scale))
			b = binary.BigEndian.AppendUint64(b, uint64(x.Val.HighBits()))
			b = binary.BigEndian.AppendUint64(b, x.Val.LowBits())
		default:
			return nil, fmt.Errorf("partition value %d is a %T, which cdcsync cannot record in its key index", i, v)
		}
	}
	return b, nil
}

func decodePartitionTuple(b []byte) (partitionRecord, error) {
	var out partitionRecord
	bad := fmt.Errorf("malformed partition tuple %x in the key index", b)
	varint := func() (int64, bool) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	sized := func() ([]byte, bool) {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return nil, false
		}
		v := b[n : n+int(l)]
		b = b[n+int(l):]
		return v, true
	}
	for len(b) > 0 {
		tag := b[0]
		b = b[1:]
		switch tag {
		case 'n':
			out = append(out, nil)
		case 't', 'f':
			out = append(out, tag == 't')
		case 'i', 'l', 'd', 'T', 's', 'N':
			v, ok := varint()
			if !ok {
				return nil, bad
			}
			switch tag {
			case 'i':
				out = append(out, int32(v))
			case 'l':
				out = append(out, v)
			case 'd':
				out = append(out, iceberg.Date(v))
			case 'T':
				out = append(out, iceberg.Time(v))
			case 's':
				out = append(out, iceberg.Timestamp(v))
			case 'N':
				out = append(out, iceberg.TimestampNano(v))
			}
		case 'F':
			if len(b) < 4 {
				return nil, bad
			}
			out = append(out, math.Float32frombits(binary.BigEndian.Uint32(b)))
			b = b[4:]
		case 'D':
			if len(b) < 8 {
				return nil, bad
			}
			out = append(out, math.Float64frombits(binary.BigEndian.Uint64(b)))
			b = b[8:]
		case 'S', 'B':
			v, ok := sized()
			if !ok {
				return nil, bad
			}
			if tag == 'S' {
				out = append(out, string(v))
			} else {
				out = append(out, bytes.Clone(v))
			}
		case 'U':
			if len(b) < 16 {
				return nil, bad
			}
			out = append(out, uuid.UUID(b[:16]))
			b = b[16:]
		case 'M':
			scale, ok := varint()
			if !ok || len(b) < 16 {
				return nil, bad
			}
			hi, lo := binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])
			out = append(out, iceberg.Decimal{Val: decimal128.New(int64(hi), lo), Scale: int(scale)})
			b = b[16:]
		default:
			return nil, bad
		}
	}
	return out, nil
}
