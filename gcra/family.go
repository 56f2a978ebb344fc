package gcra

import (
	"math"
)

// The GCRA family beyond CL.THROTTLE (spec/gcra-family.md): millisecond
// periods and replies (CL.PTHROTTLE), and all-or-nothing decisions over
// several limits (CL.MTHROTTLE, CL.MPTHROTTLE). Everything here is pure and
// safe for concurrent use, like the rest of the package; Apply and NewLimit,
// CL.THROTTLE's own path, are not touched by it.

// Unit says how a Result reports its two durations, retry_after and
// reset_after.
type Unit uint8

const (
	// UnitSeconds is CL.THROTTLE's unit and rounding (Apply, Seconds).
	UnitSeconds Unit = iota
	// UnitMillis is CL.PTHROTTLE's: a duration d ns is ceil(d/1e6) ms
	// when d > 0 and 0 when d <= 0 (Millis); "none" is still -1.
	UnitMillis
)

// NewLimitMs is NewLimit for a period in milliseconds (CL.PTHROTTLE):
// EI = trunc_sat(float64(periodMs × 1e6, exact) / float64(count)). So
// NewLimitMs(b, c, p*1000) == NewLimit(b, c, p) whenever p*1000 fits int64.
// It fails only with ErrZeroRate.
func NewLimitMs(maxBurst, count, periodMs int64) (Limit, error) {
	return limitOf(maxBurst, EmissionIntervalMs(count, periodMs))
}

// EmissionIntervalMs is EmissionInterval for a period in ms: the exact
// product periodMs×1e6 converted to float64 once, divided by
// float64(count), truncated and saturated. 0 when count or periodMs is 0.
// It allocates only for |periodMs| beyond MaxInt64/1e6 (math/big).
func EmissionIntervalMs(count, periodMs int64) int64 {
	return emissionInterval(count, periodMs, 1_000_000, math.MaxInt64/1_000_000)
}

// ApplyMs is Apply with the reply's durations in milliseconds (Millis):
// the decision, Limited, Max, Remaining, NewTAT and TTLms are exactly
// Apply's; RetryAfter is -1 exactly where Apply's is, and otherwise
// ceil(ns/1e6) (0 for a non-positive duration), as is ResetAfter. It never
// allocates.
func (l Limit) ApplyMs(now int64, tat uint64, ok bool, q int64) Result {
	n := fromInt64(now)
	t := n
	if ok {
		t = fromUint64(tat)
	}
	increment := l.EI * q // wrapping, as specified
	dvt := fromInt64(l.DVT)
	base := t
	if base.cmp(n) < 0 {
		base = n
	}
	newTAT := base.add(fromInt64(increment))

	r := Result{Max: l.Max, RetryAfter: -1}
	var ttl i128
	if diff := newTAT.sub(n); diff.cmp(dvt) <= 0 {
		ttl = diff
		r.NewTAT = newTAT.lo
		r.TTLms = diff.int64() / 1e6
	} else {
		r.Limited = true
		if increment <= l.DVT {
			r.RetryAfter = millis(newTAT.sub(dvt).sub(n))
		}
		ttl = t.sub(n)
	}
	next := dvt.sub(ttl)
	if next.cmp(fromInt64(l.EI).neg()) > 0 {
		nextUS, _ := next.quoRem(1000)
		r.Remaining = truncSat(float64(nextUS) / float64(l.EI/1000))
	}
	r.ResetAfter = millis(ttl)
	return r
}

// ApplyIn is Apply (UnitSeconds) or ApplyMs (UnitMillis).
func (l Limit) ApplyIn(u Unit, now int64, tat uint64, ok bool, q int64) Result {
	if u == UnitMillis {
		return l.ApplyMs(now, tat, ok, q)
	}
	return l.Apply(now, tat, ok, q)
}

// millis converts a duration in ns to the reply's ms: ceil(d/1e6) for
// d > 0, else 0. |d| < 2^70, so the result fits an int64.
func millis(d i128) int64 {
	if d.isNeg() || d == (i128{}) {
		return 0
	}
	q, r := d.quoRem(1e6)
	if r > 0 {
		q++
	}
	return q
}

// Millis is millis for an int64 duration in ns; exported for tests and for
// callers that format other durations the same way.
func Millis(ns int64) int64 { return millis(fromInt64(ns)) }

// Group is one limit of an all-or-nothing decision over several limits
// (CL.MTHROTTLE): its parameters, and the state of its key as stored.
type Group struct {
	Limit Limit
	Q     int64 // quantity
	// Prev is the index of the nearest earlier group on the same key, or
	// -1: such a group is decided against what the earlier one would have
	// written, not against the store.
	Prev int
	// TAT and Exists are the key's stored state (Exists false: missing or
	// expired), read when Prev < 0. ApplyAll overwrites them, for every
	// group, with the state the group was decided against.
	TAT    uint64
	Exists bool
}

// ApplyAll decides every group at the one instant now, in order, against a
// scratch view of the state: a group whose key an earlier group shares sees
// what that group would have stored (its NewTAT when allowed, even with a
// 0 ms TTL, which keeps the key to the end of the millisecond; unchanged
// when denied), exactly as a run of
// CL.THROTTLE calls at one instant would. out[i] receives group i's own
// result (len(out) >= len(gs) >= 1). It returns the binding group (Binding):
// the call is allowed iff !out[binding].Limited, and then the caller makes
// every group's write, in group order; otherwise it writes nothing.
// No allocation; O(len(gs)).
func ApplyAll(u Unit, now int64, gs []Group, out []Result) int {
	out = out[:len(gs)]
	for i := range gs {
		g := &gs[i]
		if p := g.Prev; p >= 0 {
			if pr := &out[p]; !pr.Limited {
				g.TAT, g.Exists = pr.NewTAT, true // a 0 ms TTL too: the key lives to the end of this ms
			} else {
				g.TAT, g.Exists = gs[p].TAT, gs[p].Exists
			}
		}
		if u == UnitMillis { // (not ApplyIn: one call level less per group)
			out[i] = g.Limit.ApplyMs(now, g.TAT, g.Exists, g.Q)
		} else {
			out[i] = g.Limit.Apply(now, g.TAT, g.Exists, g.Q)
		}
	}
	return Binding(out)
}

// Binding picks the group whose five integers answer for the whole call
// (CL.MTHROTTLE's first element): among denied groups, the first whose
// RetryAfter is the largest, a RetryAfter of -1 (can never pass) beating
// every other; when none is denied, the first with the smallest Remaining.
// RetryAfter is compared as replied, in the results' unit. rs must not be
// empty.
func Binding(rs []Result) int {
	b := -1
	for i := range rs {
		if rs[i].Limited && (b < 0 || laterRetry(rs[i].RetryAfter, rs[b].RetryAfter)) {
			b = i
		}
	}
	if b >= 0 {
		return b
	}
	b = 0
	for i := 1; i < len(rs); i++ {
		if rs[i].Remaining < rs[b].Remaining {
			b = i
		}
	}
	return b
}

// laterRetry reports whether retry_after a is strictly later than b, where
// -1 ("never") is later than any time.
func laterRetry(a, b int64) bool {
	switch {
	case a == b:
		return false
	case a == -1:
		return true
	case b == -1:
		return false
	}
	return a > b
}
