package gcra

import (
	"math"
	"testing"
)

var (
	sinkResult Result
	sinkLimit  Limit
)

// BenchmarkApply is one CL.THROTTLE decision on a live key: `15 30 60` with
// the clock advancing 1 ms per call, so the key cycles between allowed and
// denied the way a busy key does.
func BenchmarkApply(b *testing.B) {
	l, err := NewLimit(15, 30, 60)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	now, tat, ok := base, uint64(0), false
	for b.Loop() {
		r := l.Apply(now, tat, ok, 1)
		if !r.Limited {
			tat, ok = r.NewTAT, true
		}
		now += 1e6
		sinkResult = r
	}
}

// BenchmarkApplyWide is the 128-bit path: a TAT above MaxInt64.
func BenchmarkApplyWide(b *testing.B) {
	l, err := NewLimit(9_000_000_000, 1, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		sinkResult = l.Apply(base, math.MaxUint64, true, -8_000_000_000)
	}
}

// BenchmarkApplyParallel runs independent keys on every P: Apply is pure, so
// it should scale with GOMAXPROCS.
func BenchmarkApplyParallel(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		l, err := NewLimit(15, 30, 60)
		if err != nil {
			b.Error(err)
			return
		}
		now, tat, ok := base, uint64(0), false
		var r Result
		for pb.Next() {
			r = l.Apply(now, tat, ok, 1)
			if !r.Limited {
				tat, ok = r.NewTAT, true
			}
			now += 1e6
		}
		_ = r
	})
}

// BenchmarkNewLimit is the per-call parameter derivation, on the fast path and
// on a period beyond int64/1e9 (math/big).
func BenchmarkNewLimit(b *testing.B) {
	b.Run("ordinary", func(b *testing.B) {
		b.ReportAllocs()
		count := int64(30)
		for b.Loop() {
			l, _ := NewLimit(15, count, 60)
			sinkLimit = l
		}
	})
	b.Run("huge-period", func(b *testing.B) {
		b.ReportAllocs()
		period := int64(math.MaxInt64)
		for b.Loop() {
			l, _ := NewLimit(15, 1000, period)
			sinkLimit = l
		}
	})
}

// BenchmarkThrottle is what the server does per command: NewLimit then Apply.
func BenchmarkThrottle(b *testing.B) {
	b.ReportAllocs()
	now, tat, ok := base, uint64(0), false
	mb, count, period := int64(15), int64(30), int64(60)
	for b.Loop() {
		l, err := NewLimit(mb, count, period)
		if err != nil {
			b.Fatal(err)
		}
		r := l.Apply(now, tat, ok, 1)
		if !r.Limited {
			tat, ok = r.NewTAT, true
		}
		now += 1e6
		sinkResult = r
	}
}

// TestApplyZeroAllocs pins zero allocations for NewLimit + Apply on ordinary
// inputs (and on the wide 128-bit Apply path, which needs no heap either).
func TestApplyZeroAllocs(t *testing.T) {
	cases := []struct {
		name                 string
		mb, count, period, q int64
		now                  int64
		tat                  uint64
		ok                   bool
	}{
		{"fresh", 15, 30, 60, 1, base, 0, false},
		{"allowed", 15, 30, 60, 1, base, uint64(base) + 4e9, true},
		{"denied", 15, 30, 60, 1, base, uint64(base) + 32e9, true},
		{"too big", 15, 30, 60, 17, base, 0, false},
		{"peek", 15, 30, 60, 0, base, uint64(base) + 4e9, true},
		{"refund", 5, 1, 10, -1, base, uint64(base) + 30e9, true},
		{"negative EI", 15, -30, 60, 1, base, 0, false},
		{"sub-µs EI", 10, 2_000_000, 1, 1, base, 0, false},
		{"stale TAT", 9, 1000, 1, 11, base, uint64(base) - 5e9, true},
		{"wide TAT", 9_000_000_000, 1, 1, -8_000_000_000, base, math.MaxUint64, true},
	}
	for _, c := range cases {
		allocs := testing.AllocsPerRun(1000, func() {
			l, err := NewLimit(c.mb, c.count, c.period)
			if err != nil {
				panic(err)
			}
			sinkResult = l.Apply(c.now, c.tat, c.ok, c.q)
		})
		if allocs != 0 {
			t.Errorf("%s: NewLimit+Apply allocates %v times per call, want 0", c.name, allocs)
		}
	}
}
