//go:build unix

package main

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/celld/celld/gcra"
	"github.com/celld/celld/window"
)

// BenchmarkFlushWindowVsThrottle is one flush window of 10,000 dirty keys
// (15-byte names, each written once since the last flush), CL.WINDOW's
// FIXED and SLIDING against CL.THROTTLE side by side: persistences of
// their own, flushed in alternation, so a neighbour's load falls on both
// alike. It reports, per key, the change-file bytes each flush wrote and
// the process's CPU ns of the flush (drain, encoding, the synced write;
// medians over flushes), and the ratios window/throttle. The per-write
// persistence cost is what a CL.WINDOW call adds over CL.THROTTLE's
// outside the store.
func BenchmarkFlushWindowVsThrottle(b *testing.B) {
	const n = 10_000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "wf:%012d", i)
	}
	lim, err := gcra.NewLimit(1_000_000, 1, 1)
	if err != nil {
		b.Fatal(err)
	}
	cpu := func() int64 {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return ru.Utime.Nano() + ru.Stime.Nano()
	}
	for _, m := range []window.Mode{window.Fixed, window.Sliding} {
		l := window.Limit{Mode: m, Limit: 100, WindowMs: 1000}
		b.Run(m.String(), func(b *testing.B) {
			type side struct {
				p     *persistence
				call  func(p *persistence, key []byte, now time.Time)
				ns    []float64
				bytes float64
			}
			sides := [2]*side{
				{call: func(p *persistence, key []byte, now time.Time) { p.st.Throttle(key, lim, 1, now.UnixNano()) }},
				{call: func(p *persistence, key []byte, now time.Time) { p.st.Window(key, l, 1, now.UnixMilli()) }},
			}
			for _, d := range sides {
				p, err := openBenchPersistence(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				d.p = p
			}
			flush := func(d *side) {
				now := time.Now()
				for _, k := range keys {
					d.call(d.p, k, now)
				}
				lb, t0 := d.p.db.LogBytes(), cpu()
				if err := d.p.fl.FlushNow(); err != nil {
					b.Fatal(err)
				}
				d.ns = append(d.ns, float64(cpu()-t0)/n)
				d.bytes = float64(d.p.db.LogBytes()-lb) / n
			}
			for _, d := range sides {
				flush(d)
				d.ns = d.ns[:0]
			}
			for b.Loop() {
				for _, d := range sides {
					flush(d)
				}
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
			tn, wn := median(sides[0].ns), median(sides[1].ns)
			b.ReportMetric(sides[0].bytes, "throttle-B/key")
			b.ReportMetric(sides[1].bytes, "window-B/key")
			b.ReportMetric(tn, "throttle-cpu-ns/key")
			b.ReportMetric(wn, "window-cpu-ns/key")
			b.ReportMetric(wn/tn, "cpu-ratio")
		})
	}
}
