package store

import "math/rand/v2"

// RandomKey returns a copy of a random live key (RANDOMKEY), or false when
// the store has none. Every live key has about the same chance, as in
// Redis (dictGetFairRandomKey): a shard is chosen with a chance
// proportional to its keys (their counts read under each shard's lock in
// turn, so a concurrent write can skew one call slightly), then a slot of
// it by rejection sampling (up to randomTries random slots; a shard that
// sparse is walked from a random slot instead, where a key after a run of
// free slots is likelier). Choosing the first key met from a random shard,
// as before, gave a key whose shard followed its only neighbour's a 1/256
// chance against 255/256 (Redis's Tcl test "RANDOMKEY": two keys, 100
// calls, one never seen). Expired keys met on the way are deleted (as
// Redis's dbRandomKey does). Cost: one short lock per shard, then one
// shard's lock for O(randomTries) probes; RANDOMKEY is not a hot command.
func (s *Store) RandomKey(nowMs int64) ([]byte, bool) {
	for round := 0; round < 4; round++ {
		var counts [nShards]int
		total := 0
		for i := range s.shards {
			sh := s.shards[i].Load()
			if sh == nil {
				continue // never used: no key, no state
			}
			sh.mu.Lock()
			counts[i] = sh.used
			sh.mu.Unlock()
			total += counts[i]
		}
		if total == 0 {
			return nil, false
		}
		r := rand.IntN(total)
		i := 0
		for r >= counts[i] {
			r -= counts[i]
			i++
		}
		if k, ok := s.shards[i].Load().randomKeyLocking(nowMs); ok { // counts[i] > 0: made
			return k, true
		}
		// Every key of that shard had expired (now deleted): count again.
	}
	return s.randomKeyWalk(nowMs)
}

// randomTries is how many random slots randomKeyLocking probes before it
// walks.
const randomTries = 32

// randomKeyLocking returns a copy of a random live key of sh (see
// RandomKey), deleting expired keys it meets; false when it holds none.
// Takes sh.mu.
func (sh *shard) randomKeyLocking(nowMs int64) ([]byte, bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	size := len(sh.slab)
	if sh.used == 0 || size == 0 {
		return nil, false
	}
	for t := 0; t < randomTries; t++ {
		slot := uint32(rand.IntN(size))
		if k, ok := sh.liveKeyLocked(slot, nowMs); ok {
			return k, true
		}
	}
	start := rand.IntN(size)
	for i := 0; i < size; i++ {
		if k, ok := sh.liveKeyLocked(uint32((start+i)%size), nowMs); ok {
			return k, true
		}
	}
	return nil, false
}

// liveKeyLocked returns a copy of slot's key when it holds a live one; an
// expired key there is deleted. Requires sh.mu.
func (sh *shard) liveKeyLocked(slot uint32, nowMs int64) ([]byte, bool) {
	e := &sh.slab[slot]
	if e.flags&flagUsed == 0 {
		return nil, false
	}
	if !e.alive(nowMs) {
		sh.expireSlotLocked(slot) // expire.go
		sh.expired++
		return nil, false
	}
	return append([]byte(nil), sh.keyOf(e)...), true
}

// randomKeyWalk is RandomKey's last resort, when keys keep expiring under
// it: the first live key from a random shard on.
func (s *Store) randomKeyWalk(nowMs int64) ([]byte, bool) {
	r := rand.Uint64()
	for n := 0; n < nShards; n++ {
		if sh := s.shards[(r+uint64(n))%nShards].Load(); sh == nil {
			continue
		} else if k, ok := sh.randomKeyLocking(nowMs); ok {
			return k, true
		}
	}
	return nil, false
}
