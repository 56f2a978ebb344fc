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

// TestZSetScoreFormatDiff: scores as Redis 7.0 writes them (%.17g, "inf",
// "-inf"), byte for byte, RESP2 bulk strings then RESP3 doubles, from a
// compact set and from a full (skiplist) one, through ZRANGE WITHSCORES
// (whole, reversed, by score), ZSCORE, ZMSCORE, ZINCRBY and ZPOPMIN. The
// integers straddle 2^53, where celld's integral fast path
// (server.appendRedisDouble) hands over to %.17g: 1e17 must stay "1e+17".
func TestZSetScoreFormatDiff(t *testing.T) {
	scores := []string{"1", "-0", "0.1", "1e21", "3.0000000000000004", "inf", "-inf", "1.7976931348623157e308",
		"5e-324", "-2.5", "1e15", "1e16", "1e17", "9007199254740992", "-9007199254740992", "9007199254740994",
		"9007199254740993", "123456789012345678", "1700000000000", "1700000000000.25", "-1e-7", "0.30000000000000004"}
	fill := func(key string, extra int) dstep {
		c := []string{"ZADD", key}
		for i, s := range scores {
			c = append(c, s, fmt.Sprint("m", i))
		}
		for i := range extra { // past zset-max-listpack-entries: the full form
			c = append(c, fmt.Sprint(1000+i), fmt.Sprint("x", i))
		}
		return dstep{cmd: c}
	}
	var steps []dstep
	for _, k := range []string{"c", "f"} {
		extra := 0
		if k == "f" {
			extra = 130
		}
		steps = append(steps, fill(k, extra), d("OBJECT ENCODING "+k), d("ZRANGE "+k+" 0 -1 WITHSCORES"),
			d("ZRANGE "+k+" 0 -1 REV WITHSCORES"), d("ZRANGE "+k+" -inf +inf BYSCORE WITHSCORES"),
			d("ZMSCORE "+k+" m0 m1 m2 m3 m4 m5 m6 m7 m8 m9"), d("ZSCORE "+k+" m4"), d("ZSCORE "+k+" m12"),
			d("ZINCRBY "+k+" 0.1 m2"), d("ZINCRBY "+k+" 1 m13"), d("ZPOPMIN "+k+" 3"), d("ZPOPMAX "+k+" 2"))
	}
	all := append([]dstep{}, steps...)
	all = append(all, d("FLUSHALL"), dstep{cmd: []string{"HELLO", "3"}, norm: func(string) string { return "" }})
	all = append(all, steps...)
	diffRun(t, all)
}

// TestZRangeStreamedDiff: ZRANGE's forms, which celld writes as it walks
// the set after counting the range (data.zrangeReply), against
// redis-server: ranks, scores and members, reversed, with LIMIT offsets
// and counts at and past the ends, negative ones, exclusive and empty
// bounds, on a compact and a full set with runs of equal scores, RESP2
// then RESP3. A count that disagrees with the walk breaks the framing.
func TestZRangeStreamedDiff(t *testing.T) {
	var steps []dstep
	for _, k := range []struct {
		key string
		n   int
	}{{"c", 40}, {"f", 300}} {
		c := []string{"ZADD", k.key}
		for i := range k.n {
			c = append(c, fmt.Sprint(i/3), fmt.Sprintf("m%03d", i))
		}
		steps = append(steps, dstep{cmd: c}, d("OBJECT ENCODING "+k.key))
		key := k.key
		for _, r := range []string{"0 -1", "5 9", "-3 -1", "10 2", "0 100000", "-100000 3", "299 299", "300 400"} {
			steps = append(steps, d("ZRANGE "+key+" "+r+" WITHSCORES"), d("ZRANGE "+key+" "+r+" REV"))
		}
		for _, r := range []string{"-inf +inf", "3 7", "(3 (7", "(3 3", "7 3", "50 +inf", "(99 +inf", "-inf (0"} {
			steps = append(steps, d("ZRANGE "+key+" "+r+" BYSCORE WITHSCORES"), d("ZRANGEBYSCORE "+key+" "+r))
			rv := strings.Fields(r)
			steps = append(steps, d("ZREVRANGEBYSCORE "+key+" "+rv[1]+" "+rv[0]+" WITHSCORES"))
			for _, l := range []string{"0 -1", "0 0", "2 3", "5 -1", "299 5", "1000 1", "-1 5", "0 1000"} {
				steps = append(steps, d("ZRANGE "+key+" "+r+" BYSCORE LIMIT "+l+" WITHSCORES"),
					d("ZRANGE "+key+" "+rv[1]+" "+rv[0]+" BYSCORE REV LIMIT "+l))
			}
		}
		for _, r := range []string{"- +", "[m005 [m010", "(m005 (m010", "(m005 [m005", "[m010 [m005", "(m290 +", "- (m000"} {
			steps = append(steps, d("ZRANGE "+key+" "+r+" BYLEX"), d("ZRANGEBYLEX "+key+" "+r+" LIMIT 3 4"))
			rv := strings.Fields(r)
			for _, l := range []string{"0 -1", "1 2", "7 -1", "1000 1", "-1 1"} {
				steps = append(steps, d("ZRANGE "+key+" "+rv[1]+" "+rv[0]+" BYLEX REV LIMIT "+l))
			}
		}
	}
	steps = append(steps, d("ZRANGE none 0 -1 WITHSCORES"), d("ZRANGE none -inf +inf BYSCORE"), d("ZRANGESTORE dst f 2 5 BYSCORE LIMIT 1 4"),
		d("ZRANGE dst 0 -1 WITHSCORES"))
	all := append([]dstep{}, steps...)
	all = append(all, d("FLUSHALL"), dstep{cmd: []string{"HELLO", "3"}, norm: func(string) string { return "" }})
	all = append(all, steps...)
	diffRun(t, all)
}
