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

const (
	fixedLen   = 1 + 8 + 8
	slidingLen = 1 + 8 + 8 + 8
)

func i64(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) }

func appendI64(b []byte, v int64) []byte { return binary.LittleEndian.AppendUint64(b, uint64(v)) }

// applyFixed is FIXED (spec "FIXED"): used is the current window's count.
func (l Limit) applyFixed(state []byte, now, q int64, next []byte) (Result, []byte, bool, error) {
	w := l.WindowMs
	var stored, count int64
	if len(state) > 0 {
		if len(state) != fixedLen {
			return Result{}, next, false, ErrCorrupt
		}
		stored, count = i64(state[1:]), i64(state[9:])
		if count < 0 {
			return Result{}, next, false, ErrCorrupt
		}
		now = max(now, stored) // a clock step back: decide as of the stored window
	}
	start := windowStart(now, w)
	used := int64(0)
	if len(state) > 0 && stored == start {
		used = count
	}
	untilEnd := start - now + w // end of the window − now, ≥ 1
	r := Result{Limit: l.Limit, RetryAfter: -1}
	if !fits(used, q, l.Limit) {
		r.Limited = true
		if q <= l.Limit {
			r.RetryAfter = untilEnd
		}
		r.Remaining = remaining(l.Limit, used)
		if used > 0 {
			r.ResetAfter = untilEnd
		}
		return r, next, false, nil
	}
	used += q
	r.Remaining = remaining(l.Limit, used)
	if used > 0 {
		r.ResetAfter = untilEnd
	}
	if q == 0 {
		return r, next, false, nil
	}
	next = append(next, byte(Fixed))
	next = appendI64(next, start)
	next = appendI64(next, used)
	return r, next, true, nil
}

// applySliding is SLIDING (spec "SLIDING"), in exact integers: allowed iff
// prev×(w−elapsed) + (curr+q)×w ≤ limit×w, the products in 128 bits.
func (l Limit) applySliding(state []byte, now, q int64, next []byte) (Result, []byte, bool, error) {
	w := l.WindowMs
	var stored, sp, sc int64
	if len(state) > 0 {
		if len(state) != slidingLen {
			return Result{}, next, false, ErrCorrupt
		}
		stored, sp, sc = i64(state[1:]), i64(state[9:]), i64(state[17:])
		if sp < 0 || sc < 0 {
			return Result{}, next, false, ErrCorrupt
		}
		now = max(now, stored)
	}
	start := windowStart(now, w)
	var prev, curr int64
	if len(state) > 0 {
		switch {
		case stored == start:
			prev, curr = sp, sc
		case stored <= start-w && stored+w == start:
			prev = sc
		}
	}
	e := now - start // elapsed, 0 ≤ e < w
	r := Result{Limit: l.Limit, RetryAfter: -1}
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
	}
	if r.Limited || q == 0 {
		return r, next, false, nil
	}
	next = append(next, byte(Sliding))
	next = appendI64(next, start)
	next = appendI64(next, prev)
	next = appendI64(next, curr)
	return r, next, true, nil
}

// slidingFits reports prev×(w−e) + (curr+q)×w ≤ limit×w.
func slidingFits(prev, curr, q, limit, w, e int64) bool {
	lhs := mul(uint64(prev), uint64(w-e)).add(mul(uint64(curr)+uint64(q), uint64(w)))
	return lhs.cmp(mul(uint64(limit), uint64(w))) <= 0
}

// slidingRemaining is ⌊(limit×w − prev×(w−e) − curr×w) / w⌋, never below 0.
func slidingRemaining(prev, curr, limit, w, e int64) int64 {
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
