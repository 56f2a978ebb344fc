package store

import (
	"encoding/binary"
	"errors"
)

// Per-element persistence of objects (hashes, lists, sorted sets): once a
// key's image has been handed to persistence, the drain hands over only
// what each window changed, the object's journal records (Journaled), as
// a delta; the base rewrite still writes whole images. See
// persist/delta.go for the entries on disk.
//
// Generations. The key's tat (tatGen) counts the images and deltas handed
// out for the key, modulo 2^28: replay compares them as serial numbers
// (genAfter). A drain's image is a new generation and restarts the journal; a
// drain's delta is one segment per generation it closes. The base
// rewrite's snapshot (DumpShard) closes the open generation first
// ("seals" the journal: its records wait in shard.sealed for the next
// drain, which hands them out under their generation), so the snapshot's
// image is exactly the state of its generation. On replay a segment
// applies only to an image of an older generation: records that a
// snapshot already contains, but that reach the log after the rewrite's
// cut, are not applied twice.
//
// Cost: nothing for a key whose journal was never started (persistence
// off, or an object created since the last drain); an append per element
// written otherwise (kinds' journal); a drain copies the records, never
// the object, unless the journal outgrew its bound (then the image).
//
// Small objects. An object whose Size is at most smallImage (a compact
// hash, list or sorted set of some tens of bytes: the funnel's two-field
// hash, a sliding log's few members) is handed out as an image at every
// drain and its journal is stopped, not started: its image is about as
// long as a window's records, and its writes then record nothing (no
// per-write append, no 64-byte record buffer kept per key). It journals
// again from the first drain that finds it larger. To replay this is the
// path of an abandoned journal: each image is a generation of its own.

// smallImage is the largest Size of an object handed out as an image at
// every drain rather than journaled (see above): a compact struct of 48
// bytes plus up to 112 bytes of elements.
const smallImage = 160

// Journaled is an Object that can record its writes element by element
// (kinds.Hash, kinds.List, kinds.ZSet; their StartJournal/TakeJournal
// document the contract). Called under the key's shard lock.
type Journaled interface {
	Object
	// StartJournal drops anything recorded and records every later write.
	StartJournal()
	// StopJournal drops anything recorded and records nothing more.
	StopJournal()
	// TakeJournal appends what was recorded since the last start or take
	// to b; ok is false (b unchanged, recording stopped) when the journal
	// was never started or was abandoned.
	TakeJournal(b []byte) ([]byte, bool)
}

// Segments: a delta's payload (Change.Image when Change.Delta) is one or
// more segments, each uvarint(gen) uint32-LE(len(recs)) recs, in order.

// appendSegmentHead appends the header of a segment of generation gen,
// its length left 0 for endSegment.
func appendSegmentHead(b []byte, gen uint64) []byte {
	return append(binary.AppendUvarint(b, gen), 0, 0, 0, 0)
}

// endSegment fills in the length of the segment whose records start at
// b[recs:].
func endSegment(b []byte, recs int) {
	binary.LittleEndian.PutUint32(b[recs-4:], uint32(len(b)-recs))
}

// errBadSegments: a delta payload that does not split into segments.
var errBadSegments = errors.New("store: malformed delta segments")

// eachSegment calls fn for every segment of a delta payload, in order.
func eachSegment(p []byte, fn func(gen uint64, recs []byte)) error {
	for len(p) > 0 {
		gen, n := binary.Uvarint(p)
		if n <= 0 || len(p)-n < 4 {
			return errBadSegments
		}
		p = p[n:]
		l := binary.LittleEndian.Uint32(p)
		p = p[4:]
		if uint64(l) > uint64(len(p)) {
			return errBadSegments
		}
		fn(gen, p[:l:l])
		p = p[l:]
	}
	return nil
}

// takeSegmentLocked closes the open generation of slot's object j: the
// journal's records since the last take become a segment of the next
// generation appended to b (nothing when there are none). ok is false
// when the journal holds no complete record (never started, or
// abandoned): the caller must hand out the image instead. Requires sh.mu.
func (sh *shard) takeSegmentLocked(slot uint32, j Journaled, b []byte) (_ []byte, ok bool) {
	n := len(b)
	gen := sh.genLocked(slot)
	b = appendSegmentHead(b, nextGen(gen))
	recs := len(b)
	b, ok = j.TakeJournal(b)
	switch {
	case !ok:
		return b[:n], false
	case len(b) == recs:
		return b[:n], true // nothing changed element-wise (an EXPIRE)
	}
	endSegment(b, recs)
	sh.setGenLocked(slot, gen&genImaged|nextGen(gen))
	return b, true
}

// drainObjectLocked describes slot's object for the drain: a delta (the
// sealed segments and the open generation's records) when its image was
// handed out before and its journal is whole, else its image as a new
// generation, restarting the journal. Requires sh.mu.
func (sh *shard) drainObjectLocked(slot uint32, key, buf []byte) (Change, []byte) {
	e := &sh.slab[slot]
	c := Change{Key: key, Kind: e.kind(), ExpireAtMs: e.exp}
	obj := sh.objectLocked(slot)
	if obj == nil {
		return sh.objectChangeLocked(slot, key, buf)
	}
	j, journaled := obj.(Journaled)
	if !journaled {
		return sh.objectChangeLocked(slot, key, buf)
	}
	start := len(buf)
	var sealed []byte
	if len(sh.sealed) > 0 {
		sealed = sh.sealed[slot]
		delete(sh.sealed, slot) // sealed only by a base snapshot: not worth keeping
	}
	if sh.genLocked(slot)&genImaged != 0 {
		buf = append(buf, sealed...)
		var whole bool
		if buf, whole = sh.takeSegmentLocked(slot, j, buf); whole {
			c.Delta, c.Gen = true, sh.genLocked(slot)&^genImaged
			c.Image = buf[start:len(buf):len(buf)]
			return c, buf
		}
		buf = buf[:start]
	}
	gen := nextGen(sh.genLocked(slot))
	sh.setGenLocked(slot, gen|genImaged)
	if obj.Size() <= smallImage {
		j.StopJournal()
	} else {
		j.StartJournal()
	}
	buf = obj.AppendImage(buf)
	c.Gen = gen
	c.Image = buf[start:len(buf):len(buf)]
	return c, buf
}

// snapshotObjectLocked describes slot's object for a base rewrite: its
// image, as the generation it now completes (the open generation's
// records are sealed for the next drain first). Requires sh.mu.
func (sh *shard) snapshotObjectLocked(slot uint32, key, buf []byte) (Change, []byte) {
	obj := sh.objectLocked(slot)
	if obj == nil {
		return sh.objectChangeLocked(slot, key, buf)
	}
	if j, journaled := obj.(Journaled); journaled && sh.genLocked(slot)&genImaged != 0 {
		// Abandoned (not whole): the next drain hands out an image of a
		// later generation than this one's, which supersedes it.
		if sealed, _ := sh.takeSegmentLocked(slot, j, sh.sealed[slot]); len(sealed) > 0 {
			if sh.sealed == nil {
				sh.sealed = make(map[uint32][]byte)
			}
			sh.sealed[slot] = sealed
		}
	}
	c, buf := sh.objectChangeLocked(slot, key, buf)
	c.Gen = sh.genLocked(slot) &^ genImaged
	return c, buf
}

// LoadObjectGen is LoadObject for an image of generation gen (a restored
// 'g' entry): later deltas of the key apply to it (LoadDelta), and its
// journal starts, so the next change is persisted as a delta.
func (s *Store) LoadObjectGen(key []byte, kind Kind, obj Object, gen uint64, expireAtMs int64) {
	s.LoadObject(key, kind, obj, expireAtMs)
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if slot, _, ok := sh.findLocked(key, h); ok {
		if sh.objLocked(slot) != nil {
			sh.setGenLocked(slot, gen&genMask|genImaged)
		}
	}
}

// LoadDelta applies a restored delta to key's object: each segment of a
// generation after the object's, in order, through apply (the kinds
// package's ApplyJournal), and then the delta's expiry; nothing is marked
// dirty. A key that is absent or of another kind is left alone, and so are
// records apply refuses (it returns an error): a delta is followed on disk
// by the entries of whatever replaced the key since, so such a delta
// belongs to a value the log goes on to replace. mismatched counts them.
//
// Generations follow each other one by one (takeSegmentLocked, every
// image a new one), so a segment more than one generation after the
// object's means one in between is missing: a damaged change-log record
// that persist skipped. Its records and every later segment of the key are
// not applied (gaps counts them): list records are positional (LSET 1,
// LPOP), and replayed past a lost LPUSH they would change the wrong items,
// leaving a value the key never held. The key keeps the last state it
// really had before the damage, until a later image of it replaces it;
// the caller reports it. Segments written after this restore start again
// from the object's generation, so they apply at the next restore.
//
// Only a payload that does not split into segments is an error. Only for
// restoring.
func (s *Store) LoadDelta(key []byte, kind Kind, payload []byte, expireAtMs int64, apply func(obj Object, recs []byte) error) (mismatched, gaps int, err error) {
	h := s.hashKey(key)
	sh := s.shardFor(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, _, ok := sh.findLocked(key, h)
	if !ok || sh.slab[slot].kind() != kind {
		return 0, 0, eachSegment(payload, func(uint64, []byte) { mismatched = 1 })
	}
	obj := sh.objectLocked(slot)
	if obj == nil {
		return 0, 0, nil
	}
	before := obj.Size()
	err = eachSegment(payload, func(gen uint64, recs []byte) {
		cur := sh.genLocked(slot)
		if !genAfter(gen&genMask, cur) {
			return // the image holds it already
		}
		if gen&genMask != (cur&genMask+1)&genMask {
			gaps++ // a generation in between is missing (see above)
			return
		}
		if apply(obj, recs) != nil {
			mismatched++
		}
		sh.setGenLocked(slot, gen&genMask|cur&genImaged)
	})
	sh.rechargeLocked(obj, before) // before a removal credits the new Size
	sh.slab[slot].exp = expireAtMs
	if j, ok := obj.(Journaled); ok {
		j.StartJournal() // apply did not record, but start clean
	}
	if obj.Len() == 0 {
		sh.removeLocked(slot, sh.posOfLocked(key, h))
		if sh.track {
			sh.deleted = sh.deleted[:len(sh.deleted)-1] // as Unload: the disk says so
		}
		return mismatched, gaps, err
	}
	return mismatched, gaps, err
}

// posOfLocked is the index position of key, which must be present.
func (sh *shard) posOfLocked(key []byte, h uint64) int {
	_, pos, _ := sh.findLocked(key, h)
	return pos
}

// snapshotChangeLocked is changeLocked for DumpShard: objects are
// described by snapshotObjectLocked. Requires sh.mu.
func (sh *shard) snapshotChangeLocked(slot uint32, key, buf []byte) (Change, []byte) {
	if e := &sh.slab[slot]; e.flags&kindMask != 0 && e.kind() != KindWindow {
		return sh.snapshotObjectLocked(slot, key, buf)
	}
	return sh.changeLocked(slot, key, buf)
}
