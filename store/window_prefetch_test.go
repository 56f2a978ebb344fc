package store

import (
	"fmt"
	"sync"
	"testing"

	"github.com/celld/celld/window"
)

// dumpChanges is every live key of s with its value and expiry, as DumpShard
// gives them, in a comparable form.
func dumpChanges(s *Store, nowMs int64) map[string]string {
	out := map[string]string{}
	for i := range NumShards {
		s.DumpShard(i, nowMs, func(c Change) {
			out[string(c.Key)] = fmt.Sprintf("%v %d %q %d %v %d %v", c.Kind, c.TAT, c.Text, c.ExpireAtMs, c.WinMode, c.Win, c.IsTAT)
		})
	}
	return out
}

// TestPrefetchWindows: PrefetchWith's block pass (every key's index, and
// indices out of range), and Prefetch beside it, over keys of every sort (LOG keys
// in blocks, inline FIXED and SLIDING keys, a FIXED key in a block for its
// long name, TATs, absent keys) changes nothing, and run concurrently with
// writers that grow, move, expire and delete window blocks (so the heap
// is reallocated and compacted under it) races with nothing (-race) and
// leaves the same store as the writers alone would.
func TestPrefetchWindows(t *testing.T) {
	s := New(Options{TrackDirty: true})
	now := t0ms
	var keys [][]byte
	for i := range 400 {
		keys = append(keys, fmt.Appendf(nil, "k%d", i))
	}
	keys = append(keys, []byte("a-fixed-window-key-whose-name-is-not-inline"))
	modeOf := func(i int) window.Mode {
		switch {
		case i >= 400:
			return window.Fixed
		case i%4 == 1:
			return window.Fixed
		case i%4 == 2:
			return window.Sliding
		}
		return window.Log
	}
	for i, k := range keys {
		switch {
		case i%9 == 8: // absent
		case i%4 == 3 && i < 400:
			if _, err := s.Throttle(k, mustLimit(t, 1_000_000, 1, 1), 1, now*1e6); err != nil {
				t.Fatal(err)
			}
		default:
			for j := range 1 + i%7 {
				if _, err := s.Window(k, winLimit(modeOf(i), 100, 1000), 1, now+int64(j)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	before := dumpChanges(s, now+10)
	s.PrefetchWith(nil, nil, []int32{0})
	hs := make([]uint64, len(keys))
	win := []int32{-1, int32(len(keys)), 1 << 30} // out of range: ignored
	for i := range keys {
		win = append(win, int32(i))
	}
	s.PrefetchWith(keys, hs, win)
	s.PrefetchWith(keys, hs, nil)
	if after := dumpChanges(s, now+10); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("PrefetchWith changed the store")
	}
	if len(before) < 300 {
		t.Fatalf("only %d keys set up", len(before))
	}

	// The same writes with and without prefetchers running beside them.
	writes := func(s *Store) {
		for r := range 40 {
			for i, k := range keys {
				switch {
				case modeOf(i) != window.Log:
					s.Window(k, winLimit(modeOf(i), 100, 1000), 1, now+20+int64(r))
				case (i+r)%11 == 0:
					s.Delete(k, now+20+int64(r))
				default: // logs that grow past their blocks, and shrink
					s.Window(k, winLimit(window.Log, 1000, int64(5+(i+r)%30)), int64(1+r%3), now+20+int64(r))
				}
			}
		}
	}
	a, b := New(Options{TrackDirty: true}), New(Options{TrackDirty: true})
	writes(a)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hs := make([]uint64, len(keys))
			for {
				select {
				case <-stop:
					return
				default:
					if g == 0 {
						b.Prefetch(keys, hs)
					} else {
						b.PrefetchWith(keys, hs, win)
					}
				}
			}
		}()
	}
	writes(b)
	close(stop)
	wg.Wait()
	if da, db := dumpChanges(a, now+60), dumpChanges(b, now+60); fmt.Sprint(da) != fmt.Sprint(db) {
		t.Fatal("the writes left another store with prefetchers running")
	}
}
