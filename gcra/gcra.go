// Package gcra is the rate-limiting algorithm of redis-cell's CL.THROTTLE:
// the generic cell rate algorithm, reproduced bit-for-bit from the contract in
// docs/cl-throttle.md, including its float64 and rounding quirks.
//
// Vocabulary, as used throughout:
//
//   - emission interval (EI): the ideal spacing in ns between two requests,
//     period / count. One request "costs" one EI.
//   - delay variation tolerance (DVT): how far ahead of now the schedule may
//     run, EI × (max_burst + 1): the size of the bucket in ns.
//   - theoretical arrival time (TAT): the one number stored per key, the time
//     at which the bucket would be empty again. A request of quantity q moves
//     it by EI × q; it is allowed while the TAT stays within DVT of now.
//
// The package is pure: time is passed in (the way golang.org/x/time/rate's
// AllowN takes t), nothing is stored, and every function is safe for
// concurrent use. Limit.Apply never allocates (about 40 ns); NewLimit
// allocates only for periods beyond MaxInt64/1e9 s, where it needs math/big.
package gcra

import (
	"errors"
	"math"
	"math/big"
)

// ErrZeroRate is returned by NewLimit when the emission interval is 0 ns
// (count or period 0, or a rate faster than one request per ns).
var ErrZeroRate = errors.New("gcra: zero rates are not supported")

// Limit is one call's parameters, already reduced to the numbers the decision
// uses. The zero value is not useful; build one with NewLimit. A Limit is a
// small value: copy it freely.
type Limit struct {
	// EI is the emission interval in ns (may be negative: see the spec).
	EI int64
	// DVT is the delay variation tolerance in ns: EI × (max_burst+1), wrapping.
	DVT int64
	// Max is the reply's "limit" field: max_burst + 1, wrapping.
	Max int64
}

// NewLimit derives a Limit from CL.THROTTLE's max_burst, count and period
// (seconds). It fails only with ErrZeroRate; every other combination,
// negative ones included, is accepted, as redis-cell accepts it.
func NewLimit(maxBurst, count, period int64) (Limit, error) {
	return limitOf(maxBurst, EmissionInterval(count, period))
}

// limitOf is the Limit of an emission interval: ErrZeroRate for 0.
func limitOf(maxBurst, ei int64) (Limit, error) {
	if ei == 0 {
		return Limit{}, ErrZeroRate
	}
	max := maxBurst + 1
	return Limit{EI: ei, DVT: ei * max, Max: max}, nil
}

// EmissionInterval returns period×1e9/count in ns as redis-cell computes it:
// the exact product converted to float64 once, divided by float64(count),
// truncated toward zero and saturated at the int64 limits. It is 0 when count
// or period is 0.
func EmissionInterval(count, period int64) int64 {
	return emissionInterval(count, period, 1_000_000_000, math.MaxInt64/1_000_000_000)
}

// emissionInterval is period×unit/count in ns, the product exact (in an
// int64 when |period| ≤ lim = MaxInt64/unit, else math/big), converted to
// float64 once, divided by float64(count), truncated and saturated.
func emissionInterval(count, period, unit, lim int64) int64 {
	if count == 0 || period == 0 {
		return 0
	}
	var p float64
	if period >= -lim && period <= lim {
		p = float64(period * unit) // exact product; one rounding here
	} else {
		p, _ = new(big.Int).Mul(big.NewInt(period), big.NewInt(unit)).Float64()
	}
	return truncSat(p / float64(count))
}

// Result is the outcome of one decision: the five reply fields and, when the
// call is allowed, what must be stored.
type Result struct {
	Limited    bool  // reply field 1: true when denied
	Max        int64 // reply field 2: max_burst + 1
	Remaining  int64 // reply field 3
	RetryAfter int64 // reply field 4, seconds; -1 when allowed or never
	ResetAfter int64 // reply field 5, seconds

	// NewTAT is the value to store (only when !Limited): the new TAT in ns
	// since the epoch, as an unsigned 64-bit count (negative wraps).
	NewTAT uint64
	// TTLms is the key's new TTL in ms (only when !Limited):
	// trunc((NewTAT − now) / 1e6). 0 means expire at once, −1 means keep with
	// no TTL, below −1 means store without TTL and report an error.
	TTLms int64
}

// Apply decides one request of quantity q at time now (ns since the Unix
// epoch). tat is the stored TAT and ok whether the key exists (a missing or
// expired key passes ok=false). The receiver is not changed; the caller stores
// Result.NewTAT when the request is allowed, atomically with the read of tat.
func (l Limit) Apply(now int64, tat uint64, ok bool, q int64) Result {
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
		// Allowed: diff lies in [MinInt64, DVT], so it fits an int64.
		ttl = diff
		r.NewTAT = newTAT.lo // modulo 2^64
		r.TTLms = diff.int64() / 1e6
	} else {
		r.Limited = true
		if increment <= l.DVT {
			r.RetryAfter = seconds(newTAT.sub(dvt).sub(n))
		}
		ttl = t.sub(n)
	}
	next := dvt.sub(ttl)
	if next.cmp(fromInt64(l.EI).neg()) > 0 {
		nextUS, _ := next.quoRem(1000)
		r.Remaining = truncSat(float64(nextUS) / float64(l.EI/1000))
	}
	r.ResetAfter = seconds(ttl)
	return r
}

// seconds converts a duration in ns to the reply's whole seconds: whole
// seconds s and fraction f (truncated division), trunc(float64(s) +
// float64(f)/1e9), plus one when f holds at least one whole positive ms.
func seconds(d i128) int64 {
	s, f := d.quoRem(1e9)
	v := truncSat(float64(s) + float64(f)/1e9)
	if f/1e6 > 0 {
		v++
	}
	return v
}

// Seconds is seconds for an int64 duration in ns; exported for tests and for
// callers that format other durations the same way.
func Seconds(ns int64) int64 { return seconds(fromInt64(ns)) }
