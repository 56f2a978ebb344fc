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

// TestProcessLongKeysDoNotWedgeTheBound: with persistence on, every shard
// copies the name of a deleted or evicted key into its delBlock for the
// next flush (store.noteDeletedLocked); a key longer than the block gets a
// block of its own size, charged to used_memory as "a shard's fixed cost"
// and never given back (the block is only replaced by a larger one, and
// resetMemLocked charges its capacity again). So a few dozen long keys,
// once evicted or deleted, leave up to 256 shards x the longest key (512
// KB by default: 128 MB) charged against --maxmemory for the life of the
// process, and every new key is refused with -OOM although the keyspace
// is empty.
//
// Measured with the binary (--maxmemory 20mb, volatile-ttl, persistence
// on): 200 CL.THROTTLE calls on distinct 400 KB keys got 144 -OOM
// replies (49 keys evicted); afterwards DBSIZE 0, pending_bytes 0,
// used_memory 21,219,250, and CL.THROTTLE small1 10 10 3600 answered -OOM,
// before and after FLUSHALL, seconds later too. The same run with
// --persist no: 0 -OOM, and after FLUSHALL used_memory 197,760 and the
// new key allowed. redis-server frees an evicted key's name with it.
func TestProcessLongKeysDoNotWedgeTheBound(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c := mustLaunch(t, dir, "--maxmemory", "20mb", "--maxmemory-policy", "volatile-ttl")
	rdb := c.client()
	ctx := context.Background()
	pad := strings.Repeat("k", 400_000)
	oom := 0
	for i := 0; i < 200; i += 20 {
		cmds, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j := i; j < i+20; j++ {
				p.Do(ctx, "CL.THROTTLE", fmt.Sprintf("%d:%s", j, pad), 10, 10, 3600)
			}
			return nil
		})
		for _, cmd := range cmds {
			if err := cmd.Err(); err != nil {
				if !strings.HasPrefix(err.Error(), "OOM") {
					t.Fatal(err)
				}
				oom++
			}
		}
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	info := rdb.Info(ctx, "memory").Val()
	used := ""
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			used = v
		}
	}
	u, _ := strconv.ParseInt(used, 10, 64)
	t.Logf("200 CL.THROTTLE on 400 KB keys under a 20 MB bound: %d -OOM; after FLUSHALL used_memory %d", oom, u)
	if err := rdb.Do(ctx, "CL.THROTTLE", "small", 10, 10, 3600).Err(); err != nil {
		t.Fatalf("after FLUSHALL (DBSIZE 0), used_memory %d of a %d-byte bound: CL.THROTTLE on a new short key: %v "+
			"(the deleted long keys' names stay charged: no new key is ever taken again)", u, 20<<20, err)
	}
	c.termOK()
}
