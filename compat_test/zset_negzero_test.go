package compat_test

import (
	"fmt"
	"strings"
	"testing"

	_ "github.com/celld/celld/data" // sorted sets
)

// TestZSetNegativeZeroDiff: a score of -0 as Redis 7.0 keeps it. A compact
// (listpack) set stores 0 (its listpack writes the score as an integer):
// ZSCORE, ZMSCORE, ZRANGE WITHSCORES, ZPOPMIN and Lua answer 0 there, while
// ZADD INCR and ZINCRBY reply the score they computed (-0 for a new member
// incremented by -0). A full (skiplist) set, by its size or a member longer
// than 64 bytes, keeps the -0 as sent, and an unchanged score (0 over -0)
// is no change. A score that underflows to zero (1e-400) is refused where
// Redis's getDoubleFromObject refuses it (ZADD, ZINCRBY, WEIGHTS) and
// taken as a range bound (ZRANGEBYSCORE parses with plain strtod, which
// also makes 1e400 +inf there, where celld refused the bound).
// Side by side with redis-server, RESP2 then RESP3. celld kept the sign
// bit in the compact form and answered -0 (kinds/zcompact.go), and took
// 1e-400 as -0/0.
func TestZSetNegativeZeroDiff(t *testing.T) {
	long := strings.Repeat("L", 70) // past zset-max-listpack-value: full form
	big := []string{"ZADD", "big"}
	for i := range 130 {
		big = append(big, fmt.Sprint(i+1), fmt.Sprint("b", i))
	}
	steps := []dstep{
		// compact
		d("ZADD k -0 m"), d("OBJECT ENCODING k"), d("ZSCORE k m"), d("ZRANGE k 0 -1 WITHSCORES"), d("ZMSCORE k m nope"),
		d("ZRANGEBYSCORE k -0 0 WITHSCORES"), d("ZRANGEBYSCORE k (-0 +inf"), d("ZCOUNT k 0 0"),
		d("ZINCRBY a -0 m"), d("ZSCORE a m"), d("ZADD b INCR -0 m"), d("ZSCORE b m"),
		d("ZADD c -0 m"), d("ZADD c INCR -0 m"), d("ZINCRBY c -0 m"), d("ZADD c CH 0 m"), d("ZADD c GT CH -0 m"), d("ZSCORE c m"),
		d("ZADD e 1 x"), d("ZINCRBY e -1 x"), d("ZSCORE e x"), d("ZADD e -0 y 0 z"), d("ZRANGE e 0 -1 WITHSCORES"), d("ZPOPMIN e"),
		d("ZUNIONSTORE u 1 k WEIGHTS -1"), d("ZSCORE u m"), d("ZINTERSTORE i 2 k k"), d("ZSCORE i m"), d("ZUNION 1 k WEIGHTS -1 WITHSCORES"),
		d("EVAL return redis.call('zscore','k','m') 0"), d("EVAL return redis.call('zrange','k',0,-1,'withscores') 0"),
		// full by a long member
		d("ZADD fa -0 " + long), d("OBJECT ENCODING fa"), d("ZSCORE fa " + long), d("ZINCRBY fa -0 " + long), d("ZADD fa INCR 0 " + long),
		d("ZSCORE fa " + long), d("ZADD fb -0 " + long), d("ZADD fb GT 0 " + long), d("ZADD fb CH 0 " + long), d("ZSCORE fb " + long),
		d("ZADD fb CH -0 " + long), d("ZRANGEBYSCORE fb 0 0 WITHSCORES"), d("ZRANGE fb 0 -1 WITHSCORES"), d("ZMSCORE fb " + long),
		d("ZADD fc INCR -0 " + long), d("ZADD fc INCR -0 " + long), d("ZINCRBY fd -0 " + long), d("ZSCORE fd " + long),
		d("ZADD fe -0 " + long + " -0 m 1 n"), d("ZSCORE fe m"), d("ZRANGESTORE dst fe 1 -1"), d("OBJECT ENCODING dst"), d("ZSCORE dst m"),
		d("ZPOPMIN fe 2"), d("ZADD ge 0 a"), d("ZADD ge -0 " + long), d("ZSCORE ge a"), d("ZSCORE ge " + long),
		// full by size
		{cmd: big}, d("ZADD big -0 m"), d("OBJECT ENCODING big"), d("ZSCORE big m"), d("ZRANGE big 0 0 WITHSCORES"), d("ZINCRBY big -0 new"),
		d("ZSCORE big new"), d("ZREM big m"), d("ZREM big new"),
		// underflow
		d("ZADD neg -1e-400 m"), d("ZADD neg 1e-400 m"), d("ZADD neg 0e-400 m"), d("ZADD neg 1e-320 m"), d("ZSCORE neg m"),
		d("ZINCRBY neg 1e-400 m"), d("ZINCRBY neg 0.0e5 m"), d("ZADD neg INCR -1e-400 m"), d("ZUNIONSTORE u 1 k WEIGHTS 1e-400"),
		d("ZRANGEBYSCORE k -1e-400 1e-400 WITHSCORES"), d("ZCOUNT k (-1e-400 (1e-400"), d("ZADD neg 1e400 m"), d("ZADD neg -1E-400 m"), d("ZCOUNT k -1e400 1e400"), d("ZRANGEBYSCORE k -1e999 (1e400"),
	}
	all := append([]dstep{}, steps...)
	all = append(all, d("FLUSHALL"), dstep{cmd: []string{"HELLO", "3"}, norm: func(string) string { return "" }})
	all = append(all, steps...)
	diffRun(t, all)
}
