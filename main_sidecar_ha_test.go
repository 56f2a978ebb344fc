package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/ha/etcdtest"
	"github.com/redis/go-redis/v9"
)

// TestProcessSidecarHAFailover (issues #18 and #26, docs/sidecar-ha.md): a
// sidecar (--upstream, fallback local) in front of an HA cluster (2 shards
// × 2 members, async replication, real etcd), plain go-redis Clients
// through the sidecar, and the leader of each shard killed -9 in turn.
// For each kill it measures the calls that failed after the client's
// retries (must be 0: the sidecar answers by its fallback while the shard
// has no leader), the fallback decisions, and the time until the sidecar
// forwards the shard's keys to the new leader (its topology names the new
// leader, up, and the fallback count stops growing: must happen, within
// 10 s of the new leader serving). It replays every admission against
// GCRA's limit (overAdmission) and bounds each key's over-admission by
// what the fallback (a fresh local state for the failover's duration) and
// async replication's lag can each grant. Then etcd is stopped for about
// 5 s (every leader fences and answers TRYAGAIN) and restarted: no call
// may fail after the client's retries (the local fallback decides once
// the owners have refused for longer than --upstream-timeout), and the
// sidecar must forward again. CELLD_SIDECAR_HA_KILLS sets the number of
// kills (default 2, one per shard: about 35 s in all).
func TestProcessSidecarHAFailover(t *testing.T) {
	t0 := time.Now()
	e := etcdtest.Start(t)
	const ttl = 2 * time.Second
	nodeArgs := []string{"--replica-ack", "async", "--max-replica-lag", haLag.String()}
	kills := 2
	if v, err := strconv.Atoi(os.Getenv("CELLD_SIDECAR_HA_KILLS")); err == nil && v > 0 {
		kills = v
	}
	h := &harness{t: t}
	var nodes, addrs []string
	for i := range 4 {
		m := &haMember{id: "n" + strconv.Itoa(i), addr: lowAddr(t), dir: t.TempDir(), proxy: newEtcdProxy(t, strings.TrimPrefix(e.Endpoint(), "http://"))}
		m.probe = redis.NewClient(&redis.Options{Addr: m.addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond,
			ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, PoolSize: 2})
		t.Cleanup(func() { m.probe.Close() })
		h.members = append(h.members, m)
		nodes = append(nodes, m.id+"@"+m.addr)
		addrs = append(addrs, m.addr)
	}
	for i := 0; h.keys[0] == "" || h.keys[1] == ""; i++ {
		k := "probe" + strconv.Itoa(i)
		h.keys[cluster.KeySlotString(k)/8192] = k
	}
	out, err := exec.Command(celldBinary(t), "cluster", "init", "--etcd", e.Endpoint(), "--cluster", "h",
		"--shards", "2", "--replicas", "1", "--nodes", strings.Join(nodes, ",")).CombinedOutput()
	if err != nil {
		t.Fatalf("celld cluster init: %v\n%s", err, out)
	}
	t.Logf("%v: etcd up, cluster initialised", time.Since(t0).Round(time.Millisecond))
	for _, m := range h.members {
		m.start(t, ttl, nodeArgs...)
	}
	t.Logf("%v: members started", time.Since(t0).Round(time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the prober: which member serves each shard
		defer wg.Done()
		for ctx.Err() == nil {
			h.probeRound(ctx)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	start := time.Now()
	h.waitServed(0, -1, start, 20*time.Second)
	h.waitServed(1, -1, start, 20*time.Second)
	t.Logf("%v: both shards served", time.Since(t0).Round(time.Millisecond))

	side := mustLaunch(t, t.TempDir(), "--persist", "no", "--upstream", strings.Join(addrs, ","))
	sinfo := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1})
	t.Cleanup(func() { sinfo.Close() })
	upstream := func() string {
		s, err := sinfo.Info(ctx, "upstream").Result()
		if err != nil {
			t.Fatalf("INFO upstream of the sidecar: %v", err)
		}
		return s
	}
	field := func(info, name string) int64 {
		m := regexp.MustCompile(`(?m)^` + name + `:(\d+)`).FindStringSubmatch(info)
		if m == nil {
			t.Fatalf("INFO upstream has no %s:\n%s", name, info)
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}
	// ownerUp: the sidecar's topology gives addr the shard's 8192 slots,
	// and addr is up.
	ownerUp := func(info, addr string) bool {
		return regexp.MustCompile(`(?m)^owner\d+:addr=` + regexp.QuoteMeta(addr) + `,state=up,slots=8192,`).MatchString(info)
	}
	waitFor := func(what string, limit time.Duration, cond func() bool) time.Time {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v; sidecar INFO upstream:\n%s\nsidecar log:\n%s", what, limit, upstream(), side.logs)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Now()
	}
	waitFor("the sidecar reads the HA topology", 10*time.Second, func() bool {
		in := upstream()
		return ownerUp(in, h.members[h.currentLeader(0)].addr) && ownerUp(in, h.members[h.currentLeader(1)].addr)
	})

	// Load: plain go-redis Clients (no cluster support) through the
	// sidecar, with go-redis's default retry policy for TRYAGAIN and
	// friends, as an application would run them.
	var errMu sync.Mutex
	errs := map[string]int{}
	var clients [4]haDoer
	for g := range clients {
		c := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: 8, MinRetryBackoff: 50 * time.Millisecond,
			MaxRetryBackoff: 500 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
		t.Cleanup(func() { c.Close() })
		clients[g] = c
	}
	load := startHALoad(ctx, clients, 2, "steady state (before any fault)", func(err error) {
		errMu.Lock()
		errs[err.Error()]++
		errMu.Unlock()
	}, nil)
	ok, failed := &load.ok, &load.failed
	waitFor("client load flows through the sidecar", 10*time.Second, func() bool { return ok.Load() > 100 })
	t.Logf("%v: load flows through the sidecar", time.Since(t0).Round(time.Millisecond))
	if n := field(upstream(), "upstream_fallback_local"); n != 0 {
		t.Fatalf("%d fallback decisions before any fault", n)
	}
	isReplica := func(m *haMember) bool {
		s, err := m.probe.Info(ctx, "cluster").Result()
		if err != nil || !strings.Contains(s, "cluster_role:replica") || !strings.Contains(s, "cluster_fenced:0") {
			return false
		}
		st, err := m.probe.Do(ctx, "CELLD.REPL", "STATUS").Text()
		return err == nil && strings.Contains(st, "synced:true")
	}

	type killFig struct {
		shard                 int
		failover, resume      time.Duration // kill → new leader serves; kill → the sidecar forwards to it
		fallbacks, failedCall int64
	}
	var figs []killFig
	var fallbackSpan []time.Duration // per phase (index = phase): kill → forwarding resumed
	fallbackSpan = append(fallbackSpan, 0)
	for i := range kills {
		s := i % 2
		leader := h.currentLeader(s)
		m := h.members[leader]
		// Fresh keys a second before the kill (one phase per fault).
		time.Sleep(time.Second)
		load.newPhase(fmt.Sprintf("kill -9 #%d (%s, shard %d) through the sidecar", i+1, m.id, s))
		time.Sleep(time.Second)
		fb0, failed0 := field(upstream(), "upstream_fallback_local"), failed.Load()
		killed := time.Now()
		m.proc().kill()
		nl, servedAt := h.waitServed(s, leader, killed, 4*ttl)
		newAddr := h.members[nl].addr
		// Forwarding resumed: the sidecar's topology names the new
		// leader, up, and no fallback decision is made over the next
		// 300 ms (liveness bound: 10 s after the new leader serves).
		var resumed time.Time
		waitFor(fmt.Sprintf("kill #%d: the sidecar forwards shard %d to the new leader %s", i+1, s, newAddr), 10*time.Second+time.Until(servedAt), func() bool {
			in := upstream()
			if !ownerUp(in, newAddr) {
				return false
			}
			if resumed.IsZero() {
				resumed = time.Now()
			}
			a := field(in, "upstream_fallback_local")
			time.Sleep(300 * time.Millisecond)
			if b := field(upstream(), "upstream_fallback_local"); b != a {
				resumed = time.Time{}
				return false
			}
			return true
		})
		f := killFig{shard: s, failover: servedAt.Sub(killed), resume: resumed.Sub(killed),
			fallbacks: field(upstream(), "upstream_fallback_local") - fb0, failedCall: failed.Load() - failed0}
		figs = append(figs, f)
		fallbackSpan = append(fallbackSpan, f.resume)
		t.Logf("kill -9 #%d (shard %d, %s → %s): new leader serves after %v, the sidecar forwards to it after %v; %d fallback decisions, %d failed calls",
			i+1, s, m.addr, newAddr, f.failover.Round(time.Millisecond), f.resume.Round(time.Millisecond), f.fallbacks, f.failedCall)
		t.Logf("%v: kill #%d measured", time.Since(t0).Round(time.Millisecond), i+1)
		m.start(t, ttl, nodeArgs...)
		waitFor(m.id+" back as a replica", 15*time.Second, func() bool { return isReplica(m) })
		t.Logf("%v: %s back as a replica", time.Since(t0).Round(time.Millisecond), m.id)
	}

	// etcd stopped: every leader fences (-TRYAGAIN for its slots, unrun)
	// until etcd is back. Through the sidecar the local fallback decides
	// meanwhile (docs/ha.md, "etcd down"), once an owner has refused
	// everything for longer than --upstream-timeout: no call fails after
	// the client's retries. Before session 19 the sidecar relayed the
	// owners' TRYAGAIN for as long as etcd was down, and every call
	// failed once go-redis's retries (8, 50-500 ms apart) ran out.
	time.Sleep(time.Second)
	load.newPhase("etcd stopped, through the sidecar")
	time.Sleep(time.Second)
	fb0, failed0, ref0 := field(upstream(), "upstream_fallback_local"), failed.Load(), field(upstream(), "upstream_refused")
	etcdStopped := time.Now()
	e.Stop()
	waitFor("every leader fenced after etcd stopped", 4*ttl, func() bool { return h.noneServes(time.Now()) })
	fencedAt := time.Now()
	time.Sleep(3500 * time.Millisecond) // longer than the clients' retries (about 2.75 s of backoff)
	e.Restart(t)
	back := time.Now()
	h.waitServed(0, -1, back, 20*time.Second)
	h.waitServed(1, -1, back, 20*time.Second)
	var resumed time.Time
	waitFor("the sidecar forwards again after etcd's restart", 20*time.Second, func() bool {
		a := field(upstream(), "upstream_fallback_local")
		time.Sleep(300 * time.Millisecond)
		resumed = time.Now()
		return field(upstream(), "upstream_fallback_local") == a
	})
	fallbackSpan = append(fallbackSpan, resumed.Sub(etcdStopped))
	etcdFallbacks, etcdFailed := field(upstream(), "upstream_fallback_local")-fb0, failed.Load()-failed0
	etcdRefused := field(upstream(), "upstream_refused") - ref0
	t.Logf("etcd stopped: leaders fenced after %v, etcd back after %v, the sidecar forwards again %v after the restart; "+
		"%d fallback decisions (%d of them refused by a fenced owner), %d failed calls",
		fencedAt.Sub(etcdStopped).Round(time.Millisecond), back.Sub(etcdStopped).Round(time.Millisecond),
		resumed.Sub(back).Round(time.Millisecond), etcdFallbacks, etcdRefused, etcdFailed)
	if etcdFailed != 0 {
		t.Errorf("etcd stopped: %d calls through the sidecar failed after the client's retries (the owners' TRYAGAIN relayed, not the local fallback)", etcdFailed)
	}
	if etcdRefused == 0 {
		t.Errorf("etcd stopped: no refused decision was answered by the fallback")
	}

	time.Sleep(time.Second) // the last fault's keys
	cancel()
	load.wg.Wait()
	wg.Wait()

	errMu.Lock()
	t.Logf("client calls through the sidecar: ok %d, failed after retries %d %v", ok.Load(), failed.Load(), errs)
	errMu.Unlock()
	if failed.Load() != 0 {
		t.Errorf("%d calls through the sidecar failed after the client's retries: %v", failed.Load(), errs)
	}
	if l := side.logs.String(); strings.Contains(l, "panic") {
		t.Errorf("the sidecar logged a panic (a slot without an owner during the failover crashed a connection before session 19)")
	}
	for i, f := range figs {
		if f.fallbacks == 0 {
			t.Errorf("kill #%d: no fallback decision while shard %d had no leader: the test did not see the failover", i+1, f.shard)
		}
	}

	// Over-admission per key per failover: the fallback decides a key
	// from the sidecar's own, fresh state for the failover's span D
	// (up to b+1+⌊D/τ⌋ more), and the new leader may lack the last L of
	// the old one's admissions (async: up to b+1+⌈L/τ⌉ more).
	for ph, r := range load.overAdmission() {
		bound := 0
		if ph > 0 {
			bound = haBurst + 1 + int(fallbackSpan[ph]/haTau) + haBurst + 1 + int(math.Ceil(float64(haLag)/float64(haTau)))
		}
		t.Logf("%-48s worst key %-10s over-admitted %d (bound %d)", r.fault, r.key, r.over, bound)
		if r.over > bound {
			t.Errorf("%s: key %s over-admitted %d, over the bound %d", r.fault, r.key, r.over, bound)
		}
	}
	if t.Failed() || os.Getenv("CELLD_HA_LOGS") != "" {
		t.Logf("sidecar log:\n%s", side.logs)
		for _, m := range h.members {
			t.Logf("%s log:\n%s", m.id, m.proc().logs)
		}
	}
}
