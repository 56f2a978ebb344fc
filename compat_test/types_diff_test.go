package compat_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/celld/celld/cluster"

	_ "github.com/celld/celld/data" // hashes, lists, sorted sets
)

// TestTypesDiff runs the hash, list and sorted-set commands side by side
// against redis-server and requires identical replies, RESP2 then RESP3.
func TestTypesDiff(t *testing.T) {
	steps := []dstep{
		// hashes
		d("HSET h a 1 b 2 c 3"), d("HSET h a 10 d 4"), d("HGET h a"), d("HGET h zz"), d("HGET nokey a"),
		d("HMGET h a b zz"), d("HMGET nokey a b"), d("HLEN h"), d("HLEN nokey"), d("HEXISTS h a"), d("HEXISTS h zz"),
		d("HSTRLEN h a"), d("HSTRLEN h zz"), d("HSETNX h a 5"), d("HSETNX h e 5"), d("HMSET h f 6 g 7"),
		d("HSET h x"), d("HSET h"), d("HINCRBY h a 5"), d("HINCRBY h new 5"), d("HINCRBY h a x"),
		d("HINCRBY h a 9223372036854775807"), d("HSET h s abc"), d("HINCRBY h s 1"), d("HINCRBYFLOAT h s 1"),
		d("HINCRBYFLOAT h fl 1.5"), d("HINCRBYFLOAT h fl 2.25"), d("HINCRBYFLOAT h fl nan"), d("HINCRBYFLOAT h fl inf"),
		d("HINCRBYFLOAT h b 3"), d("HDEL h a zz"), d("HDEL h zz"), d("HDEL nokey a"),
		d("HRANDFIELD nokey"), d("HRANDFIELD nokey 3"), d("HRANDFIELD h 0"), d("HRANDFIELD h 1 WITHVALUES x"),
		d("HSET one f v"), d("HRANDFIELD one"), d("HRANDFIELD one 3"), d("HRANDFIELD one -3"), d("HRANDFIELD one -2 WITHVALUES"), d("HGETALL one"),
		d("HKEYS one"), d("HVALS one"), d("HSCAN one 0"), d("HSCAN one 0 MATCH f* COUNT 10"), d("HSCAN one 0 MATCH x*"), d("HSCAN one x"), d("HSCAN nokey 0"),
		d("HDEL one f"), d("EXISTS one"), d("TYPE h"), d("HGETALL nokey"),
		// lists
		d("RPUSH l a b c"), d("LPUSH l z y"), d("LRANGE l 0 -1"), d("LRANGE l 1 2"), d("LRANGE l -100 100"), d("LRANGE l 5 1"), d("LRANGE l x 1"),
		d("LLEN l"), d("LINDEX l 0"), d("LINDEX l -1"), d("LINDEX l 99"), d("LINDEX l x"), d("LPUSHX nol a"), d("RPUSHX nol a"), d("LPUSHX l q"), d("RPUSHX l w"),
		d("LPOP l"), d("RPOP l"), d("LPOP l 2"), d("LPOP l 0"), d("LPOP l -1"), d("LPOP nol"), d("LPOP nol 2"), d("RPOP l 100"), d("EXISTS l"),
		d("RPUSH l a b a c a"), d("LREM l 1 a"), d("LRANGE l 0 -1"), d("LREM l -1 a"), d("LRANGE l 0 -1"), d("RPUSH l a a"), d("LREM l 0 a"), d("LRANGE l 0 -1"),
		d("LSET l 0 B"), d("LSET l 9 x"), d("LSET nol 0 x"), d("LINSERT l BEFORE c X"), d("LINSERT l AFTER c Y"), d("LINSERT l AFTER nope Y"), d("LINSERT nol AFTER c Y"), d("LINSERT l MIDDLE c Y"),
		d("LRANGE l 0 -1"), d("RPUSH p a b c 1 2 3 c c"), d("LPOS p c"), d("LPOS p c RANK 2"), d("LPOS p c RANK -1"), d("LPOS p c COUNT 0"), d("LPOS p c COUNT 2 RANK -1"),
		d("LPOS p c MAXLEN 1"), d("LPOS p c RANK 0"), d("LPOS p c COUNT -1"), d("LPOS p zz"), d("LPOS p zz COUNT 0"), d("LPOS nol a"),
		d("LTRIM p 1 -2"), d("LRANGE p 0 -1"), d("LTRIM p 5 1"), d("EXISTS p"),
		d("RPUSH m 1 2 3"), d("LMOVE m m2 LEFT RIGHT"), d("LMOVE m m RIGHT LEFT"), d("LRANGE m 0 -1"), d("RPOPLPUSH m m2"), d("LRANGE m2 0 -1"), d("RPOPLPUSH nol m2"),
		d("LMOVE m h LEFT LEFT"), d("LMOVE m m2 UP LEFT"), d("LPUSH h x"), d("HGET l x"), d("GET l"),
		// sorted sets
		d("ZADD z 1 a 2 b 3 c"), d("ZADD z 1 a"), d("ZADD z CH 5 a"), d("ZADD z NX 9 a 4 d"), d("ZADD z XX 9 a 4 e"), d("ZADD z GT 1 a"), d("ZADD z GT CH 10 a"),
		d("ZADD z LT CH 11 a"), d("ZADD z NX XX 1 a"), d("ZADD z NX GT 1 a"), d("ZADD z INCR 1 a 2 b"), d("ZADD z INCR 1.5 a"), d("ZADD z NX INCR 1 a"), d("ZADD z XX INCR 1 zz"),
		d("ZADD z x a"), d("ZADD z 1"), d("ZADD z nan a"), d("ZADD z 1 a 2"), d("ZADD z inf i -inf ni"), d("ZADD z INCR -inf i"),
		d("ZINCRBY z 2 b"), d("ZINCRBY z x b"), d("ZINCRBY z 1 new"), d("ZCARD z"), d("ZCARD noz"), d("ZSCORE z a"), d("ZSCORE z zz"), d("ZSCORE z i"), d("ZMSCORE z a zz b"), d("ZMSCORE noz a"),
		d("ZRANGE z 0 -1"), d("ZRANGE z 0 -1 WITHSCORES"), d("ZRANGE z 2 3 REV WITHSCORES"), d("ZRANGE z (1 +inf BYSCORE"), d("ZRANGE z +inf (1 BYSCORE REV LIMIT 1 2 WITHSCORES"),
		d("ZRANGE z 0 -1 LIMIT 0 1"), d("ZRANGE z - + BYLEX WITHSCORES"), d("ZRANGE z a b BYLEX"), d("ZRANGE z 0 1 FOO"), d("ZRANGE z x 1"),
		d("ZRANGEBYSCORE z -inf +inf WITHSCORES"), d("ZRANGEBYSCORE z (2 5"), d("ZRANGEBYSCORE z 2 (5 LIMIT 0 1"), d("ZRANGEBYSCORE z 2 5 LIMIT -1 1"), d("ZRANGEBYSCORE z x 5"),
		d("ZREVRANGEBYSCORE z +inf -inf"), d("ZREVRANGEBYSCORE z 5 (2 WITHSCORES LIMIT 1 10"), d("ZREVRANGE z 0 1 WITHSCORES"),
		d("ZCOUNT z -inf +inf"), d("ZCOUNT z (2 5"), d("ZCOUNT z 5 2"), d("ZCOUNT z a 2"), d("ZRANK z a"), d("ZRANK z zz"), d("ZREVRANK z a"), d("ZRANK noz a"),
		d("ZADD lex 0 a 0 b 0 c 0 d 0 e"), d("ZRANGEBYLEX lex - +"), d("ZRANGEBYLEX lex [b (d"), d("ZRANGEBYLEX lex (b + LIMIT 1 2"), d("ZRANGEBYLEX lex b d"), d("ZREVRANGEBYLEX lex + -"),
		d("ZLEXCOUNT lex [b [d"), d("ZREMRANGEBYLEX lex [a [b"), d("ZRANGE lex 0 -1"),
		d("ZREM z a zz"), d("ZREM noz a"), d("ZREMRANGEBYSCORE z -inf 3"), d("ZREMRANGEBYRANK z 0 0"), d("ZRANGE z 0 -1 WITHSCORES"),
		d("ZPOPMIN z"), d("ZPOPMAX z 2"), d("ZPOPMIN z -1"), d("ZPOPMIN noz"), d("ZPOPMIN noz 2"), d("ZADD z 1.5 a 1e20 b 1700000000000 c 0.1 d"), d("ZRANGE z 0 -1 WITHSCORES"),
		d("ZSCAN z 0"), d("ZSCAN noz 0"), d("ZADD h 1 a"), d("ZSCORE l a"), d("TYPE z"), d("TYPE l"), d("TYPE lex"),
		d("ZADD big 1 a"), d("ZPOPMIN big 0"), d("ZPOPMAX big"), d("EXISTS big"),
		d("ZADD src 1 a 2 b 3 c 4 d"), d("ZRANGESTORE dst src 1 2"), d("ZRANGE dst 0 -1 WITHSCORES"), d("ZRANGESTORE dst src (1 +inf BYSCORE REV LIMIT 0 2"),
		d("ZRANGE dst 0 -1"), d("ZRANGESTORE dst src 5 6"), d("EXISTS dst"), d("ZRANGESTORE dst src 0 -1 WITHSCORES"), d("ZRANGESTORE dst nosrc 0 -1"),
		d("ZADD zb 1 b 5 c"), d("ZUNIONSTORE out 2 src zb WEIGHTS 2 3 AGGREGATE MAX"), d("ZRANGE out 0 -1 WITHSCORES"), d("ZINTER 2 src zb WITHSCORES"),
		d("ZDIFF 2 src zb"), d("ZINTERCARD 2 src zb LIMIT 1"), d("ZUNION 0 src"), d("ZUNION 3 src zb"), d("LMPOP 2 nol l LEFT COUNT 2"), d("ZMPOP 1 src MAX COUNT 2"),
	}
	all := append([]dstep{}, steps...)
	all = append(all, d("FLUSHALL"), dstep{cmd: []string{"HELLO", "3"}, norm: func(string) string { return "" }})
	all = append(all, steps...)
	diffRun(t, all)
}

// TestTypesScanTypeDiff: SCAN's TYPE option names the kinds as Redis
// does (one SCAN call with a COUNT past the keyspace, one key per kind).
func TestTypesScanTypeDiff(t *testing.T) {
	steps := []dstep{d("SET s 1"), d("HSET h f v"), d("RPUSH l a"), d("ZADD z 1 m")}
	for _, typ := range []string{"string", "hash", "list", "zset", "set"} {
		steps = append(steps, dstep{cmd: []string{"SCAN", "0", "COUNT", "1000", "TYPE", typ}})
	}
	diffRun(t, steps)
}

// Cluster mode routes the commands that take numkeys (ZUNIONSTORE, ZUNION,
// LMPOP, ...) by every key they name, destination included, as Redis
// Cluster does through their key specs: keys of two slots are CROSSSLOT,
// keys of one hash tag are served.
func TestClusterKeynumCrossSlot(t *testing.T) {
	nodes := startClusterNodes(t, 3)
	var local []string
	for i := 0; len(local) < 2; i++ {
		k := fmt.Sprintf("k%d", i)
		if clusterOwner(k, 3) == 0 && (len(local) == 0 || cluster.KeySlotString(k) != cluster.KeySlotString(local[0])) {
			local = append(local, k)
		}
	}
	tag := ""
	for i := 0; tag == ""; i++ {
		if k := fmt.Sprintf("{t%d}", i); clusterOwner(k, 3) == 0 {
			tag = k
		}
	}
	a, b := local[0], local[1]
	const crossslot = "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
	rc := dialRaw(t, nodes[0])
	runRaw(t, rc, []rawStep{
		{resp("ZUNIONSTORE", a, "1", b), crossslot},
		{resp("ZUNIONSTORE", a, "2", a, b), crossslot},
		{resp("ZINTER", "2", a, b), crossslot},
		{resp("ZINTERCARD", "2", a, b), crossslot},
		{resp("LMPOP", "2", a, b, "LEFT"), crossslot},
		{resp("ZMPOP", "2", a, b, "MIN"), crossslot},
		{resp("ZADD", tag+"x", "1", "m"), ":1\r\n"},
		{resp("ZUNIONSTORE", tag+"d", "2", tag+"x", tag+"y"), ":1\r\n"},
		{resp("ZUNION", "2", tag+"x", tag+"d", "WITHSCORES"), "*2\r\n$1\r\nm\r\n$1\r\n2\r\n"},
		{resp("RPUSH", tag+"l", "v"), ":1\r\n"},
		{resp("LMPOP", "2", tag+"e", tag+"l", "LEFT"), "*2\r\n$" + fmt.Sprint(len(tag+"l")) + "\r\n" + tag + "l\r\n*1\r\n$1\r\nv\r\n"},
	})
}

// COPY of hashes, lists and sorted sets, small (compact) and large, within
// a database, to another (DB n) and over an existing key (REPLACE), then
// changes to the source that the copy must not see: the same replies as
// redis-server's, RESP2 then RESP3.
func TestCopyObjectsDiff(t *testing.T) {
	big := func(cmd, key string, n int, pair bool) dstep {
		args := []string{cmd, key}
		for i := range n {
			if pair {
				args = append(args, fmt.Sprint(i), fmt.Sprint("v", i))
			} else {
				args = append(args, fmt.Sprint("e", i))
			}
		}
		return dstep{cmd: args}
	}
	steps := []dstep{
		d("HSET h a 1 b 2"), d("RPUSH l x y z"), d("ZADD z 1 a 2 b 3 c"),
		big("HSET", "bh", 300, true), big("RPUSH", "bl", 3000, false), big("ZADD", "bz", 300, true),
		d("SET s str"), d("EXPIRE h 1000"),
	}
	for _, k := range []string{"h", "l", "z", "bh", "bl", "bz"} {
		steps = append(steps, d("COPY "+k+" "+k+"2"), d("COPY "+k+" "+k+"2"), d("COPY "+k+" s"), d("COPY "+k+" s REPLACE"),
			d("TYPE s"), d("COPY "+k+" "+k+"3 DB 1"), d("COPY "+k+" "+k+" DB 0"))
	}
	steps = append(steps,
		d("TTL h2"), d("HSET h a changed c 3"), d("HGETALL h2"), d("HGETALL h"), d("HLEN bh2"), d("HDEL bh 1 2 3"), d("HLEN bh2"), d("HGET bh2 7"),
		d("LPUSH l new"), d("LRANGE l2 0 -1"), d("LSET bl 0 changed"), d("LINDEX bl2 0"), d("LLEN bl2"),
		d("ZADD z 9 a"), d("ZRANGE z2 0 -1 WITHSCORES"), d("ZREM bz v1 v2"), d("ZCARD bz2"), d("ZRANGE bz2 0 4 WITHSCORES"),
		d("SELECT 1"), d("HGETALL h3"), d("LRANGE l3 0 -1"), d("ZRANGE z3 0 -1 WITHSCORES"), d("HLEN bh3"), d("LLEN bl3"), d("ZCARD bz3"),
		d("FLUSHDB"), d("SELECT 0"), d("DEL h2 l2 z2 bh2 bl2 bz2 s"), d("EXISTS h2 l2 z2 bh2 bl2 bz2"),
	)
	all := append([]dstep{}, steps...)
	all = append(all, d("FLUSHALL"), dstep{cmd: []string{"HELLO", "3"}, norm: func(string) string { return "" }})
	all = append(all, steps...)
	diffRun(t, all)
}

// WATCH sees the key LMPOP and ZMPOP pop from, whichever of their keys it
// is (their keys are found by their keynum key spec), and not the keys of
// a ZUNIONSTORE's sources, which it only reads: as redis-server, side by
// side.
func TestWatchKeynumCommands(t *testing.T) {
	ref := startRedis(t)
	ts := startServer(t)
	for _, c := range []struct {
		setup, watched, write string
		aborted               bool
	}{
		{"RPUSH b v", "b", "LMPOP 2 a b LEFT", true},
		{"ZADD b 1 m", "b", "ZMPOP 2 a b MIN", true},
		{"ZADD s 1 m", "s", "ZUNIONSTORE d 1 s", false},
		{"ZADD s 1 m", "d", "ZUNIONSTORE d 1 s", true},
	} {
		for _, pair := range []struct {
			name string
			a, b *rawConn
		}{{"celld", dialRaw(t, ts), dialRaw(t, ts)}, {"redis", ref.dial(t), ref.dial(t)}} {
			a, b := pair.a, pair.b
			a.exchange(t, "FLUSHALL")
			a.exchange(t, strings.Fields(c.setup)...)
			a.exchange(t, "WATCH", c.watched)
			a.exchange(t, "MULTI")
			a.exchange(t, "PING")
			b.exchange(t, strings.Fields(c.write)...)
			got := a.exchange(t, "EXEC")
			if aborted := got == "*-1\r\n" || got == "_\r\n"; aborted != c.aborted {
				t.Errorf("%s: WATCH %s, then %s: EXEC answered %q, want aborted=%v", pair.name, c.watched, c.write, got, c.aborted)
			}
		}
	}
}

// Client-side caching: a client tracking the second key of LMPOP (or
// ZMPOP) is told when that key is popped from, and one tracking the
// sources of ZUNIONSTORE is told nothing (they are only read), while its
// destination is invalidated: keys found by the keynum key spec, as
// redis-server does.
func TestTrackingKeynumCommands(t *testing.T) {
	ts := startServer(t)
	a, b := dialRaw(t, ts), dialRaw(t, ts)
	a.exchange(t, "HELLO", "3")
	a.exchange(t, "CLIENT", "TRACKING", "ON")
	b.exchange(t, "RPUSH", "lb", "v1", "v2")
	b.exchange(t, "ZADD", "zb", "1", "m1", "2", "m2")
	a.exchange(t, "LRANGE", "lb", "0", "-1")
	a.exchange(t, "ZRANGE", "zb", "0", "-1")
	b.exchange(t, "LMPOP", "2", "la", "lb", "LEFT")
	if got := a.exchange(t, "PING"); got != push("lb") {
		t.Fatalf("after LMPOP from lb: %q, want its invalidation", got)
	}
	if got := readValue(t, a); got != "+PONG\r\n" {
		t.Fatalf("after the push: %q", got)
	}
	b.exchange(t, "ZMPOP", "2", "za", "zb", "MIN")
	if got := a.exchange(t, "PING"); got != push("zb") {
		t.Fatalf("after ZMPOP from zb: %q, want its invalidation", got)
	}
	if got := readValue(t, a); got != "+PONG\r\n" {
		t.Fatalf("after the push: %q", got)
	}
	a.exchange(t, "ZRANGE", "zb", "0", "-1")
	a.exchange(t, "ZRANGE", "zd", "0", "-1")
	b.exchange(t, "ZUNIONSTORE", "zd", "1", "zb")
	if got := a.exchange(t, "PING"); got != push("zd") {
		t.Fatalf("after ZUNIONSTORE zd 1 zb: %q, want zd's invalidation", got)
	}
	if got := readValue(t, a); got != "+PONG\r\n" {
		t.Fatalf("after the push: %q (zb, a source, is only read)", got)
	}
	expectNoPush(t, a)
}
