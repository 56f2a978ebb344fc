package store

// EachKey calls fn with every live key, shard by shard, until fn returns
// false. It is the building block of CLUSTER COUNTKEYSINSLOT and
// GETKEYSINSLOT, which filter the keys by hash slot: the store keeps no
// per-slot index, so a call costs O(keys held) — every slot of every shard's
// slab is visited (about 20 ns a key), holding one shard lock at a time, so
// other commands wait at most one shard's walk. fn receives the key string
// the store itself holds (immutable, so keeping it is safe) and runs under
// the shard lock, so it must not call back into the Store.
func (s *Store) EachKey(nowMs int64, fn func(key string) bool) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for j := range sh.slab {
			e := &sh.slab[j]
			if e.flags&flagUsed != 0 && e.alive(nowMs) && !fn(e.key) {
				sh.mu.Unlock()
				return
			}
		}
		sh.mu.Unlock()
	}
}
