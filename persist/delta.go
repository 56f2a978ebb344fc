package persist

import (
	"encoding/binary"
	"fmt"
)

// Element deltas: a hash, list or sorted set is written whole (an object
// entry, object.go) when it is created and when a flush window changed
// too much of it, and otherwise as what the window changed: a delta entry
// holding its journal records (the kinds package's format). A delta
// applies on top of the key's latest image and the deltas after it, so
// persisting a change costs the change, not the value. The next base
// rewrite writes the whole value again, as every other key.
//
//	image with a generation: 'g' uvarint(len(key)) key varint(ExpireAtMs) kind uvarint(len(p)) p
//	                         p = uvarint(gen) image
//	delta:                   'e' uvarint(len(key)) key varint(ExpireAtMs) kind uvarint(len(p)) p
//	                         p = segments, in the store's format (store/journal.go)
//
// Generations make a delta exact across a base rewrite: the rewrite's
// snapshot of a value may already contain changes that reach the log only
// after the rewrite's cut, so each image says which generation it
// contains, and replay applies only the segments of a later generation.
// An 'o' entry (written before deltas existed) is an image of generation 0.
// persist does not look inside images or segments: ReplayAll passes 'g'
// entries to the ObjectFunc with ObjectGen set in the kind (the payload p
// as it is) and deltas with ObjectDelta set.
const (
	entryObjectGen = 'g'
	entryDelta     = 'e'
)

// Flags ReplayAll sets in the kind it passes to an ObjectFunc.
const (
	// ObjectGen: the payload is uvarint(gen) followed by the image.
	ObjectGen = 0x40
	// ObjectDelta: the payload is delta segments (see above).
	ObjectDelta = 0x80
	// ObjectKindMask is the kind itself.
	ObjectKindMask = 0x3f
)

// objectOpSize is the encoded size of an object op (the image entry when
// op.Object is set, then the delta entry when op.Value is), database
// prefixes included.
func objectOpSize(op *Op) int {
	n := 0
	head := 1 + uvarintLen(uint64(len(op.Key))) + len(op.Key) + varintLen(op.ExpireAtMs) + 1 + dbPrefixLen(op.DB)
	if op.Object != nil {
		p := len(op.Object)
		if op.TAT != 0 {
			p += uvarintLen(op.TAT)
		}
		n += head + uvarintLen(uint64(p)) + p
	}
	if op.Value != nil {
		n += head + uvarintLen(uint64(len(op.Value))) + len(op.Value)
	}
	return n
}

// appendObjectOp appends an object op's entries to b, each with its
// database prefix.
func appendObjectOp(b []byte, op *Op) []byte {
	if op.Object != nil {
		b = appendDBPrefix(b, op.DB)
		if op.TAT == 0 {
			b = appendObject(b, op.Key, op.Kind, op.Object, op.ExpireAtMs)
		} else {
			b = appendObjectHead(b, entryObjectGen, op.Key, op.Kind, op.ExpireAtMs)
			b = binary.AppendUvarint(b, uint64(uvarintLen(op.TAT)+len(op.Object)))
			b = binary.AppendUvarint(b, op.TAT)
			b = append(b, op.Object...)
		}
	}
	if op.Value != nil {
		b = appendDBPrefix(b, op.DB)
		b = appendObjectHead(b, entryDelta, op.Key, op.Kind, op.ExpireAtMs)
		b = binary.AppendUvarint(b, uint64(len(op.Value)))
		b = append(b, op.Value...)
	}
	return b
}

// appendObjectHead appends an object-like entry's tag, key, expiry and
// kind.
func appendObjectHead(b []byte, tag byte, key []byte, kind byte, exp int64) []byte {
	b = append(b, tag)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendVarint(b, exp)
	return append(b, kind)
}

// AddObjectGen is AddObject for an image of generation gen (see above).
func (w *BaseWriter) AddObjectGen(key []byte, kind byte, gen uint64, image []byte, expireAtMs int64) {
	w.buf = appendObjectOp(w.buf, &Op{Key: key, Kind: kind, TAT: gen, Object: image, ExpireAtMs: expireAtMs, DB: w.dbid})
	w.added()
}

// mergeDelta folds a newer op for the same key into a pending one (the
// Flusher's pending set after a failed write): a delta extends what is
// pending (its segments follow the pending ones; its expiry is the newer),
// anything else replaces it. A delta after a pending op of another kind,
// or after a deletion, is dropped: replay would ignore it there too.
// Returns the op to keep pending; its bytes still alias old and op.
func mergeDelta(old, op Op) Op {
	if op.Kind == 0 || op.Object != nil || op.Value == nil || op.Delete {
		return op
	}
	if old.Kind != op.Kind || old.Delete {
		return old
	}
	m := old
	m.ExpireAtMs = op.ExpireAtMs
	m.Value = append(append(make([]byte, 0, len(old.Value)+len(op.Value)), old.Value...), op.Value...)
	return m
}

// SplitGen splits an ObjectGen payload into its generation and image.
func SplitGen(p []byte) (uint64, []byte, error) {
	gen, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: bad image generation", ErrCorrupt)
	}
	return gen, p[n:], nil
}
