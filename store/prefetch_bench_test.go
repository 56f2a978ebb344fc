package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/celld/celld/window"
)

// BenchmarkPrefetchSecondSet is the server's pipelined path at the store
// for two key sets made one after the other, as bench/window.sh makes
// them: 100,000 CL.THROTTLE keys, then 100,000 FIXED window keys, none
// expiring; batches of 16 random keys of one set, prefetched as the
// server does (Store.Prefetch), then decided one by one. The second set's
// keys sit further from their home index words (their homes were taken),
// which is what entrySlot's probe length is about (prefetchProbe).
func BenchmarkPrefetchSecondSet(b *testing.B) {
	const nkeys, batch = 100_000, 16
	s := New(Options{})
	okKeys, order := churnKeys(nkeys)
	wfKeys := make([][]byte, nkeys)
	for i := range wfKeys {
		wfKeys[i] = fmt.Appendf(nil, "wf:%012d", i)
	}
	lim := mustLimit(b, 1_000_000, 1, 3600)
	wf := winLimit(window.Fixed, 1_000_000, 3_600_000)
	now := t0ms
	for _, k := range okKeys {
		s.Throttle(k, lim, 1, now*1e6)
	}
	for _, k := range wfKeys {
		s.Window(k, wf, 1, now)
	}
	keys := make([][]byte, batch)
	hs := make([]uint64, batch)
	i := 0
	for _, c := range []struct {
		name string
		win  bool
	}{{"throttle", false}, {"fixed", true}} {
		b.Run(c.name, func(b *testing.B) {
			set := okKeys
			if c.win {
				set = wfKeys
			}
			t0 := time.Now()
			for n := 0; n < b.N; n += batch {
				for j := range keys {
					keys[j] = set[order[(i+j)&(len(order)-1)]]
				}
				i += batch
				s.Prefetch(keys, hs)
				for _, k := range keys {
					if c.win {
						s.Window(k, wf, 1, now)
					} else {
						s.Throttle(k, lim, 1, now*1e6)
					}
				}
			}
			b.ReportMetric(float64(time.Since(t0).Nanoseconds())/float64(b.N), "ns/call")
		})
	}
}
