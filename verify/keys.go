package verify

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/cdcsync/cdcsync"
)

// EncodeKey writes a key (canonical values) for the repair request: the
// base64 (URL alphabet, no padding) of its cdcsync.AppendTuple encoding,
// which keeps every value exact, bytes and floats included.
func EncodeKey(key []any) (string, error) {
	b, ok := cdcsync.AppendTuple(nil, key...)
	if !ok {
		return "", fmt.Errorf("key %v holds NULL or a value that is not canonical", key)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// DecodeKey reads a key EncodeKey wrote.
func DecodeKey(s string) ([]any, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("key %q is not base64: %w", s, err)
	}
	var out []any
	for len(b) > 0 {
		tag := b[0]
		b = b[1:]
		need := func(n int) error {
			if len(b) < n {
				return errors.New("it ends inside a value")
			}
			return nil
		}
		var v any
		switch tag {
		case 'i', 'f':
			if err := need(4); err != nil {
				return nil, fmt.Errorf("key %q: %w", s, err)
			}
			u := binary.BigEndian.Uint32(b)
			b = b[4:]
			if tag == 'i' {
				v = int32(u)
			} else {
				v = math.Float32frombits(u)
			}
		case 'l', 'd':
			if err := need(8); err != nil {
				return nil, fmt.Errorf("key %q: %w", s, err)
			}
			u := binary.BigEndian.Uint64(b)
			b = b[8:]
			if tag == 'l' {
				v = int64(u)
			} else {
				v = math.Float64frombits(u)
			}
		case 's', 'b':
			n, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < n {
				return nil, fmt.Errorf("key %q: a length runs past its end", s)
			}
			data := b[k : k+int(n)]
			b = b[k+int(n):]
			if tag == 's' {
				v = string(data)
			} else {
				v = append([]byte{}, data...)
			}
		case 't':
			v = true
		case 'F':
			v = false
		default:
			return nil, fmt.Errorf("key %q: unknown value tag %q", s, tag)
		}
		out = append(out, v)
	}
	return out, nil
}
