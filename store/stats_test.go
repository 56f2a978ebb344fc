package store

import (
	"strconv"
	"testing"
	"time"
)

// Every way a key can leave because its TTL passed counts once in
// ExpiredKeys (on access, by the sweep, by a persistence Drain); deletions
// asked for by a command do not, and Flush keeps the count.
func TestExpiredKeysCounts(t *testing.T) {
	s := New(Options{TrackDirty: true})
	lim := mustLimit(t, 0, 1, 1) // 1 per second: the key lives 1 s
	expect := func(step string, want int64) {
		t.Helper()
		if got := s.ExpiredKeys(); got != want {
			t.Fatalf("%s: ExpiredKeys = %d, want %d", step, got, want)
		}
	}
	expect("empty", 0)
	putValue(s, "lazy", t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 10})
	putValue(s, "persistent", t0ms, Value{TAT: 1})
	putValue(s, "deleted", t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 10})
	s.Delete([]byte("deleted"), t0ms)
	expect("after DEL", 0)
	if _, ok := s.Get([]byte("lazy"), t0ms+10); !ok {
		t.Fatal("lazy gone before its expiry")
	}
	expect("not yet expired", 0)
	if _, ok := s.Get([]byte("lazy"), t0ms+11); ok {
		t.Fatal("lazy still there after its expiry")
	}
	expect("expired on access", 1)
	s.Get([]byte("lazy"), t0ms+12) // already gone: no second count
	expect("looked up again", 1)

	if _, err := s.Throttle([]byte("throttled"), lim, 1, t0); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		putValue(s, "swept"+strconv.Itoa(i), t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 20})
	}
	// Drain the dirty list first, so the sweep (not Drain) removes them.
	s.Drain(t0ms, nil)
	s.SweepStep(t0ms+5000, time.Second)
	expect("swept", 1+100+1)

	putValue(s, "drained", t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 20})
	s.Drain(t0ms+30, nil)
	expect("drained", 103)

	// Throttle on an expired key removes it on access, then writes anew.
	if _, err := s.Throttle([]byte("again"), lim, 1, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Throttle([]byte("again"), lim, 1, t0+10*int64(time.Second)); err != nil {
		t.Fatal(err)
	}
	expect("throttle over an expired key", 104)

	s.Flush()
	expect("after Flush", 104)
	s.ResetExpiredKeys()
	expect("after reset", 0)
}

func TestKeyspaceStatsAvgTTL(t *testing.T) {
	s := New(Options{})
	if k, e, avg := s.KeyspaceStats(t0ms); k != 0 || e != 0 || avg != 0 {
		t.Fatalf("empty: %d %d %d", k, e, avg)
	}
	putValue(s, "none", t0ms, Value{TAT: 1})
	putValue(s, "a", t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 1000})
	putValue(s, "b", t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 3000})
	putValue(s, "gone", t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 100})
	// At t0+500: a has 500 ms left, b 2500, gone has passed (counted in
	// keys and expires until removed, as Redis's dbsize and expires, but
	// not in the average).
	if k, e, avg := s.KeyspaceStats(t0ms + 500); k != 4 || e != 3 || avg != 1500 {
		t.Fatalf("keys %d expires %d avg_ttl %d, want 4 3 1500", k, e, avg)
	}
	// Huge TTLs (PEXPIREAT near 2^63) do not overflow the mean.
	putValue(s, "far1", t0ms, Value{TAT: 1, ExpireAtMs: 1 << 62})
	putValue(s, "far2", t0ms, Value{TAT: 1, ExpireAtMs: 1 << 62})
	if _, _, avg := s.KeyspaceStats(t0ms); avg <= 0 {
		t.Fatalf("avg_ttl %d with huge TTLs, want positive", avg)
	}
}
