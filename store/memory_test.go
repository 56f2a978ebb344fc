package store

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/celld/celld/gcra"
)

// BenchmarkMemoryPerKey reports the live heap per key after 1M keys shaped
// like key:000012345678 were written by CL.THROTTLE (the memory target of
// the performance issue is measured as RSS in bench/run.sh; this isolates
// the table).
func BenchmarkMemoryPerKey(b *testing.B) {
	for range b.N {
		b.StopTimer()
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		s := New(Options{TrackDirty: true})
		lim, _ := gcra.NewLimit(15, 30, 3600)
		now := int64(1796007429047254250)
		const n = 1_000_000
		b.StartTimer()
		for i := range n {
			s.Throttle(fmt.Appendf(nil, "key:%012d", i), lim, 1, now)
		}
		b.StopTimer()
		s.Drain(now/1e6, nil)
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapInuse-m0.HeapInuse)/n, "B/key")
		runtime.KeepAlive(s)
	}
}

// BenchmarkSweep10MExpired measures the active expiry cycle on 10M keys
// whose TTLs have all passed, as the server runs it: SweepStep with a 25 ms
// budget per 100 ms tick. It reports the ticks (and so the wall time at the
// server's pace) until every key is gone, and the longest single step.
func BenchmarkSweep10MExpired(b *testing.B) {
	for range b.N {
		b.StopTimer()
		s := New(Options{})
		lim, _ := gcra.NewLimit(0, 1, 1) // 1 s TTL
		now := int64(1796007429047254250)
		const n = 10_000_000
		key := make([]byte, 0, 32)
		for i := range n {
			key = fmt.Appendf(key[:0], "key:%012d", i)
			s.Throttle(key, lim, 1, now)
		}
		b.StartTimer()
		later := now/1e6 + 5000
		ticks := 0
		var longest time.Duration
		for s.Len() > 0 {
			t0 := time.Now()
			s.SweepStep(later, 25*time.Millisecond)
			longest = max(longest, time.Since(t0))
			ticks++
		}
		b.ReportMetric(float64(ticks), "ticks")
		b.ReportMetric(float64(ticks)*0.1, "s-at-100ms-ticks")
		b.ReportMetric(float64(longest.Microseconds()), "longest-step-µs")
	}
}
