package kinds

// Deep copies (COPY of a hash, list or sorted set). Each returns an
// independent structure with the same content (a compact one without
// the original's slack, so its Size may be smaller); the element
// strings are shared, which is safe because Go strings are immutable.
// A copy has no journal (journal.go): it records nothing until the store
// starts its own, once its image is on disk.
// O(elements). Duplicate is the same copy typed any, the shape the store's
// Duplicator interface asks for (this package does not import the store).

// Clone returns a copy of h.
func (h *Hash) Clone() *Hash {
	if h.compact() {
		return h.lpCopy()
	}
	f := h.full()
	c := &Hash{}
	items := append([]HashField(nil), f.items...)
	c.setFullForm(&hashFull{idx: hashIndex(items), items: items, size: f.size, peak: len(items)})
	return c
}

// Clone returns a copy of l.
func (l *List) Clone() *List {
	if l.compact() {
		return &List{lp: append([]byte(nil), l.lp...), n: l.n}
	}
	c := &List{listRing: &listRing{size: l.size}, n: l.n}
	if int(l.n) > 0 {
		c.buf = make([]string, max(8, int(l.n)))
		l.copyTo(c.buf)
	}
	return c
}

// Clone returns a copy of z, its skiplist built afresh in order.
func (z *ZSet) Clone() *ZSet {
	if z.compact() {
		return &ZSet{lp: append([]byte(nil), z.lp...), n: z.n}
	}
	c := &ZSet{zFull: newZFull()}
	c.dict = make(map[string]float64, z.n)
	z.Each(func(member string, score float64) bool {
		c.insert(score, member)
		return true
	})
	c.size = z.size
	return c
}

// Duplicate is Clone typed any.
func (h *Hash) Duplicate() any { return h.Clone() }

// Duplicate is Clone typed any.
func (l *List) Duplicate() any { return l.Clone() }

// Duplicate is Clone typed any.
func (z *ZSet) Duplicate() any { return z.Clone() }
