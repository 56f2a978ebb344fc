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
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// a16View is every key's TYPE, PTTL sign and contents: a string's GET
// (a plain TAT's decimal), a hash's fields, a window's remaining units
// (a quantity-0 call in the mode that answers), one line per key, sorted.
func a16View(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	var cursor uint64
	for {
		ks, next, err := rdb.Scan(ctx, cursor, "*", 1000).Result()
		if err != nil {
			t.Fatalf("SCAN: %v", err)
		}
		keys = append(keys, ks...)
		if cursor = next; cursor == 0 {
			break
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatalf("TYPE %s: %v", k, err)
		}
		pttl, _ := rdb.Do(ctx, "PTTL", k).Int64()
		sign := "ttl"
		if pttl == -1 {
			sign = "persist"
		}
		fmt.Fprintf(&b, "%s %s %s", k, typ, sign)
		switch typ {
		case "string":
			v, err := rdb.Get(ctx, k).Result()
			fmt.Fprintf(&b, " %q %v", v, err)
		case "hash":
			m, err := rdb.HGetAll(ctx, k).Result()
			fs := make([]string, 0, len(m))
			for f, v := range m {
				fs = append(fs, f+"="+v)
			}
			sort.Strings(fs)
			fmt.Fprintf(&b, " %v %v", fs, err)
		default:
			found := false
			for _, mode := range []string{"LOG", "FIXED"} {
				v, err := rdb.Do(ctx, "CL.WINDOW", k, 1000, 86_400_000, 0, mode).Slice()
				if err == nil {
					fmt.Fprintf(&b, " %s %v", mode, v[:3])
					found = true
					break
				}
			}
			if !found {
				fmt.Fprintf(&b, " (unreadable)")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

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
// writes (see a16Load) for 1.5 s; the state then survives SIGTERM exactly,
// and, after another round of load and 5 flush intervals of quiet, kill -9.
func TestProcessAttack16DrainMixedKinds(t *testing.T) {
	for _, loops := range []string{"0", "1", "2"} {
		t.Run("io-loops="+loops, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"--io-loops", loops, "--flush-interval", "20ms", "--log-fold-min-bytes", "4096"}
			c := mustLaunch(t, dir, args...)
			a16Load(t, c.addr, 16, 8, 1500*time.Millisecond)
			before := a16View(t, c.client())
			if n := strings.Count(before, "\n"); n < 100 {
				t.Fatalf("only %d keys after the load", n)
			}
			if m := info(t, c.client(), "persistence"); infoInt(m, "bases") < 3 {
				t.Fatalf("%s bases written under the load, want folds: %v", m["bases"], m)
			} else {
				t.Logf("%d keys, %s flushes, %s bases", strings.Count(before, "\n"), m["flushes"], m["bases"])
			}
			c.termOK()
			c = mustLaunch(t, dir, args...)
			if after := a16View(t, c.client()); after != before {
				t.Fatalf("SIGTERM + restart changed the state:\n%s", a16Diff(before, after))
			}
			a16Load(t, c.addr, 17, 8, 1500*time.Millisecond)
			before = a16View(t, c.client())
			time.Sleep(100 * time.Millisecond) // 5 flush intervals
			c.kill()
			c = mustLaunch(t, dir, args...)
			if after := a16View(t, c.client()); after != before {
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
