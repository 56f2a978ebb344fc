package store

import (
	"strconv"
	"time"
	"unsafe"

	"github.com/celld/celld/window"
)

// KeyString views key bytes handed to a walk callback as a string without
// copying, for matching; like the bytes, it is valid only during the call.
func KeyString(key []byte) string { return unsafe.String(unsafe.SliceData(key), len(key)) }

// Scan is one step of a SCAN iteration. cursor 0 starts; the returned cursor
// is 0 when the iteration is complete. The cursor is shard<<32 | slot: keys
// never move between slots while they live, so a full iteration returns every
// key that was live from its start to its end (and possibly others). count is
// the number of slots to visit, Redis's COUNT hint. fn receives each live
// key; the bytes are the store's own, valid only during the call (copy to
// keep them), and fn runs under a shard lock, so it must not call back into
// the Store.
func (s *Store) Scan(cursor uint64, count int, nowMs int64, fn func(key []byte)) uint64 {
	if count < 1 {
		count = 1
	}
	si, slot := cursor>>32, uint32(cursor)
	visited := 0
	for si < nShards {
		sh := s.shards[si].Load()
		if sh == nil {
			si, slot = si+1, 0 // never used: no key
			continue
		}
		sh.mu.Lock()
		for int(slot) < len(sh.slab) && visited < count {
			if e := &sh.slab[slot]; e.flags&flagUsed != 0 && e.alive(nowMs) {
				fn(sh.keyOf(e))
			}
			slot++
			visited++
		}
		done := int(slot) >= len(sh.slab)
		sh.mu.Unlock()
		if !done {
			return si<<32 | uint64(slot)
		}
		si, slot = si+1, 0
		if visited >= count {
			break
		}
	}
	if si >= nShards {
		return 0
	}
	return si << 32
}

// Keys calls fn for every live key matching the glob pattern (KEYS), with
// the same ownership rules as Scan. O(keys).
func (s *Store) Keys(pattern string, nowMs int64, fn func(key []byte)) {
	all := pattern == "*"
	s.EachKey(nowMs, func(key []byte) bool {
		if all || Match(pattern, KeyString(key)) {
			fn(key)
		}
		return true
	})
}

// EachKey calls fn with every live key, shard by shard, until fn returns
// false; ownership as in Scan. It is the building block of KEYS and of
// CLUSTER COUNTKEYSINSLOT/GETKEYSINSLOT. O(keys), holding one shard lock at
// a time.
func (s *Store) EachKey(nowMs int64, fn func(key []byte) bool) {
	for i := range s.shards {
		sh := s.shards[i].Load()
		if sh == nil {
			continue // never used: no key, no state
		}
		sh.mu.Lock()
		for j := range sh.slab {
			e := &sh.slab[j]
			if e.flags&flagUsed != 0 && e.alive(nowMs) && !fn(sh.keyOf(e)) {
				sh.mu.Unlock()
				return
			}
		}
		sh.mu.Unlock()
	}
}

// SweepStep is one pass of the active expiry cycle, modelled on Redis's: in
// each shard, starting where the previous pass stopped, it looks at the next
// 64 slots and deletes the expired ones, repeating in that shard while more
// than a quarter of what it saw had expired and the time budget lasts. It
// returns the number of keys deleted. Each lock hold is one batch of 64
// slots, so the server never pauses for a sweep. Safe to call concurrently,
// though one sweeper is the intended use.
//
// When used memory is over the bound (evict.go), the step evicts by the
// policy first, within the same budget, in chunks that each hold the
// evictor for a few dozen evictions at most; evicted keys are not counted
// in the result.
func (s *Store) SweepStep(nowMs int64, budget time.Duration) int {
	deadline := time.Now().Add(budget)
	if s.overLimit() {
		s.evictUntil(nowMs, deadline)
	}
	deleted := 0
	start := int(s.sweepShard.Load())
	for n := 0; n < nShards; n++ {
		i := (start + n) % nShards
		sh := s.shards[i].Load()
		if sh == nil {
			continue // never used: no key
		}
		batches := 0
		for {
			sh.mu.Lock()
			seen, expired := sh.sweepBatchLocked(nowMs) // expire.go
			// After mass expiry, or mass eviction (the bound lowered):
			// evictions do not pass here, so the live count's fall is
			// the trigger too (one comparison).
			if expired > 0 || sh.peak >= shrinkMin && sh.used*4 < sh.peak {
				sh.shrinkLocked()
			}
			sh.expired += int64(expired)
			sh.mu.Unlock()
			deleted += expired
			batches++
			if expired*4 <= seen || time.Now().After(deadline) {
				break
			}
		}
		// The clock is read after a shard that took more than one batch,
		// else every 16 shards: a shard's single batch is a few µs.
		if (batches > 1 || n%16 == 15) && time.Now().After(deadline) {
			s.sweepShard.Store(uint32((i + 1) % nShards))
			return deleted
		}
	}
	return deleted
}

// shrinkMin is the shard size below which memory is not handed back: a
// rebuild is cheap, but below this it saves too little to matter.
const shrinkMin = 256

// shrinkLocked gives memory back after mass expiry: it sizes the index down
// when the live keys fall below a quarter of their peak, trims the slab's
// free tail when that is more than half its capacity (live keys never move,
// so SCAN cursors stay valid), and compacts the arena when half of it is
// garbage. Each rebuild resets its trigger, so an idle shard is not rebuilt
// again. Requires sh.mu.
func (sh *shard) shrinkLocked() {
	if sh.peak >= shrinkMin && sh.used*4 < sh.peak {
		sh.rehashLocked(max(minTable, nextPow2(sh.used*2)))
		sh.peak = sh.used
	}
	sh.compactArenaLocked()
	sh.compactWinLocked() // window.go
	end := len(sh.slab)
	for end > 0 && sh.slab[end-1].flags&flagUsed == 0 {
		end--
	}
	if cap(sh.slab) < shrinkMin || end*2 >= cap(sh.slab) {
		return
	}
	slab := make([]entry, end, end+end/4)
	copy(slab, sh.slab[:end])
	sh.slab = slab
	sh.publishLocked()
	free := make([]uint32, 0, len(sh.free))
	for _, f := range sh.free {
		if int(f) < end {
			free = append(free, f)
		}
	}
	sh.free = free
	sh.noteFreeLocked()
	// Dirty slots past the end were freed, so their keys are on the
	// deleted list already (a freed key that was dirty always is:
	// expire.go).
	dirty := sh.dirty[:0]
	for _, d := range sh.dirty {
		if int(d) < end {
			dirty = append(dirty, d)
		}
	}
	sh.dirty = dirty
	if int(sh.sweep) > end {
		sh.sweep = 0
	}
}

// Change is one key's state for persistence: Deleted, or the value and its
// expiry. The value is TAT when IsTAT (a plain TAT, the common case: no
// text is formatted for it), else its text; for a key of another Kind
// (KindWindow: the window package's encoded state) Text is that kind's
// bytes. Key and Text are the receiver's to keep but never to modify: a
// verbatim string's Text views the store's own immutable copy of it.
type Change struct {
	Key        []byte
	Text       []byte
	TAT        uint64
	IsTAT      bool
	ExpireAtMs int64
	Deleted    bool
	// Kind is the key's kind. A KindWindow state is in Text; for a hash,
	// list or sorted set the value is Image, the object's whole content
	// (Object.AppendImage).
	Kind  Kind
	Image []byte
	// Gen is the generation of an object's Image; with Delta, Image is
	// instead the delta's segments, Gen the last one's (journal.go).
	Gen   uint64
	Delta bool
	// Verbatim: Text is a verbatim string's bytes (flagRaw), which is
	// never the canonical decimal of a number (the store keeps those as
	// TATs), so an encoder need not test it for one (persist writes
	// such texts as 8-byte numbers).
	Verbatim bool
	// WinMode is set (window.Fixed or window.Sliding) instead of Text for
	// a KindWindow key whose counters the store keeps inline, as numbers
	// (window.go), in the changes DrainShardsView gives: Win holds them,
	// and the receiver encodes them without a round trip through the
	// window package's bytes (window.AppendCounters(nil, WinMode, Win) is
	// the Text it stands for). DumpShard gives them so too. 0 in every
	// other Change.
	WinMode window.Mode
	Win     window.Counters
}

// Drain returns every change since the previous Drain, deletions first, then
// the current state of each written key, appended to buf. The keys and
// formatted texts are copied into byte blocks (see DrainFunc), verbatim
// strings are viewed (Change); the receiver may keep them and must not
// modify them. Only meaningful with Options.TrackDirty.
// Plain TATs come with their text too (Text, as GET returns it).
func (s *Store) Drain(nowMs int64, buf []Change) []Change {
	s.DrainFunc(nowMs, nil, func(c Change) {
		if c.IsTAT {
			c.Text = strconv.AppendUint(nil, c.TAT, 10)
		}
		buf = append(buf, c)
	})
	return buf
}

// DrainFunc calls fn with every change since the previous drain, shard by
// shard, deletions first, then the current state of each written key, and
// returns block. It holds each shard lock once, for that shard's changes
// (fn runs under it: it must only record the change).
//
// Keys and formatted texts (and object images) are copied into block (appending) while it has room for a
// shard's changes, and into a block of that shard's size otherwise. A
// caller that knows every Change of an earlier call is no longer referenced
// may pass that call's block back as block[:0], so that a steady load
// reuses one buffer; a bulk window falls back to per-shard blocks rather
// than growing a huge one. Bytes once cut for a Change are never written
// again by this call.
func (s *Store) DrainFunc(nowMs int64, block []byte, fn func(Change)) []byte {
	_, block = s.DrainShards(nowMs, 0, 0, block, fn)
	return block
}

// DrainShards is DrainFunc for the shards from first (0 ≤ first <
// NumShards) on, stopping after the shard at which the changes passed to
// fn reach limit (0: no limit). It returns the shard to start the next
// call at (NumShards when it drained them all) and the block. A caller
// that bounds each window's buffers (persistence under --maxmemory) drains
// in pieces of about limit changes: a piece can pass limit by at most one
// shard's changes.
func (s *Store) DrainShards(nowMs int64, first, limit int, block []byte, fn func(Change)) (next int, _ []byte) {
	count := 0
	for i := first; i < nShards; i++ {
		if limit > 0 && count >= limit {
			return i, block
		}
		sh := s.shards[i].Load()
		if sh == nil {
			continue // never used: no key, no change
		}
		sh.mu.Lock()
		deleted, dirty := sh.deleted, sh.dirty
		sh.deleted, sh.dirty = nil, sh.spare[:0]
		sh.noteDirtyTailLocked()
		for _, k := range deleted {
			fn(Change{Key: k, Deleted: true})
		}
		if cap(deleted) <= maxDelSpare {
			// The list (not its keys' bytes, which fn may keep) is
			// reused: a load that expires keys steadily (a FIXED
			// window's keys all end at its boundary) then does not
			// regrow it from nothing in every window.
			clear(deleted)
			sh.deleted = deleted[:0]
		}
		// Keys up to 16 bytes inline (TATs need no text): ~16-20 bytes
		// each; window states and texts more: the last drain's figure.
		est := len(dirty) * max(sh.drainPer, 20)
		blk := block
		shared := cap(block)-len(block) >= est
		if !shared && len(dirty) > 0 {
			blk = make([]byte, 0, est)
		}
		base := len(blk)
		for j, slot := range dirty {
			if j+drainAhead < len(dirty) {
				// Dirty slots are in no useful order: start the miss
				// of an entry a few ahead, so they overlap.
				sh.prefetchEntryLocked(dirty[j+drainAhead])
			}
			e := &sh.slab[slot]
			if e.flags&flagDirty == 0 {
				continue // freed (its deletion is listed) or listed twice
			}
			e.flags &^= flagDirty
			start := len(blk)
			blk = append(blk, sh.keyOf(e)...)
			key := blk[start:len(blk):len(blk)]
			if !e.alive(nowMs) && !e.winGrace(nowMs) { // a window key in its grace is written: DrainShardsViewNumbers
				sh.deleteSlotLocked(slot)
				sh.deleted = sh.deleted[:len(sh.deleted)-1] // listed here instead
				sh.expired++
				fn(Change{Key: key, Deleted: true})
				continue
			}
			var c Change
			c, blk = sh.changeLocked(slot, key, blk)
			fn(c)
		}
		if len(dirty) > 0 {
			sh.drainPer = min((len(blk)-base)/len(dirty)+4, 64)
		}
		if shared {
			block = blk
		}
		sh.spare = dirty // reused by the next Drain: no regrowth per window
		sh.mu.Unlock()
		count += len(deleted) + len(dirty)
	}
	return nShards, block
}

// DrainShardsView is DrainShards for a receiver that uses each change at
// once (persistence encodes it into the change log's buffer): nothing is
// copied for it. fn's Change views the store's own bytes (the key, a
// verbatim text, a window block) or scratch (a formatted text, an object
// image), valid only during the call; a window key whose counters are
// inline comes as those numbers (Change.WinMode), not as bytes. fn runs
// under the shard's lock and must only record the change. scratch is
// returned, grown to the largest such value, for reuse. Same order, limit
// and next as DrainShards.
//
// Cost per dirty key: the entry's cache miss and, for a verbatim text, two
// more (its header in rawv, then its bytes); all three are started ahead
// of the walk (viewAhead) so that they overlap.
func (s *Store) DrainShardsView(nowMs int64, first, limit int, scratch []byte, fn func(*Change)) (next int, _ []byte) {
	return s.DrainShardsViewTAT(nowMs, first, limit, scratch, fn, nil)
}

// DrainShardsViewTAT is DrainShardsView with the live plain TATs (what
// CL.THROTTLE writes: the Changes with IsTAT) handed to tat, with their key
// (valid only during the call), TAT and expiry, instead of to fn; every
// other change goes to fn. tat nil: DrainShardsView. Same locking, order,
// limit and next; tat runs under the shard's lock and must only record
// the change.
//
// Cost: a plain TAT costs its entry's cache miss and tat's call, without
// building a Change (about 120 bytes written and copied per key) or fn's
// dispatch on its kind: the drain of a window of CL.THROTTLE keys
// (BenchmarkDrainView/encode).
func (s *Store) DrainShardsViewTAT(nowMs int64, first, limit int, scratch []byte, fn func(*Change), tat func(key []byte, tat uint64, exp int64)) (next int, _ []byte) {
	return s.DrainShardsViewNumbers(nowMs, first, limit, scratch, fn, tat, nil, nil)
}

// DrainShardsViewNumbers is DrainShardsViewTAT with the live window keys
// whose counters are inline (FIXED and SLIDING with short names: the
// Changes with WinMode) handed to win, with their key (valid only during
// the call), mode (window.Fixed or window.Sliding), counters (prev is 0
// for FIXED) and expiry, instead of to fn: what fn would get as
// Change.WinMode and Change.Win. win nil: DrainShardsViewTAT. Same
// locking, order, limit and next; win runs under the shard's lock and
// must only record the change.
//
// Cost: as tat's, an inline window costs its entry's cache miss and win's
// call, without building a Change (about 170 bytes written, then copied)
// or fn's dispatch on its kind: the drain of a FIXED load
// (BenchmarkDrainView/fixed).
//
// state, when not nil, likewise takes the live window keys whose state is
// in a block (a LOG key's, counters of a long name), with their key and
// state (both valid only during the call, the state viewed in its block)
// and expiry: what fn would get as Change.Text and ExpireAtMs with Kind
// KindWindow. Besides the Change, that skips a stall: the Change was built
// in a temporary with 8-byte stores and copied with 16-byte loads, which
// the CPU cannot forward from the stores, so the copy waited for the
// stores before it, the entry's dirty flag among them, to reach the cache
// (in perf of bench/window.sh's LOG row, half of this function's samples
// sat on that copy, ~13 ns per LOG key drained).
func (s *Store) DrainShardsViewNumbers(nowMs int64, first, limit int, scratch []byte, fn func(*Change),
	tat func(key []byte, tat uint64, exp int64),
	win func(key []byte, mode byte, start int64, prev, curr uint64, exp int64),
	state func(key, state []byte, exp int64)) (next int, _ []byte) {
	count := 0
	var c Change
	for i := first; i < nShards; i++ {
		if limit > 0 && count >= limit {
			return i, scratch
		}
		sh := s.shards[i].Load()
		if sh == nil {
			continue // never used: no key, no change
		}
		sh.mu.Lock()
		deleted, dirty := sh.deleted, sh.dirty
		sh.deleted, sh.dirty = nil, sh.spare[:0]
		sh.noteDirtyTailLocked()
		for _, k := range deleted {
			c = Change{Key: k, Deleted: true}
			fn(&c)
		}
		if cap(deleted) <= maxDelSpare {
			clear(deleted) // as DrainShards
			sh.deleted = deleted[:0]
		}
		objs := len(sh.objs) > 0
		// A shard that never held a verbatim text or a window block
		// (CL.THROTTLE's keys, inline windows) skips the text levels:
		// each reads the flags of an entry a few ahead, which waited
		// there for that entry's miss, started only viewAhead/2 keys
		// before, instead of finding it arrived at its own turn.
		texts := sh.mayHoldTextsLocked()
		for j, slot := range dirty {
			if j+viewAhead < len(dirty) {
				sh.prefetchEntryLocked(dirty[j+viewAhead])
			}
			if texts && j+viewAhead/2 < len(dirty) {
				sh.prefetchRawHeadLocked(dirty[j+viewAhead/2])
			}
			if texts && j+viewAhead/4 < len(dirty) {
				sh.prefetchRawLocked(dirty[j+viewAhead/4])
			}
			if objs {
				sh.prefetchObjLevelsLocked(dirty, j)
			}
			e := &sh.slab[slot]
			if e.flags&flagDirty == 0 {
				continue // freed (its deletion is listed) or listed twice
			}
			e.flags &^= flagDirty
			if tat != nil && e.plainTAT() && e.alive(nowMs) {
				tat(sh.keyOf(e), e.tat, e.exp) // changeLocked's IsTAT case
				continue
			}
			// A dirty key that has expired by the drain is deleted here
			// and listed as a deletion, except a window key within its
			// grace (winGrace): it goes on below and is written as it
			// is, with its expiry (past by now), and stays in its slot.
			// Every reader of a change takes an expired state for a
			// deletion (persist's replay passes it as one, a fold
			// snapshots live keys only), so the disk's state is the
			// same; but the key keeps its slot and index word, and the
			// next call remakes it there (Store.Window) instead of
			// inserting it again. Every key of a FIXED window expires
			// at the window's end, and about a quarter of them were last
			// written in the window's last flush interval and are
			// drained after its end: in bench/window.sh's FIXED row a
			// deletion (a 'd' record, an index tombstone) and an insert
			// (a probe to its run's end, a free slot's miss, the key
			// copied again) for ~2% of the calls. Left alone, the key
			// is removed by the sweep after its grace without a record
			// (it is clean), as any clean expiry.
			if !e.alive(nowMs) && !e.winGrace(nowMs) {
				sh.deleteSlotLocked(slot)
				last := len(sh.deleted) - 1
				key := sh.deleted[last] // the copy deleteSlotLocked queued
				sh.deleted[last] = nil
				sh.deleted = sh.deleted[:last] // listed here instead
				sh.expired++
				c = Change{Key: key, Deleted: true}
				fn(&c)
				continue
			}
			if win != nil && e.flags&kindMask == kindFlags(KindWindow) && e.winInline() {
				m, w := winUnpack(e.tat, e.off) // inlineWindowChange's numbers
				win(sh.keyOf(e), byte(m), w.Start, uint64(w.Prev), uint64(w.Curr), e.exp)
				continue
			}
			if wc, ok := sh.inlineWindowChange(e); ok {
				// Inline counters go as numbers (Change.WinMode): no
				// bytes to encode here and decode again in persist.
				c = wc
				fn(&c)
				continue
			}
			if e.flags&kindMask != 0 && e.kind() == KindWindow && e.tat != 0 {
				// A window block (a LOG state) is viewed where it is,
				// as a verbatim text is: fn uses it under the lock,
				// and the copy to scratch was one more pass over it
				// per LOG write.
				if state != nil {
					state(sh.keyOf(e), sh.winState(slot), e.exp)
					continue
				}
				c = Change{Key: sh.keyOf(e), Text: sh.winState(slot), Kind: KindWindow, ExpireAtMs: e.exp}
				fn(&c)
				continue
			}
			c, scratch = sh.changeLocked(slot, sh.keyOf(e), scratch[:0])
			fn(&c)
		}
		sh.spare = dirty // reused by the next drain: no regrowth per window
		sh.mu.Unlock()
		count += len(deleted) + len(dirty)
	}
	return nShards, scratch
}

// viewAhead is how many dirty entries ahead DrainShardsView starts
// loading an entry; a verbatim text's rawv header is started half as far
// ahead (its entry has arrived by then) and its bytes a quarter as far.
const viewAhead = 12

// prefetchRawHeadLocked starts loading the rawv header of slot's verbatim
// text, when it has one, or the lines of its window block's state (a LOG
// key's, which the drain copies: its first and its last line), when it
// has one. Requires sh.mu.
func (sh *shard) prefetchRawHeadLocked(slot uint32) {
	if int(slot) >= len(sh.slab) {
		return
	}
	e := &sh.slab[slot]
	switch {
	case e.flags&flagRaw != 0:
		if i, n := rawRefOf(e.tat); n > 0 && int(i) < len(sh.rawv) {
			prefetch(uintptr(unsafe.Pointer(&sh.rawv[i])))
		}
	case e.flags&kindMask != 0 && e.kind() == KindWindow && e.tat != 0 && !e.winInline():
		if off, n, _ := winUnref(e.tat); n > 0 && off+n <= len(sh.win.heap) {
			p := uintptr(unsafe.Pointer(&sh.win.heap[off]))
			prefetch(p)
			if q := p + uintptr(n) - 1; q>>6 != p>>6 {
				prefetch(q) // a state of more than one line: the drain reads it all
			}
		}
	}
}

// prefetchRawLocked starts loading the first and last lines of slot's
// verbatim text, when it has one. Requires sh.mu.
func (sh *shard) prefetchRawLocked(slot uint32) {
	if int(slot) >= len(sh.slab) {
		return
	}
	if e := &sh.slab[slot]; e.flags&flagRaw != 0 {
		if i, n := rawRefOf(e.tat); n > 0 && int(i) < len(sh.rawv) {
			p := uintptr(unsafe.Pointer(unsafe.StringData(sh.rawv[i])))
			prefetch(p)
			prefetch(p + uintptr(n) - 1)
		}
	}
}

// The object levels of DrainShardsView's pipeline: a dirty key of an
// object kind misses three more times after its entry, each load
// depending on the one before (its slot in objs, the object's struct, and
// the journal buffer a delta is taken from or the elements an image is
// written from), so each starts a few keys after the one before it, and
// the last a few keys before the key is drained.
const (
	viewObjSlotAhead = 3 * viewAhead / 4
	viewObjAhead     = viewAhead / 2
	viewObjDataAhead = viewAhead / 4
)

// prefetchObjLevelsLocked starts the object levels of the drain's pipeline
// at position j of dirty: the slot of the key viewObjSlotAhead ahead, the
// struct of the key viewObjAhead ahead and the data of the key
// viewObjDataAhead ahead. A key that is not an object costs a test of its
// entry's flags (loaded by then). Requires sh.mu.
func (sh *shard) prefetchObjLevelsLocked(dirty []uint32, j int) {
	if k := j + viewObjSlotAhead; k < len(dirty) {
		if o := sh.objAtLocked(dirty[k]); o != nil {
			prefetch(uintptr(unsafe.Pointer(o)))
		}
	}
	if k := j + viewObjAhead; k < len(dirty) {
		if o := sh.objAtLocked(dirty[k]); o != nil && o.p != nil {
			prefetch(o.addr()) // the object's struct
		}
	}
	if k := j + viewObjDataAhead; k < len(dirty) {
		if o := sh.objAtLocked(dirty[k]); o != nil && o.p != nil {
			prefetchObjData(o, sh.slab[dirty[k]].tat, true)
		}
	}
}

// mayHoldTextsLocked reports whether sh ever held a verbatim text or a
// window block (its rawv or its window heap has grown): only then do the
// drain's and the dump's text prefetch levels have anything to load.
// Requires sh.mu. O(1).
func (sh *shard) mayHoldTextsLocked() bool { return len(sh.rawv) > 0 || len(sh.win.heap) > 0 }

// objAtLocked is objLocked for a slot from a dirty list, which may have
// been freed since (then its entry's flags say so, or the slot is past
// the slab). Requires sh.mu.
func (sh *shard) objAtLocked(slot uint32) *objSlot {
	if int(slot) >= len(sh.slab) || sh.slab[slot].flags&flagDirty == 0 {
		return nil
	}
	return sh.objLocked(slot)
}

// drainAhead is how many dirty entries ahead DrainFunc prefetches.
const drainAhead = 8

// maxDelSpare is the largest deletion list (in keys) DrainFunc keeps for
// reuse: 24 bytes a key, so at most 96 KiB a shard outlives a mass expiry.
const maxDelSpare = 4096

// DirtyKeys returns how many changes are waiting for the next Drain.
func (s *Store) DirtyKeys() int {
	n := 0
	for i := range s.shards {
		sh := s.shards[i].Load()
		if sh == nil {
			continue // never used: no key, no state
		}
		sh.mu.Lock()
		n += len(sh.dirty) + len(sh.deleted)
		sh.mu.Unlock()
	}
	return n
}

// NumShards is the number of shards, for DumpShard.
const NumShards = nShards

// DumpShard calls fn with every live key of shard i (0 ≤ i < NumShards),
// its value (a plain TAT as TAT, a window key's inline counters as numbers
// as DrainShardsView gives them, anything else as GET's text, as in
// DrainFunc) and its expiry, holding that shard's lock for the whole
// walk. Key, Text and Image are only valid during the call. It neither reads nor clears
// dirty state: it is the building block of a full snapshot (persistence's
// base rewrite), taken one shard at a time so that each lock is held for
// 1/256 of the keys. O(shard size).
func (s *Store) DumpShard(i int, nowMs int64, fn func(Change)) {
	s.DumpShardTAT(i, nowMs, fn, nil)
}

// DumpShardTAT is DumpShard with the live plain TATs (the Changes with
// IsTAT) handed to tat, with their key (valid only during the call), TAT
// and expiry, instead of to fn; every other key goes to fn. tat nil:
// DumpShard. Same locking and order; tat runs under the shard's lock and
// must only record the key.
//
// Cost: a plain TAT costs the walk's read of its entry and tat's call,
// without building a Change (about 120 bytes written, then copied) and
// fn's dispatch on its kind: the base rewrite of a CL.THROTTLE keyspace.
func (s *Store) DumpShardTAT(i int, nowMs int64, fn func(Change), tat func(key []byte, tat uint64, exp int64)) {
	sh := s.shards[i].Load()
	if sh == nil {
		return // never used: no key
	}
	// One buffer for the walk's images and texts, grown to the largest:
	// each key's were a new buffer grown from 32 bytes by doubling, ~1 KB
	// of garbage for a 12-member sorted set's image (fn copies them).
	var scratch [256]byte
	buf := scratch[:0]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	objs := len(sh.objs) > 0
	texts := sh.mayHoldTextsLocked() // as in DrainShardsViewNumbers
	for j := range sh.slab {
		if texts && j+2*dumpAhead < len(sh.slab) {
			sh.prefetchRawHeadLocked(uint32(j + 2*dumpAhead))
		}
		if texts && j+dumpAhead < len(sh.slab) {
			sh.prefetchTextLocked(&sh.slab[j+dumpAhead])
		}
		if objs {
			sh.prefetchDumpObjLocked(j)
		}
		e := &sh.slab[j]
		if e.flags&flagUsed == 0 || !e.alive(nowMs) {
			continue
		}
		if tat != nil && e.plainTAT() {
			tat(sh.keyOf(e), e.tat, e.exp) // changeLocked's IsTAT case
			continue
		}
		if wc, ok := sh.inlineWindowChange(e); ok {
			fn(wc)
			continue
		}
		var c Change
		c, buf = sh.snapshotChangeLocked(uint32(j), sh.keyOf(e), buf[:0]) // journal.go
		fn(c)
	}
}

// dumpAhead is how many slab entries ahead DumpShard starts loading a
// verbatim text. The walk reads the slab in order (the hardware
// prefetcher follows it), but each text is a heap string somewhere else:
// a cache (and often TLB) miss that the encoder's first read of it took,
// one at a time (11% of a loaded server's CPU under a SET spray, in the
// base rewrite). Started this far ahead, the misses overlap; the text's
// header in rawv, which prefetchTextLocked must read, is started twice as
// far ahead.
const dumpAhead = 8

// The object levels of DumpShard's walk: an object's slot in objs, its
// struct and then its elements and journal buffer (the image is written
// from the elements, and the open records are sealed from the journal)
// are each a dependent miss, started dumpObjStep entries after the level
// before it.
const dumpObjStep = 4

// prefetchDumpObjLocked starts the object levels of DumpShard's walk at
// slab index j: the slot of the entry 3 steps ahead, the struct of the
// entry 2 steps ahead, the data of the entry one step ahead. A free entry
// or one of another kind costs a test of its flags (the walk is in slab
// order, which the hardware prefetcher follows). Requires sh.mu.
func (sh *shard) prefetchDumpObjLocked(j int) {
	if k := j + 3*dumpObjStep; k < len(sh.slab) {
		if o := sh.objUsedLocked(k); o != nil {
			prefetch(uintptr(unsafe.Pointer(o)))
		}
	}
	if k := j + 2*dumpObjStep; k < len(sh.slab) {
		if o := sh.objUsedLocked(k); o != nil && o.p != nil {
			prefetch(o.addr()) // the object's struct
		}
	}
	if k := j + dumpObjStep; k < len(sh.slab) {
		if o := sh.objUsedLocked(k); o != nil && o.p != nil {
			prefetchObjData(o, sh.slab[k].tat, false)
		}
	}
}

// objUsedLocked is objLocked for slab index k, nil when the entry is free.
// Requires sh.mu.
func (sh *shard) objUsedLocked(k int) *objSlot {
	if sh.slab[k].flags&flagUsed == 0 {
		return nil
	}
	return sh.objLocked(uint32(k))
}

// prefetchTextLocked starts loading the first line of e's verbatim text,
// when it has one. Requires sh.mu.
func (sh *shard) prefetchTextLocked(e *entry) {
	if e.flags&flagRaw != 0 {
		if i, n := rawRefOf(e.tat); n > 0 && int(i) < len(sh.rawv) {
			prefetch(uintptr(unsafe.Pointer(unsafe.StringData(sh.rawv[i]))))
		}
	}
}

// plainTAT reports whether e holds a plain TAT (what CL.THROTTLE writes:
// no other kind, no verbatim or invalid text): the Change changeLocked
// gives it is IsTAT, and DrainShardsViewTAT hands it to its tat callback.
func (e *entry) plainTAT() bool { return e.flags&(kindMask|flagRaw|flagInvalid) == 0 }

// inlineWindowChange is the Change of a window key whose counters are
// inline (window.go), as numbers (Change.WinMode), and true; false for any
// other entry. DrainShardsView and DumpShard give such keys so. Requires
// sh's lock.
func (sh *shard) inlineWindowChange(e *entry) (Change, bool) {
	if e.flags&kindMask == 0 || e.kind() != KindWindow || !e.winInline() {
		return Change{}, false
	}
	m, w := winUnpack(e.tat, e.off)
	return Change{Key: sh.keyOf(e), Kind: KindWindow, ExpireAtMs: e.exp, WinMode: m, Win: w}, true
}

// changeLocked is the live slot's state as a Change with key: a plain TAT
// as TAT, any other value as its text (GET's), appended to buf, which it
// returns. Requires sh.mu. DrainFunc and DumpShard describe entries through
// it, so the drain and the base rewrite agree on what a plain TAT is.
func (sh *shard) changeLocked(slot uint32, key, buf []byte) (Change, []byte) {
	e := &sh.slab[slot]
	if e.flags&kindMask != 0 {
		if e.kind() == KindWindow {
			return sh.kindChangeLocked(slot, key, buf) // window.go
		}
		return sh.drainObjectLocked(slot, key, buf) // journal.go: image or delta
	}
	if e.plainTAT() {
		return Change{Key: key, TAT: e.tat, IsTAT: true, ExpireAtMs: e.exp}, buf
	}
	if e.flags&flagRaw != 0 {
		// A verbatim text is an immutable Go string (writeLocked keeps
		// the string it is given, and every writer hands over a string
		// it no longer touches): the Change views its bytes instead of
		// copying them under the lock. An overwrite replaces rawv's
		// string, never its bytes, so the view stays valid for as long
		// as the receiver keeps it (the GC keeps the string alive).
		raw := sh.rawLocked(slot)
		return Change{Key: key, Text: unsafe.Slice(unsafe.StringData(raw), len(raw)), ExpireAtMs: e.exp, Verbatim: true}, buf
	}
	start := len(buf)
	buf = sh.valueLocked(slot).AppendText(buf)
	return Change{Key: key, Text: buf[start:len(buf):len(buf)], ExpireAtMs: e.exp}, buf
}
