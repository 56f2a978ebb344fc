package server

import (
	"sync/atomic"
	"testing"
	"time"
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
