package store

import (
	"bytes"
	"fmt"
	"testing"
)

// imgObj is a testObj whose image is its own bytes (a few hundred, as a
// compact sorted set's).
type imgObj struct {
	testObj
	img []byte
}

func (o *imgObj) AppendImage(b []byte) []byte { return append(b, o.img...) }

// TestDumpShardImages: DumpShard hands each object its own image, right
// after images of other lengths (its buffer is reused across the walk's
// keys), and allocates O(1) per shard, not per key: the images were each
// a new buffer grown from 32 bytes before, ~1 KB of garbage per key in a
// base rewrite.
func TestDumpShardImages(t *testing.T) {
	s := New(Options{TrackDirty: true})
	const now = 1_000_000
	want := map[string][]byte{}
	for i := range 2000 {
		k := fmt.Sprintf("k%d", i)
		img := bytes.Repeat([]byte{byte(i)}, 100+(i*37)%400)
		want[k] = img
		if _, err := s.WriteObject([]byte(k), KindZSet, now, func() Object { return &imgObj{img: img} }, func(o Object) bool {
			o.(*imgObj).n = 1
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for i := range NumShards {
		s.DumpShard(i, now, func(c Change) {
			got++
			if w := want[string(c.Key)]; !bytes.Equal(c.Image, w) {
				t.Fatalf("%s: image of %d bytes, want %d", c.Key, len(c.Image), len(w))
			}
		})
	}
	if got != len(want) {
		t.Fatalf("dumped %d keys, want %d", got, len(want))
	}
	allocs := testing.AllocsPerRun(5, func() {
		for i := range NumShards {
			s.DumpShard(i, now, func(Change) {})
		}
	})
	if perShard := allocs / NumShards; perShard > 3 {
		t.Fatalf("DumpShard allocates %.1f times per shard (%.0f keys a shard)", perShard, float64(len(want))/NumShards)
	}
}
