package gcra

import (
	"math"
	"math/bits"
)

// i128 is a signed 128-bit integer (hi·2^64 + lo, two's complement). The
// algorithm needs it because stored TATs are unsigned 64-bit values and
// now ± increment can leave the int64 range; every value the algorithm forms
// stays well inside ±2^70, so the operations below never overflow.
type i128 struct {
	hi int64
	lo uint64
}

func fromInt64(v int64) i128   { return i128{hi: v >> 63, lo: uint64(v)} }
func fromUint64(v uint64) i128 { return i128{lo: v} }

func (a i128) add(b i128) i128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	return i128{hi: a.hi + b.hi + int64(c), lo: lo}
}

func (a i128) sub(b i128) i128 {
	lo, br := bits.Sub64(a.lo, b.lo, 0)
	return i128{hi: a.hi - b.hi - int64(br), lo: lo}
}

func (a i128) neg() i128 { return i128{}.sub(a) }

// cmp returns -1, 0 or +1 as a is less than, equal to or greater than b.
func (a i128) cmp(b i128) int {
	switch {
	case a.hi < b.hi:
		return -1
	case a.hi > b.hi:
		return 1
	case a.lo < b.lo:
		return -1
	case a.lo > b.lo:
		return 1
	}
	return 0
}

func (a i128) isNeg() bool { return a.hi < 0 }

// fitsInt64 reports whether a is representable as an int64.
func (a i128) fitsInt64() bool { return a.hi == int64(a.lo)>>63 }

// int64 returns the low 64 bits as int64; only meaningful when fitsInt64.
func (a i128) int64() int64 { return int64(a.lo) }

// quoRem divides a by d with truncation toward zero (Go's / and %), returning
// the quotient and remainder as int64. It requires |a| < d·2^63, which holds
// for every caller (|a| < 2^70, d ≥ 1000).
func (a i128) quoRem(d uint64) (q, r int64) {
	neg := a.isNeg()
	if neg {
		a = a.neg()
	}
	uq, ur := bits.Div64(uint64(a.hi), a.lo, d)
	q, r = int64(uq), int64(ur)
	if neg {
		q, r = -q, -r
	}
	return q, r
}

// truncSat converts f to int64 rounding toward zero, saturating at the int64
// limits; NaN becomes 0. Go leaves out-of-range float→int conversions
// undefined, so the limits are checked explicitly.
func truncSat(f float64) int64 {
	switch {
	case f != f:
		return 0
	case f >= 9223372036854775808.0:
		return math.MaxInt64
	case f <= -9223372036854775808.0:
		return math.MinInt64
	}
	return int64(f)
}
