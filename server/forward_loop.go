package server

// Sidecar mode on the event loops: the asynchronous side of the Forwarder
// seam (forward.go). A Forwarder that also implements AsyncForwarder lets
// the event loops serve its clients: a loop that meets a run of
// forwardable commands hands them to the connection's AsyncForwardSession
// (Start) and, instead of blocking, parks the connection (pumpForward:
// nothing more of it is read or run) and serves its other connections.
// When every reply is in, the session calls the done function it was
// given, on the loop goroutine; the loop then resumes the connection after
// the events of that wake: the parked run's replies are stitched in order
// and the rest of the client's pipeline runs, exactly as after a blocking
// Do.
//
// The forwarder reaches its owners on the same loops (ForwardLoop): it
// registers its upstream sockets there, is called back when they are
// readable or writable, and gets a call after each wake's events
// (AfterEvents) to write what that wake queued: one write per upstream
// socket per wake, however many clients it carries.
//
// Cost: nothing on the normal (non-sidecar) path but a nil check in the
// loop for an fd that is not a client's (never taken there) and a length
// check of the after-events hooks per wake.

// pumpForward: the connection waits for its forwarded commands (event
// loop only); the session's done resumes it.
const pumpForward = pumpHold + 1

// AsyncForwarder is a Forwarder that can serve clients on event loops.
// Without it (or on a connection with a goroutine of its own: TLS,
// --io-loops 0), sessions come from Forwarder.Session and block.
type AsyncForwarder interface {
	Forwarder
	// LoopSession returns the forwarding state of a new client
	// connection served by loop l. Called on l's goroutine.
	LoopSession(l ForwardLoop) AsyncForwardSession
}

// AsyncForwardSession forwards one client connection's commands without
// blocking its loop. Only the connection's loop goroutine calls it, one
// call at a time; Do (the blocking form) is not called on a loop.
type AsyncForwardSession interface {
	ForwardSession
	// Start forwards reqs (a pipeline, in order). It returns true when
	// every req already has its Reply or is marked Local (an owner is
	// down, say); else false, and it calls done exactly once, on the
	// loop goroutine, when they all do. reqs and the Args they alias
	// stay untouched until then; Start must copy what it sends. Close
	// may be called before done (the client hung up): done is still
	// called, and ignored.
	Start(reqs []ForwardReq, done func()) bool
}

// ForwardLoop is an event loop as an AsyncForwarder sees it: it watches
// the forwarder's own sockets and runs its callbacks on the loop
// goroutine. Watch, SetWritable, Unwatch and AfterEvents are loop
// goroutine only.
type ForwardLoop interface {
	// Watch registers the non-blocking socket fd: h.FdEvent is called on
	// the loop goroutine when it is readable (level-triggered), or
	// writable while SetWritable asked for that.
	Watch(fd int, h FdHandler) error
	// SetWritable asks for (on) or stops asking for writability events.
	SetWritable(fd int, on bool)
	// Unwatch stops watching fd; the caller closes it afterwards.
	Unwatch(fd int)
	// AfterEvents registers fn to run on the loop goroutine after the
	// events of every wake, once the connections they resumed have run.
	AfterEvents(fn func())
	// Post runs fn on the loop goroutine soon (at its next wake). Any
	// goroutine. It returns false, and fn never runs, when the loop has
	// stopped.
	Post(fn func()) bool
}

// FdHandler receives the events of a socket registered with Watch.
type FdHandler interface {
	// FdEvent: readable also covers a hang-up or an error (a read then
	// tells which).
	FdEvent(readable, writable bool)
}
