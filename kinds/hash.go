package kinds

import "strings"

// Hash is a field → value map with Redis's hash semantics. Fields are kept
// in a slice (so HRANDFIELD picks in O(1) and HGETALL walks memory in
// order) indexed by a map; a deleted field is replaced by the last one.
//
// A small hash is kept compact (compact.go): its fields in one []byte,
// in insertion order, until it holds more than CompactMaxHashEntries fields or
// a field or value longer than CompactMaxValue.
//
// The zero value is an empty hash, ready to use. Not safe for concurrent
// use.
type Hash struct {
	journal          // journal.go; kept across the change of form
	*hashFull        // nil while compact
	lp        []byte // the compact form's entries
	n         int32  // the compact form's fields
	cur       cursor
}

// hashFull is a Hash's full form.
type hashFull struct {
	idx   map[string]int32
	items []HashField
	size  int64
}

// HashField is one field of a Hash and its value.
type HashField struct{ Field, Value string }

// hashFieldCost is a field's heap apart from its bytes: its slot in items
// (two string headers) and its map entry (string header, int32, slack).
const hashFieldCost = 32 + 40

// NewHash returns an empty hash.
func NewHash() *Hash { return &Hash{} }

// Len is the number of fields.
func (h *Hash) Len() int {
	if h.compact() {
		return int(h.n)
	}
	return len(h.items)
}

// Size is the hash's approximate heap footprint in bytes.
func (h *Hash) Size() int64 {
	if h.compact() {
		return h.compactSize()
	}
	return h.size
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
	i, ok := h.idx[field]
	if !ok {
		return "", false
	}
	return h.items[i].Value, true
}

// Set stores field = value and reports whether the field is new.
func (h *Hash) Set(field, value string) (added bool) {
	if h.recording() {
		// Recorded first: the record copies field and value before the
		// write can move the compact bytes they might point into.
		h.rec2('S', field, value, h.Size())
	}
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

// setFull is Set on a full h, unrecorded.
func (h *Hash) setFull(field, value string) (added bool) {
	if i, ok := h.idx[field]; ok {
		h.size += int64(len(value)) - int64(len(h.items[i].Value))
		h.items[i].Value = value
		return false
	}
	h.idx[field] = int32(len(h.items))
	h.items = append(h.items, HashField{field, value})
	h.size += hashFieldCost + int64(len(field)+len(value))
	return true
}

// Delete removes field and reports whether it was there.
func (h *Hash) Delete(field string) bool {
	if h.compact() {
		return h.lpDelete(field)
	}
	i, ok := h.idx[field]
	if !ok {
		return false
	}
	if h.recording() {
		h.rec1('D', field, h.Size())
	}
	f := &h.items[i]
	h.size -= hashFieldCost + int64(len(f.Field)+len(f.Value))
	delete(h.idx, field)
	last := len(h.items) - 1
	if int(i) != last {
		h.items[i] = h.items[last]
		h.idx[h.items[i].Field] = i
	}
	h.items[last] = HashField{}
	h.items = h.items[:last]
	if cap(h.items) > 64 && len(h.items) < cap(h.items)/4 {
		h.items = append([]HashField(nil), h.items...)
	}
	return true
}

// At returns the i-th field (0 ≤ i < Len), for random picks and walks.
// While compact, walking i upwards costs O(1) a step.
func (h *Hash) At(i int) HashField {
	if h.compact() {
		return h.lpAt(i)
	}
	return h.items[i]
}

// Each calls fn for every field until it returns false.
func (h *Hash) Each(fn func(field, value string) bool) {
	if h.compact() {
		for off := 0; off < len(h.lp); {
			f, v, next := h.lpEntry(off)
			if !fn(f, v) {
				return
			}
			off = next
		}
		return
	}
	for _, f := range h.items {
		if !fn(f.Field, f.Value) {
			return
		}
	}
}
