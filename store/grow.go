package store

import "unsafe"

// Texts that grow. A verbatim text is an immutable Go string (strings.go),
// so APPEND, SETRANGE and SETBIT through Update copied the whole value on
// every call: on a 100 MB string, 22-45 ms of the event loop for a write of
// one to ten bytes, where Redis (sds, grown in place by sdsMakeRoomFor)
// takes 0.07 ms. EditString instead gives a long text that is written to a
// buffer with room to grow and keeps it beside rawv (shard.grown):
//
//   - The text stays rawv[i], a string viewing buf[:n]; buf's spare
//     capacity past n is zero and seen by nobody, so an APPEND writes its
//     bytes there and rawv[i] becomes buf[:n+k] (views handed out before
//     see their own, unchanged, n bytes). When buf is full it is replaced
//     by one with room for the new length plus the same again below 1 MiB
//     and an eighth above (at most the caller's length bound): a copy of n
//     bytes every Θ(n) appended bytes, O(change) amortized.
//   - A write below n (SETRANGE, SETBIT inside the string) may rewrite buf
//     in place only while no view of it has left the store (owned): any
//     hand-out (rawLocked: GET, Update's old value, a persistence or
//     replication Change, RENAME/COPY/MOVE) clears owned, and the next
//     such write copies buf first. So in-place rewrites cost O(change),
//     and a copy happens at most once per hand-out, which itself costs the
//     reader O(n) (GET sends n bytes; the drain writes n bytes each flush
//     window the key changed in). Reads of a part (GETRANGE, GETBIT,
//     STRLEN: PeekString) do not hand the text out.
//
// Memory: a grown text is charged rawCost(cap(buf)), its slack included
// (rawChargeLocked); the charge goes when the text is replaced or freed
// (dropGrownLocked). A text copied elsewhere (RENAME, COPY) is charged its
// length there; the source's buffer goes with the source.
//
// Only texts that are flagRaw|flagInvalid (not numbers) and at least
// growMin bytes long take this path: shorter ones are cheap to copy and
// keep their exact size (bytes per key of small strings are unchanged).

// grownText is a grown text's buffer: the text is buf[:n], n in the
// entry's rawRef.
type grownText struct {
	buf   []byte
	owned bool // no view of buf has left the store since buf was made
}

// growMin is the shortest text EditString grows in place.
const growMin = 64

// rawChargeLocked is what the text at rawv index i, n bytes long, is
// charged. Requires sh.mu.
func (sh *shard) rawChargeLocked(i uint32, n int) int64 {
	if len(sh.grown) != 0 {
		if g, ok := sh.grown[i]; ok {
			return rawCost(cap(g.buf))
		}
	}
	return rawCost(n)
}

// dropGrownLocked forgets the grown buffer of the text at rawv index i
// (n bytes long), if it has one, and returns the text's charge. Requires
// sh.mu.
func (sh *shard) dropGrownLocked(i uint32, n int) int64 {
	if len(sh.grown) != 0 {
		if g, ok := sh.grown[i]; ok {
			delete(sh.grown, i)
			if len(sh.grown) == 0 {
				sh.grown = nil
			}
			return rawCost(cap(g.buf))
		}
	}
	return rawCost(n)
}

// growCap is the capacity a text growing to need bytes gets: double below
// 1 MiB, an eighth more above, never past limit (nor below need).
func growCap(need, limit int64) int64 {
	c := need + need
	if need >= 1<<20 {
		c = need + need/8
	}
	if c > limit {
		c = limit
	}
	if c < need {
		c = need
	}
	return c
}

// EditString writes n (> 0) bytes of key's string in place: at byte off,
// or at its end when off < 0 (APPEND). fn is called under the key's shard
// lock with the n-byte region to fill (its old bytes, zero past the old
// end; fn must not keep it); a gap between the old end and off is zeroed
// (SETRANGE, SETBIT). The write counts as one: a new version, the dirty
// mark, the LRU clock, the expiry kept.
//
// It handles only a live string kept as a long, non-numeric text whose
// new length is at most maxLen; otherwise it does nothing and returns
// handled false, and the caller takes the general path (Update), which
// gives the errors (WRONGTYPE, too long) and handles short and numeric
// values. newLen is the string's length after the write.
//
// Cost: O(n) amortized (see the top of this file), plus, for a write
// below the old end, a check that the text is still not a number:
// O(1) unless the text starts with digits, then O(those digits).
func (s *Store) EditString(key []byte, nowMs int64, off int64, n int, maxLen int64, fn func(region []byte)) (newLen int64, handled bool) {
	if n <= 0 {
		return 0, false
	}
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, ok := sh.lookupLocked(key, h, nowMs)
	if !ok {
		return 0, false
	}
	e := &sh.slab[slot]
	if e.flags&(flagRaw|flagInvalid|kindMask) != flagRaw|flagInvalid {
		return 0, false
	}
	i, old := rawRefOf(e.tat)
	if off < 0 {
		off = int64(old)
	}
	end := off + int64(n)
	newLen = max(end, int64(old))
	if newLen < growMin || end > maxLen || end >= 1<<32 {
		return 0, false
	}
	g, grown := sh.grown[i]
	inside := off < int64(old) // rewrites bytes a view may hold
	if !grown || int64(cap(g.buf)) < newLen || (inside && !g.owned) {
		c := int64(cap(g.buf))
		if !grown || c < newLen {
			c = growCap(newLen, maxLen)
		}
		buf := make([]byte, old, c)
		copy(buf, sh.rawv[i])
		charge := sh.dropGrownLocked(i, old)
		sh.addMemLocked(rawCost(int(c)) - charge)
		g = grownText{buf: buf, owned: true}
		if sh.grown == nil {
			sh.grown = make(map[uint32]grownText)
		}
		sh.grown[i] = g
	}
	buf := g.buf[:newLen]
	if off > int64(old) {
		clear(buf[old:off]) // zero already; kept explicit
	}
	fn(buf[off:end])
	sh.rawv[i] = unsafe.String(&buf[0], len(buf))
	e.tat = rawRef(i, len(buf))
	if inside {
		if _, num := ParseValue(buf); num {
			e.flags &^= flagInvalid // "a5" SETRANGE 0 "0": now a number
		}
	}
	sh.touchLocked(slot, nowMs)
	sh.noteWrittenLocked(slot)
	return newLen, true
}

// PeekString calls fn with key's string value under the key's shard lock
// when key is live and a string, and reports whether key is live (its
// kind is then v.Kind; fn is called only for KindString). Unlike Get it
// does not hand the text out: fn must not keep v.Raw past the call (copy
// what it needs), so a grown text stays writable in place. Counts as an
// access (LRU clock). O(1) plus fn.
func (s *Store) PeekString(key []byte, nowMs int64, fn func(v Value)) (kind Kind, ok bool) {
	sh, slot, ok := s.lockLive(key, nowMs)
	if !ok {
		return 0, false
	}
	defer sh.mu.Unlock()
	sh.touchLocked(slot, nowMs)
	e := &sh.slab[slot]
	if e.kind() != KindString {
		return e.kind(), true
	}
	if e.flags&flagRaw == 0 {
		fn(sh.valueLocked(slot))
		return KindString, true
	}
	v := Value{ExpireAtMs: e.exp, Invalid: e.flags&flagInvalid != 0, Raw: sh.rawv[uint32(e.tat)]}
	if !v.Invalid {
		v.TAT = rawNumber(v.Raw)
	}
	fn(v)
	return KindString, true
}

// handGrownLocked gives dslot of ds, just written with a view of sslot's
// text (RENAME, MOVE: sslot is deleted next), sslot's grown buffer: the
// text keeps its room to grow and is charged its capacity where it now
// lives (the source's charge goes with the source's deletion). The buffer
// is not owned (the source's view went out). Requires both shards' locks.
func handGrownLocked(ds *shard, dslot uint32, ss *shard, sslot uint32) {
	se, de := &ss.slab[sslot], &ds.slab[dslot]
	if len(ss.grown) == 0 || se.flags&flagRaw == 0 || de.flags&flagRaw == 0 {
		return
	}
	si, _ := rawRefOf(se.tat)
	g, ok := ss.grown[si]
	if !ok {
		return
	}
	di, n := rawRefOf(de.tat)
	if ds.grown == nil {
		ds.grown = make(map[uint32]grownText)
	}
	ds.addMemLocked(rawCost(cap(g.buf)) - ds.dropGrownLocked(di, n))
	ds.grown[di] = grownText{buf: g.buf}
}
