package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestProcessMissingKeysDoNotWedgeTheBound: a shard is made on the first
// write that reaches it (store.shardFor) and stays for the process's life,
// charged 768 B against --maxmemory. A command that writes nothing must
// not make one: PEXPIRE (and EXPIRE, and MOVE's source and destination)
// on a key that does not exist made its shard, through store.Update,
// which makes the shard before it looks the key up. PEXPIRE is not
// denyoom (as in Redis), so it runs over the bound too.
//
// hostile15 measured on 73bbdf8 (--maxmemory 3mb, --persist no): PEXPIRE
// on 3,000 missing keys in each of the 16 databases took used_memory from
// 3,136 to 3,195,904 B (256 shards x 768 B x 16) with DBSIZE 0 in every
// database; FLUSHALL gave none of it back, and every denyoom command (SET
// x y) answered -OOM from then on. With --databases 65536 the same loop
// charges 12.9 GB. redis-server 7.0.15: PEXPIRE on a missing key answers
// 0 and changes nothing.
func TestProcessMissingKeysDoNotWedgeTheBound(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c := mustLaunch(t, dir, "--maxmemory", "3mb", "--persist", "no")
	ctx := context.Background()
	used := func(rdb *redis.Client) int64 {
		for _, l := range strings.Split(rdb.Info(ctx, "memory").Val(), "\r\n") {
			if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
				u, _ := strconv.ParseInt(v, 10, 64)
				return u
			}
		}
		t.Fatal("no used_memory in INFO memory")
		return 0
	}
	for db := range 16 {
		rdb := redis.NewClient(&redis.Options{Addr: c.addr, DB: db, MaxRetries: -1})
		cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range 3000 {
				p.PExpire(ctx, fmt.Sprintf("missing:%d", i), 100_000)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range cmds {
			if n, _ := cmd.(*redis.BoolCmd).Result(); n {
				t.Fatalf("PEXPIRE on a missing key answered 1")
			}
		}
		if n := rdb.DBSize(ctx).Val(); n != 0 {
			t.Fatalf("db %d: DBSIZE %d after PEXPIRE on missing keys", db, n)
		}
		rdb.Close()
	}
	rdb := c.client()
	afterExpire := used(rdb)
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	afterFlush := used(rdb)
	t.Logf("PEXPIRE on 3,000 missing keys in each of 16 databases: used_memory %d B; after FLUSHALL %d B", afterExpire, afterFlush)
	if err := rdb.Set(ctx, "x", "y", 0).Err(); err != nil {
		t.Fatalf("SET on an empty server (used_memory %d B, bound 3 MB): %v (PEXPIRE on missing keys made shards that stay charged)", afterFlush, err)
	}
	// 16 databases, each made (SELECT) with one key's shard at most:
	// under 200 KB; every shard of every database is 3 MB.
	if afterExpire > 256<<10 {
		t.Errorf("used_memory %d B after PEXPIRE on missing keys in 16 empty databases, want under 256 KB", afterExpire)
	}
	c.termOK()
}
