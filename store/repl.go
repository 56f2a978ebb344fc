package store

import (
	"errors"
	"math"
	"sync/atomic"
)

// Replication's effect feed. A leader's store logs, per shard, every change
// to a key (a TAT, a string, a window, an object, a TTL change, a delete, an
// expiry, a flush) in a second list beside persistence's dirty list, and
// the replication sender collects them every few milliseconds with
// DrainRepl, which hands over the keys' CURRENT states (state-based, as
// persistence's drain: the stream carries (key, value, expiry), not
// commands), deletions first. Followers apply them with ApplyChange.
//
// Cost: with replication off (the default) a write pays one nil check of
// shard.rl, on the cache line it already holds. With it on, a write of a
// plain TAT appends one record (replRec: the key, TAT and expiry, copied
// while the entry is in cache, so the drain does not miss on it again); a
// write of any other kind appends a reference (slot and version: the drain
// reads that key's state, as it must for a string, window or object); a
// delete copies the key's bytes into a block and leaves a tombstone
// record. The first effect after a drain also sets the shard's word in
// Store.replPending (DrainRepl skips the other shards without locking
// them). The log is bounded by the writes made between two drains.

// replRec is one write in a shard's effect log. klen says what it is: a
// key length (a plain TAT's whole effect: key, tat, exp), recRef (another
// kind's write: tat holds the entry's version, the drain reads the state)
// or recGone (the slot was freed: its key's deletion is in dels).
type replRec struct {
	tat  uint64 // the TAT; for recRef the entry's version
	exp  int64  // the expiry, Unix ms (0 = none)
	slot uint32
	klen uint32
	koff uint32          // a long key's start in replLog.kblock
	key  [inlineKey]byte // a short key (klen <= inlineKey)
}

const (
	recRef  = ^uint32(0)
	recGone = ^uint32(0) - 1
)

// replLog is a shard's effect log since the last DrainRepl. Guarded by the
// shard's mutex.
type replLog struct {
	// recs are the writes (and slot frees) in the order made. A slot's
	// last record is its current state (every write and every free
	// leaves one), so the drain takes each slot's last record only:
	// a key written a thousand times in a round is sent once, and a
	// key deleted after its writes is not sent again.
	recs      []replRec
	spareRecs []replRec // the previous recs list, reused
	kblock    []byte    // long keys of recs; reset by each drain
	seen      []uint64  // DrainRepl's bitmap of slots taken; all zero between drains
	dels      [][]byte  // keys deleted, copied into block
	block     []byte    // only appended to (slices in dels stay valid)
	// pending is the store's replPending word of this shard, marked says
	// this log set it since the last drain: the first effect after a
	// drain pays one atomic store, the others a bool test.
	pending *atomic.Uint32
	marked  bool
	// stamp is the store's replStamp; since is its value when this log
	// was marked (its oldest effect since the last drain was made no
	// earlier than that).
	stamp *atomic.Int64
	since int64
}

// newReplLog is shard i's empty effect log.
func (s *Store) newReplLog(i int) *replLog {
	return &replLog{pending: &s.replPending[i], stamp: &s.replStamp}
}

func (l *replLog) mark() {
	if !l.marked {
		l.marked = true
		l.since = l.stamp.Load()
		l.pending.Store(1)
	}
}

// noteWrite logs the write just made to e, in slot, whose key is key.
// A plain TAT is recorded whole while e is in cache; any other kind by
// reference.
func (l *replLog) noteWrite(slot uint32, e *entry, key []byte) {
	l.mark()
	l.recs = append(l.recs, replRec{})
	r := &l.recs[len(l.recs)-1]
	r.slot = slot
	if e.flags&(flagInvalid|flagRaw|kindMask) != 0 {
		r.klen, r.tat = recRef, uint64(e.ver)
		return
	}
	r.tat, r.exp, r.klen = e.tat, e.exp, e.klen
	if e.klen <= inlineKey {
		r.key = e.inl
	} else {
		r.koff = uint32(len(l.kblock))
		l.kblock = append(l.kblock, key...)
	}
}

// noteDelete logs the deletion of key, which was in slot.
func (l *replLog) noteDelete(slot uint32, key []byte) {
	l.recs = append(l.recs, replRec{slot: slot, klen: recGone})
	l.noteDeletedKey(key)
}

func (l *replLog) noteDeletedKey(key []byte) {
	l.mark()
	if cap(l.block)-len(l.block) < len(key) {
		l.block = make([]byte, 0, max(4096, len(key)))
	}
	start := len(l.block)
	l.block = append(l.block, key...)
	l.dels = append(l.dels, l.block[start:len(l.block):len(l.block)])
}

// noteFlushLocked logs the deletion of every key of sh (FLUSHDB); the
// writes logged before are void (the slab starts again).
func (l *replLog) noteFlushLocked(sh *shard) {
	for j := range sh.slab {
		if e := &sh.slab[j]; e.flags&flagUsed != 0 {
			l.noteDeletedKey(sh.keyOf(e))
		}
	}
	l.recs, l.kblock = l.recs[:0], l.kblock[:0]
}

// SetRepl turns the store's effect log on or off. Turning it on starts
// an empty log (what happened before is a snapshot's business: SnapshotShard);
// turning it off drops what was not drained. Safe for concurrent use;
// takes every shard lock in turn.
func (s *Store) SetRepl(on bool) {
	s.mkMu.Lock()
	s.repl = on // a shard made from now on starts so (makeShard)
	s.mkMu.Unlock()
	for i := range s.shards {
		sh := s.shards[i].Load()
		if sh == nil {
			continue // never used: no key, no state
		}
		sh.mu.Lock()
		if on && sh.rl == nil {
			sh.rl = s.newReplLog(i)
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
// held once; the others cost one atomic load each. A plain TAT's state
// comes from its record (no read of its entry); other kinds are read from
// the slab.
func (s *Store) DrainRepl(fn func(Change)) int {
	n, _ := s.DrainReplSince(fn, nil)
	return n
}

// SetReplStamp sets the clock the effect log stamps its shards with: the
// first effect a shard logs after a drain copies the value current then,
// and DrainReplSince reports the smallest such copy among the shards it
// drained. The caller (the replication sender) sets it to a reading of
// its own clock taken before the call, so a stamp never postdates the
// effect it marks. Safe for concurrent use; one atomic store.
func (s *Store) SetReplStamp(v int64) { s.replStamp.Store(v) }

// DrainReplSince is DrainRepl, and also reports oldest: the smallest
// replStamp a drained shard copied at its first effect since the
// previous drain (a lower bound of when the oldest effect passed was
// made), or 0 when it passed nothing or a shard's stamp is unknown.
// When tat is not nil, a plain TAT's state goes to it instead of fn
// (Change{Key: key, TAT: v, IsTAT: true, ExpireAtMs: exp}, without
// building and copying the Change); it is called under the same rules.
func (s *Store) DrainReplSince(fn func(Change), tat func(key []byte, v uint64, exp int64)) (n int, oldest int64) {
	var scratch []byte
	oldest = math.MaxInt64
	for i := range s.shards {
		// A shard whose log is empty is skipped without its lock: a
		// write that a caller finished before this call set the word
		// (under the lock, before unlocking), and atomics are
		// sequentially consistent, so a Barrier's round sees it.
		if s.replPending[i].Load() == 0 {
			continue
		}
		sh := s.shards[i].Load() // made: a write set the word
		sh.mu.Lock()
		s.replPending[i].Store(0)
		l := sh.rl
		marked, since := false, int64(0)
		if l != nil {
			marked, since = l.marked, l.since
			l.marked = false
		}
		if l == nil || len(l.recs) == 0 && len(l.dels) == 0 {
			sh.mu.Unlock()
			continue
		}
		if !marked {
			since = 0 // cannot happen (every effect marks): unknown
		}
		oldest = min(oldest, since)
		for _, k := range l.dels {
			fn(Change{Key: k, Deleted: true})
			n++
		}
		l.dels = l.dels[:0]
		recs := l.recs
		l.recs = l.spareRecs[:0]
		n += l.drainRecsLocked(sh, recs, fn, tat, &scratch)
		l.kblock = l.kblock[:0]
		l.spareRecs = recs[:0]
		if cap(l.spareRecs) > 1<<12 {
			l.spareRecs, l.kblock = nil, nil // a burst's lists are not kept
		}
		sh.mu.Unlock()
	}
	if n == 0 || oldest == math.MaxInt64 {
		oldest = 0
	}
	return n, oldest
}

// smallDrain is the most records a drain of one shard dedups by
// comparing slots pairwise instead of with the seen bitmap: at a few
// records per shard and round (a busy leader's usual), the bitmap's
// words are a cache miss each and the comparisons are not.
const smallDrain = 8

// drainRecsLocked passes each slot's last record of recs to fn (a plain
// TAT's to tat when not nil), newest first, and returns how many it
// passed. Requires sh.mu.
func (l *replLog) drainRecsLocked(sh *shard, recs []replRec, fn func(Change), tat func([]byte, uint64, int64), scratch *[]byte) int {
	n := 0
	small := len(recs) <= smallDrain
	for j := len(recs) - 1; j >= 0; j-- {
		r := &recs[j]
		if j >= drainAhead && recs[j-drainAhead].klen == recRef {
			// Referenced slots are in no useful order: start the
			// miss of an entry a few ahead (as DrainFunc does).
			sh.prefetchEntryLocked(recs[j-drainAhead].slot)
		}
		if small {
			later := false
			for k := j + 1; k < len(recs) && !later; k++ {
				later = recs[k].slot == r.slot
			}
			if later {
				continue // a later record of this slot was taken
			}
		} else {
			w, bit := int(r.slot>>6), uint64(1)<<(r.slot&63)
			if w >= len(l.seen) {
				l.seen = append(l.seen, make([]uint64, w+1-len(l.seen))...)
			}
			if l.seen[w]&bit != 0 {
				continue // a later record of this slot was taken
			}
			l.seen[w] |= bit
		}
		switch r.klen {
		case recGone:
		case recRef:
			if int(r.slot) >= len(sh.slab) {
				continue
			}
			e := &sh.slab[r.slot]
			if e.flags&flagUsed == 0 || uint64(e.ver) != r.tat {
				continue
			}
			var c Change
			c, *scratch = sh.replChangeLocked(r.slot, sh.keyOf(e), (*scratch)[:0])
			fn(c)
			n++
		default:
			var key []byte
			if r.klen <= inlineKey {
				key = r.key[:r.klen:r.klen]
			} else {
				key = l.kblock[r.koff : r.koff+r.klen : r.koff+r.klen]
			}
			if tat != nil {
				tat(key, r.tat, r.exp)
			} else {
				fn(Change{Key: key, TAT: r.tat, IsTAT: true, ExpireAtMs: r.exp})
			}
			n++
		}
	}
	if !small {
		for j := range recs {
			l.seen[recs[j].slot>>6] = 0
		}
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
	sh := s.shards[i].Load()
	if sh == nil {
		return // never used: no key
	}
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
// c.Image with the kinds package), nil otherwise. A window change's state
// is checked (and a LOG state from an older leader converted) by
// window.Load: one that does not decode is refused with ErrWindowState,
// nothing written.
//
// maxTAT is the merge rule of a snapshot: when both the stored value and
// the change are plain TATs, the larger TAT wins (with its expiry), so
// merging a snapshot into state from elsewhere never hands back admissions
// either side spent. Without it (the live stream, applied in the leader's
// order) the change replaces what is stored, so deletes and refunds
// (a TAT going down) take effect. A change whose expiry has passed at nowMs
// deletes the key (one expiring at nowMs is live to the end of that
// millisecond, as entry.alive has it on the leader). Memory bounds are not applied: the follower keeps what
// its leader keeps.
func (s *Store) ApplyChange(c Change, obj Object, maxTAT bool, nowMs int64) error {
	h := s.hashKey(c.Key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, pos, exists := sh.findLocked(c.Key, h)
	if c.Deleted || (c.ExpireAtMs != 0 && c.ExpireAtMs < nowMs) {
		if exists {
			sh.removeLocked(slot, pos)
		}
		return nil
	}
	switch {
	case c.Kind == KindString && c.IsTAT:
		sh.applyTATLocked(c.Key, h, slot, pos, exists, c.TAT, c.ExpireAtMs, maxTAT, nowMs)
	case c.Kind == KindString:
		var tat uint64
		var raw string
		var flags uint32
		if v, ok := NewValue(c.Text); ok {
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
		state, err := sh.loadWinState(c.Text) // checked: it comes from the stream
		if err != nil {
			return err
		}
		if !exists {
			slot = sh.insertLocked(c.Key, h, pos)
		}
		if err := sh.putWindowLocked(slot, state, c.ExpireAtMs, nowMs); err != nil {
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
		sh.putObjLocked(slot, obj, 0)
	default:
		return ErrBadChange
	}
	return nil
}

// ApplyTAT is ApplyChange of a plain TAT's change (Change{Key: key, TAT:
// tat, IsTAT: true, ExpireAtMs: exp}) without building the Change: the
// follower's path for the stream's commonest entry. Safe for concurrent
// use (it takes key's shard lock). Cost: a lookup and a write, as a
// CL.THROTTLE's.
func (s *Store) ApplyTAT(key []byte, tat uint64, exp int64, maxTAT bool, nowMs int64) {
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	slot, pos, exists := sh.findLocked(key, h)
	if exp != 0 && exp < nowMs {
		if exists {
			sh.removeLocked(slot, pos)
		}
	} else {
		sh.applyTATLocked(key, h, slot, pos, exists, tat, exp, maxTAT, nowMs)
	}
	sh.mu.Unlock()
}

// applyTATLocked stores a live plain TAT change of key (found by
// findLocked at slot, or to insert at pos): ApplyChange's rule, the
// larger TAT kept when maxTAT and both are plain TATs. Requires sh.mu.
func (sh *shard) applyTATLocked(key []byte, h uint64, slot uint32, pos int, exists bool, tat uint64, exp int64, maxTAT bool, nowMs int64) {
	if maxTAT && exists {
		if e := &sh.slab[slot]; e.flags&(flagInvalid|flagRaw|kindMask) == 0 && e.tat > tat {
			return // ours is further ahead: keep it and its expiry
		}
	}
	if !exists {
		slot = sh.insertLocked(key, h, pos)
	}
	sh.writeLocked(slot, tat, exp, lruFlags(nowMs), "")
}
