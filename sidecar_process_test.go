package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/celld/celld/cluster"
	"github.com/redis/go-redis/v9"
)

// launchAt is launch on a given address (a cluster node must know every
// node's address before any starts).
func launchAt(t testing.TB, dir, addr string, args ...string) *child {
	t.Helper()
	return launchBinAt(t, celldBinary(t), dir, addr, args...)
}

// launchBinAt starts the celld binary bin on addr with dir and args, and
// waits until it serves (it fails t if bin exits or does not start).
func launchBinAt(t testing.TB, bin, dir, addr string, args ...string) *child {
	t.Helper()
	c := &child{t: t, dir: dir, addr: addr, exited: make(chan struct{})}
	c.logs = &logBuf{ready: make(chan struct{})}
	c.cmd = exec.Command(bin, append([]string{"--addr", addr, "--dir", dir}, args...)...)
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
	case <-c.exited:
		t.Fatalf("%s on %s exited at start-up; log:\n%s", bin, addr, c.logs)
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s on %s did not start; log:\n%s", bin, addr, c.logs)
	}
	return c
}

// sidecarCluster is three celld cluster nodes (persistent) and one
// sidecar per fallback mode, each seeded with a different node.
type sidecarCluster struct {
	nodes     []*child
	nodeDirs  []string
	nodeAddrs []string
	side      map[string]*child // by mode
	metrics   string            // the local sidecar's metrics address
}

const sidecarTimeout = 250 * time.Millisecond

func startSidecarCluster(t *testing.T, timeout time.Duration) *sidecarCluster {
	t.Helper()
	sc := &sidecarCluster{side: map[string]*child{}}
	for range 3 {
		sc.nodeAddrs = append(sc.nodeAddrs, freeAddr(t))
		sc.nodeDirs = append(sc.nodeDirs, t.TempDir())
	}
	for i := range 3 {
		sc.nodes = append(sc.nodes, sc.startNode(t, i))
	}
	sc.metrics = freeAddr(t)
	for i, mode := range []string{"local", "open", "closed"} {
		args := []string{"--persist", "no", "--upstream", sc.nodeAddrs[i], "--upstream-fallback", mode, "--upstream-timeout", timeout.String()}
		if mode == "local" {
			args = append(args, "--metrics-addr", sc.metrics)
		}
		sc.side[mode] = mustLaunch(t, t.TempDir(), args...)
	}
	return sc
}

func (sc *sidecarCluster) startNode(t *testing.T, i int) *child {
	return launchAt(t, sc.nodeDirs[i], sc.nodeAddrs[i], "--cluster-nodes", strings.Join(sc.nodeAddrs, ","))
}

// ownerOf is the index of the node that owns key (the static split).
func ownerOf(key string) int { return cluster.KeySlotString(key) * 3 / cluster.SlotCount }

func plainClient(t testing.TB, addr string, pool int) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: pool, MinIdleConns: pool})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestProcessSidecarSharedLimit: 64 connections spread over two sidecars
// on one 10-per-hour key are granted exactly 10; 300 keys land on every
// owner; redis-py and ioredis through a sidecar share the same limits.
func TestProcessSidecarSharedLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six processes")
	}
	sc := startSidecarCluster(t, 5*time.Second) // no spurious fallback under load: this test is about sharing
	ctx := context.Background()
	a := plainClient(t, sc.side["local"].addr, 32)
	b := plainClient(t, sc.side["open"].addr, 32)

	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 64 {
		rdb := a
		if i%2 == 1 {
			rdb = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			v, err := rdb.Do(ctx, "CL.THROTTLE", "shared", 9, 10, 3600).Slice()
			if err != nil {
				t.Error(err)
				return
			}
			if v[0].(int64) == 0 {
				allowed.Add(1)
			} else {
				denied.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if allowed.Load() != 10 || denied.Load() != 54 {
		t.Fatalf("64 calls over two sidecars on a 10-per-hour key: %d allowed, %d denied; want 10, 54", allowed.Load(), denied.Load())
	}

	// 300 keys through one sidecar, then the same keys through the other:
	// the second call sees the first (one shared limiter).
	pipe := a.Pipeline()
	for i := range 300 {
		pipe.Do(ctx, "CL.THROTTLE", "key:"+strconv.Itoa(i), 1, 10, 3600)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	pipe = b.Pipeline()
	var cmds []*redis.Cmd
	for i := range 300 {
		cmds = append(cmds, pipe.Do(ctx, "CL.THROTTLE", "key:"+strconv.Itoa(i), 1, 10, 3600))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, c := range cmds {
		if v, _ := c.Slice(); v[2].(int64) != 0 {
			t.Fatalf("key:%d second call through the other sidecar: %v, want remaining 0", i, v)
		}
	}
	var total int64
	for i, n := range sc.nodes {
		size := plainClient(t, n.addr, 1).DBSize(ctx).Val()
		if size < 50 {
			t.Errorf("node %d holds %d keys: the 300 keys are not spread", i, size)
		}
		total += size
	}
	if total != 301 {
		t.Fatalf("the nodes hold %d keys, want 301 (300 + shared)", total)
	}
	for mode, s := range sc.side {
		if n := plainClient(t, s.addr, 1).DBSize(ctx).Val(); n != 0 {
			t.Errorf("sidecar %s holds %d keys of its own, want 0", mode, n)
		}
	}

	t.Run("redis-py", func(t *testing.T) {
		py := pythonWithRedis(t)
		host, port := splitHostPort(t, sc.side["closed"].addr)
		script := `
import sys, redis
r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]))
out = [r.execute_command("CL.THROTTLE", "py", 2, 10, 3600)[0] for _ in range(4)]
p = r.pipeline(transaction=False)
for i in range(300):
    p.execute_command("CL.THROTTLE", "key:%d" % i, 1, 10, 3600)
third = [x[0] for x in p.execute()]
assert r.ping()
print(",".join(map(str, out)), sum(third))
`
		out, err := exec.Command(py, "-c", script, host, port).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-py: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != "0,0,0,1 300" {
			t.Fatalf("redis-py through the sidecar: %q, want \"0,0,0,1 300\" (3 allowed, 4th denied; the 300 keys' third call denied everywhere)", got)
		}
		if v := throttle(t, a, "py", 2, 10, 3600, 0); v[2] != 0 {
			t.Fatalf("py's bucket seen through another sidecar: %v", v)
		}
	})

	t.Run("ioredis", func(t *testing.T) {
		dir := ioredisDir(t)
		host, port := splitHostPort(t, sc.side["open"].addr)
		script := `
const Redis = require("ioredis");
const r = new Redis({host: process.argv[2], port: +process.argv[3], lazyConnect: true, maxRetriesPerRequest: 0});
(async () => {
  await r.connect();
  const out = [];
  for (let i = 0; i < 4; i++) out.push((await r.call("CL.THROTTLE", "js", 2, 10, 3600))[0]);
  const p = r.pipeline();
  for (let i = 0; i < 300; i++) p.call("CL.THROTTLE", "key:" + i, 1, 10, 3600);
  const res = await p.exec();
  console.log(out.join(","), res.reduce((s, [e, v]) => s + v[0], 0));
  r.disconnect();
})().catch(e => { console.error(e); process.exit(1); });
`
		f := filepath.Join(dir, "t.js")
		os.WriteFile(f, []byte(script), 0o644)
		out, err := exec.Command("node", f, host, port).CombinedOutput()
		if err != nil {
			t.Fatalf("ioredis: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != "0,0,0,1 300" {
			t.Fatalf("ioredis through the sidecar: %q, want \"0,0,0,1 300\"", got)
		}
	})
}

// TestProcessSidecarOwnerDown: the owner of a key stops answering
// (SIGSTOP) and each sidecar answers by its mode within --upstream-timeout
// plus a little; SIGCONT brings forwarding back; kill -9 is detected at
// once; the owner restarted on its data directory decides again, from its
// restored state, within 10 s.
func TestProcessSidecarOwnerDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six processes")
	}
	sc := startSidecarCluster(t, sidecarTimeout)
	ctx := context.Background()
	const key = "victim"
	oi := ownerOf(key)
	owner := plainClient(t, sc.nodeAddrs[oi], 1)
	clients := map[string]*redis.Client{}
	for mode, s := range sc.side {
		clients[mode] = plainClient(t, s.addr, 4)
	}
	// 5 of 100 used at the owner, made durable.
	for range 5 {
		throttle(t, owner, key, 99, 100, 3600, 1)
	}
	if err := owner.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	check := func(phase string, limit time.Duration) {
		t.Helper()
		for _, mode := range []string{"local", "open", "closed"} {
			start := time.Now()
			v, err := clients[mode].Do(ctx, "CL.THROTTLE", key, 99, 100, 3600).Slice()
			took := time.Since(start)
			t.Logf("%s: %s fallback answered in %v: %v %v", phase, mode, took.Round(time.Microsecond), v, err)
			if took > limit {
				t.Errorf("%s: %s fallback took %v, want at most %v", phase, mode, took, limit)
			}
			switch mode {
			case "local":
				if err != nil || v[0].(int64) != 0 || v[2].(int64) < 90 {
					t.Errorf("%s: local fallback %v %v: want allowed from the sidecar's own bucket", phase, v, err)
				}
			case "open":
				if err != nil || fmt.Sprint(v) != "[0 100 99 -1 0]" {
					t.Errorf("%s: open fallback %v %v, want [0 100 99 -1 0]", phase, v, err)
				}
			case "closed":
				if err == nil || !strings.HasPrefix(err.Error(), "UPSTREAMDOWN") || !strings.Contains(err.Error(), sc.nodeAddrs[oi]) {
					t.Errorf("%s: closed fallback %v %v, want UPSTREAMDOWN naming %s", phase, v, err, sc.nodeAddrs[oi])
				}
			}
		}
	}
	// A hung owner: only the timeout tells. The bound is the timeout plus
	// a second of scheduling on a loaded machine (-race, 2 cores: 390 ms
	// against the former 750 ms bound at load 15). A sidecar without the
	// timeout would leave the call to the client's 3 s read timeout, an
	// error that every mode's check refuses; one that waits over 5x the
	// timeout fails the bound (6x: 1.51 s).
	sc.nodes[oi].cmd.Process.Signal(syscall.SIGSTOP)
	waitStopped(t, sc.nodes[oi].cmd.Process.Pid)
	check("SIGSTOP", sidecarTimeout+time.Second)
	ready, state := readyz(t, sc.metrics)
	if ready != 200 || state != "degraded" {
		t.Errorf("/readyz of the local sidecar with one owner down: %d %q, want 200 degraded", ready, state)
	}
	sc.nodes[oi].cmd.Process.Signal(syscall.SIGCONT)
	waitForwarding(t, clients, sc.nodeAddrs[oi], key, "SIGCONT")

	// kill -9: refused connections, detected at once.
	sc.nodes[oi].kill()
	killedAt := time.Now()
	check("kill -9", sidecarTimeout+time.Second)
	t.Logf("kill -9 → all three fallbacks answered in %v", time.Since(killedAt))

	sc.nodes[oi] = sc.startNode(t, oi)
	back := time.Now()
	waitForwarding(t, clients, sc.nodeAddrs[oi], key, "restart")
	t.Logf("owner restarted: forwarding again after %v", time.Since(back))

	body := httpGet(t, "http://"+sc.metrics+"/metrics")
	for _, want := range []string{"celld_upstream_forwarded_total", `celld_upstream_fallback_total{mode="local"}`,
		"celld_upstream_errors_total", "celld_upstream_owner_latency_seconds_bucket", `celld_upstream_state{state="ok"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// waitForwarding waits (at most 10 s) until every sidecar's CL.THROTTLE
// on key is decided by the owner at ownerAddr again: a peek (quantity 0)
// through each sidecar equals the owner's own peek, and the owner's state
// holds the 5 uses made durable before it was stopped.
func waitForwarding(t *testing.T, clients map[string]*redis.Client, ownerAddr, key, phase string) {
	t.Helper()
	owner := plainClient(t, ownerAddr, 1)
	deadline := time.Now().Add(10 * time.Second)
	for _, mode := range []string{"local", "open", "closed"} {
		for {
			want, err1 := owner.Do(context.Background(), "CL.THROTTLE", key, 99, 100, 3600, 0).Slice()
			v, err := clients[mode].Do(context.Background(), "CL.THROTTLE", key, 99, 100, 3600, 0).Slice()
			if err == nil && err1 == nil && want[2].(int64) <= 95 && v[2] == want[2] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s sidecar not forwarding within 10 s: %v %v (owner: %v %v)", phase, mode, v, err, want, err1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func readyz(t *testing.T, addr string) (int, string) {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Celld-Upstream")
}

func httpGet(t *testing.T, url string) string {
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

func splitHostPort(t *testing.T, addr string) (string, string) {
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}

// pythonWithRedis finds a python3 that imports redis (apt's python3-redis
// is under /usr/bin/python3). CI installs it: there, not finding one fails.
func pythonWithRedis(t *testing.T) string {
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import redis").Run() == nil {
			return py
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no python3 with the redis module: .ci/run installs python3-redis")
	}
	t.Skip("python3-redis not installed (apt-get install python3-redis); CI always runs this step")
	return ""
}

// ioredisDir installs ioredis with npm into a temporary directory; the
// step is skipped when node or npm are missing or the registry cannot be
// reached.
func ioredisDir(t *testing.T) string {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm not installed: the ioredis step needs node and npm")
	}
	dir := t.TempDir()
	c, cancel := context.WithTimeout(context.Background(), time.Minute) // bounded: CI's budget
	defer cancel()
	cmd := exec.CommandContext(c, "npm", "install", "--no-audit", "--no-fund", "--silent", "ioredis@5")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("npm install ioredis failed (registry unreachable?): %v\n%s", err, out)
	}
	return dir
}

// waitStopped waits until every thread of pid is stopped (SIGSTOP is
// delivered asynchronously; a thread may finish a reply meanwhile).
func waitStopped(t *testing.T, pid int) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		stopped := len(tasks) > 0
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if i := strings.LastIndexByte(string(b), ')'); err != nil || i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				stopped = false
			}
		}
		if stopped {
			time.Sleep(10 * time.Millisecond) // replies already in the socket are read by now
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("process %d not stopped after SIGSTOP", pid)
}
