package window

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// Brute-force references, written from the contract alone: each keeps the
// list of accepted calls (time, quantity) and recomputes every reply field
// from it on every call, with no encoding and no incremental state. The
// fuzz test below plays random call sequences on Limit.Apply and on the
// reference and requires the same reply at every step.

type event struct{ t, q int64 }

type ref struct {
	mode     Mode
	accepted []event // in time order
}

// window returns the (t, q) pairs with lo < t ≤ hi.
func (f *ref) sum(lo, hi int64) int64 {
	n := int64(0)
	for _, e := range f.accepted {
		if e.t > lo && e.t <= hi {
			n += e.q
		}
	}
	return n
}

func (f *ref) apply(l Limit, now, q int64) Result {
	switch f.mode {
	case Log:
		return f.log(l, now, q)
	case Fixed:
		return f.fixed(l, now, q)
	}
	return f.sliding(l, now, q)
}

// log: used = units at now − w < t ≤ now; denied: the (used+q−limit)-th
// unit oldest first must leave; reset: newest unit + w − now. Past
// MaxLogEntries distinct times in the window, the units of the oldest time
// move to the second oldest (the cap's documented rule).
func (f *ref) log(l Limit, now, q int64) Result {
	w := l.WindowMs
	if n := len(f.accepted); n > 0 && f.accepted[n-1].t > now {
		now = f.accepted[n-1].t
	}
	used := f.sum(now-w, now)
	var units []int64 // every unit in the window, oldest first (small tests only)
	var newest int64 = -1
	for _, e := range f.accepted {
		if e.t > now-w && e.t <= now {
			newest = e.t
			if used <= 1<<12 {
				for range e.q {
					units = append(units, e.t)
				}
			}
		}
	}
	r := Result{Limit: l.Limit, RetryAfter: -1}
	if newest >= 0 {
		r.ResetAfter = newest + w - now
	}
	if used+q > l.Limit {
		r.Limited = true
		r.Remaining = max(0, l.Limit-used)
		if q <= l.Limit {
			k := used + q - l.Limit
			var tk int64
			if int(k) <= len(units) {
				tk = units[k-1]
			} else { // huge counts: walk the entries
				for _, e := range f.accepted {
					if e.t > now-w && e.t <= now {
						if k <= e.q {
							tk = e.t
							break
						}
						k -= e.q
					}
				}
			}
			r.RetryAfter = tk + w - now
		}
		return r
	}
	r.Remaining = max(0, l.Limit-used-q)
	if q > 0 {
		var times []int64
		for _, e := range f.accepted {
			if e.t > now-w && (len(times) == 0 || times[len(times)-1] != e.t) {
				times = append(times, e.t)
			}
		}
		if len(times) == MaxLogEntries && times[len(times)-1] != now {
			for i := range f.accepted {
				if f.accepted[i].t == times[0] {
					f.accepted[i].t = times[1]
				}
			}
		}
		f.accepted = append(f.accepted, event{now, q})
		r.ResetAfter = w
	}
	return r
}

func start(t, w int64) int64 {
	s := t / w * w
	if s > t {
		s -= w
	}
	return s
}

// fixed: used = units accepted in now's epoch-aligned window.
func (f *ref) fixed(l Limit, now, q int64) Result {
	w := l.WindowMs
	s := start(now, w)
	used := f.sum(s-1, s+w-1)
	r := Result{Limit: l.Limit, RetryAfter: -1}
	if used+q > l.Limit {
		r.Limited = true
		if q <= l.Limit {
			r.RetryAfter = s + w - now
		}
	} else {
		used += q
		if q > 0 {
			f.accepted = append(f.accepted, event{now, q})
		}
	}
	r.Remaining = max(0, l.Limit-used)
	if used > 0 {
		r.ResetAfter = s + w - now
	}
	return r
}

// slidingFitsAt is the contract's condition at time t for the accepted
// calls, with big-enough integers (the tests keep products below 2^62).
func (f *ref) slidingFitsAt(l Limit, t, q int64) bool {
	w := l.WindowMs
	s := start(t, w)
	prev, curr := f.sum(s-w-1, s-1), f.sum(s-1, s+w-1)
	return prev*(w-(t-s))+(curr+q)*w <= l.Limit*w
}

func (f *ref) sliding(l Limit, now, q int64) Result {
	w := l.WindowMs
	s := start(now, w)
	r := Result{Limit: l.Limit, RetryAfter: -1}
	if !f.slidingFitsAt(l, now, q) {
		r.Limited = true
		if q <= l.Limit {
			d := int64(1)
			for !f.slidingFitsAt(l, now+d, q) {
				d++
			}
			r.RetryAfter = d
		}
	} else if q > 0 {
		f.accepted = append(f.accepted, event{now, q})
	}
	prev, curr := f.sum(s-w-1, s-1), f.sum(s-1, s+w-1)
	num := l.Limit*w - prev*(w-(now-s)) - curr*w
	r.Remaining = max(0, num/w) // num/w truncates toward 0; negative → 0 anyway
	if n := len(f.accepted); n > 0 {
		if end := start(f.accepted[n-1].t, w) + 2*w; end > now {
			r.ResetAfter = end - now
		}
	}
	return r
}

// play runs one sequence of calls on Apply and on the reference.
func play(t *testing.T, mode Mode, limit, w int64, calls []event) {
	t.Helper()
	f := &ref{mode: mode}
	l := Limit{Mode: mode, Limit: limit, WindowMs: w}
	var state []byte
	exp := int64(0)
	buf := make([]byte, 0, 64)
	for i, c := range calls {
		if state != nil && c.t > exp {
			state = nil      // the key's TTL passed: the store drops it
			f.accepted = nil // (only a clock step back could tell)
		}
		want := f.apply(l, c.t, c.q)
		got, next, write, err := l.Apply(state, c.t, c.q, buf)
		if err != nil {
			t.Fatalf("%v %d %d call %d (t=+%d q=%d): %v", mode, limit, w, i, c.t-base, c.q, err)
		}
		if got != want {
			t.Fatalf("%v limit %d window %d, call %d (t=+%d q=%d): got %v, reference %v\ncalls %v",
				mode, limit, w, i, c.t-base, c.q, reply(got), reply(want), calls[:i+1])
		}
		if mode != Log {
			checkCounters(t, l, state, c.t, c.q, got, next, write)
		} else {
			checkInPlace(t, l, state, c.t, c.q, got, next, write)
			checkForms(t, l, state, c.t, c.q, got, next, write)
		}
		if got.Remaining < 0 || got.Remaining > limit {
			t.Fatalf("call %d: remaining %d outside [0, %d]", i, got.Remaining, limit)
		}
		if write {
			state = append(state[:0:0], next...)
			exp = c.t + got.ResetAfter
			buf = next[:0]
		}
	}
}

// checkCounters checks that ApplyCounters on state's numbers decides as
// Apply did on its bytes (r, next, write), and that the numbers it returns
// encode to Apply's bytes: the store keeps short keys' FIXED and SLIDING
// state as numbers, so both forms must be one implementation.
func checkCounters(t *testing.T, l Limit, state []byte, now, q int64, r Result, next []byte, write bool) {
	t.Helper()
	var c Counters
	if len(state) > 0 {
		m, dc, ok := DecodeCounters(state)
		if !ok || m != l.Mode {
			t.Fatalf("DecodeCounters(%x) = %v, %v, %v", state, m, dc, ok)
		}
		if back := AppendCounters(nil, m, dc); !bytes.Equal(back, state) {
			t.Fatalf("AppendCounters(DecodeCounters(%x)) = %x", state, back)
		}
		c = dc
	}
	cr, cn, cw, err := l.ApplyCounters(c, len(state) > 0, now, q)
	if err != nil || cr != r || cw != write {
		t.Fatalf("ApplyCounters = %v, %v, %v; Apply = %v, %v", reply(cr), cw, err, reply(r), write)
	}
	if write {
		if enc := AppendCounters(nil, l.Mode, cn); !bytes.Equal(enc, next) {
			t.Fatalf("ApplyCounters wrote %x, Apply %x", enc, next)
		}
	}
	// ApplyCountersTo (the store's path) into a Result holding junk: it
	// must set every field, on every branch.
	tr := Result{Limited: !r.Limited, Limit: -7, Remaining: -8, RetryAfter: -9, ResetAfter: -10}
	tn, tw, err := l.ApplyCountersTo(&tr, c, len(state) > 0, now, q)
	if err != nil || tr != r || tw != write || tn != cn {
		t.Fatalf("ApplyCountersTo = %v, %v, %v, %v; Apply = %v, %v", reply(tr), tn, tw, err, reply(r), write)
	}
}

// checkInPlace checks that ApplyInPlace on state held in a buffer of
// its own decides as Apply did (r, next, write) and leaves that buffer
// holding Apply's bytes: in place when they fit the buffer's capacity
// (tried at the state's own length, so that a growing log cannot fit,
// and at room to spare), else built in the scratch buffer, with the state
// untouched; and untouched when nothing is written.
func checkInPlace(t *testing.T, l Limit, state []byte, now, q int64, r Result, next []byte, write bool) {
	t.Helper()
	for _, room := range []int{0, 1, 3, 64} {
		blk := make([]byte, len(state), len(state)+room)
		copy(blk, state)
		scratch := make([]byte, 0, 16)
		ir, inext, inPlace, iw, err := l.ApplyInPlace(blk, now, q, scratch)
		if err != nil || ir != r || iw != write {
			t.Fatalf("ApplyInPlace(room %d) = %v, %v, %v; Apply = %v, %v", room, reply(ir), iw, err, reply(r), write)
		}
		if !bytes.Equal(inext, next) {
			t.Fatalf("ApplyInPlace(room %d) wrote %x, Apply %x (state %x)", room, inext, next, state)
		}
		fits := write && len(next) <= cap(blk) && len(state) > 0
		if inPlace != fits {
			t.Fatalf("ApplyInPlace(room %d): in place %v, want %v (state %d bytes, new %d)", room, inPlace, fits, len(state), len(next))
		}
		if inPlace && &inext[0] != &blk[:1][0] {
			t.Fatalf("ApplyInPlace(room %d): in place, but not in the state's buffer", room)
		}
		if !inPlace && !bytes.Equal(blk, state) {
			t.Fatalf("ApplyInPlace(room %d) changed the state without writing in place: %x, was %x", room, blk, state)
		}
	}
}

// calls makes a random sequence: bursts inside one ms, quantity 0, gaps
// longer than the window, non-decreasing time.
func calls(rng *rand.Rand, limit, w int64, n int) []event {
	out := make([]event, n)
	t := base + rng.Int64N(10*w+1)
	for i := range out {
		switch rng.IntN(6) {
		case 0: // same ms
		case 1:
			t += 1 + rng.Int64N(3)
		case 2:
			t += rng.Int64N(w + 1)
		case 3:
			t += w + rng.Int64N(3*w+1) // a gap longer than the window
		default:
			t += rng.Int64N(w/4 + 1)
		}
		var q int64
		switch rng.IntN(8) {
		case 0:
			q = 0
		case 1:
			q = limit
		case 2:
			q = limit + 1 + rng.Int64N(2)
		case 3:
			q = rng.Int64N(limit + 1)
		default:
			q = 1 + rng.Int64N(min(limit, 3))
		}
		out[i] = event{t, q}
	}
	return out
}

func TestAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		mode := Mode(1 + i%3)
		limit := []int64{1, 2, 3, 5, 10, 100, 1_000_000}[rng.IntN(7)]
		w := []int64{1, 2, 7, 100, 1000}[rng.IntN(5)]
		play(t, mode, limit, w, calls(rng, limit, w, 1+rng.IntN(60)))
	}
}

// A full log: more distinct ms in the window than MaxLogEntries.
func TestAgainstReferenceFullLog(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var cs []event
	tm := base
	for range 3 * MaxLogEntries {
		tm += 1 + rng.Int64N(2)
		q := int64(1 + rng.IntN(3))
		if rng.IntN(10) == 0 {
			q = 0
		}
		cs = append(cs, event{tm, q})
	}
	play(t, Log, 1_000_000, 2*MaxLogEntries, cs)
	play(t, Log, 1500, 2*MaxLogEntries, cs)
}

// FuzzApply decodes a call sequence from the fuzzer's bytes.
func FuzzApply(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint16(100), []byte{1, 2, 3, 0, 0, 5, 200, 1})
	f.Add(uint8(1), uint8(6), uint16(1), []byte{0, 0, 0, 0, 9, 9})
	f.Add(uint8(2), uint8(3), uint16(1000), []byte{7, 1, 7, 2, 7, 3, 255, 255})
	f.Fuzz(func(t *testing.T, m, li uint8, w16 uint16, prog []byte) {
		mode := Mode(1 + m%3)
		limit := []int64{1, 2, 3, 5, 10, 100, 1_000_000}[li%7]
		w := int64(w16%5000) + 1
		var cs []event
		tm := base
		for len(prog) >= 2 && len(cs) < 200 {
			d, n := binary.Uvarint(prog)
			if n <= 0 {
				break
			}
			prog = prog[n:]
			if len(prog) == 0 {
				break
			}
			qb := prog[0]
			prog = prog[1:]
			tm += int64(d % uint64(4*w+1))
			var q int64
			switch qb >> 6 {
			case 0:
				q = int64(qb & 63 % 4)
			case 1:
				q = limit
			case 2:
				q = limit + int64(qb&1)
			default:
				q = int64(qb&63) % (limit + 1)
			}
			cs = append(cs, event{tm, q})
		}
		play(t, mode, limit, w, cs)
	})
}
