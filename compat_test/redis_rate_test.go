package compat_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Issue 23: the counter and limiter code people run against Redis runs
// unchanged against celld, with the same decisions as against a real
// redis-server side by side.

// go-redis/redis_rate v10 keeps a float TAT with SET ... EX from a Lua
// script (GET, TIME, tonumber, math.ceil, replicate_commands). A limit of a
// few requests per hour makes the decisions independent of the few ms
// between the two servers' calls.
func TestRedisRateSideBySide(t *testing.T) {
	ref := startRedis(t)
	ts := startServer(t)
	ctx := context.Background()
	cell := redis.NewClient(&redis.Options{Addr: ts.Addr})
	red := redis.NewClient(&redis.Options{Network: "unix", Addr: ref.sock})
	t.Cleanup(func() { cell.Close(); red.Close() })
	lc, lr := redis_rate.NewLimiter(cell), redis_rate.NewLimiter(red)

	limits := []redis_rate.Limit{
		redis_rate.PerHour(5),
		{Rate: 10, Burst: 3, Period: 3600e9},
		{Rate: 1, Burst: 1, Period: 86400e9},
	}
	type call struct {
		key  string
		lim  int
		n    int
		most bool
	}
	var calls []call
	for i := range 60 {
		calls = append(calls, call{key: fmt.Sprintf("user:%d", i%4), lim: i % 3, n: 1 + i%3, most: i%5 == 4})
	}
	allowed, denied := 0, 0
	for i, c := range calls {
		lim := limits[c.lim]
		var rc, rr *redis_rate.Result
		var ec, er error
		if c.most {
			rc, ec = lc.AllowAtMost(ctx, c.key, lim, c.n)
			rr, er = lr.AllowAtMost(ctx, c.key, lim, c.n)
		} else {
			rc, ec = lc.AllowN(ctx, c.key, lim, c.n)
			rr, er = lr.AllowN(ctx, c.key, lim, c.n)
		}
		if ec != nil || er != nil {
			t.Fatalf("call %d %+v: celld err %v, redis err %v", i, c, ec, er)
		}
		if rc.Allowed != rr.Allowed || rc.Remaining != rr.Remaining || (rc.RetryAfter < 0) != (rr.RetryAfter < 0) {
			t.Fatalf("call %d %+v: celld allowed %d remaining %d retry %v; redis allowed %d remaining %d retry %v",
				i, c, rc.Allowed, rc.Remaining, rc.RetryAfter, rr.Allowed, rr.Remaining, rr.RetryAfter)
		}
		if rc.Allowed > 0 {
			allowed++
		} else {
			denied++
		}
	}
	if allowed == 0 || denied == 0 {
		t.Fatalf("the sequence should both allow and deny: %d allowed, %d denied", allowed, denied)
	}
	// The stored TAT is a float string with a TTL on both.
	for _, k := range []string{"rate:user:0", "rate:user:1"} {
		vc, vr := cell.Get(ctx, k).Val(), red.Get(ctx, k).Val()
		if vc == "" || vr == "" {
			t.Fatalf("%s: celld %q, redis %q: want a stored TAT on both", k, vc, vr)
		}
		if tc, tr := cell.TTL(ctx, k).Val(), red.TTL(ctx, k).Val(); (tc > 0) != (tr > 0) {
			t.Fatalf("%s: TTL celld %v, redis %v", k, tc, tr)
		}
	}
	if err := lc.Reset(ctx, "user:0"); err != nil {
		t.Fatal(err)
	}
	if r, err := lc.Allow(ctx, "user:0", limits[0]); err != nil || r.Allowed != 1 || r.Remaining != 4 {
		t.Fatalf("after Reset: %+v, %v", r, err)
	}
}

// The two Lua shapes counter libraries use: INCR + PEXPIRE (on the first
// hit) + PTTL, and SET NX EX + INCRBY; run side by side, with Redis's Lua
// conversions of their replies (status tables, nil as false, floats
// truncated, nested arrays).
func TestRedisDiffCounterScripts(t *testing.T) {
	const fixedWindow = `
local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
local ok = 1
if c > tonumber(ARGV[2]) then ok = 0 end
return {ok, c, ttl > 0 and ttl <= tonumber(ARGV[1]) and 1 or 0, c / 3}`
	const setnxIncr = `
local set = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2])
local v = redis.call('INCRBY', KEYS[1], ARGV[3])
return {set, v, redis.call('TTL', KEYS[1]), redis.call('GET', KEYS[2])}`
	const floatCounter = `
local v = redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
return {v, tonumber(v), redis.call('TYPE', KEYS[1]), redis.pcall('INCR', KEYS[1])}`
	var steps []dstep
	for range 7 {
		steps = append(steps, dstep{cmd: []string{"EVAL", fixedWindow, "1", "fw", "60000", "5"}})
	}
	for i := range 4 {
		steps = append(steps, dstep{cmd: []string{"EVAL", setnxIncr, "2", "sn", "missing", "10", "1000", fmt.Sprint(i - 1)}})
	}
	for _, a := range []string{"1.5", "0.1", "-3", "1e3"} {
		steps = append(steps, dstep{cmd: []string{"EVAL", floatCounter, "1", "fc", a}})
	}
	steps = append(steps,
		dstep{cmd: []string{"EVAL", "return redis.call('SET', KEYS[1], 'x', 'GET')", "1", "sn"}},
		dstep{cmd: []string{"EVAL", "return redis.pcall('INCR', KEYS[1])", "1", "sn"}},
		dstep{cmd: []string{"EVAL", "return redis.call('MGET', KEYS[1], KEYS[2], 'nokey')", "2", "fw", "fc"}},
		dstep{cmd: []string{"EVAL_RO", "return redis.call('GET', KEYS[1])", "1", "fw"}},
		dstep{cmd: []string{"EVAL_RO", "return redis.pcall('INCR', KEYS[1])", "1", "fw"}},
	)
	diffRun(t, steps)
}
