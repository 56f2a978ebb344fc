package persist

import (
	"encoding/binary"
	"fmt"
)

// Compact window entries. A FIXED or SLIDING CL.WINDOW state (the window
// package's 17 or 25 bytes: a mode byte, then little-endian int64 start,
// [prev,] curr) is written as numbers instead of as its bytes:
//
//	FIXED:   'f' uvarint(len(key)) key varint(ExpireAtMs) varint(ExpireAtMs-start) uvarint(curr)
//	SLIDING: 'c' uvarint(len(key)) key varint(ExpireAtMs) varint(ExpireAtMs-start) uvarint(prev) uvarint(curr)
//
// A key's expiry is its window's end (FIXED) or the next window's end
// (SLIDING), so ExpireAtMs-start is one or two window lengths: two bytes
// for a 1 s window, where the state's start took eight. A 15-byte key's
// entry is 26 bytes (FIXED) or 27 (SLIDING) instead of 41 or 49 as a 'w'
// entry, and less than a TAT's 't' entry (31).
//
// Restoring gives the same state bytes back (KindWindow), so nothing above
// persist sees the difference. A state this encoding cannot hold exactly
// (a LOG state, a negative start or expiry, bytes that are not a FIXED or
// SLIDING state) stays a 'w' entry. Directories written before these tags
// hold only 'w' entries and restore unchanged; a celld that predates them
// refuses an 'f' or 'c' entry as an unknown entry kind (ErrCorrupt) rather
// than misread it.
//
// The mode numbers and the byte layout are the window package's (persist
// imports nothing of celld's; TestCompactWindowMatchesWindowPackage in
// package main checks them against window.AppendCounters).
const (
	entryWinFixed   = 'f'
	entryWinSliding = 'c'

	winModeFixed   = 2 // window.Fixed
	winModeSliding = 3 // window.Sliding
	winFixedLen    = 17
	winSlidingLen  = 25
)

// compactWindow reads state as FIXED's or SLIDING's counters for a
// compact entry expiring at exp. ok is false when the state must stay a
// 'w' entry. No allocation.
func compactWindow(state []byte, exp int64) (tag byte, span int64, prev, curr uint64, ok bool) {
	var start int64
	switch {
	case len(state) == winFixedLen && state[0] == winModeFixed:
		tag = entryWinFixed
		start = int64(binary.LittleEndian.Uint64(state[1:]))
		curr = binary.LittleEndian.Uint64(state[9:])
	case len(state) == winSlidingLen && state[0] == winModeSliding:
		tag = entryWinSliding
		start = int64(binary.LittleEndian.Uint64(state[1:]))
		prev = binary.LittleEndian.Uint64(state[9:])
		curr = binary.LittleEndian.Uint64(state[17:])
	default:
		return 0, 0, 0, 0, false
	}
	if span, ok = compactSpan(start, prev, curr, exp); !ok {
		return 0, 0, 0, 0, false
	}
	return tag, span, prev, curr, true
}

// compactSpan is a compact entry's span (exp-start) for a FIXED or
// SLIDING state's numbers; ok is false when they must stay a 'w' entry (a
// start or expiry before the epoch, a count past 2^63), kept exactly as
// their bytes. The one rule compactWindow and appendWindowCounters share.
func compactSpan(start int64, prev, curr uint64, exp int64) (span int64, ok bool) {
	if start < 0 || exp < 0 || int64(prev) < 0 || int64(curr) < 0 {
		return 0, false
	}
	return exp - start, true // both non-negative: no overflow
}

// appendWindowCounters is appendWindow for a FIXED (mode winModeFixed,
// whose prev is ignored, as the window package's encoding ignores it) or
// SLIDING (winModeSliding) state given as numbers
// (Encoder.WindowCounters): the same bytes appendWindow writes for the
// window package's encoding of them. No allocation.
func appendWindowCounters(b, key []byte, mode byte, start int64, prev, curr uint64, exp int64) []byte {
	tag := byte(entryWinSliding)
	if mode != winModeSliding {
		mode, tag, prev = winModeFixed, entryWinFixed, 0
	}
	if span, ok := compactSpan(start, prev, curr, exp); ok {
		return appendCompactWindow(b, tag, key, exp, span, prev, curr)
	}
	// Rare (a start before the epoch, a count past 2^63): the state's
	// bytes, as appendWindow keeps them.
	var st [winSlidingLen]byte
	state := append(st[:0], mode)
	state = binary.LittleEndian.AppendUint64(state, uint64(start))
	if mode == winModeSliding {
		state = binary.LittleEndian.AppendUint64(state, prev)
	}
	state = binary.LittleEndian.AppendUint64(state, curr)
	return appendWindow(b, key, state, exp)
}

// compactWindowSize is the encoded size of a compact entry (without the
// database prefix).
func compactWindowSize(tag byte, key []byte, exp, span int64, prev, curr uint64) int {
	n := 1 + uvarintLen(uint64(len(key))) + len(key) + varintLen(exp) + varintLen(span) + uvarintLen(curr)
	if tag == entryWinSliding {
		n += uvarintLen(prev)
	}
	return n
}

// appendCompactWindow appends a compact entry.
func appendCompactWindow(b []byte, tag byte, key []byte, exp, span int64, prev, curr uint64) []byte {
	b = append(b, tag)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendVarint(b, exp)
	b = binary.AppendVarint(b, span)
	if tag == entryWinSliding {
		b = binary.AppendUvarint(b, prev)
	}
	return binary.AppendUvarint(b, curr)
}

// compactWindowMax bounds a compact entry's bytes besides its key, for a
// key shorter than 128 bytes: the tag, the key's length and four varints.
const compactWindowMax = 2 + 4*binary.MaxVarintLen64

// putCompactWindow writes appendCompactWindow's entry for mode
// (winModeFixed or winModeSliding) at b[0:], a key shorter than 128 bytes,
// into b, which has room for len(key)+compactWindowMax bytes, and returns
// its length.
func putCompactWindow(b []byte, mode byte, key []byte, exp, span int64, prev, curr uint64) int {
	b[0], b[1] = entryWinFixed, byte(len(key))
	if mode == winModeSliding {
		b[0] = entryWinSliding
	}
	i := 2 + copy(b[2:], key)
	i += binary.PutVarint(b[i:], exp)
	i += binary.PutVarint(b[i:], span)
	if mode == winModeSliding {
		i += binary.PutUvarint(b[i:], prev)
	}
	return i + binary.PutUvarint(b[i:], curr)
}

// decodeCompactWindow decodes a compact entry's fields after its key, at
// chunk[off:], into the window package's state bytes (written into buf,
// at least winSlidingLen bytes), and returns the offset past them.
func decodeCompactWindow(tag byte, chunk, key []byte, off int, buf []byte) (exp int64, state []byte, end int, err error) {
	bad := func(what string) error { return fmt.Errorf("bad %s of window key %q", what, key) }
	exp, n := binary.Varint(chunk[off:])
	if n <= 0 || exp < 0 {
		return 0, nil, 0, bad("expiry")
	}
	off += n
	span, n := binary.Varint(chunk[off:])
	if n <= 0 || span > exp || (span < 0 && exp-span < 0) { // the start is not negative
		return 0, nil, 0, bad("window start")
	}
	off += n
	var prev uint64
	if tag == entryWinSliding {
		if prev, n = binary.Uvarint(chunk[off:]); n <= 0 || int64(prev) < 0 {
			return 0, nil, 0, bad("count")
		}
		off += n
	}
	curr, n := binary.Uvarint(chunk[off:])
	if n <= 0 || int64(curr) < 0 {
		return 0, nil, 0, bad("count")
	}
	off += n
	state = buf[:0]
	if tag == entryWinSliding {
		state = append(state, winModeSliding)
		state = binary.LittleEndian.AppendUint64(state, uint64(exp-span))
		state = binary.LittleEndian.AppendUint64(state, prev)
	} else {
		state = append(state, winModeFixed)
		state = binary.LittleEndian.AppendUint64(state, uint64(exp-span))
	}
	state = binary.LittleEndian.AppendUint64(state, curr)
	return exp, state, off, nil
}
