package kinds

import "unsafe"

// Compact encodings of small hashes and lists, as Redis keeps them in a
// listpack (hash-max-listpack-entries 512, hash-max-listpack-value 64;
// list-max-listpack-size -2, 8 KiB): the elements in one []byte, each with
// a one-byte length, instead of a map, a slice of string headers and one
// allocation per string. A read walks the bytes (O(n), n small); a write
// splices them (O(bytes), as a listpack insert reallocs). A structure
// leaves its compact form for the full one when it grows past the limits,
// and never goes back (as Redis). Strings returned from the compact form
// point into its bytes: they are valid until the next write to the
// structure (the handlers use them at once, under the key's lock).
//
// Layout. A compact hash's block is described in hcompact.go; a list's
// items below, so that a list can also be walked backwards (LREM with a
// negative count, LPOS RANK -1, RPOP).

const (
	// CompactMaxEntries is the most members a compact sorted set holds
	// (zset-max-listpack-entries).
	CompactMaxEntries = 128
	// CompactMaxHashEntries is the most fields a compact hash holds
	// (hash-max-listpack-entries: 512 in Redis 7.0, against 128 for
	// sorted sets).
	CompactMaxHashEntries = 512
	// CompactMaxValue is the longest field, value or list item (bytes)
	// kept compact.
	CompactMaxValue = 64
	// CompactMaxBytes is the most bytes a compact list holds.
	CompactMaxBytes = 8192
)

// bstr is b's bytes as a string without copying: valid while b is not
// written.
func bstr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// reserve returns b with room for extra more bytes. It grows by an
// eighth beyond the need while b is small (below 512 bytes, where an entry
// is a large share of the whole) and by a 32nd above, rather than by
// append's doubling, whose slack Size would count, and rounds up to the
// allocator's size class, which the allocation takes anyway (Redis
// reallocs a listpack on every insert; this reallocates about 150 times on
// the way from empty to 8 KiB).
func reserve(b []byte, extra int) []byte {
	if cap(b)-len(b) >= extra {
		return b
	}
	n := len(b) + extra
	if n < 512 {
		n += n / 8
	} else {
		n += n / 32
	}
	nb := make([]byte, len(b), allocSize(n))
	copy(nb, b)
	return nb
}

// fit gives b back its slack when it holds less than half its capacity.
func fit(b []byte) []byte {
	if cap(b) > 64 && len(b) < cap(b)/2 {
		nb := make([]byte, len(b), allocSize(len(b)+len(b)/4))
		copy(nb, b)
		return nb
	}
	return b
}

// sizeClasses are the Go allocator's small size classes (Go 1.26's
// internal/runtime/gc SizeClassToSize): a request of n bytes takes the
// first class ≥ n.
var sizeClasses = [...]uint16{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// allocSize is the bytes the allocator hands out for a request of n: its
// size class up to 32 KiB, whole 8 KiB pages above.
func allocSize(n int) int {
	if n > 32768 {
		return (n + 8191) &^ 8191
	}
	lo, hi := 0, len(sizeClasses)-1
	for lo < hi {
		m := (lo + hi) / 2
		if int(sizeClasses[m]) < n {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return int(sizeClasses[lo])
}

// splice replaces b[from:to] with s and returns b.
func splice(b []byte, from, to int, s string) []byte {
	delta := len(s) - (to - from)
	n := len(b)
	if delta > 0 {
		b = reserve(b, delta)
		b = b[:n+delta]
		copy(b[to+delta:], b[to:n])
	} else if delta < 0 {
		copy(b[to+delta:], b[to:n])
		b = b[:n+delta]
	}
	copy(b[from:], s)
	return b
}

// Encoding is OBJECT ENCODING's name for a list: "quicklist" in either
// form, as Redis 7.0 answers for every list (its listpack-encoded lists
// came in 7.2).
func (l *List) Encoding() string { return "quicklist" }

// listCompactBase is a compact List's own allocation: the struct (48
// bytes: the journal, the full form's pointer, the bytes' slice header,
// the count and the cursor), a size class of its own.
const listCompactBase = 48

// compact reports whether l is in its compact form.
func (l *List) compact() bool { return l.listRing == nil }

func (l *List) compactSize() int64 { return listCompactBase + int64(cap(l.lp)) }

// A compact list's layout: each item as [x] bytes, where x is the item's
// length XOR the length of the item before it (0 before the first), then
// one final byte, the last item's length (nothing at all when the list is
// empty). One byte per item, where a length before and after each item
// would take two: a walk either way knows the length of the item it comes
// from, so it can decode the next one's, from either end or from a
// remembered place (lpos, lcursor). A compact list holds at most
// listCompactMaxItems items.

// listCompactMaxItems is the most items a compact list holds (so that a
// place fits lcursor's 12 bits).
const listCompactMaxItems = 4095

// lpos is a place in a compact list: item i at byte offset off, with prev
// the length of item i-1 (0 for the first). Item n is the end (off is the
// final byte's; prev the last item's length).
type lpos struct{ i, off, prev int }

// lcursor is a List's remembered place, so a walk with At (LRANGE, LPOS)
// costs O(1) per step: i in the low 12 bits, prev in the next 7, off in
// the top 13 (a compact list is under CompactMaxBytes, 8 KiB). Reset by
// every write; the zero cursor is item 0.
type lcursor uint32

func mkLcursor(p lpos) lcursor { return lcursor(p.off<<19 | p.prev<<12 | p.i) }

func (c lcursor) pos() lpos { return lpos{int(c & 0xfff), int(c >> 19), int(c>>12) & 0x7f} }

// itemLen is the length of the item at p (p.i < n).
func (l *List) itemLen(p lpos) int { return int(l.lp[p.off]) ^ p.prev }

// item is the item at p (p.i < n).
func (l *List) item(p lpos) string {
	n := l.itemLen(p)
	return bstr(l.lp[p.off+1 : p.off+1+n])
}

// next is the place after p (p.i < n).
func (l *List) next(p lpos) lpos {
	n := l.itemLen(p)
	return lpos{p.i + 1, p.off + 1 + n, n}
}

// back is the place before p (p.i > 0).
func (l *List) back(p lpos) lpos {
	off := p.off - 1 - p.prev
	return lpos{p.i - 1, off, int(l.lp[off]) ^ p.prev}
}

// end is the place after the last item.
func (l *List) end() lpos {
	if len(l.lp) == 0 {
		return lpos{}
	}
	return lpos{int(l.n), len(l.lp) - 1, int(l.lp[len(l.lp)-1])}
}

// seek returns the place of item i (0 ≤ i ≤ n; n gives the end), walking
// from the nearest of the start, the cursor and the end.
func (l *List) seek(i int) lpos {
	c := l.cur.pos()
	if c.i == i-1 && i <= int(l.n) { // the next item of a walk up
		p := l.next(c)
		l.cur = mkLcursor(p)
		return p
	}
	best := lpos{}
	if i > int(l.n)-i {
		best = l.end()
	}
	if c.i <= int(l.n) && abs(c.i-i) < abs(best.i-i) {
		best = c
	}
	p := best
	for p.i < i {
		p = l.next(p)
	}
	for p.i > i {
		p = l.back(p)
	}
	l.cur = mkLcursor(p)
	return p
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// fits reports whether a compact l can take s, replacing an item of old
// bytes (0: inserting).
func (l *List) fits(s string, old int) bool {
	if old == 0 && l.n >= listCompactMaxItems {
		return false
	}
	return len(s) <= CompactMaxValue && len(l.lp)-old+len(s)+2 <= CompactMaxBytes
}

// lpInsert inserts s as an item at p (before item p.i; at p = end(), after
// the last).
func (l *List) lpInsert(p lpos, s string) {
	l.cur = 0
	n := len(s)
	if len(l.lp) == 0 {
		l.lp = reserve(l.lp, n+2)[:n+2]
		l.lp[0] = byte(n)
		copy(l.lp[1:], s)
		l.lp[n+1] = byte(n)
		l.n = 1
		return
	}
	// The item at p (or the final byte) now follows s: relink it.
	l.lp[p.off] ^= byte(p.prev ^ n)
	l.lp = reserve(l.lp, n+1)
	end := len(l.lp)
	l.lp = l.lp[:end+n+1]
	copy(l.lp[p.off+n+1:], l.lp[p.off:end])
	l.lp[p.off] = byte(p.prev ^ n)
	copy(l.lp[p.off+1:], s)
	l.n++
}

// lpRemove removes the item at p and returns it, copied.
func (l *List) lpRemove(p lpos) string {
	l.cur = 0
	n := l.itemLen(p)
	s := string(l.lp[p.off+1 : p.off+1+n])
	if l.n == 1 {
		l.lp, l.n = fit(l.lp[:0]), 0
		return s
	}
	// The item after it (or the final byte) now follows item p.i-1.
	l.lp[p.off+1+n] ^= byte(n ^ p.prev)
	l.lp = fit(splice(l.lp, p.off, p.off+1+n, ""))
	l.n--
	return s
}

// toFull moves a compact l into the ring buffer, copying the strings out.
func (l *List) toFull() {
	items := make([]string, max(8, int(l.n)+1))
	size := int64(listRingFixed)
	p := lpos{}
	for i := 0; i < int(l.n); i++ {
		s := string([]byte(l.item(p)))
		items[i] = s
		size += listItemCost + int64(len(s))
		p = l.next(p)
	}
	// The journal stays (as Hash.toFull).
	l.listRing, l.lp, l.cur = &listRing{buf: items, size: size}, nil, 0
}

// DataAddr is the address of l's compact bytes (nil in the full form or
// when empty), as Hash.DataAddr.
func (l *List) DataAddr() unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(l.lp)) }

// DataAddr is the address of z's compact bytes (nil in the full form or
// when empty), as Hash.DataAddr.
func (z *ZSet) DataAddr() unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(z.lp)) }

// PrefetchAddrs is as Hash.PrefetchAddrs.
func (l *List) PrefetchAddrs() (data unsafe.Pointer, n int, journal unsafe.Pointer) {
	return unsafe.Pointer(unsafe.SliceData(l.lp)), len(l.lp), l.journal.addr()
}

// PrefetchAddrs is as Hash.PrefetchAddrs.
func (z *ZSet) PrefetchAddrs() (data unsafe.Pointer, n int, journal unsafe.Pointer) {
	return unsafe.Pointer(unsafe.SliceData(z.lp)), len(z.lp), z.journal.addr()
}
