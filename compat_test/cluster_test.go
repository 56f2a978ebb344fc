package compat_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// Redis Cluster mode: three celld nodes on loopback with a static topology,
// driven by go-redis ClusterClient, rueidis (CLUSTER SLOTS and CLUSTER
// SHARDS discovery), plain clients and redis-cli -c; then the emulated
// single-node cluster. Redirects are counted server side (INFO cluster's
// cluster_redirects: every -MOVED a node sent), so "zero redirects after
// warm-up" does not depend on a client's internals.

// startClusterNodes starts n in-process nodes forming one static cluster:
// it listens on n loopback ports first, so every node's topology can name
// all the addresses before any node serves.
func startClusterNodes(t testing.TB, n int) []*testServer {
	t.Helper()
	lns := make([]net.Listener, n)
	addrs := make([]string, n)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], addrs[i] = ln, ln.Addr().String()
	}
	nodes := make([]*testServer, n)
	for i := range nodes {
		topo, err := cluster.Static(addrs, i)
		if err != nil {
			t.Fatal(err)
		}
		ts := &testServer{Addr: addrs[i], Store: store.New(store.Options{})}
		srv, err := server.New(server.Config{Addr: addrs[i], Cluster: topo}, ts.Store)
		if err != nil {
			t.Fatal(err)
		}
		ts.Srv = srv
		done := make(chan error, 1)
		go func(ln net.Listener) { done <- srv.Serve(ln) }(lns[i])
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("shutdown %s: %v", ts.Addr, err)
			}
			if err := <-done; err != nil {
				t.Errorf("serve %s: %v", ts.Addr, err)
			}
		})
		nodes[i] = ts
	}
	return nodes
}

// clusterOwner returns the index of the node owning key's slot, by the
// issue's formula: node i of N owns [i*16384/N, (i+1)*16384/N).
func clusterOwner(key string, n int) int {
	slot := cluster.KeySlotString(key)
	for i := n - 1; i >= 0; i-- {
		if slot >= i*cluster.SlotCount/n {
			return i
		}
	}
	return 0
}

// clusterInfoInt reads an integer field of INFO <section> from a node.
func clusterInfoInt(t testing.TB, rdb *redis.Client, section, field string) int64 {
	t.Helper()
	info, err := rdb.Info(ctx, section).Result()
	if err != nil {
		t.Fatalf("INFO %s: %v", section, err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO %s: %q", field, line)
			}
			return n
		}
	}
	t.Fatalf("INFO %s has no %s:\n%s", section, field, info)
	return 0
}

// clusterPlain opens a plain (not cluster-aware) go-redis client per node.
func clusterPlain(t testing.TB, nodes []*testServer) []*redis.Client {
	out := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		out[i] = newGoRedis(t, n)
	}
	return out
}

// clusterRedirects sums every node's MOVED count.
func clusterRedirects(t testing.TB, plain []*redis.Client) int64 {
	t.Helper()
	var sum int64
	for _, p := range plain {
		sum += clusterInfoInt(t, p, "cluster", "cluster_redirects")
	}
	return sum
}

// clusterSizes returns each node's DBSIZE.
func clusterSizes(t testing.TB, plain []*redis.Client) []int64 {
	t.Helper()
	out := make([]int64, len(plain))
	for i, p := range plain {
		n, err := p.DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = n
	}
	return out
}

// clusterThrottleAll runs one CL.THROTTLE per key through send, 8 at a
// time, and checks each is a first call on a fresh key. Callers use a rate
// of one per hour, so every key lives an hour (a key's TTL is the time its
// bucket takes to refill) and DBSIZE counts them all.
func clusterThrottleAll(t *testing.T, keys []string, send func(key string) ([]int64, error)) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	work := make(chan string)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				got, err := send(k)
				if err != nil {
					errs <- fmt.Errorf("%s: %w", k, err)
					continue
				}
				if len(got) != 5 || got[0] != 0 || got[1] != 11 || got[2] != 10 || got[3] != -1 {
					errs <- fmt.Errorf("%s: reply %v, want [0 11 10 -1 _]", k, got)
				}
			}
		}()
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func clusterKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%d", prefix, i)
	}
	return keys
}

// checkSpread checks the keys went to the nodes owning them: every node
// gained some, the gains sum to len(keys), and each node's gain is exactly
// the number of keys whose slot it owns.
func checkSpread(t *testing.T, who string, keys []string, before, after []int64) {
	t.Helper()
	want := make([]int64, len(before))
	for _, k := range keys {
		want[clusterOwner(k, len(before))]++
	}
	var sum int64
	for i := range before {
		got := after[i] - before[i]
		sum += got
		if got == 0 || got != want[i] {
			t.Errorf("%s: node %d gained %d keys, want %d (its slots' share)", who, i, got, want[i])
		}
	}
	if sum != int64(len(keys)) {
		t.Errorf("%s: nodes gained %d keys in all, want %d", who, sum, len(keys))
	}
	t.Logf("%s: %d keys per node %v", who, len(keys), diff(before, after))
}

func diff(before, after []int64) []int64 {
	out := make([]int64, len(before))
	for i := range out {
		out[i] = after[i] - before[i]
	}
	return out
}

func TestClusterThreeNodes(t *testing.T) {
	nodes := startClusterNodes(t, 3)
	plain := clusterPlain(t, nodes)
	addrs := []string{nodes[0].Addr, nodes[1].Addr, nodes[2].Addr}

	t.Run("topology", func(t *testing.T) {
		var first []redis.ClusterSlot
		for i, p := range plain {
			slots, err := p.ClusterSlots(ctx).Result()
			if err != nil {
				t.Fatalf("node %d: CLUSTER SLOTS: %v", i, err)
			}
			sort.Slice(slots, func(a, b int) bool { return slots[a].Start < slots[b].Start })
			next := 0
			for j, s := range slots {
				if s.Start != next || s.End < s.Start || len(s.Nodes) != 1 {
					t.Fatalf("node %d: CLUSTER SLOTS entry %d = %+v: gap, overlap or wrong node count", i, j, s)
				}
				next = s.End + 1
				if s.Nodes[0].Addr != addrs[j] {
					t.Errorf("node %d: slots %d-%d served by %s, want %s", i, s.Start, s.End, s.Nodes[0].Addr, addrs[j])
				}
				if s.Start != j*16384/3 || s.End != (j+1)*16384/3-1 {
					t.Errorf("node %d: range %d = %d-%d, want the issue's formula", i, j, s.Start, s.End)
				}
			}
			if next != 16384 || len(slots) != 3 {
				t.Fatalf("node %d: CLUSTER SLOTS covers 0-%d in %d ranges", i, next-1, len(slots))
			}
			if first == nil {
				first = slots
			} else if fmt.Sprint(first) != fmt.Sprint(slots) {
				t.Errorf("node %d sees %v, node 0 sees %v", i, slots, first)
			}
			myid, err := p.ClusterMyID(ctx).Result()
			if err != nil || !cluster.ValidID(myid) || myid != first[i].Nodes[0].ID {
				t.Errorf("node %d: CLUSTER MYID = %q, %v; CLUSTER SLOTS says %q", i, myid, err, first[i].Nodes[0].ID)
			}
			shards, err := p.ClusterShards(ctx).Result()
			if err != nil || len(shards) != 3 {
				t.Fatalf("node %d: CLUSTER SHARDS = %v, %v", i, shards, err)
			}
			for j, sh := range shards {
				n := sh.Nodes[0]
				if len(sh.Slots) != 1 || sh.Slots[0].Start != int64(first[j].Start) || sh.Slots[0].End != int64(first[j].End) ||
					net.JoinHostPort(n.Endpoint, strconv.FormatInt(n.Port, 10)) != addrs[j] ||
					n.ID != first[j].Nodes[0].ID || n.Role != "master" || n.Health != "online" {
					t.Errorf("node %d: CLUSTER SHARDS shard %d = %+v", i, j, sh)
				}
			}
			text, err := p.ClusterNodes(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
			if len(lines) != 3 {
				t.Fatalf("node %d: CLUSTER NODES:\n%s", i, text)
			}
			for j, l := range lines {
				f := strings.Fields(l)
				flags := "master"
				if j == i {
					flags = "myself,master"
				}
				want := fmt.Sprintf("%s %s@0 %s - 0 0 %d connected %d-%d", first[j].Nodes[0].ID, addrs[j], flags, j+1, first[j].Start, first[j].End)
				if strings.Join(f, " ") != want {
					t.Errorf("node %d: CLUSTER NODES line %d\n got: %s\nwant: %s", i, j, l, want)
				}
			}
			info, err := p.ClusterInfo(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"cluster_state:ok\r\n", "cluster_slots_assigned:16384\r\n", "cluster_slots_ok:16384\r\n",
				"cluster_known_nodes:3\r\n", "cluster_size:3\r\n", fmt.Sprintf("cluster_my_epoch:%d\r\n", i+1)} {
				if !strings.Contains(info, want) {
					t.Errorf("node %d: CLUSTER INFO lacks %q:\n%s", i, want, info)
				}
			}
			if got := clusterInfoInt(t, p, "cluster", "cluster_enabled"); got != 1 {
				t.Errorf("node %d: cluster_enabled:%d", i, got)
			}
		}
	})

	t.Run("go-redis ClusterClient", func(t *testing.T) {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr}})
		t.Cleanup(func() { rdb.Close() })
		redirects0 := clusterRedirects(t, plain)
		before := clusterSizes(t, plain)
		keys := clusterKeys("goredis", 3000)
		clusterThrottleAll(t, keys, func(k string) ([]int64, error) {
			return rdb.Do(ctx, "CL.THROTTLE", k, 10, 1, 3600).Int64Slice()
		})
		checkSpread(t, "go-redis", keys, before, clusterSizes(t, plain))

		// A hash-tagged key keeps its state across calls (and across the
		// client's connections): the bucket drains 5, 4, ... 0, then denies.
		for i := range 7 {
			got, err := rdb.Do(ctx, "CL.THROTTLE", "{tenant42}:login", 5, 1, 60).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			wantLimited, wantRemaining := int64(0), int64(5-i)
			if i == 6 {
				wantLimited, wantRemaining = 1, 0
			}
			if got[0] != wantLimited || got[2] != wantRemaining {
				t.Fatalf("call %d on {tenant42}:login: %v, want limited=%d remaining=%d", i, got, wantLimited, wantRemaining)
			}
		}
		// Keys sharing the tag share the slot, so a transaction over them works.
		cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "CL.THROTTLE", "{tenant42}:signup", 5, 1, 60)
			p.Do(ctx, "CL.THROTTLE", "{tenant42}:login", 5, 1, 60)
			return nil
		})
		if err != nil || len(cmds) != 2 {
			t.Fatalf("TxPipelined: %v %v", cmds, err)
		}
		if got, _ := cmds[1].(*redis.Cmd).Int64Slice(); got[0] != 1 {
			t.Errorf("login inside MULTI: %v, want limited", got)
		}
		slot := cluster.KeySlotString("{tenant42}:login")
		owner := clusterOwner("{tenant42}:login", 3)
		for i, p := range plain {
			n, err := p.ClusterCountKeysInSlot(ctx, slot).Result()
			want := int64(0)
			if i == owner {
				want = 2
			}
			if err != nil || n != want {
				t.Errorf("node %d: CLUSTER COUNTKEYSINSLOT %d = %d, %v; want %d", i, slot, n, err, want)
			}
		}
		got, err := plain[owner].ClusterGetKeysInSlot(ctx, slot, 10).Result()
		sort.Strings(got)
		if err != nil || strings.Join(got, " ") != "{tenant42}:login {tenant42}:signup" {
			t.Errorf("CLUSTER GETKEYSINSLOT = %q, %v", got, err)
		}

		r := clusterRedirects(t, plain) - redirects0
		if r != 0 {
			t.Errorf("go-redis: %d MOVED replies after the first topology load, want 0", r)
		}
		t.Logf("go-redis: %d redirects", r)
	})

	for _, shards := range []bool{false, true} {
		name := "rueidis CLUSTER SLOTS"
		if shards {
			name = "rueidis CLUSTER SHARDS"
		}
		t.Run(name, func(t *testing.T) {
			cl, err := rueidis.NewClient(rueidis.ClientOption{
				InitAddress:   []string{nodes[1].Addr},
				DisableCache:  true,
				ClusterOption: rueidis.ClusterOption{PreferClusterShards: shards},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			if cl.Mode() != rueidis.ClientModeCluster || len(cl.Nodes()) != 3 {
				t.Fatalf("rueidis mode %s with %d nodes, want cluster with 3", cl.Mode(), len(cl.Nodes()))
			}
			redirects0 := clusterRedirects(t, plain)
			before := clusterSizes(t, plain)
			keys := clusterKeys(fmt.Sprintf("rueidis-%v", shards), 3000)
			clusterThrottleAll(t, keys, func(k string) ([]int64, error) {
				cmd := cl.B().Arbitrary("CL.THROTTLE").Keys(k).Args("10", "1", "3600").Build()
				return cl.Do(ctx, cmd).AsIntSlice()
			})
			checkSpread(t, name, keys, before, clusterSizes(t, plain))
			r := clusterRedirects(t, plain) - redirects0
			if r != 0 {
				t.Errorf("%s: %d MOVED replies, want 0", name, r)
			}
			t.Logf("%s: %d redirects", name, r)
		})
	}

	t.Run("plain client on the wrong node", func(t *testing.T) {
		key := "user:1"
		owner := clusterOwner(key, 3)
		wrong := (owner + 1) % 3
		slot := cluster.KeySlotString(key)
		before := clusterInfoInt(t, plain[wrong], "cluster", "cluster_redirects")
		err := plain[wrong].Do(ctx, "CL.THROTTLE", key, 5, 1, 60).Err()
		want := fmt.Sprintf("MOVED %d %s", slot, addrs[owner])
		if err == nil || err.Error() != want {
			t.Fatalf("CL.THROTTLE on node %d: %v, want %q", wrong, err, want)
		}
		if n := clusterInfoInt(t, plain[wrong], "cluster", "cluster_redirects") - before; n != 1 {
			t.Errorf("cluster_redirects rose by %d, want 1", n)
		}
		if err := plain[owner].Do(ctx, "CL.THROTTLE", key, 5, 1, 60).Err(); err != nil {
			t.Errorf("the owner: %v", err)
		}
	})

	t.Run("transcript", func(t *testing.T) {
		// Keys local to node 0: two in different slots, one tag, one remote.
		var local []string
		for i := 0; len(local) < 2; i++ {
			k := fmt.Sprintf("k%d", i)
			if clusterOwner(k, 3) == 0 && (len(local) == 0 || cluster.KeySlotString(k) != cluster.KeySlotString(local[0])) {
				local = append(local, k)
			}
		}
		tag := ""
		for i := 0; tag == ""; i++ {
			if k := fmt.Sprintf("{t%d}", i); clusterOwner(k, 3) == 0 {
				tag = k
			}
		}
		remote := "foo" // slot 12182: node 2's
		moved := fmt.Sprintf("-MOVED 12182 %s\r\n", addrs[2])
		const crossslot = "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
		const execabort = "-EXECABORT Transaction discarded because of previous errors.\r\n"
		rc := dialRaw(t, nodes[0])
		runRaw(t, rc, []rawStep{
			{resp("GET", remote), moved},
			{resp("DEL", local[0], local[1]), crossslot},
			{resp("EXISTS", local[0], remote), crossslot},
			{resp("CL.THROTTLE"), "-Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]\r\n"},
			// EVAL is routed by its declared keys (numkeys), as in Redis.
			{resp("EVAL", "return 1", "1", remote), moved},
			{resp("EVAL", "return 1", "2", local[0], local[1]), crossslot},
			{resp("EVAL", "return 1", "0", remote), ":1\r\n"},
			{resp("EVAL", "return 1", "1", local[0]), ":1\r\n"},
			{resp("WATCH", remote), moved},
			{resp("WATCH", local[0], local[1]), crossslot},
			// A queued command for another node flags the transaction.
			{resp("MULTI"), "+OK\r\n"},
			{resp("GET", remote), moved},
			{resp("GET", local[0]), "+QUEUED\r\n"},
			{resp("EXEC"), execabort},
			// Queued commands each local but across slots: EXEC answers
			// CROSSSLOT and discards the transaction.
			{resp("MULTI"), "+OK\r\n"},
			{resp("GET", local[0]), "+QUEUED\r\n"},
			{resp("GET", local[1]), "+QUEUED\r\n"},
			{resp("EXEC"), crossslot},
			{resp("EXEC"), "-ERR EXEC without MULTI\r\n"},
			// One slot through a hash tag: served.
			{resp("WATCH", tag+"a", tag+"b"), "+OK\r\n"},
			{resp("MULTI"), "+OK\r\n"},
			{resp("SET", tag+"a", "5"), "+QUEUED\r\n"},
			{resp("GET", tag+"b"), "+QUEUED\r\n"},
			{resp("EXEC"), "*2\r\n+OK\r\n$-1\r\n"},
			{resp("READONLY"), "+OK\r\n"},
			{resp("READWRITE"), "+OK\r\n"},
			{resp("ASKING"), "+OK\r\n"},
			{resp("CLUSTER", "KEYSLOT", "123456789"), ":12739\r\n"},
			{resp("CLUSTER", "KEYSLOT", "{user1000}.following"), ":3443\r\n"},
			{resp("CLUSTER", "COUNTKEYSINSLOT", "16384"), "-ERR Invalid slot\r\n"},
			{resp("CLUSTER", "COUNTKEYSINSLOT", "x"), "-ERR value is not an integer or out of range\r\n"},
			{resp("CLUSTER", "GETKEYSINSLOT", "0", "-1"), "-ERR Invalid slot or number of keys\r\n"},
			{resp("CLUSTER", "GETKEYSINSLOT", strconv.Itoa(cluster.KeySlotString(tag)), "0"), "*0\r\n"},
			{resp("CLUSTER", "KEYSLOT"), "-ERR wrong number of arguments for 'cluster|keyslot' command\r\n"},
			{resp("CLUSTER", "FOO"), "-ERR unknown subcommand 'FOO'. Try CLUSTER HELP.\r\n"},
			{resp("CLUSTER"), "-ERR wrong number of arguments for 'cluster' command\r\n"},
		})
		// CLUSTER SLOTS byte for byte, RESP2 then RESP3 (where the empty
		// networking metadata is a map).
		id := func(i int) string { return cluster.DeriveID(addrs[i]) }
		entry := func(i int, meta string) string {
			host, port, _ := net.SplitHostPort(addrs[i])
			return fmt.Sprintf("*3\r\n:%d\r\n:%d\r\n*4\r\n$%d\r\n%s\r\n:%s\r\n$40\r\n%s\r\n%s",
				i*16384/3, (i+1)*16384/3-1, len(host), host, port, id(i), meta)
		}
		rc.write(resp("CLUSTER", "SLOTS"))
		if want := "*3\r\n" + entry(0, "*0\r\n") + entry(1, "*0\r\n") + entry(2, "*0\r\n"); rc.read(len(want)) != want {
			t.Errorf("CLUSTER SLOTS (RESP2) differs from %q", want)
		}
		rc.write(resp("HELLO", "3") + resp("PING"))
		for rc.readLine() != "+PONG\r\n" {
		}
		rc.write(resp("CLUSTER", "SLOTS"))
		if want := "*3\r\n" + entry(0, "%0\r\n") + entry(1, "%0\r\n") + entry(2, "%0\r\n"); rc.read(len(want)) != want {
			t.Errorf("CLUSTER SLOTS (RESP3) differs from %q", want)
		}
	})

	t.Run("HELLO and INFO say cluster", func(t *testing.T) {
		hello, err := plain[0].Do(ctx, "HELLO", "3").Result()
		m, ok := hello.(map[any]any)
		if err != nil || !ok || m["mode"] != "cluster" {
			t.Errorf("HELLO 3 = %v, %v; want mode cluster", hello, err)
		}
		info, err := plain[0].Info(ctx, "server").Result()
		if err != nil || !strings.Contains(info, "redis_mode:cluster\r\n") {
			t.Errorf("INFO server lacks redis_mode:cluster: %v\n%s", err, info)
		}
	})

	t.Run("redis-cli -c", func(t *testing.T) {
		cli := needRedisCli(t)
		key := "cli:{x}"
		owner := clusterOwner(key, 3)
		wrong := (owner + 2) % 3
		_, port, _ := net.SplitHostPort(addrs[wrong])
		before := clusterInfoInt(t, plain[wrong], "cluster", "cluster_redirects")
		for i := range 3 {
			out, err := exec.Command(cli, "-c", "-h", "127.0.0.1", "-p", port, "CL.THROTTLE", key, "5", "1", "60").CombinedOutput()
			if err != nil {
				t.Fatalf("redis-cli: %v\n%s", err, out)
			}
			fields := strings.Fields(string(out))
			if len(fields) != 5 || fields[0] != "0" || fields[1] != "6" || fields[2] != strconv.Itoa(5-i) {
				t.Fatalf("redis-cli -c CL.THROTTLE call %d via node %d: %q", i, wrong, out)
			}
		}
		if n := clusterInfoInt(t, plain[wrong], "cluster", "cluster_redirects") - before; n != 3 {
			t.Errorf("node %d sent %d MOVED to redis-cli, want 3 (one per invocation)", wrong, n)
		}
		if n, _ := plain[owner].Exists(ctx, key).Result(); n != 1 {
			t.Errorf("the key is not on its owner, node %d", owner)
		}
	})
}

// needRedisCli finds redis-cli. CI (CI set, as .ci/run runs) installs
// redis-tools, so there a missing redis-cli fails the test; on a developer's
// fresh machine, where `go test ./...` must work with Go alone, the redis-cli
// steps are skipped with a message saying how to run them.
func needRedisCli(t *testing.T) string {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-cli not found on PATH: .ci/run installs redis-tools; install it (apt-get install -y redis-tools)")
		}
		t.Skip("redis-cli not installed: apt-get install redis-tools to run this step (CI always runs it)")
	}
	return cli
}

// TestClusterEmulatedSingleNode: --cluster-nodes naming only this node, so
// cluster-mode clients work against one sidecar.
func TestClusterEmulatedSingleNode(t *testing.T) {
	nodes := startClusterNodes(t, 1)
	plain := clusterPlain(t, nodes)
	host, port, _ := net.SplitHostPort(nodes[0].Addr)

	slots, err := plain[0].ClusterSlots(ctx).Result()
	if err != nil || len(slots) != 1 || slots[0].Start != 0 || slots[0].End != 16383 ||
		len(slots[0].Nodes) != 1 || slots[0].Nodes[0].Addr != nodes[0].Addr {
		t.Fatalf("CLUSTER SLOTS = %+v, %v", slots, err)
	}

	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr}})
	t.Cleanup(func() { rdb.Close() })
	keys := clusterKeys("emulated", 300)
	clusterThrottleAll(t, keys, func(k string) ([]int64, error) {
		return rdb.Do(ctx, "CL.THROTTLE", k, 10, 1, 3600).Int64Slice()
	})
	if n := clusterSizes(t, plain)[0]; n != 300 {
		t.Errorf("DBSIZE = %d, want 300", n)
	}
	if r := clusterRedirects(t, plain); r != 0 {
		t.Errorf("%d redirects, want 0", r)
	}

	cli := needRedisCli(t)
	for i := range 3 {
		out, err := exec.Command(cli, "-c", "-h", host, "-p", port, "CL.THROTTLE", "sidecar", "2", "1", "60").CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli: %v\n%s", err, out)
		}
		if f := strings.Fields(string(out)); len(f) != 5 || f[0] != "0" || f[2] != strconv.Itoa(2-i) {
			t.Fatalf("redis-cli -c call %d: %q", i, out)
		}
	}
	out, err := exec.Command(cli, "-c", "-h", host, "-p", port, "CLUSTER", "INFO").CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^cluster_state:ok\r?$`).Match(out) ||
		!strings.Contains(string(out), "cluster_known_nodes:1") {
		t.Errorf("redis-cli CLUSTER INFO: %v\n%s", err, out)
	}
}

// TestClusterDisabled: without a topology every cluster command answers as
// a standalone Redis 7 does, and routing never happens.
func TestClusterDisabled(t *testing.T) {
	ts := startServer(t)
	rc := dialRaw(t, ts)
	const disabled = "-ERR This instance has cluster support disabled\r\n"
	runRaw(t, rc, []rawStep{
		{resp("CLUSTER", "SLOTS"), disabled},
		{resp("CLUSTER", "INFO"), disabled},
		{resp("CLUSTER", "HELP"), disabled},
		{resp("CLUSTER", "FOO"), "-ERR unknown subcommand 'FOO'. Try CLUSTER HELP.\r\n"},
		{resp("READONLY"), disabled},
		{resp("READWRITE"), disabled},
		{resp("ASKING"), disabled},
		{resp("DEL", "a", "b"), ":0\r\n"},
		{resp("GET", "foo"), "$-1\r\n"},
	})
	rdb := newGoRedis(t, ts)
	if got := clusterInfoInt(t, rdb, "cluster", "cluster_enabled"); got != 0 {
		t.Errorf("cluster_enabled:%d", got)
	}
	// rueidis probes CLUSTER SLOTS and falls back to a single-node client.
	cl := newRueidis(t, ts)
	if cl.Mode() == rueidis.ClientModeCluster {
		t.Errorf("rueidis chose cluster mode against a standalone server")
	}
	if err := cl.Do(ctx, cl.B().Ping().Build()).Error(); err != nil {
		t.Error(err)
	}
}
