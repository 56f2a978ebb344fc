package main

import (
	"fmt"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/store"
)

// loadObject restores one persisted hash, list or sorted set (an object
// entry: its kind and image) into st. An image that does not decode, or an
// unknown kind, fails the restore, as any corrupt record does.
func loadObject(st *store.Store, key []byte, kind byte, image []byte, exp int64) error {
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
	st.LoadObject(key, store.Kind(kind), obj, exp)
	return nil
}
