package server

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestAppendRedisDoubleIntegralFastPath: the AppendInt path for integral
// scores below 2^53 writes what %.17g (AppendFloat 'g' 17) writes, at the
// bounds, around them and for random integers and fractions of every
// magnitude; -0 stays "-0". Fails if the fast path's range or its -0 test
// is wrong (e.g. 1e17 would print "100000000000000000", not "1e+17").
func TestAppendRedisDoubleIntegralFastPath(t *testing.T) {
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 0.5, -1.5, 1e15, 1e16, 1e17, 1e21, 1e22,
		1 << 53, -(1 << 53), 1<<53 + 2, -(1<<53 + 2), 1<<53 - 1, 1<<63 - 1024, -(1 << 63), 1 << 63,
		3.0000000000000004, math.MaxFloat64, -math.MaxFloat64, 5e-324, math.SmallestNonzeroFloat64 * 3,
		1700000000000, 1700000000000.5, 123456789012345678}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		vals = append(vals, float64(r.Int64N(1<<54)-1<<53), math.Trunc(r.NormFloat64()*math.Pow(10, float64(r.IntN(40)))),
			r.NormFloat64()*math.Pow(10, float64(r.IntN(40)-20)))
	}
	for _, f := range vals {
		want := strconv.AppendFloat(nil, f, 'g', 17, 64)
		if got := appendRedisDouble(nil, f); string(got) != string(want) {
			t.Fatalf("appendRedisDouble(%v) = %q, %%.17g is %q", f, got, want)
		}
	}
	for f, want := range map[float64]string{math.Inf(1): "inf", math.Inf(-1): "-inf", math.NaN(): "nan"} {
		if got := appendRedisDouble(nil, f); string(got) != want {
			t.Fatalf("appendRedisDouble(%v) = %q, want %q", f, got, want)
		}
	}
}

// BenchmarkAppendRedisDouble: an integral score (the fast path) and a
// fraction (%.17g).
func BenchmarkAppendRedisDouble(b *testing.B) {
	buf := make([]byte, 0, 32)
	for _, f := range []float64{1700000000123, 0.1} {
		b.Run(strconv.FormatFloat(f, 'g', -1, 64), func(b *testing.B) {
			for range b.N {
				buf = appendRedisDouble(buf[:0], f)
			}
		})
	}
}
