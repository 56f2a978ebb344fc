package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/celld/celld/window"
)

func winLimit(m window.Mode, limit, w int64) window.Limit {
	return window.Limit{Mode: m, Limit: limit, WindowMs: w}
}

func TestWindowStoresWithResetAsTTL(t *testing.T) {
	for _, m := range []window.Mode{window.Log, window.Fixed, window.Sliding} {
		s := New(Options{})
		k := []byte("w")
		now := t0ms - t0ms%1000 // aligned, so FIXED's window ends 1000 ms on
		l := winLimit(m, 2, 1000)
		r, err := s.Window(k, l, 1, now)
		if err != nil || r.Limited || r.Remaining != 1 {
			t.Fatalf("%v: first call %+v %v", m, r, err)
		}
		v := mustGet(t, s, "w", now)
		if v.Kind != KindWindow || v.ExpireAtMs != now+r.ResetAfter {
			t.Fatalf("%v: stored %+v, want kind cl.window expiring at now+%d", m, v, r.ResetAfter)
		}
		ver, _ := s.Version(k, now)
		// A peek and a denied call write nothing.
		if r, err := s.Window(k, l, 0, now); err != nil || r.Limited {
			t.Fatalf("%v: peek %+v %v", m, r, err)
		}
		if _, err := s.Window(k, l, 1, now); err != nil {
			t.Fatal(err)
		}
		if r, _ := s.Window(k, l, 1, now); !r.Limited {
			t.Fatalf("%v: third unit allowed: %+v", m, r)
		}
		ver2, _ := s.Version(k, now)
		if _, _ = s.Window(k, l, 1, now); true {
			if ver3, _ := s.Version(k, now); ver3 != ver2 {
				t.Errorf("%v: a denied call changed the version", m)
			}
		}
		if ver2 == ver {
			t.Errorf("%v: an allowed call did not change the version", m)
		}
		// A peek on a missing key creates nothing.
		if _, err := s.Window([]byte("none"), l, 0, now); err != nil {
			t.Fatal(err)
		}
		mustMissing(t, s, "none", now)
	}
}

func TestWindowWrongType(t *testing.T) {
	s := New(Options{})
	now := t0ms
	if _, err := s.Throttle([]byte("tat"), mustLimit(t, 5, 10, 60), 1, now*1e6); err != nil {
		t.Fatal(err)
	}
	putValue(s, "str", now, Value{Raw: "abc", Invalid: true})
	for _, k := range []string{"tat", "str"} {
		if _, err := s.Window([]byte(k), winLimit(window.Log, 5, 1000), 1, now); !errors.Is(err, ErrWrongType) {
			t.Errorf("CL.WINDOW on %s: %v, want ErrWrongType", k, err)
		}
	}
	if _, err := s.Window([]byte("w"), winLimit(window.Fixed, 5, 1000), 1, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Window([]byte("w"), winLimit(window.Sliding, 5, 1000), 1, now); !errors.Is(err, ErrWrongType) {
		t.Errorf("SLIDING on a FIXED key: %v, want ErrWrongType", err)
	}
	if _, err := s.Throttle([]byte("w"), mustLimit(t, 5, 10, 60), 1, now*1e6); !errors.Is(err, ErrWrongType) {
		t.Errorf("CL.THROTTLE on a window key: %v, want ErrWrongType", err)
	}
	if _, err := s.ThrottleIn(0, []byte("w"), mustLimit(t, 5, 10, 60), 1, now*1e6); !errors.Is(err, ErrWrongType) {
		t.Errorf("CL.PTHROTTLE on a window key: %v, want ErrWrongType", err)
	}
	// SET replaces a window key (SET's rule), releasing its block.
	putValue(s, "w", now, Value{TAT: 7})
	if v := mustGet(t, s, "w", now); v.Kind != KindString || v.TAT != 7 {
		t.Errorf("after SET: %+v", v)
	}
	// EXPIRE-style updates keep the window.
	if _, err := s.Window([]byte("w2"), winLimit(window.Log, 5, 1000), 1, now); err != nil {
		t.Fatal(err)
	}
	s.Update([]byte("w2"), now, func(old Value, _ bool) (Value, Action) {
		old.ExpireAtMs = now + 50_000
		return old, Put
	})
	if r, err := s.Window([]byte("w2"), winLimit(window.Log, 5, 1000), 0, now); err != nil || r.Remaining != 4 {
		t.Errorf("window after EXPIRE: %+v %v", r, err)
	}
}

// Window keys are charged and credited exactly: deleting, expiring or
// overwriting them brings used memory back to where it was.
func TestWindowMemoryAccounting(t *testing.T) {
	s := New(Options{})
	base := keysUsed(s)
	now := t0ms
	var keys [][]byte
	for i := range 2000 {
		k := []byte(fmt.Sprintf("win:%d", i))
		keys = append(keys, k)
		m := window.Mode(1 + i%3)
		// LOG keys grow a few entries (moving blocks), the others one write.
		for j := range 1 + i%40 {
			if _, err := s.Window(k, winLimit(m, 1000, 1<<30), 1, now+int64(j)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if used := keysUsed(s); used <= base+2000*entryCost {
		t.Fatalf("2000 window keys charged %d bytes", used-base)
	}
	for i, k := range keys {
		if i%2 == 0 {
			s.Delete(k, now)
		} else {
			putValue(s, string(k), now, Value{TAT: 1})
		}
	}
	for _, k := range keys {
		s.Delete(k, now)
	}
	if used := keysUsed(s); used != base {
		t.Errorf("after deleting every key used memory is %d, want %d", used, base)
	}
}

// States survive the heap moving blocks and compacting around them.
func TestWindowHeapCompaction(t *testing.T) {
	s := New(Options{})
	now := t0ms
	l := winLimit(window.Log, 1_000_000, 1<<40)
	want := map[string]int64{}
	for round := range 60 {
		for i := range 300 {
			k := fmt.Sprintf("k%d", i)
			if (i+round)%7 == 0 {
				s.Delete([]byte(k), now)
				delete(want, k)
				continue
			}
			if _, err := s.Window([]byte(k), l, 1, now+int64(round)); err != nil {
				t.Fatal(err)
			}
			want[k]++
		}
	}
	for k, n := range want {
		r, err := s.Window([]byte(k), l, 0, now+100)
		if err != nil || r.Remaining != l.Limit-n {
			t.Fatalf("%s: %+v %v, want %d units held", k, r, err, n)
		}
	}
	garbage := 0
	for i := range s.shards {
		garbage += s.shardAt(i).win.garbage
	}
	if garbage == 0 {
		t.Log("no garbage left to compact (fine, but the test did not exercise compaction)")
	}
}

// The drain reports a window key with its kind and state; LoadWindow
// brings it back exactly.
func TestWindowDrainAndLoad(t *testing.T) {
	s := New(Options{TrackDirty: true})
	now := t0ms
	l := winLimit(window.Log, 10, 1000)
	for j := range 3 {
		s.Window([]byte("w"), l, 2, now+int64(j))
	}
	changes := s.Drain(now, nil)
	if len(changes) != 1 || changes[0].Kind != KindWindow || changes[0].IsTAT {
		t.Fatalf("drain: %+v", changes)
	}
	c := changes[0]
	r := New(Options{TrackDirty: true})
	if err := r.LoadWindow(c.Key, c.Text, c.ExpireAtMs); err != nil {
		t.Fatal(err)
	}
	if n := r.DirtyKeys(); n != 0 {
		t.Errorf("LoadWindow left %d dirty keys", n)
	}
	a, _ := s.Window([]byte("w"), l, 0, now+500)
	b, _ := r.Window([]byte("w"), l, 0, now+500)
	if a != b || a.Remaining != 4 {
		t.Errorf("restored key answers %+v, original %+v", b, a)
	}
	var dumped []Change
	for i := range NumShards {
		s.DumpShard(i, now, func(c Change) {
			c.Key, c.Text = append([]byte(nil), c.Key...), append([]byte(nil), c.Text...)
			dumped = append(dumped, c)
		})
	}
	if len(dumped) != 1 || dumped[0].Kind != KindWindow || string(dumped[0].Text) != string(c.Text) {
		t.Errorf("DumpShard: %+v", dumped)
	}
}

func TestWindowExpiresAtReset(t *testing.T) {
	s := New(Options{})
	now := t0ms
	if _, err := s.Window([]byte("w"), winLimit(window.Log, 3, 100), 1, now); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, "w", now+100)
	mustMissing(t, s, "w", now+101)
	s.Window([]byte("w"), winLimit(window.Log, 3, 100), 1, now+200)
	// Expired at now+300; the sweep leaves it for its grace (winGrace).
	if n := s.SweepStep(now+300+winGraceMs-1, 1e9); n != 0 {
		t.Errorf("sweep in the grace removed %d keys, want 0", n)
	}
	if n := s.SweepStep(now+300+winGraceMs, 1e9); n != 1 {
		t.Errorf("sweep removed %d keys, want 1", n)
	}
}

func TestWindowZeroAllocs(t *testing.T) {
	for _, m := range []window.Mode{window.Log, window.Fixed, window.Sliding} {
		s := New(Options{TrackDirty: true})
		k := []byte("alloc:window")
		l := winLimit(m, 100, 1000)
		now := t0ms
		for range 200 { // grow the log's block and the scratch buffer
			now++
			s.Window(k, l, 1, now)
		}
		s.Drain(now, nil)
		s.Window(k, l, 1, now)
		allocs := testing.AllocsPerRun(5000, func() {
			now++
			if _, err := s.Window(k, l, 1, now); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocs per call on an existing key", m, allocs)
		}
	}
}

func BenchmarkWindow(b *testing.B) {
	for _, m := range []window.Mode{window.Log, window.Fixed, window.Sliding} {
		b.Run(m.String(), func(b *testing.B) {
			s := New(Options{})
			keys := make([][]byte, 1024)
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("bench:%d", i))
			}
			l := winLimit(m, 100, 1000)
			now := t0ms
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%1024 == 0 {
					now++
				}
				s.Window(keys[i%1024], l, 1, now)
			}
		})
	}
}

// TestWindowBytesPerLogKey pins what a LOG key holding n entries (one unit
// per ms) is charged, the figures docs/cl-window.md gives: the key's entry
// (keyCost) plus its block at 1.5x.
func TestWindowBytesPerLogKey(t *testing.T) {
	for _, c := range []struct {
		n        int
		maxBytes int64
	}{{10, 128}, {100, 464}, {1000, 3152}} {
		s := New(Options{})
		base := keysUsed(s)
		const keys = 100
		for k := range keys {
			key := []byte(fmt.Sprintf("mem:%05d", k))
			for i := range c.n {
				if _, err := s.Window(key, winLimit(window.Log, 1_000_000, 3_600_000), 1, t0ms+int64(i)); err != nil {
					t.Fatal(err)
				}
			}
		}
		per := (keysUsed(s) - base) / keys
		sh := s.shardOf([]byte("mem:00000"))
		sh.mu.Lock()
		slot, _, _ := sh.findLocked([]byte("mem:00000"), s.hashKey([]byte("mem:00000")))
		state := len(sh.winState(slot))
		sh.mu.Unlock()
		t.Logf("LOG key with %d entries: state %d bytes, charged %d bytes", c.n, state, per)
		if per > c.maxBytes {
			t.Errorf("LOG key with %d entries charged %d bytes, want at most %d", c.n, per, c.maxBytes)
		}
	}
}

// churnKeys returns n keys of 15 bytes and a fixed pseudo-random order of
// 65,536 indexes into them (xorshift64): the load of BenchmarkChurn100k
// and BenchmarkWindowVsThrottle.
func churnKeys(n int) (keys [][]byte, order []uint32) {
	keys = make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "ok:%012d", i)
	}
	order = make([]uint32, 1<<16)
	x := uint64(88172645463325252)
	for i := range order {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		order[i] = uint32(x % uint64(n))
	}
	return keys, order
}

// BenchmarkChurn100k is bench/window.sh's load at the store: calls on
// 100,000 keys of 15 bytes drawn at random, the clock moving 1 ms every 75
// calls (75k calls per second, so a key sees about 0.75 calls per second
// and half the calls find their key expired and create it again), with
// dirty tracking on as persistence has it and a drain every 100 ms. Its
// rows compare CL.THROTTLE (burst 1e6, 1 per second, as the script's) with
// CL.WINDOW's modes (100 per 1,000 ms) on equal footing.
func BenchmarkChurn100k(b *testing.B) {
	const nkeys, perMs = 100_000, 75
	keys, order := churnKeys(nkeys)
	run := func(b *testing.B, call func(s *Store, key []byte, nowMs int64)) {
		s := New(Options{TrackDirty: true})
		now := t0ms
		var block []byte
		step := func(i int) {
			if i%perMs == 0 {
				now++
				if now%100 == 0 {
					block = s.DrainFunc(now, block[:0], func(Change) {})
				}
			}
			call(s, keys[order[i&(len(order)-1)]], now)
		}
		for i := range 4 * nkeys { // warm: every key made, the slab grown
			step(i)
		}
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := processCPUNs()
		for i := range b.N {
			step(i)
		}
		if cpu := processCPUNs() - cpu0; cpu > 0 {
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		}
	}
	lim := mustLimit(b, 1_000_000, 1, 1)
	b.Run("throttle", func(b *testing.B) {
		run(b, func(s *Store, key []byte, nowMs int64) { s.Throttle(key, lim, 1, nowMs*1e6) })
	})
	for _, m := range []window.Mode{window.Log, window.Fixed, window.Sliding} {
		l := winLimit(m, 100, 1000)
		b.Run(m.String(), func(b *testing.B) {
			run(b, func(s *Store, key []byte, nowMs int64) { s.Window(key, l, 1, nowMs) })
		})
	}
	// The same calls on keys that never expire during the run (1 per hour,
	// a 1-hour window of 1e6): every call finds its key, so these rows
	// compare the per-call work of the two commands without the churn
	// above, which differs by mode (FIXED's keys all expire at their
	// window's end; a GCRA key lives as long as its TAT is ahead).
	liveLim := mustLimit(b, 1_000_000, 1, 3600)
	b.Run("live/throttle", func(b *testing.B) {
		run(b, func(s *Store, key []byte, nowMs int64) { s.Throttle(key, liveLim, 1, nowMs*1e6) })
	})
	for _, m := range []window.Mode{window.Log, window.Fixed, window.Sliding} {
		l := winLimit(m, 1_000_000, 3_600_000)
		b.Run("live/"+m.String(), func(b *testing.B) {
			run(b, func(s *Store, key []byte, nowMs int64) { s.Window(key, l, 1, nowMs) })
		})
	}
}

// A window key that expires and is made again (FIXED's keys all do at
// every window's end) reuses a dead block of its size: the heap does not
// grow, holds no garbage once the keys are back, and the charge returns
// to what it was; states stay right through the reuse. The names are
// longer than inlineKey: a short name's FIXED state is inline and has no
// block (window_inline_test.go).
func TestWindowBlocksReused(t *testing.T) {
	s := New(Options{})
	l := winLimit(window.Fixed, 10, 1000)
	now := t0ms - t0ms%1000
	heapLen := func() (n, garbage int) {
		for i := range s.shards {
			n += len(s.shardAt(i).win.heap)
			garbage += s.shardAt(i).win.garbage
		}
		return
	}
	const keys = 2000
	name := func(i int) []byte { return fmt.Appendf(nil, "window-block-reuse:%d", i) }
	for i := range keys {
		if _, err := s.Window(name(i), l, 1, now); err != nil {
			t.Fatal(err)
		}
	}
	n0, _ := heapLen()
	if n0 < keys*minWinBlock {
		t.Fatalf("heap %d bytes for %d FIXED keys with long names, want a block each", n0, keys)
	}
	used0 := keysUsed(s)
	for round := 1; round <= 5; round++ {
		now += 2000 // every key has expired (its TTL is its window's end)
		for i := range keys {
			r, err := s.Window(name(i), l, int64(1+i%3), now)
			if err != nil || r.Remaining != 10-int64(1+i%3) {
				t.Fatalf("round %d key %d: %+v %v, want a fresh window", round, i, r, err)
			}
		}
		if n, garbage := heapLen(); n != n0 || garbage != 0 {
			t.Fatalf("round %d: heap %d bytes with %d garbage, want %d and 0", round, n, garbage, n0)
		}
		if used := keysUsed(s); used != used0 {
			t.Fatalf("round %d: used memory %d, want %d", round, used, used0)
		}
	}
	// A LOG state growing out of its block leaves that block for the next
	// key of its size.
	lg := winLimit(window.Log, 1000, 1<<30)
	for j := range 20 {
		if _, err := s.Window([]byte("log"), lg, 1, now+int64(j)); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := s.Window([]byte("log"), lg, 0, now+20); err != nil || r.Remaining != 980 {
		t.Fatalf("log after growing: %+v %v", r, err)
	}
}

// An expired key is absent to CL.WINDOW whatever it held: a call that
// writes makes the window key in its slot (one expiry counted, no
// deletion for persistence, the new state drained), and a call that
// writes nothing removes it on the way, as every lookup does.
func TestWindowOverExpiredKey(t *testing.T) {
	s := New(Options{TrackDirty: true})
	now := t0ms - t0ms%1000
	l := winLimit(window.Fixed, 2, 1000)
	// An expired string: no WRONGTYPE, the window replaces it.
	if _, err := s.Put([]byte("s"), Value{Raw: "text", ExpireAtMs: now + 10}, now, PutAlways, false); err != nil {
		t.Fatal(err)
	}
	// An expired window of another mode, and one of this mode.
	if _, err := s.Window([]byte("w"), winLimit(window.Log, 2, 5), 1, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Window([]byte("f"), l, 2, now); err != nil {
		t.Fatal(err)
	}
	s.Drain(now, nil)
	later := now + 2000
	for _, k := range []string{"s", "w", "f"} {
		r, err := s.Window([]byte(k), l, 1, later)
		if err != nil || r.Limited || r.Remaining != 1 {
			t.Fatalf("%s: %+v %v, want a fresh window", k, r, err)
		}
	}
	if n := s.ExpiredKeys(); n != 3 {
		t.Errorf("expired keys %d, want 3", n)
	}
	if n := s.Len(); n != 3 {
		t.Errorf("%d keys, want 3", n)
	}
	changes := s.Drain(later, nil)
	if len(changes) != 3 {
		t.Fatalf("drained %+v, want three writes", changes)
	}
	for _, c := range changes {
		if c.Deleted || c.Kind != KindWindow || c.ExpireAtMs != later+1000 {
			t.Errorf("drained %+v, want a FIXED window expiring at %d", c, later+1000)
		}
	}
	// Over an expired key, a denied call and a peek write nothing and
	// remove it.
	later += 2000
	if r, err := s.Window([]byte("f"), l, 3, later); err != nil || !r.Limited {
		t.Fatalf("q > limit: %+v %v", r, err)
	}
	if r, err := s.Window([]byte("s"), l, 0, later); err != nil || r.Remaining != 2 {
		t.Fatalf("peek: %+v %v", r, err)
	}
	if n := s.Len(); n != 1 {
		t.Errorf("%d keys after a denial and a peek on expired keys, want 1", n)
	}
	if n := s.ExpiredKeys(); n != 5 {
		t.Errorf("expired keys %d, want 5", n)
	}
	// Both had been drained since their last write: their records carry
	// the expiry, so they go without a deletion record (expire.go).
	changes = s.Drain(later, nil)
	if len(changes) != 0 {
		t.Errorf("drained %+v, want nothing (clean keys expire silently)", changes)
	}
	// The three made again in their slots above left no record either,
	// as before: their new state is their record.
	if n := s.TakeUnloggedExpiries(); n != 2 {
		t.Errorf("unlogged expiries %d, want 2", n)
	}
}
