package store

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/celld/celld/window"
)

// BenchmarkExpiryCycle measures what a key's expiry and re-creation cost,
// CL.WINDOW's FIXED and SLIDING against CL.THROTTLE: beside 50,000 keys
// that stay (so the store never shrinks), 50,000 keys of 15 bytes are made
// by one call each (random order, dirty tracking on, then a drain, as
// persistence has it), all expire, the sweep deletes them (and a drain
// takes their deletion records), and the next cycle makes them again. The two sides run in alternating cycles on stores of their own,
// so a neighbour's load falls on both alike; each reports its ns per key
// per cycle (the median over cycles) and the ratio, window/throttle.
// bench/window.sh's non-live rows recreate keys at different rates per
// mode (a FIXED key ends at its window's boundary, a GCRA key when its TAT
// passes); this is the cost of one such event.
func BenchmarkExpiryCycle(b *testing.B) {
	const nkeys = 50_000
	all, _ := churnKeys(2 * nkeys)
	keys, stay := all[:nkeys], all[nkeys:]
	perm := rand.New(rand.NewPCG(3, 4)).Perm(nkeys) // every key once, in random order
	lim, limStay := mustLimit(b, 1_000_000, 1, 1), mustLimit(b, 1_000_000, 1, 3600)
	type side struct {
		s     *Store
		now   int64
		block []byte
		call  func(s *Store, key []byte, nowMs int64)
		stay  func(s *Store, key []byte, nowMs int64)
		ns    []float64
	}
	cycle := func(d *side) {
		t0 := processCPUNs()
		for i := range nkeys {
			d.call(d.s, keys[perm[i]], d.now)
		}
		d.block = d.s.DrainFunc(d.now, d.block[:0], func(Change) {})
		d.now += 3000 // past every key's expiry (at most 2 windows of 1 s)
		for d.s.SweepStep(d.now, time.Second) > 0 {
		}
		d.block = d.s.DrainFunc(d.now, d.block[:0], func(Change) {})
		d.ns = append(d.ns, float64(processCPUNs()-t0)/nkeys)
	}
	median := func(xs []float64) float64 {
		ys := append([]float64(nil), xs...)
		for i := range ys {
			for j := i; j > 0 && ys[j] < ys[j-1]; j-- {
				ys[j], ys[j-1] = ys[j-1], ys[j]
			}
		}
		return ys[len(ys)/2]
	}
	for _, m := range []window.Mode{window.Fixed, window.Sliding} {
		l, lStay := winLimit(m, 100, 1000), winLimit(m, 1_000_000, 3_600_000)
		b.Run(m.String(), func(b *testing.B) {
			sides := [2]*side{
				{s: New(Options{TrackDirty: true}), now: t0ms,
					call: func(s *Store, key []byte, nowMs int64) { s.Throttle(key, lim, 1, nowMs*1e6) },
					stay: func(s *Store, key []byte, nowMs int64) { s.Throttle(key, limStay, 1, nowMs*1e6) }},
				{s: New(Options{TrackDirty: true}), now: t0ms,
					call: func(s *Store, key []byte, nowMs int64) { s.Window(key, l, 1, nowMs) },
					stay: func(s *Store, key []byte, nowMs int64) { s.Window(key, lStay, 1, nowMs) }},
			}
			for _, d := range sides { // the keys that stay, then grow every table
				for _, k := range stay {
					d.stay(d.s, k, d.now)
				}
				cycle(d)
				d.ns = d.ns[:0]
			}
			b.ResetTimer()
			for range b.N {
				for _, d := range sides {
					cycle(d)
				}
			}
			tn, wn := median(sides[0].ns), median(sides[1].ns)
			b.ReportMetric(tn, "throttle-cpu-ns/key")
			b.ReportMetric(wn, "window-cpu-ns/key")
			b.ReportMetric(wn/tn, "ratio")
		})
	}
}
