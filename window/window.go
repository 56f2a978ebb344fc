// Package window holds CL.WINDOW's three counting windows (spec/windows.md,
// docs/cl-window.md) as pure functions over a compact byte-encoded state:
//
//   - LOG, the exact sliding log: every accepted unit is remembered with its
//     time (units accepted in the same millisecond share one entry with a
//     count) until it leaves the window, which is what the sorted-set
//     pattern (ZADD, ZREMRANGEBYSCORE, ZCARD) computes;
//   - FIXED, windows aligned to the epoch, one counter per window (INCR +
//     EXPIRE);
//   - SLIDING, the two-window estimate (Cloudflare's sliding window
//     counter): the previous window's count weighted by how much of it the
//     sliding window still covers, plus the current window's count.
//
// Vocabulary: a unit is one counted request (a call of quantity q counts q
// units); used is the units the window holds before the call; a call is
// allowed iff used + q ≤ limit, and only an allowed call with q > 0 writes.
//
// The package is pure: time (Unix ms) is passed in, nothing is stored, no
// locks; every function is safe for concurrent use. The caller keeps the
// state bytes (the store, beside the key; the disk, verbatim) and hands them
// back on the next call. Limit.Apply allocates nothing when buf has room for
// the new state (FIXED 17 bytes, SLIDING 25, LOG a few bytes per entry).
package window

import (
	"encoding/binary"
	"errors"
	"math"
)

// Mode is one of the three windows. Its number is the first byte of every
// encoded state and is persisted: never renumber.
type Mode uint8

// The modes.
const (
	Log     Mode = 1 // exact sliding log
	Fixed   Mode = 2 // fixed windows aligned to the epoch
	Sliding Mode = 3 // two-window estimate
)

// String is the mode's name as CL.WINDOW spells it.
func (m Mode) String() string {
	switch m {
	case Log:
		return "LOG"
	case Fixed:
		return "FIXED"
	case Sliding:
		return "SLIDING"
	}
	return "?"
}

// ParseMode reads a mode name, case-insensitively. It runs on every
// CL.WINDOW call that names a mode: a length switch and one masked compare
// per byte (c|0x20 folds exactly the ASCII letters' cases onto lower case,
// and maps no other byte onto a lower-case letter), no copy, no
// allocation.
func ParseMode(b []byte) (Mode, bool) {
	switch len(b) {
	case 3:
		if b[0]|0x20 == 'l' && b[1]|0x20 == 'o' && b[2]|0x20 == 'g' {
			return Log, true
		}
	case 5:
		if b[0]|0x20 == 'f' && b[1]|0x20 == 'i' && b[2]|0x20 == 'x' && b[3]|0x20 == 'e' && b[4]|0x20 == 'd' {
			return Fixed, true
		}
	case 7:
		if b[0]|0x20 == 's' && b[1]|0x20 == 'l' && b[2]|0x20 == 'i' && b[3]|0x20 == 'd' &&
			b[4]|0x20 == 'i' && b[5]|0x20 == 'n' && b[6]|0x20 == 'g' {
			return Sliding, true
		}
	}
	return 0, false
}

// MaxLogEntries caps a LOG state's entries (distinct milliseconds in the
// window), so that a huge limit cannot make one key grow without bound.
// A call that would add an entry to a full log first merges its two oldest
// entries into one at the younger one's time: no unit is forgotten, the
// oldest ones just leave the window a little later than they would (the
// log can only become stricter, never admit more than limit per window).
// Below the cap (any limit up to 1024, or fewer than 1024 distinct
// milliseconds per window) the log is exact.
const MaxLogEntries = 1024

// Errors of Apply. Nothing is written when either is returned.
var (
	// ErrMode: the state was written by another mode (CL.WINDOW answers
	// WRONGTYPE: one key, one kind of state).
	ErrMode = errors.New("window: state of another mode")
	// ErrCorrupt: the state does not decode (only possible for damaged
	// stored data).
	ErrCorrupt = errors.New("window: malformed state")
)

// Limit is one call's parameters. Limit and WindowMs must be ≥ 1 (the
// command refuses anything else before a Limit is built). A small value:
// copy it freely.
type Limit struct {
	Mode     Mode
	Limit    int64 // units allowed per window, ≥ 1
	WindowMs int64 // the window's length in ms, ≥ 1
}

// Result is CL.WINDOW's reply: [limited, limit, remaining, retry_after_ms,
// reset_after_ms].
type Result struct {
	Limited    bool
	Limit      int64
	Remaining  int64 // units a call could still take now, ≥ 0
	RetryAfter int64 // ms until the same call would pass; -1 when allowed or never
	ResetAfter int64 // ms until the window holds nothing; the key's TTL after a write
}

// Apply decides a call of quantity q (≥ 0) at nowMs against state (empty:
// the key does not exist). When the call is allowed and q > 0 it returns
// write = true and the new state appended to buf[:0] (next); the key's TTL
// is then r.ResetAfter, which is ≥ 1. Otherwise nothing is to be written
// and next is buf[:0]. state and buf must not overlap.
//
// Clock steps: when the state holds a time later than nowMs (the clock went
// back), the call is decided as of that time, so a step back never frees
// quota; durations are then counted from it.
//
// LOG states: Apply writes the header format (loghdr.go); a plain state
// (written before it) is decided by a pass over its entries and its new
// state written in the header format.
//
// Cost: FIXED and SLIDING O(1); LOG the header and the entries that leave
// the window (a denied call: the window's entries up to the unit that must
// leave), and a copy of the entries when writing (ApplyInPlace: a memmove
// of them in the caller's buffer).
func (l Limit) Apply(state []byte, nowMs, q int64, buf []byte) (r Result, next []byte, write bool, err error) {
	next = buf[:0]
	if len(state) > 0 {
		m, ok := stateMode(state[0])
		if !ok {
			return Result{}, next, false, ErrCorrupt
		}
		if m != l.Mode {
			return Result{}, next, false, ErrMode
		}
	}
	switch l.Mode {
	case Log:
		if len(state) == 0 || state[0] == logHdr {
			var e hdrEdit
			var r Result
			write, err := l.decideHdr(state, nowMs, q, &e, &r)
			if err != nil || !write {
				return r, next, false, err
			}
			next, _ = writeHdr(state, &e, next, false)
			return r, next, true, nil
		}
		return l.applyLog(state, nowMs, q, next)
	case Fixed, Sliding:
		return l.applyCounters(state, nowMs, q, next)
	}
	return Result{}, next, false, ErrCorrupt
}

// fits reports whether used + q ≤ limit, without overflow (used and q ≥ 0).
func fits(used, q, limit int64) bool { return used <= limit && q <= limit-used }

// remaining is limit − used, never below 0.
func remaining(limit, used int64) int64 { return max(0, limit-used) }

// floorDiv is ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	d := a / b
	if a%b != 0 && a < 0 {
		d--
	}
	return d
}

// windowStart is the start of the epoch-aligned window of length w holding t.
func windowStart(t, w int64) int64 { return floorDiv(t, w) * w }

// satAdd is a + b saturated at the int64 bounds (b ≥ 0).
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// ShiftBack moves the times a state holds back by ms, for a restore after
// the wall clock stepped back by ms while celld was down (each LOG unit then
// keeps exactly the time it had left in the window). It returns the new
// state appended to buf[:0] and true for LOG; FIXED and SLIDING count
// epoch-aligned windows, which a shift would misalign, so their state is
// returned unchanged with false (their key should then keep its expiry
// unshifted too: the counts stay with the wall-clock window they were made
// in). A state that does not decode is returned unchanged with false.
func ShiftBack(state []byte, ms int64, buf []byte) ([]byte, bool) {
	if len(state) >= 2 && state[0] == logHdr {
		var h hdrLog
		if !readHdr(state, &h) {
			return state, false
		}
		out := append(buf[:0], state[:h.tAt]...)
		out = binary.AppendVarint(out, h.t0-ms)
		return append(out, state[h.c0:]...), true
	}
	if len(state) < 2 || Mode(state[0]) != Log {
		return state, false
	}
	t0, n := binary.Varint(state[1:])
	if n <= 0 {
		return state, false
	}
	out := append(buf[:0], byte(Log))
	out = binary.AppendVarint(out, t0-ms)
	return append(out, state[1+n:]...), true
}
