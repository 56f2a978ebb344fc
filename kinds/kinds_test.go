package kinds

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// model is a brute-force sorted set: a sorted slice of elements.
func modelSorted(m map[string]float64) []Element {
	var out []Element
	for k, v := range m {
		out = append(out, Element{k, v})
	}
	slices.SortFunc(out, func(a, b Element) int {
		if zLess(a.Score, a.Member, b.Score, b.Member) {
			return -1
		}
		if a == b {
			return 0
		}
		return 1
	})
	return out
}

// TestZSetAgainstModel runs random operations on a ZSet and a map side by
// side: a set of up to 300 members (it leaves the compact form), one of
// up to 100 (it stays compact), one meeting a member past
// CompactMaxValue; ranges by score and rank, both ways, with offsets, and
// removals of ranges are checked against the sorted model.
func TestZSetAgainstModel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		universe int
		long     bool
		wantFull bool
	}{{"grows", 300, false, true}, {"compact", 100, false, false}, {"long member", 100, true, true}} {
		t.Run(tc.name, func(t *testing.T) { zsetAgainstModel(t, tc.universe, tc.long, tc.wantFull) })
	}
}

func zsetAgainstModel(t *testing.T, universe int, long, wantFull bool) {
	r := rand.New(rand.NewPCG(1, 2))
	z := NewZSet()
	m := map[string]float64{}
	for step := 0; step < 20000; step++ {
		member := "m" + strconv.Itoa(r.IntN(universe))
		if long && r.IntN(500) == 0 {
			member += strings.Repeat("x", CompactMaxValue)
		}
		switch r.IntN(6) {
		case 0, 1:
			s := float64(r.IntN(50))
			if r.IntN(20) == 0 {
				s = math.Inf(1 - 2*r.IntN(2))
			}
			_, had := m[member]
			if z.Set(member, s) == had {
				t.Fatalf("step %d: Set(%s) added=%v had=%v", step, member, !had, had)
			}
			m[member] = s
		case 2:
			_, had := m[member]
			if z.Remove(member) != had {
				t.Fatalf("step %d: Remove", step)
			}
			delete(m, member)
		case 3:
			lo, hi := float64(r.IntN(50)), float64(r.IntN(50))
			sr := ScoreRange{Min: lo, Max: hi, MinEx: r.IntN(2) == 0, MaxEx: r.IntN(2) == 0}
			var got, want []Element
			z.RangeByScore(sr, false, 0, func(m string, s float64) bool { got = append(got, Element{m, s}); return true })
			for _, e := range modelSorted(m) {
				if sr.aboveMin(e.Score) && sr.belowMax(e.Score) {
					want = append(want, e)
				}
			}
			if !slices.Equal(got, want) || z.CountByScore(sr) != len(want) {
				t.Fatalf("step %d: range %+v: got %v want %v count %d", step, sr, got, want, z.CountByScore(sr))
			}
			var rev []Element
			z.RangeByScore(sr, true, 0, func(m string, s float64) bool { rev = append(rev, Element{m, s}); return true })
			slices.Reverse(rev)
			if !slices.Equal(rev, want) {
				t.Fatalf("step %d: rev range", step)
			}
			if off := r.IntN(5); off < len(want) {
				var got []Element
				z.RangeByScore(sr, false, off, func(m string, s float64) bool { got = append(got, Element{m, s}); return len(got) < 3 })
				if w := want[off:min(off+3, len(want))]; !slices.Equal(got, w) {
					t.Fatalf("step %d: range offset %d: got %v want %v", step, off, got, w)
				}
				got = nil
				z.RangeByScore(sr, true, off, func(m string, s float64) bool { got = append(got, Element{m, s}); return true })
				slices.Reverse(got)
				if w := want[:len(want)-off]; !slices.Equal(got, w) {
					t.Fatalf("step %d: rev range offset %d", step, off)
				}
			}
		case 4:
			if r.IntN(10) == 0 {
				lo := float64(r.IntN(50))
				sr := ScoreRange{Min: lo, Max: lo + float64(r.IntN(3)+r.IntN(4)/3*r.IntN(10)), MinEx: r.IntN(2) == 0}
				var gone []string
				cb := func(m string) { gone = append(gone, m) }
				if r.IntN(2) == 0 {
					cb = nil // ZREMRANGEBYSCORE's call: a run is cut in place
				}
				n := z.RemoveRangeByScore(sr, cb)
				var want []string
				for _, e := range modelSorted(m) {
					if sr.aboveMin(e.Score) && sr.belowMax(e.Score) {
						want = append(want, e.Member)
						delete(m, e.Member)
					}
				}
				if cb == nil {
					gone = want
				}
				if n != len(want) || !slices.Equal(gone, want) {
					t.Fatalf("step %d: RemoveRangeByScore %+v removed %v want %v", step, sr, gone, want)
				}
			}
		case 5:
			if r.IntN(10) == 0 && len(m) > 0 {
				sorted := modelSorted(m)
				a := r.IntN(len(sorted))
				b := a + r.IntN(3) + r.IntN(4)/3*r.IntN(30) // runs past one level's span too
				var gone []string
				n := z.RemoveRangeByRank(a, b, func(m string) { gone = append(gone, m) })
				var want []string
				for _, e := range sorted[a:min(b+1, len(sorted))] {
					want = append(want, e.Member)
					delete(m, e.Member)
				}
				if n != len(want) || !slices.Equal(gone, want) {
					t.Fatalf("step %d: RemoveRangeByRank %d %d removed %v want %v", step, a, b, gone, want)
				}
			}
		}
		if z.Len() != len(m) {
			t.Fatalf("step %d: len %d want %d", step, z.Len(), len(m))
		}
		if step%97 == 0 {
			sorted := modelSorted(m)
			for i, e := range sorted {
				if rk, ok := z.Rank(e.Member); !ok || rk != i {
					t.Fatalf("step %d: rank of %s = %d want %d", step, e.Member, rk, i)
				}
			}
			if len(sorted) > 0 {
				a, b := r.IntN(len(sorted)), r.IntN(len(sorted))
				if a > b {
					a, b = b, a
				}
				var got []Element
				z.RangeByRank(a, b, false, func(m string, s float64) bool { got = append(got, Element{m, s}); return true })
				if !slices.Equal(got, sorted[a:b+1]) {
					t.Fatalf("step %d: rank range", step)
				}
				got = nil
				z.RangeByRank(a, b, true, func(m string, s float64) bool { got = append(got, Element{m, s}); return true })
				rs := slices.Clone(sorted)
				slices.Reverse(rs)
				if !slices.Equal(got, rs[a:b+1]) {
					t.Fatalf("step %d: rev rank range", step)
				}
			}
		}
	}
	want := int64(64)
	for k := range m {
		want += zElemCost + int64(len(k))
	}
	if z.compact() {
		want = zsetCompactBase + int64(cap(z.lp))
		for _, e := range modelSorted(m) {
			if sc, ok := z.Score(e.Member); !ok || sc != e.Score {
				t.Fatalf("Score(%s) = %v %v", e.Member, sc, ok)
			}
		}
	}
	if !z.compact() {
		// The map's empty places its peak left are charged too.
		if z.peak < z.n || (z.peak > zShrinkMin && z.n < z.peak/4) {
			t.Fatalf("peak %d for %d members", z.peak, z.n)
		}
		want += int64(z.peak-z.n) * zMapCost
	}
	if z.Size() != want {
		t.Fatalf("size %d want %d", z.Size(), want)
	}
	if z.compact() == wantFull {
		t.Fatalf("compact at the end: %v", z.compact())
	}
	img := z.AppendImage(nil)
	back, err := DecodeZSet(img)
	if err != nil || string(back.AppendImage(nil)) != string(img) || string(z.Clone().AppendImage(nil)) != string(img) {
		t.Fatalf("image or clone does not round-trip: %v", err)
	}
}

func TestZSetLex(t *testing.T) {
	for _, full := range []bool{false, true} {
		z := NewZSet()
		for _, m := range []string{"a", "b", "c", "d", "e"} {
			z.Set(m, 0)
		}
		if full {
			z.toFull()
		}
		zsetLex(t, z)
	}
}

func zsetLex(t *testing.T, z *ZSet) {
	cases := []struct {
		min, max string
		want     string
	}{
		{"-", "+", "abcde"}, {"[b", "(d", "bc"}, {"(b", "[d", "cd"}, {"[c", "[c", "c"}, {"(c", "[c", ""}, {"+", "-", ""}, {"-", "[b", "ab"},
	}
	for _, c := range cases {
		mn, _ := ParseLexBound([]byte(c.min))
		mx, _ := ParseLexBound([]byte(c.max))
		got := ""
		z.RangeByLex(LexRange{mn, mx}, false, 0, func(m string, _ float64) bool { got += m; return true })
		if got != c.want || z.CountByLex(LexRange{mn, mx}) != len(c.want) {
			t.Errorf("%s %s: got %q want %q", c.min, c.max, got, c.want)
		}
		rev := ""
		z.RangeByLex(LexRange{mn, mx}, true, 0, func(m string, _ float64) bool { rev = m + rev; return true })
		if rev != c.want {
			t.Errorf("%s %s rev: got %q want %q", c.min, c.max, rev, c.want)
		}
		cl := z.Clone()
		gone := ""
		if n := cl.RemoveRangeByLex(LexRange{mn, mx}, func(m string) { gone += m }); n != len(c.want) || gone != c.want || cl.Len() != 5-n {
			t.Errorf("%s %s: RemoveRangeByLex removed %q", c.min, c.max, gone)
		}
	}
	if _, ok := ParseLexBound([]byte("x")); ok {
		t.Error("bad lex bound accepted")
	}
}

func TestParseScore(t *testing.T) {
	for _, s := range []string{"1", "-1.5", "inf", "+inf", "-inf", "1e3", "0x1p4"} {
		if _, ok := ParseScore([]byte(s)); !ok {
			t.Errorf("%q refused", s)
		}
	}
	for _, s := range []string{"", "nan", "abc", " 1", "1 ", "1_0", "1e400"} {
		if _, ok := ParseScore([]byte(s)); ok {
			t.Errorf("%q accepted", s)
		}
	}
}

// modelValue is a random value for the model tests: short numbers, and
// with long set, now and then one past CompactMaxValue (which moves a
// compact structure to its full form).
func modelValue(r *rand.Rand, long bool) string {
	v := strconv.Itoa(r.IntN(1000))
	if long && r.IntN(200) == 0 {
		v += strings.Repeat("x", CompactMaxValue)
	}
	return v
}

// TestListAgainstModel runs random operations on a List and a slice side
// by side: a list that stays compact, one that outgrows CompactMaxBytes,
// and one that meets a long item; every step checks the length, an item
// at random and, now and then, a walk in each direction and the size.
func TestListAgainstModel(t *testing.T) {
	for _, tc := range []struct {
		name      string
		long      bool
		pushBias  int
		wantFull  bool
		stepCount int
	}{{"compact", false, 0, false, 30000}, {"grows", false, 16, true, 30000}, {"long item", true, 0, true, 30000}} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			l := NewList()
			var m []string
			for step := 0; step < tc.stepCount; step++ {
				v := modelValue(r, tc.long)
				op := r.IntN(8 + tc.pushBias)
				if op >= 8 {
					op = 2
				}
				if !tc.long && tc.pushBias == 0 && len(m) > 300 && op < 3 {
					op = 3 // keep the compact case small
				}
				switch op {
				case 0:
					l.PushFront(v)
					m = append([]string{v}, m...)
				case 1, 2:
					l.PushBack(v)
					m = append(m, v)
				case 3:
					if len(m) > 0 {
						if l.PopFront() != m[0] {
							t.Fatalf("step %d: PopFront", step)
						}
						m = m[1:]
					}
				case 4:
					if len(m) > 0 {
						if l.PopBack() != m[len(m)-1] {
							t.Fatalf("step %d: PopBack", step)
						}
						m = m[:len(m)-1]
					}
				case 5:
					i := r.IntN(len(m) + 1)
					if r.IntN(2) == 0 && len(m) > 0 {
						i = r.IntN(len(m))
						l.SetAt(i, v)
						m[i] = v
						break
					}
					l.InsertAt(i, v)
					m = slices.Insert(m, i, v)
				case 6:
					l.Filter(func(_ int, s string) bool { return s != v })
					m = slices.DeleteFunc(m, func(s string) bool { return s == v })
				case 7:
					if len(m) > 0 && r.IntN(10+1000*tc.pushBias) == 0 {
						a, b := r.IntN(len(m)), r.IntN(len(m))
						if a > b {
							a, b = b, a
						}
						l.Trim(a, b)
						m = slices.Clone(m[a : b+1])
					}
				}
				if l.Len() != len(m) {
					t.Fatalf("step %d: len", step)
				}
				if len(m) > 0 {
					i := r.IntN(len(m))
					if l.At(i) != m[i] {
						t.Fatalf("step %d: At(%d)", step, i)
					}
				}
				if step%97 == 0 {
					for i := range m {
						if l.At(i) != m[i] {
							t.Fatalf("step %d: walk up At(%d)", step, i)
						}
					}
					for i := len(m) - 1; i >= 0; i-- {
						if l.At(i) != m[i] {
							t.Fatalf("step %d: walk down At(%d)", step, i)
						}
					}
					checkListSize(t, l, m)
				}
			}
			checkListSize(t, l, m)
			if l.compact() == tc.wantFull {
				t.Fatalf("compact at the end: %v", l.compact())
			}
		})
	}
}

// checkListSize checks Size against what the list's form holds.
func checkListSize(t *testing.T, l *List, m []string) {
	t.Helper()
	want := int64(48)
	if l.compact() {
		want = listCompactBase + int64(cap(l.lp))
		n := 0
		for _, s := range m {
			n += len(s) + 1 // the XOR'd length byte, then the bytes
		}
		if len(m) > 0 {
			n++ // the final byte: the last item's length
		}
		if n != len(l.lp) || n > CompactMaxBytes || len(m) > listCompactMaxItems {
			t.Fatalf("compact list of %d bytes, want %d", len(l.lp), n)
		}
	} else {
		for _, s := range m {
			want += listItemCost + int64(len(s))
		}
	}
	if l.Size() != want {
		t.Fatalf("size %d want %d", l.Size(), want)
	}
}

// TestHashAgainstModel runs random sets and deletes on a Hash and a map
// side by side: a hash that stays compact (at most CompactMaxHashEntries
// fields), one that outgrows it, one that meets a long value.
func TestHashAgainstModel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fields   int
		long     bool
		wantFull bool
	}{{"compact", CompactMaxHashEntries, false, false}, {"grows", 2 * CompactMaxHashEntries, false, true}, {"long value", 100, true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, 6))
			h := NewHash()
			m := map[string]string{}
			for step := 0; step < 20000; step++ {
				f := strconv.Itoa(r.IntN(tc.fields))
				if r.IntN(3) == 0 {
					_, had := m[f]
					if h.Delete(f) != had {
						t.Fatalf("step %d: Delete", step)
					}
					delete(m, f)
				} else {
					v := modelValue(r, tc.long)
					_, had := m[f]
					if h.Set(f, v) == had {
						t.Fatalf("step %d: Set", step)
					}
					m[f] = v
				}
				if h.Len() != len(m) {
					t.Fatalf("step %d: len", step)
				}
				if step%101 == 0 {
					checkHash(t, h, m)
				}
			}
			checkHash(t, h, m)
			if h.compact() == tc.wantFull {
				t.Fatalf("compact at the end: %v", h.compact())
			}
		})
	}
}

// checkHash checks h's fields (Each, At, Get) and Size against m.
func checkHash(t *testing.T, h *Hash, m map[string]string) {
	t.Helper()
	got := map[string]string{}
	h.Each(func(f, v string) bool { got[f] = v; return true })
	for i := range h.Len() {
		if f := h.At(i); got[f.Field] != f.Value {
			t.Fatalf("At(%d) = %v, Each gave %q", i, f, got[f.Field])
		}
	}
	want := int64(64)
	for f, v := range m {
		if w, _ := h.Get(f); w != v {
			t.Fatalf("Get(%s)", f)
		}
		want += hashFieldCost + int64(len(f)+len(v))
	}
	if h.compact() {
		want = h.compactSize()
		if h.blk() != nil {
			want = hashCompactBase + int64(allocSize(hashHeader+h.meta().cp()))
		}
	} else {
		// The map's empty places its peak left and the spare capacity of
		// items are charged too.
		f := h.full()
		if f.peak < len(f.items) || (f.peak > hashShrinkMin && len(f.items) < f.peak/4) {
			t.Fatalf("peak %d for %d fields", f.peak, len(f.items))
		}
		want += int64(f.peak-len(f.items))*hashMapCost + int64(cap(f.items)-len(f.items))*hashItemCost
	}
	if len(got) != len(m) || h.Size() != want {
		t.Fatalf("each/size mismatch: %d fields of %d, size %d want %d", len(got), len(m), h.Size(), want)
	}
}

func TestImagesRoundTrip(t *testing.T) {
	h := NewHash()
	h.Set("a", "1")
	h.Set("", "empty field")
	l := NewList()
	l.PushBack("x")
	l.PushFront("")
	z := NewZSet()
	z.Set("m", math.Inf(-1))
	z.Set("n", 2.5)
	h2, err := DecodeHash(h.AppendImage(nil))
	if err != nil || h2.Len() != 2 || h2.Size() != h.Size() {
		t.Fatalf("hash: %v", err)
	}
	if v, _ := h2.Get(""); v != "empty field" {
		t.Fatal("hash field lost")
	}
	l2, err := DecodeList(l.AppendImage(nil))
	if err != nil || l2.Len() != 2 || l2.At(0) != "" || l2.At(1) != "x" {
		t.Fatalf("list: %v", err)
	}
	z2, err := DecodeZSet(z.AppendImage(nil))
	if err != nil || z2.Len() != 2 {
		t.Fatalf("zset: %v", err)
	}
	if s, _ := z2.Score("m"); !math.IsInf(s, -1) {
		t.Fatal("zset score lost")
	}
	// Every truncation of an image is refused, never a panic.
	for _, img := range [][]byte{h.AppendImage(nil), l.AppendImage(nil), z.AppendImage(nil)} {
		for i := 0; i < len(img); i++ {
			_, e1 := DecodeHash(img[:i])
			_, e2 := DecodeList(img[:i])
			_, e3 := DecodeZSet(img[:i])
			if e1 == nil && e2 == nil && e3 == nil && i > 0 {
				t.Fatalf("truncated image %q accepted by every decoder", img[:i])
			}
		}
	}
}

func FuzzDecodeImages(f *testing.F) {
	f.Add([]byte{1, 1, 'a', 1, 'b'})
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := DecodeHash(b); err == nil {
			if string(h.AppendImage(nil)) != string(b) {
				t.Fatal("hash image does not round-trip")
			}
		}
		DecodeList(b)
		DecodeZSet(b)
	})
}

// A clone has the original's content (and at most its Size) and shares no
// state with it: changing either leaves the other as it was; in the
// compact forms and in the full ones.
func TestCloneIndependent(t *testing.T) {
	for _, n := range []int{20, 300} { // compact, then full hashes
		t.Run(strconv.Itoa(n), func(t *testing.T) { cloneIndependent(t, n) })
	}
}

func cloneIndependent(t *testing.T, size int) {
	h, l, z := NewHash(), NewList(), NewZSet()
	if size > CompactMaxEntries {
		l.PushBack(strings.Repeat("x", CompactMaxValue+1)) // the ring
	}
	for i := range size {
		s := strconv.Itoa(i)
		h.Set("f"+s, "v"+s)
		l.PushBack("e" + s)
		if i%3 == 0 {
			l.PopFront() // a wrapped ring
		}
		z.Set("m"+s, float64(i%17))
	}
	type obj interface {
		AppendImage([]byte) []byte
		Size() int64
		Len() int
	}
	pairs := []struct {
		orig, clone obj
		mutate      func()
	}{
		{h, h.Clone(), func() { h.Set("f1", "changed"); h.Delete("f2"); h.Set("new", "x") }},
		{l, l.Clone(), func() { l.SetAt(0, "changed"); l.PushFront("new"); l.PopBack() }},
		{z, z.Clone(), func() { z.Set("m1", 99); z.Remove("m2"); z.Set("new", -1) }},
	}
	for i, p := range pairs {
		before := string(p.orig.AppendImage(nil))
		if got := string(p.clone.AppendImage(nil)); got != before || p.clone.Size() > p.orig.Size() || p.clone.Len() != p.orig.Len() {
			t.Fatalf("pair %d: clone differs: size %d vs %d, len %d vs %d", i, p.clone.Size(), p.orig.Size(), p.clone.Len(), p.orig.Len())
		}
		p.mutate()
		if string(p.orig.AppendImage(nil)) == before {
			t.Fatalf("pair %d: the mutation changed nothing", i)
		}
		if got := string(p.clone.AppendImage(nil)); got != before {
			t.Fatalf("pair %d: changing the original changed the clone", i)
		}
	}
	// the clones are full structures: they take writes of their own
	hc, zc := h.Clone(), z.Clone()
	hc.Set("only-in-clone", "1")
	zc.Set("only-in-clone", 1)
	if _, ok := h.Get("only-in-clone"); ok {
		t.Fatal("a write to the hash clone reached the original")
	}
	if _, ok := z.Score("only-in-clone"); ok {
		t.Fatal("a write to the zset clone reached the original")
	}
	if r, ok := zc.Rank("only-in-clone"); !ok || r < 0 {
		t.Fatal("the zset clone's skiplist does not rank a new member")
	}
}

// The compact forms' own allocations are what Size charges for them: each
// struct's size rounded to the allocator's class. A Hash's struct is one
// word its holder keeps in place (the store's object slot, which the store
// charges): Size counts nothing for it.
func TestCompactBases(t *testing.T) {
	if unsafe.Sizeof(Hash{}) != unsafe.Sizeof(unsafe.Pointer(nil)) || hashCompactBase != 0 {
		t.Errorf("Hash is %d bytes, its base %d: want one word and 0", unsafe.Sizeof(Hash{}), hashCompactBase)
	}
	for _, c := range []struct {
		name       string
		size, base int
	}{
		{"List", int(unsafe.Sizeof(List{})), listCompactBase},
		{"ZSet", int(unsafe.Sizeof(ZSet{})), zsetCompactBase},
	} {
		if allocSize(c.size) != c.base {
			t.Errorf("%s is %d bytes (allocated %d), its base %d", c.name, c.size, allocSize(c.size), c.base)
		}
	}
}

// FuzzCompactAgainstModel drives a Hash and a List through operations read
// from the input (pushes, pops, inserts, sets, trims, filters, deletes,
// values long enough to leave the compact form) beside plain models, and
// checks every element after each operation.
func FuzzCompactAgainstModel(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 200, 3, 0, 255, 7})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, h := NewList(), NewHash()
		var lm []string
		hm := map[string]string{}
		for len(b) >= 2 {
			op, arg := b[0], b[1]
			b = b[2:]
			v := strconv.Itoa(int(arg))
			if arg > 250 {
				v = strings.Repeat(v, 30) // past CompactMaxValue
			}
			i := 0
			if len(lm) > 0 {
				i = int(arg) % len(lm)
			}
			switch op % 9 {
			case 0:
				l.PushFront(v)
				lm = append([]string{v}, lm...)
			case 1:
				l.PushBack(v)
				lm = append(lm, v)
			case 2:
				if len(lm) > 0 {
					if got := l.PopFront(); got != lm[0] {
						t.Fatalf("PopFront %q want %q", got, lm[0])
					}
					lm = lm[1:]
				}
			case 3:
				if len(lm) > 0 {
					if got := l.PopBack(); got != lm[len(lm)-1] {
						t.Fatalf("PopBack %q", got)
					}
					lm = lm[:len(lm)-1]
				}
			case 4:
				l.InsertAt(i, v)
				lm = slices.Insert(lm, i, v)
			case 5:
				if len(lm) > 0 {
					l.SetAt(i, v)
					lm[i] = v
				}
			case 6:
				if len(lm) > 0 {
					j := i + int(op)%(len(lm)-i)
					l.Trim(i, j)
					lm = slices.Clone(lm[i : j+1])
				}
			case 7:
				l.Filter(func(_ int, s string) bool { return s != v })
				lm = slices.DeleteFunc(lm, func(s string) bool { return s == v })
			case 8:
				f := strconv.Itoa(int(op))
				if arg%3 == 0 {
					_, had := hm[f]
					if h.Delete(f) != had {
						t.Fatal("Delete")
					}
					delete(hm, f)
				} else {
					_, had := hm[f]
					if h.Set(f, v) == had {
						t.Fatal("Set")
					}
					hm[f] = v
				}
			}
			if l.Len() != len(lm) {
				t.Fatalf("list len %d want %d", l.Len(), len(lm))
			}
			for k := range lm {
				if l.At(k) != lm[k] {
					t.Fatalf("At(%d) = %q want %q", k, l.At(k), lm[k])
				}
			}
			checkListSize(t, l, lm)
			checkHash(t, h, hm)
		}
	})
}

// allocSize agrees with the runtime's size classes: append rounds a fresh
// allocation's capacity up to its class.
func TestAllocSizeMatchesRuntime(t *testing.T) {
	for n := 1; n <= 40000; n += 1 + n/64 {
		got := allocSize(n)
		want := cap(append([]byte(nil), make([]byte, n)...))
		if got != want {
			t.Fatalf("allocSize(%d) = %d, the runtime rounds to %d", n, got, want)
		}
	}
}

// TestZSetCompactScoreCodes: every score a compact set can hold comes back
// bit for bit (integers in 2 or 6 bytes, -0 as 0, fractions, infinities and the
// edges between the widths), in order both ways, and the same as the full
// form answers.
func TestZSetCompactScoreCodes(t *testing.T) {
	scores := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, math.Inf(1), math.Inf(-1),
		math.MaxInt16, math.MaxInt16 + 1, math.MinInt16, math.MinInt16 - 1,
		1<<47 - 1, 1 << 47, -(1<<47 - 1), -(1 << 47), 1700000000000, -1700000000000,
		1e300, -1e-300, 4503599627370497, 123456.75, math.SmallestNonzeroFloat64}
	r := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 200; round++ {
		z, full := NewZSet(), NewZSet()
		full.toFull()
		for i := 0; i < 1+r.IntN(CompactMaxEntries); i++ {
			s := scores[r.IntN(len(scores))]
			if r.IntN(3) == 0 {
				s = float64(r.Int64N(1<<50) - 1<<49)
			}
			m := "m" + strconv.Itoa(r.IntN(150))
			z.Set(m, s)
			if s == 0 {
				s = 0 // the compact form stores -0 as 0, as Redis's listpack
			}
			full.Set(m, s)
		}
		if !z.compact() {
			t.Fatalf("round %d: left the compact form", round)
		}
		var got, want []Element
		z.RangeByRank(0, z.Len()-1, false, func(m string, s float64) bool { got = append(got, Element{m, s}); return true })
		full.RangeByRank(0, full.Len()-1, false, func(m string, s float64) bool { want = append(want, Element{m, s}); return true })
		same := func(a, b []Element) bool {
			return slices.EqualFunc(a, b, func(x, y Element) bool {
				return x.Member == y.Member && math.Float64bits(x.Score) == math.Float64bits(y.Score)
			})
		}
		if !same(got, want) {
			t.Fatalf("round %d: ascending\n got %v\nwant %v", round, got, want)
		}
		got = got[:0]
		z.RangeByRank(0, z.Len()-1, true, func(m string, s float64) bool { got = append(got, Element{m, s}); return true })
		slices.Reverse(got)
		if !same(got, want) {
			t.Fatalf("round %d: descending", round)
		}
		for _, e := range want {
			if s, ok := z.Score(e.Member); !ok || math.Float64bits(s) != math.Float64bits(e.Score) {
				t.Fatalf("round %d: Score(%s) = %v, want %v", round, e.Member, s, e.Score)
			}
		}
		img := z.AppendImage(nil)
		if string(img) != string(full.AppendImage(nil)) {
			t.Fatalf("round %d: images differ between the forms", round)
		}
	}
	// The widths: a millisecond timestamp takes 6 bytes, a small integer 2,
	// a fraction 8, -0 (stored as 0) 2 (plus the head byte and the member).
	for _, c := range []struct {
		s    float64
		size int
	}{{1700000000000, 1 + 2 + 6}, {7, 1 + 2 + 2}, {0.25, 1 + 2 + 8}, {math.Copysign(0, -1), 1 + 2 + 2}} {
		z := NewZSet()
		z.Set("ab", c.s)
		if len(z.lp) != c.size {
			t.Errorf("score %v: element of %d bytes, want %d", c.s, len(z.lp), c.size)
		}
	}
}

// TestListCompactItemLimit: a compact list of empty items stops at
// listCompactMaxItems (its places must fit the cursor's 12 bits) and walks
// both ways through every item up to there; a 100-item list of "itemN"
// takes one byte per item plus one (691 bytes, in the 704-byte class).
func TestListCompactItemLimit(t *testing.T) {
	l := NewList()
	for i := 0; i < listCompactMaxItems; i++ {
		l.PushBack("")
	}
	if !l.compact() || len(l.lp) != listCompactMaxItems+1 {
		t.Fatalf("compact %v, %d bytes", l.compact(), len(l.lp))
	}
	l.SetAt(listCompactMaxItems-1, "last")
	l.SetAt(0, "first")
	for i := listCompactMaxItems - 1; i >= 0; i-- {
		want := ""
		switch i {
		case 0:
			want = "first"
		case listCompactMaxItems - 1:
			want = "last"
		}
		if got := l.At(i); got != want {
			t.Fatalf("At(%d) = %q", i, got)
		}
	}
	if l.PopBack() != "last" || l.PopFront() != "first" || !l.compact() {
		t.Fatal("pops")
	}
	l.PushBack("")
	l.PushBack("")
	if !l.compact() {
		t.Fatal("left the compact form at the limit")
	}
	l.PushBack("")
	if l.compact() || l.Len() != listCompactMaxItems+1 {
		t.Fatalf("compact %v with %d items", l.compact(), l.Len())
	}
	l = NewList()
	for i := 0; i < 100; i++ {
		l.PushBack("item" + strconv.Itoa(i))
	}
	if len(l.lp) != 691 {
		t.Fatalf("100 items take %d bytes", len(l.lp))
	}
}

// TestCompactImagesMatchFull: the compact forms' one-pass images (the
// hash's bytes copied, the list's lengths decoded) are byte for byte the
// full forms' images of the same content.
func TestCompactImagesMatchFull(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 300; round++ {
		h, l := NewHash(), NewList()
		for i := r.IntN(40); i > 0; i-- {
			v := strings.Repeat("v", r.IntN(CompactMaxValue+1))
			h.Set("f"+strconv.Itoa(r.IntN(50)), v)
			if r.IntN(2) == 0 {
				l.PushFront(v)
			} else {
				l.PushBack(v)
			}
		}
		if !h.compact() || !l.compact() {
			t.Fatal("left the compact form")
		}
		hf, lf := h.Clone(), l.Clone()
		hf.toFull()
		lf.toFull()
		if string(h.AppendImage([]byte{1})) != string(hf.AppendImage([]byte{1})) {
			t.Fatalf("round %d: hash images differ", round)
		}
		if string(l.AppendImage([]byte{1})) != string(lf.AppendImage([]byte{1})) {
			t.Fatalf("round %d: list images differ", round)
		}
	}
}

// TestHashOnePointerForms: a Hash keeps its compact block or its full form
// behind one pointer (an 8-byte struct its holder keeps in place). A
// 10-field hash's Size is its block's size class (144: 8 header bytes and
// 10 pairs of a one-byte head and 12 bytes); the block and the full forms stay
// alive and intact through collections (the garbage collector follows the
// unsafe.Pointer), through the change of form, Clone of either form, and
// DataAddr answers the bytes only while compact.
func TestHashOnePointerForms(t *testing.T) {
	h := NewHash()
	for i := range 10 {
		h.Set("field"+strconv.Itoa(i), "value"+strconv.Itoa(i))
	}
	if got, ln := h.Size(), h.meta().ln(); got != 144 || ln != 130 {
		t.Fatalf("10-field hash Size %d with %d bytes of pairs, want %d and 130", got, ln, 144)
	}
	if h.DataAddr() == nil || h.DataAddr() != unsafe.Add(unsafe.Pointer(unsafe.SliceData(h.lp())), -hashHeader) {
		t.Fatal("DataAddr of a compact hash")
	}
	// The largest compact hash fits m's fields.
	big, bm := NewHash(), map[string]string{}
	for i := range CompactMaxHashEntries {
		f := fmt.Sprintf("%064d", i)
		v := strings.Repeat("v", CompactMaxValue)
		big.Set(f, v)
		bm[f] = v
	}
	if !big.compact() || big.meta().ln() != CompactMaxHashEntries*(3+2*CompactMaxValue) || big.Size() != int64(hashCompactBase+hashHeader+big.meta().cp()) {
		t.Fatalf("largest compact hash: compact %v, %d bytes, Size %d", big.compact(), big.meta().ln(), big.Size())
	}
	checkHash(t, big, bm)
	big.Set("one more", "")
	bm["one more"] = ""
	if big.compact() {
		t.Fatal("a field past the limit left the hash compact")
	}
	checkHash(t, big, bm)
	r := rand.New(rand.NewPCG(7, 8))
	hs := make([]*Hash, 300)
	ms := make([]map[string]string, len(hs))
	for i := range hs {
		hs[i], ms[i] = NewHash(), map[string]string{}
	}
	for round := range 40 {
		for i, h := range hs {
			f := "f" + strconv.Itoa(r.IntN(20+i))
			v := strings.Repeat("v", r.IntN(CompactMaxValue+1))
			if i%7 == 0 && round == 20 {
				v = strings.Repeat("x", CompactMaxValue+1) // to the full form
			}
			if r.IntN(4) == 0 {
				h.Delete(f)
				delete(ms[i], f)
			} else {
				h.Set(f, v)
				ms[i][f] = v
			}
		}
		clones := make([]*Hash, len(hs))
		for i, h := range hs {
			clones[i] = h.Clone()
		}
		runtime.GC()
		for i, h := range hs {
			checkHash(t, h, ms[i])
			checkHash(t, clones[i], ms[i])
			if h.compact() && h.Len() > 0 && h.DataAddr() != unsafe.Add(unsafe.Pointer(&h.lp()[0]), -hashHeader) || !h.compact() && h.DataAddr() != nil {
				t.Fatalf("hash %d: compact %v, DataAddr %p", i, h.compact(), h.DataAddr())
			}
		}
	}
}

// State written by the encoding before b5f165a (every compact score an
// 8-byte float64), by the generator in TestZSetOldEncodingState's comment:
// an image of 27 members with the scores of oldScores (member "m%02d" has
// oldScores[i]), the journal records of five writes after it, and the
// image after those writes.
var (
	oldZImage = mustHex("1b000000000000f0ff036d303700000000000040c3036d3138000000000000e0" +
		"c2036d3135c0ffffffffffdfc2036d313400008056febc78c2036d3231000000" +
		"002000e0c0036d3131000000000000e0c0036d3130000000000000f0bf036d30" +
		"33000000000000e0bf036d303559f3f8c21f6ea581036d323300000000000000" +
		"00036d30300000000000000080036d30310100000000000000036d3236000000" +
		"000000e03f036d3034000000000000f03f036d303200000000c0ffdf40036d30" +
		"38000000000000e040036d3039000000000c24fe40036d323500008056febc78" +
		"42036d3230c0ffffffffffdf42036d3132000000000000e042036d3133010000" +
		"0000003043036d3234ffffffffffff3f43036d31390000000000004043036d31" +
		"360100000000004043036d31379c7500883ce4377e036d3232000000000000f0" +
		"7f036d3036")
	oldZRecs = mustHex("53000000000000e042036d3030530000000000000080036d3032530000000000" +
		"0040c3036e6577530000000000001c40036d303544036d3036")
	oldZImage2 = mustHex("1b000000000000f0ff036d303700000000000040c3036d313800000000000040" +
		"c3036e6577000000000000e0c2036d3135c0ffffffffffdfc2036d3134000080" +
		"56febc78c2036d3231000000002000e0c0036d3131000000000000e0c0036d31" +
		"30000000000000f0bf036d303359f3f8c21f6ea581036d323300000000000000" +
		"80036d30310000000000000080036d30320100000000000000036d3236000000" +
		"000000e03f036d30340000000000001c40036d303500000000c0ffdf40036d30" +
		"38000000000000e040036d3039000000000c24fe40036d323500008056febc78" +
		"42036d3230c0ffffffffffdf42036d3132000000000000e042036d3030000000" +
		"000000e042036d31330100000000003043036d3234ffffffffffff3f43036d31" +
		"390000000000004043036d31360100000000004043036d31379c7500883ce437" +
		"7e036d3232")
	oldScores = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, math.Inf(1), math.Inf(-1),
		math.MaxInt16, math.MaxInt16 + 1, math.MinInt16, math.MinInt16 - 1,
		1<<47 - 1, 1 << 47, -(1<<47 - 1), -(1 << 47), 1 << 53, 1<<53 + 2, -(1 << 53), 1<<53 - 1,
		1700000000000, -1700000000000, 1e300, -1e-300, 4503599627370497, 123456.75, math.SmallestNonzeroFloat64}
)

// zPositiveZeros is the zset image img with every -0 score written as 0
// (what a compact set images after loading it).
func zPositiveZeros(img []byte) []byte {
	out := slices.Clone(img)
	r := reader{b: out}
	n := r.count(9)
	for range n {
		if s := math.Float64frombits(binary.LittleEndian.Uint64(r.b)); s == 0 {
			binary.LittleEndian.PutUint64(r.b, 0)
		}
		r.b = r.b[8:]
		r.str()
	}
	return out
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// TestZSetOldEncodingState: a sorted set persisted by the old compact
// encoding (8-byte scores, before b5f165a; the on-disk image and journal
// formats did not change with the in-memory encoding) loads into the
// short-score form bit for bit (-0 as 0, infinities, the 2^15, 2^47 and 2^53
// edges, fractions), in order, replays the old journal records to the old
// image after them, and images back to the very bytes the old code wrote.
// The generator was, at b5f165a^: NewZSet; Set("m%02d", oldScores[i]) for
// each i; AppendImage; StartJournal; Set("m00", 1<<47), Set("m02", -0),
// Set("new", -(1<<53)), Set("m05", 7), Remove("m06"); TakeJournal;
// AppendImage.
func TestZSetOldEncodingState(t *testing.T) {
	z, err := DecodeZSet(oldZImage)
	if err != nil {
		t.Fatal(err)
	}
	if !z.compact() || z.Len() != len(oldScores) {
		t.Fatalf("compact %v, %d members", z.compact(), z.Len())
	}
	for i, want := range oldScores {
		if want == 0 {
			want = 0 // -0 loads as 0 into the compact form, as Redis's listpack
		}
		s, ok := z.Score(fmt.Sprintf("m%02d", i))
		if !ok || math.Float64bits(s) != math.Float64bits(want) {
			t.Fatalf("m%02d: score %v (%x), want %v", i, s, math.Float64bits(s), want)
		}
	}
	var prev Element
	z.RangeByRank(0, z.Len()-1, false, func(m string, s float64) bool {
		if prev.Member != "" && !zLess(prev.Score, prev.Member, s, m) {
			t.Fatalf("order: %v before %v", prev, Element{m, s})
		}
		prev = Element{m, s}
		return true
	})
	if got := z.AppendImage(nil); !bytes.Equal(got, zPositiveZeros(oldZImage)) {
		t.Fatalf("image differs from the old code's:\n got %x\nwant %x", got, oldZImage)
	}
	if err := ApplyJournal(z, oldZRecs); err != nil {
		t.Fatal(err)
	}
	if got := z.AppendImage(nil); !bytes.Equal(got, zPositiveZeros(oldZImage2)) {
		t.Fatalf("after the old journal:\n got %x\nwant %x", got, oldZImage2)
	}
	if s, _ := z.Score("m02"); math.Signbit(s) || s != 0 {
		t.Fatalf("m02 = %v, want 0 (a -0 record applied to a compact set)", s)
	}
	// The shorter encoding took what it could: this set is fewer bytes
	// than the old 8-byte form (1 + len + 8 + 1 per element).
	if old := 27 * (1 + 3 + 8 + 1); len(z.lp) >= old {
		t.Fatalf("%d bytes, the old form took %d", len(z.lp), old)
	}
	// A NaN score in an image is refused, as Redis refuses NaN.
	bad := slices.Clone(oldZImage)
	binary.LittleEndian.PutUint64(bad[1:], math.Float64bits(math.NaN()))
	if _, err := DecodeZSet(bad); err == nil {
		t.Fatal("an image with a NaN score decoded")
	}
}

// TestHashPresize: a new hash written with all its fields at once (HSET
// of a new key) allocates its compact bytes once, to the same size class
// and the same content as field by field (which allocates at each class on
// the way: 7 times for 10 fields); Presize does nothing to a hash that
// has bytes already, is full, or will not stay compact.
func TestHashPresize(t *testing.T) {
	fill := func(h *Hash) {
		for i := range 10 {
			h.SetTransient("field"+strconv.Itoa(i), "value"+strconv.Itoa(i))
		}
	}
	plain := NewHash()
	fill(plain)
	fields := make([]string, 10)
	for i := range fields {
		fields[i] = "field" + strconv.Itoa(i)
	}
	var h *Hash
	allocs := testing.AllocsPerRun(100, func() {
		h = NewHash()
		h.Presize(10, 120, 6)
		for i := range 10 {
			h.SetTransient(fields[i], "value0") // no strconv in the count
		}
	})
	if allocs != 2 { // the struct and the bytes
		t.Fatalf("%v allocations for a presized 10-field hash, want 2", allocs)
	}
	h = NewHash()
	h.Presize(10, 120, 6)
	fill(h)
	if h.Size() != plain.Size() || h.Size() != 144 || string(h.AppendImage(nil)) != string(plain.AppendImage(nil)) {
		t.Fatalf("presized: Size %d, field by field %d", h.Size(), plain.Size())
	}
	for _, c := range []struct {
		name string
		h    func() *Hash
		args [3]int
	}{
		{"has bytes", func() *Hash { h := NewHash(); h.Set("a", "b"); return h }, [3]int{10, 120, 6}},
		{"full", func() *Hash { h := NewHash(); h.Set("a", strings.Repeat("b", 65)); return h }, [3]int{10, 120, 6}},
		{"long value", NewHash, [3]int{10, 120, CompactMaxValue + 1}},
		{"many fields", NewHash, [3]int{CompactMaxHashEntries + 1, 2000, 2}},
	} {
		h := c.h()
		size := h.Size()
		h.Presize(c.args[0], c.args[1], c.args[2])
		if h.Size() != size {
			t.Errorf("%s: Presize changed Size %d -> %d", c.name, size, h.Size())
		}
	}
}

// TestListZSetPresize: a new list pushed with 100 items at once, and a new
// sorted set given 100 members at once (scores of every width), allocate
// their compact bytes once, to the same size class and content as item by
// item; Presize does nothing where the values will not stay compact or
// bytes are there already.
func TestListZSetPresize(t *testing.T) {
	items := make([]string, 100)
	total := 0
	for i := range items {
		items[i] = "item" + strconv.Itoa(i)
		total += len(items[i])
	}
	plainL := NewList()
	for _, s := range items {
		plainL.PushTransient(s, false)
	}
	var l *List
	if a := testing.AllocsPerRun(50, func() {
		l = NewList()
		l.Presize(len(items), total, 6)
		for _, s := range items {
			l.PushTransient(s, false)
		}
	}); a != 2 {
		t.Fatalf("%v allocations for a presized 100-item list, want 2", a)
	}
	if l.Size() != plainL.Size() || string(l.AppendImage(nil)) != string(plainL.AppendImage(nil)) {
		t.Fatalf("presized list: Size %d, item by item %d", l.Size(), plainL.Size())
	}
	scores := make([]float64, 100)
	members := make([]string, 100)
	for i := range scores {
		members[i] = "member" + strconv.Itoa(i)
		scores[i] = []float64{1700000000000 + float64(i), float64(i), 0.5 + float64(i), math.Copysign(0, -1)}[i%4]
	}
	plainZ := NewZSet()
	for i := range scores {
		plainZ.SetTransient(members[i], scores[i])
	}
	mlen := func(j int) int { return len(members[j]) }
	var z *ZSet
	if a := testing.AllocsPerRun(50, func() {
		z = NewZSet()
		z.Presize(scores, mlen)
		for i := range scores {
			z.SetTransient(members[i], scores[i])
		}
	}); a != 2 {
		t.Fatalf("%v allocations for a presized 100-member set, want 2", a)
	}
	if z.Size() != plainZ.Size() || string(z.AppendImage(nil)) != string(plainZ.AppendImage(nil)) {
		t.Fatalf("presized set: Size %d, member by member %d", z.Size(), plainZ.Size())
	}
	// No-ops.
	l = NewList()
	l.Presize(10, 10*(CompactMaxValue+1), CompactMaxValue+1)
	z = NewZSet()
	z.Presize(make([]float64, CompactMaxEntries+1), func(int) int { return 1 })
	z2 := NewZSet()
	z2.Presize([]float64{1}, func(int) int { return CompactMaxValue + 1 })
	l2 := NewList()
	l2.PushBack("x")
	size := l2.Size()
	l2.Presize(2, 10, 5)
	if cap(l.lp) != 0 || cap(z.lp) != 0 || cap(z2.lp) != 0 || l2.Size() != size {
		t.Fatal("Presize allocated for values that will not stay compact, or replaced bytes")
	}
}
