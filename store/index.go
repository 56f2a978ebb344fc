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

// indexAddLocked records slot for a key known to be absent, in the first
// free word of its probe path. pos (from findLocked) is not trusted: a
// deletion since the lookup (an eviction or an expired key met on the way)
// may have shifted words back (indexRemoveLocked), so the path is probed
// again from the key's home; its words are the ones findLocked just read.
// Requires sh.mu.
func (sh *shard) indexAddLocked(h uint64, slot uint32, pos int) {
	_ = pos
	if (sh.used+sh.tombs+1)*4 > len(sh.table)*3 {
		size := max(minTable, nextPow2((sh.used+1)*2))
		if (sh.used+1)*8 <= len(sh.table)*5 {
			// Mostly tombstones (only tables too large for
			// backward-shift deletion have them): rebuilding at the
			// same size clears them without doubling a table that
			// is not fuller than 5/8.
			size = len(sh.table)
		}
		sh.rehashLocked(size)
	}
	mask := len(sh.table) - 1
	pos = int(h>>8) & mask
	for sh.table[pos] != emptyWord && sh.table[pos] != tombWord {
		pos = (pos + 1) & mask
	}
	if sh.table[pos] == tombWord {
		sh.tombs--
	}
	atomic.StoreUint64(&sh.table[pos], fingerprint(h)|uint64(slot+1)) // Prefetch reads it
	sh.used++
}

// shiftMaxTable is the largest index for which a word's home position can
// be recovered from its fingerprint (the hash's bits 8-31), which
// backward-shift deletion needs: 16M words, far beyond a shard's size in
// practice (2^23 keys).
const shiftMaxTable = 1 << 24

// indexRemoveLocked deletes the word at pos. Requires sh.mu.
//
// By backward-shift deletion: the words after pos in its probe run that
// may move back (their home is not between the hole and themselves) fill
// the hole in turn, and the run's last hole becomes empty, so no
// tombstone is left. Tombstones made every removal permanent until the
// table was rebuilt: at a memory bound, where every insert follows an
// eviction, each shard rebuilt its index (a new table, the old one
// garbage) every few thousand evictions, 10-15% of celld's allocation
// under a key spray. Costs the rest of the probe run (usually one or two
// words in the same cache line). Prefetch may meet a word twice or miss
// it while it moves; it only hints.
func (sh *shard) indexRemoveLocked(pos int) {
	mask := len(sh.table) - 1
	if len(sh.table) > shiftMaxTable {
		if sh.table[(pos+1)&mask] == emptyWord {
			atomic.StoreUint64(&sh.table[pos], emptyWord) // end of a probe run: no tombstone needed
		} else {
			atomic.StoreUint64(&sh.table[pos], tombWord)
			sh.tombs++
		}
		sh.used--
		return
	}
	hole := pos
	for j := (pos + 1) & mask; ; j = (j + 1) & mask {
		w := sh.table[j]
		if w == emptyWord {
			break
		}
		home := int(w>>40) & mask // (h>>8)&mask; w>>32 is h's low 32 bits
		// w stays when its home lies cyclically in (hole, j]: moving it
		// before its home would hide it.
		var stays bool
		if hole < j {
			stays = hole < home && home <= j
		} else {
			stays = hole < home || home <= j
		}
		if !stays {
			atomic.StoreUint64(&sh.table[hole], w)
			hole = j
		}
	}
	atomic.StoreUint64(&sh.table[hole], emptyWord)
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
