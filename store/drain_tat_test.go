package store

import (
	"fmt"
	"sort"
	"testing"

	"github.com/celld/celld/window"
)

// TestDrainShardsViewTAT checks that DrainShardsViewTAT hands over the
// same changes as DrainShardsView: the live plain TATs to tat (key, TAT
// and expiry as the Change had them), and everything else to fn as a
// Change: verbatim and invalid texts, window states, deletions, and a
// plain TAT that expired before the drain, which is a deletion.
func TestDrainShardsViewTAT(t *testing.T) {
	lim := mustLimit(t, 100, 1, 1)
	now := t0ms - t0ms%1000
	fill := func(s *Store) {
		for i := range 300 {
			if _, err := s.Throttle(fmt.Appendf(nil, "tat:%d", i), lim, 1, now*1e6); err != nil {
				t.Fatal(err)
			}
		}
		// A key longer than an entry holds inline (its bytes in the arena).
		if _, err := s.Throttle([]byte("a-key-longer-than-sixteen-bytes"), lim, 1, now*1e6); err != nil {
			t.Fatal(err)
		}
		putValue(s, "nottl", now, Value{TAT: 12345})
		putValue(s, "expired", now, Value{TAT: 7, ExpireAtMs: now + 5}) // gone by the drain
		putValue(s, "verbatim", now, Value{TAT: 5, Raw: "+5"})
		putValue(s, "invalid", now, Value{Raw: "abc", Invalid: true})
		putValue(s, "deleted", now, Value{TAT: 1})
		s.Delete([]byte("deleted"), now)
		if _, err := s.Window([]byte("win"), winLimit(window.Fixed, 2, 1000), 1, now); err != nil {
			t.Fatal(err)
		}
	}
	describe := func(c *Change) string {
		return fmt.Sprintf("%s del=%v tat=%v/%d text=%q kind=%v exp=%d verbatim=%v",
			c.Key, c.Deleted, c.IsTAT, c.TAT, c.Text, c.Kind, c.ExpireAtMs, c.Verbatim)
	}
	drainMs := now + 10

	ref := New(Options{TrackDirty: true})
	fill(ref)
	var want []string
	ref.DrainShardsView(drainMs, 0, 0, nil, func(c *Change) { want = append(want, describe(c)) })

	s := New(Options{TrackDirty: true})
	fill(s)
	var got []string
	tats := 0
	s.DrainShardsViewTAT(drainMs, 0, 0, nil, func(c *Change) {
		if c.IsTAT && !c.Deleted {
			t.Errorf("a live plain TAT went to fn: %s", describe(c))
		}
		got = append(got, describe(c))
	}, func(key []byte, tat uint64, exp int64) {
		tats++
		got = append(got, describe(&Change{Key: key, TAT: tat, IsTAT: true, ExpireAtMs: exp}))
	})
	sort.Strings(want)
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("DrainShardsViewTAT's changes differ from DrainShardsView's:\n got %q\nwant %q", got, want)
	}
	if tats != 302 { // tat:0..299, the long key, nottl
		t.Fatalf("%d changes went to tat, want 302", tats)
	}
	if s.DirtyKeys() != 0 {
		t.Fatalf("%d dirty keys left after the drain", s.DirtyKeys())
	}
}
