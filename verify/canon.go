package verify

import (
	"crypto/md5"
	"encoding/binary"
	"math"
	"strconv"

	"github.com/cdcsync/cdcsync"
)

// The canonical text of a row is what both sides hash: MySQL computes it in
// SQL (capture.RowTextSQL), cdcsync in Go from the canonical values the lake
// holds (AppendRowText). It is defined on canonical values (see the Kinds in
// cdcsync.go and docs/types.md), so equal rows give equal text, and it is
// unambiguous, so different rows give different text:
//
//	row    = piece*                      one piece per column, in column order
//	piece  = "N"                         NULL
//	       | number ","                  a value of a numeric or temporal kind
//	       | length ":" bytes            a string or binary value: its byte
//	                                     length in decimal, then its bytes
//
// The number of each kind:
//
//   - int32, int64: the decimal integer (YEAR, BIT(2..63) and the integers;
//     SQL: c + 0, which also drops ZEROFILL);
//   - decimal: the canonical text itself, [-]digits[.digits] with exactly the
//     column's scale (DECIMAL p <= 38, BIGINT UNSIGNED, BIT(64); SQL: c + 0);
//   - boolean (BIT(1)): 1 or 0 (SQL: c + 0);
//   - float32, float64: the value as a double, printed as MySQL prints a
//     double (FormatDouble; SQL: c + 0e0);
//   - date: days since 1970-01-01 (SQL: TO_DAYS(c) - 719528);
//   - timestamp (DATETIME) and timestamptz (TIMESTAMP): microseconds since
//     1970-01-01 00:00:00 of the wall clock, respectively of UTC (SQL:
//     TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', c) in a session at
//     time zone '+00:00');
//   - time: [-]hh:mm:ss.ffffff, as MySQL prints a TIME(6) (SQL: CAST(c AS
//     TIME(6))).
//
// Strings are their UTF-8 bytes (SQL: the column converted to utf8mb4, as a
// binary string), binary values their bytes (spatial values without the
// SRID, SQL: SUBSTRING(c, 5)).
//
// The row hash is the first 8 bytes of the MD5 of the row text, big-endian
// (SQL: CONV(LEFT(MD5(text), 16), 16, 10)); a chunk's checksum is the
// number of its rows and the XOR of their hashes, which does not depend on
// the order rows are read in.

// AppendRowText appends the canonical text of row, a row of s, to buf.
func AppendRowText(buf []byte, s *cdcsync.TableSchema, row cdcsync.Row) []byte {
	for i := range s.Columns {
		var v any
		if i < len(row) {
			v = row[i]
		}
		buf = AppendValueText(buf, s.Columns[i].Kind, v)
	}
	return buf
}

// AppendValueText appends the canonical text piece of v, a canonical value
// of kind k (nil: NULL), to buf. A value that is not of its kind's Go type
// is written as a string piece of its %v text, which never equals the text
// of a canonical value of a numeric kind.
func AppendValueText(buf []byte, k cdcsync.Kind, v any) []byte {
	if v == nil {
		return append(buf, 'N')
	}
	switch x := v.(type) {
	case int32:
		if k == cdcsync.KindInt32 || k == cdcsync.KindDate {
			return append(strconv.AppendInt(buf, int64(x), 10), ',')
		}
	case int64:
		switch k {
		case cdcsync.KindInt64, cdcsync.KindTimestamp, cdcsync.KindTimestampTZ:
			return append(strconv.AppendInt(buf, x, 10), ',')
		case cdcsync.KindTime:
			return append(append(buf, cdcsync.FormatTime(x)...), ',')
		}
	case string:
		switch k {
		case cdcsync.KindDecimal:
			return append(append(buf, x...), ',')
		case cdcsync.KindString:
			buf = strconv.AppendInt(buf, int64(len(x)), 10)
			return append(append(buf, ':'), x...)
		}
	case []byte:
		if k == cdcsync.KindBinary {
			buf = strconv.AppendInt(buf, int64(len(x)), 10)
			return append(append(buf, ':'), x...)
		}
	case float32:
		if k == cdcsync.KindFloat32 {
			return append(AppendDouble(buf, float64(x)), ',')
		}
	case float64:
		if k == cdcsync.KindFloat64 {
			return append(AppendDouble(buf, x), ',')
		}
	case bool:
		if k == cdcsync.KindBool {
			if x {
				return append(buf, "1,"...)
			}
			return append(buf, "0,"...)
		}
	}
	// Not a canonical value of k: written so that it matches nothing MySQL
	// computes for a column of k (a numeric kind gets a string piece), and
	// the chunk is compared row by row.
	s := cdcsync.Format(k, v) + "\x00?"
	buf = strconv.AppendInt(buf, int64(len(s)), 10)
	return append(append(buf, ':'), s...)
}

// RowHash is the 64-bit hash of a row's canonical text.
func RowHash(s *cdcsync.TableSchema, row cdcsync.Row) uint64 {
	var arr [256]byte
	return TextHash(AppendRowText(arr[:0], s, row))
}

// TextHash is the 64-bit hash of a canonical row text: the first 8 bytes of
// its MD5, big-endian.
func TextHash(text []byte) uint64 {
	sum := md5.Sum(text)
	return binary.BigEndian.Uint64(sum[:8])
}

// FormatDouble prints f as MySQL and MariaDB print a DOUBLE in a string
// context (my_gcvt with the shortest digits that read back as f): plain
// notation when the decimal point is at most 15 digits right of the first
// digit (or inside the digits) and at most 14 zeros follow "0.", else
// d.ddde[-]N; zero (also negative zero) is "0".
func FormatDouble(f float64) string { return string(AppendDouble(nil, f)) }

// AppendDouble appends FormatDouble(f) to buf.
func AppendDouble(buf []byte, f float64) []byte {
	if f == 0 {
		return append(buf, '0')
	}
	if math.IsNaN(f) || math.IsInf(f, 0) { // MySQL stores neither
		return strconv.AppendFloat(buf, f, 'g', -1, 64)
	}
	if f < 0 {
		buf = append(buf, '-')
		f = -f
	}
	var arr [32]byte
	e := strconv.AppendFloat(arr[:0], f, 'e', -1, 64) // d.ddde±XX
	mant, exp := e, 0
	for i, c := range e {
		if c == 'e' {
			mant = e[:i]
			exp, _ = strconv.Atoi(string(e[i+1:]))
			break
		}
	}
	var digits [24]byte
	n := 0
	for _, c := range mant {
		if c != '.' {
			digits[n] = c
			n++
		}
	}
	d := digits[:n]
	decpt := exp + 1 // digits before the decimal point
	if decpt >= -14 && (decpt <= 15 || n > decpt) {
		switch {
		case decpt <= 0:
			buf = append(buf, "0."...)
			for range -decpt {
				buf = append(buf, '0')
			}
			return append(buf, d...)
		case decpt < n:
			buf = append(buf, d[:decpt]...)
			buf = append(buf, '.')
			return append(buf, d[decpt:]...)
		default:
			buf = append(buf, d...)
			for range decpt - n {
				buf = append(buf, '0')
			}
			return buf
		}
	}
	buf = append(buf, d[0])
	if n > 1 {
		buf = append(buf, '.')
		buf = append(buf, d[1:]...)
	}
	buf = append(buf, 'e')
	return strconv.AppendInt(buf, int64(decpt-1), 10)
}
