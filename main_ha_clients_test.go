package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Clients in other languages driven through the HA harness's faults
// (TestProcessHA): redis-py's RedisCluster and ioredis's Cluster each call
// CL.THROTTLE on one key per shard in a loop, printing "ok <shard> <unix
// ns>" per answer and "err <shard> <unix ns> <error>" per failure. The
// test then checks that each one was answered on the killed shard after
// every kill's failover: it followed the new leader unchanged.

// haPyClient is the redis-py loop (argv: seeds host:port,... key0 key1).
// It stops when its stdin closes.
const haPyClient = `
import sys, time, threading, logging
from redis.cluster import RedisCluster, ClusterNode
logging.disable(logging.CRITICAL)  # redis-py logs every MOVED it follows with a traceback
seeds = [ClusterNode(a.rsplit(':', 1)[0], int(a.rsplit(':', 1)[1])) for a in sys.argv[1].split(',')]
keys = sys.argv[2:4]
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
rc = None
while not stop.is_set():
    try:
        if rc is None:
            rc = RedisCluster(startup_nodes=seeds, socket_timeout=0.5, socket_connect_timeout=0.2)
    except Exception as e:
        print('err', -1, time.time_ns(), type(e).__name__, flush=True)
        time.sleep(0.1)
        continue
    for i, k in enumerate(keys):
        try:
            rc.execute_command('CL.THROTTLE', k, 1000000, 1000000, 1)
            print('ok', i, time.time_ns(), flush=True)
        except Exception as e:
            print('err', i, time.time_ns(), type(e).__name__, str(e).replace('\n', ' ')[:80], flush=True)
            time.sleep(0.05)
    time.sleep(0.01)
`

// haIoredisClient is the ioredis loop (argv as haPyClient's).
const haIoredisClient = `
const Redis = require('ioredis');
const seeds = process.argv[2].split(',').map(a => { const i = a.lastIndexOf(':'); return { host: a.slice(0, i), port: +a.slice(i + 1) }; });
const keys = process.argv.slice(3, 5);
const c = new Redis.Cluster(seeds, { redisOptions: { connectTimeout: 200, commandTimeout: 500, maxRetriesPerRequest: 1 },
  clusterRetryStrategy: () => 100, retryDelayOnClusterDown: 100, retryDelayOnTryAgain: 100, retryDelayOnFailover: 100 });
c.on('error', () => {});
let stop = false;
process.stdin.on('data', () => {});
process.stdin.on('end', () => { stop = true; });
const ns = () => (BigInt(Date.now()) * 1000000n).toString();
(async () => {
  while (!stop) {
    for (let i = 0; i < keys.length; i++) {
      try { await c.call('CL.THROTTLE', keys[i], 1000000, 1000000, 1); console.log('ok', i, ns()); }
      catch (e) { console.log('err', i, ns(), String(e.message).replace(/\n/g, ' ').slice(0, 80)); await new Promise(r => setTimeout(r, 50)); }
    }
    await new Promise(r => setTimeout(r, 10));
  }
  c.disconnect();
  process.exit(0);
})();
`

// foreignClient is one such loop running as a process.
type foreignClient struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	oks   [2][]time.Time
	errs  int
	last  string // the last error line
	// other counts lines that are neither (a client library's own
	// output, a crash's traceback); firstOther is the first.
	other      int
	firstOther string
	done       chan struct{}
}

func startForeignClient(t *testing.T, name string, cmd *exec.Cmd) *foreignClient {
	t.Helper()
	f := &foreignClient{name: name, cmd: cmd, done: make(chan struct{})}
	var err error
	if f.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() { f.stdin.Close(); cmd.Process.Kill(); <-f.done })
	go func() {
		defer close(f.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			f.mu.Lock()
			switch {
			case len(fs) == 3 && fs[0] == "ok":
				shard, _ := strconv.Atoi(fs[1])
				ns, _ := strconv.ParseInt(fs[2], 10, 64)
				if shard == 0 || shard == 1 {
					f.oks[shard] = append(f.oks[shard], time.Unix(0, ns))
				}
			case len(fs) > 0 && fs[0] == "err":
				f.errs++
				f.last = sc.Text()
			default:
				f.other++
				if f.firstOther == "" {
					f.firstOther = sc.Text()
				}
			}
			f.mu.Unlock()
		}
		cmd.Wait()
	}()
	return f
}

// stop ends the loop (its stdin closes) and waits for it, a few seconds
// at most.
func (f *foreignClient) stop() {
	f.stdin.Close()
	select {
	case <-f.done:
	case <-time.After(5 * time.Second):
		f.cmd.Process.Kill()
		<-f.done
	}
}

// answeredAfter reports whether shard was answered in [from, to).
func (f *foreignClient) answeredAfter(shard int, from, to time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, at := range f.oks[shard] {
		if !at.Before(from) && at.Before(to) {
			return true
		}
	}
	return false
}

func (f *foreignClient) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("%s: %d+%d answers, %d errors (last: %s); %d other lines (first: %s)",
		f.name, len(f.oks[0]), len(f.oks[1]), f.errs, f.last, f.other, f.firstOther)
}

// startForeignClients starts redis-py's and ioredis's loops against seeds
// when they are available: python3-redis (CI installs it; elsewhere its
// absence is logged) and ioredis (npm install into a temporary directory,
// bounded by a minute; a registry that cannot be reached is logged).
func startForeignClients(t *testing.T, seeds []string, keys [2]string) []*foreignClient {
	var out []*foreignClient
	py := ""
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "from redis.cluster import RedisCluster").Run() == nil {
			py = p
			break
		}
	}
	switch {
	case py != "":
		out = append(out, startForeignClient(t, "redis-py RedisCluster",
			exec.Command(py, "-c", haPyClient, strings.Join(seeds, ","), keys[0], keys[1])))
	case os.Getenv("CI") != "":
		t.Fatal("no python3 with redis.cluster: .ci/run installs python3-redis")
	default:
		t.Log("redis-py not driven: no python3 with redis.cluster (apt-get install python3-redis)")
	}
	if os.Getenv("CELLD_HA_IOREDIS") == "0" {
		return out
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Log("ioredis not driven: npm not installed")
		return out
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	npm := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--silent", "ioredis@5")
	npm.Dir = dir
	if b, err := npm.CombinedOutput(); err != nil {
		t.Logf("ioredis not driven: npm install failed (registry unreachable?): %v %s", err, b)
		return out
	}
	script := filepath.Join(dir, "client.js")
	if err := os.WriteFile(script, []byte(haIoredisClient), 0o644); err != nil {
		t.Fatal(err)
	}
	node := exec.Command("node", script, strings.Join(seeds, ","), keys[0], keys[1])
	node.Dir = dir
	return append(out, startForeignClient(t, "ioredis Cluster", node))
}
