package store

import (
	"math/rand/v2"
	"testing"

	"github.com/celld/celld/window"
)

// TestWindowToSetsEveryField: WindowTo (CL.WINDOW's handler's path),
// given a Result holding junk, answers what Window answers on a twin
// store, on every path: inline counters live and expired (in and past
// the grace), counters in a block (a long key name), LOG, a new key, a
// peek, a denial and WRONGTYPE (the zero Result). Fails if a path leaves
// a field of *r as the caller had it.
func TestWindowToSetsEveryField(t *testing.T) {
	a, b := New(Options{}), New(Options{})
	rng := rand.New(rand.NewPCG(21, 19))
	keys := []string{"k1", "k2", "a-key-name-longer-than-sixteen-bytes"}
	modes := []window.Mode{window.Fixed, window.Sliding, window.Log}
	now := t0ms
	for i := range 20000 {
		now += int64(rng.IntN(400))
		if rng.IntN(50) == 0 {
			now += 3000 // past the window and the grace
		}
		key := []byte(keys[rng.IntN(len(keys))])
		m := modes[rng.IntN(len(modes))]
		if rng.IntN(20) != 0 { // mostly one mode per key; sometimes WRONGTYPE
			m = modes[int(key[1])%len(modes)]
		}
		l := winLimit(m, int64(1+rng.IntN(4)), int64(1+rng.IntN(1500)))
		q := int64(rng.IntN(4))
		want, werr := a.Window(key, l, q, now)
		got := window.Result{Limited: !want.Limited, Limit: -7, Remaining: -8, RetryAfter: -9, ResetAfter: -10}
		gerr := b.WindowTo(&got, key, l, q, now)
		if got != want || gerr != werr {
			t.Fatalf("call %d (%s %v q=%d): WindowTo %+v, %v; Window %+v, %v", i, key, l, q, got, gerr, want, werr)
		}
	}
}
