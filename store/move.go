package store

import "errors"

// Operations on several keys at once, whatever their kind: RENAME, COPY,
// MSET, MSETNX, MGET. Each holds the shard locks of all its keys (taken in
// ascending shard order, lockSet), so it is atomic against every other
// store operation, as the Redis commands are.

// Errors of Rename and Copy.
var (
	// ErrNoSuchKey: the source key does not exist (RENAME's "no such key").
	ErrNoSuchKey = errors.New("store: no such key")
	// ErrNotCopyable: the source key's kind keeps state that cannot be
	// copied or moved yet (its kind has no case in copyKindLocked).
	ErrNotCopyable = errors.New("store: this kind of value cannot be copied")
)

// lockPair locks the shards of two hashes (one lock when they share it) and
// returns the unlock function's argument.
func (s *Store) lockPair(h1, h2 uint64) *[nShards / 64]uint64 {
	var set [nShards / 64]uint64
	for _, h := range [2]uint64{h1, h2} {
		i := h >> 56
		set[i/64] |= 1 << (i % 64)
	}
	s.lockSet(&set)
	return &set
}

// Rename moves src's value and expiry to dst (RENAME; RENAMENX with nx),
// replacing whatever dst held unless nx. It returns whether it moved:
// false only when nx and dst exists. ErrNoSuchKey when src is missing,
// ErrNotCopyable when src's kind cannot move. src == dst moves nothing and
// answers as Redis does (true, or false with nx).
func (s *Store) Rename(src, dst []byte, nowMs int64, nx bool) (bool, error) {
	hs, hd := s.hashKey(src), s.hashKey(dst)
	if s.madeShard(hs) == nil {
		return false, ErrNoSuchKey // src's shard was never made; make none
	}
	set := s.lockPair(hs, hd)
	defer s.unlockSet(set)
	ss, ds := s.shardFor(hs), s.shardFor(hd)
	sslot, ok := ss.lookupLocked(src, hs, nowMs)
	if !ok {
		return false, ErrNoSuchKey
	}
	if string(src) == string(dst) {
		return !nx, nil
	}
	if _, exists := ds.lookupLocked(dst, hd, nowMs); exists && nx {
		return false, nil
	}
	if !copyable(ss.slab[sslot].kind(), true) {
		return false, ErrNotCopyable
	}
	s.copyEntryLocked(ss, sslot, ds, dst, hd, nowMs, true)
	// copyEntryLocked may have grown ds's slab, but slots never move, and
	// sslot still names src.
	ss.deleteSlotLocked(sslot)
	return true, nil
}

// Copy copies src's value and expiry to dst (COPY), replacing dst only with
// replace. It returns whether it copied: false when src is missing or dst
// exists without replace. ErrNotCopyable when src's kind cannot be copied;
// ErrOOM when used memory is over the bound and no room could be made.
// The caller refuses src == dst (Redis's "source and destination objects
// are the same").
func (s *Store) Copy(src, dst []byte, nowMs int64, replace bool) (bool, error) {
	if s.madeShard(s.hashKey(src)) == nil {
		return false, nil // src is missing (its shard was never made); make no shard
	}
	if s.overLimit() {
		if err := s.makeRoom(nowMs); err != nil {
			return false, err
		}
	}
	hs, hd := s.hashKey(src), s.hashKey(dst)
	set := s.lockPair(hs, hd)
	defer s.unlockSet(set)
	ss, ds := s.shardFor(hs), s.shardFor(hd)
	sslot, ok := ss.lookupLocked(src, hs, nowMs)
	if !ok {
		return false, nil
	}
	if _, exists := ds.lookupLocked(dst, hd, nowMs); exists && !replace {
		return false, nil
	}
	if !ss.copyableLocked(sslot, false) {
		return false, ErrNotCopyable
	}
	s.copyEntryLocked(ss, sslot, ds, dst, hd, nowMs, false)
	return true, nil
}

// copyEntryLocked writes a copy of the entry in ss's sslot under key dst
// (hash hd) in ds, replacing what dst held: a replaced dst is deleted first
// (so its kind's state is released, and persistence sees a delete then a
// write). The copy is a write (version, dirty mark, LRU clock now). move
// tells the kind's hook that the source is about to be deleted, so its
// state may be handed over rather than duplicated. Requires both locks.
func (s *Store) copyEntryLocked(ss *shard, sslot uint32, ds *shard, dst []byte, hd uint64, nowMs int64, move bool) {
	e := ss.slab[sslot] // a copy: ds's insert may grow a slab
	var raw string
	if e.flags&flagRaw != 0 {
		raw = ss.rawLocked(sslot)
	}
	if slot, pos, ok := ds.findLocked(dst, hd); ok {
		ds.removeLocked(slot, pos)
	}
	_, pos, _ := ds.findLocked(dst, hd)
	dslot := ds.insertLocked(dst, hd, pos)
	kind := e.flags & kindMask
	ds.slab[dslot].flags |= kind // so writeLocked sees no change of kind
	ds.writeLocked(dslot, e.tat, e.exp, e.flags&(flagInvalid|kindMask)|lruFlags(nowMs), raw)
	if move {
		handGrownLocked(ds, dslot, ss, sslot) // grow.go
	}
	if kind != 0 {
		ds.copyKindLocked(dslot, ss, sslot, move, nowMs)
	}
}

// copyable reports whether a key of kind k can be copied and moved: a
// string always (all its state is in the entry), a window (its state is
// bytes), a hash, list or sorted set moved (RENAME: the object is handed
// over) or, when its object is a Duplicator, copied (copyableLocked).
func copyable(k Kind, move bool) bool {
	switch k {
	case KindString, KindWindow:
		return true
	case KindHash, KindList, KindZSet:
		return move
	}
	return false
}

// copyableLocked is copyable for the key in slot, whose object may offer a
// deep copy. Requires sh.mu.
func (sh *shard) copyableLocked(slot uint32, move bool) bool {
	k := sh.slab[slot].kind()
	if copyable(k, move) {
		return true
	}
	switch k {
	case KindHash, KindList, KindZSet:
		obj := sh.objectLocked(slot)
		if obj == nil {
			return false
		}
		_, ok := obj.(Duplicator)
		return ok
	}
	return false
}

// copyKindLocked copies (or, with move, hands over) the state a key of a
// non-string kind keeps beside its entry, from src's sslot to dslot of
// sh; the entries' own fields are already copied. Each kind's storage adds
// its case here (and to copyable). Requires both shards' locks.
func (sh *shard) copyKindLocked(dslot uint32, src *shard, sslot uint32, move bool, nowMs int64) {
	switch src.slab[sslot].kind() {
	case KindWindow:
		// The entry's tat is a reference into src's window heap, or
		// inline counters: give dslot its own state in sh (inline or
		// a block of sh's heap, as dst's name allows).
		state := src.appendWinState(nil, sslot)
		e := &sh.slab[dslot]
		e.tat = 0
		if err := sh.putWindowLocked(dslot, state, e.exp, nowMs); err != nil {
			sh.deleteSlotLocked(dslot) // a heap past 4 GiB: the copy is lost, not corrupt
		}
	case KindHash, KindList, KindZSet:
		// The entry's tat is the source's index into src.objs: dslot
		// gets an object of its own in sh's table.
		sh.slab[dslot].tat = 0
		if !move { // a deep copy (copyableLocked checked it can be made)
			obj := src.objectLocked(sslot)
			if obj == nil {
				return
			}
			sh.putObjLocked(dslot, obj.(Duplicator).Duplicate().(Object), 0)
			return
		}
		// Handed over: src's delete releases nothing more.
		if o, ty, ok := src.takeObjLocked(sslot); ok {
			sh.putSlotLocked(dslot, o, ty) // the generation restarts, as before
		}
	}
}

// GetMany calls fn with the live value of each key in turn (MGET), all
// read under their shard locks at once. fn runs under the locks: it must
// only record what it needs (Value.Raw stays valid after) and must not call
// back into the Store.
func (s *Store) GetMany(keys [][]byte, nowMs int64, fn func(i int, v Value, ok bool)) {
	var set [nShards / 64]uint64
	hs := make([]uint64, len(keys))
	for i, k := range keys {
		hs[i] = s.hashKey(k)
		si := hs[i] >> 56
		set[si/64] |= 1 << (si % 64)
	}
	s.lockSet(&set)
	defer s.unlockSet(&set)
	for i, k := range keys {
		sh := s.shardFor(hs[i])
		slot, ok := sh.lookupLocked(k, hs[i], nowMs)
		if !ok {
			fn(i, Value{}, false)
			continue
		}
		sh.touchLocked(slot, nowMs)
		fn(i, sh.valueLocked(slot), true)
	}
}

// SetMany stores vals[i] (strings, no expiry) under keys[i], left to right
// so a repeated key keeps its last value (MSET). With nx it stores nothing
// and returns false when any key exists, of any kind (MSETNX). ErrOOM when
// used memory is over the bound and no room could be made: nothing stored.
func (s *Store) SetMany(keys [][]byte, vals []Value, nowMs int64, nx bool) (bool, error) {
	if s.overLimit() {
		if err := s.makeRoom(nowMs); err != nil {
			return false, err
		}
	}
	var set [nShards / 64]uint64
	hs := make([]uint64, len(keys))
	for i, k := range keys {
		hs[i] = s.hashKey(k)
		si := hs[i] >> 56
		set[si/64] |= 1 << (si % 64)
	}
	s.lockSet(&set)
	defer s.unlockSet(&set)
	if nx {
		for i, k := range keys {
			if _, ok := s.shardFor(hs[i]).lookupLocked(k, hs[i], nowMs); ok {
				return false, nil
			}
		}
	}
	for i, k := range keys {
		v := vals[i]
		if v.Kind != KindString {
			panic("store: SetMany writes strings only")
		}
		flags := lruFlags(nowMs)
		if v.Invalid {
			flags |= flagInvalid
		}
		s.shardFor(hs[i]).putLocked(k, hs[i], v.TAT, 0, flags, v.Raw)
	}
	return true, nil
}
