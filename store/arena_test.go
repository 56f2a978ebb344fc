package store

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
)

// arenaBytes is the total length of the shards' arenas and their garbage.
func arenaBytes(s *Store) (n, garbage int) {
	for i := range s.shards {
		sh := &s.shards[i]
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
		sh := &s.shards[i]
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

// TestIndexBackwardShift: deletions leave no tombstones, and after any mix
// of inserts and deletes every key is found, none deleted is, and every
// index word is reachable from its key's home (checked word by word), with
// small tables (so probe runs wrap around the end) and a model map.
func TestIndexBackwardShift(t *testing.T) {
	steps := 200_000
	if testing.Short() || raceEnabled {
		steps = 40_000
	}
	s := New(Options{})
	rng := rand.New(rand.NewPCG(3, 4))
	model := map[string]bool{}
	const space = 6000 // ~23 keys a shard: 32- and 64-word tables
	for i := range steps {
		k := fmt.Appendf(nil, "k%d", rng.IntN(space))
		if rng.IntN(2) == 0 {
			putValue(s, string(k), t0ms, Value{TAT: uint64(i)})
			model[string(k)] = true
		} else {
			if got := s.Delete(k, t0ms); got != model[string(k)] {
				t.Fatalf("step %d: Delete(%s) = %v, model %v", i, k, got, model[string(k)])
			}
			delete(model, string(k))
		}
		if i%10_000 == 0 || i == steps-1 {
			checkIndex(t, s)
		}
	}
	for i := range space {
		k := fmt.Appendf(nil, "k%d", i)
		if _, ok := s.Get(k, t0ms); ok != model[string(k)] {
			t.Fatalf("Get(%s) found %v, model %v", k, ok, model[string(k)])
		}
	}
	if s.Len() != len(model) {
		t.Fatalf("Len %d, model %d", s.Len(), len(model))
	}
}

// checkIndex verifies every shard's index: no tombstones, used matches the
// words, and each word is found by findLocked at its own position.
func checkIndex(t *testing.T, s *Store) {
	t.Helper()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		words := 0
		for pos, w := range sh.table {
			if w == tombWord {
				t.Fatalf("shard %d: tombstone at %d", i, pos)
			}
			if w == emptyWord {
				continue
			}
			words++
			key := sh.keyOf(&sh.slab[uint32(w)-1])
			slot, at, ok := sh.findLocked(key, s.hashKey(key))
			if !ok || at != pos || slot != uint32(w)-1 {
				t.Fatalf("shard %d: word %d (key %q) found %v at %d", i, pos, key, ok, at)
			}
		}
		if words != sh.used || sh.tombs != 0 {
			t.Fatalf("shard %d: %d words, used %d, tombs %d", i, words, sh.used, sh.tombs)
		}
		sh.mu.Unlock()
	}
}
