package sidecar

import (
	"testing"

	"github.com/celld/celld/server"
)

// TestSidecarKeylessPlainUpstream: with a plain upstream, DBSIZE, SCAN,
// KEYS, RANDOMKEY and SCRIPT LOAD/EXISTS answer from the owner (the
// application sees the keyspace it would see without the sidecar, and
// EVALSHA finds the script it loaded); FLUSHALL stays local; with a
// cluster upstream DBSIZE stays local.
func TestSidecarKeylessPlainUpstream(t *testing.T) {
	owner := serve(t, nil, server.Config{}, nil)
	up := client(t, owner.addr)
	for _, k := range []string{"a", "b", "c"} {
		if err := up.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	side := sidecarNode(t, Config{Seeds: []string{owner.addr}})
	rdb := client(t, side.addr)
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 3 {
		t.Fatalf("DBSIZE through the sidecar: %d %v, want 3", n, err)
	}
	if ks, err := rdb.Keys(ctx, "*").Result(); err != nil || len(ks) != 3 {
		t.Fatalf("KEYS *: %v %v", ks, err)
	}
	if ks, _, err := rdb.Scan(ctx, 0, "*", 100).Result(); err != nil || len(ks) != 3 {
		t.Fatalf("SCAN: %v %v", ks, err)
	}
	if k, err := rdb.RandomKey(ctx).Result(); err != nil || k == "" {
		t.Fatalf("RANDOMKEY: %q %v", k, err)
	}
	sha, err := rdb.ScriptLoad(ctx, "return redis.call('GET', KEYS[1])").Result()
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := up.ScriptExists(ctx, sha).Result(); err != nil || !ok[0] {
		t.Fatalf("the owner lacks the script loaded through the sidecar: %v %v", ok, err)
	}
	if ok, err := rdb.ScriptExists(ctx, sha).Result(); err != nil || !ok[0] {
		t.Fatalf("SCRIPT EXISTS through the sidecar: %v %v", ok, err)
	}
	if v, err := rdb.EvalSha(ctx, sha, []string{"a"}).Result(); err != nil || v != "v" {
		t.Fatalf("EVALSHA through the sidecar: %v %v", v, err)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n := up.DBSize(ctx).Val(); n != 3 {
		t.Fatalf("FLUSHALL through the sidecar reached the owner: %d keys left", n)
	}

	owners := ownerCluster(t, 3)
	cside := sidecarNode(t, Config{Seeds: []string{owners[0].addr}})
	crdb := client(t, cside.addr)
	if err := crdb.Set(ctx, "k1", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := crdb.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE through a cluster upstream's sidecar: %d %v, want 0 (local)", n, err)
	}
}
