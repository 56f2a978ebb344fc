package server

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/cluster"
)

// haTopology is three nodes: n0 primary of 0-8191 with replica n1, n2
// primary of 8192-16383 (none when noB); self is this node's index.
func haTopology(t *testing.T, self int, noB bool) *cluster.Topology {
	t.Helper()
	id := func(i int) string { return cluster.DeriveID("ha test " + strconv.Itoa(i)) }
	nodes := []cluster.Node{
		{ID: id(0), Host: "127.0.0.1", Port: 7000, Slots: []cluster.SlotRange{{First: 0, Last: 8191}}, Epoch: 11},
		{ID: id(1), Host: "127.0.0.1", Port: 7001, Role: cluster.RoleReplica, MasterID: id(0), Epoch: 11},
		{ID: id(2), Host: "127.0.0.1", Port: 7002, Slots: []cluster.SlotRange{{First: 8192, Last: 16383}}, Epoch: 12},
	}
	if noB {
		nodes[2].Slots = nil
	}
	topo, err := cluster.New(nodes, self, 12)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// keyIn returns a key whose slot is in [first, last].
func keyIn(first, last int) string {
	for i := 0; ; i++ {
		k := "k" + strconv.Itoa(i)
		if s := cluster.KeySlotString(k); s >= first && s <= last {
			return k
		}
	}
}

func roundTrip(t *testing.T, r *rawConn, args ...string) string {
	t.Helper()
	r.send(args)
	got, err := r.reply()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return got
}

// TestHARouting: a replica answers MOVED to its primary for writes, and for
// reads until READONLY; after READONLY it serves reads of its primary's
// slots (only those); READWRITE ends that. Swapping the topology at runtime
// (SetTopology) makes it the primary; fenced, it answers TRYAGAIN for its
// slots and MOVED for others; a slot without a primary answers CLUSTERDOWN.
func TestHARouting(t *testing.T) {
	topo := haTopology(t, 1, false)
	s, addr := startServerConfig(t, nil, Config{Cluster: topo})
	r := dial(t, addr)
	a, b := keyIn(0, 8191), keyIn(8192, 16383)
	slotA, slotB := strconv.Itoa(cluster.KeySlotString(a)), strconv.Itoa(cluster.KeySlotString(b))
	steps := []struct{ cmd, want string }{
		{"set " + a + " 1", "-MOVED " + slotA + " 127.0.0.1:7000"},
		{"get " + a, "-MOVED " + slotA + " 127.0.0.1:7000"},
		{"readonly", "+OK"},
		{"get " + a, "$-1"},
		{"set " + a + " 1", "-MOVED " + slotA + " 127.0.0.1:7000"},
		{"get " + b, "-MOVED " + slotB + " 127.0.0.1:7002"},
		{"readwrite", "+OK"},
		{"get " + a, "-MOVED " + slotA + " 127.0.0.1:7000"},
		{"readonly", "+OK"},
		{"reset", "+RESET"},
		{"get " + a, "-MOVED " + slotA + " 127.0.0.1:7000"},
	}
	run := func(phase string) {
		t.Helper()
		for i, st := range steps {
			if got := roundTrip(t, r, strings.Fields(st.cmd)...); got != st.want {
				t.Errorf("%s step %d: %s: %q, want %q", phase, i, st.cmd, got, st.want)
			}
		}
	}
	run("replica")

	s.SetTopology(haTopology(t, 0, false)) // failover: this node leads shard A
	steps = []struct{ cmd, want string }{
		{"set " + a + " 1", "+OK"},
		{"get " + a, "1"},
		{"get " + b, "-MOVED " + slotB + " 127.0.0.1:7002"},
	}
	run("primary")

	s.SetTopology(s.Topology().AsFenced())
	steps = []struct{ cmd, want string }{
		{"set " + a + " 2", "-" + errFenced},
		{"get " + a, "-" + errFenced},
		{"get " + b, "-MOVED " + slotB + " 127.0.0.1:7002"},
		{"readonly", "+OK"},
		{"get " + a, "-" + errFenced},
		{"readwrite", "+OK"},
	}
	run("fenced")

	s.SetTopology(haTopology(t, 0, true)) // shard B has no leader
	steps = []struct{ cmd, want string }{
		{"get " + a, "1"},
		{"get " + b, "-" + errSlotUnowned},
	}
	run("unowned")
	if got := roundTrip(t, r, "cluster", "info"); !strings.Contains(got, "cluster_state:fail") || !strings.Contains(got, "cluster_slots_assigned:8192") {
		t.Errorf("CLUSTER INFO with unowned slots: %q", got)
	}
}

// TestHADeadlineFences: a topology whose lease deadline has passed is
// fenced by the server itself before it runs the next batch, without any
// other goroutine's help (a node resumed from SIGSTOP).
func TestHADeadlineFences(t *testing.T) {
	topo := haTopology(t, 0, false)
	s, addr := startServerConfig(t, nil, Config{Cluster: topo})
	r := dial(t, addr)
	a := keyIn(0, 8191)
	s.SetTopology(topo.WithDeadline(time.Now().Add(time.Hour)))
	if got := roundTrip(t, r, "set", a, "1"); got != "+OK" {
		t.Fatalf("before the deadline: %q", got)
	}
	s.SetTopology(topo.WithDeadline(time.Now().Add(-time.Millisecond)))
	if got := roundTrip(t, r, "set", a, "2"); got != "-"+errFenced {
		t.Fatalf("past the deadline: %q, want TRYAGAIN", got)
	}
	if !s.Topology().Fenced() {
		t.Fatal("topology not swapped to its fenced twin")
	}
	if got := roundTrip(t, r, "info", "cluster"); !strings.Contains(got, "cluster_fenced:1") || !strings.Contains(got, "cluster_down_replies:1") {
		t.Errorf("INFO cluster: %q", got)
	}
}

// TestHAClusterReplies: CLUSTER SLOTS, SHARDS and NODES list replicas the
// way Redis Cluster does, with the leaders' epochs.
func TestHAClusterReplies(t *testing.T) {
	topo := haTopology(t, 1, false)
	s := &Server{cfg: Config{Cluster: topo}}
	s.topo.Store(topo)
	n := topo.Nodes()
	c := &client{srv: s}
	cmdClusterSlots(s, c, nil)
	want := "*2\r\n" +
		"*4\r\n:0\r\n:8191\r\n*4\r\n$9\r\n127.0.0.1\r\n:7000\r\n$40\r\n" + n[0].ID + "\r\n*0\r\n" +
		"*4\r\n$9\r\n127.0.0.1\r\n:7001\r\n$40\r\n" + n[1].ID + "\r\n*0\r\n" +
		"*3\r\n:8192\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:7002\r\n$40\r\n" + n[2].ID + "\r\n*0\r\n"
	if got := string(c.out); got != want {
		t.Errorf("CLUSTER SLOTS:\n%q\nwant\n%q", got, want)
	}
	wantNodes := n[0].ID + " 127.0.0.1:7000@0 master - 0 0 11 connected 0-8191\n" +
		n[1].ID + " 127.0.0.1:7001@0 myself,slave " + n[0].ID + " 0 0 11 connected\n" +
		n[2].ID + " 127.0.0.1:7002@0 master - 0 0 12 connected 8192-16383\n"
	if got := s.clusterNodesText(); got != wantNodes {
		t.Errorf("CLUSTER NODES:\n%s\nwant\n%s", got, wantNodes)
	}
	c.out = nil
	cmdClusterShards(s, c, nil)
	out := string(c.out)
	if !strings.HasPrefix(out, "*2\r\n") || strings.Count(out, "$4\r\nrole\r\n$7\r\nreplica\r\n") != 1 || strings.Count(out, "$4\r\nrole\r\n$6\r\nmaster\r\n") != 2 {
		t.Errorf("CLUSTER SHARDS: %q", out)
	}
	c.out = nil
	cmdClusterInfo(s, c, nil)
	if out := string(c.out); !strings.Contains(out, "cluster_current_epoch:12\r\n") || !strings.Contains(out, "cluster_my_epoch:11\r\n") || !strings.Contains(out, "cluster_state:ok") {
		t.Errorf("CLUSTER INFO: %q", out)
	}
}

// TestSetTopologyNeedsClusterMode: a standalone server cannot be turned
// into a cluster node, nor a node into a standalone server.
func TestSetTopologyNeedsClusterMode(t *testing.T) {
	for _, tc := range []struct {
		s    *Server
		topo *cluster.Topology
	}{{&Server{}, haTopology(t, 0, false)}, {func() *Server { s := &Server{}; s.topo.Store(haTopology(t, 0, false)); return s }(), nil}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("SetTopology did not refuse")
				}
			}()
			tc.s.SetTopology(tc.topo)
		}()
	}
}

// haLeaderFixture is newDispatchFixture in HA mode: this node leads every
// slot, under a lease deadline an hour away (the leader's hot path: one
// atomic load and one clock read per batch, one compare per command).
func haLeaderFixture(tb testing.TB) (*Server, *client) {
	s, c := newDispatchFixture(tb)
	topo, err := cluster.New([]cluster.Node{{ID: cluster.DeriveID("x"), Host: "127.0.0.1", Port: 7000,
		Slots: []cluster.SlotRange{{First: 0, Last: cluster.SlotCount - 1}}, Epoch: 1}}, 0, 1)
	if err != nil {
		tb.Fatal(err)
	}
	s.topo.Store(topo.WithDeadline(time.Now().Add(time.Hour)))
	return s, c
}

// BenchmarkBatchThrottleHALeader is BenchmarkBatchThrottle on an HA leader:
// the routing check and the per-batch deadline check included.
func BenchmarkBatchThrottleHALeader(b *testing.B) {
	s, c := haLeaderFixture(b)
	const depth, nkeys = 16, 100_000
	var pipes [][]byte
	for p := 0; p < 64; p++ {
		var buf []byte
		for i := 0; i < depth; i++ {
			key := fmt.Sprintf("ok:%012d", (p*depth+i)*7919%nkeys)
			buf = fmt.Appendf(buf, "*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n", len(key), key)
		}
		pipes = append(pipes, buf)
	}
	for k := 0; k < nkeys; k++ { // fill the keyspace, as BenchmarkBatchThrottle does
		c.out = c.out[:0]
		s.dispatchLookup(c, bargs("CL.THROTTLE", fmt.Sprintf("ok:%012d", k), "15", "30", "60"))
	}
	st := &connState{hashes: make([]uint64, maxBatchCmds)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += depth {
		st.buf = pipes[(i/depth)%len(pipes)]
		st.start, st.end = 0, len(st.buf)
		c.out = c.out[:0]
		if err := st.parseBatch(); err != nil || len(st.cmds) != depth {
			b.Fatalf("parsed %d commands, err %v", len(st.cmds), err)
		}
		s.store.Prefetch(st.keys, st.hashes[:len(st.keys)])
		if _, ran, _ := s.runBatch(c, st); !ran {
			b.Fatal("nothing ran")
		}
	}
	b.StopTimer()
	if c.out[0] != '*' {
		b.Fatalf("reply %q (routed away?)", c.out)
	}
}

// TestHALeaderRoutingAllocatesNothing: a batch on an HA leader (routing,
// deadline check, CL.THROTTLE) allocates nothing.
func TestHALeaderRoutingAllocatesNothing(t *testing.T) {
	s, c := haLeaderFixture(t)
	buf := []byte("*5\r\n$11\r\nCL.THROTTLE\r\n$3\r\nabc\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n")
	st := &connState{hashes: make([]uint64, maxBatchCmds)}
	run := func() {
		st.buf, st.start, st.end = buf, 0, len(buf)
		c.out = c.out[:0]
		if err := st.parseBatch(); err != nil {
			t.Fatal(err)
		}
		s.runBatch(c, st)
	}
	run()
	if c.out[0] != '*' {
		t.Fatalf("reply %q", c.out)
	}
	if n := testing.AllocsPerRun(2000, run); n != 0 {
		t.Errorf("%v allocations per batch", n)
	}
}
