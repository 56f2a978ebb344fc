package sidecar

import (
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/server"
)

// TestSidecarWatchRedirectNotOnPool: a WATCH its owner answers with MOVED
// (the slot moved, the topology not read again yet) is not followed: it
// gets TRYAGAIN (not run; the client retries it, on the new owner once the
// topology is read again). Before, it was followed on the new owner's
// pooled connection, shared by every client: the WATCH stayed on it, so
// that another client's MULTI/EXEC sent there later (the blocking path: a
// TLS port, --io-loops -1) came back aborted (nil) after the watched key
// changed, though that client watched nothing; and the first client's
// WATCH was not on its pin (checked: fails so without the fix).
func TestSidecarWatchRedirectNotOnPool(t *testing.T) {
	for _, loops := range []int{-1, 2} {
		t.Run("loops="+strconv.Itoa(loops), func(t *testing.T) {
			sidecarIOLoops = loops
			defer func() { sidecarIOLoops = 2 }()
			b := serve(t, nil, server.Config{}, nil) // a plain celld: WATCH per connection
			bh, bp, _ := net.SplitHostPort(b.addr)
			var seed string
			seed = hostileUpstream(t, func(args []string) string {
				switch args[0] {
				case "cluster":
					h, p, _ := net.SplitHostPort(seed)
					return slotsReply([4]string{"0", "8191", h, p}, [4]string{"8192", "16383", bh, bp})
				case "watch":
					return "-MOVED " + strconv.Itoa(cluster.KeySlotString(args[1])) + " " + b.addr + "\r\n"
				}
				return "-ERR unknown command\r\n"
			})
			side := sidecarNode(t, Config{Seeds: []string{seed}, PoolSize: 1, RefreshInterval: time.Hour})
			watched := keyInSlots(0, 8191) // A's by the topology; A says B's
			rdb := client(t, side.addr)
			err := rdb.Watch(ctx, func(tx *redis.Tx) error { return nil }, watched)
			if err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") {
				t.Fatalf("WATCH redirected: %v, want TRYAGAIN (not followed on a shared connection)", err)
			}
			// The watched key changes on B; then another client's
			// transaction on B's keys, watching nothing.
			direct := client(t, b.addr)
			if err := direct.Set(ctx, watched, "changed", 0).Err(); err != nil {
				t.Fatal(err)
			}
			other := client(t, side.addr)
			j := keyInSlots(8192, cluster.SlotCount-1)
			if _, err := other.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, j, "1", 0)
				return nil
			}); err != nil {
				t.Fatalf("a transaction watching nothing: %v, want it run", err)
			}
			if v, err := direct.Get(ctx, j).Result(); err != nil || v != "1" {
				t.Fatalf("%s on B: %q %v, want 1 (the transaction ran)", j, v, err)
			}
		})
	}
}

// TestSidecarRedirectTargetBack: a MOVED to a node that is down (its port
// refuses) takes that redirect target down (its breaker: the fallback
// decides); once the node listens again, its probe closes the breaker and
// the redirected calls are forwarded to it again. Guards the breaker a
// failed dial to a redirect target opens (followOnce) against staying
// open for a target no topology lists.
func TestSidecarRedirectTargetBack(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close() // refuses until it listens again below
	seed := hostileUpstream(t, func(args []string) string {
		switch args[0] {
		case "cluster":
			return "-ERR This instance has cluster support disabled\r\n"
		case "cl.throttle":
			return "-MOVED " + strconv.Itoa(cluster.KeySlotString(args[1])) + " " + target + "\r\n"
		}
		return "-ERR unknown command\r\n"
	})
	side := sidecarNode(t, Config{Seeds: []string{seed}, Fallback: Local, Timeout: time.Second, RefreshInterval: time.Hour})
	rdb := client(t, side.addr)
	for i := range 3 {
		if r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", "k"+strconv.Itoa(i), 1, 10, 60)); r[1] != 2 {
			t.Fatalf("call %d, target down: %v, want the fallback's limit 2", i, r)
		}
	}
	if ln, err = net.Listen("tcp", target); err != nil {
		t.Skipf("the target's port was taken meanwhile: %v", err)
	}
	var live atomic.Int64
	srv := redcon.NewServer(target, func(c redcon.Conn, cmd redcon.Command) {
		switch strings.ToLower(string(cmd.Args[0])) {
		case "ping":
			c.WriteString("PONG")
		case "cl.throttle":
			c.WriteArray(5)
			for _, v := range []int{0, 99, 98, -1, 0} {
				c.WriteInt(v)
			}
		case "hello":
			c.WriteRaw([]byte("%1\r\n+proto\r\n:3\r\n"))
		default:
			c.WriteString("OK")
		}
	}, func(redcon.Conn) bool { live.Add(1); return true }, func(redcon.Conn, error) { live.Add(-1) })
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	i := 0
	waitFor(t, "redirected calls forwarded to the target back", func() bool {
		i++
		r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", "k"+strconv.Itoa(i), 1, 10, 60))
		return r[1] == 99
	})
}

// TestSidecarRefreshSkipsDeadOwner: the topology lists an owner that
// accepts connections and never answers, and no request goes to it. A
// topology read that fails on it takes it down (its breaker), so the next
// reads ask the other nodes at once rather than wait the timeout on it
// again. Before, each read dialled it and waited the whole timeout first
// (4 dials for 5 reads, 250 ms each; checked: fails so without the fix);
// now the first read's dial, and at most one of its probe (whose dial
// waits the timeout too).
func TestSidecarRefreshSkipsDeadOwner(t *testing.T) {
	var dials atomic.Int64
	hole := blackhole(t, &dials)
	hh, hp, _ := net.SplitHostPort(hole)
	var seed string
	seed = hostileUpstream(t, func(args []string) string {
		if args[0] == "cluster" {
			h, p, _ := net.SplitHostPort(seed)
			// The dead owner first: the reads try the owners in order.
			return slotsReply([4]string{"0", "8191", hh, hp}, [4]string{"8192", "16383", h, p})
		}
		return "-ERR unknown command\r\n"
	})
	sc, err := New(Config{Seeds: []string{seed}, Timeout: 250 * time.Millisecond, RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	start := time.Now()
	for i := range 5 {
		if err := sc.refresh(); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	t.Logf("5 reads: %v, %d dials to the dead owner", time.Since(start), dials.Load())
	if n := dials.Load(); n > 2 {
		t.Fatalf("%d dials to the dead owner for 5 topology reads, want the first read's and at most one probe's", n)
	}
}
