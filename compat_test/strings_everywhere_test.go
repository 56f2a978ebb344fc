package compat_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/celld/celld/cluster"
	"github.com/redis/go-redis/v9"
)

// Issue 23: the string and counter commands go through the same paths as
// CL.THROTTLE: client-side caching, WATCH, MULTI, scripts, cluster routing.

// A counter that INCR or DECR brings to 0 was still written (its reply :0
// is a value, not "nothing changed"): the tracking client gets its push and
// a WATCH on it fails the transaction.
func TestCountersInvalidateAndTouchWatch(t *testing.T) {
	ts := startServer(t)
	a := resp3Conn(t, ts)
	b := dialRaw(t, ts)
	if got := a.exchange(t, "CLIENT", "TRACKING", "ON"); got != "+OK\r\n" {
		t.Fatalf("CLIENT TRACKING ON: %q", got)
	}
	b.exchange(t, "SET", "k", "1")
	for _, w := range [][]string{
		{"DECR", "k"},        // :0
		{"INCRBY", "k", "0"}, // :0
		{"APPEND", "k", "x"}, // "0x"
		{"SETRANGE", "k", "0", "1"},
		{"SET", "k", "0"},
		{"INCRBYFLOAT", "k", "1.5"},
		{"GETDEL", "k"},
		{"MSET", "k", "1", "other", "2"},
		{"GETEX", "k", "PX", "100000"},
		{"COPY", "other", "k", "REPLACE"},
		{"RENAME", "other", "k"},
	} {
		a.exchange(t, "GET", "k")
		b.exchange(t, w...)
		if got := a.read(len(push("k"))); got != push("k") {
			t.Fatalf("%v: push %q, want %q", w, got, push("k"))
		}
	}
	// Writes that change nothing push nothing.
	a.exchange(t, "GET", "k")
	b.exchange(t, "SETNX", "k", "9")
	b.exchange(t, "MSETNX", "k", "9", "z", "9")
	b.exchange(t, "GETDEL", "nokey")
	b.exchange(t, "RENAMENX", "z", "k")
	expectNoPush(t, a)

	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: ts.Addr})
	t.Cleanup(func() { rdb.Close() })
	rdb.Set(ctx, "w", "1", 0)
	err := rdb.Watch(ctx, func(tx *redis.Tx) error {
		rdb.Decr(ctx, "w") // another connection: 1 -> 0
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, "w")
			return nil
		})
		return err
	}, "w")
	if err != redis.TxFailedErr {
		t.Fatalf("WATCH over a DECR to 0: %v, want the transaction to fail", err)
	}
	if v := rdb.Get(ctx, "w").Val(); v != "0" {
		t.Fatalf("w = %q, want 0", v)
	}
	// MULTI runs them in order, atomically.
	cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "m", "10", 0)
		p.IncrBy(ctx, "m", 5)
		p.IncrByFloat(ctx, "m", 0.5)
		p.Append(ctx, "m", "x")
		p.Get(ctx, "m")
		return nil
	})
	if err != nil || cmds[4].(*redis.StringCmd).Val() != "15.5x" {
		t.Fatalf("MULTI: %v, %v", cmds, err)
	}
}

// Cluster mode: the multi-key string and key commands are routed by all
// their keys, as Redis Cluster does (MSET's keys are every other argument).
func TestClusterStringsCrossSlot(t *testing.T) {
	nodes := startClusterNodes(t, 3)
	var local []string
	for i := 0; len(local) < 2; i++ {
		k := fmt.Sprintf("k%d", i)
		if clusterOwner(k, 3) == 0 && (len(local) == 0 || cluster.KeySlotString(k) != cluster.KeySlotString(local[0])) {
			local = append(local, k)
		}
	}
	tag := ""
	for i := 0; tag == ""; i++ {
		if k := fmt.Sprintf("{t%d}", i); clusterOwner(k, 3) == 0 {
			tag = k
		}
	}
	const crossslot = "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
	rc := dialRaw(t, nodes[0])
	runRaw(t, rc, []rawStep{
		{resp("MSET", local[0], "1", local[1], "2"), crossslot},
		{resp("MGET", local[0], local[1]), crossslot},
		{resp("MSETNX", local[0], "1", local[1], "2"), crossslot},
		{resp("RENAME", local[0], local[1]), crossslot},
		{resp("COPY", local[0], local[1]), crossslot},
		{resp("MSET", tag+"a", "1", tag+"b", "2"), "+OK\r\n"},
		{resp("MGET", tag+"a", tag+"b"), "*2\r\n$1\r\n1\r\n$1\r\n2\r\n"},
		{resp("RENAME", tag+"a", tag+"c"), "+OK\r\n"},
		{resp("INCR", tag+"c"), ":2\r\n"},
	})
	if got := rc.exchange(t, "GET", "foo"); !strings.HasPrefix(got, "-MOVED 12182 ") {
		t.Fatalf("GET of another node's key: %q", got)
	}
}
