package window

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// base is a time aligned to every window the step tables use (a multiple of
// 10 s), so step times read as offsets into a window.
const base = int64(1_700_000_000_000)

// step is one CL.WINDOW call at base+at ms and the reply it must get.
type step struct {
	at       int64
	mode     Mode
	limit, w int64
	q        int64
	want     [5]int64 // limited, limit, remaining, retry_after_ms, reset_after_ms
	err      error    // ErrMode, ...: nothing written
}

func reply(r Result) [5]int64 {
	l := int64(0)
	if r.Limited {
		l = 1
	}
	return [5]int64{l, r.Limit, r.Remaining, r.RetryAfter, r.ResetAfter}
}

// runSteps plays steps on one key, the way the store does: the state is
// kept between calls, replaced when a call writes, and dropped once its TTL
// (the last write's reset_after_ms) has passed.
func runSteps(t *testing.T, steps []step) {
	t.Helper()
	var state []byte
	exp := int64(0)
	for i, st := range steps {
		now := base + st.at
		if state != nil && now > exp {
			state = nil // the key expired
		}
		l := Limit{Mode: st.mode, Limit: st.limit, WindowMs: st.w}
		before := bytes.Clone(state)
		r, next, write, err := l.Apply(state, now, st.q, nil)
		if st.err != nil || err != nil {
			if !errors.Is(err, st.err) {
				t.Errorf("step %d: %v %d %d q=%d at +%d: error %v, want %v", i, st.mode, st.limit, st.w, st.q, st.at, err, st.err)
			}
			if write {
				t.Errorf("step %d: an error with a write", i)
			}
			continue
		}
		if got := reply(r); got != st.want {
			t.Errorf("step %d: %v %d %d q=%d at +%d = %v, want %v", i, st.mode, st.limit, st.w, st.q, st.at, got, st.want)
		}
		if write != (!r.Limited && st.q > 0) {
			t.Errorf("step %d: write = %v for limited=%v q=%d", i, write, r.Limited, st.q)
		}
		if !bytes.Equal(state, before) {
			t.Errorf("step %d: Apply modified its input state", i)
		}
		if write {
			if r.ResetAfter < 1 {
				t.Errorf("step %d: written with reset_after %d", i, r.ResetAfter)
			}
			state, exp = next, now+r.ResetAfter
		}
	}
}

func TestLogSteps(t *testing.T) {
	s := func(at, q int64, want ...int64) step {
		return step{at: at, mode: Log, limit: 3, w: 1000, q: q, want: [5]int64(want)}
	}
	runSteps(t, []step{
		s(0, 1, 0, 3, 2, -1, 1000),
		s(0, 1, 0, 3, 1, -1, 1000), // same ms: one entry, count 2
		s(100, 1, 0, 3, 0, -1, 1000),
		// full: the oldest unit (t=0) must leave: at 0+1000
		s(200, 1, 1, 3, 0, 800, 900),
		// the two units at 0 left at 1000 (the window is (0, 1000])
		s(1000, 1, 0, 3, 1, -1, 1000),
		// q=3 needs the 2nd-oldest unit gone: units at 100, 1000 → 1000+1000
		s(1000, 3, 1, 3, 1, 1000, 1000),
		s(1000, 4, 1, 3, 1, -1, 1000), // more than the limit: never
		s(1500, 0, 0, 3, 2, -1, 500),  // a peek: the unit at 100 has left; newest at 1000
		s(2000, 0, 0, 3, 3, -1, 0),    // empty (the key expired at 2000)
		s(2000, 3, 0, 3, 0, -1, 1000),
		s(2999, 1, 1, 3, 0, 1, 1),
		s(3001, 0, 0, 3, 3, -1, 0),
	})
}

func TestLogDeniedIsNotRecorded(t *testing.T) {
	// The sorted-set pattern adds every attempt; a denied CL.WINDOW call
	// writes nothing, so a client retrying every 10 ms is let in as soon
	// as the first unit leaves.
	steps := []step{{at: 0, mode: Log, limit: 1, w: 100, q: 1, want: [5]int64{0, 1, 0, -1, 100}}}
	for at := int64(10); at < 100; at += 10 {
		steps = append(steps, step{at: at, mode: Log, limit: 1, w: 100, q: 1, want: [5]int64{1, 1, 0, 100 - at, 100 - at}})
	}
	steps = append(steps, step{at: 100, mode: Log, limit: 1, w: 100, q: 1, want: [5]int64{0, 1, 0, -1, 100}})
	runSteps(t, steps)
}

func TestFixedSteps(t *testing.T) {
	s := func(at, q int64, want ...int64) step {
		return step{at: at, mode: Fixed, limit: 2, w: 1000, q: q, want: [5]int64(want)}
	}
	runSteps(t, []step{
		s(0, 0, 0, 2, 2, -1, 0), // a peek on nothing: no key
		s(100, 1, 0, 2, 1, -1, 900),
		s(200, 1, 0, 2, 0, -1, 800),
		s(300, 1, 1, 2, 0, 700, 700),
		s(999, 0, 0, 2, 0, -1, 1),
		s(1000, 0, 0, 2, 2, -1, 0), // a new window
		s(1000, 3, 1, 2, 2, -1, 0), // never fits, empty window: reset 0
		s(1500, 2, 0, 2, 0, -1, 500),
		s(1500, 0, 0, 2, 0, -1, 500),
		s(2000, 1, 0, 2, 1, -1, 1000),
	})
}

func TestSlidingSteps(t *testing.T) {
	s := func(at, q int64, want ...int64) step {
		return step{at: at, mode: Sliding, limit: 10, w: 1000, q: q, want: [5]int64(want)}
	}
	runSteps(t, []step{
		s(0, 5, 0, 10, 5, -1, 2000),
		// prev 5 weighs 5×500/1000 = 2.5: remaining ⌊7.5⌋
		s(1500, 0, 0, 10, 7, -1, 500),
		// 5×(1000−e) + 8×1000 ≤ 10000 from e = 600: retry 100
		s(1500, 8, 1, 10, 7, 100, 500),
		s(1600, 8, 0, 10, 0, -1, 1400),
		// 5×(1000−e) + 9000 ≤ 10000 from e = 800
		s(1600, 1, 1, 10, 0, 200, 1400),
		// 11 > 10 in this window; next: 8×(1000−e) + 3000 ≤ 10000 from e = 125
		s(1600, 3, 1, 10, 0, 525, 1400),
		s(1600, 11, 1, 10, 0, -1, 1400),
		// two windows on, both counts are 0
		s(3000, 0, 0, 10, 10, -1, 0),
		s(3000, 10, 0, 10, 0, -1, 2000),
		// next window, prev = 10 at full weight: the estimate is full until
		// e = 100 for one unit (10×900 + 1000 = 10000)
		s(4000, 1, 1, 10, 0, 100, 1000),
		s(4100, 1, 0, 10, 0, -1, 1900),
	})
}

func TestWrongMode(t *testing.T) {
	for _, m := range []Mode{Log, Fixed, Sliding} {
		_, state, _, _ := Limit{Mode: m, Limit: 5, WindowMs: 1000}.Apply(nil, base, 1, nil)
		for _, other := range []Mode{Log, Fixed, Sliding} {
			if other == m {
				continue
			}
			if _, _, w, err := (Limit{Mode: other, Limit: 5, WindowMs: 1000}).Apply(state, base, 1, nil); !errors.Is(err, ErrMode) || w {
				t.Errorf("%v state read as %v: err %v write %v, want ErrMode", m, other, err, w)
			}
		}
	}
}

func TestCorruptState(t *testing.T) {
	for _, st := range [][]byte{
		{9},                     // unknown mode
		{byte(Fixed), 1, 2},     // short
		{byte(Sliding), 0},      // short
		{byte(Log), 0x80},       // truncated varint
		{byte(Log), 2, 0},       // count 0
		{byte(Log), 2, 1, 0, 1}, // delta 0
		{byte(Log), 2, 1, 1},    // entry without a count
		append([]byte{byte(Fixed)}, make([]byte, 20)...),
	} {
		m := Mode(st[0])
		if m < Log || m > Sliding {
			m = Log
		}
		if _, _, w, err := (Limit{Mode: m, Limit: 5, WindowMs: 1000}).Apply(st, base, 1, nil); !errors.Is(err, ErrCorrupt) || w {
			t.Errorf("state %x: err %v write %v, want ErrCorrupt", st, err, w)
		}
	}
}

// A clock step back never frees quota: the call is decided as of the
// newest time the state holds.
func TestClockStepBack(t *testing.T) {
	for _, m := range []Mode{Log, Fixed, Sliding} {
		l := Limit{Mode: m, Limit: 2, WindowMs: 1000}
		_, st, _, _ := l.Apply(nil, base+5000, 2, nil)
		r, _, w, err := l.Apply(st, base+4000, 1, nil) // the clock went back 1 s
		if err != nil || !r.Limited || w {
			t.Errorf("%v: after a step back a full window reads %+v write %v err %v, want denied", m, r, w, err)
		}
	}
}

// A log never holds more than MaxLogEntries entries; past it the oldest two
// merge, which can only make the log stricter.
func TestLogEntryCap(t *testing.T) {
	l := Limit{Mode: Log, Limit: 1_000_000, WindowMs: 1 << 40}
	var st []byte
	for i := int64(0); i < 3*MaxLogEntries; i++ {
		r, next, w, err := l.Apply(st, base+i, 1, nil)
		if err != nil || !w || r.Remaining != l.Limit-i-1 {
			t.Fatalf("call %d: %+v write %v err %v", i, r, w, err)
		}
		st = next
		s, _ := scanLog(plainOf(t, st), base+i, l.WindowMs)
		if s.n > MaxLogEntries || s.used != i+1 {
			t.Fatalf("call %d: %d entries holding %d units, want ≤ %d entries holding %d", i, s.n, s.used, MaxLogEntries, i+1)
		}
	}
	if len(st) > 3*MaxLogEntries+32 {
		t.Errorf("a full log of 1-ms entries takes %d bytes", len(st))
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"log": Log, "LOG": Log, "Fixed": Fixed, "sLiDiNg": Sliding} {
		if m, ok := ParseMode([]byte(in)); !ok || m != want {
			t.Errorf("ParseMode(%q) = %v %v", in, m, ok)
		}
	}
	for _, in := range []string{"", "lo", "logs", "fixe", "SLIDINGX", "l0g", "1000"} {
		if m, ok := ParseMode([]byte(in)); ok {
			t.Errorf("ParseMode(%q) = %v, want refused", in, m)
		}
	}
}

// Apply allocates nothing when buf has room.
func TestApplyAllocs(t *testing.T) {
	for _, m := range []Mode{Log, Fixed, Sliding} {
		l := Limit{Mode: m, Limit: 100, WindowMs: 1000}
		buf := make([]byte, 0, 4096)
		st := make([]byte, 0, 4096)
		now := base
		allocs := testing.AllocsPerRun(1000, func() {
			now++
			_, next, w, _ := l.Apply(st, now, 1, buf)
			if w {
				st = append(st[:0], next...)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per call", m, allocs)
		}
	}
}

// ParseMode agrees with a plain case-insensitive compare (strings.EqualFold
// on ASCII) for every byte in every position of each mode's name: the
// masked compare takes both cases of each letter and nothing else (no
// digit, punctuation or control byte, no byte 0x80 or above, stands in for
// a letter).
func TestParseModeEveryByte(t *testing.T) {
	ref := func(b []byte) (Mode, bool) {
		for _, m := range []Mode{Log, Fixed, Sliding} {
			if strings.EqualFold(string(b), m.String()) && len(b) == len(m.String()) {
				return m, true
			}
		}
		return 0, false
	}
	for _, m := range []Mode{Log, Fixed, Sliding} {
		name := []byte(strings.ToLower(m.String()))
		for i := range name {
			for c := range 256 {
				b := bytes.Clone(name)
				b[i] = byte(c)
				gm, gok := ParseMode(b)
				wm, wok := ref(b)
				if gm != wm || gok != wok {
					t.Fatalf("ParseMode(%q) = %v %v, want %v %v", b, gm, gok, wm, wok)
				}
			}
		}
	}
}

// BenchmarkParseMode is the mode word of a CL.WINDOW call.
func BenchmarkParseMode(b *testing.B) {
	for _, w := range []string{"FIXED", "SLIDING", "log", "1000"} {
		b.Run(w, func(b *testing.B) {
			word := []byte(w)
			n := 0
			for b.Loop() {
				if m, _ := ParseMode(word); m != 0 {
					n++
				}
			}
			if (n == 0) != (w == "1000") {
				b.Fatalf("%q parsed %d times", w, n)
			}
		})
	}
}
