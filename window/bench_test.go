package window

import "testing"

// BenchmarkApply is one allowed call on a key that exists, per mode; the
// LOG rows hold 1, 100 and 1,000 entries (one per ms, a window long enough
// to keep them all), the per-call cost being a pass over them.
func BenchmarkApply(b *testing.B) {
	for _, c := range []struct {
		name    string
		l       Limit
		entries int
	}{
		{"fixed", Limit{Mode: Fixed, Limit: 1 << 40, WindowMs: 1000}, 0},
		{"sliding", Limit{Mode: Sliding, Limit: 1 << 40, WindowMs: 1000}, 0},
		{"log/1", Limit{Mode: Log, Limit: 1 << 40, WindowMs: 1 << 40}, 1},
		{"log/100", Limit{Mode: Log, Limit: 1 << 40, WindowMs: 1 << 40}, 100},
		{"log/1000", Limit{Mode: Log, Limit: 1 << 40, WindowMs: 1 << 40}, 1000},
	} {
		b.Run(c.name, func(b *testing.B) {
			st := make([]byte, 0, 8192)
			buf := make([]byte, 0, 8192)
			now := base
			for range c.entries {
				now++
				_, next, _, _ := c.l.Apply(st, now, 1, buf)
				st = append(st[:0], next...)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				// the same ms: the newest entry's count grows, the log keeps its size
				_, next, _, _ := c.l.Apply(st, now, 1, buf)
				st = append(st[:0], next...)
			}
		})
	}
}
