package store

import (
	"fmt"
	"math"
	"slices"

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
// allocation that finds the heap full, or in the sweep's shrink), in its
// own array unless that is large and mostly empty (compactWinLocked). A block
// of 64 bytes or more starts on a cache line (winPad): a LOG state of up
// to 64 bytes is one line for its call and its drain. An
// update that fits writes its block in place: a call on an existing key
// allocates nothing.
//
// Memory: a window key is charged keyCost plus winCost(block): the block
// and half of it again for the heap's garbage and growth slack, as the
// arena's key bytes are.
//
// Inline counters. A FIXED or SLIDING key whose name fits its entry
// (klen <= inlineKey, so entry.off is free) and whose counts are in range
// keeps its state in the entry itself, as numbers (winPack): no block, no
// second cache line, nothing charged beyond keyCost, and creating or
// expiring such a key costs what a TAT key costs. The low byte of
// entry.tat tells the forms apart: 0 no state yet (only inside a write),
// winTagFixed or winTagSliding inline counters, minWinLog or more a heap
// block's log2(size) (winRef). Every path that carries a window state as
// bytes (persistence, replication, COPY/RENAME/MOVE, restore) goes through
// putWindowLocked, which chooses the form, and appendWinState, which
// encodes either form as the window package's bytes: the disk, the
// stream and DUMP-like paths see the same 17 and 25 bytes as before.

// windowHeap is a shard's window storage. Guarded by the shard's mu.
//
// heap and scratch come first: the two headers every LOG call reads
// (winBlock, ApplyInPlaceTo's buffer), kept on one cache line of the
// shard (TestShardHotLines).
type windowHeap struct {
	heap    []byte // blocks
	scratch []byte // window.Limit.Apply's output, reused
	garbage int    // dead bytes in heap (the free lists' blocks included)
	// free holds the offsets of dead blocks of 2^(minWinLog+i) bytes, for
	// i < winFreeClasses, reused LIFO by allocWinLocked; compaction
	// empties them. At most one 4-byte offset per 32 heap bytes.
	free [winFreeClasses][]uint32
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

// Inline counters' tags (the low byte of entry.tat): the window modes'
// own numbers, below minWinLog (a block's smallest log2 size), and never 0.
const (
	winTagFixed   = uint64(window.Fixed)
	winTagSliding = uint64(window.Sliding)
)

// The inline layout: start in tat bits 8-51 (winStartBits); the other 44
// bits (tat bits 52-63, then off's 32) hold FIXED's count, or SLIDING's
// prev (low winSlideBits) and curr (high winSlideBits).
const (
	winStartBits = 44
	winHiBits    = 44
	winSlideBits = winHiBits / 2
)

// winInline reports whether e (a KindWindow entry) keeps its counters
// inline rather than in a heap block.
func (e *entry) winInline() bool { t := e.tat & 0xFF; return t == winTagFixed || t == winTagSliding }

// winGraceMs is how long after its expiry the sweep leaves a window key
// alone: inline FIXED or SLIDING counters, or a LOG (or long-named) key's
// state in its block.
//
// Why: every key of a FIXED window expires at the window's end, and under
// load the next call comes soon after. If the sweep got there first, that
// call finds nothing and makes the key again (an index probe to the end of
// its run, a slot, the key's copy, an index word: a tombstone left and a
// word added), and the sweep paid a hash, an index miss and the removal
// before it. Found expired instead, the key is made again in its own slot
// (Window reuses an expired slot that it writes): no index change at all.
// In a CPU profile of bench/window.sh's FIXED row at pipeline 16 that
// churn was the largest cost a FIXED call paid beyond a CL.THROTTLE call.
// A LOG key expires a window after its last allowed call; one called
// again within the grace after that (a client a little slower than the
// window, or back after a pause) is made again in its slot and its block
// (putWindowLocked reuses a block the state fits): no index change, no
// block freed and allocated, no deletion record for persistence. In
// bench/window.sh's LOG row 6-8% of the calls remade a key the sweep had
// removed during the CL.THROTTLE row before it.
//
// What it changes: no read or write sees the key. An expired key is
// missing for every read and write whether or not the sweep has removed it
// (the lookups test the expiry); the counts (DBSIZE, INFO keyspace) include
// expired keys not yet removed, as Redis's do, so for up to a second they
// count expired window keys that a sweep would have removed; the key is
// removed by the first lookup that does not write it, the sweep after the
// grace, or eviction, which takes expired keys at any time. Memory: the
// window keys that expired in the last second keep their entries and
// blocks (and their charge in used_memory) a second longer: at most the
// window keys that were live a second ago.
const winGraceMs = 1000

// winGrace reports whether e, expired at nowMs, is a window key within
// winGraceMs of its expiry, which the sweep leaves alone. Cost: a
// subtraction and a flags test for an expired key (the sweep's loop).
func (e *entry) winGrace(nowMs int64) bool {
	return nowMs-e.exp < winGraceMs && e.flags&kindMask == kindFlags(KindWindow)
}

// winPack packs counters of mode m into an entry's tat and off, or
// reports false when they do not fit (a start before the epoch or after
// 2527, a FIXED count of 2^44 or more, SLIDING counts of 2^22 or more).
func winPack(m window.Mode, c window.Counters) (tat uint64, off uint32, ok bool) {
	if uint64(c.Start) >= 1<<winStartBits {
		return 0, 0, false
	}
	var hi uint64
	switch m {
	case window.Fixed:
		if uint64(c.Curr) >= 1<<winHiBits || c.Prev != 0 {
			return 0, 0, false
		}
		hi = uint64(c.Curr)
	case window.Sliding:
		if uint64(c.Prev) >= 1<<winSlideBits || uint64(c.Curr) >= 1<<winSlideBits {
			return 0, 0, false
		}
		hi = uint64(c.Prev) | uint64(c.Curr)<<winSlideBits
	default:
		return 0, 0, false
	}
	return uint64(m) | uint64(c.Start)<<8 | hi<<(8+winStartBits), uint32(hi >> (64 - 8 - winStartBits)), true
}

// winUnpack is winPack's inverse for an inline entry's tat and off.
func winUnpack(tat uint64, off uint32) (window.Mode, window.Counters) {
	m := window.Mode(tat & 0xFF)
	start := int64(tat >> 8 & (1<<winStartBits - 1))
	hi := tat>>(8+winStartBits) | uint64(off)<<(64-8-winStartBits)
	if m == window.Sliding {
		return m, window.Counters{Start: start, Prev: int64(hi & (1<<winSlideBits - 1)), Curr: int64(hi >> winSlideBits)}
	}
	return m, window.Counters{Start: start, Curr: int64(hi)}
}

// winCost is what a window block of size bytes adds to its key's charge.
func winCost(size int) int64 { return int64(size) + int64(size)/2 }

// winBlock is winState with the block's whole size as its capacity, for
// a state rewritten in place (window.Limit.ApplyInPlace). Requires sh.mu.
func (sh *shard) winBlock(slot uint32) []byte {
	off, n, size := winUnref(sh.slab[slot].tat)
	return sh.win.heap[off : off+n : off+size]
}

// setWinLenLocked records a write of slot's state that was made in its
// block (winBlock): its new length n, expiring at exp, as
// putWindowLocked's write (version, dirty mark, LRU clock). Requires sh.mu.
func (sh *shard) setWinLenLocked(slot uint32, n int, exp, nowMs int64) {
	ref := sh.slab[slot].tat
	sh.writeLocked(slot, winRef(int(ref>>32), n, int(ref&0xFF)), exp, kindFlags(KindWindow)|lruFlags(nowMs), "")
}

// winState returns slot's state bytes (a KindWindow entry with a heap
// block). Valid until the heap changes. Requires sh.mu.
func (sh *shard) winState(slot uint32) []byte {
	off, n, _ := winUnref(sh.slab[slot].tat)
	return sh.win.heap[off : off+n : off+n]
}

// appendWinState appends slot's state (a KindWindow entry, either form)
// to buf as the window package's bytes. Requires sh.mu.
func (sh *shard) appendWinState(buf []byte, slot uint32) []byte {
	e := &sh.slab[slot]
	if e.winInline() {
		m, c := winUnpack(e.tat, e.off)
		return window.AppendCounters(buf, m, c)
	}
	if e.tat == 0 {
		return buf
	}
	return append(buf, sh.winState(slot)...)
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
// Cost: one hash, one index probe and the decision under one lock. A
// FIXED or SLIDING key with an inline state (see "Inline counters") reads
// and writes nothing but its entry, as a CL.THROTTLE does; a LOG key runs
// window.Limit.Apply over its block. No allocation for an existing key
// whose state fits (a new key or a growing log may grow the slab, index
// or heap). WindowTo is the same call for the hot path.
func (s *Store) Window(key []byte, l window.Limit, q int64, nowMs int64) (window.Result, error) {
	var r window.Result
	err := s.WindowTo(&r, key, l, q, nowMs)
	return r, err
}

// WindowTo is Window with the decision written to *r instead of returned:
// CL.WINDOW's handler calls it with r on its stack. A returned
// window.Result (five fields) was stored field by field by the decision,
// then copied with 16-byte loads at each return on the way up (the
// window package, windowInlineLocked, Window), and the CPU cannot forward
// such a load from the narrower stores before it: each copy waited for
// them to reach the cache. Through r each field is stored once, where
// the handler reads it. On an error *r is the zero Result. Safe for
// concurrent use (the shard lock); r must be the caller's own.
func (s *Store) WindowTo(r *window.Result, key []byte, l window.Limit, q int64, nowMs int64) error {
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	slot, pos, found := sh.findLocked(key, h)
	if found && l.Mode == window.Log && l.WindowMs > 0 {
		// The common LOG call: a live key with its state in a block.
		if done, err := sh.windowLogLocked(r, slot, l, q, nowMs); done {
			sh.mu.Unlock()
			return err
		}
	}
	if found && l.WindowMs > 0 {
		// The common FIXED or SLIDING call: a key of the call's mode with
		// inline counters (windowInlineLocked; the mode is the tag).
		// WindowMs > 0: nothing in it can panic with the lock held.
		if e := &sh.slab[slot]; e.flags&kindMask == kindFlags(KindWindow) && e.tat&0xFF == uint64(l.Mode) && e.winInline() {
			switch {
			case e.alive(nowMs):
				err := sh.windowInlineLocked(r, slot, l, q, nowMs, true)
				sh.mu.Unlock()
				return err
			case 0 < q && q <= l.Limit && !s.overLimit():
				// Expired (a FIXED key's first call in each window, in
				// its grace): a fresh key's call that fits, which
				// always writes, so the slot is remade in place, as
				// windowLocked does with an expired key it writes.
				sh.expired++
				err := sh.windowInlineLocked(r, slot, l, q, nowMs, false)
				sh.mu.Unlock()
				return err
			}
		}
	}
	return s.windowLocked(r, sh, key, h, slot, pos, found, l, q, nowMs)
}

// windowInlineLocked is Window's call on slot, a window key of l.Mode
// (FIXED or SLIDING) with inline counters, live (its counters are read)
// or expired (live false: decided as a missing key, for a call that
// writes): the decision on the entry's numbers and, for a write, the new
// ones packed back into the entry (or, past the inline range, a block:
// putCountersLocked). The decision goes to *r (the zero Result on an
// error). Requires sh.mu.
//
// Cost: what Window's general path spends on the same call without its
// tests for the other cases (kind, memory bound, LOG, a new key), its
// deferred unlock, and the release of a block an inline key does not
// have: the path of every FIXED and SLIDING call on a key it finds.
func (sh *shard) windowInlineLocked(r *window.Result, slot uint32, l window.Limit, q, nowMs int64, live bool) error {
	e := &sh.slab[slot]
	var c window.Counters
	if live {
		_, c = winUnpack(e.tat, e.off)
	}
	nc, write, err := l.ApplyCountersTo(r, c, live, nowMs, q)
	switch {
	case err != nil: // inline counts are never negative; kept as Window's answer
		*r = window.Result{}
		return ErrInvalidValue
	case !write:
		return nil
	}
	exp := satAddMs(nowMs, r.ResetAfter)
	if tat, off, ok := winPack(l.Mode, nc); ok {
		sh.writeLocked(slot, tat, exp, kindFlags(KindWindow)|lruFlags(nowMs), "")
		sh.slab[slot].off = off
		return nil
	}
	if err := sh.putCountersLocked(slot, l.Mode, nc, exp, nowMs); err != nil {
		*r = window.Result{}
		return err
	}
	return nil
}

// windowLogLocked is Window's direct path for a LOG call on slot, a key
// that exists: when slot is a live window key whose state is in a block
// (a LOG state, or a FIXED or SLIDING one out of the inline range or
// under a long name, which the call answers as windowLocked does), it
// decides the call into *r, writes the new state (in the block when it
// fits, else through putWindowLocked) and reports done; else (another
// kind, inline counters, an expired key: the memory bound, WRONGTYPE and
// the remade slot are windowLocked's) it reports false with nothing read
// into *r or written. Its answers, state and memory are windowLocked's for
// the same call (TestWindowLogDirectAgainstGeneral). Requires sh.mu; l.WindowMs > 0.
//
// Cost: what windowLocked spends on the same call without its deferred
// unlock and its tests for the cases it does not take (a new or expired
// key, the memory bound, inline counters): one entry test, then
// Limit.ApplyInPlaceTo over the block.
func (sh *shard) windowLogLocked(r *window.Result, slot uint32, l window.Limit, q, nowMs int64) (done bool, err error) {
	e := &sh.slab[slot]
	// A block's log2 size is at least minWinLog; 0 (no state) and the
	// inline tags are below it.
	if e.flags&kindMask != kindFlags(KindWindow) || e.tat&0xFF < minWinLog || !e.alive(nowMs) {
		return false, nil
	}
	next, inPlace, write, err := l.ApplyInPlaceTo(r, sh.winBlock(slot), nowMs, q, sh.win.scratch)
	if !inPlace {
		sh.win.scratch = next[:0]
	}
	switch {
	case err == window.ErrMode:
		*r = window.Result{}
		return true, ErrWrongType
	case err != nil:
		*r = window.Result{}
		return true, ErrInvalidValue
	case !write:
		return true, nil
	}
	exp := satAddMs(nowMs, r.ResetAfter)
	if inPlace {
		sh.setWinLenLocked(slot, len(next), exp, nowMs)
		return true, nil
	}
	if err := sh.putWindowLocked(slot, next, exp, nowMs); err != nil {
		*r = window.Result{}
		return true, err
	}
	return true, nil
}

// windowLocked is Window after the key's lookup (slot, pos, found:
// findLocked's answer) for every case windowInlineLocked does not take,
// the decision to *r (the zero Result on an error). It unlocks sh.mu.
func (s *Store) windowLocked(r *window.Result, sh *shard, key []byte, h uint64, slot uint32, pos int, found bool, l window.Limit, q, nowMs int64) error {
	defer sh.mu.Unlock()
	ok := found && sh.slab[slot].alive(nowMs)
	expired := found && !ok // its slot is reused if the call writes
	var oom error
	if !ok && s.overLimit() {
		if expired { // as lookupLocked: the memory it frees counts first
			sh.expireLocked(slot, pos)
			sh.expired++
			expired = false
		}
		slot, ok, oom = s.roomFor(sh, key, h, nowMs)
		pos = -1
	}
	var (
		next []byte          // the new state as bytes (a LOG, or a state in a block)
		nc   window.Counters // the new state as numbers (FIXED, SLIDING)
		// inPlace: next is already in slot's block (its length to set)
		inPlace bool
		write   bool
		err     error
	)
	counters := l.Mode == window.Fixed || l.Mode == window.Sliding
	switch {
	case ok && sh.slab[slot].kind() != KindWindow:
		*r = window.Result{}
		return ErrWrongType
	case ok && sh.slab[slot].winInline():
		e := &sh.slab[slot]
		m, c := winUnpack(e.tat, e.off)
		if m != l.Mode {
			*r = window.Result{}
			return ErrWrongType
		}
		nc, write, err = l.ApplyCountersTo(r, c, true, nowMs, q)
	case ok:
		// A LOG state is rewritten in its block when the new one fits
		// (window.Limit.ApplyInPlace): no copy of the log to scratch
		// and back.
		counters = false
		next, inPlace, write, err = l.ApplyInPlaceTo(r, sh.winBlock(slot), nowMs, q, sh.win.scratch)
		if !inPlace {
			sh.win.scratch = next[:0]
		}
	case counters:
		nc, write, err = l.ApplyCountersTo(r, window.Counters{}, false, nowMs, q)
	default:
		*r, next, write, err = l.Apply(nil, nowMs, q, sh.win.scratch)
		sh.win.scratch = next[:0]
	}
	if expired && (err != nil || !write) {
		sh.expireLocked(slot, pos) // gone on access, as lookupLocked does
		sh.expired++
		expired = false
	}
	switch {
	case err == window.ErrMode:
		*r = window.Result{}
		return ErrWrongType
	case err != nil:
		*r = window.Result{}
		return ErrInvalidValue
	case !write:
		return nil
	case !ok && !expired && oom != nil:
		*r = window.Result{}
		return oom
	}
	if expired {
		sh.expired++ // the slot now holds the new key (putWindowLocked)
	} else if !ok {
		slot = sh.insertLocked(key, h, pos)
		sh.slab[slot].flags |= kindFlags(KindWindow) // a new slot: no other kind's state to release
	}
	exp := satAddMs(nowMs, r.ResetAfter)
	switch {
	case inPlace:
		sh.setWinLenLocked(slot, len(next), exp, nowMs)
	case counters:
		err = sh.putCountersLocked(slot, l.Mode, nc, exp, nowMs)
	default:
		err = sh.putWindowLocked(slot, next, exp, nowMs)
	}
	if err != nil {
		if !ok {
			sh.deleteSlotLocked(slot)
		}
		*r = window.Result{}
		return err
	}
	return nil
}

// putCountersLocked is putWindowLocked for a FIXED or SLIDING state held
// as numbers: inline when the key's name and the counts allow it, else
// encoded into a block. Requires sh.mu.
func (sh *shard) putCountersLocked(slot uint32, m window.Mode, c window.Counters, exp, nowMs int64) error {
	if sh.slab[slot].klen <= inlineKey {
		if tat, off, ok := winPack(m, c); ok {
			sh.putInlineLocked(slot, tat, off, exp, nowMs)
			return nil
		}
	}
	buf := window.AppendCounters(sh.win.scratch[:0], m, c)
	sh.win.scratch = buf[:0]
	return sh.putWindowLocked(slot, buf, exp, nowMs)
}

// putInlineLocked makes slot a window key with the inline state tat, off
// (winPack), releasing a block it had. Requires sh.mu.
func (sh *shard) putInlineLocked(slot uint32, tat uint64, off uint32, exp, nowMs int64) {
	sh.releaseWinBlockLocked(slot)
	sh.writeLocked(slot, tat, exp, kindFlags(KindWindow)|lruFlags(nowMs), "")
	sh.slab[slot].off = off
}

// releaseWinBlockLocked frees slot's heap block if it is a window key
// that has one. Requires sh.mu.
func (sh *shard) releaseWinBlockLocked(slot uint32) {
	if e := &sh.slab[slot]; e.kind() == KindWindow && e.tat != 0 && !e.winInline() {
		sh.freeWinLocked(slot)
	}
}

func satAddMs(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// putWindowLocked makes slot a window key holding state, expiring at exp,
// as a write (version, dirty mark, LRU clock): inline when state is FIXED's
// or SLIDING's and winPack takes it and the key's name is inline, else in a
// block. The slot may be new, a window key (its block is reused when state
// fits) or a key of another kind (whose state is released). It fails with
// ErrOOM only when the shard's heap would pass 4 GiB. Requires sh.mu.
func (sh *shard) putWindowLocked(slot uint32, state []byte, exp, nowMs int64) error {
	e := &sh.slab[slot]
	if e.klen <= inlineKey {
		if m, c, ok := window.DecodeCounters(state); ok {
			if tat, off, ok := winPack(m, c); ok {
				sh.putInlineLocked(slot, tat, off, exp, nowMs)
				return nil
			}
		}
	}
	ref := e.tat
	if e.kind() != KindWindow || e.winInline() {
		ref = 0 // writeLocked releases another kind's state; inline counters have no block
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
	if len(w.heap)+size+winPad(len(w.heap), size) > cap(w.heap) {
		sh.compactWinLocked()
	}
	pad := winPad(len(w.heap), size)
	if len(w.heap)+pad+size > maxWinHeap {
		return 0, ErrOOM
	}
	if pad > 0 {
		// The 32 bytes before a block of a line or more: a dead block of
		// the smallest class, for the next state that fits it.
		w.free[0] = append(w.free[0], uint32(len(w.heap)))
		w.garbage += pad
	}
	off := len(w.heap) + pad
	if off+size <= cap(w.heap) {
		w.heap = w.heap[:off+size]
	} else {
		w.heap = append(w.heap, make([]byte, pad+size)...)
	}
	sh.addMemLocked(winCost(size))
	return winRef(off, 0, capLog), nil
}

// winLine is the cache line blocks of its size or more start on.
const winLine = 64

// winPad is how many bytes go before a block of size placed at heap
// offset off, so that a block of a cache line or more starts on a line
// (offset a multiple of winLine) and never spans one line more than its
// size needs: a LOG state of up to 64 bytes, the common one (a key called
// a few times per window), is one line to load and write for its call
// and one to read for its drain instead of two in almost half the cases
// (an offset 32 past a line, left by a block of 32). Every offset is a
// multiple of minWinBlock, so the pad is 0 or 32 bytes, one block of
// the smallest class. Offsets, not addresses: the heap's array starts on
// a line whenever it holds 512 bytes or more (Go's size classes from 512
// bytes up and large allocations are multiples of 64 bytes, in spans that
// start on a page), so below that a block may still span two lines; that
// costs a cache line, never a wrong state.
func winPad(off, size int) int {
	if size < winLine {
		return 0
	}
	return -off & (winLine - 1)
}

// freeWinLocked releases slot's block (a KindWindow entry with a block)
// and its charge.
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

// winKeepHeap is the heap capacity compaction always keeps: a heap of up
// to 64 KiB (a shard's LOG keys of bench/window.sh's row: ~400 keys of
// 64-128 bytes) is compacted in place and keeps its array, as is a
// larger one still a quarter live; only a larger heap mostly garbage is
// moved to a smaller array (its memory handed back).
const winKeepHeap = 64 << 10

// compactWinLocked rewrites the heap with the live blocks only, when more
// than half of it (and at least 4 KiB) is garbage. Requires sh.mu.
//
// A heap of up to winKeepHeap bytes, or at least a quarter live, is
// compacted in place (compactWinInPlaceLocked): its array is kept, so
// the keys made again after a mass expiry (every LOG key of a window
// expires a window after its last call, and the sweep compacts then) fill
// it again without growing it by appends, copies and fresh pages (lost
// profile of bench/window.sh's LOG row: allocWinLocked 4.12% → 0.29% of
// the samples, page faults 5.4% → 1.4%). A larger heap mostly garbage is
// copied to a new array of its live blocks and a quarter more: the blocks
// of a line or more first, then those of 32 bytes, so each starts on a
// line with no pad between them (winPad).
//
// Memory: the kept capacity beyond the live blocks is not charged (blocks
// are charged as they are allocated, winCost): up to winKeepHeap per shard,
// or three quarters of a larger heap.
// O(slab + live blocks·log(live blocks) + live block bytes).
func (sh *shard) compactWinLocked() {
	w := &sh.win
	if w.garbage < 4096 || w.garbage*2 < len(w.heap) {
		return
	}
	live := len(w.heap) - w.garbage
	if cap(w.heap) <= winKeepHeap || live*4 >= cap(w.heap) {
		sh.compactWinInPlaceLocked()
		return
	}
	heap := make([]byte, 0, live+live/4)
	// Blocks of a line or more first, then the blocks of 32 bytes: every
	// block starts on a line (winPad) and no pad is needed. Two passes
	// over the slab, on a path that is already O(slab).
	for _, small := range [2]bool{false, true} {
		for i := range sh.slab {
			e := &sh.slab[i]
			if e.flags&flagUsed == 0 || e.kind() != KindWindow || e.tat == 0 || e.winInline() {
				continue
			}
			off, n, size := winUnref(e.tat)
			if (size < winLine) != small {
				continue
			}
			noff := len(heap)
			heap = append(heap, w.heap[off:off+size]...)
			e.tat = winRef(noff, n, int(e.tat&0xFF))
		}
	}
	w.heap, w.garbage = heap, 0
	for c := range w.free {
		w.free[c] = w.free[c][:0] // their blocks are gone
	}
}

// compactWinInPlaceLocked is compactWinLocked keeping the heap's array:
// the live blocks slide down in offset order (each one's new place is at
// or before its old one, so a copy never overwrites a block not yet
// moved), each block of a line or more onto a line (winPad: a pad of 32
// bytes becomes a dead block of the smallest class, as at the heap's
// end). Only a block's state bytes are copied. Requires sh.mu.
// Allocation: one 8-byte word per live block, for the sort.
func (sh *shard) compactWinInPlaceLocked() {
	w := &sh.win
	var blocks []uint64 // offset<<32 | slot of every live block
	if live := len(w.heap) - w.garbage; live > 0 {
		blocks = make([]uint64, 0, live/minWinBlock)
		for i := range sh.slab {
			e := &sh.slab[i]
			if e.flags&flagUsed == 0 || e.kind() != KindWindow || e.tat == 0 || e.winInline() {
				continue
			}
			blocks = append(blocks, e.tat>>32<<32|uint64(i))
		}
		slices.Sort(blocks)
	}
	for c := range w.free {
		w.free[c] = w.free[c][:0] // rebuilt from the pads below
	}
	w.garbage = 0
	end := 0
	for _, b := range blocks {
		e := &sh.slab[uint32(b)]
		off, n, size := winUnref(e.tat)
		noff := end
		if pad := winPad(end, size); pad > 0 {
			w.free[0] = append(w.free[0], uint32(end))
			w.garbage += pad
			noff += pad
		}
		if noff != off {
			copy(w.heap[noff:noff+n], w.heap[off:off+n])
			e.tat = winRef(noff, n, int(e.tat&0xFF))
		}
		end = noff + size
	}
	w.heap = w.heap[:end]
}

// dropWindowLocked is dropKindLocked's case for window keys.
func (sh *shard) dropWindowLocked(slot uint32) {
	sh.releaseWinBlockLocked(slot)
}

// ErrWindowState is the error LoadWindow and ApplyChange give for a
// window state that does not decode (window.Load: a damaged LOG state, a
// LOG header that does not match its entries, an unknown mode); it wraps
// ErrInvalidValue. Nothing is written.
var ErrWindowState = fmt.Errorf("%w: damaged CL.WINDOW state", ErrInvalidValue)

// loadWinState is window.Load for a state that enters the store from
// outside (restore, replication): a plain LOG state comes back in the
// header format, in the shard's scratch buffer. Requires sh.mu.
func (sh *shard) loadWinState(state []byte) ([]byte, error) {
	out, err := window.Load(state, sh.win.scratch)
	if err != nil {
		return nil, ErrWindowState
	}
	if len(state) > 0 && len(out) > 0 && &out[0] != &state[0] {
		sh.win.scratch = out[:0]
	}
	return out, nil
}

// LoadWindow inserts a restored window key without marking it dirty (it is
// on disk already), replacing whatever key had the name. state is the
// window package's encoding, checked and converted by window.Load (a LOG
// state written before the header format is rewritten in it); a state
// that does not decode is refused with ErrWindowState, and nothing is
// written. Only for restoring.
func (s *Store) LoadWindow(key, state []byte, expireAtMs int64) error {
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	state, err := sh.loadWinState(state)
	if err != nil {
		return err
	}
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
		buf = sh.appendWinState(buf, slot)
	}
	return Change{Key: key, Text: buf[start:len(buf):len(buf)], Kind: e.kind(), ExpireAtMs: e.exp}, buf
}
