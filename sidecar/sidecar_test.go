package sidecar

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/internal/testutil"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
	"github.com/redis/go-redis/v9"
)

var ctx = context.Background()

// node is an in-process celld (an upstream owner, or a sidecar).
type node struct {
	addr  string
	st    *store.Store
	srv   *server.Server
	ln    net.Listener
	done  chan error
	sc    *Sidecar
	close sync.Once
}

func (n *node) stop(t testing.TB) {
	n.close.Do(func() {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := n.srv.Shutdown(c); err != nil {
			t.Errorf("shutdown %s: %v", n.addr, err)
		}
		<-n.done
		if n.sc != nil {
			n.sc.Close()
		}
	})
}

// serve starts a celld server on ln (a fresh port when ln is nil).
func serve(t testing.TB, ln net.Listener, cfg server.Config, sc *Sidecar) *node {
	t.Helper()
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	n := &node{addr: ln.Addr().String(), st: store.New(store.Options{}), ln: ln, done: make(chan error, 1), sc: sc}
	cfg.Addr = n.addr
	if sc != nil {
		cfg.Forwarder = sc
		cfg.IOLoops = sidecarIOLoops
	}
	srv, err := server.New(cfg, n.st)
	if err != nil {
		t.Fatal(err)
	}
	n.srv = srv
	go func() { n.done <- srv.Serve(ln) }()
	t.Cleanup(func() { n.stop(t) })
	return n
}

// sidecarIOLoops is the sidecars' Config.IOLoops: two event loops (the
// asynchronous path, loop.go), or -1 (a goroutine per client: the blocking
// path) in TestSidecarBlockingPath.
var sidecarIOLoops = 2

// ownerCluster starts n celld nodes in static cluster mode.
func ownerCluster(t testing.TB, n int) []*node {
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
	nodes := make([]*node, n)
	for i := range nodes {
		topo, err := cluster.Static(addrs, i)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = serve(t, lns[i], server.Config{Cluster: topo}, nil)
	}
	return nodes
}

// sidecarNode starts a sidecar over seeds. Tests not about timeouts get
// a long one: under -race on a busy machine a 250 ms wait can pass, and
// a spurious fallback would decide what the owner should.
func sidecarNode(t testing.TB, cfg Config) *node {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	sc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc.Start()
	return serve(t, nil, server.Config{}, sc)
}

func client(t testing.TB, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func ints(t testing.TB, v any, err error) []int64 {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, x := range v.([]any) {
		out = append(out, x.(int64))
	}
	return out
}

// TestSidecarForwardsToOwners: CL.THROTTLE through a sidecar is decided
// by the owner of its key, in a three-node cluster; the sidecar's own
// keyspace stays empty, and a pipeline mixing keys of every owner with
// local commands is answered in order.
func TestSidecarForwardsToOwners(t *testing.T) {
	owners := ownerCluster(t, 3)
	side := sidecarNode(t, Config{Seeds: []string{owners[1].addr}})
	rdb := client(t, side.addr)
	if got := side.sc.Owner(0); got != owners[0].addr {
		t.Fatalf("owner of slot 0: %q, want %q", got, owners[0].addr)
	}
	for i := range 4 {
		r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", "user1", 2, 10, 3600))
		want := []int64{0, 3, int64(2 - i), -1, int64(360 * (i + 1))}
		if i == 3 {
			want = []int64{1, 3, 0, 360, 1080}
		}
		if r[0] != want[0] || r[2] != want[2] {
			t.Fatalf("call %d: %v, want %v", i, r, want)
		}
	}
	if side.st.Len() != 0 {
		t.Fatalf("sidecar keyspace holds %d keys, want 0", side.st.Len())
	}
	// A pipeline over 300 keys of every owner, with PING between.
	pipe := rdb.Pipeline()
	var cmds []redis.Cmder
	for i := range 300 {
		cmds = append(cmds, pipe.Do(ctx, "CL.THROTTLE", "k"+strconv.Itoa(i), 0, 1, 60))
		if i%50 == 0 {
			cmds = append(cmds, pipe.Ping(ctx))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if c.Name() == "ping" {
			if c.(*redis.StatusCmd).Val() != "PONG" {
				t.Fatalf("PING: %v", c)
			}
			continue
		}
		if r := cmdInts(t, c.(*redis.Cmd)); r[0] != 0 || r[1] != 1 {
			t.Fatalf("%v: %v", c.Args(), r)
		}
	}
	total := 0
	for i, o := range owners {
		n := o.st.Len()
		if n == 0 {
			t.Errorf("owner %d holds no key", i)
		}
		total += n
	}
	if total != 301 {
		t.Fatalf("owners hold %d keys, want 301", total)
	}
	// Owner errors are relayed byte for byte; CROSSSLOT is answered here.
	err := rdb.Do(ctx, "CL.THROTTLE", "k1", "x", 1, 60).Err()
	direct := client(t, owners[cluster.KeySlotString("k1")*3/cluster.SlotCount].addr).Do(ctx, "CL.THROTTLE", "k1", "x", 1, 60).Err()
	if err == nil || direct == nil || err.Error() != direct.Error() {
		t.Fatalf("error through the sidecar %v, from the owner %v", err, direct)
	}
	if err := rdb.Do(ctx, "DEL", "a", "b").Err(); err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Fatalf("DEL a b across slots: %v", err)
	}
	info := rdb.Info(ctx, "upstream").Val()
	for _, want := range []string{"upstream_state:ok", "upstream_mode:cluster", "upstream_owners:3"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO upstream lacks %q:\n%s", want, info)
		}
	}
}

// TestSidecarTransactions: MULTI/EXEC and WATCH on one owner run there as
// a unit; across owners they answer CROSSSLOT; EVAL with declared keys
// runs on the owner.
func TestSidecarTransactions(t *testing.T) {
	owners := ownerCluster(t, 3)
	side := sidecarNode(t, Config{Seeds: []string{owners[0].addr}})
	rdb := client(t, side.addr)
	res, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "CL.THROTTLE", "{u}a", 5, 10, 60)
		p.Do(ctx, "CL.THROTTLE", "{u}b", 5, 10, 60)
		p.Exists(ctx, "{u}a", "{u}b")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := res[2].(*redis.IntCmd).Val(); n != 2 {
		t.Fatalf("EXISTS in the transaction: %d", n)
	}
	if side.st.Len() != 0 {
		t.Fatalf("the transaction ran on the sidecar")
	}
	// Keys on two owners: CROSSSLOT, nothing runs.
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "CL.THROTTLE", "a", 5, 10, 60)
		p.Do(ctx, "CL.THROTTLE", "b", 5, 10, 60)
		return nil
	})
	if side.sc.Owner(cluster.KeySlotString("a")) != side.sc.Owner(cluster.KeySlotString("b")) {
		if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
			t.Fatalf("transaction across owners: %v", err)
		}
	}
	// WATCH: a write by another client between WATCH and EXEC aborts it.
	other := client(t, side.addr)
	err = rdb.Watch(ctx, func(tx *redis.Tx) error {
		if err := other.Do(ctx, "CL.THROTTLE", "{u}a", 5, 10, 60).Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "CL.THROTTLE", "{u}a", 5, 10, 60)
			return nil
		})
		return err
	}, "{u}a")
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("WATCHed key written meanwhile: %v, want TxFailedErr", err)
	}
	err = rdb.Watch(ctx, func(tx *redis.Tx) error {
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "CL.THROTTLE", "{u}a", 5, 10, 60)
			return nil
		})
		return err
	}, "{u}a")
	if err != nil {
		t.Fatalf("WATCH, untouched: %v", err)
	}
	v, err := rdb.Eval(ctx, "return redis.call('EXISTS', KEYS[1])", []string{"{u}b"}).Result()
	if err != nil || v.(int64) != 1 {
		t.Fatalf("EVAL on the owner: %v %v", v, err)
	}
}

// silentOwner accepts connections and reads them but never answers: the
// owner that only the timeout can detect.
func silentOwner(t testing.TB) string {
	return listen(t, func(c net.Conn) {
		go func() {
			buf := make([]byte, 4096)
			for {
				if _, err := c.Read(buf); err != nil {
					c.Close()
					return
				}
			}
		}()
	})
}

// TestSidecarFallbackModes: an owner that does not answer is given up
// after the timeout and each mode answers as documented, within the
// timeout plus a little; later commands do not wait at all.
func TestSidecarFallbackModes(t *testing.T) {
	const timeout = 100 * time.Millisecond
	for _, mode := range []Mode{Local, Open, Closed} {
		t.Run(mode.String(), func(t *testing.T) {
			owner := silentOwner(t)
			side := sidecarNode(t, Config{Seeds: []string{owner}, Fallback: mode, Timeout: timeout})
			rdb := client(t, side.addr)
			for i := range 3 {
				start := time.Now()
				v, err := rdb.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60).Result()
				took := time.Since(start)
				if took > timeout+time.Second { // a loaded machine: the bound that matters is "no hang"
					t.Fatalf("call %d took %v with --upstream-timeout %v", i, took, timeout)
				}
				switch mode {
				case Local:
					r := ints(t, v, err)
					if (i < 2 && (r[0] != 0 || r[2] != int64(1-i))) || (i == 2 && r[0] != 1) {
						t.Fatalf("local call %d: %v", i, r)
					}
				case Open:
					r := ints(t, v, err)
					if want := []int64{0, 2, 1, -1, 0}; r[0] != 0 || r[1] != 2 || r[2] != 1 || r[3] != -1 || r[4] != 0 {
						t.Fatalf("open call %d: %v, want %v", i, r, want)
					}
				case Closed:
					if err == nil || !strings.Contains(err.Error(), owner) || !strings.HasPrefix(err.Error(), "UPSTREAMDOWN") {
						t.Fatalf("closed call %d: %v %v", i, v, err)
					}
				}
			}
			if mode == Local && side.st.Len() != 1 {
				t.Fatalf("local fallback: sidecar keyspace %d keys, want 1", side.st.Len())
			}
			if got := side.sc.StatsRef().FallbackByMode[mode].Load(); got != 3 {
				t.Fatalf("fallback counter %d, want 3", got)
			}
			if !strings.Contains(rdb.Info(ctx, "upstream").Val(), "upstream_state:down") {
				t.Fatalf("INFO upstream:\n%s", rdb.Info(ctx, "upstream").Val())
			}
		})
	}
}

// TestSidecarOwnerBack: the owner stops (local fallback decides), comes
// back on the same address with its state, and decides again.
func TestSidecarOwnerBack(t *testing.T) {
	st := store.New(store.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	start := func(ln net.Listener) *node {
		n := &node{addr: addr, st: st, ln: ln, done: make(chan error, 1)}
		srv, err := server.New(server.Config{Addr: addr}, st)
		if err != nil {
			t.Fatal(err)
		}
		n.srv = srv
		go func() { n.done <- srv.Serve(ln) }()
		t.Cleanup(func() { n.stop(t) })
		return n
	}
	owner := start(ln)
	side := sidecarNode(t, Config{Seeds: []string{addr}, Timeout: 200 * time.Millisecond})
	rdb := client(t, side.addr)
	for range 3 {
		cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", "k", 4, 5, 3600)) // owner: 3 of 5 used
	}
	owner.stop(t)
	r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", "k", 4, 5, 3600))
	if r[2] != 4 { // the sidecar's own, fresh bucket
		t.Fatalf("local fallback: %v, want remaining 4", r)
	}
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("address %s taken again meanwhile: %v", addr, err)
	}
	start(ln2)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", "k", 4, 5, 3600))
		if r[2] == 1 { // the owner's bucket: 4 of 5 used now
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("owner back for 10s, replies still local: %v", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func cmdInts(t testing.TB, c *redis.Cmd) []int64 {
	t.Helper()
	v, err := c.Result()
	return ints(t, v, err)
}

// TestSidecarRedisUpstream: a plain Redis (no cluster, no redis-cell here)
// as the upstream: CLUSTER SLOTS fails, so it owns every slot; its replies,
// errors included, reach the client byte for byte (Redis's own SET/GET of
// any string, and its unknown-command error for CL.THROTTLE).
func TestSidecarRedisUpstream(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server not found: .ci/run installs it")
		}
		t.Skip("redis-server not installed (apt-get install redis-server); CI always runs this test")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	direct := client(t, addr)
	for i := 0; direct.Ping(ctx).Err() != nil; i++ {
		if i > 200 {
			t.Fatal("redis-server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	side := sidecarNode(t, Config{Seeds: []string{addr}})
	rdb := client(t, side.addr)
	if err := rdb.Set(ctx, "greeting", "hello world", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v := direct.Get(ctx, "greeting").Val(); v != "hello world" {
		t.Fatalf("SET through the sidecar: Redis holds %q", v)
	}
	if v := rdb.Get(ctx, "greeting").Val(); v != "hello world" {
		t.Fatalf("GET through the sidecar: %q", v)
	}
	want := direct.Do(ctx, "CL.THROTTLE", "k", 1, 2, 3).Err()
	got := rdb.Do(ctx, "CL.THROTTLE", "k", 1, 2, 3).Err()
	if want == nil || got == nil || got.Error() != want.Error() {
		t.Fatalf("Redis's error through the sidecar: %v, direct: %v", got, want)
	}
	if !strings.Contains(rdb.Info(ctx, "upstream").Val(), "upstream_mode:plain") {
		t.Fatalf("INFO upstream:\n%s", rdb.Info(ctx, "upstream").Val())
	}
}

// TestSidecarTLSAndPassword: an upstream that asks for a password and
// speaks only TLS is reached with Config.Password and Config.TLS; a wrong
// password fails the dial, and the fallback answers (closed: an error
// naming the owner).
func TestSidecarTLSAndPassword(t *testing.T) {
	cert := testutil.SelfSigned(t)
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	owner := &node{addr: ln.Addr().String(), st: store.New(store.Options{}), ln: ln, done: make(chan error, 1)}
	srv, err := server.New(server.Config{Addr: owner.addr, RequirePass: "s3cret",
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}, owner.st)
	if err != nil {
		t.Fatal(err)
	}
	owner.srv = srv
	go func() { owner.done <- srv.ServeTLS(ln) }()
	t.Cleanup(func() { owner.stop(t) })
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	tc := &tls.Config{RootCAs: roots}

	side := sidecarNode(t, Config{Seeds: []string{owner.addr}, Password: "s3cret", TLS: tc})
	r := cmdInts(t, client(t, side.addr).Do(ctx, "CL.THROTTLE", "k", 1, 10, 60))
	if r[0] != 0 || owner.st.Len() != 1 {
		t.Fatalf("over TLS with the password: %v, owner keys %d", r, owner.st.Len())
	}
	wrong := sidecarNode(t, Config{Seeds: []string{owner.addr}, Password: "nope", TLS: tc, Fallback: Closed})
	err = client(t, wrong.addr).Do(ctx, "CL.THROTTLE", "k", 1, 10, 60).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "UPSTREAMDOWN owner "+owner.addr) {
		t.Fatalf("wrong password: %v, want UPSTREAMDOWN naming the owner", err)
	}
}

// TestSidecarFollowsMoved: with a stale topology (the seed taken as owner
// of every slot, as before the first read), a key of another node gets
// -MOVED from the seed; the sidecar follows it once, answers with the
// owner's reply, and reads the topology again.
func TestSidecarFollowsMoved(t *testing.T) {
	owners := ownerCluster(t, 3)
	sc, err := New(Config{Seeds: []string{owners[0].addr}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	side := serve(t, nil, server.Config{}, sc) // no Start: the topology is the stale default
	rdb := client(t, side.addr)
	key := "k1" // not node 0's
	oi := cluster.KeySlotString(key) * 3 / cluster.SlotCount
	if oi == 0 {
		t.Fatal("test key on node 0")
	}
	r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", key, 5, 10, 60))
	if r[0] != 0 || owners[oi].st.Len() != 1 || owners[0].st.Len() != 0 {
		t.Fatalf("after MOVED: %v; keys on the owner %d, on the seed %d", r, owners[oi].st.Len(), owners[0].st.Len())
	}
	if n := sc.StatsRef().Redirects.Load(); n != 1 {
		t.Fatalf("redirects %d, want 1", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for sc.Owner(cluster.KeySlotString(key)) != owners[oi].addr {
		if time.Now().After(deadline) {
			t.Fatal("topology not read again after MOVED")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", key, 5, 10, 60))
	if n := sc.StatsRef().Redirects.Load(); n != 1 {
		t.Fatalf("redirects %d after the refresh, want still 1", n)
	}
}

// TestSidecarBlockingPath runs the forwarding tests with a goroutine per
// client (--io-loops 0, TLS clients): the blocking session, session.go.
func TestSidecarBlockingPath(t *testing.T) {
	sidecarIOLoops = -1
	defer func() { sidecarIOLoops = 2 }()
	t.Run("ForwardsToOwners", TestSidecarForwardsToOwners)
	t.Run("Transactions", TestSidecarTransactions)
	t.Run("FallbackModes", TestSidecarFallbackModes)
	t.Run("FollowsMoved", TestSidecarFollowsMoved)
	t.Run("SelectPlainUpstream", TestSidecarSelectPlainUpstream)
	t.Run("LargeReplyNotTimeout", TestSidecarLargeReplyNotTimeout)
	t.Run("BulkReadAllowance", TestSidecarBulkReadAllowance)
	t.Run("DecisionNotBehindSlowReply", TestSidecarDecisionNotBehindSlowReply)
	t.Run("TricklingDecisionTimesOut", TestSidecarTricklingDecisionTimesOut)
	t.Run("SlowValueReadNotTimeout", TestSidecarSlowValueReadNotTimeout)
	t.Run("EndlessTrickleOnBulkLane", TestSidecarEndlessTrickleOnBulkLane)
	t.Run("SentWriteNotAnsweredByFallback", TestSidecarSentWriteNotAnsweredByFallback)
	t.Run("OutputLimitBoundsPipelinedReplies", TestSidecarOutputLimitBoundsPipelinedReplies)
	t.Run("OutputLimitClosesAtTheLimit", TestSidecarOutputLimitClosesAtTheLimit)
	t.Run("OutputLimitOneLargeReply", TestSidecarOutputLimitOneLargeReply)
	t.Run("UnownedSlots", TestSidecarUnownedSlots)
	t.Run("RedirectChain", TestSidecarRedirectChain)
	t.Run("HostileReplyLength", TestSidecarHostileReplyLength)
	t.Run("PushMidStream", TestSidecarPushMidStream)
	t.Run("MovedRefreshesBounded", TestSidecarMovedRefreshesBounded)
	t.Run("WatchLostAbortsExec", TestSidecarWatchLostAbortsExec)
	t.Run("ClusterSlotsErrorNotPlain", TestSidecarClusterSlotsErrorNotPlain)
	t.Run("RefusedByOwnerFallsBack", TestSidecarRefusedByOwnerFallsBack)
}

// listen starts a listener on a fresh port, closed at the test's end, and
// hands each connection it accepts to handle on the accepting goroutine
// (handle starts goroutines of its own for anything that blocks). It
// returns the address.
func listen(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handle(c)
		}
	}()
	return ln.Addr().String()
}
