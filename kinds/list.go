package kinds

import (
	"encoding/binary"
	"strings"
)

// List is a sequence of strings with Redis's list semantics, kept in a
// ring buffer: pushes and pops at either end are O(1) amortised, an index
// is O(1), a range is O(its length); inserting or removing in the middle
// is O(n), as in Redis's quicklist. The buffer shrinks when it is less than
// a quarter full.
//
// A small list is kept compact (compact.go): its items in one []byte,
// until one is longer than CompactMaxValue or they take more than
// CompactMaxBytes; walks with At in either direction then cost O(1) a
// step, a random index O(n).
//
// The zero value is an empty list, ready to use. Not safe for concurrent
// use.
type List struct {
	journal          // journal.go; kept across the change of form
	*listRing        // nil while compact
	lp        []byte // the compact form's items
	n         int32  // items, in either form (at most MaxElements)
	cur       lcursor
}

// listRing is a List's full form, a ring buffer.
type listRing struct {
	buf  []string
	head int
	size int64
}

// listItemCost is an item's heap apart from its bytes: its string header,
// with the ring's slack.
const listItemCost = 24

// listRingFixed is a full-form list's Size with no items (the listRing and
// its slice header): every full form starts from it (toFull), so Size is
// always listRingFixed plus listItemCost and the bytes of each item.
const listRingFixed = 48

// NewList returns an empty list.
func NewList() *List { return &List{} }

// Len is the number of items.
func (l *List) Len() int { return int(l.n) }

// Size is the list's approximate heap footprint in bytes.
func (l *List) Size() int64 {
	if l.compact() {
		return l.compactSize()
	}
	return l.size
}

func (l *List) pos(i int) int {
	p := l.head + i
	if p >= len(l.buf) {
		p -= len(l.buf)
	}
	return p
}

func (l *List) resize(c int) {
	nb := make([]string, c)
	l.copyTo(nb)
	l.buf, l.head = nb, 0
}

func (l *List) copyTo(dst []string) {
	if int(l.n) == 0 {
		return
	}
	if l.head+int(l.n) <= len(l.buf) {
		copy(dst, l.buf[l.head:l.head+int(l.n)])
		return
	}
	k := copy(dst, l.buf[l.head:])
	copy(dst[k:], l.buf[:int(l.n)-k])
}

func (l *List) grow() {
	if int(l.n) == len(l.buf) {
		l.resize(max(8, 2*len(l.buf)))
	}
}

func (l *List) shrink() {
	if len(l.buf) > 64 && int(l.n) < len(l.buf)/4 {
		l.resize(len(l.buf) / 2)
	}
}

// PushFront adds s at the head (LPUSH).
func (l *List) PushFront(s string) {
	if l.recording() {
		l.rec1('L', s, l.Size())
	}
	l.pushFront(s)
}

// pushFront is PushFront unrecorded.
func (l *List) pushFront(s string) {
	if l.compact() {
		if l.fits(s, 0) {
			l.lpInsert(lpos{}, s)
			return
		}
		l.toFull()
	}
	l.grow()
	l.head--
	if l.head < 0 {
		l.head += len(l.buf)
	}
	l.buf[l.head] = s
	l.n++
	l.size += listItemCost + int64(len(s))
}

// PushTransient is PushFront (front) or PushBack for an item that may
// point into a buffer the caller reuses (a request's argument): it is
// copied only where it is kept, so a push to a compact list copies it
// once, into its bytes.
func (l *List) PushTransient(s string, front bool) {
	if !l.compact() || !l.fits(s, 0) {
		if s = strings.Clone(s); front {
			l.PushFront(s)
		} else {
			l.PushBack(s)
		}
		return
	}
	if l.recording() {
		tag := byte('R')
		if front {
			tag = 'L'
		}
		l.rec1(tag, s, l.Size()) // copies s
	}
	if front {
		l.lpInsert(lpos{}, s)
	} else {
		l.lpInsert(l.end(), s)
	}
}

// Presize prepares an empty compact l for a push of items items whose
// bytes take bytes in all, the longest longest bytes (LPUSH/RPUSH of a
// new key): when they will all be kept compact, it allocates the compact
// bytes once, at their exact size class, where pushing them one by one
// would grow through the classes on the way (100 items of 5-6 bytes: 18
// allocations, against 1). Otherwise it does
// nothing. O(1) and one allocation at most.
func (l *List) Presize(items, bytes, longest int) {
	need := items + 1 + bytes // a byte per item, the final byte
	if !l.compact() || cap(l.lp) != 0 || items > listCompactMaxItems || longest > CompactMaxValue || need > CompactMaxBytes {
		return
	}
	l.lp = make([]byte, 0, allocSize(need))
}

// PushBack adds s at the tail (RPUSH).
func (l *List) PushBack(s string) {
	if l.recording() {
		l.rec1('R', s, l.Size())
	}
	l.pushBack(s)
}

// pushBack is PushBack unrecorded.
func (l *List) pushBack(s string) {
	if l.compact() {
		if l.fits(s, 0) {
			l.lpInsert(l.end(), s)
			return
		}
		l.toFull()
	}
	l.grow()
	l.buf[l.pos(int(l.n))] = s
	l.n++
	l.size += listItemCost + int64(len(s))
}

// PopFront removes and returns the head (the list must not be empty).
func (l *List) PopFront() string {
	if l.recording() {
		r := l.room(1)
		r.recs = append(r.recs, 'l')
	}
	if l.compact() {
		return l.lpRemove(lpos{})
	}
	s := l.buf[l.head]
	l.buf[l.head] = ""
	l.head = l.pos(1)
	l.n--
	l.size -= listItemCost + int64(len(s))
	l.shrink()
	return s
}

// PopBack removes and returns the tail (the list must not be empty).
func (l *List) PopBack() string {
	if l.recording() {
		r := l.room(1)
		r.recs = append(r.recs, 'r')
	}
	if l.compact() {
		return l.lpRemove(l.back(l.end()))
	}
	p := l.pos(int(l.n) - 1)
	s := l.buf[p]
	l.buf[p] = ""
	l.n--
	l.size -= listItemCost + int64(len(s))
	l.shrink()
	return s
}

// At returns item i (0 ≤ i < Len); while compact, valid until l's next
// write.
func (l *List) At(i int) string {
	if l.compact() {
		return l.item(l.seek(i))
	}
	return l.buf[l.pos(i)]
}

// SetAt replaces item i (0 ≤ i < Len).
func (l *List) SetAt(i int, s string) {
	if l.recording() {
		l.recIndex('T', i, s) // copies s before the splice
	}
	if l.compact() {
		p := l.seek(i)
		if old := l.itemLen(p); l.fits(s, old+1) {
			l.cur = 0
			l.lp[p.off+1+old] ^= byte(old ^ len(s)) // the next item's (or the final) byte
			l.lp[p.off] = byte(p.prev ^ len(s))
			l.lp = splice(l.lp, p.off+1, p.off+1+old, s)
			return
		}
		l.toFull()
	}
	p := l.pos(i)
	l.size += int64(len(s)) - int64(len(l.buf[p]))
	l.buf[p] = s
}

// InsertAt inserts s before item i (0 ≤ i ≤ Len): O(n).
func (l *List) InsertAt(i int, s string) {
	if l.recording() {
		l.recIndex('I', i, s)
	}
	if l.compact() {
		if l.fits(s, 0) {
			l.lpInsert(l.seek(i), s)
			return
		}
		l.toFull()
	}
	if i == 0 {
		l.pushFront(s)
		return
	}
	if i == int(l.n) {
		l.pushBack(s)
		return
	}
	l.pushBack("")
	for j := int(l.n) - 1; j > i; j-- {
		l.buf[l.pos(j)] = l.buf[l.pos(j-1)]
	}
	l.buf[l.pos(i)] = s
	l.size += int64(len(s))
}

// Filter keeps the items for which keep returns true, in order, and
// returns how many it removed: O(n). (LREM, LTRIM's core.)
func (l *List) Filter(keep func(i int, s string) bool) int {
	if l.compact() {
		out := make([]byte, 0, len(l.lp))
		w, last := 0, 0 // kept items, the last kept one's length
		var gone []int  // the removed indices, for the journal
		p := lpos{}
		for i := 0; i < int(l.n); i++ {
			if s := l.item(p); keep(i, s) {
				out = append(append(out, byte(last^len(s))), s...)
				last = len(s)
				w++
			} else if l.recording() {
				gone = append(gone, i)
			}
			p = l.next(p)
		}
		if w > 0 {
			out = append(out, byte(last))
		}
		removed := int(l.n) - w
		if len(gone) > 0 {
			l.recFilter(gone)
		}
		if removed > 0 {
			l.lp, l.n, l.cur = fit(out), int32(w), 0
		}
		return removed
	}
	w := 0
	var gone []int // the removed indices, for the journal
	for r := 0; r < int(l.n); r++ {
		s := l.buf[l.pos(r)]
		if keep(r, s) {
			l.buf[l.pos(w)] = s
			w++
		} else {
			l.size -= listItemCost + int64(len(s))
			if l.recording() {
				gone = append(gone, r)
			}
		}
	}
	removed := int(l.n) - w
	if len(gone) > 0 {
		l.recFilter(gone)
	}
	for j := w; j < int(l.n); j++ {
		l.buf[l.pos(j)] = ""
	}
	l.n = int32(w)
	l.shrink()
	return removed
}

// Trim keeps items start..stop (inclusive, 0 ≤ start ≤ stop < Len) and
// drops the rest: O(min(dropped, kept)). When fewer items stay than go
// (LTRIM of a giant list to its last few), the kept ones move to a new
// buffer and the old one is left to the garbage collector, so the caller
// (who holds the key's shard lock) does not walk a million dropped items.
func (l *List) Trim(start, stop int) {
	if l.recording() {
		r := l.room(1 + 2*binary.MaxVarintLen64)
		r.recs = binary.AppendUvarint(binary.AppendUvarint(append(r.recs, 'M'), uint64(start)), uint64(stop))
		l.check(l.Size())
	}
	if l.compact() {
		from, to := l.seek(start), l.seek(stop+1)
		first := l.itemLen(from)
		l.lp = append(l.lp[:0], l.lp[from.off:to.off]...)
		l.lp[0] = byte(first) // the first item's byte: its length XOR 0
		l.lp = fit(append(l.lp, byte(to.prev)))
		l.n, l.cur = int32(stop-start+1), 0
		return
	}
	if kept := stop - start + 1; kept < int(l.n)-kept {
		nb := make([]string, max(8, 2*kept))
		size := int64(listRingFixed)
		for j := range kept {
			s := l.buf[l.pos(start+j)]
			nb[j] = s
			size += listItemCost + int64(len(s))
		}
		l.buf, l.head, l.n, l.size = nb, 0, int32(kept), size
		return
	}
	for j := stop + 1; j < int(l.n); j++ {
		p := l.pos(j)
		l.size -= listItemCost + int64(len(l.buf[p]))
		l.buf[p] = ""
	}
	l.n = int32(stop + 1)
	for j := 0; j < start; j++ {
		l.size -= listItemCost + int64(len(l.buf[l.head]))
		l.buf[l.head] = ""
		l.head = l.pos(1)
		l.n--
	}
	l.shrink()
}

// Clear empties the list.
func (l *List) Clear() {
	if l.recording() {
		r := l.room(1)
		r.recs = append(r.recs, 'C')
	}
	*l = List{journal: l.journal}
}

// recIndex records a list write at index i with item s.
func (l *List) recIndex(tag byte, i int, s string) {
	r := l.room(1 + 2*binary.MaxVarintLen64 + len(s))
	r.recs = binary.AppendUvarint(append(r.recs, tag), uint64(i))
	r.recs = appendStr(r.recs, s)
	l.check(l.Size())
}

// recFilter records the indices Filter removed (ascending).
func (l *List) recFilter(gone []int) {
	b := l.room(1 + binary.MaxVarintLen64*(1+len(gone)))
	b.recs = binary.AppendUvarint(append(b.recs, 'F'), uint64(len(gone)))
	for _, r := range gone {
		b.recs = binary.AppendUvarint(b.recs, uint64(r))
	}
	l.check(l.Size())
}
