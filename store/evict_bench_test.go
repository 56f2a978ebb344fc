package store

import (
	"fmt"
	"testing"
)

// BenchmarkThrottleAtBound is the cost of a new key's CL.THROTTLE at a
// memory bound under volatile-ttl, where every call evicts one key first:
// the work a key spray adds to the event loop per command (sampling,
// the eviction pool, the delete, the insert). The keys are spray-shaped
// (ip:2001:db8:x:y, 15-20 bytes, so in the arena or inline), persistence
// tracking on.
func BenchmarkThrottleAtBound(b *testing.B) {
	lim := mustLimit(b, 10, 10, 600)
	s := New(Options{TrackDirty: true})
	key := func(i int) []byte { return fmt.Appendf(nil, "ip:2001:db8:%x:%x", i>>16, i&0xffff) }
	const fill = 200_000
	for i := range fill {
		s.Throttle(key(i), lim, 1, t0+int64(i)*1000)
	}
	s.Drain(t0ms, nil)
	s.SetPolicy(VolatileTTL)
	s.SetMaxMemory(s.UsedMemory())
	keys := make([][]byte, b.N)
	for i := range keys {
		keys[i] = key(fill + i)
	}
	var block []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Throttle(keys[i], lim, 1, t0+int64(fill+i)*1000); err != nil {
			b.Fatal(err)
		}
		if i%20_000 == 0 { // as the flusher does, every window
			block = s.DrainFunc(t0ms, block[:0], func(Change) {})
		}
	}
	b.StopTimer()
	if b.N > 1000 && s.EvictedKeys() < int64(b.N)/2 {
		b.Fatalf("evicted %d of %d", s.EvictedKeys(), b.N)
	}
}
