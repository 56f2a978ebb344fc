package data

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/store"
)

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestTenFieldHashTracksHeap: the 10-field hash of bench/types.sh
// (`fieldN valueN`, written as HSET writes a new key) costs what the store
// charges it, against the heap it really takes beyond a TAT key of the
// same name (two stores, after collections and a drain): its 144-byte
// block and its 8-byte slot in the object table (the Hash itself kept in
// the slot, no struct of its own), and MEMORY USAGE is a TAT key's + 158
// (objCost 14 + the block's 144), so the key is charged 238 bytes against
// Redis 7.0.15's 240. A Hash behind a pointer again (8 bytes more of heap
// and charge) or an objCost that drifts from the slot's heap fails it.
func TestTenFieldHashTracksHeap(t *testing.T) {
	n := 40_000
	const now = 1_000_000
	var fields, values [10]string
	for j := range 10 {
		fields[j], values[j] = fmt.Sprint("field", j), fmt.Sprint("value", j)
	}
	key := func(i int) []byte { return fmt.Appendf(nil, "mh:%07d", i) }
	var s *store.Store
	perKey := func(hash bool) (heap, charged float64) {
		s = nil // the last store goes before the measure
		h0 := liveHeap()
		s = store.New(store.Options{TrackDirty: true})
		u0 := s.UsedMemory()
		for i := range n {
			if !hash {
				s.SetMany([][]byte{key(i)}, []store.Value{{TAT: 1}}, now, false)
				continue
			}
			if _, err := s.WriteObject(key(i), store.KindHash, now, func() store.Object { return kinds.NewHash() }, func(o store.Object) bool {
				h := o.(*kinds.Hash)
				h.Presize(10, 120, 6)
				for j := range 10 {
					h.SetTransient(fields[j], values[j])
				}
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if i%10_000 == 0 {
				s.Drain(now, nil)
			}
		}
		s.Drain(now, nil)
		heap = float64(liveHeap()-h0) / float64(n)
		charged = float64(s.UsedMemory()-u0) / float64(n)
		return heap, charged
	}
	hT, cT := perKey(false)
	tatMem, _ := s.KeyMemory(key(1), now)
	runtime.KeepAlive(s)
	hH, cH := perKey(true)
	hashMem, _ := s.KeyMemory(key(1), now)
	runtime.KeepAlive(s)
	r := (cH - cT) / (hH - hT)
	t.Logf("per key: TAT heap %.1f charged %.1f; 10-field hash heap %.1f charged %.1f; the hash: heap %.1f, charged %.1f (%.3f); MEMORY USAGE %d (TAT key %d)",
		hT, cT, hH, cH, hH-hT, cH-cT, r, hashMem, tatMem)
	if hashMem-tatMem != 14+144 {
		t.Errorf("MEMORY USAGE of the hash %d, a TAT key's %d: want the TAT's + 158", hashMem, tatMem)
	}
	if r < 0.9 || r > 1.1 {
		t.Errorf("the hash is charged %.1f B for %.1f B of heap (%.3f), want 0.9-1.1", cH-cT, hH-hT, r)
	}
	if hH-hT >= 144+8+5 { // the block, the slot, the table's slack
		t.Errorf("the hash adds %.1f B of heap, want < 157 (block 144 + slot 8 + slack)", hH-hT)
	}
}
