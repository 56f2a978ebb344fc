package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/celld/celld/window"
)

// BenchmarkWindowBatch is the server's pipelined path at the store: batches
// of 16 random keys out of 100,000 per kind, prefetched as the server does
// (Store.Prefetch), then decided one by one; a drain every 100 ms of the
// clock, which moves 1 ms every 500 calls. THROTTLE and LOG keys share one
// store, as in bench/window.sh.
func BenchmarkWindowBatch(b *testing.B) {
	const nkeys, perMs, batch = 100_000, 500, 16
	s := New(Options{TrackDirty: true})
	okKeys, order := churnKeys(nkeys)
	wlKeys := make([][]byte, nkeys)
	for i := range wlKeys {
		wlKeys[i] = fmt.Appendf(nil, "wl:%012d", i)
	}
	lim := mustLimit(b, 1_000_000, 1, 1)
	wl := winLimit(window.Log, 100, 1000)
	now := t0ms
	var block []byte
	i := 0
	keys := make([][]byte, batch)
	hs := make([]uint64, batch)
	pre2 := true
	winIdx := make([]int32, batch)
	for j := range winIdx {
		winIdx[j] = int32(j)
	}
	run := func(win, pre bool) {
		set := okKeys
		if win {
			set = wlKeys
		}
		for j := range keys {
			keys[j] = set[order[(i+j)&(len(order)-1)]]
		}
		if pre {
			if win && pre2 {
				s.PrefetchWith(keys, hs, winIdx)
			} else {
				s.Prefetch(keys, hs)
			}
		}
		for _, k := range keys {
			if i%perMs == 0 {
				now++
				if now%100 == 0 {
					block = s.DrainFunc(now, block[:0], func(Change) {})
				}
			}
			i++
			if win {
				s.Window(k, wl, 1, now)
			} else {
				s.Throttle(k, lim, 1, now*1e6)
			}
		}
	}
	for range 2 * nkeys / batch {
		run(false, true)
		run(true, true)
	}
	for _, c := range []struct {
		name     string
		win, pre bool
		pre2     bool
	}{{"throttle", false, true, false}, {"log", true, true, true}, {"log-entryonly", true, true, false}, {"log-nopre", true, false, false}} {
		b.Run(c.name, func(b *testing.B) {
			pre2 = c.pre2
			t0, c0 := time.Now(), processCPUNs()
			for n := 0; n < b.N; n += batch {
				run(c.win, c.pre)
			}
			b.ReportMetric(float64(time.Since(t0).Nanoseconds())/float64(b.N), "ns/call")
			// The process's CPU time: on a machine shared with other
			// work, time descheduled does not count.
			b.ReportMetric(float64(processCPUNs()-c0)/float64(b.N), "cpu-ns/call")
		})
	}
}
