package store

import (
	"fmt"
	"sort"
	"strings"
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

// TestDrainShardsViewNumbers checks that DrainShardsViewNumbers hands over
// the same changes as DrainShardsView: the live inline window counters
// (FIXED and SLIDING keys with short names) to win, with the mode,
// counters and expiry the Change had as WinMode, Win and ExpireAtMs, the
// plain TATs to tat, and everything else (a LOG block, counters in a block
// for a long name, a window expired past its grace, which is a deletion)
// to fn. A window key that expired within its grace (winGrace) is written
// as it is, with its past expiry, and keeps its slot.
func TestDrainShardsViewNumbers(t *testing.T) {
	lim := mustLimit(t, 100, 1, 1)
	now := t0ms - t0ms%1000
	fill := func(s *Store) {
		for i := range 50 {
			if _, err := s.Throttle(fmt.Appendf(nil, "tat:%d", i), lim, 1, now*1e6); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 200 {
			m := []window.Mode{window.Fixed, window.Sliding, window.Log}[i%3]
			for j := range 1 + i%4 {
				if _, err := s.Window(fmt.Appendf(nil, "win:%d", i), winLimit(m, 10, 1000), 1, now+int64(j)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, m := range []window.Mode{window.Fixed, window.Sliding} {
			k := fmt.Appendf(nil, "a-window-key-longer-than-sixteen-bytes:%v", m)
			if _, err := s.Window(k, winLimit(m, 10, 1000), 2, now); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Window(fmt.Appendf(nil, "grace:%v", m), winLimit(m, 10, 1), 1, now); err != nil {
				t.Fatal(err) // expired by the drain, in its grace: written as it is
			}
			if _, err := s.Window(fmt.Appendf(nil, "gone:%v", m), winLimit(m, 10, 1), 1, now-winGraceMs-10); err != nil {
				t.Fatal(err) // past its grace at the drain: a deletion
			}
		}
	}
	describe := func(c *Change) string {
		return fmt.Sprintf("%s del=%v tat=%v/%d text=%q kind=%v exp=%d mode=%v win=%+v",
			c.Key, c.Deleted, c.IsTAT, c.TAT, c.Text, c.Kind, c.ExpireAtMs, c.WinMode, c.Win)
	}
	drainMs := now + 10

	ref := New(Options{TrackDirty: true})
	fill(ref)
	var want []string
	ref.DrainShardsView(drainMs, 0, 0, nil, func(c *Change) { want = append(want, describe(c)) })

	s := New(Options{TrackDirty: true})
	fill(s)
	var got []string
	wins := 0
	dels := 0
	s.DrainShardsViewNumbers(drainMs, 0, 0, nil, func(c *Change) {
		if c.WinMode != 0 && !c.Deleted {
			t.Errorf("inline counters went to fn: %s", describe(c))
		}
		if c.Deleted {
			dels++
			if !strings.HasPrefix(string(c.Key), "gone:") {
				t.Errorf("deletion of %q, a key in its grace or live", c.Key)
			}
		}
		got = append(got, describe(c))
	}, func(key []byte, tat uint64, exp int64) {
		got = append(got, describe(&Change{Key: key, TAT: tat, IsTAT: true, ExpireAtMs: exp}))
	}, func(key []byte, mode byte, start int64, prev, curr uint64, exp int64) {
		wins++
		got = append(got, describe(&Change{Key: key, Kind: KindWindow, ExpireAtMs: exp, WinMode: window.Mode(mode),
			Win: window.Counters{Start: start, Prev: int64(prev), Curr: int64(curr)}}))
	}, nil)
	sort.Strings(want)
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("DrainShardsViewNumbers's changes differ from DrainShardsView's:\n got %q\nwant %q", got, want)
	}
	if wins != 136 { // win:i for i%3 < 2, grace:FIXED, grace:SLIDING
		t.Fatalf("%d changes went to win, want 136", wins)
	}
	if dels != 2 { // gone:FIXED, gone:SLIDING
		t.Fatalf("%d deletions, want 2", dels)
	}
	// The keys in their grace keep their slots (the next call remakes
	// them there); those past it are gone.
	if n, want := s.Len(), ref.Len(); n != want {
		t.Fatalf("Len %d after the drain, want %d", n, want)
	}
	for _, m := range []window.Mode{window.Fixed, window.Sliding} {
		for _, k := range []string{"grace:", "gone:"} {
			key := []byte(k + m.String())
			h := s.hashKey(key)
			_, _, found := s.shardFor(h).findLocked(key, h)
			if found != (k == "grace:") {
				t.Errorf("%s: in the index after the drain = %v", key, found)
			}
		}
	}
	if s.DirtyKeys() != 0 {
		t.Fatalf("%d dirty keys left after the drain", s.DirtyKeys())
	}
}

// TestDumpShardTAT checks that DumpShardTAT hands over the same keys as
// DumpShard: the live plain TATs (short and long keys, one without a TTL)
// to tat with the TAT and expiry DumpShard's Change had, and everything
// else (a verbatim number, an invalid text, a string, an inline window,
// a LOG block) to fn, and that the expired key is in neither.
// It fails if tat gets a key that is not a plain TAT or a value that
// differs, or if a key is dropped or given twice.
func TestDumpShardTAT(t *testing.T) {
	lim := mustLimit(t, 100, 1, 1)
	now := t0ms - t0ms%1000
	s := New(Options{TrackDirty: true})
	for i := range 300 {
		if _, err := s.Throttle(fmt.Appendf(nil, "tat:%d", i), lim, 1, now*1e6); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Throttle([]byte("a-key-longer-than-sixteen-bytes"), lim, 1, now*1e6); err != nil {
		t.Fatal(err)
	}
	putValue(s, "nottl", now, Value{TAT: 12345})
	putValue(s, "expired", now, Value{TAT: 7, ExpireAtMs: now + 5}) // expired at the dump
	putValue(s, "verbatim", now, Value{TAT: 5, Raw: "+5"})
	putValue(s, "invalid", now, Value{Raw: "abc", Invalid: true})
	putValue(s, "text", now, Value{Raw: "hello"})
	for _, m := range []window.Mode{window.Fixed, window.Log} {
		if _, err := s.Window(fmt.Appendf(nil, "win:%v", m), winLimit(m, 2, 1000), 1, now); err != nil {
			t.Fatal(err)
		}
	}
	describe := func(c Change) string {
		return fmt.Sprintf("%s tat=%v/%d text=%q kind=%v exp=%d verbatim=%v win=%v",
			c.Key, c.IsTAT, c.TAT, c.Text, c.Kind, c.ExpireAtMs, c.Verbatim, c.WinMode)
	}
	dumpMs := now + 10
	var want, got []string
	for i := range NumShards {
		s.DumpShard(i, dumpMs, func(c Change) { want = append(want, describe(c)) })
	}
	tats := 0
	for i := range NumShards {
		s.DumpShardTAT(i, dumpMs, func(c Change) {
			if c.IsTAT {
				t.Errorf("a live plain TAT went to fn: %s", describe(c))
			}
			got = append(got, describe(c))
		}, func(key []byte, tat uint64, exp int64) {
			tats++
			got = append(got, describe(Change{Key: key, TAT: tat, IsTAT: true, ExpireAtMs: exp}))
		})
	}
	sort.Strings(want)
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("DumpShardTAT's keys differ from DumpShard's:\n got %q\nwant %q", got, want)
	}
	if tats != 302 { // tat:0..299, the long key, nottl
		t.Fatalf("%d keys went to tat, want 302", tats)
	}
	if len(want) != 302+5 { // verbatim, invalid, text, two windows
		t.Fatalf("DumpShard gave %d keys, want %d", len(want), 302+5)
	}
}

// TestDrainShardsViewState checks that DrainShardsViewNumbers with a state
// callback hands it every live window key whose state is in a block (a
// LOG key's; counters of a name too long to keep them inline), with the
// key, state and expiry DrainShardsView's Change had as Key, Text and
// ExpireAtMs, and that fn gets everything else as before. It fails if such
// a state goes to fn, or a key is dropped, given twice or changed.
func TestDrainShardsViewState(t *testing.T) {
	lim := mustLimit(t, 100, 1, 1)
	now := t0ms - t0ms%1000
	fill := func(s *Store) {
		for i := range 20 {
			if _, err := s.Throttle(fmt.Appendf(nil, "tat:%d", i), lim, 1, now*1e6); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 120 {
			m := []window.Mode{window.Fixed, window.Sliding, window.Log}[i%3]
			for j := range 1 + i%5 {
				if _, err := s.Window(fmt.Appendf(nil, "win:%d", i), winLimit(m, 10, 1000), 1, now+int64(j)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, m := range []window.Mode{window.Fixed, window.Sliding, window.Log} {
			k := fmt.Appendf(nil, "a-window-key-longer-than-sixteen-bytes:%v", m)
			if _, err := s.Window(k, winLimit(m, 10, 1000), 2, now); err != nil {
				t.Fatal(err)
			}
		}
		putValue(s, "text", now, Value{Raw: "hello"})
	}
	describe := func(c *Change) string {
		return fmt.Sprintf("%s del=%v tat=%v/%d text=%q kind=%v exp=%d mode=%v win=%+v",
			c.Key, c.Deleted, c.IsTAT, c.TAT, c.Text, c.Kind, c.ExpireAtMs, c.WinMode, c.Win)
	}
	drainMs := now + 10
	ref := New(Options{TrackDirty: true})
	fill(ref)
	var want []string
	ref.DrainShardsView(drainMs, 0, 0, nil, func(c *Change) { want = append(want, describe(c)) })

	s := New(Options{TrackDirty: true})
	fill(s)
	var got []string
	states := 0
	s.DrainShardsViewNumbers(drainMs, 0, 0, nil, func(c *Change) {
		if c.Kind == KindWindow && !c.Deleted && c.WinMode == 0 {
			t.Errorf("a window state in a block went to fn: %s", describe(c))
		}
		got = append(got, describe(c))
	}, func(key []byte, tat uint64, exp int64) {
		got = append(got, describe(&Change{Key: key, TAT: tat, IsTAT: true, ExpireAtMs: exp}))
	}, nil, func(key, state []byte, exp int64) {
		states++
		got = append(got, describe(&Change{Key: key, Text: state, Kind: KindWindow, ExpireAtMs: exp}))
	})
	sort.Strings(want)
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("DrainShardsViewNumbers's changes differ from DrainShardsView's:\n got %q\nwant %q", got, want)
	}
	// win nil: the inline counters come as Changes with WinMode. In
	// blocks: the 40 LOG keys and the three long names.
	if states != 43 {
		t.Fatalf("%d changes went to state, want 43", states)
	}
	if s.DirtyKeys() != 0 {
		t.Fatalf("%d dirty keys left after the drain", s.DirtyKeys())
	}
}
