package store

import (
	"sync/atomic"
	"unsafe"
)

// Prefetching. A CL.THROTTLE on a key that is not in cache costs two
// dependent cache misses, the index word and then the slab entry (48 bytes,
// so sometimes two lines): in a CPU profile of a pipeline-16 load over 100k
// keys, 18% of the server's samples sat on those two loads in findLocked.
// A pipelined batch holds many independent keys, so the server asks for all
// of them first (Store.Prefetch) and the misses overlap instead of queueing.

// view is what Prefetch reads without the shard lock: the index and the
// slab as of their latest reallocation (the slab up to its capacity, so an
// append that does not reallocate needs no new view). The index words are
// written with atomic stores and Prefetch loads them atomically; it never
// reads slab entries, it only computes their addresses. A stale view only
// makes a prefetch useless, never wrong.
type view struct {
	table []uint64
	slab  []entry
}

// publishLocked makes the shard's current index and slab arrays the ones
// Prefetch uses. Requires sh.mu; called whenever either is reallocated
// (one small allocation each time, amortised over the inserts that grew it).
func (sh *shard) publishLocked() {
	sh.view.Store(&view{table: sh.table, slab: sh.slab[:cap(sh.slab)]})
}

// Prefetch starts loading, for each key, the cache lines a Throttle (or any
// lookup) of it will read: first every key's index line, then, for each key
// whose word the first pass brought in (entrySlot), the slab entry it points
// to. It changes nothing and takes no lock, so it is safe for concurrent use
// with everything; a key changed meanwhile merely wastes its prefetch. hs is
// scratch space of len(keys).
//
// Cost per key: one hash, one prefetch of its index line (two when its
// first prefetchProbe words cross a line: 7 keys in 8), atomic loads of up
// to prefetchProbe words that the first pass has usually brought in, and
// two prefetches of the entry; with persistence, an atomic load and a
// prefetch of the line a write's dirty mark is appended to (shard.dirtyLine:
// a store missing there made Throttle's unlock wait).
func (s *Store) Prefetch(keys [][]byte, hs []uint64) { s.PrefetchWith(keys, hs, nil) }

// PrefetchWith is Prefetch that also starts loading the window blocks
// (store/window.go) of the keys at the indices win into keys: the
// CL.WINDOW calls of a pipelined batch whose state lives in a block, one
// dependent miss after the entry, which the call would otherwise wait on
// (in a CPU profile of LOG at pipeline 16 over 100k keys, that load was
// ~12% of the server's samples). The block pass reuses what Prefetch's own passes
// computed: each key's hash, and its slot as the entry pass found it in
// the index lines the first pass brought in (entrySlot, no lock; kept for
// the first keptSlots keys, read again past them), so it neither hashes
// nor probes under the lock nor compares the key; it takes the key's shard
// lock only to read the entry's block reference and the heap. A slot that
// holds another key meanwhile (or a fingerprint twin) only wastes the
// prefetch. Indices out of range are ignored. Safe for concurrent use
// with everything; changes nothing.
//
// Cost per window key beyond Prefetch's: a shard lock and unlock, a read
// of the entry (prefetched by the pass before) and two prefetches (past
// keptSlots keys, also up to prefetchProbe atomic loads of cached index
// words).
func (s *Store) PrefetchWith(keys [][]byte, hs []uint64, win []int32) {
	hs = hs[:len(keys)]
	for i, k := range keys {
		h := s.hashKey(k)
		hs[i] = h
		if sh := s.madeShard(h); sh == nil {
			continue // never used: nothing to load
		} else if v := sh.view.Load(); v != nil && len(v.table) > 0 {
			v.prefetchRun(h)
		}
	}
	// The entry pass's slots, for the window pass, so that it does not
	// run entrySlot again.
	var slots [keptSlots]int32
	s.prefetchEntries(hs, &slots)
	if len(win) > 0 {
		s.prefetchBlocks(hs, win, slots[:min(len(hs), keptSlots)]) // before prefetchObjects overwrites hs
	}
	s.prefetchObjects(keys, hs) // prefetch_obj.go
}

// prefetchEntries is PrefetchWith's entry pass over the keys hashed to hs
// (their index lines loaded by the pass before): each key's entry, or
// where an insert would write, and the dirty list's next line. It keeps
// the slot it found for each of the first keptSlots keys in slots (-1:
// not found). No lock.
func (s *Store) prefetchEntries(hs []uint64, slots *[keptSlots]int32) {
	for i, h := range hs {
		slot := int32(-1)
		if sh := s.madeShard(h); sh != nil { // else no key ever went to this shard: nothing to bring in
			if v := sh.view.Load(); v != nil {
				if sl, ok := v.entrySlot(h); ok {
					prefetchEntry(&v.slab[sl])
					slot = int32(sl)
				} else {
					sh.prefetchFree() // most likely absent: a write inserts it
				}
			}
			if p := sh.dirtyLine.Load(); p != 0 {
				prefetchw(p) // where a write's dirty mark goes (persistence; shard.dirtyLine)
			}
		}
		if i < keptSlots {
			slots[i] = slot
		}
	}
}

// keptSlots is how many of a batch's keys PrefetchWith keeps the entry
// pass's slot for (a stack array), for the window pass: a pipeline of up
// to 64 commands, the common batch, looks up no key's slot twice (the
// lost profile of bench/window.sh's LOG row: entrySlot 6.6 → 3.2 ns per
// call). Keys past it are looked up again.
const keptSlots = 64

// prefetchBlocks is PrefetchWith's window pass: hs are the keys' hashes,
// win the indices of the window keys, slots the entry pass's slots of
// the first len(slots) keys (-1: not found).
func (s *Store) prefetchBlocks(hs []uint64, win []int32, slots []int32) {
	for _, i := range win {
		if i < 0 || int(i) >= len(hs) {
			continue
		}
		h := hs[i]
		sh := s.madeShard(h)
		if sh == nil {
			continue
		}
		var slot int
		if int(i) < len(slots) {
			if slot = int(slots[i]); slot < 0 {
				continue // absent (or past the probe): nothing to prefetch
			}
		} else {
			v := sh.view.Load()
			if v == nil {
				continue
			}
			var ok bool
			if slot, ok = v.entrySlot(h); !ok {
				continue
			}
		}
		sh.mu.Lock()
		sh.prefetchBlockLocked(slot)
		sh.mu.Unlock()
	}
}

// prefetchProbe is how many words of a key's probe run entrySlot reads
// looking for its word: one line's worth, so at most two lines to prefetch
// (prefetchRun). A successful lookup reads under 2.5 words on average at
// 3/4 full, but a key set made after another sits further from home: in
// bench/window.sh's live rows, 4 words found 99% of CL.THROTTLE's keys and
// 93% of CL.WINDOW FIXED's, 8 words 99.5% and 97.5% (perf, FIXED row:
// findLocked 41-63 perf-ns per call on main, 30-44 with 4 words, 16-26
// with 8). A key not present stops at the first empty word.
const prefetchProbe = 8

// prefetchRun starts loading the index words entrySlot reads for the key
// hashed to h: its home word's line and, when the first prefetchProbe words
// of its run cross into the next line, that line too. Without the second
// line entrySlot had to stop at the end of the home line (a word there
// would be a miss waited for), and missed every key that linear probing
// put past it: in bench/window.sh a key set made after another one sits
// further from home (its homes were taken), and the batch prefetch found
// 96% of CL.THROTTLE's keys but 82-89% of CL.WINDOW FIXED's, whose
// lookups then stalled on the entry under the shard lock (findLocked ~45
// against ~15 perf-ns per call). v.table must not be empty.
func (v *view) prefetchRun(h uint64) {
	mask := len(v.table) - 1
	i := int(h>>8) & mask
	p := uintptr(unsafe.Pointer(&v.table[i]))
	prefetch(p)
	if q := uintptr(unsafe.Pointer(&v.table[(i+prefetchProbe-1)&mask])); q>>6 != p>>6 {
		prefetch(q)
	}
}

// entrySlot is the slot of the entry that the key hashed to h most likely
// occupies, read from v without the lock: the first word of the key's
// probe run with the key's fingerprint, among the run's first
// prefetchProbe words (the lines prefetchRun brought in). ok is false when
// none is found there, or v has no index. The run is followed, not just
// the home word: with linear probing a key often sits past its home word
// (a quarter of the keys in TestPrefetchFindsEntriesPastHome; the index is
// kept 3/8 to 3/4 full), and a key whose entry was not prefetched costs
// its lookup a cache miss under the shard lock. The slot is within v.slab
// (a tombstone, whose bits match a fingerprint of all ones, gives a slot
// beyond it: not found). No allocation.
func (v *view) entrySlot(h uint64) (slot int, ok bool) {
	if len(v.table) == 0 {
		return 0, false
	}
	mask := len(v.table) - 1
	fp := fingerprint(h)
	for i, n := int(h>>8)&mask, 0; n < prefetchProbe; i, n = (i+1)&mask, n+1 {
		w := atomic.LoadUint64(&v.table[i])
		if w&^0xFFFFFFFF == fp {
			slot = int(uint32(w) - 1)
			return slot, slot < len(v.slab)
		}
		if w == emptyWord {
			break // the end of the run: a key not present
		}
	}
	return 0, false
}

// prefetchEntry starts loading both cache lines entry e may span, for
// writing: a Throttle that finds its key writes the entry, and so does the
// drain (it clears the dirty flag).
func prefetchEntry(e *entry) {
	p := uintptr(unsafe.Pointer(e))
	prefetchw(p)
	prefetchw(p + unsafe.Sizeof(entry{}) - 1)
}

// prefetchEntryLocked is prefetchEntry for slot, if it exists. Requires
// sh.mu.
func (sh *shard) prefetchEntryLocked(slot uint32) {
	if int(slot) < len(sh.slab) {
		prefetchEntry(&sh.slab[slot])
	}
}

// noteFreeLocked publishes where the next insert's slot comes from
// (shard.freeAt, shard.freeEntry) after free changed. Requires sh.mu. Cost:
// two atomic stores, on an insert that takes a free slot and on every
// deletion; the entry's address is computed from a slot number the caller
// has just read or written (no miss).
func (sh *shard) noteFreeLocked() {
	var at, e uintptr
	if n := len(sh.free); n > 0 {
		at = uintptr(unsafe.Pointer(&sh.free[n-1]))
		if s := sh.free[n-1]; int(s) < len(sh.slab) {
			e = uintptr(unsafe.Pointer(&sh.slab[s]))
		}
	}
	sh.freeAt.Store(at)
	sh.freeEntry.Store(e)
}

// prefetchFree starts loading what an insert into sh reads and writes
// beyond the key's index line: the free list's last element (the slot
// number: in a CPU profile of bench/window.sh's FIXED row, whose keys the
// sweep removed during the row before and which are made again, 83% of
// insertLocked's own samples sat on that one load, a line touched only by
// the shard's inserts and deletions) and the entry of that slot, for
// writing. Prefetch calls it for a key entrySlot did not find: absent, or
// one of the few percent further than prefetchProbe words from home (a
// wasted prefetch). It takes no lock: the addresses may be stale (another
// insert took the slot, the slab or the list was reallocated), which only
// wastes the prefetch, as a prefetch never faults. Cost: two atomic loads
// and up to three prefetches, for keys not found only.
func (sh *shard) prefetchFree() {
	if p := sh.freeAt.Load(); p != 0 {
		prefetch(p)
		if e := sh.freeEntry.Load(); e != 0 {
			prefetchw(e)
			prefetchw(e + unsafe.Sizeof(entry{}) - 1)
		}
	}
}
