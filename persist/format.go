package persist

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Entry encoding, shared by log and base chunks (see the package comment).
// A chunk's pebble value is a sequence of entries:
//
//	set:    's' uvarint(len(key)) key varint(ExpireAtMs) uvarint(len(value)) value
//	TAT:    't' uvarint(len(key)) key varint(ExpireAtMs) uint64 little-endian TAT
//	TAT near its expiry:
//	        'r' uvarint(len(key)) key uint64 little-endian TAT int8(ExpireAtMs − TAT/1e6)
//	delete: 'd' uvarint(len(key)) key
//
// A 't' entry is a set whose value is the TAT's decimal text (v3; most
// entries): 8 bytes instead of ~19, and no text to format or parse.
// Values that are canonical decimal uint64 text are written as 't' too.
// An 'r' entry (session 17) is a 't' entry whose expiry is given as one
// signed byte relative to the TAT's millisecond: what CL.THROTTLE writes
// (its expiry is now + trunc((TAT − now) / 1 ms), the TAT's millisecond
// give or take one), 5 bytes shorter than the expiry's varint (31 → 26
// bytes for a 15-byte key). The writers choose it whenever the expiry
// fits and is not itself a one-byte varint (appendTAT); readers take both.
//
// Entries are applied in order; within a log chunk a later entry for a key
// wins, and a later chunk wins over an earlier one.
const (
	entrySet    = 's'
	entryTAT    = 't'
	entryTATRel = 'r'
	entryDelete = 'd'
)

// maxChunk is the size at which an encoder starts a new chunk: every
// pebble value is about 16 KiB whatever the number of ops. Small enough
// that pebble's flushes and compactions handle ordinary-sized values (1 MiB
// values made them allocate and free large buffers, and a loaded server's
// RSS grew by ~40 B per key), large enough that a busy window is tens of
// pebble keys, not tens of thousands.
const maxChunk = 16 << 10

// entrySize is the encoded size of op.
func entrySize(op *Op) int {
	n := 1 + uvarintLen(uint64(len(op.Key))) + len(op.Key) + dbPrefixLen(op.DB)
	switch {
	case op.Window && !op.Delete:
		return windowEntrySize(op) + dbPrefixLen(op.DB) // window.go
	case op.Kind != 0 && !op.Delete:
		return objectOpSize(op) // delta.go
	case op.Delete:
	case op.IsTAT:
		n += tatValueLen(op.TAT, op.ExpireAtMs)
	default:
		if op.Verbatim {
			n += varintLen(op.ExpireAtMs) + uvarintLen(uint64(len(op.Value))) + len(op.Value)
		} else if v, ok := canonicalUint(op.Value); ok {
			n += tatValueLen(v, op.ExpireAtMs)
		} else {
			n += varintLen(op.ExpireAtMs) + uvarintLen(uint64(len(op.Value))) + len(op.Value)
		}
	}
	return n
}

// sizeBound is at least entrySize(op), and equal to it but for a set op
// with a value, which it bounds without reading the value's bytes (a
// canonical decimal value is written as an 8-byte TAT instead).
func sizeBound(op *Op) int {
	if op.Delete || op.IsTAT || op.Window || op.Kind != 0 || len(op.Value) == 0 {
		return entrySize(op)
	}
	n := 1 + uvarintLen(uint64(len(op.Key))) + len(op.Key) + dbPrefixLen(op.DB) + varintLen(op.ExpireAtMs)
	return n + max(8, uvarintLen(uint64(len(op.Value)))+len(op.Value))
}

// appendEntry appends op's encoding to b.
func appendEntry(b []byte, op *Op) []byte {
	if op.Kind != 0 && !op.Delete {
		return appendObjectOp(b, op) // delta.go: its entries and their prefixes
	}
	b = appendDBPrefix(b, op.DB) // databases.go: nothing for database 0
	if op.Delete {
		b = append(b, entryDelete)
		b = binary.AppendUvarint(b, uint64(len(op.Key)))
		return append(b, op.Key...)
	}
	if op.IsTAT {
		return appendTAT(b, op.Key, op.TAT, op.ExpireAtMs)
	}
	if op.Window {
		return appendWindow(b, op.Key, op.Value, op.ExpireAtMs) // window.go
	}
	if op.Verbatim {
		return appendText(b, op.Key, op.Value, op.ExpireAtMs)
	}
	return appendSet(b, op.Key, op.Value, op.ExpireAtMs)
}

// appendTAT appends a TAT entry to b: an 'r' entry when exp is within a
// signed byte of tat's millisecond and not itself a one-byte varint
// (tatRel), else a 't' entry. Cost: CL.THROTTLE's entry (15-byte key) in
// about 5 ns, with one division by a constant.
func appendTAT(b, key []byte, tat uint64, exp int64) []byte {
	if d, ok := tatRel(tat, exp); ok {
		b = append(b, entryTATRel)
		b = binary.AppendUvarint(b, uint64(len(key)))
		b = append(b, key...)
		b = binary.LittleEndian.AppendUint64(b, tat)
		return append(b, byte(d))
	}
	b = append(b, entryTAT)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendVarint(b, exp)
	return binary.LittleEndian.AppendUint64(b, tat)
}

// putTATRel writes the 'r' entry appendTAT appends for key (under 128
// bytes) holding tat, with d from tatRel, into b, exactly len(key)+11
// bytes, without append's checks per field (Encoder.TAT's paths).
func putTATRel(b, key []byte, tat uint64, d int8) {
	b[0], b[1] = entryTATRel, byte(len(key))
	copy(b[2:], key)
	binary.LittleEndian.PutUint64(b[2+len(key):], tat)
	b[10+len(key)] = byte(d)
}

// tatRel is exp relative to tat's millisecond (tat/1e6), and whether an
// 'r' entry holds it: the difference fits a signed byte and exp is not a
// one-byte varint (then a 't' entry is as short, and 0, no TTL, stays a
// 't' entry). The reader adds tat/1e6 back (tatRelExpiry); the arithmetic
// wraps both ways, so any exp that passes comes back exactly.
func tatRel(tat uint64, exp int64) (int8, bool) {
	d := exp - int64(tat/1e6)
	return int8(d), d == int64(int8(d)) && (exp < -64 || exp > 63)
}

// tatRelExpiry is the expiry an 'r' entry's byte d gives for tat.
func tatRelExpiry(tat uint64, d int8) int64 { return int64(tat/1e6) + int64(d) }

// tatValueLen is the size of a TAT entry's expiry and TAT (appendTAT).
func tatValueLen(tat uint64, exp int64) int {
	if _, ok := tatRel(tat, exp); ok {
		return 9
	}
	return varintLen(exp) + 8
}

// canonicalUint parses text that strconv.FormatUint would have written
// (no sign, no leading zero, fits 64 bits), so that a 't' entry gives the
// same text back.
// strconv.ParseUint already refuses signs, non-digits and overflow; only
// leading zeros are left to refuse. Not on the hot path: the drain and the
// base writer hand TATs over as numbers.
func canonicalUint(text []byte) (uint64, bool) {
	if len(text) > 1 && text[0] == '0' {
		return 0, false
	}
	if len(text) == 0 || len(text) > 20 || text[0] < '0' || text[0] > '9' {
		return 0, false // any string that is not a number: no error to allocate
	}
	v, err := strconv.ParseUint(string(text), 10, 64)
	return v, err == nil
}

// appendSet appends a set entry to b: a 't' entry when value is a
// canonical decimal uint64.
func appendSet(b, key, value []byte, exp int64) []byte {
	if v, ok := canonicalUint(value); ok {
		return appendTAT(b, key, v, exp)
	}
	return appendText(b, key, value, exp)
}

// appendText appends an 's' entry to b, whatever value holds.
func appendText(b, key, value []byte, exp int64) []byte {
	b = append(b, entrySet)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendVarint(b, exp)
	b = binary.AppendUvarint(b, uint64(len(value)))
	return append(b, value...)
}

// decodeChunk calls fn for every entry of chunk, in order, with its
// database id and the kind of its value. key and value alias chunk. A
// malformed chunk is reported as an error (the caller wraps ErrCorrupt);
// fn's error stops the walk and is returned as is. Object entries (hashes,
// lists, sorted sets) go to obj (object.go); without it they are a format
// error.
func decodeChunk(chunk []byte, fn entryFunc, obj ...ObjectFunc) (fnErr, formatErr error) {
	var text [25]byte // a 't' entry's value or a compact window's state, valid during fn
	for off := 0; off < len(chunk); {
		db, n, err := readDBPrefix(chunk, off) // databases.go
		if err != nil {
			return nil, err
		}
		off += n
		if off >= len(chunk) {
			return nil, fmt.Errorf("database prefix without an entry at byte %d", off)
		}
		kind := chunk[off]
		off++
		klen, n := binary.Uvarint(chunk[off:])
		if n <= 0 || klen > uint64(len(chunk)-off-n) {
			return nil, fmt.Errorf("bad key length at byte %d", off)
		}
		off += n
		key := chunk[off : off+int(klen) : off+int(klen)]
		off += int(klen)
		switch kind {
		case entryDelete:
			if err := fn(db, key, nil, 0, KindString, true); err != nil {
				return err, nil
			}
		case entrySet:
			exp, n := binary.Varint(chunk[off:])
			if n <= 0 {
				return nil, fmt.Errorf("bad expiry of key %q", key)
			}
			off += n
			vlen, n := binary.Uvarint(chunk[off:])
			if n <= 0 || vlen > uint64(len(chunk)-off-n) {
				return nil, fmt.Errorf("bad value length of key %q", key)
			}
			off += n
			value := chunk[off : off+int(vlen) : off+int(vlen)]
			off += int(vlen)
			if err := fn(db, key, value, exp, KindString, false); err != nil {
				return err, nil
			}
		case entryWindow: // window.go
			exp, state, end, err := decodeWindow(chunk, key, off)
			if err != nil {
				return nil, err
			}
			off = end
			if err := fn(db, key, state, exp, KindWindow, false); err != nil {
				return err, nil
			}
		case entryWinFixed, entryWinSliding: // window_compact.go
			exp, state, end, err := decodeCompactWindow(kind, chunk, key, off, text[:])
			if err != nil {
				return nil, err
			}
			off = end
			if err := fn(db, key, state, exp, KindWindow, false); err != nil {
				return err, nil
			}
		case entryTAT:
			exp, n := binary.Varint(chunk[off:])
			if n <= 0 || len(chunk)-off-n < 8 {
				return nil, fmt.Errorf("bad expiry or TAT of key %q", key)
			}
			off += n
			tat := binary.LittleEndian.Uint64(chunk[off:])
			off += 8
			if err := fn(db, key, strconv.AppendUint(text[:0], tat, 10), exp, KindString, false); err != nil {
				return err, nil
			}
		case entryTATRel:
			if len(chunk)-off < 9 {
				return nil, fmt.Errorf("bad TAT or expiry of key %q", key)
			}
			tat := binary.LittleEndian.Uint64(chunk[off:])
			exp := tatRelExpiry(tat, int8(chunk[off+8]))
			off += 9
			if err := fn(db, key, strconv.AppendUint(text[:0], tat, 10), exp, KindString, false); err != nil {
				return err, nil
			}
		case entryObject, entryObjectGen, entryDelta: // object.go, delta.go
			var fnErr, formatErr error
			if len(obj) == 0 {
				obj = []ObjectFunc{nil}
			}
			if off, fnErr, formatErr = decodeObject(chunk, off, db, key, kind, obj[0]); fnErr != nil || formatErr != nil {
				return fnErr, formatErr
			}
		default:
			return nil, fmt.Errorf("unknown entry kind %q at byte %d", kind, off-1)
		}
	}
	return nil, nil
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}
