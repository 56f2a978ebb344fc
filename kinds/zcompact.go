package kinds

import (
	"encoding/binary"
	"math"
	"strings"
)

// The compact form of a small ZSet (see compact.go): its elements in one
// []byte in (score, member) order, each as [len] member [score, 8 bytes
// little-endian] [len], so the bytes can be walked both ways. Reads walk
// them linearly, as Redis's zzl* functions walk a listpack: a lex range
// over members of different scores answers as Redis's small sets do.

// zsetCompactBase is a compact ZSet's own allocation: the struct (48
// bytes, 8 of them the journal's pointer, journal.go), a size class of
// its own.
const zsetCompactBase = 48

// compact reports whether z is in its compact form.
func (z *ZSet) compact() bool { return z.zFull == nil }

// Encoding is OBJECT ENCODING's name for z's form, as Redis 7.0 names the
// same form: "listpack" while compact, "skiplist" after.
func (z *ZSet) Encoding() string {
	if z.compact() {
		return "listpack"
	}
	return "skiplist"
}

func (z *ZSet) compactSize() int64 { return zsetCompactBase + int64(cap(z.lp)) }

// zEntry decodes the element at off: member, score and the next offset.
func (z *ZSet) zEntry(off int) (m string, s float64, next int) {
	n := int(z.lp[off])
	m = bstr(z.lp[off+1 : off+1+n])
	s = math.Float64frombits(binary.LittleEndian.Uint64(z.lp[off+1+n:]))
	return m, s, off + n + 10
}

// zPrev is the offset of the element before the one at off (off > 0).
func (z *ZSet) zPrev(off int) int { return off - int(z.lp[off-1]) - 10 }

// zFind returns the offset of member's element, or -1.
func (z *ZSet) zFind(member string) int {
	lp := z.lp
	for off := 0; off < len(lp); {
		n := int(lp[off])
		if n == len(member) && string(lp[off+1:off+1+n]) == member {
			return off
		}
		off += n + 10
	}
	return -1
}

// zSet is Set on a compact z that stays compact; done is false when the
// write needs the full form (z is unchanged then).
func (z *ZSet) zSet(member string, score float64) (added, done bool) {
	if len(member) > CompactMaxValue {
		return false, false
	}
	if off := z.zFind(member); off >= 0 {
		if _, old, _ := z.zEntry(off); old == score {
			return false, true
		}
		z.zRemoveAt(off)
		z.zInsert(member, score)
		return false, true
	}
	if z.n >= CompactMaxEntries {
		return false, false
	}
	z.zInsert(member, score)
	return true, true
}

// zInsert inserts (score, member) at its place in the order.
func (z *ZSet) zInsert(member string, score float64) {
	off := 0
	for off < len(z.lp) {
		m, s, next := z.zEntry(off)
		if zLess(score, member, s, m) {
			break
		}
		off = next
	}
	w := len(member) + 10
	z.lp = reserve(z.lp, w)
	n := len(z.lp)
	z.lp = z.lp[:n+w]
	copy(z.lp[off+w:], z.lp[off:n])
	z.lp[off] = byte(len(member))
	copy(z.lp[off+1:], member)
	binary.LittleEndian.PutUint64(z.lp[off+1+len(member):], math.Float64bits(score))
	z.lp[off+w-1] = byte(len(member))
	z.n++
}

// zRemoveAt removes the element at off.
func (z *ZSet) zRemoveAt(off int) {
	w := int(z.lp[off]) + 10
	z.lp = fit(splice(z.lp, off, off+w, ""))
	z.n--
}

// zRangeByRank is RangeByRank on a compact z (0 ≤ start ≤ stop, start <
// n).
func (z *ZSet) zRangeByRank(start, stop int, rev bool, fn func(member string, score float64) bool) {
	if !rev {
		off := 0
		for range start {
			_, _, off = z.zEntry(off)
		}
		for i := start; i <= stop && off < len(z.lp); i++ {
			m, s, next := z.zEntry(off)
			if !fn(m, s) {
				return
			}
			off = next
		}
		return
	}
	off := len(z.lp)
	for range start + 1 {
		off = z.zPrev(off)
	}
	for i := start; i <= stop; i++ {
		m, s, _ := z.zEntry(off)
		if !fn(m, s) || off == 0 {
			return
		}
		off = z.zPrev(off)
	}
}

// zWalk visits the elements of a range, ascending or (rev) descending,
// skipping the first offset of them: ascending, from the first element
// inMin accepts for as long as inMax accepts; descending, from the last
// element inMax accepts for as long as inMin accepts (Redis's
// zzlFirstInRange/zzlLastInRange walks). visit gets each element's rank
// and returns false to stop.
func (z *ZSet) zWalk(rev bool, offset int, inMin, inMax func(m string, s float64) bool, visit func(rank int, m string, s float64) bool) {
	if z.n == 0 {
		return
	}
	if !rev {
		i, off := 0, 0
		for ; off < len(z.lp); i++ {
			m, s, next := z.zEntry(off)
			if inMin(m, s) {
				break
			}
			off = next
		}
		for ; off < len(z.lp); i++ {
			m, s, next := z.zEntry(off)
			if !inMax(m, s) {
				return
			}
			if offset > 0 {
				offset--
			} else if !visit(i, m, s) {
				return
			}
			off = next
		}
		return
	}
	i, off := z.n-1, z.zPrev(len(z.lp))
	for ; ; i-- {
		m, s, _ := z.zEntry(off)
		if inMax(m, s) {
			break
		}
		if off == 0 {
			return
		}
		off = z.zPrev(off)
	}
	for ; ; i-- {
		m, s, _ := z.zEntry(off)
		if !inMin(m, s) {
			return
		}
		if offset > 0 {
			offset--
		} else if !visit(i, m, s) {
			return
		}
		if off == 0 {
			return
		}
		off = z.zPrev(off)
	}
}

// zRemoveRanks removes the elements of the given ascending ranks, calling
// removed with each member, and returns how many it removed. The bytes are
// rebuilt, so the members handed to removed stay valid.
func (z *ZSet) zRemoveRanks(ranks []int, removed func(member string)) int {
	if len(ranks) == 0 {
		return 0
	}
	old := z.lp
	out := make([]byte, 0, len(old))
	j := 0
	for i, off := 0, 0; off < len(old); i++ {
		w := int(old[off]) + 10
		if j < len(ranks) && ranks[j] == i {
			j++
		} else {
			out = append(out, old[off:off+w]...)
		}
		off += w
	}
	z.lp, z.n = fit(out), z.n-len(ranks)
	if rec := z.recording(); removed != nil || rec {
		for i, off, j := 0, 0, 0; j < len(ranks); i++ {
			m, _, next := (&ZSet{lp: old}).zEntry(off)
			if ranks[j] == i {
				if rec {
					z.rec1('D', m, z.Size()) // copies m out of old
				}
				if removed != nil {
					removed(m)
				}
				j++
			}
			off = next
		}
	}
	return len(ranks)
}

// toFull moves a compact z into the skiplist and map, copying the members
// out of the bytes.
func (z *ZSet) toFull() {
	old := z.lp
	z.zFull, z.n, z.lp = newZFull(), 0, nil
	for off := 0; off < len(old); {
		n := int(old[off])
		m := strings.Clone(bstr(old[off+1 : off+1+n]))
		s := math.Float64frombits(binary.LittleEndian.Uint64(old[off+1+n:]))
		z.insert(s, m)
		off += n + 10
	}
}
