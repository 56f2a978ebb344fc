package store

import (
	"testing"
	"time"

	"github.com/celld/celld/window"
)

// The sweep leaves an expired window key (FIXED, SLIDING inline; LOG in
// its block) alone for winGraceMs, so that the next call makes it again in
// its own slot (and block) without touching the index; a key past its
// grace is swept at once. Through the grace the key is missing to every
// command.
func TestSweepWindowGrace(t *testing.T) {
	for _, m := range []window.Mode{window.Fixed, window.Sliding, window.Log} {
		t.Run(m.String(), func(t *testing.T) {
			s := New(Options{TrackDirty: true})
			k := []byte("grace:key")
			now := t0ms - t0ms%1000
			l := winLimit(m, 5, 1000)
			r, err := s.Window(k, l, 1, now)
			if err != nil || r.Limited {
				t.Fatalf("first call %+v %v", r, err)
			}
			exp := now + r.ResetAfter
			h := s.hashKey(k)
			sh := s.shardFor(h)
			slot0, _, _ := sh.findLocked(k, h)
			block0 := sh.slab[slot0].tat >> 32 // a LOG key's block offset
			for s.SweepStep(exp+1, time.Second) > 0 {
			}
			if n := s.Len(); n != 1 {
				t.Fatalf("1 ms past its expiry: Len %d after the sweep, want 1 (in its grace)", n)
			}
			// The next call makes it again in the same slot, with the
			// index as it was.
			tombs, used := sh.tombs, sh.used
			at := exp + winGraceMs - 1
			r, err = s.Window(k, l, 1, at)
			if err != nil || r.Limited || r.Remaining != 4 {
				t.Fatalf("call in the grace = %+v %v, want a fresh key's answer", r, err)
			}
			if slot, _, ok := sh.findLocked(k, h); !ok || slot != slot0 || sh.tombs != tombs || sh.used != used {
				t.Errorf("remade in slot %d (found %v), tombs %d used %d; want slot %d, tombs %d used %d",
					slot, ok, sh.tombs, sh.used, slot0, tombs, used)
			}
			if m == window.Log && sh.slab[slot0].tat>>32 != block0 {
				t.Errorf("LOG key remade in the block at %d, want its own at %d", sh.slab[slot0].tat>>32, block0)
			}
			v := mustGet(t, s, "grace:key", at)
			if v.ExpireAtMs != at+r.ResetAfter {
				t.Errorf("remade key expires at %d, want %d", v.ExpireAtMs, at+r.ResetAfter)
			}
			// Left alone, it is swept once its grace is over.
			exp = at + r.ResetAfter
			for s.SweepStep(exp+winGraceMs-1, time.Second) > 0 {
			}
			if n := s.Len(); n != 1 {
				t.Fatalf("within its grace: Len %d, want 1", n)
			}
			if n := s.SweepStep(exp+winGraceMs, time.Second); n != 1 {
				t.Fatalf("sweep at the end of the grace removed %d keys, want 1", n)
			}
			if n := s.Len(); n != 0 {
				t.Fatalf("after its grace: Len %d, want 0", n)
			}
			mustMissing(t, s, "grace:key", exp+winGraceMs)

			// In its grace a key is missing to every command: a peek
			// answers for a missing key, a read finds nothing.
			k2 := []byte("grace:other")
			r, _ = s.Window(k2, l, 1, now)
			exp = now + r.ResetAfter
			for s.SweepStep(exp+1, time.Second) > 0 {
			}
			if r, err := s.Window(k2, l, 0, exp+1); err != nil || r.Remaining != 5 || r.ResetAfter != 0 {
				t.Errorf("peek in the grace = %+v %v, want a missing key's answer", r, err)
			}
			if _, err := s.Window(k2, l, 1, exp+1); err != nil {
				t.Fatal(err)
			}
			for s.SweepStep(exp+2, time.Second) > 0 {
			}
			mustGet(t, s, "grace:other", exp+2) // remade, live
			s.Window(k2, l, 1, now+5000)        // expired: made again
			r, _ = s.Window(k2, l, 0, now+5000)
			if r.Remaining != 4 {
				t.Errorf("after expiry and a call: remaining %d, want 4 (the old counts are gone)", r.Remaining)
			}
		})
	}
}

// A FIXED or SLIDING key found expired in its grace by a call that fits
// takes Window's direct path (windowInlineLocked, not live): it must
// answer, write and count as the general path does for an expired key it
// remakes: a fresh key's reply, the same slot, the index untouched, one
// expiry counted, the key dirty with its new expiry. A call that does not
// fit, or a peek, leaves the direct path (the key is then removed on the
// way, as every lookup does). Compared here with a store whose key, over
// a long name, keeps its counters in a block and so always takes the
// general path.
func TestWindowExpiredInlineRemade(t *testing.T) {
	for _, m := range []window.Mode{window.Fixed, window.Sliding} {
		t.Run(m.String(), func(t *testing.T) {
			l := winLimit(m, 5, 1000)
			now := t0ms - t0ms%1000 + 10
			for _, q := range []int64{1, 5, 6, 0} {
				direct, general := New(Options{TrackDirty: true}), New(Options{TrackDirty: true})
				short, long := []byte("x:key"), []byte("a-long-window-key-name:x")
				for _, c := range []struct {
					s *Store
					k []byte
				}{{direct, short}, {general, long}} {
					if _, err := c.s.Window(c.k, l, 2, now); err != nil {
						t.Fatal(err)
					}
					c.s.DrainFunc(now, nil, func(Change) {})
				}
				h := direct.hashKey(short)
				sh := direct.shardFor(h)
				slot0, _, _ := sh.findLocked(short, h)
				if !sh.slab[slot0].winInline() {
					t.Fatal("the short name's counters are not inline")
				}
				tombs, used := sh.tombs, sh.used
				at := now + 2500 // both modes' keys expired, within the grace
				got, gerr := direct.Window(short, l, q, at)
				want, werr := general.Window(long, l, q, at)
				if got != want || (gerr == nil) != (werr == nil) {
					t.Fatalf("q=%d: direct path %+v %v, general %+v %v", q, got, gerr, want, werr)
				}
				if d, g := direct.ExpiredKeys(), general.ExpiredKeys(); d != 1 || g != 1 {
					t.Errorf("q=%d: expired keys %d (direct) and %d (general), want 1", q, d, g)
				}
				written := q > 0 && q <= l.Limit
				if v, ok := direct.Get(short, at); ok != written || (ok && v.ExpireAtMs != at+got.ResetAfter) {
					t.Errorf("q=%d: key after the call %+v (present %v), want present %v expiring at %d", q, v, ok, written, at+got.ResetAfter)
				}
				if !written {
					continue
				}
				if slot, _, ok := sh.findLocked(short, h); !ok || slot != slot0 || sh.tombs != tombs || sh.used != used {
					t.Errorf("q=%d: remade in slot %d (found %v), tombs %d used %d; want slot %d, tombs %d used %d",
						q, slot, ok, sh.tombs, sh.used, slot0, tombs, used)
				}
				var dirty int
				direct.DrainFunc(at, nil, func(c Change) {
					if string(c.Key) == string(short) && !c.Deleted && c.ExpireAtMs == at+got.ResetAfter {
						dirty++
					}
				})
				if dirty != 1 {
					t.Errorf("q=%d: the remade key drained %d times with its new state, want 1", q, dirty)
				}
			}
		})
	}
}
