package compat_test

import "testing"

// denyOOMScenario runs Redis's processCommand rule for the memory bound on
// one server and returns each reply in order: over maxmemory under
// noeviction, every command flagged denyoom is refused with -OOM whether
// it would create a key or grow one that exists (SET, APPEND, HSET, RPUSH,
// ZADD, INCR, SETRANGE), while commands that do not grow memory run (GET,
// HDEL, LPOP, ZREM, DEL, EXPIRE, PING). Scripts: a script without a
// shebang is refused at its first denyoom call (redis.call raises, pcall
// returns the error table) and may read; a shebang without flags is
// refused whole; allow-oom may write; no-writes may read.
func denyOOMScenario(t *testing.T, dial func() *rawConn) []string {
	t.Helper()
	a, b := dial(), dial()
	var got []string
	ex := func(c *rawConn, args ...string) {
		t.Helper()
		got = append(got, c.exchange(t, args...))
	}
	ex(b, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	ex(a, "SET", "s", "v")
	ex(a, "SET", "n", "1")
	ex(a, "HSET", "h", "f1", "v", "f2", "v")
	ex(a, "RPUSH", "l", "a", "b")
	ex(a, "ZADD", "z", "1", "a", "2", "b")
	ex(b, "CONFIG", "SET", "maxmemory", "1")
	// Growing existing keys: refused.
	ex(a, "SET", "s", "w")
	ex(a, "APPEND", "s", "more")
	ex(a, "SETRANGE", "s", "10", "x")
	ex(a, "INCR", "n")
	ex(a, "HSET", "h", "f3", "v")
	ex(a, "RPUSH", "l", "c")
	ex(a, "LPUSH", "l", "c")
	ex(a, "ZADD", "z", "3", "c")
	ex(a, "SET", "new", "v")
	// Not growing: answered.
	ex(a, "GET", "s")
	ex(a, "HDEL", "h", "f1")
	ex(a, "LPOP", "l")
	ex(a, "ZREM", "z", "a")
	ex(a, "EXPIRE", "s", "100")
	ex(a, "PING")
	ex(a, "DEL", "n")
	// Scripts.
	ex(a, "EVAL", "redis.call('set','s','x') return 1", "1", "s")
	ex(a, "EVAL", "local t = redis.pcall('set','s','x') return t['err']", "1", "s")
	ex(a, "EVAL", "return redis.call('get','s')", "1", "s")
	ex(a, "EVAL", "#!lua flags=\nreturn 1", "0")
	ex(a, "EVAL", "#!lua flags=allow-oom\nredis.call('set','s','y') return 1", "1", "s")
	ex(a, "EVAL", "#!lua flags=no-writes\nreturn redis.call('get','s')", "0")
	ex(b, "CONFIG", "SET", "maxmemory", "0")
	ex(a, "GET", "s")
	ex(a, "HLEN", "h")
	ex(a, "LRANGE", "l", "0", "-1")
	return got
}

// TestRedisDiffDenyOOMAtTheBound: celld answers denyOOMScenario byte for
// byte as redis-server does. Before, celld refused only the creation of a
// key: SET, APPEND, HSET, RPUSH, ... on existing keys ran over the bound.
func TestRedisDiffDenyOOMAtTheBound(t *testing.T) {
	r := startRedis(t)
	want := denyOOMScenario(t, func() *rawConn { return r.dial(t) })
	ts := startServer(t)
	got := denyOOMScenario(t, func() *rawConn { return dialRaw(t, ts) })
	if len(got) != len(want) {
		t.Fatalf("celld gave %d replies, redis-server %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("reply %d: celld %q, redis-server %q", i, got[i], want[i])
		}
	}
	t.Logf("redis-server: %q", want)
}
