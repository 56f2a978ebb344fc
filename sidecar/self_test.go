package sidecar

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/server"
)

// TestSidecarTopologyNamesItself: an upstream whose CLUSTER SLOTS names
// the sidecar's own address as the owner of slots 8192-16383, and that
// answers MOVED to the sidecar for keys "m*" of its own slots. The
// sidecar never forwards to itself: the keys of those slots, and the
// redirected ones, get the fallback at once (closed: an error naming the
// loop; local: decided here, a fresh key allowed), the owner is reported
// as "self", and the rest is forwarded as before, with no upstream
// error. Before, each such command came back in on the sidecar's own
// port, was forwarded again, and so on until the timeout took "the
// owner" down: the closed mode's error said "unreachable", and a MOVED
// to itself denied a fresh key on its first call (checked: fails without
// the fix).
func TestSidecarTopologyNamesItself(t *testing.T) {
	for _, mode := range []Mode{Closed, Local} {
		t.Run(mode.String(), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			selfAddr := ln.Addr().String()
			var seed string
			seed = hostileUpstream(t, func(args []string) string {
				switch args[0] {
				case "cluster":
					h, p, _ := net.SplitHostPort(seed)
					sh, sp, _ := net.SplitHostPort(selfAddr)
					return slotsReply([4]string{"0", "8191", h, p}, [4]string{"8192", "16383", sh, sp})
				case "cl.throttle":
					if strings.HasPrefix(args[1], "m") {
						return "-MOVED " + strconv.Itoa(cluster.KeySlotString(args[1])) + " " + selfAddr + "\r\n"
					}
					return "*5\r\n:0\r\n:77\r\n:76\r\n:-1\r\n:0\r\n"
				}
				return "-ERR unknown command\r\n"
			})
			sc, err := New(Config{Seeds: []string{seed}, Fallback: mode, Timeout: 300 * time.Millisecond, RefreshInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			sc.Start()
			side := serve(t, ln, server.Config{}, sc)
			rdb := client(t, side.addr)
			own := keyInSlots(8192, cluster.SlotCount-1)
			moved := "m" + keyInSlots(0, 8191)
			for cluster.KeySlotString(moved) > 8191 {
				moved += "x"
			}
			for i := range 3 {
				for _, key := range []string{own, moved} {
					r, err := rdb.Do(ctx, "CL.THROTTLE", key, 1, 10, 60).Result()
					switch mode {
					case Closed:
						if err == nil || !strings.Contains(err.Error(), "own address") {
							t.Fatalf("call %d on %s: %v %v, want UPSTREAMDOWN ... this sidecar's own address", i, key, r, err)
						}
					case Local:
						// Decided here: limit 2, a fresh key allowed.
						v := ints(t, r, err)
						if v[1] != 2 || (i == 0 && v[0] != 0) {
							t.Fatalf("call %d on %s: %v, want the local fallback's decision (limit 2, allowed first)", i, key, v)
						}
					}
				}
				if v := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", keyInSlots(0, 8191), 1, 10, 60)); v[1] != 77 {
					t.Fatalf("call %d on the upstream's own slots: %v, want its limit 77", i, v)
				}
			}
			if n := sc.StatsRef().UpstreamErrors.Load(); n != 0 {
				t.Fatalf("%d upstream errors, want 0 (nothing forwarded to itself)", n)
			}
			found := false
			for _, l := range sc.Info() {
				if strings.Contains(l, "addr="+selfAddr+",state=self") {
					found = true
				}
			}
			if !found {
				t.Fatalf("INFO upstream does not report %s as self: %q", selfAddr, sc.Info())
			}
		})
	}
}

// TestSidecarIsSelf: which addresses are the sidecar's own, for
// listeners on one IP and on every address; host names are not resolved.
func TestSidecarIsSelf(t *testing.T) {
	sc, err := New(Config{Seeds: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	sc.ListeningOn(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7000})
	sc.ListeningOn(&net.TCPAddr{IP: net.IPv6unspecified, Port: 7001})
	for addr, want := range map[string]bool{
		"127.0.0.1:7000": true, "localhost:7000": true, "127.0.0.2:7000": false, "[::1]:7000": false,
		"10.1.2.3:7000": false, "127.0.0.1:7002": false, "myhost:7000": false,
		"127.0.0.1:7001": true, "[::1]:7001": true, "localhost:7001": true, "0.0.0.0:7001": true,
		"192.0.2.77:7001": false, "myhost:7001": false,
	} {
		if got := sc.isSelf(addr); got != want {
			t.Errorf("isSelf(%s) = %v, want %v", addr, got, want)
		}
	}
	// An owner known before the listener is marked when it comes.
	o := sc.ownerFor("127.0.0.1:7005")
	if o.self.Load() || !o.br.isUp() {
		t.Fatal("an owner marked self before the sidecar listens there")
	}
	sc.ListeningOn(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7005})
	if !o.self.Load() || o.br.isUp() {
		t.Fatal("an owner at a new listener's address is not marked self (and down)")
	}
}
