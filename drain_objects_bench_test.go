package main

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/store"
)

// BenchmarkDrainZSets is the persistence drain per dirty key for sorted
// sets, as the ZADD row of bench/types.sh leaves them: 30k of 100k live
// compact sets, each added one member since the last drain in a random
// order, drained with DrainShardsViewTAT (the receiver only counts).
// "journal": sets of 12 members, journaled (a delta per key); "image": sets
// of 4 members, under store's smallImage (an image per key). The cache
// misses per key (the entry, the object's slot, its struct, the journal
// buffer or the elements) are what it measures.
func BenchmarkDrainZSets(b *testing.B) {
	for _, shape := range []struct {
		name    string
		members int
	}{{"journal", 12}, {"image", 4}} {
		b.Run(shape.name, func(b *testing.B) {
			const live, dirty = 100_000, 30_000
			const now = 1_000_000
			s := store.New(store.Options{TrackDirty: true})
			keys := make([][]byte, live)
			mk := func() store.Object { return kinds.NewZSet() }
			add := func(k []byte, m int) {
				if _, err := s.WriteObject(k, store.KindZSet, now, mk, func(o store.Object) bool {
					return o.(*kinds.ZSet).Set(fmt.Sprintf("m:%012d", m), float64(m))
				}); err != nil {
					b.Fatal(err)
				}
			}
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "z:%012d", i)
				for m := range shape.members {
					add(keys[i], m)
				}
			}
			benchDrainDirty(b, s, now, live, dirty, func(k, j, i int) {
				// A new score for a member: the sets keep their shape.
				m := fmt.Sprintf("m:%012d", j%shape.members)
				if _, err := s.WriteObject(keys[k], store.KindZSet, now, mk, func(o store.Object) bool {
					o.(*kinds.ZSet).Set(m, float64(i+j))
					return true
				}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// benchDrainDirty is the timed loop of the drain benchmarks: each round
// dirties dirty of the store's live keys (write(k, j, i): key index k, its
// place j in the round, round i), untimed, in a random order, then drains
// them with DrainShardsViewTAT (the receiver only counts, and the count
// must be dirty), reporting ns and CPU ns per drained key.
func benchDrainDirty(b *testing.B, s *store.Store, now int64, live, dirty int, write func(k, j, i int)) {
	n := 0
	count := func(*store.Change) { n++ }
	_, scratch := s.DrainShardsViewTAT(now, 0, 0, nil, count, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	var cpu int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j, k := range rng.Perm(live)[:dirty] {
			write(k, j, i)
		}
		n = 0
		b.StartTimer()
		c0 := processCPUNs()
		_, scratch = s.DrainShardsViewTAT(now, 0, 0, scratch, count, nil)
		cpu += processCPUNs() - c0
		if n != dirty {
			b.Fatalf("drained %d changes, want %d", n, dirty)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dirty), "ns/key")
	b.ReportMetric(float64(cpu)/float64(b.N*dirty), "cpu-ns/key")
}

// BenchmarkDumpZSets is the base rewrite's walk (DumpShard over every
// shard) per key for 100k compact sorted sets of 12 members, journaled
// and drained (as between two windows), the receiver only counting: the
// slot, struct, elements and journal buffer of each object are misses in
// the order the walk meets them.
func BenchmarkDumpZSets(b *testing.B) {
	const live = 100_000
	const now = 1_000_000
	s := store.New(store.Options{TrackDirty: true})
	mk := func() store.Object { return kinds.NewZSet() }
	keys := make([][]byte, live)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "z:%012d", i)
		for m := range 12 {
			if _, err := s.WriteObject(keys[i], store.KindZSet, now, mk, func(o store.Object) bool {
				return o.(*kinds.ZSet).Set(fmt.Sprintf("m:%012d", m), float64(m))
			}); err != nil {
				b.Fatal(err)
			}
		}
	}
	s.DrainShardsViewTAT(now, 0, 0, nil, func(*store.Change) {}, nil) // images: journals start
	n := 0
	var cpu int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j, k := range keys {
			if _, err := s.WriteObject(k, store.KindZSet, now, mk, func(o store.Object) bool {
				o.(*kinds.ZSet).Set("m:000000000000", float64(i+j))
				return true
			}); err != nil {
				b.Fatal(err)
			}
		}
		s.DrainShardsViewTAT(now, 0, 0, nil, func(*store.Change) {}, nil) // deltas out: journals empty
		n = 0
		b.StartTimer()
		c0 := processCPUNs()
		for sh := range store.NumShards {
			s.DumpShard(sh, now, func(store.Change) { n++ })
		}
		cpu += processCPUNs() - c0
		if n != live {
			b.Fatalf("dumped %d keys, want %d", n, live)
		}
	}
	b.ReportMetric(float64(cpu)/float64(b.N*live), "cpu-ns/key")
}
