package ha

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/ha/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// applied is one topology a node installed, and when.
type applied struct {
	at   time.Time
	topo *cluster.Topology
}

// recorder stands in for a server (Apply) and a replication stream
// (Replicator) of one node, and remembers what it was told.
type recorder struct {
	mu     sync.Mutex
	topos  []applied
	events []string
	log    strings.Builder // the node's slog output and timed events
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.Write(p)
}

func (r *recorder) apply(t *cluster.Topology) {
	r.mu.Lock()
	r.topos = append(r.topos, applied{time.Now(), t})
	fmt.Fprintf(&r.log, "%s apply %v deadline=%s\n", time.Now().Format(time.StampMicro), t, t.Deadline().Format(time.StampMicro))
	r.mu.Unlock()
}
func (r *recorder) Lead(shard int, epoch uint64) {
	r.event(fmt.Sprintf("lead %d %d", shard, epoch))
}
func (r *recorder) Follow(shard int, epoch uint64, addr string) {
	r.event(fmt.Sprintf("follow %d %d %s", shard, epoch, addr))
}
func (r *recorder) Fence() { r.event("fence") }
func (r *recorder) event(e string) {
	r.mu.Lock()
	r.events = append(r.events, e)
	fmt.Fprintf(&r.log, "%s event %s\n", time.Now().Format(time.StampMicro), e)
	r.mu.Unlock()
}

func (r *recorder) last() *cluster.Topology {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.topos) == 0 {
		return nil
	}
	return r.topos[len(r.topos)-1].topo
}

// serving returns the intervals in which this node served slot: from each
// topology that owns it to the next topology or its deadline, whichever is
// first (the server fences itself at the deadline: TestHADeadlineFences).
func (r *recorder) serving(slot int, now time.Time) [][2]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][2]time.Time
	for i, a := range r.topos {
		if !a.topo.Owns(slot) {
			continue
		}
		end := now
		if i+1 < len(r.topos) {
			end = r.topos[i+1].at
		}
		if d := a.topo.Deadline(); !d.IsZero() && d.Before(end) {
			end = d
		}
		if end.After(a.at) {
			out = append(out, [2]time.Time{a.at, end})
		}
	}
	return out
}

type testNode struct {
	id  string
	cli *clientv3.Client
	n   *Node
	rec *recorder
}

func startNodes(t *testing.T, e *etcdtest.Etcd, clusterName string, members []Member, ttl time.Duration) map[string]*testNode {
	t.Helper()
	nodes := map[string]*testNode{}
	for _, m := range members {
		cli := newClient(t, e)
		rec := &recorder{}
		n, err := Start(Config{Client: cli, Cluster: clusterName, NodeID: m.ID, Addr: m.Addr, TTL: ttl,
			Apply: rec.apply, Replicator: rec, Log: slog.New(slog.NewTextHandler(rec, &slog.HandlerOptions{Level: slog.LevelDebug}))})
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
	return nodes
}

// crash stops a node as kill -9 would: its etcd connection goes first, so
// it neither resigns nor revokes; its lease runs out in etcd.
func (tn *testNode) crash() {
	tn.n.crashed.Store(true)
	tn.cli.Close()
	tn.n.Close()
}

// leaderOf returns the node whose last topology serves slot, if exactly one
// does and every live node agrees on it.
func leaderOf(nodes map[string]*testNode, slot int, dead map[string]bool) (string, bool) {
	leader := ""
	for id, tn := range nodes {
		if dead[id] {
			continue
		}
		t := tn.rec.last()
		if t == nil {
			return "", false
		}
		if t.Owns(slot) {
			if leader != "" {
				return "", false
			}
			leader = id
		}
	}
	if leader == "" {
		return "", false
	}
	want := ClusterID(leader)
	for id, tn := range nodes {
		if dead[id] {
			continue
		}
		if o := tn.rec.last().Owner(slot); o == nil || o.ID != want {
			return "", false
		}
	}
	return leader, true
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// checkNoOverlap fails when two nodes served slot at the same instant.
func checkNoOverlap(t *testing.T, nodes map[string]*testNode, slot int) {
	t.Helper()
	now := time.Now()
	type iv struct {
		id string
		iv [2]time.Time
	}
	var all []iv
	for id, tn := range nodes {
		for _, x := range tn.rec.serving(slot, now) {
			all = append(all, iv{id, x})
		}
	}
	for i := range all {
		for j := range all {
			a, b := all[i], all[j]
			if a.id != b.id && a.iv[0].Before(b.iv[1]) && b.iv[0].Before(a.iv[1]) {
				t.Errorf("slot %d served by %s [%v, %v] and %s [%v, %v] at once", slot, a.id, a.iv[0].Format(time.StampMicro), a.iv[1].Format(time.StampMicro), b.id, b.iv[0].Format(time.StampMicro), b.iv[1].Format(time.StampMicro))
			}
		}
	}
}

func members(ids ...string) []Member {
	var ms []Member
	for i, id := range ids {
		m, err := ParseMember(fmt.Sprintf("%s@127.0.0.1:%d", id, 7001+i))
		if err != nil {
			panic(err)
		}
		ms = append(ms, m)
	}
	return ms
}

// TestNodesElectAndFailover: 2 shards × 2 members elect one leader per
// shard, every node routes by the same primaries, followers are told their
// leader's replication address; a crashed leader (no resign, no revoke) is
// replaced once its lease runs out, at a higher epoch, and no two nodes
// ever serve one slot at once.
func TestNodesElectAndFailover(t *testing.T) {
	e := etcdtest.Start(t)
	ms := members("a", "b", "c", "d")
	doc, err := InitDoc(2, 1, ms)
	if err != nil {
		t.Fatal(err)
	}
	cli := newClient(t, e)
	ctx := context.Background()
	if err := CreateDoc(ctx, cli, "t1", doc); err != nil {
		t.Fatal(err)
	}
	if err := CreateDoc(ctx, cli, "t1", doc); err != ErrDocExists {
		t.Fatalf("second init: %v", err)
	}
	const ttl = 2 * time.Second
	nodes := startNodes(t, e, "t1", ms, ttl)
	dead := map[string]bool{}
	var l0, l1 string
	waitFor(t, "a leader per shard", 15*time.Second, func() bool {
		var ok0, ok1 bool
		l0, ok0 = leaderOf(nodes, 0, dead)
		l1, ok1 = leaderOf(nodes, 16383, dead)
		return ok0 && ok1
	})
	if s, _ := doc.Find(l0); s != 0 {
		t.Fatalf("shard 0 led by %s, a member of shard %d", l0, s)
	}
	top := nodes[l0].rec.last()
	if top.SlotsAssigned() != cluster.SlotCount || len(top.Nodes()) != 4 || top.Epoch() == 0 {
		t.Fatalf("topology: %v", top)
	}
	follower := map[string]string{"a": "b", "b": "a", "c": "d", "d": "c"}[l0]
	waitFor(t, "follower told", 5*time.Second, func() bool {
		ft := nodes[follower].rec.last()
		return ft.ReplicaOf() != nil && ft.ReplicaOf().ID == ClusterID(l0)
	})
	_, lm := doc.Find(l0)
	nodes[follower].rec.mu.Lock()
	evs := fmt.Sprint(nodes[follower].rec.events)
	nodes[follower].rec.mu.Unlock()
	if want := fmt.Sprintf("follow 0 %d %s", top.Self().Epoch, lm.ReplAddr); !contains(evs, want) {
		t.Errorf("follower events %s, want %q", evs, want)
	}
	oldEpoch := nodes[l0].rec.last().Self().Epoch

	nodes[l0].crash()
	dead[l0] = true
	took := waitFor(t, "failover", 3*ttl, func() bool {
		l, ok := leaderOf(nodes, 0, dead)
		return ok && l == follower
	})
	t.Logf("failover after a crash: %v (TTL %v)", took, ttl)
	if took > ttl+1500*time.Millisecond {
		t.Errorf("failover took %v, over TTL + 1.5 s", took)
	}
	if took < ttl/2 {
		t.Errorf("failover after %v: before the crashed leader's lease could expire", took)
	}
	if ne := nodes[follower].rec.last().Self().Epoch; ne <= oldEpoch {
		t.Errorf("new epoch %d not above %d", ne, oldEpoch)
	}
	for _, slot := range []int{0, 8191, 8192, 16383} {
		checkNoOverlap(t, nodes, slot)
	}
	// The other shard did not move.
	if l, ok := leaderOf(nodes, 16383, dead); !ok || l != l1 {
		t.Errorf("shard 1 leader %s %v, was %s", l, ok, l1)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestLeaderFencesWhenEtcdStops: etcd killed, every leader stops serving
// by its lease deadline (last keepalive + TTL - margin) and is told to
// Fence; etcd back, the shard has a leader again, and at no instant did
// two nodes serve one slot.
func TestLeaderFencesWhenEtcdStops(t *testing.T) {
	e := etcdtest.Start(t)
	ms := members("a", "b")
	doc, _ := InitDoc(1, 1, ms)
	if err := CreateDoc(context.Background(), newClient(t, e), "t2", doc); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	nodes := startNodes(t, e, "t2", ms, ttl)
	var leader string
	waitFor(t, "a leader", 15*time.Second, func() bool {
		var ok bool
		leader, ok = leaderOf(nodes, 0, nil)
		return ok
	})
	stopped := time.Now()
	e.Stop()
	took := waitFor(t, "the leader fences", 2*ttl, func() bool {
		return nodes[leader].rec.last().Fenced()
	})
	t.Logf("leader fenced %v after etcd stopped (TTL %v)", took, ttl)
	for id, tn := range nodes {
		for _, iv := range tn.rec.serving(0, time.Now()) {
			if iv[1].After(stopped.Add(ttl)) {
				t.Errorf("%s served until %v after etcd stopped, past the TTL", id, iv[1].Sub(stopped))
			}
		}
	}
	e.Restart(t)
	took = waitFor(t, "a leader after etcd returns", 20*time.Second, func() bool {
		_, ok := leaderOf(nodes, 0, nil)
		return ok
	})
	t.Logf("served again %v after etcd restarted", took)
	checkNoOverlap(t, nodes, 0)
	nodes[leader].rec.mu.Lock()
	evs := fmt.Sprint(nodes[leader].rec.events)
	nodes[leader].rec.mu.Unlock()
	if !contains(evs, "fence") {
		t.Errorf("leader's events %s: no fence", evs)
	}
}

// TestMoveSlotsLive: move-slots on a running cluster takes the slots from
// their shard, waits for every node to confirm, then gives them to the new
// one: the new leader serves them, and at no instant did both leaders.
func TestMoveSlotsLive(t *testing.T) {
	e := etcdtest.Start(t)
	ms := members("a", "b")
	doc, _ := InitDoc(2, 0, ms)
	cli := newClient(t, e)
	if err := CreateDoc(context.Background(), cli, "t3", doc); err != nil {
		t.Fatal(err)
	}
	nodes := startNodes(t, e, "t3", ms, 2*time.Second)
	waitFor(t, "leaders", 15*time.Second, func() bool {
		a, ok1 := leaderOf(nodes, 0, nil)
		b, ok2 := leaderOf(nodes, 16383, nil)
		return ok1 && ok2 && a == "a" && b == "b"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	d, err := MoveSlots(ctx, cli, "t3", 0, 99, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("move-slots 0-99 took %v", time.Since(start))
	if s := d.Shards[1].Slots; len(s) != 2 || s[0] != (cluster.SlotRange{First: 0, Last: 99}) {
		t.Fatalf("document: %s", d.Marshal())
	}
	waitFor(t, "b serves slot 0", 5*time.Second, func() bool {
		l, ok := leaderOf(nodes, 0, nil)
		return ok && l == "b"
	})
	if l, ok := leaderOf(nodes, 100, nil); !ok || l != "a" {
		t.Errorf("slot 100: %s %v", l, ok)
	}
	checkNoOverlap(t, nodes, 0)
	checkNoOverlap(t, nodes, 99)
	if _, err := MoveSlots(ctx, cli, "t3", 0, 99, 5); !errors.Is(err, ErrBadCommand) {
		t.Errorf("move to shard 5: %v", err)
	}
}
