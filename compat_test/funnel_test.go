package compat_test

import (
	"fmt"
	"math/rand"
	"testing"
	"time"
)

// A funnel (leaky bucket as a meter) of capacity C that leaks R units per
// second and takes q units per request is CL.THROTTLE key C-1 R 1 q:
// max_burst + 1 = C, emission interval EI = 1 s / R, and the GCRA's TAT is
// the funnel's water level expressed as time: level = (TAT − now) / EI.
//
// funnel below is an independent reference written in the funnel's own
// terms, in exact integer arithmetic: water is kept in units × 1e9 and leaks
// by R per ns. A request is admitted iff level + q ≤ C. Its "remaining" is
// the whole number of units still free, floor(C − level).
//
// Where the two can disagree (so the test picks parameters that avoid it):
//   - EI is truncated to whole ns: when R does not divide 1e9, GCRA's EI is
//     slightly shorter than 1/R s, so its bucket drains a little faster than
//     the funnel and it can admit a request the funnel refuses at the edge.
//   - The key's TTL is truncated to whole ms (spec section 5): the key can
//     expire up to 1 ms before its TAT is reached, so GCRA forgets up to 1 ms
//     of water that the funnel still holds. With arrivals and EI on whole
//     milliseconds the TAT and the expiry coincide exactly.
//   - remaining divides whole µs as float64; with EI a whole number of µs
//     and modest numbers it is exact.
//
// So R divides 1000 (EI a whole number of ms) and arrivals fall on whole ms.
type funnel struct {
	capacity int64 // C, units
	rate     int64 // R, units per second (= per 1e9 ns)
	water    int64 // units × 1e9
	last     int64 // ns of the last update
}

func (f *funnel) leak(now int64) {
	f.water -= f.rate * (now - f.last)
	if f.water < 0 {
		f.water = 0
	}
	f.last = now
}

// request returns whether q units fit at time now, and the free whole units
// afterwards.
func (f *funnel) request(now, q int64) (bool, int64) {
	f.leak(now)
	ok := f.water+q*1e9 <= f.capacity*1e9
	if ok {
		f.water += q * 1e9
	}
	return ok, (f.capacity*1e9 - f.water) / 1e9
}

func TestFunnelEquivalence(t *testing.T) {
	for _, p := range []struct{ capacity, rate int64 }{
		{5, 4},     // EI 250 ms
		{10, 1000}, // EI 1 ms
		{3, 1},     // EI 1 s
		{20, 8},    // EI 125 ms
		{1, 2},     // EI 500 ms, room for one unit
	} {
		t.Run(fmt.Sprintf("C%d_R%d", p.capacity, p.rate), func(t *testing.T) {
			ts := startServer(t, withFakeClock(t0))
			send := goRedisDo(newGoRedis(t, ts))
			ref := &funnel{capacity: p.capacity, rate: p.rate, last: t0}
			eiMs := 1000 / p.rate
			rng := rand.New(rand.NewSource(int64(p.capacity*1000 + p.rate)))
			allowed, denied := 0, 0
			for i := 0; i < 1500; i++ {
				// Gaps of 0 to ~2 EI, in whole ms, so both full and empty
				// funnels occur; quantities 0..C+1, mostly 1.
				ts.Advance(time.Duration(rng.Int63n(2*eiMs+1)) * time.Millisecond)
				q := int64(1)
				if rng.Intn(3) == 0 {
					q = rng.Int63n(p.capacity + 2)
				}
				okRef, freeRef := ref.request(ts.Now(), q)
				got, err := send("CL.THROTTLE", "funnel", p.capacity-1, p.rate, 1, q)
				if err != nil {
					t.Fatal(err)
				}
				r, _ := got.([]any)
				if len(r) != 5 {
					t.Fatalf("request %d: reply %s", i, show(got))
				}
				ok := r[0] == int64(0)
				if ok != okRef || r[2] != freeRef || r[1] != p.capacity {
					t.Fatalf("request %d (q=%d, t=%d ms): celld %s; funnel allowed=%v free=%d",
						i, q, (ts.Now()-t0)/1e6, show(got), okRef, freeRef)
				}
				if ok {
					allowed++
				} else {
					denied++
				}
			}
			if allowed < 100 || denied < 100 {
				t.Errorf("schedule too one-sided: %d allowed, %d denied", allowed, denied)
			}
		})
	}
}
