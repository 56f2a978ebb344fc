package window

import (
	"math/rand/v2"
	"testing"
)

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

// BenchmarkLogSteady is a LOG key in its steady state at limit 100 per
// second and a call every 83 ms (a dozen entries; each call drops the
// oldest and adds one), as the store runs it: "copy" decides with Apply
// into scratch and copies the new state back into the block, as the
// store did before ApplyInPlace; "inplace" rewrites the block itself.
func BenchmarkLogSteady(b *testing.B) {
	l := Limit{Mode: Log, Limit: 100, WindowMs: 1000}
	for _, inPlace := range []bool{false, true} {
		name := "copy"
		if inPlace {
			name = "inplace"
		}
		b.Run(name, func(b *testing.B) {
			block := make([]byte, 0, 64)
			scratch := make([]byte, 0, 64)
			now := base
			for range 20 {
				now += 83
				_, next, _, _ := l.Apply(block, now, 1, scratch)
				block = append(block[:0], next...)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				now += 83
				if inPlace {
					_, next, ok, _, _ := l.ApplyInPlace(block, now, 1, scratch)
					if !ok {
						b.Fatal("not in place")
					}
					block = next
				} else {
					_, next, _, _ := l.Apply(block, now, 1, scratch)
					block = block[:len(next)]
					copy(block, next)
					scratch = next[:0]
				}
			}
		})
	}
}

// BenchmarkLogRandomGaps is an allowed LOG call in place on a key called
// at random (exponential gaps of 130 ms on average, bench/window.sh's LOG
// row: 100,000 keys at ~770k calls per second) at limit 100 per second:
// ~8 entries, 2-byte deltas for gaps over 127 ms, and about half the calls
// drop no entry (none has left the window since the previous call).
func BenchmarkLogRandomGaps(b *testing.B) {
	l := Limit{Mode: Log, Limit: 100, WindowMs: 1000}
	r := rand.New(rand.NewPCG(1, 2))
	gaps := make([]int64, 4096)
	for i := range gaps {
		gaps[i] = 1 + int64(r.ExpFloat64()*130)
	}
	block := make([]byte, 0, 64)
	scratch := make([]byte, 0, 64)
	now := base
	step := func(i int) {
		now += gaps[i&(len(gaps)-1)]
		_, next, inPlace, _, _ := l.ApplyInPlace(block, now, 1, scratch)
		if inPlace {
			block = next
		} else {
			block = append(block[:0], next...)
		}
	}
	for i := range 100 {
		step(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		step(i)
	}
}
