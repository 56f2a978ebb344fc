package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/celld/celld/gcra"
)

// shardState is everything a read-only operation must leave alone in a
// shard: the write sequence, the dirty and deleted lists, the key count and
// every slab entry (value, expiry, version, flags).
type shardState struct {
	seq            uint32
	dirty, deleted int
	used           int
	slab           []entry
}

func snapshotShards(s *Store) []shardState {
	out := make([]shardState, nShards)
	for i := range s.shards {
		sh := s.shardAt(i)
		sh.mu.Lock()
		out[i] = shardState{seq: sh.seq, dirty: len(sh.dirty), deleted: len(sh.deleted), used: sh.used,
			slab: append([]entry(nil), sh.slab...)}
		sh.mu.Unlock()
	}
	return out
}

// TestThrottleInMatchesThrottle: ThrottleIn(UnitSeconds) is Throttle, and
// ThrottleIn(UnitMillis) leaves exactly what Throttle leaves on a twin
// store, on a run that crosses every TTL rule.
func TestThrottleInMatchesThrottle(t *testing.T) {
	a, b, c := New(Options{TrackDirty: true}), New(Options{TrackDirty: true}), New(Options{TrackDirty: true})
	key := []byte("k")
	lim := mustLimit(t, 9, 1000, 1) // EI 1 ms, DVT 10 ms
	now := t0
	for i, q := range []int64{1, 1, 5, 20, 0, -1, -30, 2, 0, 1} {
		now += 300_000 * int64(i%3)
		ra, ea := a.Throttle(key, lim, q, now)
		rb, eb := b.ThrottleIn(gcra.UnitSeconds, key, lim, q, now)
		rc, ec := c.ThrottleIn(gcra.UnitMillis, key, lim, q, now)
		if ra != rb || ea != eb {
			t.Fatalf("call %d: Throttle %+v %v, ThrottleIn(s) %+v %v", i, ra, ea, rb, eb)
		}
		if want := lim.ApplyMs(now, 0, false, q); i == 0 && rc != want {
			t.Fatalf("call 0: ThrottleIn(ms) %+v, want %+v", rc, want)
		}
		if ra.Limited != rc.Limited || ra.Remaining != rc.Remaining || ea != ec {
			t.Fatalf("call %d: Throttle %+v %v, ThrottleIn(ms) %+v %v", i, ra, ea, rc, ec)
		}
		va, oka := a.Get(key, now/1e6)
		vc, okc := c.Get(key, now/1e6)
		if va != vc || oka != okc {
			t.Fatalf("call %d (q %d): Throttle left %+v/%v, ThrottleIn(ms) %+v/%v", i, q, va, oka, vc, okc)
		}
	}
	if _, err := c.ThrottleIn(gcra.UnitMillis, key, lim, -1000, now+1e12); !errors.Is(err, ErrSetExpire) {
		t.Fatalf("ThrottleIn with TTL < -1 ms: %v, want ErrSetExpire", err)
	}
	c.Load([]byte("bad"), []byte("x"), 0)
	if _, err := c.ThrottleIn(gcra.UnitMillis, []byte("bad"), lim, 1, now); !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("ThrottleIn on an invalid value: %v", err)
	}
}

// TestPeekChangesNothing: Peek answers what ThrottleIn would, on a live key,
// a missing key, an expired key and a stale one, and leaves every shard
// exactly as it was: no write, no version, no dirty or deleted entry, and an
// expired key still in place.
func TestPeekChangesNothing(t *testing.T) {
	s := New(Options{TrackDirty: true})
	lim := mustLimit(t, 4, 1, 1) // EI 1 s, DVT 5 s
	now := t0
	s.Throttle([]byte("live"), lim, 3, now)
	s.Throttle([]byte("expiring"), lim, 1, now) // expires at t0 + 1 s
	putValue(s, "stale", t0ms, Value{TAT: uint64(t0 - 1e9)})
	s.Load([]byte("bad"), []byte("not a number"), 0)
	s.Drain(t0ms, nil)
	later := now + 2e9 // "expiring" has expired, not yet swept
	for _, u := range []gcra.Unit{gcra.UnitSeconds, gcra.UnitMillis} {
		for _, k := range []string{"live", "expiring", "stale", "missing"} {
			for _, q := range []int64{0, 1, 2, 5, 6} {
				got, err := s.Peek(u, []byte(k), lim, q, later)
				if err != nil {
					t.Fatalf("Peek(%s, q %d): %v", k, q, err)
				}
				// what a twin store's throttle replies at this instant
				twin := New(Options{})
				if v, ok := s.Get([]byte(k), later/1e6); ok && k != "expiring" {
					putValue(twin, k, t0ms, v)
				} else if ok {
					t.Fatalf("Get(%s) sees an expired key", k)
				}
				want, _ := twin.ThrottleIn(u, []byte(k), lim, q, later)
				if got != want {
					t.Errorf("unit %d: Peek(%s, q %d) = %+v, ThrottleIn %+v", u, k, q, got, want)
				}
			}
		}
		if _, err := s.Peek(u, []byte("bad"), lim, 1, later); !errors.Is(err, ErrInvalidValue) {
			t.Errorf("Peek on an invalid value: %v", err)
		}
	}
	// s.Get above deletes "expiring" lazily itself: check that peeks
	// alone leave every shard as it was on a fresh store.
	s2 := New(Options{TrackDirty: true})
	s2.Throttle([]byte("live"), lim, 3, now)
	s2.Throttle([]byte("expiring"), lim, 1, now)
	s2.Drain(t0ms, nil)
	before := snapshotShards(s2)
	for _, k := range []string{"live", "expiring", "missing"} {
		for q := int64(-1); q < 7; q++ {
			s2.Peek(gcra.UnitMillis, []byte(k), lim, q, later)
			s2.Peek(gcra.UnitSeconds, []byte(k), lim, q, later)
		}
	}
	if after := snapshotShards(s2); !reflect.DeepEqual(before, after) {
		t.Fatal("Peek changed a shard")
	}
	if s2.DirtyKeys() != 0 || s2.Len() != 2 {
		t.Fatalf("after peeks: %d dirty, %d keys; want 0 and 2 (the expired key left in place)", s2.DirtyKeys(), s2.Len())
	}
}

// multiCase is a random CL.MTHROTTLE call: keys (some repeated, some in one
// shard), limits and quantities.
func randomGroups(rng *rand.Rand, pool []string, n int) ([][]byte, []gcra.Group) {
	keys := make([][]byte, n)
	gs := make([]gcra.Group, n)
	for i := range n {
		keys[i] = []byte(pool[rng.IntN(len(pool))])
		l, err := gcra.NewLimit(rng.Int64N(6)-1, rng.Int64N(5)+1, rng.Int64N(3)+1)
		if err != nil {
			panic(err)
		}
		gs[i] = gcra.Group{Limit: l, Q: rng.Int64N(4) - 1, Prev: 7, TAT: 99, Exists: true} // junk: ThrottleAll must overwrite
	}
	return keys, gs
}

// storeDump is every live key's value, expiry and existence.
func storeDump(s *Store, nowMs int64) map[string]Value {
	out := map[string]Value{}
	var keys []string
	s.EachKey(nowMs, func(k []byte) bool { keys = append(keys, string(k)); return true })
	for _, k := range keys {
		if v, ok := s.Get([]byte(k), nowMs); ok {
			out[k] = v
		}
	}
	return out
}

// TestThrottleAllDifferential: on random calls (repeated keys, several
// shards, more groups than smallMulti too), ThrottleAll equals, group for
// group, gcra.ApplyAll over what the store held; an allowed call leaves the
// store exactly as the same groups run through Throttle one by one at the
// same instant; a denied one leaves every shard untouched (no write, no
// version, no dirty mark).
func TestThrottleAllDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 17))
	multi, seq := New(Options{TrackDirty: true}), New(Options{TrackDirty: true})
	pool := []string{"a", "b", "c", "d", "{u}:1", "{u}:2", "a-much-longer-key-than-sixteen-bytes"}
	pool = append(pool, keysInShard(multi, 3, 3, "s3:")...)
	now := t0
	var allowed, denied int
	for call := range 3000 {
		now += rng.Int64N(700e6)
		n := rng.IntN(5) + 1
		if call%100 == 0 {
			n = smallMulti + 1 + rng.IntN(40)
		}
		keys, gs := randomGroups(rng, pool, n)
		out := make([]gcra.Result, n)
		hs := make([]uint64, n)
		nowMs := now / 1e6
		seqBefore := storeDump(seq, nowMs)
		// expected results: ApplyAll over the twin's state
		want := make([]gcra.Group, n)
		for i := range gs {
			want[i] = gcra.Group{Limit: gs[i].Limit, Q: gs[i].Q, Prev: -1}
			for j := i - 1; j >= 0; j-- {
				if string(keys[j]) == string(keys[i]) {
					want[i].Prev = j
					break
				}
			}
			if v, ok := seqBefore[string(keys[i])]; ok && want[i].Prev < 0 {
				want[i].TAT, want[i].Exists = v.TAT, true
			}
		}
		wantOut := make([]gcra.Result, n)
		wb := gcra.ApplyAll(gcra.UnitSeconds, now, want, wantOut)

		multi.Drain(nowMs, nil)
		before := snapshotShards(multi)
		b, err := multi.ThrottleAll(gcra.UnitSeconds, keys, gs, out, hs, now)
		if b != wb || !reflect.DeepEqual(out, wantOut) || !reflect.DeepEqual(gs, want) {
			t.Fatalf("call %d: ThrottleAll binding %d %+v (groups %+v), ApplyAll %d %+v (groups %+v)", call, b, out, gs, wb, wantOut, want)
		}
		var seqErr error
		if out[b].Limited {
			denied++
			if err != nil {
				t.Fatalf("call %d: denied with error %v", call, err)
			}
			// Expired keys may have been dropped by the lookups (as any
			// CL.THROTTLE drops them); nothing else may change.
			after := snapshotShards(multi)
			for si := range after {
				if after[si].dirty != before[si].dirty {
					t.Fatalf("call %d: a denied call marked shard %d dirty", call, si)
				}
				for slot, e := range after[si].slab {
					if e.flags&flagUsed != 0 && (slot >= len(before[si].slab) || e != before[si].slab[slot]) {
						t.Fatalf("call %d: a denied call changed shard %d slot %d: %+v -> %+v", call, si, slot, before[si].slab[slot], e)
					}
				}
			}
		} else {
			allowed++
			for i := range keys {
				if _, e := seq.Throttle(keys[i], gs[i].Limit, gs[i].Q, now); e != nil {
					seqErr = e
				}
			}
			if err != seqErr {
				t.Fatalf("call %d: ThrottleAll error %v, sequential Throttle %v", call, err, seqErr)
			}
		}
		if got, want := storeDump(multi, nowMs), storeDump(seq, nowMs); !reflect.DeepEqual(got, want) {
			t.Fatalf("call %d: stores differ:\n multi %v\n   seq %v", call, got, want)
		}
	}
	if allowed < 300 || denied < 300 {
		t.Fatalf("%d allowed, %d denied: the random calls do not exercise both", allowed, denied)
	}
}

// TestThrottleAllErrors: an invalid stored value in any group refuses the
// whole call and writes nothing; a TTL below −1 ms writes every group and
// reports ErrSetExpire.
func TestThrottleAllErrors(t *testing.T) {
	s := New(Options{TrackDirty: true})
	s.Load([]byte("bad"), []byte("oops"), 0)
	lim := mustLimit(t, 4, 1, 1)
	keys := [][]byte{[]byte("x"), []byte("bad")}
	gs := make([]gcra.Group, 2)
	for i := range gs {
		gs[i] = gcra.Group{Limit: lim, Q: 1}
	}
	out, hs := make([]gcra.Result, 2), make([]uint64, 2)
	if _, err := s.ThrottleAll(gcra.UnitSeconds, keys, gs, out, hs, t0); !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("invalid value: %v", err)
	}
	mustMissing(t, s, "x", t0ms)
	// refund below now: TTL −2000 ms on "y", 1000 ms on "x"
	keys = [][]byte{[]byte("x"), []byte("y")}
	gs[0], gs[1] = gcra.Group{Limit: lim, Q: 1}, gcra.Group{Limit: lim, Q: -2}
	if _, err := s.ThrottleAll(gcra.UnitSeconds, keys, gs, out, hs, t0); !errors.Is(err, ErrSetExpire) {
		t.Fatalf("TTL below -1 ms: %v, want ErrSetExpire", err)
	}
	if v := mustGet(t, s, "x", t0ms); v.ExpireAtMs != t0ms+1000 {
		t.Fatalf("x: %+v", v)
	}
	if v := mustGet(t, s, "y", t0ms); v.ExpireAtMs != 0 || v.TAT != uint64(t0-2e9) {
		t.Fatalf("y: %+v", v)
	}
}

// TestThrottleAllConcurrentAtomic runs ThrottleAll over key sets that
// overlap and span shards, each goroutine naming its keys in a different
// order, beside plain Throttle and Peek calls (run with -race). No deadlock
// (the test ends), and atomicity: two keys only ever changed together
// (always in one call, same limit and quantity) hold the same TAT at the end.
func TestThrottleAllConcurrentAtomic(t *testing.T) {
	s := New(Options{TrackDirty: true})
	pairA, pairB := []byte("pair:a"), []byte("pair:b")
	others := keysInShard(s, s.shardIndex(pairA), 2, "near:")
	others = append(others, keysInShard(s, 200, 2, "far:")...)
	lim := mustLimit(t, 50, 100, 1) // EI 10 ms
	loose := mustLimit(t, 1000, 100000, 1)
	iters := 3000
	if testing.Short() {
		iters = 300
	}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			out, hs := make([]gcra.Result, 4), make([]uint64, 4)
			gs := make([]gcra.Group, 4)
			for i := range iters {
				now := t0 + int64(i)*1e6
				o1, o2 := []byte(others[rng.IntN(len(others))]), []byte(others[rng.IntN(len(others))])
				var keys [][]byte
				if w%2 == 0 {
					keys = [][]byte{pairA, o1, pairB, o2}
					gs[0], gs[1], gs[2], gs[3] = gcra.Group{Limit: lim, Q: 1}, gcra.Group{Limit: loose, Q: 1}, gcra.Group{Limit: lim, Q: 1}, gcra.Group{Limit: loose, Q: 1}
				} else {
					keys = [][]byte{o2, pairB, o1, pairA}
					gs[0], gs[1], gs[2], gs[3] = gcra.Group{Limit: loose, Q: 1}, gcra.Group{Limit: lim, Q: 1}, gcra.Group{Limit: loose, Q: 1}, gcra.Group{Limit: lim, Q: 1}
				}
				if _, err := s.ThrottleAll(gcra.UnitMillis, keys, gs, out, hs, now); err != nil {
					t.Error(err)
					return
				}
				s.Throttle(o1, loose, 1, now)
				s.Peek(gcra.UnitSeconds, pairA, lim, 1, now)
			}
		}()
	}
	wg.Wait()
	end := (t0 + int64(iters)*1e6) / 1e6
	a, okA := s.Get(pairA, end)
	b, okB := s.Get(pairB, end)
	if okA != okB || a.TAT != b.TAT {
		t.Fatalf("pair:a %+v/%v, pair:b %+v/%v: changed apart", a, okA, b, okB)
	}
	if !okA {
		t.Fatal("the pair was never written")
	}
}

// TestFamilyZeroAllocs pins the family's store paths on existing keys:
// ThrottleIn, Peek and a three-group ThrottleAll allocate nothing.
func TestFamilyZeroAllocs(t *testing.T) {
	for _, track := range []bool{false, true} {
		s := New(Options{TrackDirty: track})
		lim := benchLimit(t)
		keys := [][]byte{[]byte("fam:1"), []byte("fam:2"), []byte("a-key-longer-than-sixteen")}
		now := t0
		for _, k := range keys {
			s.Throttle(k, lim, 1, now)
		}
		var gs [3]gcra.Group
		var out [3]gcra.Result
		var hs [3]uint64
		cases := map[string]func(){
			"ThrottleIn": func() { now++; s.ThrottleIn(gcra.UnitMillis, keys[0], lim, 1, now) },
			"Peek":       func() { s.Peek(gcra.UnitSeconds, keys[1], lim, 1, now) },
			"ThrottleAll": func() {
				now++
				for i := range gs {
					gs[i] = gcra.Group{Limit: lim, Q: 1}
				}
				if b, err := s.ThrottleAll(gcra.UnitSeconds, keys, gs[:], out[:], hs[:], now); err != nil || out[b].Limited {
					panic(fmt.Sprint(out[b], err))
				}
			},
		}
		for name, f := range cases {
			if n := testing.AllocsPerRun(5000, f); n != 0 {
				t.Errorf("track=%v: %s = %v allocs/op, want 0", track, name, n)
			}
		}
	}
}

func BenchmarkThrottleAll3(b *testing.B) {
	s := New(Options{})
	lim := benchLimit(b)
	keys := [][]byte{[]byte("b:1"), []byte("b:2"), []byte("b:3")}
	var gs [3]gcra.Group
	var out [3]gcra.Result
	var hs [3]uint64
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now += 1000
		for i := range gs {
			gs[i] = gcra.Group{Limit: lim, Q: 1}
		}
		s.ThrottleAll(gcra.UnitSeconds, keys, gs[:], out[:], hs[:], now)
	}
}

func BenchmarkPeek(b *testing.B) {
	s := New(Options{})
	lim := benchLimit(b)
	key := []byte("peek:" + strconv.Itoa(1))
	s.Throttle(key, lim, 1, t0)
	b.ReportAllocs()
	for b.Loop() {
		s.Peek(gcra.UnitSeconds, key, lim, 1, t0)
	}
}

// BenchmarkThrottle3Separately is BenchmarkThrottleAll3's keys through three
// Throttle calls: the cost ThrottleAll3 is measured against.
func BenchmarkThrottle3Separately(b *testing.B) {
	s := New(Options{})
	lim := benchLimit(b)
	keys := [][]byte{[]byte("b:1"), []byte("b:2"), []byte("b:3")}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now += 1000
		for _, k := range keys {
			s.Throttle(k, lim, 1, now)
		}
	}
}

// TestFamilyWritesKeepTheLRUClock: a write by ThrottleIn (either unit) or
// ThrottleAll is an access for the LRU policies, as Throttle's is: the key
// it writes is idle 0 s at that instant and ages from there (a write
// without the clock would make it look idle since the epoch, the first
// key allkeys-lru evicts).
func TestFamilyWritesKeepTheLRUClock(t *testing.T) {
	lim := mustLimit(t, 5, 1, 60) // a TTL of 60 s a call: the keys outlive the test's clock
	now := t0 + 100e9             // 100 s after t0
	nowMs := now / 1e6
	for _, existing := range []bool{false, true} {
		s := New(Options{Policy: AllKeysLRU})
		names := []string{"base", "ms", "s", "m1", "m2"}
		if existing { // written 50 s earlier: the new write must move the clock
			for _, k := range names {
				if _, err := s.Throttle([]byte(k), lim, 1, now-50e9); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := s.Throttle([]byte("base"), lim, 1, now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ThrottleIn(gcra.UnitMillis, []byte("ms"), lim, 1, now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ThrottleIn(gcra.UnitSeconds, []byte("s"), lim, 1, now); err != nil {
			t.Fatal(err)
		}
		keys := [][]byte{[]byte("m1"), []byte("m2")}
		gs := []gcra.Group{{Limit: lim, Q: 1}, {Limit: lim, Q: 1}}
		out, hs := make([]gcra.Result, 2), make([]uint64, 2)
		if b, err := s.ThrottleAll(gcra.UnitSeconds, keys, gs, out, hs, now); err != nil || out[b].Limited {
			t.Fatalf("ThrottleAll: %+v %v", out, err)
		}
		for _, k := range names {
			for _, later := range []int64{0, 7_000} {
				_, idle, ok := s.Inspect([]byte(k), nowMs+later)
				if !ok || idle != later/1000 {
					t.Errorf("existing %v: %s idle %d s %v at +%d ms, want %d s", existing, k, idle, ok, later, later/1000)
				}
			}
		}
	}
}

// TestThrottleInAtTheBound: CL.PTHROTTLE's store operation obeys the
// memory bound as Throttle does: under noeviction an allowed call that
// would create a key over the bound gets ErrOOM and creates nothing, a
// call on an existing key and a denied call are answered; under
// volatile-ttl room is made and the key is created.
func TestThrottleInAtTheBound(t *testing.T) {
	lim := mustLimit(t, 5, 1, 1)
	for _, u := range []gcra.Unit{gcra.UnitSeconds, gcra.UnitMillis} {
		s := boundAt(t, NoEviction, 5000)
		s.SetMaxMemory(s.UsedMemory() - 1) // over it
		if _, err := s.ThrottleIn(u, []byte("brand-new"), lim, 1, t0+5e8); !errors.Is(err, ErrOOM) {
			t.Fatalf("unit %d, noeviction, a new key over the bound: %v, want ErrOOM", u, err)
		}
		mustMissing(t, s, "brand-new", t0ms)
		if r, err := s.ThrottleIn(u, []byte("fill:1"), lim, 1, t0+5e8); err != nil || r.Limited {
			t.Fatalf("unit %d, existing key over the bound: %+v %v", u, r, err)
		}
		if r, err := s.ThrottleIn(u, []byte("brand-new"), lim, 100, t0+5e8); err != nil || !r.Limited {
			t.Fatalf("unit %d, denied call over the bound: %+v %v", u, r, err)
		}
		mustMissing(t, s, "brand-new", t0ms)

		s = boundAt(t, VolatileTTL, 5000)
		s.SetMaxMemory(s.UsedMemory() - 1)
		if _, err := s.ThrottleIn(u, []byte("brand-new"), lim, 1, t0+5e8); err != nil {
			t.Fatalf("unit %d, volatile-ttl over the bound: %v", u, err)
		}
		mustGet(t, s, "brand-new", t0ms)
		if s.EvictedKeys() == 0 {
			t.Fatalf("unit %d: nothing evicted to make room", u)
		}
	}
}
