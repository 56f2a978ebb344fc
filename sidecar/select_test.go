package sidecar

import (
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/server"
	"github.com/redis/go-redis/v9"
)

// TestSidecarSelectPlainUpstream: with a plain (non-cluster) upstream, a
// client's database is carried to the owner: go-redis with DB 3 (SELECT 3
// on connect) throttles, sets and watches in the owner's database 3, not
// 0; a pipeline too; a SELECT inside a forwarded transaction moves the
// client for what follows, as EXEC does in Redis; fallback decisions use
// the sidecar's own database 3.
func TestSidecarSelectPlainUpstream(t *testing.T) {
	owner := serve(t, nil, server.Config{}, nil)
	side := sidecarNode(t, Config{Seeds: []string{owner.addr}})
	rdb3 := redis.NewClient(&redis.Options{Addr: side.addr, DB: 3, MaxRetries: -1, PoolSize: 2})
	t.Cleanup(func() { rdb3.Close() })
	up0 := client(t, owner.addr)
	up3 := redis.NewClient(&redis.Options{Addr: owner.addr, DB: 3, MaxRetries: -1})
	t.Cleanup(func() { up3.Close() })

	for i := range 3 {
		r := cmdInts(t, rdb3.Do(ctx, "CL.THROTTLE", "user1", 4, 10, 3600))
		if r[0] != 0 || r[2] != int64(4-i) {
			t.Fatalf("call %d in db 3: %v", i, r)
		}
	}
	if err := rdb3.Set(ctx, "greeting", "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n := up0.Exists(ctx, "user1", "greeting").Val(); n != 0 {
		t.Fatalf("owner's db 0 holds %d of the keys written in db 3", n)
	}
	if v := up3.Get(ctx, "greeting").Val(); v != "hello" {
		t.Fatalf("owner's db 3: greeting = %q", v)
	}
	if n := up3.Exists(ctx, "user1").Val(); n != 1 {
		t.Fatal("owner's db 3 lacks the throttled key")
	}
	// The same key in db 0 through the sidecar is another bucket.
	rdb0 := client(t, side.addr)
	if r := cmdInts(t, rdb0.Do(ctx, "CL.THROTTLE", "user1", 4, 10, 3600)); r[2] != 4 {
		t.Fatalf("db 0: %v, want a fresh bucket", r)
	}
	// A pipeline in db 3.
	pipe := rdb3.Pipeline()
	var cmds []*redis.Cmd
	for range 5 {
		cmds = append(cmds, pipe.Do(ctx, "CL.THROTTLE", "user1", 4, 10, 3600))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if r := cmdInts(t, cmds[1]); r[0] != 0 || r[2] != 0 {
		t.Fatalf("pipeline call 2 in db 3: %v", r)
	}
	if r := cmdInts(t, cmds[2]); r[0] != 1 {
		t.Fatalf("pipeline call 3 in db 3: %v, want denied", r)
	}
	// WATCH + MULTI/EXEC in db 3: the owner watches its db 3 key.
	err := rdb3.Watch(ctx, func(tx *redis.Tx) error {
		n, err := tx.Get(ctx, "greeting").Result()
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "greeting", n+" world", 0)
			return nil
		})
		return err
	}, "greeting")
	if err != nil {
		t.Fatal(err)
	}
	if v := up3.Get(ctx, "greeting").Val(); v != "hello world" {
		t.Fatalf("after WATCH/EXEC in db 3: %q", v)
	}
	// A SELECT inside a transaction: the owner runs it on a connection of
	// its own, and the client stays in that database afterwards.
	conn := rdb0.Conn()
	t.Cleanup(func() { conn.Close() })
	cmdsTx, err := conn.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Select(ctx, 5)
		p.Set(ctx, "moved", "in5", 0)
		return nil
	})
	if err != nil || cmdsTx[0].(*redis.StatusCmd).Val() != "OK" {
		t.Fatalf("MULTI SELECT 5 SET EXEC: %v %v", cmdsTx, err)
	}
	if err := conn.Set(ctx, "after", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	up5 := redis.NewClient(&redis.Options{Addr: owner.addr, DB: 5, MaxRetries: -1})
	t.Cleanup(func() { up5.Close() })
	if n := up5.Exists(ctx, "moved", "after").Val(); n != 2 {
		t.Fatalf("owner's db 5 holds %d of moved/after, want 2", n)
	}
	if n := up0.Exists(ctx, "moved", "after").Val(); n != 0 {
		t.Fatalf("owner's db 0 holds %d of moved/after", n)
	}
	// The shared db-0 connections were not moved by that SELECT.
	if err := rdb0.Set(ctx, "zero", "0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if up0.Get(ctx, "zero").Val() != "0" {
		t.Fatal("a db 0 SET through the sidecar did not land in the owner's db 0")
	}
	// The owner gone: the local fallback decides in the sidecar's db 3.
	owner.stop(t)
	if r := cmdInts(t, rdb3.Do(ctx, "CL.THROTTLE", "fb", 4, 10, 3600)); r[0] != 0 || r[2] != 4 {
		t.Fatalf("fallback in db 3: %v", r)
	}
	if side.st.Len() != 0 {
		t.Fatalf("the fallback wrote into the sidecar's db 0 (%d keys)", side.st.Len())
	}
	if n := rdb3.DBSize(ctx).Val(); n != 1 { // keyless: answered by the sidecar, its db 3
		t.Fatalf("sidecar's db 3 holds %d keys, want 1", n)
	}
}

// TestSidecarSelectClusterUpstream: a cluster has database 0 only, so
// with a cluster upstream SELECT of another database is refused with
// Redis Cluster's own error, and go-redis with DB 3 gets it on connect;
// SELECT 0 is fine, and nothing was sent to an owner's other database.
func TestSidecarSelectClusterUpstream(t *testing.T) {
	owners := ownerCluster(t, 3)
	side := sidecarNode(t, Config{Seeds: []string{owners[0].addr}})
	deadline := time.Now().Add(5 * time.Second)
	for side.sc.SelectError(3) == "" { // Start read the topology; wait if it had not yet
		if time.Now().After(deadline) {
			t.Fatal("the sidecar never saw a cluster upstream")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rdb3 := redis.NewClient(&redis.Options{Addr: side.addr, DB: 3, MaxRetries: -1})
	t.Cleanup(func() { rdb3.Close() })
	err := rdb3.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60).Err()
	if err == nil || !strings.Contains(err.Error(), "ERR SELECT is not allowed in cluster mode") {
		t.Fatalf("go-redis DB 3 through a sidecar of a cluster: %v", err)
	}
	rdb := client(t, side.addr)
	for _, c := range []struct {
		db   int
		want string
	}{{3, "ERR SELECT is not allowed in cluster mode"}, {0, ""}, {16, "ERR SELECT is not allowed in cluster mode"}} {
		err := rdb.Do(ctx, "SELECT", c.db).Err()
		if (c.want == "" && err != nil) || (c.want != "" && (err == nil || err.Error() != c.want)) {
			t.Errorf("SELECT %d: %v, want %q", c.db, err, c.want)
		}
	}
	// A cluster node answers the same (the sidecar says what the node would).
	direct := client(t, owners[0].addr).Do(ctx, "SELECT", 3).Err()
	if direct == nil || direct.Error() != "ERR SELECT is not allowed in cluster mode" {
		t.Fatalf("a cluster node's SELECT 3: %v", direct)
	}
	// SELECT inside MULTI, sent to a cluster owner: its error in EXEC's
	// array, and the client stays in database 0.
	conn := rdb.Conn()
	t.Cleanup(func() { conn.Close() })
	cmds, err := conn.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Select(ctx, 3)
		p.Set(ctx, "k", "v", 0)
		return nil
	})
	if err == nil || len(cmds) != 2 || cmds[0].Err() == nil || !strings.Contains(cmds[0].Err().Error(), "SELECT is not allowed") {
		t.Fatalf("MULTI SELECT 3 SET EXEC: %v %v", cmds, err)
	}
	if err := conn.Do(ctx, "CL.THROTTLE", "k2", 1, 10, 60).Err(); err != nil {
		t.Fatalf("after the transaction the client is not in db 0: %v", err)
	}
}
