package cdcsync

import (
	"encoding/binary"
	"fmt"
	"math"
)

// AppendValue appends an encoding of the canonical value v to buf, such
// that two values encode equally exactly when they are equal and of the
// same Go type; values are tagged with their type and length-prefixed, so a
// concatenation of encodings (a tuple, a key) is unambiguous too. ok is
// false for NULL and for a value that is not canonical.
func AppendValue(buf []byte, v any) (out []byte, ok bool) {
	switch v := v.(type) {
	case int32:
		buf = append(buf, 'i')
		return binary.BigEndian.AppendUint32(buf, uint32(v)), true
	case int64:
		buf = append(buf, 'l')
		return binary.BigEndian.AppendUint64(buf, uint64(v)), true
	case float32:
		buf = append(buf, 'f')
		return binary.BigEndian.AppendUint32(buf, math.Float32bits(v)), true
	case float64:
		buf = append(buf, 'd')
		return binary.BigEndian.AppendUint64(buf, math.Float64bits(v)), true
	case string:
		buf = append(buf, 's')
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		return append(buf, v...), true
	case []byte:
		buf = append(buf, 'b')
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		return append(buf, v...), true
	case bool:
		if v {
			return append(buf, 't'), true
		}
		return append(buf, 'F'), true
	}
	return buf, false
}

// AppendTuple appends the encodings of vals (AppendValue); ok is false
// when one of them is NULL or not canonical, so that such a tuple matches
// nothing.
func AppendTuple(buf []byte, vals ...any) (out []byte, ok bool) {
	for _, v := range vals {
		if buf, ok = AppendValue(buf, v); !ok {
			return buf, false
		}
	}
	return buf, true
}

// AppendKey appends the encoding of row's primary key (AppendValue of each
// key column, in key order) to buf: two rows of the table have the same
// key exactly when their encodings are equal.
func (s *TableSchema) AppendKey(buf []byte, row Row) ([]byte, error) {
	if len(row) != len(s.Columns) {
		return nil, fmt.Errorf("row of %s has %d values but the table has %d columns", s.ID, len(row), len(s.Columns))
	}
	for _, i := range s.PrimaryKey {
		var ok bool
		if buf, ok = AppendValue(buf, row[i]); !ok {
			if row[i] == nil {
				return nil, fmt.Errorf("primary key column %s of %s is NULL", s.Columns[i].Name, s.ID)
			}
			return nil, fmt.Errorf("primary key column %s of %s has an unexpected value %v (%T)", s.Columns[i].Name, s.ID, row[i], row[i])
		}
	}
	return buf, nil
}
