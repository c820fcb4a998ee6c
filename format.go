package cdcsync

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Format renders a canonical value of kind k for people: dates as
// 2006-01-02, timestamps in ISO 8601 (UTC for TIMESTAMP), binary as hex.
func Format(k Kind, v any) string {
	if v == nil {
		return "NULL"
	}
	switch k {
	case KindDate:
		if d, ok := v.(int32); ok {
			return time.Unix(int64(d)*86400, 0).UTC().Format("2006-01-02")
		}
	case KindTimestamp, KindTimestampTZ:
		if us, ok := v.(int64); ok {
			t := time.UnixMicro(us).UTC()
			s := t.Format("2006-01-02 15:04:05.999999")
			if k == KindTimestampTZ {
				s += "Z"
			}
			return s
		}
	case KindBinary:
		if b, ok := v.([]byte); ok {
			return "0x" + hex.EncodeToString(b)
		}
	case KindFloat32:
		if f, ok := v.(float32); ok {
			return strconv.FormatFloat(float64(f), 'g', -1, 32)
		}
	case KindTime:
		if us, ok := v.(int64); ok {
			return FormatTime(us)
		}
	}
	return fmt.Sprint(v)
}

// FormatTime renders microseconds as MySQL prints a TIME(6):
// "-838:59:59.000000", "00:00:00.000001", "100:00:00.000000".
func FormatTime(us int64) string {
	sign := ""
	u := uint64(us)
	if us < 0 {
		sign, u = "-", uint64(-(us+1))+1
	}
	s := u / 1e6
	return fmt.Sprintf("%s%02d:%02d:%02d.%06d", sign, s/3600, s/60%60, s%60, u%1e6)
}

// SortRows orders rows by primary key, for output people and tests compare.
func SortRows(s *TableSchema, rows []Row) {
	sort.Slice(rows, func(i, j int) bool { return CompareKeys(s, rows[i], rows[j]) < 0 })
}

// CompareKeys orders two rows of s by their primary-key values.
func CompareKeys(s *TableSchema, a, b Row) int {
	for _, k := range s.PrimaryKey {
		if c := compareValues(s.Columns[k].Kind, a[k], b[k]); c != 0 {
			return c
		}
	}
	return 0
}

func compareValues(k Kind, a, b any) int {
	if k == KindDecimal {
		x, okx := new(big.Rat).SetString(fmt.Sprint(a))
		y, oky := new(big.Rat).SetString(fmt.Sprint(b))
		if okx && oky {
			return x.Cmp(y)
		}
	}
	switch x := a.(type) {
	case int32:
		if y, ok := b.(int32); ok {
			return cmp.Compare(x, y)
		}
	case int64:
		if y, ok := b.(int64); ok {
			return cmp.Compare(x, y)
		}
	case float32:
		if y, ok := b.(float32); ok {
			return cmp.Compare(x, y)
		}
	case float64:
		if y, ok := b.(float64); ok {
			return cmp.Compare(x, y)
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y)
		}
	case []byte:
		if y, ok := b.([]byte); ok {
			return bytes.Compare(x, y)
		}
	case bool:
		if y, ok := b.(bool); ok {
			switch {
			case x == y:
				return 0
			case y:
				return -1
			}
			return 1
		}
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}
