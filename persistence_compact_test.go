package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/store"
)

// growingKindWrite is randomKindWrite for values that start compact
// (kinds' compact forms) and leave that form: it also adds batches of new
// elements (past kinds.CompactMaxEntries) and, now and then, an element
// longer than kinds.CompactMaxValue.
func growingKindWrite(r *rand.Rand, o store.Object, batch *int) {
	item := "e" + strconv.Itoa(r.IntN(80))
	if r.IntN(40) == 0 {
		item += strings.Repeat("L", kinds.CompactMaxValue)
	}
	if r.IntN(40) == 0 {
		*batch++
		for k := range 25 {
			name := "b" + strconv.Itoa(*batch) + "." + strconv.Itoa(k)
			switch x := o.(type) {
			case *kinds.Hash:
				x.Set(name, "1")
			case *kinds.ZSet:
				x.Set(name, float64(k))
			case *kinds.List:
				x.PushBack(name)
			}
		}
		return
	}
	switch x := o.(type) {
	case *kinds.Hash:
		if r.IntN(4) == 0 {
			x.Delete(item)
		} else {
			x.Set(item, strconv.Itoa(r.IntN(100)))
		}
	case *kinds.ZSet:
		switch r.IntN(8) {
		case 0:
			x.Remove(item)
		case 1:
			x.RemoveRangeByRank(r.IntN(10), r.IntN(20), nil)
		default:
			x.Set(item, float64(r.IntN(100)))
		}
	case *kinds.List:
		switch n := x.Len(); {
		case n > 0 && r.IntN(5) == 0:
			x.PopBack()
		case n > 0 && r.IntN(5) == 0:
			x.SetAt(r.IntN(n), item)
		case n > 0 && r.IntN(6) == 0:
			x.InsertAt(r.IntN(n+1), item)
		case n > 0 && r.IntN(8) == 0:
			x.Filter(func(i int, _ string) bool { return i%7 != 3 })
		case n > 3 && r.IntN(10) == 0:
			x.Trim(1, n-2)
		default:
			x.PushFront(item)
		}
	}
}

// dumpKindsContent is dumpKinds with a hash's fields sorted: a hash in its
// full form that shrank back within the compact limits is restored
// compact, and the two forms order fields differently after a delete (a
// full hash moves its last field into the hole), as Redis's hashes do
// across a restart. Lists and sorted sets are compared image for image.
func dumpKindsContent(t *testing.T, st *store.Store, nowMs int64, keys []string) (map[string]string, int) {
	t.Helper()
	out := map[string]string{}
	most := 0
	for _, k := range keys {
		for _, kind := range []store.Kind{store.KindHash, store.KindList, store.KindZSet} {
			found, err := st.ReadObject([]byte(k), kind, nowMs, func(o store.Object) {
				most = max(most, o.Len())
				if h, ok := o.(*kinds.Hash); ok {
					var fields []string
					h.Each(func(f, v string) bool { fields = append(fields, strconv.Quote(f)+"="+strconv.Quote(v)); return true })
					slices.Sort(fields)
					out[k] = fmt.Sprintf("%s %v", kind, fields)
					return
				}
				out[k] = fmt.Sprintf("%s %x", kind, o.AppendImage(nil))
			})
			if found && err == nil {
				v, _ := st.Get([]byte(k), nowMs)
				out[k] += fmt.Sprintf(" exp=%d", v.ExpireAtMs)
			}
		}
	}
	return out, most
}

// TestPersistKindsDeltasExactAcrossForms is TestPersistKindsDeltasExact
// for values that start in their compact form and grow out of it (by
// their number of elements and by long elements) between flushes, base
// rewrites, drained-before-the-cut windows and COPYs (a clone, whose
// journal starts afresh): the journals recorded in both forms and across
// the change restore the exact values.
func TestPersistKindsDeltasExactAcrossForms(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			h := newKindsHarness(t)
			r := rand.New(rand.NewPCG(seed, 7))
			keys := []string{"h1", "h2", "l1", "l2", "z1", "z2"}
			kindOf := func(k string) store.Kind {
				switch k[0] {
				case 'h':
					return store.KindHash
				case 'l':
					return store.KindList
				}
				return store.KindZSet
			}
			batch := 0
			most := 0
			writes := func(n int) {
				for range n {
					k := keys[r.IntN(len(keys))]
					h.write(k, kindOf(k), func(o store.Object) {
						growingKindWrite(r, o, &batch)
						most = max(most, o.Len())
					})
				}
			}
			for range 60 {
				writes(1 + r.IntN(30))
				switch r.IntN(6) {
				case 0:
					h.rewrite()
				case 1:
					h.drainRewriteWrite(func() { writes(r.IntN(10)) })
				case 2:
					if r.IntN(3) == 0 {
						k := keys[r.IntN(len(keys))]
						h.st.Delete([]byte(k), h.nowMs)
						writes(2)
					}
					h.flush()
				case 3: // COPY over the sibling key: a clone, journaled anew
					i := r.IntN(len(keys))
					src, dst := keys[i], keys[i^1]
					if _, err := h.st.Copy([]byte(src), []byte(dst), h.nowMs, true); err != nil {
						t.Fatal(err)
					}
					writes(3)
					h.flush()
				default:
					h.flush()
				}
			}
			writes(5)
			if most <= kinds.CompactMaxEntries {
				t.Fatalf("no value grew past %d elements (most %d): the test does not leave the compact form", kinds.CompactMaxEntries, most)
			}
			want, _ := dumpKindsContent(t, h.st, h.nowMs, keys)
			got, _ := dumpKindsContent(t, h.restart(), h.nowMs, keys)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after restart:\n got %v\nwant %v", got, want)
			}
		})
	}
}
