package server

import (
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// The event loop's side of asynchronous forwarding (forward_loop.go): an
// eventLoop is a ForwardLoop, and parks and resumes sidecar connections.

// forwardLoopOf returns lc's loop as a ForwardLoop and the done function
// that resumes lc (loop goroutine only, as Start promises to call it).
func forwardLoopOf(lc *loopConn) (ForwardLoop, func()) {
	l := lc.loop
	return l, func() {
		if !lc.done {
			l.ready = append(l.ready, lc)
		}
	}
}

// Watch implements ForwardLoop.
func (l *eventLoop) Watch(fd int, h FdHandler) error {
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}); err != nil {
		return err
	}
	if fd >= len(l.ext) {
		l.ext = append(l.ext, make([]FdHandler, fd+1-len(l.ext))...)
	}
	l.ext[fd] = h
	return nil
}

// SetWritable implements ForwardLoop.
func (l *eventLoop) SetWritable(fd int, on bool) {
	ev := uint32(unix.EPOLLIN | unix.EPOLLRDHUP)
	if on {
		ev |= unix.EPOLLOUT
	}
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: ev, Fd: int32(fd)})
}

// Unwatch implements ForwardLoop.
func (l *eventLoop) Unwatch(fd int) {
	if fd >= 0 && fd < len(l.ext) {
		l.ext[fd] = nil
	}
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
}

// AfterEvents implements ForwardLoop.
func (l *eventLoop) AfterEvents(fn func()) { l.after = append(l.after, fn) }

// Post implements ForwardLoop.
func (l *eventLoop) Post(fn func()) bool { return l.enqueue(fn, false) }

// postSoon is Post for a function the loop should start soon even while
// it is busy: the loop runs it after the connection it is serving (one
// connection's commands, between two of them), not only after the whole
// turn, whose ready connections can take milliseconds at a deep pipeline
// on a loaded machine (RunOnLoop's persistence drain then waited out its
// 2 ms and drained on the other core). Any goroutine; false once the loop
// has stopped. The function must not assume a turn has ended: it runs
// between two connections of one.
func (l *eventLoop) postSoon(fn func()) bool { return l.enqueue(fn, true) }

// enqueue queues fn for the loop, in soon (postSoon) or posts (Post), and
// wakes the loop (an idle loop waits in epoll_wait: handleWake runs both
// lists). False once the loop has stopped. Any goroutine.
func (l *eventLoop) enqueue(fn func(), soon bool) bool {
	l.mu.Lock()
	if l.closedFds {
		l.mu.Unlock()
		return false
	}
	if soon {
		l.soon = append(l.soon, fn)
		l.hasSoon.Store(true)
	} else {
		l.posts = append(l.posts, fn)
	}
	l.mu.Unlock()
	l.wake()
	return true
}

// runSoon runs the functions postSoon queued. Loop goroutine.
func (l *eventLoop) runSoon() {
	if !l.hasSoon.Load() {
		return
	}
	l.mu.Lock()
	soon := l.soon
	l.soon = nil
	l.hasSoon.Store(false)
	l.mu.Unlock()
	for _, fn := range soon {
		l.runPosted(fn)
	}
}

// extEvent hands an event of a socket that is not a client's to the
// forwarder that registered it.
func (l *eventLoop) extEvent(fd int, ev uint32) {
	if fd < 0 || fd >= len(l.ext) || l.ext[fd] == nil {
		return
	}
	defer l.recoverExt()
	l.ext[fd].FdEvent(ev&^uint32(unix.EPOLLOUT) != 0, ev&unix.EPOLLOUT != 0)
}

// runPosted runs a function posted to the loop (Post).
func (l *eventLoop) runPosted(fn func()) {
	defer l.recoverExt()
	fn()
}

// recoverExt logs a panic of the forwarder's code run by the loop, as
// serve does for a connection's: the server goes on.
func (l *eventLoop) recoverExt() {
	if p := recover(); p != nil {
		l.s.stats.panics.Add(1)
		l.s.log.Error("panic in the forwarder's event handler", "panic", p, "stack", string(debug.Stack()))
	}
}

// parkedEvent handles an event of a connection parked while its commands
// are upstream. A hang-up or error closes it (its replies have nowhere to
// go); a backlog is written; more input is left in the socket, and
// readability is no longer asked for until the resume (level-triggered,
// it would be reported on every wake meanwhile). A client that waits for
// its replies sends nothing meanwhile, so this costs nothing then.
func (l *eventLoop) parkedEvent(lc *loopConn, ev uint32) {
	if ev&(unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		lc.closed.Store(true)
		l.finish(lc)
		return
	}
	if ev&unix.EPOLLOUT != 0 {
		l.writable(lc)
		if lc.done {
			return
		}
	}
	lc.mu.Lock()
	lc.rearmLocked()
	lc.mu.Unlock()
}

// runResumed serves the connections whose forwarded commands came back
// during this wake (their replies are stitched and the rest of their
// pipelines run, which may park them again), then runs the after-events
// hooks (the forwarder writes what all of them queued).
func (l *eventLoop) runResumed() {
	for len(l.ready) > 0 {
		ready := l.ready
		l.ready = nil
		for i, lc := range ready {
			ready[i] = nil
			if lc.done || !lc.fwdWait.Load() {
				continue
			}
			lc.fwdWait.Store(false)
			l.serve(lc, false)
			if !lc.done && !lc.fwdWait.Load() && lc.readStop.Load() {
				l.end(lc) // Shutdown asked while it was parked
			}
		}
		if l.ready == nil {
			l.ready = ready[:0]
		}
	}
	defer l.recoverExt()
	for _, fn := range l.after {
		fn()
	}
}
