package kinds

import "encoding/binary"

// List is a sequence of strings with Redis's list semantics, kept in a
// ring buffer: pushes and pops at either end are O(1) amortised, an index
// is O(1), a range is O(its length); inserting or removing in the middle
// is O(n), as in Redis's quicklist. The buffer shrinks when it is less than
// a quarter full.
//
// The zero value is an empty list, ready to use. Not safe for concurrent
// use.
type List struct {
	journal // journal.go
	buf     []string
	head    int
	n       int
	size    int64
}

// listItemCost is an item's heap apart from its bytes: its string header,
// with the ring's slack.
const listItemCost = 24

// NewList returns an empty list.
func NewList() *List { return &List{size: 48} }

// Len is the number of items.
func (l *List) Len() int { return l.n }

// Size is the list's approximate heap footprint in bytes.
func (l *List) Size() int64 { return l.size }

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
	if l.n == 0 {
		return
	}
	if l.head+l.n <= len(l.buf) {
		copy(dst, l.buf[l.head:l.head+l.n])
		return
	}
	k := copy(dst, l.buf[l.head:])
	copy(dst[k:], l.buf[:l.n-k])
}

func (l *List) grow() {
	if l.n == len(l.buf) {
		l.resize(max(8, 2*len(l.buf)))
	}
}

func (l *List) shrink() {
	if len(l.buf) > 64 && l.n < len(l.buf)/4 {
		l.resize(len(l.buf) / 2)
	}
}

// PushFront adds s at the head (LPUSH).
func (l *List) PushFront(s string) {
	if l.recording() {
		l.rec1('L', s, l.size)
	}
	l.pushFront(s)
}

func (l *List) pushFront(s string) {
	l.grow()
	l.head--
	if l.head < 0 {
		l.head += len(l.buf)
	}
	l.buf[l.head] = s
	l.n++
	l.size += listItemCost + int64(len(s))
}

// PushBack adds s at the tail (RPUSH).
func (l *List) PushBack(s string) {
	if l.recording() {
		l.rec1('R', s, l.size)
	}
	l.pushBack(s)
}

func (l *List) pushBack(s string) {
	l.grow()
	l.buf[l.pos(l.n)] = s
	l.n++
	l.size += listItemCost + int64(len(s))
}

// PopFront removes and returns the head (the list must not be empty).
func (l *List) PopFront() string {
	if l.recording() {
		l.journal.buf = append(l.journal.buf, 'l')
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
		l.journal.buf = append(l.journal.buf, 'r')
	}
	p := l.pos(l.n - 1)
	s := l.buf[p]
	l.buf[p] = ""
	l.n--
	l.size -= listItemCost + int64(len(s))
	l.shrink()
	return s
}

// At returns item i (0 ≤ i < Len).
func (l *List) At(i int) string { return l.buf[l.pos(i)] }

// SetAt replaces item i (0 ≤ i < Len).
func (l *List) SetAt(i int, s string) {
	if l.recording() {
		l.recIndex('T', i, s)
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
	if i == 0 {
		l.pushFront(s)
		return
	}
	if i == l.n {
		l.pushBack(s)
		return
	}
	l.pushBack("")
	for j := l.n - 1; j > i; j-- {
		l.buf[l.pos(j)] = l.buf[l.pos(j-1)]
	}
	l.buf[l.pos(i)] = s
	l.size += int64(len(s))
}

// Filter keeps the items for which keep returns true, in order, and
// returns how many it removed: O(n). (LREM, LTRIM's core.)
func (l *List) Filter(keep func(i int, s string) bool) int {
	w := 0
	var gone []int // the removed indices, for the journal
	for r := 0; r < l.n; r++ {
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
	removed := l.n - w
	if len(gone) > 0 {
		l.journal.buf = binary.AppendUvarint(append(l.journal.buf, 'F'), uint64(len(gone)))
		for _, r := range gone {
			l.journal.buf = binary.AppendUvarint(l.journal.buf, uint64(r))
		}
		l.check(l.size)
	}
	for j := w; j < l.n; j++ {
		l.buf[l.pos(j)] = ""
	}
	l.n = w
	l.shrink()
	return removed
}

// Trim keeps items start..stop (inclusive, 0 ≤ start ≤ stop < Len) and
// drops the rest: O(dropped).
func (l *List) Trim(start, stop int) {
	if l.recording() {
		l.journal.buf = binary.AppendUvarint(binary.AppendUvarint(append(l.journal.buf, 'M'), uint64(start)), uint64(stop))
		l.check(l.size)
	}
	for j := stop + 1; j < l.n; j++ {
		p := l.pos(j)
		l.size -= listItemCost + int64(len(l.buf[p]))
		l.buf[p] = ""
	}
	l.n = stop + 1
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
		l.journal.buf = append(l.journal.buf, 'C')
	}
	*l = List{journal: l.journal, size: 48}
}

// recIndex records a list write at index i with item s.
func (l *List) recIndex(tag byte, i int, s string) {
	l.journal.buf = binary.AppendUvarint(append(l.journal.buf, tag), uint64(i))
	l.journal.buf = appendStr(l.journal.buf, s)
	l.check(l.size)
}
