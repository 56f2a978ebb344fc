package main

import (
	"fmt"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/persist"
	"github.com/celld/celld/store"
)

// loadObject restores one persisted hash, list or sorted set (an object
// entry: its kind and image) into st. An image that does not decode, or an
// unknown kind, fails the restore, as any corrupt record does.
//
// An image of a generation (persist.ObjectGen) is loaded with it, and a
// delta (persist.ObjectDelta) is applied to the object loaded before it
// (store.LoadDelta: only its segments of later generations). gaps counts
// the delta's segments left out because an earlier one of the key is
// missing (a damaged record skipped): the caller reports the key.
func loadObject(st *store.Store, key []byte, kind byte, image []byte, exp int64) (gaps int, err error) {
	if kind&persist.ObjectDelta != 0 {
		k := store.Kind(kind & persist.ObjectKindMask)
		_, gaps, err := st.LoadDelta(key, k, image, exp, applyJournal)
		if err != nil {
			return 0, fmt.Errorf("restoring %q (%s): %w: %v", key, k, persist.ErrCorrupt, err)
		}
		return gaps, nil
	}
	return 0, loadImage(st, key, kind, image, exp)
}

// loadImage is loadObject for an image entry.
func loadImage(st *store.Store, key []byte, kind byte, image []byte, exp int64) error {
	var gen uint64
	if kind&persist.ObjectGen != 0 {
		var err error
		if gen, image, err = persist.SplitGen(image); err != nil {
			return fmt.Errorf("restoring %q: %w", key, err)
		}
		kind &= persist.ObjectKindMask
	}
	var obj store.Object
	var err error
	switch store.Kind(kind) {
	case store.KindHash:
		obj, err = kinds.DecodeHash(image)
	case store.KindList:
		obj, err = kinds.DecodeList(image)
	case store.KindZSet:
		obj, err = kinds.DecodeZSet(image)
	default:
		return fmt.Errorf("restoring %q: unknown kind %d", key, kind)
	}
	if err != nil {
		return fmt.Errorf("restoring %q (%s): %w", key, store.Kind(kind), err)
	}
	if obj.Len() == 0 {
		st.Unload(key) // never written so (an emptied value is deleted)
		return nil
	}
	st.LoadObjectGen(key, store.Kind(kind), obj, gen, exp)
	return nil
}

// applyJournal replays a delta segment's records on a restored object.
func applyJournal(obj store.Object, recs []byte) error { return kinds.ApplyJournal(obj, recs) }

// deltaBytes is a delta's payload as an op carries it: never nil (an
// empty delta, an expiry change, is still written).
func deltaBytes(p []byte) []byte {
	if p == nil {
		return []byte{}
	}
	return p
}
