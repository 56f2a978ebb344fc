package store

import (
	"hash/maphash"
	"unsafe"
)

// Expiry without a deletion record. A key removed because its TTL passed
// (the sweep, a lookup, eviction's walk, RandomKey) and whose last change
// was already handed to persistence (it is not dirty) is not put on the
// deleted list: the last record of it on disk, or in the flusher's hands,
// carries that expiry, so a restore, a replay of the log and a base
// rewrite all drop it anyway. Churning loads (a FIXED window's keys all
// expire at its end and are made again; a GCRA key expires once its TAT is
// behind) then write no 'd' record per expiry: no key copy under the shard
// lock, no Change, no log bytes. A dirty key (its TTL shortened, say, by a
// PEXPIRE not yet drained) still gets its deletion, since the disk may
// hold a longer-lived or TTL-less record of it.
//
// The count of such silent expiries (Store.TakeUnloggedExpiries) is what
// persistence adds to its log's deletions, so that the fold that follows
// the live state down (persist's BaseDue: half of the base deleted) fires
// as it did when each of them was a record.
//
// The wall clock: the disk then says "gone at E", not "gone". A restart
// whose clock is behind E brings such a key back until E, unless the
// restore's step-back shift (persistence.go's load, against the last
// flush's stamp) moves E behind it; docs/expiry-records.md has the bound.

// expireLocked removes the key in slot (its index word at pos), whose TTL
// has passed; counting it in ExpiredKeys is the caller's (eviction's walk
// does not). Requires sh.mu. Cost: removeLocked's, minus the deletion
// record when the key is clean.
func (sh *shard) expireLocked(slot uint32, pos int) {
	clean := sh.track && sh.slab[slot].flags&flagDirty == 0
	sh.removeNoteLocked(slot, pos, !clean && sh.track)
	if clean {
		sh.unlogged.Add(1)
	}
}

// expireSlotLocked is expireLocked finding the index word first (the
// sweep's and eviction's walks know only the slot). Requires sh.mu.
func (sh *shard) expireSlotLocked(slot uint32) {
	sh.expireLocked(slot, sh.posOfSlotLocked(slot))
}

// TakeUnloggedExpiries returns how many keys expired without a deletion
// record (see above) since the previous call, and resets the count. Safe
// for concurrent use; 256 atomic swaps, no lock: persistence calls it once
// per flush window.
func (s *Store) TakeUnloggedExpiries() int64 {
	var n int64
	for i := range s.shards {
		if sh := s.shards[i].Load(); sh != nil {
			n += sh.unlogged.Swap(0)
		}
	}
	return n
}

// posOfSlotLocked returns the index word of the live key in slot.
// Requires sh.mu.
func (sh *shard) posOfSlotLocked(slot uint32) int {
	key := sh.keyOf(&sh.slab[slot])
	_, pos, ok := sh.findLocked(key, maphash.Bytes(sh.seed, key))
	if !ok {
		panic("store: slot missing from its index")
	}
	return pos
}

// sweepBatch is how many slots one sweep batch looks at (one lock hold).
const sweepBatch = 64

// sweepBatchLocked is one batch of the expiry sweep (SweepStep): it looks
// at the next sweepBatch slots of the shard (fewer when the shard is
// smaller), wrapping at the slab's end, removes the expired keys among
// them (but a window key in its grace, winGrace), and returns how
// many slots it saw and keys it removed. Requires sh.mu.
//
// Cost: the slab entries are read in order (the hardware prefetcher
// follows), but each expired key's index word is somewhere in the table,
// usually a cache miss. So the batch first finds its expired keys,
// hashing each and starting the load of its index word, and only then
// removes them: the misses overlap instead of queueing one per key.
func (sh *shard) sweepBatchLocked(nowMs int64) (seen, expired int) {
	var (
		slots [sweepBatch]uint32
		hs    [sweepBatch]uint64
	)
	size := len(sh.slab)
	mask := len(sh.table) - 1
	for seen < sweepBatch && seen < size {
		if int(sh.sweep) >= size {
			sh.sweep = 0
		}
		slot := sh.sweep
		sh.sweep++
		seen++
		if e := &sh.slab[slot]; e.flags&flagUsed != 0 && !e.alive(nowMs) && !e.winGrace(nowMs) {
			h := maphash.Bytes(sh.seed, sh.keyOf(e))
			prefetch(uintptr(unsafe.Pointer(&sh.table[int(h>>8)&mask])))
			slots[expired], hs[expired] = slot, h
			expired++
		}
	}
	for i := range expired {
		_, pos, ok := sh.findLocked(sh.keyOf(&sh.slab[slots[i]]), hs[i])
		if !ok {
			panic("store: slot missing from its index")
		}
		sh.expireLocked(slots[i], pos)
	}
	return seen, expired
}
