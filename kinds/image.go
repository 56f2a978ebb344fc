package kinds

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
)

// Images: a value's whole content as bytes, for persistence. Each kind's
// image is uvarint(count) followed by its elements:
//
//	hash:  (uvarint len, field, uvarint len, value)*   in field order
//	list:  (uvarint len, item)*                        head to tail
//	zset:  (8-byte little-endian float64 score, uvarint len, member)*  ascending
//
// Decoding checks every length, so a damaged image is an error, never a
// panic or a huge allocation.

// ErrBadImage: the bytes are not an image of the kind asked for.
var ErrBadImage = errors.New("kinds: malformed image")

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	// A last byte of 0 after a continuation is a longer encoding than v
	// needs: never written (binary.AppendUvarint), so refused, and an image
	// that decodes encodes back to the same bytes (FuzzDecodeImages).
	if n <= 0 || n > 1 && r.b[n-1] == 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// count reads an element count, refusing one the remaining bytes cannot
// hold (each element takes at least min bytes) or past MaxElements.
func (r *reader) count(min int) int {
	n := r.uvarint()
	if r.bad || n > MaxElements || n*uint64(min) > uint64(len(r.b)) {
		r.bad = true
		return 0
	}
	return int(n)
}

// AppendImage appends h's image to b.
func (h *Hash) AppendImage(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(h.Len()))
	if h.compact() {
		// Each pair's head becomes two one-byte uvarints (every length is
		// at most CompactMaxValue, under 128): a walk, ~5-7 ns a pair
		// (BenchmarkHashImage), where the old two-length-byte pairs were
		// the image's bytes already (one copy, 5-9 ns for 4-10 pairs).
		lp := h.lp()
		o := len(b)
		b = slices.Grow(b, len(lp)+2*h.Len()) // each head at least one byte
		b = b[:o+len(lp)+2*h.Len()]
		for off := 0; off < len(lp); {
			fl, vl, hl := hpHead(lp, off)
			off += hl
			b[o] = byte(fl)
			o += 1 + copy(b[o+1:], lp[off:off+fl])
			off += fl
			b[o] = byte(vl)
			o += 1 + copy(b[o+1:], lp[off:off+vl])
			off += vl
		}
		return b[:o]
	}
	h.Each(func(f, v string) bool {
		b = appendStr(b, f)
		b = appendStr(b, v)
		return true
	})
	return b
}

// DecodeHash rebuilds a hash from its image.
func DecodeHash(img []byte) (*Hash, error) {
	r := reader{b: img}
	n := r.count(2)
	h := NewHash()
	for i := 0; i < n && !r.bad; i++ {
		f := r.str()
		v := r.str()
		h.Set(f, v)
	}
	if r.bad || len(r.b) != 0 || h.Len() != n {
		return nil, ErrBadImage
	}
	return h, nil
}

// AppendImage appends l's image to b.
func (l *List) AppendImage(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(int(l.n)))
	if l.compact() {
		// One pass over the bytes, each item's length (under 128,
		// CompactMaxValue: a one-byte uvarint) decoded from its XOR'd byte.
		b = slices.Grow(b, len(l.lp))
		for off, prev := 0, 0; off < len(l.lp)-1; {
			n := int(l.lp[off]) ^ prev
			b = append(append(b, byte(n)), l.lp[off+1:off+1+n]...)
			off, prev = off+1+n, n
		}
		return b
	}
	for i := 0; i < int(l.n); i++ {
		b = appendStr(b, l.At(i))
	}
	return b
}

// DecodeList rebuilds a list from its image.
func DecodeList(img []byte) (*List, error) {
	r := reader{b: img}
	n := r.count(1)
	l := NewList()
	for i := 0; i < n && !r.bad; i++ {
		l.PushBack(r.str())
	}
	if r.bad || len(r.b) != 0 {
		return nil, ErrBadImage
	}
	return l, nil
}

// AppendImage appends z's image to b.
func (z *ZSet) AppendImage(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(z.n))
	z.Each(func(m string, s float64) bool {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s))
		b = appendStr(b, m)
		return true
	})
	return b
}

// DecodeZSet rebuilds a sorted set from its image.
func DecodeZSet(img []byte) (*ZSet, error) {
	r := reader{b: img}
	n := r.count(9)
	z := NewZSet()
	if n > CompactMaxEntries || zImageHasLong(r) {
		// A set past the compact limits decodes into the full form from
		// its first member, so every score is kept as written (-0 too),
		// as Redis's RDB load builds a skiplist for it.
		z.toFull()
	}
	for i := 0; i < n && !r.bad; i++ {
		if len(r.b) < 8 {
			r.bad = true
			break
		}
		s := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
		r.b = r.b[8:]
		m := r.str()
		if math.IsNaN(s) {
			r.bad = true
			break
		}
		z.Set(m, s)
	}
	if r.bad || len(r.b) != 0 || z.Len() != n {
		return nil, ErrBadImage
	}
	return z, nil
}

// zImageHasLong reports whether a zset image's elements (from r, which is
// a copy) hold a member longer than CompactMaxValue. O(n), no allocation;
// a malformed image answers false (the decode that follows refuses it).
func zImageHasLong(r reader) bool {
	for len(r.b) > 0 && !r.bad {
		if len(r.b) < 8 {
			return false
		}
		r.b = r.b[8:]
		n := r.uvarint()
		if r.bad || n > uint64(len(r.b)) {
			return false
		}
		if n > CompactMaxValue {
			return true
		}
		r.b = r.b[n:]
	}
	return false
}
