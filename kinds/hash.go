package kinds

// Hash is a field → value map with Redis's hash semantics. Fields are kept
// in a slice (so HRANDFIELD picks in O(1) and HGETALL walks memory in
// order) indexed by a map; a deleted field is replaced by the last one.
//
// The zero value is not usable: create one with NewHash. Not safe for
// concurrent use.
type Hash struct {
	journal // journal.go
	idx     map[string]int32
	items   []HashField
	size    int64
}

// HashField is one field of a Hash and its value.
type HashField struct{ Field, Value string }

// hashFieldCost is a field's heap apart from its bytes: its slot in items
// (two string headers) and its map entry (string header, int32, slack).
const hashFieldCost = 32 + 40

// NewHash returns an empty hash.
func NewHash() *Hash { return &Hash{idx: map[string]int32{}, size: 64} }

// Len is the number of fields.
func (h *Hash) Len() int { return len(h.items) }

// Size is the hash's approximate heap footprint in bytes.
func (h *Hash) Size() int64 { return h.size }

// Get returns field's value.
func (h *Hash) Get(field string) (string, bool) {
	i, ok := h.idx[field]
	if !ok {
		return "", false
	}
	return h.items[i].Value, true
}

// Set stores field = value and reports whether the field is new.
func (h *Hash) Set(field, value string) (added bool) {
	if h.recording() {
		defer h.rec2('S', field, value, h.size)
	}
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
	i, ok := h.idx[field]
	if !ok {
		return false
	}
	if h.recording() {
		h.rec1('D', field, h.size)
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
func (h *Hash) At(i int) HashField { return h.items[i] }

// Each calls fn for every field until it returns false.
func (h *Hash) Each(fn func(field, value string) bool) {
	for _, f := range h.items {
		if !fn(f.Field, f.Value) {
			return
		}
	}
}
