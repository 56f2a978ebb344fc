package store

import (
	"errors"
	"hash/maphash"
	"sync"
	"time"
)

// Eviction: approximate, as Redis's evict.c is, so that it costs O(1) per
// command and nothing at all on the CL.THROTTLE path of a live key.
//
// A command that would create a key while used memory is over the bound
// first makes room (makeRoom): under NoEviction that is ErrOOM at once;
// otherwise it evicts one key at a time until used memory is back under
// the bound, at most evictBudget attempts per command (bounded work: the
// event loop that runs the command keeps answering within microseconds).
// Each attempt samples a random shard: evictSamples eligible keys on a walk
// of at most maxWalk consecutive slots from a random one (Redis's
// dictGetSomeKeys walks consecutive buckets the same way), deleting any
// expired key it meets on the way (that frees memory too). Slots are
// handed out in insertion order, so consecutive slots hold keys of one
// age: when the pool below holds fewer than half its candidates (its first
// fill), the attempt probes maxWalk independent random slots instead, at
// one cache miss each. The random
// policies evict the first eligible key the walk meets. The LRU and TTL
// policies offer the sampled keys to a pool of the poolSize best
// candidates kept across attempts (Redis's eviction pool): the key nearest
// its expiry (VolatileTTL) or idle longest (the LRU policies) among all
// recent samples, not just this one, is evicted. A candidate is checked
// before it goes: if its key was written, touched or deleted since it was
// sampled, it is dropped and the next one is tried.
//
// Why sampling is enough for limiters (VolatileTTL): a long-lived key is
// evicted only when none of the pool's 16 candidates, drawn from the last
// several samples of 8 keys each, is nearer its expiry. Under a spray of
// short-lived keys, with a fraction f of the keys long-lived, the chance
// that a whole sample holds no short-lived key is f^8 (1e-16 for f = 1%)
// when the sample is scattered, at most f for a walk (the long-lived keys
// written before the spray sit together), and the pool also keeps the short-lived candidates of earlier samples;
// TestEvictVolatileTTLSparesLongLived sprays 400k short-lived keys over
// 5,000 long-lived ones at a bound and checks that not one long-lived key
// goes. What sampling does not give is an exact order: the key evicted is
// among the nearest to expiry, not always the nearest (ordering test:
// TestEvictVolatileTTLOrder).
//
// The background sweep (SweepStep) evicts too when used memory is over the
// bound (after CONFIG SET lowered it, or at start-up), in chunks of
// evictBudget, so that inserts waiting for the evictor's lock wait for one
// chunk at most.
//
// Locks: the evictor's mutex, then one shard lock at a time; nothing takes
// the evictor's mutex while holding a shard lock.

// ErrOOM is returned by a command that would create a key while used
// memory is over the bound and no room could be made (NoEviction, or no
// key the policy may evict). Nothing was written.
var ErrOOM = errors.New("store: command not allowed when used memory > 'maxmemory'")

const (
	poolSize     = 16 // candidates the LRU and TTL policies keep (Redis's EVPOOL_SIZE)
	evictSamples = 8  // eligible keys one attempt samples (Redis's maxmemory-samples is 5)
	maxWalk      = 64 // slots one attempt walks, at most, to find them
	evictBudget  = 32 // attempts one command (or one background chunk) makes
)

// The LRU clock: seconds, 24 bits (194 days before it wraps, as Redis's),
// kept in the top bits of entry.flags and refreshed by every write and
// every read of the key.
const (
	lruShift = 8
	lruMask  = 1<<24 - 1
)

// lruFlags is the clock at nowMs, placed where entry.flags keeps it.
func lruFlags(nowMs int64) uint32 { return uint32(nowMs/1000) & lruMask << lruShift }

func (e *entry) lru() uint32 { return e.flags >> lruShift }

// touchLocked records a read of slot at nowMs for the LRU policies.
// Requires sh.mu.
func (sh *shard) touchLocked(slot uint32, nowMs int64) {
	e := &sh.slab[slot]
	e.flags = e.flags&(1<<lruShift-1) | lruFlags(nowMs)
}

// candidate is a sampled key in the eviction pool: where it was and what
// it looked like, so that a changed key is not evicted on stale grounds.
type candidate struct {
	score int64  // lower is evicted first: the expiry, or minus the idle time
	st    *Store // the key's database (the account's stores share the pool)
	slot  uint32
	ver   uint32 // entry.ver when sampled: any write since changes it
	lru   uint32 // entry.lru() when sampled: any read since changes it
	shard uint16
}

// evictor is the eviction state. Fields are guarded by mu.
type evictor struct {
	mu     sync.Mutex
	rng    uint64
	pool   [poolSize]candidate // pool[:n], best (lowest score) first
	n      int
	policy Policy // the policy the pool was filled for

	// The keys evicted by the current makeRoom, for the OnEvict hook:
	// copies in keyBuf, cut into keys once the batch is done.
	hook   func(keys [][]byte)
	ends   []int // end of each key in keyBuf
	keyBuf []byte
	keys   [][]byte
}

// OnEvict sets f to be told the names of the keys evicted to stay under
// the bound, so that the server can do what Redis's evict.c does for each
// (signalModifiedKey: client-side-caching invalidations, WATCH). f is
// called after each batch of evictions (one command's, or one chunk of the
// background sweep's), with no shard lock held but the evictor's own, so
// it must not create keys in this store; keys and their bytes are valid
// only during the call. nil removes it. Call it before the store is
// shared (the server sets it once, in server.New).
func (s *Store) OnEvict(f func(keys [][]byte)) {
	s.ev.mu.Lock()
	s.ev.hook = f
	s.ev.mu.Unlock()
}

// noteEvictedLocked remembers key for the hook. Requires ev.mu.
func (ev *evictor) noteEvictedLocked(key []byte) {
	if ev.hook == nil {
		return
	}
	ev.keyBuf = append(ev.keyBuf, key...)
	ev.ends = append(ev.ends, len(ev.keyBuf))
}

// tellLocked hands the keys evicted since the last call to the hook and
// forgets them. Requires ev.mu; no shard lock may be held.
func (ev *evictor) tellLocked() {
	if len(ev.ends) == 0 {
		return
	}
	ev.keys = ev.keys[:0]
	start := 0
	for _, end := range ev.ends {
		ev.keys = append(ev.keys, ev.keyBuf[start:end:end])
		start = end
	}
	ev.hook(ev.keys)
	clear(ev.keys)
	ev.keys, ev.ends, ev.keyBuf = ev.keys[:0], ev.ends[:0], ev.keyBuf[:0]
	if cap(ev.keyBuf) > 64<<10 { // a big batch's buffers are not kept
		ev.keys, ev.ends, ev.keyBuf = nil, nil, nil
	}
}

// next is splitmix64. Requires ev.mu.
func (ev *evictor) next() uint64 {
	if ev.rng == 0 {
		ev.rng = maphash.Comparable(maphash.MakeSeed(), 0) | 1
	}
	ev.rng += 0x9e3779b97f4a7c15
	z := ev.rng
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// offer adds c to the pool if it is better than the worst there (or there
// is room), keeping the pool sorted. Requires ev.mu.
func (ev *evictor) offer(c candidate) {
	for i := range ev.n {
		if p := &ev.pool[i]; p.st == c.st && p.shard == c.shard && p.slot == c.slot {
			if p.ver == c.ver && p.lru == c.lru {
				return // already there, unchanged
			}
			ev.removeAt(i) // changed since: re-rank it
			break
		}
	}
	if ev.n == poolSize {
		if c.score >= ev.pool[poolSize-1].score {
			return
		}
		ev.n--
	}
	i := ev.n
	for i > 0 && ev.pool[i-1].score > c.score {
		ev.pool[i] = ev.pool[i-1]
		i--
	}
	ev.pool[i] = c
	ev.n++
}

func (ev *evictor) removeAt(i int) {
	copy(ev.pool[i:ev.n], ev.pool[i+1:ev.n])
	ev.n--
}

// makeRoom evicts by the policy until used memory is under the bound or
// evictBudget attempts were made. It returns ErrOOM under NoEviction, and
// when used memory is still over the bound and its last attempt freed
// nothing (as Redis's performEvictions fails when no key is left that the
// policy may evict, even after evicting some); when the budget runs out
// while keys are still being freed, the command goes ahead (Redis's
// EVICT_RUNNING: the work per command stays bounded). The caller holds no
// lock. Cost: a few µs per key evicted.
func (s *Store) makeRoom(nowMs int64) error {
	pol := s.Policy()
	if pol == NoEviction {
		return ErrOOM
	}
	ev := &s.ev
	ev.mu.Lock()
	defer ev.mu.Unlock()
	defer ev.tellLocked() // runs before the unlock
	got := false
	for range evictBudget {
		if !s.overLimit() {
			return nil
		}
		if !s.evictable() {
			if !s.overLimit() {
				return nil // another writer freed room since the check above
			}
			return ErrOOM // over by the backlog alone: evicting cannot help
		}
		var empty bool
		got, empty = s.evictOneLocked(pol, nowMs)
		if empty {
			break
		}
	}
	if !got && s.overLimit() {
		return ErrOOM
	}
	return nil
}

// evictOneLocked makes one attempt to free a key (evicting one, or
// deleting expired ones met while sampling) and reports whether it freed
// any, and whether the store has no key left at all. Requires ev.mu.
func (s *Store) evictOneLocked(pol Policy, nowMs int64) (freed, empty bool) {
	ev := &s.ev
	if pol == VolatileRandom || pol == AllKeysRandom {
		evicted := false
		expired, empty := s.sampleLocked(pol, nowMs, false, func(_ *Store, sh *shard, _ int, slot uint32) bool {
			s.evictSlotLocked(sh, slot)
			evicted = true
			return false
		})
		return evicted || expired > 0, empty
	}
	if ev.policy != pol {
		ev.n, ev.policy = 0, pol
	}
	clock := uint32(nowMs/1000) & lruMask
	taken := 0
	// A pool short of candidates (the first attempt, or after a policy
	// change) is refilled from scattered slots: one walk of consecutive
	// slots samples keys of one age, since slots are handed out in
	// insertion order, and an empty pool has no earlier candidates to
	// fall back on. A full pool keeps the cheap walk.
	scatter := ev.n < poolSize/2
	expired, empty := s.sampleLocked(pol, nowMs, scatter, func(st *Store, sh *shard, si int, slot uint32) bool {
		e := &sh.slab[slot]
		score := e.exp
		if pol != VolatileTTL {
			score = -int64((clock - e.lru()) & lruMask)
		}
		ev.offer(candidate{score: score, st: st, slot: slot, ver: e.ver, lru: e.lru(), shard: uint16(si)})
		taken++
		return taken < evictSamples
	})
	if expired > 0 {
		return true, false
	}
	for ev.n > 0 {
		c := ev.pool[0]
		ev.removeAt(0)
		sh := c.st.shards[c.shard].Load() // made: a key was sampled there
		sh.mu.Lock()
		if int(c.slot) < len(sh.slab) {
			if e := &sh.slab[c.slot]; e.flags&flagUsed != 0 && e.ver == c.ver && e.lru() == c.lru && e.alive(nowMs) {
				s.evictSlotLocked(sh, c.slot)
				sh.mu.Unlock()
				return true, false
			}
		}
		sh.mu.Unlock()
	}
	return false, empty
}

// sampleLocked walks up to maxWalk slots of a random non-empty shard from
// a random slot (or, with scatter, probes maxWalk random slots of it), deleting the expired keys it meets, and calls take with
// each live key the policy may evict until take returns false. take runs
// under the shard's lock and may delete the key it is given. It returns
// how many expired keys it deleted, or that every shard is empty.
// The shard is one of the account's databases' (databases.go): a database
// is chosen with a chance proportional to its memory (pickStore), as
// Redis's eviction samples every database. Requires ev.mu (the generator).
func (s *Store) sampleLocked(pol Policy, nowMs int64, scatter bool, take func(st *Store, sh *shard, si int, slot uint32) bool) (expired int, empty bool) {
	r := s.ev.next()
	stores := s.storesOf()
	first := pickStore(stores, r)
	for n := range stores {
		st := stores[(first+n)%len(stores)]
		if expired, empty = st.sampleOneLocked(pol, nowMs, r, scatter, take); !empty {
			return expired, false
		}
	}
	return 0, true
}

// pickStore returns the index of a store chosen with a chance
// proportional to its published memory (uniformly when none has any).
func pickStore(stores []*Store, r uint64) int {
	if len(stores) == 1 {
		return 0
	}
	var total uint64
	for _, st := range stores {
		total += uint64(max(st.own.Load(), 0))
	}
	if total == 0 {
		return int(r>>32) % len(stores)
	}
	x := (r >> 16) % total
	for i, st := range stores {
		w := uint64(max(st.own.Load(), 0))
		if x < w {
			return i
		}
		x -= w
	}
	return len(stores) - 1
}

// sampleOneLocked is sampleLocked within s's own shards, r the random
// draw. Requires ev.mu.
func (s *Store) sampleOneLocked(pol Policy, nowMs int64, r uint64, scatter bool, take func(st *Store, sh *shard, si int, slot uint32) bool) (expired int, empty bool) {
	for tries := 0; tries < nShards; tries++ {
		si := int((r + uint64(tries)) % nShards)
		sh := s.shards[si].Load()
		if sh == nil {
			continue // never used: no key
		}
		sh.mu.Lock()
		size := len(sh.slab)
		if sh.used == 0 || size == 0 {
			sh.mu.Unlock()
			continue
		}
		slot := uint32((r >> 8) % uint64(size))
		x := r
		for range min(maxWalk, size) {
			cur := slot
			if scatter { // an independent random slot each time
				x = x*6364136223846793005 + 1442695040888963407 // LCG step
				cur = uint32((x >> 33) % uint64(size))
			} else if slot++; int(slot) == size {
				slot = 0
			}
			e := &sh.slab[cur]
			switch {
			case e.flags&flagUsed == 0:
				continue
			case !e.alive(nowMs):
				sh.expireSlotLocked(cur) // expire.go
				expired++
				continue
			case pol.volatile() && e.exp == 0:
				continue
			}
			if !take(s, sh, si, cur) {
				break
			}
		}
		if expired > 0 {
			sh.publishMemLocked()
		}
		sh.mu.Unlock()
		return expired, false
	}
	return 0, true
}

// evictSlotLocked evicts the key in slot: deleted like DEL (so the next
// flush deletes it from disk, and WATCH sees it change), counted, its
// memory credited at once, its name kept for the OnEvict hook. Requires
// sh.mu and ev.mu.
func (s *Store) evictSlotLocked(sh *shard, slot uint32) {
	s.ev.noteEvictedLocked(sh.keyOf(&sh.slab[slot]))
	sh.deleteSlotLocked(slot)
	s.evicted.Add(1)
	if sh.garbage >= 4096 && sh.garbage*4 >= len(sh.arena) {
		// At the bound every insert follows an eviction, so garbage would
		// otherwise grow to half the arena before the sweep's compaction
		// (compactArenaLocked): a quarter keeps a long key's real cost
		// near its charge, for three bytes copied per byte freed.
		sh.rewriteArenaLocked()
	}
	sh.publishMemLocked()
}

// evictUntil evicts, a chunk of evictBudget attempts at a time, until used
// memory is under the bound, nothing more can be freed, or the deadline
// passes (checked between chunks). It returns the keys evicted and whether
// used memory is under the bound. NoEviction evicts nothing.
func (s *Store) evictUntil(nowMs int64, deadline time.Time) (int64, bool) {
	before := s.evicted.Load()
	for s.evictable() {
		if s.makeRoom(nowMs) != nil || time.Now().After(deadline) {
			break
		}
	}
	return s.evicted.Load() - before, !s.overLimit()
}

// SetBacklogMemory sets the bytes persistence holds, beyond the share of
// the bound set aside for it (SetExternalMemory), in changes it could not
// write yet (a full or read-only disk). They count in UsedMemory and,
// over the bound, make a command that would create a key fail with
// ErrOOM, but they never make keys evicted: a key that reached the disk
// costs the backlog a deletion when it is evicted, so evicting for the
// backlog would grow it, and a long outage at the bound would evict every
// key (measured: 1,000 of 1,000 hour-long keys lost at 16 MB after 90k
// sprayed keys' backlog). So during an outage existing keys go on being
// decided and new keys are refused, the process stays within the bound
// plus that backlog, and new keys are taken again once it is written.
// n < 0 counts as 0. Safe for concurrent use; one atomic store.
func (s *Store) SetBacklogMemory(n int64) { s.backlog.Store(max(n, 0)) }

// BacklogMemory is the figure SetBacklogMemory last set.
func (s *Store) BacklogMemory() int64 { return s.backlog.Load() }

// AddHeldMemory adds delta (negative: releases) to the memory clients
// hold outside the keyspace, such as the commands a client queued in
// MULTI (Redis counts a client's MULTI state in used_memory too). Like the
// backlog it counts in UsedMemory and, over the bound, refuses new keys
// and commands queued in MULTI (MakeRoom's ErrOOM), but never makes keys
// evicted: a client, not the keyspace, holds it. Safe for concurrent use;
// one atomic add.
func (s *Store) AddHeldMemory(delta int64) { s.held.Add(delta) }

// HeldMemory is the sum of AddHeldMemory's deltas.
func (s *Store) HeldMemory() int64 { return s.held.Load() }

// MakeRoom returns nil when used memory is under the bound, or when it is
// over and one chunk of evictions by the policy (as an insert makes) freed
// keys, even if memory is still over the bound (Redis's EVICT_RUNNING:
// processCommand refuses only on EVICT_FAIL); ErrOOM under NoEviction or
// when nothing the policy may evict is left. So a command queued in MULTI
// is refused exactly when the same insert outside MULTI would be. Safe
// for concurrent use; costs one atomic load when no bound is set or
// memory is under it.
func (s *Store) MakeRoom(nowMs int64) error {
	if !s.overLimit() {
		return nil
	}
	return s.makeRoom(nowMs)
}

// EvictToLimit evicts by the policy until used memory is under the bound,
// however long that takes (start-up, after a restore: nothing is served
// yet). It returns the number of keys evicted, and ErrOOM when used memory
// is still over the bound (NoEviction, or not enough keys the policy may
// evict). Deletions reach the disk with the next flush.
func (s *Store) EvictToLimit(nowMs int64) (int64, error) {
	var total int64
	for {
		n, ok := s.evictUntil(nowMs, time.Now().Add(time.Hour))
		total += n
		if ok {
			return total, nil
		}
		if n == 0 {
			return total, ErrOOM
		}
	}
}
