package main

// Session 21's attacks on sidecar mode (redo of session 20's, lost):
// an upstream whose topology or redirects name the sidecar itself.

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/celld/celld/cluster"
	"github.com/tidwall/redcon"
)

// selfNamingUpstream is a fake cluster node whose CLUSTER SLOTS gives
// slots 0-8191 to itself and 8192-16383 to sidecarAddr, and that answers
// CL.THROTTLE of a key starting with "m" with MOVED to sidecarAddr, any
// other with a limit of 77.
func selfNamingUpstream(t *testing.T, sidecarAddr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	self := ln.Addr().String()
	node := func(c redcon.Conn, addr string) {
		h, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		c.WriteArray(2)
		c.WriteBulkString(h)
		c.WriteInt(port)
	}
	srv := redcon.NewServer(self, func(c redcon.Conn, cmd redcon.Command) {
		switch strings.ToLower(string(cmd.Args[0])) {
		case "cluster":
			c.WriteArray(2)
			c.WriteArray(3)
			c.WriteInt(0)
			c.WriteInt(8191)
			node(c, self)
			c.WriteArray(3)
			c.WriteInt(8192)
			c.WriteInt(cluster.SlotCount - 1)
			node(c, sidecarAddr)
		case "ping":
			c.WriteString("PONG")
		case "hello":
			c.WriteRaw([]byte("%1\r\n+proto\r\n:3\r\n"))
		case "cl.throttle":
			if len(cmd.Args) > 1 && cmd.Args[1][0] == 'm' {
				c.WriteError(fmt.Sprintf("MOVED %d %s", cluster.KeySlot(cmd.Args[1]), sidecarAddr))
				return
			}
			c.WriteArray(5)
			for _, v := range []int{0, 77, 76, -1, 0} {
				c.WriteInt(v)
			}
		default:
			c.WriteError("ERR unknown command")
		}
	}, nil, nil)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return self
}

// keyIn returns a key with prefix whose slot is in [lo, hi].
func keyIn(prefix string, lo, hi int) string {
	for i := 0; ; i++ {
		k := prefix + strconv.Itoa(i)
		if s := cluster.KeySlotString(k); s >= lo && s <= hi {
			return k
		}
	}
}

// TestProcessSidecarTopologyNamesItself: a sidecar (the real binary)
// whose upstream's CLUSTER SLOTS names the sidecar's own address for
// half the slots, and whose upstream answers MOVED to the sidecar for
// some keys. It never forwards to itself: those keys get the closed
// fallback's error naming the loop, at once; the upstream's own keys
// are forwarded; INFO shows the owner as "self" and counts no upstream
// error. Before, each such command came back in on the sidecar's own
// port and was forwarded again, hop after hop, until the timeout took
// "the owner" down: "unreachable" after 250 ms, upstream errors counted
// (checked: fails without the fix). --upstream naming the sidecar's own
// --addr is refused at start-up (config); a topology or a redirect is
// not configuration.
func TestProcessSidecarTopologyNamesItself(t *testing.T) {
	addr := freeAddr(t)
	up := selfNamingUpstream(t, addr)
	side := launchAt(t, t.TempDir(), addr, "--persist", "no", "--upstream", up, "--upstream-fallback", "closed")
	rdb := side.client()
	ctx := context.Background()
	own, moved := keyIn("k", 8192, cluster.SlotCount-1), keyIn("m", 0, 8191)
	for i := range 3 {
		for _, key := range []string{own, moved} {
			err := rdb.Do(ctx, "CL.THROTTLE", key, 1, 10, 60).Err()
			if err == nil || !strings.Contains(err.Error(), "own address") {
				t.Fatalf("call %d on %s: %v, want UPSTREAMDOWN ... this sidecar's own address; log:\n%s", i, key, err, side.logs)
			}
		}
		r, err := rdb.Do(ctx, "CL.THROTTLE", keyIn("k", 0, 8191), 1, 10, 60).Slice()
		if err != nil || r[1] != int64(77) {
			t.Fatalf("call %d on the upstream's own slots: %v %v, want its limit 77", i, r, err)
		}
	}
	infoUp := info(t, rdb, "upstream")
	self := false
	for k, v := range infoUp {
		if strings.HasPrefix(k, "owner") && strings.Contains(v, "addr="+addr+",state=self") {
			self = true
		}
	}
	if infoUp["upstream_errors"] != "0" || !self {
		t.Fatalf("INFO upstream %v: want upstream_errors 0 and owner %s state=self", infoUp, addr)
	}
}
