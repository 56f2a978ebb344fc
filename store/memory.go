package store

import (
	"sync/atomic"
	"unsafe"
)

// Memory accounting. Every key is charged, when it is inserted, what it
// costs the heap on average (keyCost), and credited the same when it goes;
// a value kept as text (flagRaw) is charged its rawv place and bytes on top
// (rawCost). Nothing is charged or credited when an existing key is
// rewritten with a plain TAT, so CL.THROTTLE on a live key pays nothing for
// the accounting.
//
// Why an average and not the slab's and index's capacities: capacities
// only grow (a freed slot is reused by the next insert, not returned), so a
// bound on them could never be brought back under by evicting. Charging
// each key its share of those capacities makes used memory fall with
// every eviction while tracking the heap the keys really hold: at the
// bound, a freed slot, index word and arena bytes are taken again by the
// key that needed the room (TestUsedMemoryTracksHeap measures the fit).
//
// The figures, for the layout described on package store:
//
//	slab entry            48 B, slab capacity up to 1.25x its length     ~54 B
//	index word            8 B at 38-75% load (rehash doubles it)         ~16 B
//	dirty + spare lists   4 B each per key written in a window (persistence)
//	arena (keys > 16 B)   the bytes, plus growth and garbage slack       +1/2
//
// Persistence's buffers are counted too, as a share of the bound its owner
// sets aside for them (SetExternalMemory), and so are the server's script
// cache and tracking table, by their estimates (AddOverheadMemory). What
// is not charged:
// connections' buffers and the Go runtime's own overhead; see
// docs/memory.md for the process's RSS.

// entryCost is the heap a key costs before its name's bytes (see above):
// calibrated by TestUsedMemoryTracksHeap.
const entryCost = 80

// keyCost is what a key whose name is klen bytes long is charged.
func keyCost(klen uint32) int64 {
	if klen <= inlineKey {
		return entryCost
	}
	return entryCost + int64(klen) + int64(klen)/2
}

// rawCost is what a value kept as text of n bytes adds to its key: its
// place in shard.rawv (a string header, the slice's growth slack, a free
// list entry once freed) and the bytes, rounded up to the allocator's
// 8-byte size classes.
func rawCost(n int) int64 { return 48 + int64((n+7)&^7) }

// memBatch is how far a shard's charges may run ahead of (or behind)
// Store.used before they are added to it: the shared counter is written
// once per ~13 inserts of short keys rather than on every one, and is off
// by at most nShards*memBatch (256 KiB) from the exact sum. Under a bound
// smaller than 64*nShards*memBatch (16 MiB) a shard's batch is a 64*256th
// of the bound instead (shard.memBatch), so that the lag stays under 1/64
// of it.
const memBatch = 1 << 10

// batchFor is a shard's batch under the bound max (0: none).
func batchFor(max int64) int64 {
	if max <= 0 {
		return memBatch
	}
	return min(memBatch, max/(64*nShards))
}

// baseMemory is the store's fixed cost, counted in UsedMemory so that an
// empty store reports a non-zero figure, as Redis does: its header and
// its table of shard pointers, ~3 KiB. Each shard it makes adds shardCost
// (made on a key's first write to it, store.go's makeShard), so a database
// with one key costs ~4 KiB. (Each shard's block of deleted keys' bytes,
// noteDeletedLocked, is charged to the shard while it is the current one.)
const baseMemory = int64(unsafe.Sizeof(Store{}))

// shardCost is a made shard's fixed cost: its struct, in its allocation
// size class (768 bytes on 64-bit).
var shardCost = int64(allocClass(int(unsafe.Sizeof(shard{}))))

// allocClass is the size class Go's allocator gives an n-byte object, for
// n ≤ 1024 (the classes a shard can fall into).
func allocClass(n int) int {
	for _, c := range [...]int{512, 576, 640, 704, 768, 896, 1024} {
		if n <= c {
			return c
		}
	}
	return n
}

// addMemLocked charges d bytes (negative: credits) to the shard. Requires
// sh.mu.
func (sh *shard) addMemLocked(d int64) {
	sh.mem += d
	sh.memPending += d
	if sh.memPending > sh.memBatch || sh.memPending < -sh.memBatch {
		sh.memUsed.Add(sh.memPending)
		sh.ownUsed.Add(sh.memPending)
		sh.memPending = 0
	}
}

// publishMemLocked adds the shard's pending charges to Store.used now (an
// evictor does it so that its next over-the-bound check sees the room it
// made). Requires sh.mu.
func (sh *shard) publishMemLocked() {
	if sh.memPending != 0 {
		sh.memUsed.Add(sh.memPending)
		sh.ownUsed.Add(sh.memPending)
		sh.memPending = 0
	}
}

// resetMemLocked forgets every key's charge (the shard is being emptied);
// the block of deleted keys stays, and stays charged. Requires sh.mu.
func (sh *shard) resetMemLocked() {
	if sh.memUsed != nil {
		sh.memUsed.Add(sh.memPending - sh.mem)
		sh.ownUsed.Add(sh.memPending - sh.mem)
	}
	sh.mem, sh.memPending = 0, 0
	if sh.memUsed != nil {
		sh.addMemLocked(int64(cap(sh.delBlock)))
	}
}

// UsedMemory is INFO's used_memory: the fixed cost of every store sharing
// the account (every database, databases.go) plus every key's charge,
// exactly (it takes each shard's lock in turn). This is the figure the
// bound applies to.
func (s *Store) UsedMemory() int64 {
	n := s.external.Load() + s.backlog.Load() + s.held.Load() + s.overhead.Load()
	for _, st := range s.storesOf() {
		n += st.ownMemory()
	}
	return n
}

// ownMemory is this store's part of UsedMemory: its fixed cost and its
// keys' charges.
func (s *Store) ownMemory() int64 {
	n := baseMemory + int64(s.made.Load())*shardCost
	for i := range s.shards {
		sh := s.shards[i].Load()
		if sh == nil {
			continue // never used: no key, no state
		}
		sh.mu.Lock()
		n += sh.mem
		sh.mu.Unlock()
	}
	return n
}

// usedApprox is UsedMemory without the locks: off by at most
// nShards*memBatch per store. Six atomic loads of one memoryState (a
// cache line or two); this is what an insert checks (not a rewrite of a
// live key: CL.THROTTLE on a live key never reads it).
func (s *Store) usedApprox() int64 {
	return s.fixed.Load() + s.external.Load() + s.backlog.Load() + s.held.Load() + s.overhead.Load() + s.used.Load()
}

// AddOverheadMemory adds delta (negative: releases) to the memory the
// server's own structures hold for the keyspace's clients and count in
// used_memory as Redis counts them: the script cache (used_memory_scripts)
// and the client-side caching tracking table. Unlike the held memory
// (AddHeldMemory) the bound acts on it as on keys: over the bound, new
// keys are refused (ErrOOM) under NoEviction, and keys are evicted by the
// policy otherwise (Redis's performEvictions counts it, subtracting only
// replication and AOF buffers). Safe for concurrent use; one atomic add.
func (s *Store) AddOverheadMemory(delta int64) { s.overhead.Add(delta) }

// OverheadMemory is the sum of AddOverheadMemory's deltas.
func (s *Store) OverheadMemory() int64 { return s.overhead.Load() }

// SetExternalMemory sets the bytes held or set aside outside the keyspace
// on its behalf, which the bound covers too and UsedMemory includes:
// main reserves a share of the bound for persistence's buffers (the keys
// written and evicted again under a key spray are carried to disk by
// them), so that the keys get the rest instead of the buffers growing the
// process past the bound. n < 0 counts as 0. Over the bound after it
// grows, keys are evicted as after a lower bound. Safe for concurrent use;
// one atomic store. The account is shared by every database.
func (s *Store) SetExternalMemory(n int64) { s.external.Store(max(n, 0)) }

// ExternalMemory is the figure SetExternalMemory last set.
func (s *Store) ExternalMemory() int64 { return s.external.Load() }

// overLimit reports whether a bound is set and used memory is over it.
// Two atomic loads; called only on the way to inserting a key.
func (s *Store) overLimit() bool {
	m := s.maxMemory.Load()
	return m > 0 && s.usedApprox() > m
}

// OverLimit reports whether a bound is set and used memory, as the
// inserts see it (within the batches' lag), is over it: what a caller
// checks before asking MakeRoom, which needs the time. Safe for
// concurrent use; one atomic load when no bound is set, seven when one is.
func (s *Store) OverLimit() bool { return s.overLimit() }

// evictable reports whether used memory less the backlog
// (SetBacklogMemory) and the memory clients hold (AddHeldMemory) is over
// the bound: whether evicting keys can bring used memory down (evicting
// shrinks neither).
func (s *Store) evictable() bool {
	m := s.maxMemory.Load()
	return m > 0 && s.usedApprox()-s.backlog.Load()-s.held.Load() > m
}

// SetMaxMemory sets the bound in bytes (0: none). Lowering it below the
// memory in use makes the next inserts and the background sweep
// (SweepStep) evict by the policy, a bounded amount at a time; under
// NoEviction new keys are refused until keys expire or are deleted. Safe
// for concurrent use.
//
// It takes every shard's lock in turn, to publish the charges they hold
// back and set their batch (batchFor).
func (s *Store) SetMaxMemory(n int64) {
	n = max(n, 0)
	batch := batchFor(n)
	s.ev.mu.Lock() // orders this against a database being created (addStore)
	s.maxMemory.Store(n)
	for _, st := range s.storesOf() {
		st.mkMu.Lock() // a shard made meanwhile reads the new bound
		for i := range st.shards {
			sh := st.shards[i].Load()
			if sh == nil {
				continue // never used: no key, no state
			}
			sh.mu.Lock()
			sh.memBatch = batch
			sh.publishMemLocked()
			sh.mu.Unlock()
		}
		st.mkMu.Unlock()
	}
	s.ev.mu.Unlock()
	if f := s.onMaxMemory.Load(); f != nil {
		(*f)(n)
	}
}

// OnMaxMemory sets f to be called with the new bound after every
// SetMaxMemory (CONFIG SET maxmemory at run time included), from the
// goroutine that set it, with no store lock held: main uses it to move the
// Go runtime's soft memory limit with the bound. nil removes it. Safe for
// concurrent use; f must be too.
func (s *Store) OnMaxMemory(f func(n int64)) {
	if f == nil {
		s.onMaxMemory.Store(nil)
		return
	}
	s.onMaxMemory.Store(&f)
}

// MaxMemory returns the bound in bytes, 0 when there is none.
func (s *Store) MaxMemory() int64 { return s.maxMemory.Load() }

// SetPolicy sets the eviction policy. Safe for concurrent use.
func (s *Store) SetPolicy(p Policy) {
	if p >= numPolicies {
		p = NoEviction
	}
	s.policy.Store(uint32(p))
}

// Policy returns the eviction policy.
func (s *Store) Policy() Policy { return Policy(s.policy.Load()) }

// EvictedKeys is INFO's evicted_keys: keys removed to stay under the
// bound since the store was created.
func (s *Store) EvictedKeys() int64 { return s.evicted.Load() }

// ResetEvictedKeys zeroes EvictedKeys (CONFIG RESETSTAT).
func (s *Store) ResetEvictedKeys() { s.evicted.Store(0) }

// memoryState is the Store's part for the bound; its zero value is an
// unbounded store. Kept apart so Store's declaration stays short.
type memoryState struct {
	used      atomic.Int64  // sum of the shards' published charges
	fixed     atomic.Int64  // the stores' fixed costs: baseMemory each, shardCost a made shard
	external  atomic.Int64  // SetExternalMemory's figure
	backlog   atomic.Int64  // SetBacklogMemory's figure (evict.go)
	held      atomic.Int64  // AddHeldMemory's running sum (evict.go)
	overhead  atomic.Int64  // AddOverheadMemory's running sum
	maxMemory atomic.Int64  // 0 = no bound
	policy    atomic.Uint32 // a Policy
	evicted   atomic.Int64
	ev        evictor

	onMaxMemory atomic.Pointer[func(int64)] // OnMaxMemory's observer
	// stores are the stores charging this account (one per database in
	// use), for UsedMemory, the bound's batches and eviction's samples.
	// Replaced whole (copy on write) under ev.mu when a store is added.
	stores atomic.Pointer[[]*Store]
}

// addStore adds st to the account's stores.
func (m *memoryState) addStore(st *Store) {
	m.ev.mu.Lock()
	defer m.ev.mu.Unlock()
	var l []*Store
	if p := m.stores.Load(); p != nil {
		l = append(l, *p...)
	}
	l = append(l, st)
	m.stores.Store(&l)
	m.fixed.Add(baseMemory)
	// A new store has no shard yet; each takes the bound's batch when it
	// is made (makeShard, ordered against SetMaxMemory by mkMu).
}

// storesOf is the stores sharing s's account (s among them).
func (m *memoryState) storesOf() []*Store { return *m.stores.Load() }
