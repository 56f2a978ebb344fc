package store

import (
	"fmt"
	"testing"

	"github.com/celld/celld/gcra"
)

// TestReplDrainSince: DrainReplSince reports the smallest stamp a drained
// shard took at its first effect since the previous drain (later effects
// in that shard keep it), and 0 when it passed nothing.
func TestReplDrainSince(t *testing.T) {
	s := New(Options{})
	s.SetRepl(true)
	lim, _ := gcra.NewLimit(5, 1000, 1)
	// two keys in different shards
	a, b := []byte("a"), []byte("b")
	for i := 0; s.shardIndex(a) == s.shardIndex(b); i++ {
		b = []byte(fmt.Sprint("b", i))
	}
	drain := func() (int, int64) {
		return s.DrainReplSince(func(Change) {}, nil)
	}
	if n, o := drain(); n != 0 || o != 0 {
		t.Fatalf("empty drain: %d effects, oldest %d", n, o)
	}
	s.SetReplStamp(100)
	s.Throttle(a, lim, 1, 1e15)
	s.SetReplStamp(200)
	s.Throttle(a, lim, 1, 1e15+1e6) // same shard: keeps its stamp 100
	s.Throttle(b, lim, 1, 1e15)
	if n, o := drain(); n != 2 || o != 100 {
		t.Fatalf("drain: %d effects, oldest %d; want 2, 100", n, o)
	}
	if n, o := drain(); n != 0 || o != 0 {
		t.Fatalf("drain after drain: %d effects, oldest %d", n, o)
	}
	s.SetReplStamp(300)
	s.Throttle(a, lim, 1, 1e15+2e6) // a's shard marks again, now at 300
	s.SetReplStamp(400)
	s.Delete(b, 1e12)
	if n, o := drain(); n != 2 || o != 300 {
		t.Fatalf("drain with a delete: %d effects, oldest %d; want 2, 300", n, o)
	}
}

// TestApplyTATIsApplyChange: ApplyTAT does what ApplyChange does with a
// plain TAT's change: insert, replace, keep the larger TAT under maxTAT,
// replace a string, delete on a past expiry.
func TestApplyTATIsApplyChange(t *testing.T) {
	const now = int64(1e12)
	type step struct {
		tat    uint64
		exp    int64
		maxTAT bool
	}
	steps := []step{{50, 0, false}, {40, 0, false}, {30, now + 5, true}, {60, now + 9, true}, {10, now - 1, false}, {70, now, true}}
	x, y := New(Options{}), New(Options{})
	for _, k := range []string{"short", "a key longer than the inline bytes"} {
		key := []byte(k)
		v, _ := NewValue([]byte("0099")) // a verbatim string, not a plain TAT
		x.Put(key, v, now, 0, false)
		y.Put(key, v, now, 0, false)
		for i, st := range steps {
			if err := x.ApplyChange(Change{Key: key, TAT: st.tat, IsTAT: true, ExpireAtMs: st.exp}, nil, st.maxTAT, now); err != nil {
				t.Fatal(err)
			}
			y.ApplyTAT(key, st.tat, st.exp, st.maxTAT, now)
			vx, okx := x.Get(key, now)
			vy, oky := y.Get(key, now)
			if okx != oky || vx != vy {
				t.Fatalf("%q step %d %+v: ApplyChange gives %+v %v, ApplyTAT %+v %v", k, i, st, vx, okx, vy, oky)
			}
		}
	}
}

// TestReplDrainDedupSmallAndLarge: a key written k times in a round is
// passed once with its latest state, whether its shard's records are
// deduplicated pairwise (k <= smallDrain) or with the bitmap, and whether
// plain TATs go to fn or to the tat callback.
func TestReplDrainDedupSmallAndLarge(t *testing.T) {
	lim, _ := gcra.NewLimit(1000, 1000, 1)
	const now = int64(1_700_000_000_000)
	for _, viaTAT := range []bool{false, true} {
		for k := 1; k <= 2*smallDrain+1; k++ {
			s := New(Options{})
			s.SetRepl(true)
			for i := 0; i < k; i++ {
				s.Throttle([]byte("h"), lim, 1, (now+int64(i))*1e6)
			}
			got := map[string][]uint64{}
			fn := func(c Change) { got[string(c.Key)] = append(got[string(c.Key)], c.TAT) }
			var tat func([]byte, uint64, int64)
			if viaTAT {
				tat = func(key []byte, v uint64, _ int64) { got[string(key)] = append(got[string(key)], v) }
				fn = func(c Change) { t.Fatalf("a plain TAT went to fn: %+v", c) }
			}
			n, _ := s.DrainReplSince(fn, tat)
			v, _ := s.Get([]byte("h"), now+int64(k))
			if n != 1 || len(got) != 1 || len(got["h"]) != 1 || got["h"][0] != v.TAT {
				t.Fatalf("viaTAT %v, %d writes: %d effects %v, want one with TAT %d", viaTAT, k, n, got, v.TAT)
			}
		}
	}
}
