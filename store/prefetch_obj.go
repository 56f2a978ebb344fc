package store

import "unsafe"

// Prefetching objects. A write to a hash, list or sorted set on a key not
// in cache misses three more times after the entry, each load depending
// on the one before: the object's slot in shard.objs (at the entry's tat),
// the object's struct (the slot's pointer), and its elements' buffer (the
// struct's). In a CPU profile of HSET at pipeline 16 over 100k keys those
// three loads were ~29% of the server's samples. prefetchObjects starts
// them for a whole batch, one level at a time, so that the batch's misses
// overlap as Prefetch's do for the index and the entries.
//
// Unlike Prefetch's first passes it reads entries and slots, so it takes
// each key's shard lock (briefly, three times per key), and it runs only
// for shards holding objects (shard.liveObjs), so a batch of CL.THROTTLE
// on a store without objects pays one atomic load per key for it.

// DataAddresser is an Object whose elements live in a buffer of their own
// (kinds' compact forms) and whose writes are recorded in a journal buffer
// of their own (kinds' journals): PrefetchAddrs gives the elements'
// address and length (nil, 0 when it has none) and the journal buffer's
// address (nil when it has none). It must not allocate or write, and costs
// a load of the object's struct.
type DataAddresser interface {
	PrefetchAddrs() (data unsafe.Pointer, n int, journal unsafe.Pointer)
}

// prefetchDataLines is how many lines of an object's elements a prefetch
// starts at most (a write to a compact value reads them all: a sorted
// set's or hash's member lookup is a scan).
const prefetchDataLines = 4

// prefetchObjData starts loading what a write to o's object touches after
// its struct (which must be loaded or on its way): the first lines of its
// elements and its journal buffer. For a drain (forDrain) it starts the
// journal buffer only when there is one (a delta is taken from it and the
// elements are not read), else the elements (an image is written from
// them). Requires the object's shard lock.
func prefetchObjData(o *objSlot, tat uint64, forDrain bool) {
	d, ok := o.object(tat).(DataAddresser)
	if !ok {
		return
	}
	data, n, jb := d.PrefetchAddrs()
	if p := uintptr(jb); p != 0 {
		prefetchw(p)
		prefetchw(p + 63) // a struct of 64 bytes or more may span two lines (kinds' hashOwn)
		if forDrain {
			return
		}
	}
	if p := uintptr(data); p != 0 {
		n = min(n, prefetchDataLines*64)
		for off := 0; off < n; off += 64 {
			prefetch(p + uintptr(off))
		}
	}
}

// prefetchObjects is Prefetch's second half: hs holds the keys' hashes and
// is overwritten (scratch). Safe for concurrent use.
func (s *Store) prefetchObjects(keys [][]byte, hs []uint64) {
	// Level 1: the slot in objs. hs[i] becomes the shard's number (top
	// byte, as in a hash) and the slot + 1 (low 32 bits), or 0.
	any := false
	for i, h := range hs {
		sh := s.madeShard(h)
		if sh == nil || sh.liveObjs.Load() == 0 {
			hs[i] = 0
			continue
		}
		sh.mu.Lock()
		slot, _, ok := sh.findLocked(keys[i], h)
		var o *objSlot
		if ok {
			o = sh.objLocked(slot)
		}
		sh.mu.Unlock()
		if o == nil {
			hs[i] = 0
			continue
		}
		prefetch(uintptr(unsafe.Pointer(o)))
		hs[i] = h&^(1<<56-1) | uint64(slot) + 1
		any = true
	}
	if !any {
		return
	}
	// Level 2: the object's struct, from the slot's pointer.
	for _, w := range hs {
		if w == 0 {
			continue
		}
		sh := s.shardFor(w)
		sh.mu.Lock()
		if o := sh.objLocked(uint32(w) - 1); o != nil && o.p != nil {
			p := o.addr() // the object's struct
			prefetch(p)
			prefetch(p + 47) // a 48-byte struct may span two lines
		}
		sh.mu.Unlock()
	}
	// Level 3: the elements' buffer and the journal's, from the struct.
	for _, w := range hs {
		if w == 0 {
			continue
		}
		sh := s.shardFor(w)
		sh.mu.Lock()
		if o := sh.objLocked(uint32(w) - 1); o != nil {
			prefetchObjData(o, sh.slab[uint32(w)-1].tat, false)
		}
		sh.mu.Unlock()
	}
}

// prefetchBlockLocked prefetches, for writing, the first and (when on
// another line) the last bytes of the state in the window block of the
// entry in slot, when that entry is a window
// key whose state is in a block; anything else (a slot past the slab, a
// free slot, another kind, an inline window) costs the checks only.
// Requires sh.mu.
func (sh *shard) prefetchBlockLocked(slot int) {
	if slot < 0 || slot >= len(sh.slab) {
		return
	}
	if e := &sh.slab[slot]; e.kind() == KindWindow && e.tat != 0 && !e.winInline() {
		off, n, _ := winUnref(e.tat)
		if n > 0 && off >= 0 && off+n <= len(sh.win.heap) {
			p := uintptr(unsafe.Pointer(&sh.win.heap[off]))
			prefetchw(p)
			if q := p + uintptr(n) - 1; q>>6 != p>>6 {
				prefetchw(q) // a state of more than one line (winPad)
			}
		}
	}
}
