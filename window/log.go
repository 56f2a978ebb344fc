package window

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// LOG's plain state (mode byte 1, what celld wrote before the header
// format of loghdr.go, which keeps these bytes after its header) is its
// entries, oldest first, each a time (Unix ms) and the number of units
// accepted at it (≥ 1):
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
// Since the header format (loghdr.go) it decides only plain states, the
// ones written before it (each once: the call writes the header form).
// It was the hot part of a LOG call (one pass over every entry: at limit
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
	t, off := varintHead(state)
	if off <= 0 {
		return s, ErrCorrupt
	}
	var n int
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
		// A delta may exceed 2^62 (Load's rule, checkEntries): only a
		// time past int64 is corrupt. main refused deltas over 2^62 here,
		// after writing such a state itself (a unit near −2^63, a window
		// near 2^63): the key then answered "damaged".
		if d == 0 || d > uint64(math.MaxInt64)-uint64(t) {
			return s, ErrCorrupt
		}
		t += int64(d)
	}
	s.used, s.n, s.entries = used, in, entries
	s.last, s.lastT, s.lastCount = at, t, lastCount
	return s, nil
}

// varintHead decodes t₀, the zigzag varint at state[1:] (len(state) ≥
// 2): its value and the offset just past it, or an offset ≤ 0 where
// binary.Varint's n is. With 8 bytes to read, a varint of up to 8 bytes
// (t₀ in ms since the epoch takes 6) is decoded without a loop: the first
// byte without its continuation bit ends it, and three mask-and-shift
// steps pack its 7-bit groups. Else binary.Varint.
func varintHead(state []byte) (int64, int) {
	if len(state) >= 9 {
		x := binary.LittleEndian.Uint64(state[1:])
		if stops := ^x & 0x8080808080808080; stops != 0 {
			n := bits.TrailingZeros64(stops)/8 + 1
			x &= 1<<(uint(n)*8) - 1 // its n bytes (for n = 8 the shift gives 0, and 0 - 1 keeps all)
			x = x&0x007f007f007f007f | x&0x7f007f007f007f00>>1
			x = x&0x00003fff00003fff | x&0x3fff00003fff0000>>2
			x = x&0x000000000fffffff | x&0x0fffffff00000000>>4
			return int64(x>>1) ^ -int64(x&1), 1 + n
		}
	}
	v, n := binary.Varint(state[1:])
	if n <= 0 {
		return 0, n
	}
	return v, 1 + n
}

// applyLog is LOG (spec "LOG") on a plain state (written before the
// header format, loghdr.go): one pass over its entries decides, and the
// new state is written in the header format.
func (l Limit) applyLog(state []byte, now, q int64, next []byte) (Result, []byte, bool, error) {
	var e logEdit
	r, write, err := l.decideLog(state, now, q, &e)
	if err != nil || !write {
		return r, next, false, err
	}
	next = append(next, byte(Log))
	next = append(next, e.head[:e.hn]...)
	next = append(next, state[e.src:e.end]...)
	next = append(next, e.tail[:e.tn]...)
	if next, err = plainToHdrInPlace(next); err != nil {
		return Result{}, next[:0], false, err
	}
	return r, next, true, nil
}

// plainToHdrInPlace rewrites a plain LOG state into the header format in
// its own buffer (growing it if its capacity is short).
func plainToHdrInPlace(plain []byte) ([]byte, error) {
	var hb [64]byte
	hdr, end, err := plainHdr(plain, hb[:0])
	if err != nil {
		return plain, err
	}
	old := len(plain)
	grow := len(hdr) - end
	for range grow {
		plain = append(plain, 0)
	}
	copy(plain[len(hdr):], plain[end:old])
	copy(plain, hdr)
	return plain[:old+grow], nil
}

// logEdit is how an allowed LOG call's new state is made from the old
// one: the mode byte, head, the old state's bytes [src, end) unchanged
// (entries whose deltas stay as they were), then tail.
type logEdit struct {
	head, tail [2 * binary.MaxVarintLen64]byte
	hn, tn     int
	src, end   int
}

// decideLog decides a LOG call and, for an allowed one with q > 0
// (write), how to write its new state (e).
func (l Limit) decideLog(state []byte, now, q int64, e *logEdit) (Result, bool, error) {
	w := l.WindowMs
	s, err := scanLog(state, now, w)
	if err != nil {
		return Result{}, false, err
	}
	if s.entries > 0 && s.lastT > now { // a clock step back: decide as of the newest unit
		now = s.lastT
		if s, err = scanLog(state, now, w); err != nil {
			return Result{}, false, err
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
		return r, false, nil
	}
	r.Remaining = remaining(l.Limit, s.used+q)
	if q == 0 {
		if s.n > 0 {
			r.ResetAfter = s.lastT + w - now
		}
		return r, false, nil
	}
	r.ResetAfter = w
	head, tail := e.head[:0], e.tail[:0]
	switch {
	case s.n == 0: // the window was empty
		head = binary.AppendVarint(head, now)
		head = binary.AppendUvarint(head, uint64(q))
	case s.lastT == now && s.n == 1: // the newest entry is now's and the only one: add to it
		head = binary.AppendVarint(head, now)
		head = binary.AppendUvarint(head, uint64(s.lastCount+q))
	case s.lastT == now: // the newest entry is now's: add to it
		head = binary.AppendVarint(head, s.firstT)
		e.src, e.end = s.first+timeLen(state, s.first), s.last
		tail = binary.AppendUvarint(tail, uint64(now-prevTime(state, s)))
		tail = binary.AppendUvarint(tail, uint64(s.lastCount+q))
	case s.n < MaxLogEntries && s.first == 1:
		// Every entry is still in the window (about half the calls of a
		// key called at a steady rate): the state stays as it is, t₀
		// included, and the new entry goes after it.
		e.src, e.end = 1, len(state)
		tail = binary.AppendUvarint(tail, uint64(now-s.lastT))
		tail = binary.AppendUvarint(tail, uint64(q))
	case s.n < MaxLogEntries:
		head = binary.AppendVarint(head, s.firstT)
		e.src, e.end = s.first+timeLen(state, s.first), len(state)
		tail = binary.AppendUvarint(tail, uint64(now-s.lastT))
		tail = binary.AppendUvarint(tail, uint64(q))
	default: // full: the two oldest become one, at the younger's time
		_, c1 := entryAt(state, s.first)
		c2off, c2 := entryAt(state, s.second)
		head = binary.AppendVarint(head, s.secondT)
		head = binary.AppendUvarint(head, uint64(satAdd(c1, c2)))
		e.src, e.end = c2off, len(state)
		tail = binary.AppendUvarint(tail, uint64(now-s.lastT))
		tail = binary.AppendUvarint(tail, uint64(q))
	}
	e.hn, e.tn = len(head), len(tail)
	return r, true, nil
}

// ApplyInPlace is Apply for a caller that keeps the state in a buffer of
// cap(state) bytes of its own (the store's window block) and can take the
// new state there: when an allowed LOG call's new state fits in
// cap(state), it is written over the old one, and next is state[:its
// length] with inPlace set; no copy of the log is made (the entries that
// stay move down by the bytes the dropped ones took, one memmove). Else
// everything is as Apply: next is built in buf, inPlace is false. A state
// is only ever changed when write is true (never on an error or a denial).
// FIXED and SLIDING, and a state of another mode, go to Apply as they are.
func (l Limit) ApplyInPlace(state []byte, nowMs, q int64, buf []byte) (r Result, next []byte, inPlace, write bool, err error) {
	next, inPlace, write, err = l.ApplyInPlaceTo(&r, state, nowMs, q, buf)
	return r, next, inPlace, write, err
}

// ApplyInPlaceTo is ApplyInPlace with the result written to *r instead of
// returned: the store's hot path. Result has five fields, too many for Go
// to keep in registers, and a returned one was stored field by field and
// then copied with 16-byte loads, which the CPU cannot forward from those
// stores: the copy waited for every store before it to reach the cache
// (in perf of bench/window.sh's LOG row, a fifth of Store.Window's and
// almost half of ApplyInPlace's own samples sat on such copies).
func (l Limit) ApplyInPlaceTo(r *Result, state []byte, nowMs, q int64, buf []byte) (next []byte, inPlace, write bool, err error) {
	if l.Mode != Log || len(state) == 0 || state[0] != logHdr {
		*r, next, write, err = l.Apply(state, nowMs, q, buf)
		return next, false, write, err
	}
	var e hdrEdit
	write, err = l.decideHdr(state, nowMs, q, &e, r)
	if err != nil || !write {
		return buf[:0], false, false, err
	}
	next, inPlace = writeHdr(state, &e, buf, true)
	return next, inPlace, true, nil
}

// timeLen is the length of the time field (t₀'s varint or a delta) of the
// entry at off (validated by scanLog).
func timeLen(state []byte, off int) int {
	if off == 1 {
		_, end := varintHead(state)
		return end - 1
	}
	_, n := binary.Uvarint(state[off:])
	return n
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
