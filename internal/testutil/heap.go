package testutil

import (
	"runtime"
	"sync/atomic"
	"time"
)

// SampleHeapPeak collects garbage, reads the live heap (before) and
// samples HeapAlloc every millisecond into peak until stop is called
// (which returns once sampling has ended): a test's bound on the heap a
// server grew to while it ran.
func SampleHeapPeak() (before uint64, peak *atomic.Uint64, stop func()) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	peak = new(atomic.Uint64)
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return ms.HeapAlloc, peak, func() { close(done); <-sampled }
}
