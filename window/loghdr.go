package window

import (
	"encoding/binary"
	"math"
)

// A LOG state with a header (logHdr, what every allowed LOG call writes
// since session 18): the entries as in the plain format (log.go), after a
// header that carries what a pass over all of them would compute:
//
//	[4] uvarint(n) uvarint(total) uvarint(span) varint(t₀) uvarint(c₀) { uvarint(tᵢ − tᵢ₋₁) uvarint(cᵢ) }
//
// n is the number of entries, total the sum of their counts (< 2^63), span
// the newest entry's time minus t₀. Everything from t₀ on is the plain
// format's bytes after its mode byte, so the plain format's helpers read
// it at the header's end. The header costs 3 bytes for up to 127 entries,
// 127 units and a span under 128 ms, 6 bytes up to 16,383 of each: a log
// of 10, 100 or 1,000 entries one ms apart still fits the block of 32,
// 256 or 2,048 bytes its plain form took.
//
// An allowed call reads the header, walks only the entries that leave the
// window (from the front: their counts come off total), and writes a new
// header, the entries that stay (unchanged bytes, moved down by what the
// dropped ones and a shorter header took) and its own entry at the end
// (or adds to the newest one, whose count is the state's last varint,
// found backwards). A denied call walks the window's entries up to the
// unit that must leave (RetryAfter), as before.
//
// The header is trusted: a call does not check it against the entries
// (that would be the pass it saves). Every path that brings a state in
// from outside the process (restore, replication) goes through Load,
// which checks it and converts a plain state; a call never indexes out of
// its bytes, whatever they hold (a damaged state answers ErrCorrupt or a
// wrong count, never a panic).
const logHdr byte = 4

// stateMode is the Mode a state's first byte stands for.
func stateMode(b byte) (Mode, bool) {
	switch {
	case b == logHdr:
		return Log, true
	case Mode(b) >= Log && Mode(b) <= Sliding:
		return Mode(b), true
	}
	return 0, false
}

// uvAt decodes the uvarint at b[off:]: its value and the offset past it,
// or -1 when it does not decode. The hot loops test for a one-byte varint
// (a count or a delta under 128) themselves and call it for the rest (a
// function with a call in it is too costly for Go to inline).
func uvAt(b []byte, off int) (uint64, int) {
	if uint(off) < uint(len(b)) && b[off] < 0x80 {
		return uint64(b[off]), off + 1
	}
	if off+1 < len(b) && b[off+1] < 0x80 && off >= 0 {
		return uint64(b[off]&0x7F) | uint64(b[off+1])<<7, off + 2
	}
	if off >= len(b) || off < 0 {
		return 0, -1
	}
	v, n := binary.Uvarint(b[off:])
	if n <= 0 {
		return 0, -1
	}
	return v, off + n
}

// hdrLog is a header-format state's header, decoded.
type hdrLog struct {
	n, total, span uint64
	t0             int64
	tAt            int // offset of t₀'s varint
	c0             int // offset of c₀
}

// readHdr decodes state's header (state[0] == logHdr) into h. A pointer
// rather than a returned struct: the caller kept a returned hdrLog with
// six 8-byte stores and copied it with 16-byte loads, which the CPU cannot
// forward from those stores: a stall in every LOG call (in perf of
// bench/window.sh's LOG row, ~a fifth of decideHdr's samples sat on that
// copy).
func readHdr(state []byte, h *hdrLog) (ok bool) {
	off := 1
	if len(state) > 4 && state[1]|state[2] < 0x80 { // n and total under 128
		h.n, h.total, off = uint64(state[1]), uint64(state[2]), 3
	} else {
		if h.n, off = uvAt(state, off); off < 0 {
			return false
		}
		if h.total, off = uvAt(state, off); off < 0 {
			return false
		}
	}
	if h.span, off = uvAt(state, off); off < 0 {
		return false
	}
	h.tAt = off
	// varintHead reads the varint at [1:] of the slice it is given.
	t0, end := varintHead(state[off-1:])
	if end <= 0 {
		return false
	}
	h.t0, h.c0 = t0, off-1+end
	return h.n > 0 && h.c0 < len(state)
}

// appendHdr appends a header (mode byte included) and t₀.
func appendHdr(b []byte, n, total, span uint64, t0 int64) []byte {
	b = append(b, logHdr)
	b = binary.AppendUvarint(b, n)
	b = binary.AppendUvarint(b, total)
	b = binary.AppendUvarint(b, span)
	return binary.AppendVarint(b, t0)
}

// hdrEdit is how an allowed LOG call's new state is made from a
// header-format one: head (mode byte, header, t₀, and for a merge the
// first count), the old state's bytes [src, end), then tail.
type hdrEdit struct {
	head     [64]byte
	tail     [2 * binary.MaxVarintLen64]byte
	hn, tn   int
	src, end int
}

// decideHdr decides a LOG call on a header-format state into r and, for
// an allowed one with q > 0 (write), how to write its new state (e). r is
// written through, not returned: Result has five fields, so Go keeps it
// in memory, and a returned one was stored field by field and copied
// with 16-byte loads that the CPU cannot forward from those stores (a
// stall per call; see readHdr).
// Cost: the header, the entries that leave the window; a denied call
// also walks the window's entries up to the unit that must leave.
func (l Limit) decideHdr(state []byte, now, q int64, e *hdrEdit, r *Result) (bool, error) {
	w := l.WindowMs
	var (
		t, lastT int64 // the first entry in the window's time, the newest's
		cAt      int   // the first entry in the window's count's offset
		used     int64 // units in the window
		in       uint64
	)
	if len(state) > 0 {
		var h hdrLog
		if !readHdr(state, &h) {
			*r = Result{}
			return false, ErrCorrupt
		}
		lastT = h.t0 + int64(h.span)
		if lastT > now { // a clock step back: decide as of the newest unit
			now = lastT
		}
		lo := now - w // entries at t > lo are in the window
		// Drop the entries at t ≤ lo, from the front; k counts them.
		t, cAt, used = h.t0, h.c0, int64(h.total)
		k := uint64(0)
		for t <= lo {
			var c, d uint64
			var off, next int
			if uint(cAt) < uint(len(state)) && state[cAt] < 0x80 {
				c, off = uint64(state[cAt]), cAt+1
			} else if c, off = uvAt(state, cAt); off < 0 {
				*r = Result{}
				return false, ErrCorrupt
			}
			used -= int64(c)
			if k++; k == h.n || off >= len(state) {
				k = h.n
				break
			}
			if state[off] < 0x80 {
				d, next = uint64(state[off]), off+1
			} else if d, next = uvAt(state, off); next < 0 {
				*r = Result{}
				return false, ErrCorrupt
			}
			t, cAt = t+int64(d), next
		}
		in = h.n - k // entries in the window
		if in == 0 || used < 0 {
			in, used = 0, 0
		} else if cAt >= len(state) {
			*r = Result{}
			return false, ErrCorrupt // a header that promises more entries than there are
		}
	}
	*r = Result{Limit: l.Limit, RetryAfter: -1}
	if !fits(used, q, l.Limit) {
		r.Limited = true
		r.Remaining = remaining(l.Limit, used)
		if q <= l.Limit {
			// The k-th unit, oldest first, must leave: k = used + q − limit.
			r.RetryAfter = leaveFrom(state, cAt, t, used-(l.Limit-q)) + w - now
		}
		if in > 0 {
			r.ResetAfter = lastT + w - now
		}
		return false, nil
	}
	r.Remaining = remaining(l.Limit, used+q)
	if q == 0 {
		if in > 0 {
			r.ResetAfter = lastT + w - now
		}
		return false, nil
	}
	r.ResetAfter = w
	total := uint64(used + q)
	head := e.head[:0]
	tail := e.tail[:0]
	switch {
	case in == 0: // the window was empty
		head = appendHdr(head, 1, uint64(q), 0, now)
		tail = binary.AppendUvarint(tail, uint64(q))
		e.src, e.end = 0, 0
	case lastT == now: // the newest entry is now's: add to it
		// Its count is the state's last uvarint: the byte that ends it
		// and the bytes before with the continuation bit.
		j := len(state) - 1
		for j > cAt && state[j-1] >= 0x80 {
			j--
		}
		c, end := uvAt(state, j)
		if end != len(state) {
			*r = Result{}
			return false, ErrCorrupt
		}
		head = appendHdr(head, in, total, uint64(now-t), t)
		e.src, e.end = cAt, j
		tail = binary.AppendUvarint(tail, satAddU(c, uint64(q)))
	case in < MaxLogEntries:
		head = appendHdr(head, in+1, total, uint64(now-t), t)
		e.src, e.end = cAt, len(state)
		tail = binary.AppendUvarint(tail, uint64(now-lastT))
		tail = binary.AppendUvarint(tail, uint64(q))
	default: // full: the two oldest become one, at the younger's time
		c1, off := uvAt(state, cAt)
		d, off2 := uvAt(state, max(off, 0))
		c2, end := uvAt(state, max(off2, 0))
		if off < 0 || off2 < 0 || end < 0 {
			*r = Result{}
			return false, ErrCorrupt
		}
		t2 := t + int64(d)
		head = appendHdr(head, in, total, uint64(now-t2), t2)
		head = binary.AppendUvarint(head, satAddU(c1, c2))
		e.src, e.end = end, len(state)
		tail = binary.AppendUvarint(tail, uint64(now-lastT))
		tail = binary.AppendUvarint(tail, uint64(q))
	}
	e.hn, e.tn = len(head), len(tail)
	return true, nil
}

// satAddU is a + b saturated at 2^63 − 1.
func satAddU(a, b uint64) uint64 {
	if a > math.MaxInt64 || b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// leaveFrom is the time of the k-th unit (k ≥ 1) counted from the entry
// whose count is at off and whose time is t, oldest first (the newest
// entry's time if the entries hold fewer units).
func leaveFrom(state []byte, off int, t, k int64) int64 {
	for {
		c, next := uvAt(state, off)
		if next < 0 || k <= int64(c) || next >= len(state) {
			return t
		}
		k -= int64(c)
		d, n2 := uvAt(state, next)
		if n2 < 0 {
			return t
		}
		t, off = t+int64(d), n2
	}
}

// writeHdr writes an allowed call's new header-format state: into
// state's own buffer when it fits cap(state) (inPlace), else appended to
// buf[:0].
func writeHdr(state []byte, e *hdrEdit, buf []byte, inPlaceOK bool) ([]byte, bool) {
	kept := e.end - e.src
	n := e.hn + kept + e.tn
	if !inPlaceOK || n > cap(state) {
		next := append(buf[:0], e.head[:e.hn]...)
		next = append(next, state[e.src:e.end]...)
		return append(next, e.tail[:e.tn]...), false
	}
	out := state[:n]
	if e.src != e.hn && kept > 0 { // else the kept entries are where they stay
		copy(out[e.hn:], state[e.src:e.end]) // first: the head may cover these bytes
	}
	copy(out, e.head[:e.hn])
	copy(out[e.hn+kept:], e.tail[:e.tn])
	return out, true
}

// toHdr appends the header-format form of a plain LOG state (mode byte
// Log) to buf, checking every entry (checkEntries).
func toHdr(plain, buf []byte) ([]byte, error) {
	out, c0, err := plainHdr(plain, buf[:0])
	if err != nil {
		return buf, err
	}
	return append(out, plain[c0:]...), nil
}

// plainHdr checks a plain LOG state's entries (checkEntries) and appends
// to b the header-format head that replaces its mode byte and t₀ (mode
// byte, header, t₀); c0 is the offset in plain of what follows unchanged
// (c₀ and the rest).
func plainHdr(plain, b []byte) (_ []byte, c0 int, err error) {
	n, total, t0, lastT, err := checkEntries(plain, 1)
	if err != nil {
		return b, 0, err
	}
	_, c0 = varintHead(plain)
	return appendHdr(b, n, total, uint64(lastT-t0), t0), c0, nil
}

// checkEntries checks the plain-format entries at state[at:] (t₀'s varint
// first) and returns their number, their counts' sum, and the first and
// newest times: counts ≥ 1, deltas ≥ 1, no time past int64, a sum under
// 2^63, no truncated varint, at most MaxLogEntries entries (more than
// celld ever writes: a crafted longer state would stay that long, each
// call merging its two oldest entries, and every denied call walk it).
func checkEntries(state []byte, at int) (n, total uint64, t0, lastT int64, err error) {
	if at >= len(state) {
		return 0, 0, 0, 0, ErrCorrupt
	}
	t0, end := varintHead(state[at-1:])
	if end <= 0 || !minimal(state, at, at-1+end) {
		return 0, 0, 0, 0, ErrCorrupt
	}
	off := at - 1 + end
	t := t0
	for {
		c, next := uvAt(state, off)
		if next < 0 || !minimal(state, off, next) || c == 0 || c > math.MaxInt64-total {
			return 0, 0, 0, 0, ErrCorrupt
		}
		if n++; n > MaxLogEntries {
			return 0, 0, 0, 0, ErrCorrupt
		}
		total += c
		if next == len(state) {
			return n, total, t0, t, nil
		}
		// A delta may exceed 2^62 (a unit recorded now after one that
		// entered near −2^63, with a window that long): calls write such
		// states, so Load must take them. Only a time past int64 is
		// refused; MaxInt64 − t is computed in uint64 (it is up to 2^64 − 1
		// for a negative t), and t + d then wraps to the exact time.
		d, next2 := uvAt(state, next)
		if next2 < 0 || !minimal(state, next, next2) || d == 0 || d > uint64(math.MaxInt64)-uint64(t) {
			return 0, 0, 0, 0, ErrCorrupt
		}
		t += int64(d)
		off = next2
	}
}

// minimal reports whether the varint at b[off:next] is in its shortest
// form (as binary.AppendUvarint and AppendVarint write it): one byte, or a
// last byte that is not 0. A call rewrites some fields and copies others,
// so only the shortest form makes every call's bytes one function of the
// log (the same whichever path wrote them).
func minimal(b []byte, off, next int) bool { return next-off == 1 || b[next-1] != 0 }

// Load checks a state that comes from outside the process (a restore,
// replication) before the store keeps it, and gives the form calls
// expect: a plain LOG state (written before the header format) is
// converted to the header format, appended to buf[:0]; a header-format
// state is checked against its entries (header, every entry) and returned
// as it is; a FIXED or SLIDING state is returned as it is (every call
// checks it: it is a fixed size). ErrCorrupt for anything else: a LOG
// state that does not decode, a header that does not match its entries,
// an unknown mode byte. An empty state is returned as it is.
//
// Cost: one pass over a LOG state's entries. Safe for concurrent use.
func Load(state, buf []byte) ([]byte, error) {
	if len(state) == 0 {
		return state, nil
	}
	switch state[0] {
	case byte(Log):
		return toHdr(state, buf)
	case logHdr:
		var h hdrLog
		ok := readHdr(state, &h)
		var hb [64]byte
		if !ok || len(appendHdr(hb[:0], h.n, h.total, h.span, h.t0)) != h.c0 {
			return nil, ErrCorrupt // (a header field not in its shortest form)
		}
		n, total, t0, lastT, err := checkEntries(state, h.tAt)
		if err != nil {
			return nil, err
		}
		if n != h.n || total != h.total || t0 != h.t0 || uint64(lastT-t0) != h.span {
			return nil, ErrCorrupt
		}
		return state, nil
	case byte(Fixed), byte(Sliding):
		return state, nil
	}
	return nil, ErrCorrupt
}
