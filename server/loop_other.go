//go:build !linux

package server

import "net"

// Without epoll every connection has a goroutine of its own (conn.go).

const loopsSupported = false

func wrapLoopListener(ln net.Listener) net.Listener { return ln }

// loopConn and eventLoop exist only so that the portable code compiles.
type loopConn struct{ net.Conn }

func (*loopConn) backlogged() bool { return false }

// deferOut: no loop's turn to wait for; replies are written at once.
func (*loopConn) deferOut(*pushConn) bool { return false }

func loopConnOf(net.Conn) *loopConn { return nil }

type eventLoop struct{}

func newEventLoop(*Server) (*eventLoop, error)       { return &eventLoop{}, nil }
func (*eventLoop) run()                              {}
func (*eventLoop) add(*client, *loopConn) error      { return nil }
func (*eventLoop) shutdown()                         {}
func (*eventLoop) shutdownIdle()                     {}
func (*eventLoop) pollCounts() (polls, hits int64)   { return 0, 0 }
func (*eventLoop) wakeCounts() (wakes, events int64) { return 0, 0 }
func (*eventLoop) yieldCount() int64                 { return 0 }

// forwardLoopOf: no event loop, so sidecar sessions block (forward.go).
func forwardLoopOf(*loopConn) (ForwardLoop, func()) { return nil, nil }

// Post: no loop runs anything (RunOnLoop falls back to its caller).
func (*eventLoop) Post(func()) bool { return false }

// postSoon: as Post.
func (*eventLoop) postSoon(func()) bool { return false }
