package sidecar

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

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
