package compat_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestObjectEncodingDiff: OBJECT ENCODING names a hash's, list's and
// sorted set's form as Redis 7.0 does for the same writes (listpack while
// small, hashtable/skiplist past 512 fields, 128 members or a 64-byte
// element, and never back; quicklist for every list), side by side with redis-server.
func TestObjectEncodingDiff(t *testing.T) {
	many := func(cmd, key string, from, n int, pair bool) dstep {
		args := []string{cmd, key}
		for i := from; i < from+n; i++ {
			if pair {
				args = append(args, fmt.Sprint(i), fmt.Sprint("v", i))
			} else {
				args = append(args, fmt.Sprint("e", i))
			}
		}
		return dstep{cmd: args}
	}
	long := strings.Repeat("x", 65)
	enc := func(k string) dstep { return d("OBJECT ENCODING " + k) }
	steps := []dstep{
		// hashes: entries, then a long field, then a long value
		d("HSET h a 1"), enc("h"), many("HSET", "h", 0, 126, true), enc("h"), d("HSET h last 1"), enc("h"),
		d("HSET h over 1"), enc("h"), many("HSET", "h", 200, 383, true), enc("h"), d("HSET h over512 1"), enc("h"),
		d("HSET h over513 1"), enc("h"), d("HDEL h over last a"), enc("h"),
		d("HSET hf " + long + " 1"), enc("hf"), d("HSET hv f " + long), enc("hv"),
		d("HSET hv2 f 1"), d("HSET hv2 f " + long), enc("hv2"), d("HSETNX hn f " + long), enc("hn"),
		d("HINCRBYFLOAT hi f 1.5"), enc("hi"), d("HINCRBY hi g 1"), enc("hi"),
		// sorted sets
		d("ZADD z 1 a"), enc("z"), many("ZADD", "z", 0, 127, true), enc("z"), d("ZADD z 9 over"), enc("z"),
		d("ZREM z over a"), enc("z"), d("ZADD zl 1 " + long), enc("zl"), d("ZINCRBY zi 1 m"), enc("zi"),
		d("ZADD zs 1 a 2 b 3 c"), d("ZRANGESTORE zd z 0 2"), enc("zd"), d("ZRANGESTORE zd2 z 0 -1"), enc("zd2"),
		d("ZUNIONSTORE zu 2 zs zl"), enc("zu"), d("ZUNIONSTORE zu2 1 zs"), enc("zu2"), d("ZINTERSTORE zn 2 z zs"), enc("zn"),
		// lists: Redis 7.0 answers quicklist for every list
		d("RPUSH l a"), enc("l"), many("RPUSH", "l", 0, 300, false), enc("l"), d("RPUSH ll " + long), enc("ll"),
		// copies and renames keep the form
		d("COPY h hc"), enc("hc"), d("COPY z zc"), enc("zc"), d("COPY zs zsc"), enc("zsc"), d("COPY l lc"), enc("lc"),
		d("RENAME hv hr"), enc("hr"), d("OBJECT ENCODING nokey"),
	}
	diffRun(t, steps)
}
