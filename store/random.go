package store

import "math/rand/v2"

// RandomKey returns a copy of a random live key (RANDOMKEY), or false when
// the store has none. It starts at a random shard and slot and returns the
// first live key it meets from there; expired keys met on the way are
// deleted (as Redis's dbRandomKey does). So a key is not chosen with
// exactly equal chance (one after a run of free slots is likelier), which
// RANDOMKEY does not promise either. Cost: one shard lock at a time,
// O(slots walked).
func (s *Store) RandomKey(nowMs int64) ([]byte, bool) {
	r := rand.Uint64()
	for n := 0; n < nShards; n++ {
		sh := &s.shards[(r+uint64(n))%nShards]
		sh.mu.Lock()
		if sh.used == 0 || len(sh.slab) == 0 {
			sh.mu.Unlock()
			continue
		}
		size := len(sh.slab)
		start := int((r >> 8) % uint64(size))
		for i := 0; i < size; i++ {
			slot := uint32((start + i) % size)
			e := &sh.slab[slot]
			if e.flags&flagUsed == 0 {
				continue
			}
			if !e.alive(nowMs) {
				sh.deleteSlotLocked(slot)
				sh.expired++
				continue
			}
			k := append([]byte(nil), sh.keyOf(e)...)
			sh.mu.Unlock()
			return k, true
		}
		sh.mu.Unlock()
	}
	return nil, false
}
