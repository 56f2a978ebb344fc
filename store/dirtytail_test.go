package store

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/celld/celld/gcra"
)

// TestDirtyTailIsTheNextAppend checks the address Throttle and ThrottleIn
// prefetch (dirtyTailLocked): it is where the shard's next dirty-list
// append writes, through the list's growth and a drain's swap to the spare
// list, and 0 when the append would grow the list or nothing is tracked;
// and the line PrefetchWith prefetches (shard.dirtyLine) is that address's
// line after every write and drain. A prefetch of the wrong line costs no
// correctness, only the miss it was for, so this is the test that can see
// it.
func TestDirtyTailIsTheNextAppend(t *testing.T) {
	const now = int64(1_796_007_429_047_000_000)
	lim := mustLimit(t, 1e9, 1e9, 1)
	for _, track := range []bool{false, true} {
		s := New(Options{TrackDirty: track})
		// Keys of one shard, so that every write appends to one list.
		first := []byte("k0")
		sh := s.shardFor(s.hashKey(first))
		var keys [][]byte
		for i := 0; len(keys) < 200; i++ {
			k := []byte(fmt.Sprintf("k%d", i))
			if s.shardFor(s.hashKey(k)) == sh {
				keys = append(keys, k)
			}
		}
		checked := 0
		for round := range 3 {
			for i, k := range keys {
				sh.mu.Lock()
				tail := sh.dirtyTailLocked()
				n, c := len(sh.dirty), cap(sh.dirty)
				line := sh.dirtyLine.Load()
				sh.mu.Unlock()
				// What PrefetchWith prefetches without the lock: the
				// tail's line, published by every change of the list.
				if line != tail&^63 {
					t.Fatalf("track %v, len %d cap %d, round %d: dirtyLine %#x, want the tail's line %#x", track, n, c, round, line, tail&^63)
				}
				if !track || n == c {
					if tail != 0 {
						t.Fatalf("track %v, len %d cap %d: tail %#x, want 0", track, n, c, tail)
					}
				} else if want := uintptr(unsafe.Pointer(&sh.dirty[:n+1][n])); tail != want {
					t.Fatalf("len %d cap %d: tail %#x, want &dirty[%d] = %#x", n, c, tail, n, want)
				}
				var err error
				if i%2 == 0 {
					_, err = s.Throttle(k, lim, 1, now+int64(round))
				} else {
					_, err = s.ThrottleIn(gcra.UnitMillis, k, lim, 1, now+int64(round))
				}
				if err != nil {
					t.Fatal(err)
				}
				if tail == 0 {
					continue
				}
				sh.mu.Lock()
				slot, _, ok := sh.findLocked(k, s.hashKey(k))
				if !ok || len(sh.dirty) != n+1 || uintptr(unsafe.Pointer(&sh.dirty[n])) != tail || sh.dirty[n] != slot {
					t.Fatalf("after writing %q (slot %d, found %v): list len %d, element %d at %#x, want slot %d at the tail %#x",
						k, slot, ok, len(sh.dirty), n, uintptr(unsafe.Pointer(&sh.dirty[min(n, len(sh.dirty)-1)])), tail, slot)
				}
				sh.mu.Unlock()
				checked++
			}
			if track { // the next round appends to the spare list
				s.DrainShardsViewTAT(now/1e6, 0, 0, nil, func(*Change) {}, func([]byte, uint64, int64) {})
			}
		}
		if track && checked < 300 {
			t.Errorf("only %d appends went through a tail address", checked)
		}
	}
}
