package store

import (
	"fmt"
	"runtime"
	"testing"

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
