package store

import "hash/maphash"

// Move moves key from src to dst, two databases of one Databases (MOVE):
// with its value, kind and expiry, as one step under both keys' shard
// locks (taken in (store id, shard) order, so two Moves never deadlock).
// It reports false, changing nothing, when key does not exist in src or
// already exists in dst. The source's deletion and the destination's
// write are recorded for persistence like any others. A key of a kind
// whose side storage cannot be moved (moveKindLocked) is refused with
// ErrWrongType, nothing changed.
func Move(src, dst *Store, key []byte, nowMs int64) (bool, error) {
	if src == dst {
		return false, nil
	}
	hs, hd := maphash.Bytes(src.seed, key), maphash.Bytes(dst.seed, key)
	if src.madeShard(hs) == nil {
		return false, nil // no write ever reached key's shard: key is missing; make no shard
	}
	ss, ds := src.shardFor(hs), dst.shardFor(hd)
	first, second := ss, ds
	if dst.id < src.id || (dst.id == src.id && uintptr(hd>>56) < uintptr(hs>>56)) {
		first, second = ds, ss
	}
	first.mu.Lock()
	defer first.mu.Unlock()
	second.mu.Lock()
	defer second.mu.Unlock()
	slot, ok := ss.lookupLocked(key, hs, nowMs)
	if !ok {
		return false, nil
	}
	if _, there := ds.lookupLocked(key, hd, nowMs); there {
		return false, nil
	}
	e := ss.slab[slot]
	if e.flags&kindMask != 0 && !canMoveKind(e.kind()) {
		return false, ErrWrongType
	}
	_, pos, _ := ds.findLocked(key, hd)
	dslot := ds.insertLocked(key, hd, pos)
	var raw string
	if e.flags&flagRaw != 0 {
		raw = ss.rawLocked(slot)
	}
	ds.writeLocked(dslot, e.tat, e.exp, e.flags&(flagInvalid|kindMask)|lruFlags(nowMs), raw)
	handGrownLocked(ds, dslot, ss, slot) // grow.go
	if e.flags&kindMask != 0 {
		ds.copyKindLocked(dslot, ss, slot, true, nowMs) // move.go: hands the state over
	}
	ss.deleteSlotLocked(slot)
	return true, nil
}

// canMoveKind reports whether Move can carry a key of kind k: every kind
// RENAME can move (move.go's copyable).
func canMoveKind(k Kind) bool { return copyable(k, true) }

// CopyTo copies key's value and expiry from src to dstKey in dst, another
// database of one Databases (COPY ... DB n), replacing dstKey only with
// replace; the same rules and errors as Copy. src == dst is Copy.
func CopyTo(src, dst *Store, key, dstKey []byte, nowMs int64, replace bool) (bool, error) {
	if src == dst {
		return src.Copy(key, dstKey, nowMs, replace)
	}
	if src.madeShard(maphash.Bytes(src.seed, key)) == nil {
		return false, nil // key is missing (its shard was never made); make no shard
	}
	if dst.overLimit() {
		if err := dst.makeRoom(nowMs); err != nil {
			return false, err
		}
	}
	hs, hd := maphash.Bytes(src.seed, key), maphash.Bytes(dst.seed, dstKey)
	ss, ds := src.shardFor(hs), dst.shardFor(hd)
	first, second := ss, ds
	if dst.id < src.id || (dst.id == src.id && uintptr(hd>>56) < uintptr(hs>>56)) {
		first, second = ds, ss
	}
	first.mu.Lock()
	defer first.mu.Unlock()
	second.mu.Lock()
	defer second.mu.Unlock()
	sslot, ok := ss.lookupLocked(key, hs, nowMs)
	if !ok {
		return false, nil
	}
	if _, exists := ds.lookupLocked(dstKey, hd, nowMs); exists && !replace {
		return false, nil
	}
	if !ss.copyableLocked(sslot, false) {
		return false, ErrNotCopyable
	}
	src.copyEntryLocked(ss, sslot, ds, dstKey, hd, nowMs, false)
	return true, nil
}
