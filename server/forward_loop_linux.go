package server

import (
	"runtime/debug"
	"unsafe"

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
func (l *eventLoop) Post(fn func()) bool {
	l.mu.Lock()
	if l.closedFds {
		l.mu.Unlock()
		return false
	}
	l.posts = append(l.posts, fn)
	l.mu.Unlock()
	l.wake()
	return true
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

// gatherRounds bounds how many times runResumed looks for events that
// became ready while it served a wake, before the after-events hooks run.
const gatherRounds = 4

// runResumed serves the connections whose forwarded commands came back
// during this wake (their replies are stitched and the rest of their
// pipelines run, which may park them again), then runs the after-events
// hooks (the forwarder writes what all of them queued). It reports
// whether the loop stops.
//
// Before the hooks run it polls (without waiting) for events that became
// ready meanwhile, and handles them first, up to gatherRounds times: the
// clients whose replies this wake wrote often send their next pipelines
// at once, and owners' replies come in. Their commands then join the
// upstream writes of this wake instead of costing writes of their own in
// the next: fewer, larger writes to the owners (each write to a socket
// costs the sender the kernel's TCP path, 5-10 us on this VM). A poll
// that finds nothing costs one non-blocking epoll_pwait. events is the
// loop's event buffer (free by now).
func (l *eventLoop) runResumed(events []unix.EpollEvent) bool {
	for k := 0; ; k++ {
		l.serveReady()
		if k == gatherRounds || len(l.after) == 0 {
			break
		}
		r, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(l.epfd),
			uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
		n := int(r)
		if errno != 0 || n <= 0 {
			break
		}
		if l.handle(events[:n]) {
			return true
		}
	}
	defer l.recoverExt()
	for _, fn := range l.after {
		fn()
	}
	return false
}

// serveReady serves the connections resumed so far (runResumed).
func (l *eventLoop) serveReady() {
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
}
