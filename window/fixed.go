package window

import "encoding/binary"

// FIXED and SLIDING keep counters of epoch-aligned windows:
//
//	FIXED:   [2] start int64 LE  count int64 LE               17 bytes
//	SLIDING: [3] start int64 LE  prev int64 LE  curr int64 LE 25 bytes
//
// start is the window the counts were last written in; FIXED's count and
// SLIDING's curr belong to it, SLIDING's prev to the window before it. A
// state read in a later window is shifted (SLIDING: curr becomes prev one
// window on, both are 0 two windows on), so nothing is ever rewritten just
// because time passed.
//
// The same state as numbers is Counters: a caller that keeps the numbers
// itself (the store keeps short keys' counters inside their entry) decides
// with ApplyCounters and never encodes; Apply on the bytes decodes,
// calls it and encodes, so both are the one implementation.

const (
	fixedLen   = 1 + 8 + 8
	slidingLen = 1 + 8 + 8 + 8
)

// Counters is a FIXED or SLIDING state as numbers. A small value: copy it
// freely.
type Counters struct {
	Start int64 // start (Unix ms) of the window the counts were last written in
	Prev  int64 // SLIDING: the window before Start's count; always 0 for FIXED
	Curr  int64 // FIXED's count, SLIDING's curr: Start's window's count
}

func i64(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) }

func appendI64(b []byte, v int64) []byte { return binary.LittleEndian.AppendUint64(b, uint64(v)) }

// DecodeCounters reads a FIXED or SLIDING state. ok is false for LOG's, or
// for bytes that do not decode (a wrong length, a negative count; Apply
// answers ErrCorrupt for those). It does not allocate.
func DecodeCounters(state []byte) (m Mode, c Counters, ok bool) {
	switch {
	case len(state) == fixedLen && Mode(state[0]) == Fixed:
		c = Counters{Start: i64(state[1:]), Curr: i64(state[9:])}
	case len(state) == slidingLen && Mode(state[0]) == Sliding:
		c = Counters{Start: i64(state[1:]), Prev: i64(state[9:]), Curr: i64(state[17:])}
	default:
		return 0, Counters{}, false
	}
	if c.Prev < 0 || c.Curr < 0 {
		return 0, Counters{}, false
	}
	return Mode(state[0]), c, true
}

// AppendCounters appends c's encoding as a state of mode m (Fixed or
// Sliding; FIXED's ignores Prev): the bytes Apply would have written.
func AppendCounters(b []byte, m Mode, c Counters) []byte {
	b = append(b, byte(m))
	b = appendI64(b, c.Start)
	if m == Sliding {
		b = appendI64(b, c.Prev)
	}
	return appendI64(b, c.Curr)
}

// ApplyCounters is Apply for FIXED and SLIDING on a state held as numbers:
// exists is false when the key has no state (c is then ignored). It
// returns the decision and, when write is true, the new state, to be kept
// with a TTL of r.ResetAfter. l.Mode must be Fixed or Sliding, and c must
// be of that mode (the caller keeps the mode: a state of another mode is
// ErrMode, which the caller answers itself). ErrCorrupt for a negative
// count. O(1), no allocation. ApplyCountersTo is the same decision for a
// caller on the hot path.
func (l Limit) ApplyCounters(c Counters, exists bool, nowMs, q int64) (r Result, next Counters, write bool, err error) {
	next, write, err = l.ApplyCountersTo(&r, c, exists, nowMs, q)
	return r, next, write, err
}

// ApplyCountersTo is ApplyCounters with the result written to *r (every
// field, also on an error: then the zero Result) instead of returned: the
// store's FIXED and SLIDING path. As for ApplyInPlaceTo, a returned
// Result (five fields, too many for registers) was stored field by field
// and then copied with 16-byte loads the CPU cannot forward from those
// stores; writing through r stores each field once, where the caller
// reads it. r may be read by no one else during the call. O(1), no
// allocation.
func (l Limit) ApplyCountersTo(r *Result, c Counters, exists bool, nowMs, q int64) (next Counters, write bool, err error) {
	if exists && (c.Prev < 0 || c.Curr < 0) {
		*r = Result{}
		return Counters{}, false, ErrCorrupt
	}
	switch l.Mode {
	case Fixed:
		next, write = l.fixedCounters(r, c, exists, nowMs, q)
	case Sliding:
		next, write = l.slidingCounters(r, c, exists, nowMs, q)
	default:
		*r = Result{}
		return Counters{}, false, ErrMode
	}
	return next, write, nil
}

// applyCounters is Apply's FIXED and SLIDING case on encoded bytes.
func (l Limit) applyCounters(state []byte, now, q int64, next []byte) (Result, []byte, bool, error) {
	var c Counters
	if len(state) > 0 {
		var ok bool
		if _, c, ok = DecodeCounters(state); !ok {
			return Result{}, next, false, ErrCorrupt
		}
	}
	r, nc, write, err := l.ApplyCounters(c, len(state) > 0, now, q)
	if err != nil || !write {
		return r, next, false, err
	}
	return r, AppendCounters(next, l.Mode, nc), true, nil
}

// fixedCounters is FIXED (spec "FIXED"): used is the current window's
// count. It sets every field of *r.
func (l Limit) fixedCounters(r *Result, c Counters, exists bool, now, q int64) (Counters, bool) {
	w := l.WindowMs
	if exists {
		now = max(now, c.Start) // a clock step back: decide as of the stored window
	}
	start := windowStart(now, w)
	used := int64(0)
	if exists && c.Start == start {
		used = c.Curr
	}
	untilEnd := start - now + w // end of the window − now, ≥ 1
	r.Limit = l.Limit
	if !fits(used, q, l.Limit) {
		r.Limited = true
		r.RetryAfter = -1
		if q <= l.Limit {
			r.RetryAfter = untilEnd
		}
		r.Remaining = remaining(l.Limit, used)
		r.ResetAfter = 0
		if used > 0 {
			r.ResetAfter = untilEnd
		}
		return Counters{}, false
	}
	used += q
	r.Limited = false
	r.RetryAfter = -1
	r.Remaining = remaining(l.Limit, used)
	r.ResetAfter = 0
	if used > 0 {
		r.ResetAfter = untilEnd
	}
	if q == 0 {
		return Counters{}, false
	}
	return Counters{Start: start, Curr: used}, true
}

// slidingCounters is SLIDING (spec "SLIDING"), in exact integers: allowed
// iff prev×(w−elapsed) + (curr+q)×w ≤ limit×w, the products in 128 bits.
// It sets every field of *r.
func (l Limit) slidingCounters(r *Result, c Counters, exists bool, now, q int64) (Counters, bool) {
	w := l.WindowMs
	if exists {
		now = max(now, c.Start)
	}
	start := windowStart(now, w)
	var prev, curr int64
	if exists {
		switch {
		case c.Start == start:
			prev, curr = c.Prev, c.Curr
		case c.Start <= start-w && c.Start+w == start:
			prev = c.Curr
		}
	}
	e := now - start // elapsed, 0 ≤ e < w
	r.Limit, r.Limited, r.RetryAfter = l.Limit, false, -1
	if !slidingFits(prev, curr, q, l.Limit, w, e) {
		r.Limited = true
		if q <= l.Limit {
			r.RetryAfter = slidingRetry(prev, curr, q, l.Limit, w, e)
		}
	} else {
		curr += q
	}
	r.Remaining = slidingRemaining(prev, curr, l.Limit, w, e)
	switch {
	case curr > 0:
		r.ResetAfter = satAdd(w-e, w) // end of the next window − now
	case prev > 0:
		r.ResetAfter = w - e
	default:
		r.ResetAfter = 0
	}
	if r.Limited || q == 0 {
		return Counters{}, false
	}
	return Counters{Start: start, Prev: prev, Curr: curr}, true
}

// small31 reports whether every value is in [0, 2^31): then SLIDING's
// products (each of two such values) are below 2^62 and a sum of two of
// them, one factor being a sum of two values, below 2^64, so the exact
// arithmetic fits a uint64 and needs no 128-bit product or division. A
// negative value fails it (its uint64 has the top bit set). What every
// call of a limit and window under 2^31 (24 days in ms) takes.
func small31(a, b, c, d, e int64) bool {
	return (uint64(a)|uint64(b)|uint64(c)|uint64(d)|uint64(e))>>31 == 0
}

// slidingFits reports prev×(w−e) + (curr+q)×w ≤ limit×w.
func slidingFits(prev, curr, q, limit, w, e int64) bool {
	if small31(prev, curr, q, limit, w) { // 0 ≤ w−e ≤ w
		return uint64(prev)*uint64(w-e)+(uint64(curr)+uint64(q))*uint64(w) <= uint64(limit)*uint64(w)
	}
	return slidingFitsWide(prev, curr, q, limit, w, e)
}

// slidingFitsWide is slidingFits for any counts, in 128 bits.
func slidingFitsWide(prev, curr, q, limit, w, e int64) bool {
	lhs := mul(uint64(prev), uint64(w-e)).add(mul(uint64(curr)+uint64(q), uint64(w)))
	return lhs.cmp(mul(uint64(limit), uint64(w))) <= 0
}

// slidingRemaining is ⌊(limit×w − prev×(w−e) − curr×w) / w⌋, never below 0.
func slidingRemaining(prev, curr, limit, w, e int64) int64 {
	if small31(prev, curr, limit, w, 0) {
		have, owe := uint64(limit)*uint64(w), uint64(prev)*uint64(w-e)+uint64(curr)*uint64(w)
		if have <= owe {
			return 0
		}
		return int64((have - owe) / uint64(w)) // ≤ limit
	}
	return slidingRemainingWide(prev, curr, limit, w, e)
}

// slidingRemainingWide is slidingRemaining for any counts, in 128 bits.
func slidingRemainingWide(prev, curr, limit, w, e int64) int64 {
	have := mul(uint64(limit), uint64(w))
	owe := mul(uint64(prev), uint64(w-e)).add(mul(uint64(curr), uint64(w)))
	if have.cmp(owe) <= 0 {
		return 0
	}
	quo, ok := have.sub(owe).div(uint64(w))
	if !ok || quo > uint64(limit) { // cannot happen: the result is ≤ limit
		return limit
	}
	return int64(quo)
}

// slidingRetry is the smallest wait d ≥ 1 ms after which a denied call of
// quantity q ≤ limit would pass, nothing else happening: either later in
// the current window, as prev's weight falls, or in the next one (curr
// becomes prev), or at the start of the one after, when both are 0.
func slidingRetry(prev, curr, q, limit, w, e int64) int64 {
	// In this window: prev×(w−e') ≤ (limit−curr−q)×w =: R, e' < w.
	if prev > 0 && fits(curr, q, limit) {
		rr := mul(uint64(limit-curr-q), uint64(w))
		if k, ok := rr.div(uint64(prev)); ok && k < uint64(w) {
			if at := w - int64(k); at < w { // at > e, as the call was denied at e
				return at - e
			}
		}
	}
	// In the next window: curr×(w−e'') ≤ (limit−q)×w; e'' = w is the start of
	// the window after it, where the call always fits.
	at := int64(0)
	if curr > 0 {
		rr := mul(uint64(limit-q), uint64(w))
		if k, ok := rr.div(uint64(curr)); ok && k < uint64(w) {
			at = w - int64(k)
		}
	}
	return satAdd(w-e, at)
}
