package store

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/celld/celld/window"
)

// TestWindowLogInPlace: LOG keys whose states are rewritten in their
// blocks (window.Limit.ApplyInPlace) answer and hold exactly what the
// window package's Apply gives on a model, through random calls that
// grow a log past its block (a move to a bigger one), shrink it as
// entries leave, empty it (expiry), add to the newest entry in one ms and
// fill it to window.MaxLogEntries; a neighbour's block, written once and
// alive throughout, keeps its bytes; and used memory comes back to where it
// started once the keys are deleted (no block charged twice or lost).
// Fails if an in-place write runs past its block, keeps a stale length,
// or differs from Apply by a byte.
func TestWindowLogInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 19))
	inPlaceSeen := 0
	for seq := range 120 {
		l := winLimit(window.Log, []int64{1, 3, 100, 5000}[rng.IntN(4)], []int64{1, 10, 1000, 60_000}[rng.IntN(4)])
		s := New(Options{})
		base := keysUsed(s) // shards made by the keys stay: their fixed cost is not the keys'
		now := t0ms + rng.Int64N(1000)
		nb := winLimit(window.Log, 1<<40, 1<<40)
		neighbour, nbState := []byte("log:neighbour"), []byte(nil)
		for range 3 {
			now++
			r, next, _, err := nb.Apply(nbState, now, 1, nil)
			if err != nil || r.Limited {
				t.Fatal(err, r)
			}
			nbState = next
			if _, err := s.Window(neighbour, nb, 1, now); err != nil {
				t.Fatal(err)
			}
		}
		keys := [][]byte{[]byte("log:a"), []byte("log:b")}
		var model []byte
		exp := int64(0)
		for i := range 200 {
			switch rng.IntN(5) {
			case 0: // the same ms
			case 1:
				now += 1 + rng.Int64N(2)
			case 2:
				now += rng.Int64N(l.WindowMs/4 + 1)
			case 3:
				now += rng.Int64N(l.WindowMs + 1)
			default:
				if rng.IntN(8) == 0 {
					now += l.WindowMs + rng.Int64N(l.WindowMs+1) // a gap: the key expires
				} else {
					now++
				}
			}
			if model != nil && now > exp {
				model = nil
			}
			q := int64(1)
			switch rng.IntN(8) {
			case 0:
				q = 0
			case 1:
				q = 1 + rng.Int64N(l.Limit)
			case 2:
				q = 200 + rng.Int64N(100) // a count of two bytes
			}
			before := len(model)
			want, next, write, err := l.Apply(model, now, q, nil)
			if err != nil {
				t.Fatal(err)
			}
			if write {
				model, exp = next, now+want.ResetAfter
				if before > 0 && len(model) <= 1<<(bitsLen(before)) {
					inPlaceSeen++
				}
			}
			for _, k := range keys {
				got, err := s.Window(k, l, q, now)
				if err != nil || got != want {
					t.Fatalf("seq %d call %d limit %d w %d q %d: %q answers %+v %v, model %+v",
						seq, i, l.Limit, l.WindowMs, q, k, got, err, want)
				}
				checkWinState(t, s, k, model, now)
			}
			checkWinState(t, s, neighbour, nbState, now)
		}
		// Every block charged once and released once: deleting the keys
		// (expired ones too) brings used memory back to where it was.
		for _, k := range append(keys, neighbour) {
			s.Delete(k, 0)
		}
		if used := keysUsed(s); used != base {
			t.Fatalf("seq %d: used memory %d after deleting everything, want %d", seq, used, base)
		}
	}
	if inPlaceSeen < 1000 {
		t.Fatalf("only %d writes could have been in place", inPlaceSeen)
	}
}

// bitsLen is the number of bits of n > 0.
func bitsLen(n int) int {
	b := 0
	for n > 0 {
		b++
		n >>= 1
	}
	return b
}

// TestDrainViewWindowBlocks: the view drain hands a window key held in a
// block (LOG, or FIXED on a long name) as its state's bytes, viewed in
// the block, equal to what the copying drain (Drain) gives for the same
// store. Fails if the view is of the wrong bytes or length.
func TestDrainViewWindowBlocks(t *testing.T) {
	fill := func(s *Store) {
		now := t0ms
		for i := range 50 {
			for j := range i%7 + 1 {
				if _, err := s.Window(fmt.Appendf(nil, "log:%d", i), winLimit(window.Log, 100, 1000), 1, now+int64(j*3)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Window(fmt.Appendf(nil, "a-long-fixed-window-key:%d", i), winLimit(window.Fixed, 100, 1000), 2, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	describe := func(c *Change) string {
		return fmt.Sprintf("%s del=%v text=%x kind=%v exp=%d", c.Key, c.Deleted, c.Text, c.Kind, c.ExpireAtMs)
	}
	ref := New(Options{TrackDirty: true})
	fill(ref)
	var want []string
	for _, c := range ref.Drain(t0ms+30, nil) {
		want = append(want, describe(&c))
	}
	s := New(Options{TrackDirty: true})
	fill(s)
	var got []string
	s.DrainShardsView(t0ms+30, 0, 0, nil, func(c *Change) { got = append(got, describe(c)) })
	sort.Strings(want)
	sort.Strings(got)
	if len(got) != 100 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("view drain (%d changes):\n%q\ncopying drain (%d):\n%q", len(got), got, len(want), want)
	}
}
