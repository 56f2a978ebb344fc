package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// kindsState reads every key of the hashes, lists and sorted sets these
// tests write, as comparable text (TTLs as present or not).
func kindsState(t *testing.T, rdb *redis.Client, keys []string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var v string
		switch typ {
		case "hash":
			m, err := rdb.HGetAll(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			fs := make([]string, 0, len(m))
			for f, x := range m {
				fs = append(fs, f+"="+x)
			}
			sort.Strings(fs)
			v = strings.Join(fs, ",")
		case "list":
			l, err := rdb.LRange(ctx, k, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			v = strings.Join(l, ",")
		case "zset":
			z, err := rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range z {
				v += fmt.Sprintf("%v:%v,", e.Member, e.Score)
			}
		}
		ttl, _ := rdb.PTTL(ctx, k).Result()
		out[k] = fmt.Sprintf("%s ttl>0=%v %s", typ, ttl > 0, v)
	}
	return out
}

// TestProcessKindsSIGTERMExact: hashes, lists and sorted sets written by
// every kind of element write (with base rewrites forced between them by a
// tiny --log-fold-min-bytes, so deltas land on both sides of folds) come
// back exactly after SIGTERM and a restart, expiries included.
func TestProcessKindsSIGTERMExact(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	args := []string{"--flush-interval", "20ms", "--log-fold-min-bytes", "4096"}
	c := mustLaunch(t, dir, args...)
	rdb := c.client()
	do := func(args ...any) {
		t.Helper()
		if err := rdb.Do(ctx, args...).Err(); err != nil && err != redis.Nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	var keys []string
	for k := range 6 {
		h, l, z := "h"+strconv.Itoa(k), "l"+strconv.Itoa(k), "z"+strconv.Itoa(k)
		keys = append(keys, h, l, z)
		for i := range 300 {
			do("HSET", h, "f"+strconv.Itoa(i%97), i)
			do("RPUSH", l, i)
			do("ZADD", z, i%13, "m"+strconv.Itoa(i%89))
			switch i % 10 {
			case 1:
				do("HDEL", h, "f"+strconv.Itoa(i%7))
				do("LPOP", l)
				do("ZREM", z, "m"+strconv.Itoa(i%5))
			case 3:
				do("LSET", l, 2, "set"+strconv.Itoa(i))
				do("ZINCRBY", z, 0.5, "m1")
				do("HINCRBY", h, "ctr", 3)
			case 5:
				do("LINSERT", l, "BEFORE", strconv.Itoa(i-1), "ins")
				do("ZREMRANGEBYSCORE", z, 11, 12)
			case 7:
				do("LREM", l, 0, "ins")
				do("LTRIM", l, 1, 150)
				do("RPOPLPUSH", l, l)
			}
			if i%50 == 0 {
				time.Sleep(30 * time.Millisecond) // a flush or a fold between writes
			}
		}
		if k%2 == 0 {
			do("EXPIRE", h, 3600)
			do("PEXPIRE", z, 3_600_000)
		}
	}
	do("DEL", "l5")
	if b := info(t, rdb, "persistence")["bases"]; b == "0" {
		t.Errorf("no base rewrite happened (bases=%s): the test meant to cross folds", b)
	}
	want := kindsState(t, rdb, keys)
	c.termOK()

	c = mustLaunch(t, dir, args...)
	got := kindsState(t, c.client(), keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s after SIGTERM and a restart:\n got %.200s\nwant %.200s", k, got[k], want[k])
		}
	}
	c.termOK()
}

// TestProcessKindsKill9: while one client writes a numbered sequence of
// element changes to a list, a hash and a sorted set (with folds forced
// often), kill -9 lands after two flushes that followed an acknowledged
// write n: after the restart each key holds exactly the state of some
// prefix of the sequence of at least n writes (nothing acknowledged before
// the flush bound is lost, and no record is applied twice or out of
// order).
func TestProcessKindsKill9(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	args := []string{"--flush-interval", "20ms", "--log-fold-min-bytes", "8192"}
	for round := range 3 {
		c := mustLaunch(t, dir, args...)
		rdb := c.client()
		rdb.Del(ctx, "kl", "kh", "kz")
		if err := rdb.Save(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		var acked atomic.Int64 // writes 0..acked-1 are acknowledged
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for n := int64(0); ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
					p.RPush(ctx, "kl", n)
					p.HSet(ctx, "kh", "f"+strconv.FormatInt(n%50, 10), n)
					p.ZAdd(ctx, "kz", redis.Z{Score: float64(n), Member: "m" + strconv.FormatInt(n%100, 10)})
					if n%40 == 39 {
						p.LTrim(ctx, "kl", 0, -1) // a no-op trim: recorded, replayed
					}
					return nil
				})
				if err != nil {
					return // killed
				}
				acked.Store(n + 1)
			}
		}()
		flushes := func() int64 {
			v, _ := strconv.ParseInt(info(t, rdb, "persistence")["flushes"], 10, 64)
			return v
		}
		time.Sleep(time.Duration(200+100*round) * time.Millisecond)
		mark := acked.Load()
		f0 := flushes()
		deadline := time.Now().Add(time.Minute)
		for flushes() < f0+2 {
			if time.Now().After(deadline) {
				t.Fatal("no two flushes within a minute")
			}
			time.Sleep(5 * time.Millisecond)
		}
		bases := info(t, rdb, "persistence")["bases"]
		c.kill()
		close(stop)
		<-done

		c = mustLaunch(t, dir, args...)
		rdb = c.client()
		// The list: 0..n-1 in order.
		l, err := rdb.LRange(ctx, "kl", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range l {
			if x != strconv.Itoa(i) {
				t.Fatalf("round %d: list item %d is %q (list of %d)", round, i, x, len(l))
			}
		}
		// The hash: field f<i> is the last n < prefix with n%50 == i.
		checkPrefix := func(name string, n int64, got map[string]string, want func(prefix int64) map[string]string) {
			t.Helper()
			if n < mark {
				t.Errorf("round %d: %s holds %d writes, but %d were acknowledged two flushes before the kill", round, name, n, mark)
			}
			if fmt.Sprint(got) != fmt.Sprint(want(n)) {
				t.Errorf("round %d: %s is not the state of its first %d writes:\n got %.300v\nwant %.300v", round, name, n, got, want(n))
			}
		}
		checkPrefix("the list", int64(len(l)), nil, func(int64) map[string]string { return nil })
		hm, err := rdb.HGetAll(ctx, "kh").Result()
		if err != nil {
			t.Fatal(err)
		}
		var hn int64 // the prefix the hash shows: one past its largest value
		for _, v := range hm {
			x, _ := strconv.ParseInt(v, 10, 64)
			hn = max(hn, x+1)
		}
		checkPrefix("the hash", hn, hm, func(prefix int64) map[string]string {
			m := map[string]string{}
			for n := int64(0); n < prefix; n++ {
				m["f"+strconv.FormatInt(n%50, 10)] = strconv.FormatInt(n, 10)
			}
			return m
		})
		zs, err := rdb.ZRangeWithScores(ctx, "kz", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		zm := map[string]string{}
		var zn int64
		for _, e := range zs {
			zm[e.Member.(string)] = strconv.FormatFloat(e.Score, 'f', -1, 64)
			zn = max(zn, int64(e.Score)+1)
		}
		checkPrefix("the sorted set", zn, zm, func(prefix int64) map[string]string {
			m := map[string]string{}
			for n := int64(0); n < prefix; n++ {
				m["m"+strconv.FormatInt(n%100, 10)] = strconv.FormatInt(n, 10)
			}
			return m
		})
		t.Logf("round %d: acknowledged %d before the two flushes, %d at the kill; restored list %d, hash %d, zset %d writes; bases so far %s",
			round, mark, acked.Load(), len(l), hn, zn, bases)
		c.termOK()
	}
}

// A data directory written before per-element persistence (main at
// a766f58, --log-fold-min-bytes 1: hashes, lists and sorted sets as whole
// images, 'o' entries, in the base and in the log after it, one in
// database 3, one with an expiry, one deleted) restores unchanged; a
// change to a restored value is then persisted as a delta on top of that
// old image and survives a restart.
func TestProcessRestoresKindsDirBeforeDeltas(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "datadir-main-a766f58-kinds"))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := mustLaunch(t, dir)
	rdb := c.client()
	want := map[string]string{
		"fun":  "hash ttl>0=false water=4",
		"lim":  "list ttl>0=false 5,10,20,30",
		"log":  "zset ttl>0=false c:3,a:10,",
		"tb":   "hash ttl>0=true tokens=5",
		"gone": "none ttl>0=false ",
	}
	check := func(when string, rdb *redis.Client, want map[string]string) {
		t.Helper()
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		got := kindsState(t, rdb, keys)
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: %s = %q, want %q", when, k, got[k], w)
			}
		}
		db3 := redis.NewClient(&redis.Options{Addr: c.addr, DB: 3})
		defer db3.Close()
		if z := fmt.Sprint(kindsState(t, db3, []string{"db3z"})); z != "map[db3z:zset ttl>0=false y:-Inf,x:1.5,]" {
			t.Errorf("%s: database 3: %s", when, z)
		}
		if ms, err := rdb.Do(ctx, "PEXPIRETIME", "tb").Int64(); err != nil || ms != 4102444800000 {
			t.Errorf("%s: PEXPIRETIME tb = %d, %v", when, ms, err)
		}
	}
	check("restored", rdb, want)
	rdb.HSet(ctx, "fun", "lastTime", "1700000100")
	rdb.RPush(ctx, "lim", "40")
	rdb.ZAdd(ctx, "log", redis.Z{Score: 4, Member: "d"})
	if err := rdb.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	want["fun"] = "hash ttl>0=false lastTime=1700000100,water=4"
	want["lim"] = "list ttl>0=false 5,10,20,30,40"
	want["log"] = "zset ttl>0=false c:3,d:4,a:10,"
	c.termOK()
	c = mustLaunch(t, dir)
	check("changed and restarted", c.client(), want)
	c.termOK()
}
