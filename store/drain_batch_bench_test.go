package store

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkThrottleBatched is BenchmarkThrottleDrained's memory and inline
// modes as the server's event loop runs a pipeline: 16 calls a batch, the
// batch's keys first handed to PrefetchWith (server.prefetchBatch), then
// each call. ns/op is per call, the prefetch and (inline) the drain every
// 100k calls included: what PrefetchWith's own stalls cost next to the
// calls they shorten, with and without the dirty list.
func BenchmarkThrottleBatched(b *testing.B) {
	const nKeys, every, batch = 100_000, 100_000, 16
	keys := benchKeys(nKeys)
	order := make([]int32, 1<<20)
	for i := range order {
		order[i] = int32(rand.IntN(nKeys))
	}
	for _, mode := range []string{"memory", "inline"} {
		b.Run(mode, func(b *testing.B) {
			s := New(Options{TrackDirty: mode == "inline"})
			drain := func() {
				s.DrainShardsViewTAT(t0/1e6, 0, 0, nil, func(*Change) {}, func([]byte, uint64, int64) {})
			}
			lim := benchLimit(b)
			now := t0
			for _, k := range keys {
				now++
				s.Throttle(k, lim, 1, now)
			}
			drain()
			bk := make([][]byte, batch)
			hs := make([]uint64, batch)
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				for j := range bk {
					bk[j] = keys[order[(i+j)&(len(order)-1)]]
				}
				s.PrefetchWith(bk, hs, nil)
				for j := 0; j < batch && i+j < b.N; j++ {
					now++
					s.Throttle(bk[j], lim, 1, now)
					if (i+j)%every == every-1 && mode == "inline" {
						drain()
					}
				}
			}
		})
	}
}
