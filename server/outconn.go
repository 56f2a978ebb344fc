package server

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// outConn is a connection served by a goroutine of its own (TLS, --io-loops
// 0, platforms without the event loop) whose Write never blocks: what the
// socket does not take at once waits in an output buffer (obuf.go), which a
// writer goroutine of the connection's own writes out, so that the
// connection's goroutine goes on reading and running commands while a
// client that pipelines before reading has not read its replies yet.
//
// On a plain TCP socket Write first writes directly, without blocking (a
// raw write on the non-blocking descriptor, under Go's poller's write
// lock): on the common path, where the socket takes everything, that is
// one system call as before and the writer goroutine never starts. A TLS
// connection cannot be written without blocking, so its Writes always
// queue and its writer goroutine writes them: one hand-off per pipeline.
//
// Write deadlines: the guard sets one before each Write; outConn keeps it
// (it does not pass it down, so a direct write is never refused) and gives
// the socket that long again for every piece the writer writes and for
// every Write that queues more (the client is still sending, as on the
// event loop): a backlog that makes no progress for the write timeout
// while the client sends nothing ends the connection.
//
// The connection's goroutine drains the queue before it closes the
// connection (bounded by the write timeout); Close drops what is left, as
// does going over the output buffer limit.
type outConn struct {
	net.Conn // the accepted connection: *net.TCPConn, *tls.Conn, ...
	s        *Server
	raw      syscall.RawConn // nil: no direct write, always queue
	fd       int             // the socket's descriptor, or -1
	raddr    string

	written atomic.Int64 // bytes the socket took
	wdl     atomic.Int64 // the write deadline the guard set, Unix ns; 0 none

	mu        sync.Mutex // guards the fields below
	cond      sync.Cond  // on mu: output queued, or the end
	out       outQueue
	inflight  int   // bytes the writer has taken from out and is writing
	span      int64 // the write timeout as a span (ns), noted when a backlog starts
	softSince int64 // OutputBufferLimit.over's soft-limit timer
	writer    bool  // the writer goroutine runs
	closing   bool  // Close: write what is queued, then close
	dead      bool  // closed or failed: nothing more is written
	c         *client

	// The direct write's arguments and results, so that handing it to
	// RawConn.Write does not allocate a closure per write.
	wb   []byte
	wn   int
	werr error
	wfn  func(fd uintptr) bool
}

// closeDrain bounds how long Close waits for queued output when no write
// timeout is set.
const closeDrain = 10 * time.Second

// outChunk is how many blocks the writer writes per system call (and per
// write deadline): 256 KiB.
const outChunk = 16

// outListener wraps each accepted connection in an outConn.
type outListener struct {
	net.Listener
	s *Server
}

func (l outListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newOutConn(l.s, nc), nil
}

func newOutConn(s *Server, nc net.Conn) *outConn {
	o := &outConn{Conn: nc, s: s, fd: -1}
	o.cond.L = &o.mu
	if ra := nc.RemoteAddr(); ra != nil {
		o.raddr = ra.String()
	}
	o.raw, o.fd = directWriter(nc)
	if o.raw != nil {
		o.wfn = o.writeDirect
	}
	return o
}

// setClient records the client the connection belongs to (for the log
// line of a limit). Accept loop, before the connection is served.
func (o *outConn) setClient(c *client) {
	o.mu.Lock()
	o.c = c
	o.mu.Unlock()
}

// Write writes b or queues what the socket does not take; it never
// blocks. Past the output buffer limit the connection is closed and Write
// fails with errOutputLimit. Any goroutine.
func (o *outConn) Write(b []byte) (int, error) {
	o.mu.Lock()
	if o.dead || o.closing {
		o.mu.Unlock()
		return 0, net.ErrClosed
	}
	size := len(b)
	if o.out.len() == 0 && o.inflight == 0 {
		if o.raw != nil {
			n, err := o.tryWriteLocked(b)
			o.written.Add(int64(n))
			if err != nil || n == len(b) {
				o.mu.Unlock()
				return n, err
			}
			b = b[n:]
		}
		o.span = 0
		if dl := o.wdl.Load(); dl != 0 {
			o.span = max(dl-time.Now().UnixNano(), 0)
		}
	}
	if mem := o.out.memoryAfter(len(b)); o.s.outputOver(o.c, mem, &o.softSince) {
		c := o.c
		o.dropLocked()
		o.mu.Unlock()
		o.Conn.Close()
		o.s.outputLimitReached(c, o.raddr, mem, "")
		return 0, errOutputLimit
	}
	o.out.push(b)
	if !o.writer {
		o.writer = true
		go o.writeLoop()
	} else {
		o.cond.Signal()
	}
	if o.inflight > 0 && o.span > 0 {
		// The client is still sending: as on the event loop, where each
		// write sets the deadline afresh, its backlog gets the write
		// timeout from now (the writer may be blocked on the socket).
		o.Conn.SetWriteDeadline(time.Now().Add(time.Duration(o.span)))
	}
	o.mu.Unlock()
	return size, nil
}

// tryWriteLocked writes what the socket takes of b now. Requires o.mu
// (so that no other direct write and no writer runs).
func (o *outConn) tryWriteLocked(b []byte) (int, error) {
	o.wb, o.wn, o.werr = b, 0, nil
	err := o.raw.Write(o.wfn)
	n, werr := o.wn, o.werr
	o.wb, o.werr = nil, nil
	if err != nil {
		return n, err
	}
	return n, werr
}

// dropLocked ends the connection's output: nothing more is written.
// Blocks the writer may be writing are not recycled (they would be reused
// under it). Requires o.mu.
func (o *outConn) dropLocked() {
	o.dead = true
	if o.inflight > 0 {
		o.out.discard()
	} else {
		o.out.reset()
	}
	o.cond.Broadcast()
}

// writeLoop is the writer goroutine: it writes the queue, a chunk at a
// time, until the connection ends.
func (o *outConn) writeLoop() {
	var iov [outChunk][]byte
	for {
		o.mu.Lock()
		for o.out.len() == 0 && !o.dead && !o.closing {
			o.cond.Wait()
		}
		if o.dead || o.out.len() == 0 { // dead, or closing with all written
			o.dead = true
			o.mu.Unlock()
			o.Conn.Close()
			return
		}
		bufs := net.Buffers(o.out.front(iov[:0], len(iov)))
		for _, b := range bufs {
			o.inflight += len(b)
		}
		span := time.Duration(o.span)
		if o.closing && span == 0 {
			span = closeDrain
		}
		o.mu.Unlock()
		if span > 0 {
			o.Conn.SetWriteDeadline(time.Now().Add(span))
		}
		n, err := bufs.WriteTo(o.Conn)
		if span > 0 && err == nil {
			o.Conn.SetWriteDeadline(time.Time{})
		}
		o.written.Add(n)
		o.mu.Lock()
		o.inflight = 0
		if !o.dead {
			o.out.consume(int(n))
			if lim := o.s.cfg.OutputBufferLimit; lim.Soft > 0 && o.out.memory() < lim.Soft {
				o.softSince = 0
			}
		}
		if err != nil && !o.dead {
			o.dropLocked()
		}
		o.cond.Broadcast() // for drain
		o.mu.Unlock()
	}
}

// drain waits until the queued output is written or the connection has
// failed or been closed: the connection's goroutine calls it before it
// closes the connection and unregisters the client, so that a graceful
// shutdown has flushed every reply before it returns. A client that reads
// nothing holds it for the write timeout at most (or until Shutdown's
// grace ends and closes the connection).
func (o *outConn) drain() {
	o.mu.Lock()
	for !o.dead && (o.out.len() > 0 || o.inflight > 0) {
		o.cond.Wait()
	}
	o.mu.Unlock()
}

// Close closes the connection at once, dropping output not yet written, as
// the event loop's Close does: a served client's goroutine drains its
// output first (drain), so this drops only when someone else closes it
// (Shutdown's grace ending, a failed push). A connection that is not a
// served client (the guard answering one refused over maxclients) writes
// its queued answer first, within the write deadline set for it, and then
// closes. Any goroutine; idempotent; never blocks on the network.
func (o *outConn) Close() error {
	o.mu.Lock()
	if o.dead || o.closing {
		o.mu.Unlock()
		return nil
	}
	if o.c == nil && (o.out.len() > 0 || o.inflight > 0) {
		o.closing = true // the writer writes the rest, then closes
		o.cond.Broadcast()
		o.mu.Unlock()
		o.Conn.SetReadDeadline(time.Unix(1, 0))
		return nil
	}
	o.dropLocked()
	o.mu.Unlock()
	return o.Conn.Close()
}

// SetDeadline sets the read deadline and keeps the write deadline.
func (o *outConn) SetDeadline(t time.Time) error {
	o.SetWriteDeadline(t)
	return o.Conn.SetReadDeadline(t)
}

// SetWriteDeadline keeps t as the write timeout for the output buffer (see
// the type's doc); the socket itself gets a deadline only while the
// writer writes.
func (o *outConn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		o.wdl.Store(0)
	} else {
		o.wdl.Store(t.UnixNano())
	}
	return nil
}

// NetConn returns the accepted connection (the guard finds the TCP
// connection through it to set keepalive).
func (o *outConn) NetConn() net.Conn { return o.Conn }

func (o *outConn) outMemory() (int64, int) {
	mem := o.out.mem.Load()
	return mem, int(mem / outBlock)
}

func (o *outConn) outWritten() int64 { return o.written.Load() }

func (o *outConn) outFd() int { return o.fd }
