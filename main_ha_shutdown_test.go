package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/ha/etcdtest"
	"github.com/redis/go-redis/v9"
)

// TestProcessHASIGTERMWithinGrace: issue #14's "SIGTERM always exits
// within --shutdown-grace" holds in HA mode too, when etcd cannot be
// reached (the node's path to etcd cut, silent): stepping down (fence,
// resign, revoke the lease, waiting up to 2 s for etcd) is part of the
// grace, not added before it.
func TestProcessHASIGTERMWithinGrace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and a celld process")
	}
	e := etcdtest.Start(t)
	const grace = time.Second
	m := &haMember{id: "a", addr: lowAddr(t), dir: t.TempDir(), proxy: newEtcdProxy(t, strings.TrimPrefix(e.Endpoint(), "http://"))}
	out, err := exec.Command(celldBinary(t), "cluster", "init", "--etcd", e.Endpoint(), "--cluster", "h",
		"--shards", "1", "--replicas", "0", "--nodes", m.id+"@"+m.addr).CombinedOutput()
	if err != nil {
		t.Fatalf("celld cluster init: %v\n%s", err, out)
	}
	m.start(t, 2*time.Second, "--shutdown-grace", grace.String())
	rdb := redis.NewClient(&redis.Options{Addr: m.addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(20 * time.Second)
	for rdb.Do(context.Background(), "CL.THROTTLE", "k", 10, 10, 60, 1).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("not serving within 20 s; log:\n%s", m.proc().logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("serving %v after the start", time.Since(m.proc().started).Round(time.Millisecond))
	m.proxy.setCut(true)
	time.Sleep(300 * time.Millisecond)
	code, took := m.proc().term()
	t.Logf("SIGTERM with etcd unreachable, --shutdown-grace %v: exit %d after %v", grace, code, took.Round(time.Millisecond))
	if took > grace+500*time.Millisecond {
		t.Errorf("SIGTERM took %v with --shutdown-grace %v; log:\n%s", took, grace, m.proc().logs)
	}
}
