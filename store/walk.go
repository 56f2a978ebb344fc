package store

import "time"

// Scan is one step of a SCAN iteration. cursor 0 starts; the returned cursor
// is 0 when the iteration is complete. The cursor is shard<<32 | slot: keys
// never move between slots while they live, so a full iteration returns every
// key that was live from its start to its end (and possibly others). count is
// the number of slots to visit, Redis's COUNT hint; fn receives each live key
// (the string is the store's own and must not be modified) and runs under a
// shard lock, so it must not call back into the Store.
func (s *Store) Scan(cursor uint64, count int, nowMs int64, fn func(key string)) uint64 {
	if count < 1 {
		count = 1
	}
	si, slot := cursor>>32, uint32(cursor)
	visited := 0
	for si < nShards {
		sh := &s.shards[si]
		sh.mu.Lock()
		for int(slot) < len(sh.slab) && visited < count {
			e := &sh.slab[slot]
			if e.flags&flagUsed != 0 && e.alive(nowMs) {
				fn(e.key)
			}
			slot++
			visited++
		}
		done := int(slot) >= len(sh.slab)
		sh.mu.Unlock()
		if !done {
			return si<<32 | uint64(slot)
		}
		si, slot = si+1, 0
		if visited >= count {
			break
		}
	}
	if si >= nShards {
		return 0
	}
	return si << 32
}

// Keys calls fn for every live key matching the glob pattern (KEYS). fn runs
// under a shard lock and must not call back into the Store. O(keys).
func (s *Store) Keys(pattern string, nowMs int64, fn func(key string)) {
	all := pattern == "*"
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for j := range sh.slab {
			e := &sh.slab[j]
			if e.flags&flagUsed != 0 && e.alive(nowMs) && (all || Match(pattern, e.key)) {
				fn(e.key)
			}
		}
		sh.mu.Unlock()
	}
}

// SweepStep is one pass of the active expiry cycle, modelled on Redis's: in
// each shard, starting where the previous pass stopped, it looks at the next
// 64 slots and deletes the expired ones, repeating in that shard while more
// than a quarter of what it saw had expired and the time budget lasts. It
// returns the number of keys deleted. Each lock hold is one batch of 64
// slots, so the server never pauses for a sweep. Safe to call concurrently,
// though one sweeper is the intended use.
func (s *Store) SweepStep(nowMs int64, budget time.Duration) int {
	const batch = 64
	deadline := time.Now().Add(budget)
	deleted := 0
	start := int(s.sweepShard.Load())
	for n := 0; n < nShards; n++ {
		i := (start + n) % nShards
		sh := &s.shards[i]
		for {
			sh.mu.Lock()
			size := len(sh.slab)
			seen, expired := 0, 0
			for seen < batch && seen < size {
				if int(sh.sweep) >= size {
					sh.sweep = 0
				}
				slot := sh.sweep
				sh.sweep++
				seen++
				if e := &sh.slab[slot]; e.flags&flagUsed != 0 && !e.alive(nowMs) {
					sh.deleteLocked(slot)
					expired++
				}
			}
			if expired > 0 {
				sh.shrinkLocked()
			}
			sh.mu.Unlock()
			deleted += expired
			if expired*4 <= seen || time.Now().After(deadline) {
				break
			}
		}
		if time.Now().After(deadline) {
			s.sweepShard.Store(uint32((i + 1) % nShards))
			return deleted
		}
	}
	return deleted
}

// shrinkMin is the shard size below which memory is not handed back: a
// rebuild is cheap, but below this it saves too little to matter.
const shrinkMin = 256

// shrinkLocked gives memory back after mass expiry. Go maps never shrink, so
// when the live keys fall below a quarter of the map's peak it rebuilds the
// map; and when the slab's free tail is more than half its capacity it trims
// it (live keys never move, so SCAN cursors stay valid). Each rebuild resets
// its trigger, so an idle shard is not rebuilt again. Requires sh.mu.
func (sh *shard) shrinkLocked() {
	live := len(sh.idx)
	if sh.peak >= shrinkMin && live*4 < sh.peak {
		idx := make(map[string]uint32, live)
		for k, v := range sh.idx {
			idx[k] = v
		}
		sh.idx = idx
		sh.peak = live
	}
	end := len(sh.slab)
	for end > 0 && sh.slab[end-1].flags&flagUsed == 0 {
		end--
	}
	if cap(sh.slab) < shrinkMin || end*2 >= cap(sh.slab) {
		return
	}
	slab := make([]entry, end, end+end/4)
	copy(slab, sh.slab[:end])
	sh.slab = slab
	free := make([]uint32, 0, len(sh.free))
	for _, f := range sh.free {
		if int(f) < end {
			free = append(free, f)
		}
	}
	sh.free = free
	// Dirty slots past the end were freed, so their keys are on the
	// deleted list already.
	dirty := sh.dirty[:0]
	for _, d := range sh.dirty {
		if int(d) < end {
			dirty = append(dirty, d)
		}
	}
	sh.dirty = dirty
	if int(sh.sweep) > end {
		sh.sweep = 0
	}
}

// Change is one key's state for persistence: Deleted, or the value's text
// and expiry. Key and Text are freshly allocated and owned by the receiver.
type Change struct {
	Key        []byte
	Text       []byte
	ExpireAtMs int64
	Deleted    bool
}

// Drain returns every change since the previous Drain, deletions first, then
// the current state of each written key, appended to buf. It takes each shard
// lock twice, briefly. Only meaningful with Options.TrackDirty.
func (s *Store) Drain(nowMs int64, buf []Change) []Change {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		deleted, dirty := sh.deleted, sh.dirty
		sh.deleted, sh.dirty = nil, sh.spare[:0]
		for _, k := range deleted {
			buf = append(buf, Change{Key: []byte(k), Deleted: true})
		}
		for _, slot := range dirty {
			e := &sh.slab[slot]
			if e.flags&flagDirty == 0 {
				continue // freed (its deletion is listed) or listed twice
			}
			e.flags &^= flagDirty
			if !e.alive(nowMs) {
				k := e.key
				sh.deleteLocked(slot)
				sh.deleted = sh.deleted[:len(sh.deleted)-1] // listed here instead
				buf = append(buf, Change{Key: []byte(k), Deleted: true})
				continue
			}
			v := sh.valueLocked(e)
			buf = append(buf, Change{Key: []byte(e.key), Text: v.AppendText(nil), ExpireAtMs: e.exp})
		}
		sh.spare = dirty // reused by the next Drain: no regrowth per window
		sh.mu.Unlock()
	}
	return buf
}

// DirtyKeys returns how many changes are waiting for the next Drain.
func (s *Store) DirtyKeys() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.dirty) + len(sh.deleted)
		sh.mu.Unlock()
	}
	return n
}
