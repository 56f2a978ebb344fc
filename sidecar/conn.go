package sidecar

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// request is one reply awaited on a muxConn: the reader drops skip replies
// (ASKING's, MULTI's and QUEUED ones), copies the next into reply and
// marks the request done on its batch.
type request struct {
	skip  int
	reply []byte
	err   error
	done  *batch
	sent  int64 // when sent (unix ns), for replyLeft
	slow  bool  // a bulk read: BulkTimeout before its first byte
	// unsent: err is a send that failed before the request was queued
	// (it never reached the owner).
	unsent bool
}

// batch is what a session waits on: the requests of one Do, across
// owners. A session reuses its batch: every Do that sends anything ends
// with exactly one token received from ch (all its requests finish, by a
// reply or by their connection failing), so no token is ever left over.
type batch struct {
	left atomic.Int32
	ch   chan struct{} // one token when left reaches 0
}

func newBatch(n int) *batch {
	b := &batch{ch: make(chan struct{}, 1)}
	b.left.Store(int32(n))
	return b
}

// reset arms b for n requests.
func (b *batch) reset(n int) { b.left.Store(int32(n)) }

func (b *batch) finish() {
	if b.left.Add(-1) == 0 {
		b.ch <- struct{}{}
	}
}

// errClosed is a muxConn that was closed (timeout, topology change, Close).
var errClosed = errors.New("sidecar: upstream connection closed")

// muxConn is one pipelined connection to an owner, shared by many client
// sessions: requests of all of them are written in the order they are
// sent, and replies, which an owner returns in that same order, are handed
// back by one reader goroutine. Whoever finds nobody writing writes, and
// also writes what others queued meanwhile (one write for many clients
// under load). Safe for concurrent use.
type muxConn struct {
	nc    net.Conn
	limit int64 // Config.ReplyLimit (0: none); the reader's only

	mu      sync.Mutex // guards the fields below
	wbuf    []byte     // bytes queued, not written yet
	spare   []byte
	writing bool
	pending []*request // awaiting replies, oldest first, from head
	head    int
	err     error // set once: the connection is broken
	onFail  func(error)

	dead    atomic.Bool  // err != nil, read without the lock
	waiting atomic.Int64 // len(pending) - head, read without the lock
	// lastRead is when the reader last got bytes, headAt when it last
	// delivered a reply (unix ns), partial how many bytes of the next
	// reply it holds: the oldest awaited reply's progress (replyLeft).
	lastRead atomic.Int64
	headAt   atomic.Int64
	partial  atomic.Int64
}

// dialOptions is how an owner is reached.
type dialOptions struct {
	timeout  time.Duration
	password string
	user     string
	tls      *tls.Config
	resp3    bool
	db       int // SELECTed after the hand-shake when not 0
	// replyLimit is Config.ReplyLimit: a reply past it is dropped.
	replyLimit int64
}

// dial connects to addr, authenticates and switches protocol, all within
// o.timeout, and starts the reader. onFail is called once if the
// connection later breaks.
func dial(addr string, o dialOptions, onFail func(error)) (*muxConn, error) {
	nc, br, buf, err := handshake(addr, o)
	if err != nil {
		return nil, err
	}
	m := &muxConn{nc: nc, onFail: onFail, limit: o.replyLimit}
	go m.readLoop(br, buf)
	return m, nil
}

// handshake connects to addr, authenticates, switches protocol and
// database, all within o.timeout. It returns the connection, its reader
// and the bytes read past the hand-shake's replies (none expected).
func handshake(addr string, o dialOptions) (net.Conn, *bufio.Reader, []byte, error) {
	d := net.Dialer{Timeout: o.timeout}
	var nc net.Conn
	var err error
	if o.tls != nil {
		nc, err = tls.DialWithDialer(&d, "tcp", addr, o.tls)
	} else {
		nc, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	// Hand-shake synchronously: AUTH, HELLO 3, SELECT, PING.
	var hs []byte
	n := 0
	if o.password != "" {
		if o.user != "" {
			hs = appendStrings(hs, "AUTH", o.user, o.password)
		} else {
			hs = appendStrings(hs, "AUTH", o.password)
		}
		n++
	}
	if o.resp3 {
		hs = appendStrings(hs, "HELLO", "3")
		n++
	}
	if o.db != 0 {
		hs = appendStrings(hs, "SELECT", strconv.Itoa(o.db))
		n++
	}
	hs = appendStrings(hs, "PING")
	n++
	nc.SetDeadline(time.Now().Add(o.timeout))
	if _, err := nc.Write(hs); err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	br := bufio.NewReaderSize(nc, 32<<10)
	var buf []byte
	for got := 0; got < n; {
		chunk := make([]byte, 4096)
		k, err := br.Read(chunk)
		if err != nil {
			nc.Close()
			return nil, nil, nil, err
		}
		buf = append(buf, chunk[:k]...)
		for {
			m, err := replyEnd(buf)
			if err != nil {
				nc.Close()
				return nil, nil, nil, err
			}
			if m == 0 {
				break
			}
			if isPush(buf) { // out of band: not a hand-shake's reply
				buf = buf[m:]
				continue
			}
			if buf[0] == '-' {
				nc.Close()
				return nil, nil, nil, fmt.Errorf("sidecar: %s: %s", addr, buf[1:m-2])
			}
			buf = buf[m:]
			got++
		}
	}
	nc.SetDeadline(time.Time{})
	return nc, br, buf, nil
}

// broken reports whether the connection has failed.
func (m *muxConn) broken() bool { return m.dead.Load() }

// send queues data, whose replies reqs await in order, and writes it
// unless another sender is writing (which then writes it too). It fails
// when the connection is broken; reqs are then not queued.
func (m *muxConn) send(data []byte, reqs []*request) error {
	m.mu.Lock()
	if m.err != nil {
		err := m.err
		m.mu.Unlock()
		return err
	}
	m.pending = append(m.pending, reqs...)
	m.waiting.Add(int64(len(reqs)))
	m.wbuf = append(m.wbuf, data...)
	if m.writing {
		m.mu.Unlock()
		return nil
	}
	m.writing = true
	// Let the other sessions that have a pipeline ready append theirs
	// first: one write (and one read on the owner) for all of them. With
	// nothing else runnable this returns at once.
	m.mu.Unlock()
	runtime.Gosched()
	m.mu.Lock()
	for len(m.wbuf) > 0 && m.err == nil {
		buf := m.wbuf
		m.wbuf = m.spare[:0]
		m.mu.Unlock()
		_, err := m.nc.Write(buf)
		m.mu.Lock()
		if cap(buf) <= 1<<20 { // a large pipeline's buffer is not kept
			m.spare = buf[:0]
		}
		if err != nil {
			m.failLocked(err)
		}
	}
	m.writing = false
	m.mu.Unlock()
	return nil
}

// inFlight is how many replies are awaited.
func (m *muxConn) inFlight() int { return int(m.waiting.Load()) }

// close breaks the connection: pending requests fail with errClosed.
func (m *muxConn) close() {
	m.mu.Lock()
	m.failLocked(errClosed)
	m.mu.Unlock()
}

// failLocked marks the connection broken, fails every pending request and
// closes the socket (the reader then stops).
func (m *muxConn) failLocked(err error) {
	if m.err != nil {
		return
	}
	m.err = err
	m.dead.Store(true)
	m.waiting.Store(0)
	m.nc.Close()
	for _, r := range m.pending[m.head:] {
		r.err = err
		r.done.finish()
	}
	m.pending, m.head = nil, 0
	if m.onFail != nil && err != errClosed {
		go m.onFail(err)
	}
}

// readLoop frames replies and hands each to the oldest pending request.
func (m *muxConn) readLoop(br *bufio.Reader, buf []byte) {
	rb := make([]byte, 0, 32<<10)
	rb = append(rb, buf...)
	if n := br.Buffered(); n > 0 { // nothing is expected after the hand-shake; keep it anyway
		b, _ := br.Peek(n)
		rb = append(rb, b...)
		br.Discard(n)
	}
	var rc syscall.RawConn
	if tc, ok := m.nc.(*net.TCPConn); ok {
		rc, _ = tc.SyscallConn()
	}
	var fr framer // resumes framing the reply at rb[0] after each read
	// dropping: the reply at rb[0] passed m.limit and is being dropped
	// as it comes (framer.drop); dropped bytes of it so far.
	// push: the reply dropped is a push (isPush), skipped once dropped.
	dropping, dropped, push := false, int64(0), false
	for {
		if !dropping && m.limit > 0 && int64(len(rb)) > m.limit {
			dropping, dropped, push = true, 0, isPush(rb)
		}
		if dropping {
			n, done, err := fr.drop(rb)
			if err != nil {
				m.mu.Lock()
				m.failLocked(err)
				m.mu.Unlock()
				return
			}
			dropped += int64(n)
			rb = rb[:copy(rb, rb[n:])] // the grown buffer reads on in large pieces
			if done {
				dropping = false
				rb = shrinkTo(rb, 0, 32<<10)
				if !push && !m.deliver(nil, false, dropped) {
					return
				}
				dropped = 0
			}
		}
		// Deliver every complete reply in rb.
		off := 0
		for off < len(rb) && !dropping {
			n, err := fr.next(rb[off:])
			if err != nil {
				m.mu.Lock()
				m.failLocked(err)
				m.mu.Unlock()
				return
			}
			if n == 0 {
				break
			}
			if off == 0 && n == len(rb) && n > 1<<20 {
				// One large reply, alone in the buffer: the buffer
				// itself becomes the reply (no copy); reading starts
				// afresh.
				reply := rb
				rb = make([]byte, 0, 32<<10)
				if !m.deliver(reply, true, 0) {
					return
				}
				break
			}
			if !m.deliver(rb[off:off+n], false, 0) {
				return
			}
			off += n
		}
		if off > 0 {
			rb = rb[:copy(rb, rb[off:])]
		}
		if !dropping && m.limit > 0 && int64(len(rb)) > m.limit {
			continue // the reply at rb[0] passed the limit: drop it (above)
		}
		m.partial.Store(dropped + int64(len(rb)))
		if len(rb) == cap(rb) {
			nb := make([]byte, len(rb), growTo(cap(rb), 32<<10, m.limit))
			copy(nb, rb)
			rb = nb
		} else if len(rb) == 0 && cap(rb) > 1<<20 {
			rb = make([]byte, 0, 32<<10) // a large reply has been delivered
		}
		var k int
		var err error
		if rc != nil {
			k, err = m.rawRead(rc, rb[len(rb):cap(rb)])
		} else {
			k, err = br.Read(rb[len(rb):cap(rb)])
		}
		rb = rb[:len(rb)+k]
		if k > 0 {
			m.lastRead.Store(time.Now().UnixNano())
		}
		if err != nil {
			m.mu.Lock()
			m.failLocked(err)
			m.mu.Unlock()
			return
		}
	}
}

// rawRead reads what the owner sent into p, blocking until it sends
// something. When no reply is awaited it does not try a read first: it
// waits for the socket to become readable. Nothing can arrive then but
// replies to requests sent later, whose send counts them in waiting
// before it writes, after the poller was re-armed by rc.Read; so their
// arrival wakes this wait. That saves the read() that would answer
// EAGAIN, one system call per batch of replies (at pipeline 1 about one
// in ten of the sidecar's calls).
func (m *muxConn) rawRead(rc syscall.RawConn, p []byte) (int, error) {
	var n int
	var err error
	tried := m.waiting.Load() != 0
	rerr := rc.Read(func(fd uintptr) bool {
		if !tried {
			tried = true
			if m.waiting.Load() == 0 {
				return false // wait for readability
			}
		}
		for {
			n, err = syscall.Read(int(fd), p)
			if err != syscall.EINTR {
				break
			}
		}
		return err != syscall.EAGAIN
	})
	switch {
	case rerr != nil:
		return 0, rerr
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// deliver gives one reply to the oldest pending request; false when the
// connection is broken (a reply nobody asked for breaks it too). A push
// (isPush) is skipped. own:
// reply is a buffer of its own, handed over rather than copied. dropped:
// the reply passed the limit and was dropped after that many bytes (reply
// is nil); the request gets a replyOverLimit error.
func (m *muxConn) deliver(reply []byte, own bool, dropped int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return false
	}
	if isPush(reply) {
		return true
	}
	if m.head == len(m.pending) {
		m.failLocked(errProtocol)
		return false
	}
	r := m.pending[m.head]
	if r.skip > 0 {
		r.skip--
		return true
	}
	m.pending[m.head] = nil
	m.head++
	m.waiting.Add(-1)
	m.headAt.Store(m.lastRead.Load()) // its last bytes came then
	if m.head == len(m.pending) {
		m.pending, m.head = m.pending[:0], 0
	} else if m.head > 1024 && m.head*2 > len(m.pending) {
		m.pending = m.pending[:copy(m.pending, m.pending[m.head:])]
		m.head = 0
	}
	switch {
	case dropped > 0:
		r.reply, r.err = r.reply[:0], &replyOverLimit{dropped}
	case own:
		r.reply = reply
	default:
		r.reply = append(r.reply[:0], reply...)
	}
	r.done.finish()
	return true
}

// replyLeft is how long the oldest reply awaited on m may still take
// (the package's replyLeft, for a connection of the bulk lane or not); a
// positive value when none is awaited. Safe for concurrent use; takes the
// lock, so only for a waiter whose deadline passed.
func (m *muxConn) replyLeft(now int64, bulk bool, timeout, bulkTimeout time.Duration) time.Duration {
	m.mu.Lock()
	if m.head == len(m.pending) {
		m.mu.Unlock()
		return timeout
	}
	sent, slow := m.pending[m.head].sent, false
	if bulk { // a bulk read anywhere: see upConn.left
		for _, r := range m.pending[m.head:] {
			if slow = r.slow; slow {
				break
			}
		}
	}
	m.mu.Unlock()
	return replyLeft(now, sent, max(sent, m.headAt.Load()), m.lastRead.Load(), int(m.partial.Load()),
		bulk, slow, timeout, bulkTimeout)
}

// owes reports whether a reply of batch b is still awaited here.
func (m *muxConn) owes(b *batch) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.pending[m.head:] {
		if r.done == b {
			return true
		}
	}
	return false
}
