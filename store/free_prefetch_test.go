package store

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/celld/celld/window"
)

// BenchmarkRemakeBatch is bench/window.sh's key re-creation at the store:
// 100,000 FIXED keys of 15 bytes that the sweep has removed are made again
// in batches of 16 (random order, each batch prefetched as the server does,
// Store.Prefetch), each batch followed by a batch of CL.THROTTLE calls on
// 100,000 keys that stay (the other row's keys, as in the script, so the
// caches hold what a server's would), and 16 KiB of other memory written.
// Then a drain, the clock 3 s on, a
// sweep that removes them all, and a drain (not counted). It reports the
// CPU ns per call of the making phase (window and throttle calls alike).
func BenchmarkRemakeBatch(b *testing.B) {
	const nkeys, batch = 100_000, 16
	s := New(Options{TrackDirty: true})
	stay, _ := churnKeys(nkeys)
	keys := make([][]byte, nkeys)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "wf:%012d", i)
	}
	perm := rand.New(rand.NewPCG(5, 6)).Perm(nkeys)
	lim := mustLimit(b, 1_000_000, 1, 3600)
	l := winLimit(window.Fixed, 100, 1000)
	now := t0ms
	var block []byte
	bk := make([][]byte, batch)
	hs := make([]uint64, batch)
	j := 0
	// cold stands for what a server touches between two calls (sockets,
	// buffers, replies): 16 KiB of it per batch pair, so a shard's lines
	// are evicted between its inserts as in the server (~2,500 calls
	// apart there), not kept in L2 as a bare loop over the store would.
	cold := make([]byte, 64<<20)
	c := 0
	cycle := func() float64 {
		t0 := processCPUNs()
		for i := 0; i < nkeys; i += batch {
			for k := range bk {
				bk[k] = keys[perm[i+k]]
			}
			s.Prefetch(bk, hs)
			for _, k := range bk {
				s.Window(k, l, 1, now)
			}
			for k := range bk {
				bk[k] = stay[perm[(j+k)%nkeys]]
			}
			j += batch
			for range 256 {
				cold[c]++
				c = (c + 64) & (len(cold) - 1)
			}
			s.Prefetch(bk, hs)
			for _, k := range bk {
				s.Throttle(k, lim, 1, now*1e6)
			}
		}
		ns := float64(processCPUNs()-t0) / (2 * nkeys)
		block = s.DrainFunc(now, block[:0], func(Change) {})
		now += 3000 // past every key's expiry and grace
		for s.SweepStep(now, time.Second) > 0 {
		}
		block = s.DrainFunc(now, block[:0], func(Change) {})
		return ns
	}
	for _, k := range stay {
		s.Throttle(k, lim, 1, now*1e6)
	}
	cycle()
	var ns []float64
	b.ResetTimer()
	for range b.N {
		ns = append(ns, cycle())
	}
	for i := range ns { // median
		for k := i; k > 0 && ns[k] < ns[k-1]; k-- {
			ns[k], ns[k-1] = ns[k-1], ns[k]
		}
	}
	b.ReportMetric(ns[len(ns)/2], "cpu-ns/call")
}

// TestPrefetchFreeHints: every shard's freeAt and freeEntry, which the
// batch prefetch reads without the lock for a key it finds absent, name
// the free list's last element and its slot's entry after every way the
// list changes: deletions (the sweep pushes), inserts (pops, until the list
// is empty: 0), the sweep's shrink (the slab and the list remade) and
// Flush. Fails if one of them leaves a stale address (a wasted prefetch on
// the next insert into that shard, the miss this removes).
func TestPrefetchFreeHints(t *testing.T) {
	s := New(Options{TrackDirty: true})
	l := winLimit(window.Fixed, 100, 1000)
	lim := mustLimit(t, 1_000_000, 1, 3600)
	check := func(step string) {
		t.Helper()
		withFree := 0
		for i := range s.shards {
			sh := s.shards[i].Load()
			if sh == nil {
				continue
			}
			sh.mu.Lock()
			var at, e uintptr
			if n := len(sh.free); n > 0 {
				withFree++
				at = uintptr(unsafe.Pointer(&sh.free[n-1]))
				e = uintptr(unsafe.Pointer(&sh.slab[sh.free[n-1]]))
			}
			gotAt, gotE := sh.freeAt.Load(), sh.freeEntry.Load()
			sh.mu.Unlock()
			if gotAt != at || gotE != e {
				t.Fatalf("%s: shard %d: freeAt %#x freeEntry %#x, want %#x %#x", step, i, gotAt, gotE, at, e)
			}
		}
		t.Logf("%s: %d shards with free slots", step, withFree)
	}
	now := t0ms
	key := func(p string, i int) []byte { return fmt.Appendf(nil, "%s:%012d", p, i) }
	for i := range 2000 { // keys that stay, in each shard's first slots
		s.Throttle(key("ok", i), lim, 1, now*1e6)
	}
	for i := range 8000 { // then the ones that expire: the slabs' tails
		s.Window(key("wf", i), l, 1, now)
	}
	check("made")
	now += 3000
	for s.SweepStep(now, time.Second) > 0 {
	}
	check("swept")
	for i := range 1000 {
		s.Window(key("wf", i), l, 1, now)
	}
	check("some made again")
	for i := 1000; i < 100_000; i++ { // past shrinkMin entries a shard: the sweep below trims the slabs
		s.Window(key("wf", i), l, 1, now)
	}
	check("free lists used up")
	now += 3000
	for s.SweepStep(now, time.Second) > 0 {
	}
	check("swept and shrunk")
	s.Flush()
	check("flushed")
	s.Window(key("wf", 0), l, 1, now)
	check("one key")
}
