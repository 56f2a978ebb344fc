package store

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/celld/celld/window"
)

// winPack and winUnpack are inverses over the whole range winPack
// accepts, and winPack refuses what does not fit.
func TestWinPackRoundTrip(t *testing.T) {
	const maxStart, maxFixed, maxSlide = 1<<winStartBits - 1, 1<<winHiBits - 1, 1<<winSlideBits - 1
	for _, c := range []struct {
		m  window.Mode
		c  window.Counters
		ok bool
	}{
		{window.Fixed, window.Counters{}, true},
		{window.Fixed, window.Counters{Start: 1_700_000_000_000, Curr: 1}, true},
		{window.Fixed, window.Counters{Start: maxStart, Curr: maxFixed}, true},
		{window.Fixed, window.Counters{Start: maxStart + 1, Curr: 1}, false},
		{window.Fixed, window.Counters{Start: -1000, Curr: 1}, false},
		{window.Fixed, window.Counters{Start: 1000, Curr: maxFixed + 1}, false},
		{window.Fixed, window.Counters{Start: 1000, Curr: math.MaxInt64}, false},
		{window.Fixed, window.Counters{Start: 1000, Prev: 1, Curr: 1}, false},
		{window.Sliding, window.Counters{}, true},
		{window.Sliding, window.Counters{Start: 1_700_000_000_000, Prev: 7, Curr: 9}, true},
		{window.Sliding, window.Counters{Start: maxStart, Prev: maxSlide, Curr: maxSlide}, true},
		{window.Sliding, window.Counters{Start: maxStart, Prev: maxSlide + 1, Curr: 0}, false},
		{window.Sliding, window.Counters{Start: maxStart, Prev: 0, Curr: maxSlide + 1}, false},
		{window.Sliding, window.Counters{Start: -1, Prev: 0, Curr: 1}, false},
		{window.Log, window.Counters{Start: 1}, false},
	} {
		tat, off, ok := winPack(c.m, c.c)
		if ok != c.ok {
			t.Errorf("winPack(%v, %+v) ok = %v, want %v", c.m, c.c, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		e := entry{tat: tat, off: off}
		if !e.winInline() {
			t.Errorf("winPack(%v, %+v): tag %d is not inline", c.m, c.c, tat&0xFF)
		}
		if m, back := winUnpack(tat, off); m != c.m || back != c.c {
			t.Errorf("winUnpack(winPack(%v, %+v)) = %v, %+v", c.m, c.c, m, back)
		}
	}
	// A block reference is never taken for inline counters.
	if e := (entry{tat: winRef(4096, 17, minWinLog)}); e.winInline() {
		t.Error("a block reference reads as inline")
	}
}

// FIXED and SLIDING keys with short names keep their counters in the
// entry: no block, no heap, the charge of a TAT key; the drain, DumpShard,
// KeyMemory and LoadWindow see the same bytes as a block would hold.
func TestWindowInlineState(t *testing.T) {
	for _, m := range []window.Mode{window.Fixed, window.Sliding} {
		s := New(Options{TrackDirty: true})
		base := keysUsed(s)
		now := t0ms
		l := winLimit(m, 100, 1000)
		for i := range 1000 {
			if _, err := s.Window(fmt.Appendf(nil, "in:%d", i), l, 1, now); err != nil {
				t.Fatal(err)
			}
		}
		k := []byte("in:7")
		sh := s.shardOf(k)
		slot, _, _ := sh.findLocked(k, s.hashKey(k))
		if !sh.slab[slot].winInline() {
			t.Fatalf("%v: a short key's state is not inline (tat %#x)", m, sh.slab[slot].tat)
		}
		heap := 0
		for i := range s.shards {
			heap += len(s.shardAt(i).win.heap)
		}
		if heap != 0 {
			t.Errorf("%v: %d heap bytes for inline states", m, heap)
		}
		if used := keysUsed(s) - base; used != 1000*keyCost(4) {
			t.Errorf("%v: 1000 inline keys charged %d, want %d (keyCost each)", m, used, 1000*keyCost(4))
		}
		if n, _ := s.KeyMemory(k, now); n != keyCost(uint32(len(k))) {
			t.Errorf("%v: KeyMemory %d, want %d", m, n, keyCost(uint32(len(k))))
		}
		if _, err := s.Window(k, l, 2, now+1); err != nil {
			t.Fatal(err)
		}
		want := window.AppendCounters(nil, m, window.Counters{Start: now - now%1000, Curr: 3})
		var got []byte
		for _, c := range s.Drain(now+1, nil) {
			if string(c.Key) == string(k) {
				if c.Kind != KindWindow || c.IsTAT || c.ExpireAtMs == 0 {
					t.Errorf("%v: drained %+v", m, c)
				}
				got = append([]byte(nil), c.Text...)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%v: drained state %x, want %x", m, got, want)
		}
		r := New(Options{})
		if err := r.LoadWindow(k, got, now+5000); err != nil {
			t.Fatal(err)
		}
		rsh := r.shardOf(k)
		rslot, _, _ := rsh.findLocked(k, r.hashKey(k))
		if !rsh.slab[rslot].winInline() || len(rsh.win.heap) != 0 {
			t.Errorf("%v: a restored short key's state is not inline", m)
		}
		a, _ := s.Window(k, l, 0, now+2)
		b, _ := r.Window(k, l, 0, now+2)
		if a != b || a.Remaining != 97 {
			t.Errorf("%v: restored key answers %+v, original %+v", m, b, a)
		}
		// Deleting every key brings the charge back (without dirty
		// tracking, whose deletion records are charged).
		u := New(Options{})
		ubase := keysUsed(u)
		for i := range 1000 {
			u.Window(fmt.Appendf(nil, "in:%d", i), l, 1, now)
		}
		u.Put([]byte("in:1"), Value{TAT: 5}, now, PutAlways, false)
		u.Window([]byte("in:1"), l, 1, now)
		for i := range 1000 {
			u.Delete(fmt.Appendf(nil, "in:%d", i), now)
		}
		if used := keysUsed(u); used != ubase {
			t.Errorf("%v: after deleting every key used memory is %d, want %d", m, used, ubase)
		}
	}
}

// The differential test of the two forms: random FIXED and SLIDING calls
// on a short name (inline counters, moving to a block and back when a
// count leaves winPack's range), on a long name (always a block) and on
// the window package's bytes (the model) must answer alike and hold the
// same bytes; COPY and RENAME between short and long names, a drain and
// LoadWindow, and deleting carry the state exactly; and used memory comes
// back to where it started.
func TestWindowInlineAgainstBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 17))
	limits := []int64{1, 2, 100, 1 << 22, 1<<22 + 5, 1 << 45, math.MaxInt64}
	inline, blocks := 0, 0 // states of the short name seen in each form
	for seq := range 300 {
		m := window.Mode(2 + seq%2)
		l := winLimit(m, limits[rng.IntN(len(limits))], []int64{1, 7, 1000, 60_000}[rng.IntN(4)])
		// Half the sequences drain (dirty tracking on); the others check
		// memory, which the deletion records of tracking would charge.
		track := seq/2%2 == 0
		s := New(Options{TrackDirty: track})
		base := keysUsed(s)
		disk := New(Options{})
		short, long := []byte("s:short"), []byte("a-long-window-key-name:0")
		var model []byte
		exp := int64(0)
		now := t0ms + rng.Int64N(l.WindowMs)
		for i := range 60 {
			switch rng.IntN(4) {
			case 0:
			case 1:
				now += rng.Int64N(3)
			case 2:
				now += rng.Int64N(l.WindowMs + 1)
			default:
				now += l.WindowMs + rng.Int64N(2*l.WindowMs+1)
			}
			if model != nil && now > exp {
				model = nil
			}
			var q int64
			switch rng.IntN(6) {
			case 0:
				q = 0
			case 1:
				q = l.Limit
			case 2:
				q = min(l.Limit, 1<<23+rng.Int64N(1<<23))
			case 3:
				q = l.Limit - rng.Int64N(min(l.Limit, 3))
			default:
				q = 1 + rng.Int64N(min(l.Limit, 3))
			}
			want, next, write, err := l.Apply(model, now, q, nil)
			if err != nil {
				t.Fatal(err)
			}
			if write {
				model, exp = next, now+want.ResetAfter
			}
			for _, k := range [][]byte{short, long} {
				got, err := s.Window(k, l, q, now)
				if err != nil || got != want {
					t.Fatalf("seq %d call %d %v limit %d w %d q %d: %q answers %+v %v, model %+v",
						seq, i, m, l.Limit, l.WindowMs, q, k, got, err, want)
				}
				if checkWinState(t, s, k, model, now) {
					inline++
				} else if model != nil && len(k) <= inlineKey {
					blocks++
				}
			}
			switch rng.IntN(10) {
			case 0: // RENAME short -> long and back through a third name
				mustMove(t, s, short, []byte("s:tmp"), now)
				mustMove(t, s, []byte("s:tmp"), short, now)
			case 1: // COPY a long name's block onto a short name, and back
				if _, err := s.Copy(long, []byte("s:copy"), now, true); err != nil {
					t.Fatal(err)
				}
				checkWinState(t, s, []byte("s:copy"), model, now)
				if _, err := s.Copy([]byte("s:copy"), []byte("another-long-key-name"), now, true); err != nil {
					t.Fatal(err)
				}
				checkWinState(t, s, []byte("another-long-key-name"), model, now)
			case 2: // the disk: what the drains wrote, restored
				if !track {
					break
				}
				for _, c := range s.Drain(now, nil) {
					if c.Deleted {
						disk.Unload(c.Key)
					} else if err := disk.LoadWindow(c.Key, c.Text, c.ExpireAtMs); err != nil {
						t.Fatal(err)
					}
				}
				checkWinState(t, disk, short, model, now)
				checkWinState(t, disk, long, model, now)
			}
		}
		if track {
			continue
		}
		for _, k := range [][]byte{short, long, []byte("s:copy"), []byte("another-long-key-name")} {
			s.Delete(k, now)
		}
		if used := keysUsed(s); used != base {
			t.Fatalf("seq %d: used memory %d after deleting everything, want %d", seq, used, base)
		}
	}
	if inline == 0 || blocks == 0 {
		t.Errorf("the short name was inline %d times and in a block %d times: both forms must be exercised", inline, blocks)
	}
	t.Logf("short name: inline %d times, in a block %d times", inline, blocks)
}

func mustMove(t *testing.T, s *Store, src, dst []byte, nowMs int64) {
	t.Helper()
	if _, err := s.Rename(src, dst, nowMs, false); err != nil && err != ErrNoSuchKey {
		t.Fatal(err)
	}
}

// checkWinState checks that key holds model's bytes (nil: no live key), in
// the form its name and counts call for: inline iff the name is short and
// winPack takes the counts.
func checkWinState(t *testing.T, s *Store, key, model []byte, nowMs int64) (inline bool) {
	t.Helper()
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, _, found := sh.findLocked(key, h)
	if !found || !sh.slab[slot].alive(nowMs) {
		if model != nil {
			t.Fatalf("%q: missing, want state %x", key, model)
		}
		return false
	}
	if model == nil {
		t.Fatalf("%q: live with state %x, want none", key, sh.appendWinState(nil, slot))
	}
	if got := sh.appendWinState(nil, slot); !bytes.Equal(got, model) {
		t.Fatalf("%q: state %x, want %x", key, got, model)
	}
	m, c, _ := window.DecodeCounters(model)
	_, _, fits := winPack(m, c)
	if inline = sh.slab[slot].winInline(); inline != (fits && len(key) <= inlineKey) {
		t.Fatalf("%q: inline = %v with counts %+v", key, inline, c)
	}
	return inline
}

// DrainShardsView and DumpShard hand a key with inline counters over as
// numbers (Change.WinMode and Win, no Text), and every other window key
// (a long name, a LOG) as the window package's bytes; the numbers are the
// state the bytes would have been. Drain, for receivers that keep
// changes, still gives bytes for every window key.
func TestDrainViewInlineCounters(t *testing.T) {
	now := t0ms
	for _, m := range []window.Mode{window.Fixed, window.Sliding} {
		s := New(Options{TrackDirty: true})
		l := winLimit(m, 100, 1000)
		short, long := []byte("in:1"), bytes.Repeat([]byte{'w'}, inlineKey+1)
		for _, k := range [][]byte{short, long} {
			s.Window(k, l, 2, now-1000) // the previous window (SLIDING's prev)
			s.Window(k, l, 3, now)
		}
		s.Window([]byte("log"), winLimit(window.Log, 10, 1000), 1, now)
		want := window.Counters{Start: now - now%1000, Curr: 3}
		if m == window.Sliding {
			want.Prev = 2
		}
		seen := 0
		s.DrainShardsView(now, 0, 0, nil, func(c *Change) {
			seen++
			switch {
			case c.Kind != KindWindow || c.Deleted:
				t.Errorf("%v: drained %+v", m, *c)
			case string(c.Key) == string(short):
				if c.WinMode != m || c.Win != want || c.Text != nil || c.ExpireAtMs <= now {
					t.Errorf("%v: inline key drained as %+v, want mode %v counters %+v", m, *c, m, want)
				}
			case c.WinMode != 0:
				t.Errorf("%v: key %q with a block drained as numbers: %+v", m, c.Key, *c)
			case string(c.Key) == string(long) && !bytes.Equal(c.Text, window.AppendCounters(nil, m, want)):
				t.Errorf("%v: long key drained %x, want %x", m, c.Text, window.AppendCounters(nil, m, want))
			}
		})
		if seen != 3 {
			t.Errorf("%v: %d changes drained, want 3", m, seen)
		}
		// DumpShard (the base rewrite's walk) gives the same.
		dumped := 0
		for i := range NumShards {
			s.DumpShard(i, now, func(c Change) {
				dumped++
				switch {
				case string(c.Key) == string(short):
					if c.Kind != KindWindow || c.WinMode != m || c.Win != want || c.Text != nil {
						t.Errorf("%v: DumpShard gave the inline key as %+v", m, c)
					}
				case c.WinMode != 0:
					t.Errorf("%v: DumpShard gave key %q with a block as numbers: %+v", m, c.Key, c)
				case string(c.Key) == string(long) && !bytes.Equal(c.Text, window.AppendCounters(nil, m, want)):
					t.Errorf("%v: DumpShard gave the long key %x", m, c.Text)
				}
			})
		}
		if dumped != 3 {
			t.Errorf("%v: DumpShard gave %d keys, want 3", m, dumped)
		}
		s.Window(short, l, 1, now)
		for _, c := range s.Drain(now, nil) {
			if c.WinMode != 0 || !bytes.Equal(c.Text, window.AppendCounters(nil, m, window.Counters{Start: want.Start, Prev: want.Prev, Curr: 4})) {
				t.Errorf("%v: Drain gave %+v", m, c)
			}
		}
	}
}
