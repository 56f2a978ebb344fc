package main

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// The garbage collector's target, adapted to what the keyspace holds.
//
// TAT, string and window keys live in pointer-free slabs and arenas, so a
// collection has next to nothing to mark and celld runs one every 25% of
// heap growth (gcPercentLean) to keep RSS close to the live data. Hashes,
// lists and sorted sets are Go maps, slices of strings and skiplist nodes:
// every collection marks all of them, and at 25% a server holding 100 MB
// of them marks 100 MB for every 25 MB allocated. Measured on a loaded
// 2-core machine, after 3M RPUSH onto 100k lists (120 MB used): HSET cost
// 8.5 µs of CPU per call, against 4.1 µs with the lists absent, with three
// collections of 0.5-0.9 s of CPU each during 200k calls. So while the
// scannable part of the heap is a large share of it, the target is Go's
// default (gcPercentRich): collections then come four times less often.
//
// Under a memory bound (--maxmemory) a lean heap grows by a fixed headroom
// between collections instead of by a quarter (gcHeadroom: a sixteenth of
// the bound): a quarter of a heap at a 64 MB bound is 16-20 MB of garbage
// on top of the keys, which was most of the RSS celld had over Redis's
// under a key spray. At the bound the keyspace allocates next to nothing
// (the arena and index reuse what evictions free, store/arena.go), so the
// smaller headroom costs few collections, and a lean heap is cheap to
// mark. A rich heap keeps gcPercentRich: marking it is what costs.

// Without a bound a lean heap also grows by at least gcLeanMinGrowth
// between collections. A quarter of a small heap is a few MB, and a
// collection has a fixed cost (two pauses, the stacks, a sweep of every
// span) whatever it finds: SET of 100-byte values allocates each value
// (112 bytes), so a spray over 100k keys (a 28 MB live heap, 7 MB of
// growth at 25%) ran 18 collections per 1M SETs, about 7% of its CPU
// (gctrace, loaded 2-core machine); with 16 MiB of growth it runs 8. The
// cost is at most 16 MiB of garbage over a heap below 64 MiB, where a
// quarter would have been less; from 64 MiB live the quarter applies as
// before.
const gcLeanMinGrowth = 16 << 20

const (
	gcPercentLean = 25
	gcPercentRich = 100
	// gcPercentMin is the least target a bound's headroom sets: a
	// collection at least every 5% of heap growth.
	gcPercentMin = 5
)

// gcHeadroom is the heap growth between collections for a lean heap under
// a memory bound (bytes; 0: no bound, gcPercentLean or gcLeanMinGrowth
// applies). Set by
// followBound (main_memory.go) when the bound changes; read by
// adaptGCPercent's loop. Safe for concurrent use.
var gcHeadroom atomic.Int64

// headroomFor is gcHeadroom under the bound n (0: none): a sixteenth of it,
// at least 2 MiB.
func headroomFor(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return max(n/16, 2<<20)
}

// gcPercentFor is the target for a heap of live bytes of which scan bytes
// hold pointers, given the current target and the bound's headroom (0: no
// bound). The heap is rich from a quarter of scannable bytes and lean
// again below an eighth (hysteresis), and never rich below 16 MiB of
// scannable heap, where a collection is cheap whatever its share. Rich:
// gcPercentRich. Lean: without a bound gcPercentLean, or more for a heap
// below 64 MiB (gcLeanMinGrowth's share of live, at most gcPercentRich-1);
// under a bound the percentage of live that headroom is (gcPercentMin to
// gcPercentRich-1).
func gcPercentFor(scan, live uint64, current int, headroom uint64) int {
	const floor = 16 << 20
	rich := current == gcPercentRich
	switch {
	case scan < floor:
		rich = false
	case scan*4 >= live:
		rich = true
	case scan*8 < live:
		rich = false
	}
	switch {
	case rich:
		return gcPercentRich
	case headroom == 0 && live == 0:
		return gcPercentLean
	case headroom == 0: // no bound: a quarter, or gcLeanMinGrowth
		return int(min(max(gcLeanMinGrowth*100/live, gcPercentLean), gcPercentRich-1))
	case live == 0:
		return gcPercentLean // before the first collection's figure
	}
	// Below gcPercentRich, so that the hysteresis tells the two apart.
	return int(min(max(headroom*100/live, gcPercentMin), gcPercentRich-1))
}

var adaptGCOnce sync.Once

// adaptGCPercent re-reads the heap's scannable share and live size every
// period and sets the GC target gcPercentFor gives (debug.SetGCPercent,
// only on a change). It runs for the process's life;
// started once, by tuneRuntime, unless GOGC is set.
func adaptGCPercent(period time.Duration) {
	adaptGCOnce.Do(func() {
		go func() {
			s := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}, {Name: "/gc/heap/live:bytes"}}
			current := gcPercentLean
			for range time.Tick(period) {
				metrics.Read(s)
				if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
					return // not this runtime's metrics: keep the lean target
				}
				if p := gcPercentFor(s[0].Value.Uint64(), s[1].Value.Uint64(), current, uint64(gcHeadroom.Load())); p != current {
					debug.SetGCPercent(p)
					current = p
				}
			}
		}()
	})
}
