package store

// The key arena's reuse of freed space.
//
// A key longer than inlineKey keeps its bytes in its shard's arena. Before,
// a deleted key's bytes were garbage until the arena was rewritten, and
// every new key was appended; at a memory bound, where every new key
// follows an eviction, the arena then grew by append (a reallocation and a
// copy every quarter) and was rewritten every time a quarter of it was
// garbage: measured under a spray of unique 15-20 byte keys at 64 MB,
// about 28 MB a second of allocation (88% of all celld allocated), so the
// collector ran five times a second and the heap held a collection's worth
// of garbage on top of the keys.
//
// Now a key of up to arenaReuseMax bytes takes a chunk of its length
// rounded up to 8 bytes (its class), and a deleted key's chunk goes on its
// class's free stack, from which the next key of that class takes it
// before the arena is appended to. Under a spray the lengths of new keys
// are those of the evicted ones, so the arena stops growing and its
// rewrites stop. The rounding costs 3.5 bytes per long key on average.
// Longer keys are stored exactly and become garbage as before.

const (
	// arenaReuseMax is the longest key whose chunk is reused.
	arenaReuseMax = 256
	// arenaClasses is the number of chunk sizes: 24, 32, ..., 256.
	arenaClasses = (arenaReuseMax-inlineKey-1)/8 + 1
)

// arenaFree holds, per chunk class, the offsets of free chunks.
type arenaFree [arenaClasses][]uint32

// arenaChunk is the arena bytes a key of klen (> inlineKey) bytes takes,
// and its class (-1: not reused, the exact length).
func arenaChunk(klen int) (size, class int) {
	if klen > arenaReuseMax {
		return klen, -1
	}
	size = (klen + 7) &^ 7
	return size, (size - (inlineKey + 8)) / 8
}

// arenaPutLocked stores key (longer than inlineKey) in the arena and
// returns its offset: in a free chunk of its class when there is one,
// else appended. Requires sh.mu.
func (sh *shard) arenaPutLocked(key []byte) uint32 {
	size, class := arenaChunk(len(key))
	if class >= 0 && sh.afree != nil {
		for c := class; c < arenaClasses; c++ {
			st := sh.afree[c]
			if len(st) == 0 {
				continue
			}
			off := st[len(st)-1]
			sh.afree[c] = st[:len(st)-1]
			sh.garbage -= size
			copy(sh.arena[off:], key)
			// A larger chunk is split: its tail is a free chunk of
			// its own when it can hold a key (24 bytes), else
			// garbage until the arena is rewritten.
			if rest := (c - class) * 8; rest >= inlineKey+8 {
				sh.afree[(rest-(inlineKey+8))/8] = append(sh.afree[(rest-(inlineKey+8))/8], off+uint32(size))
			}
			return off
		}
	}
	off := uint32(len(sh.arena))
	sh.arena = append(sh.arena, key...)
	if pad := size - len(key); pad > 0 {
		sh.arena = append(sh.arena, make([]byte, pad)...)
	}
	return off
}

// arenaFreeLocked releases the chunk of a deleted key of klen (>
// inlineKey) bytes at off: onto its class's free stack, or to garbage
// alone when it is not reused. Either way its bytes count as garbage until
// reused (compactArenaLocked's trigger). Requires sh.mu.
func (sh *shard) arenaFreeLocked(off, klen uint32) {
	size, class := arenaChunk(int(klen))
	sh.garbage += size
	if class < 0 {
		return
	}
	if sh.afree == nil {
		sh.afree = new(arenaFree)
	}
	sh.afree[class] = append(sh.afree[class], off)
}

// rewriteArenaLocked rewrites the arena with only live keys (and an eighth
// of slack), which empties the free stacks. Requires sh.mu. O(live key
// bytes).
func (sh *shard) rewriteArenaLocked() {
	arena := make([]byte, 0, len(sh.arena)-sh.garbage+len(sh.arena)/8)
	for i := range sh.slab {
		e := &sh.slab[i]
		if e.flags&flagUsed == 0 || e.klen <= inlineKey {
			continue
		}
		off := uint32(len(arena))
		arena = append(arena, sh.keyOf(e)...)
		if size, _ := arenaChunk(int(e.klen)); size > int(e.klen) {
			arena = append(arena, make([]byte, size-int(e.klen))...)
		}
		e.off = off
	}
	sh.arena = arena
	sh.garbage = 0
	if sh.afree != nil {
		for c := range sh.afree {
			sh.afree[c] = sh.afree[c][:0]
		}
	}
}
