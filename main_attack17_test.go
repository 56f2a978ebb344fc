package main

// Session 17's attacks: the kinds hostile16's drain attack left out (lists,
// sorted sets, SLIDING windows) and the key-moving commands (RENAME, COPY,
// LMOVE, ZINTERSTORE/ZDIFFSTORE/ZRANGESTORE, ZPOP with a count, EXPIRE and
// PERSIST) under folds, SIGTERM and kill -9.

import (
	"bytes"
	"context"
	binenc "encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// kindsView is every key's TYPE, PTTL sign and contents, one line per key,
// sorted: a string's GET (a plain TAT's decimal), a hash's fields, a list's
// LRANGE, a sorted set's ZRANGE WITHSCORES, a window's remaining units (a
// quantity-0 call in the first mode that answers). The attack tests
// compare it before and after a restart.
func kindsView(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	ctx := context.Background()
	keys := scanAll(t, rdb)
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
		case "list":
			v, err := rdb.LRange(ctx, k, 0, -1).Result()
			fmt.Fprintf(&b, " %q %v", v, err)
		case "zset":
			v, err := rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
			fmt.Fprintf(&b, " %v %v", v, err)
		default:
			found := false
			for _, mode := range []string{"LOG", "FIXED", "SLIDING"} {
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

// a17Op queues one random command on key k (k2: another key of the same
// connection, for the commands that move or combine keys).
func a17Op(ctx context.Context, p redis.Pipeliner, rng *rand.Rand, k, k2 string) {
	v := func() string { return "v" + strconv.Itoa(rng.IntN(20)) + strings.Repeat("x", rng.IntN(3)*20) }
	switch rng.IntN(26) {
	case 0:
		p.Do(ctx, "CL.THROTTLE", k, 1000, 1, 3600, 1+rng.IntN(3))
	case 1:
		p.Set(ctx, k, "text-"+strconv.Itoa(rng.IntN(1000)), 0)
	case 2:
		p.Do(ctx, "CL.WINDOW", k, 1000, 86_400_000, 1+rng.IntN(2), "SLIDING")
	case 3:
		p.Do(ctx, "CL.WINDOW", k, 1000, 86_400_000, 1+rng.IntN(2), "LOG")
	case 4:
		p.Del(ctx, k)
	case 5:
		p.HSet(ctx, k, "f"+strconv.Itoa(rng.IntN(5)), v())
	case 6, 7:
		p.RPush(ctx, k, v(), v())
	case 8:
		p.LPush(ctx, k, v())
	case 9:
		p.LPop(ctx, k)
	case 10:
		p.LTrim(ctx, k, int64(rng.IntN(3)), int64(-1-rng.IntN(3)))
	case 11:
		p.LSet(ctx, k, int64(rng.IntN(4)-2), v())
	case 12:
		p.LInsert(ctx, k, []string{"BEFORE", "AFTER"}[rng.IntN(2)], v(), v())
	case 13:
		p.LRem(ctx, k, int64(rng.IntN(3)-1), v())
	case 14:
		p.LMove(ctx, k, k2, []string{"LEFT", "RIGHT"}[rng.IntN(2)], []string{"LEFT", "RIGHT"}[rng.IntN(2)])
	case 15, 16:
		p.ZAdd(ctx, k, redis.Z{Score: float64(rng.IntN(100)) / 4, Member: v()}, redis.Z{Score: float64(rng.IntN(100)), Member: v()})
	case 17:
		p.ZIncrBy(ctx, k, 1.5, v())
	case 18:
		p.ZRem(ctx, k, v())
	case 19:
		p.Do(ctx, []string{"ZPOPMIN", "ZPOPMAX"}[rng.IntN(2)], k, rng.IntN(3))
	case 20:
		p.ZRemRangeByRank(ctx, k, 0, int64(rng.IntN(2)))
	case 21:
		switch rng.IntN(3) {
		case 0:
			p.Do(ctx, "ZINTERSTORE", k, 2, k, k2)
		case 1:
			p.Do(ctx, "ZDIFFSTORE", k2, 2, k, k2)
		case 2:
			p.Do(ctx, "ZRANGESTORE", k2, k, 0, rng.IntN(4))
		}
	case 22:
		if rng.IntN(2) == 0 {
			p.Rename(ctx, k, k2)
		} else {
			p.Do(ctx, "COPY", k, k2, "REPLACE")
		}
	case 23:
		p.Expire(ctx, k, time.Duration(1+rng.IntN(3))*time.Hour)
	case 24:
		p.Persist(ctx, k)
	case 25:
		p.HDel(ctx, k, "f"+strconv.Itoa(rng.IntN(5)))
	}
}

// a17Expected: the errors this mix earns (WRONGTYPE, a missing key's
// RENAME/LSET, LSET's range, CL.THROTTLE on a text).
func a17Expected(err error) bool {
	s := err.Error()
	for _, e := range []string{"WRONGTYPE", "invalid stored value", "no such key", "index out of range", "objects are the same"} {
		if strings.Contains(s, e) {
			return true
		}
	}
	return false
}

// a17Load: workers connections for d, each on its own 30 keys, sending
// pipelines and MULTI/EXEC of a17Op, and an EVAL that changes a list and
// a sorted set; another connection runs SAVE and BGSAVE.
func a17Load(t *testing.T, addr string, seed uint64, workers int, d time.Duration) {
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
			key := func() string { return fmt.Sprintf("{w%d}:k%d", w, rng.IntN(30)) }
			for time.Now().Before(stop) {
				var cmds []redis.Cmder
				var err error
				switch rng.IntN(3) {
				case 0:
					p := rdb.Pipeline()
					for range 1 + rng.IntN(40) {
						a17Op(ctx, p, rng, key(), key())
					}
					cmds, err = p.Exec(ctx)
				case 1:
					p := rdb.TxPipeline()
					for range 1 + rng.IntN(8) {
						a17Op(ctx, p, rng, key(), key())
					}
					cmds, err = p.Exec(ctx)
				case 2:
					err = rdb.Eval(ctx, `redis.call('DEL', KEYS[1], KEYS[2]); redis.call('RPUSH', KEYS[1], ARGV[1], 'b'); redis.call('ZADD', KEYS[2], 1, ARGV[1]); redis.call('LPOP', KEYS[1]); return 1`,
						[]string{key(), key()}, strconv.Itoa(rng.IntN(1e6))).Err()
				}
				if err != nil && err != redis.Nil && !a17Expected(err) {
					errs <- fmt.Errorf("worker %d: %v", w, err)
					return
				}
				for _, c := range cmds {
					if e := c.Err(); e != nil && e != redis.Nil && !a17Expected(e) {
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
			cmd := []string{"SAVE", "BGSAVE"}[i%2]
			if err := rdb.Do(ctx, cmd).Err(); err != nil && !strings.Contains(err.Error(), "in progress") {
				errs <- fmt.Errorf("%s: %v", cmd, err)
				return
			}
			time.Sleep(40 * time.Millisecond)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestProcessAttack17DrainListsZsets: lists, sorted sets, SLIDING windows
// and the key-moving commands under folds (4 KiB threshold, 20 ms flush
// interval) at --io-loops 0 and 1: the state survives SIGTERM exactly and
// kill -9 100 ms (5 flush intervals) after the last write.
func TestProcessAttack17DrainListsZsets(t *testing.T) {
	for _, loops := range []string{"0", "1"} {
		t.Run("io-loops="+loops, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"--io-loops", loops, "--flush-interval", "20ms", "--log-fold-min-bytes", "4096"}
			c := mustLaunch(t, dir, args...)
			a17Load(t, c.addr, 17, 6, 700*time.Millisecond)
			before := kindsView(t, c.client())
			for _, kind := range []string{" list ", " zset "} {
				if n := strings.Count(before, kind); n < 20 {
					t.Fatalf("only %d keys of kind%q after the load", n, kind)
				}
			}
			m := info(t, c.client(), "persistence")
			t.Logf("%d keys, %s flushes, %s bases", strings.Count(before, "\n"), m["flushes"], m["bases"])
			t.Logf("SIGTERM took %v", c.termOK().Round(time.Millisecond))
			c = mustLaunch(t, dir, args...)
			if after := kindsView(t, c.client()); after != before {
				t.Fatalf("SIGTERM + restart changed the state:\n%s", a16Diff(before, after))
			}
			a17Load(t, c.addr, 18, 6, 700*time.Millisecond)
			before = kindsView(t, c.client())
			time.Sleep(100 * time.Millisecond)
			c.kill()
			c = mustLaunch(t, dir, args...)
			if after := kindsView(t, c.client()); after != before {
				t.Fatalf("kill -9 100 ms after the last write + restart changed the state:\n%s", a16Diff(before, after))
			}
			c.termOK()
		})
	}
}

// TestProcessAttack17DiskFullKinds: the data directory's filesystem fills
// while a 2,000-field hash, a 2,000-element list and a 2,000-member sorted
// set (and small keys of every kind) change element by element; part of
// the space comes back, then all of it. Every acknowledged change must be
// on disk afterwards: the state after kill -9 (past the flush window) and
// restart equals the state before.
func TestProcessAttack17DiskFullKinds(t *testing.T) {
	mnt := tmpfs(t, 24<<20)
	dir := mnt + "/data"
	args := []string{"--flush-interval", "20ms", "--shutdown-grace", "2s", "--log-fold-min-bytes", "65536"}
	c := mustLaunch(t, dir, args...)
	rdb := c.client()
	ctx := context.Background()
	big := func(round, n int) {
		p := rdb.Pipeline()
		for i := range n {
			f := strconv.Itoa((round*7919 + i*31) % 2000)
			v := strings.Repeat(strconv.Itoa(round), 1+i%30)
			p.HSet(ctx, "bighash", "f"+f, v)
			p.RPush(ctx, "biglist", v+f)
			if i%3 == 0 && i > 100 {
				p.LPop(ctx, "biglist")
			}
			p.ZAdd(ctx, "bigzset", redis.Z{Score: float64(round*n + i), Member: "m" + f})
			p.LSet(ctx, "biglist", int64(i%50), "set"+v)
			p.Do(ctx, "CL.THROTTLE", "tat"+f, 100, 1, 3600, 1)
			mode := []string{"LOG", "FIXED", "SLIDING"}[i%3]
			p.Do(ctx, "CL.WINDOW", "win"+mode+strconv.Itoa(i%50), 1000, 86_400_000, 1, mode)
			p.Set(ctx, "s"+strconv.Itoa(i%100), v, 0)
		}
		cmds, err := p.Exec(ctx)
		if err != nil && err != redis.Nil {
			for _, c := range cmds {
				if c.Err() != nil && c.Err() != redis.Nil {
					t.Fatalf("round %d: %v: %v", round, c.Args(), c.Err())
				}
			}
		}
	}
	for r := range 3 {
		big(r, 2000)
	}
	waitInfo := func(what string, ok func(map[string]string) bool) map[string]string {
		t.Helper()
		return waitPersistence(t, c, rdb, 20*time.Second, what, ok)
	}
	waitInfo("the first flushes", func(m map[string]string) bool { return m["dirty_keys"] == "0" })
	filler := fillDisk(t, mnt, 0)
	for r := 3; r < 9; r++ {
		big(r, 2000)
	}
	m := waitInfo("the failure to show", func(m map[string]string) bool { return m["last_flush_status"] == "err" })
	t.Logf("disk full: pending_keys %s, pending_bytes %s", m["pending_keys"], m["pending_bytes"])
	if err := os.Truncate(filler, max(0, fileSize(t, filler)-300_000)); err != nil {
		t.Fatal(err)
	}
	big(9, 500)
	time.Sleep(time.Second)
	big(10, 500)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitInfo("recovery", func(m map[string]string) bool {
		return m["last_flush_status"] == "ok" && m["dirty_keys"] == "0" && m["pending_keys"] == "0"
	})
	before := kindsView(t, rdb)
	time.Sleep(100 * time.Millisecond)
	c.kill()
	c = mustLaunch(t, dir, args...)
	if after := kindsView(t, c.client()); after != before {
		t.Fatalf("state after the disk outage, kill -9 and restart differs:\n%s", a16Diff(before, after))
	}
	c.termOK()
}

// TestProcessAttack17Kill9ElementsUnderFolds: four connections append
// sequence numbers one command at a time to their own list (RPUSH), sorted
// set (ZADD n n), hash (HSET fn n) and counter hash field (HINCRBY), with a
// 4 KiB fold threshold so that folds run all the time, and celld is killed
// with -9 in the middle of the load, five times. After each restart every
// structure holds exactly a prefix 1..m of what was sent (no hole, nothing
// from after a lost one), and no acknowledgement older than the flush
// interval plus 100 ms (one write) plus the scheduling slack of a loaded
// machine (CELLD_TEST_SCHED_SLACK, 300 ms unless set, as
// TestProcessKill9DuringFolds) is lost.
func TestProcessAttack17Kill9ElementsUnderFolds(t *testing.T) {
	slack := 300 * time.Millisecond
	if v := os.Getenv("CELLD_TEST_SCHED_SLACK"); v != "" {
		var err error
		if slack, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	const interval = 20 * time.Millisecond
	args := []string{"--flush-interval", interval.String(), "--log-fold-min-bytes", "4096"}
	ctx := context.Background()
	next := [4]int{1, 1, 1, 1} // the next sequence number of each structure
	worst := time.Duration(0)
	for kill := range 5 {
		c := mustLaunch(t, dir, args...)
		// Check what survived the previous kill.
		rdb := c.client()
		have := [4]int{}
		if l, err := rdb.LRange(ctx, "list", 0, -1).Result(); err == nil {
			for i, v := range l {
				if v != strconv.Itoa(i+1) {
					t.Fatalf("kill %d: list[%d] = %q, want %d (a hole or a reordering): %v", kill, i, v, i+1, l)
				}
			}
			have[0] = len(l)
		}
		if z, err := rdb.ZRangeWithScores(ctx, "zset", 0, -1).Result(); err == nil {
			for i, m := range z {
				if m.Member != strconv.Itoa(i+1) || m.Score != float64(i+1) {
					t.Fatalf("kill %d: zset[%d] = %v, want %d", kill, i, m, i+1)
				}
			}
			have[1] = len(z)
		}
		if h, err := rdb.HGetAll(ctx, "hash").Result(); err == nil {
			for i := 1; i <= len(h); i++ {
				if h["f"+strconv.Itoa(i)] != strconv.Itoa(i) {
					t.Fatalf("kill %d: hash has %d fields but f%d = %q", kill, len(h), i, h["f"+strconv.Itoa(i)])
				}
			}
			have[2] = len(h)
		}
		if n, err := rdb.HGet(ctx, "counter", "n").Int(); err == nil {
			have[3] = n
		}
		for i := range 4 {
			if have[i] > next[i]-1 {
				t.Fatalf("kill %d: structure %d holds %d, more than the %d sent", kill, i, have[i], next[i]-1)
			}
			next[i] = have[i] + 1
		}
		// Load, then kill -9 in the middle of it.
		acked := [4][]time.Time{}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := redis.NewClient(&redis.Options{Addr: c.addr, MaxRetries: -1, PoolSize: 1})
				defer cl.Close()
				for n := next[w]; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					s := strconv.Itoa(n)
					var err error
					switch w {
					case 0:
						err = cl.RPush(ctx, "list", s).Err()
					case 1:
						err = cl.ZAdd(ctx, "zset", redis.Z{Score: float64(n), Member: s}).Err()
					case 2:
						err = cl.HSet(ctx, "hash", "f"+s, s).Err()
					case 3:
						err = cl.HIncrBy(ctx, "counter", "n", 1).Err()
					}
					if err != nil {
						return // killed
					}
					acked[w] = append(acked[w], time.Now())
				}
			}()
		}
		// Bulk writers make the log grow so that folds run.
		for b := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := redis.NewClient(&redis.Options{Addr: c.addr, MaxRetries: -1, PoolSize: 1})
				defer cl.Close()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					p := cl.Pipeline()
					for j := range 50 {
						k := fmt.Sprintf("bulk%d:%d", b, (i*50+j)%3000)
						p.Do(ctx, "CL.THROTTLE", k, 100, 1, 3600, 1)
						p.ZAdd(ctx, "bz"+k[len(k)-1:], redis.Z{Score: float64(j), Member: k})
					}
					if _, err := p.Exec(ctx); err != nil {
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(300+100*kill) * time.Millisecond)
		killed := time.Now()
		c.kill()
		close(stop)
		wg.Wait()
		for w := range 4 {
			next[w] += len(acked[w]) // next[w]-1: the last acknowledged
		}
		// Restart and measure the loss of each structure.
		c = mustLaunch(t, dir, args...)
		rdb = c.client()
		got := [4]int{}
		got[0] = int(rdb.LLen(ctx, "list").Val())
		got[1] = int(rdb.ZCard(ctx, "zset").Val())
		got[2] = int(rdb.HLen(ctx, "hash").Val())
		got[3], _ = rdb.HGet(ctx, "counter", "n").Int()
		for w := range 4 {
			first := next[w] - len(acked[w]) // the first number sent in this round
			lostFrom := got[w] + 1           // the first number not on disk
			if lostFrom < first {
				t.Fatalf("kill %d: structure %d has %d, less than before this round (%d)", kill, w, got[w], first-1)
			}
			if i := lostFrom - first; i < len(acked[w]) {
				age := killed.Sub(acked[w][i])
				t.Logf("kill %d: structure %d lost %d of %d acknowledgements, the oldest %v before the kill", kill, w, len(acked[w])-i, len(acked[w]), age.Round(time.Millisecond))
				if age > worst {
					worst = age
				}
			}
		}
		c.termOK()
	}
	t.Logf("oldest lost acknowledgement over 5 kills: %v before the kill", worst.Round(time.Millisecond))
	if worst > interval+100*time.Millisecond+slack {
		t.Fatalf("an acknowledgement %v older than the kill was lost; the contract is --flush-interval (%v) plus one write (slack %v)", worst, interval, slack)
	}
}

// TestProcessAttack17ZPopCountErrors: ZPOPMIN/ZPOPMAX with a count that is
// not an integer (or past int64) answer as Redis 7 does ("value is out of
// range, must be positive", its getPositiveLongFromObjectOrReply), not
// with the generic integer error; side by side with redis-server.
func TestProcessAttack17ZPopCountErrors(t *testing.T) {
	sock := startRedisServer(t)
	c := mustLaunch(t, t.TempDir(), "--persist", "no")
	f := &kindsFuzz{t: t, keys: []string{"z"}}
	f.ref = dialF(t, "redis", "unix", sock)
	f.cell = dialF(t, "celld", "tcp", c.addr)
	f.ref.do("FLUSHALL")
	f.both("ZADD", "z", "1", "a", "2", "b", "3", "c")
	for _, cmd := range [][]string{
		{"ZPOPMIN", "z", "x"},
		{"ZPOPMAX", "z", "1.5"},
		{"ZPOPMIN", "z", "9223372036854775808"},
		{"ZPOPMAX", "z", "-1"},
		{"ZPOPMIN", "nokey", "x"},
		{"ZPOPMIN", "z", "0"},
		{"ZPOPMAX", "z", "2"},
	} {
		f.both(cmd...)
	}
}

// TestProcessAttack17DamagedDeltaKeepsRealState: a 3,000-item list (its
// image on disk), then one flush window each for LPUSH first, LSET 1 X and
// LPOP: three delta records. With the LPUSH record damaged, main replayed
// LSET 1 and LPOP on the list without it and gave "X 3 4 ..." (item 2
// gone, though nothing removed it: a value the list never held), saying
// only that a record was skipped. Now the key keeps the last state it
// really held before the damage (1 2 3 ..., LoadDelta's generation gap)
// and a WARN names it. Changes made after that restart replay at the next
// one.
func TestProcessAttack17DamagedDeltaKeepsRealState(t *testing.T) {
	dir := t.TempDir()
	c := mustLaunch(t, dir, "--flush-interval", "10ms")
	rdb := c.client()
	ctx := context.Background()
	items := make([]any, 3000)
	for i := range items {
		items[i] = strconv.Itoa(i + 1)
	}
	save := func() {
		t.Helper()
		if err := rdb.Do(ctx, "SAVE").Err(); err != nil {
			t.Fatal(err)
		}
	}
	rdb.RPush(ctx, "l", items...)
	save()
	rdb.LPush(ctx, "l", "first")
	save()
	rdb.LSet(ctx, "l", 1, "X")
	save()
	rdb.LPop(ctx, "l")
	save()
	if got := rdb.LRange(ctx, "l", 0, 2).Val(); strings.Join(got, " ") != "X 2 3" {
		t.Fatalf("before the kill: %v", got)
	}
	c.kill()
	files, _ := filepath.Glob(filepath.Join(dir, "changes-*.log"))
	if len(files) != 1 {
		t.Fatalf("change files %v, want one", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var offs []int // the records: 24-byte head (payload length first), payload
	for off := 0; off+24 <= len(b); off += 24 + int(binenc.LittleEndian.Uint32(b[off:])) {
		offs = append(offs, off)
	}
	if len(offs) != 4 {
		t.Fatalf("%d change records, want 4 (the image and three deltas)", len(offs))
	}
	n := int(binenc.LittleEndian.Uint32(b[offs[1]:]))
	if !bytes.Contains(b[offs[1]+24:offs[1]+24+n], []byte("first")) {
		t.Fatalf("record 1 is not the LPUSH's delta: %q", b[offs[1]+24:offs[1]+24+n])
	}
	b[offs[1]+24+n-1] ^= 0xff // the LPUSH's delta, its length intact
	if err := os.WriteFile(files[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	c = mustLaunch(t, dir, "--flush-interval", "10ms")
	rdb = c.client()
	got := rdb.LRange(ctx, "l", 0, -1).Val()
	if len(got) != 3000 || got[0] != "1" || got[1] != "2" || got[2999] != "3000" {
		t.Fatalf("after the damaged LPUSH record: %d items %v...; want the list as it was before it (1 2 ... 3000)", len(got), got[:min(len(got), 4)])
	}
	log := c.logs.String()
	if !strings.Contains(log, "damaged change-log record held changes of this key") || !strings.Contains(log, "key=l") {
		t.Fatalf("no WARN naming the key whose changes were not replayed:\n%s", log)
	}
	if m := info(t, rdb, "persistence"); m["damaged_records"] != "1" {
		t.Errorf("INFO damaged_records = %q, want 1", m["damaged_records"])
	}
	// Changes after this restart follow the state it restored.
	rdb.RPush(ctx, "l", "z")
	save()
	rdb.LSet(ctx, "l", 0, "Y")
	save()
	c.kill()
	c = mustLaunch(t, dir, "--flush-interval", "10ms")
	rdb = c.client()
	got = rdb.LRange(ctx, "l", 0, -1).Val()
	if len(got) != 3001 || got[0] != "Y" || got[1] != "2" || got[3000] != "z" {
		t.Fatalf("after more changes and another kill -9: %d items, first %v, last %q; want Y 2 ... 3000 z", len(got), got[:min(len(got), 4)], got[len(got)-1])
	}
	c.termOK()
}

// TestProcessAttack17CutBackKeysStayBounded: one client fills a hash or a
// sorted set to 20,000 elements, cuts it back to 10, and goes on with the
// next key, 40 times, at --maxmemory 8mb. Each cut-back key's Go map kept
// its table (~1.75 MB) while used_memory charged its 10 elements, so the
// live heap went far past the bound (main: 36.5 MB for 40 keys, and
// linearly more with more keys) without one -OOM. Now the map is rebuilt
// small and charged for its empty places: the live heap stays near the
// bound.
func TestProcessAttack17CutBackKeysStayBounded(t *testing.T) {
	pp := freeAddr(t)
	c := mustLaunch(t, t.TempDir(), "--persist", "no", "--maxmemory", "8mb", "--pprof-addr", pp)
	rdb := c.client()
	ctx := context.Background()
	const fields = 20_000
	for k := range 40 {
		p := rdb.Pipeline()
		key := fmt.Sprintf("k%d", k)
		for j := 0; j < fields; j += 1000 {
			args := []any{}
			for i := j; i < j+1000; i++ {
				if k%2 == 0 {
					args = append(args, "f"+strconv.Itoa(i), "v")
				} else {
					args = append(args, i, "m"+strconv.Itoa(i))
				}
			}
			if k%2 == 0 {
				p.HSet(ctx, key, args...)
			} else {
				p.Do(ctx, append([]any{"ZADD", key}, args...)...)
			}
		}
		for j := 10; j < fields; j += 1000 {
			if k%2 == 0 {
				del := []string{}
				for i := j; i < min(j+1000, fields); i++ {
					del = append(del, "f"+strconv.Itoa(i))
				}
				p.HDel(ctx, key, del...)
			}
		}
		if k%2 == 1 {
			p.ZRemRangeByRank(ctx, key, 10, -1)
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatalf("key %d: %v", k, err) // an -OOM would do: the bound acted
		}
	}
	resp, err := http.Get("http://" + pp + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var heap int64
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, "# HeapAlloc = "); ok {
			heap, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	used := infoInt(info(t, rdb, "memory"), "used_memory")
	t.Logf("40 keys cut from %d to 10 elements: live heap %.1f MB, used_memory %.2f MB, bound 8 MB", fields, float64(heap)/1e6, float64(used)/1e6)
	if heap == 0 || heap > 16<<20 {
		t.Fatalf("live heap %d B (used_memory %d B) at --maxmemory 8mb: the cut-back keys hold memory nothing charges", heap, used)
	}
	c.termOK()
}

// TestProcessAttack17MultiUnknownSubcommand: inside MULTI, a container
// command with an unknown subcommand (CLIENT NOSUCH) or a subcommand of
// the wrong arity (CONFIG GET alone) is refused when queued and dooms the
// transaction, as Redis 7 does (processCommand looks subcommands up before
// queuing). Main queued it, and EXEC then ran the rest of the transaction
// (SET a 1 took effect where Redis discards everything with EXECABORT).
// Side by side with redis-server.
func TestProcessAttack17MultiUnknownSubcommand(t *testing.T) {
	sock := startRedisServer(t)
	c := mustLaunch(t, t.TempDir(), "--persist", "no")
	f := &kindsFuzz{t: t, keys: []string{"a", "b"}}
	f.ref = dialF(t, "redis", "unix", sock)
	f.cell = dialF(t, "celld", "tcp", c.addr)
	f.ref.do("FLUSHALL")
	for _, tx := range [][][]string{
		{{"CLIENT", "NOSUCH"}, {"SET", "a", "1"}},
		{{"SET", "b", "2"}, {"CONFIG", "NOSUCH", "x"}},
		{{"OBJECT", "NOSUCH", "a"}, {"SET", "a", "3"}},
		{{"CONFIG", "GET"}, {"SET", "b", "4"}},
		{{"CLIENT", "SETNAME", "x", "y"}, {"SET", "a", "5"}},
		{{"CLIENT", "SETNAME", "ok"}, {"OBJECT", "ENCODING", "nokey"}, {"SET", "a", "6"}}, // valid: runs
	} {
		f.both("MULTI")
		for _, cmd := range tx {
			f.both(cmd...)
		}
		f.both("EXEC")
		f.both("GET", "a")
		f.both("GET", "b")
	}
}
