package sidecar

import (
	"net"
	"strings"
	"testing"
	"time"

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
