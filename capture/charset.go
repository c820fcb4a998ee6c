package capture

import (
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/cdcsync/cdcsync"
)

// Character sets.
//
// A SELECT reads text converted to utf8mb4 by the server (SET NAMES
// utf8mb4); the binlog carries the column's own bytes. A textCharset
// converts those bytes to UTF-8 exactly as the server converts them to
// utf8mb4, so both paths give the same string: a byte or sequence the server
// has no Unicode character for becomes "?", as in a SELECT.
//
// The tables come from golang.org/x/text with the server's differences
// applied; TestRealMariaDB/charsets checks every byte (single-byte sets) and
// every two-byte code (gbk, gb2312, euckr) and samples of the Unicode sets
// against the server's own CONVERT(... USING utf8mb4).

// textCharset decodes one character set.
type textCharset struct {
	name   string
	single *[256]rune // single-byte sets
	double *dbcs      // gbk, gb2312, euckr
	wide   int        // ucs2 and utf16 (2), utf32 (4): big-endian; -2 for utf16le
	// pairs: utf16 and utf16le combine surrogate pairs (the server stores
	// no lone surrogate in them). ucs2 and utf32 hold surrogate code points
	// as characters, which the server converts to the three bytes UTF-8
	// would give them; that is not UTF-8, which Iceberg strings are (DuckDB
	// refuses the whole file), so both paths write U+FFFD instead (see
	// decSurrogates).
	pairs bool
}

// charsetUTF8 reports whether text in charset needs no conversion: the
// UTF-8 family and ascii (and "" for a column that is not text).
func charsetUTF8(name string) bool {
	switch strings.ToLower(name) {
	case "", "utf8mb4", "utf8mb3", "utf8", "ascii":
		return true
	}
	return false
}

// charsetSupported reports whether cdcsync decodes text in charset.
func charsetSupported(name string) bool {
	if charsetUTF8(name) {
		return true
	}
	_, ok := singleByteSets[strings.ToLower(name)]
	if ok {
		return true
	}
	switch strings.ToLower(name) {
	case "gbk", "gb2312", "euckr", "ucs2", "utf16", "utf16le", "utf32":
		return true
	}
	return false
}

var charsets sync.Map // name -> *textCharset

// charsetByName returns the decoder of a supported character set that is
// not UTF-8 (nil otherwise). Tables are built on first use.
func charsetByName(name string) *textCharset {
	if v, ok := charsets.Load(name); ok {
		return v.(*textCharset)
	}
	cs := &textCharset{name: name}
	switch name {
	case "ucs2":
		cs.wide = 2
	case "utf16":
		cs.wide, cs.pairs = 2, true
	case "utf16le":
		cs.wide, cs.pairs = -2, true
	case "utf32":
		cs.wide = 4
	case "gbk", "gb2312", "euckr":
		cs.double = dbcsTable(name)
	default:
		sb, ok := singleByteSets[name]
		if !ok {
			return nil
		}
		cs.single = sb.table()
	}
	v, _ := charsets.LoadOrStore(name, cs)
	return v.(*textCharset)
}

// decode converts b to UTF-8.
func (cs *textCharset) decode(b []byte) string {
	var sb strings.Builder
	switch {
	case cs.single != nil:
		ascii := true
		for _, c := range b {
			if c >= 0x80 {
				ascii = false
				break
			}
		}
		if ascii {
			return string(b)
		}
		sb.Grow(len(b) * 2)
		for _, c := range b {
			sb.WriteRune(cs.single[c])
		}
	case cs.double != nil:
		sb.Grow(len(b) * 3 / 2)
		d := cs.double
		for i := 0; i < len(b); i++ {
			c := b[i]
			if c < 0x80 {
				sb.WriteByte(c)
				continue
			}
			if d.lead(c) && i+1 < len(b) && d.trail(b[i+1]) {
				r := rune(d.table[int(c)<<8|int(b[i+1])])
				if r == 0 {
					r = '?'
				}
				sb.WriteRune(r)
				i++
				continue
			}
			sb.WriteByte('?')
		}
	default:
		sb.Grow(len(b))
		w := cs.wide
		if w < 0 {
			w = -w
		}
		for i := 0; i < len(b); i += w {
			if i+w > len(b) {
				sb.WriteByte('?')
				break
			}
			r := cs.unit(b[i:])
			if cs.pairs && r >= 0xD800 && r < 0xDC00 && i+2*w <= len(b) {
				if lo := cs.unit(b[i+w:]); lo >= 0xDC00 && lo < 0xE000 {
					sb.WriteRune(0x10000 + (r-0xD800)<<10 + (lo - 0xDC00))
					i += w
					continue
				}
			}
			switch {
			case r > utf8.MaxRune, r >= 0xD800 && r < 0xE000 && cs.pairs:
				sb.WriteByte('?')
			default:
				sb.WriteRune(r) // a surrogate becomes U+FFFD
			}
		}
	}
	return sb.String()
}

// unit reads one code unit of a Unicode set.
func (cs *textCharset) unit(b []byte) rune {
	switch cs.wide {
	case 2:
		return rune(b[0])<<8 | rune(b[1])
	case -2:
		return rune(b[1])<<8 | rune(b[0])
	}
	return rune(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
}

// singleByte is a single-byte set: x/text's table with the server's
// differences.
type singleByte struct {
	base *charmap.Charmap
	// c1 maps the bytes 0x80 to 0x9F that the base table leaves undefined
	// to the C1 controls U+0080 to U+009F, as the server does for its ISO
	// 8859 sets (and latin1's five bytes that Windows-1252 leaves
	// undefined); allC1 maps all of them (tis620).
	c1, allC1 bool
	// undefined is what the server gives a byte without a character: "?",
	// or U+FFFD for tis620.
	undefined rune
	overrides map[byte]rune
}

// Bytes the base table leaves undefined (U+FFFD) and that the server does
// not map either become "?".
var singleByteSets = map[string]singleByte{
	// MySQL's latin1 is Windows-1252 with 0x81, 0x8D, 0x8F, 0x90 and 0x9D
	// as C1 controls.
	"latin1":   {base: charmap.Windows1252, c1: true},
	"latin2":   {base: charmap.ISO8859_2, c1: true},
	"latin5":   {base: charmap.ISO8859_9, c1: true},
	"latin7":   {base: charmap.ISO8859_13, c1: true},
	"greek":    {base: charmap.ISO8859_7, c1: true, overrides: map[byte]rune{0xa1: 0x02bd, 0xa2: 0x02bc, 0xa4: '?', 0xa5: '?', 0xaa: '?'}},
	"hebrew":   {base: charmap.ISO8859_8, c1: true, overrides: map[byte]rune{0xaf: 0x203e}},
	"tis620":   {base: charmap.Windows874, allC1: true, undefined: 0xfffd, overrides: map[byte]rune{0xa0: 0xfffd}},
	"cp1250":   {base: charmap.Windows1250},
	"cp1251":   {base: charmap.Windows1251},
	"cp1256":   {base: charmap.Windows1256, overrides: map[byte]rune{0x8a: '?', 0x8f: '?', 0x98: '?', 0x9a: '?', 0x9f: '?', 0xaa: '?', 0xc0: '?', 0xff: '?'}},
	"cp1257":   {base: charmap.Windows1257},
	"cp850":    {base: charmap.CodePage850},
	"cp852":    {base: charmap.CodePage852},
	"cp866":    {base: charmap.CodePage866, overrides: map[byte]rune{0xfc: 0x207f, 0xfd: 0x00b2}},
	"koi8r":    {base: charmap.KOI8R},
	"koi8u":    {base: charmap.KOI8U, overrides: map[byte]rune{0x95: 0x2022, 0xae: 0x255d, 0xbe: 0x256c}},
	"macroman": {base: charmap.Macintosh},
}

func (s singleByte) table() *[256]rune {
	var t [256]rune
	for i := range t {
		r := s.base.DecodeByte(byte(i))
		c1 := i >= 0x80 && i <= 0x9f
		switch {
		case c1 && (s.allC1 || (s.c1 && r == utf8.RuneError)):
			r = rune(i)
		case r == utf8.RuneError && s.undefined != 0:
			r = s.undefined
		case r == utf8.RuneError:
			r = '?'
		}
		t[i] = r
	}
	for b, r := range s.overrides {
		t[b] = r
	}
	return &t
}

// dbcs is a double-byte set: a code is a lead byte and a trail byte; bytes
// below 0x80 are ASCII.
type dbcs struct {
	lead, trail func(byte) bool
	table       []uint16 // by lead<<8|trail; 0: no character ("?")
}

func dbcsTable(name string) *dbcs {
	between := func(lo, hi byte) func(byte) bool { return func(b byte) bool { return b >= lo && b <= hi } }
	var d dbcs
	var enc encoding.Encoding
	var unmapped []uint16
	var overrides map[uint16]rune
	switch name {
	case "gbk":
		// The server's gbk lacks 82 codes of x/text's GBK (GB 18030's
		// two-byte part), among them 0xA2E3 (the euro sign) and most of
		// 0xFE50 to 0xFE9F.
		enc = simplifiedchinese.GBK
		d.lead = between(0x81, 0xfe)
		d.trail = func(b byte) bool { return (b >= 0x40 && b <= 0x7e) || (b >= 0x80 && b <= 0xfe) }
		unmapped = gbkUnmapped
	case "gb2312":
		// EUC-CN: GB 2312 only; x/text's GBK decodes it with a few
		// additions the server does not have, and two differences.
		enc = simplifiedchinese.GBK
		d.lead, d.trail = between(0xa1, 0xf7), between(0xa1, 0xfe)
		unmapped = gb2312Unmapped
		overrides = map[uint16]rune{0xa1a4: 0x30fb, 0xa1aa: 0x2015}
	case "euckr":
		// The server's euckr includes the CP949 (UHC) extension, as x/text's.
		enc = korean.EUCKR
		d.lead = between(0x81, 0xfe)
		d.trail = func(b byte) bool {
			return (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || (b >= 0x81 && b <= 0xfe)
		}
	}
	d.table = make([]uint16, 1<<16)
	dec := enc.NewDecoder()
	var in [2]byte
	out := make([]byte, 8)
	for lead := 0x81; lead <= 0xfe; lead++ {
		if !d.lead(byte(lead)) {
			continue
		}
		for trail := 0x40; trail <= 0xfe; trail++ {
			if !d.trail(byte(trail)) {
				continue
			}
			in[0], in[1] = byte(lead), byte(trail)
			dec.Reset()
			n, _, err := dec.Transform(out, in[:], true)
			if err != nil {
				continue
			}
			r, size := utf8.DecodeRune(out[:n])
			if size != n || r == utf8.RuneError || r > 0xffff {
				continue
			}
			d.table[lead<<8|trail] = uint16(r)
		}
	}
	for _, c := range unmapped {
		d.table[c] = 0
	}
	for c, r := range overrides {
		d.table[c] = uint16(r)
	}
	return &d
}

var gbkUnmapped = []uint16{
	0xa2e3, 0xa3a0, 0xa8bf, 0xa989, 0xa98a, 0xa98b, 0xa98c, 0xa98d, 0xa98e, 0xa98f, 0xa990, 0xa991, 0xa992, 0xa993, 0xa994, 0xa995,
	0xfe50, 0xfe54, 0xfe55, 0xfe56, 0xfe57, 0xfe58, 0xfe5a, 0xfe5b, 0xfe5c, 0xfe5d, 0xfe5e, 0xfe5f, 0xfe60, 0xfe62, 0xfe63, 0xfe64,
	0xfe65, 0xfe68, 0xfe69, 0xfe6a, 0xfe6b, 0xfe6e, 0xfe6f, 0xfe70, 0xfe71, 0xfe72, 0xfe73, 0xfe74, 0xfe75, 0xfe77, 0xfe78, 0xfe79,
	0xfe7a, 0xfe7b, 0xfe7c, 0xfe7d, 0xfe80, 0xfe81, 0xfe82, 0xfe83, 0xfe84, 0xfe85, 0xfe86, 0xfe87, 0xfe88, 0xfe89, 0xfe8a, 0xfe8b,
	0xfe8c, 0xfe8d, 0xfe8e, 0xfe8f, 0xfe92, 0xfe93, 0xfe94, 0xfe95, 0xfe96, 0xfe97, 0xfe98, 0xfe99, 0xfe9a, 0xfe9b, 0xfe9c, 0xfe9d,
	0xfe9e, 0xfe9f,
}

var gb2312Unmapped = []uint16{
	0xa2a1, 0xa2a2, 0xa2a3, 0xa2a4, 0xa2a5, 0xa2a6, 0xa2a7, 0xa2a8, 0xa2a9, 0xa2aa, 0xa2e3, 0xa6e0, 0xa6e1, 0xa6e2, 0xa6e3, 0xa6e4,
	0xa6e5, 0xa6e6, 0xa6e7, 0xa6e8, 0xa6e9, 0xa6ea, 0xa6eb, 0xa6ee, 0xa6ef, 0xa6f0, 0xa6f1, 0xa6f2, 0xa6f4, 0xa6f5, 0xa8bb, 0xa8bd,
	0xa8be, 0xa8bf, 0xa8c0,
}

// collationCharsets lists the collation ids below 256 of the character sets
// a text column can be decoded in (MariaDB 10.11's and MySQL's share them;
// 255 is MySQL 8's utf8mb4_0900_ai_ci).
var collationCharsets = map[string][]uint8{
	"ascii": {11, 65}, "binary": {63},
	"utf8mb3": {33, 83, 192, 193, 194, 195, 196, 197, 198, 199, 200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 223},
	"utf8mb4": {45, 46, 224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239, 240, 241, 242, 243, 244, 245, 246, 247, 255},
	"latin1":  {5, 8, 15, 31, 47, 48, 49, 94}, "latin2": {2, 9, 21, 27, 77}, "latin5": {30, 78}, "latin7": {20, 41, 42, 79},
	"greek": {25, 70}, "hebrew": {16, 71}, "tis620": {18, 89}, "cp1250": {26, 34, 44, 66, 99}, "cp1251": {14, 23, 50, 51, 52},
	"cp1256": {57, 67}, "cp1257": {29, 58, 59}, "cp850": {4, 80}, "cp852": {40, 81}, "cp866": {36, 68}, "koi8r": {7, 74},
	"koi8u": {22, 75}, "macroman": {39, 53}, "gbk": {28, 87}, "gb2312": {24, 86}, "euckr": {19, 85},
	"ucs2":    {35, 90, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 138, 139, 140, 141, 142, 143, 144, 145, 146, 147, 148, 149, 150, 151, 159},
	"utf16":   {54, 55, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124},
	"utf16le": {56, 62},
	"utf32":   {60, 61, 160, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 173, 174, 175, 176, 177, 178, 179, 180, 181, 182, 183},
}

var collationCharset = func() map[uint64]string {
	m := map[uint64]string{}
	for cs, ids := range collationCharsets {
		for _, id := range ids {
			m[uint64(id)] = cs
		}
	}
	return m
}()

// CollationMatches reports whether the collation id a table map event
// (binlog_row_metadata=FULL) gives a column belongs to the character set
// cdcsync decodes the column's bytes in: the one named in c.ColumnType (see
// MapColumn), else the UTF-8 family or ascii. A mismatch means the schema
// cdcsync holds is not the table's. Only text columns (CHAR, VARCHAR,
// *TEXT) are judged, and ids above 255 (MySQL 8 and MariaDB additions) and
// unknown ids are taken as matching.
func CollationMatches(c *cdcsync.Column, id uint64) bool {
	if c.Kind != cdcsync.KindString || decStrClassOf(c.DataType) > decStrChar {
		return true
	}
	got, known := collationCharset[id]
	if !known {
		return true
	}
	_, want := schemaSplitCharset(c.ColumnType)
	if want == "" {
		return charsetUTF8(got)
	}
	return got == want
}

// decSurrogates replaces what the server sends for a surrogate code point
// of a ucs2 or utf32 column (ED A0..BF 80..BF, which is not UTF-8) with
// U+FFFD, as the binlog path writes it; it returns s itself when there is
// none.
func decSurrogates(s string) string {
	i := strings.Index(s, "\xed")
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for ; i >= 0; i = strings.Index(s, "\xed") {
		if i+2 < len(s) && s[i+1] >= 0xa0 && s[i+1] <= 0xbf && s[i+2] >= 0x80 && s[i+2] <= 0xbf {
			b.WriteString(s[:i])
			b.WriteRune(utf8.RuneError)
			s = s[i+3:]
			continue
		}
		b.WriteString(s[:i+1])
		s = s[i+1:]
	}
	b.WriteString(s)
	return b.String()
}

// charsetHasSurrogates reports whether text in charset may hold surrogate
// code points (see decSurrogates).
func charsetHasSurrogates(name string) bool { return name == "ucs2" || name == "utf32" }
