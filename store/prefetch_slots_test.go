package store

import (
	"fmt"
	"testing"

	"github.com/celld/celld/window"
)

// TestPrefetchKeepsSlots: the entry pass keeps, for each of a batch's
// first keptSlots keys, the slot the key's lookup finds (-1 for a key
// never stored, or past the probe: entrySlot's answer), which the window pass then uses instead of reading the
// index again; keys past keptSlots keep nothing. A slot kept for the
// wrong key (an index off by one) or not kept fails it.
func TestPrefetchKeepsSlots(t *testing.T) {
	s := New(Options{})
	l := winLimit(window.Log, 100, 1000)
	for i := range 5000 {
		if i%5 == 4 {
			continue // never stored
		}
		if _, err := s.Window(fmt.Appendf(nil, "w:%d", i), l, 1, t0ms); err != nil {
			t.Fatal(err)
		}
	}
	kept := 0
	for start := 0; start < 5000; start += keptSlots + 16 {
		var hs []uint64
		var keys [][]byte
		for i := start; i < start+keptSlots+16; i++ {
			k := fmt.Appendf(nil, "w:%d", i)
			keys, hs = append(keys, k), append(hs, s.hashKey(k))
		}
		var slots [keptSlots]int32
		for i := range slots {
			slots[i] = -2 // not written
		}
		s.prefetchEntries(hs, &slots)
		for i, k := range keys[:keptSlots] {
			sh := s.shardFor(hs[i])
			sh.mu.Lock()
			slot, _, ok := sh.findLocked(k, hs[i])
			sh.mu.Unlock()
			want := int32(-1) // what the window pass looked up before
			if sl, found := sh.view.Load().entrySlot(hs[i]); found {
				want = int32(sl)
			}
			if slots[i] != want || slots[i] >= 0 && (!ok || slots[i] != int32(slot)) {
				t.Fatalf("%s (batch index %d): kept slot %d, want %d (the key's slot %d, found %v)", k, i, slots[i], want, slot, ok)
			}
			if ok && slots[i] >= 0 {
				kept++
			}
		}
	}
	if kept < 2000 {
		t.Errorf("only %d slots kept for 4000 stored keys", kept)
	}
}
