package pkindex

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The keyspace. Every key starts with uvarint(n), n the number of the table
// it belongs to; number 0 holds what belongs to the whole database. A
// uvarint is a prefix code (no encoding is the prefix of another), and its
// last byte is below 0x80, so a table's keys are exactly the range
// [uvarint(n), uvarint(n) with its last byte plus one).
//
//	0x00 'v'                   format version: uvarint(formatVersion)
//	0x00 'n'                   next table number: uvarint
//	0x00 't' uuid              table number of the table named uuid: uvarint
//	uvarint(n) 0x01 's'        State: flags byte (1: complete), varint(snapshot id)
//	uvarint(n) 0x01 'f'        next file id: uvarint
//	uvarint(n) 0x02 id         File (id: 4 bytes big endian): flags byte (1: live),
//	                           varint(spec id), uvarint(len(path)), path, partition
//	uvarint(n) 0x03 key        Loc of the caller's key: uvarint(file), uvarint(pos)
const (
	formatVersion = 1

	kindMeta = 0x01
	kindFile = 0x02
	kindKey  = 0x03
)

var (
	keyVersion    = []byte{0x00, 'v'}
	keyNextTable  = []byte{0x00, 'n'}
	keyTablesFrom = []byte{0x00, 't'}
	keyTablesTo   = []byte{0x00, 't' + 1}
)

func keyTable(uuid string) []byte {
	return append(append([]byte(nil), keyTablesFrom...), uuid...)
}

// tablePrefix is uvarint(n).
func tablePrefix(n uint64) []byte {
	return binary.AppendUvarint(nil, n)
}

// prefixEnd is the smallest key greater than every key starting with p, p a
// uvarint or a uvarint followed by a kind byte (neither ends in 0xff).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	end[len(end)-1]++
	return end
}

func withKind(prefix []byte, kind byte, rest ...byte) []byte {
	k := make([]byte, 0, len(prefix)+1+len(rest))
	k = append(k, prefix...)
	k = append(k, kind)
	return append(k, rest...)
}

func fileKey(prefix []byte, id uint32) []byte {
	return binary.BigEndian.AppendUint32(withKind(prefix, kindFile), id)
}

func encodeLoc(dst []byte, loc Loc) []byte {
	dst = binary.AppendUvarint(dst, uint64(loc.File))
	return binary.AppendUvarint(dst, uint64(loc.Pos))
}

var errBadValue = errors.New("a value does not decode")

func decodeLoc(v []byte) (Loc, error) {
	f, n := binary.Uvarint(v)
	if n <= 0 || f > 1<<32-1 {
		return Loc{}, errBadValue
	}
	p, m := binary.Uvarint(v[n:])
	if m <= 0 || n+m != len(v) || p > 1<<63-1 {
		return Loc{}, errBadValue
	}
	return Loc{File: uint32(f), Pos: int64(p)}, nil
}

// A state is a flags byte (1: complete, 2: a Through follows), the
// snapshot id as a varint, then the Through, if any, as a uvarint length
// and its bytes. States written before Through existed read the same.
func encodeState(s State) []byte {
	var flags byte
	if s.Complete {
		flags |= 1
	}
	if s.Through != "" {
		flags |= 2
	}
	v := binary.AppendVarint([]byte{flags}, s.SnapshotID)
	if s.Through != "" {
		v = binary.AppendUvarint(v, uint64(len(s.Through)))
		v = append(v, s.Through...)
	}
	return v
}

func decodeState(v []byte) (State, error) {
	if len(v) < 2 || v[0]&^3 != 0 {
		return State{}, errBadValue
	}
	id, n := binary.Varint(v[1:])
	if n <= 0 {
		return State{}, errBadValue
	}
	s := State{SnapshotID: id, Complete: v[0]&1 != 0}
	rest := v[1+n:]
	if v[0]&2 != 0 {
		l, m := binary.Uvarint(rest)
		if m <= 0 || l == 0 || uint64(len(rest)-m) != l {
			return State{}, errBadValue
		}
		s.Through, rest = string(rest[m:]), nil
	}
	if len(rest) != 0 {
		return State{}, errBadValue
	}
	return s, nil
}

func encodeFile(f File) []byte {
	var flags byte
	if f.Live {
		flags |= 1
	}
	v := make([]byte, 0, 1+binary.MaxVarintLen32+binary.MaxVarintLen64+len(f.Path)+len(f.Partition))
	v = append(v, flags)
	v = binary.AppendVarint(v, int64(f.SpecID))
	v = binary.AppendUvarint(v, uint64(len(f.Path)))
	v = append(v, f.Path...)
	return append(v, f.Partition...)
}

func decodeFile(v []byte) (File, error) {
	if len(v) < 1 || v[0]&^1 != 0 {
		return File{}, errBadValue
	}
	f := File{Live: v[0]&1 != 0}
	v = v[1:]
	spec, n := binary.Varint(v)
	if n <= 0 || spec < -1<<31 || spec > 1<<31-1 {
		return File{}, errBadValue
	}
	v = v[n:]
	l, n := binary.Uvarint(v)
	if n <= 0 || l > uint64(len(v)-n) {
		return File{}, errBadValue
	}
	v = v[n:]
	f.SpecID = int32(spec)
	f.Path = string(v[:l])
	if len(v) > int(l) {
		f.Partition = append([]byte(nil), v[l:]...)
	}
	return f, nil
}

func decodeUvarint(v []byte) (uint64, error) {
	x, n := binary.Uvarint(v)
	if n <= 0 || n != len(v) {
		return 0, errBadValue
	}
	return x, nil
}

// corrupt wraps a decoding error of the value under key.
func corrupt(what string, key []byte, err error) error {
	return fmt.Errorf("%w: %s (key %x): %w", ErrCorrupt, what, key, err)
}
