package store

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
)

// arenaBytes is the total length of the shards' arenas and their garbage.
func arenaBytes(s *Store) (n, garbage int) {
	for i := range s.shards {
		sh := s.shardAt(i)
		sh.mu.Lock()
		n += len(sh.arena)
		garbage += sh.garbage
		sh.mu.Unlock()
	}
	return n, garbage
}

func TestArenaChunk(t *testing.T) {
	for _, c := range []struct{ klen, size, class int }{
		{17, 24, 0}, {24, 24, 0}, {25, 32, 1}, {42, 48, 3}, {255, 256, arenaClasses - 1},
		{256, 256, arenaClasses - 1}, {257, 257, -1}, {1000, 1000, -1},
	} {
		if size, class := arenaChunk(c.klen); size != c.size || class != c.class {
			t.Errorf("arenaChunk(%d) = %d, %d; want %d, %d", c.klen, size, class, c.size, c.class)
		}
	}
}

// TestArenaReusesFreedChunks: at a memory bound every new key follows an
// eviction; the new keys (of the evicted keys' lengths, as under a spray)
// must take the evicted keys' chunks instead of growing the arena, every
// live key must keep its own bytes, and keys over arenaReuseMax (stored
// exactly, not reused) must come through too.
func TestArenaReusesFreedChunks(t *testing.T) {
	n := 60_000
	if testing.Short() || raceEnabled {
		n = 15_000
	}
	lim := mustLimit(t, 15, 30, 3600)
	s := New(Options{})
	keyOf := func(i int) []byte {
		// 17 to 60 bytes, and one in 500 of 300 bytes.
		l := 17 + int(uint64(i)*2654435761%44)
		if i%500 == 0 {
			l = 300
		}
		return fmt.Appendf(nil, "%0*d", l, i)
	}
	for i := range n {
		if _, err := s.Throttle(keyOf(i), lim, 1, t0); err != nil {
			t.Fatal(err)
		}
	}
	s.SetPolicy(AllKeysRandom)
	s.SetMaxMemory(s.UsedMemory())
	filled, _ := arenaBytes(s)
	keys := make([][]byte, 0, 3*n)
	for i := n; i < 4*n; i++ {
		keys = append(keys, keyOf(i))
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for _, k := range keys {
		if _, err := s.Throttle(k, lim, 1, t0); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&m1)
	arena, garbage := arenaBytes(s)
	perEviction := float64(m1.TotalAlloc-m0.TotalAlloc) / float64(s.EvictedKeys())
	t.Logf("arena %d bytes filled, %d after %d evictions (%d garbage), %d keys live; %.1f bytes allocated per eviction",
		filled, arena, s.EvictedKeys(), garbage, s.Len(), perEviction)
	if s.EvictedKeys() < int64(2*n) {
		t.Fatalf("evicted %d, want >= %d", s.EvictedKeys(), 2*n)
	}
	// Without reuse, every new key was appended and the arena rewritten
	// whenever a quarter of it was garbage: 288 bytes allocated per
	// eviction here. With reuse what is left is the drift of the shards'
	// populations (an eviction frees room in a random shard, the new key
	// needs it in its own), which grows slabs, arenas and indexes now and
	// then: ~50 bytes.
	if perEviction > 120 {
		t.Errorf("%.1f bytes allocated per eviction at the bound, want <= 120", perEviction)
	}
	// Every live key holds its own bytes (the digits of its number, at
	// the length keyOf gives it: a chunk handed to two keys would break
	// one of them) and is found by its name.
	live := 0
	for i := range s.shards {
		sh := s.shardAt(i)
		sh.mu.Lock()
		var keys [][]byte
		for j := range sh.slab {
			if e := &sh.slab[j]; e.flags&flagUsed != 0 {
				keys = append(keys, append([]byte(nil), sh.keyOf(e)...))
			}
		}
		sh.mu.Unlock()
		for _, k := range keys {
			num, err := strconv.Atoi(string(k))
			if err != nil || string(keyOf(num)) != string(k) {
				t.Fatalf("shard %d holds key %q, not one of the keys written", i, k)
			}
			if _, ok := s.Get(k, t0ms); !ok {
				t.Fatalf("key %q is in the slab but not found", k)
			}
			live++
		}
	}
	if live != s.Len() {
		t.Fatalf("%d keys in the slabs, Len %d", live, s.Len())
	}
	checkMem(t, s)
}
