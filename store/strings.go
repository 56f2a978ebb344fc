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
	sh, slot, ok := s.lockLive(key, nowMs)
	if !ok {
		return Value{}, 0, false
	}
	defer sh.mu.Unlock()
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
	if s.madeShard(h) == nil && (cond == PutIfPresent || (v.ExpireAtMs != 0 && v.ExpireAtMs <= nowMs)) {
		// Missing (no write made its shard) and not to be created: make
		// no shard, which would stay charged for the store's life.
		return cond != PutIfPresent, nil
	}
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

// Verbatim texts. A flagRaw slot keeps its text in shard.rawv, at the
// index its entry.tat holds beside the text's length (rawRef); the number
// a valid text like "007" reads as is parsed from the text when asked for
// (rawNumber). Freed indexes are reused LIFO from shard.rawFree. A rewrite
// of a text stores into rawv without loading anything from it (the old
// length, for the memory charge, is in the entry), and a read is one slice
// index, where a map keyed by slot cost a hash probe per access (two per
// SET over an existing text: 11% of SET's CPU in the profile); a shard that
// never held a text holds no memory for them. Every writer hands over a
// string it no longer touches, so a Change that views a text's bytes
// (changeLocked) stays valid after the slot is rewritten.

// rawRef packs a text's place in rawv and its length into an entry.tat.
// A text is never 4 GiB long (--proto-max-bulk-len is at most 512 MiB,
// Redis's cap, and APPEND/SETRANGE check it).
func rawRef(i uint32, n int) uint64 { return uint64(n)<<32 | uint64(i) }

// rawRefOf unpacks rawRef.
func rawRefOf(ref uint64) (i uint32, n int) { return uint32(ref), int(ref >> 32) }

// rawNumber is the number a valid (not flagInvalid) verbatim text reads
// as, such as 7 for "+7" or "007".
func rawNumber(raw string) uint64 {
	n, _ := ParseValue(unsafe.Slice(unsafe.StringData(raw), len(raw)))
	return n
}

// rawLocked is the verbatim text of a flagRaw slot. Requires sh.mu.
// The text leaves the store's sole hands (it may be viewed after the lock
// is released), so a grown text stops being rewritten in place below its
// length (EditString copies it first).
func (sh *shard) rawLocked(slot uint32) string {
	i := uint32(sh.slab[slot].tat)
	if len(sh.grown) != 0 {
		if g, ok := sh.grown[i]; ok && g.owned {
			g.owned = false
			sh.grown[i] = g
		}
	}
	return sh.rawv[i]
}

// tatLocked is the number a live, readable (neither invalid nor of another
// kind) string slot holds: its entry's TAT, or its verbatim text's number.
// Requires sh.mu.
func (sh *shard) tatLocked(e *entry) uint64 {
	if e.flags&flagRaw != 0 {
		return rawNumber(sh.rawv[uint32(e.tat)])
	}
	return e.tat
}

// newRawLocked stores raw (not "") at a free index of rawv, charges it,
// and returns its rawRef. Requires sh.mu.
func (sh *shard) newRawLocked(raw string) uint64 {
	sh.addMemLocked(rawCost(len(raw)))
	if n := len(sh.rawFree); n > 0 {
		i := sh.rawFree[n-1]
		sh.rawFree = sh.rawFree[:n-1]
		sh.rawv[i] = raw
		return rawRef(i, len(raw))
	}
	sh.rawv = append(sh.rawv, raw)
	return rawRef(uint32(len(sh.rawv)-1), len(raw))
}

// freeRawLocked releases the text of e (a flagRaw entry) and its charge;
// the caller rewrites e's tat and flags. When no text is left, the slice
// and the free list are dropped, so a shard whose texts all went holds no
// memory for them. Requires sh.mu.
func (sh *shard) freeRawLocked(e *entry) {
	i, n := rawRefOf(e.tat)
	sh.addMemLocked(-sh.dropGrownLocked(i, n))
	sh.rawv[i] = ""
	sh.rawFree = append(sh.rawFree, i)
	if len(sh.rawFree) == len(sh.rawv) {
		sh.rawv, sh.rawFree = nil, nil
	}
}
