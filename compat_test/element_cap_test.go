package compat_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/kinds"
	"github.com/redis/go-redis/v9"
)

// TestElementCapPerKey: the per-key element cap that docs/data-types.md
// documents ("at most 1,048,576 elements per key ... a command that would
// pass it is refused with ERR value too large and changes nothing") holds
// for a list, a hash and a sorted set filled to the cap: one more element
// is refused, a multi-element write that would cross the cap from just
// under it is refused whole, and a write that stays at the cap (an
// existing hash field, an existing member's score) still works. Issue 24
// item 6 asks for the cap to be documented; this checks the document.
// Under -race only the list is filled (see raceEnabled).
func TestElementCapPerKey(t *testing.T) {
	ts := startServer(t)
	// Pipelines of megabytes under -race on a loaded machine: long
	// timeouts, and no retry (a retried pipeline would push twice).
	rdb := newGoRedis(t, ts, func(o *redis.Options) {
		o.ReadTimeout, o.WriteTimeout, o.MaxRetries = 2*time.Minute, 2*time.Minute, -1
	})
	const chunk = 1 << 14
	n := kinds.MaxElements
	// fill writes elements [from, to) of key with cmd, chunk per command.
	fill := func(cmd, key string, from, to int, pair bool) {
		t.Helper()
		pipe := rdb.Pipeline()
		for b := from; b < to; b += chunk {
			args := []any{cmd, key}
			for i := b; i < min(b+chunk, to); i++ {
				if pair {
					args = append(args, i, "e"+strconv.Itoa(i))
				} else {
					args = append(args, "e"+strconv.Itoa(i))
				}
			}
			pipe.Do(ctx, args...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("%s %s: %v", cmd, key, err)
		}
	}
	tooLarge := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.HasPrefix(err.Error(), "ERR value too large") {
			t.Errorf("%s past the cap: %v, want ERR value too large", what, err)
		}
	}
	count := func(cmd, key string, want int) {
		t.Helper()
		if got, err := rdb.Do(ctx, cmd, key).Int(); err != nil || got != want {
			t.Errorf("%s %s = %d (%v), want %d: a refused write changed the key", cmd, key, got, err, want)
		}
	}

	// A list: RPUSH to the cap less one; two more items are refused whole,
	// one fits; then LPUSH, RPUSHX, LINSERT and an LMOVE into it are refused,
	// and the LMOVE leaves its source as it was.
	fill("RPUSH", "l", 0, n-1, false)
	tooLarge("RPUSH of 2 items", rdb.Do(ctx, "RPUSH", "l", "x", "y").Err())
	count("LLEN", "l", n-1)
	if err := rdb.Do(ctx, "RPUSH", "l", "last").Err(); err != nil {
		t.Fatalf("RPUSH up to the cap: %v", err)
	}
	tooLarge("LPUSH", rdb.Do(ctx, "LPUSH", "l", "x").Err())
	tooLarge("RPUSHX", rdb.Do(ctx, "RPUSHX", "l", "x").Err())
	tooLarge("LINSERT", rdb.Do(ctx, "LINSERT", "l", "BEFORE", "last", "x").Err())
	rdb.RPush(ctx, "src", "moved")
	tooLarge("LMOVE", rdb.Do(ctx, "LMOVE", "src", "l", "LEFT", "RIGHT").Err())
	tooLarge("RPOPLPUSH", rdb.Do(ctx, "RPOPLPUSH", "src", "l").Err())
	count("LLEN", "src", 1)
	count("LLEN", "l", n)
	if err := rdb.Do(ctx, "LSET", "l", 0, "replaced").Err(); err != nil {
		t.Errorf("LSET at the cap: %v", err)
	}
	rdb.Del(ctx, "l")
	if raceEnabled {
		// Under -race (CI) a million hash fields take ~7 s and a million
		// members ~20 s here: the list's check runs, the rest runs in the
		// plain `go test ./...`.
		t.Log("-race: the hash and sorted-set caps are checked without -race only")
		return
	}

	// A hash: HSET to the cap less one; two new fields are refused whole,
	// one fits; then a new field is refused.
	fill("HSET", "h", 0, n-1, true)
	tooLarge("HSET of 2 fields", rdb.Do(ctx, "HSET", "h", "x", 1, "y", 1).Err())
	count("HLEN", "h", n-1)
	if err := rdb.Do(ctx, "HSET", "h", "last", 1).Err(); err != nil {
		t.Fatalf("HSET up to the cap: %v", err)
	}
	tooLarge("HSETNX", rdb.Do(ctx, "HSETNX", "h", "x", 1).Err())
	tooLarge("HINCRBY of a new field", rdb.Do(ctx, "HINCRBY", "h", "x", 1).Err())
	tooLarge("HINCRBYFLOAT of a new field", rdb.Do(ctx, "HINCRBYFLOAT", "h", "x", 1.5).Err())
	count("HLEN", "h", n)
	if got, err := rdb.Do(ctx, "HINCRBY", "h", "last", 1).Int(); err != nil || got != 2 {
		t.Errorf("HINCRBY of an existing field at the cap: %d, %v", got, err)
	}
	rdb.Del(ctx, "h")

	// A sorted set: ZADD to the cap less one; two new members are refused
	// whole, one fits; then a new member is refused, a new score for an
	// existing member is not.
	fill("ZADD", "z", 0, n-1, true)
	rdb.ZAdd(ctx, "small", redis.Z{Score: 1, Member: "other"})
	tooLarge("ZADD of 2 members", rdb.Do(ctx, "ZADD", "z", 1, "x", 2, "y").Err())
	count("ZCARD", "z", n-1)
	if err := rdb.Do(ctx, "ZADD", "z", 1, "last").Err(); err != nil {
		t.Fatalf("ZADD up to the cap: %v", err)
	}
	tooLarge("ZINCRBY of a new member", rdb.Do(ctx, "ZINCRBY", "z", 1, "x").Err())
	tooLarge("ZADD INCR of a new member", rdb.Do(ctx, "ZADD", "z", "INCR", 1, "x").Err())
	tooLarge("ZUNIONSTORE past the cap", rdb.Do(ctx, "ZUNIONSTORE", "u", 2, "z", "small").Err())
	count("ZCARD", "z", n)
	count("EXISTS", "u", 0)
	if err := rdb.Do(ctx, "ZADD", "z", 7, "e0").Err(); err != nil {
		t.Errorf("ZADD of an existing member at the cap: %v", err)
	}
	rdb.Del(ctx, "z", "small")
}
