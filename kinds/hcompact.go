package kinds

import "unsafe"

// A compact hash's block: one allocation holding an 8-byte header (the
// pairs' length, the block's capacity for pairs and the field count,
// hashMeta) and then the pairs, in insertion order. A pair is a head, the
// field and the value. The head is one byte, field length << 4 | value
// length, when both lengths are under 16 (but not both 15); else the byte
// 0xFF and the two lengths, a byte each (a compact hash's strings are at
// most CompactMaxValue, 64, bytes). So a 10-field hash of 6-byte fields and
// values takes 8 + 130 bytes, the 144-byte size class, where a length byte
// before each string and a separate 24-byte struct took 24 + 144.
//
// The block is plain bytes (no pointers for the garbage collector to
// scan); blk is its start, and lp's slice starts after the header.

// hashMeta packs a compact Hash's pairs' length, capacity and field count,
// hashMetaBits each (a compact hash holds at most 512 fields of at most
// 3 + 128 bytes: 67,072 bytes, in 73,728 allocated).
type hashMeta uint64

const (
	hashMetaBits = 20
	hashMetaMask = 1<<hashMetaBits - 1
	hashOneField = 1 << (2 * hashMetaBits) // a meta's unit of field count
	hashHeader   = 8                       // the block's header bytes
	// hpShortMax is the longest field or value whose pair always gets a
	// one-byte head.
	hpShortMax = 14
	hpLong     = 0xFF // a three-byte head's first byte
)

func (m hashMeta) ln() int { return int(m & hashMetaMask) }
func (m hashMeta) cp() int { return int(m >> hashMetaBits & hashMetaMask) }
func (m hashMeta) n() int  { return int(m >> (2 * hashMetaBits) & hashMetaMask) }

func mkHashMeta(ln, cp, n int) hashMeta {
	return hashMeta(ln) | hashMeta(cp)<<hashMetaBits | hashMeta(n)<<(2*hashMetaBits)
}

// hashCompactBase is what a compact Hash's Size counts for its struct:
// nothing. The struct is one word (8 bytes), which its holder keeps where
// it keeps its pointer (the store keeps it in its object slot, InPlace,
// and charges the slot), so a Hash has no allocation of its own.
const hashCompactBase = 0

// Encoding is OBJECT ENCODING's name for h's form, as Redis 7.0 names the
// same form: "listpack" while compact, "hashtable" after.
func (h *Hash) Encoding() string {
	if h.compact() {
		return "listpack"
	}
	return "hashtable"
}

// meta is a compact h's header (0 while h has no block).
func (h *Hash) meta() hashMeta {
	b := h.blk()
	if b == nil {
		return 0
	}
	return *(*hashMeta)(b)
}

// setMeta writes a compact h's header (h has a block).
func (h *Hash) setMeta(m hashMeta) { *(*hashMeta)(h.blk()) = m }

// lp is a compact h's pairs, with the block's capacity.
func (h *Hash) lp() []byte {
	m := h.meta()
	if m.cp() == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(h.blk(), hashHeader)), m.cp())[:m.ln()]
}

// compactSize is a compact h's Size: the block (not the struct, see
// hashCompactBase, nor the journal's buffers, see hjournal.go).
func (h *Hash) compactSize() int64 {
	if h.blk() == nil {
		return hashCompactBase
	}
	return hashCompactBase + hashHeader + int64(h.meta().cp())
}

// newBlock gives a compact h a block with room for pairs bytes of pairs,
// rounded up to the allocator's size class, holding h's pairs so far.
func (h *Hash) newBlock(pairs int) {
	m := h.meta()
	b := make([]byte, allocSize(hashHeader+pairs))
	copy(b[hashHeader:], h.lp())
	h.setBlk(unsafe.Pointer(&b[0]))
	h.setMeta(mkHashMeta(m.ln(), len(b)-hashHeader, m.n()))
}

// grow makes room for extra more bytes of pairs, as reserve does for a
// list's bytes, and returns the pairs.
func (h *Hash) grow(extra int) []byte {
	m := h.meta()
	if m.cp()-m.ln() >= extra {
		return h.lp()
	}
	n := m.ln() + extra
	if n < 512 {
		n += n / 8
	} else {
		n += n / 32
	}
	h.newBlock(n)
	return h.lp()
}

// setLen sets a compact h's pairs' length and field count.
func (h *Hash) setLen(ln, n int) { h.setMeta(mkHashMeta(ln, h.meta().cp(), n)) }

// hpHead decodes the head of the pair at off: the field's and value's
// lengths and the head's.
func hpHead(lp []byte, off int) (fl, vl, hl int) {
	if b := lp[off]; b != hpLong {
		return int(b >> 4), int(b & 15), 1
	}
	return int(lp[off+1]), int(lp[off+2]), 3
}

// hpHeadLen is the length of the head of a pair of lengths fl and vl.
func hpHeadLen(fl, vl int) int {
	if fl < 16 && vl < 16 && fl&vl != 15 {
		return 1
	}
	return 3
}

// hpPutHead writes the head of a pair of lengths fl and vl at b and
// returns its length.
func hpPutHead(b []byte, fl, vl int) int {
	if hpHeadLen(fl, vl) == 1 {
		b[0] = byte(fl<<4 | vl)
		return 1
	}
	b[0], b[1], b[2] = hpLong, byte(fl), byte(vl)
	return 3
}

// lpEntry decodes the pair at off: field, value and the next offset.
func (h *Hash) lpEntry(off int) (f, v string, next int) {
	lp := h.lp()
	fl, vl, hl := hpHead(lp, off)
	f = bstr(lp[off+hl : off+hl+fl])
	v = bstr(lp[off+hl+fl : off+hl+fl+vl])
	return f, v, off + hl + fl + vl
}

// lpFind returns the offset of field's pair, or -1.
func (h *Hash) lpFind(field string) int {
	lp := h.lp()
	for off := 0; off < len(lp); {
		fl, vl, hl := hpHead(lp, off)
		if fl == len(field) && string(lp[off+hl:off+hl+fl]) == field {
			return off
		}
		off += hl + fl + vl
	}
	return -1
}

// splice replaces the pairs' bytes [from, to) with s (which must not point
// into them) and sets the field count to n.
func (h *Hash) splice(from, to int, s []byte, n int) {
	lp := h.lp()
	ln := len(lp)
	delta := len(s) - (to - from)
	if delta > 0 {
		lp = h.grow(delta)[:ln+delta]
		copy(lp[to+delta:], lp[to:ln])
	} else if delta < 0 {
		copy(lp[to+delta:], lp[to:ln])
		lp = lp[:ln+delta]
	}
	copy(lp[from:], s)
	h.setLen(len(lp), n)
}

// lpSet is Set on a compact h that stays compact; false when the write
// needs the full form (h is unchanged then).
func (h *Hash) lpSet(field, value string) (added, done bool) {
	if len(field) > CompactMaxValue || len(value) > CompactMaxValue {
		return false, false
	}
	m := h.meta()
	if off := h.lpFind(field); off >= 0 {
		lp := h.lp()
		fl, vl, hl := hpHead(lp, off)
		if len(value) == vl { // the same head: in place (HINCRBY's usual case)
			copy(lp[off+hl+fl:], value)
			return false, true
		}
		// The pair rebuilt on the stack (its field is in the bytes that move).
		var buf [3 + 2*CompactMaxValue]byte
		k := hpPutHead(buf[:], fl, len(value))
		k += copy(buf[k:], lp[off+hl:off+hl+fl])
		k += copy(buf[k:], value)
		h.splice(off, off+hl+fl+vl, buf[:k], m.n())
		return false, true
	}
	if m.n() >= CompactMaxHashEntries {
		return false, false
	}
	ln := m.ln()
	need := hpHeadLen(len(field), len(value)) + len(field) + len(value)
	lp := h.grow(need)[:ln+need]
	k := ln + hpPutHead(lp[ln:], len(field), len(value))
	k += copy(lp[k:], field)
	copy(lp[k:], value)
	h.setLen(ln+need, m.n()+1)
	return true, true
}

// lpDelete is del on a compact h.
func (h *Hash) lpDelete(field string, record bool) bool {
	off := h.lpFind(field)
	if off < 0 {
		return false
	}
	if record && h.recording() {
		h.rec1('D', field, h.Size()) // copies field before the splice
	}
	_, _, next := h.lpEntry(off)
	m := h.meta()
	h.splice(off, next, nil, m.n()-1)
	if m = h.meta(); m.n() == 0 {
		h.setBlk(nil) // the last field went: no block
	} else if m.cp() > 64 && m.ln() < m.cp()/2 {
		h.newBlock(m.ln() + m.ln()/4) // give back the slack, as fit
	}
	return true
}

// lpAt is At on a compact h: a walk from the first field.
func (h *Hash) lpAt(i int) HashField {
	off := 0
	for range i {
		_, _, off = h.lpEntry(off)
	}
	f, v, _ := h.lpEntry(off)
	return HashField{f, v}
}

// lpCopy is a copy of a compact h's block, without its slack.
func (h *Hash) lpCopy() *Hash {
	c := &Hash{}
	if m := h.meta(); m.n() > 0 {
		c.newBlock(m.ln())
		copy(c.lp()[:m.ln()], h.lp())
		c.setLen(m.ln(), m.n())
	}
	return c
}

// toFull moves a compact h into the full form (map and slice), copying
// the strings out of the bytes.
func (h *Hash) toFull() {
	n := h.meta().n()
	items := make([]HashField, 0, n+1)
	idx := make(map[string]int32, n+1)
	size := int64(64)
	for off, ln := 0, h.meta().ln(); off < ln; {
		f, v, next := h.lpEntry(off)
		f, v = string([]byte(f)), string([]byte(v))
		idx[f] = int32(len(items))
		items = append(items, HashField{f, v})
		size += hashFieldCost + int64(len(f)+len(v))
		off = next
	}
	// The journal stays: the conversion changes no content, so it records
	// nothing, and the write that caused it records itself.
	h.setFullForm(&hashFull{journal: h.takeCompactJournal(), idx: idx, items: items, size: size, peak: len(items)})
}

// DataAddr is the address of h's compact block (nil in the full form or
// when empty).
func (h *Hash) DataAddr() unsafe.Pointer {
	if !h.compact() {
		return nil
	}
	return h.blk()
}

// hashPrefetchBytes is how much of a compact block PrefetchAddrs offers:
// the block's length is in its header, which is what the prefetch is to
// load, so two lines are offered, a small hash's whole block (a limiter's
// few fields; a 10-field hash's first 128 of its 144 bytes). 192 measured
// no better on the drain (BenchmarkDrainHashes/image).
const hashPrefetchBytes = 128

// PrefetchAddrs is what a write to h will touch after its struct, for the
// store's prefetch (store.DataAddresser). It only reads h's struct, so it
// offers what that pointer leads to: a compact block (up to
// hashPrefetchBytes) for a hash that records nothing or has recorded
// nothing since its last take; the struct holding the journal and the
// block for one that has (as its journal); the *hashFull, whose first line
// holds the journal, for a full hash (as its journal). nil, 0, nil for an
// empty hash.
func (h *Hash) PrefetchAddrs() (data unsafe.Pointer, n int, journal unsafe.Pointer) {
	switch h.form() {
	case hxPlain:
		if h.x != nil {
			return h.x, hashPrefetchBytes, nil
		}
	case hxIdle:
		return unsafe.Add(h.x, -hxIdle), hashPrefetchBytes, nil
	case hxFull:
		return nil, 0, unsafe.Add(h.x, -hxFull)
	case hxOwn:
		return nil, 0, unsafe.Add(h.x, -hxOwn)
	}
	return nil, 0, nil
}
