package compat_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Keys evicted at the memory bound are signalled as modified, as Redis's
// evict.c does (signalModifiedKey): clients that may cache them get an
// invalidation push (default and BCAST mode), and a transaction WATCHing
// one fails. Checked byte-for-byte against a real redis-server when one is
// installed, and through rueidis's client-side cache.

// evictionScenario writes 20 keys with short TTLs, has a default-mode and a
// BCAST tracking client read / subscribe to them and a third client WATCH
// one, then lowers maxmemory under volatile-ttl so that the next write
// evicts them all. It returns the keys each tracking client was told
// about (sorted), and the watching client's EXEC reply.
func evictionScenario(t *testing.T, dial func() *rawConn) (tracked, bcast []string, exec string) {
	t.Helper()
	b := dial()
	if got := b.exchange(t, "CONFIG", "SET", "maxmemory-policy", "volatile-ttl"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET maxmemory-policy: %q", got)
	}
	const n = 20
	for i := range n {
		if got := b.exchange(t, "SET", "t:"+strconv.Itoa(i), "5", "PX", "100000"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
	}
	resp3 := func() *rawConn {
		rc := dial()
		rc.write(resp("HELLO", "3"))
		readValue(t, rc)
		return rc
	}
	a := resp3()
	if got := a.exchange(t, "CLIENT", "TRACKING", "ON"); got != "+OK\r\n" {
		t.Fatalf("CLIENT TRACKING ON: %q", got)
	}
	for i := range n {
		if got := a.exchange(t, "GET", "t:"+strconv.Itoa(i)); got != "$1\r\n5\r\n" {
			t.Fatalf("GET: %q", got)
		}
	}
	bc := resp3()
	if got := bc.exchange(t, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "t:"); got != "+OK\r\n" {
		t.Fatalf("CLIENT TRACKING ON BCAST: %q", got)
	}
	w := dial()
	if got := w.exchange(t, "WATCH", "t:3"); got != "+OK\r\n" {
		t.Fatalf("WATCH: %q", got)
	}

	// The bound far below what is used: the next write evicts every
	// volatile key (then is refused: nothing is left to evict).
	if got := b.exchange(t, "CONFIG", "SET", "maxmemory", "1"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET maxmemory: %q", got)
	}
	for i := 0; ; i++ {
		got := b.exchange(t, "SET", "new:"+strconv.Itoa(i), "1")
		if b.exchange(t, "DBSIZE") == ":0\r\n" {
			if !strings.HasPrefix(got, "-OOM ") {
				t.Fatalf("SET at the bound with nothing to evict: %q", got)
			}
			break
		}
		if i == 100 {
			t.Fatalf("keys left after 100 writes at the bound: DBSIZE %q", b.exchange(t, "DBSIZE"))
		}
	}

	keysOf := func(rc *rawConn) []string {
		var keys []string
		for len(keys) < n {
			v := readValue(t, rc)
			// >2 $10 invalidate *k ($len key)...
			head := ">2\r\n$10\r\ninvalidate\r\n*"
			if !strings.HasPrefix(v, head) {
				t.Fatalf("expected an invalidation push, got %q (after %v)", v, keys)
			}
			parts := strings.Split(v[len(head):], "\r\n")
			cnt, _ := strconv.Atoi(parts[0])
			for j := range cnt {
				keys = append(keys, parts[2+2*j])
			}
		}
		slices.Sort(keys)
		expectNoPush(t, rc)
		return keys
	}
	tracked, bcast = keysOf(a), keysOf(bc)
	// (Redis refuses even a read queued in MULTI while over the bound.)
	if got := b.exchange(t, "CONFIG", "SET", "maxmemory", "0"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET maxmemory 0: %q", got)
	}
	w.write(resp("MULTI"))
	readValue(t, w)
	w.write(resp("GET", "t:3"))
	readValue(t, w)
	return tracked, bcast, w.exchange(t, "EXEC")
}

func TestEvictionInvalidatesAndTouchesWatch(t *testing.T) {
	var want []string
	for i := range 20 {
		want = append(want, "t:"+strconv.Itoa(i))
	}
	slices.Sort(want)
	check := func(t *testing.T, dial func() *rawConn) {
		tracked, bcast, exec := evictionScenario(t, dial)
		if !slices.Equal(tracked, want) {
			t.Errorf("default-mode pushes for %v, want %v", tracked, want)
		}
		if !slices.Equal(bcast, want) {
			t.Errorf("BCAST pushes for %v, want %v", bcast, want)
		}
		if exec != "*-1\r\n" {
			t.Errorf("EXEC after the WATCHed key was evicted: %q, want a null (aborted)", exec)
		}
	}
	t.Run("celld", func(t *testing.T) {
		ts := startServer(t)
		check(t, func() *rawConn { return dialRaw(t, ts) })
	})
	t.Run("redis-server", func(t *testing.T) {
		r := startRedis(t)
		check(t, func() *rawConn { return r.dial(t) })
	})
}

// TestEvictionInvalidatesRueidisCache: a value rueidis cached from celld
// is dropped from its cache when the key is evicted, so the next cached
// read asks the server (and finds nothing) instead of serving the evicted
// value for the rest of its cache TTL.
func TestEvictionInvalidatesRueidisCache(t *testing.T) {
	ts := startServer(t)
	a := newRueidisCached(t, ts)
	b := newRueidis(t, ts)
	ctx := context.Background()
	do := func(cmd rueidis.Completed) {
		t.Helper()
		if err := b.Do(ctx, cmd).Error(); err != nil {
			t.Fatal(err)
		}
	}
	do(b.B().ConfigSet().ParameterValue().ParameterValue("maxmemory-policy", "volatile-ttl").Build())
	do(b.B().Set().Key("ck").Value("42").Px(100 * time.Second).Build())
	read := func() (string, bool, error) {
		r := a.DoCache(ctx, a.B().Get().Key("ck").Cache(), time.Minute)
		v, err := r.ToString()
		return v, r.IsCacheHit(), err
	}
	if v, _, err := read(); v != "42" || err != nil {
		t.Fatalf("first cached read: %q %v", v, err)
	}
	if v, hit, err := read(); v != "42" || !hit || err != nil {
		t.Fatalf("second read: %q hit=%v %v; want a cache hit", v, hit, err)
	}
	do(b.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", "1").Build())
	if err := b.Do(ctx, b.B().Set().Key("other").Value("1").Build()).Error(); err == nil || !strings.HasPrefix(err.Error(), "OOM ") {
		t.Fatalf("SET at the bound: %v, want OOM after evicting ck", err)
	}
	// Lift the bound again: over it, the cached read's MULTI is refused
	// (as Redis refuses every command queued in MULTI over the bound).
	do(b.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", "0").Build())
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, hit, err := read()
		if rueidis.IsRedisNil(err) && !hit {
			return // the push dropped the cached value; the server has no key
		}
		if time.Now().After(deadline) {
			t.Fatalf("cached read 5 s after the eviction: %q hit=%v %v; want a miss answered nil", v, hit, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
