package store

import "unsafe"

// Strings: every KindString key holds bytes. A string that reads as a TAT
// (an unsigned decimal below 2^64, what CL.THROTTLE and INCR of a
// non-negative counter write) is kept as the number in entry.tat, with its
// verbatim text in shard.raw only when that differs from the canonical
// decimal ("+5", "007"); any other bytes are kept verbatim in shard.raw and
// flagged Invalid, which is what CL.THROTTLE refuses with "invalid stored
// value" (spec §7) and what GET, APPEND and friends read like any string.

// StringValue returns the Value that SET stores for text: the number when
// text reads as a TAT (NewValue), else the bytes verbatim, flagged Invalid
// for CL.THROTTLE. It copies text (the caller may reuse its buffer) and
// allocates only for text that is not a canonical decimal.
func StringValue(text []byte) Value {
	if v, ok := NewValue(text); ok {
		return v
	}
	return Value{Raw: string(text), Invalid: true}
}

// StringValueOf is StringValue for a string the caller already owns; it
// keeps s itself rather than copying it.
func StringValueOf(s string) Value {
	if v, ok := NewValue(unsafe.Slice(unsafe.StringData(s), len(s))); ok {
		return v
	}
	return Value{Raw: s, Invalid: true}
}

// Inspect returns key's live value and its idle time in seconds (since its
// last read or write, by the LRU clock: 24 bits of seconds, as Redis's) without
// counting as an access (OBJECT IDLETIME, OBJECT ENCODING). An expired key
// is removed as on every lookup.
func (s *Store) Inspect(key []byte, nowMs int64) (v Value, idleSec int64, ok bool) {
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, ok := sh.lookupLocked(key, h, nowMs)
	if !ok {
		return Value{}, 0, false
	}
	clock := uint32(nowMs/1000) & lruMask
	idle := int64((clock - sh.slab[slot].lru()) & lruMask)
	return sh.valueLocked(slot), idle, true
}
