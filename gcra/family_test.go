package gcra

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

// runStepsMs is runSteps for CL.PTHROTTLE: each step's period is in ms and
// the reply's durations are in ms (NewLimitMs, ApplyMs).
func runStepsMs(t *testing.T, start simKey, steps []step) {
	t.Helper()
	k := start
	for i, st := range steps {
		now := base + int64(st.at)
		k.observe(now)
		l, err := NewLimitMs(st.mb, st.count, st.period)
		if st.zeroRate {
			if !errors.Is(err, ErrZeroRate) {
				t.Errorf("step %d: NewLimitMs(%d, %d, %d) error = %v, want ErrZeroRate", i, st.mb, st.count, st.period, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("step %d: NewLimitMs(%d, %d, %d): %v", i, st.mb, st.count, st.period, err)
			continue
		}
		prev := k
		r := l.ApplyMs(now, k.tat, k.exists, st.q)
		if got := reply(r); got != st.want {
			t.Errorf("step %d: CL.PTHROTTLE %d %d %d %d at base+%v (key %+v) = %v, want %v",
				i, st.mb, st.count, st.period, st.q, st.at, prev, got, st.want)
		}
		expireErr := false
		if r.Limited {
			if r.NewTAT != 0 || r.TTLms != 0 {
				t.Errorf("step %d: denied call carries a write: NewTAT=%d TTLms=%d", i, r.NewTAT, r.TTLms)
			}
		} else {
			if st.ttl != nil && r.TTLms != *st.ttl {
				t.Errorf("step %d: TTLms = %d, want %d", i, r.TTLms, *st.ttl)
			}
			expireErr = k.store(now, r.NewTAT, r.TTLms)
		}
		if expireErr != st.expireErr {
			t.Errorf("step %d: expire error = %v, want %v (TTLms %d)", i, expireErr, st.expireErr, r.TTLms)
		}
		if w := st.after; w != nil {
			switch {
			case k.exists != w.exists:
				t.Errorf("step %d: key exists = %v, want %v", i, k.exists, w.exists)
			case w.exists && k.tat != w.tat:
				t.Errorf("step %d: stored TAT = base%+d ns, want base%+d ns", i, int64(k.tat-uint64(base)), int64(w.tat-uint64(base)))
			}
		}
	}
}

// TestPThrottle15_30_60000 is the spec's headline example in ms: the same
// TATs and TTLs as `15 30 60`, replies in ms rounded up.
func TestPThrottle15_30_60000(t *testing.T) {
	var steps []step
	for i := int64(1); i <= 20; i++ {
		st := step{at: time.Duration(i-1) * us, mb: 15, count: 30, period: 60000, q: 1}
		if i <= 16 {
			// ttl = 2i s − (i−1) µs: rounds up to 2000i ms
			st.want = [5]int64{0, 16, 16 - i, -1, 2000 * i}
			st.ttl = ttl((2*i*1e9 - (i-1)*1e3) / 1e6)
			st.after = present(time.Duration(i) * 2 * s)
		} else {
			// retry = 2 s − (i−1) µs → 2000 ms; reset = 32 s − (i−1) µs → 32000
			st.want = [5]int64{1, 16, 0, 2000, 32000}
			st.after = present(32 * s)
		}
		steps = append(steps, st)
	}
	runStepsMs(t, simKey{}, steps)
}

func TestPThrottleWorkedExamples(t *testing.T) {
	tests := []struct {
		name  string
		start simKey
		steps []step
	}{
		{"a 250 ms window: 0 1 250", simKey{}, []step{
			{at: 0, mb: 0, count: 1, period: 250, q: 1, want: [5]int64{0, 1, 0, -1, 250}, ttl: ttl(250), after: present(250 * ms)},
			{at: 1 * us, mb: 0, count: 1, period: 250, q: 1, want: [5]int64{1, 1, 0, 250, 250}, after: present(250 * ms)},
			{at: 100 * ms, mb: 0, count: 1, period: 250, q: 1, want: [5]int64{1, 1, 0, 150, 150}},
			{at: 250*ms - 1, mb: 0, count: 1, period: 250, q: 1, want: [5]int64{1, 1, 0, 1, 1}},
			{at: 250 * ms, mb: 0, count: 1, period: 250, q: 1, want: [5]int64{0, 1, 0, -1, 250}, ttl: ttl(250), after: present(500 * ms)},
		}},
		{"20 per second: 19 20 1000", simKey{}, []step{
			{at: 0, mb: 19, count: 20, period: 1000, q: 1, want: [5]int64{0, 20, 19, -1, 50}, ttl: ttl(50), after: present(50 * ms)},
			{at: 0, mb: 19, count: 20, period: 1000, q: 18, want: [5]int64{0, 20, 1, -1, 950}, after: present(950 * ms)},
			{at: 0, mb: 19, count: 20, period: 1000, q: 1, want: [5]int64{0, 20, 0, -1, 1000}, after: present(1000 * ms)},
			{at: 0, mb: 19, count: 20, period: 1000, q: 1, want: [5]int64{1, 20, 0, 50, 1000}, after: present(1000 * ms)},
			{at: 30 * ms, mb: 19, count: 20, period: 1000, q: 1, want: [5]int64{1, 20, 0, 20, 970}},
			{at: 50 * ms, mb: 19, count: 20, period: 1000, q: 1, want: [5]int64{0, 20, 0, -1, 1000}, after: present(1050 * ms)},
		}},
		{"1 per ms: sub-second retry hints that CL.THROTTLE rounds to 0", simKey{}, []step{
			{at: 0, mb: 0, count: 1, period: 1, q: 1, want: [5]int64{0, 1, 0, -1, 1}, ttl: ttl(1), after: present(1 * ms)},
			{at: 1 * us, mb: 0, count: 1, period: 1, q: 1, want: [5]int64{1, 1, 0, 1, 1}, after: present(1 * ms)},
			{at: 1 * ms, mb: 0, count: 1, period: 1, q: 1, want: [5]int64{0, 1, 0, -1, 1}, after: present(2 * ms)},
		}},
		{"quantity above the limit: retry -1, reset 0 on a fresh key", simKey{}, []step{
			{mb: 4, count: 5, period: 1000, q: 6, want: [5]int64{1, 5, 5, -1, 0}, after: absent()},
			{at: 1 * us, mb: 4, count: 5, period: 1000, q: 5, want: [5]int64{0, 5, 0, -1, 1000}, ttl: ttl(1000), after: present(1*us + 1*s)},
		}},
		{"period not a whole second: 0 3 1000 is 3 per second", simKey{}, []step{
			{mb: 2, count: 3, period: 1000, q: 1, want: [5]int64{0, 3, 2, -1, 334}, ttl: ttl(333), after: present(333333333)},
		}},
		{"zero rates", simKey{}, []step{
			{mb: 1, count: 1_000_001, period: 1, zeroRate: true},
			{mb: 1, count: 0, period: 1, zeroRate: true},
			{mb: 1, count: 1, period: 0, zeroRate: true},
			// EI 1 ns: a 1 ns TTL still replies 1 ms (rounded up); remaining is
			// 0 µs / 0 µs = NaN → 0, CL.THROTTLE's quirk
			// (kept to the end of this millisecond, as Redis keeps a 0 ms TTL)
			{mb: 1, count: 1_000_000, period: 1, q: 1, want: [5]int64{0, 2, 0, -1, 1}, ttl: ttl(0), after: present(1)},
		}},
		{"max_burst -1 and negative EI, as CL.THROTTLE", simKey{}, []step{
			{mb: -1, count: 30, period: 60000, q: 1, want: [5]int64{1, 0, 0, -1, 0}, after: absent()},
			{mb: 15, count: -30, period: 60000, q: 1, want: [5]int64{1, 16, 0, -1, 0}, after: absent()},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runStepsMs(t, tt.start, tt.steps) })
	}
}

// TestPThrottleTTLRules: a stale TAT gives a negative reset in CL.THROTTLE
// (-5 s) but 0 in ms; TTLs are the same numbers as CL.THROTTLE's.
func TestPThrottleTTLRules(t *testing.T) {
	runStepsMs(t, simKey{}, []step{
		{at: 0, mb: 9, count: 1000, period: 1000, q: -1, want: [5]int64{0, 10, 11, -1, 0}, ttl: ttl(-1), after: present(-1 * ms)},
		{at: 1 * time.Hour, mb: 9, count: 1000, period: 1000, q: -2, want: [5]int64{0, 10, 12, -1, 0}, ttl: ttl(-2), expireErr: true, after: present(time.Hour - 2*ms)},
		{at: time.Hour + 5*s, mb: 9, count: 1000, period: 1000, q: 11, want: [5]int64{1, 10, 5012, -1, 0}, after: present(time.Hour - 2*ms)},
		{at: 2 * time.Hour, mb: 9, count: 1000, period: 1000, q: 9, want: [5]int64{0, 10, 1, -1, 9}, ttl: ttl(9), after: present(2*time.Hour + 9*ms)},
	})
}

func TestMillis(t *testing.T) {
	tests := []struct{ ns, want int64 }{
		{0, 0}, {-1, 0}, {math.MinInt64, 0}, {-1_000_000, 0},
		{1, 1}, {999_999, 1}, {1_000_000, 1}, {1_000_001, 2}, {1_999_999, 2}, {2_000_000, 2},
		{250_000_000, 250}, {math.MaxInt64, 9_223_372_036_855},
	}
	for i, tt := range tests {
		if got := Millis(tt.ns); got != tt.want {
			t.Errorf("step %d: Millis(%d) = %d, want %d", i, tt.ns, got, tt.want)
		}
	}
}

func TestEmissionIntervalMs(t *testing.T) {
	tests := []struct{ count, periodMs, want int64 }{
		{30, 60_000, 2_000_000_000},
		{1, 250, 250_000_000},
		{20, 1000, 50_000_000},
		{3, 1000, 333_333_333},
		{3, 1, 333_333},
		{1_000_000, 1, 1},
		{1_000_001, 1, 0},
		{0, 1, 0}, {1, 0, 0},
		{-30, 60_000, -2_000_000_000},
		{-30, -60_000, 2_000_000_000},
		// the fast path's edge: periodMs × 1e6 just fits int64 (and
		// rounds once to float64)
		{1, math.MaxInt64 / 1_000_000, 9_223_372_036_853_999_616},
		{1, -(math.MaxInt64 / 1_000_000), -9_223_372_036_853_999_616},
		// beyond it: big arithmetic, then saturation
		{1, math.MaxInt64/1_000_000 + 1, math.MaxInt64},
		{2, math.MaxInt64/1_000_000 + 1, 4_611_686_018_427_499_520},
		{1, math.MaxInt64, math.MaxInt64},
		{1, math.MinInt64, math.MinInt64},
		{math.MaxInt64, math.MaxInt64, 1_000_000},
	}
	for i, tt := range tests {
		if got := EmissionIntervalMs(tt.count, tt.periodMs); got != tt.want {
			t.Errorf("step %d: EmissionIntervalMs(%d, %d) = %d, want %d", i, tt.count, tt.periodMs, got, tt.want)
		}
		if got, want := EmissionIntervalMs(tt.count, tt.periodMs), refEIScaled(tt.count, tt.periodMs, big1e6); got != want {
			t.Errorf("step %d: EmissionIntervalMs(%d, %d) = %d, reference %d", i, tt.count, tt.periodMs, got, want)
		}
	}
}

// ---------------------------------------------------------------------------
// The ms path against exact big-integer arithmetic (the reference of
// fuzz_test.go with the period scaled by 1e6 and durations in ms).

// refEIScaled is section 3's emission interval for a period in units of
// scale ns.
func refEIScaled(count, period int64, scale *big.Int) int64 {
	if count == 0 || period == 0 {
		return 0
	}
	p := new(big.Int).Mul(big.NewInt(period), scale)
	return refTruncSat(refF64(p) / refF64(big.NewInt(count)))
}

// refMillis is gcra-family.md section 1's rounding: ceil(d/1e6) for d > 0.
func refMillis(d *big.Int) int64 {
	if d.Sign() <= 0 {
		return 0
	}
	q, r := new(big.Int).QuoRem(d, big1e6, new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, bigOne)
	}
	return q.Int64()
}

// refApplyMs is CL.PTHROTTLE from the specs alone, in exact integers.
func refApplyMs(maxBurst, count, periodMs, q, now int64, tat uint64, exists bool) (r refResult, zero bool) {
	ei := refEIScaled(count, periodMs, big1e6)
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
	r.limit, r.retry = limit, -1
	var ttl *big.Int
	if diff := new(big.Int).Sub(newTAT, bNow); diff.Cmp(bDVT) <= 0 {
		ttl = diff
		r.newTAT = uint64(refWrap(newTAT))
		r.ttlMS = refQuo(diff, big1e6).Int64()
	} else {
		r.limited = true
		if inc <= dvt {
			ra := new(big.Int).Sub(newTAT, bDVT)
			r.retry = refMillis(ra.Sub(ra, bNow))
		}
		ttl = new(big.Int).Sub(bTAT, bNow)
	}
	next := new(big.Int).Sub(bDVT, ttl)
	if next.Cmp(new(big.Int).Neg(bEI)) > 0 {
		r.remaining = refTruncSat(refF64(refQuo(next, big1e3)) / refF64(refQuo(bEI, big1e3)))
	}
	r.resetSec = refMillis(ttl) // in ms here
	return r, false
}

// checkApplyMs compares NewLimitMs+ApplyMs with the reference, and with
// CL.THROTTLE's Apply on the same Limit (everything but the two durations
// must agree, and retry_after is -1 in the same places).
func checkApplyMs(t *testing.T, maxBurst, count, periodMs, q, now int64, tat uint64, exists bool) {
	t.Helper()
	in := func() string {
		return fmt.Sprintf("maxBurst=%d count=%d periodMs=%d q=%d now=%d tat=%d exists=%v", maxBurst, count, periodMs, q, now, tat, exists)
	}
	want, zero := refApplyMs(maxBurst, count, periodMs, q, now, tat, exists)
	l, err := NewLimitMs(maxBurst, count, periodMs)
	if zero {
		if err != ErrZeroRate {
			t.Fatalf("%s: NewLimitMs error = %v, want ErrZeroRate", in(), err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: NewLimitMs: %v", in(), err)
	}
	got := l.ApplyMs(now, tat, exists, q)
	if got.Limited != want.limited || got.Max != want.limit || got.Remaining != want.remaining ||
		got.RetryAfter != want.retry || got.ResetAfter != want.resetSec {
		t.Fatalf("%s: reply [%v %d %d %d %d], reference [%v %d %d %d %d]", in(),
			got.Limited, got.Max, got.Remaining, got.RetryAfter, got.ResetAfter,
			want.limited, want.limit, want.remaining, want.retry, want.resetSec)
	}
	if !got.Limited && (got.NewTAT != want.newTAT || got.TTLms != want.ttlMS) {
		t.Fatalf("%s: store NewTAT=%d TTLms=%d, reference NewTAT=%d TTLms=%d", in(), got.NewTAT, got.TTLms, want.newTAT, want.ttlMS)
	}
	if got.RetryAfter < -1 || got.ResetAfter < 0 {
		t.Fatalf("%s: negative ms duration: retry %d reset %d", in(), got.RetryAfter, got.ResetAfter)
	}
	sec := l.Apply(now, tat, exists, q)
	if sec.Limited != got.Limited || sec.Max != got.Max || sec.Remaining != got.Remaining ||
		sec.NewTAT != got.NewTAT || sec.TTLms != got.TTLms || (sec.RetryAfter == -1) != (got.RetryAfter == -1) {
		t.Fatalf("%s: ApplyMs %+v and Apply %+v disagree beyond the durations' unit", in(), got, sec)
	}
	if l.ApplyIn(UnitMillis, now, tat, exists, q) != got || l.ApplyIn(UnitSeconds, now, tat, exists, q) != sec {
		t.Fatalf("%s: ApplyIn differs from ApplyMs/Apply", in())
	}
}

func FuzzApplyMs(f *testing.F) {
	f.Add(int64(15), int64(30), int64(60000), int64(1), base, uint64(0), false)
	f.Add(int64(0), int64(1), int64(250), int64(1), base, uint64(base)+250e6, true)
	f.Add(int64(19), int64(20), int64(1000), int64(1), base, uint64(base)+1e9, true)
	f.Add(int64(9), int64(1000), int64(1000), int64(11), base, uint64(base)-5e9, true)
	for i, v := range extremes {
		w := extremes[(i*5+1)%len(extremes)]
		tat := extremeTATs[i%len(extremeTATs)]
		f.Add(v, int64(1), int64(1000), int64(1), base, tat, true)
		f.Add(int64(15), v, int64(60000), w, base, tat, i%2 == 0)
		f.Add(int64(15), int64(30), v, w, base, tat, true)
		f.Add(v, w, v, w, v, tat, true)
	}
	f.Fuzz(func(t *testing.T, maxBurst, count, periodMs, q, now int64, tat uint64, exists bool) {
		checkApplyMs(t, maxBurst, count, periodMs, q, now, tat, exists)
	})
}

// TestApplyMsRandomized runs checkApplyMs over a fixed-seed stream of
// extreme, realistic and random inputs, so plain `go test` covers it.
func TestApplyMsRandomized(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	rng := rand.New(rand.NewPCG(0x70746872, 0x6f74746c))
	pick := func() int64 {
		switch rng.IntN(6) {
		case 0, 1:
			return extremes[rng.IntN(len(extremes))]
		case 2:
			return int64(rng.Uint64())
		case 3:
			return rng.Int64N(1 << uint(rng.IntN(62)+1))
		default:
			return rng.Int64N(201) - 100
		}
	}
	for i := range n {
		var maxBurst, count, periodMs, q, now int64
		var tat uint64
		exists := rng.IntN(4) != 0
		if rng.IntN(2) == 0 {
			maxBurst = rng.Int64N(1000) - 1
			count = rng.Int64N(2_000_000) + 1
			periodMs = rng.Int64N(3_600_000) + 1
			q = rng.Int64N(50) - 5
			now = base + rng.Int64N(1e12)
			tat = uint64(now + rng.Int64N(1<<uint(rng.IntN(50)+1)) - 1e9)
		} else {
			maxBurst, count, periodMs, q, now = pick(), pick(), pick(), pick(), pick()
			tat = extremeTATs[rng.IntN(len(extremeTATs))]
			if rng.IntN(2) == 0 {
				tat = uint64(pick())
			}
		}
		checkApplyMs(t, maxBurst, count, periodMs, q, now, tat, exists)
		if t.Failed() {
			t.Fatalf("iteration %d", i)
		}
	}
}

// TestPThrottleStoresWhatThrottleStores is the differential test of
// gcra-family.md section 1: on random arguments, `CL.PTHROTTLE k b c p*1000`
// and `CL.THROTTLE k b c p` give the same Limit, and a random run of calls
// at the same instants on two simulated keys, one per command, decides the
// same way and leaves the same TAT, existence and TTL after every call.
func TestPThrottleStoresWhatThrottleStores(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1000))
	runs := 3000
	if testing.Short() {
		runs = 300
	}
	for run := range runs {
		maxBurst := rng.Int64N(100) - 1
		count := rng.Int64N(1000) + 1
		period := rng.Int64N(3600) + 1
		switch rng.IntN(10) {
		case 0:
			count = -count
		case 1:
			maxBurst = int64(rng.Uint64())
		case 2:
			period = rng.Int64N(math.MaxInt64/1000) + 1 // p*1000 still fits
		case 3:
			count = rng.Int64N(3_000_000_000) + 1 // EI around a ns, zero rates
		}
		ls, errS := NewLimit(maxBurst, count, period)
		lm, errM := NewLimitMs(maxBurst, count, period*1000)
		if ls != lm || errS != errM {
			t.Fatalf("run %d: NewLimit(%d,%d,%d) = %+v,%v; NewLimitMs(…,%d) = %+v,%v", run, maxBurst, count, period, ls, errS, period*1000, lm, errM)
		}
		if errS != nil {
			continue
		}
		var ks, km simKey
		now := base + rng.Int64N(1e15)
		for call := range 40 {
			now += rng.Int64N(int64(3*time.Second)) * int64(rng.IntN(2))
			q := rng.Int64N(5)
			if rng.IntN(10) == 0 && maxBurst >= -1 && maxBurst < 1000 {
				q = rng.Int64N(2*maxBurst+3) - maxBurst - 1
			}
			ks.observe(now)
			km.observe(now)
			rs := ls.Apply(now, ks.tat, ks.exists, q)
			rm := lm.ApplyMs(now, km.tat, km.exists, q)
			if rs.Limited != rm.Limited || rs.Remaining != rm.Remaining || (rs.RetryAfter == -1) != (rm.RetryAfter == -1) {
				t.Fatalf("run %d call %d: THROTTLE %+v, PTHROTTLE %+v", run, call, rs, rm)
			}
			if !rs.Limited {
				es := ks.store(now, rs.NewTAT, rs.TTLms)
				em := km.store(now, rm.NewTAT, rm.TTLms)
				if es != em {
					t.Fatalf("run %d call %d: expire error %v vs %v", run, call, es, em)
				}
			}
			if ks != km {
				t.Fatalf("run %d call %d (%d %d %d q=%d): THROTTLE key %+v, PTHROTTLE key %+v", run, call, maxBurst, count, period, q, ks, km)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// ApplyAll: CL.MTHROTTLE's decision.

// mg is a group of a multi-call table: parameters in seconds (or ms), a key
// name, and the reply expected for the group.
type mg struct {
	key               string
	mb, count, period int64
	q                 int64
	want              [5]int64
}

// mstep is one CL.MTHROTTLE call on a map of simulated keys.
type mstep struct {
	at      time.Duration
	ms      bool // CL.MPTHROTTLE
	groups  []mg
	verdict [5]int64
	after   map[string]*keyWant // nil: not checked
}

func runMulti(t *testing.T, steps []mstep) {
	t.Helper()
	keys := map[string]*simKey{}
	for i, st := range steps {
		now := base + int64(st.at)
		gs := make([]Group, len(st.groups))
		for j, g := range st.groups {
			k := keys[g.key]
			if k == nil {
				k = &simKey{}
				keys[g.key] = k
			}
			k.observe(now)
			var l Limit
			var err error
			if st.ms {
				l, err = NewLimitMs(g.mb, g.count, g.period)
			} else {
				l, err = NewLimit(g.mb, g.count, g.period)
			}
			if err != nil {
				t.Fatalf("step %d group %d: %v", i, j, err)
			}
			gs[j] = Group{Limit: l, Q: g.q, Prev: -1, TAT: k.tat, Exists: k.exists}
			for p := j - 1; p >= 0; p-- {
				if st.groups[p].key == g.key {
					gs[j].Prev = p
					break
				}
			}
		}
		u := UnitSeconds
		if st.ms {
			u = UnitMillis
		}
		out := make([]Result, len(gs))
		b := ApplyAll(u, now, gs, out)
		if got := reply(out[b]); got != st.verdict {
			t.Errorf("step %d: verdict %v (group %d), want %v", i, got, b, st.verdict)
		}
		for j, g := range st.groups {
			if got := reply(out[j]); got != g.want {
				t.Errorf("step %d: group %d (%s) = %v, want %v", i, j, g.key, got, g.want)
			}
		}
		if !out[b].Limited {
			for j, g := range st.groups {
				keys[g.key].store(now, out[j].NewTAT, out[j].TTLms)
			}
		}
		for name, w := range st.after {
			k := keys[name]
			if k == nil {
				k = &simKey{}
			}
			if k.exists != w.exists || (w.exists && k.tat != w.tat) {
				t.Errorf("step %d: key %s = %+v, want %+v", i, name, *k, *w)
			}
		}
	}
}

// TestMThrottleLogin: 5 per 15 minutes AND 100 per day, the docs' login
// example (max_burst 4 / 99). The sixth attempt in a burst is denied by the
// 15-minute limit, and being denied it does not use up the daily one.
func TestMThrottleLogin(t *testing.T) {
	var steps []mstep
	for i := int64(1); i <= 5; i++ {
		steps = append(steps, mstep{at: time.Duration(i) * us, groups: []mg{
			{"m", 4, 5, 900, 1, [5]int64{0, 5, 5 - i, -1, 180 * i}},
			{"d", 99, 100, 86400, 1, [5]int64{0, 100, 100 - i, -1, 864 * i}},
		}, verdict: [5]int64{0, 5, 5 - i, -1, 180 * i}})
	}
	// the sixth: denied by the 15-minute limit; the daily group shows the
	// 94 it would have left, and neither key changes ("m" still holds
	// base+1µs + 5 × 180 s, "d" base+1µs + 5 × 864 s).
	steps = append(steps, mstep{at: 6 * us, groups: []mg{
		{"m", 4, 5, 900, 1, [5]int64{1, 5, 0, 180, 900}},
		{"d", 99, 100, 86400, 1, [5]int64{0, 100, 94, -1, 5184}},
	}, verdict: [5]int64{1, 5, 0, 180, 900}, after: map[string]*keyWant{"m": present(900*s + 1*us), "d": present(5*864*s + 1*us)}})
	runMulti(t, steps)
}

func TestMThrottleTables(t *testing.T) {
	tests := []struct {
		name  string
		steps []mstep
	}{
		{"one group is CL.THROTTLE", []mstep{
			{groups: []mg{{"a", 15, 30, 60, 1, [5]int64{0, 16, 15, -1, 2}}}, verdict: [5]int64{0, 16, 15, -1, 2}, after: map[string]*keyWant{"a": present(2 * s)}},
		}},
		{"all allowed: the smallest remaining binds, first on ties", []mstep{
			{groups: []mg{
				{"a", 9, 10, 1, 1, [5]int64{0, 10, 9, -1, 1}},
				{"b", 4, 5, 1, 1, [5]int64{0, 5, 4, -1, 1}},
				{"c", 4, 1, 1, 1, [5]int64{0, 5, 4, -1, 1}},
			}, verdict: [5]int64{0, 5, 4, -1, 1}},
		}},
		{"one denied: nothing written, the others show what they would have had", []mstep{
			{groups: []mg{{"b", 0, 1, 10, 1, [5]int64{0, 1, 0, -1, 10}}}, verdict: [5]int64{0, 1, 0, -1, 10}, after: map[string]*keyWant{"b": present(10 * s)}},
			{at: 1 * s, groups: []mg{
				{"a", 9, 10, 1, 1, [5]int64{0, 10, 9, -1, 1}},
				{"b", 0, 1, 10, 1, [5]int64{1, 1, 0, 9, 9}},
			}, verdict: [5]int64{1, 1, 0, 9, 9}, after: map[string]*keyWant{"a": absent(), "b": present(10 * s)}},
		}},
		{"several denied: the largest retry binds, -1 beats all, first on ties", []mstep{
			{groups: []mg{
				{"a", 0, 1, 5, 1, [5]int64{0, 1, 0, -1, 5}},
				{"b", 0, 1, 9, 1, [5]int64{0, 1, 0, -1, 9}},
			}, verdict: [5]int64{0, 1, 0, -1, 5}},
			{at: 1 * us, groups: []mg{
				{"a", 0, 1, 5, 1, [5]int64{1, 1, 0, 5, 5}},
				{"b", 0, 1, 9, 1, [5]int64{1, 1, 0, 9, 9}},
				{"c", 0, 1, 9, 1, [5]int64{0, 1, 0, -1, 9}},
			}, verdict: [5]int64{1, 1, 0, 9, 9}, after: map[string]*keyWant{"c": absent()}},
			{at: 2 * us, groups: []mg{
				{"b", 0, 1, 9, 1, [5]int64{1, 1, 0, 9, 9}},
				{"c", 0, 1, 9, 2, [5]int64{1, 1, 1, -1, 0}},
				{"a", 0, 1, 5, 1, [5]int64{1, 1, 0, 5, 5}},
			}, verdict: [5]int64{1, 1, 1, -1, 0}},
			{at: 3 * us, groups: []mg{
				{"a", 0, 1, 9, 1, [5]int64{1, 1, 0, 5, 5}},
				{"d", 0, 1, 5, 0, [5]int64{0, 1, 1, -1, 0}},
				{"b", 0, 1, 5, 1, [5]int64{1, 1, 0, 9, 9}},
				{"e", 0, 1, 5, 0, [5]int64{0, 1, 1, -1, 0}},
			}, verdict: [5]int64{1, 1, 0, 9, 9}},
		}},
		{"same key twice: the second group sees the first's write", []mstep{
			{groups: []mg{
				{"k", 1, 1, 1, 1, [5]int64{0, 2, 1, -1, 1}},
				{"k", 1, 1, 1, 1, [5]int64{0, 2, 0, -1, 2}},
			}, verdict: [5]int64{0, 2, 0, -1, 2}, after: map[string]*keyWant{"k": present(2 * s)}},
			// a third unit does not fit: the first group alone would pass,
			// the second is denied, nothing is written
			{at: 1 * s, groups: []mg{
				{"k", 1, 1, 1, 1, [5]int64{0, 2, 0, -1, 2}},
				{"k", 1, 1, 1, 1, [5]int64{1, 2, 0, 1, 2}},
			}, verdict: [5]int64{1, 2, 0, 1, 2}, after: map[string]*keyWant{"k": present(2 * s)}},
			// (the key expired after 2 s) a denied group in between passes
			// the state through unchanged, and nothing is written
			{at: 2*s + 1*ms, groups: []mg{
				{"k", 1, 1, 1, 5, [5]int64{1, 2, 2, -1, 0}},
				{"k", 1, 1, 1, 1, [5]int64{0, 2, 1, -1, 1}},
			}, verdict: [5]int64{1, 2, 2, -1, 0}, after: map[string]*keyWant{"k": absent()}},
			// a peek (q 0) on a fresh key writes now with a 0 ms TTL: the
			// next group on it sees that TAT, the same as a fresh key's
			{at: 10 * s, groups: []mg{
				{"z", 1, 1, 1, 0, [5]int64{0, 2, 2, -1, 0}},
				{"z", 1, 1, 1, 1, [5]int64{0, 2, 1, -1, 1}},
				{"z", 1, 1, 1, 0, [5]int64{0, 2, 1, -1, 1}},
			}, verdict: [5]int64{0, 2, 1, -1, 1}, after: map[string]*keyWant{"z": present(11 * s)}},
		}},
		{"CL.MPTHROTTLE: ms replies; retries that round alike tie", []mstep{
			{ms: true, groups: []mg{
				{"a", 0, 1, 250, 1, [5]int64{0, 1, 0, -1, 250}},
				{"b", 0, 1, 251, 1, [5]int64{0, 1, 0, -1, 251}},
			}, verdict: [5]int64{0, 1, 0, -1, 250}},
			{at: 1 * us, ms: true, groups: []mg{
				{"a", 0, 1, 250, 1, [5]int64{1, 1, 0, 250, 250}},
				{"b", 0, 1, 251, 1, [5]int64{1, 1, 0, 251, 251}},
			}, verdict: [5]int64{1, 1, 0, 251, 251}},
			// in seconds both retries round to 1: the first denied wins
			{at: 2 * us, groups: []mg{
				{"a", 0, 1, 1, 1, [5]int64{1, 1, 0, 1, 1}},
				{"b", 0, 1, 1, 1, [5]int64{1, 1, 0, 1, 1}},
			}, verdict: [5]int64{1, 1, 0, 1, 1}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runMulti(t, tt.steps) })
	}
}

// checkApplyAll checks ApplyAll's invariants on one random call: a result
// per group equal to Apply on the scratch view; the binding rule; allowed
// iff every group is; and, when allowed, the writes equal N CL.THROTTLE
// calls at the same instant.
func checkApplyAll(t *testing.T, u Unit, now int64, gs []Group, keyOf []int, state map[int]simKey) {
	t.Helper()
	orig := append([]Group(nil), gs...)
	out := make([]Result, len(gs))
	b := ApplyAll(u, now, gs, out)
	seq := map[int]simKey{}
	for k, v := range state {
		seq[k] = v
	}
	anyDenied := false
	for i := range gs {
		k := seq[keyOf[i]]
		want := orig[i].Limit.ApplyIn(u, now, k.tat, k.exists, orig[i].Q)
		if out[i] != want {
			t.Fatalf("group %d: %+v, sequential %+v", i, out[i], want)
		}
		if gs[i].TAT != k.tat && k.exists || gs[i].Exists != k.exists {
			t.Fatalf("group %d: decided against %d/%v, sequential view %d/%v", i, gs[i].TAT, gs[i].Exists, k.tat, k.exists)
		}
		if !want.Limited {
			k.store(now, want.NewTAT, want.TTLms)
			seq[keyOf[i]] = k
		}
		anyDenied = anyDenied || want.Limited
	}
	if out[b].Limited != anyDenied {
		t.Fatalf("binding %d limited=%v, any denied=%v", b, out[b].Limited, anyDenied)
	}
	for i := range out {
		if anyDenied {
			if out[i].Limited && (i < b && !laterRetry(out[b].RetryAfter, out[i].RetryAfter) || laterRetry(out[i].RetryAfter, out[b].RetryAfter)) {
				t.Fatalf("binding %d (retry %d) but group %d denied with retry %d", b, out[b].RetryAfter, i, out[i].RetryAfter)
			}
		} else if out[i].Remaining < out[b].Remaining || i < b && out[i].Remaining == out[b].Remaining {
			t.Fatalf("binding %d (remaining %d) but group %d has %d", b, out[b].Remaining, i, out[i].Remaining)
		}
	}
}

func randomMulti(rng *rand.Rand) (u Unit, now int64, gs []Group, keyOf []int, state map[int]simKey) {
	u = Unit(rng.IntN(2))
	now = base + rng.Int64N(1e12)
	n := rng.IntN(6) + 1
	nkeys := rng.IntN(n) + 1
	state = map[int]simKey{}
	for k := range nkeys {
		if rng.IntN(3) != 0 {
			state[k] = simKey{tat: uint64(now + rng.Int64N(20e9) - 5e9), exists: true}
		}
	}
	last := map[int]int{}
	for i := range n {
		k := rng.IntN(nkeys)
		l, err := NewLimit(rng.Int64N(10)-1, rng.Int64N(10)+1, rng.Int64N(10)+1)
		if u == UnitMillis {
			l, err = NewLimitMs(rng.Int64N(10)-1, rng.Int64N(10)+1, rng.Int64N(10000)+1)
		}
		if err != nil {
			panic(err)
		}
		g := Group{Limit: l, Q: rng.Int64N(4) - 1, Prev: -1}
		if p, ok := last[k]; ok {
			g.Prev = p
			g.TAT, g.Exists = 12345, rng.IntN(2) == 0 // ignored: must be overwritten
		} else {
			g.TAT, g.Exists = state[k].tat, state[k].exists
		}
		last[k] = i
		gs = append(gs, g)
		keyOf = append(keyOf, k)
	}
	return u, now, gs, keyOf, state
}

func TestApplyAllRandomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for i := range 20_000 {
		u, now, gs, keyOf, state := randomMulti(rng)
		checkApplyAll(t, u, now, gs, keyOf, state)
		if t.Failed() {
			t.Fatalf("iteration %d", i)
		}
	}
}

func FuzzApplyAll(f *testing.F) {
	for i := range 16 {
		f.Add(uint64(i), uint64(i*7+1))
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		u, now, gs, keyOf, state := randomMulti(rand.New(rand.NewPCG(a, b)))
		checkApplyAll(t, u, now, gs, keyOf, state)
	})
}

// TestFamilyZeroAllocs pins zero allocations for the ms path and for a
// three-group ApplyAll.
func TestFamilyZeroAllocs(t *testing.T) {
	var res [3]Result
	gs := [3]Group{}
	allocs := testing.AllocsPerRun(1000, func() {
		l, err := NewLimitMs(15, 30, 60000)
		if err != nil {
			panic(err)
		}
		sinkResult = l.ApplyMs(base, uint64(base)+4e9, true, 1)
		for i := range gs {
			gs[i] = Group{Limit: l, Q: 1, Prev: i - 1, TAT: uint64(base), Exists: true}
		}
		gs[0].Prev = -1
		sinkResult = res[ApplyAll(UnitSeconds, base, gs[:], res[:])]
	})
	if allocs != 0 {
		t.Errorf("NewLimitMs+ApplyMs+ApplyAll allocate %v times per call, want 0", allocs)
	}
}

func BenchmarkApplyMs(b *testing.B) {
	l, _ := NewLimitMs(15, 30, 60000)
	b.ReportAllocs()
	now, tat, ok := base, uint64(0), false
	for b.Loop() {
		r := l.ApplyMs(now, tat, ok, 1)
		if !r.Limited {
			tat, ok = r.NewTAT, true
		}
		now += 1e6
		sinkResult = r
	}
}

func BenchmarkApplyAll3(b *testing.B) {
	l1, _ := NewLimit(9, 10, 1)
	l2, _ := NewLimit(99, 1000, 60)
	l3, _ := NewLimit(999, 10000, 3600)
	var out [3]Result
	b.ReportAllocs()
	now := base
	for b.Loop() {
		gs := [3]Group{{Limit: l1, Q: 1, Prev: -1}, {Limit: l2, Q: 1, Prev: -1}, {Limit: l3, Q: 1, Prev: -1}}
		sinkResult = out[ApplyAll(UnitSeconds, now, gs[:], out[:])]
		now += 1e6
	}
}
