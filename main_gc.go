package main

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
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

const (
	gcPercentLean = 25
	gcPercentRich = 100
)

// gcPercentFor is the target for a heap of live bytes of which scan bytes
// hold pointers, given the current target (hysteresis: rich from a
// quarter, lean again below an eighth, and never rich below 16 MiB of
// scannable heap, where a collection is cheap whatever its share).
func gcPercentFor(scan, live uint64, current int) int {
	const floor = 16 << 20
	switch {
	case scan < floor:
		return gcPercentLean
	case scan*4 >= live:
		return gcPercentRich
	case scan*8 < live:
		return gcPercentLean
	}
	return current
}

var adaptGCOnce sync.Once

// adaptGCPercent re-reads the heap's scannable share every period and
// moves the GC target between gcPercentLean and gcPercentRich
// (debug.SetGCPercent, only on a change). It runs for the process's life;
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
				if p := gcPercentFor(s[0].Value.Uint64(), s[1].Value.Uint64(), current); p != current {
					debug.SetGCPercent(p)
					current = p
				}
			}
		}()
	})
}
