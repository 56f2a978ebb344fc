package store

import (
	"math/bits"
	"slices"

	"github.com/celld/celld/gcra"
)

// The GCRA family's store operations (spec/gcra-family.md): a throttle with
// the reply in another unit (CL.PTHROTTLE), a peek that changes nothing
// (CL.THROTTLE_RO, CL.PTHROTTLE_RO) and an all-or-nothing decision over
// several keys (CL.MTHROTTLE, CL.MPTHROTTLE). They read and write the same
// entries as Throttle, with the same TTL rules.

// ThrottleIn is Throttle with the result's durations in unit u (Throttle
// itself is ThrottleIn(gcra.UnitSeconds, ...), kept separate so that
// CL.THROTTLE's path stays exactly what it was). Same locking, errors,
// memory bound (ErrOOM: an allowed call would create a key over the bound
// and no room could be made) and LRU clock as Throttle, and the same cost:
// one shard lock, no allocation for an existing key.
func (s *Store) ThrottleIn(u gcra.Unit, key []byte, lim gcra.Limit, q int64, nowNs int64) (gcra.Result, error) {
	nowMs := nowNs / 1e6
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	if p := sh.dirtyTailLocked(); p != 0 {
		prefetchw(p) // the dirty list's next line, for the append (dirtyTailLocked)
	}
	slot, ok := sh.lookupLocked(key, h, nowMs)
	var oom error
	if !ok && s.overLimit() {
		slot, ok, oom = s.roomFor(sh, key, h, nowMs)
	}
	var tat uint64
	if ok {
		e := &sh.slab[slot]
		if e.flags&(flagInvalid|kindMask) != 0 {
			err := e.unreadableErr() // under the lock: a writer of the shard changes flags
			sh.mu.Unlock()
			return gcra.Result{}, err
		}
		tat = sh.tatLocked(e)
	}
	var r gcra.Result
	if u == gcra.UnitMillis { // (not ApplyIn, which does not inline)
		r = lim.ApplyMs(nowNs, tat, ok, q)
	} else {
		r = lim.Apply(nowNs, tat, ok, q)
	}
	if r.Limited {
		sh.mu.Unlock()
		return r, nil
	}
	if oom != nil && r.TTLms != 0 { // would create the key
		sh.mu.Unlock()
		return gcra.Result{}, oom
	}
	var err error
	switch ms := r.TTLms; {
	case ms > 0:
		if ok {
			sh.writeLocked(slot, r.NewTAT, nowMs+ms, lruFlags(nowMs), "")
		} else {
			sh.putLocked(key, h, r.NewTAT, nowMs+ms, lruFlags(nowMs), "")
		}
	case ms == 0: // a 0 ms TTL: live to the end of this millisecond (zeroTTLExpiry)
		if ok {
			sh.writeLocked(slot, r.NewTAT, zeroTTLExpiry(nowMs), lruFlags(nowMs), "")
		} else if oom == nil { // at the memory bound, a key that would live < 1 ms is not created
			sh.putLocked(key, h, r.NewTAT, zeroTTLExpiry(nowMs), lruFlags(nowMs), "")
		}
	default: // −1: no TTL; below −1: no TTL and an error
		sh.putLocked(key, h, r.NewTAT, 0, lruFlags(nowMs), "")
		if ms < -1 {
			err = ErrSetExpire
		}
	}
	sh.mu.Unlock()
	return r, err
}

// Peek answers what ThrottleIn would answer for key at nowNs, and changes
// nothing at all: no value, no TTL, no version (WATCH), no dirty mark, and an
// expired key is not even deleted (it reads as missing and is left to the
// sweep or the next write). The only error is ErrInvalidValue. The shard lock
// is held just for the read; the decision is made after it is released.
// No allocation.
func (s *Store) Peek(u gcra.Unit, key []byte, lim gcra.Limit, q int64, nowNs int64) (gcra.Result, error) {
	h := s.hashKey(key)
	var tat uint64
	ok := false
	// A shard never made holds no key: the peek decides for a missing key
	// without making it (a read makes no shard).
	if sh := s.madeShard(h); sh != nil {
		sh.mu.Lock()
		var slot uint32
		slot, _, ok = sh.findLocked(key, h)
		if ok {
			e := &sh.slab[slot]
			switch {
			case !e.alive(nowNs / 1e6):
				ok = false
			case e.flags&(flagInvalid|kindMask) != 0:
				err := e.unreadableErr() // under the lock: a writer of the shard changes flags
				sh.mu.Unlock()
				return gcra.Result{}, err
			default:
				tat = sh.tatLocked(e)
			}
		}
		sh.mu.Unlock()
	}
	if u == gcra.UnitMillis {
		return lim.ApplyMs(nowNs, tat, ok, q), nil
	}
	return lim.Apply(nowNs, tat, ok, q), nil
}

// smallMulti is the group count up to which ThrottleAll finds repeated keys
// by comparing every pair (no scratch memory); above it, it sorts an index
// by hash, which allocates once per call.
const smallMulti = 32

// ThrottleAll is CL.MTHROTTLE's all-or-nothing decision over len(keys)
// groups: keys[i] is group i's key and gs[i] its Limit and Q (ThrottleAll
// fills in Prev, TAT and Exists); out (len >= len(keys)) receives each
// group's result and hs (len >= len(keys)) is scratch for the keys' hashes.
// Every shard the keys live in is locked once, in ascending shard order (so
// two calls, or a call and any one-key operation, cannot deadlock), the
// groups are decided at the one instant nowNs by gcra.ApplyAll, and then
// either every allowed group's write is made, in group order, with
// Throttle's TTL rules, or — when any group is denied — nothing is written.
// It returns the binding group (gcra.Binding) and ErrInvalidValue (nothing
// written; a key holds a value that is not a TAT), ErrOOM (nothing
// written: an allowed call would create a key while used memory is over
// the bound and no room could be made; a denied call is answered) or
// ErrSetExpire (all written; some group's TTL was below −1 ms, so that key
// has no TTL).
//
// Cost: one hash, one lookup and, when allowed, one write per group, under
// one lock per shard touched; no allocation up to smallMulti groups on
// existing keys.
func (s *Store) ThrottleAll(u gcra.Unit, keys [][]byte, gs []gcra.Group, out []gcra.Result, hs []uint64, nowNs int64) (int, error) {
	n := len(keys)
	gs, out, hs = gs[:n], out[:n], hs[:n]
	nowMs := nowNs / 1e6
	var locked [nShards / 64]uint64 // shards to lock, as a bit set
	for i, k := range keys {
		h := s.hashKey(k)
		hs[i] = h
		si := h >> 56
		locked[si/64] |= 1 << (si % 64)
		gs[i].Prev = -1
	}
	linkRepeats(keys, gs, hs)

	// For the first smallMulti groups, the slot each key was found in and
	// whether a later group repeats it: a key named once keeps its slot
	// through the other groups' writes (slots never move), so its own write
	// needs no second lookup.
	var slots [smallMulti]uint32
	var found, repeated uint32
	for i := range gs {
		if p := gs[i].Prev; p >= 0 && p < smallMulti {
			repeated |= 1 << p
		}
	}

	// Over the memory bound, room is made first, with no lock held (as
	// Throttle's roomFor); if none could be, a call that would create a
	// key is refused whole, below.
	var oom error
	if s.overLimit() {
		oom = s.makeRoom(nowMs)
	}
	s.lockSet(&locked)
	defer s.unlockSet(&locked)
	for i := range gs {
		g := &gs[i]
		if g.Prev >= 0 {
			continue
		}
		sh := s.shardFor(hs[i])
		slot, ok := sh.lookupLocked(keys[i], hs[i], nowMs)
		g.TAT, g.Exists = 0, ok
		if ok {
			e := &sh.slab[slot]
			if e.flags&(flagInvalid|kindMask) != 0 {
				return 0, e.unreadableErr()
			}
			g.TAT = sh.tatLocked(e)
			if i < smallMulti && repeated&(1<<i) == 0 {
				slots[i] = slot
				found |= 1 << i
			}
		}
	}
	b := gcra.ApplyAll(u, nowNs, gs, out)
	if out[b].Limited {
		return b, nil
	}
	if oom != nil {
		for i := range gs {
			if gs[i].Prev < 0 && !gs[i].Exists && out[i].TTLms != 0 {
				return b, oom // would create a key at the bound: nothing written
			}
		}
	}
	var err error
	lru := lruFlags(nowMs) // a write is an access, for the LRU policies (as Throttle's)
	for i := range out {
		r, key, h := &out[i], keys[i], hs[i]
		sh := s.shardFor(h)
		switch ms := r.TTLms; {
		case ms > 0 && i < smallMulti && found&(1<<i) != 0:
			sh.writeLocked(slots[i], r.NewTAT, nowMs+ms, lru, "")
		case ms > 0:
			sh.putLocked(key, h, r.NewTAT, nowMs+ms, lru, "")
		case ms == 0 && i < smallMulti && found&(1<<i) != 0:
			sh.writeLocked(slots[i], r.NewTAT, zeroTTLExpiry(nowMs), lru, "")
		case ms == 0 && oom == nil: // a 0 ms TTL: live to the end of this millisecond (zeroTTLExpiry)
			sh.putLocked(key, h, r.NewTAT, zeroTTLExpiry(nowMs), lru, "")
		case ms == 0: // at the memory bound: a key that would live < 1 ms is not created
		default: // −1: no TTL; below −1: no TTL and an error
			sh.putLocked(key, h, r.NewTAT, 0, lru, "")
			if ms < -1 {
				err = ErrSetExpire
			}
		}
	}
	return b, err
}

// linkRepeats sets gs[i].Prev to the nearest earlier group with the same
// key. Pairwise for a few groups; for more, through an index sorted by
// (hash, position), so a call with many groups costs O(n log n), not O(n²).
func linkRepeats(keys [][]byte, gs []gcra.Group, hs []uint64) {
	n := len(keys)
	if n <= smallMulti {
		for i := 1; i < n; i++ {
			for j := i - 1; j >= 0; j-- {
				if hs[j] == hs[i] && string(keys[j]) == string(keys[i]) {
					gs[i].Prev = j
					break
				}
			}
		}
		return
	}
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		switch {
		case hs[a] < hs[b]:
			return -1
		case hs[a] > hs[b]:
			return 1
		}
		return int(a - b)
	})
	for x := 1; x < n; x++ {
		i := idx[x]
		// walk back over the run of equal hashes (nearly always one key,
		// whose previous occurrence is then idx[x-1])
		for y := x - 1; y >= 0 && hs[idx[y]] == hs[i]; y-- {
			if j := idx[y]; string(keys[j]) == string(keys[i]) {
				gs[i].Prev = int(j)
				break
			}
		}
	}
}

// lockSet locks every shard in set, in ascending order: the one lock order
// any operation holding several shard locks uses.
//
// Every shard of the set is made first (makeShard, which must not run
// under a shard lock), then locked.
func (s *Store) lockSet(set *[nShards / 64]uint64) {
	for w, bitsLeft := range set {
		for bitsLeft != 0 {
			b := bits.TrailingZeros64(bitsLeft)
			bitsLeft &= bitsLeft - 1
			s.shardAt(w*64 + b)
		}
	}
	for w, bitsLeft := range set {
		for bitsLeft != 0 {
			b := bits.TrailingZeros64(bitsLeft)
			bitsLeft &= bitsLeft - 1
			s.shards[w*64+b].Load().mu.Lock()
		}
	}
}

// unlockSet unlocks every shard in set.
func (s *Store) unlockSet(set *[nShards / 64]uint64) {
	for w, bitsLeft := range set {
		for bitsLeft != 0 {
			b := bits.TrailingZeros64(bitsLeft)
			bitsLeft &= bitsLeft - 1
			s.shards[w*64+b].Load().mu.Unlock()
		}
	}
}
