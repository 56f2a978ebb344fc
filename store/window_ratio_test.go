package store

import (
	"testing"
	"time"

	"github.com/celld/celld/window"
)

// BenchmarkWindowVsThrottle measures CL.WINDOW's store cost as a ratio to
// CL.THROTTLE's on a shared, noisy machine: the two run side by side on
// stores of their own (100,000 keys of 15 bytes each, dirty tracking on,
// the clock moving 1 ms every 75 calls, a drain every 100 ms, as
// BenchmarkChurn100k), in alternating chunks of 256 calls, so that a
// neighbour's load falls on both alike. It reports each one's ns per call
// (the median over chunks) and their ratio, window/throttle; "live" rows
// use keys that never expire during the run (1 per hour, a 1-hour window).
func BenchmarkWindowVsThrottle(b *testing.B) {
	const nkeys, perMs, chunk = 100_000, 75, 256
	keys, order := churnKeys(nkeys)
	type side struct {
		s     *Store
		now   int64
		block []byte
		i     int
		call  func(s *Store, key []byte, nowMs int64)
		ns    []float64
	}
	step := func(d *side) {
		if d.i%perMs == 0 {
			d.now++
			if d.now%100 == 0 {
				d.block = d.s.DrainFunc(d.now, d.block[:0], func(Change) {})
			}
		}
		d.call(d.s, keys[order[d.i&(len(order)-1)]], d.now)
		d.i++
	}
	median := func(xs []float64) float64 {
		ys := append([]float64(nil), xs...)
		for i := range ys { // insertion sort: a few thousand chunks
			for j := i; j > 0 && ys[j] < ys[j-1]; j-- {
				ys[j], ys[j-1] = ys[j-1], ys[j]
			}
		}
		return ys[len(ys)/2]
	}
	run := func(b *testing.B, throttle, win func(s *Store, key []byte, nowMs int64)) {
		sides := [2]*side{
			{s: New(Options{TrackDirty: true}), now: t0ms, call: throttle},
			{s: New(Options{TrackDirty: true}), now: t0ms, call: win},
		}
		for _, d := range sides {
			for range 4 * nkeys {
				step(d)
			}
		}
		b.ResetTimer()
		for done := 0; done < b.N; done += chunk {
			for _, d := range sides {
				t0 := time.Now()
				for range chunk {
					step(d)
				}
				d.ns = append(d.ns, float64(time.Since(t0).Nanoseconds())/chunk)
			}
		}
		tn, wn := median(sides[0].ns), median(sides[1].ns)
		b.ReportMetric(tn, "throttle-ns")
		b.ReportMetric(wn, "window-ns")
		b.ReportMetric(wn/tn, "ratio")
	}
	for _, live := range []bool{false, true} {
		lim, per, w := mustLimit(b, 1_000_000, 1, 1), int64(100), int64(1000)
		prefix := ""
		if live {
			lim, per, w, prefix = mustLimit(b, 1_000_000, 1, 3600), 1_000_000, 3_600_000, "live/"
		}
		for _, m := range []window.Mode{window.Log, window.Fixed, window.Sliding} {
			l := winLimit(m, per, w)
			b.Run(prefix+m.String(), func(b *testing.B) {
				run(b, func(s *Store, key []byte, nowMs int64) { s.Throttle(key, lim, 1, nowMs*1e6) },
					func(s *Store, key []byte, nowMs int64) { s.Window(key, l, 1, nowMs) })
			})
		}
	}
}
