package gcra

import (
	"errors"
	"math"
	"testing"
	"time"
)

// base is the fixed wall clock every step table starts from (ns since the
// Unix epoch; the spec's own example value, a 19-digit TAT in 2026).
const base int64 = 1796007429047254250

const (
	us = time.Microsecond
	ms = time.Millisecond
	s  = time.Second
)

// simKey simulates one Redis key holding a TAT, applying the storage rules of
// spec section 5 with an injected clock.
type simKey struct {
	tat      uint64
	exists   bool
	expires  bool  // false: the key has no TTL
	expireAt int64 // Unix ms, as Redis keeps it; the key is gone once now's ms > expireAt
}

// observe drops the key if its TTL has passed at now (Redis's rule: a key
// lives while the current millisecond is <= its expiry).
func (k *simKey) observe(now int64) {
	if k.exists && k.expires && now/1e6 > k.expireAt {
		*k = simKey{}
	}
}

// store writes tat with the TTL rule of section 5 and reports whether the call
// must answer error 4 ("Error while setting key expire").
func (k *simKey) store(now int64, tat uint64, ttlMS int64) (expireErr bool) {
	switch {
	case ttlMS > 0:
		*k = simKey{tat: tat, exists: true, expires: true, expireAt: now/1e6 + ttlMS}
		if ttlMS > (math.MaxInt64-now)/1e6 { // beyond the int64 clock: effectively never
			k.expires = false
		}
	case ttlMS == 0: // expires at the end of this millisecond (RedisModule_SetExpire(key, 0))
		*k = simKey{tat: tat, exists: true, expires: true, expireAt: now / 1e6}
	case ttlMS == -1: // kept with no TTL
		*k = simKey{tat: tat, exists: true}
	default: // written without TTL, and the call replies error 4
		*k = simKey{tat: tat, exists: true}
		return true
	}
	return false
}

// keyWant is the key state expected after a step.
type keyWant struct {
	exists bool
	tat    uint64 // the stored value
}

// present expects the key to hold base+off; presentRaw to hold tat.
func present(off time.Duration) *keyWant { return presentRaw(uint64(base + int64(off))) }
func presentRaw(tat uint64) *keyWant     { return &keyWant{exists: true, tat: tat} }
func absent() *keyWant                   { return &keyWant{} }
func ttl(ms int64) *int64                { return &ms }

// step is one CL.THROTTLE call on the simulated key.
type step struct {
	at                   time.Duration // now, as an offset from base
	mb, count, period, q int64         // max_burst, count per period, period (s), quantity

	want      [5]int64 // reply: limited, limit, remaining, retry_after, reset_after
	ttl       *int64   // expected Result.TTLms of an allowed call; nil: not checked
	expireErr bool     // allowed, but the TTL is below -1 ms: error 4
	zeroRate  bool     // NewLimit must fail with ErrZeroRate
	after     *keyWant // key state after the call; nil: not checked
}

func reply(r Result) [5]int64 {
	var limited int64
	if r.Limited {
		limited = 1
	}
	return [5]int64{limited, r.Max, r.Remaining, r.RetryAfter, r.ResetAfter}
}

// runSteps plays steps against one simulated key, starting from start.
func runSteps(t *testing.T, start simKey, steps []step) {
	t.Helper()
	k := start
	for i, st := range steps {
		now := base + int64(st.at)
		k.observe(now)
		l, err := NewLimit(st.mb, st.count, st.period)
		if st.zeroRate {
			if !errors.Is(err, ErrZeroRate) {
				t.Errorf("step %d: NewLimit(%d, %d, %d) error = %v, want ErrZeroRate", i, st.mb, st.count, st.period, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("step %d: NewLimit(%d, %d, %d): %v", i, st.mb, st.count, st.period, err)
			continue
		}
		prev := k
		r := l.Apply(now, k.tat, k.exists, st.q)
		if got := reply(r); got != st.want {
			t.Errorf("step %d: CL.THROTTLE %d %d %d %d at base+%v (key %+v) = %v, want %v",
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
				t.Errorf("step %d: stored TAT = %d (base%+d ns), want %d (base%+d ns)",
					i, k.tat, int64(k.tat-uint64(base)), w.tat, int64(w.tat-uint64(base)))
			}
		}
	}
}

// TestThrottle15_30_60 is the spec's headline example: `CL.THROTTLE user123 15
// 30 60` twenty times back to back (1 µs apart). Calls 1–16 give
// [0,16,16−i,−1,2i], calls 17–20 [1,16,0,2,32]; PTTL is 2000 after the first
// call and 5999 after the third.
func TestThrottle15_30_60(t *testing.T) {
	var steps []step
	for i := int64(1); i <= 20; i++ {
		st := step{at: time.Duration(i-1) * us, mb: 15, count: 30, period: 60, q: 1}
		if i <= 16 {
			st.want = [5]int64{0, 16, 16 - i, -1, 2 * i}
			ms := (2*i*1e9 - (i-1)*1e3) / 1e6 // new TAT − now, in whole ms
			st.ttl = ttl(ms)
			st.after = present(time.Duration(i) * 2 * s)
		} else {
			st.want = [5]int64{1, 16, 0, 2, 32}
			st.after = present(32 * s) // denied: nothing written
		}
		steps = append(steps, st)
	}
	if *steps[0].ttl != 2000 || *steps[2].ttl != 5999 {
		t.Fatalf("table: PTTL after 1 and 3 calls = %d, %d; the spec says 2000, 5999", *steps[0].ttl, *steps[2].ttl)
	}
	runSteps(t, simKey{}, steps)
}

func TestThrottleWorkedExamples(t *testing.T) {
	tests := []struct {
		name  string
		start simKey
		steps []step
	}{
		{"0 1 2 twice, then after 2 s", simKey{}, []step{
			{at: 0, mb: 0, count: 1, period: 2, q: 1, want: [5]int64{0, 1, 0, -1, 2}, ttl: ttl(2000), after: present(2 * s)},
			{at: 1 * us, mb: 0, count: 1, period: 2, q: 1, want: [5]int64{1, 1, 0, 2, 2}, after: present(2 * s)},
			{at: 2 * s, mb: 0, count: 1, period: 2, q: 1, want: [5]int64{0, 1, 0, -1, 2}, ttl: ttl(2000), after: present(4 * s)},
			{at: 2*s + 1*us, mb: 0, count: 1, period: 2, q: 1, want: [5]int64{1, 1, 0, 2, 2}},
			// 1 µs before the stored TAT: the key is still alive, the TAT
			// is ahead of now, the call is denied.
			{at: 4*s - 1*ms - 1*us, mb: 0, count: 1, period: 2, q: 1, want: [5]int64{1, 1, 0, 1, 1}},
			{at: 4 * s, mb: 0, count: 1, period: 2, q: 1, want: [5]int64{0, 1, 0, -1, 2}, ttl: ttl(2000), after: present(6 * s)},
		}},
		{"quantity equal to the limit: 4 5 1 5", simKey{}, []step{
			{mb: 4, count: 5, period: 1, q: 5, want: [5]int64{0, 5, 0, -1, 1}, ttl: ttl(1000), after: present(1 * s)},
			{at: 1 * us, mb: 4, count: 5, period: 1, q: 1, want: [5]int64{1, 5, 0, 1, 1}},
		}},
		{"quantity above the limit on a fresh key", simKey{}, []step{
			{mb: 4, count: 5, period: 1, q: 6, want: [5]int64{1, 5, 5, -1, 0}, after: absent()},
			{at: 1 * us, mb: 15, count: 30, period: 60, q: 17, want: [5]int64{1, 16, 16, -1, 0}, after: absent()},
			{at: 2 * us, mb: 15, count: 30, period: 60, q: 1_000_000_000, want: [5]int64{1, 16, 16, -1, 0}, after: absent()},
			// the key was never written: the next ordinary call sees a fresh key
			{at: 3 * us, mb: 15, count: 30, period: 60, q: 1, want: [5]int64{0, 16, 15, -1, 2}, ttl: ttl(2000), after: present(3*us + 2*s)},
		}},
		{"quantity above the limit on an existing key", simKey{}, []step{
			{mb: 15, count: 30, period: 60, q: 1, want: [5]int64{0, 16, 15, -1, 2}, after: present(2 * s)},
			{at: 1 * us, mb: 15, count: 30, period: 60, q: 17, want: [5]int64{1, 16, 15, -1, 2}, after: present(2 * s)},
			{at: 2 * us, mb: 15, count: 30, period: 60, q: 1, want: [5]int64{0, 16, 14, -1, 4}, after: present(4 * s)},
		}},
		{"quantity 0 (peek) on a fresh key: written with TTL 0, so it vanishes after this ms", simKey{}, []step{
			{mb: 15, count: 30, period: 60, q: 0, want: [5]int64{0, 16, 16, -1, 0}, ttl: ttl(0), after: present(0)},
			{at: 1 * us, mb: 15, count: 30, period: 60, q: 0, want: [5]int64{0, 16, 16, -1, 0}, ttl: ttl(0), after: present(1 * us)},
			{at: 2 * us, mb: 15, count: 30, period: 60, q: 1, want: [5]int64{0, 16, 15, -1, 2}, ttl: ttl(2000), after: present(2*us + 2*s)},
		}},
		{"quantity 0 (peek) on an existing key rewrites the same TAT", simKey{}, []step{
			{at: 0, mb: 15, count: 30, period: 60, q: 1, want: [5]int64{0, 16, 15, -1, 2}},
			{at: 1 * us, mb: 15, count: 30, period: 60, q: 1, want: [5]int64{0, 16, 14, -1, 4}, ttl: ttl(3999), after: present(4 * s)},
			{at: 2 * us, mb: 15, count: 30, period: 60, q: 0, want: [5]int64{0, 16, 14, -1, 4}, ttl: ttl(3999), after: present(4 * s)},
			{at: 3 * us, mb: 15, count: 30, period: 60, q: 0, want: [5]int64{0, 16, 14, -1, 4}, ttl: ttl(3999), after: present(4 * s)},
			{at: 1 * s, mb: 15, count: 30, period: 60, q: 0, want: [5]int64{0, 16, 14, -1, 3}, ttl: ttl(3000), after: present(4 * s)},
		}},
		{"negative quantity refunds: 5 1 10 three times, then -1", simKey{}, []step{
			{at: 0, mb: 5, count: 1, period: 10, q: 1, want: [5]int64{0, 6, 5, -1, 10}, ttl: ttl(10000)},
			{at: 1 * us, mb: 5, count: 1, period: 10, q: 1, want: [5]int64{0, 6, 4, -1, 20}, ttl: ttl(19999)},
			{at: 2 * us, mb: 5, count: 1, period: 10, q: 1, want: [5]int64{0, 6, 3, -1, 30}, ttl: ttl(29999), after: present(30 * s)},
			{at: 3 * us, mb: 5, count: 1, period: 10, q: -1, want: [5]int64{0, 6, 4, -1, 20}, ttl: ttl(19999), after: present(20 * s)},
		}},
		{"max_burst -1: limit 0, always denied", simKey{}, []step{
			{at: 0, mb: -1, count: 30, period: 60, q: 1, want: [5]int64{1, 0, 0, -1, 0}, after: absent()},
			{at: 1 * us, mb: -1, count: 30, period: 60, q: 1, want: [5]int64{1, 0, 0, -1, 0}, after: absent()},
			{at: 1 * s, mb: -1, count: 1, period: 1, q: 1, want: [5]int64{1, 0, 0, -1, 0}, after: absent()},
		}},
		{"count xor period negative: EI < 0", simKey{}, []step{
			{at: 0, mb: 15, count: -30, period: 60, q: 1, want: [5]int64{1, 16, 0, -1, 0}, after: absent()},
			{at: 1 * us, mb: 15, count: 30, period: -60, q: 1, want: [5]int64{1, 16, 0, -1, 0}, after: absent()},
			{at: 2 * us, mb: 15, count: -30, period: 60, q: 1, want: [5]int64{1, 16, 0, -1, 0}, after: absent()},
		}},
		{"count and period both negative behave like both positive", simKey{}, []step{
			{at: 0, mb: 15, count: -30, period: -60, q: 1, want: [5]int64{0, 16, 15, -1, 2}, ttl: ttl(2000), after: present(2 * s)},
			{at: 1 * us, mb: 15, count: 30, period: 60, q: 1, want: [5]int64{0, 16, 14, -1, 4}, ttl: ttl(3999), after: present(4 * s)},
			{at: 2 * us, mb: 15, count: -30, period: -60, q: 14, want: [5]int64{0, 16, 0, -1, 32}, ttl: ttl(31999), after: present(32 * s)},
			{at: 3 * us, mb: 15, count: -30, period: -60, q: 1, want: [5]int64{1, 16, 0, 2, 32}, after: present(32 * s)},
		}},
		{"parameters change between calls", simKey{}, []step{
			{at: 0, mb: 15, count: 30, period: 60, q: 1, want: [5]int64{0, 16, 15, -1, 2}},
			{at: 1 * us, mb: 15, count: 30, period: 60, q: 1, want: [5]int64{0, 16, 14, -1, 4}},
			{at: 2 * us, mb: 15, count: 30, period: 60, q: 1, want: [5]int64{0, 16, 13, -1, 6}, ttl: ttl(5999), after: present(6 * s)},
			// 1 per s, burst 1 (DVT 2 s) against a TAT 6 s ahead: denied,
			// retry when the TAT is within 2 s after the increment.
			{at: 3 * us, mb: 1, count: 1, period: 1, q: 1, want: [5]int64{1, 2, 0, 5, 6}, after: present(6 * s)},
			// a roomier limit on the same TAT: 101 − 7 = 94 left
			{at: 4 * us, mb: 100, count: 1, period: 1, q: 1, want: [5]int64{0, 101, 94, -1, 7}, ttl: ttl(6999), after: present(7 * s)},
			// zero rate: an error, the key is untouched
			{at: 5 * us, mb: 100, count: 0, period: 1, q: 1, zeroRate: true},
			{at: 6 * us, mb: 15, count: 30, period: 60, q: 1, want: [5]int64{0, 16, 11, -1, 9}, after: present(9 * s)},
		}},
		{"denied less than 1 ms before it would pass", simKey{}, []step{
			{at: 0, mb: 0, count: 1, period: 2, q: 1, want: [5]int64{0, 1, 0, -1, 2}, after: present(2 * s)},
			{at: 2*s - 999*us, mb: 0, count: 1, period: 2, q: 1, want: [5]int64{1, 1, 0, 0, 0}, after: present(2 * s)},
			{at: 2*s - 1, mb: 0, count: 1, period: 2, q: 1, want: [5]int64{1, 1, 0, 0, 0}, after: present(2 * s)},
			// exactly 1 ms early: both round up to 1 s
			{at: 2*s - 1*ms, mb: 0, count: 1, period: 2, q: 1, want: [5]int64{1, 1, 0, 1, 1}, after: present(2 * s)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runSteps(t, tt.start, tt.steps) })
	}
}

// TestTTLRules covers the storage rules of section 5 beyond ms > 0: a TTL of
// exactly -1 ms keeps the key with no TTL, below -1 ms writes the value
// without TTL and answers error 4, and a stored TAT in the past counts as now
// for the decision but as itself for a denied call's reset_after.
func TestTTLRules(t *testing.T) {
	// 9 1000 1: EI 1 ms, DVT 10 ms.
	runSteps(t, simKey{}, []step{
		// q −1 on a fresh key: new TAT = now − 1 ms, TTL −1 ms: kept, no TTL.
		{at: 0, mb: 9, count: 1000, period: 1, q: -1, want: [5]int64{0, 10, 11, -1, 0}, ttl: ttl(-1), after: present(-1 * ms)},
		// an hour later the key is still there; its TAT is in the past and
		// counts as now: q −2 gives TTL −2 ms: stored without TTL, error 4.
		{at: 1 * time.Hour, mb: 9, count: 1000, period: 1, q: -2, want: [5]int64{0, 10, 12, -1, 0}, ttl: ttl(-2), expireErr: true, after: present(time.Hour - 2*ms)},
		// a denied call on that stale key reports the old TAT: reset_after
		// is negative, remaining is above the limit (next = DVT − ttl > DVT).
		{at: time.Hour + 5*s, mb: 9, count: 1000, period: 1, q: 11, want: [5]int64{1, 10, 5012, -1, -5}, after: present(time.Hour - 2*ms)},
		// q 0 on the stale key rewrites it at now with TTL 0: gone after
		// this millisecond.
		{at: time.Hour + 6*s, mb: 9, count: 1000, period: 1, q: 0, want: [5]int64{0, 10, 10, -1, 0}, ttl: ttl(0), after: present(time.Hour + 6*s)},
		{at: time.Hour + 6*s + 1*ms, mb: 9, count: 1000, period: 1, q: 0, want: [5]int64{0, 10, 10, -1, 0}, ttl: ttl(0)},
		// 9 ms ahead: TTL 9 ms, and reset_after rounds the 9 ms up to 1 s.
		{at: 2 * time.Hour, mb: 9, count: 1_000_000, period: 1000, q: 9, want: [5]int64{0, 10, 1, -1, 1}, ttl: ttl(9), after: present(2*time.Hour + 9*ms)},
		{at: 2*time.Hour + 9*ms, mb: 9, count: 1000, period: 1, q: 1, want: [5]int64{0, 10, 9, -1, 1}, ttl: ttl(1), after: present(2*time.Hour + 10*ms)},
	})
	// Sub-millisecond TTL: 1111 per 1 s is EI 900090 ns; TTLms truncates
	// toward zero on both sides of now.
	l, err := NewLimit(5, 1111, 1)
	if err != nil {
		t.Fatal(err)
	}
	if l.EI != 900090 {
		t.Fatalf("EI(1111 per 1 s) = %d, want 900090", l.EI)
	}
	r := l.Apply(base, 0, false, 1)
	if r.Limited || r.TTLms != 0 || r.ResetAfter != 0 || r.NewTAT != uint64(base+900090) {
		t.Errorf("sub-ms TTL: got %+v, want allowed, TTLms 0, reset 0, NewTAT base+900090", r)
	}
	r = l.Apply(base, 0, false, -1)
	if r.Limited || r.TTLms != 0 {
		t.Errorf("TTL of −0.9 ms: got %+v, want allowed with TTLms 0 (truncation toward zero)", r)
	}
}

// TestWideTAT drives the 128-bit paths: a stored TAT at the top of the
// unsigned range, and a new TAT that wraps below zero.
func TestWideTAT(t *testing.T) {
	runSteps(t, simKey{tat: math.MaxUint64, exists: true}, []step{
		// new_tat − DVT − now = 2^64 − 1 + 2e9 − 32e9 − base
		// = 16650736614662297365 ns → 16650736615 s; ttl = 2^64 − 1 − base
		// = 16650736644662297365 ns → 16650736645 s.
		{at: 0, mb: 15, count: 30, period: 60, q: 1, want: [5]int64{1, 16, 0, 16650736615, 16650736645}, after: presentRaw(math.MaxUint64)},
		// EI × q wraps: 2e9 × −8325368322 ≡ +1796007429709551616 (mod
		// 2^64), more than the DVT: denied and never possible (retry −1).
		{at: 1 * us, mb: 15, count: 30, period: 60, q: -8325368322, want: [5]int64{1, 16, 0, -1, 16650736645}, after: presentRaw(math.MaxUint64)},
		// A bucket wide enough (1 per s, max_burst 9e9: DVT 9.000000001e18
		// ns) lets a refund of 8e18 ns bring the TAT back within reach; the
		// new TAT is above MaxInt64 and is stored as an unsigned value.
		{at: 0, mb: 9_000_000_000, count: 1, period: 1, q: -8_000_000_000, want: [5]int64{0, 9_000_000_001, 349_263_356, -1, 8_650_736_645},
			ttl: ttl(8_650_736_644_662), after: presentRaw(10_446_744_073_709_551_615)},
	})
	// a fresh key before the epoch refunded far below zero: NewTAT wraps.
	l, _ := NewLimit(0, 1, 1)
	r := l.Apply(-5, 0, false, -1)
	if r.Limited || r.NewTAT != uint64(1<<64-1_000_000_005) || r.TTLms != -1000 {
		t.Errorf("wrap below zero: got %+v, want allowed, NewTAT 2^64−1000000005, TTLms −1000", r)
	}
	r = l.Apply(math.MinInt64, 0, false, -1)
	if want := uint64(1<<63 - 1_000_000_000); r.Limited || r.NewTAT != want {
		t.Errorf("now=MinInt64, q=−1: got %+v, want allowed, NewTAT %d", r, want)
	}
}

// TestQuirk666667: 666667 per 1 s has EI 1499 ns, which is 1 whole µs, so
// remaining is computed as (DVT − ttl) in µs over 1 µs and exceeds what the
// burst suggests. With max_burst 10 (limit 11, DVT 16489 ns) a fresh key's
// first call leaves trunc(14990 ns / 1000) / 1 = 14, and a peek 16.
func TestQuirk666667(t *testing.T) {
	runSteps(t, simKey{}, []step{
		// (each call 1 ms after the last: a 0 ms TTL keeps the key to the
		// end of its millisecond, and these are fresh-key figures)
		{at: 0, mb: 10, count: 666667, period: 1, q: 1, want: [5]int64{0, 11, 14, -1, 0}, ttl: ttl(0), after: present(1499)},
		{at: 1 * ms, mb: 10, count: 666667, period: 1, q: 0, want: [5]int64{0, 11, 16, -1, 0}, ttl: ttl(0), after: present(1 * ms)},
		{at: 2 * ms, mb: 10, count: 666667, period: 1, q: 11, want: [5]int64{0, 11, 0, -1, 0}},
		{at: 3 * ms, mb: 10, count: 666667, period: 1, q: 12, want: [5]int64{1, 11, 16, -1, 0}},
	})
}

// TestZeroTTLDecidesItsMillisecond: a TAT written with a 0 ms TTL is kept
// to the end of the current millisecond (RedisModule_SetExpire(key, 0)
// expires at now, and Redis keeps a key while now <= its expiry), so a
// second call in that millisecond is decided against it: at 10000 per
// second with no burst, redis-cell denies it (checked against the module,
// compat_test TestRedisCellParityExamples); a millisecond later the key is
// gone.
func TestZeroTTLDecidesItsMillisecond(t *testing.T) {
	runSteps(t, simKey{}, []step{
		{at: 0, mb: 0, count: 10000, period: 1, q: 1, want: [5]int64{0, 1, 0, -1, 0}, ttl: ttl(0), after: present(100 * us)},
		{at: 10 * us, mb: 0, count: 10000, period: 1, q: 1, want: [5]int64{1, 1, 0, 0, 0}, after: present(100 * us)},
		{at: 1*ms + 10*us, mb: 0, count: 10000, period: 1, q: 1, want: [5]int64{0, 1, 0, -1, 0}, ttl: ttl(0), after: present(1*ms + 110*us)},
	})
	l, err := NewLimit(10, 666667, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Limit{EI: 1499, DVT: 16489, Max: 11}); l != want {
		t.Errorf("NewLimit(10, 666667, 1) = %+v, want %+v", l, want)
	}
	// An EI under 1 µs divides by float64(0): +Inf saturates, NaN is 0.
	l, _ = NewLimit(10, 2_000_000, 1) // EI 500 ns
	if r := l.Apply(base, 0, false, 1); r.Remaining != math.MaxInt64 {
		t.Errorf("EI 500 ns, fresh key: remaining = %d, want MaxInt64", r.Remaining)
	}
	l, _ = NewLimit(0, 2_000_000, 1) // EI 500 ns, DVT 500 ns: next = 0 µs → 0/0 = NaN
	if r := l.Apply(base, 0, false, 1); r.Remaining != 0 || r.Limited {
		t.Errorf("EI 500 ns, 0/0: got %+v, want allowed with remaining 0", r)
	}
	// EI −500 ns, limit −2, DVT 1000 ns; q 3: increment −1500, allowed,
	// ttl −1500, next 2500 ns > 500: 2 µs / float64(0) = +Inf.
	l, _ = NewLimit(-3, -2_000_000, 1)
	if r := l.Apply(base, 0, false, 3); r.Limited || r.Remaining != math.MaxInt64 {
		t.Errorf("EI −500 ns, limit −2, q 3: got %+v, want allowed with remaining MaxInt64", r)
	}
}

func TestEmissionInterval(t *testing.T) {
	tests := []struct {
		count, period, want int64
	}{
		{30, 60, 2_000_000_000},
		{3, 1, 333_333_333},
		{7, 60, 8_571_428_571},
		{666667, 1, 1499},
		{2_000_000_000, 1, 0},
		{1_000_000_000, 1, 1},
		{1_000_000_001, 1, 0},
		{1, 1, 1_000_000_000},
		{0, 60, 0},
		{30, 0, 0},
		{0, 0, 0},
		{-30, 60, -2_000_000_000},
		{30, -60, -2_000_000_000},
		{-30, -60, 2_000_000_000},
		{-7, 60, -8_571_428_571},
		// the fast path's edge: period × 1e9 just fits int64
		{1, 9_223_372_036, 9_223_372_036_000_000_000},
		{1, -9_223_372_036, -9_223_372_036_000_000_000},
		// one rounding of the exact product: 9223372035e9 is not a float64;
		// the exact quotient would be 4611686017500000000
		{2, 9_223_372_035, 4_611_686_017_500_000_256},
		// beyond int64/1e9: the product needs more than 64 bits
		{1, 9_223_372_037, math.MaxInt64},
		{2, 9_223_372_037, 4_611_686_018_499_999_744},
		{1000, 9_223_372_037, 9_223_372_037_000_000},
		{3, -9_223_372_037, -3_074_457_345_666_666_496},
		{7, 1_000_000_000_000, math.MaxInt64},
		{1, math.MaxInt64, math.MaxInt64},
		{-1, math.MaxInt64, math.MinInt64},
		{1, math.MinInt64, math.MinInt64},
		{-1, math.MinInt64, math.MaxInt64},
		{1000, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64, 1_000_000_000},
		{math.MinInt64, math.MinInt64, 1_000_000_000},
		{math.MinInt64, math.MaxInt64, -1_000_000_000},
		{1_000_000_007, math.MaxInt64, 9_223_371_972_291_172_352},
		{math.MaxInt64, 1, 0},
		{math.MinInt64, 1, 0},
	}
	for i, tt := range tests {
		if got := EmissionInterval(tt.count, tt.period); got != tt.want {
			t.Errorf("step %d: EmissionInterval(%d, %d) = %d, want %d", i, tt.count, tt.period, got, tt.want)
		}
	}
}

func TestNewLimit(t *testing.T) {
	tests := []struct {
		mb, count, period int64
		want              Limit
		err               error
	}{
		{15, 30, 60, Limit{EI: 2e9, DVT: 32e9, Max: 16}, nil},
		{0, 1, 2, Limit{EI: 2e9, DVT: 2e9, Max: 1}, nil},
		{-1, 30, 60, Limit{EI: 2e9, DVT: 0, Max: 0}, nil},
		{-2, 30, 60, Limit{EI: 2e9, DVT: -2e9, Max: -1}, nil},
		{15, -30, 60, Limit{EI: -2e9, DVT: -32e9, Max: 16}, nil},
		// wrapping: max_burst + 1 and EI × limit
		{math.MaxInt64, 30, 60, Limit{EI: 2e9, DVT: 0, Max: math.MinInt64}, nil},
		{5_000_000_000, 30, 60, Limit{EI: 2e9, DVT: wrapMul(2e9, 5_000_000_001), Max: 5_000_000_001}, nil},
		{0, 1, math.MaxInt64, Limit{EI: math.MaxInt64, DVT: math.MaxInt64, Max: 1}, nil},
		{1, 1, math.MaxInt64, Limit{EI: math.MaxInt64, DVT: -2, Max: 2}, nil},
		{15, 0, 60, Limit{}, ErrZeroRate},
		{15, 30, 0, Limit{}, ErrZeroRate},
		{15, 0, 0, Limit{}, ErrZeroRate},
		{15, 2_000_000_000, 1, Limit{}, ErrZeroRate},
		{15, math.MaxInt64, 1, Limit{}, ErrZeroRate},
		{15, math.MinInt64, 60, Limit{}, ErrZeroRate},
		{-1, -2_000_000_000, 1, Limit{}, ErrZeroRate},
	}
	for i, tt := range tests {
		got, err := NewLimit(tt.mb, tt.count, tt.period)
		if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
			t.Errorf("step %d: NewLimit(%d, %d, %d) error = %v, want %v", i, tt.mb, tt.count, tt.period, err, tt.err)
		}
		if err == nil && got != tt.want {
			t.Errorf("step %d: NewLimit(%d, %d, %d) = %+v, want %+v", i, tt.mb, tt.count, tt.period, got, tt.want)
		}
	}
	if ErrZeroRate.Error() != "gcra: zero rates are not supported" {
		t.Errorf("ErrZeroRate = %q", ErrZeroRate)
	}
}

// wrapMul is int64 multiplication with two's complement wrapping, spelled out
// so the table above reads as the spec does.
func wrapMul(a, b int64) int64 { return int64(uint64(a) * uint64(b)) }

func TestSeconds(t *testing.T) {
	tests := []struct {
		ns   int64
		want int64
	}{
		{1_999_900_000, 2},   // 1.9999 s
		{2_000_500_000, 2},   // 2.0005 s: fraction under 1 ms
		{900_000, 0},         // 0.0009 s
		{200_000_000, 1},     // 0.2 s
		{-1_000_000, 0},      // −0.001 s
		{-1_000_000_000, -1}, // −1 s
		{0, 0},
		{1, 0},
		{999_999, 0},
		{1_000_000, 1},
		{999_999_999, 1},
		{1_000_000_000, 1},
		{1_000_999_999, 1},
		{1_001_000_000, 2},
		{-1, 0},
		{-999_999_999, 0},
		{-1_500_000_000, -1},
		{-1_999_999_999, -1},
		{-2_000_000_000, -2},
		{2_000_000_000, 2},
		{32_000_000_000 - 16_000, 32},
		{math.MaxInt64, 9_223_372_037},
		{math.MinInt64, -9_223_372_036},
		// float64(s) + 0.999999999 rounds up to s+1 once s ≥ 2^24; the
		// extra whole millisecond adds one more: a faithful quirk.
		{16_777_215_999_999_999, 16_777_216},
		{16_777_216_999_999_999, 16_777_218},
		{9_223_372_035_999_999_999, 9_223_372_037},
		{-16_777_216_999_999_999, -16_777_217},
	}
	for i, tt := range tests {
		if got := Seconds(tt.ns); got != tt.want {
			t.Errorf("step %d: Seconds(%d) = %d, want %d", i, tt.ns, got, tt.want)
		}
	}
}

// TestQuantityWraps: increment = EI × quantity wraps like int64, so a huge
// quantity can turn into a refund. 2e9 × MaxInt64 ≡ −2e9 (mod 2^64): the call
// is allowed with a TTL of −2000 ms, stored without TTL and answered with
// error 4; the stale TAT then counts as now.
func TestQuantityWraps(t *testing.T) {
	runSteps(t, simKey{}, []step{
		{at: 0, mb: 15, count: 30, period: 60, q: math.MaxInt64, want: [5]int64{0, 16, 17, -1, -2}, ttl: ttl(-2000), expireErr: true, after: present(-2 * s)},
		{at: 1 * us, mb: 15, count: 30, period: 60, q: 1, want: [5]int64{0, 16, 15, -1, 2}, ttl: ttl(2000), after: present(1*us + 2*s)},
		{at: 2 * us, mb: 15, count: 30, period: 60, q: math.MinInt64, want: [5]int64{0, 16, 15, -1, 2}, ttl: ttl(1999), after: present(1*us + 2*s)},
	})
}
