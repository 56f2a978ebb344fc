package kinds

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// ZSet is a sorted set with Redis's semantics: members are unique byte
// strings, each with a float64 score (never NaN); elements are ordered by
// (score, member) with members compared bytewise. It is a skiplist with
// spans (so rank lookups are O(log n), as Redis's zskiplist) plus a map from
// member to score.
//
// The zero value is an empty set, ready to use. A ZSet is not
// safe for concurrent use; the store calls it under the key's shard lock.
// Size is kept current on every change (O(1) to read).
//
// A small set is kept compact (zcompact.go): its elements in order in one
// []byte, until it holds more than CompactMaxEntries members or one longer
// than CompactMaxValue; reads then walk the bytes (O(n), n small), as
// Redis's listpack encoding does.
type ZSet struct {
	journal        // journal.go; kept across the change of form
	*zFull         // nil while compact
	n       int    // members, in either form
	lp      []byte // the compact form's elements
}

// zFull is a ZSet's full form: the skiplist and the member map.
type zFull struct {
	head  *zNode
	tail  *zNode
	level int
	dict  map[string]float64
	size  int64 // the live elements' cost: bytes, zElemCost each, the struct
	// peak is the most members dict has held since it was made: a Go map
	// keeps its table when entries are deleted, so Size charges the
	// table's empty places (zMapCost each) and unlink rebuilds dict at its
	// length once that falls under a quarter of the peak (as Redis's dict
	// shrinks): charge and heap stay within 4x of the members.
	peak int
}

const zMaxLevel = 32

type zLevel struct {
	next *zNode
	span int // elements crossed by following next (rank arithmetic)
}

type zNode struct {
	member string
	score  float64
	prev   *zNode
	lv     []zLevel
}

// zNodeCost and zMemberCost approximate the heap an element costs: a node
// (member header, score, prev, slice header), its levels (avg 1.33 × 16 B),
// the map entry (key header, score, the map's slack), and the member's
// bytes, which the node and the map share.
const zElemCost = 56 + 24 + zMapCost

// zMapCost is an element's map entry (key header, score, the map's slack).
const zMapCost = 48

// zShrinkMin is the peak under which unlink never rebuilds dict.
const zShrinkMin = 64

// NewZSet returns an empty sorted set.
func NewZSet() *ZSet { return &ZSet{} }

// newZFull returns an empty full form.
func newZFull() *zFull {
	return &zFull{head: &zNode{lv: make([]zLevel, 1, 4)}, level: 1, dict: map[string]float64{}, size: 64}
}

// Len is the number of members.
func (z *ZSet) Len() int { return z.n }

// Size is the set's approximate heap footprint in bytes.
func (z *ZSet) Size() int64 {
	if z.compact() {
		return z.compactSize()
	}
	return z.size + int64(z.peak-z.n)*zMapCost
}

// liveSize is Size without the empty places of a full form's map: what
// the content costs, the same in two full copies of one content. O(1).
func (z *ZSet) liveSize() int64 {
	if z.compact() {
		return z.compactSize()
	}
	return z.size
}

func zRandomLevel() int {
	l := 1
	for l < zMaxLevel && rand.Uint32()&3 == 0 { // p = 1/4, as Redis
		l++
	}
	return l
}

// less reports whether (s1, m1) sorts before (s2, m2).
func zLess(s1 float64, m1 string, s2 float64, m2 string) bool {
	return s1 < s2 || (s1 == s2 && m1 < m2)
}

// Score returns member's score.
func (z *ZSet) Score(member string) (float64, bool) {
	if z.compact() {
		if off := z.zFind(member); off >= 0 {
			_, s, _ := z.zEntry(off)
			return s, true
		}
		return 0, false
	}
	s, ok := z.dict[member]
	return s, ok
}

// insert adds a member known to be absent.
func (z *ZSet) insert(score float64, member string) {
	var update [zMaxLevel]*zNode
	var rank [zMaxLevel]int
	x := z.head
	for i := z.level - 1; i >= 0; i-- {
		if i < z.level-1 {
			rank[i] = rank[i+1]
		}
		for x.lv[i].next != nil && zLess(x.lv[i].next.score, x.lv[i].next.member, score, member) {
			rank[i] += x.lv[i].span
			x = x.lv[i].next
		}
		update[i] = x
	}
	level := zRandomLevel()
	if level > z.level {
		for len(z.head.lv) < level {
			z.head.lv = append(z.head.lv, zLevel{}) // the head grows with the set
		}
		for i := z.level; i < level; i++ {
			rank[i] = 0
			update[i] = z.head
			update[i].lv[i].span = z.n
		}
		z.level = level
	}
	nd := &zNode{member: member, score: score, lv: make([]zLevel, level)}
	for i := 0; i < level; i++ {
		nd.lv[i].next = update[i].lv[i].next
		update[i].lv[i].next = nd
		nd.lv[i].span = update[i].lv[i].span - (rank[0] - rank[i])
		update[i].lv[i].span = rank[0] - rank[i] + 1
	}
	for i := level; i < z.level; i++ {
		update[i].lv[i].span++
	}
	if update[0] != z.head {
		nd.prev = update[0]
	}
	if nd.lv[0].next != nil {
		nd.lv[0].next.prev = nd
	} else {
		z.tail = nd
	}
	z.n++
	z.dict[member] = score
	z.size += zElemCost + int64(len(member))
	z.peak = max(z.peak, z.n)
}

// remove deletes the element (score, member), known to be present.
func (z *ZSet) remove(score float64, member string) {
	var update [zMaxLevel]*zNode
	x := z.head
	for i := z.level - 1; i >= 0; i-- {
		for x.lv[i].next != nil && zLess(x.lv[i].next.score, x.lv[i].next.member, score, member) {
			x = x.lv[i].next
		}
		update[i] = x
	}
	x = x.lv[0].next
	if x == nil || x.score != score || x.member != member {
		panic("kinds: zset element missing from its skiplist")
	}
	z.unlink(x, &update)
}

func (z *ZSet) unlink(x *zNode, update *[zMaxLevel]*zNode) {
	for i := 0; i < z.level; i++ {
		if update[i].lv[i].next == x {
			update[i].lv[i].span += x.lv[i].span - 1
			update[i].lv[i].next = x.lv[i].next
		} else {
			update[i].lv[i].span--
		}
	}
	if x.lv[0].next != nil {
		x.lv[0].next.prev = x.prev
	} else {
		z.tail = x.prev
	}
	for z.level > 1 && z.head.lv[z.level-1].next == nil {
		z.level--
	}
	z.n--
	delete(z.dict, x.member)
	z.size -= zElemCost + int64(len(x.member))
	if z.peak > zShrinkMin && z.n < z.peak/4 {
		// Rebuilt from the skiplist, which unlink's callers walk (never
		// dict), so a removal in the middle of a walk is safe here.
		d := make(map[string]float64, z.n)
		for y := z.head.lv[0].next; y != nil; y = y.lv[0].next {
			d[y.member] = y.score
		}
		z.dict, z.peak = d, z.n
	}
}

// Set stores member with score, adding or moving it; it reports whether
// the member was added.
func (z *ZSet) Set(member string, score float64) (added bool) {
	if z.recording() {
		// Recorded first (in either form), so the record copies member
		// before the write can move the compact bytes it might point into;
		// a write that changes nothing records nothing.
		if old, ok := z.Score(member); !ok || old != score {
			z.recSet(member, score)
		}
	}
	if z.compact() {
		if added, done := z.zSet(member, score); done {
			return added
		}
		z.toFull()
	}
	return z.setFull(member, score)
}

// LoadSorted fills an empty set with elems, which must be in the set's
// order (by score, then member; so no member twice), and keeps their
// member strings: the set then holds what Set of each element in turn
// would give, in the same (full) form. One pass and no search: the
// skiplist is built by appending at its tail and the member map is made at
// its final size, where Set searches the skiplist from its head and grows
// the map. It does nothing and returns false when z is not empty, is
// recording, holds elems few enough (CompactMaxEntries or fewer) to stay
// compact, or elems is out of order; the caller then uses Set. Cost: O(n);
// 200k members in 60-82 ms against 98-107 ms of Sets (BenchmarkZSetFill:
// the node allocations remain). Not safe for concurrent use with any other
// method of z (the store's write lock).
func (z *ZSet) LoadSorted(elems []Element) bool {
	if z.n != 0 || z.recording() || len(elems) <= CompactMaxEntries {
		return false
	}
	for i := 1; i < len(elems); i++ {
		if !zLess(elems[i-1].Score, elems[i-1].Member, elems[i].Score, elems[i].Member) {
			return false
		}
	}
	f := newZFull()
	f.dict = make(map[string]float64, len(elems))
	z.zFull, z.lp = f, nil
	var last [zMaxLevel]*zNode // the last node reaching each level
	var lastRank [zMaxLevel]int
	for i := range last {
		last[i] = f.head
	}
	var prev *zNode
	for r, e := range elems {
		rank := r + 1
		level := zRandomLevel()
		if level > f.level {
			for len(f.head.lv) < level {
				f.head.lv = append(f.head.lv, zLevel{})
			}
			f.level = level
		}
		nd := &zNode{member: e.Member, score: e.Score, prev: prev, lv: make([]zLevel, level)}
		for i := 0; i < level; i++ {
			last[i].lv[i].next = nd
			last[i].lv[i].span = rank - lastRank[i]
			last[i], lastRank[i] = nd, rank
		}
		prev = nd
		f.dict[e.Member] = e.Score
		f.size += zElemCost + int64(len(e.Member))
	}
	// A last pointer (next nil) spans the elements after its node, as
	// insert leaves it.
	for i := 0; i < f.level; i++ {
		last[i].lv[i].span = len(elems) - lastRank[i]
	}
	f.tail = prev
	f.peak = len(elems) // the map was made at this size (Size charges from its peak)
	z.n = len(elems)
	return true
}

// SetTransient is Set for a member that may point into a buffer the
// caller reuses (a request's argument): it is copied only where it is
// kept (the full form). On a compact set it also finds member once, where
// Set looks for it twice when recording.
func (z *ZSet) SetTransient(member string, score float64) (added bool) {
	if !z.compact() {
		if old, ok := z.dict[member]; ok && old == score {
			return false
		}
		return z.Set(strings.Clone(member), score)
	}
	off := z.zFind(member)
	if off >= 0 {
		if _, old, _ := z.zEntry(off); old == score {
			return false
		}
	}
	if z.recording() {
		z.recSet(member, score)
	}
	if off >= 0 {
		z.zRemoveAt(off)
		z.zInsert(member, score)
		return false
	}
	if z.n < CompactMaxEntries && len(member) <= CompactMaxValue {
		z.zInsert(member, score)
		return true
	}
	z.toFull()
	return z.setFull(strings.Clone(member), score)
}

// recSet records Set(member, score) (copying member).
func (z *ZSet) recSet(member string, score float64) {
	r := z.room(1 + 8 + binary.MaxVarintLen64 + len(member))
	r.recs = binary.LittleEndian.AppendUint64(append(r.recs, 'S'), math.Float64bits(score))
	z.rec1Raw(member)
}

// setFull is Set on a full z, unrecorded.
func (z *ZSet) setFull(member string, score float64) (added bool) {
	old, ok := z.dict[member]
	if ok && old == score {
		return false
	}
	if ok {
		z.remove(old, member)
		z.insert(score, member)
		return false
	}
	z.insert(score, member)
	return true
}

// Remove deletes member and reports whether it was present.
func (z *ZSet) Remove(member string) bool {
	if z.compact() {
		off := z.zFind(member)
		if off >= 0 {
			if z.recording() {
				z.rec1('D', member, z.Size())
			}
			z.zRemoveAt(off)
		}
		return off >= 0
	}
	s, ok := z.dict[member]
	if !ok {
		return false
	}
	z.removeRec(s, member)
	return true
}

// removeRec is remove, recorded in the journal (journal.go).
func (z *ZSet) removeRec(score float64, member string) {
	if z.recording() {
		z.rec1('D', member, z.Size())
	}
	z.remove(score, member)
}

// rec1Raw ends a record with member (its tag and score are in already).
func (z *ZSet) rec1Raw(member string) {
	r := z.out()
	r.recs = appendStr(r.recs, member)
	z.check(z.Size())
}

// Rank is member's 0-based rank in ascending order.
func (z *ZSet) Rank(member string) (int, bool) {
	if z.compact() {
		for i, off := 0, 0; off < len(z.lp); i++ {
			m, _, next := z.zEntry(off)
			if m == member {
				return i, true
			}
			off = next
		}
		return 0, false
	}
	score, ok := z.dict[member]
	if !ok {
		return 0, false
	}
	rank := 0
	x := z.head
	for i := z.level - 1; i >= 0; i-- {
		for x.lv[i].next != nil && !zLess(score, member, x.lv[i].next.score, x.lv[i].next.member) {
			rank += x.lv[i].span
			x = x.lv[i].next
		}
		if x != z.head && x.member == member {
			return rank - 1, true
		}
	}
	return rank - 1, true
}

// byRank returns the element of 0-based rank r (0 ≤ r < Len).
func (z *ZSet) byRank(r int) *zNode {
	r++ // spans count from the head
	traversed := 0
	x := z.head
	for i := z.level - 1; i >= 0; i-- {
		for x.lv[i].next != nil && traversed+x.lv[i].span <= r {
			traversed += x.lv[i].span
			x = x.lv[i].next
		}
		if traversed == r {
			return x
		}
	}
	return nil
}

// At returns the element of 0-based rank r (0 ≤ r < Len). Cost: O(log n)
// in the full form, O(n) in the compact one (n ≤ CompactMaxEntries).
// Callers hold the key's shard as for every read.
func (z *ZSet) At(r int) Element {
	var e Element
	if z.compact() {
		z.zRangeByRank(r, r, false, func(m string, s float64) bool { e = Element{m, s}; return false })
		return e
	}
	x := z.byRank(r)
	return Element{x.member, x.score}
}

// Element is one member of a ZSet with its score.
type Element struct {
	Member string
	Score  float64
}

// RangeByRank calls fn for the elements of 0-based ranks start..stop
// (inclusive, already clamped to [0, Len)), ascending or, with rev,
// descending from the end (rank 0 is then the highest). fn returns false to
// stop. Cost: O(log n + elements visited).
func (z *ZSet) RangeByRank(start, stop int, rev bool, fn func(member string, score float64) bool) {
	if start > stop || start >= z.n {
		return
	}
	if z.compact() {
		z.zRangeByRank(start, stop, rev, fn)
		return
	}
	var x *zNode
	if rev {
		x = z.byRank(z.n - 1 - start)
	} else {
		x = z.byRank(start)
	}
	for i := start; i <= stop && x != nil; i++ {
		if !fn(x.member, x.score) {
			return
		}
		if rev {
			x = x.prev
		} else {
			x = x.lv[0].next
		}
	}
}

// ScoreRange is a score interval with Redis's exclusive bounds ("(1").
type ScoreRange struct {
	Min, Max     float64
	MinEx, MaxEx bool
}

func (r *ScoreRange) aboveMin(s float64) bool {
	if r.MinEx {
		return s > r.Min
	}
	return s >= r.Min
}

func (r *ScoreRange) belowMax(s float64) bool {
	if r.MaxEx {
		return s < r.Max
	}
	return s <= r.Max
}

// Empty reports whether no score can be in r.
func (r *ScoreRange) Empty() bool {
	return r.Min > r.Max || (r.Min == r.Max && (r.MinEx || r.MaxEx))
}

// firstInScore is the first node whose score is in r, or nil.
func (z *ZSet) firstInScore(r *ScoreRange) *zNode {
	if r.Empty() {
		return nil
	}
	x := z.head
	for i := z.level - 1; i >= 0; i-- {
		for x.lv[i].next != nil && !r.aboveMin(x.lv[i].next.score) {
			x = x.lv[i].next
		}
	}
	x = x.lv[0].next
	if x == nil || !r.belowMax(x.score) {
		return nil
	}
	return x
}

// lastInScore is the last node whose score is in r, or nil.
func (z *ZSet) lastInScore(r *ScoreRange) *zNode {
	if r.Empty() {
		return nil
	}
	x := z.head
	for i := z.level - 1; i >= 0; i-- {
		for x.lv[i].next != nil && r.belowMax(x.lv[i].next.score) {
			x = x.lv[i].next
		}
	}
	if x == z.head || !r.aboveMin(x.score) {
		return nil
	}
	return x
}

// RangeByScore calls fn for the elements with scores in r, ascending (or
// descending with rev), skipping the first offset of them; fn returns false
// to stop. Cost: O(log n + offset + elements visited).
func (z *ZSet) RangeByScore(r ScoreRange, rev bool, offset int, fn func(member string, score float64) bool) {
	if z.compact() {
		if !r.Empty() {
			z.zWalk(rev, offset, func(_ string, s float64) bool { return r.aboveMin(s) }, func(_ string, s float64) bool { return r.belowMax(s) }, func(_ int, m string, s float64) bool { return fn(m, s) })
		}
		return
	}
	var x *zNode
	if rev {
		x = z.lastInScore(&r)
	} else {
		x = z.firstInScore(&r)
	}
	for x != nil {
		if rev && !r.aboveMin(x.score) || !rev && !r.belowMax(x.score) {
			return
		}
		if offset > 0 {
			offset--
		} else if !fn(x.member, x.score) {
			return
		}
		if rev {
			x = x.prev
		} else {
			x = x.lv[0].next
		}
	}
}

// CountByScore is the number of elements with scores in r: O(log n).
func (z *ZSet) CountByScore(r ScoreRange) int {
	if z.compact() {
		n := 0
		z.RangeByScore(r, false, 0, func(string, float64) bool { n++; return true })
		return n
	}
	first := z.firstInScore(&r)
	if first == nil {
		return 0
	}
	last := z.lastInScore(&r)
	a, _ := z.Rank(first.member)
	b, _ := z.Rank(last.member)
	return b - a + 1
}

// LexBound is one end of a lex range: "-" (Inf < 0), "+" (Inf > 0), or a
// member with "[" (inclusive) or "(" (exclusive).
type LexBound struct {
	Inf int
	S   string
	Ex  bool
}

// LexRange is a member interval as ZRANGEBYLEX takes it. Lex ranges are
// meaningful only when all members have the same score, as in Redis.
type LexRange struct{ Min, Max LexBound }

// ParseLexBound parses "-", "+", "[x" or "(x".
func ParseLexBound(b []byte) (LexBound, bool) {
	if len(b) == 0 {
		return LexBound{}, false
	}
	switch b[0] {
	case '-':
		if len(b) == 1 {
			return LexBound{Inf: -1}, true
		}
	case '+':
		if len(b) == 1 {
			return LexBound{Inf: 1}, true
		}
	case '[':
		return LexBound{S: string(b[1:])}, true
	case '(':
		return LexBound{S: string(b[1:]), Ex: true}, true
	}
	return LexBound{}, false
}

func (r *LexRange) aboveMin(m string) bool {
	switch {
	case r.Min.Inf < 0:
		return true
	case r.Min.Inf > 0:
		return false
	case r.Min.Ex:
		return m > r.Min.S
	}
	return m >= r.Min.S
}

func (r *LexRange) belowMax(m string) bool {
	switch {
	case r.Max.Inf > 0:
		return true
	case r.Max.Inf < 0:
		return false
	case r.Max.Ex:
		return m < r.Max.S
	}
	return m <= r.Max.S
}

// Empty reports whether no member can be in r.
func (r *LexRange) Empty() bool {
	if r.Min.Inf > 0 || r.Max.Inf < 0 {
		return true
	}
	if r.Min.Inf < 0 || r.Max.Inf > 0 {
		return false
	}
	return r.Min.S > r.Max.S || (r.Min.S == r.Max.S && (r.Min.Ex || r.Max.Ex))
}

func (z *ZSet) firstInLex(r *LexRange) *zNode {
	if r.Empty() {
		return nil
	}
	x := z.head
	for i := z.level - 1; i >= 0; i-- {
		for x.lv[i].next != nil && !r.aboveMin(x.lv[i].next.member) {
			x = x.lv[i].next
		}
	}
	x = x.lv[0].next
	if x == nil || !r.belowMax(x.member) {
		return nil
	}
	return x
}

func (z *ZSet) lastInLex(r *LexRange) *zNode {
	if r.Empty() {
		return nil
	}
	x := z.head
	for i := z.level - 1; i >= 0; i-- {
		for x.lv[i].next != nil && r.belowMax(x.lv[i].next.member) {
			x = x.lv[i].next
		}
	}
	if x == z.head || !r.aboveMin(x.member) {
		return nil
	}
	return x
}

// RangeByLex is RangeByScore for a lex range.
func (z *ZSet) RangeByLex(r LexRange, rev bool, offset int, fn func(member string, score float64) bool) {
	if z.compact() {
		if !r.Empty() {
			z.zWalk(rev, offset, func(m string, _ float64) bool { return r.aboveMin(m) }, func(m string, _ float64) bool { return r.belowMax(m) }, func(_ int, m string, s float64) bool { return fn(m, s) })
		}
		return
	}
	var x *zNode
	if rev {
		x = z.lastInLex(&r)
	} else {
		x = z.firstInLex(&r)
	}
	for x != nil {
		if rev && !r.aboveMin(x.member) || !rev && !r.belowMax(x.member) {
			return
		}
		if offset > 0 {
			offset--
		} else if !fn(x.member, x.score) {
			return
		}
		if rev {
			x = x.prev
		} else {
			x = x.lv[0].next
		}
	}
}

// CountByLex is the number of members in r: O(log n).
func (z *ZSet) CountByLex(r LexRange) int {
	if z.compact() {
		n := 0
		z.RangeByLex(r, false, 0, func(string, float64) bool { n++; return true })
		return n
	}
	first := z.firstInLex(&r)
	if first == nil {
		return 0
	}
	last := z.lastInLex(&r)
	a, _ := z.Rank(first.member)
	b, _ := z.Rank(last.member)
	return b - a + 1
}

// RemoveRangeByScore deletes the elements with scores in r and returns
// how many it deleted. Cost: O(log n + removed).
func (z *ZSet) RemoveRangeByScore(r ScoreRange, removed func(member string)) int {
	if z.compact() {
		var del []int
		if !r.Empty() {
			z.zWalk(false, 0, func(_ string, s float64) bool { return r.aboveMin(s) }, func(_ string, s float64) bool { return r.belowMax(s) }, func(i int, _ string, _ float64) bool { del = append(del, i); return true })
		}
		return z.zRemoveRanks(del, removed)
	}
	if r.Empty() {
		return 0
	}
	return z.removeRun(func(x *zNode, _ int) bool { return !r.aboveMin(x.score) },
		func(x *zNode, _ int) bool { return r.belowMax(x.score) }, removed)
}

// RemoveRangeByLex deletes the members in r.
func (z *ZSet) RemoveRangeByLex(r LexRange, removed func(member string)) int {
	if z.compact() {
		var del []int
		if !r.Empty() {
			z.zWalk(false, 0, func(m string, _ float64) bool { return r.aboveMin(m) }, func(m string, _ float64) bool { return r.belowMax(m) }, func(i int, _ string, _ float64) bool { del = append(del, i); return true })
		}
		return z.zRemoveRanks(del, removed)
	}
	if r.Empty() {
		return 0
	}
	return z.removeRun(func(x *zNode, _ int) bool { return !r.aboveMin(x.member) },
		func(x *zNode, _ int) bool { return r.belowMax(x.member) }, removed)
}

// RemoveRangeByRank deletes ranks start..stop (clamped, inclusive).
func (z *ZSet) RemoveRangeByRank(start, stop int, removed func(member string)) int {
	if z.compact() {
		var del []int
		for i := max(start, 0); i <= stop && i < z.n; i++ {
			del = append(del, i)
		}
		return z.zRemoveRanks(del, removed)
	}
	start = max(start, 0)
	if start > stop || start >= z.n {
		return 0
	}
	// rank is 1-based (the head is 0): ranks start+1..stop+1 go.
	return z.removeRun(func(_ *zNode, rank int) bool { return rank <= start },
		func(_ *zNode, rank int) bool { return rank <= stop+1 }, removed)
}

// removeRun deletes, in one walk as Redis's zslDeleteRangeBy* do, the run
// of elements that starts at the first for which before is false and goes
// on while in holds (before and in are monotone along the list; both get
// the node and its 1-based rank), recording each deletion (removeRec's
// journal record) and calling removed with its member. It returns how many
// it deleted. Cost: O(log n) to find the run, then per element its map
// delete; no slice of the run is made.
func (z *ZSet) removeRun(before, in func(x *zNode, rank int) bool, removed func(member string)) int {
	var update [zMaxLevel]*zNode
	x, rank := z.head, 0
	for i := z.level - 1; i >= 0; i-- {
		for x.lv[i].next != nil && before(x.lv[i].next, rank+x.lv[i].span) {
			rank += x.lv[i].span
			x = x.lv[i].next
		}
		update[i] = x
	}
	x = x.lv[0].next
	n := 0
	for x != nil && in(x, rank+1+n) {
		next := x.lv[0].next
		if z.recording() {
			z.rec1('D', x.member, z.Size())
		}
		z.unlink(x, &update)
		if removed != nil {
			removed(x.member)
		}
		n++
		x = next
	}
	return n
}

// Each calls fn for every element in ascending order until fn returns
// false.
func (z *ZSet) Each(fn func(member string, score float64) bool) {
	if z.compact() {
		for off := 0; off < len(z.lp); {
			m, s, next := z.zEntry(off)
			if !fn(m, s) {
				return
			}
			off = next
		}
		return
	}
	for x := z.head.lv[0].next; x != nil; x = x.lv[0].next {
		if !fn(x.member, x.score) {
			return
		}
	}
}

// ParseScore parses a score as Redis's strtod-based parser accepts it
// (decimal or exponent forms, "inf", "+inf", "-inf" in any case); NaN and
// anything else are refused.
func ParseScore(b []byte) (float64, bool) {
	f, erange, ok := parseDouble(b)
	if !ok || erange {
		// Redis refuses strtod's ERANGE: an overflow (1e400) and a nonzero
		// number that rounds to zero (1e-400).
		return 0, false
	}
	return f, true
}

// parseDouble parses b as strtod does for Redis: ok is false for what
// Redis refuses in any case (NaN, leading space, Go-only syntax); erange
// is set when the number overflows (f is ±Inf) or is nonzero and rounds
// to ±0, as strtod's ERANGE.
func parseDouble(b []byte) (f float64, erange, ok bool) {
	if len(b) == 0 || len(b) > 5000 {
		return 0, false, false
	}
	c := b[0]
	if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' {
		return 0, false, false // strtod skips leading space, Redis then refuses it
	}
	for _, c := range b {
		if c == '_' {
			return 0, false, false // Go syntax, not C's
		}
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsNaN(f) {
		return 0, false, false
	}
	return f, err != nil || f == 0 && underflows(b), true
}

// underflows reports whether the decimal or hex number b has a nonzero
// digit in its mantissa (for b parsed as ±0: an underflow).
func underflows(b []byte) bool {
	hex := false
	for i, c := range b {
		switch {
		case (c == 'x' || c == 'X') && i > 0 && b[i-1] == '0':
			hex = true
		case !hex && (c == 'e' || c == 'E'), hex && (c == 'p' || c == 'P'):
			return false
		case c >= '1' && c <= '9', hex && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
			return true
		}
	}
	return false
}

// ParseScoreBound parses one end of a score range: a score, or "(" and a
// score for an exclusive bound. As Redis's zslParseRange (plain strtod), it
// takes what ParseScore refuses for range: 1e400 is +inf, 1e-400 is 0.
func ParseScoreBound(b []byte) (f float64, ex bool, ok bool) {
	if len(b) > 0 && b[0] == '(' {
		f, _, ok = parseDouble(b[1:])
		return f, true, ok
	}
	f, _, ok = parseDouble(b)
	return f, false, ok
}
