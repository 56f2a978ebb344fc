package server

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The event loop: plain TCP connections served by one goroutine per loop
// over epoll, as Redis serves them, instead of one goroutine each.
//
// Why: with a goroutine per connection, every request costs a read that
// finds nothing (the client is waiting for the reply), a park on Go's
// netpoller and a wake-up through the scheduler. On 2 cores that is a
// third of the CPU at pipeline 1, and the server spreads over both cores,
// taking CPU from its clients. The loop reads a connection only when epoll
// says it is readable (level-triggered, one read per readiness, of at
// most its share of the turn when many are ready: turnShare), runs every
// whole command read, and writes the replies with one write.
//
// Ownership: a loop goroutine alone reads its connections, runs their
// commands (pump, conn.go) and closes their file descriptors. Other
// goroutines may Write (CLIENT TRACKING pushes), Close and set deadlines;
// those take loopConn.mu or set a flag and wake the loop (kick). A
// connection's fd is closed only by its loop, under loopConn.mu, so no
// goroutine ever uses a number that was closed and reused.
//
// Writes never block the loop: what the socket does not take is kept in
// the connection's output buffer (loopConn.out, obuf.go) and written when
// epoll says the socket is writable (EPOLLOUT, asked for only while output
// waits). Meanwhile the connection is read and its commands run as usual,
// as Redis does: a client may send a whole batch before it reads a reply.
// The buffer is bounded by Config.OutputBufferLimit (none by default, as
// Redis's normal clients), and a backlog whose socket takes nothing within
// the write timeout the guard sets is closed.
//
// A command that takes long (a Lua script, up to its time limit) holds
// every connection of its loop, as in Redis.

// loopsSupported reports whether this platform has the event loop.
const loopsSupported = true

// loopListener accepts TCP connections as *loopConn, forwarding to the
// *net.TCPConn until the server hands the connection to a loop (detach).
type loopListener struct{ *net.TCPListener }

func (l loopListener) Accept() (net.Conn, error) {
	tc, err := l.AcceptTCP()
	if err != nil {
		return nil, err
	}
	return &loopConn{Conn: tc, laddr: tc.LocalAddr(), raddr: tc.RemoteAddr()}, nil
}

// wrapLoopListener returns ln wrapped so that its connections can join an
// event loop, or ln itself when it is not a plain TCP listener.
func wrapLoopListener(ln net.Listener) net.Listener {
	if tl, ok := ln.(*net.TCPListener); ok {
		return loopListener{tl}
	}
	return ln
}

// loopConn is a TCP connection served by an event loop. Until detach it is
// the accepted *net.TCPConn (the guard sets keepalive on it through
// NetConn, a refused client is answered through it); after, it is a
// non-blocking socket whose Read returns unix.EAGAIN when there is
// nothing to read and whose Write never blocks.
type loopConn struct {
	net.Conn // the *net.TCPConn until detach; closed after
	laddr    net.Addr
	raddr    net.Addr
	fd       int        // set by detach, before on
	loop     *eventLoop // set before on

	// on: a loop owns the socket. Before, the methods forward to Conn,
	// under mu, so that none races with detach.
	on       atomic.Bool
	closed   atomic.Bool  // Close was called: the loop ends the connection
	readStop atomic.Bool  // a read deadline in the past: end after the replies
	wdl      atomic.Int64 // write deadline, ns: a backlog must move by then
	written  atomic.Int64 // bytes the socket took (total_net_output_bytes)

	mu        sync.Mutex // guards the fields below and the fd's closing
	out       outQueue   // output the socket has not taken yet
	events    uint32     // the epoll interest now registered
	fdClosed  bool
	noRead    bool  // ending: only the backlog is written, nothing read
	span      int64 // the write timeout as a span (ns), from the deadline the guard set
	softSince int64 // when the soft output limit was reached (OutputBufferLimit.over)

	// The loop's own: the connection's state and where it stands.
	c       *client
	st      *connState
	closing bool // flush pending, then close
	done    bool // closed and unregistered
	pending bool // its replies wait in c.out for the end of the turn (deferOut)
	held    bool // its replies wait for the replication barrier (replgate.go)
	// fwdWait: parked while its forwarded commands are upstream
	// (forward_loop_linux.go); read by rearmLocked on any goroutine.
	fwdWait atomic.Bool
}

// detach takes the socket over from Go's poller: it duplicates the file
// descriptor, makes it non-blocking and closes the *net.TCPConn (which
// closes only its own descriptor, not the connection).
func (lc *loopConn) detach() error {
	rc, err := lc.Conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		return err
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(f uintptr) {
		fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return err
	}
	if derr != nil {
		return derr
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return err
	}
	lc.Conn.Close()
	lc.fd = fd
	return nil
}

// forwarding reports whether no loop owns the socket yet; then it returns
// with lc.mu held, and the caller uses lc.Conn and unlocks.
func (lc *loopConn) forwarding() bool {
	if lc.on.Load() {
		return false
	}
	lc.mu.Lock()
	if lc.on.Load() {
		lc.mu.Unlock()
		return false
	}
	return true
}

// Read reads once. Loop goroutine only (once on).
func (lc *loopConn) Read(p []byte) (int, error) {
	if !lc.on.Load() {
		return lc.Conn.Read(p)
	}
	if lc.closed.Load() {
		return 0, net.ErrClosed
	}
	if lc.readStop.Load() {
		return 0, os.ErrDeadlineExceeded
	}
	for {
		n, err := rawRead(lc.fd, p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err // EAGAIN included
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// Write writes b, or as much as the socket takes and keeps the rest in
// the output buffer for the loop to write when the socket is writable. It
// never blocks. Past the output buffer limit the connection is closed and
// Write fails with errOutputLimit. Any goroutine.
func (lc *loopConn) Write(b []byte) (int, error) {
	if lc.forwarding() {
		defer lc.mu.Unlock()
		return lc.Conn.Write(b)
	}
	if lc.closed.Load() {
		return 0, net.ErrClosed
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.fdClosed {
		return 0, net.ErrClosed
	}
	size := len(b)
	if lc.out.len() == 0 {
		n, err := writeFd(lc.fd, b)
		lc.written.Add(int64(n))
		if err != nil || n == len(b) {
			return n, err
		}
		b = b[n:]
		// A backlog starts: the guard has just set the write deadline
		// for this write; remember it as a span, so that each write
		// from the backlog gives the socket that long again.
		lc.span = 0
		if dl := lc.wdl.Load(); dl != 0 {
			lc.span = max(dl-time.Now().UnixNano(), 0)
		}
	}
	if mem := lc.out.memoryAfter(len(b)); lc.loop.s.outputOver(lc.c, mem, &lc.softSince) {
		lc.out.reset()
		lc.closed.Store(true)
		lc.loop.kick(lc)
		lc.loop.s.outputLimitReached(lc.c, lc.raddr.String(), mem, "")
		return 0, errOutputLimit
	}
	lc.out.push(b)
	lc.rearmLocked()
	return size, nil
}

// writeBacklogLocked writes the output buffer until it is empty or the
// socket is full, with vectored writes; it returns how much it wrote.
// Requires lc.mu.
func (lc *loopConn) writeBacklogLocked() (int, error) {
	var iov [64][]byte
	total := 0
	for lc.out.len() > 0 {
		n, err := unix.Writev(lc.fd, lc.out.front(iov[:0], len(iov)))
		if n > 0 {
			lc.out.consume(n)
			lc.written.Add(int64(n))
			total += n
		}
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			return total, nil
		case err != nil:
			return total, err
		}
	}
	return total, nil
}

func (lc *loopConn) outMemory() (int64, int) {
	mem := lc.out.mem.Load()
	return mem, int(mem / outBlock)
}

func (lc *loopConn) outWritten() int64 { return lc.written.Load() }

func (lc *loopConn) outFd() int {
	if !lc.on.Load() {
		return -1
	}
	return lc.fd
}

// writeFd writes b until done or the socket is full (EAGAIN: not an
// error here); it returns how much was written.
func writeFd(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := rawWrite(fd, b[n:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return n, nil
		case err != nil:
			return n, err
		}
		n += k
	}
	return n, nil
}

// backlogged reports whether output is waiting for the socket.
func (lc *loopConn) backlogged() bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.out.len() > 0
}

// rearmLocked registers the interest the connection needs now: readable
// (unless it is ending), and writable while output waits. Requires lc.mu.
func (lc *loopConn) rearmLocked() {
	if lc.fdClosed {
		return
	}
	var want uint32
	if !lc.noRead && !lc.fwdWait.Load() {
		want = unix.EPOLLIN | unix.EPOLLRDHUP
	}
	if lc.out.len() > 0 {
		want |= unix.EPOLLOUT
	}
	if want == lc.events {
		return
	}
	lc.events = want
	unix.EpollCtl(lc.loop.epfd, unix.EPOLL_CTL_MOD, lc.fd, &unix.EpollEvent{Events: want, Fd: int32(lc.fd)})
}

// Close asks the loop to close the connection (at once, dropping unwritten
// output). Any goroutine; idempotent.
func (lc *loopConn) Close() error {
	if lc.forwarding() {
		defer lc.mu.Unlock()
		return lc.Conn.Close()
	}
	if !lc.closed.Swap(true) {
		lc.loop.kick(lc)
	}
	return nil
}

func (lc *loopConn) LocalAddr() net.Addr  { return lc.laddr }
func (lc *loopConn) RemoteAddr() net.Addr { return lc.raddr }

// SetDeadline sets both deadlines.
func (lc *loopConn) SetDeadline(t time.Time) error {
	if lc.forwarding() {
		defer lc.mu.Unlock()
		return lc.Conn.SetDeadline(t)
	}
	lc.SetWriteDeadline(t)
	return lc.SetReadDeadline(t)
}

// SetReadDeadline supports what the server uses: a time in the past ends
// the connection once the replies to what it has read are written (as
// Shutdown asks); a later time or zero clears that.
func (lc *loopConn) SetReadDeadline(t time.Time) error {
	stop := !t.IsZero() && !t.After(time.Now())
	if lc.forwarding() {
		defer lc.mu.Unlock()
		lc.readStop.Store(stop) // for the loop, once it has the connection
		return lc.Conn.SetReadDeadline(t)
	}
	if lc.readStop.Swap(stop) != stop && stop {
		lc.loop.kick(lc)
	}
	return nil
}

// SetWriteDeadline bounds how long output may stay unwritten: the loop
// closes a connection whose backlog is older than this.
func (lc *loopConn) SetWriteDeadline(t time.Time) error {
	if lc.forwarding() {
		defer lc.mu.Unlock()
		return lc.Conn.SetWriteDeadline(t)
	}
	if t.IsZero() {
		lc.wdl.Store(0)
	} else {
		lc.wdl.Store(t.UnixNano())
	}
	return nil
}

// SyscallConn gives access to the socket, e.g. to read the options the
// guard set: Control runs f on the descriptor (under lc.mu, so never on a
// closed one); Read and Write are not supported once a loop owns it.
func (lc *loopConn) SyscallConn() (syscall.RawConn, error) {
	if lc.forwarding() {
		defer lc.mu.Unlock()
		return lc.Conn.(*net.TCPConn).SyscallConn()
	}
	return fdRawConn{lc}, nil
}

type fdRawConn struct{ lc *loopConn }

func (r fdRawConn) Control(f func(fd uintptr)) error {
	r.lc.mu.Lock()
	defer r.lc.mu.Unlock()
	if r.lc.fdClosed {
		return net.ErrClosed
	}
	f(uintptr(r.lc.fd))
	return nil
}

func (fdRawConn) Read(func(uintptr) bool) error  { return errors.ErrUnsupported }
func (fdRawConn) Write(func(uintptr) bool) error { return errors.ErrUnsupported }

// NetConn returns the *net.TCPConn it was accepted as (closed after
// detach), so that the guard's listener finds it to set keepalive.
func (lc *loopConn) NetConn() net.Conn { return lc.Conn }

// loopConnOf finds the *loopConn under nc (the guard and pushConn wrap
// it), or nil.
func loopConnOf(nc net.Conn) *loopConn {
	lc, _ := unwrapConn[*loopConn](nc)
	return lc
}

// eventLoop is one epoll loop and the connections it serves.
type eventLoop struct {
	s      *Server
	epfd   int
	wakefd int // an eventfd: other goroutines wake the loop through it
	woken  atomic.Bool

	mu        sync.Mutex // guards adds, kicks, stop and closedFds
	adds      []*loopConn
	kicks     []*loopConn
	stop      bool
	closedFds bool // epfd and wakefd are closed
	stopped   chan struct{}

	conns fdTable  // the loop goroutine's
	poll  busyPoll // the loop goroutine's
	// nsPerByte is the moving average of a turn's time per byte read
	// (turnShare). The loop goroutine's.
	nsPerByte float64
	// held are connections whose replies wait for the replication
	// barrier (sync acks, replgate.go): released together after the
	// events of one wait, behind one barrier. The loop goroutine's.
	held, heldSpare []*loopConn
	// pending are the connections whose replies wait in c.out for the
	// end of the turn (deferOut, writePending). The loop goroutine's.
	pending []*loopConn

	// Sidecar mode (forward_loop_linux.go): the forwarder's sockets by
	// fd, connections resumed during this wake, the hooks run after each
	// wake's events (loop goroutine's), and functions posted to the loop
	// (under mu).
	ext   []FdHandler
	ready []*loopConn
	after []func()
	posts []func()

	// soon are functions posted by postSoon (RunOnLoop), under mu; hasSoon
	// says the list may be non-empty, so that the loop, which looks at it
	// after each connection it serves, pays one atomic load for it.
	soon    []func()
	hasSoon atomic.Bool

	// polls counts waits that busy-polled first, pollHits those of them
	// that found events by polling (INFO stats). Written by the loop.
	polls, pollHits atomic.Int64
	// wakes counts waits that returned events, events the events they
	// returned: events per wake is how many connections (and, in sidecar
	// mode, upstream sockets) a wake serves (INFO stats). Written by the
	// loop, two atomic adds per wake.
	wakes, events atomic.Int64
	// yields counts the loop's runtime.Gosched calls between turns
	// (loopYieldEvery; INFO stats loop_yields). Written by the loop.
	yields atomic.Int64
}

// fdTable maps a file descriptor to its connection: a slice indexed by
// fd, since the kernel hands out the lowest free numbers (a map lookup per
// ready event cost ~0.7% of the server's CPU under pipelined load). Loop
// goroutine only. Its length follows the highest fd seen.
type fdTable struct{ byFd []*loopConn }

func (t *fdTable) get(fd int) *loopConn {
	if fd < 0 || fd >= len(t.byFd) {
		return nil
	}
	return t.byFd[fd]
}

func (t *fdTable) set(fd int, lc *loopConn) {
	if fd >= len(t.byFd) {
		t.byFd = append(t.byFd, make([]*loopConn, fd+1-len(t.byFd))...)
	}
	t.byFd[fd] = lc
}

func (t *fdTable) del(fd int) {
	if fd >= 0 && fd < len(t.byFd) {
		t.byFd[fd] = nil
	}
}

// each calls fn with every connection; fn may del any of them.
func (t *fdTable) each(fn func(*loopConn)) {
	for _, lc := range t.byFd {
		if lc != nil {
			fn(lc)
		}
	}
}

// newEventLoop creates a loop; start it with run.
func newEventLoop(s *Server) (*eventLoop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wfd)}); err != nil {
		unix.Close(epfd)
		unix.Close(wfd)
		return nil, err
	}
	l := &eventLoop{s: s, epfd: epfd, wakefd: wfd, stopped: make(chan struct{})}
	l.poll.budget = max(s.cfg.BusyPoll, 0)
	return l, nil
}

// wake interrupts the loop's wait. Any goroutine; one write per wait at
// most, and none once the loop has stopped (its eventfd is closed then, and
// the number may belong to another file).
func (l *eventLoop) wake() {
	if l.woken.Swap(true) {
		return
	}
	var one = [8]byte{1}
	l.mu.Lock()
	if !l.closedFds {
		unix.Write(l.wakefd, one[:])
	}
	l.mu.Unlock()
}

// add hands a registered client's connection to the loop. Accept loop.
// On an error the connection is as it was (the caller closes it).
func (l *eventLoop) add(c *client, lc *loopConn) error {
	lc.mu.Lock()
	err := lc.detach()
	if err == nil {
		lc.loop, lc.c = l, c
		lc.on.Store(true)
	}
	lc.mu.Unlock()
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.adds = append(l.adds, lc)
	l.mu.Unlock()
	l.wake()
	return nil
}

// kick makes the loop look at lc's flags (closed, readStop). Any goroutine.
func (l *eventLoop) kick(lc *loopConn) {
	l.mu.Lock()
	l.kicks = append(l.kicks, lc)
	l.mu.Unlock()
	l.wake()
}

// shutdown stops the loop and waits for it. Its connections must be gone
// already (Server.Shutdown waits for them); any left are closed.
func (l *eventLoop) shutdown() {
	l.mu.Lock()
	l.stop = true
	l.mu.Unlock()
	l.wake()
	<-l.stopped
}

// run is the loop goroutine.
func (l *eventLoop) run() {
	defer close(l.stopped)
	events := make([]unix.EpollEvent, 256)
	lastCheck := time.Now()
	idleFrom := lastCheck
	lastYield := lastCheck
	for {
		n, err := 0, error(nil)
		if len(l.held) > 0 {
			n, err = unix.EpollWait(l.epfd, events, 0) // gather what is ready, then release
		} else {
			if l.poll.spinning() {
				n = l.busyWait(events, idleFrom)
			}
			if n == 0 {
				n, err = unix.EpollWait(l.epfd, events, 1000)
			}
		}
		if err != nil && err != unix.EINTR {
			l.s.log.Error("event loop: epoll_wait failed", "err", err)
			time.Sleep(10 * time.Millisecond)
		}
		busyFrom := time.Now()
		if n > 0 {
			l.wakes.Add(1)
			l.events.Add(int64(n))
		}
		share := turnShare(n, l.nsPerByte)
		turnRead := 0
		for i := 0; i < n; i++ {
			fd := int(events[i].Fd)
			if fd == l.wakefd {
				if len(l.pending) > 0 {
					l.writePending() // before the posted work (runSoon), not behind it
				}
				if l.handleWake() {
					return
				}
				continue
			}
			lc := l.conns.get(fd)
			if lc == nil {
				l.extEvent(fd, events[i].Events) // forward_loop_linux.go: an upstream socket
				continue
			}
			if lc.done || lc.held {
				continue
			}
			ev := events[i].Events
			if lc.fwdWait.Load() {
				l.parkedEvent(lc, ev) // forward_loop_linux.go
				continue
			}
			if lc.closing || ev&unix.EPOLLOUT != 0 {
				l.writable(lc)
				if lc.done || lc.closing {
					continue
				}
			}
			if ev&^uint32(unix.EPOLLOUT) != 0 {
				if lc.st != nil {
					lc.st.readMax, lc.st.lastRead = share, 0
				}
				l.serve(lc, true)
				if lc.st != nil {
					turnRead += lc.st.lastRead
				}
			}
			if l.hasSoon.Load() {
				if len(l.pending) > 0 {
					// The replies of the connections served so far do not
					// wait for the posted work: persistence's drain slices
					// (0.2-0.4 ms each, persistence.go) run here, and
					// their clients would idle behind them.
					l.writePending()
				}
				l.runSoon() // between two connections' commands, not after the turn
			}
		}
		if len(l.pending) > 0 {
			l.writePending()
		}
		if len(l.ready) > 0 || len(l.after) > 0 {
			l.runResumed() // forward_loop_linux.go: sidecar mode only
		}
		if len(l.held) > 0 {
			l.release()
			if len(l.pending) > 0 {
				l.writePending() // what the released connections ran on
			}
		}
		now := time.Now()
		l.poll.observe(now.Sub(busyFrom), busyFrom.Sub(idleFrom))
		if turnRead >= minReadRoom { // a turn of a few bytes says little
			per := float64(now.Sub(busyFrom)) / float64(turnRead)
			l.nsPerByte += (per - l.nsPerByte) / 4 // moving average
		}
		idleFrom = now
		if now.Sub(lastYield) >= loopYieldEvery {
			// Before sysmon would preempt the loop (see loopYieldEvery).
			lastYield = now
			l.yields.Add(1)
			runtime.Gosched()
		}
		if now.Sub(lastCheck) >= time.Second {
			lastCheck = now
			l.expireBacklogs(now)
		}
	}
}

// loopYieldEvery is how long the loop runs its turns before it yields
// the processor to the Go scheduler once (runtime.Gosched, between two
// turns). Under load epoll_wait returns at once, its system call keeps
// the loop's P, and the loop goroutine is never rescheduled: after 10 ms
// (the runtime's forcePreemptNS) sysmon preempts it with a SIGURG, a
// signal delivery, a handler and an asynchronous preemption that put the
// loop at the back of the global run queue mid-turn (339-527 signals per
// 3M CL.THROTTLE calls, session 20). A yield every ~6 ms lets sysmon see
// a new scheduling tick every time it looks (it looks at most every 10
// ms), so it never preempts: the yield costs one trip through the
// scheduler (under a microsecond; the loop is picked again at once when
// nothing else waits) and is counted in INFO stats loop_yields. It is
// checked once per turn (one clock comparison: the turn already reads the
// clock), so a single turn longer than 10 ms (a long script) can still be
// preempted. TestLoopYieldsBeforeSysmonPreempts.
const loopYieldEvery = 6 * time.Millisecond

// A loop turn runs the commands read from every connection that epoll
// reported ready, one read each, before it waits again; a connection
// whose request arrives meanwhile (a PING) waits for the rest of the turn.
// With one read of up to readBufSize per connection, eight clients each
// pipelining 128 calls made turns of ~1,000 calls: 2-3 ms at 2 µs a call
// (a key spray at the memory bound, where every new key evicts one), and
// a PING's p99 of 8-12 ms on a loaded 2-core machine. So when the turns
// are slow the reads of one turn share what the loop runs in turnTarget:
// the loop keeps a moving average of its cost per byte read (the whole
// turn's time: commands, replies, system calls), and each of n ready
// connections reads at most turnTarget / cost / n bytes (at least
// minReadRoom); what a connection sent beyond its share stays in the
// socket, which level-triggered epoll reports again at the next wait.
// Cheap commands (0.4 µs: 1,000 of them take 0.4 ms) and one or two
// connections read whole buffers as before: a fixed share cost deep
// pipelines of cheap calls a quarter more CPU per call in more reads and
// writes (c=8 P=128: 0.41 -> 0.53 µs).
//
// The share binds only while few connections carry the turn (at most
// shareMaxReady ready): there a PING waits behind deep pipelines. With
// many ready connections each read is already one client's pipeline, as
// in Redis (one 16 KiB read per client per turn), and splitting them costs
// more system calls than the shorter turn is worth: 50 clients
// pipelining 16 scripts of ~720 bytes (bench/types.sh's funnel EVAL)
// went from 8.5 to 10.7 µs of CPU per call, -15% throughput, under the
// share's 4 KiB floor.
const (
	turnTarget    = time.Millisecond
	shareMaxReady = 16
)

// turnShare is the read bound (connState.readMax) for a turn of n ready
// events when a byte read has cost nsPerByte ns of the loop's time: 0 (no
// bound) while the share is a whole buffer, the cost is not known yet, or
// more than shareMaxReady connections are ready.
func turnShare(n int, nsPerByte float64) int {
	if n <= 2 || n > shareMaxReady || nsPerByte <= 0 {
		return 0
	}
	share := float64(turnTarget) / nsPerByte / float64(n)
	if share >= readBufSize {
		return 0
	}
	return max(int(share), minReadRoom)
}

// pollCounts returns how many waits busy-polled first and how many of
// those found events by polling. Any goroutine.
func (l *eventLoop) pollCounts() (polls, hits int64) {
	return l.polls.Load(), l.pollHits.Load()
}

// wakeCounts returns how many waits returned events and how many events
// they returned. Any goroutine.
func (l *eventLoop) wakeCounts() (wakes, events int64) {
	return l.wakes.Load(), l.events.Load()
}

// yieldCount returns how many times the loop yielded between turns
// (loopYieldEvery). Any goroutine.
func (l *eventLoop) yieldCount() int64 { return l.yields.Load() }

// busyWait polls for events without sleeping until some arrive or the
// busy-poll budget, counted from since, is spent; it returns how many it
// found (0: go to sleep in epoll_wait). Each poll is a non-blocking
// epoll_pwait made as a raw system call: it cannot block, so it skips the
// runtime's syscall bookkeeping.
func (l *eventLoop) busyWait(events []unix.EpollEvent, since time.Time) int {
	l.polls.Add(1)
	for {
		r, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(l.epfd),
			uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
		if n := int(r); errno == 0 && n > 0 {
			l.pollHits.Add(1)
			return n
		}
		if time.Since(since) >= l.poll.budget {
			return 0
		}
	}
}

// handleWake handles a wake-up: new connections, kicked ones, and a stop
// request, in which case it closes what is left and returns true.
func (l *eventLoop) handleWake() bool {
	var buf [8]byte
	unix.Read(l.wakefd, buf[:])
	l.woken.Store(false)
	l.mu.Lock()
	adds, kicks, stop, posts := l.adds, l.kicks, l.stop, l.posts
	l.adds, l.kicks, l.posts = nil, nil, nil
	l.mu.Unlock()
	for _, fn := range posts {
		l.runPosted(fn) // forward_loop_linux.go
	}
	l.runSoon()
	for _, lc := range adds {
		lc.st = l.s.newConnState(lc.c)
		lc.events = unix.EPOLLIN | unix.EPOLLRDHUP
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, lc.fd, &unix.EpollEvent{Events: lc.events, Fd: int32(lc.fd)}); err != nil {
			l.s.log.Warn("event loop: cannot watch connection", "err", err)
			lc.closed.Store(true)
		}
		l.conns.set(lc.fd, lc)
		if lc.closed.Load() || lc.readStop.Load() {
			kicks = append(kicks, lc)
		}
	}
	for _, lc := range kicks {
		switch {
		case lc.done || lc.c == nil:
		case lc.closed.Load():
			l.finish(lc)
		case lc.readStop.Load() && !lc.fwdWait.Load(): // a parked one ends after its resume
			l.end(lc)
		}
	}
	if stop {
		l.conns.each(func(lc *loopConn) {
			lc.closed.Store(true)
			l.finish(lc)
		})
		l.closeFds()
	}
	return stop
}

// deferOut is pump's choice, once lc's commands of this call have run,
// between writing their replies now (false) and leaving them in c.out for
// writePending at the end of the loop's turn (true), as Redis writes its
// clients' replies in beforeSleep (handleClientsWithPendingWrites): the
// turn's commands run back to back and its writes follow in one burst.
// Server CPU per call of CL.THROTTLE allowed c=50 P=16 (persist_cost):
// 0.58 -> 0.545 µs without persistence, 0.615 -> 0.585 µs with it (its
// on/off ratio unchanged: 0.935 -> 0.941 in req/s, 116 rounds against
// 101); window.sh P16 LOG 100 0.86 -> 0.79 µs a call.
//
// Replies are written now in sidecar mode (a parked connection's c.out is
// stitched by its resume: forward_loop_linux.go), by a pump that ends the
// connection (QUIT, EOF: before the close) and once the connection has a
// push state (tracking: its flush orders pushes after the replies,
// tracking.go). pc.deferred tells a push state created meanwhile by
// another connection (a REDIRECT to this one) that replies are waiting,
// so its pushes wait for them (pushConn.ensure); it is set before ps is
// looked at and ensure looks at it after creating ps, so one of the two
// sees the other.
//
// The loop goroutine only (pump on a loop's connection). Hot-path cost: a
// config load, an atomic store and load, and an append the first time in
// a turn.
func (lc *loopConn) deferOut(pc *pushConn) bool {
	l := lc.loop
	if l.s.cfg.Forwarder != nil {
		return false
	}
	if lc.pending {
		return true // served again in this turn (release): still waiting
	}
	if pc != nil {
		pc.deferred.Store(true)
		if pc.ps.Load() != nil {
			pc.deferred.Store(false)
			return false
		}
	}
	lc.pending = true
	l.pending = append(l.pending, lc)
	return true
}

// writePending writes the replies deferOut left for the end of the turn,
// in the order their connections ran. A connection finished meanwhile
// (closed by another goroutine: its push backlog over the output limit,
// the server's stop; its output is dropped, as Redis's freeClient drops
// it) is skipped; one whose write fails ends as pump's failed write would
// end it. Loop goroutine only.
func (l *eventLoop) writePending() {
	for i, lc := range l.pending {
		l.pending[i] = nil
		if !lc.pending {
			continue // written already (end)
		}
		l.writeDeferred(lc)
	}
	l.pending = l.pending[:0]
}

// writeDeferred writes lc's deferred replies now and takes it off the
// turn's list (its entry in l.pending is skipped). Loop goroutine only.
func (l *eventLoop) writeDeferred(lc *loopConn) {
	lc.pending = false
	if lc.held {
		// The same pump call went on to a write and held the
		// connection (pumpHold): c.out now ends with replies that wait
		// for the replication barrier, and release writes them all
		// after it (its serve defers them again). pc.deferred stays
		// set: the replies still wait.
		return
	}
	pc := lc.st.pc
	var err error
	if !lc.done {
		err = l.s.writeOut(lc.c, pc, true)
	}
	if pc != nil {
		// Cleared after the write: a push state created during it (a
		// REDIRECT to this connection from another goroutine) started
		// busy (pushConn.ensure), so its pushes waited behind the
		// replies; they go now. One created later sees deferred false.
		pc.deferred.Store(false)
		if ps := pc.ps.Load(); ps != nil && err == nil && !lc.done {
			_, err = ps.flush(nil)
		}
	}
	if err != nil {
		l.end(lc)
	}
}

// serve runs lc's commands (pump) and registers what it waits for next.
func (l *eventLoop) serve(lc *loopConn, read bool) {
	c := lc.c
	res := pumpDone
	func() {
		defer func() {
			if p := recover(); p != nil {
				l.s.stats.panics.Add(1)
				l.s.log.Error("panic in connection loop", "panic", p, "client", c.id,
					"stack", string(debug.Stack()))
				lc.closed.Store(true)
			}
		}()
		res = l.s.pump(c, lc.st, read)
	}()
	switch res {
	case pumpDone:
		l.end(lc)
	case pumpHold:
		lc.held = true
		l.held = append(l.held, lc)
	case pumpForward:
		lc.fwdWait.Store(true) // forward_loop_linux.go; resumed by its session's done
	default: // pumpRead
		lc.mu.Lock()
		lc.rearmLocked()
		lc.mu.Unlock()
	}
}

// release waits once on the replication barrier for every held
// connection (a group commit: one wait covers the writes of all of them),
// then writes their replies and serves them on; when the barrier fails,
// their replies are dropped and the connections closed (replgate.go).
func (l *eventLoop) release() {
	held := l.held
	l.held, l.heldSpare = l.heldSpare[:0], held
	err := l.s.cfg.ReplyBarrier()
	if err != nil {
		l.s.log.Warn("replication: replies withheld, closing connections", "n", len(held), "err", err)
	}
	for i, lc := range held {
		held[i] = nil
		lc.held = false
		if lc.done {
			continue
		}
		lc.c.replWrote = false
		if err != nil {
			lc.c.out = lc.c.out[:0]
			l.finish(lc)
			continue
		}
		l.serve(lc, false)
	}
}

// writable writes what it can of lc's backlog. Once all is written the
// connection stops asking for EPOLLOUT, or closes if it was ending. Each
// write that makes progress gives the socket the write timeout again.
func (l *eventLoop) writable(lc *loopConn) {
	lc.mu.Lock()
	n, err := lc.writeBacklogLocked()
	if err != nil {
		lc.out.reset()
		lc.mu.Unlock()
		lc.closed.Store(true)
		l.finish(lc)
		return
	}
	if lc.out.len() == 0 && lc.closing {
		lc.mu.Unlock()
		l.finish(lc)
		return
	}
	if n > 0 {
		if lc.span > 0 {
			lc.wdl.Store(time.Now().UnixNano() + lc.span)
		}
		if lim := l.s.cfg.OutputBufferLimit; lim.Soft > 0 && lc.out.memory() < lim.Soft {
			lc.softSince = 0
		}
	}
	lc.rearmLocked()
	lc.mu.Unlock()
}

// end closes lc once its backlog is written: at once when there is none;
// meanwhile nothing more is read.
func (l *eventLoop) end(lc *loopConn) {
	if lc.pending && !lc.closed.Load() {
		l.writeDeferred(lc) // Shutdown's read stop: replies of commands run go first
		if lc.done {
			return
		}
	}
	if lc.closed.Load() || !lc.backlogged() {
		l.finish(lc)
		return
	}
	lc.closing = true
	lc.mu.Lock()
	lc.noRead = true
	lc.rearmLocked()
	lc.mu.Unlock()
}

// expireBacklogs closes connections whose output has waited past its
// write deadline.
func (l *eventLoop) expireBacklogs(now time.Time) {
	l.conns.each(func(lc *loopConn) {
		if dl := lc.wdl.Load(); dl != 0 && now.UnixNano() > dl && lc.backlogged() {
			lc.closed.Store(true)
			l.finish(lc)
		}
	})
}

// finish closes lc's connection and unregisters its client: what
// serveConn's deferred calls do for a connection with its own goroutine.
func (l *eventLoop) finish(lc *loopConn) {
	if lc.done {
		return
	}
	lc.done = true
	lc.closed.Store(true)
	l.conns.del(lc.fd)
	c := lc.c
	c.netConn.Close() // stops pushes, frees the guard's client slot
	lc.mu.Lock()
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, lc.fd, nil)
	unix.Close(lc.fd)
	lc.fdClosed = true
	lc.out.reset()
	lc.mu.Unlock()
	l.s.closed(c)
}

// shutdownIdle releases a loop that never ran.
func (l *eventLoop) shutdownIdle() { l.closeFds() }

func (l *eventLoop) closeFds() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closedFds {
		l.closedFds = true
		unix.Close(l.epfd)
		unix.Close(l.wakefd)
		// Functions posted before the loop stopped still run (Post
		// refuses those after): a forwarder closes its sockets so.
		posts := append(l.posts, l.soon...)
		l.posts, l.soon = nil, nil
		l.hasSoon.Store(false)
		l.mu.Unlock()
		for _, fn := range posts {
			fn()
		}
		l.mu.Lock()
	}
}

// rawRead and rawWrite are system calls that never block (the socket is
// non-blocking): made raw, they skip the runtime's enter/exit-syscall
// bookkeeping and never make the scheduler hand the loop's P to another
// thread in the middle of a pipeline.
func rawRead(fd int, p []byte) (int, error)  { return rawIO(unix.SYS_READ, fd, p) }
func rawWrite(fd int, p []byte) (int, error) { return rawIO(unix.SYS_WRITE, fd, p) }

// rawIO is read(2) or write(2) (trap) of p on fd as a raw system call.
func rawIO(trap uintptr, fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
