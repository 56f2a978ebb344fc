package sidecar

import (
	"io"
	"net"
	"runtime"
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

// hostileUpstream is an upstream that answers PING and HELLO as a node
// does and everything else with whatever answer returns (raw bytes, not
// checked): a broken or hostile node, or a proxy in front of one.
func hostileUpstream(t testing.TB, answer func(args []string) string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := redcon.NewServer(ln.Addr().String(), func(c redcon.Conn, cmd redcon.Command) {
		args := make([]string, len(cmd.Args))
		for i, a := range cmd.Args {
			args[i] = strings.ToLower(string(a))
		}
		switch args[0] {
		case "ping":
			c.WriteString("PONG")
		case "hello":
			c.WriteRaw([]byte("%1\r\n+proto\r\n:3\r\n"))
		default:
			c.WriteRaw([]byte(answer(args)))
		}
	}, nil, nil)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestSidecarHostileReplyLength: an owner that answers a bulk string
// whose length is near 2^63 (or 2^62: a reply that would never end) is
// a protocol error: the connection fails and the decision is the
// fallback's, and the sidecar lives on. Before, the framer's size+n+2
// overflowed and indexed before its buffer: a panic on the event loop
// (or the blocking path's reader goroutine) that killed the process.
func TestSidecarHostileReplyLength(t *testing.T) {
	for _, length := range []string{"9223372036854775807", "9223372036854775786", "4611686018427387904"} {
		t.Run(length, func(t *testing.T) {
			up := hostileUpstream(t, func(args []string) string {
				if args[0] == "cluster" {
					return "-ERR This instance has cluster support disabled\r\n"
				}
				return "$" + length + "\r\nabc"
			})
			side := sidecarNode(t, Config{Seeds: []string{up}, Fallback: Local, RefreshInterval: time.Hour})
			rdb := client(t, side.addr)
			// The local fallback decides: limit 2 (max_burst 1 + 1).
			if r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60)); r[1] != 2 {
				t.Fatalf("CL.THROTTLE: %v, want the fallback's limit 2", r)
			}
			if err := rdb.Ping(ctx).Err(); err != nil {
				t.Fatalf("the sidecar after the reply: %v", err)
			}
			if n := side.sc.StatsRef().FallbackByMode[Local].Load(); n != 1 {
				t.Fatalf("fallback decisions %d, want 1", n)
			}
		})
	}
}

// TestSidecarPushMidStream: an owner that sends a RESP3 push (an
// out-of-band message: an invalidation, a pub/sub message) before a
// reply. celld forwards no command whose reply is a push (no Pub/Sub,
// CLIENT TRACKING refused), so a push is never an answer: it is skipped,
// as a RESP3 client skips one, also one larger than the reply limit
// (dropped as it comes). Before, it was handed to the oldest request as
// its reply, and every reply after it to the request before its own: a
// pipeline's decisions answered one off (and the last reply, awaited by
// nobody, broke the connection).
func TestSidecarPushMidStream(t *testing.T) {
	for _, size := range []int{1, 512 << 10} { // 512 KiB: past the reply limit and a read's room
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			push := ">2\r\n$10\r\ninvalidate\r\n*1\r\n$" + strconv.Itoa(size) + "\r\n" + strings.Repeat("k", size) + "\r\n"
			up := hostileUpstream(t, func(args []string) string {
				switch args[0] {
				case "cluster":
					return "-ERR This instance has cluster support disabled\r\n"
				case "cl.throttle": // limit = the key's number, so replies tell apart
					return push + "*5\r\n:0\r\n:" + strings.TrimPrefix(args[1], "k") + "\r\n:0\r\n:-1\r\n:0\r\n"
				}
				return "-ERR unknown command\r\n"
			})
			side := sidecarNode(t, Config{Seeds: []string{up}, Fallback: Closed, RefreshInterval: time.Hour, ReplyLimit: 16 << 10})
			for _, proto := range []int{2, 3} {
				rdb := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, Protocol: proto})
				defer rdb.Close()
				for round := range 3 {
					pipe := rdb.Pipeline()
					var cmds []*redis.Cmd
					for i := range 4 {
						cmds = append(cmds, pipe.Do(ctx, "CL.THROTTLE", "k"+strconv.Itoa(10*round+i+1), 1, 10, 60))
					}
					pipe.Exec(ctx)
					for i, c := range cmds {
						v, err := c.Result()
						r, ok := v.([]any)
						if err != nil || !ok || len(r) != 5 || r[1] != int64(10*round+i+1) {
							t.Fatalf("RESP%d round %d, call %d: %.200v %v, want the owner's reply for k%d", proto, round, i, v, err, 10*round+i+1)
						}
					}
				}
			}
			if n := side.sc.StatsRef().UpstreamErrors.Load(); n != 0 {
				t.Fatalf("upstream errors %d, want 0", n)
			}
		})
	}
}

// deadAddr is an address whose node is dead to the sidecar: it accepts
// and closes at once, so every hand-shake fails (a listener of its own,
// not a released port, which the next listener of the test could get).
func deadAddr(t testing.TB) string {
	t.Helper()
	return listen(t, func(c net.Conn) {
		c.Close()
	})
}

// probes counts the goroutines probing an owner.
func probes() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "sidecar.(*owner).probe(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestSidecarRemovedOwnersNotProbedForever: the shard of slots
// 8192-16383 fails over, five times, each time to a new address (a
// rescheduled pod's), and each old leader never comes back. Each went
// down when a command met it; once the topology no longer lists it, its
// probe ends and the sidecar forgets it. Before, every old leader kept a
// goroutine dialling it every second, and an entry in the owners map, for
// the sidecar's life: five failovers, five probes.
func TestSidecarRemovedOwnersNotProbedForever(t *testing.T) {
	const rounds = 5
	leaders := make([]string, rounds)
	for i := range leaders {
		leaders[i] = deadAddr(t)
	}
	var cur atomic.Int32
	var self string
	self = hostileUpstream(t, func(args []string) string {
		switch args[0] {
		case "cluster":
			h, p, _ := net.SplitHostPort(self)
			lh, lp, _ := net.SplitHostPort(leaders[cur.Load()])
			return slotsReply([4]string{"0", "8191", h, p}, [4]string{"8192", "16383", lh, lp})
		case "cl.throttle":
			return "*5\r\n:0\r\n:99\r\n:98\r\n:-1\r\n:0\r\n"
		}
		return "-ERR unknown command\r\n"
	})
	before := probes()
	side := sidecarNode(t, Config{Seeds: []string{self}, Fallback: Local, RefreshInterval: time.Hour})
	rdb := client(t, side.addr)
	key := keyInSlots(8192, cluster.SlotCount-1)
	slot := cluster.KeySlotString(key)
	for i := range rounds {
		cur.Store(int32(i))
		deadline := time.Now().Add(10 * time.Second)
		for side.sc.Owner(slot) != leaders[i] {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the topology never named %s (owner %q)", i, leaders[i], side.sc.Owner(slot))
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The leader is dead: the decision is the fallback's, the
		// owner goes down, its probe starts (and reads the topology
		// every 100 ms, which brings the next round's leader).
		if r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", key, 1, 10, 60)); r[1] != 2 {
			t.Fatalf("round %d: %v, want the fallback's limit 2", i, r)
		}
	}
	// Only the last leader, still listed, is probed; the others are
	// forgotten. A probe looks at the topology at least every second.
	deadline := time.Now().Add(20 * time.Second)
	for {
		side.sc.mu.Lock()
		owners := len(side.sc.owners)
		side.sc.mu.Unlock()
		n := probes() - before
		if n <= 1 && owners == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d probes and %d owners kept after %d failovers, want 1 and 2 (the upstream and the last leader)", n, owners, rounds)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The forwarding to the upstream's own slots still works.
	if r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", keyInSlots(0, 8191), 1, 10, 60)); r[1] != 99 {
		t.Fatalf("owned slot: %v, want the owner's limit 99", r)
	}
}

// TestSidecarMovedRefreshesBounded: an owner that answers MOVED to every
// command, here to itself while its CLUSTER SLOTS names itself (a broken
// node, or one whose MOVED and CLUSTER SLOTS disagree). Each call follows
// the chain maxHops times and gets TRYAGAIN (TestSidecarRedirectChain); the
// topology is read again at most once per
// soonGap (100 ms), not after every MOVED: before, one client in a loop
// made the sidecar read CLUSTER SLOTS (a new connection each) over a
// thousand times a second.
func TestSidecarMovedRefreshesBounded(t *testing.T) {
	var reads atomic.Int64
	var self string
	self = hostileUpstream(t, func(args []string) string {
		switch args[0] {
		case "cluster":
			reads.Add(1)
			h, p, _ := net.SplitHostPort(self)
			return slotsReply([4]string{"0", "16383", h, p})
		case "cl.throttle":
			return "-MOVED " + strconv.Itoa(cluster.KeySlotString(args[1])) + " " + self + "\r\n"
		}
		return "-ERR unknown command\r\n"
	})
	side := sidecarNode(t, Config{Seeds: []string{self}, Fallback: Local, RefreshInterval: time.Hour})
	rdb := client(t, side.addr)
	before := reads.Load()
	start := time.Now()
	calls := 0
	for time.Since(start) < 500*time.Millisecond || calls < 20 {
		err := rdb.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN ") {
			t.Fatalf("call %d: %v, want TRYAGAIN after the redirect chain", calls, err)
		}
		calls++
	}
	elapsed := time.Since(start)
	// One read per 100 ms, and the first at once; twice that for slack.
	if n, most := reads.Load()-before, 2*(int64(elapsed/soonGap)+1); n > most {
		t.Fatalf("%d CLUSTER SLOTS reads for %d MOVED in %v, want at most %d", n, calls, elapsed, most)
	}
}

// cutProxy relays TCP connections to a node; cut closes every one of
// them (a network blip, a restart of the node behind it) and keeps
// accepting new ones.
type cutProxy struct {
	addr  string
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t testing.TB, to string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: ln.Addr().String()}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestSidecarWatchLostAbortsExec: a client WATCHes a key through the
// sidecar (a connection pinned to its owner), then that connection
// breaks (cut here; the owner restarting, or a failover moving the
// watched slot to another node, do the same), and another client writes
// the key. The transaction that follows must not apply: the owner no
// longer watches the key for the client, so the sidecar answers its EXEC
// as aborted (a null reply, which applications retry), and the other
// client's write stays. Before, the transaction went out on a new pinned
// connection without the WATCH and overwrote it.
func TestSidecarWatchLostAbortsExec(t *testing.T) {
	owner := serve(t, nil, server.Config{}, nil)
	px := newCutProxy(t, owner.addr)
	side := sidecarNode(t, Config{Seeds: []string{px.addr}, Fallback: Closed, RefreshInterval: time.Hour})
	direct := client(t, owner.addr)
	other := client(t, side.addr)
	for _, proto := range []int{2, 3} {
		rdb := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, Protocol: proto})
		defer rdb.Close()
		conn := rdb.Conn()
		defer conn.Close()
		key := "watched" + strconv.Itoa(proto)
		if err := conn.Do(ctx, "WATCH", key).Err(); err != nil {
			t.Fatal(err)
		}
		px.cut()
		// Another client writes the key; the cut took the owner down
		// for a moment (the fallback, closed, refuses meanwhile).
		deadline := time.Now().Add(10 * time.Second)
		for direct.Get(ctx, key).Val() != "theirs" {
			if time.Now().After(deadline) {
				t.Fatal("the other client's SET never reached the owner")
			}
			other.Set(ctx, key, "theirs", 0)
			time.Sleep(20 * time.Millisecond)
		}
		var exec *redis.Cmd
		if _, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "MULTI")
			p.Do(ctx, "SET", key, "mine")
			exec = p.Do(ctx, "EXEC")
			return nil
		}); err != nil && err != redis.Nil {
			t.Fatalf("RESP%d: transaction: %v", proto, err)
		}
		if v, err := exec.Result(); err != redis.Nil {
			t.Fatalf("RESP%d: EXEC after the WATCH's connection broke: %v %v, want an aborted transaction (nil)", proto, v, err)
		}
		if v := direct.Get(ctx, key).Val(); v != "theirs" {
			t.Fatalf("RESP%d: the key is %q on the owner, want the other client's %q", proto, v, "theirs")
		}
		// The WATCH ended with that EXEC: the next transaction runs.
		if _, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "MULTI")
			p.Do(ctx, "SET", key, "mine")
			exec = p.Do(ctx, "EXEC")
			return nil
		}); err != nil {
			t.Fatalf("RESP%d: the next transaction: %v", proto, err)
		}
		if v := direct.Get(ctx, key).Val(); v != "mine" {
			t.Fatalf("RESP%d: after the next transaction the key is %q, want %q", proto, v, "mine")
		}
	}
}

// TestSidecarClusterSlotsErrorNotPlain: a cluster node that answers
// CLUSTER SLOTS with an error other than "-ERR" (celld and Redis answer
// -LOADING while they load their data after a restart; -CLUSTERDOWN,
// -TRYAGAIN, -BUSY, -MASTERDOWN are transient too) is a read that failed,
// not a node without cluster mode: the topology stays, and each key still
// goes to its own owner. Before, any error made that node the owner of
// every slot (a plain upstream): a restarted leader still loading, which
// answers PING, so that its probe read the topology from it first, took
// the other shards' decisions (forwarded to the wrong owner) until the
// next successful read.
func TestSidecarClusterSlotsErrorNotPlain(t *testing.T) {
	for _, reply := range []string{
		"-LOADING celld is loading the dataset in memory", "-CLUSTERDOWN The cluster is down",
		"-TRYAGAIN retry", "-BUSY script running", "-MASTERDOWN Link with MASTER is down",
	} {
		t.Run(strings.Fields(reply)[0][1:], func(t *testing.T) {
			var failing atomic.Bool
			var failed atomic.Int64 // CLUSTER SLOTS answered with the error
			var self, other string
			// Both nodes answer CLUSTER SLOTS alike: self owns 0-8191
			// (limit 99), other 8192-16383 (limit 77).
			node := func(limit string) func(args []string) string {
				return func(args []string) string {
					switch args[0] {
					case "cluster":
						if failing.Load() {
							failed.Add(1)
							return reply + "\r\n"
						}
						h, p, _ := net.SplitHostPort(self)
						oh, op, _ := net.SplitHostPort(other)
						return slotsReply([4]string{"0", "8191", h, p}, [4]string{"8192", "16383", oh, op})
					case "cl.throttle":
						return "*5\r\n:0\r\n:" + limit + "\r\n:0\r\n:-1\r\n:0\r\n"
					}
					return "-ERR unknown command\r\n"
				}
			}
			self, other = hostileUpstream(t, node("99")), hostileUpstream(t, node("77"))
			side := sidecarNode(t, Config{Seeds: []string{self}, Fallback: Closed, RefreshInterval: 20 * time.Millisecond})
			rdb := client(t, side.addr)
			keys := map[string]int64{keyInSlots(0, 8191): 99, keyInSlots(8192, cluster.SlotCount-1): 77}
			check := func(when string) {
				t.Helper()
				for key, limit := range keys {
					if r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", key, 1, 10, 60)); r[1] != limit {
						t.Fatalf("%s: %s (slot %d): %v, want its owner's limit %d (topology: owner %q)",
							when, key, cluster.KeySlotString(key), r, limit, side.sc.Owner(cluster.KeySlotString(key)))
					}
				}
			}
			check("before")
			failing.Store(true)
			// Several reads (every 20 ms) meet the error.
			deadline := time.Now().Add(10 * time.Second)
			for failed.Load() < 3 {
				if time.Now().After(deadline) {
					t.Fatalf("%d reads in 10 s", failed.Load())
				}
				time.Sleep(10 * time.Millisecond)
			}
			check("after CLUSTER SLOTS answered " + reply)
		})
	}
}

// TestSidecarRefusedByOwnerFallsBack: an owner that refuses every
// decision without running it (-TRYAGAIN: an HA leader fenced, as every
// leader is while etcd is down; -CLUSTERDOWN: a slot without a leader)
// for longer than the timeout has them answered by the fallback in the
// local and open modes, as docs/ha.md promises an application that must
// keep deciding while etcd is down; before that (a leader's first
// moments) the refusal is relayed, which clients retry, and the closed
// mode always relays it. Before, every mode relayed it for as long as it
// lasted: the local sidecar answered TRYAGAIN to every decision.
func TestSidecarRefusedByOwnerFallsBack(t *testing.T) {
	for _, refusal := range []string{
		"-TRYAGAIN this node's leadership of the slot is not confirmed (fenced); retry",
		"-CLUSTERDOWN Hash slot not served",
	} {
		for _, mode := range []Mode{Local, Open, Closed} {
			t.Run(strings.Fields(refusal)[0][1:]+"/"+mode.String(), func(t *testing.T) {
				up := hostileUpstream(t, func(args []string) string {
					switch args[0] {
					case "cluster":
						return "-ERR This instance has cluster support disabled\r\n"
					case "cl.throttle":
						return refusal + "\r\n"
					case "get":
						return "$5\r\nowner\r\n"
					}
					return "-ERR unknown command\r\n"
				})
				side := sidecarNode(t, Config{Seeds: []string{up}, Fallback: mode, Timeout: 100 * time.Millisecond, RefreshInterval: time.Hour})
				rdb := client(t, side.addr)
				// The first refusal is relayed (a retry may find the
				// owner deciding again).
				if v, err := rdb.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60).Result(); err == nil || err.Error() != refusal[1:] {
					t.Fatalf("first call: %v %v, want the owner's %q", v, err, refusal[1:])
				}
				start := time.Now()
				for {
					v, err := rdb.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60).Result()
					if mode == Closed {
						if err == nil || err.Error() != refusal[1:] {
							t.Fatalf("closed: %v %v, want the owner's %q", v, err, refusal[1:])
						}
						if time.Since(start) > 300*time.Millisecond {
							break
						}
					} else if r, ok := v.([]any); err == nil && ok && len(r) == 5 && r[1] == int64(2) {
						break // decided here: limit 2 (max_burst 1 + 1)
					} else if err == nil || err.Error() != refusal[1:] || time.Since(start) > 5*time.Second {
						t.Fatalf("%v, %v after the owner refused: %v %v, want the fallback's decision (limit 2)",
							mode, time.Since(start), v, err)
					}
					time.Sleep(10 * time.Millisecond)
				}
				if n := side.sc.StatsRef().Refused.Load(); (n > 0) != (mode != Closed) {
					t.Fatalf("%v: refused %d", mode, n)
				}
				// The owner still answers what it runs.
				if v, err := rdb.Get(ctx, "x").Result(); err != nil || v != "owner" {
					t.Fatalf("GET: %q %v, want the owner's reply", v, err)
				}
			})
		}
	}
}
