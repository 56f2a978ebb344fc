// Package store is celld's keyspace: a sharded in-memory table from key to
// TAT (the one number CL.THROTTLE keeps per key) with Redis expiry semantics,
// per-shard dirty lists for persistence, and a version per key for WATCH.
//
// Concurrency: every method of *Store is safe for concurrent use. Each key
// lives in one of 256 shards chosen by a seeded hash; a shard's fields are
// guarded by its mutex. Only ThrottleAll (family.go) holds several shard
// locks, and it takes them in ascending shard order, so no two operations
// can deadlock. Read-modify-write of one key (Throttle, Update) happens
// entirely under its shard's lock, so calls on one key are linearised.
//
// Layout: a shard keeps its entries in a slab ([]entry), the key bytes in an
// arena ([]byte) and an open-addressing index of slot numbers ([]uint64);
// none holds a Go pointer, so the garbage collector never scans the keys,
// and a key costs a 48-byte slab entry (keys up to 16 bytes live inside it),
// 8–16 bytes of index, and its bytes in the arena when longer.
// Updating an existing key writes its slab entry in place: the hot path
// allocates nothing. SCAN and the expiry sweep walk the slab by index, which
// gives both a stable cursor.
//
// Time: callers pass the time read once per command; the store reads no
// clock.
package store

import (
	"bytes"
	"errors"
	"hash/maphash"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/celld/celld/gcra"
)

// Errors returned by Throttle. The server turns them into the spec's RESP
// error text in one place.
var (
	// ErrInvalidValue: the key holds a value that is not an unsigned decimal
	// integer (only possible for restored data); nothing was written.
	ErrInvalidValue = errors.New("store: invalid stored value")
	// ErrSetExpire: the call was allowed and written (with no TTL), but its
	// TTL was below −1 ms, which redis-cell reports as an error.
	ErrSetExpire = errors.New("store: error while setting key expire")
)

// nShards is 256: on 2 cores contention is low at any count, and 256 keeps
// each shard small (10M keys → ~40k per shard) so that a sweep step, a SCAN
// step or an index rehash holds one lock briefly.
const nShards = 256

// Entry flags.
const (
	flagUsed    = 1 << iota // the slot holds a key
	flagRaw                 // the value's text is kept verbatim in shard.rawv[entry.tat] (strings.go)
	flagInvalid             // the value is not a number (restored data only)
	flagDirty               // the slot is on the dirty list
)

// inlineKey is the longest key kept inside its entry rather than the
// arena: 16 bytes covers typical limiter keys like "user:1234567890ab".
const inlineKey = 16

// entry is one slot of a shard's slab: 48 bytes, no pointers.
type entry struct {
	inl   [inlineKey]byte // the key, when klen <= inlineKey
	off   uint32          // else the key bytes are arena[off : off+klen]
	klen  uint32
	tat   uint64 // the TAT, ns since the epoch; with flagRaw, where the text is in shard.rawv (rawRef); for an object kind, its object's place, generation and type (object.go)
	exp   int64  // absolute expiry, Unix ms; 0 = no TTL
	ver   uint32 // shard write sequence at the last write, for WATCH
	flags uint32
}

func (e *entry) alive(nowMs int64) bool { return e.exp == 0 || nowMs <= e.exp }

// shard is one lock's worth of keys. Fields after mu are guarded by it.
type shard struct {
	mu   sync.Mutex
	view atomic.Pointer[view] // for Prefetch, which reads it without mu

	// freeAt is the address of free's last element (the slot number the
	// next insert takes), 0 when free is empty; freeEntry is that slot's
	// entry. Set under mu whenever free changes (noteFreeLocked); read
	// without mu by Prefetch, which only prefetches them (prefetch.go).
	freeAt, freeEntry atomic.Uintptr

	// dirtyLine is the cache line of the dirty list's next element
	// (dirtyTailLocked rounded down to its line; 0: none), published under
	// mu by noteDirtyTailLocked when it changes, for PrefetchWith, which
	// reads it without mu and only prefetches it.
	dirtyLine atomic.Uintptr

	table   []uint64   // index: fingerprint<<32 | slot+1 (index.go); words stored atomically
	used    int        // live words in table
	tombs   int        // tombstones in table
	arena   []byte     // key bytes
	garbage int        // dead bytes in arena, free chunks included
	afree   *arenaFree // the arena's free chunks by size (arena.go); nil until a long key is deleted
	slab    []entry
	free    []uint32 // free slots, reused LIFO
	dirty   []uint32 // slots written since the last Drain (if tracking)
	spare   []uint32 // the previous dirty list, reused by Drain
	// drainPer is the bytes per dirty key the last drain cut (keys, texts,
	// window states): the next drain's block estimate, so a window load
	// (32-40 bytes a key) does not regrow its block on every drain while a
	// TAT load (~20) does not over-allocate.
	drainPer int
	deleted  [][]byte // keys deleted since the last Drain (if tracking)
	// delBlock holds the bytes of deleted's keys: one allocation per few
	// KiB of deletions instead of one per key. Only ever appended to, so
	// slices handed out by Drain stay valid (see noteDeletedLocked).
	delBlock []byte
	peak     int          // largest live count since the index was last sized down
	seq      uint32       // write sequence, source of entry.ver
	sweep    uint32       // next slot the expiry sweep looks at
	track    bool         // dirty and deleted are kept (set once by New)
	rl       *replLog     // replication's effect log (repl.go); nil when off
	expired  int64        // keys removed because their TTL passed (stats.go)
	seed     maphash.Seed // the store's seed, for rehashing

	// unlogged counts the expired keys that left no deletion record
	// (expire.go); written under mu, taken without it.
	unlogged atomic.Int64

	objs     []objSlot         // objects of the richer kinds, at the entry's tat&tatIndex - 1 (object.go)
	liveObjs atomic.Int32      // live objects in objs, read without mu (prefetch_obj.go)
	ofree    []uint32          // free indices of objs, reused LIFO
	sealed   map[uint32][]byte // by slot: records a base snapshot sealed (journal.go)

	// Verbatim texts of flagRaw slots, each at its entry.tat (strings.go),
	// and rawv's free indexes, reused LIFO.
	rawv    []string
	rawFree []uint32
	// grown: the texts given room to grow (EditString), by rawv index;
	// empty (nil) in a shard that never had one, so the paths that
	// replace or free a text pay one length test for it.
	grown map[uint32]grownText

	// Memory accounting (memory.go): mem is this shard's keys' charge,
	// memPending the part not yet added to *memUsed (Store.used), which
	// happens once it passes memBatch either way.
	mem, memPending, memBatch int64
	memUsed                   *atomic.Int64
	ownUsed                   *atomic.Int64 // the store's own share (Store.own), for eviction's choice of database

	// Keep neighbouring shards' locks off one cache line: 32 bytes keep
	// the struct at 768 (its size class, 12 cache lines, so every shard
	// starts a line; TestShardSizeClass), not 776 (the 896 class). Placed
	// before win, they also put win's heap and scratch headers, the two a
	// LOG call reads, on one line (offsets 520-567: the line at 512; at
	// the end of the struct they sat on two, TestShardHotLines).
	_ [32]byte

	win windowHeap // window keys' states (window.go); guarded by mu
}

// Options configures a Store. The zero value is a memory-only store.
type Options struct {
	// TrackDirty makes every change record its key for Drain (persistence).
	TrackDirty bool
	// MaxMemory bounds UsedMemory, in bytes; 0 (the default) is no bound.
	// See SetMaxMemory.
	MaxMemory int64
	// Policy is what happens at the bound (evict.go); the default is
	// NoEviction.
	Policy Policy
}

// Store is the keyspace. Create it with New; the zero value is not usable.
type Store struct {
	seed       maphash.Seed
	track      bool
	sweepShard atomic.Uint32 // shard where the next SweepStep starts
	// The memory account: shared by every database of a Databases
	// (databases.go), so the bound and eviction are global, as Redis's.
	*memoryState
	dbState // this store's place among the databases (databases.go)
	// shards are allocated on first use (shardFor): an empty database
	// costs its pointers (2 KiB), not 256 shards (~200 KiB). A shard,
	// once made, stays for the store's life.
	shards [nShards]atomic.Pointer[shard]
	// mkMu orders the making of a shard against SetRepl and SetMaxMemory,
	// which set every made shard's log and batch (lock order: the
	// account's ev.mu, mkMu, a shard's mu); made counts the shards made.
	mkMu sync.Mutex
	repl bool // new shards start with a replication log (SetRepl); guarded by mkMu
	made atomic.Int32
	// replPending[i] is 1 while shard i's effect log holds something
	// (repl.go): DrainRepl skips the others without taking their locks.
	replPending [nShards]atomic.Uint32
	// replStamp is the replication sender's clock (SetReplStamp): a
	// shard's log copies it when its first effect after a drain is
	// logged, so the drain can tell how old its oldest effect is.
	replStamp atomic.Int64
}

// New returns an empty store with a memory account of its own.
func New(opts Options) *Store {
	s := newStore(&memoryState{}, opts.TrackDirty, 0)
	s.SetMaxMemory(opts.MaxMemory)
	s.SetPolicy(opts.Policy)
	return s
}

// newStore returns an empty store charging acct, and adds it to acct's
// stores. Its shards' batch follows acct's bound.
func newStore(acct *memoryState, track bool, id uint32) *Store {
	s := &Store{seed: maphash.MakeSeed(), track: track, memoryState: acct}
	s.id = id
	acct.addStore(s)
	return s
}

// makeShard returns shard i, making it if no key went to it before. Safe
// for concurrent use; the caller must hold no shard lock (it may take
// mkMu). Cost: once per shard and store, one allocation of shardCost
// bytes, charged to the account as the shard's fixed cost.
func (s *Store) makeShard(i int) *shard {
	s.mkMu.Lock()
	defer s.mkMu.Unlock()
	return s.makeShardLocked(i)
}

// makeShardLocked is makeShard with mkMu held.
func (s *Store) makeShardLocked(i int) *shard {
	if sh := s.shards[i].Load(); sh != nil {
		return sh
	}
	sh := s.newShardLocked(i)
	s.shards[i].Store(sh)
	return sh
}

// newShardLocked builds shard i and charges it, without publishing it in
// s.shards: a caller that must hold the shard's lock before any other
// goroutine can reach it (updateUnmade) locks it, then publishes it.
// Requires mkMu.
func (s *Store) newShardLocked(i int) *shard {
	sh := &shard{track: s.track, seed: s.seed, memUsed: &s.used, ownUsed: &s.own,
		memBatch: batchFor(s.maxMemory.Load())}
	if s.repl {
		sh.rl = s.newReplLog(i)
	}
	sh.reset()
	s.fixed.Add(shardCost)
	s.own.Add(shardCost)
	s.made.Add(1)
	return sh
}

func (sh *shard) reset() {
	sh.table, sh.used, sh.tombs = nil, 0, 0
	sh.arena, sh.garbage, sh.afree = nil, 0, nil
	sh.slab, sh.free = nil, nil
	sh.noteFreeLocked()
	sh.rawv, sh.rawFree, sh.grown = nil, nil, nil
	sh.win = windowHeap{}
	sh.objs, sh.ofree, sh.sealed = nil, nil, nil
	sh.liveObjs.Store(0)
	sh.sweep, sh.peak = 0, 0
	sh.resetMemLocked()
	sh.publishLocked()
}

// shardFor returns the shard of hash h, making it on first use. Cost: one
// atomic load (a plain load on amd64) and a nil check once it exists.
func (s *Store) shardFor(h uint64) *shard {
	if sh := s.shards[h>>56].Load(); sh != nil {
		return sh
	}
	return s.makeShard(int(h >> 56))
}

// madeShard returns the shard of hash h if a write ever made it, else
// nil: what reads and prefetches use, since a shard never made holds no
// key and a read must not make one (an empty database stays ~4 KB). Safe
// for concurrent use; one atomic load.
func (s *Store) madeShard(h uint64) *shard { return s.shards[h>>56].Load() }

// shardAt is shard i made if need be (shardFor by number).
func (s *Store) shardAt(i int) *shard {
	if sh := s.shards[i].Load(); sh != nil {
		return sh
	}
	return s.makeShard(i)
}

// Value is a key's value as commands see it.
type Value struct {
	TAT uint64 // the number; meaningless when Invalid
	// Raw is the verbatim text when it differs from the canonical decimal of
	// TAT (for example "+5" or "007"), or the bytes of an invalid value.
	Raw     string
	Invalid bool
	// ExpireAtMs is the absolute expiry in Unix ms, 0 when the key has no TTL.
	ExpireAtMs int64
	// Kind is what the key holds. TAT, Raw and Invalid describe only a
	// KindString value; a key of another kind is read and written through
	// that kind's operations (ErrWrongType elsewhere), and Update's fn sees
	// only its Kind and ExpireAtMs.
	Kind Kind
}

// AppendText appends the value as GET returns it.
func (v Value) AppendText(b []byte) []byte {
	if v.Raw != "" || v.Invalid {
		return append(b, v.Raw...)
	}
	return strconv.AppendUint(b, v.TAT, 10)
}

// TextLen is len(v.AppendText(nil)) without allocating.
func (v Value) TextLen() int {
	if v.Raw != "" || v.Invalid {
		return len(v.Raw)
	}
	var buf [20]byte
	return len(strconv.AppendUint(buf[:0], v.TAT, 10))
}

// ParseValue parses text as a stored value: an unsigned decimal integer
// below 2^64 with an optional leading '+'. It does not allocate.
func ParseValue(text []byte) (uint64, bool) {
	b := text
	if len(b) > 0 && b[0] == '+' {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// NewValue returns the Value that SET stores for text, or false when text is
// not an unsigned decimal integer.
func NewValue(text []byte) (Value, bool) {
	n, ok := ParseValue(text)
	if !ok {
		return Value{}, false
	}
	v := Value{TAT: n}
	var buf [20]byte
	if string(strconv.AppendUint(buf[:0], n, 10)) != string(text) {
		v.Raw = string(text)
	}
	return v, true
}

// valueLocked builds the Value of a live entry. Requires sh.mu.
func (sh *shard) valueLocked(slot uint32) Value {
	e := &sh.slab[slot]
	v := Value{TAT: e.tat, ExpireAtMs: e.exp, Invalid: e.flags&flagInvalid != 0, Kind: e.kind()}
	if e.flags&flagRaw != 0 {
		v.Raw = sh.rawLocked(slot)
		v.TAT = 0
		if !v.Invalid {
			v.TAT = rawNumber(v.Raw)
		}
	}
	return v
}

// lookupLocked returns the live slot for key, deleting the key when it has
// expired. Requires sh.mu. Does not allocate.
func (sh *shard) lookupLocked(key []byte, h uint64, nowMs int64) (uint32, bool) {
	slot, pos, ok := sh.findLocked(key, h)
	if !ok {
		return 0, false
	}
	if !sh.slab[slot].alive(nowMs) {
		sh.expireLocked(slot, pos) // expire.go
		sh.expired++
		return 0, false
	}
	return slot, true
}

// removeLocked deletes the key in slot, whose index word is at pos.
// Requires sh.mu.
func (sh *shard) removeLocked(slot uint32, pos int) { sh.removeNoteLocked(slot, pos, sh.track) }

// removeNoteLocked is removeLocked, queueing the key's deletion for
// persistence only when note (expireLocked leaves a clean key's out).
// Requires sh.mu.
func (sh *shard) removeNoteLocked(slot uint32, pos int, note bool) {
	e := &sh.slab[slot]
	if e.flags&kindMask != 0 {
		sh.dropKindLocked(slot)
	}
	if e.flags&flagRaw != 0 {
		sh.freeRawLocked(e)
	}
	sh.addMemLocked(-keyCost(e.klen))
	if note {
		sh.noteDeletedLocked(sh.keyOf(e))
	}
	if sh.rl != nil {
		sh.rl.noteDelete(slot, sh.keyOf(e))
	}
	sh.indexRemoveLocked(pos)
	if e.klen > inlineKey {
		sh.arenaFreeLocked(e.off, e.klen) // arena.go
	}
	sh.seq++
	*e = entry{}
	sh.free = append(sh.free, slot)
	sh.noteFreeLocked()
}

// delBlockSize is the size of a shard's block of deleted keys' bytes.
const delBlockSize = 4096

// noteDeletedLocked queues a copy of key for the next Drain's deletions.
// The copy lives in delBlock; a full block is replaced by a new one (the
// old one stays referenced by the slices already cut from it), and bytes
// once cut are never written again, so a Drain's receiver can keep its
// slices while the shard goes on appending. Requires sh.mu.
func (sh *shard) noteDeletedLocked(key []byte) {
	if len(key) > delBlockSize/4 {
		// A long key gets a copy of its own, left to the collector once
		// the Drain that takes it is done: made the block, it would stay
		// charged as the shard's fixed cost for good (up to 256 shards x
		// the longest key), so evicted long keys would leave the bound
		// full with an empty keyspace (TestProcessLongKeysDoNotWedgeTheBound).
		sh.deleted = append(sh.deleted, bytes.Clone(key))
		return
	}
	if cap(sh.delBlock)-len(sh.delBlock) < len(key) {
		old := cap(sh.delBlock)
		sh.delBlock = make([]byte, 0, delBlockSize)
		sh.addMemLocked(int64(cap(sh.delBlock) - old)) // memory.go: a shard's fixed cost
	}
	start := len(sh.delBlock)
	sh.delBlock = append(sh.delBlock, key...)
	sh.deleted = append(sh.deleted, sh.delBlock[start:len(sh.delBlock):len(sh.delBlock)])
}

// deleteSlotLocked deletes the key in slot, finding its index word first.
// Requires sh.mu.
func (sh *shard) deleteSlotLocked(slot uint32) {
	key := sh.keyOf(&sh.slab[slot])
	_, pos, ok := sh.findLocked(key, maphash.Bytes(sh.seed, key))
	if !ok {
		panic("store: slot missing from its index")
	}
	sh.removeLocked(slot, pos)
}

// writeLocked stores a value in a used slot, bumping its version and marking
// it dirty. flags carries the LRU clock (lruFlags) besides the value's
// flags. Requires sh.mu.
func (sh *shard) writeLocked(slot uint32, tat uint64, exp int64, flags uint32, raw string) {
	e := &sh.slab[slot]
	if e.flags&kindMask != flags&kindMask {
		sh.dropKindLocked(slot) // another kind's state is replaced
	}
	switch {
	case e.flags&flagRaw != 0 && raw != "": // one text for another, in its place
		i, n := rawRefOf(e.tat)
		sh.addMemLocked(rawCost(len(raw)) - sh.dropGrownLocked(i, n))
		sh.rawv[i] = raw // a store: the old text's header is never loaded
		tat, flags = rawRef(i, len(raw)), flags|flagRaw
	case e.flags&flagRaw != 0:
		sh.freeRawLocked(e)
	case raw != "":
		tat, flags = sh.newRawLocked(raw), flags|flagRaw
	}
	sh.seq++
	e.tat, e.exp, e.ver = tat, exp, sh.seq
	e.flags = flagUsed | flags | e.flags&flagDirty
	if sh.track && e.flags&flagDirty == 0 {
		e.flags |= flagDirty
		sh.dirty = append(sh.dirty, slot)
		sh.noteDirtyTailLocked()
	}
	if sh.rl != nil {
		sh.rl.noteWrite(slot, e, sh.keyOf(e))
	}
}

// dirtyTailLocked is the address of the dirty list's element the shard's
// next first write in this window appends (persistence only), or 0 when
// that append would grow the list (new memory) or the shard keeps no list
// (without tracking it stays nil). Requires sh.mu.
//
// PrefetchWith prefetches its line (shard.dirtyLine) for writing with a
// batch's other lines, before the batch runs, and Throttle and ThrottleIn
// prefetch it again as soon as they hold the lock (a call outside a
// batch, and a line the batch's prefetch lost by then).
//
// The list was last touched by the drain a window or two ago and its line
// has left the core's caches by then: unfetched, the append's store was
// still waiting for it when the shard's unlock (a locked instruction,
// which waits for every earlier store) ran, and the allowed row of
// bench/persist_cost.sh spent ~1.5% of its CPU there (perf: the samples
// after the unlock's lock xadd and after the append's store, against the
// same row with persistence off); prefetched only under the lock, that
// wait moved to the prefetch itself, and from the batch it went away. Cost:
// a compare, and with persistence a prefetch instruction, per call.
func (sh *shard) dirtyTailLocked() uintptr {
	if d := sh.dirty; len(d) < cap(d) {
		return uintptr(unsafe.Pointer(unsafe.SliceData(d))) + uintptr(len(d))*unsafe.Sizeof(d[0])
	}
	return 0
}

// noteDirtyTailLocked publishes the line of the dirty list's next element
// (shard.dirtyLine) after the list changed, when that line changed: at most
// one atomic store per 16 appends, and per drain. Requires sh.mu.
func (sh *shard) noteDirtyTailLocked() {
	if p := sh.dirtyTailLocked() &^ 63; p != sh.dirtyLine.Load() {
		sh.dirtyLine.Store(p)
	}
}

// noteWrittenLocked records a write of slot made in place (EditString): a
// new version (WATCH), the dirty mark for persistence, the replication
// log, as writeLocked does (which keeps its own copy of these lines: it
// is CL.THROTTLE's path, and this call is not inlined). Requires sh.mu.
func (sh *shard) noteWrittenLocked(slot uint32) {
	e := &sh.slab[slot]
	sh.seq++
	e.ver = sh.seq
	if sh.track && e.flags&flagDirty == 0 {
		e.flags |= flagDirty
		sh.dirty = append(sh.dirty, slot)
		sh.noteDirtyTailLocked()
	}
	if sh.rl != nil {
		sh.rl.noteWrite(slot, e, sh.keyOf(e))
	}
}

// growByQuarter returns s, full, with a quarter more capacity (at least 16
// elements): append would double below 256 elements, and the slab and the
// object table charge for their slack as a steady share of an element.
func growByQuarter[T any](s []T) []T {
	g := make([]T, len(s), cap(s)+max(16, cap(s)/4))
	copy(g, s)
	return g
}

// insertLocked adds key (absent; pos from findLocked) and returns its slot.
// Requires sh.mu. Copies the key into the arena; no per-key allocation.
func (sh *shard) insertLocked(key []byte, h uint64, pos int) uint32 {
	var slot uint32
	if n := len(sh.free); n > 0 {
		slot = sh.free[n-1]
		sh.free = sh.free[:n-1]
		if n > 1 {
			// The next insert's entry, a cold line freed long ago: its
			// write (and the index word's atomic store after it, which
			// waits for it) would otherwise miss. Under churn (a FIXED
			// window's keys made again each window) that was most of
			// an insert's cost.
			prefetchEntry(&sh.slab[sh.free[n-2]])
		}
		sh.noteFreeLocked()
	} else {
		if len(sh.slab) == cap(sh.slab) {
			// A slab's slack is then the same ~12% of an entry at
			// every size, which keyCost charges for.
			sh.slab = growByQuarter(sh.slab)
			sh.publishLocked()
		}
		sh.slab = append(sh.slab, entry{})
		slot = uint32(len(sh.slab) - 1)
	}
	e := &sh.slab[slot]
	*e = entry{klen: uint32(len(key)), flags: flagUsed}
	if len(key) <= inlineKey {
		copy(e.inl[:], key)
	} else {
		e.off = sh.arenaPutLocked(key) // arena.go
	}
	sh.indexAddLocked(h, slot, pos)
	sh.addMemLocked(keyCost(uint32(len(key))))
	if sh.used > sh.peak {
		sh.peak = sh.used
	}
	return slot
}

// putLocked stores a value under key, inserting it if needed. Requires sh.mu.
func (sh *shard) putLocked(key []byte, h uint64, tat uint64, exp int64, flags uint32, raw string) {
	slot, pos, ok := sh.findLocked(key, h)
	if !ok {
		slot = sh.insertLocked(key, h, pos)
	}
	sh.writeLocked(slot, tat, exp, flags, raw)
}

// Throttle runs one CL.THROTTLE decision for key at nowNs under the key's
// shard lock and stores the result when allowed. It returns the decision and
// one of ErrInvalidValue (nothing written), ErrSetExpire (written, no TTL)
// or ErrOOM (the call would create the key, used memory is over the bound
// and no room could be made: nothing written, no decision).
//
// Hot path: one hash, one index probe, a slab write; no allocation when the
// key already exists (a new key may grow the slab, arena or index, and,
// over the memory bound, evicts first: see roomFor).
func (s *Store) Throttle(key []byte, lim gcra.Limit, q int64, nowNs int64) (gcra.Result, error) {
	nowMs := nowNs / 1e6
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	if p := sh.dirtyTailLocked(); p != 0 {
		prefetchw(p) // the dirty list's next line, for the append (dirtyTailLocked)
	}
	slot, ok := sh.lookupLocked(key, h, nowMs)
	var oom error
	if !ok && s.overLimit() {
		slot, ok, oom = s.roomFor(sh, key, h, nowMs)
	}
	var tat uint64
	if ok {
		e := &sh.slab[slot]
		if e.flags&(flagInvalid|flagRaw|kindMask) != 0 {
			if e.flags&(flagInvalid|kindMask) != 0 {
				err := e.unreadableErr() // under the lock: a writer of the shard changes flags
				sh.mu.Unlock()
				return gcra.Result{}, err
			}
			tat = sh.tatLocked(e) // a verbatim number, such as "+5"
		} else {
			tat = e.tat
		}
	}
	r := lim.Apply(nowNs, tat, ok, q)
	if r.Limited {
		sh.mu.Unlock()
		return r, nil
	}
	if oom != nil && r.TTLms != 0 { // would create the key
		sh.mu.Unlock()
		return gcra.Result{}, oom
	}
	var err error
	switch ms := r.TTLms; {
	case ms > 0:
		if ok {
			sh.writeLocked(slot, r.NewTAT, nowMs+ms, lruFlags(nowMs), "")
		} else {
			sh.putLocked(key, h, r.NewTAT, nowMs+ms, lruFlags(nowMs), "")
		}
	case ms == 0: // a 0 ms TTL: live to the end of this millisecond
		if ok {
			sh.writeLocked(slot, r.NewTAT, zeroTTLExpiry(nowMs), lruFlags(nowMs), "")
		} else if oom == nil { // at the memory bound, a key that would live < 1 ms is not created
			sh.putLocked(key, h, r.NewTAT, zeroTTLExpiry(nowMs), lruFlags(nowMs), "")
		}
	default: // −1: no TTL; below −1: no TTL and an error
		sh.putLocked(key, h, r.NewTAT, 0, lruFlags(nowMs), "")
		if ms < -1 {
			err = ErrSetExpire
		}
	}
	sh.mu.Unlock()
	return r, err
}

// zeroTTLExpiry is the expiry (Unix ms) of a TAT written with a 0 ms TTL at
// nowMs. redis-cell sets it with RedisModule_SetExpire(key, 0), which
// makes the key expire at nowMs; Redis keeps a key while now <= its expiry,
// so it stays readable, and decides later calls, to the end of the current
// millisecond (checked against the module, TestRedisCellParityRandom). 0
// is "no expiry" in an entry, hence the 1 for a clock at the epoch.
func zeroTTLExpiry(nowMs int64) int64 { return max(nowMs, 1) }

// Get returns key's live value.
func (s *Store) Get(key []byte, nowMs int64) (Value, bool) {
	sh, slot, ok := s.lockLive(key, nowMs)
	if !ok {
		return Value{}, false
	}
	defer sh.mu.Unlock()
	sh.touchLocked(slot, nowMs)
	return sh.valueLocked(slot), true
}

// lockLive finds key's live entry and returns its shard locked, for the
// reads that look at one key under its shard's lock (the caller unlocks
// sh.mu). ok false: key is missing or expired, or its shard was never
// made (a read makes no shard), and nothing is locked. O(1).
func (s *Store) lockLive(key []byte, nowMs int64) (sh *shard, slot uint32, ok bool) {
	h := s.hashKey(key)
	if sh = s.madeShard(h); sh == nil {
		return nil, 0, false
	}
	sh.mu.Lock()
	if slot, ok = sh.lookupLocked(key, h, nowMs); !ok {
		sh.mu.Unlock()
		return nil, 0, false
	}
	return sh, slot, true
}

// Version returns a number that changes whenever key is written or deleted,
// and whether the key is live. WATCH compares two readings.
func (s *Store) Version(key []byte, nowMs int64) (uint32, bool) {
	sh, slot, ok := s.lockLive(key, nowMs)
	if !ok {
		return 0, false
	}
	defer sh.mu.Unlock()
	return sh.slab[slot].ver, true
}

// Action is what an Update callback decides.
type Action int

// The actions of an Update callback.
const (
	Keep   Action = iota // leave the key as it is
	Put                  // store the returned Value
	Delete               // remove the key
)

// Update runs fn on key's live value under the shard lock and applies its
// decision; it is the building block of SET, EXPIRE, PERSIST and friends.
// A Put of a Value of KindString stores that string, whatever the key held
// (SET's rule); a Put that keeps old's Kind on a key of another kind changes
// only its expiry (EXPIRE and PERSIST work on every kind). fn
// is called once and must not call back into the Store. A Put whose
// ExpireAtMs is not after nowMs deletes the key instead, as Redis does for
// a past expiry. A Put that would create the key while used memory is over
// the bound and no room could be made is not applied: Update returns
// ErrOOM (fn has run; its decision is dropped). Any other call returns nil.
func (s *Store) Update(key []byte, nowMs int64, fn func(old Value, exists bool) (Value, Action)) error {
	h := s.hashKey(key)
	sh := s.madeShard(h)
	if sh == nil {
		return s.updateUnmade(key, h, nowMs, fn)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, ok := sh.lookupLocked(key, h, nowMs)
	var oom error
	if !ok && s.overLimit() {
		slot, ok, oom = s.roomFor(sh, key, h, nowMs)
	}
	var old Value
	if ok {
		old = sh.valueLocked(slot)
	}
	nv, act := fn(old, ok)
	return sh.applyLocked(key, h, slot, ok, old, nv, act, oom, nowMs)
}

// updateUnmade is Update for a key whose shard no write has made yet, so
// the key is missing: fn decides first, and the shard is made only for a
// Put that creates the key. A command that writes nothing to a missing
// key (EXPIRE, PERSIST, ...) thus makes no shard, which would stay
// charged against the bound for the store's life (768 B each, 196 KB a
// database). mkMu is held from the check to the shard's lock, so no
// other write can make the shard and create the key between fn's
// decision and its application (lock order: mkMu, then the shard's mu;
// room is made, as Update makes it for a missing key, before mkMu).
func (s *Store) updateUnmade(key []byte, h uint64, nowMs int64, fn func(old Value, exists bool) (Value, Action)) error {
	var oom error
	if s.overLimit() {
		oom = s.makeRoom(nowMs)
	}
	s.mkMu.Lock()
	if s.shards[h>>56].Load() != nil { // made meanwhile: the usual path
		s.mkMu.Unlock()
		return s.Update(key, nowMs, fn)
	}
	nv, act := fn(Value{}, false)
	if act != Put || (nv.ExpireAtMs != 0 && nv.ExpireAtMs <= nowMs) {
		s.mkMu.Unlock()
		return nil // nothing to write to a missing key
	}
	if oom != nil {
		s.mkMu.Unlock()
		return oom
	}
	// Locked before it is published: an Update that loads the new shard
	// must wait for this key's creation, not decide on a missing key too.
	sh := s.newShardLocked(int(h >> 56))
	sh.mu.Lock()
	s.shards[h>>56].Store(sh)
	s.mkMu.Unlock()
	defer sh.mu.Unlock()
	return sh.applyLocked(key, h, 0, false, Value{}, nv, act, nil, nowMs)
}

// applyLocked applies an Update callback's decision (nv, act) for key,
// found live at slot when ok, old its value then, oom the bound's refusal
// of a new key. Requires sh.mu.
func (sh *shard) applyLocked(key []byte, h uint64, slot uint32, ok bool, old, nv Value, act Action, oom error, nowMs int64) error {
	if act == Put && nv.ExpireAtMs != 0 && nv.ExpireAtMs <= nowMs {
		act = Delete
	}
	switch act {
	case Put:
		if !ok && oom != nil {
			return oom
		}
		if ok && old.Kind != KindString && nv.Kind == old.Kind {
			sh.retimeLocked(slot, nv.ExpireAtMs, nowMs) // the kind's state stays
			return nil
		}
		if nv.Kind != KindString {
			panic("store: Update can write strings only")
		}
		flags := lruFlags(nowMs)
		if nv.Invalid {
			flags |= flagInvalid
		}
		if ok { // the slot found above: no second index probe
			sh.writeLocked(slot, nv.TAT, nv.ExpireAtMs, flags, nv.Raw)
		} else {
			sh.putLocked(key, h, nv.TAT, nv.ExpireAtMs, flags, nv.Raw)
		}
	case Delete:
		if ok {
			sh.deleteSlotLocked(slot)
		}
	}
	return nil
}

// roomFor is the slow path of a command that may create key while used
// memory is over the bound: it releases sh.mu, makes room by the policy
// (makeRoom), retakes sh.mu and looks key up again (another command may
// have created it meanwhile). err is ErrOOM when no room could be made;
// the caller may then still write key if it exists now, but must not
// create it. Requires sh.mu (released and retaken inside).
func (s *Store) roomFor(sh *shard, key []byte, h uint64, nowMs int64) (slot uint32, ok bool, err error) {
	sh.mu.Unlock()
	err = s.makeRoom(nowMs)
	sh.mu.Lock()
	slot, ok = sh.lookupLocked(key, h, nowMs)
	return slot, ok, err
}

// Delete removes key and reports whether it was live.
func (s *Store) Delete(key []byte, nowMs int64) bool {
	h := s.hashKey(key)
	sh := s.madeShard(h)
	if sh == nil {
		return false
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, ok := sh.lookupLocked(key, h, nowMs)
	if ok {
		sh.deleteSlotLocked(slot)
	}
	return ok
}

// Load inserts a restored record without marking it dirty (it is on disk
// already). text is parsed like SET's value, but an invalid one is kept,
// flagged, rather than dropped, so the client sees the spec's "invalid stored
// value" error instead of data silently vanishing.
func (s *Store) Load(key, text []byte, expireAtMs int64) {
	v, ok := NewValue(text)
	var flags uint32
	if !ok {
		v = Value{Raw: string(text), Invalid: true}
		flags = flagInvalid
	}
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, pos, exists := sh.findLocked(key, h)
	if !exists {
		slot = sh.insertLocked(key, h, pos)
	}
	wasDirty := sh.slab[slot].flags&flagDirty != 0
	sh.writeLocked(slot, v.TAT, expireAtMs, flags, v.Raw)
	if sh.track && !wasDirty {
		sh.slab[slot].flags &^= flagDirty
		sh.dirty = sh.dirty[:len(sh.dirty)-1] // writeLocked just appended slot
	}
}

// Unload removes key during a restore without queueing a deletion for
// persistence (the disk already says the key is gone). Only for restoring:
// it drops the key even if it had unsaved changes.
func (s *Store) Unload(key []byte) {
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, pos, exists := sh.findLocked(key, h)
	if !exists {
		return
	}
	sh.removeLocked(slot, pos)
	if sh.track {
		sh.deleted = sh.deleted[:len(sh.deleted)-1] // removeLocked just appended it
	}
}

// Len returns the number of keys held, including expired ones not yet swept
// (as Redis's DBSIZE does).
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := s.shards[i].Load()
		if sh == nil {
			continue // never used: no key, no state
		}
		sh.mu.Lock()
		n += sh.used
		sh.mu.Unlock()
	}
	return n
}

// Counts returns the number of keys and of keys with a TTL (INFO keyspace).
// It walks every slab: O(keys).
func (s *Store) Counts() (keys, expires int) {
	for i := range s.shards {
		sh := s.shards[i].Load()
		if sh == nil {
			continue // never used: no key, no state
		}
		sh.mu.Lock()
		keys += sh.used
		for j := range sh.slab {
			if e := &sh.slab[j]; e.flags&flagUsed != 0 && e.exp != 0 {
				expires++
			}
		}
		sh.mu.Unlock()
	}
	return keys, expires
}

// Flush removes every key (FLUSHDB/FLUSHALL); with dirty tracking every
// removed key is queued so the next Drain deletes it from disk.
func (s *Store) Flush() {
	for i := range s.shards {
		sh := s.shards[i].Load()
		if sh == nil {
			continue // never used: no key, no state
		}
		sh.mu.Lock()
		if sh.rl != nil {
			sh.rl.noteFlushLocked(sh)
		}
		if s.track {
			for j := range sh.slab {
				if e := &sh.slab[j]; e.flags&flagUsed != 0 {
					sh.noteDeletedLocked(sh.keyOf(e))
				}
			}
			sh.dirty = sh.dirty[:0]
			sh.noteDirtyTailLocked()
		}
		sh.seq++
		sh.reset()
		sh.mu.Unlock()
	}
}

// shardOf returns key's shard (tests and diagnostics).
func (s *Store) shardOf(key []byte) *shard { return s.shardFor(s.hashKey(key)) }

// shardIndex returns the number of key's shard (tests and diagnostics).
func (s *Store) shardIndex(key []byte) int { return int(s.hashKey(key) >> 56) }
