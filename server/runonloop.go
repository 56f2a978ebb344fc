package server

import (
	"sync/atomic"
	"time"
)

// RunOnLoop runs fn on the first event loop's goroutine, between two
// connections' commands (after the connection the loop is serving when fn
// is posted, or at its next wake-up when it is idle), and reports true
// once fn has returned. It reports false without running fn when there is no event loop (none started yet, a
// goroutine per connection, a platform without epoll), the loop has
// stopped, or the loop did not start fn within wait (it is busy in a
// long command, or it is the caller: a command run by the loop that ends
// up here); the caller then runs fn itself. Once the loop has started fn,
// RunOnLoop waits for it to return, however long that takes; a panic of
// fn is raised again in the caller (the loop goes on).
//
// What it is for: persistence's drain (main's persistence.encodePiece)
// reads and clears every entry the window wrote. Run on the loop that
// wrote them, it finds them in that core's cache; run on the flusher's
// goroutine, on the other core, it takes each line away from the loop,
// which then misses on its next write of the key (BenchmarkThrottleDrained:
// the loop's extra cost per call with the drain on the other core is
// about twice the drain's own).
//
// Any goroutine. Cost: one postSoon (a lock and an eventfd write) and a
// channel receive; fn delays the loop's connections by its own run time.
func (s *Server) RunOnLoop(fn func(), wait time.Duration) bool {
	s.mu.Lock()
	var l *eventLoop
	if len(s.loops) > 0 {
		l = s.loops[0]
	}
	s.mu.Unlock()
	if l == nil {
		return false
	}
	// state: 0 posted, 1 started by the loop, 2 given up by the caller.
	var state atomic.Int32
	var panicked any
	done := make(chan struct{})
	if !l.postSoon(func() {
		if state.CompareAndSwap(0, 1) {
			defer func() {
				panicked = recover() // the caller's, not the loop's
				close(done)
			}()
			fn()
		}
	}) {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		if state.CompareAndSwap(0, 2) {
			return false
		}
		<-done // the loop started it just now
	}
	if panicked != nil {
		panic(panicked) // as if fn had run here
	}
	return true
}
