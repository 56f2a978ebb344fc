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

// fakeNode is an upstream answering CLUSTER SLOTS with every slot at
// *slotsAt (its own address when empty), PING and HELLO, and CL.THROTTLE
// with what throttle returns: a MOVED to another node ("-MOVED ...") or
// "" for the reply of a limit of 99.
func fakeNode(t *testing.T, slotsAt *atomic.Value, throttle func(slot int) string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	self := ln.Addr().String()
	srv := redcon.NewServer(self, func(c redcon.Conn, cmd redcon.Command) {
		switch strings.ToLower(string(cmd.Args[0])) {
		case "cluster":
			at, _ := slotsAt.Load().(string)
			if at == "" {
				at = self
			}
			host, ps, _ := net.SplitHostPort(at)
			port, _ := strconv.Atoi(ps)
			c.WriteArray(1)
			c.WriteArray(3)
			c.WriteInt(0)
			c.WriteInt(cluster.SlotCount - 1)
			c.WriteArray(2)
			c.WriteBulkString(host)
			c.WriteInt(port)
		case "hello":
			c.WriteArray(2)
			c.WriteBulkString("proto")
			c.WriteInt(3)
		case "ping":
			c.WriteString("PONG")
		case "cl.throttle":
			if r := throttle(cluster.KeySlot(cmd.Args[1])); r != "" {
				c.WriteError(r)
				return
			}
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
	return self
}

// TestSidecarRedirectChain: during an HA handover the old leader answers
// MOVED to the new one, which, not knowing yet that it leads, answers
// MOVED back (CI's TestProcessSidecarHAFailover relayed that second MOVED
// to a plain client, an error it cannot follow). The sidecar follows the
// chain while the nodes disagree, and a chain that does not end within
// maxHops gets TRYAGAIN (not run; clients retry it), never a MOVED.
func TestSidecarRedirectChain(t *testing.T) {
	var aAt, bAt atomic.Value
	var b string
	var bMoves atomic.Int64 // B's MOVEDs back to A still to answer
	a := fakeNode(t, &aAt, func(slot int) string { return "MOVED " + strconv.Itoa(slot) + " " + b })
	var aAddr string
	b = fakeNode(t, &bAt, func(slot int) string {
		if bMoves.Add(-1) >= 0 {
			return "MOVED " + strconv.Itoa(slot) + " " + aAddr
		}
		return ""
	})
	aAddr = a
	bAt.Store(a) // B, too, says A owns every slot (it does not know yet)
	side := sidecarNode(t, Config{Seeds: []string{a}, Fallback: Local, RefreshInterval: time.Hour})
	rdb := client(t, side.addr)

	// A → B → A → B: two MOVEDs after the first, then B answers.
	bMoves.Store(1)
	if r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60)); r[1] != 99 {
		t.Fatalf("after a redirect chain: %v, want the owner's limit 99", r)
	}
	// A pipeline: the first request follows A → B → A → B → A → B (the
	// longest chain that ends within maxHops), the others A → B.
	bMoves.Store(2)
	pipe := rdb.Pipeline()
	cmds := []interface{ Err() error }{}
	for i := range 4 {
		cmds = append(cmds, pipe.Do(ctx, "CL.THROTTLE", "p"+strconv.Itoa(i), 1, 10, 60))
	}
	pipe.Exec(ctx)
	for i, c := range cmds {
		if err := c.Err(); err != nil {
			t.Fatalf("pipelined call %d after redirect chains: %v", i, err)
		}
	}
	// A chain without end: TRYAGAIN, in bounded time.
	bMoves.Store(1 << 40)
	start := time.Now()
	err := rdb.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN ") || !strings.Contains(err.Error(), "not run") {
		t.Fatalf("an endless redirect chain: %v, want TRYAGAIN ... not run", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("an endless redirect chain took %v", d)
	}
}
