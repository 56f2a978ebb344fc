package store

import (
	"math"

	"github.com/celld/celld/window"
)

// Window keys (KindWindow, CL.WINDOW: spec/windows.md). A window key's
// state is the byte string package window encodes (17 bytes for FIXED, 25
// for SLIDING, a few bytes per entry for LOG, at most window.MaxLogEntries
// entries), kept in its shard's window heap: one []byte of blocks, no Go
// pointer, so window keys cost the garbage collector nothing to scan, like
// the slab and the arena. The key's entry holds the block's place instead
// of a TAT (entry.tat, see winRef), and kindFlags(KindWindow).
//
// A block is a power of two of at least minWinBlock bytes. A state that
// outgrows its block moves to a new one; the old block becomes garbage.
// A new block reuses a dead block of its size when there is one (the
// free lists below: a FIXED or SLIDING key that expires and is made again,
// the common case under load, then costs no heap growth and no
// compaction), else it goes at the heap's end; the heap is rewritten with
// the live blocks only when more than half of it is garbage (on the next
// allocation that finds the heap full, or in the sweep's shrink). An
// update that fits writes its block in place: a call on an existing key
// allocates nothing.
//
// Memory: a window key is charged keyCost plus winCost(block): the block
// and half of it again for the heap's garbage and growth slack, as the
// arena's key bytes are.

// windowHeap is a shard's window storage. Guarded by the shard's mu.
type windowHeap struct {
	heap    []byte // blocks
	garbage int    // dead bytes in heap (the free lists' blocks included)
	// free holds the offsets of dead blocks of 2^(minWinLog+i) bytes, for
	// i < winFreeClasses, reused LIFO by allocWinLocked; compaction
	// empties them. At most one 4-byte offset per 32 heap bytes.
	free    [winFreeClasses][]uint32
	scratch []byte // window.Limit.Apply's output, reused
}

const (
	minWinLog   = 5 // log2(minWinBlock)
	minWinBlock = 1 << minWinLog
	// winFreeClasses: blocks of 32 B to 4 KiB are kept for reuse; a
	// bigger dead block waits for compaction.
	winFreeClasses = 8
	// maxWinHeap keeps block offsets within winRef's 32 bits.
	maxWinHeap = 1 << 32
)

// winRef packs a block's place into entry.tat: offset<<32 | len<<8 | log2(cap).
func winRef(off, n, capLog int) uint64 { return uint64(off)<<32 | uint64(n)<<8 | uint64(capLog) }

func winUnref(ref uint64) (off, n, size int) {
	return int(ref >> 32), int(ref >> 8 & 0xFFFFFF), 1 << (ref & 0xFF)
}

// winCost is what a window block of size bytes adds to its key's charge.
func winCost(size int) int64 { return int64(size) + int64(size)/2 }

// winState returns slot's state bytes (a KindWindow entry). Valid until the
// heap changes. Requires sh.mu.
func (sh *shard) winState(slot uint32) []byte {
	off, n, _ := winUnref(sh.slab[slot].tat)
	return sh.win.heap[off : off+n : off+n]
}

// Window runs one CL.WINDOW decision for key at nowMs under the key's shard
// lock (spec/windows.md). An allowed call with q > 0 stores the new state
// with a TTL of its reset_after_ms (a write: new version for WATCH, dirty
// for persistence); any other call changes nothing (an expired key is
// deleted on the way, as every lookup does). Errors: ErrWrongType (the key
// holds a TAT, a string or another kind, or a window of another mode;
// nothing read or written), ErrInvalidValue (the stored state does not
// decode), ErrOOM (the call would create the key, used memory is over the
// bound and no room could be made).
//
// An expired key is a key that does not exist, as for every lookup; but
// when the call writes, its slot is written again in place (it counts as
// expired, and its name stays on the index): FIXED's keys all expire at
// their window's end and are made again by the next call, so this saves a
// delete and an insert (index tombstone, slot, key copy, block, and the
// deletion record persistence would write) on the common path under load.
//
// Cost: one hash, one index probe and window.Limit.Apply on the state
// under one lock; no allocation for an existing key whose state fits its
// block (a new key or a growing log may grow the slab, index or heap).
func (s *Store) Window(key []byte, l window.Limit, q int64, nowMs int64) (window.Result, error) {
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, pos, found := sh.findLocked(key, h)
	ok := found && sh.slab[slot].alive(nowMs)
	expired := found && !ok // its slot is reused if the call writes
	var oom error
	if !ok && s.overLimit() {
		if expired { // as lookupLocked: the memory it frees counts first
			sh.removeLocked(slot, pos)
			sh.expired++
			expired = false
		}
		slot, ok, oom = s.roomFor(sh, key, h, nowMs)
		pos = -1
	}
	var state []byte
	if ok {
		e := &sh.slab[slot]
		if e.kind() != KindWindow {
			return window.Result{}, ErrWrongType
		}
		state = sh.winState(slot)
	}
	r, next, write, err := l.Apply(state, nowMs, q, sh.win.scratch)
	sh.win.scratch = next[:0]
	if expired && (err != nil || !write) {
		sh.removeLocked(slot, pos) // gone on access, as lookupLocked does
		sh.expired++
		expired = false
	}
	switch {
	case err == window.ErrMode:
		return window.Result{}, ErrWrongType
	case err != nil:
		return window.Result{}, ErrInvalidValue
	case !write:
		return r, nil
	case !ok && !expired && oom != nil:
		return window.Result{}, oom
	}
	if expired {
		sh.expired++ // the slot now holds the new key (putWindowLocked)
	} else if !ok {
		slot = sh.insertLocked(key, h, pos)
	}
	if err := sh.putWindowLocked(slot, next, satAddMs(nowMs, r.ResetAfter), nowMs); err != nil {
		if !ok {
			sh.deleteSlotLocked(slot)
		}
		return window.Result{}, err
	}
	return r, nil
}

func satAddMs(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// putWindowLocked makes slot a window key holding state, expiring at exp,
// as a write (version, dirty mark, LRU clock). The slot may be new, a
// window key (its block is reused when state fits) or a key of another
// kind (whose state is released). It fails with ErrOOM only when the
// shard's heap would pass 4 GiB. Requires sh.mu.
func (sh *shard) putWindowLocked(slot uint32, state []byte, exp, nowMs int64) error {
	e := &sh.slab[slot]
	ref := e.tat
	if e.kind() != KindWindow {
		ref = 0 // writeLocked releases another kind's state
	}
	_, _, size := winUnref(ref)
	if ref == 0 || len(state) > size {
		if ref != 0 {
			sh.freeWinLocked(slot)
		}
		var err error
		if ref, err = sh.allocWinLocked(len(state)); err != nil {
			return err
		}
	}
	off := int(ref >> 32)
	copy(sh.win.heap[off:], state)
	ref = winRef(off, len(state), int(ref&0xFF))
	flags := kindFlags(KindWindow) | lruFlags(nowMs)
	sh.writeLocked(slot, ref, exp, flags, "")
	return nil
}

// allocWinLocked reserves a block for n bytes and charges it; the caller
// sets the entry's ref. Requires sh.mu.
func (sh *shard) allocWinLocked(n int) (uint64, error) {
	capLog := minWinLog
	for 1<<capLog < n {
		capLog++
	}
	size := 1 << capLog
	w := &sh.win
	if c := capLog - minWinLog; c < winFreeClasses {
		if f := w.free[c]; len(f) > 0 {
			off := f[len(f)-1]
			w.free[c] = f[:len(f)-1]
			w.garbage -= size
			sh.addMemLocked(winCost(size))
			return winRef(int(off), 0, capLog), nil
		}
	}
	if len(w.heap)+size > cap(w.heap) {
		sh.compactWinLocked()
	}
	if len(w.heap)+size > maxWinHeap {
		return 0, ErrOOM
	}
	off := len(w.heap)
	if len(w.heap)+size <= cap(w.heap) {
		w.heap = w.heap[:off+size]
	} else {
		w.heap = append(w.heap, make([]byte, size)...)
	}
	sh.addMemLocked(winCost(size))
	return winRef(off, 0, capLog), nil
}

// freeWinLocked releases slot's block (a KindWindow entry) and its charge.
// Requires sh.mu.
func (sh *shard) freeWinLocked(slot uint32) {
	e := &sh.slab[slot]
	off, _, size := winUnref(e.tat)
	sh.win.garbage += size
	if c := int(e.tat&0xFF) - minWinLog; c < winFreeClasses {
		sh.win.free[c] = append(sh.win.free[c], uint32(off))
	}
	sh.addMemLocked(-winCost(size))
	e.tat = 0
}

// compactWinLocked rewrites the heap with the live blocks only, when more
// than half of it (and at least 4 KiB) is garbage. Requires sh.mu.
// O(slab + live block bytes).
func (sh *shard) compactWinLocked() {
	w := &sh.win
	if w.garbage < 4096 || w.garbage*2 < len(w.heap) {
		return
	}
	live := len(w.heap) - w.garbage
	heap := make([]byte, 0, live+live/4)
	for i := range sh.slab {
		e := &sh.slab[i]
		if e.flags&flagUsed == 0 || e.kind() != KindWindow {
			continue
		}
		off, n, size := winUnref(e.tat)
		noff := len(heap)
		heap = append(heap, w.heap[off:off+size]...)
		e.tat = winRef(noff, n, int(e.tat&0xFF))
	}
	w.heap, w.garbage = heap, 0
	for c := range w.free {
		w.free[c] = w.free[c][:0] // their blocks are gone
	}
}

// dropWindowLocked is dropKindLocked's case for window keys.
func (sh *shard) dropWindowLocked(slot uint32) {
	if sh.slab[slot].kind() == KindWindow {
		sh.freeWinLocked(slot)
	}
}

// LoadWindow inserts a restored window key without marking it dirty (it is
// on disk already), replacing whatever key had the name. state is the
// window package's encoding, kept as it is (a state that does not decode
// answers ErrInvalidValue when used). Only for restoring.
func (s *Store) LoadWindow(key, state []byte, expireAtMs int64) error {
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, pos, exists := sh.findLocked(key, h)
	if !exists {
		slot = sh.insertLocked(key, h, pos)
	}
	wasDirty := sh.slab[slot].flags&flagDirty != 0
	if err := sh.putWindowLocked(slot, state, expireAtMs, 0); err != nil {
		if !exists {
			sh.deleteSlotLocked(slot)
			if sh.track {
				sh.deleted = sh.deleted[:len(sh.deleted)-1]
			}
		}
		return err
	}
	if sh.track && !wasDirty {
		sh.slab[slot].flags &^= flagDirty
		sh.dirty = sh.dirty[:len(sh.dirty)-1] // writeLocked just appended slot
	}
	return nil
}

// kindChangeLocked is changeLocked for a key of a kind other than
// KindString: a window key's state, copied into buf. Requires sh.mu.
func (sh *shard) kindChangeLocked(slot uint32, key, buf []byte) (Change, []byte) {
	e := &sh.slab[slot]
	start := len(buf)
	if e.kind() == KindWindow {
		buf = append(buf, sh.winState(slot)...)
	}
	return Change{Key: key, Text: buf[start:len(buf):len(buf)], Kind: e.kind(), ExpireAtMs: e.exp}, buf
}
