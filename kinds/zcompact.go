package kinds

import (
	"encoding/binary"
	"math"
	"strings"
)

// The compact form of a small ZSet (see compact.go): its elements in one
// []byte in (score, member) order, each as [head] member [score], where
// head = len(member) + 65*w says the member's length (at most
// CompactMaxValue, 64) and the score's width w: 0, a float64 in 8 bytes;
// 1, an integer in 6 bytes (|score| < 2^47: millisecond timestamps); 2, an
// integer in 2 bytes (small counts and ranks); integers little-endian, two's
// complement. Redis's listpack writes integral scores as integers too.
// There is no trailing length: a walk downwards first collects the
// elements' offsets going up (zOffsets; a compact set holds at most
// CompactMaxEntries, 128). Reads walk the bytes linearly, as Redis's zzl*
// functions walk a listpack: a lex range over members of different scores
// answers as Redis's small sets do.

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

// zWidths are a score's bytes by its width code (the head's w).
var zWidths = [3]int{8, 6, 2}

// zHead is the head byte of member with a score of width code w.
func zHead(member string, w int) byte { return byte(len(member) + 65*w) }

// zSpan is the length of the element whose head is h: one load.
func zSpan(h byte) int { return int(zSpans[h]) }

// zSpans is zSpan by head byte (0 for bytes no head takes).
var zSpans = func() (t [256]uint8) {
	for h := range 3 * 65 {
		t[h] = uint8(1 + h%65 + zWidths[h/65])
	}
	return t
}()

// zScoreCode is the width code of score's shortest exact encoding. A -0
// takes code 2 and is stored as 0, as Redis's listpack stores it (an
// integer): a compact set never holds -0, a full one keeps it (zset.go).
func zScoreCode(score float64) int {
	if score != math.Trunc(score) || score >= 1<<47 || score <= -(1<<47) {
		return 0 // fractional, infinite or too large: the float64's bits
	}
	if i := int64(score); i >= math.MinInt16 && i <= math.MaxInt16 {
		return 2
	}
	return 1
}

// zPutScore writes score at b[0:] in width code w.
func zPutScore(b []byte, score float64, w int) {
	switch w {
	case 0:
		binary.LittleEndian.PutUint64(b, math.Float64bits(score))
	case 1:
		i := uint64(int64(score))
		binary.LittleEndian.PutUint32(b, uint32(i))
		binary.LittleEndian.PutUint16(b[4:], uint16(i>>32))
	default:
		binary.LittleEndian.PutUint16(b, uint16(int16(score)))
	}
}

// zScoreAt reads a score of width code w at b[0:].
func zScoreAt(b []byte, w int) float64 {
	switch w {
	case 0:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case 1:
		u := uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint16(b[4:]))<<32
		return float64(int64(u<<16) >> 16) // sign-extended from 48 bits
	default:
		return float64(int16(binary.LittleEndian.Uint16(b)))
	}
}

// zEntry decodes the element at off: member, score and the next offset.
func (z *ZSet) zEntry(off int) (m string, s float64, next int) { return zEntryIn(z.lp, off) }

// zEntryIn is zEntry over the compact bytes lp.
func zEntryIn(lp []byte, off int) (m string, s float64, next int) {
	h := lp[off]
	n, w := int(h%65), int(h/65)
	m = bstr(lp[off+1 : off+1+n])
	s = zScoreAt(lp[off+1+n:], w)
	return m, s, off + 1 + n + zWidths[w]
}

// zOffsets appends the offset of every element, in order, to offs (for
// walks downwards).
func (z *ZSet) zOffsets(offs []uint16) []uint16 {
	for off := 0; off < len(z.lp); off += zSpan(z.lp[off]) {
		offs = append(offs, uint16(off))
	}
	return offs
}

// zFind returns the offset of member's element, or -1.
func (z *ZSet) zFind(member string) int {
	lp := z.lp
	for off := 0; off < len(lp); {
		h := lp[off]
		if n := int(h % 65); n == len(member) && string(lp[off+1:off+1+n]) == member {
			return off
		}
		off += zSpan(h)
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
	code := zScoreCode(score)
	w := 1 + len(member) + zWidths[code]
	z.lp = reserve(z.lp, w)
	n := len(z.lp)
	z.lp = z.lp[:n+w]
	copy(z.lp[off+w:], z.lp[off:n])
	z.lp[off] = zHead(member, code)
	copy(z.lp[off+1:], member)
	zPutScore(z.lp[off+1+len(member):], score, code)
	z.n++
}

// Presize prepares an empty compact z for a ZADD of len(scores) members
// to a new key (member j is memberLen(j) bytes long and scored scores[j]):
// when they will all be kept compact, it allocates the compact bytes once,
// at the size class of their exact encoding, where adding them one by one
// would grow through the classes on the way (100 members: 24
// allocations, against 1). Otherwise it does
// nothing. O(len(scores)) and one allocation at most.
func (z *ZSet) Presize(scores []float64, memberLen func(j int) int) {
	if !z.compact() || cap(z.lp) != 0 || len(scores) > CompactMaxEntries {
		return
	}
	need := 0
	for j, s := range scores {
		n := memberLen(j)
		if n > CompactMaxValue {
			return
		}
		need += 1 + n + zWidths[zScoreCode(s)]
	}
	z.lp = make([]byte, 0, allocSize(need))
}

// zRemoveAt removes the element at off.
func (z *ZSet) zRemoveAt(off int) {
	w := zSpan(z.lp[off])
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
	var buf [CompactMaxEntries]uint16
	offs := z.zOffsets(buf[:0])
	for i := start; i <= stop && i < len(offs); i++ {
		m, s, _ := z.zEntry(int(offs[len(offs)-1-i]))
		if !fn(m, s) {
			return
		}
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
	var buf [CompactMaxEntries]uint16
	offs := z.zOffsets(buf[:0])
	i := len(offs) - 1
	for ; i >= 0; i-- {
		if m, s, _ := z.zEntry(int(offs[i])); inMax(m, s) {
			break
		}
	}
	for ; i >= 0; i-- {
		m, s, _ := z.zEntry(int(offs[i]))
		if !inMin(m, s) {
			return
		}
		if offset > 0 {
			offset--
		} else if !visit(i, m, s) {
			return
		}
	}
}

// zRemoveRanks removes the elements of the given ascending ranks, calling
// removed with each member, and returns how many it removed. The bytes are
// rebuilt, so the members handed to removed stay valid.
func (z *ZSet) zRemoveRanks(ranks []int, removed func(member string)) int {
	if len(ranks) == 0 {
		return 0
	}
	if removed == nil && ranks[len(ranks)-1]-ranks[0] == len(ranks)-1 {
		// One run of ranks (a ZREMRANGEBYSCORE/BYRANK, a sliding log's
		// expired head): cut it out in place, recording it first.
		i, off := 0, 0
		for ; i < ranks[0]; i++ {
			off += zSpan(z.lp[off])
		}
		from := off
		for ; i <= ranks[len(ranks)-1]; i++ {
			if z.recording() {
				m, _, _ := z.zEntry(off)
				z.rec1('D', m, z.Size()) // copies m
			}
			off += zSpan(z.lp[off])
		}
		z.lp, z.n = fit(splice(z.lp, from, off, "")), z.n-len(ranks)
		return len(ranks)
	}
	old := z.lp
	out := make([]byte, 0, len(old))
	j := 0
	for i, off := 0, 0; off < len(old); i++ {
		w := zSpan(old[off])
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
			m, _, next := zEntryIn(old, off)
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
		m, s, next := zEntryIn(old, off)
		z.insert(s, strings.Clone(m))
		off = next
	}
}
