package server

import (
	"crypto/tls"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/internal/testutil"
)

// TestOutputLimitBoundsOneReply: one command whose reply is far larger
// than its request, from a client that reads nothing, with a 4 MiB hard
// limit, on the event loop, a goroutine per connection and TLS (whose
// replies always queue): EXEC of 800 EVALs of one 256 KiB string each
// (only EXEC's check point between its commands bounds it), EVAL returning
// one 256 KiB string 800 times (the result encoder's check point), and
// COMMAND INFO naming one command 300,000 times (the loop's). Each reply
// is 60-200 MB. The client must be closed and the server's heap must not
// grow by more than 64 MB beyond the request; without the check points
// (obuf.go: replyFull) the whole reply was built in client.out first
// (peak heap 420-702 MB; 7-36 MB with them, parsing included).
func TestOutputLimitBoundsOneReply(t *testing.T) {
	cert := testutil.SelfSigned(t)
	cases := []struct {
		name string
		req  func() []byte
	}{
		{"exec", func() []byte {
			b := encode("MULTI")
			for range 800 {
				b = append(b, encode("EVAL", "return string.rep('x', 262144)", "0")...)
			}
			return append(b, encode("EXEC")...)
		}},
		{"eval table", func() []byte {
			return encode("EVAL", "local s = string.rep('x', 262144) local t = {} for i = 1, 800 do t[i] = s end return t", "0")
		}},
		{"command info", func() []byte {
			args := []string{"COMMAND", "INFO"}
			for range 300_000 {
				args = append(args, "eval")
			}
			return encode(args...)
		}},
	}
	for _, mode := range []struct {
		name  string
		loops int
		tls   bool
	}{{"event loop", 0, false}, {"goroutine per connection", -1, false}, {"tls", 0, true}} {
		for _, tc := range cases {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				cfg := Config{IOLoops: mode.loops, OutputBufferLimit: OutputBufferLimit{Hard: 4 << 20}}
				if mode.tls {
					cfg.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
				}
				s, addr := startServerConfig(t, nil, cfg)
				if mode.tls {
					ln, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						t.Fatal(err)
					}
					go s.ServeTLS(ln) // Shutdown (startServerConfig's cleanup) ends it
					addr = ln.Addr().String()
				}
				req := tc.req()
				before, peak, stopSampling := testutil.SampleHeapPeak()
				var nc net.Conn
				var err error
				if mode.tls {
					nc, err = tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
				} else {
					nc, err = net.Dial("tcp", addr)
				}
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				go nc.Write(req) // may block once the server stops reading
				for deadline := time.Now().Add(time.Minute); s.stats.obufDisconnects.Load() == 0; {
					if time.Now().After(deadline) {
						t.Fatalf("not closed for its output limit within a minute (peak heap %d MB)", peak.Load()>>20)
					}
					time.Sleep(time.Millisecond)
				}
				// The closed client's goroutine or loop finishes the reply it
				// was building before it lets go (an EXEC of a large table
				// under -race on a loaded machine took over 5 s): generous,
				// since the heap bound below is the test's point.
				for deadline := time.Now().Add(30 * time.Second); s.clientCount() != 0; {
					if time.Now().After(deadline) {
						t.Fatalf("%d clients left 30 s after the close", s.clientCount())
					}
					time.Sleep(time.Millisecond)
				}
				stopSampling()
				grew := int64(peak.Load()) - int64(before) - int64(len(req))
				t.Logf("request %d KB; heap %d MB before, peak %d MB", len(req)>>10, before>>20, peak.Load()>>20)
				if grew > 64<<20 {
					t.Errorf("heap grew by %d MB beyond the request for a 4 MiB output limit", grew>>20)
				}
			})
		}
	}
}

// TestOutputLimitReplyHeldForBarrier: with a reply barrier (--replica-ack
// sync), replies written after a write must not reach the socket before
// the barrier, so one large reply after CL.THROTTLE is not handed on
// early: it is counted against the hard limit and the client closed past
// it with nothing written. Without the check
// point's barrier case the reply would be streamed before the barrier.
func TestOutputLimitReplyHeldForBarrier(t *testing.T) {
	for _, mode := range []struct {
		name  string
		loops int
	}{{"event loop", 0}, {"goroutine per connection", -1}} {
		t.Run(mode.name, func(t *testing.T) {
			var barriers atomic.Int64
			s, addr := startServerConfig(t, nil, Config{IOLoops: mode.loops,
				OutputBufferLimit: OutputBufferLimit{Hard: 4 << 20},
				WriteGate:         func() error { return nil },
				ReplyBarrier:      func() error { barriers.Add(1); return nil },
			})
			r := dial(t, addr)
			r.send([]string{"CL.THROTTLE", "k", "15", "30", "60"},
				[]string{"EVAL", "local s = string.rep('x', 262144) local t = {} for i = 1, 800 do t[i] = s end return t", "0"})
			waitFor(t, func() bool { return s.stats.obufDisconnects.Load() == 1 })
			n, _ := io.Copy(io.Discard, r.c)
			if n != 0 {
				t.Fatalf("%d bytes reached the client: replies went out before the barrier", n)
			}
			held := barriers.Load()
			// A pipeline that stays under the limit is answered after the barrier.
			r = dial(t, addr)
			r.send([]string{"CL.THROTTLE", "k", "15", "30", "60"}, []string{"EVAL", "return string.rep('x', 100000)", "0"})
			if got := r.mustReply(); !strings.HasPrefix(got, "[:0 ") {
				t.Fatalf("CL.THROTTLE: %q", got)
			}
			if got := r.mustReply(); len(got) != 100000 || barriers.Load() <= held {
				t.Fatalf("EVAL: %d bytes, %d barriers", len(got), barriers.Load()-held)
			}
		})
	}
}
