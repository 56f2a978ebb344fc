package compat_test

import (
	"fmt"
	"net"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
)

// The memory bound as clients see it (docs/memory.md): CONFIG GET/SET of
// maxmemory and maxmemory-policy, INFO's fields, the OOM reply through
// every client library, and CONFIG SET's replies differentially against a
// real redis-server.

const oomText = "OOM command not allowed when used memory > 'maxmemory'."

func infoField(t *testing.T, rdb *redis.Client, section, field string) string {
	t.Helper()
	s, err := rdb.Info(ctx, section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO %s has no %s:\n%s", section, field, s)
	return ""
}

func TestMaxMemoryConfig(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run("resp"+strconv.Itoa(proto), func(t *testing.T) {
			ts := startServer(t)
			rdb := newGoRedis(t, ts, func(o *redis.Options) { o.Protocol = proto })
			get := func(p string) map[string]string {
				m, err := rdb.ConfigGet(ctx, p).Result()
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			if m := get("maxmemory*"); !reflect.DeepEqual(m, map[string]string{"maxmemory": "0", "maxmemory-policy": "noeviction"}) {
				t.Fatalf("CONFIG GET maxmemory* = %v", m)
			}
			if v := infoField(t, rdb, "memory", "maxmemory_human"); v != "0B" {
				t.Fatalf("maxmemory_human %q", v)
			}
			runSteps(t, ts, goRedisDo(rdb), []step{
				{c("CONFIG SET maxmemory 64mb"), "OK"},
				{c("CONFIG SET MAXMEMORY-POLICY VOLATILE-TTL"), "OK"},
				{c("CONFIG SET maxmemory 1.5gb"), errText("ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value")},
				{c("CONFIG SET maxmemory -1"), errText("ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value")},
				{c("CONFIG SET maxmemory-policy allkeys-lfu"), errText("ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-random, volatile-ttl, allkeys-lru, allkeys-random, noeviction")},
				{c("CONFIG SET maxmemory 1mb maxmemory-policy bogus"), errText("ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-random, volatile-ttl, allkeys-lru, allkeys-random, noeviction")},
				{c("CONFIG SET maxmemory 1 maxmemory 2"), errText("ERR CONFIG SET failed (possibly related to argument 'maxmemory') - duplicate parameter")},
				{c("CONFIG SET maxmemory 1mb foo bar"), errText("ERR Unknown option or number of arguments for CONFIG SET - 'foo'")},
				{c("CONFIG SET maxmemory 1mb maxmemory-policy"), errText("ERR syntax error")},
			})
			// Every failed SET above left the values alone (all or nothing).
			if m := get("maxmemory*"); !reflect.DeepEqual(m, map[string]string{"maxmemory": "67108864", "maxmemory-policy": "volatile-ttl"}) {
				t.Fatalf("after the failed SETs: %v", m)
			}
			for field, want := range map[string]string{"maxmemory": "67108864", "maxmemory_human": "64.00M", "maxmemory_policy": "volatile-ttl"} {
				if v := infoField(t, rdb, "memory", field); v != want {
					t.Errorf("INFO %s = %q, want %q", field, v, want)
				}
			}
			if ts.Store.MaxMemory() != 64<<20 {
				t.Fatalf("store bound %d", ts.Store.MaxMemory())
			}
			if err := rdb.Do(ctx, "CONFIG", "SET", "maxmemory", "3kb", "maxmemory-policy", "allkeys-random").Err(); err != nil {
				t.Fatal(err)
			}
			if m := get("maxmemory*"); !reflect.DeepEqual(m, map[string]string{"maxmemory": "3072", "maxmemory-policy": "allkeys-random"}) {
				t.Fatalf("after setting both: %v", m)
			}
		})
	}
}

// fillToOOM sets a small bound under noeviction and writes keys until the
// first OOM reply, returning how many were written.
func fillToOOM(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	if err := rdb.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100_000; i++ {
		// (a TTL of 360 s: a filling key must not expire and make room
		// while a slow, loaded run is still testing the bound)
		_, err := rdb.Do(ctx, "CL.THROTTLE", "fill:"+strconv.Itoa(i), 10, 10, 3600, 1).Result()
		if err != nil {
			if err.Error() != oomText {
				t.Fatalf("key %d: %v", i, err)
			}
			return i
		}
	}
	t.Fatal("no OOM after 100,000 keys under a 1 MB bound")
	return 0
}

// TestOOMReplyEveryClient: under noeviction at the bound, CL.THROTTLE
// that would create a key and every denyoom command (SET, a new key or an
// existing one, as in Redis) get Redis's OOM error, read the same way by
// go-redis (RESP2 and 3), rueidis and redigo; CL.THROTTLE on existing
// keys, reads, deletes and admin commands still work; an eviction policy
// set at run time makes room again.
func TestOOMReplyEveryClient(t *testing.T) {
	ts := startServer(t)
	rdb := newGoRedis(t, ts)
	n := fillToOOM(t, rdb)
	if n < 1000 {
		t.Fatalf("only %d keys fit in 1 MB", n)
	}
	want := errText(oomText)
	fill2, err := rdb.Get(ctx, "fill:2").Result()
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]do{
		"go-redis resp3": goRedisDo(rdb),
		"go-redis resp2": goRedisDo(newGoRedis(t, ts, resp2)),
		"rueidis":        rueidisDo(newRueidis(t, ts)),
		"redigo":         redigoDo(newRedigo(t, ts)),
	}
	for name, send := range clients {
		for _, cmd := range [][]any{c("CL.THROTTLE new:key 10 10 60 1"), c("SET new:key 5"), c("SET new:key 5 EX 10"),
			c("CL.PTHROTTLE new:key 10 10 60000 1"), c("CL.MTHROTTLE new:key 10 10 60 1"),
			c("CL.MPTHROTTLE fill:1 10 10 3600000 0 new:key 10 10 60000 1")} { // the GCRA family too (spec/gcra-family.md)
			if got, err := send(cmd...); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s = %v, %v; want %v", name, show(cmd), show(got), err, show(want))
			}
		}
		steps := []struct {
			cmd  []any
			want any
		}{
			{c("CL.THROTTLE fill:1 10 10 3600 1"), th(0, 11, 9, -1, 720)},
			{c("CL.THROTTLE new:key 10 10 60 100"), th(1, 11, 0, -1, 0)}, // denied: creates nothing
			{c("SET fill:2 7"), want},                                    // denyoom: refused over the bound, key or no key (Redis)
			{c("GET fill:2"), fill2},                                     // unchanged
			{c("EXISTS new:key"), int64(0)},
			{c("PING"), "PONG"},
		}
		for _, st := range steps {
			got, err := send(st.cmd...)
			if err != nil {
				t.Fatalf("%s: %s: %v", name, show(st.cmd), err)
			}
			if st.cmd[0] == "CL.THROTTLE" && st.want.([]any)[0] == int64(0) {
				// fill:1 was called once per client: only check it is allowed.
				if g, ok := got.([]any); !ok || g[0] != int64(0) {
					t.Errorf("%s: %s = %s", name, show(st.cmd), show(got))
				}
				continue
			}
			if st.cmd[0] == "CL.THROTTLE" {
				if g, ok := got.([]any); !ok || g[0] != int64(1) {
					t.Errorf("%s: %s = %s, want limited", name, show(st.cmd), show(got))
				}
				continue
			}
			if !reflect.DeepEqual(got, st.want) {
				t.Errorf("%s: %s = %s, want %s", name, show(st.cmd), show(got), show(st.want))
			}
		}
	}
	if v := infoField(t, rdb, "errorstats", "errorstat_OOM"); !strings.HasPrefix(v, "count=") || v == "count=0" {
		t.Errorf("errorstat_OOM %q", v)
	}
	if v := infoField(t, rdb, "stats", "evicted_keys"); v != "0" {
		t.Errorf("noeviction evicted %s keys", v)
	}
	// Deleting makes room; then an eviction policy lets every new key in.
	if err := rdb.Del(ctx, "fill:3", "fill:4", "fill:5").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "volatile-ttl").Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		if err := rdb.Do(ctx, "CL.THROTTLE", "spray:"+strconv.Itoa(i), 10, 10, 60, 1).Err(); err != nil {
			t.Fatalf("volatile-ttl, key %d: %v", i, err)
		}
	}
	ev, _ := strconv.Atoi(infoField(t, rdb, "stats", "evicted_keys"))
	used, _ := strconv.ParseInt(infoField(t, rdb, "memory", "used_memory"), 10, 64)
	if ev < 4000 || used > 1<<20*11/10 {
		t.Errorf("volatile-ttl: evicted %d, used_memory %d for a 1 MB bound", ev, used)
	}
	// Lowering the bound at run time: the sweep evicts down to it.
	if err := rdb.ConfigSet(ctx, "maxmemory", "512kb").Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ts.Store.UsedMemory() > 512<<10 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if u := ts.Store.UsedMemory(); u > 512<<10 {
		t.Errorf("after CONFIG SET maxmemory 512kb: used_memory %d", u)
	}
}

// TestConfigSetMemoryVersusRedis sends the same CONFIG SET/GET sequence to
// redis-server 7 and to celld and compares the replies (the LFU policies,
// which celld refuses, are left out).
func TestConfigSetMemoryVersusRedis(t *testing.T) {
	bin := needRedisServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	rs := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Process.Kill(); rs.Wait() })
	var rconn redigo.Conn
	for i := 0; ; i++ {
		if rconn, err = redigo.Dial("tcp", addr); err == nil {
			break
		}
		if i > 100 {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer rconn.Close()
	ts := startServer(t)
	cconn := newRedigo(t, ts)
	for _, line := range []string{
		"CONFIG SET maxmemory 64mb", "CONFIG GET maxmemory", "CONFIG SET maxmemory 1K", "CONFIG GET maxmemory",
		"CONFIG SET maxmemory 2GB", "CONFIG GET maxmemory", "CONFIG SET maxmemory 100", "CONFIG GET maxmemory",
		"CONFIG SET maxmemory 1.5gb", "CONFIG SET maxmemory -1", "CONFIG SET maxmemory 64tb", "CONFIG SET maxmemory abc",
		"CONFIG SET maxmemory 1 maxmemory 2", "CONFIG SET maxmemory 1mb foo bar", "CONFIG SET foo bar maxmemory 1mb",
		"CONFIG SET maxmemory 1mb maxmemory-policy", "CONFIG SET maxmemory",
		"CONFIG SET maxmemory-policy volatile-ttl", "CONFIG GET maxmemory-policy",
		"CONFIG SET maxmemory-policy ALLKEYS-LRU", "CONFIG GET maxmemory-policy",
		"CONFIG SET maxmemory 3mb maxmemory-policy noeviction", "CONFIG GET maxmemory", "CONFIG GET maxmemory-policy",
		"CONFIG SET maxmemory 0", "CONFIG GET maxmemory",
	} {
		args := strings.Fields(line)
		iargs := make([]any, len(args)-1)
		for i, a := range args[1:] {
			iargs[i] = a
		}
		rv, rerr := rconn.Do(args[0], iargs...)
		cv, cerr := cconn.Do(args[0], iargs...)
		r, c := fmt.Sprint(norm(rv), " ", rerr), fmt.Sprint(norm(cv), " ", cerr)
		if r != c {
			t.Errorf("%s:\n redis: %s\n celld: %s", line, r, c)
		}
	}

}
