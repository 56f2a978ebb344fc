package compat_test

import (
	"testing"
)

// multiOOMScenario runs Redis 7's MULTI-at-the-memory-bound cases on one
// server and returns each reply in order: a read-only transaction queued
// before the bound is reached still executes; a transaction holding a
// denyoom command is refused at EXEC; any command queued while over the
// bound is refused and dooms the transaction. noeviction, so nothing can
// be evicted to make room.
func multiOOMScenario(t *testing.T, dial func() *rawConn) []string {
	t.Helper()
	a, b := dial(), dial()
	var got []string
	ex := func(c *rawConn, args ...string) {
		t.Helper()
		got = append(got, c.exchange(t, args...))
	}
	ex(b, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	ex(a, "SET", "x", "value")
	// Read-only queue, bound reached before EXEC: runs.
	ex(a, "MULTI")
	ex(a, "GET", "x")
	ex(a, "PING")
	ex(b, "CONFIG", "SET", "maxmemory", "1")
	ex(a, "EXEC")
	ex(b, "CONFIG", "SET", "maxmemory", "0")
	// A denyoom command queued, bound reached before EXEC: EXECABORT.
	ex(a, "MULTI")
	ex(a, "SET", "x", "1")
	ex(a, "GET", "x")
	ex(b, "CONFIG", "SET", "maxmemory", "1")
	ex(a, "EXEC")
	// Over the bound while queuing: even a read is refused.
	ex(a, "MULTI")
	ex(a, "GET", "x")
	ex(a, "EXEC")
	// DISCARD is never refused.
	ex(a, "MULTI")
	ex(a, "DISCARD")
	ex(b, "CONFIG", "SET", "maxmemory", "0")
	ex(a, "GET", "x")
	return got
}

// TestRedisDiffMultiAtTheBound: celld answers the MULTI/EXEC cases at the
// memory bound byte for byte as redis-server 7.0.15 does (its
// processCommand refuses every command queued while over maxmemory, and
// an EXEC whose queue holds a denyoom command).
func TestRedisDiffMultiAtTheBound(t *testing.T) {
	r := startRedis(t)
	want := multiOOMScenario(t, func() *rawConn { return r.dial(t) })
	ts := startServer(t)
	got := multiOOMScenario(t, func() *rawConn { return dialRaw(t, ts) })
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
