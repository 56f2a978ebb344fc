package sidecar

import (
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/cluster"
	"github.com/tidwall/redcon"
)

// partialOwner is an upstream whose CLUSTER SLOTS lists only slots
// 0..8191 (as a node answers during a failover, the other shard having no
// leader yet) until full is set. It answers CL.THROTTLE with limit 99 so
// that a forwarded decision tells itself from the sidecar's own.
func partialOwner(t *testing.T, full *atomic.Bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	host, ps, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(ps)
	srv := redcon.NewServer(addr, func(c redcon.Conn, cmd redcon.Command) {
		switch strings.ToLower(string(cmd.Args[0])) {
		case "cluster":
			last := 8191
			if full.Load() {
				last = cluster.SlotCount - 1
			}
			c.WriteArray(1)
			c.WriteArray(3)
			c.WriteInt(0)
			c.WriteInt(last)
			c.WriteArray(2)
			c.WriteBulkString(host)
			c.WriteInt(port)
		case "hello": // the sidecar speaks RESP3 upstream for a RESP3 client
			c.WriteArray(2)
			c.WriteBulkString("proto")
			c.WriteInt(3)
		case "ping":
			c.WriteString("PONG")
		case "cl.throttle":
			c.WriteArray(5)
			for _, v := range []int{0, 99, 98, -1, 0} {
				c.WriteInt(v)
			}
		default:
			c.WriteError("ERR unknown command " + string(cmd.Args[0]))
		}
	}, nil, nil)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return addr
}

// keyInSlots returns a key whose slot is in [lo, hi].
func keyInSlots(lo, hi int) string {
	for i := 0; ; i++ {
		k := "k" + strconv.Itoa(i)
		if s := cluster.KeySlotString(k); s >= lo && s <= hi {
			return k
		}
	}
}

// TestSidecarUnownedSlots: a slot the topology leaves without an owner
// (a CLUSTER SLOTS read during a failover) is decided by the fallback,
// never crashes the connection (before: a nil owner's breaker, "panic in
// connection loop" in TestProcessSidecarHAFailover), is counted, and
// makes the sidecar read the topology again at once: once the upstream
// lists the slot, the next calls are forwarded, long before the periodic
// refresh (an hour here).
func TestSidecarUnownedSlots(t *testing.T) {
	for _, mode := range []Mode{Local, Open, Closed} {
		t.Run(mode.String(), func(t *testing.T) {
			var full atomic.Bool
			owner := partialOwner(t, &full)
			side := sidecarNode(t, Config{Seeds: []string{owner}, Fallback: mode, RefreshInterval: time.Hour})
			rdb := client(t, side.addr)
			owned, unowned := keyInSlots(0, 8191), keyInSlots(8192, cluster.SlotCount-1)
			if r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", owned, 1, 10, 60)); r[1] != 99 {
				t.Fatalf("owned slot: %v, want the owner's limit 99", r)
			}
			// Two calls in one pipeline and one alone: both paths of the
			// event loop's session (and the blocking path's Do).
			pipe := rdb.Pipeline()
			a := pipe.Do(ctx, "CL.THROTTLE", unowned, 1, 10, 60)
			b := pipe.Do(ctx, "CL.THROTTLE", owned, 1, 10, 60)
			pipe.Exec(ctx)
			if r := cmdInts(t, b); r[1] != 99 {
				t.Fatalf("owned slot beside an unowned one: %v", r)
			}
			switch mode {
			case Local, Open:
				if r := cmdInts(t, a); r[1] != 2 {
					t.Fatalf("unowned slot, %v fallback: %v, want limit 2 (decided here)", mode, r)
				}
			case Closed:
				_, err := a.Result()
				want := "UPSTREAMDOWN slot " + strconv.Itoa(cluster.KeySlotString(unowned)) + " has no owner"
				if err == nil || !strings.HasPrefix(err.Error(), want) {
					t.Fatalf("unowned slot, closed: %v, want %q...", err, want)
				}
			}
			if got := side.sc.StatsRef().Unowned.Load(); got != 1 {
				t.Fatalf("Unowned %d, want 1", got)
			}
			if info := rdb.Info(ctx, "upstream").Val(); !strings.Contains(info, "upstream_unowned:1") ||
				!strings.Contains(info, ",slots=8192,") {
				t.Fatalf("INFO upstream:\n%s", rdb.Info(ctx, "upstream").Val())
			}
			full.Store(true)
			deadline := time.Now().Add(10 * time.Second)
			for {
				v, err := rdb.Do(ctx, "CL.THROTTLE", unowned, 1, 10, 60).Result()
				if err == nil && v.([]any)[1].(int64) == 99 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the slot's owner listed, the sidecar still does not forward it: %v %v (refreshes %d)",
						v, err, side.sc.StatsRef().Refreshes.Load())
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
