package store

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/celld/celld/window"
)

// shardNames returns n key names (prefix + a number) that all hash to
// one shard of s, and that shard.
func shardNames(s *Store, prefix string, n int) ([]string, *shard) {
	home := s.hashKey([]byte(prefix+"0")) >> 56
	var names []string
	for i := 0; len(names) < n; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		if s.hashKey([]byte(k))>>56 == home {
			names = append(names, k)
		}
	}
	return names, s.shardAt(int(home))
}

// heapArray is the address of sh's heap array (0: none). Requires sh.mu.
func heapArray(sh *shard) uintptr {
	if cap(sh.win.heap) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(sh.win.heap)))
}

// TestWindowHeapKeptAfterExpiry: a shard's LOG keys all expire and the
// sweep removes them (compacting the heap, all garbage); the heap, under
// winKeepHeap, keeps its array, and the same keys made again fill it
// without the heap growing: the same array, no reallocation. Before the
// in-place compaction the sweep's compaction replaced the heap with an
// empty one, and the keys made again grew it anew (fails: array changed).
func TestWindowHeapKeptAfterExpiry(t *testing.T) {
	s := New(Options{})
	names, sh := shardNames(s, "wl:", 300)
	l := winLimit(window.Log, 100, 1000)
	now := t0ms
	fill := func(at int64) {
		for i, k := range names {
			for j := range 1 + i%5 { // states of 1 to 5 entries
				if _, err := s.Window([]byte(k), l, 1, at+int64(j)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	fill(now)
	sh.mu.Lock()
	arr, c := heapArray(sh), cap(sh.win.heap)
	used := len(sh.win.heap)
	sh.mu.Unlock()
	if c > winKeepHeap || used < 8192 {
		t.Fatalf("heap of %d bytes (cap %d): the test wants 8 KiB to 64 KiB", used, c)
	}
	// Past the window and the grace: the sweep removes every key.
	now += l.WindowMs + winGraceMs + 10
	for range 10 {
		s.SweepStep(now, time.Second)
	}
	sh.mu.Lock()
	// (The sweep compacts after each batch it removes; what the last
	// batches leave, under 4 KiB, waits as garbage.)
	if sh.used != 0 || len(sh.win.heap) != sh.win.garbage || len(sh.win.heap) >= used/2 {
		t.Fatalf("after the sweep: %d keys, heap %d bytes, garbage %d; want no key and the heap compacted", sh.used, len(sh.win.heap), sh.win.garbage)
	}
	if heapArray(sh) != arr || cap(sh.win.heap) != c {
		t.Errorf("the sweep's compaction replaced the heap (cap %d -> %d): want it kept", c, cap(sh.win.heap))
	}
	sh.mu.Unlock()
	fill(now)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if heapArray(sh) != arr {
		t.Errorf("the keys made again reallocated the heap (cap %d -> %d)", c, cap(sh.win.heap))
	}
	if len(sh.win.heap) > c {
		t.Errorf("heap %d bytes after the same keys were made again, cap %d", len(sh.win.heap), c)
	}
}

// TestWindowHeapShrinksWhenLarge: a heap over winKeepHeap whose keys
// mostly go is moved to a smaller array (memory handed back), while one
// at least a quarter live is compacted in place; the states survive both,
// and the heap's bytes stay its live blocks plus its garbage.
func TestWindowHeapShrinksWhenLarge(t *testing.T) {
	s := New(Options{})
	names, sh := shardNames(s, "big:", 1600)
	l := winLimit(window.Log, 1000, 1<<40)
	now := t0ms
	want := map[string]int64{}
	for _, k := range names {
		for j := range 20 { // ~50-byte states: blocks of 64
			if _, err := s.Window([]byte(k), l, 1, now+int64(j)); err != nil {
				t.Fatal(err)
			}
		}
		want[k] = 20
	}
	check := func(what string) {
		t.Helper()
		live := 0
		for j := range sh.slab {
			e := &sh.slab[j]
			if e.flags&flagUsed == 0 || e.kind() != KindWindow || e.tat == 0 || e.winInline() {
				continue
			}
			off, _, size := winUnref(e.tat)
			if size >= winLine && off%winLine != 0 {
				t.Fatalf("%s: a block of %d at %d, not on a line", what, size, off)
			}
			live += size
		}
		if len(sh.win.heap) != live+sh.win.garbage {
			t.Fatalf("%s: heap %d bytes, live %d + garbage %d", what, len(sh.win.heap), live, sh.win.garbage)
		}
		for k, n := range want {
			if r, err := s.Window([]byte(k), l, 0, now+100); err != nil || r.Remaining != l.Limit-n {
				t.Fatalf("%s: %s: %+v %v, want %d units held", what, k, r, err, n)
			}
		}
	}
	compact := func() {
		sh.mu.Lock()
		sh.compactWinLocked()
		sh.mu.Unlock()
	}
	sh.mu.Lock()
	c0, arr := cap(sh.win.heap), heapArray(sh)
	sh.mu.Unlock()
	if c0 <= winKeepHeap {
		t.Fatalf("heap cap %d, the test wants more than %d", c0, winKeepHeap)
	}
	// Over half garbage but a third live: compacted in place.
	for i, k := range names {
		if i%3 != 0 {
			s.Delete([]byte(k), now)
			delete(want, k)
		}
	}
	compact()
	check("a third live")
	sh.mu.Lock()
	if heapArray(sh) != arr || sh.win.garbage*2 >= len(sh.win.heap) && len(sh.win.heap) > 0 {
		t.Errorf("a third live: heap moved or not compacted (cap %d -> %d, garbage %d of %d)", c0, cap(sh.win.heap), sh.win.garbage, len(sh.win.heap))
	}
	sh.mu.Unlock()
	// A tenth of that left: under a quarter of a large heap, moved.
	for i, k := range names {
		if i%3 == 0 && i%30 != 0 {
			s.Delete([]byte(k), now)
			delete(want, k)
		}
	}
	compact()
	check("a thirtieth live")
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if cap(sh.win.heap) >= c0/4 {
		t.Errorf("a thirtieth live: heap cap %d, want it shrunk from %d", cap(sh.win.heap), c0)
	}
}
