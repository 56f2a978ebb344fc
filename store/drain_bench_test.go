package store

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/celld/celld/window"
)

// BenchmarkDrain is the persistence drain's cost per dirty key (the work
// done under shard locks once per flush window): 10k keys of 100k written
// since the last drain, as TATs and as 100-byte strings (SET's case).
func BenchmarkDrain(b *testing.B) {
	const live, dirty = 100_000, 10_000
	val := StringValueOf(strings.Repeat("v", 100))
	for _, kind := range []string{"tat", "string100"} {
		b.Run(kind, func(b *testing.B) {
			s := New(Options{TrackDirty: true})
			keys := benchKeys(live)
			lim := benchLimit(b)
			write := func(k []byte, now int64) {
				if kind == "tat" {
					if _, err := s.Throttle(k, lim, 1, now); err != nil {
						b.Fatal(err)
					}
					return
				}
				if _, err := s.Put(k, val, now/1e6, PutAlways, false); err != nil {
					b.Fatal(err)
				}
			}
			now := t0
			for _, k := range keys {
				write(k, now)
			}
			var block []byte
			n := 0
			block = s.DrainFunc(t0/1e6, block, func(Change) { n++ })
			if n != live {
				b.Fatalf("first drain: %d changes, want %d", n, live)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for j := 0; j < dirty; j++ {
					now++
					write(keys[(i*dirty+j*7919)%live], now)
				}
				n = 0
				b.StartTimer()
				block = s.DrainFunc(now/1e6, block[:0], func(Change) { n++ })
				if n == 0 {
					b.Fatal("nothing drained")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dirty), "ns/key")
		})
	}
}

// BenchmarkDrainView is the server's drain per dirty key: 30k of 100k live
// TAT keys written since the last drain in a random order (CL.THROTTLE on
// random keys), drained with DrainShardsView (every change as a Change)
// and with DrainShardsViewTAT (plain TATs to their own callback, as
// persistence drains). The receivers only count.
func BenchmarkDrainView(b *testing.B) {
	for _, mode := range []string{"change", "tat"} {
		b.Run(mode, func(b *testing.B) {
			const live, dirty = 100_000, 30_000
			s := New(Options{TrackDirty: true})
			keys := benchKeys(live)
			lim := benchLimit(b)
			now := t0
			for _, k := range keys {
				if _, err := s.Throttle(k, lim, 1, now); err != nil {
					b.Fatal(err)
				}
			}
			n := 0
			count := func(*Change) { n++ }
			var tat func([]byte, uint64, int64)
			if mode == "tat" {
				tat = func([]byte, uint64, int64) { n++ }
			}
			_, scratch := s.DrainShardsViewTAT(now/1e6, 0, 0, nil, count, tat)
			perm := rand.New(rand.NewPCG(1, 2)).Perm(live)
			var cpu int64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for j := 0; j < dirty; j++ {
					now++
					if _, err := s.Throttle(keys[perm[(i*dirty+j)%live]], lim, 1, now); err != nil {
						b.Fatal(err)
					}
				}
				n = 0
				b.StartTimer()
				c0 := processCPUNs()
				_, scratch = s.DrainShardsViewTAT(now/1e6, 0, 0, scratch, count, tat)
				cpu += processCPUNs() - c0
				if n != dirty {
					b.Fatalf("drained %d changes, want %d", n, dirty)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dirty), "ns/key")
			b.ReportMetric(float64(cpu)/float64(b.N*dirty), "cpu-ns/key")
		})
	}
}

// BenchmarkDrainViewFixed is BenchmarkDrainView for CL.WINDOW FIXED keys
// with short names (inline counters): 30k of 100k live keys written since
// the last drain, drained with DrainShardsView (each as a Change with
// WinMode) and with DrainShardsViewNumbers (to their own callback, as
// persistence drains). The receivers only count.
func BenchmarkDrainViewFixed(b *testing.B) {
	for _, mode := range []string{"change", "numbers"} {
		b.Run(mode, func(b *testing.B) {
			const live, dirty = 100_000, 30_000
			s := New(Options{TrackDirty: true})
			keys := benchKeys(live)
			l := winLimit(window.Fixed, 1<<40, 3_600_000)
			now := t0 / 1e6
			for _, k := range keys {
				if _, err := s.Window(k, l, 1, now); err != nil {
					b.Fatal(err)
				}
			}
			n := 0
			count := func(*Change) { n++ }
			var win func([]byte, byte, int64, uint64, uint64, int64)
			if mode == "numbers" {
				win = func([]byte, byte, int64, uint64, uint64, int64) { n++ }
			}
			_, scratch := s.DrainShardsViewNumbers(now, 0, 0, nil, count, nil, win, nil)
			perm := rand.New(rand.NewPCG(1, 2)).Perm(live)
			var cpu int64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for j := 0; j < dirty; j++ {
					if _, err := s.Window(keys[perm[(i*dirty+j)%live]], l, 1, now); err != nil {
						b.Fatal(err)
					}
				}
				n = 0
				b.StartTimer()
				c0 := processCPUNs()
				_, scratch = s.DrainShardsViewNumbers(now, 0, 0, scratch, count, nil, win, nil)
				cpu += processCPUNs() - c0
				if n != dirty {
					b.Fatalf("drained %d changes, want %d", n, dirty)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dirty), "ns/key")
			b.ReportMetric(float64(cpu)/float64(b.N*dirty), "cpu-ns/key")
		})
	}
}

// BenchmarkDumpTAT is the base rewrite's walk per key over 400k live TAT
// keys (bench/family.sh's keyspace): DumpShard (every key as a Change)
// against DumpShardTAT (plain TATs to their own callback, as persistence
// snapshots). The receivers only count.
func BenchmarkDumpTAT(b *testing.B) {
	const live = 400_000
	s := New(Options{TrackDirty: true})
	keys := benchKeys(live)
	lim := benchLimit(b)
	for _, k := range keys {
		if _, err := s.Throttle(k, lim, 1, t0); err != nil {
			b.Fatal(err)
		}
	}
	for _, mode := range []string{"change", "tat"} {
		b.Run(mode, func(b *testing.B) {
			n := 0
			count := func(Change) { n++ }
			var tat func([]byte, uint64, int64)
			if mode == "tat" {
				tat = func([]byte, uint64, int64) { n++ }
			}
			for i := 0; i < b.N; i++ {
				n = 0
				for sh := range NumShards {
					s.DumpShardTAT(sh, t0/1e6, count, tat)
				}
				if n != live {
					b.Fatalf("dumped %d keys, want %d", n, live)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*live), "ns/key")
		})
	}
}
