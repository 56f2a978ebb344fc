package store

import (
	"errors"
	"sync/atomic"
)

// Replication's effect feed. A leader's store logs, per shard, every change
// to a key (a TAT, a string, a window, an object, a TTL change, a delete, an
// expiry, a flush) in a second list beside persistence's dirty list, and
// the replication sender collects them every millisecond or so with
// DrainRepl, which hands over the keys' CURRENT states (state-based, as
// persistence's drain: the stream carries (key, value, expiry), not
// commands), deletions first. Followers apply them with ApplyChange.
//
// Cost: with replication off (the default) a write pays one nil check of
// shard.rl, on the cache line it already holds. With it on, a write appends
// one word (slot and version) to the shard's list, and a delete copies the
// key's bytes into a block; the first effect after a drain also sets the
// shard's word in Store.replPending (DrainRepl skips the other shards
// without locking them); nothing else. The list is bounded by the writes
// made between two drains.

// replLog is a shard's effect log since the last DrainRepl. Guarded by the
// shard's mutex.
type replLog struct {
	// writes are slot<<32 | version of every write: a slot whose entry
	// no longer carries that version was written again (a later word
	// says so) or freed (its deletion is in dels), so the drain skips
	// it; no flag bit is needed to deduplicate.
	writes []uint64
	dels   [][]byte // keys deleted, copied into block
	block  []byte   // only appended to (slices in dels stay valid)
	spare  []uint64 // the previous writes list, reused
	// pending is the store's replPending word of this shard, marked says
	// this log set it since the last drain: the first effect after a
	// drain pays one atomic store, the others a bool test.
	pending *atomic.Uint32
	marked  bool
}

func (l *replLog) mark() {
	if !l.marked {
		l.marked = true
		l.pending.Store(1)
	}
}

func (l *replLog) noteWrite(slot, ver uint32) {
	l.mark()
	l.writes = append(l.writes, uint64(slot)<<32|uint64(ver))
}

func (l *replLog) noteDelete(key []byte) {
	l.mark()
	if cap(l.block)-len(l.block) < len(key) {
		l.block = make([]byte, 0, max(4096, len(key)))
	}
	start := len(l.block)
	l.block = append(l.block, key...)
	l.dels = append(l.dels, l.block[start:len(l.block):len(l.block)])
}

// noteFlushLocked logs the deletion of every key of sh (FLUSHDB).
func (l *replLog) noteFlushLocked(sh *shard) {
	for j := range sh.slab {
		if e := &sh.slab[j]; e.flags&flagUsed != 0 {
			l.noteDelete(sh.keyOf(e))
		}
	}
	l.writes = l.writes[:0]
}

// SetRepl turns the store's effect log on or off. Turning it on starts
// an empty log (what happened before is a snapshot's business: SnapshotShard);
// turning it off drops what was not drained. Safe for concurrent use;
// takes every shard lock in turn.
func (s *Store) SetRepl(on bool) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if on && sh.rl == nil {
			sh.rl = &replLog{pending: &s.replPending[i]}
		} else if !on {
			sh.rl = nil
		}
		sh.mu.Unlock()
	}
}

// SetRepl turns the effect log on or off in every database, existing and
// future (a database first used later starts with it on).
func (d *Databases) SetRepl(on bool) {
	d.mu.Lock()
	d.repl = on
	d.mu.Unlock()
	d.Each(func(_ int, st *Store) { st.SetRepl(on) })
}

// DrainRepl calls fn with every effect logged since the previous DrainRepl,
// shard by shard: the keys deleted first (Change.Deleted), then the current
// state of each key written (as SnapshotShard describes it; an expired key
// comes with its past expiry, which the receiver treats as a deletion),
// and reports how many effects it passed. fn runs under the shard's lock:
// it must only encode the change; the Change's bytes are valid only during
// the call. Calls must not overlap (one sender drains). Does nothing when
// the log is off. Cost: O(effects), the lock of each shard with effects
// held once; the others cost one atomic load each.
func (s *Store) DrainRepl(fn func(Change)) int {
	n := 0
	var scratch []byte
	for i := range s.shards {
		// A shard whose log is empty is skipped without its lock: a
		// write that a caller finished before this call set the word
		// (under the lock, before unlocking), and atomics are
		// sequentially consistent, so a Barrier's round sees it.
		if s.replPending[i].Load() == 0 {
			continue
		}
		sh := &s.shards[i]
		sh.mu.Lock()
		s.replPending[i].Store(0)
		l := sh.rl
		if l != nil {
			l.marked = false
		}
		if l == nil || len(l.writes) == 0 && len(l.dels) == 0 {
			sh.mu.Unlock()
			continue
		}
		for _, k := range l.dels {
			fn(Change{Key: k, Deleted: true})
			n++
		}
		l.dels = l.dels[:0]
		writes := l.writes
		l.writes = l.spare[:0]
		for j, w := range writes {
			if j+drainAhead < len(writes) {
				// Written slots are in no useful order: start the
				// miss of an entry a few ahead (as DrainFunc does).
				sh.prefetchEntryLocked(uint32(writes[j+drainAhead] >> 32))
			}
			slot, ver := uint32(w>>32), uint32(w)
			if int(slot) >= len(sh.slab) {
				continue
			}
			e := &sh.slab[slot]
			if e.flags&flagUsed == 0 || e.ver != ver {
				continue
			}
			var c Change
			c, scratch = sh.replChangeLocked(slot, sh.keyOf(e), scratch[:0])
			fn(c)
			n++
		}
		l.spare = writes[:0]
		if cap(l.spare) > 1<<16 {
			l.spare = nil // a burst's list is not kept
		}
		sh.mu.Unlock()
	}
	return n
}

// replChangeLocked is the slot's whole current state for the stream: as
// changeLocked, except that a hash, list or sorted set is its whole image
// (objectChangeLocked). changeLocked hands an object out as persistence's
// next delta (journal.go), which consumes the journal: the stream must
// neither take persistence's deltas nor carry them. Requires sh.mu.
func (sh *shard) replChangeLocked(slot uint32, key, buf []byte) (Change, []byte) {
	if e := &sh.slab[slot]; e.flags&kindMask != 0 && e.kind() != KindWindow {
		return sh.objectChangeLocked(slot, key, buf)
	}
	return sh.changeLocked(slot, key, buf)
}

// SnapshotShard is DumpShard for replication's snapshot: every live key of
// shard i with its whole current state (objects as whole images), under
// that shard's lock, leaving persistence's state alone (DumpShard seals
// an object's open generation for the next base, which only a base
// rewrite may do). Key and the Change's bytes are valid only during fn.
// O(shard size).
func (s *Store) SnapshotShard(i int, nowMs int64, fn func(Change)) {
	sh := &s.shards[i]
	var scratch []byte
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for j := range sh.slab {
		e := &sh.slab[j]
		if e.flags&flagUsed == 0 || !e.alive(nowMs) {
			continue
		}
		var c Change
		c, scratch = sh.replChangeLocked(uint32(j), sh.keyOf(e), scratch[:0])
		fn(c)
	}
}

// ErrBadChange: a replicated change that cannot be applied (a kind the
// store does not know, or an object change without its object).
var ErrBadChange = errors.New("store: replicated change cannot be applied")

// ApplyChange writes a replicated change (a follower's side of DrainRepl
// and SnapshotShard) as a write of its own: it bumps the key's version (WATCH),
// is marked for persistence and expires as any key. obj is the decoded
// object of a hash, list or sorted set change (the caller decodes
// c.Image with the kinds package), nil otherwise.
//
// maxTAT is the merge rule of a snapshot: when both the stored value and
// the change are plain TATs, the larger TAT wins (with its expiry), so
// merging a snapshot into state from elsewhere never hands back admissions
// either side spent. Without it (the live stream, applied in the leader's
// order) the change replaces what is stored, so deletes and refunds
// (a TAT going down) take effect. A change whose expiry is not after nowMs
// deletes the key. Memory bounds are not applied: the follower keeps what
// its leader keeps.
func (s *Store) ApplyChange(c Change, obj Object, maxTAT bool, nowMs int64) error {
	h := s.hashKey(c.Key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, pos, exists := sh.findLocked(c.Key, h)
	if c.Deleted || (c.ExpireAtMs != 0 && c.ExpireAtMs <= nowMs) {
		if exists {
			sh.removeLocked(slot, pos)
		}
		return nil
	}
	switch {
	case c.Kind == KindString:
		var tat uint64
		var raw string
		var flags uint32
		if c.IsTAT {
			tat = c.TAT
		} else if v, ok := NewValue(c.Text); ok {
			tat, raw = v.TAT, v.Raw
		} else {
			raw, flags = string(c.Text), flagInvalid
		}
		if maxTAT && exists && flags == 0 && raw == "" {
			if e := &sh.slab[slot]; e.flags&(flagInvalid|flagRaw|kindMask) == 0 && e.tat > tat {
				return nil // ours is further ahead: keep it and its expiry
			}
		}
		if !exists {
			slot = sh.insertLocked(c.Key, h, pos)
		}
		sh.writeLocked(slot, tat, c.ExpireAtMs, flags|lruFlags(nowMs), raw)
	case c.Kind == KindWindow:
		if !exists {
			slot = sh.insertLocked(c.Key, h, pos)
		}
		if err := sh.putWindowLocked(slot, c.Text, c.ExpireAtMs, nowMs); err != nil {
			if !exists {
				sh.deleteSlotLocked(slot)
			}
			return err
		}
	case c.Kind < numKinds && obj != nil:
		if obj.Len() == 0 {
			if exists {
				sh.removeLocked(slot, pos)
			}
			return nil
		}
		if !exists {
			slot = sh.insertLocked(c.Key, h, pos)
		}
		sh.dropObjectLocked(slot)
		sh.writeLocked(slot, 0, c.ExpireAtMs, kindFlags(c.Kind)|lruFlags(nowMs), "")
		sh.putObjLocked(slot, objSlot{obj: obj})
	default:
		return ErrBadChange
	}
	return nil
}
