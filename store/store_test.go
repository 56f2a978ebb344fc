package store

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/celld/celld/gcra"
)

// t0 is the test epoch: a realistic wall clock in ns, and its ms.
const (
	t0   int64 = 1_700_000_000_000_000_000
	t0ms int64 = t0 / 1e6
)

func mustLimit(t testing.TB, burst, count, period int64) gcra.Limit {
	t.Helper()
	l, err := gcra.NewLimit(burst, count, period)
	if err != nil {
		t.Fatalf("NewLimit(%d,%d,%d): %v", burst, count, period, err)
	}
	return l
}

func mustGet(t *testing.T, s *Store, key string, nowMs int64) Value {
	t.Helper()
	v, ok := s.Get([]byte(key), nowMs)
	if !ok {
		t.Fatalf("Get(%q) at %d: missing", key, nowMs)
	}
	return v
}

func mustMissing(t *testing.T, s *Store, key string, nowMs int64) {
	t.Helper()
	if v, ok := s.Get([]byte(key), nowMs); ok {
		t.Fatalf("Get(%q) at %d = %+v, want missing", key, nowMs, v)
	}
}

func putValue(s *Store, key string, nowMs int64, v Value) {
	s.Update([]byte(key), nowMs, func(Value, bool) (Value, Action) { return v, Put })
}

func TestThrottleStoresAndUpdates(t *testing.T) {
	s := New(Options{})
	lim := mustLimit(t, 4, 1, 1) // EI 1 s, DVT 5 s
	key := []byte("k")

	r, err := s.Throttle(key, lim, 1, t0)
	if err != nil || r.Limited || r.Remaining != 4 || r.TTLms != 1000 {
		t.Fatalf("first call: %+v, %v", r, err)
	}
	v := mustGet(t, s, "k", t0ms)
	if v.TAT != uint64(t0+1e9) || v.ExpireAtMs != t0ms+1000 || v.Raw != "" || v.Invalid {
		t.Fatalf("after first call: %+v", v)
	}
	ver1, ok := s.Version(key, t0ms)
	if !ok {
		t.Fatal("Version: key missing")
	}

	r, err = s.Throttle(key, lim, 1, t0)
	if err != nil || r.Limited || r.Remaining != 3 || r.TTLms != 2000 {
		t.Fatalf("second call: %+v, %v", r, err)
	}
	v = mustGet(t, s, "k", t0ms)
	if v.TAT != uint64(t0+2e9) || v.ExpireAtMs != t0ms+2000 {
		t.Fatalf("after second call: %+v", v)
	}
	ver2, _ := s.Version(key, t0ms)
	if ver2 == ver1 {
		t.Fatal("Version unchanged by an allowed Throttle")
	}

	// Use up the bucket; the denied call changes nothing.
	for i := 0; i < 3; i++ {
		if r, _ := s.Throttle(key, lim, 1, t0); r.Limited {
			t.Fatalf("call %d limited", i+3)
		}
	}
	before := mustGet(t, s, "k", t0ms)
	verBefore, _ := s.Version(key, t0ms)
	r, err = s.Throttle(key, lim, 1, t0)
	if err != nil || !r.Limited || r.Remaining != 0 || r.RetryAfter != 1 {
		t.Fatalf("6th call: %+v, %v", r, err)
	}
	if after := mustGet(t, s, "k", t0ms); after != before {
		t.Fatalf("denied call changed the value: %+v -> %+v", before, after)
	}
	if verAfter, _ := s.Version(key, t0ms); verAfter != verBefore {
		t.Fatal("denied call changed the version")
	}
	if s.Len() != 1 {
		t.Fatalf("Len = %d", s.Len())
	}
}

// TestThrottleTTLZero: a write with a 0 ms TTL keeps the key to the end of
// the current millisecond (expiry = now's ms, as redis-cell's
// RedisModule_SetExpire(key, 0) leaves it), then it is gone.
func TestThrottleTTLZero(t *testing.T) {
	s := New(Options{})
	lim := mustLimit(t, 4, 1, 1)
	key := []byte("k")
	live := func(key string, nowMs int64, tat uint64) {
		t.Helper()
		v, ok := s.Get([]byte(key), nowMs)
		if !ok || v.TAT != tat || v.ExpireAtMs != t0ms {
			t.Fatalf("Get(%q) at %d = %+v, %v; want TAT %d expiring at %d", key, nowMs, v, ok, tat, t0ms)
		}
	}

	// A TAT in the past with quantity 0: the new TAT is now, TTL 0 ms.
	putValue(s, "k", t0ms, Value{TAT: uint64(t0 - 5e9)})
	r, err := s.Throttle(key, lim, 0, t0)
	if err != nil || r.Limited || r.TTLms != 0 {
		t.Fatalf("q=0: %+v, %v", r, err)
	}
	live("k", t0ms, uint64(t0))
	mustMissing(t, s, "k", t0ms+1)

	// On a missing key it is created, for the rest of the millisecond.
	r, err = s.Throttle([]byte("fresh"), lim, 0, t0)
	if err != nil || r.Limited || r.TTLms != 0 {
		t.Fatalf("fresh q=0: %+v, %v", r, err)
	}
	live("fresh", t0ms, uint64(t0))
	mustMissing(t, s, "fresh", t0ms+1)

	// A TAT less than 1 ms ahead also truncates to 0 ms, and decides the
	// next call in the same millisecond.
	putValue(s, "k", t0ms, Value{TAT: uint64(t0 + 999_999)})
	if r, _ := s.Throttle(key, lim, 0, t0); r.TTLms != 0 {
		t.Fatalf("TTLms = %d", r.TTLms)
	}
	live("k", t0ms, uint64(t0+999_999))
	if r, _ := s.Throttle(key, lim, 0, t0+500_000); r.NewTAT != uint64(t0+999_999) {
		t.Fatalf("second 0 ms call in the same ms: NewTAT %d, want the stored %d", r.NewTAT, t0+999_999)
	}
	mustMissing(t, s, "k", t0ms+1)
}

func TestThrottleNoTTL(t *testing.T) {
	s := New(Options{})
	// EI = 1 ms: q = -1 moves the TAT 1 ms into the past: TTL -1 ms.
	lim := mustLimit(t, 0, 1000, 1)
	r, err := s.Throttle([]byte("k"), lim, -1, t0)
	if err != nil || r.Limited || r.TTLms != -1 {
		t.Fatalf("%+v, %v", r, err)
	}
	v := mustGet(t, s, "k", t0ms)
	if v.ExpireAtMs != 0 || v.TAT != uint64(t0-1e6) {
		t.Fatalf("stored %+v, want TAT %d with no TTL", v, t0-1e6)
	}
	// Still there far in the future.
	mustGet(t, s, "k", t0ms+1e9)
}

func TestThrottleSetExpireError(t *testing.T) {
	s := New(Options{})
	lim := mustLimit(t, 0, 1, 1) // EI 1 s; q = -1: TTL -1000 ms
	r, err := s.Throttle([]byte("k"), lim, -1, t0)
	if !errors.Is(err, ErrSetExpire) {
		t.Fatalf("err = %v, want ErrSetExpire", err)
	}
	if r.Limited || r.TTLms != -1000 {
		t.Fatalf("%+v", r)
	}
	v := mustGet(t, s, "k", t0ms)
	if v.ExpireAtMs != 0 || v.TAT != uint64(t0-1e9) {
		t.Fatalf("stored %+v, want TAT %d with no TTL", v, t0-1e9)
	}
	mustGet(t, s, "k", t0ms+1e9)
}

func TestGetLazyExpiry(t *testing.T) {
	s := New(Options{})
	putValue(s, "k", t0ms, Value{TAT: 7, ExpireAtMs: t0ms + 10})
	putValue(s, "other", t0ms, Value{TAT: 8})
	if v := mustGet(t, s, "k", t0ms+10); v.TAT != 7 || v.ExpireAtMs != t0ms+10 {
		t.Fatalf("at expiry ms: %+v", v) // Redis: expired only when now > when
	}
	if s.Len() != 2 {
		t.Fatalf("Len = %d", s.Len())
	}
	mustMissing(t, s, "k", t0ms+11)
	if n := s.Len(); n != 1 {
		t.Fatalf("Len = %d after lazy expiry, want 1 (the expired key is dropped)", n)
	}
	// An expired key reads as missing to Throttle too: a fresh bucket.
	putValue(s, "k", t0ms, Value{TAT: uint64(t0 + 100e9), ExpireAtMs: t0ms + 10})
	r, _ := s.Throttle([]byte("k"), mustLimit(t, 4, 1, 1), 1, t0+11e6)
	if r.Limited || r.Remaining != 4 {
		t.Fatalf("Throttle on an expired key: %+v", r)
	}
	// Version and Delete see it as missing as well.
	putValue(s, "e", t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 1})
	if _, ok := s.Version([]byte("e"), t0ms+2); ok {
		t.Fatal("Version of an expired key: ok")
	}
	putValue(s, "e", t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 1})
	if s.Delete([]byte("e"), t0ms+2) {
		t.Fatal("Delete of an expired key reported it live")
	}
}

func TestUpdateActions(t *testing.T) {
	s := New(Options{})
	key := []byte("k")

	// Put on a missing key creates it; the callback sees exists=false.
	s.Update(key, t0ms, func(old Value, exists bool) (Value, Action) {
		if exists || old != (Value{}) {
			t.Errorf("missing key: old=%+v exists=%v", old, exists)
		}
		return Value{TAT: 5, Raw: "+5", ExpireAtMs: t0ms + 1000}, Put
	})
	if v := mustGet(t, s, "k", t0ms); v.TAT != 5 || v.Raw != "+5" || v.ExpireAtMs != t0ms+1000 {
		t.Fatalf("after Put: %+v", v)
	}
	if got := string(mustGet(t, s, "k", t0ms).AppendText(nil)); got != "+5" {
		t.Fatalf("AppendText = %q", got)
	}

	// The callback sees the current value; Keep changes nothing.
	ver, _ := s.Version(key, t0ms)
	s.Update(key, t0ms, func(old Value, exists bool) (Value, Action) {
		if !exists || old.TAT != 5 || old.Raw != "+5" || old.ExpireAtMs != t0ms+1000 {
			t.Errorf("existing key: old=%+v exists=%v", old, exists)
		}
		return Value{TAT: 99}, Keep
	})
	if v := mustGet(t, s, "k", t0ms); v.TAT != 5 || v.Raw != "+5" {
		t.Fatalf("after Keep: %+v", v)
	}
	if v2, _ := s.Version(key, t0ms); v2 != ver {
		t.Fatal("Keep changed the version")
	}

	// Overwriting a raw value with a canonical one drops the raw text.
	putValue(s, "k", t0ms, Value{TAT: 6})
	if v := mustGet(t, s, "k", t0ms); v.TAT != 6 || v.Raw != "" || v.ExpireAtMs != 0 {
		t.Fatalf("after canonical Put: %+v", v)
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	nraw := len(sh.rawv) - len(sh.rawFree)
	sh.mu.Unlock()
	if nraw != 0 {
		t.Fatalf("shard.raw keeps %d entries after the raw value was replaced", nraw)
	}

	// Delete removes an existing key.
	s.Update(key, t0ms, func(Value, bool) (Value, Action) { return Value{}, Delete })
	mustMissing(t, s, "k", t0ms)
	// Delete of a missing key is a no-op.
	s.Update(key, t0ms, func(Value, bool) (Value, Action) { return Value{}, Delete })
	if s.Len() != 0 {
		t.Fatalf("Len = %d", s.Len())
	}
}

func TestUpdatePutPastExpiryDeletes(t *testing.T) {
	s := New(Options{})
	putValue(s, "k", t0ms, Value{TAT: 1})
	for _, exp := range []int64{t0ms, t0ms - 1, 1} {
		putValue(s, "k", t0ms, Value{TAT: 1})
		putValue(s, "k", t0ms, Value{TAT: 2, ExpireAtMs: exp})
		mustMissing(t, s, "k", t0ms)
		if s.Len() != 0 {
			t.Fatalf("exp %d: Len = %d", exp, s.Len())
		}
	}
	// On a missing key a past-expiry Put creates nothing.
	putValue(s, "m", t0ms, Value{TAT: 2, ExpireAtMs: t0ms})
	if s.Len() != 0 {
		t.Fatalf("Len = %d", s.Len())
	}
	// One ms in the future is kept.
	putValue(s, "k", t0ms, Value{TAT: 2, ExpireAtMs: t0ms + 1})
	mustGet(t, s, "k", t0ms)
}

func TestDelete(t *testing.T) {
	s := New(Options{})
	putValue(s, "k", t0ms, Value{TAT: 1})
	if !s.Delete([]byte("k"), t0ms) {
		t.Fatal("Delete of a live key = false")
	}
	if s.Delete([]byte("k"), t0ms) {
		t.Fatal("second Delete = true")
	}
	mustMissing(t, s, "k", t0ms)
}

func TestVersionChangesOnEveryWriteAndDelete(t *testing.T) {
	s := New(Options{})
	key := []byte("w")
	lim := mustLimit(t, 100, 1, 1)
	seen := map[uint32]string{}
	check := func(step string) {
		t.Helper()
		v, ok := s.Version(key, t0ms)
		if !ok {
			t.Fatalf("%s: key missing", step)
		}
		if prev, dup := seen[v]; dup {
			t.Fatalf("%s: version %d already seen after %s", step, v, prev)
		}
		seen[v] = step
	}
	if _, ok := s.Version(key, t0ms); ok {
		t.Fatal("missing key has a version")
	}
	s.Throttle(key, lim, 1, t0)
	check("throttle 1")
	s.Throttle(key, lim, 1, t0)
	check("throttle 2")
	putValue(s, "w", t0ms, mustGet(t, s, "w", t0ms)) // same value rewritten
	check("put same value")
	putValue(s, "w", t0ms, Value{TAT: 3})
	check("put")
	putValue(s, "w", t0ms, Value{TAT: 3, Raw: "003"})
	check("put raw")
	putValue(s, "w", t0ms, Value{TAT: 3, Raw: "003", ExpireAtMs: t0ms + 1e6})
	check("put ttl")
	s.Load(key, []byte("3"), 0)
	check("load")
	// Writes to other keys of the same shard do not touch this key's version.
	v0, _ := s.Version(key, t0ms)
	for i := 0; i < 2000; i++ {
		k := []byte("other" + strconv.Itoa(i))
		if s.shardOf(k) == s.shardOf(key) {
			putValue(s, string(k), t0ms, Value{TAT: 1})
		}
	}
	if v1, _ := s.Version(key, t0ms); v1 != v0 {
		t.Fatal("a write to another key changed this key's version")
	}
	// Delete, then re-create with the very same value: still a change.
	s.Delete(key, t0ms)
	if _, ok := s.Version(key, t0ms); ok {
		t.Fatal("deleted key has a version")
	}
	putValue(s, "w", t0ms, Value{TAT: 3})
	check("recreate after delete")
	s.Update(key, t0ms, func(Value, bool) (Value, Action) { return Value{}, Delete })
	putValue(s, "w", t0ms, Value{TAT: 3})
	check("recreate after Update Delete")
	// 0 ms Throttle rewrites it (live to the end of the ms): a change.
	putValue(s, "w", t0ms, Value{TAT: 1})
	check("put past TAT")
	s.Throttle(key, lim, 0, t0)
	check("0 ms throttle")
	putValue(s, "w", t0ms, Value{TAT: 3})
	check("recreate after 0 ms throttle")
	// Flush, then re-create.
	s.Flush()
	putValue(s, "w", t0ms, Value{TAT: 3})
	check("recreate after flush")
	// Expiry then re-create.
	putValue(s, "w", t0ms, Value{TAT: 3, ExpireAtMs: t0ms + 1})
	check("put with ttl")
	s.Get(key, t0ms+5) // lazily expired
	putValue(s, "w", t0ms, Value{TAT: 3, ExpireAtMs: t0ms + 1})
	check("recreate after expiry")
}

func TestLoadInvalidValue(t *testing.T) {
	for _, track := range []bool{false, true} {
		t.Run(fmt.Sprintf("track=%v", track), func(t *testing.T) {
			s := New(Options{TrackDirty: track})
			key := []byte("bad")
			s.Load(key, []byte("abc"), t0ms+60_000)
			v := mustGet(t, s, "bad", t0ms)
			if !v.Invalid || v.Raw != "abc" || v.ExpireAtMs != t0ms+60_000 {
				t.Fatalf("loaded %+v", v)
			}
			if got := string(v.AppendText(nil)); got != "abc" || v.TextLen() != 3 {
				t.Fatalf("AppendText = %q, TextLen = %d", got, v.TextLen())
			}
			ver, _ := s.Version(key, t0ms)
			if n := s.DirtyKeys(); n != 0 {
				t.Fatalf("DirtyKeys = %d after Load", n)
			}
			r, err := s.Throttle(key, mustLimit(t, 4, 1, 1), 1, t0)
			if !errors.Is(err, ErrInvalidValue) {
				t.Fatalf("Throttle err = %v, want ErrInvalidValue", err)
			}
			if r != (gcra.Result{}) {
				t.Fatalf("Throttle result %+v, want zero", r)
			}
			if v2 := mustGet(t, s, "bad", t0ms); v2 != v {
				t.Fatalf("value changed: %+v -> %+v", v, v2)
			}
			if ver2, _ := s.Version(key, t0ms); ver2 != ver {
				t.Fatal("version changed")
			}
			if n := s.DirtyKeys(); n != 0 {
				t.Fatalf("DirtyKeys = %d after a failed Throttle", n)
			}
			if track {
				if ch := s.Drain(t0ms, nil); len(ch) != 0 {
					t.Fatalf("Drain = %+v", ch)
				}
			}
			// A SET-style Put makes the key valid again.
			putValue(s, "bad", t0ms, Value{TAT: 9})
			if _, err := s.Throttle(key, mustLimit(t, 4, 1, 1), 1, t0); err != nil {
				t.Fatalf("after overwrite: %v", err)
			}
		})
	}
}

func TestLoadValid(t *testing.T) {
	s := New(Options{TrackDirty: true})
	s.Load([]byte("a"), []byte("007"), 0)
	s.Load([]byte("b"), []byte("12"), t0ms+5)
	if v := mustGet(t, s, "a", t0ms); v.TAT != 7 || v.Raw != "007" || v.Invalid {
		t.Fatalf("a: %+v", v)
	}
	if v := mustGet(t, s, "b", t0ms); v.TAT != 12 || v.Raw != "" || v.ExpireAtMs != t0ms+5 {
		t.Fatalf("b: %+v", v)
	}
	if n := s.DirtyKeys(); n != 0 {
		t.Fatalf("DirtyKeys = %d", n)
	}
}

func TestNewValue(t *testing.T) {
	for _, tc := range []struct {
		in  string
		ok  bool
		tat uint64
		raw string
	}{
		{"0", true, 0, ""},
		{"5", true, 5, ""},
		{"+5", true, 5, "+5"},
		{"007", true, 7, "007"},
		{"00", true, 0, "00"},
		{"+0", true, 0, "+0"},
		{"18446744073709551615", true, 1<<64 - 1, ""},
		{"018446744073709551615", true, 1<<64 - 1, "018446744073709551615"},
		{"18446744073709551616", false, 0, ""},
		{"99999999999999999999", false, 0, ""},
		{"-0", false, 0, ""},
		{"-1", false, 0, ""},
		{"", false, 0, ""},
		{"+", false, 0, ""},
		{"++1", false, 0, ""},
		{" 1", false, 0, ""},
		{"1 ", false, 0, ""},
		{"1.0", false, 0, ""},
		{"1e3", false, 0, ""},
		{"0x1", false, 0, ""},
		{"1_0", false, 0, ""},
		{"abc", false, 0, ""},
	} {
		v, ok := NewValue([]byte(tc.in))
		if ok != tc.ok {
			t.Errorf("NewValue(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if !ok {
			if v != (Value{}) {
				t.Errorf("NewValue(%q) = %+v on failure", tc.in, v)
			}
			continue
		}
		if v.TAT != tc.tat || v.Raw != tc.raw || v.Invalid || v.ExpireAtMs != 0 {
			t.Errorf("NewValue(%q) = %+v, want TAT %d Raw %q", tc.in, v, tc.tat, tc.raw)
		}
		// GET returns the verbatim text either way.
		if got := string(v.AppendText(nil)); got != tc.in {
			t.Errorf("NewValue(%q).AppendText = %q", tc.in, got)
		}
		if v.TextLen() != len(tc.in) {
			t.Errorf("NewValue(%q).TextLen = %d", tc.in, v.TextLen())
		}
		n, pok := ParseValue([]byte(tc.in))
		if !pok || n != tc.tat {
			t.Errorf("ParseValue(%q) = %d, %v", tc.in, n, pok)
		}
	}
}

func TestParseValueMatchesStrconv(t *testing.T) {
	for _, in := range []string{"0", "1", "+1", "18446744073709551615", "18446744073709551616",
		"36893488147419103232", "184467440737095516150", "+18446744073709551615", "-1", "", "+"} {
		n, ok := ParseValue([]byte(in))
		want, err := strconv.ParseUint(in, 10, 64)
		if in != "" && in[0] == '+' { // strconv.ParseUint takes no sign
			want, err = strconv.ParseUint(in[1:], 10, 64)
			if in == "+" {
				err = errors.New("sign only")
			}
		}
		if ok != (err == nil) || (ok && n != want) {
			t.Errorf("ParseValue(%q) = %d, %v; strconv: %d, %v", in, n, ok, want, err)
		}
	}
}

// scanAll runs a full SCAN iteration and returns how often each key came
// back. between runs before every Scan call after the first.
func scanAll(t *testing.T, s *Store, count int, nowMs int64, between func(step int, cursor uint64)) (map[string]int, int) {
	t.Helper()
	seen := map[string]int{}
	cursor := uint64(0)
	calls := 0
	for {
		if calls > 0 && between != nil {
			between(calls, cursor)
		}
		cursor = s.Scan(cursor, count, nowMs, func(kb []byte) {
			k := string(kb)
			_ = k
			seen[k]++
		})
		calls++
		if cursor == 0 {
			return seen, calls
		}
		if calls > 10_000_000 {
			t.Fatal("SCAN does not terminate")
		}
	}
}

func TestScanFullIteration(t *testing.T) {
	s := New(Options{})
	const n = 10_000
	for i := 0; i < n; i++ {
		putValue(s, "key:"+strconv.Itoa(i), t0ms, Value{TAT: uint64(i)})
	}
	// Expired keys are not returned.
	for i := 0; i < 100; i++ {
		putValue(s, "exp:"+strconv.Itoa(i), t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 1})
	}
	for _, count := range []int{1, 10, 1000, 0, -5} {
		seen, calls := scanAll(t, s, count, t0ms+2, nil)
		missing := 0
		for i := 0; i < n; i++ {
			if seen["key:"+strconv.Itoa(i)] == 0 {
				missing++
			}
		}
		if missing > 0 {
			t.Errorf("count %d: %d of %d keys never returned", count, missing, n)
		}
		dups := 0
		for k, c := range seen {
			if c > 1 {
				dups++
			}
			if len(k) > 4 && k[:4] == "exp:" {
				t.Errorf("count %d: expired key %q returned", count, k)
			}
		}
		if dups > 0 {
			t.Errorf("count %d: %d keys returned more than once on a static keyspace", count, dups)
		}
		if len(seen) != n {
			t.Errorf("count %d: %d distinct keys, want %d", count, len(seen), n)
		}
		t.Logf("count %d: %d calls", count, calls)
	}
}

func TestScanEmptyAndBadCursor(t *testing.T) {
	s := New(Options{})
	if c := s.Scan(0, 10, t0ms, func([]byte) { t.Fatal("key in empty store") }); c != 0 {
		t.Fatalf("empty store: cursor %d", c)
	}
	// A cursor past the last shard ends the iteration.
	if c := s.Scan(uint64(nShards)<<32, 10, t0ms, func([]byte) {}); c != 0 {
		t.Fatalf("cursor past the end: %d", c)
	}
	if c := s.Scan(^uint64(0), 10, t0ms, func([]byte) {}); c != 0 {
		t.Fatalf("max cursor: %d", c)
	}
	// A slot past a shard's slab moves on.
	putValue(s, "a", t0ms, Value{TAT: 1})
	seen, _ := scanAll(t, s, 1, t0ms, nil)
	if len(seen) != 1 {
		t.Fatalf("seen %v", seen)
	}
}

// TestScanGuaranteeUnderChurn interleaves inserts, deletes, expiry sweeps
// (including slab shrinking) and Flush-free churn between Scan calls: every
// key that lived throughout must come back.
func TestScanGuaranteeUnderChurn(t *testing.T) {
	for _, count := range []int{1, 10, 1000} {
		t.Run(strconv.Itoa(count), func(t *testing.T) {
			s := New(Options{TrackDirty: true})
			const stable = 5_000
			for i := 0; i < stable; i++ {
				putValue(s, "stable:"+strconv.Itoa(i), t0ms, Value{TAT: uint64(i)})
			}
			churn := 0
			live := []string{}
			for ; churn < 5_000; churn++ {
				k := "churn:" + strconv.Itoa(churn)
				putValue(s, k, t0ms, Value{TAT: 1})
				live = append(live, k)
			}
			// Enough keys in one shard that a sweep shrinks its slab mid-scan.
			big := keysInShard(s, 7, 3000, "big:")
			for _, k := range big {
				putValue(s, k, t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 5})
			}
			now := t0ms
			swept := false
			seen, _ := scanAll(t, s, count, now, func(step int, cursor uint64) {
				// Delete a few, insert a few (reusing freed slots).
				for j := 0; j < 3 && len(live) > 0; j++ {
					i := (step*7 + j) % len(live)
					s.Delete([]byte(live[i]), now)
					live[i] = live[len(live)-1]
					live = live[:len(live)-1]
				}
				for j := 0; j < 3; j++ {
					k := "churn:" + strconv.Itoa(churn)
					churn++
					putValue(s, k, now, Value{TAT: 2})
					live = append(live, k)
				}
				if step%50 == 0 {
					s.Drain(now, nil)
				}
				if !swept && cursor>>32 == 7 {
					// Mass expiry in the shard being scanned: shrink.
					swept = true
					sh := s.shardAt(7)
					sh.mu.Lock()
					n0 := len(sh.slab)
					sh.mu.Unlock()
					s.SweepStep(t0ms+10, time.Second)
					sh.mu.Lock()
					n1 := len(sh.slab)
					sh.mu.Unlock()
					t.Logf("cursor slot %d: shard 7 slab %d -> %d", uint32(cursor), n0, n1)
				}
			})
			if !swept {
				t.Error("the sweep never ran mid-scan")
			}
			for i := 0; i < stable; i++ {
				if seen["stable:"+strconv.Itoa(i)] == 0 {
					t.Fatalf("stable key %d missed", i)
				}
			}
		})
	}
}

// keysInShard returns n distinct keys with prefix that hash to shard si.
func keysInShard(s *Store, si, n int, prefix string) []string {
	var out []string
	buf := []byte(prefix)
	for i := 0; len(out) < n; i++ {
		buf = strconv.AppendInt(buf[:len(prefix)], int64(i), 10)
		if s.shardIndex(buf) == si {
			out = append(out, string(buf))
		}
	}
	return out
}

// applyChanges applies Drain output in order to a model of the disk.
type diskRec struct {
	text string
	exp  int64
}

func applyChanges(disk map[string]diskRec, ch []Change) {
	for _, c := range ch {
		if c.Deleted {
			delete(disk, string(c.Key))
			continue
		}
		disk[string(c.Key)] = diskRec{string(c.Text), c.ExpireAtMs}
	}
}

// byKey groups Drain output per key, in order.
func byKey(ch []Change) map[string][]Change {
	m := map[string][]Change{}
	for _, c := range ch {
		m[string(c.Key)] = append(m[string(c.Key)], c)
	}
	return m
}

func TestDrain(t *testing.T) {
	s := New(Options{TrackDirty: true})
	lim := mustLimit(t, 100, 1, 1)

	// Several writes to one key: reported once, with the final state.
	s.Throttle([]byte("a"), lim, 1, t0)
	s.Throttle([]byte("a"), lim, 1, t0)
	s.Throttle([]byte("a"), lim, 1, t0)
	putValue(s, "b", t0ms, Value{TAT: 5, Raw: "+5", ExpireAtMs: t0ms + 100})
	putValue(s, "b", t0ms, Value{TAT: 6, Raw: "006", ExpireAtMs: t0ms + 200})
	// Written then deleted within the window: reported deleted.
	putValue(s, "c", t0ms, Value{TAT: 1})
	s.Delete([]byte("c"), t0ms)
	// Deleted (it existed on disk) then re-created: reported with its value.
	s.Load([]byte("d"), []byte("10"), 0)
	s.Delete([]byte("d"), t0ms)
	putValue(s, "d", t0ms, Value{TAT: 11})
	// Loaded and untouched: not reported.
	s.Load([]byte("e"), []byte("12"), 0)
	// Loaded, then written: reported.
	s.Load([]byte("f"), []byte("13"), 0)
	putValue(s, "f", t0ms, Value{TAT: 14})
	// Written, deleted, re-created (slot reuse) and deleted again.
	putValue(s, "g", t0ms, Value{TAT: 1})
	s.Delete([]byte("g"), t0ms)
	putValue(s, "g", t0ms, Value{TAT: 2})
	s.Delete([]byte("g"), t0ms)
	// Written with a TTL that has passed by Drain time: reported deleted.
	putValue(s, "h", t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 1})
	// Kept: no change.
	s.Update([]byte("e"), t0ms, func(v Value, _ bool) (Value, Action) { return v, Keep })

	wantDirty := s.DirtyKeys()
	if wantDirty == 0 {
		t.Fatal("DirtyKeys = 0 before Drain")
	}
	ch := s.Drain(t0ms+2, nil)
	groups := byKey(ch)
	last := func(k string) Change {
		g := groups[k]
		if len(g) == 0 {
			t.Fatalf("key %q not reported; changes: %s", k, fmtChanges(ch))
		}
		return g[len(g)-1]
	}
	aval := mustGet(t, s, "a", t0ms+2)
	if c := last("a"); c.Deleted || string(c.Text) != strconv.FormatUint(aval.TAT, 10) || c.ExpireAtMs != aval.ExpireAtMs {
		t.Errorf("a: %+v, store %+v", c, aval)
	}
	if c := last("b"); c.Deleted || string(c.Text) != "006" || c.ExpireAtMs != t0ms+200 {
		t.Errorf("b: %+v", c)
	}
	if c := last("c"); !c.Deleted {
		t.Errorf("c: %+v, want deleted", c)
	}
	if c := last("d"); c.Deleted || string(c.Text) != "11" {
		t.Errorf("d: %+v, want value 11", c)
	}
	if g := groups["e"]; len(g) != 0 {
		t.Errorf("e (loaded, untouched) reported: %s", fmtChanges(g))
	}
	if c := last("f"); c.Deleted || string(c.Text) != "14" {
		t.Errorf("f: %+v", c)
	}
	if c := last("g"); !c.Deleted {
		t.Errorf("g: %+v, want deleted", c)
	}
	if c := last("h"); !c.Deleted {
		t.Errorf("h: %+v, want deleted", c)
	}
	for _, k := range []string{"a", "b", "f"} {
		if n := len(groups[k]); n != 1 {
			t.Errorf("%s reported %d times: %s", k, n, fmtChanges(groups[k]))
		}
	}
	// Deletions come first within a shard, so the per-key order is the
	// apply order. Applying everything yields the store's live state.
	disk := map[string]diskRec{"d": {"10", 0}, "e": {"12", 0}, "f": {"13", 0}}
	applyChanges(disk, ch)
	checkDiskMatchesStore(t, s, disk, t0ms+2)

	// A second Drain returns nothing.
	if n := s.DirtyKeys(); n != 0 {
		t.Errorf("DirtyKeys = %d after Drain", n)
	}
	if ch := s.Drain(t0ms+2, nil); len(ch) != 0 {
		t.Errorf("second Drain: %s", fmtChanges(ch))
	}

	// Keys and Text are owned by the receiver.
	putValue(s, "own", t0ms, Value{TAT: 42})
	ch = s.Drain(t0ms, nil)
	if len(ch) != 1 {
		t.Fatalf("own: %s", fmtChanges(ch))
	}
	ch[0].Key[0], ch[0].Text[0] = 'X', 'X'
	if v := mustGet(t, s, "own", t0ms); v.TAT != 42 || string(v.AppendText(nil)) != "42" {
		t.Fatalf("own: %+v", v)
	}
	if _, ok := s.Get([]byte("own"), t0ms); !ok {
		t.Fatal("key mutated through Change.Key")
	}
}

// TestDrainLazyAndSweptExpiry: a key that expires with unsaved changes
// (dirty: here its TTL shortened after its record was drained) is drained
// as a deletion, whether a lookup or the sweep removes it; one whose last
// record is on disk already (loaded, or drained since its last write) is
// not (expire.go), and is counted for persistence's fold trigger instead.
func TestDrainLazyAndSweptExpiry(t *testing.T) {
	s := New(Options{TrackDirty: true})
	s.Load([]byte("lazy-clean"), []byte("1"), t0ms+1)
	s.Load([]byte("swept-clean"), []byte("1"), t0ms+1)
	for _, k := range []string{"lazy-dirty", "swept-dirty"} {
		putValue(s, k, t0ms, Value{TAT: 1}) // no TTL
	}
	if n := len(s.Drain(t0ms, nil)); n != 2 {
		t.Fatalf("first drain: %d changes, want 2", n)
	}
	for _, k := range []string{"lazy-dirty", "swept-dirty"} { // PEXPIRE k 1
		if err := s.Update([]byte(k), t0ms, func(old Value, ok bool) (Value, Action) {
			old.ExpireAtMs = t0ms + 1
			return old, Put
		}); err != nil {
			t.Fatal(err)
		}
	}
	s.Get([]byte("lazy-clean"), t0ms+5)
	s.Get([]byte("lazy-dirty"), t0ms+5)
	for s.SweepStep(t0ms+5, time.Second) > 0 {
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("%d keys left, want 0", n)
	}
	groups := byKey(s.Drain(t0ms+5, nil))
	for _, k := range []string{"lazy-dirty", "swept-dirty"} {
		if g := groups[k]; len(g) != 1 || !g[0].Deleted {
			t.Errorf("%s: %s, want one deletion", k, fmtChanges(g))
		}
	}
	for _, k := range []string{"lazy-clean", "swept-clean"} {
		if g := groups[k]; len(g) != 0 {
			t.Errorf("%s: %s, want nothing (its record carries the expiry)", k, fmtChanges(g))
		}
	}
	if n := s.TakeUnloggedExpiries(); n != 2 {
		t.Errorf("TakeUnloggedExpiries = %d, want 2", n)
	}
	if n := s.TakeUnloggedExpiries(); n != 0 {
		t.Errorf("second TakeUnloggedExpiries = %d, want 0", n)
	}
	if n := s.ExpiredKeys(); n != 4 {
		t.Errorf("ExpiredKeys = %d, want 4", n)
	}
}

func TestFlushReportsAllDeleted(t *testing.T) {
	s := New(Options{TrackDirty: true})
	disk := map[string]diskRec{}
	for i := 0; i < 1000; i++ {
		k := "k" + strconv.Itoa(i)
		if i%2 == 0 {
			s.Load([]byte(k), []byte("1"), 0)
			disk[k] = diskRec{"1", 0}
		} else {
			putValue(s, k, t0ms, Value{TAT: 2})
		}
	}
	s.Delete([]byte("k0"), t0ms) // already on the deleted list
	s.Flush()
	if s.Len() != 0 {
		t.Fatalf("Len = %d after Flush", s.Len())
	}
	putValue(s, "after", t0ms, Value{TAT: 3})
	ch := s.Drain(t0ms, nil)
	groups := byKey(ch)
	for i := 0; i < 1000; i++ {
		k := "k" + strconv.Itoa(i)
		g := groups[k]
		if len(g) == 0 || !g[len(g)-1].Deleted {
			t.Fatalf("%s: %s, want deleted", k, fmtChanges(g))
		}
	}
	if g := groups["after"]; len(g) != 1 || g[0].Deleted || string(g[0].Text) != "3" {
		t.Fatalf("after: %s", fmtChanges(g))
	}
	applyChanges(disk, ch)
	checkDiskMatchesStore(t, s, disk, t0ms)
}

func fmtChanges(ch []Change) string {
	var b []byte
	for _, c := range ch {
		if c.Deleted {
			b = fmt.Appendf(b, "[%s deleted] ", c.Key)
		} else {
			b = fmt.Appendf(b, "[%s=%s exp %d] ", c.Key, c.Text, c.ExpireAtMs)
		}
	}
	return string(b)
}

// checkDiskMatchesStore: every live key is on disk with its text and
// expiry; every key on disk is live, or has expired by nowMs (restore skips
// it).
func checkDiskMatchesStore(t *testing.T, s *Store, disk map[string]diskRec, nowMs int64) {
	t.Helper()
	var live []string
	s.Keys("*", nowMs, func(kb []byte) {
		k := string(kb)
		_ = k
		live = append(live, k)
	})
	sort.Strings(live)
	for _, k := range live {
		v, ok := s.Get([]byte(k), nowMs)
		if !ok {
			continue
		}
		d, on := disk[k]
		if !on {
			t.Errorf("live key %q is not on disk", k)
			continue
		}
		if d.text != string(v.AppendText(nil)) || d.exp != v.ExpireAtMs {
			t.Errorf("key %q: disk %+v, store %q exp %d", k, d, v.AppendText(nil), v.ExpireAtMs)
		}
	}
	for k, d := range disk {
		if _, ok := s.Get([]byte(k), nowMs); !ok && (d.exp == 0 || d.exp >= nowMs) {
			t.Errorf("key %q on disk (%+v) but not in the store", k, d)
		}
	}
}

func TestSweepStepMassExpiry(t *testing.T) {
	s := New(Options{})
	const expiring, live = 100_000, 1_000
	for i := 0; i < live; i++ {
		putValue(s, "live:"+strconv.Itoa(i), t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 1e6})
	}
	for i := 0; i < expiring; i++ {
		putValue(s, "exp:"+strconv.Itoa(i), t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 10})
	}
	if s.Len() != expiring+live {
		t.Fatalf("Len = %d", s.Len())
	}
	now := t0ms + 11
	total, calls := 0, 0
	for total < expiring && calls < 100 {
		total += s.SweepStep(now, time.Second)
		calls++
	}
	t.Logf("%d expired keys removed in %d SweepStep calls (1 s budget)", total, calls)
	if total != expiring {
		t.Fatalf("removed %d, want %d", total, expiring)
	}
	if calls > 3 {
		t.Errorf("took %d calls, want a few", calls)
	}
	if n := s.Len(); n != live {
		t.Fatalf("Len = %d, want %d", n, live)
	}
	for i := 0; i < live; i++ {
		mustGet(t, s, "live:"+strconv.Itoa(i), now)
	}
	if n := s.SweepStep(now, time.Second); n != 0 {
		t.Fatalf("extra sweep removed %d", n)
	}

	// With the server's budget (SweepInterval/4 = 25 ms), for information.
	s2 := New(Options{})
	for i := 0; i < expiring; i++ {
		putValue(s2, "exp:"+strconv.Itoa(i), t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 10})
	}
	total, calls = 0, 0
	for total < expiring && calls < 1000 {
		total += s2.SweepStep(now, 25*time.Millisecond)
		calls++
	}
	t.Logf("25 ms budget: %d removed in %d calls", total, calls)
	if total != expiring {
		t.Errorf("25 ms budget: removed %d of %d in %d calls", total, expiring, calls)
	}
}

// TestSweepStepShrinks checks that mass expiry gives memory back: the
// slab is trimmed and the map rebuilt. 100,000 keys over 256 shards is ~390
// per shard, below shrinkLocked's 1024-slot floor, so this puts enough keys
// in one shard.
func TestSweepStepShrinks(t *testing.T) {
	s := New(Options{TrackDirty: true})
	const si = 3
	liveKeys := keysInShard(s, si, 10, "live:")
	expKeys := keysInShard(s, si, 8_000, "exp:")
	for _, k := range liveKeys {
		putValue(s, k, t0ms, Value{TAT: 1})
	}
	for _, k := range expKeys {
		putValue(s, k, t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 10})
	}
	sh := s.shardAt(si)
	sh.mu.Lock()
	before := len(sh.slab)
	sh.mu.Unlock()
	if before != 8_010 {
		t.Fatalf("slab %d", before)
	}
	total := 0
	for calls := 0; calls < 10 && total < len(expKeys); calls++ {
		total += s.SweepStep(t0ms+11, time.Second)
	}
	if total != len(expKeys) {
		t.Fatalf("removed %d", total)
	}
	sh.mu.Lock()
	after, capAfter, idx, free := len(sh.slab), cap(sh.slab), sh.used, len(sh.free)
	sh.mu.Unlock()
	t.Logf("slab %d -> %d (cap %d), idx %d, free %d", before, after, capAfter, idx, free)
	if after > 64 || capAfter > 128 {
		t.Errorf("slab not trimmed: len %d cap %d", after, capAfter)
	}
	if idx != len(liveKeys) || free > after {
		t.Errorf("idx %d free %d", idx, free)
	}
	for _, k := range liveKeys {
		mustGet(t, s, k, t0ms+11)
	}
	// Deletions are all reported, and the store still works.
	ch := s.Drain(t0ms+11, nil)
	del := 0
	for _, c := range ch {
		if c.Deleted {
			del++
		}
	}
	if del != len(expKeys) {
		t.Errorf("Drain reported %d deletions, want %d", del, len(expKeys))
	}
	for i, k := range expKeys[:100] {
		putValue(s, k, t0ms+11, Value{TAT: uint64(i)})
	}
	for i, k := range expKeys[:100] {
		if v := mustGet(t, s, k, t0ms+11); v.TAT != uint64(i) {
			t.Fatalf("%s: %+v", k, v)
		}
	}
}

// TestSweepStepShrinkIsNotRepeated: when the slab's tail is in use but the
// map is much larger than needed, shrinkLocked rebuilds the map (and copies
// the slab). Once rebuilt, nothing has changed, so later sweeps must not
// rebuild again: each rebuild is O(slots) under the shard lock.
func TestSweepStepShrinkIsNotRepeated(t *testing.T) {
	s := New(Options{})
	const si = 5
	keys := keysInShard(s, si, 8192, "k:")
	for i, k := range keys {
		exp := t0ms + 10
		if i%10 == 0 || i == len(keys)-1 { // ~820 live, tail slot live
			exp = 0
		}
		putValue(s, k, t0ms, Value{TAT: 1, ExpireAtMs: exp})
	}
	now := t0ms + 11
	for i := 0; i < 5; i++ {
		s.SweepStep(now, time.Second)
	}
	sh := s.shardAt(si)
	sh.mu.Lock()
	p1, n1 := &sh.slab[0], len(sh.slab)
	idx := sh.used
	sh.mu.Unlock()
	rebuilds := 0
	for i := 0; i < 10; i++ {
		s.SweepStep(now, time.Second)
		sh.mu.Lock()
		if p := &sh.slab[0]; p != p1 {
			rebuilds++
			p1 = p
		}
		sh.mu.Unlock()
	}
	t.Logf("slab %d slots, %d keys", n1, idx)
	if rebuilds > 0 {
		t.Errorf("shrinkLocked rebuilt the slab and map again on %d of 10 idle sweeps (slab %d, keys %d): "+
			"when the tail is used and len(idx)*8 <= len(slab) it copies every time", rebuilds, n1, idx)
	}
}

func TestCountsAndKeys(t *testing.T) {
	s := New(Options{})
	putValue(s, "a", t0ms, Value{TAT: 1})
	putValue(s, "b", t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 100})
	putValue(s, "c", t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 1})
	if k, e := s.Counts(); k != 3 || e != 2 {
		t.Fatalf("Counts = %d, %d", k, e)
	}
	var got []string
	s.Keys("*", t0ms+5, func(kb []byte) {
		k := string(kb)
		_ = k
		got = append(got, k)
	})
	sort.Strings(got)
	if fmt.Sprint(got) != "[a b]" {
		t.Fatalf("Keys(*) = %v", got)
	}
	got = nil
	s.Keys("[ab]", t0ms+5, func(kb []byte) {
		k := string(kb)
		_ = k
		got = append(got, k)
	})
	sort.Strings(got)
	if fmt.Sprint(got) != "[a b]" {
		t.Fatalf("Keys([ab]) = %v", got)
	}
	// The empty key is a key; KEYS * returns it (short circuit, as Redis).
	putValue(s, "", t0ms, Value{TAT: 1})
	got = nil
	s.Keys("*", t0ms+5, func(kb []byte) {
		k := string(kb)
		_ = k
		got = append(got, k)
	})
	if len(got) != 3 {
		t.Fatalf("Keys(*) with empty key = %q", got)
	}
}

// TestSweepStepResumesAcrossShards: Redis's active expiry cycle remembers
// where it stopped (static current_db, and a cursor per db), so a cycle cut
// short by its time budget resumes with the next database. SweepStep keeps
// a cursor per shard but always starts at shard 0, so whenever the budget is
// used up in the low shards (a tight budget, a slow or preempted process)
// the high shards are never swept and their expired keys stay in memory.
func TestSweepStepResumesAcrossShards(t *testing.T) {
	s := New(Options{})
	const perShard = 10
	for si := 0; si < nShards; si++ {
		for _, k := range keysInShard(s, si, perShard, "e"+strconv.Itoa(si)+":") {
			putValue(s, k, t0ms, Value{TAT: 1, ExpireAtMs: t0ms + 1})
		}
	}
	total := 0
	for call := 0; call < 4*nShards; call++ {
		total += s.SweepStep(t0ms+5, time.Nanosecond)
	}
	left := map[int]int{}
	for si := range s.shards {
		sh := s.shardAt(si)
		sh.mu.Lock()
		if n := sh.used; n > 0 {
			left[si] = n
		}
		sh.mu.Unlock()
	}
	if total != nShards*perShard {
		t.Errorf("after %d SweepStep calls with a 1 ns budget: %d of %d expired keys removed; %d shards never swept (e.g. shard 255 holds %d)",
			4*nShards, total, nShards*perShard, len(left), left[nShards-1])
	}
}

// TestDumpShardAndUnload: DumpShard over every shard yields exactly the live
// keys with GET's text and their expiry, and leaves the dirty state alone;
// Unload removes a restored key without queueing a deletion.
func TestDumpShardAndUnload(t *testing.T) {
	s := New(Options{TrackDirty: true})
	const now = 1_000_000
	s.Load([]byte("a"), []byte("100"), 0)
	s.Load([]byte("b"), []byte("+7"), now+5000) // verbatim text
	s.Load([]byte("expired"), []byte("1"), now-1)
	s.Load([]byte("gone"), []byte("5"), 0)
	s.Unload([]byte("gone"))
	s.Unload([]byte("never-there"))
	if n := s.DirtyKeys(); n != 0 {
		t.Fatalf("DirtyKeys after Load/Unload = %d, want 0", n)
	}
	s.Update([]byte("c"), now, func(Value, bool) (Value, Action) {
		v, _ := NewValue([]byte("42"))
		return v, Put
	})
	got := map[string]string{}
	for i := range NumShards {
		s.DumpShard(i, now, func(c Change) {
			text := c.Text
			if c.IsTAT {
				text = strconv.AppendUint(nil, c.TAT, 10)
			}
			got[string(c.Key)] = fmt.Sprintf("%s@%d", text, c.ExpireAtMs)
		})
	}
	want := map[string]string{"a": "100@0", "b": fmt.Sprintf("+7@%d", now+5000), "c": "42@0"}
	if !maps.Equal(got, want) {
		t.Fatalf("dump = %v, want %v", got, want)
	}
	if n := s.DirtyKeys(); n != 1 {
		t.Fatalf("DirtyKeys after DumpShard = %d, want 1 (c, still to drain)", n)
	}
}

// TestPrefetchViewFollowsReallocations: Prefetch's lock-free view of each
// shard is the live index and slab array after every reallocation (growth,
// a rehash, a shrink, Flush), so its prefetches land on the lines lookups
// read; and Prefetch changes nothing.
func TestPrefetchViewFollowsReallocations(t *testing.T) {
	s := New(Options{})
	lim := mustLimit(t, 10, 1, 1)
	check := func(when string) {
		t.Helper()
		for i := range s.shards {
			sh := s.shardAt(i)
			sh.mu.Lock()
			v := sh.view.Load()
			if v == nil || unsafe.SliceData(v.table) != unsafe.SliceData(sh.table) || len(v.table) != len(sh.table) ||
				unsafe.SliceData(v.slab) != unsafe.SliceData(sh.slab) || len(v.slab) != cap(sh.slab) {
				sh.mu.Unlock()
				t.Fatalf("%s: shard %d's view is not its live index and slab", when, i)
			}
			sh.mu.Unlock()
		}
	}
	check("new store")
	var keys [][]byte
	for i := range 20000 {
		keys = append(keys, []byte("key:"+strconv.Itoa(i)))
	}
	// Enough keys in one shard for a shrink to reallocate its slab.
	for _, k := range keysInShard(s, 3, 2000, "same:") {
		keys = append(keys, []byte(k))
	}
	for _, k := range keys {
		if _, err := s.Throttle(k, lim, 1, t0ms*1e6); err != nil {
			t.Fatal(err)
		}
	}
	check("after 22000 inserts")
	before := s.Len()
	hs := make([]uint64, 64)
	for i := 0; i+64 <= len(keys); i += 64 {
		s.Prefetch(keys[i:i+64], hs)
	}
	s.Prefetch([][]byte{[]byte("absent"), []byte("")}, hs)
	if s.Len() != before {
		t.Fatalf("Prefetch changed the key count: %d -> %d", before, s.Len())
	}
	// A few keys survive; the sweeper expires the rest and shrinks.
	for _, k := range keys[:100] { // early slots: the free tail can go
		if _, err := s.Throttle(k, lim, 1, (t0ms+500_000)*1e6); err != nil {
			t.Fatal(err)
		}
	}
	capBefore := cap(s.shardAt(3).slab)
	for s.SweepStep(t0ms+500_000, time.Second) > 0 {
	}
	if cap(s.shardAt(3).slab) >= capBefore {
		t.Fatalf("no shrink of shard 3's slab (cap %d -> %d): the test misses that path", capBefore, cap(s.shardAt(3).slab))
	}
	check("after deletes and sweeps (shrink)")
	s.Flush()
	check("after Flush")
}

// A key of another kind refuses TAT operations with ErrWrongType and keeps
// its kind through an expiry-only Update; a string Put replaces it.
func TestKindTagRules(t *testing.T) {
	s := New(Options{TrackDirty: true})
	key := []byte("k")
	s.Update(key, 1000, func(Value, bool) (Value, Action) { return Value{TAT: 1}, Put })
	sh := s.shardOf(key)
	sh.mu.Lock()
	slot, _ := sh.lookupLocked(key, s.hashKey(key), 1000)
	sh.slab[slot].flags |= kindFlags(KindHash)
	sh.mu.Unlock()
	lim, err := gcra.NewLimit(10, 10, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Throttle(key, lim, 1, 1e9); err != ErrWrongType {
		t.Fatalf("Throttle on a hash: %v, want ErrWrongType", err)
	}
	if _, err := s.ThrottleIn(gcra.UnitMillis, key, lim, 1, 1e9); err != ErrWrongType {
		t.Fatalf("ThrottleIn on a hash: %v, want ErrWrongType", err)
	}
	if _, err := s.Peek(gcra.UnitSeconds, key, lim, 1, 1e9); err != ErrWrongType {
		t.Fatalf("Peek on a hash: %v, want ErrWrongType", err)
	}
	s.Update(key, 1000, func(v Value, ok bool) (Value, Action) { v.ExpireAtMs = 5000; return v, Put })
	if v, ok := s.Get(key, 1000); !ok || v.Kind != KindHash || v.ExpireAtMs != 5000 {
		t.Fatalf("after EXPIRE-style Update: %+v %v, want a hash expiring at 5000", v, ok)
	}
	s.Update(key, 1000, func(Value, bool) (Value, Action) { return Value{TAT: 7}, Put })
	if v, ok := s.Get(key, 1000); !ok || v.Kind != KindString || v.TAT != 7 || v.ExpireAtMs != 0 {
		t.Fatalf("after SET-style Update: %+v %v, want the string 7", v, ok)
	}
}
