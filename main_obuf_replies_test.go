package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestProcessOutputLimitBoundsAmplifiedReplies: commands whose one reply
// is far larger than what they read (ZRANDMEMBER with a negative count,
// MGET naming one big value many times, EVAL returning one string many
// times, EXEC of many such calls) sent by a client that reads nothing,
// with --client-output-buffer-limit "normal 16mb 0 0", on the event loop
// and with --io-loops 0. Each reply is 200+ MB; the client must be closed
// near the limit (omem logged at most 16 MiB plus one 64 KiB check) and
// the server's peak RSS (VmHWM) must grow by less than 64 MB, as Redis's
// does (it stops appending to a client flagged to close). Without the
// reply check points (server/obuf.go: replyFull) each reply was built
// whole first: peak RSS grew by 250-700 MB and omem was the whole reply.
func TestProcessOutputLimitBoundsAmplifiedReplies(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	const limit = 16 << 20
	big := strings.Repeat("v", 256<<10)
	member := strings.Repeat("m", 200)
	cases := []struct {
		name  string
		setup func(ctx context.Context, cl *redis.Client) error
		cmd   []string
	}{
		{"zrandmember", func(ctx context.Context, cl *redis.Client) error {
			return cl.ZAdd(ctx, "z", redis.Z{Score: 1.5, Member: member + "a"}, redis.Z{Score: 2.5, Member: member + "b"}).Err()
		}, []string{"ZRANDMEMBER", "z", "-1000000", "WITHSCORES"}},
		{"mget", func(ctx context.Context, cl *redis.Client) error {
			return cl.Set(ctx, "k", big, 0).Err()
		}, append([]string{"MGET"}, repeat("k", 1000)...)},
		{"eval", nil, []string{"EVAL", "local s = string.rep('x', 262144) local t = {} for i = 1, 1000 do t[i] = s end return t", "0"}},
		{"exec", func(ctx context.Context, cl *redis.Client) error {
			return cl.Set(ctx, "k", big, 0).Err()
		}, nil}, // MULTI, 1000 x GET k, EXEC
	}
	for _, mode := range []struct {
		name string
		args []string
	}{{"event loop", nil}, {"goroutine per connection", []string{"--io-loops", "0"}}} {
		for _, tc := range cases {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				args := append([]string{"--client-output-buffer-limit", "normal 16mb 0 0"}, mode.args...)
				c := mustLaunch(t, t.TempDir(), args...)
				ctx := context.Background()
				cl := redis.NewClient(&redis.Options{Addr: c.addr, Protocol: 2})
				defer cl.Close()
				if tc.setup != nil {
					if err := tc.setup(ctx, cl); err != nil {
						t.Fatal(err)
					}
				}
				var req []byte
				if tc.cmd != nil {
					req = respCommand(tc.cmd...)
				} else {
					req = respCommand("MULTI")
					for range 1000 {
						req = append(req, respCommand("GET", "k")...)
					}
					req = append(req, respCommand("EXEC")...)
				}
				pid := c.cmd.Process.Pid
				before := rssBytes(pid)
				nc, err := net.Dial("tcp", c.addr)
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				nc.(*net.TCPConn).SetReadBuffer(64 << 10)
				if _, err := nc.Write(req); err != nil {
					t.Fatal(err)
				}
				// Read nothing until the server has closed the client.
				omemRe := regexp.MustCompile(`omem=(\d+)`)
				deadline := time.Now().Add(30 * time.Second)
				for !omemRe.MatchString(c.logs.String()) {
					if time.Now().After(deadline) {
						t.Fatalf("not closed for its output limit within 30 s (peak RSS %d MB); log:\n%s",
							procStatus(pid, "VmHWM:")>>20, c.logs)
					}
					time.Sleep(5 * time.Millisecond)
				}
				nc.SetReadDeadline(time.Now().Add(10 * time.Second))
				got, err := io.Copy(io.Discard, nc)
				if err != nil && !strings.Contains(err.Error(), "reset") {
					t.Fatalf("after the close: %v after %d bytes, want EOF or reset", err, got)
				}
				peak := procStatus(pid, "VmHWM:")
				omem, _ := strconv.ParseInt(omemRe.FindStringSubmatch(c.logs.String())[1], 10, 64)
				t.Logf("closed at omem=%d; RSS %d MB before, peak %d MB; %d bytes reached the client",
					omem, before>>20, peak>>20, got)
				if omem > limit+(64<<10)+(512<<10) {
					t.Errorf("closed at omem=%d, past the %d-byte limit: the reply was built before the check", omem, limit)
				}
				if grew := peak - before; grew > 64<<20 {
					t.Errorf("peak RSS grew by %d MB for a 16 MiB output limit", grew>>20)
				}
				if cl.Ping(ctx).Err() != nil {
					t.Errorf("server not answering after the close")
				}
			})
		}
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// respCommand encodes one command as a RESP array of bulk strings.
func respCommand(args ...string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}
