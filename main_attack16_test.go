package main

// Session 16's attacks on the persistence drain that runs on the event
// loop between two connections' commands (server.RunOnLoop → postSoon),
// the base rewrite through store.DumpShardTAT and the drain's "texts"
// flag (store/walk.go): many connections change keys of every kind (plain
// TATs, texts, verbatim numbers, LOG and FIXED windows, hashes, DEL) in
// pipelines, MULTI/EXEC and EVAL while SAVE, BGSAVE and folds (a tiny
// --log-fold-min-bytes) run; then every key's state must survive SIGTERM
// exactly, and kill -9 once the writes are older than --flush-interval.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// a16Op queues one random command on key k.
func a16Op(ctx context.Context, p redis.Pipeliner, rng *rand.Rand, k string) {
	switch rng.IntN(9) {
	case 0, 1:
		p.Do(ctx, "CL.THROTTLE", k, 1000, 1, 3600, 1+rng.IntN(3))
	case 2:
		p.Set(ctx, k, "text-"+strconv.Itoa(rng.IntN(1000)), 0)
	case 3:
		p.Set(ctx, k, []string{"+5", "007", "12", "-0"}[rng.IntN(4)], time.Hour)
	case 4:
		p.Do(ctx, "CL.WINDOW", k, 1000, 86_400_000, 1+rng.IntN(2), "LOG")
	case 5:
		p.Do(ctx, "CL.WINDOW", k, 1000, 86_400_000, 1+rng.IntN(2), "FIXED")
	case 6:
		p.Del(ctx, k)
	case 7:
		p.HSet(ctx, k, "f"+strconv.Itoa(rng.IntN(5)), strings.Repeat("v", rng.IntN(80)))
	case 8:
		p.HDel(ctx, k, "f"+strconv.Itoa(rng.IntN(5)))
	}
}

// a16Expected: the errors a kind mix earns (WRONGTYPE; CL.THROTTLE on a
// text, redis-cell's "invalid stored value"; EXECABORT is not one).
func a16Expected(err error) bool {
	s := err.Error()
	return strings.Contains(s, "WRONGTYPE") || strings.Contains(s, "invalid stored value")
}

// a16Load runs workers connections for d: each owns its own keys and sends
// single commands, pipelines, MULTI/EXEC and EVAL; another connection
// runs SAVE and BGSAVE. Errors other than WRONGTYPE fail the test.
func a16Load(t *testing.T, addr string, seed uint64, workers int, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1})
			defer rdb.Close()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			key := func() string { return fmt.Sprintf("w%d:k%d", w, rng.IntN(60)) }
			for time.Now().Before(stop) {
				var cmds []redis.Cmder
				var err error
				switch rng.IntN(4) {
				case 0:
					p := rdb.Pipeline()
					a16Op(ctx, p, rng, key())
					cmds, err = p.Exec(ctx)
				case 1:
					p := rdb.Pipeline()
					for range 1 + rng.IntN(50) {
						a16Op(ctx, p, rng, key())
					}
					cmds, err = p.Exec(ctx)
				case 2:
					p := rdb.TxPipeline()
					for range 1 + rng.IntN(8) {
						a16Op(ctx, p, rng, key())
					}
					cmds, err = p.Exec(ctx)
				case 3:
					k1, k2 := key(), key()
					err = rdb.Eval(ctx, `redis.call('SET', KEYS[1], ARGV[1]); redis.call('DEL', KEYS[2]); redis.call('HSET', KEYS[2], 'e', ARGV[1]); return 1`,
						[]string{k1, k2}, strconv.Itoa(rng.IntN(1e6))).Err()
				}
				if err != nil && !a16Expected(err) {
					errs <- fmt.Errorf("worker %d: %v", w, err)
					return
				}
				for _, c := range cmds {
					if e := c.Err(); e != nil && !a16Expected(e) {
						errs <- fmt.Errorf("worker %d: %v: %v", w, c.Args(), e)
						return
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1})
		defer rdb.Close()
		for i := 0; time.Now().Before(stop); i++ {
			var err error
			if i%2 == 0 {
				err = rdb.Do(ctx, "SAVE").Err()
			} else {
				err = rdb.Do(ctx, "BGSAVE").Err()
			}
			if err != nil && !strings.Contains(err.Error(), "in progress") {
				errs <- fmt.Errorf("SAVE/BGSAVE: %v", err)
				return
			}
			time.Sleep(30 * time.Millisecond)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestProcessAttack16DrainMixedKinds: with --io-loops 0, 1 and 2, a 20 ms
// flush interval and a 4 KiB fold threshold, 8 connections of mixed-kind
// writes (see a16Load) for 0.8 s; the state then survives SIGTERM exactly,
// and, after another round of load and 5 flush intervals of quiet, kill -9.
func TestProcessAttack16DrainMixedKinds(t *testing.T) {
	for _, loops := range []string{"0", "1", "2"} {
		t.Run("io-loops="+loops, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"--io-loops", loops, "--flush-interval", "20ms", "--log-fold-min-bytes", "4096"}
			c := mustLaunch(t, dir, args...)
			a16Load(t, c.addr, 16, 8, 800*time.Millisecond)
			before := kindsView(t, c.client())
			if n := strings.Count(before, "\n"); n < 100 {
				t.Fatalf("only %d keys after the load", n)
			}
			if m := info(t, c.client(), "persistence"); infoInt(m, "bases") < 3 {
				t.Fatalf("%s bases written under the load, want folds: %v", m["bases"], m)
			} else {
				t.Logf("%d keys, %s flushes, %s bases", strings.Count(before, "\n"), m["flushes"], m["bases"])
			}
			t.Logf("SIGTERM took %v", c.termOK().Round(time.Millisecond))
			c = mustLaunch(t, dir, args...)
			if after := kindsView(t, c.client()); after != before {
				t.Fatalf("SIGTERM + restart changed the state:\n%s", a16Diff(before, after))
			}
			a16Load(t, c.addr, 17, 8, 800*time.Millisecond)
			before = kindsView(t, c.client())
			time.Sleep(100 * time.Millisecond) // 5 flush intervals
			c.kill()
			c = mustLaunch(t, dir, args...)
			if after := kindsView(t, c.client()); after != before {
				t.Fatalf("kill -9 100 ms after the last write + restart changed the state:\n%s", a16Diff(before, after))
			}
			c.termOK()
		})
	}
}

// a16Diff lists the lines of two views that differ.
func a16Diff(before, after string) string {
	b := strings.Split(before, "\n")
	a := strings.Split(after, "\n")
	in := map[string]bool{}
	for _, l := range a {
		in[l] = true
	}
	was := map[string]bool{}
	for _, l := range b {
		was[l] = true
	}
	var out strings.Builder
	n := 0
	for _, l := range b {
		if !in[l] && n < 30 {
			fmt.Fprintf(&out, "- %s\n", l)
			n++
		}
	}
	for _, l := range a {
		if !was[l] && n < 60 {
			fmt.Fprintf(&out, "+ %s\n", l)
			n++
		}
	}
	return out.String()
}

// a16HashFuzz is TestProcessAttack16HashDiff's state: celld and
// redis-server side by side, fed the same hash commands.
type a16HashFuzz struct {
	*kindsFuzz
}

// a16Bytes is a field or value of a length around the compact form's
// boundaries (one byte for two lengths under 16; 64, the listpack value
// limit), sometimes with NUL and 0xff bytes, sometimes a number.
func (f *a16HashFuzz) a16Bytes(pool int) string {
	r := f.rng
	switch r.IntN(6) {
	case 0:
		return strconv.Itoa(r.IntN(pool))
	case 1:
		return []string{"1.5", "-3", "10", "1e3", "0", "-0", "9223372036854775806", "abc", ""}[r.IntN(9)]
	}
	n := []int{0, 1, 14, 15, 16, 17, 31, 63, 64, 65, 200}[r.IntN(11)]
	b := make([]byte, n)
	for i := range b {
		b[i] = "ab\x00\xff0"[r.IntN(5)]
	}
	if n > 0 && r.IntN(2) == 0 {
		b[0] = byte('a' + r.IntN(pool%26+1))
	}
	return string(b)
}

func (f *a16HashFuzz) field() string {
	if f.rng.IntN(3) == 0 {
		return f.a16Bytes(8)
	}
	return "f" + strconv.Itoa(f.rng.IntN(160)) // crosses 128 entries
}

// sorted is a reply array's strings, sorted.
func a16Sorted(v rv) []string {
	s := make([]string, len(v.arr))
	for i, e := range v.arr {
		s[i] = e.s
	}
	sort.Strings(s)
	return s
}

func (f *a16HashFuzz) one() {
	k := f.key()
	switch f.rng.IntN(20) {
	case 0, 1, 2, 3, 4:
		args := []string{"HSET", k}
		for range 1 + f.rng.IntN(6) {
			args = append(args, f.field(), f.a16Bytes(100))
		}
		f.both(args...)
	case 5, 6:
		args := []string{"HDEL", k}
		for range 1 + f.rng.IntN(4) {
			args = append(args, f.field())
		}
		f.both(args...)
	case 7:
		f.both("HINCRBY", k, f.field(), strconv.Itoa(f.rng.IntN(200)-100))
	case 8:
		f.both("HINCRBYFLOAT", k, f.field(), []string{"1.5", "-0.25", "1e3", "3", "-1e-5", "0"}[f.rng.IntN(6)])
	case 9:
		f.both("HSETNX", k, f.field(), f.a16Bytes(100))
	case 10:
		f.both("HGET", k, f.field())
		f.both("HMGET", k, f.field(), f.field(), f.field())
		f.both("HEXISTS", k, f.field())
		f.both("HSTRLEN", k, f.field())
	case 11:
		f.both("HLEN", k)
		f.both("HGETALL", k)
		f.both("HKEYS", k)
		f.both("HVALS", k)
		f.both("OBJECT", "ENCODING", k)
	case 12:
		// HRANDFIELD: random, so checked against HGETALL, not Redis.
		all := map[string]string{}
		h := f.cell.do("HGETALL", k)
		for i := 0; i+1 < len(h.arr); i += 2 {
			all[h.arr[i].s] = h.arr[i+1].s
		}
		n := []int{1, 3, 200, -3, -200, 0}[f.rng.IntN(6)]
		args := []string{"HRANDFIELD", k, strconv.Itoa(n), "WITHVALUES"}
		f.note(args)
		got := f.cell.do(args...)
		if got.kind != '*' {
			f.fail("HRANDFIELD: %s", got)
		}
		want := min(max(n, -n), len(all))
		if n < 0 && len(all) > 0 {
			want = -n
		}
		if len(got.arr) != 2*want {
			f.fail("HRANDFIELD %d of %d fields: %d elements, want %d", n, len(all), len(got.arr), 2*want)
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(got.arr); i += 2 {
			fl, v := got.arr[i].s, got.arr[i+1].s
			if w, ok := all[fl]; !ok || w != v {
				f.fail("HRANDFIELD gave %q=%q, not in the hash", fl, v)
			}
			if n > 0 && seen[fl] {
				f.fail("HRANDFIELD %d gave %q twice", n, fl)
			}
			seen[fl] = true
		}
		f.both("HRANDFIELD", "nokey")
	case 13:
		// HSCAN to its end: every field, no field that is not there.
		h := f.cell.do("HGETALL", k)
		want := map[string]string{}
		for i := 0; i+1 < len(h.arr); i += 2 {
			want[h.arr[i].s] = h.arr[i+1].s
		}
		got := map[string]string{}
		cursor := "0"
		for i := 0; ; i++ {
			args := []string{"HSCAN", k, cursor, "COUNT", strconv.Itoa(1 + f.rng.IntN(20))}
			f.note(args)
			v := f.cell.do(args...)
			if v.kind != '*' || len(v.arr) != 2 {
				f.fail("HSCAN: %s", v)
			}
			for j := 0; j+1 < len(v.arr[1].arr); j += 2 {
				got[v.arr[1].arr[j].s] = v.arr[1].arr[j+1].s
			}
			if cursor = v.arr[0].s; cursor == "0" || i > 1000 {
				break
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			f.fail("HSCAN gave %d fields, HGETALL %d", len(got), len(want))
		}
	case 14:
		f.both("DEL", k)
	case 15:
		f.both("PERSIST", k)
		f.both("PEXPIRE", k, "100000000")
	case 16:
		dst := f.key()
		f.both("COPY", k, dst, "REPLACE")
	case 17:
		f.both("HGETALL", k)
	case 18, 19:
		args := []string{"HSET", k}
		for range 20 + f.rng.IntN(60) {
			args = append(args, "f"+strconv.Itoa(f.rng.IntN(160)), f.a16Bytes(40))
		}
		f.both(args...)
	}
}

// TestProcessAttack16HashDiff: random hash commands (fields and values at
// the compact form's length boundaries, binary bytes, numbers, growth past
// 128 fields and 64-byte values) on celld and redis-server 7, replies
// compared; HRANDFIELD and HSCAN checked against HGETALL. celld is
// restarted every 400 steps: SIGTERM, SAVE + kill -9, or kill -9 after 5
// flush intervals (20 ms, folds at 4 KiB); then every key is compared.
func TestProcessAttack16HashDiff(t *testing.T) {
	sock := startRedisServer(t, "--enable-debug-command", "yes")
	seed := uint64(16)
	if s := os.Getenv("CELLD_A16_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	steps := 2000
	if s := os.Getenv("CELLD_A16_STEPS"); s != "" {
		steps, _ = strconv.Atoi(s)
	}
	dir := t.TempDir()
	args := []string{"--flush-interval", "20ms", "--log-fold-min-bytes", "4096"}
	c := mustLaunch(t, dir, args...)
	f := &a16HashFuzz{&kindsFuzz{t: t, rng: rand.New(rand.NewPCG(seed, 0x16)), seed: seed,
		keys: []string{"h1", "h2", "sixteen-bytes-16", strings.Repeat("long", 10)}}}
	f.ref = dialF(t, "redis", "unix", sock)
	f.cell = dialF(t, "celld", "tcp", c.addr)
	f.ref.do("FLUSHALL")
	check := func() {
		for _, k := range f.keys {
			f.both("TYPE", k)
			f.both("PTTL", k)
			f.both("HGETALL", k)
			f.both("OBJECT", "ENCODING", k)
		}
	}
	for f.step = 0; f.step < steps; f.step++ {
		f.one()
		if f.step > 0 && f.step%400 == 0 {
			check()
			switch (f.step / 400) % 3 {
			case 0:
				c.termOK()
			case 1:
				if v := f.cell.do("SAVE"); v.isErr() {
					f.fail("SAVE: %s", v)
				}
				c.kill()
			case 2:
				time.Sleep(100 * time.Millisecond)
				c.kill()
			}
			c = mustLaunch(t, dir, args...)
			f.cell = dialF(t, "celld", "tcp", c.addr)
			// Redis's own restart: a hash loaded from its RDB takes the
			// compact form again if it fits (OBJECT ENCODING).
			if v := f.ref.do("DEBUG", "RELOAD"); v.isErr() {
				t.Fatalf("redis DEBUG RELOAD: %s", v)
			}
			f.lastSent = "(restart)"
			check()
		}
	}
	check()
}

// TestProcessAttack16HIncrByFloat: HINCRBYFLOAT answers as redis-server's
// (long double on x86-64): sums whose last digits float64 loses
// (9223372036854775806 + 3 is ...809, float64 ...776000; 1000 - 1e-5 is
// 999.99998999999999999, float64 999.99999), sums near long double's
// range, hex floats, tiny increments, and the errors. Fails on float64
// arithmetic (data/hash.go before).
func TestProcessAttack16HIncrByFloat(t *testing.T) {
	sock := startRedisServer(t)
	c := mustLaunch(t, t.TempDir(), "--persist", "no")
	f := &kindsFuzz{t: t, keys: []string{"h"}}
	f.ref = dialF(t, "redis", "unix", sock)
	f.cell = dialF(t, "celld", "tcp", c.addr)
	f.ref.do("FLUSHALL")
	f.both("HSET", "h", "a", "9223372036854775806", "b", "1000", "c", "inf", "d", "abc", "n", "12")
	for _, args := range [][]string{
		{"a", "3"}, {"b", "-1e-5"}, {"b", "0.1"}, {"b", "-0.3"}, {"c", "1"}, {"d", "1"}, {"e", "inf"}, {"e", "-inf"},
		{"e", "nan"}, {"e", ""}, {"e", " 1"}, {"e", "1e4932"}, {"e", "0x1p3"}, {"e", "1e4932"}, {"f", "1.5"},
		{"f", "-1.5"}, {"g", "5.0e3"}, {"h", "1e-400"}, {"n", "0.1"}, {"n", "1e19"}, {"i", "0.1"}, {"i", "0.2"},
		{"i", "-1e-30"}, {"j", "1e308"}, {"j", "1e308"}, {"k", "3.0000000000000000001"},
	} {
		f.both("HINCRBYFLOAT", "h", args[0], args[1])
	}
	f.both("HGETALL", "h")
}

// a16Score is a sorted-set score: small integers (ties), fractions,
// infinities, zero's signs, large magnitudes.
func a16Score(r *rand.Rand) string {
	switch r.IntN(8) {
	case 0:
		return []string{"inf", "-inf", "+inf", "0", "-0", "1e308", "-1e308", "5e-324"}[r.IntN(8)]
	case 1:
		return strconv.FormatFloat(r.NormFloat64()*100, 'g', -1, 64)
	}
	return strconv.Itoa(r.IntN(6) - 2)
}

// a16ZsetStep sends one random sorted-set command to both servers.
func a16ZsetStep(f *kindsFuzz) {
	r := f.rng
	k := f.key()
	member := func() string { return "m" + strconv.Itoa(r.IntN(12)) }
	srcs := func() []string {
		n := 1 + r.IntN(3)
		out := []string{strconv.Itoa(n)}
		for range n {
			out = append(out, f.key())
		}
		return out
	}
	opts := func(args []string, n int, withScores bool) []string {
		if r.IntN(2) == 0 {
			args = append(args, "WEIGHTS")
			for range n {
				args = append(args, []string{"1", "0", "-1", "2.5", "inf", "-inf"}[r.IntN(6)])
			}
		}
		if r.IntN(2) == 0 {
			args = append(args, "AGGREGATE", []string{"SUM", "MIN", "MAX"}[r.IntN(3)])
		}
		if withScores && r.IntN(2) == 0 {
			args = append(args, "WITHSCORES")
		}
		return args
	}
	switch r.IntN(14) {
	case 0, 1, 2:
		args := []string{"ZADD", k}
		for range 1 + r.IntN(5) {
			args = append(args, a16Score(r), member())
		}
		f.both(args...)
	case 3:
		f.both("ZPOPMIN", k, []string{"0", "1", "2", "5", "100", "-1"}[r.IntN(6)])
	case 4:
		f.both("ZPOPMAX", k, []string{"0", "1", "2", "5", "100", "-1"}[r.IntN(6)])
	case 5:
		s := srcs()
		n, _ := strconv.Atoi(s[0])
		f.both(opts(append([]string{"ZINTER"}, s...), n, true)...)
	case 6:
		s := srcs()
		args := append([]string{"ZDIFF"}, s...)
		if r.IntN(2) == 0 {
			args = append(args, "WITHSCORES")
		}
		f.both(args...)
	case 7:
		s := srcs()
		n, _ := strconv.Atoi(s[0])
		f.both(opts(append([]string{"ZINTERSTORE", f.key()}, s...), n, false)...)
	case 8:
		f.both(append([]string{"ZDIFFSTORE", f.key()}, srcs()...)...)
	case 9:
		args := append([]string{"ZINTERCARD"}, srcs()...)
		if r.IntN(2) == 0 {
			args = append(args, "LIMIT", strconv.Itoa(r.IntN(4)))
		}
		f.both(args...)
	case 10:
		var args []string
		switch r.IntN(3) {
		case 0:
			args = []string{"ZRANGESTORE", f.key(), k, strconv.Itoa(r.IntN(8) - 4), strconv.Itoa(r.IntN(8) - 4)}
		case 1:
			lo, hi := []string{"-inf", "(0", "0", "-2", "(1", "1.5"}[r.IntN(6)], []string{"+inf", "(2", "2", "0", "(0", "10"}[r.IntN(6)]
			if r.IntN(2) == 0 {
				args = []string{"ZRANGESTORE", f.key(), k, hi, lo, "BYSCORE", "REV"}
			} else {
				args = []string{"ZRANGESTORE", f.key(), k, lo, hi, "BYSCORE"}
			}
		case 2:
			// Not BYLEX: over mixed scores Redis's answer is undefined.
			args = []string{"ZRANGESTORE", f.key(), k, strconv.Itoa(r.IntN(8) - 4), strconv.Itoa(r.IntN(8) - 4), "REV"}
		}
		if args[len(args)-1] == "BYSCORE" || args[len(args)-2] == "BYSCORE" {
			if r.IntN(2) == 0 {
				args = append(args, "LIMIT", strconv.Itoa(r.IntN(4)-1), strconv.Itoa(r.IntN(5)-1))
			}
		}
		f.both(args...)
	case 11:
		f.both("ZRANGE", k, "0", "-1", "WITHSCORES")
	case 12:
		if r.IntN(4) == 0 {
			f.both("SET", k, "x")
		} else {
			f.both("DEL", k)
		}
	case 13:
		s := srcs()
		n, _ := strconv.Atoi(s[0])
		f.both(opts(append([]string{"ZUNION"}, s...), n, true)...)
	}
}

// TestProcessAttack16ZsetDiff: random ZADD, ZPOPMIN/ZPOPMAX with counts,
// ZINTER/ZDIFF (and STORE), ZINTERCARD, ZRANGESTORE (index, BYSCORE, REV,
// LIMIT), ZUNION with WEIGHTS and AGGREGATE over scores with ties,
// infinities and zero's signs, on celld and redis-server 7, in RESP2 and
// RESP3; replies compared exactly (order included), then every key.
func TestProcessAttack16ZsetDiff(t *testing.T) {
	sock := startRedisServer(t)
	c := mustLaunch(t, t.TempDir(), "--persist", "no")
	seed := uint64(16)
	if s := os.Getenv("CELLD_A16_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	steps := 3000
	if s := os.Getenv("CELLD_A16_STEPS"); s != "" {
		steps, _ = strconv.Atoi(s)
	}
	for _, proto := range []string{"2", "3"} {
		t.Run("resp"+proto, func(t *testing.T) {
			f := &kindsFuzz{t: t, rng: rand.New(rand.NewPCG(seed, 0x25)), seed: seed, keys: []string{"z1", "z2", "z3", "z4"}}
			f.ref = dialF(t, "redis", "unix", sock)
			f.cell = dialF(t, "celld", "tcp", c.addr)
			f.ref.do("FLUSHALL")
			f.cell.do("FLUSHALL")
			if proto == "3" {
				f.ref.do("HELLO", "3")
				f.cell.do("HELLO", "3")
			}
			for f.step = 0; f.step < steps; f.step++ {
				a16ZsetStep(f)
			}
			for _, k := range f.keys {
				f.both("TYPE", k)
				f.both("ZRANGE", k, "0", "-1", "WITHSCORES")
			}
		})
	}
}

// TestProcessAttack16ZAggregate: ZINTER/ZUNION (and STORE) combine their
// sources as redis-server 7 does: from the smallest set to the largest
// (0.1 + 0.2 + 0.3 in that order is 0.6000000000000001, Redis's order
// gives 0.59999999999999998), a tie in MIN/MAX keeps the first score's
// sign (-0 against 0), and a later set's 0 * inf is a NaN that zeroes a
// sum and that MIN/MAX ignore (only the first set's product is made 0).
// Each fails on data/zsetops.go at 9b7c50e.
func TestProcessAttack16ZAggregate(t *testing.T) {
	sock := startRedisServer(t)
	c := mustLaunch(t, t.TempDir(), "--persist", "no")
	f := &kindsFuzz{t: t, keys: []string{"a", "b", "c"}}
	f.ref = dialF(t, "redis", "unix", sock)
	f.cell = dialF(t, "celld", "tcp", c.addr)
	f.ref.do("FLUSHALL")
	f.both("ZADD", "a", "0.1", "m", "1", "x", "1", "y", "0", "z", "-0", "w")
	f.both("ZADD", "b", "0.2", "m", "-0", "z", "0", "w", "3", "y")
	f.both("ZADD", "c", "0.3", "m", "1", "x", "0", "y", "-0", "z", "0", "w", "5", "v")
	for _, cmd := range [][]string{
		{"ZINTER", "3", "a", "b", "c", "WITHSCORES"},
		{"ZINTER", "3", "c", "b", "a", "WITHSCORES"},
		{"ZUNION", "3", "a", "b", "c", "WITHSCORES"},
		{"ZINTER", "2", "a", "b", "AGGREGATE", "MIN", "WITHSCORES"},
		{"ZINTER", "2", "a", "b", "AGGREGATE", "MAX", "WITHSCORES"},
		{"ZUNION", "2", "a", "b", "AGGREGATE", "MAX", "WITHSCORES"},
		{"ZINTER", "2", "b", "c", "WEIGHTS", "inf", "inf", "WITHSCORES"},
		{"ZINTER", "2", "b", "c", "WEIGHTS", "inf", "inf", "AGGREGATE", "MIN", "WITHSCORES"},
		{"ZINTER", "2", "b", "c", "WEIGHTS", "-inf", "inf", "AGGREGATE", "MAX", "WITHSCORES"},
		{"ZINTER", "3", "b", "b", "a", "WEIGHTS", "-inf", "inf", "inf", "WITHSCORES"},
		{"ZUNION", "2", "b", "c", "WEIGHTS", "inf", "-inf", "WITHSCORES"},
		{"ZINTERSTORE", "d", "3", "a", "b", "c"},
		{"ZRANGE", "d", "0", "-1", "WITHSCORES"},
		{"ZUNIONSTORE", "d", "3", "a", "b", "c"},
		{"ZRANGE", "d", "0", "-1", "WITHSCORES"},
	} {
		f.both(cmd...)
	}
}
