package kinds

import (
	"strings"
	"unsafe"
)

// Hash is a field → value map with Redis's hash semantics. Fields are kept
// in a slice (so HRANDFIELD picks in O(1) and HGETALL walks memory in
// order) indexed by a map; a deleted field is replaced by the last one.
//
// A small hash is kept compact (hcompact.go): its fields in one block of
// bytes, in insertion order, until it holds more than
// CompactMaxHashEntries fields or a field or value longer than
// CompactMaxValue.
//
// The zero value is an empty hash, ready to use. Not safe for concurrent
// use.
//
// The struct is one pointer, 8 bytes, and may be copied to another
// address (nothing keeps its address), so the store keeps it in its object
// slot instead of allocating it (InPlace; Size leaves it out,
// hashCompactBase): a 10-field hash is its block and the store's entry and
// slot. The pointer's low two bits tell its forms apart without a load
// (hjournal.go): a compact hash that records nothing points at its block
// (hcompact.go; nil while nothing is allocated), whose first 8 bytes hold
// the pairs' length, the block's capacity and the field count; a compact
// hash whose image is on disk and that has recorded nothing since points
// at its block too, tagged; a compact hash with records of its own points
// at a small struct holding its journal and its block; a full hash points
// at its *hashFull, which holds its journal. Every tagged pointer still
// points into its allocation, so the garbage collector keeps it alive.
type Hash struct {
	x unsafe.Pointer // the form and its pointer (hjournal.go)
}

// hashFull is a Hash's full form.
type hashFull struct {
	journal // journal.go; the compact form's, kept across the change
	idx     map[string]int32
	items   []HashField
	size    int64 // the live fields' cost: bytes, hashFieldCost each, the struct
	// peak is the most fields idx has held since it was made: a Go map
	// never gives back its table when entries are deleted, so what it
	// takes follows its peak, not its length. Size charges the table's
	// empty places (hashMapCost each); del rebuilds idx at its length
	// once that falls under a quarter of the peak (as Redis's dict
	// shrinks), so the charge and the heap stay within 4x of the fields.
	peak int
}

// HashField is one field of a Hash and its value.
type HashField struct{ Field, Value string }

// hashFieldCost is a field's heap apart from its bytes: its slot in items
// (hashItemCost: two string headers) and its map entry (hashMapCost:
// string header, int32, slack).
const (
	hashItemCost  = 32
	hashMapCost   = 40
	hashFieldCost = hashItemCost + hashMapCost
)

// hashShrinkMin is the peak under which del never rebuilds the index.
const hashShrinkMin = 64

// NewHash returns an empty hash.
func NewHash() *Hash { return &Hash{} }

// InPlace marks Hash as an object whose one-word struct its holder may
// copy and keep in place of a pointer to it (store.InPlace): a Hash keeps
// no pointer to its own struct. Never called.
func (h *Hash) InPlace() {}

// Len is the number of fields.
func (h *Hash) Len() int {
	if h.compact() {
		return h.meta().n()
	}
	return len(h.full().items)
}

// Size is the hash's approximate heap footprint in bytes.
func (h *Hash) Size() int64 {
	if h.compact() {
		return h.compactSize()
	}
	f := h.full()
	return f.size + int64(f.peak-len(f.items))*hashMapCost + int64(cap(f.items)-len(f.items))*hashItemCost
}

// liveSize is Size without what a full form's history left (its map's
// empty places, its slice's spare capacity): what the content costs, the
// same in two full copies of one content. O(1).
func (h *Hash) liveSize() int64 {
	if h.compact() {
		return h.compactSize()
	}
	return h.full().size
}

// Get returns field's value (while compact, valid until h's next write).
func (h *Hash) Get(field string) (string, bool) {
	if h.compact() {
		off := h.lpFind(field)
		if off < 0 {
			return "", false
		}
		_, v, _ := h.lpEntry(off)
		return v, true
	}
	f := h.full()
	i, ok := f.idx[field]
	if !ok {
		return "", false
	}
	return f.items[i].Value, true
}

// Set stores field = value and reports whether the field is new.
func (h *Hash) Set(field, value string) (added bool) {
	if h.recording() {
		// Recorded first: the record copies field and value before the
		// write can move the compact bytes they might point into.
		h.rec2('S', field, value, h.Size())
	}
	return h.set(field, value)
}

// set is Set, unrecorded.
func (h *Hash) set(field, value string) (added bool) {
	if h.compact() {
		if added, done := h.lpSet(field, value); done {
			return added
		}
		h.toFull()
	}
	return h.setFull(field, value)
}

// SetTransient is Set for a field and value that may point into a buffer
// the caller reuses (a request's arguments): they are copied only where
// they are kept (the full form), so a write to a compact hash copies them
// once, into its bytes, instead of into two new strings first.
func (h *Hash) SetTransient(field, value string) (added bool) {
	if !h.compact() {
		return h.Set(strings.Clone(field), strings.Clone(value))
	}
	if h.recording() {
		h.rec2('S', field, value, h.Size()) // copies them
	}
	if added, done := h.lpSet(field, value); done {
		return added
	}
	h.toFull()
	return h.setFull(strings.Clone(field), strings.Clone(value))
}

// Presize prepares an empty compact h for a write of pairs fields whose
// fields and values take bytes in all, the longest longest bytes (HSET of
// a new key): when they will all be kept compact, it allocates the compact
// bytes once, at their exact size class, where setting them one by one
// would grow through every class on the way (a 10-field hash: 7
// allocations, 448 bytes of garbage, against 1). Otherwise it does
// nothing. O(1) and one allocation at most.
func (h *Hash) Presize(pairs, bytes, longest int) {
	if !h.compact() || h.blk() != nil || pairs > CompactMaxHashEntries || longest > CompactMaxValue {
		return
	}
	heads := pairs // every pair's head is one byte when its lengths are short
	if longest > hpShortMax {
		heads = 3 * pairs
	}
	h.newBlock(heads + bytes)
}

// setFull is Set on a full h, unrecorded.
func (h *Hash) setFull(field, value string) (added bool) {
	hf := h.full()
	if i, ok := hf.idx[field]; ok {
		hf.size += int64(len(value)) - int64(len(hf.items[i].Value))
		hf.items[i].Value = value
		return false
	}
	hf.idx[field] = int32(len(hf.items))
	hf.items = append(hf.items, HashField{field, value})
	hf.size += hashFieldCost + int64(len(field)+len(value))
	hf.peak = max(hf.peak, len(hf.items))
	return true
}

// hashIndex is a new index of items, sized to them. O(len(items)).
func hashIndex(items []HashField) map[string]int32 {
	idx := make(map[string]int32, len(items))
	for i, f := range items {
		idx[f.Field] = int32(i)
	}
	return idx
}

// Delete removes field and reports whether it was there.
func (h *Hash) Delete(field string) bool { return h.del(field, true) }

// del is Delete, recorded when record.
func (h *Hash) del(field string, record bool) bool {
	if h.compact() {
		return h.lpDelete(field, record)
	}
	hf := h.full()
	i, ok := hf.idx[field]
	if !ok {
		return false
	}
	if record && h.recording() {
		h.rec1('D', field, h.Size())
	}
	f := &hf.items[i]
	hf.size -= hashFieldCost + int64(len(f.Field)+len(f.Value))
	delete(hf.idx, field)
	last := len(hf.items) - 1
	if int(i) != last {
		hf.items[i] = hf.items[last]
		hf.idx[hf.items[i].Field] = i
	}
	hf.items[last] = HashField{}
	hf.items = hf.items[:last]
	if cap(hf.items) > 64 && len(hf.items) < cap(hf.items)/4 {
		hf.items = append([]HashField(nil), hf.items...)
	}
	if hf.peak > hashShrinkMin && len(hf.items) < hf.peak/4 {
		hf.idx = hashIndex(hf.items)
		hf.peak = len(hf.items)
	}
	return true
}

// At returns the i-th field (0 ≤ i < Len), for random picks: O(1) in
// the full form, O(i) while compact (walks use Each).
func (h *Hash) At(i int) HashField {
	if h.compact() {
		return h.lpAt(i)
	}
	return h.full().items[i]
}

// Each calls fn for every field until it returns false.
func (h *Hash) Each(fn func(field, value string) bool) {
	if h.compact() {
		for off, n := 0, h.meta().ln(); off < n; {
			f, v, next := h.lpEntry(off)
			if !fn(f, v) {
				return
			}
			off = next
		}
		return
	}
	for _, f := range h.full().items {
		if !fn(f.Field, f.Value) {
			return
		}
	}
}
