package window

import (
	"math/rand/v2"
	"testing"
)

// TestSlidingSmallMatchesWide checks SLIDING's uint64 arithmetic (every
// operand below 2^31: small31) against the 128-bit one it shortcuts, on
// random operands from 0 to 2^31−1 (each drawn near 0, near 2^31 or
// anywhere), the window's elapsed time e anywhere in [0, w). It fails if
// a product or sum of the small path overflows or is written wrong: the
// largest operands make prev×(w−e) + (curr+q)×w pass 2^63.
func TestSlidingSmallMatchesWide(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 19))
	const top = 1<<31 - 1
	draw := func() int64 {
		switch rng.IntN(3) {
		case 0:
			return rng.Int64N(16)
		case 1:
			return top - rng.Int64N(16)
		}
		return rng.Int64N(top + 1)
	}
	for range 200_000 {
		prev, curr, q, limit, w := draw(), draw(), draw(), max(draw(), 1), max(draw(), 1)
		e := rng.Int64N(w)
		if !small31(prev, curr, q, limit, w) {
			t.Fatalf("small31(%d, %d, %d, %d, %d) = false", prev, curr, q, limit, w)
		}
		if got, want := slidingFits(prev, curr, q, limit, w, e), slidingFitsWide(prev, curr, q, limit, w, e); got != want {
			t.Fatalf("slidingFits(%d, %d, %d, %d, %d, %d) = %v, want %v", prev, curr, q, limit, w, e, got, want)
		}
		if got, want := slidingRemaining(prev, curr, limit, w, e), slidingRemainingWide(prev, curr, limit, w, e); got != want {
			t.Fatalf("slidingRemaining(%d, %d, %d, %d, %d) = %d, want %d", prev, curr, limit, w, e, got, want)
		}
	}
	for _, v := range []int64{-1, 1 << 31, 1<<63 - 1} { // each takes the wide path
		if small31(v, 0, 0, 1, 1) || small31(0, 0, 0, 1, v) {
			t.Errorf("small31 took %d", v)
		}
	}
}
