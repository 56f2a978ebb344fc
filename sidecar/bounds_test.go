package sidecar

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/server"
	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"
)

// onLoops runs fn on every event loop of sc, one after the other, and
// returns when all have run it.
func onLoops(t *testing.T, sc *Sidecar, fn func(ls *loopState)) {
	t.Helper()
	sc.mu.Lock()
	var loops []*loopState
	for _, ls := range sc.loops {
		loops = append(loops, ls)
	}
	sc.mu.Unlock()
	for _, ls := range loops {
		done := make(chan struct{})
		if !ls.l.Post(func() { fn(ls); close(done) }) {
			t.Fatal("loop stopped")
		}
		<-done
	}
}

// TestSidecarLoopTablesBounded: the per-loop table of connections by
// owner id (loopState.plain, the RESP2 database-0 fast path) holds only
// ids below loopTableMax. Owner ids are never reused, so a long-lived
// sidecar whose upstream changed addresses often (failovers to new pods,
// redirects to new nodes) reaches large ids: here the id counter is set
// to 1,048,576 as after that many owners came and went. Before, the
// first RESP2 command for such an owner grew each loop's table to
// 1,048,577 entries (8 MiB per loop and lane); now that owner takes the
// map (slow path), and is still answered by its owner.
func TestSidecarLoopTablesBounded(t *testing.T) {
	if sidecarIOLoops < 0 {
		t.Skip("loop path only")
	}
	owner := ownerCluster(t, 1)[0]
	// A plain seed that names the owner: the owner gets a fresh id.
	var seed string
	seed = hostileUpstream(t, func(args []string) string {
		if args[0] == "cluster" {
			h, p, _ := net.SplitHostPort(owner.addr)
			return slotsReply([4]string{"0", "16383", h, p})
		}
		return "-ERR unknown command\r\n"
	})
	sc, err := New(Config{Seeds: []string{seed}, Timeout: 5 * time.Second, RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	sc.mu.Lock()
	sc.nextID = 1 << 20
	sc.mu.Unlock()
	sc.Start()
	side := serve(t, nil, server.Config{}, sc)
	rdb := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, Protocol: 2})
	defer rdb.Close()
	for i := range 3 {
		if r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", "k", 9, 10, 60)); r[1] != 10 || r[2] != int64(9-i) {
			t.Fatalf("call %d: %v, want the owner's decision (limit 10, remaining %d)", i, r, 9-i)
		}
	}
	if n := sc.StatsRef().Forwarded.Load(); n != 3 {
		t.Fatalf("forwarded %d, want 3", n)
	}
	onLoops(t, sc, func(ls *loopState) {
		for lane, plain := range ls.plain {
			if len(plain) > 4096 {
				t.Errorf("loop table (lane %d): %d entries, want at most 4096", lane, len(plain))
			}
		}
	})
}

// anyAddrNode is an upstream listening on every local address (so that
// 127.0.0.2:port, 127.0.0.3:port, ... are as many addresses of one node)
// that answers CL.THROTTLE with a limit of 99, or with the error
// throttle returns when that is not "". live counts its open connections.
func anyAddrNode(t *testing.T, live *atomic.Int64, throttle func(args [][]byte) string) int {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := redcon.NewServer(ln.Addr().String(), func(c redcon.Conn, cmd redcon.Command) {
		switch strings.ToLower(string(cmd.Args[0])) {
		case "cluster":
			c.WriteError("ERR This instance has cluster support disabled")
		case "ping":
			c.WriteString("PONG")
		case "hello":
			c.WriteRaw([]byte("%1\r\n+proto\r\n:3\r\n"))
		case "cl.throttle":
			if throttle != nil {
				if r := throttle(cmd.Args); r != "" {
					c.WriteError(r)
					return
				}
			}
			c.WriteArray(5)
			for _, v := range []int{0, 99, 98, -1, 0} {
				c.WriteInt(v)
			}
		default:
			c.WriteError("ERR unknown command")
		}
	}, func(redcon.Conn) bool { live.Add(1); return true }, func(redcon.Conn, error) { live.Add(-1) })
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// sidecarWith is sidecarNode with a hook on the Sidecar before Start.
func sidecarWith(t *testing.T, cfg Config, hook func(*Sidecar)) *node {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	sc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hook(sc)
	sc.Start()
	return serve(t, nil, server.Config{}, sc)
}

func ownersKept(sc *Sidecar) int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return len(sc.owners)
}

// TestSidecarRedirectTargetsBounded: an upstream that redirects each
// call to another address (here 200 addresses of one live node:
// 127.0.x.y) makes the sidecar follow each; the owners it keeps for
// targets no topology lists are at most redirectMax, the least recently
// used dropped with their connections, and each is dropped redirectTTL
// after its last use. Before, every address stayed an owner with an open
// connection for the sidecar's life: 201 owners after these 200 calls
// (checked: fails so without the fix).
func TestSidecarRedirectTargetsBounded(t *testing.T) {
	var live, seedLive atomic.Int64
	port := anyAddrNode(t, &live, nil)
	var n atomic.Int64
	seedPort := anyAddrNode(t, &seedLive, func(args [][]byte) string {
		i := n.Add(1)
		return fmt.Sprintf("MOVED %d 127.0.%d.%d:%d", cluster.KeySlot(args[1]), 1+i/200, 2+i%200, port)
	})
	var sc *Sidecar
	side := sidecarWith(t, Config{Seeds: []string{"127.0.0.1:" + strconv.Itoa(seedPort)}, RefreshInterval: time.Hour},
		func(s *Sidecar) { sc = s })
	rdb := client(t, side.addr)
	for i := range 200 {
		if r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60)); r[1] != 99 {
			t.Fatalf("call %d: %v, want the redirect target's limit 99", i, r)
		}
	}
	t.Logf("after 200 redirects to new addresses: %d owners kept, %d connections open to the targets", ownersKept(sc), live.Load())
	if k := ownersKept(sc); k > redirectMax+1 {
		t.Fatalf("%d owners kept after 200 redirects to new addresses, want at most %d (the seed and %d targets)", k, redirectMax+1, redirectMax)
	}
	waitFor(t, "connections to dropped targets closed", func() bool { return live.Load() <= redirectMax })
	// Past redirectTTL, the next redirect drops the idle targets.
	sc.mu.Lock()
	sc.redirectTTL = 50 * time.Millisecond
	sc.mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	if r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60)); r[1] != 99 {
		t.Fatalf("after the idle time: %v, want the redirect target's limit 99", r)
	}
	if k := ownersKept(sc); k != 2 {
		t.Fatalf("%d owners kept after the others were idle past the TTL, want 2 (the seed and the last target)", k)
	}
	waitFor(t, "connections to idle targets closed", func() bool { return live.Load() <= 1 })
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// blackhole is an address that accepts connections and never answers
// (a node whose process hangs, or a proxy in front of a dead one): every
// hand-shake there waits the whole timeout. dials counts its accepts.
func blackhole(t *testing.T, dials *atomic.Int64) string {
	t.Helper()
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return listen(t, func(c net.Conn) {
		dials.Add(1)
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	})
}

// TestSidecarRedirectToBlackholeBreaks: a MOVED to a node that never
// answers. The first call waits the timeout on the dial and gets the
// fallback; the failed dial takes that owner down (its breaker), so the
// next calls get the fallback at once, without dialling it again (only
// its probe does, backing off). Before, each call dialled it again and
// waited the whole timeout: 20 calls took 2.05 s and 20 dials with a
// 100 ms timeout (checked: fails so without the fix).
func TestSidecarRedirectToBlackholeBreaks(t *testing.T) {
	var dials, live atomic.Int64
	hole := blackhole(t, &dials)
	seedPort := anyAddrNode(t, &live, func(args [][]byte) string {
		return fmt.Sprintf("MOVED %d %s", cluster.KeySlot(args[1]), hole)
	})
	side := sidecarNode(t, Config{Seeds: []string{"127.0.0.1:" + strconv.Itoa(seedPort)}, Fallback: Local,
		Timeout: 100 * time.Millisecond, RefreshInterval: time.Hour})
	rdb := client(t, side.addr)
	start := time.Now()
	for i := range 20 {
		// The local fallback decides: limit 2 (max_burst 1 + 1).
		if r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", "k"+strconv.Itoa(i), 1, 10, 60)); r[1] != 2 {
			t.Fatalf("call %d: %v, want the fallback's limit 2", i, r)
		}
	}
	took := time.Since(start)
	n := dials.Load()
	t.Logf("20 calls redirected to a blackhole: %v, %d dials there", took, n)
	// The first call's dial, and at most one probe's (50 ms after the
	// fall, then 100 ms, ...) while the calls run on a slow machine.
	if n > 3 {
		t.Fatalf("%d dials to the blackhole for 20 calls, want the first and the probe's (at most 3)", n)
	}
}

// TestSidecarUnlistedOwnersDropped: the topology's second shard moves to
// a new address at every read (here 60 addresses of one live node: pods
// rescheduled, a hostile upstream), and each is used once. An owner no
// topology has listed for ownerLinger is dropped with its connections.
// Before, every one stayed, up, with its connection on the event loop,
// for the sidecar's life: 61 owners and 60 connections after these 60
// reads, against 2 and 1 (checked: fails so without the fix).
func TestSidecarUnlistedOwnersDropped(t *testing.T) {
	if sidecarIOLoops < 0 {
		t.Skip("loop path only")
	}
	var live atomic.Int64
	port := anyAddrNode(t, &live, nil)
	var cur atomic.Int64
	var seed string
	seed = hostileUpstream(t, func(args []string) string {
		switch args[0] {
		case "cluster":
			i := cur.Load()
			h, p, _ := net.SplitHostPort(seed)
			return slotsReply([4]string{"0", "8191", h, p},
				[4]string{"8192", "16383", fmt.Sprintf("127.0.%d.%d", 1+i/200, 2+i%200), strconv.Itoa(port)})
		case "cl.throttle":
			return "*5\r\n:0\r\n:77\r\n:76\r\n:-1\r\n:0\r\n"
		}
		return "-ERR unknown command\r\n"
	})
	var sc *Sidecar
	side := sidecarWith(t, Config{Seeds: []string{seed}, RefreshInterval: time.Hour}, func(s *Sidecar) {
		sc = s
		s.ownerLinger = 0 // dropped at the first read that does not list it
	})
	rdb := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, Protocol: 2})
	defer rdb.Close()
	key := keyInSlots(8192, cluster.SlotCount-1)
	const rounds = 60
	for i := range rounds {
		cur.Store(int64(i))
		if err := sc.refresh(); err != nil {
			t.Fatal(err)
		}
		if r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", key, 1, 10, 60)); r[1] != 99 {
			t.Fatalf("round %d: %v, want the shard's owner's limit 99", i, r)
		}
	}
	conns := 0
	for _, n := range loopConns(t, sc) {
		conns += n
	}
	t.Logf("after %d topology changes: %d owners kept, %d loop connections, %d open at the owners", rounds, ownersKept(sc), conns, live.Load())
	if k := ownersKept(sc); k != 2 {
		t.Fatalf("%d owners kept after %d topology changes, want 2 (the two listed)", k, rounds)
	}
	if conns != 1 {
		t.Fatalf("%d loop connections after %d topology changes, want 1 (to the listed owner used)", conns, rounds)
	}
	waitFor(t, "connections to unlisted owners closed", func() bool { return live.Load() <= 1 })
}

// TestSidecarRefreshSerialised: topology reads do not overlap (an older
// read installed after a newer one would bring back what the newer one
// had dropped): 8 concurrent refreshes reach the upstream one at a time.
func TestSidecarRefreshSerialised(t *testing.T) {
	var in, most atomic.Int64
	var seed string
	seed = hostileUpstream(t, func(args []string) string {
		if args[0] == "cluster" {
			n := in.Add(1)
			defer in.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(20 * time.Millisecond)
			h, p, _ := net.SplitHostPort(seed)
			return slotsReply([4]string{"0", "16383", h, p})
		}
		return "-ERR unknown command\r\n"
	})
	sc, err := New(Config{Seeds: []string{seed}, Timeout: 5 * time.Second, RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sc.refresh(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Fatalf("%d CLUSTER SLOTS reads at once, want 1", m)
	}
}
