package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/store"
)

// BenchmarkDrainHashes is BenchmarkDrainZSets for compact hashes: 30k of
// 100k live hashes, each given a new value for one field since the last
// drain, in a random order, drained with DrainShardsViewTAT. "journal":
// hashes of 16 fields, journaled (a delta per key; the hash holds a
// journal of its own between the write and the drain); "image": hashes of
// 4 fields, under store's smallImage (an image per key).
func BenchmarkDrainHashes(b *testing.B) {
	for _, shape := range []struct {
		name   string
		fields int
	}{{"journal", 16}, {"image", 4}} {
		b.Run(shape.name, func(b *testing.B) {
			const live, dirty = 100_000, 30_000
			const now = 1_000_000
			s := store.New(store.Options{TrackDirty: true})
			keys := make([][]byte, live)
			mk := func() store.Object { return kinds.NewHash() }
			set := func(k []byte, f, v string) {
				if _, err := s.WriteObject(k, store.KindHash, now, mk, func(o store.Object) bool {
					o.(*kinds.Hash).Set(f, v)
					return true
				}); err != nil {
					b.Fatal(err)
				}
			}
			fields := make([]string, shape.fields)
			for f := range fields {
				fields[f] = fmt.Sprintf("f:%012d", f)
			}
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "h:%012d", i)
				for _, f := range fields {
					set(keys[i], f, "0")
				}
			}
			n := 0
			count := func(*store.Change) { n++ }
			_, scratch := s.DrainShardsViewTAT(now, 0, 0, nil, count, nil)
			rng := rand.New(rand.NewPCG(1, 2))
			var cpu int64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				perm := rng.Perm(live)[:dirty]
				for j, k := range perm {
					set(keys[k], fields[j%shape.fields], strconv.Itoa(i+j))
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
		})
	}
}
