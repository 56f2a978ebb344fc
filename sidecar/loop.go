package sidecar

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/celld/celld/server"
)

// Forwarding on celld's own event loops (server.AsyncForwarder): the loop
// that serves a client also sends its commands upstream and reads the
// owners' replies, so a forwarded request costs no goroutine, no channel
// and no wake-up of another thread.
//
// Each loop has its own upstream connections (loopState.conns): one per
// owner, database and protocol version, pipelined and shared by every
// client of that loop. A client's run of forwardable commands is encoded
// into the write buffers of the owners it touches (Start), and the loop
// writes each buffer once after the events of its wake (flush): one write
// per owner per wake, however many clients it carries. When a socket is
// readable the loop reads it, frames the replies and hands each to the
// request that awaits it (replies come back in the order sent); a client
// whose last reply arrived is resumed by the server after that wake's
// events. Everything here but the dials runs on the loop goroutine, so
// none of it takes a lock.
//
// What does not run on the loop, but on a goroutine of its own that posts
// the session's done back to the loop: dialling (handshake), a WATCH and
// the transaction after it (a connection pinned to the client), a
// transaction that SELECTs, following a MOVED or ASK, and everything when
// the upstream is reached over TLS (the loop speaks plain TCP only). These
// reuse the blocking session (session.go), unchanged.
//
// Timeouts: a ticker (Sidecar.Start) posts checkTimeouts to every loop
// each Timeout/4; a connection whose oldest awaited reply has timed out
// (replyLeft: on the decision lane, not fully answered within Timeout of
// its send, however many bytes of it came) fails, taking its owner down
// (the fallback then decides). So a silent or trickling owner is noticed
// within 1.25 × Timeout, and a large reply streaming in on the bulk lane
// is waited for.

// loopState is one event loop's upstream connections. Loop goroutine only.
type loopState struct {
	sc    *Sidecar
	l     server.ForwardLoop
	conns map[connKey]*upConn
	// plain are the live conns of database 0 in RESP2 (the common
	// case) by lane (1: bulk) and owner.id: the same as in conns,
	// without hashing a key. Only ids below loopTableMax are kept here
	// (the others are found in conns), so a table is at most 32 KiB.
	plain [2][]*upConn
	dirty []*upConn // written by flush after this wake's events
	// awaited counts the replies awaited on all conns; flush publishes
	// whether it is 0 to waiting, so that the timeout ticker does not
	// wake an idle loop.
	awaited int
	waiting atomic.Bool
}

// loopTableMax bounds loopState.plain: owner ids are never reused, so a
// long-lived sidecar whose upstream keeps changing addresses (failovers
// to new pods, redirects to new nodes) reaches large ids, and a table
// sized by the largest one grew to 1,048,577 entries (8 MiB per loop and
// lane) after a million owners had come and gone. An owner of a larger
// id takes the map in conns: one hash of a connKey per command, the same
// forwarding otherwise (TestSidecarLoopTablesBounded).
const loopTableMax = 4096

// connKey names one of a loop's upstream connections.
type connKey struct {
	o     *owner
	db    int
	resp3 bool
	bulk  bool // the bulk lane (bulk.go): BulkTimeout, not Timeout
}

// pend is one reply awaited on an upConn: the session and index of the
// request, how many replies to skip first (MULTI's and QUEUED ones), and
// when it was queued (unix ns).
type pend struct {
	s    *loopSession
	idx  int32
	skip int32
	sent int64
	slow bool // a bulk read on a bulk lane: BulkTimeout before its first byte
}

// upConn is one pipelined connection of a loop to an owner. Loop
// goroutine only.
type upConn struct {
	ls      *loopState
	key     connKey
	gen     uint64 // the owner's gen when dialled
	fd      int    // -1 while dialling
	dead    bool
	dirty   bool // in ls.dirty
	wantOut bool // writability asked for: wbuf[woff:] waits for the socket
	wbuf    []byte
	woff    int
	pending []pend
	head    int
	// written: pending[:written] have been handed to write(2) (or may
	// have been): failed, they get the error of a write sent, not the
	// fallback (session.failed).
	written int
	rbuf    []byte
	fr      framer // where the reply at rbuf[0] has been framed up to
	// lastRead is when a read last brought bytes, headAt when the last
	// reply was delivered (unix ns): the oldest awaited reply's clock on
	// a bulk lane (replyLeft).
	lastRead int64
	headAt   int64
	// dropping: the reply at rbuf[0] passed Config.ReplyLimit and is
	// dropped as it comes (framer.drop); dropped bytes of it so far.
	dropping bool
	dropped  int64
	dropPush bool // the reply dropped is a push (isPush): skipped, not delivered
}

// loopSession is a client connection's forwarding on an event loop
// (server.AsyncForwardSession).
type loopSession struct {
	ls   *loopState
	sync *session // the blocking path (see above); its pin is the WATCH's

	reqs    []server.ForwardReq // the run in flight, until done
	done    func()
	left    int // replies still awaited
	route   []*owner
	bulk    []bool // per request of the run: on its owner's bulk lane
	replies [][]byte
	errs    []error
	sent    []bool // with errs[i]: request i had been written (upConn.written)
	follow  bool   // a reply is a MOVED/ASK to follow

	mu     sync.Mutex // guards busy and closed: a blocking goroutine and Close
	busy   bool       // a goroutine runs the blocking path
	closed bool
}

// LoopSession implements server.AsyncForwarder. Called on l's goroutine.
func (sc *Sidecar) LoopSession(l server.ForwardLoop) server.AsyncForwardSession {
	sc.mu.Lock()
	ls := sc.loops[l]
	if ls == nil {
		ls = &loopState{sc: sc, l: l, conns: map[connKey]*upConn{}}
		if sc.loops == nil {
			sc.loops = map[server.ForwardLoop]*loopState{}
		}
		sc.loops[l] = ls
		l.AfterEvents(ls.flush)
	}
	sc.mu.Unlock()
	return &loopSession{ls: ls, sync: &session{sc: sc, timer: stoppedTimer()}}
}

// Start implements server.AsyncForwardSession.
func (s *loopSession) Start(reqs []server.ForwardReq, done func()) bool {
	sc := s.ls.sc
	s.reqs, s.done = reqs, done
	if sc.cfg.TLS != nil || s.needsPin(reqs) {
		s.blocking(func() { s.sync.Do(reqs) })
		return false
	}
	t := sc.topo.Load()
	if cap(s.route) < len(reqs) {
		n := max(len(reqs), 32)
		s.route = make([]*owner, n)
		s.bulk = make([]bool, n)
		s.replies = make([][]byte, n)
		s.errs = make([]error, n)
		s.sent = make([]bool, n)
	}
	s.route, s.replies, s.errs = s.route[:len(reqs)], s.replies[:len(reqs)], s.errs[:len(reqs)]
	s.sent = s.sent[:len(reqs)]
	s.bulk = s.bulk[:len(reqs)]
	// lanes: a bulk or value read in the run, so some owners' shares go
	// on their bulk lane; slow: a bulk read among them (BulkTimeout
	// before a first byte there).
	lanes, slow, all := false, false, true
	for i := range reqs {
		if k := reqKind(&reqs[i]); k != laneDecision {
			lanes, slow = true, slow || k == laneBulk
		} else {
			all = false
		}
	}
	if lanes && all { // every request on its owner's bulk lane
		for i := range reqs {
			s.bulk[i] = true
		}
	} else if lanes {
		for i := range reqs {
			s.route[i], s.bulk[i] = t.owner(reqs[i].Slot), false
		}
		bulkLanes(reqs, s.route, s.bulk)
	}
	// Start holds one count itself, so that no failure met while it
	// queues (a stale connection closed) finishes the run under it.
	s.left, s.follow = 1, false
	now := time.Now().UnixNano()
	for i := range reqs {
		r := &reqs[i]
		o := t.owner(r.Slot)
		s.route[i], s.errs[i] = nil, nil
		if cap(s.replies[i]) > maxKeepBuf {
			s.replies[i] = nil
		}
		if r.DB != 0 && t.cluster {
			r.Reply = appendError(nil, errSelectCluster) // see session.Do
			continue
		}
		if o == nil || !o.br.isUp() { // no owner: a partial topology
			s.sync.fallback(r, o)
			continue
		}
		u := s.ls.conn(o, r.DB, r.RESP3, lanes && s.bulk[i])
		if u == nil { // MaxInFlight replies awaited already
			sc.stats.UpstreamErrors.Add(1)
			s.sync.fallback(r, o)
			continue
		}
		s.route[i] = o
		s.left++
		u.queue(s, i, r, now, slow && s.bulk[i] && slowFirst(r))
	}
	s.left--
	if s.left == 0 { // nothing awaited: owners down, or failed already
		if s.settle() {
			s.followRedirects()
			return false
		}
		s.reqs, s.done = nil, nil
		return true
	}
	return false
}

// needsPin reports whether reqs must run on the blocking path: a WATCH,
// or a transaction after one or with a SELECT (session.usesPin).
func (s *loopSession) needsPin(reqs []server.ForwardReq) bool {
	for i := range reqs {
		if isWatch(&reqs[i]) || (reqs[i].Unit != nil && (s.sync.pin != nil || s.sync.watchLost || unitSelects(reqs[i].Unit))) {
			return true
		}
	}
	return false
}

// blocking runs fn on a goroutine of its own, then posts done to the loop.
func (s *loopSession) blocking(fn func()) {
	s.mu.Lock()
	s.busy = true
	s.mu.Unlock()
	go func() {
		fn()
		s.mu.Lock()
		s.busy = false
		closed := s.closed
		s.mu.Unlock()
		if closed {
			s.sync.Close()
		}
		done := s.done
		s.reqs, s.done = nil, nil
		s.ls.l.Post(done) // refused once the loop has stopped: nobody waits then
	}()
}

// answered records that request i has its reply (or its error); the last
// one finishes the run.
func (s *loopSession) answered() {
	s.left--
	if s.left == 0 {
		s.finish()
	}
}

// finish ends a run whose replies are all in: done, or first the
// redirects followed on the blocking path.
func (s *loopSession) finish() {
	if s.settle() {
		s.followRedirects()
		return
	}
	done := s.done
	s.reqs, s.done = nil, nil
	done()
}

// settle gives every forwarded request of the run its reply: the owner's,
// or the fallback's for those whose owner failed. It reports whether some
// replies are MOVED/ASK redirects (their route stays set).
func (s *loopSession) settle() bool {
	sc := s.ls.sc
	reqs := s.reqs
	for i := range reqs {
		o := s.route[i]
		if o == nil {
			continue
		}
		if s.errs[i] != nil {
			s.route[i] = nil
			s.sync.failed(&reqs[i], o, s.errs[i], s.sent[i])
			continue
		}
		if _, _, ok := redirect(s.replies[i]); ok && reqs[i].Unit == nil {
			s.follow = true
			continue
		}
		s.route[i] = nil
		if r := s.replies[i]; ((len(r) > 0 && r[0] == '-') || o.refusedAt.Load() != 0) && s.sync.refusedByOwner(&reqs[i], o, r) {
			continue
		}
		sc.stats.Forwarded.Add(1)
		reqs[i].Reply = s.replies[i]
	}
	return s.follow
}

// followRedirects follows the run's redirects on the blocking path (once
// each, as session.Do does), then posts done.
func (s *loopSession) followRedirects() {
	sc, reqs := s.ls.sc, s.reqs
	s.blocking(func() {
		for i := range reqs {
			if s.route[i] == nil {
				continue
			}
			addr, ask, _ := redirect(s.replies[i])
			sc.stats.Redirects.Add(1)
			if !ask {
				sc.refreshSoon()
			}
			s.sync.follow(&reqs[i], nil, sc.redirectOwner(addr), ask)
		}
	})
}

// Do implements server.ForwardSession (a session is not used blocking on
// a loop, but the interface has it).
func (s *loopSession) Do(reqs []server.ForwardReq) { s.sync.Do(reqs) }

// Unwatch implements server.ForwardSession.
func (s *loopSession) Unwatch() { s.sync.Unwatch() }

// Close implements server.ForwardSession: the pinned connection is closed
// now, or by the blocking goroutine when it ends. Requests still awaited
// on the loop's connections are answered into the session and dropped.
func (s *loopSession) Close() {
	s.mu.Lock()
	s.closed = true
	busy := s.busy
	s.mu.Unlock()
	if !busy {
		s.sync.Close()
	}
}

// conn returns the loop's connection for k, dialling it, or nil when
// MaxInFlight replies are awaited on it already. A decision lane's
// connection dialled before the owner last went down is closed and
// replaced; a bulk lane's is kept while it lives (a bulk reply may still
// be streaming in on it when a decision's timeout took the owner down: a
// dead owner's socket fails by itself, a silent one by BulkTimeout).
func (ls *loopState) conn(o *owner, db int, resp3, bulk bool) *upConn {
	if db == 0 && !resp3 {
		if plain := ls.plain[b2i(bulk)]; o.id < len(plain) {
			if u := plain[o.id]; u != nil && !u.dead && (bulk || u.gen == o.gen.Load()) &&
				len(u.pending)-u.head < ls.sc.cfg.MaxInFlight {
				return u
			}
		}
	}
	k := connKey{o, db, resp3, bulk}
	u := ls.conns[k]
	if u != nil && u.gen != o.gen.Load() && !bulk {
		u.fail(errClosed)
		u = nil
	}
	if u == nil {
		u = ls.dial(k)
	}
	if len(u.pending)-u.head >= ls.sc.cfg.MaxInFlight {
		return nil
	}
	return u
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// dial starts a connection for k: the hand-shake runs on a goroutine, and
// requests queue meanwhile; attach (posted back) starts the writing.
func (ls *loopState) dial(k connKey) *upConn {
	u := &upConn{ls: ls, key: k, gen: k.o.gen.Load(), fd: -1}
	ls.conns[k] = u
	if k.db == 0 && !k.resp3 && k.o.id < loopTableMax {
		plain := &ls.plain[b2i(k.bulk)]
		if k.o.id >= len(*plain) {
			*plain = append(*plain, make([]*upConn, k.o.id+1-len(*plain))...)
		}
		(*plain)[k.o.id] = u
	}
	opts := ls.sc.dialOpts(k.resp3)
	opts.db = k.db
	go func() {
		fd, rest, err := dialFd(k.o.addr, opts)
		if !ls.l.Post(func() { u.attach(fd, rest, err) }) && err == nil {
			syscall.Close(fd) // the loop has stopped
		}
	}()
	return u
}

// dialFd connects and hand-shakes (blocking), then takes the socket from
// Go's poller as a non-blocking descriptor of its own.
func dialFd(addr string, opts dialOptions) (int, []byte, error) {
	nc, br, rest, err := handshake(addr, opts)
	if err != nil {
		return -1, nil, err
	}
	defer nc.Close() // the duplicate below stays open
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		rest = append(rest, b...)
	}
	rc, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		return -1, nil, err
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(f uintptr) {
		syscall.ForkLock.RLock() // no fork between the dup and close-on-exec
		defer syscall.ForkLock.RUnlock()
		if fd, derr = syscall.Dup(int(f)); derr == nil {
			syscall.CloseOnExec(fd)
		}
	}); err != nil {
		return -1, nil, err
	}
	if derr != nil {
		return -1, nil, derr
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return -1, nil, err
	}
	return fd, rest, nil
}

// attach is a dial's outcome, on the loop.
func (u *upConn) attach(fd int, rest []byte, err error) {
	if err == nil && u.dead {
		syscall.Close(fd) // failed meanwhile (timeout, Close)
		return
	}
	if err == nil {
		err = u.ls.l.Watch(fd, u)
		if err != nil {
			syscall.Close(fd)
		}
	}
	if err != nil {
		u.failOwner(err)
		return
	}
	u.fd = fd
	u.rbuf = append(make([]byte, 0, 16<<10), rest...)
	u.markDirty()
	if len(u.rbuf) > 0 {
		u.deliverAll(time.Now().UnixNano())
	}
}

// queue appends request i of s to the write buffer; flush writes it.
// slow: a bulk read on a bulk lane.
func (u *upConn) queue(s *loopSession, i int, r *server.ForwardReq, now int64, slow bool) {
	p := pend{s: s, idx: int32(i), sent: now, slow: slow}
	if r.Unit == nil {
		u.wbuf = appendForward(u.wbuf, r)
	} else {
		u.wbuf = appendCommand(u.wbuf, cmdMulti)
		for _, q := range r.Unit {
			u.wbuf = appendCommand(u.wbuf, q...)
		}
		u.wbuf = appendCommand(u.wbuf, cmdExec)
		p.skip = int32(1 + len(r.Unit))
	}
	u.pending = append(u.pending, p)
	u.ls.awaited++
	u.markDirty()
}

func (u *upConn) markDirty() {
	if !u.dirty {
		u.dirty = true
		u.ls.dirty = append(u.ls.dirty, u)
	}
}

// flush writes every connection this wake queued to (AfterEvents).
func (ls *loopState) flush() {
	for i, u := range ls.dirty {
		ls.dirty[i] = nil
		u.dirty = false
		if u.fd >= 0 && !u.dead && !u.wantOut {
			u.write()
		}
	}
	ls.dirty = ls.dirty[:0]
	if w := ls.awaited > 0; w != ls.waiting.Load() {
		ls.waiting.Store(w)
	}
}

// write writes wbuf until it is all written or the socket is full (then
// writability is asked for, and FdEvent writes the rest).
func (u *upConn) write() {
	if u.woff < len(u.wbuf) {
		u.written = len(u.pending)
	}
	for u.woff < len(u.wbuf) {
		n, err := rawIO(syscall.SYS_WRITE, u.fd, u.wbuf[u.woff:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			if !u.wantOut {
				u.wantOut = true
				u.ls.l.SetWritable(u.fd, true)
			}
			return
		case err != nil:
			u.failOwner(err)
			return
		}
		u.woff += n
	}
	if cap(u.wbuf) > maxKeepBuf {
		u.wbuf = nil
	} else {
		u.wbuf = u.wbuf[:0]
	}
	u.woff = 0
	if u.wantOut {
		u.wantOut = false
		u.ls.l.SetWritable(u.fd, false)
	}
}

// FdEvent implements server.FdHandler.
func (u *upConn) FdEvent(readable, writable bool) {
	if writable && !u.dead {
		u.write()
	}
	if readable && !u.dead {
		u.read()
	}
}

// read reads once (level-triggered: the loop calls again while more
// waits) and delivers every complete reply. It reports whether bytes came.
func (u *upConn) read() bool {
	if cap(u.rbuf)-len(u.rbuf) < 4<<10 {
		nb := make([]byte, len(u.rbuf), growTo(cap(u.rbuf), 16<<10, u.ls.sc.cfg.ReplyLimit))
		copy(nb, u.rbuf)
		u.rbuf = nb
	}
	n, err := rawIO(syscall.SYS_READ, u.fd, u.rbuf[len(u.rbuf):cap(u.rbuf)])
	switch {
	case err == syscall.EAGAIN || err == syscall.EINTR:
		return false
	case err != nil:
		u.failOwner(err)
		return false
	case n == 0:
		u.failOwner(errEOF)
		return false
	}
	u.rbuf = u.rbuf[:len(u.rbuf)+n]
	now := time.Now().UnixNano()
	u.lastRead = now
	u.deliverAll(now)
	return true
}

// deliverAll hands every complete reply in rbuf to its request. A reply
// that passes Config.ReplyLimit is dropped as it comes instead.
func (u *upConn) deliverAll(now int64) {
	if u.dropping && !u.dropSome(now) {
		return
	}
	off := 0
	for off < len(u.rbuf) && !u.dead {
		n, err := u.fr.next(u.rbuf[off:])
		if err != nil {
			u.failOwner(err)
			return
		}
		if n == 0 {
			break
		}
		if off == 0 && n == len(u.rbuf) && n > maxKeepBuf {
			// One large reply, alone in the buffer: the buffer itself
			// becomes the reply (no copy of it); reading starts afresh.
			reply := u.rbuf
			u.rbuf = make([]byte, 0, 16<<10)
			u.deliver(reply, now, true, 0)
			return
		}
		u.deliver(u.rbuf[off:off+n], now, false, 0)
		off += n
	}
	if u.dead {
		return
	}
	switch rest := len(u.rbuf) - off; {
	case rest == 0 && cap(u.rbuf) > maxKeepBuf:
		u.rbuf = make([]byte, 0, 16<<10) // a large reply has been delivered
	case off > 0:
		u.rbuf = u.rbuf[:copy(u.rbuf, u.rbuf[off:])]
	}
	if lim := u.ls.sc.cfg.ReplyLimit; lim > 0 && int64(len(u.rbuf)) > lim {
		u.dropping, u.dropped, u.dropPush = true, 0, isPush(u.rbuf)
		if u.dropSome(now) {
			u.deliverAll(now) // what followed the reply
		}
	}
}

// dropSome drops what rbuf holds of the reply being dropped; once it
// ends, its request gets a replyOverLimit error and rbuf keeps what
// follows. It reports whether the reply ended (and u is still up).
func (u *upConn) dropSome(now int64) bool {
	n, done, err := u.fr.drop(u.rbuf)
	if err != nil {
		u.failOwner(err)
		return false
	}
	u.dropped += int64(n)
	u.rbuf = u.rbuf[:copy(u.rbuf, u.rbuf[n:])] // the grown buffer reads on in large pieces
	if !done {
		return false
	}
	u.dropping = false
	u.rbuf = shrinkTo(u.rbuf, 0, 16<<10)
	if !u.dropPush {
		u.deliver(nil, now, false, u.dropped)
	}
	u.dropped = 0
	return !u.dead
}

// deliver gives one reply to the oldest awaited request; a reply nobody
// asked for breaks the connection, a push (isPush) is skipped. own: reply is a buffer of its own,
// handed over rather than copied. dropped: the reply passed the limit and
// was dropped after that many bytes (reply is nil); the request gets a
// replyOverLimit error.
func (u *upConn) deliver(reply []byte, now int64, own bool, dropped int64) {
	if isPush(reply) {
		return
	}
	if u.head == len(u.pending) {
		u.failOwner(errProtocol)
		return
	}
	p := &u.pending[u.head]
	if p.skip > 0 {
		p.skip--
		return
	}
	s, i, sent := p.s, p.idx, p.sent
	*p = pend{}
	u.head++
	u.headAt = now
	u.ls.awaited--
	if u.head == len(u.pending) {
		u.pending, u.head, u.written = u.pending[:0], 0, 0
	} else if u.head > 1024 && u.head*2 > len(u.pending) {
		u.pending = u.pending[:copy(u.pending, u.pending[u.head:])]
		u.written = max(u.written-u.head, 0)
		u.head = 0
	}
	u.key.o.lat.observe(time.Duration(now - sent))
	switch {
	case dropped > 0:
		s.replies[i], s.errs[i] = s.replies[i][:0], &replyOverLimit{dropped}
	case own:
		s.replies[i] = reply
	default:
		s.replies[i] = append(s.replies[i][:0], reply...)
	}
	s.answered()
}

// failOwner fails the connection and, when it is of the owner's current
// generation, takes the owner down (the fallback decides, a prober
// starts).
func (u *upConn) failOwner(err error) {
	if u.dead {
		return
	}
	if u.gen == u.key.o.gen.Load() {
		u.key.o.failed(err)
	}
	u.fail(err)
}

// fail closes the connection and fails every request awaited on it.
func (u *upConn) fail(err error) {
	if u.dead {
		return
	}
	u.dead = true
	if u.fd >= 0 {
		u.ls.l.Unwatch(u.fd)
		syscall.Close(u.fd)
		u.fd = -1
	}
	if u.ls.conns[u.key] == u {
		delete(u.ls.conns, u.key)
	}
	if plain, id := u.ls.plain[b2i(u.key.bulk)], u.key.o.id; id < len(plain) && plain[id] == u {
		plain[id] = nil
	}
	pending, written := u.pending[u.head:], u.written-u.head
	u.pending, u.head, u.written, u.wbuf, u.rbuf = nil, 0, 0, nil, nil
	u.ls.awaited -= len(pending)
	for k, p := range pending {
		p.s.errs[p.idx], p.s.sent[p.idx] = err, k < written
		p.s.answered()
	}
}

// checkTimeouts fails every connection whose oldest awaited reply has
// timed out (replyLeft), taking its owner down (posted by Sidecar's
// ticker). Before it judges, it reads what the socket holds: a loop that
// was itself late (CPU starvation, a GC pause) must not take an owner
// whose replies are waiting in the kernel for dead.
func (ls *loopState) checkTimeouts() {
	now := time.Now().UnixNano()
	for _, u := range ls.conns {
		if u.dead || u.head == len(u.pending) || u.left(now) > 0 {
			continue
		}
		if u.fd >= 0 {
			for n := 0; n < 64 && u.read(); n++ {
			}
			if u.dead || u.head == len(u.pending) {
				continue
			}
			if now = time.Now().UnixNano(); u.left(now) > 0 {
				continue
			}
		}
		u.failOwner(errTimeout)
	}
}

// left is replyLeft for u's oldest awaited reply (one is). Its first byte
// gets BulkTimeout when a bulk read is awaited anywhere on u: an owner
// runs the commands it read together before it writes their replies, so
// a GET's reply may wait for the HGETALL sent after it.
func (u *upConn) left(now int64) time.Duration {
	p := &u.pending[u.head]
	cfg := &u.ls.sc.cfg
	slow := false
	got := len(u.rbuf) + int(u.dropped)
	if u.key.bulk && got == 0 && now-max(p.sent, u.headAt) > int64(cfg.Timeout) {
		for i := u.head; i < len(u.pending) && !slow; i++ {
			slow = u.pending[i].slow
		}
	}
	return replyLeft(now, p.sent, max(p.sent, u.headAt), u.lastRead, got,
		u.key.bulk, slow, cfg.Timeout, cfg.BulkTimeout)
}

// dropOwners closes the loop's connections to owners the sidecar dropped
// (Sidecar.release); requests still awaited on them get the fallback.
func (ls *loopState) dropOwners(drop []*owner) {
	for k, u := range ls.conns {
		for _, o := range drop {
			if k.o == o {
				u.fail(errClosed)
			}
		}
	}
}

// closeAll closes every connection (Sidecar.Close).
func (ls *loopState) closeAll() {
	for _, u := range ls.conns {
		u.fail(errClosed)
	}
}

// timeoutTicks posts checkTimeouts each Timeout/4 to every loop that
// awaited replies at the end of its last wake, until Close.
func (sc *Sidecar) timeoutTicks() {
	defer sc.wg.Done()
	t := time.NewTicker(min(max(sc.cfg.Timeout/4, time.Millisecond), time.Second))
	defer t.Stop()
	for {
		select {
		case <-sc.closed:
			return
		case <-t.C:
		}
		sc.mu.Lock()
		for _, ls := range sc.loops {
			if ls.waiting.Load() {
				ls.l.Post(ls.checkTimeouts)
			}
		}
		sc.mu.Unlock()
	}
}

// errEOF is an owner that closed the connection.
var errEOF = errClosedByOwner{}

type errClosedByOwner struct{}

func (errClosedByOwner) Error() string { return "sidecar: upstream closed the connection" }

// rawIO is read(2) or write(2) of p on the non-blocking fd as a raw
// system call (it cannot block, so it skips the runtime's bookkeeping).
func rawIO(trap uintptr, fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
