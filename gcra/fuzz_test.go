package gcra

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// This file checks Limit.Apply, NewLimit, EmissionInterval and Seconds
// against a reference written from the spec alone (sections 3-6) with exact
// math/big integers. Every int64 "wrapping" step is reduced mod 2^64
// explicitly; float64 appears only where the spec performs a float64 step,
// and every integer reaches float64 through a correctly rounded (nearest,
// ties to even) big.Float conversion; float64 → int64 truncation saturates
// through big.Float as well, never through Go's conversion.

var (
	bigOne    = big.NewInt(1)
	big1e3    = big.NewInt(1_000)
	big1e6    = big.NewInt(1_000_000)
	big1e9    = big.NewInt(1_000_000_000)
	bigTwo64  = new(big.Int).Lsh(bigOne, 64)
	bigTwo63  = new(big.Int).Lsh(bigOne, 63)
	bigMaxI64 = big.NewInt(math.MaxInt64)
	bigMinI64 = big.NewInt(math.MinInt64)
)

// refWrap reduces x to int64 with two's complement wrapping.
func refWrap(x *big.Int) int64 {
	m := new(big.Int).Mod(x, bigTwo64) // in [0, 2^64)
	if m.Cmp(bigTwo63) >= 0 {
		m.Sub(m, bigTwo64)
	}
	return m.Int64()
}

// refF64 is float64(x) with one correct rounding.
func refF64(x *big.Int) float64 {
	f, _ := new(big.Float).SetPrec(53).SetMode(big.ToNearestEven).SetInt(x).Float64()
	return f
}

// refTruncSat is trunc toward zero, saturated to int64; NaN → 0.
func refTruncSat(f float64) int64 {
	if math.IsNaN(f) {
		return 0
	}
	if math.IsInf(f, 1) {
		return math.MaxInt64
	}
	if math.IsInf(f, -1) {
		return math.MinInt64
	}
	i, _ := new(big.Float).SetFloat64(f).Int(nil) // truncates toward zero
	if i.Cmp(bigMaxI64) > 0 {
		return math.MaxInt64
	}
	if i.Cmp(bigMinI64) < 0 {
		return math.MinInt64
	}
	return i.Int64()
}

// refQuo is truncated integer division (big.Int.Quo truncates toward zero).
func refQuo(a, b *big.Int) *big.Int { return new(big.Int).Quo(a, b) }

// refSeconds is section 6's duration → seconds: s, f = truncated quotient and
// remainder by 1e9; trunc(float64(s) + float64(f)/1e9), plus one when
// f/1e6 > 0.
func refSeconds(d *big.Int) int64 {
	sec, frac := new(big.Int).QuoRem(d, big1e9, new(big.Int))
	v := refTruncSat(refF64(sec) + refF64(frac)/1e9)
	if refQuo(frac, big1e6).Sign() > 0 {
		v++
	}
	return v
}

// refEI is section 3's emission interval.
func refEI(count, period int64) int64 {
	if count == 0 || period == 0 {
		return 0
	}
	p := new(big.Int).Mul(big.NewInt(period), big1e9) // exact
	return refTruncSat(refF64(p) / refF64(big.NewInt(count)))
}

// refResult is what the spec says one call answers and stores.
type refResult struct {
	limited                           bool
	limit, remaining, retry, resetSec int64
	newTAT                            uint64 // allowed only
	ttlMS                             int64  // allowed only
}

// refApply is sections 3-5 for one call. zero reports the zero-rate error.
func refApply(maxBurst, count, period, q, now int64, tat uint64, exists bool) (r refResult, zero bool) {
	ei := refEI(count, period)
	if ei == 0 {
		return r, true
	}
	bEI := big.NewInt(ei)
	limit := refWrap(new(big.Int).Add(big.NewInt(maxBurst), bigOne))
	dvt := refWrap(new(big.Int).Mul(bEI, big.NewInt(limit)))
	inc := refWrap(new(big.Int).Mul(bEI, big.NewInt(q)))
	bDVT, bInc, bNow := big.NewInt(dvt), big.NewInt(inc), big.NewInt(now)

	bTAT := new(big.Int).Set(bNow)
	if exists {
		bTAT.SetUint64(tat)
	}
	newTAT := new(big.Int).Set(bTAT)
	if newTAT.Cmp(bNow) < 0 {
		newTAT.Set(bNow)
	}
	newTAT.Add(newTAT, bInc)

	r.limit = limit
	r.retry = -1
	var ttl *big.Int
	if diff := new(big.Int).Sub(newTAT, bNow); diff.Cmp(bDVT) <= 0 {
		ttl = diff
		r.newTAT = uint64(refWrap(newTAT))
		r.ttlMS = refQuo(diff, big1e6).Int64()
	} else {
		r.limited = true
		if inc <= dvt {
			ra := new(big.Int).Sub(newTAT, bDVT)
			r.retry = refSeconds(ra.Sub(ra, bNow))
		}
		ttl = new(big.Int).Sub(bTAT, bNow)
	}
	next := new(big.Int).Sub(bDVT, ttl)
	if next.Cmp(new(big.Int).Neg(bEI)) > 0 {
		r.remaining = refTruncSat(refF64(refQuo(next, big1e3)) / refF64(refQuo(bEI, big1e3)))
	}
	r.resetSec = refSeconds(ttl)
	return r, false
}

// checkApply compares the implementation with the reference for one input and
// checks the invariants, failing t at the first mismatch.
func checkApply(t *testing.T, maxBurst, count, period, q, now int64, tat uint64, exists bool) {
	t.Helper()
	in := func() string {
		return fmt.Sprintf("maxBurst=%d count=%d period=%d q=%d now=%d tat=%d exists=%v",
			maxBurst, count, period, q, now, tat, exists)
	}
	if got, want := EmissionInterval(count, period), refEI(count, period); got != want {
		t.Fatalf("EmissionInterval(%d, %d) = %d, reference %d", count, period, got, want)
	}
	want, zero := refApply(maxBurst, count, period, q, now, tat, exists)
	l, err := NewLimit(maxBurst, count, period)
	if zero {
		if err != ErrZeroRate {
			t.Fatalf("%s: NewLimit error = %v, want ErrZeroRate", in(), err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: NewLimit: %v", in(), err)
	}
	got := l.Apply(now, tat, exists, q)

	if got.Limited != want.limited || got.Max != want.limit || got.Remaining != want.remaining ||
		got.RetryAfter != want.retry || got.ResetAfter != want.resetSec {
		t.Fatalf("%s: reply [%v %d %d %d %d], reference [%v %d %d %d %d]", in(),
			got.Limited, got.Max, got.Remaining, got.RetryAfter, got.ResetAfter,
			want.limited, want.limit, want.remaining, want.retry, want.resetSec)
	}
	if !got.Limited && (got.NewTAT != want.newTAT || got.TTLms != want.ttlMS) {
		t.Fatalf("%s: store NewTAT=%d TTLms=%d, reference NewTAT=%d TTLms=%d", in(),
			got.NewTAT, got.TTLms, want.newTAT, want.ttlMS)
	}

	// Invariants, independent of the reference.
	if got.Limited {
		// A denied call writes nothing: no payload to store.
		if got.NewTAT != 0 || got.TTLms != 0 {
			t.Fatalf("%s: denied result asks to write NewTAT=%d TTLms=%d", in(), got.NewTAT, got.TTLms)
		}
		// Denied means new_tat − DVT − now > 0, so retry_after is never
		// negative; −1 only when the increment exceeds the DVT.
		inc := refWrap(new(big.Int).Mul(big.NewInt(l.EI), big.NewInt(q)))
		if (got.RetryAfter == -1) != (inc > l.DVT) || got.RetryAfter < -1 {
			t.Fatalf("%s: denied with retry_after %d, increment %d, DVT %d", in(), got.RetryAfter, inc, l.DVT)
		}
	} else if got.RetryAfter != -1 {
		t.Fatalf("%s: allowed with retry_after %d, want -1", in(), got.RetryAfter)
	}
	if got.Max != maxBurst+1 {
		t.Fatalf("%s: limit %d, want max_burst+1 = %d", in(), got.Max, maxBurst+1)
	}
	if saneDomain(l, maxBurst, q, now, tat, exists) && (got.Remaining < 0 || got.Remaining > got.Max) {
		t.Fatalf("%s: remaining %d outside [0, %d] on ordinary inputs", in(), got.Remaining, got.Max)
	}
}

// saneDomain reports whether an input is one where the spec's arithmetic
// guarantees 0 ≤ remaining ≤ limit: a positive EI in whole µs (otherwise the
// µs truncation of section 4 lets remaining exceed the limit: the 666667
// quirk), 0 ≤ max_burst with limit ≤ 2^53 and the DVT not wrapping, a
// non-negative increment that does not wrap, and a key that is missing or
// holds a TAT in [now, now+DVT] (a stale TAT makes a denied call's ttl
// negative and remaining larger than the limit).
func saneDomain(l Limit, maxBurst, q, now int64, tat uint64, exists bool) bool {
	if l.EI <= 0 || l.EI%1000 != 0 || maxBurst < 0 || maxBurst >= 1<<53 || q < 0 {
		return false
	}
	limit := big.NewInt(maxBurst + 1)
	if new(big.Int).Mul(big.NewInt(l.EI), limit).Cmp(bigMaxI64) > 0 {
		return false
	}
	if new(big.Int).Mul(big.NewInt(l.EI), big.NewInt(q)).Cmp(bigMaxI64) > 0 {
		return false
	}
	if !exists {
		return true
	}
	bt, bn := new(big.Int).SetUint64(tat), big.NewInt(now)
	return bt.Cmp(bn) >= 0 && bt.Cmp(new(big.Int).Add(bn, big.NewInt(l.DVT))) <= 0
}

// extremes are the values seeded into the corpus and mixed into the
// randomized test.
var extremes = []int64{
	0, 1, -1, 2, -2, 999, 1000, 1001, 999_999, 1_000_000, 1_000_001,
	999_999_999, 1_000_000_000, 1_000_000_001, 2_000_000_000, 666_667,
	math.MaxInt32, math.MinInt32, math.MaxUint32,
	1<<53 - 1, 1 << 53, 1<<53 + 1, -(1<<53 - 1), -(1 << 53), -(1<<53 + 1),
	math.MaxInt64 / 1_000_000_000, math.MaxInt64/1_000_000_000 + 1,
	-(math.MaxInt64 / 1_000_000_000), -(math.MaxInt64/1_000_000_000 + 1),
	1 << 62, -(1 << 62), math.MaxInt64 - 1, math.MinInt64 + 1,
	math.MaxInt64, math.MinInt64, base,
}

var extremeTATs = []uint64{
	0, 1, math.MaxUint64, math.MaxUint64 - 1, 1 << 63, 1<<63 - 1, 1<<63 + 1,
	1<<53 - 1, 1 << 53, 1<<53 + 1, uint64(base), uint64(base) + 32e9,
	uint64(base) - 1, uint64(base) + 1,
}

// roundCounts divide 1e6, so EI = period×1e9/count is a whole number of µs.
var roundCounts = []int64{1, 2, 4, 5, 8, 10, 16, 20, 25, 40, 50, 100, 125, 1000, 15625, 1_000_000}

func FuzzApply(f *testing.F) {
	// The spec's worked examples, at base.
	f.Add(int64(15), int64(30), int64(60), int64(1), base, uint64(0), false)
	f.Add(int64(15), int64(30), int64(60), int64(1), base, uint64(base)+32e9, true)
	f.Add(int64(0), int64(1), int64(2), int64(1), base, uint64(base)+2e9, true)
	f.Add(int64(4), int64(5), int64(1), int64(5), base, uint64(0), false)
	f.Add(int64(4), int64(5), int64(1), int64(6), base, uint64(0), false)
	f.Add(int64(15), int64(30), int64(60), int64(0), base, uint64(0), false)
	f.Add(int64(5), int64(1), int64(10), int64(-1), base, uint64(base)+30e9, true)
	f.Add(int64(-1), int64(30), int64(60), int64(1), base, uint64(0), false)
	f.Add(int64(15), int64(-30), int64(60), int64(1), base, uint64(0), false)
	f.Add(int64(15), int64(-30), int64(-60), int64(1), base, uint64(0), false)
	f.Add(int64(10), int64(666667), int64(1), int64(1), base, uint64(0), false)
	f.Add(int64(15), int64(2_000_000_000), int64(1), int64(1), base, uint64(0), false)
	// Extremes.
	for i, v := range extremes {
		w := extremes[(i*7+3)%len(extremes)]
		tat := extremeTATs[i%len(extremeTATs)]
		f.Add(v, int64(1), int64(1), int64(1), base, tat, true)
		f.Add(int64(15), v, int64(60), int64(1), w, tat, i%2 == 0)
		f.Add(int64(15), int64(30), v, w, base, tat, true)
		f.Add(int64(15), int64(30), int64(60), v, w, tat, i%3 != 0)
		f.Add(v, w, v, w, v, tat, true)
	}
	f.Add(int64(math.MaxInt64), int64(1), int64(math.MaxInt64), int64(math.MinInt64), int64(math.MinInt64), uint64(math.MaxUint64), true)
	f.Add(int64(math.MinInt64), int64(-1), int64(math.MinInt64), int64(math.MaxInt64), int64(math.MaxInt64), uint64(0), true)
	f.Add(int64(9_000_000_000), int64(1), int64(1), int64(-8_000_000_000), base, uint64(math.MaxUint64), true)

	f.Fuzz(func(t *testing.T, maxBurst, count, period, quantity, now int64, tat uint64, exists bool) {
		checkApply(t, maxBurst, count, period, quantity, now, tat, exists)
	})
}

func FuzzSeconds(f *testing.F) {
	for _, v := range extremes {
		f.Add(v)
	}
	f.Add(int64(16_777_216_999_999_999))
	f.Fuzz(func(t *testing.T, ns int64) {
		if got, want := Seconds(ns), refSeconds(big.NewInt(ns)); got != want {
			t.Fatalf("Seconds(%d) = %d, reference %d", ns, got, want)
		}
	})
}

// TestApplyRandomized runs the differential comparison on a fixed-seed stream
// mixing extreme, small, realistic (around base, TAT within the bucket) and
// fully random inputs, so plain `go test` covers what the fuzzer explores.
func TestApplyRandomized(t *testing.T) {
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	rng := rand.New(rand.NewPCG(0x63656c6c, 0x67637261))
	pick := func() int64 {
		switch rng.IntN(8) {
		case 0, 1:
			return extremes[rng.IntN(len(extremes))]
		case 2:
			return extremes[rng.IntN(len(extremes))] + rng.Int64N(5) - 2 // wraps: fine
		case 3:
			return int64(rng.Uint64()) // any int64
		case 4:
			return rng.Int64N(1 << uint(rng.IntN(62)+1)) // any magnitude
		default:
			return rng.Int64N(201) - 100
		}
	}
	sane := 0
	for i := range n {
		var maxBurst, count, period, q, now int64
		var tat uint64
		exists := rng.IntN(4) != 0
		if rng.IntN(2) == 0 {
			// Realistic: small positive parameters, now around base,
			// TAT near now.
			maxBurst = rng.Int64N(1000) - 1
			count = rng.Int64N(2_000_000) + 1
			if rng.IntN(2) == 0 { // EI in whole µs, mostly
				count = roundCounts[rng.IntN(len(roundCounts))]
			}
			period = rng.Int64N(3600) + 1
			if rng.IntN(8) == 0 {
				count = -count
			}
			q = rng.Int64N(50) - 5
			now = base + rng.Int64N(1e12)
			off := rng.Int64N(1<<uint(rng.IntN(50)+1)) - 1e9
			if dvt := EmissionInterval(count, period) * (maxBurst + 1); dvt > 0 && rng.IntN(2) == 0 {
				off = rng.Int64N(dvt + 1) // within the bucket
			}
			tat = uint64(now + off)
		} else {
			maxBurst, count, period, q, now = pick(), pick(), pick(), pick(), pick()
			if rng.IntN(2) == 0 {
				tat = uint64(pick())
			} else {
				tat = extremeTATs[rng.IntN(len(extremeTATs))]
			}
		}
		if l, err := NewLimit(maxBurst, count, period); err == nil && saneDomain(l, maxBurst, q, now, tat, exists) {
			sane++
		}
		checkApply(t, maxBurst, count, period, q, now, tat, exists)
		if t.Failed() {
			t.Fatalf("iteration %d", i)
		}
	}
	if sane < n/20 {
		t.Errorf("only %d of %d inputs exercised the remaining-range invariant", sane, n)
	}
	t.Logf("%d inputs, %d in the invariant's domain", n, sane)
}

// TestSecondsRandomized compares Seconds with the reference over a fixed-seed
// stream of durations of every magnitude.
func TestSecondsRandomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		ns := rng.Int64N(1 << uint(rng.IntN(62)+1))
		if rng.IntN(50) == 0 {
			ns = int64(rng.Uint64())
		}
		if rng.IntN(2) == 0 {
			ns = -ns
		}
		if got, want := Seconds(ns), refSeconds(big.NewInt(ns)); got != want {
			t.Fatalf("Seconds(%d) = %d, reference %d", ns, got, want)
		}
	}
}

// TestReferenceSelfCheck pins the reference itself on the spec's numbers, so
// that a bug shared by both implementations cannot hide.
func TestReferenceSelfCheck(t *testing.T) {
	for _, c := range []struct{ count, period, want int64 }{
		{30, 60, 2e9}, {3, 1, 333333333}, {7, 60, 8571428571}, {666667, 1, 1499}, {2e9, 1, 0},
	} {
		if got := refEI(c.count, c.period); got != c.want {
			t.Errorf("refEI(%d, %d) = %d, want %d", c.count, c.period, got, c.want)
		}
	}
	for _, c := range []struct{ ns, want int64 }{
		{1_999_900_000, 2}, {2_000_500_000, 2}, {900_000, 0}, {200_000_000, 1}, {-1_000_000, 0}, {-1e9, -1},
	} {
		if got := refSeconds(big.NewInt(c.ns)); got != c.want {
			t.Errorf("refSeconds(%d) = %d, want %d", c.ns, got, c.want)
		}
	}
	r, _ := refApply(10, 666667, 1, 1, base, 0, false)
	if r.remaining != 14 {
		t.Errorf("reference 666667 quirk: remaining %d, want 14", r.remaining)
	}
	r, _ = refApply(15, 30, 60, 1, base, 0, false)
	if r != (refResult{limit: 16, remaining: 15, retry: -1, resetSec: 2, newTAT: uint64(base) + 2e9, ttlMS: 2000}) {
		t.Errorf("reference 15 30 60: %+v", r)
	}
	if refTruncSat(math.Nextafter(9223372036854775808.0, 0)) != 9223372036854774784 ||
		refTruncSat(9223372036854775808.0) != math.MaxInt64 || refTruncSat(-9223372036854775808.0) != math.MinInt64 ||
		refTruncSat(-0.5) != 0 || refTruncSat(math.NaN()) != 0 {
		t.Error("refTruncSat")
	}
}
