package capture

import (
	"github.com/cdcsync/cdcsync/capture/binlogpos"

	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"unsafe"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	cdcsync "github.com/cdcsync/cdcsync"
)

// Row images decoded straight from the event's bytes.
//
// go-mysql decodes every value of a rows event into an any (an allocation
// per value), formats DECIMALs and temporals as text, and parses DECIMALs
// back into big.Int-backed decimals; decodeBinlogRow then turns those
// values into cdcsync's, parsing the text once more. In the catch-up that
// was about a third of the daemon's CPU (go-mysql's decodeImage 23%, our
// decodeBinlogRow 10%, plus the garbage of both). The stream therefore
// asks go-mysql for the event header only (deferRows) and decodes the row
// images itself with a decoder compiled once per table map (rowDecoder),
// for the column types it knows: all but MySQL's binary JSON, spatial
// types, VECTOR and the temporal types of before MySQL 5.6. Anything else
// (those, MariaDB's compressed rows events, MySQL's partial JSON updates,
// images without every column), and any value that is not
// plainly valid (a zero date, an integer out of range, a malformed image),
// sends the whole event down go-mysql's path, which reports errors and
// applies the types: policies: the fast path never decides a value on its
// own, it only computes the values that path would compute.

// deferredRows is what deferRows leaves in RowsEvent.Rows in place of the
// decoded rows: the event's body, decoded later by the reader.
type deferredRows struct {
	pos  int // where the rows start in data (after the header)
	data []byte
}

// deferRows is the stream's RowsEventDecodeFunc: it decodes the header (the
// table and the column bitmaps) and keeps the rows for the reader. go-mysql
// hands each event its own copy of the bytes, so keeping them is safe.
func deferRows(e *replication.RowsEvent, data []byte) error {
	pos, err := e.DecodeHeader(data)
	if err != nil {
		return err
	}
	e.Rows = [][]any{{deferredRows{pos: pos, data: data}}}
	return nil
}

// deferredOf returns the rows deferRows kept, if e holds them.
func deferredOf(e *replication.RowsEvent) (deferredRows, bool) {
	if len(e.Rows) == 1 && len(e.Rows[0]) == 1 {
		d, ok := e.Rows[0][0].(deferredRows)
		return d, ok
	}
	return deferredRows{}, false
}

// decodeDeferred decodes the rows deferRows kept with go-mysql, as if it
// had decoded them when it read the event.
func decodeDeferred(e *replication.RowsEvent, d deferredRows) error {
	e.Rows, e.SkippedColumns = nil, nil
	return e.DecodeData(d.pos, d.data)
}

// colOp is how a column's value is read from a row image.
type colOp uint8

const (
	opInt colOp = iota
	opFloat
	opDouble
	opDecimal
	opDate
	opDatetime2
	opTimestamp2
	opString // length-prefixed bytes: VARCHAR, CHAR, BINARY, VARBINARY, TEXT, BLOB
	opTime2
	// Rarer types, whose bytes are read here and whose value is decided
	// by the same functions as go-mysql's value of them would be.
	opYear
	opEnum // width: 1 or 2 bytes, little-endian
	opSet  // width: 1 to 8 bytes, little-endian
	opBit  // width: 1 to 8 bytes, big-endian
)

type colDecoder struct {
	op       colOp
	col      *cdcsync.Column
	width    int  // bytes of an integer; bytes of a string's length prefix
	unsigned bool // the table map says UNSIGNED (MySQL's full row metadata)
	// fsp is a temporal's fractional digits, scale a DECIMAL's.
	fsp, prec, scale int
	// plain: a UTF-8 text column whose value is its bytes (trimmed of
	// trailing spaces for CHAR), copied into the row's arena (or, when
	// large, shared with the event: shareValueBytes).
	plain, trim bool
	// shared: a binary column whose value is its bytes as they are (not
	// BINARY(n), not spatial), which a large value may share with the
	// event (shareValueBytes).
	shared bool
}

// rowDecoder decodes the row images of one table map for one schema.
type rowDecoder struct {
	cols []colDecoder
	// share: the event being decoded holds one image per row (inserts and
	// deletes) and its bytes are its own, so its large values are taken
	// from it without a copy.
	share   bool
	scalars int // columns whose values are numbers or temporals (rowBlock)
	// The text of the image being decoded, and where each value is in it.
	text  []byte
	spans []textSpan
}

// compileRowDecoder returns the decoder of m's row images into s's rows,
// or nil when a column has a type it leaves to go-mysql.
func compileRowDecoder(m *replication.TableMapEvent, s *cdcsync.TableSchema) *rowDecoder {
	if m == nil || int(m.ColumnCount) != len(s.Columns) || len(m.ColumnType) != len(s.Columns) || len(m.ColumnMeta) != len(s.Columns) {
		return nil
	}
	unsigned := m.UnsignedMap()
	d := &rowDecoder{cols: make([]colDecoder, len(s.Columns))}
	for i := range s.Columns {
		c := &s.Columns[i]
		cd := colDecoder{col: c, unsigned: unsigned[i]}
		tp, meta := m.ColumnType[i], m.ColumnMeta[i]
		if tp == mysql.MYSQL_TYPE_STRING && meta >= 256 {
			// CHAR, BINARY, ENUM and SET carry their real type and length in
			// meta (go-mysql's decodeValue).
			b0, b1 := byte(meta>>8), int(meta&0xff)
			length := b1
			if b0&0x30 != 0x30 {
				length = b1 | int((b0&0x30)^0x30)<<4
				b0 |= 0x30
			}
			switch b0 {
			case mysql.MYSQL_TYPE_STRING:
				meta = uint16(length)
			case mysql.MYSQL_TYPE_ENUM, mysql.MYSQL_TYPE_SET:
				tp, meta = b0, uint16(b1) // the value's size in bytes
			default:
				return nil
			}
		}
		switch tp {
		case mysql.MYSQL_TYPE_TINY, mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_INT24, mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_LONGLONG:
			if (c.Kind != cdcsync.KindInt32 && c.Kind != cdcsync.KindInt64) || decIsBit(c) {
				return nil
			}
			cd.op, cd.width = opInt, intBytes(tp)
		case mysql.MYSQL_TYPE_FLOAT, mysql.MYSQL_TYPE_DOUBLE:
			if c.Kind != cdcsync.KindFloat32 && c.Kind != cdcsync.KindFloat64 {
				return nil
			}
			cd.op = opFloat
			if tp == mysql.MYSQL_TYPE_DOUBLE {
				cd.op = opDouble
			}
		case mysql.MYSQL_TYPE_NEWDECIMAL:
			cd.op, cd.prec, cd.scale = opDecimal, int(meta>>8), int(meta&0xff)
			if c.Kind != cdcsync.KindDecimal || decIsBit(c) || cd.prec != c.Precision || cd.scale != c.Scale || cd.prec > 38 || cd.scale > cd.prec {
				return nil
			}
		case mysql.MYSQL_TYPE_DATE:
			if c.Kind != cdcsync.KindDate {
				return nil
			}
			cd.op = opDate
		case mysql.MYSQL_TYPE_DATETIME2:
			if c.Kind != cdcsync.KindTimestamp || meta > 6 {
				return nil
			}
			cd.op, cd.fsp = opDatetime2, int(meta)
		case mysql.MYSQL_TYPE_TIMESTAMP2:
			if c.Kind != cdcsync.KindTimestampTZ || meta > 6 {
				return nil
			}
			cd.op, cd.fsp = opTimestamp2, int(meta)
		case mysql.MYSQL_TYPE_TIME2:
			if c.Kind != cdcsync.KindTime || meta > 6 {
				return nil
			}
			cd.op, cd.fsp = opTime2, int(meta)
		case mysql.MYSQL_TYPE_YEAR:
			if c.Kind != cdcsync.KindInt32 && c.Kind != cdcsync.KindInt64 {
				return nil
			}
			cd.op = opYear
		case mysql.MYSQL_TYPE_ENUM, mysql.MYSQL_TYPE_SET:
			class := decStrClassOf(c.DataType)
			if c.Kind != cdcsync.KindString || (class != decStrEnum && class != decStrSet) {
				return nil
			}
			cd.op, cd.width = opEnum, int(meta&0xff)
			if tp == mysql.MYSQL_TYPE_SET {
				cd.op = opSet
			}
			if cd.width < 1 || cd.width > 8 || (cd.op == opEnum && cd.width > 2) {
				return nil
			}
		case mysql.MYSQL_TYPE_BIT:
			nbits := int(meta>>8)*8 + int(meta&0xff)
			cd.op, cd.width = opBit, (nbits+7)/8
			if cd.width < 1 || cd.width > 8 || !decIsBit(c) {
				return nil
			}
		case mysql.MYSQL_TYPE_VARCHAR, mysql.MYSQL_TYPE_VAR_STRING, mysql.MYSQL_TYPE_STRING, mysql.MYSQL_TYPE_BLOB:
			cd.op, cd.width = opString, 1
			switch {
			case tp == mysql.MYSQL_TYPE_BLOB:
				if meta < 1 || meta > 4 {
					return nil
				}
				cd.width = int(meta)
			case meta >= 256:
				cd.width = 2
			}
			switch c.Kind {
			case cdcsync.KindString:
				class := decStrClassOf(c.DataType)
				switch class {
				case decStrDecimal, decStrEnum, decStrSet:
					return nil
				}
				cd.plain = class <= decStrChar && !decHasCharset(c)
				cd.trim = class == decStrChar
			case cdcsync.KindBinary:
				cd.shared = !c.Spatial() && !strings.EqualFold(c.DataType, "binary")
			default:
				return nil
			}
		default:
			return nil
		}
		switch cd.op {
		case opInt, opFloat, opDouble, opDate, opDatetime2, opTimestamp2, opTime2:
			d.scalars++
		}
		d.cols[i] = cd
	}
	return d
}

// intBytes is the size of an integer of binlog type tp.
func intBytes(tp byte) int {
	switch tp {
	case mysql.MYSQL_TYPE_TINY:
		return 1
	case mysql.MYSQL_TYPE_SHORT:
		return 2
	case mysql.MYSQL_TYPE_INT24:
		return 3
	case mysql.MYSQL_TYPE_LONG:
		return 4
	}
	return 8
}

// fastEventType says whether the reader may decode an event of this type
// itself: the plain rows events, not MariaDB's compressed ones nor MySQL's
// partial JSON updates.
func fastEventType(t replication.EventType) bool {
	switch t {
	case replication.WRITE_ROWS_EVENTv1, replication.WRITE_ROWS_EVENTv2,
		replication.UPDATE_ROWS_EVENTv1, replication.UPDATE_ROWS_EVENTv2,
		replication.DELETE_ROWS_EVENTv1, replication.DELETE_ROWS_EVENTv2:
		return true
	}
	return false
}

// allSet reports whether the first n bits of bitmap are set: the image has
// every column (binlog_row_image FULL).
func allSet(bitmap []byte, n int) bool {
	if len(bitmap) < (n+7)/8 {
		return false
	}
	for i := range n {
		if bitmap[i>>3]&(1<<(i&7)) == 0 {
			return false
		}
	}
	return true
}

// decode decodes the row images of an event's body (data from d.pos): one
// per row, or two (before, after) for an update. It returns false when any
// of them is left to go-mysql.
//
// shareable says whether body is a buffer of the event's own, which its
// large values may share (shareValueBytes): go-mysql reads each event into
// one, but decompresses a compressed transaction into one buffer for all
// its events, which a value must not keep alive.
func (d *rowDecoder) decode(e *replication.RowsEvent, body deferredRows, shareable bool) (images []cdcsync.Row, ok bool) {
	n := len(d.cols)
	update := e.Type() == replication.EnumRowsEventTypeUpdate
	d.share = shareable && !update
	if !allSet(e.ColumnBitmap1, n) || (update && !allSet(e.ColumnBitmap2, n)) {
		return nil, false
	}
	defer func() {
		// A malformed image reads past its end: go-mysql decodes the event
		// again and reports what is wrong.
		if recover() != nil {
			images, ok = nil, false
		}
	}()
	data := body.data[body.pos:]
	for len(data) > 0 {
		row, used, ok := d.image(data)
		if !ok {
			return nil, false
		}
		images = append(images, row)
		data = data[used:]
	}
	if update && len(images)%2 != 0 {
		return nil, false
	}
	return images, true
}

// image decodes one row image at the start of data and returns how many
// bytes it took.
//
// A row costs four allocations whatever its width: the row, a block that
// holds its numbers and temporals, its text (exactly sized, copied from the
// decoder's scratch) and the headers of its strings; boxed values point
// into the block and the headers (boxedAt). Boxing each value on its own
// was 80% of the catch-up's allocations, and the collector's work grew
// with them.
func (d *rowDecoder) image(data []byte) (cdcsync.Row, int, bool) {
	nulls := data[:(len(d.cols)+7)/8]
	p := len(nulls)
	row := make(cdcsync.Row, len(d.cols))
	block := newRowBlock(d.scalars, 0)
	d.text, d.spans = d.text[:0], d.spans[:0]
	for i := range d.cols {
		if nulls[i>>3]&(1<<(i&7)) != 0 {
			continue
		}
		used, ok := d.cols[i].decode(data[p:], d, row, i, &block)
		if !ok {
			return nil, 0, false
		}
		p += used
	}
	if len(d.spans) > 0 {
		text := make([]byte, len(d.text))
		copy(text, d.text)
		block.strs = make([]string, 0, len(d.spans))
		for _, sp := range d.spans {
			var s string
			if sp.n > 0 {
				s = unsafe.String(&text[sp.off], sp.n)
			}
			row[sp.col] = block.string(s)
		}
	}
	if cap(d.text) > 1<<20 {
		d.text = nil // a huge row's scratch is not kept
	}
	return row, p, true
}

// shareValueBytes is the size from which a text or binary value of an
// insert or a delete is not copied out of its event but shares the event's
// bytes (go-mysql reads each event into its own buffer, and nothing writes
// to it). A row with such a value is most of its event (MySQL starts a new
// rows event past binlog_row_event_max_size, 8 KiB by default), so the
// event costs no more than the copy would, and rows of LONGBLOBs of
// megabytes are not held twice while they are read (TestHugeTransactions).
// Updates copy: their after image would keep the before image alive; so
// do the events of a compressed transaction, which share one buffer.
const shareValueBytes = 64 << 10

// textSpan is where a text value of the image being decoded is in
// rowDecoder.text.
type textSpan struct{ col, off, n int }

// decode decodes column i's value at the start of b into row, as
// decodeBinlogRow decodes what go-mysql makes of the same bytes, and
// returns how many bytes it took.
func (cd *colDecoder) decode(b []byte, d *rowDecoder, row cdcsync.Row, i int, block *rowBlock) (int, bool) {
	c := cd.col
	switch cd.op {
	case opInt:
		var uv uint64
		for i := cd.width - 1; i >= 0; i-- {
			uv = uv<<8 | uint64(b[i])
		}
		var sv int64
		if !cd.unsigned {
			shift := 64 - 8*cd.width
			sv = int64(uv<<shift) >> shift
		}
		u, neg := decIntParts(c, !cd.unsigned, sv, uv)
		n, err := decIntRange(c, u, neg)
		if err != nil {
			return 0, false
		}
		if c.Kind == cdcsync.KindInt32 {
			row[i] = block.int32(int32(n))
		} else {
			row[i] = block.int64(n)
		}
		return cd.width, true
	case opFloat, opDouble:
		var f float64
		n := 8
		if cd.op == opFloat {
			f, n = float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), 4
		} else {
			f = math.Float64frombits(binary.LittleEndian.Uint64(b))
		}
		if c.Kind == cdcsync.KindFloat32 {
			row[i] = block.float32(float32(f))
		} else {
			row[i] = block.float64(f)
		}
		return n, true
	case opDecimal:
		start := len(d.text)
		var n int
		d.text, n = decodeBinaryDecimal(b, cd.prec, cd.scale, d.text)
		d.spans = append(d.spans, textSpan{col: i, off: start, n: len(d.text) - start})
		return n, true
	case opDate:
		v := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
		y, m, dd := int64(v>>9), int64(v>>5&15), int64(v&31)
		if y < 1 || y > 9999 || !decValidYMD(y, m, dd) {
			return 0, false // zero and invalid dates: the policies decide
		}
		row[i] = block.int32(int32(decDaysFromCivil(y, m, dd)))
		return 3, true
	case opDatetime2:
		n := 5 + (cd.fsp+1)/2
		packed := int64(b[0])<<32 | int64(b[1])<<24 | int64(b[2])<<16 | int64(b[3])<<8 | int64(b[4])
		packed -= 0x8000000000
		if packed <= 0 {
			return 0, false
		}
		ymd, hms := packed>>17, packed&(1<<17-1)
		ym := ymd >> 5
		y, m, dd := ym/13, ym%13, ymd&31
		hh, mi, ss := hms>>12, hms>>6&63, hms&63
		if y < 1 || y > 9999 || !decValidYMD(y, m, dd) || hh > 23 || mi > 59 || ss > 59 {
			return 0, false
		}
		days := decDaysFromCivil(y, m, dd)
		row[i] = block.int64(((days*24+hh)*60+mi)*60*1e6 + ss*1e6 + fracMicros(b[5:], cd.fsp))
		return n, true
	case opTimestamp2:
		n := 4 + (cd.fsp+1)/2
		sec := int64(binary.BigEndian.Uint32(b))
		if sec == 0 {
			return 0, false // the zero timestamp: the policies decide
		}
		row[i] = block.int64(sec*1e6 + fracMicros(b[4:], cd.fsp))
		return n, true
	case opTime2:
		v, n, ok := time2Micros(b, cd.fsp)
		if ok {
			row[i] = block.int64(v)
		}
		return n, ok
	case opString:
		var l int
		for i := cd.width - 1; i >= 0; i-- {
			l = l<<8 | int(b[i])
		}
		n := cd.width + l
		raw := b[cd.width:n:n]
		large := d.share && len(raw) >= shareValueBytes
		if large && cd.shared {
			row[i] = raw
			return n, true
		}
		if cd.plain {
			if cd.trim {
				raw = bytes.TrimRight(raw, " ")
			}
			if large {
				row[i] = unsafe.String(unsafe.SliceData(raw), len(raw))
				return n, true
			}
			d.spans = append(d.spans, textSpan{col: i, off: len(d.text), n: len(raw)})
			d.text = append(d.text, raw...)
			return n, true
		}
		var (
			v   any
			err error
		)
		if c.Kind == cdcsync.KindBinary {
			v, err = decBinaryValue(c, raw)
		} else {
			v, err = decBinlogString(c, raw)
		}
		row[i] = v
		return n, err == nil
	}
	// The rarer types: their value is decided by the function that decides
	// go-mysql's value of the same bytes.
	var (
		v   any
		n   int
		err error
	)
	switch cd.op {
	case opYear:
		y := int(b[0])
		if y != 0 {
			y += 1900
		}
		v, err = DecodeBinlog(c, y)
		n = 1
	case opEnum, opSet:
		var u uint64
		for i := cd.width - 1; i >= 0; i-- {
			u = u<<8 | uint64(b[i])
		}
		v, err = decBinlogString(c, int64(u))
		n = cd.width
	case opBit:
		var u uint64
		for i := range cd.width {
			u = u<<8 | uint64(b[i])
		}
		v, err = DecodeBinlog(c, int64(u))
		n = cd.width
	default:
		return 0, false
	}
	row[i] = v
	return n, err == nil
}

// time2Micros reads a TIME2 with fsp digits as signed microseconds, and
// the bytes it took; false for a value outside TIME's range. Negative
// values with 1 to 4 digits store their fraction in reverse order
// (MySQL's my_time.cc).
func time2Micros(b []byte, fsp int) (int64, int, bool) {
	n := 3 + (fsp+1)/2
	be := func(k int) int64 {
		var v int64
		for i := range k {
			v = v<<8 | int64(b[i])
		}
		return v
	}
	var packed int64
	switch fsp {
	case 1, 2:
		ip, frac := be(3)-0x800000, int64(b[3])
		if ip < 0 && frac != 0 {
			ip, frac = ip+1, frac-0x100
		}
		packed = ip<<24 + frac*10000
	case 3, 4:
		ip, frac := be(3)-0x800000, int64(binary.BigEndian.Uint16(b[3:]))
		if ip < 0 && frac != 0 {
			ip, frac = ip+1, frac-0x10000
		}
		packed = ip<<24 + frac*100
	case 5, 6:
		packed = be(6) - 0x800000000000
	default:
		packed = (be(3) - 0x800000) << 24
	}
	neg := packed < 0
	if neg {
		packed = -packed
	}
	hms, us := packed>>24, packed&(1<<24-1)
	h, m, s := hms>>12&1023, hms>>6&63, hms&63
	if h > 838 || m > 59 || s > 59 || us > 999999 {
		return 0, 0, false
	}
	v := ((h*60+m)*60+s)*1e6 + us
	if neg {
		v = -v
	}
	return v, n, true
}

// fracMicros reads the fractional seconds of a DATETIME2, TIMESTAMP2 or
// TIME2 with fsp digits as microseconds.
func fracMicros(b []byte, fsp int) int64 {
	switch fsp {
	case 1, 2:
		return int64(b[0]) * 10000
	case 3, 4:
		return int64(binary.BigEndian.Uint16(b)) * 100
	case 5, 6:
		return int64(b[0])<<16 | int64(b[1])<<8 | int64(b[2])
	}
	return 0
}

// decDigitBytes is the size of a group of 0 to 8 leftover decimal digits
// in MySQL's binary DECIMAL; full groups of 9 take 4 bytes.
var decDigitBytes = [9]int{0, 1, 1, 2, 2, 3, 3, 4, 4}

// decodeBinaryDecimal appends the canonical text (decCanonicalDecimal) of
// the binary DECIMAL(prec, scale) at the start of b to out, and returns it
// and the bytes the value took. The value is big-endian groups of 9 digits
// in 4 bytes (the leftover digits first in the integer part, last in the
// fraction), the top bit set for a positive value and every bit inverted
// for a negative one (MySQL's strings/decimal.c).
func decodeBinaryDecimal(b []byte, prec, scale int, out []byte) ([]byte, int) {
	intg := prec - scale
	intFull, intLeft := intg/9, intg%9
	fracFull, fracLeft := scale/9, scale%9
	size := decDigitBytes[intLeft] + intFull*4 + fracFull*4 + decDigitBytes[fracLeft]
	var mask byte
	if b[0]&0x80 == 0 {
		mask = 0xff
	}
	// group reads the n-byte big-endian group at p, sign bit cleared.
	group := func(p, n int) uint32 {
		var v uint32
		for i := range n {
			x := b[p+i] ^ mask
			if p+i == 0 {
				x ^= 0x80
			}
			v = v<<8 | uint32(x)
		}
		return v
	}
	start := len(out)
	out = append(out, '-')
	p, zero := 0, true
	digits := func(v uint32, width int) {
		var tmp [9]byte
		for i := width - 1; i >= 0; i-- {
			tmp[i] = byte('0' + v%10)
			v /= 10
		}
		out = append(out, tmp[:width]...)
	}
	// The integer part without leading zeros.
	intStart := len(out)
	if n := decDigitBytes[intLeft]; n > 0 {
		if v := group(p, n); v != 0 {
			digits(v, intLeft)
		}
		p += n
	}
	for range intFull {
		digits(group(p, 4), 9)
		p += 4
	}
	i := intStart
	for i < len(out) && out[i] == '0' {
		i++
	}
	out = append(out[:intStart], out[i:]...)
	if len(out) == intStart {
		out = append(out, '0')
	} else {
		zero = false
	}
	if scale > 0 {
		out = append(out, '.')
		for range fracFull {
			v := group(p, 4)
			zero = zero && v == 0
			digits(v, 9)
			p += 4
		}
		if n := decDigitBytes[fracLeft]; n > 0 {
			v := group(p, n)
			zero = zero && v == 0
			digits(v, fracLeft)
			p += n
		}
	}
	if mask == 0 || zero {
		out = append(out[:start], out[start+1:]...) // no sign: positive, or zero
	}
	return out, size
}

// decIntParts is decBinlogInt for an integer already read: signed with
// value sv, or unsigned with value uv. A signed value in an UNSIGNED column
// is reinterpreted at the column's width, an unsigned value in a signed
// column sign-extended at that width.
func decIntParts(c *cdcsync.Column, signed bool, sv int64, uv uint64) (u uint64, neg bool) {
	width := decIntWidth(c)
	if signed && c.Unsigned {
		signed, uv = false, uint64(sv)
		if width < 64 {
			uv &= 1<<width - 1
		}
	} else if !signed && !c.Unsigned && width < 64 && uv>>(width-1) == 1 && uv < 1<<width {
		signed, sv = true, int64(uv)-1<<width
	}
	if signed {
		if sv < 0 {
			return uint64(-(sv + 1)) + 1, true
		}
		return uint64(sv), false
	}
	return uv, false
}

// checkImages compares the images the fast path decoded with those
// go-mysql's path decodes (StreamConfig.CheckRowImages).
func checkImages(s *cdcsync.TableSchema, e *replication.RowsEvent, body deferredRows, images []cdcsync.Row, p *ValuePolicy, pos binlogpos.Pos) error {
	if err := decodeDeferred(e, body); err != nil {
		return fmt.Errorf("check the row images of %s: go-mysql cannot decode the event: %w", s.ID, err)
	}
	defer func() { e.Rows, e.SkippedColumns = [][]any{{body}}, nil }()
	if len(e.Rows) != len(images) {
		return fmt.Errorf("check the row images of %s: %d images decoded, go-mysql decodes %d", s.ID, len(images), len(e.Rows))
	}
	for i, raw := range e.Rows {
		want, err := decodeBinlogRow(s, raw, p, pos)
		if err != nil {
			return fmt.Errorf("check the row images of %s: image %d decoded, go-mysql's path fails: %w", s.ID, i, err)
		}
		for j := range want {
			if !reflect.DeepEqual(want[j], images[i][j]) {
				return fmt.Errorf("check the row images of %s: image %d column %s decoded as %#v (%T), go-mysql's path gives %#v (%T)",
					s.ID, i, s.Columns[j].Name, images[i][j], images[i][j], want[j], want[j])
			}
		}
	}
	return nil
}
