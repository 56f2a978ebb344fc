package compat_test

import (
	"strconv"
	"strings"
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

// TestMultiQueueHeldAgainstTheBound: the commands a client queues in
// MULTI count against the memory bound (as a client's MULTI state counts
// in Redis's used_memory): a queue that would take more than the room left
// meets -OOM, which dooms the transaction, instead of growing the process
// without limit (before: 3M queued SETs took 635 MB of RSS at a 16 MB
// bound, used_memory unchanged). No key is evicted for it, EXEC answers
// EXECABORT, and the queue's memory is given back.
func TestMultiQueueHeldAgainstTheBound(t *testing.T) {
	ts := startServer(t)
	a, b := dialRaw(t, ts), dialRaw(t, ts)
	used := func() int64 {
		s := b.exchange(t, "INFO", "memory")
		i := strings.Index(s, "used_memory:")
		n, _ := strconv.ParseInt(s[i+len("used_memory:"):][:strings.Index(s[i+len("used_memory:"):], "\r")], 10, 64)
		return n
	}
	for i := range 100 {
		b.exchange(t, "SET", "key:"+strconv.Itoa(i), "v", "EX", "3600")
	}
	before := used()
	b.exchange(t, "CONFIG", "SET", "maxmemory-policy", "allkeys-random")
	b.exchange(t, "CONFIG", "SET", "maxmemory", strconv.FormatInt(before+1<<20, 10))
	a.write(resp("MULTI"))
	readValue(t, a)
	// 20,000 commands of ~150 bytes each: ~3 MB, three times the room.
	val := strings.Repeat("v", 100)
	var sb strings.Builder
	for range 20000 {
		sb.WriteString(resp("SET", "k", val))
	}
	a.write(sb.String())
	oom := 0
	for range 20000 {
		if r := readValue(t, a); strings.HasPrefix(r, "-OOM ") {
			oom++
		} else if r != "+QUEUED\r\n" {
			t.Fatalf("queuing: %q", r)
		}
	}
	if oom == 0 {
		t.Fatalf("20,000 queued commands (~3 MB) past a bound 1 MB above used memory: none refused")
	}
	if u := used(); u > before+2<<20 {
		t.Errorf("used_memory %d while queuing, bound %d", u, before+1<<20)
	}
	if got := a.exchange(t, "EXEC"); !strings.HasPrefix(got, "-EXECABORT") {
		t.Errorf("EXEC after refused queuing: %q", got)
	}
	if got := b.exchange(t, "INFO", "stats"); !strings.Contains(got, "evicted_keys:0\r\n") {
		t.Errorf("keys evicted for a client's queue")
	}
	if u := used(); u > before+64<<10 {
		t.Errorf("used_memory %d after EXEC, %d before the queue: its memory was not given back", u, before)
	}
	if got := a.exchange(t, "SET", "after", "1"); got != "+OK\r\n" {
		t.Errorf("SET after the transaction: %q", got)
	}
	t.Logf("%d of 20000 queued commands refused", oom)
}
