package store

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/celld/celld/window"
)

// windowGeneral is Store.Window without its direct LOG path: for a LOG
// call the lookup and windowLocked, the path every LOG call took before
// windowLogLocked (Window's inline path takes no LOG call); any other
// call goes to Window.
func windowGeneral(s *Store, key []byte, l window.Limit, q, nowMs int64) (window.Result, error) {
	if l.Mode != window.Log {
		return s.Window(key, l, q, nowMs)
	}
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	slot, pos, found := sh.findLocked(key, h)
	var r window.Result
	err := s.windowLocked(&r, sh, key, h, slot, pos, found, l, q, nowMs)
	return r, err
}

// TestWindowLogDirectAgainstGeneral: random sequences of calls on a few
// keys, through Store.Window (which takes windowLogLocked for a live LOG
// key with a block) and through windowGeneral on a second store, give the
// same answers and errors call by call, and leave the same keys, states,
// expiries and key charges: LOG calls of quantities 0 to past the limit,
// limits of 1 to 1,000 (logs that outgrow their block, in place or moved),
// clock steps back, gaps past the window and the grace, deletions, FIXED
// and SLIDING calls (WRONGTYPE on a LOG key, and LOG calls on their keys,
// a long name keeping them in a block) and CL.THROTTLE keys. Checked to fail when the direct path sets another expiry
// (exp + 1) or skips the write of a moved state.
func TestWindowLogDirectAgainstGeneral(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 19))
			a, b := New(Options{TrackDirty: true}), New(Options{TrackDirty: true})
			keys := [][]byte{[]byte("a"), []byte("b"), []byte("c"),
				[]byte("a-window-key-with-a-name-too-long-to-be-inline:1"), []byte("t")}
			limits := []int64{1, 2, 5, 100, 1000}
			now := t0ms
			direct := 0
			for i := range 3000 {
				k := keys[r.IntN(len(keys))]
				switch r.IntN(20) {
				case 0:
					now += 1 + r.Int64N(3000) // past the window and maybe the grace
				case 1:
					now -= r.Int64N(50) // a clock step back
				default:
					now += r.Int64N(4)
				}
				// Each key keeps its limit and window (so that logs grow
				// past their blocks), but now and then a call brings others.
				ki := int(k[0]) + len(k) + int(seed)
				l := winLimit(window.Log, limits[ki%len(limits)], []int64{100, 1000, 10_000}[ki%3])
				if r.IntN(10) == 0 {
					l = winLimit(window.Log, limits[r.IntN(len(limits))], []int64{10, 100, 1000}[r.IntN(3)])
				}
				q := []int64{0, 1, 1, 1, 1, 2, 3, 7, 1001}[r.IntN(9)]
				switch x := r.IntN(40); {
				case x == 0:
					a.Delete(k, now)
					b.Delete(k, now)
					continue
				case x <= 2:
					l.Mode = []window.Mode{window.Fixed, window.Sliding}[r.IntN(2)]
				case x == 3 && string(k) == "t":
					lim := mustLimit(t, 10, 1, 1)
					ra, ea := a.Throttle(k, lim, 1, now*1e6)
					rb, eb := b.Throttle(k, lim, 1, now*1e6)
					if ra != rb || (ea == nil) != (eb == nil) {
						t.Fatalf("call %d: Throttle %+v %v vs %+v %v", i, ra, ea, rb, eb)
					}
					continue
				}
				h := a.hashKey(k)
				sh := a.shardFor(h)
				sh.mu.Lock()
				if slot, _, ok := sh.findLocked(k, h); ok && l.Mode == window.Log {
					if e := &sh.slab[slot]; e.kind() == KindWindow && e.tat&0xFF >= minWinLog && e.alive(now) {
						direct++
					}
				}
				sh.mu.Unlock()
				ra, ea := a.Window(k, l, q, now)
				rb, eb := windowGeneral(b, k, l, q, now)
				if ra != rb || ea != eb {
					t.Fatalf("call %d (%s %v q=%d now=%d): direct %+v %v, general %+v %v", i, k, l, q, now, ra, ea, rb, eb)
				}
				if i%100 == 0 {
					compareStores(t, a, b, now, i)
				}
			}
			compareStores(t, a, b, now, -1)
			if direct < 500 {
				t.Errorf("only %d calls could take the direct path", direct)
			}
		})
	}
}

// compareStores fails unless a and b hold the same keys, values and
// expiries and charge the same memory for their keys.
func compareStores(t *testing.T, a, b *Store, now int64, call int) {
	t.Helper()
	da, db := dumpChanges(a, now), dumpChanges(b, now)
	if len(da) != len(db) {
		t.Fatalf("after call %d: %d keys vs %d", call, len(da), len(db))
	}
	for k, v := range da {
		if db[k] != v {
			t.Fatalf("after call %d: key %q: direct %s, general %s", call, k, v, db[k])
		}
	}
	if ua, ub := keysMem(a), keysMem(b); ua != ub {
		t.Fatalf("after call %d: keys charged %d vs %d bytes", call, ua, ub)
	}
}

// keysMem is the sum of s's shards' key charges (shard.mem) without their
// blocks of deleted keys' names, whose number depends on how the store's
// hash seed spreads the keys over shards (UsedMemory also adds what other
// parts of the process hold).
func keysMem(s *Store) int64 {
	n := int64(0)
	for i := range s.shards {
		if sh := s.shards[i].Load(); sh != nil {
			sh.mu.Lock()
			n += sh.mem - int64(cap(sh.delBlock))
			sh.mu.Unlock()
		}
	}
	return n
}
