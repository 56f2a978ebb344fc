package store

import (
	"fmt"
	"testing"

	"github.com/celld/celld/window"
)

// Every window block of a cache line or more starts on a line (winPad),
// through growth, reuse, deletions and compaction, and the heap's bytes
// are exactly its live blocks plus its garbage (a pad is a dead block of
// 32 bytes). Without the pads, a block of 64 bytes placed after one of 32
// starts 32 bytes into a line: almost half the blocks of bench/window.sh's
// LOG row spanned two lines.
func TestWindowBlocksOnLines(t *testing.T) {
	s := New(Options{})
	now := t0ms
	lg := winLimit(window.Log, 1_000_000, 1<<40)
	fx := winLimit(window.Fixed, 10, 1<<40)
	want := map[string]int64{}
	compactions, misplaced := 0, 0
	check := func(round int) {
		for i := range s.shards {
			sh := s.shardAt(i)
			live := 0
			for j := range sh.slab {
				e := &sh.slab[j]
				if e.flags&flagUsed == 0 || e.kind() != KindWindow || e.tat == 0 || e.winInline() {
					continue
				}
				off, n, size := winUnref(e.tat)
				live += size
				if n > size || off+size > len(sh.win.heap) {
					t.Fatalf("round %d: block at %d of %d bytes holds %d, heap %d", round, off, size, n, len(sh.win.heap))
				}
				if size >= 64 && off%64 != 0 {
					misplaced++
				}
			}
			if len(sh.win.heap) != live+sh.win.garbage {
				t.Fatalf("round %d shard %d: heap %d bytes, live blocks %d + garbage %d", round, i, len(sh.win.heap), live, sh.win.garbage)
			}
		}
	}
	// Names that all go to one shard, so that its heap holds enough
	// blocks and garbage to compact.
	var names []string
	home := s.hashKey([]byte("k0")) >> 56
	for i := 0; len(names) < 400; i++ {
		k := fmt.Sprintf("k%d", i)
		if i%3 == 0 { // FIXED with a long name: a block of 32 bytes
			k = fmt.Sprintf("fixed-with-a-long-name:%d", i)
		}
		if s.hashKey([]byte(k))>>56 == home {
			names = append(names, k)
		}
	}
	sh := s.shardAt(int(home))
	// Two blocks of 32 bytes and a LOG state that outgrows its own: its
	// block of 64 goes at the heap's end, 96 bytes in without the pad.
	var fixed, logs []string
	for _, k := range names {
		if k[0] == 'f' {
			fixed = append(fixed, k)
		} else {
			logs = append(logs, k)
		}
	}
	for _, k := range fixed[:2] {
		if _, err := s.Window([]byte(k), fx, 1, now); err != nil {
			t.Fatal(err)
		}
	}
	for j := range 20 {
		if _, err := s.Window([]byte(logs[0]), lg, 1, now+int64(j)); err != nil {
			t.Fatal(err)
		}
		want[logs[0]]++
	}
	sh.mu.Lock()
	slot, _, ok := sh.findLocked([]byte(logs[0]), s.hashKey([]byte(logs[0])))
	ref := sh.slab[slot].tat
	sh.mu.Unlock()
	if !ok {
		t.Fatal("the LOG key is not there")
	}
	if off, n, size := winUnref(ref); size != 64 || off%64 != 0 {
		t.Errorf("a LOG state of %d bytes in a block of %d at offset %d, want 64 at a multiple of 64", n, size, off)
	}
	for round := range 80 {
		before := len(sh.win.heap)
		for i, k := range names {
			switch {
			case (i+round)%9 == 0 || round%10 == 9 && i%5 != 0: // now and then most keys go
				s.Delete([]byte(k), now)
				delete(want, k)
			case k[0] == 'f':
				if _, err := s.Window([]byte(k), fx, 1, now+int64(round)); err != nil {
					t.Fatal(err)
				}
			default: // LOG states of 1 to ~80 entries: blocks of 32 to 256 bytes
				for range 1 + i%4 {
					if _, err := s.Window([]byte(k), lg, 1, now+int64(round)); err != nil {
						t.Fatal(err)
					}
					want[k]++
				}
			}
		}
		check(round)
		if round%10 == 9 { // most keys just went: compact (as the sweep's shrink does)
			sh.mu.Lock()
			sh.compactWinLocked()
			sh.mu.Unlock()
		}
		if len(sh.win.heap) < before {
			compactions++
			check(round)
		}
	}
	t.Logf("%d compactions, heap %d bytes", compactions, len(sh.win.heap))
	if misplaced > 0 {
		t.Errorf("%d blocks of a line or more did not start on a line", misplaced)
	}
	if compactions == 0 {
		t.Error("no compaction ran: the test did not check the compacted layout")
	}
	for k, n := range want {
		r, err := s.Window([]byte(k), lg, 0, now+100)
		if err != nil || r.Remaining != lg.Limit-n {
			t.Fatalf("%s: %+v %v, want %d units held", k, r, err, n)
		}
	}
}
