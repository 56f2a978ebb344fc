package store

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/celld/celld/gcra"
)

// benchLimit: EI 1 ms, burst 1e12 (DVT 1e18 ns). Every call in these
// benchmarks is allowed and moves the TAT 1 ms further ahead, so each one
// writes the slab (the full hot path) with a TTL of at least 1 ms. (A
// limit whose EI is below 1 ms would give a 0 ms TTL on a fresh key and
// store nothing.)
func benchLimit(tb testing.TB) gcra.Limit { return mustLimit(tb, 1e12, 1000, 1) }

func benchKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte("bench:key:" + strconv.Itoa(i))
	}
	return keys
}

func BenchmarkThrottleExisting(b *testing.B) {
	for _, track := range []bool{false, true} {
		name := "memory"
		if track {
			name = "trackdirty"
		}
		b.Run(name, func(b *testing.B) {
			s := New(Options{TrackDirty: track})
			lim := benchLimit(b)
			key := []byte("bench:key")
			now := t0
			if _, err := s.Throttle(key, lim, 1, now); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now++
				if r, _ := s.Throttle(key, lim, 1, now); r.Limited || r.TTLms <= 0 {
					b.Fatalf("%+v", r)
				}
			}
		})
	}
}

// BenchmarkThrottleExistingParallel spreads RunParallel goroutines over 100k
// existing keys: shard locks contend only when two goroutines hit a shard at
// once.
func BenchmarkThrottleExistingParallel(b *testing.B) {
	for _, track := range []bool{false, true} {
		name := "memory"
		if track {
			name = "trackdirty"
		}
		b.Run(name, func(b *testing.B) {
			s := New(Options{TrackDirty: track})
			lim := benchLimit(b)
			keys := benchKeys(100_000)
			for _, k := range keys {
				if _, err := s.Throttle(k, lim, 1, t0); err != nil {
					b.Fatal(err)
				}
			}
			if s.Len() != len(keys) {
				b.Fatalf("Len = %d", s.Len())
			}
			var clock atomic.Int64
			clock.Store(t0)
			var seed atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(seed.Add(7919)) // each goroutine starts elsewhere
				for pb.Next() {
					i++
					k := keys[i%len(keys)]
					if r, _ := s.Throttle(k, lim, 1, clock.Add(1)); r.Limited || r.TTLms <= 0 {
						b.Errorf("%+v", r)
						return
					}
				}
			})
		})
	}
}

// BenchmarkThrottleNewKey is the cost of the first call on a key (one
// allocation: the key string; plus amortised slab and map growth).
func BenchmarkThrottleNewKey(b *testing.B) {
	s := New(Options{})
	lim := benchLimit(b)
	keys := benchKeys(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Throttle(keys[i], lim, 1, t0)
	}
	b.StopTimer()
	if s.Len() != b.N {
		b.Fatalf("Len = %d, want %d", s.Len(), b.N)
	}
}

func BenchmarkGetExisting(b *testing.B) {
	s := New(Options{})
	key := []byte("bench:key")
	s.Throttle(key, benchLimit(b), 1, t0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := s.Get(key, t0ms); !ok {
			b.Fatal("missing")
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	for _, bm := range []struct{ name, p, s string }{
		{"prefix", "user:*", "user:1234:session"},
		{"class", "[a-z]*:[0-9]*", "user:1234"},
		{"stars", "*a*a*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				Match(bm.p, bm.s)
			}
		})
	}
}

// TestThrottleZeroAllocs pins the hot path: Throttle on an existing key
// allocates nothing, with or without dirty tracking.
func TestThrottleZeroAllocs(t *testing.T) {
	for _, track := range []bool{false, true} {
		s := New(Options{TrackDirty: track})
		lim := benchLimit(t)
		key := []byte("alloc:key")
		now := t0
		s.Throttle(key, lim, 1, now) // the insert allocates the key
		ver0, _ := s.Version(key, now/1e6)
		// Allowed (in-place write) path.
		allowed := testing.AllocsPerRun(10_000, func() {
			now++
			if r, _ := s.Throttle(key, lim, 1, now); r.Limited || r.TTLms <= 0 {
				t.Fatalf("%+v", r)
			}
		})
		if ver, ok := s.Version(key, now/1e6); !ok || ver == ver0 {
			t.Fatal("the measured calls did not write the key")
		}
		if allowed != 0 {
			t.Errorf("track=%v: Throttle (allowed, existing key) = %v allocs/op, want 0", track, allowed)
		}
		// Denied path.
		tight := mustLimit(t, 0, 1, 3600)
		s.Throttle([]byte("alloc:tight"), tight, 1, now)
		denied := testing.AllocsPerRun(10_000, func() {
			if r, _ := s.Throttle([]byte("alloc:tight"), tight, 1, now); !r.Limited {
				t.Fatal("allowed")
			}
		})
		if denied != 0 {
			t.Errorf("track=%v: Throttle (denied) = %v allocs/op, want 0", track, denied)
		}
		// Get on an existing key.
		get := testing.AllocsPerRun(10_000, func() { s.Get(key, now/1e6) })
		if get != 0 {
			t.Errorf("track=%v: Get = %v allocs/op, want 0", track, get)
		}
	}
}

// TestThrottleTrackDirtyAmortisedAllocs: with TrackDirty, the first write
// to a key after a Drain appends its slot to the shard's dirty list, and
// Drain hands the list over (sh.dirty = nil), so the list regrows from
// nothing every window. The appends are amortised: well under one
// allocation per call.
func TestThrottleTrackDirtyAmortisedAllocs(t *testing.T) {
	s := New(Options{TrackDirty: true})
	lim := benchLimit(t)
	keys := benchKeys(20_000)
	now := t0
	for _, k := range keys {
		s.Throttle(k, lim, 1, now)
	}
	if s.Len() != len(keys) {
		t.Fatalf("Len = %d", s.Len())
	}
	for window := 0; window < 2; window++ {
		s.Drain(now/1e6, nil)
		i := 0
		avg := testing.AllocsPerRun(len(keys)-1, func() {
			now++
			s.Throttle(keys[i], lim, 1, now)
			i++
		})
		if n := s.DirtyKeys(); n != len(keys) {
			t.Fatalf("DirtyKeys = %d, want %d", n, len(keys))
		}
		// AllocsPerRun reports the integer mean; measure exactly too.
		var m0, m1 runtime.MemStats
		s.Drain(now/1e6, nil)
		runtime.ReadMemStats(&m0)
		for _, k := range keys {
			now++
			s.Throttle(k, lim, 1, now)
		}
		runtime.ReadMemStats(&m1)
		mallocs := m1.Mallocs - m0.Mallocs
		t.Logf("window %d: AllocsPerRun %v; exact: %d mallocs over %d first-writes-after-Drain (%.4f/call)",
			window, avg, mallocs, len(keys), float64(mallocs)/float64(len(keys)))
		if avg != 0 {
			t.Errorf("AllocsPerRun = %v, want 0 (amortised)", avg)
		}
		if float64(mallocs)/float64(len(keys)) > 0.1 {
			t.Errorf("%d mallocs for %d calls", mallocs, len(keys))
		}
	}
}
