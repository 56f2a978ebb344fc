package compat_test

import (
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The four ways limiter code in the field keeps its state in Redis data
// types (issue 24), run with go-redis against celld and a real
// redis-server side by side: the allow/deny sequences and the state left
// behind must be identical.

// refGoRedis is a go-redis client of the reference redis-server.
func refGoRedis(t *testing.T, ref *refRedis) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: ref.sock})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// funnelScript is the funnel (leaky bucket) as the seeds' designs write
// it: one EVAL reading the hash with HMGET, the time with TIME, writing
// it back with HMSET and refreshing the TTL with EXPIRE.
const funnelScript = `
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local leakPerSec = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local v = redis.call('HMGET', key, 'water', 'lastTime')
local water = tonumber(v[1]) or 0
local last = tonumber(v[2]) or now
water = math.max(0, water - (now - last) * leakPerSec)
local allowed = 0
if water + 1 <= capacity then
  water = water + 1
  allowed = 1
end
redis.call('HMSET', key, 'water', water, 'lastTime', now)
redis.call('EXPIRE', key, 86400)
return allowed`

func TestPatternFunnelEval(t *testing.T) {
	ref := startRedis(t)
	ts := startServer(t)
	cell, red := newGoRedis(t, ts), refGoRedis(t, ref)
	// A leak of one per ~11 days: the decisions do not depend on how far
	// apart the two servers' clocks read TIME.
	var gotC, gotR []int64
	for i := 0; i < 12; i++ {
		c, err1 := cell.Eval(ctx, funnelScript, []string{"funnel:u1"}, 5, 0.000001).Int64()
		r, err2 := red.Eval(ctx, funnelScript, []string{"funnel:u1"}, 5, 0.000001).Int64()
		if err1 != nil || err2 != nil {
			t.Fatalf("call %d: celld %v, redis %v", i, err1, err2)
		}
		gotC, gotR = append(gotC, c), append(gotR, r)
	}
	want := []int64{1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}
	if !reflect.DeepEqual(gotC, gotR) || !reflect.DeepEqual(gotC, want) {
		t.Fatalf("allow/deny: celld %v, redis %v, want %v", gotC, gotR, want)
	}
	for _, rdb := range []*redis.Client{cell, red} {
		if ttl := rdb.TTL(ctx, "funnel:u1").Val(); ttl < 86000*time.Second {
			t.Fatalf("TTL %v after EXPIRE 86400", ttl)
		}
		if w, err := rdb.HGet(ctx, "funnel:u1", "water").Float64(); err != nil || w < 4.99 || w > 5 {
			t.Fatalf("water %v %v", w, err)
		}
		if typ := rdb.Type(ctx, "funnel:u1").Val(); typ != "hash" {
			t.Fatalf("TYPE %q", typ)
		}
	}
}

// tokenBucketScript is the token bucket as Redisson-style code writes it:
// HGET of tokens and lastRefillTime, HSET of both, the time passed in.
const tokenBucketScript = `
local capacity = tonumber(ARGV[1])
local perSec = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens'))
local last = tonumber(redis.call('HGET', KEYS[1], 'lastRefillTime'))
if tokens == nil then
  tokens = capacity
  last = now
end
tokens = math.min(capacity, tokens + (now - last) * perSec / 1000)
local ok = 0
if tokens >= 1 then
  tokens = tokens - 1
  ok = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens)
redis.call('HSET', KEYS[1], 'lastRefillTime', now)
return ok`

func TestPatternTokenBucketEval(t *testing.T) {
	ref := startRedis(t)
	ts := startServer(t)
	cell, red := newGoRedis(t, ts), refGoRedis(t, ref)
	now := int64(1_800_000_000_000)
	var gotC, gotR []int64
	allowed := 0
	for i := 0; i < 60; i++ {
		now += int64(37 * (i % 7)) // bursts and pauses: 0..222 ms apart
		c, err1 := cell.Eval(ctx, tokenBucketScript, []string{"tb"}, 4, 2, now).Int64()
		r, err2 := red.Eval(ctx, tokenBucketScript, []string{"tb"}, 4, 2, now).Int64()
		if err1 != nil || err2 != nil {
			t.Fatalf("call %d: celld %v, redis %v", i, err1, err2)
		}
		gotC, gotR = append(gotC, c), append(gotR, r)
		allowed += int(c)
	}
	if !reflect.DeepEqual(gotC, gotR) {
		t.Fatalf("allow/deny differ:\ncelld %v\nredis %v", gotC, gotR)
	}
	if allowed == 0 || allowed == 60 {
		t.Fatalf("%d of 60 allowed: the test exercises nothing", allowed)
	}
	if c, r := cell.HGetAll(ctx, "tb").Val(), red.HGetAll(ctx, "tb").Val(); !reflect.DeepEqual(c, r) {
		t.Fatalf("state: celld %v, redis %v", c, r)
	}
}

// TestPatternSlidingLogMulti is the sliding-window log in MULTI/EXEC:
// ZADD now, ZREMRANGEBYSCORE the expired part, ZCARD, EXPIRE.
func TestPatternSlidingLogMulti(t *testing.T) {
	ref := startRedis(t)
	ts := startServer(t)
	cell, red := newGoRedis(t, ts), refGoRedis(t, ref)
	const windowMs, limit = 1000, 5
	now := int64(1_800_000_000_000)
	run := func(rdb *redis.Client, now int64) (bool, error) {
		var card *redis.IntCmd
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.ZAdd(ctx, "log", redis.Z{Score: float64(now), Member: strconv.FormatInt(now, 10)})
			p.ZRemRangeByScore(ctx, "log", "0", strconv.FormatInt(now-windowMs, 10))
			card = p.ZCard(ctx, "log")
			p.Expire(ctx, "log", (windowMs/1000+1)*time.Second)
			return nil
		})
		return card.Val() <= limit, err
	}
	var gotC, gotR []bool
	for i := 0; i < 80; i++ {
		now += int64(53 * (i % 9))
		c, err1 := run(cell, now)
		r, err2 := run(red, now)
		if err1 != nil || err2 != nil {
			t.Fatalf("call %d: celld %v, redis %v", i, err1, err2)
		}
		gotC, gotR = append(gotC, c), append(gotR, r)
	}
	if !reflect.DeepEqual(gotC, gotR) {
		t.Fatalf("allow/deny differ:\ncelld %v\nredis %v", gotC, gotR)
	}
	c := cell.ZRangeWithScores(ctx, "log", 0, -1).Val()
	r := red.ZRangeWithScores(ctx, "log", 0, -1).Val()
	if !reflect.DeepEqual(c, r) || len(c) == 0 {
		t.Fatalf("log: celld %v, redis %v", c, r)
	}
}

// limitsScript is a user's limits kept in a list and looped over with
// CL.THROTTLE in one script; it returns each CL.THROTTLE's verdict until
// one denies.
const limitsScript = `
local limits = redis.call('LRANGE', KEYS[1], 0, -1)
local out = {}
for i, l in ipairs(limits) do
  local burst, count, period = string.match(l, '(%d+):(%d+):(%d+)')
  local r = redis.call('CL.THROTTLE', KEYS[2] .. ':' .. i, burst, count, period, 1)
  out[#out + 1] = r[1]
  if r[1] == 1 then break end
end
return out`

// TestPatternListThrottleLoop: redis-server has no CL.THROTTLE, so the
// list half (LRANGE inside a script, Lua's view of it) is compared with
// redis-server, and the verdicts with CL.THROTTLE called directly on a
// second celld at the same instants.
func TestPatternListThrottleLoop(t *testing.T) {
	ref := startRedis(t)
	start := int64(1_800_000_000_000_000_000)
	ts := startServer(t, withFakeClock(start))
	direct := startServer(t, withFakeClock(start))
	cell, red, dir := newGoRedis(t, ts), refGoRedis(t, ref), newGoRedis(t, direct)
	limits := []any{"2:10:1", "5:60:60", "20:1000:3600"}
	for _, rdb := range []*redis.Client{cell, red} {
		if err := rdb.RPush(ctx, "limits:u1", limits...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const readBack = `return redis.call('LRANGE', KEYS[1], 0, -1)`
	c, err1 := cell.Eval(ctx, readBack, []string{"limits:u1"}).Result()
	r, err2 := red.Eval(ctx, readBack, []string{"limits:u1"}).Result()
	if err1 != nil || err2 != nil || !reflect.DeepEqual(c, r) {
		t.Fatalf("LRANGE in a script: celld %v %v, redis %v %v", c, err1, r, err2)
	}
	denied := 0
	for i := 0; i < 40; i++ {
		got, err := cell.Eval(ctx, limitsScript, []string{"limits:u1", "rl:u1"}).Int64Slice()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		var want []int64
		for j, l := range limits {
			var burst, count, period int
			fmt.Sscanf(l.(string), "%d:%d:%d", &burst, &count, &period)
			res, err := dir.Do(ctx, "CL.THROTTLE", "rl:u1:"+strconv.Itoa(j+1), burst, count, period, 1).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, res[0])
			if res[0] == 1 {
				break
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("call %d: script %v, direct CL.THROTTLE %v", i, got, want)
		}
		if got[len(got)-1] == 1 {
			denied++
		}
		ts.Advance(40 * time.Millisecond)
		direct.Advance(40 * time.Millisecond)
	}
	if denied == 0 || denied == 40 {
		t.Fatalf("%d of 40 denied: the test exercises nothing", denied)
	}
}
