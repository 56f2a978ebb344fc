package main

// Process tests: the real celld binary, started as a child process on
// 127.0.0.1 and a fresh data directory, driven with go-redis, and stopped
// with real signals (SIGKILL, SIGTERM). They pin README's durability
// contract against real failures rather than mocks of them.
//
// The binary is built once per test run (go build) into a temporary
// directory that TestMain removes. Nothing here asserts on durations: the
// 1M-key shutdown/restore figures are logged by an opt-in test
// (CELLD_SLOW_TESTS=1).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/celld/celld/persist"
	"github.com/redis/go-redis/v9"
)

// TestMain removes the celld binary the process tests built and the
// restore benchmark's directory.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range []string{binary.dir, restore1M.dir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// goToolPath is the go command: $GOROOT/bin/go when there is one, else
// "go" from PATH.
func goToolPath() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

// celldBinary builds celld once (without -race: the child is the system
// under test, not the code under the race detector) and returns its path.
// With CELLD_TEST_BINARY set, the process tests run that prebuilt binary
// instead (built with -race, say, so that an attack on the child meets
// the race detector: docs/development.md); nothing is built then.
func celldBinary(t testing.TB) string {
	t.Helper()
	binary.once.Do(func() {
		if p := os.Getenv("CELLD_TEST_BINARY"); p != "" {
			binary.path, binary.err = filepath.Abs(p)
			if binary.err == nil && !fileExists(binary.path) {
				binary.err = fmt.Errorf("CELLD_TEST_BINARY=%s: no such file", p)
			}
			return
		}
		binary.dir, binary.err = os.MkdirTemp("", "celld-process-test-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "celld")
		out, err := exec.Command(goToolPath(), "build", "-o", binary.path, ".").CombinedOutput()
		if err != nil {
			binary.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// logBuf collects a child's stderr and signals when celld logs that it is
// listening (the port is bound, restore is done).
type logBuf struct {
	mu    sync.Mutex
	b     bytes.Buffer
	ready chan struct{}
	seen  bool
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if !l.seen && bytes.Contains(l.b.Bytes(), []byte("celld listening")) {
		l.seen = true
		close(l.ready)
	}
	return len(p), nil
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// child is one celld process.
type child struct {
	t       testing.TB
	dir     string
	addr    string
	cmd     *exec.Cmd
	logs    *logBuf
	exited  chan struct{} // closed when the process has been waited for
	started time.Time     // just before exec
	ready   time.Duration // exec → "celld listening" (0 if it never got there)
}

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago.
// The port can be taken again before celld binds it; launch retries.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// launch starts celld on dir with args and returns once it is listening or
// has exited (check c.hasExited()). It retries on another port when the
// chosen one was taken in between.
func launch(t testing.TB, dir string, args ...string) *child {
	t.Helper()
	bin := celldBinary(t)
	for attempt := 0; ; attempt++ {
		c := &child{t: t, dir: dir, addr: freeAddr(t), exited: make(chan struct{})}
		c.logs = &logBuf{ready: make(chan struct{})}
		c.cmd = exec.Command(bin, append([]string{"--addr", c.addr, "--dir", dir}, args...)...)
		c.cmd.Stdout, c.cmd.Stderr = c.logs, c.logs
		c.started = time.Now()
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { c.cmd.Wait(); close(c.exited) }()
		t.Cleanup(c.checkRaces) // after the kill (cleanups run last first)
		t.Cleanup(c.killIfRunning)
		select {
		case <-c.logs.ready:
			c.ready = time.Since(c.started)
			return c
		case <-c.exited:
			if strings.Contains(c.logs.String(), "address already in use") && attempt < 5 {
				continue
			}
			return c
		case <-time.After(2 * time.Minute):
			t.Fatalf("celld did not start within 2 minutes; log:\n%s", c.logs)
		}
	}
}

// mustLaunch is launch for a celld that has to come up.
func mustLaunch(t testing.TB, dir string, args ...string) *child {
	t.Helper()
	c := launch(t, dir, args...)
	if c.hasExited() {
		t.Fatalf("celld exited at start-up with code %d; log:\n%s", c.cmd.ProcessState.ExitCode(), c.logs)
	}
	return c
}

func (c *child) hasExited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// checkRaces fails the test when the child's log holds a race report: a
// child built with -race (CELLD_TEST_BINARY) prints one when it hits a
// data race, which would otherwise go unseen (a killed child exits with
// no code of its own).
func (c *child) checkRaces() {
	if strings.Contains(c.logs.String(), "WARNING: DATA RACE") {
		c.t.Errorf("celld on %s hit a data race; log:\n%s", c.addr, c.logs)
	}
}

func (c *child) killIfRunning() {
	if !c.hasExited() {
		c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.exited
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill() {
	c.t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatalf("SIGKILL: %v", err)
	}
	<-c.exited
}

// term sends SIGTERM, waits for exit and returns the exit code and how long
// the process took to exit.
func (c *child) term() (int, time.Duration) {
	c.t.Helper()
	return c.stop(syscall.SIGTERM)
}

// stop sends sig, waits for exit and returns the exit code and how long the
// process took to exit.
func (c *child) stop(sig syscall.Signal) (int, time.Duration) {
	c.t.Helper()
	start := time.Now()
	if err := c.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("%v: %v", sig, err)
	}
	select {
	case <-c.exited:
	case <-time.After(2 * time.Minute):
		c.t.Fatalf("celld did not exit within 2 minutes of %v; log:\n%s", sig, c.logs)
	}
	return c.cmd.ProcessState.ExitCode(), time.Since(start)
}

// termOK is term that requires exit code 0.
func (c *child) termOK() time.Duration {
	c.t.Helper()
	code, took := c.term()
	if code != 0 {
		c.t.Fatalf("celld exited with code %d after SIGTERM, want 0; log:\n%s", code, c.logs)
	}
	return took
}

// client returns a go-redis client for c, closed at the end of the test.
func (c *child) client() *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: c.addr, MaxRetries: -1, PoolSize: 16})
	c.t.Cleanup(func() { rdb.Close() })
	return rdb
}

// info returns INFO section as a field → value map.
func info(t testing.TB, rdb *redis.Client, section string) map[string]string {
	t.Helper()
	s, err := rdb.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatalf("INFO %s: %v", section, err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// waitPersistence polls c's INFO persistence (through rdb) every 20 ms
// until ok accepts it, and returns it; past timeout it fails the test,
// naming what it waited for, with the last INFO and c's log.
func waitPersistence(t testing.TB, c *child, rdb *redis.Client, timeout time.Duration, what string, ok func(map[string]string) bool) map[string]string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		m := info(t, rdb, "persistence")
		if ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; INFO persistence: %v\nlog:\n%s", what, m, c.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// throttle runs CL.THROTTLE and returns its five integers.
func throttle(t testing.TB, rdb *redis.Client, key string, burst, count, period, q int64) []int64 {
	t.Helper()
	v, err := rdb.Do(context.Background(), "CL.THROTTLE", key, burst, count, period, q).Slice()
	if err != nil {
		t.Fatalf("CL.THROTTLE %s %d %d %d %d: %v", key, burst, count, period, q, err)
	}
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = x.(int64)
	}
	return out
}

// entry is one key as a dump sees it.
type entry struct {
	value string
	pttl  int64
}

// scanAll is every key of rdb's database, by SCAN in steps of 1000.
func scanAll(t testing.TB, rdb *redis.Client) []string {
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
	return keys
}

// dump reads every key with SCAN, then GET and PTTL in pipelines.
func dump(t testing.TB, rdb *redis.Client) map[string]entry {
	t.Helper()
	ctx := context.Background()
	keys := scanAll(t, rdb)
	out := make(map[string]entry, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		batch := keys[:n]
		keys = keys[n:]
		pipe := rdb.Pipeline()
		gets := make([]*redis.StringCmd, n)
		pttls := make([]*redis.Cmd, n)
		for i, k := range batch {
			gets[i] = pipe.Get(ctx, k)
			pttls[i] = pipe.Do(ctx, "PTTL", k)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("dump pipeline: %v", err)
		}
		for i, k := range batch {
			p, _ := pttls[i].Int64()
			out[k] = entry{gets[i].Val(), p}
		}
	}
	return out
}

// TestProcessSIGTERMKeepsEverything: ~20k keys of every shape (CL.THROTTLE
// with a TTL and with none, SET with and without TTL, verbatim "+5" and
// "007") survive SIGTERM + restart with identical values, PTTL no larger
// than before and smaller by no more than the time that passed; keys
// without TTL still have none. celld exits 0.
func TestProcessSIGTERMKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	c := mustLaunch(t, dir)
	rdb := c.client()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	pipe := rdb.Pipeline()
	run := func() {
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("populate: %v", err)
		}
	}
	for i := range 8000 { // TTL 1 h from CL.THROTTLE
		pipe.Do(ctx, "CL.THROTTLE", fmt.Sprintf("thr:%d", i), 10, 1, 3600, 1+rng.IntN(5))
	}
	run()
	for i := range 2000 { // EI 1 ms, quantity −1: new TAT = now − 1 ms, TTL −1 ms → no TTL
		pipe.Do(ctx, "CL.THROTTLE", fmt.Sprintf("nottl:%d", i), 10, 1000, 1, -1)
	}
	run()
	for i := range 4000 {
		pipe.Set(ctx, fmt.Sprintf("set-ttl:%d", i), rng.Uint64(), time.Duration(60+rng.IntN(3600))*time.Second)
		pipe.Set(ctx, fmt.Sprintf("set:%d", i), rng.Uint64N(1e18), 0)
	}
	run()
	verbatim := []string{"+5", "007", "+0", "0", "+18446744073709551615", "00000000000000000000001"}
	for i := range 2000 {
		v := verbatim[i%len(verbatim)]
		var ttl time.Duration
		if i%2 == 0 {
			ttl = 10 * time.Minute
		}
		pipe.Set(ctx, fmt.Sprintf("verbatim:%d", i), v, ttl)
	}
	run()

	beforeStart := time.Now()
	before := dump(t, rdb)
	if len(before) != 20000 {
		t.Fatalf("dump before: %d keys, want 20000", len(before))
	}
	for i := range 5 {
		if e := before[fmt.Sprintf("nottl:%d", i)]; e.pttl != -1 {
			t.Fatalf("nottl:%d has PTTL %d before restart, want -1 (test setup)", i, e.pttl)
		}
	}
	rdb.Close()
	took := c.termOK()
	t.Logf("SIGTERM → exit 0 in %v", took)

	c2 := mustLaunch(t, dir)
	after := dump(t, c2.client())
	elapsed := time.Since(beforeStart).Milliseconds()
	if len(after) != len(before) {
		t.Errorf("after restart: %d keys, want %d", len(after), len(before))
	}
	bad := 0
	for k, b := range before {
		a, ok := after[k]
		switch {
		case !ok:
			t.Errorf("%s: missing after restart", k)
		case a.value != b.value:
			t.Errorf("%s: GET %q after restart, %q before", k, a.value, b.value)
		case b.pttl == -1 && a.pttl != -1:
			t.Errorf("%s: PTTL %d after restart, want -1 (no TTL)", k, a.pttl)
		case b.pttl >= 0 && (a.pttl > b.pttl || a.pttl < b.pttl-elapsed-5):
			t.Errorf("%s: PTTL %d after restart, want in [%d, %d]", k, a.pttl, b.pttl-elapsed-5, b.pttl)
		default:
			continue
		}
		if bad++; bad > 20 {
			t.Fatal("too many differences")
		}
	}
	t.Logf("%d keys identical across SIGTERM + restart (elapsed %d ms)", len(before), elapsed)
}

// TestProcessSIGINT: SIGINT is an orderly shutdown too: exit 0, and a
// change made just before it (inside the flush window) survives.
func TestProcessSIGINT(t *testing.T) {
	dir := t.TempDir()
	c := mustLaunch(t, dir, "--flush-interval", "1h") // only the shutdown flushes
	rdb := c.client()
	r := throttle(t, rdb, "k", 10, 1, 3600, 3)
	tat, err := rdb.Get(context.Background(), "k").Result()
	if err != nil || r[0] != 0 {
		t.Fatalf("setup: %v %v", r, err)
	}
	rdb.Close()
	if code, _ := c.stop(syscall.SIGINT); code != 0 {
		t.Fatalf("exit code %d after SIGINT, want 0; log:\n%s", code, c.logs)
	}
	c = mustLaunch(t, dir)
	if got, err := c.client().Get(context.Background(), "k").Result(); err != nil || got != tat {
		t.Errorf("GET k after SIGINT + restart = %q, %v; want %q", got, err, tat)
	}
}

// keyHist is one key's history in the kill -9 loop. A worker goroutine
// owns a fixed set of keys and issues their commands one at a time, so at
// most one command per key is unacknowledged.
type keyHist struct {
	name     string
	maxAcked uint64 // largest TAT ever acknowledged
	lastTAT  uint64 // TAT in the latest acknowledgement (or restored value)
	acks     []ack  // this iteration's acknowledgements, in order
	inflight bool   // a command was sent and not acknowledged
}

type ack struct {
	at  time.Time // local wall time the reply arrived
	tat uint64
}

// killLoopLimit: max_burst 100000, 1 per second. Every allowed call moves
// the TAT 1 s (EI) ahead, and the bucket is deep enough that the keys in
// this test never hit it, so TATs only grow and never expire.
const (
	killBurst     = 100000
	killEI        = uint64(time.Second)
	killIters     = 20
	killKeys      = 300
	killWorkers   = 4
	killWindowStr = "100ms"
)

// TestProcessKill9Loop: a child celld under load is killed with SIGKILL at
// random points 20 times. After each restart every key acknowledged more
// than killMargin before the kill is present with a TAT no smaller than the
// last one acknowledged before that cut-off, and no key has a TAT larger
// than any it could have had (nothing invented).
func TestProcessKill9Loop(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(20260101, 9))
	keys := make([]*keyHist, killKeys)
	for i := range keys {
		keys[i] = &keyHist{name: fmt.Sprintf("k9:%03d", i)}
	}
	ctx := context.Background()
	var totalAcks, totalLostRecent, totalChecked int
	var totalBases int64
	var maxLostAge time.Duration
	// A 16 KiB fold threshold makes the server rewrite its base every few
	// windows under this load, so kills also land during base rewrites.
	c := mustLaunch(t, dir, "--flush-interval", killWindowStr, "--log-fold-min-bytes", "16384")
	rdb := c.client()
	for iter := range killIters {
		// The restored state is where each key's history continues.
		for _, k := range keys {
			k.acks = k.acks[:0]
			k.inflight = false
		}
		var errMu sync.Mutex
		var firstErrAt time.Time
		var firstErr error

		runFor := time.Duration(300+rng.IntN(1200)) * time.Millisecond
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range killWorkers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; ; i += killWorkers {
					select {
					case <-stop:
						return
					default:
					}
					k := keys[i%len(keys)]
					k.inflight = true
					var thr *redis.Cmd
					var get *redis.StringCmd
					_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
						thr = p.Do(ctx, "CL.THROTTLE", k.name, killBurst, 1, 1, 1)
						get = p.Get(ctx, k.name)
						return nil
					})
					if err != nil {
						// The server is gone (k stays in flight), or
						// something broke: checked against the kill time.
						errMu.Lock()
						if firstErr == nil {
							firstErr, firstErrAt = err, time.Now()
						}
						errMu.Unlock()
						return
					}
					at := time.Now()
					tat, perr := strconv.ParseUint(get.Val(), 10, 64)
					if r, _ := thr.Slice(); perr != nil || len(r) != 5 || r[0] != int64(0) {
						t.Errorf("iteration %d: %s: CL.THROTTLE → %v, GET → %q: want an allowed call and a TAT", iter, k.name, r, get.Val())
						return
					}
					k.inflight = false
					k.acks = append(k.acks, ack{at, tat})
					k.lastTAT = tat
					k.maxAcked = max(k.maxAcked, tat)
				}
			}()
		}
		// A poller learns from the server which acknowledgements are
		// durable: an ack received before poll p is durable once a later
		// poll shows two more completed flushes than p (the second of them
		// drained after the first finished, so after p). This makes the
		// cut-off independent of how slowly a loaded machine flushes.
		pollStop := make(chan struct{})
		pollDone := make(chan []flushPoll)
		go pollFlushes(c.client(), pollStop, pollDone)
		time.Sleep(runFor) // the random kill point; nothing is ordered by it
		killAt := time.Now()
		c.kill()
		close(stop)
		close(pollStop)
		polls := <-pollDone
		wg.Wait()
		rdb.Close()
		if firstErr != nil && firstErrAt.Before(killAt) {
			t.Errorf("iteration %d: load failed %v before the kill: %v", iter, killAt.Sub(firstErrAt), firstErr)
		}
		if t.Failed() {
			t.FailNow()
		}

		c = mustLaunch(t, dir, "--flush-interval", killWindowStr, "--log-fold-min-bytes", "16384")
		rdb = c.client()
		pipe := rdb.Pipeline()
		gets := make([]*redis.StringCmd, len(keys))
		for i, k := range keys {
			gets[i] = pipe.Get(ctx, k.name)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("iteration %d: reading back: %v", iter, err)
		}
		cutoff := durableCutoff(polls)
		if len(polls) > 0 {
			totalBases += polls[len(polls)-1].bases
		}
		checked, lostRecent, acks := 0, 0, 0
		var lostAge time.Duration
		for i, k := range keys {
			acks += len(k.acks)
			var restored uint64
			present := gets[i].Err() == nil
			if present {
				var err error
				if restored, err = strconv.ParseUint(gets[i].Val(), 10, 64); err != nil {
					t.Errorf("iteration %d: %s restored as %q", iter, k.name, gets[i].Val())
					continue
				}
			}
			// Lower bound: the last TAT acknowledged before the cut-off.
			var floor uint64
			haveFloor := false
			for _, a := range k.acks {
				if a.at.Before(cutoff) {
					floor, haveFloor = a.tat, true
				}
			}
			if haveFloor {
				checked++
				if !present || restored < floor {
					t.Errorf("iteration %d: %s restored as %q (present %v), but TAT %d was acknowledged before a flush the server reported complete (cut-off %v before the kill)",
						iter, k.name, gets[i].Val(), present, floor, killAt.Sub(cutoff).Round(time.Millisecond))
				}
			}
			// Upper bound: the largest TAT acknowledged, or what the one
			// unacknowledged command could have produced (the server's
			// clock is at most killAt).
			ceiling := k.maxAcked
			if k.inflight {
				ceiling = max(ceiling, max(k.lastTAT, uint64(killAt.UnixNano()))+killEI)
			}
			if present && restored > ceiling {
				t.Errorf("iteration %d: %s restored with TAT %d, larger than any it had (max acknowledged %d, in flight %v)",
					iter, k.name, restored, k.maxAcked, k.inflight)
			}
			if present && len(k.acks) > 0 && restored < k.acks[len(k.acks)-1].tat {
				lostRecent++
				// How long before the kill the oldest lost
				// acknowledgement arrived: the loss window seen.
				for _, a := range k.acks {
					if a.tat > restored {
						lostAge = max(lostAge, killAt.Sub(a.at))
						break
					}
				}
			}
			if present {
				// A value the key really had: the next iteration
				// continues from it.
				k.lastTAT = restored
				k.maxAcked = max(k.maxAcked, restored)
			}
		}
		t.Logf("iteration %2d: killed after %4d ms; %5d acks; %3d keys checked against the cut-off; %3d keys lost acknowledged updates, the oldest acknowledged %v before the kill",
			iter, runFor.Milliseconds(), acks, checked, lostRecent, lostAge.Round(time.Millisecond))
		maxLostAge = max(maxLostAge, lostAge)
		totalAcks += acks
		totalLostRecent += lostRecent
		totalChecked += checked
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("%d kills: %d acknowledged calls, %d key checks passed; %d times a key lost acknowledged updates, none older than %v before the kill; %d base rewrites seen",
		killIters, totalAcks, totalChecked, totalLostRecent, maxLostAge.Round(time.Millisecond), totalBases)
	if totalBases == 0 {
		t.Error("no base rewrite happened during the kill loop: the log fold path went untested")
	}
}

// TestProcessRecoverCorruptDir: garbage in the data directory's files makes
// celld refuse to start, naming the directory; --recover=skip starts empty,
// says so, and keeps the old directory (moved aside, not deleted).
func TestProcessRecoverCorruptDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c := mustLaunch(t, dir)
	rdb := c.client()
	for i := range 100 {
		throttle(t, rdb, fmt.Sprintf("k%d", i), 10, 1, 3600, 1)
	}
	rdb.Close()
	c.termOK()

	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	garbage := bytes.Repeat([]byte("not a pebble file\x00\xff"), 200)
	var smashed []string
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), garbage, 0o644); err != nil {
			t.Fatal(err)
		}
		smashed = append(smashed, e.Name())
	}
	t.Logf("overwrote with garbage: %v", smashed)

	c = launch(t, dir)
	if !c.hasExited() {
		t.Fatalf("celld started on a corrupt directory; log:\n%s", c.logs)
	}
	if code := c.cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("exit code 0 on a corrupt directory")
	}
	if log := c.logs.String(); !strings.Contains(log, dir) {
		t.Errorf("the refusal does not name %s:\n%s", dir, log)
	} else {
		t.Logf("refusal: %s", firstLine(log, "cannot start"))
	}

	before, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	c = mustLaunch(t, dir, "--recover=skip")
	log := c.logs.String()
	// The contents move aside inside the directory, which itself stays
	// (it may be a mount point, where renaming it fails with EBUSY).
	if after, err := os.Stat(dir); err != nil || !os.SameFile(before, after) {
		t.Errorf("--recover=skip replaced the data directory itself (%v)", err)
	}
	if !strings.Contains(log, "starting EMPTY") || !strings.Contains(log, dir) {
		t.Errorf("--recover=skip did not say it starts empty and name the directory:\n%s", log)
	}
	rdb = c.client()
	if n, err := rdb.DBSize(context.Background()).Result(); err != nil || n != 0 {
		t.Errorf("DBSIZE after --recover=skip = %d, %v; want 0", n, err)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "unreadable-*"))
	if len(aside) != 1 {
		t.Fatalf("moved-aside directories: %v, want one", aside)
	}
	for _, name := range smashed {
		b, err := os.ReadFile(filepath.Join(aside[0], name))
		if err != nil || !bytes.Equal(b, garbage) {
			t.Errorf("%s not kept in %s (err %v)", name, aside[0], err)
		}
	}
	// The fresh directory works.
	throttle(t, rdb, "new", 10, 1, 3600, 1)
	rdb.Close()
	c.termOK()
	c = mustLaunch(t, dir)
	if n, _ := c.client().DBSize(context.Background()).Result(); n != 1 {
		t.Errorf("DBSIZE after restart on the fresh directory = %d, want 1", n)
	}
}

func firstLine(s, substr string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			return l
		}
	}
	return ""
}

// TestProcessSecondInstanceRefused: a second celld on the same --dir exits
// non-zero naming the directory and the lock; the first keeps serving.
func TestProcessSecondInstanceRefused(t *testing.T) {
	dir := t.TempDir()
	a := mustLaunch(t, dir)
	b := launch(t, dir)
	if !b.hasExited() {
		t.Fatalf("a second celld started on %s; log:\n%s", dir, b.logs)
	}
	if code := b.cmd.ProcessState.ExitCode(); code == 0 {
		t.Error("second celld exited 0")
	}
	log := b.logs.String()
	if !strings.Contains(log, dir) || !strings.Contains(strings.ToLower(log), "lock") {
		t.Errorf("second celld's refusal does not name %s and the lock:\n%s", dir, log)
	} else {
		t.Logf("refusal: %s", firstLine(log, "cannot start"))
	}
	if err := a.client().Ping(context.Background()).Err(); err != nil {
		t.Errorf("first celld after the second was refused: %v", err)
	}
}

// TestProcessExpiredNotRestored: a key whose TTL passed is deleted from
// disk by the next flush (SAVE) and not restored; a key with no TTL is
// kept without one.
func TestProcessExpiredNotRestored(t *testing.T) {
	dir := t.TempDir()
	c := mustLaunch(t, dir)
	rdb := c.client()
	ctx := context.Background()
	throttle(t, rdb, "short", 10, 1, 1, 1)     // EI 1 s: TTL 1 s
	throttle(t, rdb, "nottl", 10, 1000, 1, -1) // TTL −1 ms: no TTL
	if err := rdb.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// Wait for the expiry by asking the server, not by sleeping a guess.
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := rdb.Do(ctx, "PTTL", "short").Int64()
		if err != nil {
			t.Fatal(err)
		}
		if p == -2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("short still has PTTL %d after 30 s", p)
		}
		<-tick.C
	}
	if err := rdb.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Close()
	c.termOK()

	onDisk, _ := readDir(t, dir) // everything on disk, expired or not
	// Its record stays until a fold, carrying the expiry that passed: no
	// deletion record is written for it (store/expire.go).
	if r, ok := onDisk["short"]; ok && (r.exp == 0 || r.exp > time.Now().UnixMilli()) {
		t.Errorf("expired key on disk after SAVE with a live expiry: %+v", r)
	}
	if r, ok := onDisk["nottl"]; !ok || r.exp != 0 {
		t.Errorf("no-TTL key on disk = %+v (present %v), want ExpireAtMs 0", r, ok)
	}

	c = mustLaunch(t, dir)
	rdb = c.client()
	if n, err := rdb.Exists(ctx, "short").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS short after restart = %d, %v; want 0", n, err)
	}
	if p, err := rdb.Do(ctx, "PTTL", "nottl").Int64(); err != nil || p != -1 {
		t.Errorf("PTTL nottl after restart = %d, %v; want -1", p, err)
	}
}

// TestProcessRestartBound: the README's loss bound in the worst case. Keys
// with various max_burst are partly used up; then
//   - SIGTERM and restart: no extra grants at all;
//   - kill -9 right after SAVE and restart: none either;
//   - SIGTERM, delete the data directory, restart: at most max_burst+1 extra
//     per key,
//
// where "extra" is grants after the restart minus the remaining count the
// last reply before it promised (EI is one hour, so nothing refills).
func TestProcessRestartBound(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	bursts := []int64{0, 1, 2, 5, 10, 20}
	type keyState struct {
		name      string
		burst     int64
		remaining int64
	}
	var keys []*keyState
	for i := range 60 {
		keys = append(keys, &keyState{name: fmt.Sprintf("bound:%d", i), burst: bursts[i%len(bursts)]})
	}
	const period = 3600 // count 1 per hour: EI = 1 h
	c := mustLaunch(t, dir)
	rdb := c.client()
	for _, k := range keys {
		use := 1 + rng.Int64N(k.burst+1) // 1 … max_burst+1 grants
		for range use {
			r := throttle(t, rdb, k.name, k.burst, 1, period, 1)
			if r[0] != 0 {
				t.Fatalf("%s: denied while using up %d of %d", k.name, use, k.burst+1)
			}
			k.remaining = r[2]
		}
	}
	// grantsUntilDenied counts allowed calls until the first denial and
	// leaves each key exhausted.
	grantsUntilDenied := func(rdb *redis.Client, k *keyState) int64 {
		var n int64
		for n <= k.burst+5 {
			r := throttle(t, rdb, k.name, k.burst, 1, period, 1)
			if r[0] != 0 {
				return n
			}
			n++
		}
		t.Fatalf("%s: still allowed after %d calls", k.name, n)
		return n
	}

	rdb.Close()
	c.termOK()
	c = mustLaunch(t, dir)
	rdb = c.client()
	for _, k := range keys {
		if extra := grantsUntilDenied(rdb, k) - k.remaining; extra != 0 {
			t.Errorf("SIGTERM: %s (max_burst %d) granted %d extra after restart, want 0", k.name, k.burst, extra)
		}
		k.remaining = 0
	}
	if err := rdb.Save(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Close()
	c.kill()
	c = mustLaunch(t, dir)
	rdb = c.client()
	for _, k := range keys {
		if extra := grantsUntilDenied(rdb, k); extra != 0 {
			t.Errorf("kill -9 after SAVE: %s (max_burst %d) granted %d extra after restart, want 0", k.name, k.burst, extra)
		}
	}
	rdb.Close()
	c.termOK()

	// Total loss: the data directory is gone.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	c = mustLaunch(t, dir)
	rdb = c.client()
	worst := int64(0)
	for _, k := range keys {
		extra := grantsUntilDenied(rdb, k)
		if extra > k.burst+1 {
			t.Errorf("data directory deleted: %s (max_burst %d) granted %d extra, bound is %d", k.name, k.burst, extra, k.burst+1)
		}
		worst = max(worst, extra-(k.burst+1))
	}
	t.Logf("data directory deleted: extra grants per key ≤ max_burst+1 held for %d keys (max extra − bound = %d)", len(keys), worst)
}

// TestProcessSaveDBSizeInfo: after SAVE, DBSIZE equals the number of records
// on disk (read with persist after a kill -9, so nothing else is flushed),
// INFO persistence reports the flush, LASTSAVE moves, BGSAVE answers.
func TestProcessSaveDBSizeInfo(t *testing.T) {
	dir := t.TempDir()
	c := mustLaunch(t, dir)
	rdb := c.client()
	ctx := context.Background()
	pipe := rdb.Pipeline()
	for i := range 5000 {
		if i%2 == 0 {
			pipe.Do(ctx, "CL.THROTTLE", fmt.Sprintf("t:%d", i), 10, 1, 3600, 1)
		} else {
			pipe.Set(ctx, fmt.Sprintf("s:%d", i), i, 0)
		}
	}
	for i := 0; i < 5000; i += 50 {
		pipe.Del(ctx, fmt.Sprintf("t:%d", i), fmt.Sprintf("s:%d", i+1))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	beforeSave := time.Now().Unix()
	if err := rdb.Save(ctx).Err(); err != nil {
		t.Fatalf("SAVE: %v", err)
	}
	n, err := rdb.DBSize(ctx).Result()
	if err != nil || n != 4800 {
		t.Fatalf("DBSIZE = %d, %v; want 4800", n, err)
	}
	inf := info(t, rdb, "persistence")
	for field, want := range map[string]string{"last_flush_status": "ok", "dirty_keys": "0", "flush_errors": "0", "last_flush_error": ""} {
		if got, ok := inf[field]; !ok || got != want {
			t.Errorf("INFO persistence %s = %q (present %v), want %q", field, got, ok, want)
		}
	}
	if f, _ := strconv.Atoi(inf["flushes"]); f < 1 {
		t.Errorf("INFO persistence flushes = %q, want ≥ 1", inf["flushes"])
	}
	if ls, err := rdb.LastSave(ctx).Result(); err != nil || ls < beforeSave-1 || ls > time.Now().Unix()+1 {
		t.Errorf("LASTSAVE = %d, %v; want about %d", ls, err, beforeSave)
	}
	if s, err := rdb.BgSave(ctx).Result(); err != nil || s != "Background saving started" {
		t.Errorf("BGSAVE = %q, %v", s, err)
	}
	// Nothing changed since SAVE (BGSAVE has nothing to write), so after
	// kill -9 the disk holds exactly what SAVE wrote.
	rdb.Close()
	c.kill()

	onDisk, stamp := readDir(t, dir)
	if int64(len(onDisk)) != n {
		t.Errorf("on disk after SAVE: %d records, DBSIZE said %d", len(onDisk), n)
	}
	if stamp.Unix() < beforeSave-1 {
		t.Errorf("flush stamp %v is before the SAVE", stamp)
	}
	db, err := persist.Open(dir, persist.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if cnt, err := db.Count(); err != nil || cnt != n {
		t.Errorf("persist Count = %d, %v; DBSIZE said %d", cnt, err, n)
	}
	db.Close()

	c = mustLaunch(t, dir)
	rdb = c.client()
	if got, _ := rdb.DBSize(ctx).Result(); got != n {
		t.Errorf("DBSIZE after restart = %d, want %d", got, n)
	}
	inf = info(t, rdb, "persistence")
	if inf["restore_keys"] != strconv.FormatInt(n, 10) || inf["last_flush_status"] != "ok" || inf["restore_clock_back_ms"] != "0" {
		t.Errorf("INFO persistence after restart: restore_keys %q (want %d), last_flush_status %q, restore_clock_back_ms %q",
			inf["restore_keys"], n, inf["last_flush_status"], inf["restore_clock_back_ms"])
	}
}

// TestProcessClockStepBack: the directory was last flushed by a clock one
// hour ahead of this one. celld shifts the restored key back by the step
// (reported in INFO and the log), so the key keeps the 10 s of delay it had
// instead of an hour and 10 s.
func TestProcessClockStepBack(t *testing.T) {
	dir := t.TempDir()
	stamp := time.Now().Add(time.Hour)
	db, err := persist.Open(dir, persist.Options{Logger: quietLog(), Now: func() time.Time { return stamp }})
	if err != nil {
		t.Fatal(err)
	}
	tat := uint64(stamp.UnixNano()) + 10e9
	if err := db.Write([]persist.Op{
		{Key: []byte("k"), Value: []byte(dec(tat)), ExpireAtMs: stamp.UnixMilli() + 10_000},
		{Key: []byte("user"), Value: []byte("+5")},
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	c := mustLaunch(t, dir)
	rdb := c.client()
	ctx := context.Background()
	back, err := strconv.ParseInt(info(t, rdb, "persistence")["restore_clock_back_ms"], 10, 64)
	if err != nil || back < time.Hour.Milliseconds()-time.Minute.Milliseconds() || back > time.Hour.Milliseconds() {
		t.Fatalf("restore_clock_back_ms = %d, %v; want about an hour", back, err)
	}
	if !regexp.MustCompile(`clock is behind the last flush.*clock_back_ms=` + strconv.FormatInt(back, 10)).MatchString(c.logs.String()) {
		t.Errorf("the shift is not logged:\n%s", c.logs)
	}
	got, err := rdb.Get(ctx, "k").Result()
	if want := dec(tat - uint64(back)*1e6); err != nil || got != want {
		t.Errorf("GET k = %q, %v; want %q (shifted back %d ms)", got, err, want, back)
	}
	if p, err := rdb.Do(ctx, "PTTL", "k").Int64(); err != nil || p > 10_000 || p < 0 {
		t.Errorf("PTTL k = %d, %v; want ≤ 10000 (not an hour more)", p, err)
	}
	if got, _ := rdb.Get(ctx, "user").Result(); got != "+5" {
		t.Errorf("GET user = %q, want the verbatim +5", got)
	}
}

// cpuTime is the CPU time (user+system) process pid has used so far, from
// /proc/<pid>/stat (clock ticks of 10 ms, Linux's USER_HZ).
func cpuTime(t testing.TB, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of the whole line.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// termMeasured is termOK that also returns the CPU time the shutdown used.
func (c *child) termMeasured() (wall, cpu time.Duration) {
	c.t.Helper()
	before := cpuTime(c.t, c.cmd.Process.Pid)
	wall = c.termOK()
	st := c.cmd.ProcessState
	return wall, st.UserTime() + st.SystemTime() - before
}

// populateMillion runs CL.THROTTLE (1 per hour, so nothing expires) on
// user:0000000 … user:0999999 in pipelines of 10,000, four at a time.
func populateMillion(t testing.TB, addr string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 8, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	defer rdb.Close()
	ctx := context.Background()
	const n, batch = 1_000_000, 10_000
	var wg sync.WaitGroup
	errs := make(chan error, n/batch)
	sem := make(chan struct{}, 4)
	for b := 0; b < n; b += batch {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			pipe := rdb.Pipeline()
			for i := b; i < b+batch; i++ {
				pipe.Do(ctx, "CL.THROTTLE", fmt.Sprintf("user:%07d", i), 10, 1, 3600, 1)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestProcessMillionKeys (CELLD_SLOW_TESTS=1) logs the 1M-key figures the
// issue sets targets for (shutdown < 5 s, restore < 2 s), as wall time and
// as the child's CPU time (wall time on a shared machine includes waiting
// for other processes): SIGTERM → exit with all 1M keys dirty (flush
// window of an hour: the worst case), with nothing dirty, and right after a
// full pass of load at the default window; restore as exec → listening and
// celld's own "restored state" duration. It asserts correctness only (exit
// 0, DBSIZE), never time.
func TestProcessMillionKeys(t *testing.T) {
	if os.Getenv("CELLD_SLOW_TESTS") != "1" {
		t.Skip("set CELLD_SLOW_TESTS=1 to run the 1M-key shutdown/restore measurement")
	}
	const n = 1_000_000
	ctx := context.Background()
	dir := t.TempDir()
	dbsize := func(c *child) string {
		rdb := c.client()
		defer rdb.Close()
		got, err := rdb.DBSize(ctx).Result()
		if err != nil || got != n {
			t.Fatalf("DBSIZE = %d, %v; want %d", got, err, n)
		}
		return info(t, rdb, "persistence")["dirty_keys"]
	}
	restarted := func(what string) *child {
		c := mustLaunch(t, dir)
		cpu := cpuTime(t, c.cmd.Process.Pid)
		t.Logf("%s: exec → listening %v (CPU %v; target < 2 s); %s", what, c.ready, cpu,
			firstLine(c.logs.String(), "restored state"))
		return c
	}

	c := mustLaunch(t, dir, "--flush-interval", "1h")
	start := time.Now()
	populateMillion(t, c.addr)
	dirty := dbsize(c)
	t.Logf("populated %d keys in %v", n, time.Since(start))
	wall, cpu := c.termMeasured()
	t.Logf("worst case, SIGTERM with %s dirty keys → exit 0 in %v (CPU %v; target < 5 s)", dirty, wall, cpu)

	c = restarted("restore after the worst-case shutdown")
	dbsize(c)
	wall, cpu = c.termMeasured()
	t.Logf("SIGTERM with nothing dirty → exit 0 in %v (CPU %v)", wall, cpu)

	c = restarted("restore after an idle shutdown")
	populateMillion(t, c.addr) // every key again, default 100 ms window
	dirty = dbsize(c)
	wall, cpu = c.termMeasured()
	t.Logf("SIGTERM right after a pass over all keys (%s dirty at INFO) → exit 0 in %v (CPU %v)", dirty, wall, cpu)

	c = restarted("restore after a shutdown under load")
	dbsize(c)
}

// flushPoll is one reading of INFO persistence's flush counter, taken by
// the poller: sentAt is when the request was sent.
type flushPoll struct {
	sentAt  time.Time
	flushes int64
	bases   int64 // base rewrites (log folds) so far
}

// pollFlushes reads the server's completed-flush count every 10 ms until
// stop, then sends what it saw on done.
func pollFlushes(rdb *redis.Client, stop <-chan struct{}, done chan<- []flushPoll) {
	defer rdb.Close()
	var polls []flushPoll
	for {
		select {
		case <-stop:
			done <- polls
			return
		case <-time.After(10 * time.Millisecond):
		}
		sent := time.Now()
		info, err := rdb.Info(context.Background(), "persistence").Result()
		if err != nil {
			continue
		}
		p := flushPoll{sentAt: sent, flushes: -1}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "flushes:"); ok {
				p.flushes, _ = strconv.ParseInt(v, 10, 64)
			}
			if v, ok := strings.CutPrefix(line, "bases:"); ok {
				p.bases, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if p.flushes >= 0 {
			polls = append(polls, p)
		}
	}
}

// durableCutoff returns the latest poll time p such that a later poll saw at
// least two more completed flushes: every acknowledgement received before p
// is on disk. With no such poll it returns the zero time (nothing checked).
func durableCutoff(polls []flushPoll) time.Time {
	var cut time.Time
	for i, p := range polls {
		for _, q := range polls[i+1:] {
			if q.flushes >= p.flushes+2 {
				cut = p.sentAt
				break
			}
		}
	}
	return cut
}
