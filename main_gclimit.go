package main

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// The Go runtime's soft memory limit under a bound never sits below the
// heap that is live.
//
// followBound sets the limit from the bound alone (softMemoryLimit: 1.5 x
// maxmemory + 16 MB), which is right while the heap is what the bound's
// keys explain. It is not after the bound is lowered far below what the
// keyspace held (CONFIG SET maxmemory down tenfold, or a restart with a
// lower --maxmemory): eviction brings used_memory under the new bound,
// but the shards' slabs keep their peak capacity (live keys never move,
// so SCAN cursors stay valid: store/walk.go shrinkLocked), so the live
// heap stays at several times the new limit. A limit the live heap is
// over cannot be met: the collector then runs back to back (up to the
// runtime's 50% CPU cap) and every command waits on it. Measured on a
// loaded 2-core machine, SET spray at 64mb, then CONFIG SET maxmemory
// 6710886 (a live heap of 44 MB against a 25.6 MB limit): 1.2k then 4.2k
// SET/s and PING taking 0.8-1.4 s, against 27k then 56k SET/s with the
// limit out of the way (GOMEMLIMIT=300MiB).
//
// So a loop (followLiveHeap, one metrics read a second) raises the limit
// to the live heap plus an eighth plus 8 MB when that is above the
// bound's figure, and lowers it back as the heap shrinks (expiry's shrink,
// a higher bound). At a steady bound the live heap is 1.1-1.2 x maxmemory,
// where live + live/8 + 8 MB stays under 1.5 x maxmemory + 16 MB: the
// loop changes nothing there.

// softLimitBase is the limit the bound asks for (softMemoryLimit), or 0
// when the limit is not celld's to set (an explicit GOMEMLIMIT). Set by
// followBound's callback; read by followLiveHeap's loop.
var softLimitBase atomic.Int64

// limitFor is the soft memory limit for the bound's figure base and a
// live heap of live bytes (0: not known yet): base, or live + live/8 +
// 8 MB when that is higher. base MaxInt64 (no bound) is kept.
func limitFor(base, live int64) int64 {
	if base <= 0 || base == math.MaxInt64 || live <= 0 {
		return base
	}
	return max(base, live+live/8+8<<20)
}

// liveHeap is the heap the last collection found live (0 before the
// first), from runtime/metrics.
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// setSoftLimit sets the runtime's limit for base (softLimitBase's value)
// and the current live heap, when base is celld's to set. It returns the
// limit set (0: none). Safe for concurrent use.
func setSoftLimit(base int64) int64 {
	if base == 0 {
		return 0
	}
	l := limitFor(base, liveHeap())
	debug.SetMemoryLimit(l)
	return l
}

var followLiveOnce sync.Once

// followLiveHeap starts, once, the loop that re-sets the soft limit every
// period from softLimitBase and the live heap (only when it changed). It
// runs for the process's life.
func followLiveHeap(period time.Duration) {
	followLiveOnce.Do(func() {
		go func() {
			var last int64
			for range time.Tick(period) {
				base := softLimitBase.Load()
				if base == 0 {
					continue
				}
				if l := limitFor(base, liveHeap()); l != last {
					debug.SetMemoryLimit(l)
					last = l
				}
			}
		}()
	})
}
