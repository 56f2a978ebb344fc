package store

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Objects: the state of keys of the richer kinds (hashes, lists, sorted
// sets, ...) kept beside their entries. The entry carries the key, its kind
// tag, expiry, version and LRU clock exactly as for a TAT, so expiry,
// eviction, SCAN, WATCH and deletion treat every kind alike; the object
// itself lives in the shard's object table (objs) at the index the
// entry's tat holds (objLocked), which the TAT path never reads.
//
// Memory: a key of an object kind is charged keyCost like any key, plus
// objCost and the object's Size (objCharge). The slot does not keep what
// it was charged: every change of an object's Size happens under the
// store's hands (a write through WriteObject, a restored delta), which
// re-read Size before and after and charge the difference, so the charge
// is always objCharge of the object as it stands (Size must be O(1), and
// must not change on a read); the same is credited back when the key goes
// (dropKindLocked).

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
	if obj := sh.objectLocked(slot); obj != nil {
		buf = obj.AppendImage(buf)
	}
	return Change{Key: key, Kind: e.kind(), Image: buf[start:len(buf):len(buf)], ExpireAtMs: e.exp}, buf
}

// objSlot is an object's place in shard.objs: one word, 8 bytes. For an
// InPlace object it is the object's own struct (its one pointer word, the
// struct copied in: no allocation of its own); for any other object it is
// the pointer to its struct. What the word is and the object's type are
// told by the entry's tat (the type's number, objTypes); so is the
// object's persistence generation (tatGen). Either way the word points
// into (or at) what the object holds, so the garbage collector keeps it
// alive.
type objSlot struct {
	p unsafe.Pointer // the object's pointer, or its one word when InPlace
}

// InPlace is an Object whose struct is one pointer word (a struct with a
// single unsafe.Pointer field) that may be copied to another address:
// nothing keeps the struct's address across a call (kinds.Hash). The store
// keeps that word in the object's slot, not a pointer to a struct of its
// own, which saves the struct's 8-byte allocation; Size must then leave
// the struct out (objCost charges the slot). The Object the store hands to
// a callback points into the store's table: valid under the key's shard
// lock for that call only (as every callback's object is documented to
// be). InPlace itself is a marker and is never called.
type InPlace interface {
	Object
	InPlace()
}

// maxObjTypes is how many types of Object a process may store.
const maxObjTypes = 8

// objTypes are the Object types stored so far, as the type words of
// their interfaces, by number, and whether each is InPlace. Written under
// mu and published by n, so object's lock-free read of a number that a
// tat holds is ordered after the write (by the shard lock under which the
// tat was written).
var objTypes struct {
	mu      sync.Mutex
	n       atomic.Int32
	tab     [maxObjTypes]unsafe.Pointer
	inPlace [maxObjTypes]bool
}

// iface is an interface value's two words (Go's layout of a non-empty
// interface: its type word, then its data pointer).
type iface struct{ tab, data unsafe.Pointer }

// An object key's tat (the TAT means nothing for these kinds):
//
//	bits  0-31  the object's index in shard.objs + 1 (0: none)
//	bits 32-59  its persistence generation, modulo 2^28 (journal.go)
//	bits 60-62  its type's number (objTypes)
//	bit  63     genImaged: an image of the object was handed out
const (
	tatIndex   = 1<<32 - 1
	genShift   = 32
	genBits    = 28
	genMask    = 1<<genBits - 1
	typeShift  = 60
	genImaged  = 1 << 63
	tatGenBits = genImaged | genMask<<genShift // what tatGen reads
)

// newObjSlot is the slot of obj (a non-nil pointer; anything else panics,
// as do more than maxObjTypes types) and the bits of the tat that say its
// type.
func newObjSlot(obj Object) (objSlot, uint64) {
	w := (*iface)(unsafe.Pointer(&obj))
	if w.data == nil {
		panic(fmt.Sprintf("store: Object %T is nil", obj))
	}
	n := objTypeNum(w.tab, obj)
	if objTypes.inPlace[n] {
		return objSlot{p: *(*unsafe.Pointer)(w.data)}, uint64(n) << typeShift
	}
	return objSlot{p: w.data}, uint64(n) << typeShift
}

// objTypeNum is the number of obj's type, whose interface type word is
// tab, registering it the first time.
func objTypeNum(tab unsafe.Pointer, obj Object) int {
	n := int(objTypes.n.Load())
	for i := range n {
		if objTypes.tab[i] == tab {
			return i
		}
	}
	objTypes.mu.Lock()
	defer objTypes.mu.Unlock()
	n = int(objTypes.n.Load())
	for i := range n {
		if objTypes.tab[i] == tab {
			return i
		}
	}
	t := reflect.TypeOf(obj)
	if t.Kind() != reflect.Pointer {
		panic(fmt.Sprintf("store: Object %v is not a pointer", t))
	}
	_, inPlace := obj.(InPlace)
	if e := t.Elem(); inPlace && (e.Kind() != reflect.Struct || e.NumField() != 1 || e.Field(0).Type.Kind() != reflect.UnsafePointer) {
		panic(fmt.Sprintf("store: InPlace Object %v is not a pointer to a struct of one unsafe.Pointer", t))
	}
	if n == maxObjTypes {
		panic(fmt.Sprintf("store: more than %d Object types", maxObjTypes))
	}
	objTypes.tab[n] = tab
	objTypes.inPlace[n] = inPlace
	objTypes.n.Store(int32(n + 1))
	return n
}

// object is o's object, whose key's tat is tat (o is that key's slot).
// O(1), no allocation.
func (o *objSlot) object(tat uint64) Object {
	t := tat >> typeShift & (maxObjTypes - 1)
	data := o.p
	if objTypes.inPlace[t] {
		data = unsafe.Pointer(o)
	}
	var obj Object
	*(*iface)(unsafe.Pointer(&obj)) = iface{objTypes.tab[t], data}
	return obj
}

// addr is an address worth prefetching for a write to o's object: its
// struct, or for an InPlace object what its word points at (0: nothing).
func (o *objSlot) addr() uintptr { return uintptr(o.p) &^ 7 }

// tatGen is the generation an object key's tat holds: its count modulo
// 2^28 and genImaged.
func tatGen(tat uint64) uint64 { return tat&genImaged | tat>>genShift&genMask }

// genTat is the tat bits that hold generation gen (tatGen's inverse).
func genTat(gen uint64) uint64 { return gen&genImaged | (gen&genMask)<<genShift }

// nextGen is the generation after gen's count (modulo 2^28, without
// genImaged).
func nextGen(gen uint64) uint64 { return (gen + 1) & genMask }

// genAfter reports whether generation a comes after b, in serial number
// arithmetic modulo 2^28 (RFC 1982): a follows b by less than 2^27. Replay
// compares a delta's segments with the generation of the image (or segment)
// before them, which they follow by one, or which they precede by the few
// generations drained between a base rewrite's cut and its snapshot.
func genAfter(a, b uint64) bool {
	d := (a - b) & genMask
	return d != 0 && d < 1<<(genBits-1)
}

// genLocked is slot's object's generation (tatGen). Requires sh.mu.
func (sh *shard) genLocked(slot uint32) uint64 { return tatGen(sh.slab[slot].tat) }

// setGenLocked makes gen (a count, with genImaged or not) slot's object's
// generation. Requires sh.mu.
func (sh *shard) setGenLocked(slot uint32, gen uint64) {
	e := &sh.slab[slot]
	e.tat = e.tat&^tatGenBits | genTat(gen)
}

// The object table. A key of an object kind (any kind but strings and
// windows) keeps its object in shard.objs at the index the low 32 bits of
// its entry's tat hold, plus one (0: none; see tatIndex). An
// indexed array rather than a map keyed by slot: a handler's or a drain's
// lookup is one load, where a swiss-map probe over 100k objects took ~15%
// of an HSET's CPU, and a live object costs its 8-byte slot instead of a
// map entry's ~64 bytes. Freed indices are reused LIFO.

// objCost is what an object's place in shard.objs costs: its 8-byte slot,
// the table's growth slack (a quarter at most) and its 4-byte free-list
// word.
const objCost = 8 + 8/4 + 4

// objCharge is what o's object, whose key's tat is tat, costs its key
// beyond keyCost. O(1).
func objCharge(o *objSlot, tat uint64) int64 { return objCost + o.object(tat).Size() }

// objLocked returns slot's object's place, or nil when it has none (the
// key is of another kind, or its object is not set yet). The pointer is
// valid until the next putObjLocked on sh. Requires sh.mu.
func (sh *shard) objLocked(slot uint32) *objSlot {
	e := &sh.slab[slot]
	i := e.tat & tatIndex
	if i == 0 || i > uint64(len(sh.objs)) || e.flags&kindMask == 0 || e.kind() == KindWindow {
		return nil
	}
	return &sh.objs[i-1]
}

// objectLocked returns slot's object, or nil when it has none (as
// objLocked). An InPlace object points into sh.objs: valid until the next
// putObjLocked on sh. Requires sh.mu.
func (sh *shard) objectLocked(slot uint32) Object {
	o := sh.objLocked(slot)
	if o == nil {
		return nil
	}
	return o.object(sh.slab[slot].tat)
}

// putObjLocked gives slot, a key of an object kind without an object, the
// object obj at generation gen (tatGen's form), and charges it. obj is
// the store's from then on: its caller must not use it again (an InPlace
// object's word is copied into the slot). Requires sh.mu.
func (sh *shard) putObjLocked(slot uint32, obj Object, gen uint64) {
	o, ty := newObjSlot(obj)
	sh.putSlotLocked(slot, o, ty|genTat(gen))
}

// putSlotLocked gives slot, a key of an object kind without an object, the
// object place o with the tat bits hi (its type's, its generation's), and
// charges it. Requires sh.mu.
func (sh *shard) putSlotLocked(slot uint32, o objSlot, hi uint64) {
	var i uint32
	if n := len(sh.ofree); n > 0 {
		i = sh.ofree[n-1]
		sh.ofree = sh.ofree[:n-1]
	} else {
		if len(sh.objs) == cap(sh.objs) {
			sh.objs = growByQuarter(sh.objs) // as the slab: objCost charges for it
		}
		i = uint32(len(sh.objs))
		sh.objs = sh.objs[:i+1]
	}
	sh.objs[i] = o
	sh.liveObjs.Add(1)
	tat := hi&^tatIndex | uint64(i) + 1
	sh.slab[slot].tat = tat
	sh.addMemLocked(objCharge(&sh.objs[i], tat))
}

// takeObjLocked removes slot's object from the table and returns its place
// and its type's tat bits (for putSlotLocked: the generation restarts),
// crediting its charge; ok is false when there was none. Requires sh.mu.
func (sh *shard) takeObjLocked(slot uint32) (_ objSlot, ty uint64, ok bool) {
	o := sh.objLocked(slot)
	if o == nil {
		return objSlot{}, 0, false
	}
	e := &sh.slab[slot]
	taken := *o
	sh.addMemLocked(-objCharge(o, e.tat))
	*o = objSlot{} // nothing kept alive for the GC
	sh.liveObjs.Add(-1)
	sh.ofree = append(sh.ofree, uint32(e.tat&tatIndex-1))
	ty = e.tat &^ tatIndex &^ tatGenBits
	e.tat = 0
	if len(sh.sealed) > 0 {
		delete(sh.sealed, slot)
	}
	if len(sh.ofree) == len(sh.objs) && cap(sh.objs) > 64 {
		sh.objs, sh.ofree = nil, nil // the last one went: give the table back
	}
	return taken, ty, true
}

// dropObjectLocked releases slot's object and its charge, if it has one.
// Requires sh.mu.
func (sh *shard) dropObjectLocked(slot uint32) { sh.takeObjLocked(slot) }

// rechargeLocked charges the change of an object's Size from before (what
// it was when last charged) to now. Requires sh.mu.
func (sh *shard) rechargeLocked(obj Object, before int64) {
	if d := obj.Size() - before; d != 0 {
		sh.addMemLocked(d)
	}
}

// ReadObject calls fn with key's object when key is live and holds kind,
// under the key's shard lock (fn must not keep obj, nor call back into the
// Store), and reports whether it did. A live key of another kind gives
// ErrWrongType and fn is not called. A read refreshes the key's LRU clock.
func (s *Store) ReadObject(key []byte, kind Kind, nowMs int64, fn func(obj Object)) (bool, error) {
	sh, slot, ok := s.lockLive(key, nowMs)
	if !ok {
		return false, nil
	}
	defer sh.mu.Unlock()
	if sh.slab[slot].kind() != kind {
		return false, ErrWrongType
	}
	sh.touchLocked(slot, nowMs)
	fn(sh.objectLocked(slot))
	return true, nil
}

// PeekObject calls fn with key's object when key is live and holds one,
// under the key's shard lock (fn must not keep obj, nor call back into the
// Store), and reports whether it did. Unlike ReadObject it leaves the
// key's LRU clock alone (OBJECT's lookups do not count as accesses).
func (s *Store) PeekObject(key []byte, nowMs int64, fn func(obj Object)) bool {
	sh, slot, ok := s.lockLive(key, nowMs)
	if !ok {
		return false
	}
	defer sh.mu.Unlock()
	obj := sh.objectLocked(slot)
	if obj == nil {
		return false
	}
	fn(obj)
	return true
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
	if create == nil && s.madeShard(h) == nil {
		return false, nil // missing (no write made its shard): make none
	}
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
		obj := sh.objectLocked(slot)
		before := obj.Size()
		changed := fn(obj)
		sh.rechargeLocked(obj, before) // before a deletion credits the new Size
		if !changed {
			sh.touchLocked(slot, nowMs)
			return true, nil
		}
		if obj.Len() == 0 {
			sh.deleteSlotLocked(slot)
			return true, nil
		}
		sh.retimeLocked(slot, sh.slab[slot].exp, nowMs)
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
	sh.putObjLocked(slot, obj, 0)
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
	// Its image is on disk: the next change is persisted as a delta.
	if j, ok := obj.(Journaled); ok {
		j.StartJournal()
	}
	sh.putObjLocked(slot, obj, genImaged)
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
		sh := s.shards[si].Load()
		if sh == nil {
			si, slot = si+1, 0 // never used: no key
			continue
		}
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
	sh, slot, ok := s.lockLive(key, nowMs)
	if !ok {
		return 0, false
	}
	defer sh.mu.Unlock()
	e := &sh.slab[slot]
	n := keyCost(e.klen)
	if e.flags&flagRaw != 0 {
		i, tn := rawRefOf(e.tat)
		n += sh.rawChargeLocked(i, tn)
	}
	if o := sh.objLocked(slot); o != nil {
		n += objCharge(o, e.tat)
	}
	if e.kind() == KindWindow && e.tat != 0 && !e.winInline() {
		_, _, size := winUnref(e.tat)
		n += winCost(size) // window.go; inline counters cost the entry only
	}
	return n, true
}
