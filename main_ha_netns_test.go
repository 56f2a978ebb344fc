package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celld/celld/ha/etcdtest"
	"github.com/redis/go-redis/v9"
)

// haNetns is a network namespace for one HA member, joined to the host by
// two veth pairs: one its clients and peers use (host .1, namespace .2),
// one that carries only its etcd traffic (host .5, namespace .6). Taking
// the host end of the etcd pair down cuts the member from etcd alone: its
// packets to etcd are dropped without an error (a partition, not a reset),
// while clients and the other member still reach it.
type haNetns struct {
	name                 string
	clientHost, clientNS string // the client pair's addresses
	etcdHost             string // where the member's etcd proxy listens
	hostClient, hostEtcd string // the host ends' interface names
	subnet               int
}

// ipCmd runs ip(8) with args and returns its combined output.
func ipCmd(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// newHANetns makes the namespace and its two veth pairs, or skips the test
// when network namespaces cannot be made here (not root, no
// CAP_SYS_ADMIN/CAP_NET_ADMIN, no ip(8)). t.Cleanup deletes it (with its
// veth pairs); register it before starting processes inside, so that they
// are killed first.
func newHANetns(t *testing.T) *haNetns {
	t.Helper()
	pid := os.Getpid()
	n := &haNetns{name: fmt.Sprintf("celldha%d", pid), subnet: 20 + pid%200,
		hostClient: fmt.Sprintf("chc%d", pid%10_000_000), hostEtcd: fmt.Sprintf("che%d", pid%10_000_000)}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip(8) not found: the network-namespace test needs iproute2")
	}
	if out, err := ipCmd("netns", "add", n.name); err != nil {
		t.Skipf("cannot make a network namespace here (needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN): %v: %s", err, out)
	}
	t.Cleanup(func() { ipCmd("netns", "del", n.name) })
	base := fmt.Sprintf("10.213.%d.", n.subnet)
	n.clientHost, n.clientNS, n.etcdHost = base+"1", base+"2", base+"5"
	inNS := func(args ...string) []string { return append([]string{"netns", "exec", n.name, "ip"}, args...) }
	for _, args := range [][]string{
		{"link", "add", n.hostClient, "type", "veth", "peer", "name", "nsc"},
		{"link", "add", n.hostEtcd, "type", "veth", "peer", "name", "nse"},
		{"link", "set", "nsc", "netns", n.name},
		{"link", "set", "nse", "netns", n.name},
		{"addr", "add", base + "1/30", "dev", n.hostClient},
		{"addr", "add", base + "5/30", "dev", n.hostEtcd},
		{"link", "set", n.hostClient, "up"},
		{"link", "set", n.hostEtcd, "up"},
		inNS("addr", "add", base+"2/30", "dev", "nsc"),
		inNS("addr", "add", base+"6/30", "dev", "nse"),
		inNS("link", "set", "nsc", "up"),
		inNS("link", "set", "nse", "up"),
		inNS("link", "set", "lo", "up"),
	} {
		if out, err := ipCmd(args...); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return n
}

// setEtcdCut takes the host end of the etcd pair down (cut) or up (heal).
func (n *haNetns) setEtcdCut(t *testing.T, cut bool) {
	t.Helper()
	state := "up"
	if cut {
		state = "down"
	}
	if out, err := ipCmd("link", "set", n.hostEtcd, state); err != nil {
		t.Fatalf("ip link set %s %s: %v: %s", n.hostEtcd, state, err, out)
	}
}

// freeAddrOn is a free address on ip whose port + 10000 is a port too (the
// default replication address).
func freeAddrOn(t *testing.T, ip string) string {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		a := ln.Addr().String()
		ln.Close()
		_, ps, _ := net.SplitHostPort(a)
		if p, _ := strconv.Atoi(ps); p < 55000 {
			return a
		}
	}
}

// TestProcessHANetnsCut: issue #26's "a leader cut from etcd alone (own
// network namespace)". One shard, two members and a real etcd. The leader
// runs in its own network namespace (ip netns exec) and reaches etcd over a
// veth pair of its own, which the test takes down while go-redis
// ClusterClient load runs: clients and the follower still reach the
// leader, only etcd does not. The leader must stop answering within the
// lease TTL (self-fencing), the follower must take over within TTL + 1.5 s,
// the two must never both answer (the prober's intervals), the
// admissions around the cut must stay within the async bound
// b+1+⌈L/τ⌉, and once the link is back the old leader must follow the new
// one. TestProcessHA's cut uses a TCP proxy per node instead; this one
// cuts at the network layer, the way a real partition looks.
func TestProcessHANetnsCut(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and two celld processes, one in a network namespace")
	}
	ns := newHANetns(t)
	e := etcdtest.Start(t)
	etcdAddr := strings.TrimPrefix(e.Endpoint(), "http://")
	const ttl = 2 * time.Second
	// Not on loopback: protected mode would refuse the test's clients.
	nodeArgs := []string{"--replica-ack", "async", "--max-replica-lag", haLag.String(), "--protected-mode", "no"}
	h := &harness{t: t, keys: [2]string{"probeA", "probeB"}} // one shard: both keys are shard 0's
	inNS := &haMember{id: "ns", addr: net.JoinHostPort(ns.clientNS, "7380"), dir: t.TempDir(),
		proxy: newEtcdProxyOn(t, net.JoinHostPort(ns.etcdHost, "0"), etcdAddr), wrap: []string{"ip", "netns", "exec", ns.name}}
	onHost := &haMember{id: "host", addr: freeAddrOn(t, ns.clientHost), dir: t.TempDir(), proxy: newEtcdProxy(t, etcdAddr)}
	var nodes []string
	for _, m := range []*haMember{inNS, onHost} {
		m.probe = redis.NewClient(&redis.Options{Addr: m.addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond,
			ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, PoolSize: 2})
		t.Cleanup(func() { m.probe.Close() })
		h.members = append(h.members, m)
		nodes = append(nodes, m.id+"@"+m.addr)
	}
	out, err := exec.Command(celldBinary(t), "cluster", "init", "--etcd", e.Endpoint(), "--cluster", "h",
		"--shards", "1", "--replicas", "1", "--nodes", strings.Join(nodes, ",")).CombinedOutput()
	if err != nil {
		t.Fatalf("celld cluster init: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waitFor := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				for _, m := range h.members {
					t.Logf("%s log:\n%s", m.id, m.proc().logs)
				}
				t.Fatalf("%s: not within %v", what, limit)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	isReplica := func(m *haMember) bool {
		s, err := m.probe.Info(ctx, "cluster").Result()
		if err != nil || !strings.Contains(s, "cluster_role:replica") || !strings.Contains(s, "cluster_fenced:0") {
			return false
		}
		st, err := m.probe.Do(ctx, "CELLD.REPL", "STATUS").Text()
		return err == nil && strings.Contains(st, "synced:true")
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() { // the prober
		defer wg.Done()
		for ctx.Err() == nil {
			h.probeRound(ctx)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	// The member in the namespace starts first, so that it leads.
	start := time.Now()
	inNS.start(t, ttl, nodeArgs...)
	if who, _ := h.waitServed(0, -1, start, 20*time.Second); who != 0 {
		t.Fatalf("member %d leads, want the one in the namespace", who)
	}
	onHost.start(t, ttl, nodeArgs...)
	waitFor("the host member follows", 20*time.Second, func() bool { return isReplica(onHost) })

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{inNS.addr, onHost.addr}, MaxRedirects: 8, MaxRetries: 8,
		MinRetryBackoff: 50 * time.Millisecond, MaxRetryBackoff: 500 * time.Millisecond,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { cc.Close() })
	load := startHALoad(ctx, [4]haDoer{cc, cc, cc, cc}, 26, "steady state (before the cut)", nil, nil)
	waitFor("client load flows", 10*time.Second, func() bool { return load.ok.Load() > 100 })
	time.Sleep(time.Second)
	load.newPhase("netns cut from etcd (ns, shard 0)")
	time.Sleep(time.Second) // the leader admits on the cut phase's keys first

	cutAt := time.Now()
	ns.setEtcdCut(t, true)
	_, at := h.waitServed(0, 0, cutAt, 4*ttl)
	failover := at.Sub(cutAt)
	waitFor("the cut leader stops answering", 2*ttl, func() bool {
		who, _ := h.servingNow(0, time.Now().Add(-100*time.Millisecond))
		return who == 1
	})
	// When did the cut leader answer last? Counted from when the prober
	// sent the last probe it answered (it answered at or after that), not
	// when the reply came back, which a loaded machine delays.
	var lastServed time.Time
	h.mu.Lock()
	for _, p := range h.probes {
		if p.node == 0 && p.served && p.at.After(cutAt) && p.at.After(lastServed) {
			lastServed = p.at
		}
	}
	h.mu.Unlock()
	fenced := max(lastServed.Sub(cutAt), 0)
	t.Logf("leader cut from etcd in its own network namespace: it answered a probe sent %v after the cut, the follower took over after %v (TTL %v)",
		fenced.Round(time.Millisecond), failover.Round(time.Millisecond), ttl)
	if fenced > ttl {
		t.Errorf("the cut leader still answered a probe sent %v after the cut: over the lease TTL %v", fenced, ttl)
	}
	if failover > ttl+1500*time.Millisecond {
		t.Errorf("failover took %v: over TTL + 1.5 s", failover)
	}
	time.Sleep(time.Second) // the clients spend the cut phase's keys on the new leader
	ns.setEtcdCut(t, false)
	healed := time.Now()
	waitFor("the old leader follows once its link to etcd is back", 20*time.Second, func() bool { return isReplica(inNS) })
	t.Logf("link back: the old leader follows the new one after %v", time.Since(healed).Round(time.Millisecond))
	okBefore := load.ok.Load()
	waitFor("client load flows after the heal", 10*time.Second, func() bool { return load.ok.Load() > okBefore+100 })

	cancel()
	wg.Wait()
	load.wg.Wait()
	bad := h.overlaps()
	t.Logf("probes: %d; intervals with two members answering for the shard: %d; client calls ok %d, failed after retries %d",
		len(h.probes), len(bad), load.ok.Load(), load.failed.Load())
	for _, b := range bad {
		t.Error("two members answered for one shard: " + b)
	}
	bound := haBurst + 1 + int(math.Ceil(float64(haLag)/float64(haTau)))
	for _, r := range load.overAdmission() {
		t.Logf("%-36s worst key %-8s over-admitted %d (bound %d)", r.fault, r.key, r.over, bound)
		if r.over > bound {
			t.Errorf("%s: key %s over-admitted %d, over the bound %d", r.fault, r.key, r.over, bound)
		}
	}
	if t.Failed() || os.Getenv("CELLD_HA_LOGS") != "" {
		for _, m := range h.members {
			t.Logf("%s log:\n%s", m.id, m.proc().logs)
		}
	}
}
