package store

// Objects: the state of keys of the richer kinds (hashes, lists, sorted
// sets, ...) kept beside their entries. The entry carries the key, its kind
// tag, expiry, version and LRU clock exactly as for a TAT, so expiry,
// eviction, SCAN, WATCH and deletion treat every kind alike; the object
// itself lives in the shard's objs map under the entry's slot, which the
// TAT path never reads.
//
// Memory: a key of an object kind is charged keyCost like any key, plus
// objCost and the object's Size, re-read after every write (Size must be
// O(1)); the charge is credited back when the key goes (dropKindLocked).

// Object is a value of a non-string kind as the store holds it. Its methods
// are called under the key's shard lock.
type Object interface {
	// Len is the number of elements; a key whose object is left empty by
	// a write is deleted (Redis: an emptied hash, list or set disappears).
	Len() int
	// Size is the object's approximate heap footprint in bytes, O(1).
	Size() int64
	// AppendImage appends the object's whole content, encoded, to b
	// (persistence: the drain and the base rewrite). O(elements).
	AppendImage(b []byte) []byte
}

// Duplicator is an Object that can be deep-copied (COPY of a hash, list or
// sorted set). Duplicate returns an independent Object with the same
// content and Size; its result is typed any so that the kinds' pure
// package need not import store. O(elements), under both keys' shard
// locks (Redis's COPY is O(N) too).
type Duplicator interface {
	Duplicate() any
}

// objectChangeLocked describes slot's object as a Change: its kind and
// image, appended to buf (which it returns). Requires sh.mu.
func (sh *shard) objectChangeLocked(slot uint32, key, buf []byte) (Change, []byte) {
	e := &sh.slab[slot]
	start := len(buf)
	if o, ok := sh.objs[slot]; ok {
		buf = o.obj.AppendImage(buf)
	}
	return Change{Key: key, Kind: e.kind(), Image: buf[start:len(buf):len(buf)], ExpireAtMs: e.exp}, buf
}

// objSlot is an object and what its key is currently charged for it.
type objSlot struct {
	obj     Object
	charged int64
	// Persistence (journal.go): gen is the generation last handed out,
	// imaged whether an image of this key's object was, sealed the
	// records a base snapshot closed that the next drain hands out.
	gen    uint64
	imaged bool
	sealed []byte
}

// objCost is an object's map entry in shard.objs (slot, interface, charge
// and the map's slack).
const objCost = 64

// dropObjectLocked releases slot's object and its charge, if it has one.
// Requires sh.mu.
func (sh *shard) dropObjectLocked(slot uint32) {
	if o, ok := sh.objs[slot]; ok {
		sh.addMemLocked(-o.charged)
		delete(sh.objs, slot)
	}
}

// chargeLocked brings slot's charge in line with its object's Size.
// Requires sh.mu.
func (sh *shard) chargeLocked(slot uint32, o objSlot) {
	c := objCost + o.obj.Size()
	if c == o.charged {
		return // already in objs with this charge (a same-size write): no map store
	}
	sh.addMemLocked(c - o.charged)
	o.charged = c
	sh.objs[slot] = o
}

// ReadObject calls fn with key's object when key is live and holds kind,
// under the key's shard lock (fn must not keep obj, nor call back into the
// Store), and reports whether it did. A live key of another kind gives
// ErrWrongType and fn is not called. A read refreshes the key's LRU clock.
func (s *Store) ReadObject(key []byte, kind Kind, nowMs int64, fn func(obj Object)) (bool, error) {
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, ok := sh.lookupLocked(key, h, nowMs)
	if !ok {
		return false, nil
	}
	if sh.slab[slot].kind() != kind {
		return false, ErrWrongType
	}
	sh.touchLocked(slot, nowMs)
	fn(sh.objs[slot].obj)
	return true, nil
}

// WriteObject runs fn on key's object under the key's shard lock and
// records what it did; it is how every write of an object kind is made.
//
//   - A live key of another kind: ErrWrongType, fn is not called.
//   - A missing key: with create nil, fn is not called and WriteObject
//     returns (false, nil); otherwise create makes an empty object, fn runs
//     on it, and the key is created holding it unless fn left it empty.
//     Creating while used memory is over the bound evicts by the policy
//     first; when no room can be made the answer is ErrOOM and fn is not
//     called.
//   - fn returns whether it changed the object. A change bumps the key's
//     version (WATCH), marks it for persistence and re-charges its memory;
//     an object left empty deletes the key. The expiry is kept.
//
// fn must not keep obj or call back into the Store. It reports whether fn
// ran.
func (s *Store) WriteObject(key []byte, kind Kind, nowMs int64, create func() Object, fn func(obj Object) bool) (bool, error) {
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, ok := sh.lookupLocked(key, h, nowMs)
	if !ok && create != nil && s.overLimit() {
		var oom error
		if slot, ok, oom = s.roomFor(sh, key, h, nowMs); !ok && oom != nil {
			return false, oom
		}
	}
	if ok {
		if sh.slab[slot].kind() != kind {
			return false, ErrWrongType
		}
		o := sh.objs[slot]
		if !fn(o.obj) {
			sh.touchLocked(slot, nowMs)
			return true, nil
		}
		if o.obj.Len() == 0 {
			sh.deleteSlotLocked(slot)
			return true, nil
		}
		sh.retimeLocked(slot, sh.slab[slot].exp, nowMs)
		sh.chargeLocked(slot, o)
		return true, nil
	}
	if create == nil {
		return false, nil
	}
	obj := create()
	if !fn(obj) || obj.Len() == 0 {
		return true, nil
	}
	sh.putLocked(key, h, 0, 0, lruFlags(nowMs)|kindFlags(kind), "")
	slot, _, _ = sh.findLocked(key, h)
	if sh.objs == nil {
		sh.objs = make(map[uint32]objSlot)
	}
	sh.chargeLocked(slot, objSlot{obj: obj})
	return true, nil
}

// LoadObject inserts a restored object under key with its expiry, without
// marking it dirty (it is on disk already), replacing whatever key held.
// Only for restoring.
func (s *Store) LoadObject(key []byte, kind Kind, obj Object, expireAtMs int64) {
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, pos, exists := sh.findLocked(key, h)
	if !exists {
		slot = sh.insertLocked(key, h, pos)
	}
	sh.dropObjectLocked(slot) // a same-kind object from an earlier entry
	wasDirty := sh.slab[slot].flags&flagDirty != 0
	sh.writeLocked(slot, 0, expireAtMs, kindFlags(kind), "")
	if sh.track && !wasDirty {
		sh.slab[slot].flags &^= flagDirty
		sh.dirty = sh.dirty[:len(sh.dirty)-1] // writeLocked just appended slot
	}
	if sh.objs == nil {
		sh.objs = make(map[uint32]objSlot)
	}
	// Its image is on disk: the next change is persisted as a delta.
	if j, ok := obj.(Journaled); ok {
		j.StartJournal()
	}
	sh.chargeLocked(slot, objSlot{obj: obj, imaged: true})
}

// ScanKind is Scan with each key's kind (SCAN's TYPE option): the same
// cursor, count and ownership rules.
func (s *Store) ScanKind(cursor uint64, count int, nowMs int64, fn func(key []byte, kind Kind)) uint64 {
	if count < 1 {
		count = 1
	}
	si, slot := cursor>>32, uint32(cursor)
	visited := 0
	for si < nShards {
		sh := &s.shards[si]
		sh.mu.Lock()
		for int(slot) < len(sh.slab) && visited < count {
			if e := &sh.slab[slot]; e.flags&flagUsed != 0 && e.alive(nowMs) {
				fn(sh.keyOf(e), e.kind())
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

// KeyMemory is what key is charged (MEMORY USAGE): its entry and name,
// its text when kept verbatim, its object. O(1).
func (s *Store) KeyMemory(key []byte, nowMs int64) (int64, bool) {
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, ok := sh.lookupLocked(key, h, nowMs)
	if !ok {
		return 0, false
	}
	e := &sh.slab[slot]
	n := keyCost(e.klen)
	if e.flags&flagRaw != 0 {
		n += rawCost(len(sh.rawLocked(slot)))
	}
	if o, ok := sh.objs[slot]; ok {
		n += o.charged
	}
	if e.kind() == KindWindow && e.tat != 0 && !e.winInline() {
		_, _, size := winUnref(e.tat)
		n += winCost(size) // window.go; inline counters cost the entry only
	}
	return n, true
}
