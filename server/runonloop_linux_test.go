package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/store"
)

// TestRunOnLoop: RunOnLoop runs its function once, on the loop, and
// returns after it; a loop that does not start it within the wait (busy in
// another function) gets it refused, and never runs it later; a panic of
// the function comes back to the caller and the loop goes on; without a
// loop nothing runs.
func TestRunOnLoop(t *testing.T) {
	s, _ := startServer(t, nil)
	deadline := time.Now().Add(5 * time.Second)
	var runs atomic.Int32
	for !s.RunOnLoop(func() { runs.Add(1) }, time.Second) { // the loops start with Serve
		if time.Now().After(deadline) {
			t.Fatal("RunOnLoop never ran on the server's loop")
		}
		time.Sleep(time.Millisecond)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("ran %d times, want once", n)
	}

	// A busy loop: the second function is refused after its wait.
	release, started := make(chan struct{}), make(chan struct{})
	busy := make(chan bool)
	go func() {
		busy <- s.RunOnLoop(func() { close(started); <-release }, time.Second)
	}()
	<-started
	var late atomic.Bool
	t0 := time.Now()
	if s.RunOnLoop(func() { late.Store(true) }, 20*time.Millisecond) {
		t.Error("RunOnLoop reported a run while the loop was busy")
	}
	if d := time.Since(t0); d < 20*time.Millisecond || d > 2*time.Second {
		t.Errorf("a refused RunOnLoop returned after %v, want its 20ms wait", d)
	}
	close(release)
	if !<-busy {
		t.Error("the busy function's RunOnLoop reported no run")
	}
	if !s.RunOnLoop(func() {}, time.Second) { // the refused one was posted before this one
		t.Fatal("RunOnLoop failed after the loop was free again")
	}
	if late.Load() {
		t.Error("a refused function ran later anyway")
	}

	// A panic is the caller's.
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want the function's panic", p)
			}
		}()
		s.RunOnLoop(func() { panic("boom") }, time.Second)
		t.Error("RunOnLoop returned after its function panicked")
	}()
	if !s.RunOnLoop(func() {}, time.Second) {
		t.Error("the loop stopped running functions after a panic")
	}

	// No loop: a goroutine per connection.
	s2, _ := startServerConfig(t, nil, Config{IOLoops: -1})
	if s2.RunOnLoop(func() { t.Error("ran without a loop") }, time.Second) {
		t.Error("RunOnLoop reported a run without a loop")
	}
}

// TestRunOnLoopMidTurn: a function posted while the loop serves one of two
// connections ready in the same turn runs after that connection's command
// and before the other's, not after the whole turn (a turn of 50 clients
// pipelining 16 calls took long enough that persistence's drain waited
// out its 2 ms and drained on the other core). The clock sleeps 100 ms on
// every read, so each command holds the loop that long. Fails when the
// function runs only once the turn is over: both keys written by then.
func TestRunOnLoopMidTurn(t *testing.T) {
	var slow atomic.Bool
	st := store.New(store.Options{})
	s, err := New(Config{
		Addr:   "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock: func() int64 {
			if slow.Load() {
				time.Sleep(100 * time.Millisecond)
			}
			return time.Now().UnixNano()
		},
	}, st)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		r := bufio.NewReader(c)
		fmt.Fprint(c, "PING\r\n")
		if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
			t.Fatalf("PING: %q %v", line, err)
		}
		return c, r
	}
	a, ra := dial()
	b, rb := dial()

	// Hold the loop while both requests arrive, so that one turn finds
	// both connections ready.
	release, started := make(chan struct{}), make(chan struct{})
	held := make(chan bool)
	go func() { held <- s.RunOnLoop(func() { close(started); <-release }, 5*time.Second) }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop never ran the holding function")
	}
	slow.Store(true)
	fmt.Fprint(a, "CL.THROTTLE ka 10 1 60\r\n")
	fmt.Fprint(b, "CL.THROTTLE kb 10 1 60\r\n")
	time.Sleep(50 * time.Millisecond)
	close(release)
	if !<-held {
		t.Fatal("the holding function's RunOnLoop reported no run")
	}
	time.Sleep(40 * time.Millisecond) // the loop is inside the first command now
	var written []bool
	if !s.RunOnLoop(func() {
		for _, k := range []string{"ka", "kb"} {
			_, ok := st.Get([]byte(k), time.Now().UnixMilli())
			written = append(written, ok)
		}
	}, 5*time.Second) {
		t.Fatal("RunOnLoop refused")
	}
	slow.Store(false)
	for _, r := range []*bufio.Reader{ra, rb} {
		if line, err := r.ReadString('\n'); err != nil || line != "*5\r\n" {
			t.Fatalf("CL.THROTTLE reply: %q %v", line, err)
		}
	}
	if written[0] == written[1] {
		t.Fatalf("the function saw ka written %v, kb written %v: want it run between the two commands", written[0], written[1])
	}
}
