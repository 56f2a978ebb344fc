package store

import (
	"hash/maphash"
	"sync/atomic"
)

// The per-shard index: open addressing with linear probing over a []uint64
// whose words are fingerprint<<32 | slot+1 (0 = empty, tomb = deleted), and
// an arena holding every key's bytes. Neither holds a Go pointer, so a
// million keys cost the garbage collector nothing to scan, and a key costs
// its bytes plus one 8-byte index word instead of a string header, a map
// slot and a separate allocation.

const (
	emptyWord = 0
	tombWord  = ^uint64(0)
	minTable  = 16
)

// hashKey is the one hash a key gets per operation: the top 8 bits pick the
// shard, bits 8.. the index position, the low 32 bits the fingerprint.
func (s *Store) hashKey(key []byte) uint64 { return maphash.Bytes(s.seed, key) }

func fingerprint(h uint64) uint64 { return uint64(uint32(h)) << 32 }

// keyOf returns the key bytes of entry e: inline in the entry for keys of
// up to inlineKey bytes (so the compare after an index hit reads the cache
// line that holds the TAT anyway), else in the arena. Valid until the slab
// or arena changes, i.e. while sh.mu is held.
func (sh *shard) keyOf(e *entry) []byte {
	if e.klen <= inlineKey {
		return e.inl[:e.klen:e.klen]
	}
	return sh.arena[e.off : e.off+e.klen : e.off+e.klen]
}

// findLocked looks key up. It returns the slot and the index position of the
// key when present; when absent, the position where it should be inserted
// (the first tombstone on its probe path, or the empty word ending it).
// Requires sh.mu. Does not allocate.
func (sh *shard) findLocked(key []byte, h uint64) (slot uint32, pos int, ok bool) {
	if len(sh.table) == 0 {
		return 0, -1, false
	}
	mask := len(sh.table) - 1
	fp := fingerprint(h)
	insert := -1
	for i := int(h>>8) & mask; ; i = (i + 1) & mask {
		w := sh.table[i]
		switch {
		case w == emptyWord:
			if insert < 0 {
				insert = i
			}
			return 0, insert, false
		case w == tombWord:
			if insert < 0 {
				insert = i
			}
		case w&^0xFFFFFFFF == fp:
			s := uint32(w) - 1
			if string(sh.keyOf(&sh.slab[s])) == string(key) {
				return s, i, true
			}
		}
	}
}

// indexAddLocked records slot for a key known to be absent, at pos from
// findLocked (or anywhere after a resize). Requires sh.mu.
func (sh *shard) indexAddLocked(h uint64, slot uint32, pos int) {
	if (sh.used+sh.tombs+1)*4 > len(sh.table)*3 {
		size := max(minTable, nextPow2((sh.used+1)*2))
		if (sh.used+1)*8 <= len(sh.table)*5 {
			// Mostly tombstones (deletions, evictions at a memory
			// bound): rebuilding at the same size clears them without
			// doubling a table that is not fuller than 5/8.
			size = len(sh.table)
		}
		sh.rehashLocked(size)
		pos = -1
	}
	if pos < 0 || sh.table[pos] != emptyWord && sh.table[pos] != tombWord {
		mask := len(sh.table) - 1
		pos = int(h>>8) & mask
		for sh.table[pos] != emptyWord && sh.table[pos] != tombWord {
			pos = (pos + 1) & mask
		}
	}
	if sh.table[pos] == tombWord {
		sh.tombs--
	}
	atomic.StoreUint64(&sh.table[pos], fingerprint(h)|uint64(slot+1)) // Prefetch reads it
	sh.used++
}

// indexRemoveLocked deletes the word at pos. Requires sh.mu.
func (sh *shard) indexRemoveLocked(pos int) {
	mask := len(sh.table) - 1
	if sh.table[(pos+1)&mask] == emptyWord {
		atomic.StoreUint64(&sh.table[pos], emptyWord) // end of a probe run: no tombstone needed
	} else {
		atomic.StoreUint64(&sh.table[pos], tombWord)
		sh.tombs++
	}
	sh.used--
}

// rehashLocked rebuilds the index with size words (a power of two), dropping
// tombstones. Requires sh.mu. O(keys).
func (sh *shard) rehashLocked(size int) {
	old := sh.table
	sh.table = make([]uint64, size)
	sh.tombs = 0
	mask := size - 1
	for _, w := range old {
		if w == emptyWord || w == tombWord {
			continue
		}
		e := &sh.slab[uint32(w)-1]
		pos := int(maphash.Bytes(sh.seed, sh.keyOf(e))>>8) & mask
		for sh.table[pos] != emptyWord {
			pos = (pos + 1) & mask
		}
		sh.table[pos] = w // not yet published: plain stores
	}
	sh.publishLocked()
}

func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// compactArenaLocked rewrites the arena with only live keys when more than
// half of it is garbage. Requires sh.mu. O(live key bytes).
func (sh *shard) compactArenaLocked() {
	if sh.garbage < 4096 || sh.garbage*2 < len(sh.arena) {
		return
	}
	sh.rewriteArenaLocked()
}
