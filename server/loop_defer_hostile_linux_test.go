package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/guard"
)

// Hostile cases for the end-of-turn reply deferral (deferOut,
// writePending), over real sockets.

// startGuarded starts a server with one event loop behind the protocol
// guard (as main wires it) and cfg's other fields.
func startGuarded(t *testing.T, cfg Config, opts ...guard.Option) string {
	t.Helper()
	cfg.IOLoops = 1
	cfg.WrapListener = func(ln net.Listener) net.Listener {
		return guard.NewListener(ln, guard.DefaultLimits(), opts...)
	}
	_, addr := startServerConfig(t, nil, cfg)
	return addr
}

// A write's reply must not reach the client before the replication
// barrier (sync acks) passes, even when replies of the same pump call
// were deferred first. Before AUTH the guard hands commands over one at
// a time (ReadReady), so one pump call runs AUTH (reply deferred: the
// connection goes on the turn's pending list), then the write, which
// holds the connection (pumpHold) with both replies in c.out. The end of
// the turn wrote the pending list before it released the held
// connections: the write's reply went out before the barrier was waited
// on. The test's barrier blocks until the test has looked.
func TestLoopDeferredHeldRepliesWaitForBarrier(t *testing.T) {
	gate := make(chan struct{})
	var blocking atomic.Bool
	barrier := func() error {
		if blocking.Load() {
			<-gate
		}
		return nil
	}
	addr := startGuarded(t, Config{RequirePass: "pw", WriteGate: func() error { return nil }, ReplyBarrier: barrier},
		guard.RequireAuth(true))
	r := dial(t, addr)
	blocking.Store(true)
	released := false
	defer func() {
		if !released {
			close(gate)
		}
	}()
	r.send([]string{"AUTH", "pw"}, []string{"CL.THROTTLE", "k", "5", "10", "60"})
	if got := r.mustReply(); got != "+OK" {
		t.Fatalf("AUTH: %q", got)
	}
	r.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if got, err := r.reply(); err == nil {
		t.Fatalf("the write's reply %q arrived while the replication barrier was still waiting", got)
	}
	r.c.SetReadDeadline(time.Time{})
	blocking.Store(false)
	close(gate)
	released = true
	// The read that timed out may have taken part of the reply; a fresh
	// request on a new connection checks the server goes on.
	r2 := dial(t, addr)
	r2.send([]string{"AUTH", "pw"}, []string{"PING"})
	for _, want := range []string{"+OK", "+PONG"} {
		if got := r2.mustReply(); got != want {
			t.Fatalf("after the barrier: %q, want %q", got, want)
		}
	}
}

// Many connections of one loop, each pipelining in several writes and
// ending in one of the ways a client ends (QUIT mid-pipeline, a
// half-close after the last request, an abrupt close), behind the guard
// before and after AUTH: every connection that reads gets exactly its own
// replies, in order, and then the end of the stream; the loop serves on.
// Many connections ready in one turn put several on the turn's pending
// list at once (writePending), some of them closing meanwhile.
func TestLoopDeferredRepliesManyClientsEnding(t *testing.T) {
	addr := startGuarded(t, Config{RequirePass: "pw"}, guard.RequireAuth(true))
	const clients, rounds, depth = 24, 4, 40
	errs := make(chan error, clients)
	for n := range clients {
		go func() {
			errs <- func() error {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					return err
				}
				defer c.Close()
				mode := n % 3 // 0: QUIT, 1: half-close, 2: abrupt close
				var want []string
				batch := encode("AUTH", "pw")
				want = append(want, "+OK")
				for i := range rounds {
					for j := range depth {
						v := fmt.Sprintf("c%d-%d-%d", n, i, j)
						batch = append(batch, encode("ECHO", v)...)
						want = append(want, v)
					}
					if i == rounds-1 && mode == 0 {
						batch = append(batch, encode("QUIT")...)
						batch = append(batch, encode("ECHO", "never")...)
						want = append(want, "+OK")
					}
					if _, err := c.Write(batch); err != nil {
						return err
					}
					batch = nil
				}
				switch mode {
				case 1:
					c.(*net.TCPConn).CloseWrite()
				case 2:
					c.(*net.TCPConn).SetLinger(0)
					return nil // closed with an RST by the deferred Close
				}
				r := &rawConn{t: nil, c: c, rd: bufio.NewReader(c)}
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				for i, w := range want {
					got, err := r.reply()
					if err != nil {
						return fmt.Errorf("client %d reply %d: %v", n, i, err)
					}
					if got != w {
						return fmt.Errorf("client %d reply %d: %q, want %q", n, i, got, w)
					}
				}
				if rest, err := io.ReadAll(r.rd); len(rest) > 0 || (err != nil && !strings.Contains(err.Error(), "reset")) {
					return fmt.Errorf("client %d after its replies: %q, %v", n, rest, err)
				}
				return nil
			}()
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	r := dial(t, addr)
	r.send([]string{"AUTH", "pw"}, []string{"PING"})
	for _, want := range []string{"+OK", "+PONG"} {
		if got := r.mustReply(); got != want {
			t.Fatalf("after: %q, want %q", got, want)
		}
	}
}
