package store

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// BenchmarkThrottleDrained is the allowed row of bench/persist_cost.sh in
// the store alone: Throttle over 100k keys in random order, every call
// allowed (each one dirties its key), with a drain every 100k calls (about
// 63k distinct keys a drain, the server's ~0.6 drained keys per call).
// ns/op is the Throttle loop's time per call:
//   - memory: no dirty tracking, no drain (persistence off);
//   - inline: the drain runs in the Throttle goroutine (its own CPU is in
//     ns/op);
//   - other: a second goroutine drains (as the flusher does) while the loop
//     goes on; ns/op then holds only what the drain costs the loop: shard
//     lock waits and the entries' cache lines the drain took (it clears
//     flagDirty in each).
func BenchmarkThrottleDrained(b *testing.B) {
	const nKeys, every = 100_000, 100_000
	keys := benchKeys(nKeys)
	order := make([]int32, 1<<20)
	for i := range order {
		order[i] = int32(rand.IntN(nKeys))
	}
	drain := func(s *Store) int {
		n := 0
		s.DrainShardsViewTAT(t0/1e6, 0, 0, nil, func(*Change) { n++ }, func([]byte, uint64, int64) { n++ })
		return n
	}
	for _, mode := range []string{"memory", "inline", "other"} {
		b.Run(mode, func(b *testing.B) {
			s := New(Options{TrackDirty: mode != "memory"})
			lim := benchLimit(b)
			now := t0
			for _, k := range keys {
				now++
				s.Throttle(k, lim, 1, now)
			}
			drain(s)
			var ticks atomic.Int64
			done := make(chan struct{})
			stopped := make(chan struct{})
			if mode == "other" {
				go func() {
					defer close(stopped)
					seen := int64(0)
					for {
						select {
						case <-done:
							return
						default:
						}
						if t := ticks.Load(); t != seen {
							seen = t
							drain(s)
						}
					}
				}()
			} else {
				close(stopped)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now++
				s.Throttle(keys[order[i&(len(order)-1)]], lim, 1, now)
				if i%every == every-1 {
					switch mode {
					case "inline":
						drain(s)
					case "other":
						ticks.Add(1)
					}
				}
			}
			b.StopTimer()
			close(done)
			<-stopped
		})
	}
}
