package compat_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestGrowingKeysOverTheBound: under --maxmemory with noeviction, a write
// that GROWS an existing hash, list, sorted set or string is a denyoom
// command like one that creates a key, and Redis refuses it with -OOM once
// used memory is over the bound (processCommand checks every denyoom
// command, not only those that create a key). celld refuses only the
// creation of a key (docs/memory.md: "Calls on keys that exist are answered
// as always"), which is harmless for a TAT (a rewrite costs nothing) but
// lets one key that already exists take any amount of memory: the bound no
// longer bounds anything.
//
// Measured with the binary (--maxmemory 50mb, noeviction), 1,000,000
// HSET big f<i> <100 bytes>: celld refused none, used_memory 185,640,346
// (3.7x the bound), RSS 476 MB; redis-server 7.0.15 with maxmemory 50mb
// refused 715,154 with -OOM, used_memory 52,428,848, RSS 70 MB. RPUSH of
// 1,000,000 100-byte items: celld 0 refused, used_memory 130,751,440,
// RSS 149 MB; Redis 510,881 refused, used_memory 52,429,040, RSS 71 MB.
// Under allkeys-lru the same HSETs took celld's used_memory to 186,797,906
// (evicting 97,800 other keys and still 3.7x over).
//
// Here: a 2 MB bound, one key of each kind created under it, then 40,000
// writes of 100 bytes each growing it (4 MB): some must be refused and
// used_memory must stay within twice the bound.
func TestGrowingKeysOverTheBound(t *testing.T) {
	const bound = 2 << 20
	val := strings.Repeat("v", 100)
	kinds := []struct {
		name   string
		create []any
		grow   func(i int) []any
	}{
		{"hash", []any{"HSET", "big", "f", "v"}, func(i int) []any { return []any{"HSET", "big", "f" + strconv.Itoa(i), val} }},
		{"list", []any{"RPUSH", "big", "v"}, func(i int) []any { return []any{"RPUSH", "big", val} }},
		{"zset", []any{"ZADD", "big", 0, "m"}, func(i int) []any { return []any{"ZADD", "big", i, "m" + strconv.Itoa(i) + val} }},
		{"string", []any{"SET", "s0", "v"}, func(i int) []any { return []any{"APPEND", "s" + strconv.Itoa(i%16), val} }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ts := startServer(t)
			rdb := newGoRedis(t, ts)
			if err := rdb.ConfigSet(ctx, "maxmemory", strconv.Itoa(bound)).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.Do(ctx, k.create...).Err(); err != nil {
				t.Fatal(err)
			}
			if k.name == "string" { // sixteen strings, all created under the bound
				for i := 1; i < 16; i++ {
					if err := rdb.Set(ctx, "s"+strconv.Itoa(i), "v", 0).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			refused := 0
			for batch := 0; batch < 40; batch++ {
				cmds, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
					for i := batch * 1000; i < (batch+1)*1000; i++ {
						p.Do(ctx, k.grow(i)...)
					}
					return nil
				})
				for _, c := range cmds {
					if err := c.Err(); err != nil {
						if err.Error() != oomText {
							t.Fatalf("%v: %v", c.Args(), err)
						}
						refused++
					}
				}
			}
			used, err := strconv.ParseInt(infoField(t, rdb, "memory", "used_memory"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: 40,000 growing writes under a %d-byte bound: %d refused, used_memory %d (%.1fx the bound)",
				k.name, bound, refused, used, float64(used)/bound)
			if refused == 0 || used > 2*bound {
				t.Fatalf("%s: %d of 40,000 writes growing existing keys refused, used_memory %d = %.1fx the %d-byte bound; "+
					"Redis refuses every denyoom command with -OOM while over maxmemory, so used_memory stays at the bound",
					k.name, refused, used, float64(used)/bound, bound)
			}
		})
	}
}
