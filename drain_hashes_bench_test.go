package main

import (
	"fmt"
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
			benchDrainDirty(b, s, now, live, dirty, func(k, j, i int) {
				set(keys[k], fields[j%shape.fields], strconv.Itoa(i+j))
			})
		})
	}
}
