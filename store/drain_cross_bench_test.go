package store

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
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
//     flagDirty in each). drain-ns/key is that goroutine's time per
//     drained key (the flusher's share, measured on the other core).
//   - repl-inline, repl-other: the same with replication's effect log
//     (repl.go) in place of the dirty list: every write appends its key,
//     TAT and expiry while the entry is in cache, and the drain (DrainRepl,
//     here once a window as persistence's) reads that log, newest first,
//     one record per slot, without touching the entries. What an effect
//     log for persistence would cost the loop and the flusher.
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
	drainRepl := func(s *Store) int {
		n := 0
		s.DrainRepl(func(Change) { n++ })
		return n
	}
	for _, mode := range []string{"memory", "inline", "other", "repl-inline", "repl-other"} {
		b.Run(mode, func(b *testing.B) {
			repl := mode == "repl-inline" || mode == "repl-other"
			s := New(Options{TrackDirty: mode != "memory" && !repl})
			drain := drain
			if repl {
				s.SetRepl(true)
				drain = drainRepl
			}
			lim := benchLimit(b)
			now := t0
			for _, k := range keys {
				now++
				s.Throttle(k, lim, 1, now)
			}
			drain(s)
			// The drainer waits for its tick (as the flusher waits for its
			// timer) instead of spinning: a spinning goroutine would take
			// the other core from everything else on a loaded machine.
			ticks := make(chan struct{}, 1)
			stopped := make(chan struct{})
			var drainNs, drained atomic.Int64
			if mode == "other" || mode == "repl-other" {
				go func() {
					defer close(stopped)
					for range ticks {
						t := time.Now()
						n := drain(s)
						drainNs.Add(int64(time.Since(t)))
						drained.Add(int64(n))
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
					case "inline", "repl-inline":
						drain(s)
					case "other", "repl-other":
						select {
						case ticks <- struct{}{}:
						default: // the last drain is still running
						}
					}
				}
			}
			b.StopTimer()
			close(ticks)
			<-stopped
			if n := drained.Load(); n > 0 {
				// The drain's own time per drained key, on the other
				// core: what the flusher spends per key.
				b.ReportMetric(float64(drainNs.Load())/float64(n), "drain-ns/key")
			}
		})
	}
}
