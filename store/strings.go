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

// Conditions of Put (SET's NX and XX).
const (
	PutAlways    = iota // SET
	PutIfAbsent         // SET NX
	PutIfPresent        // SET XX
)

// Put is SET without GET: it stores the string v under key when cond
// holds, replacing whatever kind the key held; with keepTTL an existing
// key keeps its expiry instead of v.ExpireAtMs. A v.ExpireAtMs not after
// nowMs deletes the key (Redis's past EXAT/PXAT). It reports whether cond
// held (the key was written or, for a past expiry, deleted), and ErrOOM
// when it would create the key while used memory is over the bound and no
// room could be made (nothing written). Unlike Update it never builds the
// old value: one lookup, no closure, no read of the old text.
func (s *Store) Put(key []byte, v Value, nowMs int64, cond int, keepTTL bool) (bool, error) {
	if v.Kind != KindString {
		panic("store: Put writes strings only")
	}
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, ok := sh.lookupLocked(key, h, nowMs)
	var oom error
	if !ok && cond != PutIfPresent && s.overLimit() {
		slot, ok, oom = s.roomFor(sh, key, h, nowMs)
	}
	if (cond == PutIfAbsent && ok) || (cond == PutIfPresent && !ok) {
		return false, nil
	}
	exp := v.ExpireAtMs
	if keepTTL && ok {
		exp = sh.slab[slot].exp
	}
	if exp != 0 && exp <= nowMs {
		if ok {
			sh.deleteSlotLocked(slot)
		}
		return true, nil
	}
	flags := lruFlags(nowMs)
	if v.Invalid {
		flags |= flagInvalid
	}
	if ok {
		sh.writeLocked(slot, v.TAT, exp, flags, v.Raw)
		return true, nil
	}
	if oom != nil {
		return false, oom
	}
	sh.putLocked(key, h, v.TAT, exp, flags, v.Raw)
	return true, nil
}
