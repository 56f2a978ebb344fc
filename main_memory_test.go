package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/config"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
	"github.com/redis/go-redis/v9"
)

// TestMemoryFlags: --maxmemory takes Redis's units and refuses the rest;
// --maxmemory-policy takes Redis's names (not the LFU ones), from the flag
// or the variable.
func TestMemoryFlags(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil || c.MaxMemory != 0 || c.MaxMemoryPolicy != "noeviction" {
		t.Fatalf("defaults: %d %q %v", c.MaxMemory, c.MaxMemoryPolicy, err)
	}
	for in, want := range map[string]int64{"0": 0, "64mb": 64 << 20, "2GB": 2 << 30, "100000": 100000, "1k": 1000} {
		if c, err := parseFlags([]string{"--maxmemory", in}); err != nil || c.MaxMemory != want {
			t.Errorf("--maxmemory %q: %d, %v; want %d", in, c.MaxMemory, err, want)
		}
	}
	for _, bad := range []string{"-1", "1.5gb", "64 mb", "64tb", "mb", ""} {
		if _, err := parseFlags([]string{"--maxmemory", bad}); err == nil || !strings.Contains(err.Error(), "maxmemory") {
			t.Errorf("--maxmemory %q: %v, want an error naming it", bad, err)
		}
	}
	for _, in := range []string{"noeviction", "volatile-ttl", "VOLATILE-LRU", "allkeys-lru", "volatile-random", "allkeys-random"} {
		c, err := parseFlags([]string{"--maxmemory-policy", in})
		if err != nil {
			t.Errorf("--maxmemory-policy %q: %v", in, err)
			continue
		}
		if p, err := store.ParsePolicy(c.MaxMemoryPolicy); err != nil || !strings.EqualFold(p.String(), in) {
			t.Errorf("--maxmemory-policy %q: store reads %q as %v, %v", in, c.MaxMemoryPolicy, p, err)
		}
	}
	for _, bad := range []string{"allkeys-lfu", "volatile-lfu", "ttl", ""} {
		if _, err := parseFlags([]string{"--maxmemory-policy", bad}); err == nil || !strings.Contains(err.Error(), "maxmemory-policy") {
			t.Errorf("--maxmemory-policy %q: %v, want an error naming it", bad, err)
		}
	}
	t.Setenv("CELLD_MAXMEMORY", "64mb")
	t.Setenv("CELLD_MAXMEMORY_POLICY", "volatile-ttl")
	if c, err := parseFlags(nil); err != nil || c.MaxMemory != 64<<20 || c.MaxMemoryPolicy != "volatile-ttl" {
		t.Fatalf("env: %d %q %v", c.MaxMemory, c.MaxMemoryPolicy, err)
	}
}

// rssBytes reads a process's resident set from /proc (0 if unavailable).
func rssBytes(pid int) int64 { return procStatus(pid, "VmRSS:") }

// rssAnonBytes reads the anonymous part of a process's resident set: RSS
// less the mapped files (the binary, shared libraries), which are page
// cache the kernel may drop and share.
func rssAnonBytes(pid int) int64 { return procStatus(pid, "RssAnon:") }

// procStatus reads a kB field of /proc/<pid>/status, in bytes (0 if
// unavailable).
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// readReply reads one RESP reply and reports whether it was an error, and
// its text when it was.
func readReply(r *bufio.Reader) (isErr bool, text string, err error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return false, "", err
	}
	switch line[0] {
	case '-':
		return true, strings.TrimRight(line[1:], "\r\n"), nil
	case '*':
		n, _ := strconv.Atoi(strings.TrimRight(line[1:], "\r\n"))
		for range n {
			if _, _, err := readReply(r); err != nil {
				return false, "", err
			}
		}
	case '$':
		n, _ := strconv.Atoi(strings.TrimRight(line[1:], "\r\n"))
		if n >= 0 {
			if _, err := r.Discard(n + 2); err != nil {
				return false, "", err
			}
		}
	}
	return false, "", nil
}

// sprayResult is what a key spray measured.
type sprayResult struct {
	sent, oom, otherErr int64
	dur                 time.Duration
	maxRSS, maxUsed     int64
	maxAnon             int64 // the largest anonymous part of RSS seen
	evicted             int64
	pingP99, pingMax    time.Duration
	pingP999            time.Duration
	pings               int
	cpu                 time.Duration // the server's CPU time (user+system) during the spray
}

// spray sends unique-key commands (cmd(i) gives the i-th one's arguments)
// over conns pipelined connections for dur, while sampling the server's
// RSS and INFO used_memory every 50 ms and timing a PING every 10 ms on a
// connection of its own.
func spray(t testing.TB, addr string, pid, conns int, dur time.Duration, cmd func(i int64) []string) sprayResult {
	t.Helper()
	var res sprayResult
	var next, oom, other atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer nc.Close()
			r := bufio.NewReaderSize(nc, 64<<10)
			var buf []byte
			const batch = 128
			for {
				select {
				case <-stop:
					return
				default:
				}
				buf = buf[:0]
				for range batch {
					args := cmd(next.Add(1))
					buf = append(buf, '*')
					buf = strconv.AppendInt(buf, int64(len(args)), 10)
					buf = append(buf, '\r', '\n')
					for _, a := range args {
						buf = append(buf, '$')
						buf = strconv.AppendInt(buf, int64(len(a)), 10)
						buf = append(buf, '\r', '\n')
						buf = append(buf, a...)
						buf = append(buf, '\r', '\n')
					}
				}
				if _, err := nc.Write(buf); err != nil {
					t.Error(err)
					return
				}
				for range batch {
					isErr, text, err := readReply(r)
					if err != nil {
						t.Error(err)
						return
					}
					if isErr {
						if strings.HasPrefix(text, "OOM ") {
							oom.Add(1)
						} else {
							if other.Add(1) == 1 {
								t.Errorf("spray: unexpected error %q", text)
							}
						}
					}
				}
			}
		}()
	}
	// Samplers.
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2})
	defer rdb.Close()
	var lat []time.Duration
	wg.Add(2)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			res.maxRSS = max(res.maxRSS, rssBytes(pid))
			res.maxAnon = max(res.maxAnon, rssAnonBytes(pid))
			if s, err := rdb.Info(context.Background(), "memory").Result(); err == nil {
				for _, l := range strings.Split(s, "\r\n") {
					if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
						n, _ := strconv.ParseInt(v, 10, 64)
						res.maxUsed = max(res.maxUsed, n)
					}
				}
			}
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	}()
	go func() {
		defer wg.Done()
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		defer nc.Close()
		r := bufio.NewReader(nc)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			t0 := time.Now()
			nc.Write([]byte("PING\r\n"))
			if _, err := r.ReadString('\n'); err != nil {
				t.Error(err)
				return
			}
			lat = append(lat, time.Since(t0))
		}
	}()
	start := time.Now()
	cpu0 := cpuTime(t, pid)
	time.Sleep(dur)
	close(stop)
	wg.Wait()
	res.dur = time.Since(start)
	res.cpu = cpuTime(t, pid) - cpu0
	res.sent, res.oom, res.otherErr = next.Load(), oom.Load(), other.Load()
	res.maxRSS = max(res.maxRSS, rssBytes(pid))
	if st, err := rdb.Info(context.Background(), "stats").Result(); err == nil {
		for _, l := range strings.Split(st, "\r\n") {
			if v, ok := strings.CutPrefix(l, "evicted_keys:"); ok {
				res.evicted, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		res.pingP99 = lat[len(lat)*99/100]
		res.pingP999 = lat[len(lat)*999/1000]
		res.pingMax = lat[len(lat)-1]
		res.pings = len(lat)
	}
	return res
}

// sprayDuration is how long the process spray tests spray, against which
// bound, and with which extra flags: in CI 5 s at 16 MB, memory-only (a
// loaded CI machine sprays a few hundred thousand keys in that time,
// enough to reach 16 MB, not 64; and at 16 MB pebble's own buffers under a
// spray, which used_memory does not count, are most of the 1.5 x 16 + 40
// MB: the CI run checks the keyspace's bound, see docs/memory.md for
// persistence's share). With CELLD_SPRAY_SECONDS (the full run:
// 60) at 64 MB with the defaults (persistence on).
func sprayDuration() (time.Duration, int64, []string) {
	if s, err := strconv.Atoi(os.Getenv("CELLD_SPRAY_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second, 64 << 20, nil
	}
	return 5 * time.Second, 16 << 20, []string{"--persist=false"}
}

// sprayPeriod is the period of the sprayed CL.THROTTLE calls: 60 s (a 6 s
// TTL), or CELLD_SPRAY_PERIOD (600: a 60 s TTL like the side-by-side's SET
// PX 60000, so that a slow spray still reaches the bound and evicts).
func sprayPeriod() string {
	if p := os.Getenv("CELLD_SPRAY_PERIOD"); p != "" {
		return p
	}
	return "60"
}

// longKeys writes n CL.THROTTLE keys with hour-long periods (TTL ~1 h) and
// returns a check that every one of them is still there with its state.
func longKeys(t *testing.T, rdb *redis.Client, n int) func() int {
	t.Helper()
	ctx := context.Background()
	pipe := rdb.Pipeline()
	for i := range n {
		pipe.Do(ctx, "CL.THROTTLE", "long:"+strconv.Itoa(i), 10, 10, 3600, 5)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	return func() int {
		lost := 0
		for i := range n {
			// A quantity-0 call reads the state: 5 of 11 used, 6 left.
			v, err := rdb.Do(ctx, "CL.THROTTLE", "long:"+strconv.Itoa(i), 10, 10, 3600, 0).Slice()
			if err != nil || v[2].(int64) != 6 {
				lost++
			}
		}
		return lost
	}
}

// TestProcessKeySpray is the bar: unique keys sprayed as fast as
// eight pipelined connections can send them, against --maxmemory 64mb,
// under noeviction and under volatile-ttl. RSS must stay within
// 1.5 x maxmemory + 40 MB and used_memory within 1.1 x maxmemory, and a
// set of 2,000 long-lived keys must come through intact. The spray lasts
// sprayDuration (CELLD_SPRAY_SECONDS=60 for the full run); throughput,
// evictions and the PING latency seen meanwhile are logged, not asserted.
func TestProcessKeySpray(t *testing.T) {
	if testing.Short() {
		t.Skip("sprays a real server for several seconds")
	}
	dur, bound, extra := sprayDuration()
	for _, policy := range []string{"noeviction", "volatile-ttl"} {
		t.Run(policy, func(t *testing.T) {
			args := []string{"--maxmemory", strconv.FormatInt(bound, 10), "--maxmemory-policy", policy}
			args = append(args, extra...)
			args = append(args, strings.Fields(os.Getenv("CELLD_SPRAY_ARGS"))...) // e.g. --persist=false
			c := mustLaunch(t, t.TempDir(), args...)
			rdb := c.client()
			check := longKeys(t, rdb, 2000)
			// A loaded machine may not reach the bound in one spray (14k
			// calls/s were seen at load 32): spray again, with new keys,
			// up to four more times until the bound answers (an OOM or an
			// eviction), keeping the worst figures of all rounds.
			var res sprayResult
			for round := int64(0); round < 5 && (round == 0 || res.oom == 0 && res.evicted == 0); round++ {
				r := spray(t, c.addr, c.cmd.Process.Pid, 8, dur, func(i int64) []string {
					return []string{"CL.THROTTLE", fmt.Sprintf("ip:2001:db8:%x:%x:%x", round, i>>16, i&0xffff), "10", "10", sprayPeriod(), "1"}
				})
				res.sent, res.oom, res.otherErr, res.dur = res.sent+r.sent, res.oom+r.oom, res.otherErr+r.otherErr, res.dur+r.dur
				res.maxRSS, res.maxUsed, res.maxAnon = max(res.maxRSS, r.maxRSS), max(res.maxUsed, r.maxUsed), max(res.maxAnon, r.maxAnon)
				res.evicted, res.pings = r.evicted, res.pings+r.pings // evicted_keys is INFO's running total
				res.pingP99, res.pingMax = max(res.pingP99, r.pingP99), max(res.pingMax, r.pingMax)
				res.pingP999, res.cpu = max(res.pingP999, r.pingP999), res.cpu+r.cpu
			}
			lost := check()
			mem := info(t, rdb, "memory")
			t.Logf("%s: INFO memory after the spray: used_memory %s, used_memory_rss %s, go_heap_alloc %s, go_heap_sys %s",
				policy, mem["used_memory"], mem["used_memory_rss"], mem["go_heap_alloc"], mem["go_heap_sys"])
			mb := float64(bound) / (1 << 20)
			t.Logf("%s, maxmemory %.0f MB: %d calls in %v (%.0f/s), %d OOM, %d evicted; max RSS %.1f MB (bar %.0f; anon %.1f), max used_memory %.1f MB (bar %.1f); PING p99 %v p99.9 %v max %v over %d; server CPU %.2f µs/call; long-lived keys lost: %d",
				policy, mb, res.sent, res.dur.Round(time.Millisecond), float64(res.sent)/res.dur.Seconds(), res.oom, res.evicted,
				float64(res.maxRSS)/(1<<20), 1.5*mb+40, float64(res.maxAnon)/(1<<20), float64(res.maxUsed)/(1<<20), 1.1*mb, res.pingP99.Round(10*time.Microsecond), res.pingP999.Round(10*time.Microsecond), res.pingMax.Round(10*time.Microsecond), res.pings,
				float64(res.cpu.Microseconds())/float64(max(res.sent, 1)), lost)
			if res.maxRSS > bound*3/2+40<<20 {
				t.Errorf("RSS reached %d bytes, over 1.5 x maxmemory + 40 MB", res.maxRSS)
			}
			if float64(res.maxUsed) > 1.1*float64(bound) {
				t.Errorf("used_memory reached %d, over 1.1 x maxmemory", res.maxUsed)
			}
			if lost != 0 {
				t.Errorf("%d of 2000 long-lived keys lost", lost)
			}
			if res.otherErr != 0 {
				t.Errorf("%d unexpected error replies", res.otherErr)
			}
			switch policy {
			case "noeviction":
				if res.oom == 0 || res.evicted != 0 {
					t.Errorf("noeviction: %d OOM replies, %d evicted", res.oom, res.evicted)
				}
			case "volatile-ttl":
				if res.oom != 0 || res.evicted == 0 {
					t.Errorf("volatile-ttl: %d OOM replies, %d evicted", res.oom, res.evicted)
				}
			}
			c.termOK()
		})
	}
}

// TestProcessMemoryRestart: evictions reach the disk, and a restart with a
// lower bound evicts by the policy at start-up, or refuses (exit 2) under
// noeviction.
func TestProcessMemoryRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	c := mustLaunch(t, dir, "--maxmemory", "4mb", "--maxmemory-policy", "volatile-ttl")
	rdb := c.client()
	check := longKeys(t, rdb, 500)
	// A second of spraying is enough on an idle machine; a loaded one may
	// need a few more before the bound is reached.
	var res sprayResult
	for round := int64(0); round < 10 && res.evicted == 0; round++ {
		res = spray(t, c.addr, c.cmd.Process.Pid, 2, time.Second, func(i int64) []string {
			return []string{"CL.THROTTLE", "spray:" + strconv.FormatInt(round<<32|i, 10), "10", "10", "60", "1"}
		})
	}
	if res.evicted == 0 {
		t.Fatalf("nothing evicted by the spray: %+v", res)
	}
	before, _ := rdb.DBSize(ctx).Result()
	used := func(rdb *redis.Client) int64 {
		n, _ := strconv.ParseInt(info(t, rdb, "memory")["used_memory"], 10, 64)
		return n
	}
	if u := used(rdb); u > 4<<20*11/10 {
		t.Fatalf("used_memory %d over the bound", u)
	}
	// kill -9 after a flush: the disk holds what memory held, within the
	// bound (evictions were deleted on disk too).
	if err := rdb.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Close()
	c.kill()
	c = mustLaunch(t, dir, "--maxmemory", "4mb", "--maxmemory-policy", "volatile-ttl")
	rdb = c.client()
	after, _ := rdb.DBSize(ctx).Result()
	if after > before || after < before*9/10 || used(rdb) > 4<<20*11/10 {
		t.Fatalf("restart: %d keys (before %d), used_memory %d", after, before, used(rdb))
	}
	// Within the bound but for the accounting's lag (a 64th of the bound,
	// at most ~800 keys of 80 bytes here), which start-up trims.
	if ev, _ := strconv.Atoi(info(t, rdb, "stats")["evicted_keys"]); ev > (4<<20)/64/80 {
		t.Fatalf("restart within the bound evicted %d keys", ev)
	}
	rdb.Close()
	c.termOK()

	// A lower bound than the data needs: evicted at start-up by the policy.
	c = mustLaunch(t, dir, "--maxmemory", "2mb", "--maxmemory-policy", "volatile-ttl")
	rdb = c.client()
	if u := used(rdb); u > 2<<20 {
		t.Fatalf("after start-up eviction used_memory %d > 2mb", u)
	}
	if !strings.Contains(c.logs.String(), "evicted by the policy at start-up") {
		t.Errorf("no start-up eviction logged:\n%s", c.logs)
	}
	check = longKeysCheck(rdb, 500)
	if lost := check(); lost != 0 {
		t.Errorf("%d long-lived keys evicted at start-up", lost)
	}
	rdb.Close()
	c.termOK() // the final flush deletes the evicted keys on disk
	c = mustLaunch(t, dir, "--maxmemory", "2mb", "--maxmemory-policy", "volatile-ttl")
	rdb = c.client()
	if ev := info(t, rdb, "stats")["evicted_keys"]; ev != "0" || used(rdb) > 2<<20 {
		t.Fatalf("second start at 2mb: evicted %s, used %d: evictions did not reach the disk", ev, used(rdb))
	}
	rdb.Close()
	c.termOK()

	// Under noeviction the same lower bound is refused, clearly.
	c = launch(t, dir, "--maxmemory", "1mb", "--maxmemory-policy", "noeviction")
	if !c.hasExited() {
		c.termOK()
		t.Fatal("started with data over --maxmemory under noeviction")
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(c.logs.String(), "over --maxmemory 1048576 with --maxmemory-policy noeviction") {
		t.Fatalf("exit %d; log:\n%s", code, c.logs)
	}
}

// longKeysCheck is longKeys' check alone, for a server restarted on the
// same data.
func longKeysCheck(rdb *redis.Client, n int) func() int {
	return func() int {
		lost := 0
		for i := range n {
			v, err := rdb.Do(context.Background(), "CL.THROTTLE", "long:"+strconv.Itoa(i), 10, 10, 3600, 0).Slice()
			if err != nil || v[2].(int64) != 6 {
				lost++
			}
		}
		return lost
	}
}

// TestProcessSprayVersusRedis is the side-by-side of the issue, opt-in
// (CELLD_SPRAY_REDIS=1; needs redis-server): the same spray of unique keys
// against redis-server and celld with maxmemory 64mb and volatile-ttl.
// With CELLD_REDIS_CELL_MODULE pointing at a built libredis_cell.so, both
// get CL.THROTTLE (P from CELLD_SPRAY_PERIOD, 600 for a 60 s TTL); without
// it Redis gets SET k v PX 60000 and celld both SET PX and CL.THROTTLE.
// Redis runs without persistence (no RDB, no AOF); celld with its defaults
// plus CELLD_SPRAY_ARGS (--persist=false for the like-for-like run). It
// logs RSS (and its anonymous part: RSS less the mapped binary and
// libraries), evicted keys and throughput; nothing is asserted beyond the
// bars of TestProcessKeySpray.
func TestProcessSprayVersusRedis(t *testing.T) {
	if os.Getenv("CELLD_SPRAY_REDIS") == "" {
		t.Skip("set CELLD_SPRAY_REDIS=1 to run the side-by-side with redis-server")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server")
	}
	module := os.Getenv("CELLD_REDIS_CELL_MODULE")
	setCmd := func(i int64) []string {
		return []string{"SET", fmt.Sprintf("ip:2001:db8:%x:%x", i>>16, i&0xffff), "1", "PX", "60000"}
	}
	thrCmd := func(i int64) []string {
		return []string{"CL.THROTTLE", fmt.Sprintf("ip:2001:db8:%x:%x", i>>16, i&0xffff), "10", "10", sprayPeriod(), "1"}
	}
	report := func(name string, r sprayResult) {
		t.Logf("%-26s %9d calls %7.0f/s  RSS max %6.1f MB (anon %6.1f)  used_memory max %6.1f MB  evicted %9d  OOM %d  PING p99 %v max %v",
			name, r.sent, float64(r.sent)/r.dur.Seconds(), float64(r.maxRSS)/(1<<20), float64(r.maxAnon)/(1<<20), float64(r.maxUsed)/(1<<20), r.evicted, r.oom, r.pingP99, r.pingMax)
	}
	type sprayCmd struct {
		name string
		fn   func(int64) []string
	}
	redisCmd, celldCmds := sprayCmd{"SET PX", setCmd}, []sprayCmd{{"SET PX", setCmd}, {"CL.THROTTLE", thrCmd}}
	if module != "" {
		redisCmd, celldCmds = sprayCmd{"CL.THROTTLE", thrCmd}, []sprayCmd{{"CL.THROTTLE", thrCmd}}
	}
	rounds := 1
	if n, err := strconv.Atoi(os.Getenv("CELLD_SPRAY_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	dur, _, _ := sprayDuration()
	for round := range rounds {
		// redis-server
		addr := freeAddr(t)
		_, port, _ := net.SplitHostPort(addr)
		args := []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--maxmemory", "64mb", "--maxmemory-policy", "volatile-ttl"}
		if module != "" {
			args = append(args, "--loadmodule", module)
		}
		rs := exec.Command(bin, args...)
		if err := rs.Start(); err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		for i := 0; rdb.Ping(context.Background()).Err() != nil; i++ {
			if i > 100 {
				t.Fatal("redis-server did not start")
			}
			time.Sleep(50 * time.Millisecond)
		}
		rdb.Close()
		report(fmt.Sprintf("round %d redis %s", round, redisCmd.name), spray(t, addr, rs.Process.Pid, 8, dur, redisCmd.fn))
		rs.Process.Kill()
		rs.Wait()
		for _, cmd := range celldCmds {
			args := append([]string{"--maxmemory", "64mb", "--maxmemory-policy", "volatile-ttl"}, strings.Fields(os.Getenv("CELLD_SPRAY_ARGS"))...)
			c := mustLaunch(t, t.TempDir(), args...)
			report(fmt.Sprintf("round %d celld %s", round, cmd.name), spray(t, c.addr, c.cmd.Process.Pid, 8, dur, cmd.fn))
			c.termOK()
		}
	}
}

// TestConfigSetMovesMemoryLimit: CONFIG SET maxmemory at run time moves the
// Go runtime's soft memory limit as start-up sets it (applyMemory), back
// to none for 0, and leaves an explicit GOMEMLIMIT alone.
func TestConfigSetMovesMemoryLimit(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	var st *store.Store
	serve := func(cfg *config.Config) *redis.Client {
		st = store.New(store.Options{})
		if err := applyMemory(cfg, st, quietLog()); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(server.Config{Logger: quietLog()}, st)
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
			<-served
		})
		rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	ctx := context.Background()
	set := func(rdb *redis.Client, v string) {
		t.Helper()
		if err := rdb.ConfigSet(ctx, "maxmemory", v).Err(); err != nil {
			t.Fatalf("CONFIG SET maxmemory %s: %v", v, err)
		}
	}

	cfg, err := parseFlags(nil) // no bound at start
	if err != nil {
		t.Fatal(err)
	}
	debug.SetMemoryLimit(123 << 20)
	rdb := serve(cfg)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("start-up without a bound: limit %d, want none (%d)", got, int64(math.MaxInt64))
	}
	set(rdb, "64mb")
	if got, want := debug.SetMemoryLimit(-1), int64(64<<20*3/2+16<<20); !limitIs(got, want) {
		t.Fatalf("after CONFIG SET maxmemory 64mb: limit %d, want %d", got, want)
	}
	if got := gcHeadroom.Load(); got != 4<<20 {
		t.Fatalf("after CONFIG SET maxmemory 64mb: GC headroom %d, want 4 MiB", got)
	}
	// With persistence on (the default) an eighth of the bound is set
	// aside for its buffers, and counted in used_memory.
	if got := st.ExternalMemory(); got != 8<<20 {
		t.Fatalf("after CONFIG SET maxmemory 64mb: persistence's reserve %d, want 8 MiB", got)
	}
	if used := st.UsedMemory(); used < 8<<20 {
		t.Fatalf("used_memory %d does not include the reserve", used)
	}
	set(rdb, "100000000")
	if got, want := debug.SetMemoryLimit(-1), int64(100000000*3/2+16<<20); !limitIs(got, want) {
		t.Fatalf("after CONFIG SET maxmemory 100000000: limit %d, want %d", got, want)
	}
	set(rdb, "0")
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("after CONFIG SET maxmemory 0: limit %d, want none", got)
	}
	if got := gcHeadroom.Load(); got != 0 {
		t.Fatalf("after CONFIG SET maxmemory 0: GC headroom %d, want none", got)
	}
	if got := st.ExternalMemory(); got != 0 {
		t.Fatalf("after CONFIG SET maxmemory 0: reserve %d, want 0", got)
	}

	// Start-up with a bound sets the same limit.
	cfg, err = parseFlags([]string{"--maxmemory", "32mb", "--persist=false"})
	if err != nil {
		t.Fatal(err)
	}
	rdb = serve(cfg)
	if got, want := debug.SetMemoryLimit(-1), int64(32<<20*3/2+16<<20); !limitIs(got, want) {
		t.Fatalf("start-up with --maxmemory 32mb: limit %d, want %d", got, want)
	}
	if got := st.ExternalMemory(); got != 0 {
		t.Fatalf("persistence off: reserve %d, want none", got)
	}

	// An explicit GOMEMLIMIT wins, at start-up and at run time.
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30)
	rdb = serve(cfg)
	set(rdb, "16mb")
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Fatalf("with GOMEMLIMIT set: limit %d after start-up and CONFIG SET, want 1 GiB kept", got)
	}
}
