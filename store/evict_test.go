package store

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/celld/celld/gcra"
)

func TestParseMemory(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"100", 100, true}, {"64mb", 64 << 20, true}, {"64MB", 64 << 20, true},
		{"2gb", 2 << 30, true}, {"1k", 1000, true}, {"1K", 1000, true}, {"1kb", 1024, true},
		{"3m", 3e6, true}, {"1g", 1e9, true}, {"12b", 12, true}, {"8589934592gb", 0, false},
		{"", 0, false}, {"mb", 0, false}, {"-1", 0, false}, {"+1", 0, false}, {"1.5gb", 0, false},
		{"64 mb", 0, false}, {"64tb", 0, false}, {"abc", 0, false}, {"0x10", 0, false},
		{"9223372036854775807", 1<<63 - 1, true}, {"9223372036854775808", 0, false},
	} {
		got, err := ParseMemory(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	for p := NoEviction; p < numPolicies; p++ {
		got, err := ParsePolicy(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if p, err := ParsePolicy("VOLATILE-TTL"); err != nil || p != VolatileTTL {
		t.Errorf("upper case: %v %v", p, err)
	}
	for _, bad := range []string{"", "allkeys-lfu", "volatile-lfu", "lru", "volatile_ttl"} {
		if _, err := ParsePolicy(bad); !errors.Is(err, ErrBadPolicy) {
			t.Errorf("ParsePolicy(%q) err = %v", bad, err)
		}
	}
}

// checkMem recomputes every shard's charge from its live slots and
// compares it with the running figure, and the published total with the
// shards' (the accounting invariant).
func checkMem(t *testing.T, s *Store) {
	t.Helper()
	var published int64
	for i := range s.shards {
		sh := s.shardAt(i)
		sh.mu.Lock()
		want := int64(cap(sh.delBlock))
		for j := range sh.slab {
			e := &sh.slab[j]
			if e.flags&flagUsed == 0 {
				continue
			}
			want += keyCost(e.klen)
			if e.flags&flagRaw != 0 {
				want += rawCost(len(sh.rawv[uint32(e.tat)]))
			}
		}
		if sh.mem != want {
			t.Errorf("shard %d: mem %d, recomputed %d", i, sh.mem, want)
		}
		published += sh.mem - sh.memPending
		sh.mu.Unlock()
	}
	if got := s.used.Load(); got != published {
		t.Errorf("Store.used %d, shards' published sum %d", got, published)
	}
}

func TestUsedMemoryAccounting(t *testing.T) {
	s := New(Options{})
	if got := s.UsedMemory(); got != s.fixed.Load() || got <= 0 {
		t.Fatalf("empty store: %d, want %d > 0", got, s.fixed.Load())
	}
	lim := mustLimit(t, 5, 1, 10)
	s.Throttle([]byte("short"), lim, 1, t0)                                     // inline
	s.Throttle([]byte("a-key-longer-than-sixteen-bytes"), lim, 1, t0)           // arena, 31 bytes
	putValue(s, "raw", t0ms, Value{TAT: 5, Raw: "+5"})                          // text kept
	want := s.fixed.Load() + keyCost(5) + keyCost(31) + keyCost(3) + rawCost(2) // 80 + 126 + 80 + 56
	if got := s.UsedMemory(); got != want {
		t.Fatalf("after 3 keys: %d, want %d", got, want)
	}
	if keyCost(31) != 80+31+15 || rawCost(2) != 56 {
		t.Fatalf("costs changed: keyCost(31)=%d rawCost(2)=%d", keyCost(31), rawCost(2))
	}
	// Rewrites: a plain TAT costs nothing more; raw text is re-charged.
	s.Throttle([]byte("short"), lim, 1, t0+1)
	putValue(s, "raw", t0ms, Value{TAT: 5, Raw: "00000000000000005"})
	want += rawCost(17) - rawCost(2)
	if got := s.UsedMemory(); got != want {
		t.Fatalf("after rewrites: %d, want %d", got, want)
	}
	putValue(s, "raw", t0ms, Value{TAT: 5})
	want -= rawCost(17)
	if got := s.UsedMemory(); got != want {
		t.Fatalf("raw dropped: %d, want %d", got, want)
	}
	checkMem(t, s)
	s.Delete([]byte("a-key-longer-than-sixteen-bytes"), t0ms)
	s.Delete([]byte("raw"), t0ms)
	if got := s.UsedMemory(); got != s.fixed.Load()+keyCost(5) {
		t.Fatalf("after deletes: %d", got)
	}
	// Expiry (lazy and swept), Unload and Flush credit too.
	for i := range 3000 {
		putValue(s, "k"+strconv.Itoa(i), t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 10, Raw: "+1"})
	}
	checkMem(t, s)
	mustMissing(t, s, "k7", t0ms+20)
	s.SweepStep(t0ms+20, time.Second)
	if got := s.UsedMemory(); got != s.fixed.Load()+keyCost(5) {
		t.Fatalf("after expiry: %d", got)
	}
	s.Load([]byte("loaded"), []byte("12"), 0)
	s.Unload([]byte("short"))
	if got := s.UsedMemory(); got != s.fixed.Load()+keyCost(6) {
		t.Fatalf("after Load/Unload: %d", got)
	}
	s.Flush()
	if got := s.UsedMemory(); got != s.fixed.Load() {
		t.Fatalf("after Flush: %d", got)
	}
	checkMem(t, s)
	if s.used.Load() != 0 {
		t.Fatalf("published total after Flush: %d", s.used.Load())
	}
	// With dirty tracking, a shard's block of deleted keys is charged
	// while it is current, and stays charged across a Flush.
	s = New(Options{TrackDirty: true})
	putValue(s, "x", t0ms, Value{TAT: 1})
	s.Delete([]byte("x"), t0ms)
	if got := s.UsedMemory(); got != s.fixed.Load()+4096 {
		t.Fatalf("one deletion tracked: %d, want %d", got, s.fixed.Load()+4096)
	}
	putValue(s, "y", t0ms, Value{TAT: 1})
	s.Flush()
	if got := s.UsedMemory(); got < s.fixed.Load()+4096 || got > s.fixed.Load()+2*4096 {
		t.Fatalf("after Flush, tracked: %d", got)
	}
	checkMem(t, s)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestUsedMemoryTracksHeap is the calibration of keyCost: the charged
// memory of a store full of CL.THROTTLE keys must be close to the heap
// they really take, after filling and at the bound (every insert evicting
// one key, which is where a bound is held), for keys kept inline and keys
// in the arena. Heap measured as HeapAlloc after two collections.
func TestUsedMemoryTracksHeap(t *testing.T) {
	n := 150_000
	if testing.Short() || raceEnabled {
		n = 40_000
	}
	lim := mustLimit(t, 15, 30, 3600)
	for _, klen := range []int{16, 42} {
		h0 := liveHeap()
		s := New(Options{TrackDirty: true})
		key := make([]byte, 0, 64)
		spray := func(from, count int) {
			for i := from; i < from+count; i++ {
				key = fmt.Appendf(key[:0], "%0*d", klen, i)
				if _, err := s.Throttle(key, lim, 1, t0); err != nil {
					t.Fatal(err)
				}
				if i%10_000 == 0 {
					s.Drain(t0ms, nil) // as the flusher does
				}
			}
			s.Drain(t0ms, nil)
		}
		spray(0, n)
		fill := float64(s.UsedMemory()) / float64(liveHeap()-h0)
		// A store at its bound has been deleting: every shard has its
		// block of deleted keys (charged) before the bound is set.
		for i := 0; i < n; i += 50 {
			key = fmt.Appendf(key[:0], "%0*d", klen, i)
			s.Delete(key, t0ms)
		}
		s.Drain(t0ms, nil)
		s.SetPolicy(AllKeysRandom)
		s.SetMaxMemory(s.UsedMemory())
		spray(n, 2*n)
		churn := float64(s.UsedMemory()) / float64(liveHeap()-h0)
		t.Logf("%d-byte keys, %d live: charged/heap %.3f filled, %.3f at the bound (%d evicted); %.1f B/key charged",
			klen, s.Len(), fill, churn, s.EvictedKeys(), float64(s.UsedMemory())/float64(s.Len()))
		for _, r := range []float64{fill, churn} {
			if r < 0.8 || r > 1.25 {
				t.Errorf("%d-byte keys: charged/heap = %.3f, want 0.8-1.25", klen, r)
			}
		}
		if s.EvictedKeys() < int64(n) {
			t.Errorf("evicted %d, want >= %d", s.EvictedKeys(), n)
		}
		checkMem(t, s)
		runtime.KeepAlive(s)
	}
}

// boundAt returns a store holding n keys "fill:i" (TTL 1 s) whose bound
// is exactly its used memory, with policy p. Every shard has deleted a
// key already, so its block of deletions is charged before the bound is
// set (as in a store that has run for a while).
func boundAt(t *testing.T, p Policy, n int) *Store {
	s := New(Options{TrackDirty: true, Policy: p})
	for i := range nShards {
		for _, k := range keysInShard(s, i, 1, "warm:") {
			putValue(s, k, t0ms, Value{TAT: 1})
			s.Delete([]byte(k), t0ms)
		}
	}
	s.Drain(t0ms, nil)
	lim := mustLimit(t, 5, 1, 1)
	for i := range n {
		if _, err := s.Throttle([]byte("fill:"+strconv.Itoa(i)), lim, 1, t0); err != nil {
			t.Fatal(err)
		}
	}
	s.SetMaxMemory(s.UsedMemory())
	return s
}

func TestNoEvictionRefusesOnlyNewKeys(t *testing.T) {
	s := boundAt(t, NoEviction, 5000)
	lim := mustLimit(t, 5, 1, 1)
	// At the bound, not over: one more key fits, then nothing new does.
	if _, err := s.Throttle([]byte("one-more"), lim, 1, t0); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	for i := range nShards { // publish every shard's pending charge
		sh := s.shardAt(i)
		sh.mu.Lock()
		sh.publishMemLocked()
		sh.mu.Unlock()
	}
	if _, err := s.Throttle([]byte("new"), lim, 1, t0); !errors.Is(err, ErrOOM) {
		t.Fatalf("new key over the bound: %v, want ErrOOM", err)
	}
	mustMissing(t, s, "new", t0ms)
	// A call that would not create the key is answered (denied: q > burst+1).
	if r, err := s.Throttle([]byte("new"), lim, 100, t0); err != nil || !r.Limited {
		t.Fatalf("denied call on a new key: %+v %v", r, err)
	}
	// Existing keys: CL.THROTTLE, SET, EXPIRE, GET, DEL all work.
	if r, err := s.Throttle([]byte("fill:1"), lim, 1, t0+1); err != nil || r.Limited {
		t.Fatalf("existing key: %+v %v", r, err)
	}
	if err := s.Update([]byte("fill:2"), t0ms, func(v Value, ok bool) (Value, Action) {
		v.TAT = 7
		return v, Put
	}); err != nil {
		t.Fatalf("Update of an existing key: %v", err)
	}
	if err := s.Update([]byte("setnew"), t0ms, func(v Value, ok bool) (Value, Action) { return Value{TAT: 1}, Put }); !errors.Is(err, ErrOOM) {
		t.Fatalf("Update creating a key: %v, want ErrOOM", err)
	}
	mustMissing(t, s, "setnew", t0ms)
	// Update that does not create: no error.
	if err := s.Update([]byte("absent"), t0ms, func(v Value, ok bool) (Value, Action) { return v, Keep }); err != nil {
		t.Fatal(err)
	}
	if !s.Delete([]byte("fill:3"), t0ms) {
		t.Fatal("Delete")
	}
	if s.EvictedKeys() != 0 {
		t.Fatalf("noeviction evicted %d", s.EvictedKeys())
	}
	// Deleting makes room again.
	for i := 10; i < 40; i++ {
		s.Delete([]byte("fill:"+strconv.Itoa(i)), t0ms)
	}
	for i := range nShards {
		sh := s.shardAt(i)
		sh.mu.Lock()
		sh.publishMemLocked()
		sh.mu.Unlock()
	}
	if _, err := s.Throttle([]byte("new"), lim, 1, t0); err != nil {
		t.Fatalf("after deletes: %v", err)
	}
	// EvictToLimit under noeviction: ErrOOM when over.
	s.SetMaxMemory(s.UsedMemory() / 2)
	if n, err := s.EvictToLimit(t0ms); !errors.Is(err, ErrOOM) || n != 0 {
		t.Fatalf("EvictToLimit = %d, %v", n, err)
	}
	checkMem(t, s)
}

// TestEvictVolatileTTLSparesLongLived: 5,000 keys with hour-long TTLs,
// then a spray of 300,000 unique keys with one-minute TTLs against a bound
// that holds about 60,000 keys. Every long-lived key must survive, used
// memory must stay within 10% of the bound, and the spray must have been
// evicted (not refused).
func TestEvictVolatileTTLSparesLongLived(t *testing.T) {
	n := 300_000
	if testing.Short() || raceEnabled {
		n = 100_000
	}
	s := New(Options{TrackDirty: true, Policy: VolatileTTL})
	long := mustLimit(t, 10, 10, 3600) // EI 360 s, TTL ~1 h
	short := mustLimit(t, 10, 10, 60)  // EI 6 s, TTL ~66 s at first call... ~60 s
	for i := range 5000 {
		if _, err := s.Throttle([]byte("long:"+strconv.Itoa(i)), long, 10, t0); err != nil {
			t.Fatal(err)
		}
	}
	bound := baseMemory + 60_000*entryCost
	s.SetMaxMemory(bound)
	now := t0
	maxUsed := int64(0)
	for i := range n {
		now += 10_000 // 100k calls/s of fake time
		if _, err := s.Throttle([]byte("ip:"+strconv.Itoa(i)), short, 1, now); err != nil {
			t.Fatalf("spray %d: %v", i, err)
		}
		if i%5000 == 0 {
			maxUsed = max(maxUsed, s.UsedMemory())
			s.Drain(now/1e6, nil)
		}
	}
	maxUsed = max(maxUsed, s.UsedMemory())
	lost := 0
	for i := range 5000 {
		if _, ok := s.Get([]byte("long:"+strconv.Itoa(i)), now/1e6); !ok {
			lost++
		}
	}
	t.Logf("bound %d, max used %d (%.3fx), %d keys, %d evicted, %d long-lived lost",
		bound, maxUsed, float64(maxUsed)/float64(bound), s.Len(), s.EvictedKeys(), lost)
	if lost != 0 {
		t.Errorf("%d of 5000 long-lived keys evicted", lost)
	}
	if float64(maxUsed) > 1.1*float64(bound) {
		t.Errorf("used memory reached %d, over 1.1x the bound %d", maxUsed, bound)
	}
	if s.EvictedKeys() < int64(n-60_000) {
		t.Errorf("evicted %d", s.EvictedKeys())
	}
	checkMem(t, s)
}

// TestEvictVolatileTTLOrder: keys whose TTLs are spread evenly over 1 to
// 100 s; the bound is halved. Sampling is approximate, but the keys evicted
// must be overwhelmingly the ones nearest their expiry.
func TestEvictVolatileTTLOrder(t *testing.T) {
	const n = 40_000
	s := New(Options{Policy: VolatileTTL})
	for i := range n {
		putValue(s, "k"+strconv.Itoa(i), t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 1000 + int64(i)*99_000/n})
	}
	s.SetMaxMemory(baseMemory + (s.UsedMemory()-baseMemory)/2)
	if _, err := s.EvictToLimit(t0ms); err != nil {
		t.Fatal(err)
	}
	// Survival by tenth of the TTL range.
	var tenths [10]int
	for i := range n {
		if _, ok := s.Get([]byte("k"+strconv.Itoa(i)), t0ms); ok {
			tenths[i*10/n]++
		}
	}
	t.Logf("survivors per tenth of the TTL range (of %d each): %v; evicted %d", n/10, tenths, s.EvictedKeys())
	if tenths[0]+tenths[1]+tenths[2] > n*3/10/20 { // under 5% of the nearest 30% survive
		t.Errorf("nearest-expiry 30%%: %d survive", tenths[0]+tenths[1]+tenths[2])
	}
	if tenths[7]+tenths[8]+tenths[9] < n*3/10*98/100 { // 98% of the farthest 30% survive
		t.Errorf("farthest 30%%: only %d survive", tenths[7]+tenths[8]+tenths[9])
	}
}

func TestVolatilePoliciesSparePersistentKeys(t *testing.T) {
	for _, p := range []Policy{VolatileTTL, VolatileLRU, VolatileRandom} {
		t.Run(p.String(), func(t *testing.T) {
			s := New(Options{Policy: p})
			for i := range 2000 {
				putValue(s, "keep:"+strconv.Itoa(i), t0ms, Value{TAT: 1}) // no TTL
				putValue(s, "ttl:"+strconv.Itoa(i), t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 100_000})
			}
			s.SetMaxMemory(s.UsedMemory() * 3 / 4)
			n, err := s.EvictToLimit(t0ms)
			if err != nil || n == 0 {
				t.Fatalf("EvictToLimit = %d, %v", n, err)
			}
			for i := range 2000 {
				mustGet(t, s, "keep:"+strconv.Itoa(i), t0ms)
			}
			// Only persistent keys left: new keys are refused.
			for i := range 2000 {
				s.Delete([]byte("ttl:"+strconv.Itoa(i)), t0ms)
			}
			s.SetMaxMemory(s.UsedMemory() / 4)
			if n, err := s.EvictToLimit(t0ms); !errors.Is(err, ErrOOM) || n != 0 {
				t.Fatalf("nothing evictable left: %v", err)
			}
			for i := range 2000 {
				mustGet(t, s, "keep:"+strconv.Itoa(i), t0ms)
			}
			if err := s.Update([]byte("new"), t0ms, func(Value, bool) (Value, Action) { return Value{TAT: 1}, Put }); !errors.Is(err, ErrOOM) {
				t.Fatalf("new key: %v", err)
			}
			checkMem(t, s)
		})
	}
}

// TestAllKeysLRU: of 20,000 keys written at t, half are read 100 s later;
// a spray 200 s later must evict the unread ones first.
func TestAllKeysLRU(t *testing.T) {
	const n = 20_000
	s := New(Options{Policy: AllKeysLRU})
	for i := range n {
		putValue(s, "k"+strconv.Itoa(i), t0ms, Value{TAT: 1})
	}
	s.SetMaxMemory(s.UsedMemory())
	for i := 0; i < n; i += 2 {
		mustGet(t, s, "k"+strconv.Itoa(i), t0ms+100_000)
	}
	for i := range n / 2 {
		if err := s.Update([]byte("new"+strconv.Itoa(i)), t0ms+200_000, func(Value, bool) (Value, Action) { return Value{TAT: 1}, Put }); err != nil {
			t.Fatal(err)
		}
	}
	read, unread := 0, 0
	for i := range n {
		if _, ok := s.Get([]byte("k"+strconv.Itoa(i)), t0ms+200_000); ok {
			if i%2 == 0 {
				read++
			} else {
				unread++
			}
		}
	}
	t.Logf("survivors: %d of %d read keys, %d of %d unread; evicted %d", read, n/2, unread, n/2, s.EvictedKeys())
	if read < n/2*85/100 || unread > n/2*15/100 {
		t.Errorf("LRU order not followed: %d read, %d unread survive", read, unread)
	}
}

func TestRandomPoliciesHoldTheBound(t *testing.T) {
	for _, p := range []Policy{AllKeysRandom, VolatileRandom, AllKeysLRU, VolatileLRU} {
		s := boundAt(t, p, 10_000)
		bound := s.MaxMemory()
		lim := mustLimit(t, 5, 1, 1)
		for i := range 30_000 {
			if _, err := s.Throttle([]byte("spray:"+strconv.Itoa(i)), lim, 1, t0); err != nil {
				t.Fatalf("%v: %v", p, err)
			}
		}
		if used := s.UsedMemory(); float64(used) > 1.05*float64(bound) || s.EvictedKeys() < 19_000 {
			t.Errorf("%v: used %d for a bound of %d, %d evicted", p, used, bound, s.EvictedKeys())
		}
		checkMem(t, s)
	}
}

// TestEvictionsReachTheDisk: evicted keys are drained as deletions, like
// DEL's, so the next flush removes them from disk.
func TestEvictionsReachTheDisk(t *testing.T) {
	s := boundAt(t, VolatileTTL, 3000)
	disk := map[string]diskRec{}
	applyChanges(disk, s.Drain(t0ms, nil))
	lim := mustLimit(t, 5, 1, 1)
	for i := range 3000 {
		s.Throttle([]byte("more:"+strconv.Itoa(i)), lim, 1, t0)
	}
	applyChanges(disk, s.Drain(t0ms, nil))
	if s.EvictedKeys() == 0 {
		t.Fatal("nothing evicted")
	}
	checkDiskMatchesStore(t, s, disk, t0ms)
}

// TestSweepStepEvictsAfterTheBoundIsLowered: lowering the bound (CONFIG
// SET) is enforced by the background sweep without any insert.
func TestSweepStepEvictsAfterTheBoundIsLowered(t *testing.T) {
	s := boundAt(t, AllKeysRandom, 20_000)
	s.SetMaxMemory(s.MaxMemory() / 2)
	for range 100 {
		if !s.overLimit() {
			break
		}
		s.SweepStep(t0ms, 10*time.Millisecond)
	}
	if s.overLimit() || s.EvictedKeys() < 9_000 {
		t.Fatalf("used %d, bound %d, evicted %d", s.UsedMemory(), s.MaxMemory(), s.EvictedKeys())
	}
	// Unbounded again: nothing more goes.
	s.SetMaxMemory(0)
	ev := s.EvictedKeys()
	s.SweepStep(t0ms, 10*time.Millisecond)
	if s.EvictedKeys() != ev {
		t.Fatal("evicted without a bound")
	}
}

// TestThrottleZeroAllocsOverTheBound: a live key's CL.THROTTLE allocates
// nothing and is answered normally while the store is over its bound.
func TestThrottleZeroAllocsOverTheBound(t *testing.T) {
	for _, p := range []Policy{NoEviction, VolatileTTL} {
		s := boundAt(t, p, 1000)
		lim := benchLimit(t)
		key := []byte("live")
		now := t0
		s.Throttle(key, lim, 1, now)
		s.SetMaxMemory(1)
		allocs := testing.AllocsPerRun(1000, func() {
			now++
			if r, err := s.Throttle(key, lim, 1, now); err != nil || r.Limited {
				t.Fatal(r, err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocs per call", p, allocs)
		}
		if s.EvictedKeys() != 0 {
			t.Errorf("%v: a live key's call evicted %d keys", p, s.EvictedKeys())
		}
	}
}

// TestConcurrentEviction: goroutines spray new keys, touch old ones, delete
// and drain while the bound evicts (run with -race). At the end the
// accounting is exact and used memory is within the bound's slack.
func TestConcurrentEviction(t *testing.T) {
	for _, p := range []Policy{VolatileTTL, AllKeysLRU, AllKeysRandom} {
		s := boundAt(t, p, 4000)
		bound := s.MaxMemory()
		lim := mustLimit(t, 5, 1, 10)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 5000 {
					k := []byte("g" + strconv.Itoa(g) + ":" + strconv.Itoa(i))
					if _, err := s.Throttle(k, lim, 1, t0+int64(i)*1e6); err != nil {
						t.Error(err)
						return
					}
					s.Get([]byte("fill:"+strconv.Itoa(i%4000)), t0ms+int64(i))
					if i%7 == 0 {
						s.Delete([]byte("g"+strconv.Itoa(g)+":"+strconv.Itoa(i-3)), t0ms)
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				s.Drain(t0ms, nil)
				s.SweepStep(t0ms, time.Millisecond)
			}
		}()
		wg.Wait()
		checkMem(t, s)
		slack := int64(nShards*memBatch) + 8*keyCost(16)
		if used := s.UsedMemory(); used > bound+slack {
			t.Errorf("%v: used %d, bound %d + slack %d", p, used, bound, slack)
		}
	}
}

// TestOnEvictNamesEveryEvictedKey: the hook hears of every key evicted,
// once, by its name (long keys from the arena included), and of no key
// still in the store; none when nothing is evicted.
func TestOnEvictNamesEveryEvictedKey(t *testing.T) {
	s := boundAt(t, AllKeysRandom, 5_000)
	heard := map[string]int{}
	s.OnEvict(func(keys [][]byte) {
		for _, k := range keys {
			heard[string(k)]++
		}
	})
	lim := mustLimit(t, 5, 1, 1)
	var names []string
	for i := range 10_000 {
		k := "spray:" + strconv.Itoa(i)
		if i%2 == 0 {
			k += ":a-name-longer-than-sixteen-bytes"
		}
		names = append(names, k)
		if _, err := s.Throttle([]byte(k), lim, 1, t0); err != nil {
			t.Fatal(err)
		}
	}
	if int64(len(heard)) != s.EvictedKeys() || s.EvictedKeys() == 0 {
		t.Fatalf("hook heard of %d keys, %d evicted", len(heard), s.EvictedKeys())
	}
	for k, n := range heard {
		if n != 1 {
			t.Errorf("%q heard %d times", k, n)
		}
	}
	for _, k := range names {
		_, live := s.Get([]byte(k), t0ms)
		if _, told := heard[k]; live == told {
			t.Errorf("%q: live %v, hook told %v", k, live, told)
		}
	}
}

// TestThrottleAllAtTheBound: CL.MTHROTTLE's store operation obeys the
// bound as Throttle does: under noeviction a call that would create a key
// over the bound is refused whole (ErrOOM, nothing written, not even its
// existing keys), a call on existing keys only and a denied call are
// answered; under volatile-ttl room is made and the call goes through.
func TestThrottleAllAtTheBound(t *testing.T) {
	run := func(s *Store, q int64, names ...string) ([]gcra.Result, error) {
		lim := mustLimit(t, 5, 1, 1)
		keys := make([][]byte, len(names))
		gs := make([]gcra.Group, len(names))
		for i, n := range names {
			keys[i] = []byte(n)
			gs[i] = gcra.Group{Limit: lim, Q: q}
		}
		out, hs := make([]gcra.Result, len(names)), make([]uint64, len(names))
		_, err := s.ThrottleAll(gcra.UnitSeconds, keys, gs, out, hs, t0+5e8)
		return out, err
	}
	s := boundAt(t, NoEviction, 5000)
	s.SetMaxMemory(s.UsedMemory() - 1) // over it
	before := mustGet(t, s, "fill:1", t0ms)
	if _, err := run(s, 1, "fill:1", "brand-new", "fill:2"); !errors.Is(err, ErrOOM) {
		t.Fatalf("noeviction, a new key over the bound: %v, want ErrOOM", err)
	}
	mustMissing(t, s, "brand-new", t0ms)
	if v := mustGet(t, s, "fill:1", t0ms); v != before {
		t.Fatalf("refused call wrote fill:1: %+v, was %+v", v, before)
	}
	if out, err := run(s, 1, "fill:1", "fill:2"); err != nil || out[0].Limited {
		t.Fatalf("existing keys only: %+v %v", out, err)
	}
	if out, err := run(s, 100, "fill:3", "brand-new"); err != nil || !out[0].Limited && !out[1].Limited {
		t.Fatalf("denied call: %+v %v", out, err)
	}
	mustMissing(t, s, "brand-new", t0ms)

	s = boundAt(t, VolatileTTL, 5000)
	s.SetMaxMemory(s.UsedMemory() - 1)
	if _, err := run(s, 1, "fill:1", "brand-new"); err != nil {
		t.Fatalf("volatile-ttl over the bound: %v", err)
	}
	mustGet(t, s, "brand-new", t0ms)
	if s.EvictedKeys() == 0 {
		t.Fatal("nothing evicted to make room")
	}
}

// TestEvictFirstFillIsScattered: the pool's first fill must not sample
// keys of one age. 5,000 long-lived keys are written first (so they hold
// the low slots of every shard), then 55,000 short-lived ones; 2,000
// times the pool is emptied and one key evicted. With a walk of
// consecutive slots the first sample lands among the long-lived keys
// about once in twelve tries and one of them goes; scattered probes draw
// eight long-lived keys together with a chance of (1/12)^8.
func TestEvictFirstFillIsScattered(t *testing.T) {
	s := New(Options{Policy: VolatileTTL})
	for i := range 5000 {
		putValue(s, "long:"+strconv.Itoa(i), t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 3_600_000})
	}
	for i := range 55_000 {
		putValue(s, "short:"+strconv.Itoa(i), t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 60_000 + int64(i)})
	}
	for range 2000 {
		s.ev.mu.Lock()
		s.ev.n = 0
		s.evictOneLocked(VolatileTTL, t0ms)
		s.ev.tellLocked()
		s.ev.mu.Unlock()
	}
	lost := 0
	for i := range 5000 {
		if _, ok := s.Get([]byte("long:"+strconv.Itoa(i)), t0ms); !ok {
			lost++
		}
	}
	if lost != 0 || s.EvictedKeys() != 2000 {
		t.Errorf("%d long-lived keys evicted; %d evictions in all (want 0 and 2000)", lost, s.EvictedKeys())
	}
}

// TestMakeRoomWhileEvicting: over the bound by more than one chunk of
// evictions (the bound lowered tenfold under load), MakeRoom evicts a
// chunk and lets the command go ahead, as an insert does (Redis's
// processCommand refuses only on EVICT_FAIL, never on EVICT_RUNNING): a
// command queued in MULTI was refused with OOM under volatile-ttl while
// the same command outside MULTI ran. ErrOOM stays the answer when
// nothing may be evicted.
func TestMakeRoomWhileEvicting(t *testing.T) {
	s := boundAt(t, VolatileTTL, 20_000)
	s.SetMaxMemory(s.MaxMemory() / 10)
	ev := s.EvictedKeys()
	if err := s.MakeRoom(t0ms); err != nil {
		t.Fatalf("MakeRoom while evicting: %v (evicted %d)", err, s.EvictedKeys()-ev)
	}
	if s.EvictedKeys() == ev || !s.overLimit() {
		t.Fatalf("evicted %d, over the bound %v: want one chunk evicted, still over", s.EvictedKeys()-ev, s.overLimit())
	}
	if _, err := s.Throttle([]byte("new"), mustLimit(t, 5, 1, 1), 1, t0); err != nil {
		t.Fatalf("insert while evicting: %v", err)
	}
	s.SetPolicy(NoEviction)
	if err := s.MakeRoom(t0ms); !errors.Is(err, ErrOOM) {
		t.Fatalf("noeviction over the bound: %v", err)
	}
}

// TestBacklogRefusesButNeverEvicts: memory held by persistence's backlog
// (SetBacklogMemory) counts in UsedMemory and, over the bound, refuses new
// keys, but no key is evicted for it, neither by an insert nor by the
// background sweep (evicting a persisted key would add its deletion to
// the backlog); existing keys are still decided; without the backlog new
// keys are taken again.
func TestBacklogRefusesButNeverEvicts(t *testing.T) {
	s := boundAt(t, VolatileTTL, 5000)
	lim := mustLimit(t, 5, 1, 1)
	used := s.UsedMemory()
	s.SetBacklogMemory(1 << 20)
	if got := s.UsedMemory(); got != used+1<<20 {
		t.Fatalf("UsedMemory %d with a 1 MiB backlog, want %d", got, used+1<<20)
	}
	if _, err := s.Throttle([]byte("new"), lim, 1, t0); !errors.Is(err, ErrOOM) {
		t.Fatalf("new key over the bound by the backlog: %v, want ErrOOM", err)
	}
	if err := s.MakeRoom(t0ms); !errors.Is(err, ErrOOM) {
		t.Fatalf("MakeRoom: %v, want ErrOOM", err)
	}
	s.SweepStep(t0ms, 10*time.Millisecond)
	if n := s.EvictedKeys(); n != 0 {
		t.Fatalf("%d keys evicted for the backlog", n)
	}
	if _, err := s.Throttle([]byte("fill:7"), lim, 1, t0); err != nil {
		t.Fatalf("existing key: %v", err)
	}
	// Over by the keys too (the bound lowered): keys are evicted down to
	// the bound, not below it for the backlog.
	s.SetMaxMemory(used - 64<<10)
	s.SweepStep(t0ms, time.Second)
	if n, u := s.EvictedKeys(), s.UsedMemory()-s.BacklogMemory(); n == 0 || u > used-64<<10 || u < used-256<<10 {
		t.Fatalf("lowered bound: evicted %d, used without the backlog %d, want just under %d", n, u, used-64<<10)
	}
	s.SetMaxMemory(used)
	s.SetBacklogMemory(0)
	if _, err := s.Throttle([]byte("new"), lim, 1, t0); err != nil {
		t.Fatalf("new key without the backlog: %v", err)
	}
}

// TestSweepShrinksAfterMassEviction: once the bound is lowered tenfold and
// the keys evicted, the sweep sizes the shards' index tables down as it
// does after mass expiry (before, only an expiry triggered it, so the
// tables kept their peak size after evictions).
func TestSweepShrinksAfterMassEviction(t *testing.T) {
	s := boundAt(t, AllKeysRandom, 200_000)
	table := func() (n int) {
		for i := range s.shards {
			sh := s.shardAt(i)
			sh.mu.Lock()
			n += len(sh.table)
			sh.mu.Unlock()
		}
		return n
	}
	before := table()
	s.SetMaxMemory(s.MaxMemory() / 10)
	for range 1000 {
		s.SweepStep(t0ms, 10*time.Millisecond)
		if !s.overLimit() {
			break
		}
	}
	s.SweepStep(t0ms, 10*time.Millisecond) // one more pass over every shard
	if after := table(); after > before/2 {
		t.Fatalf("index tables: %d words before, %d after evicting 90%% of the keys (%d left)", before, after, s.Len())
	}
}

// TestOverheadMemoryRefusesAndEvicts: the server's overhead (the script
// cache, the tracking table: AddOverheadMemory) counts in UsedMemory and
// the bound acts on it as on keys, as Redis counts them in used_memory:
// under NoEviction a new key is refused; under an eviction policy keys are
// evicted to make room for it (unlike the backlog and held memory); given
// back, new keys are taken again.
func TestOverheadMemoryRefusesAndEvicts(t *testing.T) {
	lim := mustLimit(t, 5, 1, 1)
	s := boundAt(t, NoEviction, 2000)
	used := s.UsedMemory()
	s.AddOverheadMemory(64 << 10)
	if got := s.UsedMemory(); got != used+64<<10 {
		t.Fatalf("UsedMemory %d with 64 KiB of overhead, want %d", got, used+64<<10)
	}
	if _, err := s.Throttle([]byte("new"), lim, 1, t0); !errors.Is(err, ErrOOM) {
		t.Fatalf("new key over the bound by the overhead: %v, want ErrOOM", err)
	}
	s.AddOverheadMemory(-64 << 10)
	if _, err := s.Throttle([]byte("new"), lim, 1, t0); err != nil {
		t.Fatalf("new key once the overhead is given back: %v", err)
	}

	s = boundAt(t, AllKeysRandom, 2000)
	used = s.UsedMemory()
	s.AddOverheadMemory(64 << 10)
	if err := s.MakeRoom(t0ms); err != nil {
		t.Fatalf("MakeRoom under allkeys-random: %v", err)
	}
	s.SweepStep(t0ms, time.Second)
	if n, u := s.EvictedKeys(), s.UsedMemory(); n == 0 || u > used {
		t.Fatalf("64 KiB of overhead over the bound: evicted %d, used %d, bound %d", n, u, used)
	}
}
