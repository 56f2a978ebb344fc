package kinds

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// checkSkiplist walks every level of z's skiplist: each pointer's span is
// the ranks it crosses, a last pointer's span the elements after its node,
// prev links and tail agree, and the member map holds every node's score.
func checkSkiplist(t *testing.T, z *ZSet) {
	t.Helper()
	rankOf := map[*zNode]int{}
	var prev *zNode
	r := 0
	for x := z.head.lv[0].next; x != nil; x = x.lv[0].next {
		r++
		rankOf[x] = r
		if x.prev != prev {
			t.Fatalf("node %d: prev wrong", r)
		}
		if s, ok := z.dict[x.member]; !ok || math.Float64bits(s) != math.Float64bits(x.score) {
			t.Fatalf("node %d (%q): map has %v, %v", r, x.member, s, ok)
		}
		prev = x
	}
	if r != z.n || len(z.dict) != z.n || z.tail != prev {
		t.Fatalf("%d nodes, n %d, map %d, tail ok %v", r, z.n, len(z.dict), z.tail == prev)
	}
	for i := 0; i < z.level; i++ {
		x, rank := z.head, 0
		for {
			if x.lv[i].next == nil {
				if x.lv[i].span != z.n-rank {
					t.Fatalf("level %d: last span %d after rank %d of %d", i, x.lv[i].span, rank, z.n)
				}
				break
			}
			rank += x.lv[i].span
			x = x.lv[i].next
			if rankOf[x] != rank {
				t.Fatalf("level %d: span reaches rank %d, node is %d", i, rank, rankOf[x])
			}
		}
	}
}

// TestZSetLoadSorted: a set filled by LoadSorted equals one filled by Set
// of each element (members, scores, order, ranks, Size, encoding), its
// skiplist's spans are right, and both stay equal through the same
// random writes after. LoadSorted refuses a non-empty set, a small
// result (which stays compact) and elements out of order or repeated. A
// wrong span or a missing prev link fails here (Rank, At, the writes).
func TestZSetLoadSorted(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 3))
	for _, n := range []int{CompactMaxEntries + 1, 200, 1000, 20000} {
		var elems []Element
		seen := map[string]bool{}
		for len(elems) < n {
			m := "m" + strconv.Itoa(r.IntN(4*n))
			if seen[m] {
				continue
			}
			seen[m] = true
			// no -0: Set's first CompactMaxEntries go through the compact
			// form, which stores -0 as 0 (checked apart below)
			s := []float64{float64(r.IntN(10)), r.NormFloat64(), math.Inf(1), math.Inf(-1), 0}[r.IntN(5)]
			elems = append(elems, Element{Member: m, Score: s})
		}
		slices.SortFunc(elems, func(a, b Element) int {
			switch {
			case zLess(a.Score, a.Member, b.Score, b.Member):
				return -1
			case zLess(b.Score, b.Member, a.Score, a.Member):
				return 1
			}
			return 0
		})
		for i := 1; i < len(elems); i++ {
			if !zLess(elems[i-1].Score, elems[i-1].Member, elems[i].Score, elems[i].Member) {
				t.Fatalf("test setup: elements %d, %d out of order", i-1, i)
			}
		}
		loaded, set := NewZSet(), NewZSet()
		if !loaded.LoadSorted(elems) {
			t.Fatalf("n=%d: LoadSorted refused", n)
		}
		for _, e := range elems {
			set.Set(e.Member, e.Score)
		}
		same := func(what string) {
			t.Helper()
			checkSkiplist(t, loaded)
			if loaded.Len() != set.Len() || loaded.Size() != set.Size() || loaded.Encoding() != set.Encoding() {
				t.Fatalf("n=%d %s: Len %d/%d Size %d/%d %s/%s", n, what, loaded.Len(), set.Len(), loaded.Size(), set.Size(), loaded.Encoding(), set.Encoding())
			}
			var a, b []Element
			loaded.Each(func(m string, s float64) bool { a = append(a, Element{m, s}); return true })
			set.Each(func(m string, s float64) bool { b = append(b, Element{m, s}); return true })
			for i := range a {
				if a[i].Member != b[i].Member || math.Float64bits(a[i].Score) != math.Float64bits(b[i].Score) {
					t.Fatalf("n=%d %s: element %d is %v, Set gives %v", n, what, i, a[i], b[i])
				}
				if rk, ok := loaded.Rank(a[i].Member); !ok || rk != i {
					t.Fatalf("n=%d %s: Rank(%q) = %d, %v; want %d", n, what, a[i].Member, rk, ok, i)
				}
				if e := loaded.At(i); e.Member != a[i].Member {
					t.Fatalf("n=%d %s: At(%d) = %q, want %q", n, what, i, e.Member, a[i].Member)
				}
			}
		}
		same("loaded")
		// Its image decodes to the same set (persistence writes it so).
		img := loaded.AppendImage(nil)
		back, err := DecodeZSet(img)
		if err != nil {
			t.Fatalf("n=%d: image round trip: %v", n, err)
		}
		if back.Size() != loaded.Size() || !bytes.Equal(back.AppendImage(nil), img) {
			t.Fatalf("n=%d: image round trip differs (Size %d/%d)", n, back.Size(), loaded.Size())
		}
		for range n / 2 {
			m := "m" + strconv.Itoa(r.IntN(4*n))
			switch r.IntN(3) {
			case 0:
				loaded.Remove(m)
				set.Remove(m)
			default:
				s := float64(r.IntN(20)) - 5
				loaded.Set(m, s)
				set.Set(m, s)
			}
		}
		same("after writes")
	}
	small := []Element{{"a", 1}, {"b", 2}}
	big := make([]Element, CompactMaxEntries+1)
	for i := range big {
		big[i] = Element{Member: "m" + strconv.Itoa(1000+i), Score: 1}
	}
	if NewZSet().LoadSorted(small) {
		t.Error("LoadSorted took a set small enough to stay compact")
	}
	z := NewZSet()
	z.Set("x", 1)
	if z.LoadSorted(big) || z.Len() != 1 {
		t.Error("LoadSorted filled a non-empty set")
	}
	swapped := slices.Clone(big)
	swapped[3], swapped[4] = swapped[4], swapped[3]
	if z := NewZSet(); z.LoadSorted(swapped) || z.Len() != 0 {
		t.Error("LoadSorted took elements out of order")
	}
	// A -0 score stays -0, as in Redis's skiplist (ZUNIONSTORE, ZINTERSTORE
	// and ZRANGESTORE of a -0 member into a result past the compact
	// limits: redis-server's ZSCORE answers -0).
	neg := slices.Clone(big)
	neg[0].Score = math.Copysign(0, -1)
	neg[0].Member = "a"
	if z := NewZSet(); !z.LoadSorted(neg) {
		t.Error("LoadSorted refused a -0 score")
	} else if s, _ := z.Score("a"); !math.Signbit(s) {
		t.Errorf("LoadSorted stored -0 as %v", s)
	}
	twice := slices.Clone(big)
	twice[4] = twice[3]
	if z := NewZSet(); z.LoadSorted(twice) || z.Len() != 0 {
		t.Error("LoadSorted took a member twice")
	}
}

// BenchmarkZSetFill: a 200k-member destination filled by Set of each
// sorted element (the STORE commands before) and by LoadSorted.
func BenchmarkZSetFill(b *testing.B) {
	elems := make([]Element, 200_000)
	for i := range elems {
		elems[i] = Element{Member: "member:" + strconv.Itoa(1_000_000+i), Score: float64(i / 3)}
	}
	b.Run("set", func(b *testing.B) {
		for range b.N {
			z := NewZSet()
			for _, e := range elems {
				z.Set(e.Member, e.Score)
			}
		}
	})
	b.Run("load", func(b *testing.B) {
		for range b.N {
			if !NewZSet().LoadSorted(elems) {
				b.Fatal("refused")
			}
		}
	})
}
