package persist

import (
	"encoding/binary"
	"fmt"
)

// Object entries: the state of a key of a richer kind (hash, list, sorted
// set), written by the drain and the base rewrite beside the string and
// TAT entries of format.go:
//
//	object: 'o' uvarint(len(key)) key varint(ExpireAtMs) kind uvarint(len(image)) image
//
// kind is the store's kind number (never 0, which is a string) and image
// the value's whole content in the kinds package's encoding; persist does
// not look inside it. An object entry replaces whatever the key held, like
// a set entry; a delete entry removes it. Directories without object
// entries decode exactly as before.
const entryObject = 'o'

// ObjectFunc receives an object entry during Replay: the key, its kind
// number, its image and its expiry. key and image are only valid during
// the call.
type ObjectFunc func(dbid uint32, key []byte, kind byte, image []byte, expireAtMs int64) error

// appendObject appends an object entry to b.
func appendObject(b, key []byte, kind byte, image []byte, exp int64) []byte {
	b = append(b, entryObject)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendVarint(b, exp)
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(len(image)))
	return append(b, image...)
}

// decodeObject decodes the rest of an object entry for key from
// chunk[off:] and returns the offset after it.
// tag is the entry's: for 'g' and 'e' (delta.go) fn gets the kind with
// ObjectGen or ObjectDelta set.
func decodeObject(chunk []byte, off int, dbid uint32, key []byte, tag byte, fn ObjectFunc) (next int, fnErr, formatErr error) {
	exp, n := binary.Varint(chunk[off:])
	if n <= 0 || off+n >= len(chunk) {
		return 0, nil, fmt.Errorf("bad expiry of object %q", key)
	}
	off += n
	kind := chunk[off]
	off++
	ilen, n := binary.Uvarint(chunk[off:])
	if n <= 0 || ilen > uint64(len(chunk)-off-n) || kind == 0 || kind&^ObjectKindMask != 0 {
		return 0, nil, fmt.Errorf("bad image of object %q", key)
	}
	switch tag {
	case entryObjectGen:
		kind |= ObjectGen
	case entryDelta:
		kind |= ObjectDelta
	}
	off += n
	image := chunk[off : off+int(ilen) : off+int(ilen)]
	off += int(ilen)
	if fn == nil {
		return 0, nil, fmt.Errorf("object entry for %q where none is expected", key)
	}
	return off, fn(dbid, key, kind, image, exp), nil
}

// AddObject appends one live key of a richer kind to the base being
// written (as Add). key and image are copied.
func (w *BaseWriter) AddObject(key []byte, kind byte, image []byte, expireAtMs int64) {
	w.buf = appendDBPrefix(w.buf, w.dbid)
	w.buf = appendObject(w.buf, key, kind, image, expireAtMs)
	w.added()
}
