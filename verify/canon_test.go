package verify

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"github.com/cdcsync/cdcsync"
)

// TestFormatDouble checks the printing rule on values MariaDB 10.11 printed
// (SELECT CONCAT(x)); capture's TestVerifyRowText compares thousands more
// with the server itself.
func TestFormatDouble(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1e14, "100000000000000"},
		{1e15, "1e15"},
		{1.5e15, "1.5e15"},
		{1.234567890123456e15, "1.234567890123456e15"},
		{1234567890123456.7, "1234567890123456.8"},
		{1.2345678901234568e17, "1.2345678901234568e17"},
		{0.0001, "0.0001"},
		{0.00001, "0.00001"},
		{-1.5e-7, "-0.00000015"},
		{1.2345678901234567e-15, "0.0000000000000012345678901234568"},
		{1e-15, "0.000000000000001"},
		{1e-16, "1e-16"},
		{1e-310, "1e-310"},
		{5e-324, "5e-324"},
		{1.7976931348623157e308, "1.7976931348623157e308"},
		{0.30000000000000004, "0.30000000000000004"},
		{float64(float32(0.1)), "0.10000000149011612"},
		{100, "100"},
		{-1.01, "-1.01"},
	} {
		if got := FormatDouble(tc.f); got != tc.want {
			t.Errorf("FormatDouble(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

// TestRowTextUnambiguous checks that rows that differ have different
// texts where a naive concatenation would not tell them apart.
func TestRowTextUnambiguous(t *testing.T) {
	s := &cdcsync.TableSchema{Columns: []cdcsync.Column{{Name: "a", Kind: cdcsync.KindString}, {Name: "b", Kind: cdcsync.KindString}, {Name: "n", Kind: cdcsync.KindInt64}}}
	rows := []cdcsync.Row{
		{"", nil, nil},
		{nil, "", nil},
		{"N", nil, nil},
		{"ab", "c", int64(1)},
		{"a", "bc", int64(1)},
		{"a", "bc", int64(11)},
		{"1:", "", int64(1)},
		{"", "1:", int64(1)},
		{"", "", int64(0)},
		{nil, nil, int64(0)},
	}
	seen := map[string]int{}
	for i, r := range rows {
		text := string(AppendRowText(nil, s, r))
		if j, dup := seen[text]; dup {
			t.Errorf("rows %v and %v have the same text %q", rows[j], r, text)
		}
		seen[text] = i
	}
	if got := string(AppendRowText(nil, s, cdcsync.Row{"é", nil, int64(-5)})); got != "2:éN-5," {
		t.Errorf("text = %q, want %q", got, "2:éN-5,")
	}
}

// TestValueText checks the piece of every kind.
func TestValueText(t *testing.T) {
	for _, tc := range []struct {
		k    cdcsync.Kind
		v    any
		want string
	}{
		{cdcsync.KindInt32, int32(-7), "-7,"},
		{cdcsync.KindInt64, int64(1) << 62, "4611686018427387904,"},
		{cdcsync.KindDecimal, "-12.50", "-12.50,"},
		{cdcsync.KindDecimal, "18446744073709551615", "18446744073709551615,"},
		{cdcsync.KindFloat32, float32(0.1), "0.10000000149011612,"},
		{cdcsync.KindFloat64, 1e300, "1e300,"},
		{cdcsync.KindBool, true, "1,"},
		{cdcsync.KindBool, false, "0,"},
		{cdcsync.KindDate, int32(-354285), "-354285,"},
		{cdcsync.KindTimestamp, int64(-1), "-1,"},
		{cdcsync.KindTimestampTZ, int64(1500000), "1500000,"},
		{cdcsync.KindTime, int64(-500000), "-00:00:00.500000,"},
		{cdcsync.KindTime, int64(-3020399000000), "-838:59:59.000000,"},
		{cdcsync.KindString, "", "0:"},
		{cdcsync.KindBinary, []byte{0, 1}, "2:\x00\x01"},
		{cdcsync.KindString, nil, "N"},
	} {
		if got := string(AppendValueText(nil, tc.k, tc.v)); got != tc.want {
			t.Errorf("AppendValueText(%s, %#v) = %q, want %q", tc.k, tc.v, got, tc.want)
		}
	}
	// A value of the wrong Go type never reads as a number.
	if got := AppendValueText(nil, cdcsync.KindInt64, "5"); bytes.HasSuffix(got, []byte(",")) {
		t.Errorf("a string in an int64 column gave a number piece %q", got)
	}
}

func TestKeyRoundTrip(t *testing.T) {
	keys := [][]any{
		{int32(-1), int64(math.MinInt64), "é\x00", []byte{0, 255}, true, false, float32(-0.5), math.MaxFloat64},
		{"18446744073709551615"},
		{[]byte{}},
	}
	for _, k := range keys {
		s, err := EncodeKey(k)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeKey(s)
		if err != nil {
			t.Fatalf("DecodeKey(%q): %v", s, err)
		}
		if !reflect.DeepEqual(got, k) {
			t.Errorf("round trip of %#v gave %#v", k, got)
		}
	}
	if _, err := EncodeKey([]any{nil}); err == nil {
		t.Error("EncodeKey took a NULL")
	}
	for _, bad := range []string{"!", "aQ", "cw"} { // not base64; 'i' cut short; a length past the end
		if _, err := DecodeKey(bad); err == nil {
			t.Errorf("DecodeKey(%q) took it", bad)
		}
	}
}

func TestCompareKeys(t *testing.T) {
	ordered := [][]any{
		{"-100.50", int64(5)},
		{"-2.00", int64(5)},
		{"-1.99", int64(5)},
		{"0.00", int64(-1)},
		{"0.00", int64(0)},
		{"0.01", int64(0)},
		{"9.99", int64(0)},
		{"10.00", int64(0)},
	}
	for i := range ordered {
		for j := range ordered {
			c, err := CompareKeys(ordered[i], ordered[j])
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if c != want {
				t.Errorf("CompareKeys(%v, %v) = %d, want %d", ordered[i], ordered[j], c, want)
			}
		}
	}
	if c, _ := CompareKeys([]any{[]byte{1}}, []any{[]byte{1, 0}}); c >= 0 {
		t.Error("a binary prefix does not sort first")
	}
	if _, err := CompareKeys([]any{int32(1)}, []any{int64(1)}); err == nil {
		t.Error("CompareKeys compared an int32 with an int64")
	}
}

func TestRowsEqual(t *testing.T) {
	a := cdcsync.Row{int64(1), nil, []byte{1}, "x", float64(0)}
	b := cdcsync.Row{int64(1), nil, []byte{1}, "x", float64(0)}
	if !rowsEqual(a, b) || !rowsEqual(nil, nil) || rowsEqual(a, nil) {
		t.Error("rowsEqual is wrong on equal rows or absent ones")
	}
	b[4] = math.Copysign(0, -1)
	if rowsEqual(a, b) {
		t.Error("rowsEqual took -0 for 0; the lake keeps the sign")
	}
	b[4], b[1] = float64(0), ""
	if rowsEqual(a, b) {
		t.Error("rowsEqual took NULL for the empty string")
	}
}
