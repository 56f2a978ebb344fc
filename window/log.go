package window

import "encoding/binary"

// LOG's state is its entries, oldest first, each a time (Unix ms) and the
// number of units accepted at it (≥ 1):
//
//	[1] varint(t₀) uvarint(c₀) { uvarint(tᵢ − tᵢ₋₁) uvarint(cᵢ) }
//
// Times strictly increase, so a delta is ≥ 1; an entry usually takes 2-3
// bytes (a delta under 128 ms and a count under 128), the first one 7-8.
// An allowed call drops the entries that have left the window and adds its
// units at now (to the newest entry when that is now), so a state holds at
// most min(limit, distinct ms in the window, MaxLogEntries) entries.

// logScan is one pass over a LOG state: what the window [now − w + 1, now]
// holds, and where its entries are in the bytes.
type logScan struct {
	used      int64 // units in the window
	n         int   // entries in the window
	first     int   // offset of the first in-window entry's delta (or t₀)
	firstT    int64 // its time
	second    int   // offset of the second in-window entry's delta, if n ≥ 2
	secondT   int64
	last      int   // offset of the newest entry's delta
	lastT     int64 // the newest entry's time (in the window or not)
	lastCount int64
	entries   int // all entries
}

// scanLog walks state (after its mode byte) for the window ending at now.
//
// It is the hot part of a LOG call (one pass over every entry: at limit
// 100 and a call every ~80 ms per key, a dozen entries), so it decodes
// one-byte deltas and counts (under 128, the common case) and two-byte
// deltas inline, leaves only longer varints to binary.Uvarint, and keeps
// its running values in locals. Same result and errors as the plain
// loop over binary.Varint/Uvarint it replaced (scanLogRef in
// log_scanref_test.go, TestScanLogMatchesReference, FuzzScanLog).
func scanLog(state []byte, now, w int64) (logScan, error) {
	var s logScan
	if len(state) <= 1 {
		return s, nil
	}
	lo := now - w // entries at t > lo are in the window
	t, n := binary.Varint(state[1:])
	if n <= 0 {
		return s, ErrCorrupt
	}
	off := 1 + n
	var (
		used, lastCount int64
		in, entries     int
		at              = 1
	)
	for {
		// The count of the entry whose time field starts at at.
		var c uint64
		if off < len(state) && state[off] < 0x80 {
			c = uint64(state[off])
			off++
		} else {
			if c, n = binary.Uvarint(state[off:]); n <= 0 {
				return s, ErrCorrupt
			}
			off += n
		}
		if c == 0 || c > 1<<63-1 {
			return s, ErrCorrupt
		}
		entries++
		lastCount = int64(c)
		if t > lo {
			switch in {
			case 0:
				s.first, s.firstT = at, t
			case 1:
				s.second, s.secondT = at, t
			}
			in++
			used = satAdd(used, int64(c))
		}
		if off >= len(state) {
			break
		}
		// The next entry's delta.
		at = off
		var d uint64
		if b := state[off]; b < 0x80 {
			d = uint64(b)
			off++
		} else if off+1 < len(state) && state[off+1] < 0x80 {
			d = uint64(b&0x7F) | uint64(state[off+1])<<7 // 128 ms to 16 s apart
			off += 2
		} else {
			if d, n = binary.Uvarint(state[off:]); n <= 0 {
				return s, ErrCorrupt
			}
			off += n
		}
		if d == 0 || d > 1<<62 {
			return s, ErrCorrupt
		}
		t += int64(d)
	}
	s.used, s.n, s.entries = used, in, entries
	s.last, s.lastT, s.lastCount = at, t, lastCount
	return s, nil
}

// applyLog is LOG (spec "LOG").
func (l Limit) applyLog(state []byte, now, q int64, next []byte) (Result, []byte, bool, error) {
	w := l.WindowMs
	s, err := scanLog(state, now, w)
	if err != nil {
		return Result{}, next, false, err
	}
	if s.entries > 0 && s.lastT > now { // a clock step back: decide as of the newest unit
		now = s.lastT
		if s, err = scanLog(state, now, w); err != nil {
			return Result{}, next, false, err
		}
	}
	r := Result{Limit: l.Limit, RetryAfter: -1}
	if !fits(s.used, q, l.Limit) {
		r.Limited = true
		r.Remaining = remaining(l.Limit, s.used)
		if q <= l.Limit {
			// The k-th unit, oldest first, must leave: k = used + q − limit.
			r.RetryAfter = logLeave(state, s, s.used-(l.Limit-q)) + w - now
		}
		if s.n > 0 {
			r.ResetAfter = s.lastT + w - now
		}
		return r, next, false, nil
	}
	r.Remaining = remaining(l.Limit, s.used+q)
	if q == 0 {
		if s.n > 0 {
			r.ResetAfter = s.lastT + w - now
		}
		return r, next, false, nil
	}
	r.ResetAfter = w
	next = append(next, byte(Log))
	switch {
	case s.n == 0: // the window was empty
		next = binary.AppendVarint(next, now)
		next = binary.AppendUvarint(next, uint64(q))
	case s.lastT == now: // the newest entry is now's: add to it
		next = appendLogFrom(next, state, s.first, s.firstT, s.last, s.n == 1)
		if s.n > 1 { // (else the newest is the first, whose time is t₀)
			next = binary.AppendUvarint(next, uint64(now-prevTime(state, s)))
		}
		next = binary.AppendUvarint(next, uint64(s.lastCount+q))
	case s.n < MaxLogEntries:
		next = appendLogFrom(next, state, s.first, s.firstT, len(state), false)
		next = binary.AppendUvarint(next, uint64(now-s.lastT))
		next = binary.AppendUvarint(next, uint64(q))
	default: // full: the two oldest become one, at the younger's time
		_, c1 := entryAt(state, s.first)
		c2off, c2 := entryAt(state, s.second)
		next = binary.AppendVarint(next, s.secondT)
		next = binary.AppendUvarint(next, uint64(satAdd(c1, c2)))
		next = append(next, state[c2off:]...)
		next = binary.AppendUvarint(next, uint64(now-s.lastT))
		next = binary.AppendUvarint(next, uint64(q))
	}
	return r, next, true, nil
}

// entryAt decodes the entry whose time field starts at off (already
// validated by scanLog): it returns the offset just past the entry and its
// count.
func entryAt(state []byte, off int) (end int, count int64) {
	if off == 1 {
		_, n := binary.Varint(state[off:])
		off += n
	} else {
		_, n := binary.Uvarint(state[off:])
		off += n
	}
	c, n := binary.Uvarint(state[off:])
	return off + n, int64(c)
}

// appendLogFrom appends the entries from the one at first (time firstT) up
// to the byte offset end, re-encoding the first one's time as t₀ (the later
// deltas are unchanged). With only the first's time wanted (timeOnly), its
// count is left for the caller to write.
func appendLogFrom(next, state []byte, first int, firstT int64, end int, timeOnly bool) []byte {
	next = binary.AppendVarint(next, firstT)
	if timeOnly {
		return next
	}
	_, n := binary.Uvarint(state[first:])
	if first == 1 {
		_, n = binary.Varint(state[first:])
	}
	return append(next, state[first+n:end]...)
}

// prevTime is the time of the entry before the newest one (n ≥ 2): the
// newest entry's delta subtracted from its time.
func prevTime(state []byte, s logScan) int64 {
	d, _ := binary.Uvarint(state[s.last:])
	return s.lastT - int64(d)
}

// logLeave is the time of the k-th unit (1 ≤ k ≤ used) of the window,
// oldest first.
func logLeave(state []byte, s logScan, k int64) int64 {
	t := s.firstT
	off := s.first
	for {
		var c int64
		if off == s.first {
			off, c = entryAt(state, off)
		} else {
			d, n := binary.Uvarint(state[off:])
			t += int64(d)
			c2, m := binary.Uvarint(state[off+n:])
			off, c = off+n+m, int64(c2)
		}
		if k <= c || off >= len(state) {
			return t
		}
		k -= c
	}
}
