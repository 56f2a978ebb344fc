package window

import "math/bits"

// u128 is an unsigned 128-bit integer, for SLIDING's exact comparisons:
// counts and window lengths are below 2^63 and sums of two products stay
// below 2^128.
type u128 struct{ hi, lo uint64 }

func mul(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (a u128) add(b u128) u128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	return u128{a.hi + b.hi + c, lo}
}

func (a u128) sub(b u128) u128 {
	lo, br := bits.Sub64(a.lo, b.lo, 0)
	return u128{a.hi - b.hi - br, lo}
}

func (a u128) cmp(b u128) int {
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

// div is ⌊a/d⌋ for d > 0, and false when it does not fit 64 bits.
func (a u128) div(d uint64) (uint64, bool) {
	if a.hi >= d {
		return 0, false
	}
	q, _ := bits.Div64(a.hi, a.lo, d)
	return q, true
}
