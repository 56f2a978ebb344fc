package ha

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/ha/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// TestFailedCampaignCampaignsAnew is the fault-injection test of the
// failed-campaign fix (2fbb0a1). Shard 0 has members a and b; a leads. b's
// first campaign fails the way it does when etcd becomes unreachable while
// b waits: its key is already in etcd (Campaign puts it before it waits),
// and Campaign returns an error. Then a crashes (no resign, no revoke).
// etcd names the oldest key left, b's, leader once a's lease runs out; the
// shard must then be served, by b, within TTL + a few seconds. Without the
// fix the failed campaign's goroutine just ended: b's key was named leader
// with no goroutine left to report the win, so b stayed "named leader, not
// confirmed" (fenced) and the shard was never served again.
func TestFailedCampaignCampaignsAnew(t *testing.T) {
	e := etcdtest.Start(t)
	ms := members("a", "b")
	doc, err := InitDoc(1, 1, ms)
	if err != nil {
		t.Fatal(err)
	}
	if err := CreateDoc(context.Background(), newClient(t, e), "tc", doc); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	nodes := map[string]*testNode{}
	var injected atomic.Int32
	var failed atomic.Bool // the injected failure has been returned
	start := func(m Member, campaign func(context.Context, *concurrency.Election, *concurrency.Session, int, string) error) {
		cli := newClient(t, e)
		rec := &recorder{}
		n, err := Start(Config{Client: cli, Cluster: "tc", NodeID: m.ID, Addr: m.Addr, TTL: ttl,
			Apply: rec.apply, Replicator: rec, Log: slog.New(slog.NewTextHandler(rec, &slog.HandlerOptions{Level: slog.LevelDebug})),
			campaign: campaign})
		if err != nil {
			t.Fatal(err)
		}
		tn := &testNode{m.ID, cli, n, rec}
		nodes[m.ID] = tn
		t.Cleanup(func() {
			tn.n.Close()
			if t.Failed() {
				rec.mu.Lock()
				t.Logf("node %s:\n%s", tn.id, rec.log.String())
				rec.mu.Unlock()
			}
		})
	}
	start(ms[0], nil)
	waitFor(t, "a leads", 15*time.Second, func() bool {
		l, ok := leaderOf(nodes, 0, nil)
		return ok && l == "a"
	})
	start(ms[1], func(ctx context.Context, el *concurrency.Election, sess *concurrency.Session, shard int, val string) error {
		if injected.Add(1) > 1 {
			return el.Campaign(ctx, val)
		}
		// What Campaign does before it waits: its key, under its lease.
		k := fmt.Sprintf("%s/%x", electionKey("tc", shard), sess.Lease())
		cli := sess.Client()
		if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, val, clientv3.WithLease(sess.Lease()))).Commit(); err != nil {
			return err
		}
		// Then the wait fails: etcd became unreachable.
		failed.Store(true)
		return errors.New("injected: etcdserver: request timed out while waiting for the leader key's deletion")
	})
	waitFor(t, "b follows a, its first campaign failed", 10*time.Second, func() bool {
		bt := nodes["b"].rec.last()
		return failed.Load() && bt != nil && bt.ReplicaOf() != nil && bt.ReplicaOf().ID == ClusterID("a")
	})
	nodes["a"].crash()
	dead := map[string]bool{"a": true}
	took := waitFor(t, "b serves shard 0 after a crashed", ttl+5*time.Second, func() bool {
		l, ok := leaderOf(nodes, 0, dead)
		return ok && l == "b"
	})
	t.Logf("b served shard 0 %v after a crashed (TTL %v); b campaigned %d times", took, ttl, injected.Load())
	if injected.Load() < 2 {
		t.Errorf("b campaigned %d times: the failed campaign was not retried", injected.Load())
	}
	checkNoOverlap(t, nodes, 0)
}
