package server

import (
	"net"
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
