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
// lookup) of it will read: first every key's index word, then, for each word
// that matches, the slab entry it points to. It changes nothing and takes no
// lock, so it is safe for concurrent use with everything; a key changed
// meanwhile merely wastes its prefetch. hs is scratch space of len(keys).
// Cost per key: one hash, one atomic load of a word that the first pass has
// usually brought in, and up to three prefetch instructions.
func (s *Store) Prefetch(keys [][]byte, hs []uint64) {
	hs = hs[:len(keys)]
	for i, k := range keys {
		h := s.hashKey(k)
		hs[i] = h
		if v := s.shardFor(h).view.Load(); v != nil && len(v.table) > 0 {
			prefetch(uintptr(unsafe.Pointer(&v.table[int(h>>8)&(len(v.table)-1)])))
		}
	}
	for _, h := range hs {
		v := s.shardFor(h).view.Load()
		if v == nil || len(v.table) == 0 {
			continue
		}
		w := atomic.LoadUint64(&v.table[int(h>>8)&(len(v.table)-1)])
		if w&^0xFFFFFFFF != fingerprint(h) {
			continue // empty, or another key: the lookup will probe on
		}
		if slot := int(uint32(w) - 1); slot < len(v.slab) {
			prefetchEntry(&v.slab[slot])
		}
	}
	s.prefetchObjects(keys, hs) // prefetch_obj.go
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
