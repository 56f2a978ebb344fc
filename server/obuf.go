package server

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Output back-pressure, as Redis does it. A client may pipeline any number
// of commands before it reads a reply; the server goes on reading and
// running them, and what the socket does not take is kept in the
// connection's output buffer (outQueue) until the client reads. Nothing
// ever blocks on a client's socket: the event loop's connections
// (loopConn) and the others (outConn, a goroutine per connection) both
// queue and write when the socket is writable.
//
// The buffer is bounded by Redis's client-output-buffer-limit for normal
// clients (OutputBufferLimit): past the hard limit, or above the soft limit
// for longer than its seconds, the client is closed, its output dropped, a
// warning logged and INFO's client_output_buffer_limit_disconnections
// counted. The default, as Redis's, is no limit ("normal 0 0 0").
//
// What is counted, as Redis's omem: the queue's blocks (outBlock bytes
// each), not the replies of the pipeline being answered (client.out, at
// most about maxBatchOut, Redis's 16 KiB reply buffer in spirit).
//
// A backlog must also move: a connection whose socket takes nothing for the
// guard's write timeout (10 s by default) while output waits is closed.
//
// Cost: none on the path where the socket takes every reply at once (the
// queue is empty: one length check per write); the rest is the slow path.

// OutputBufferLimit is Redis's client-output-buffer-limit for one class of
// client: Hard and Soft in bytes (0: none), SoftSeconds how long the
// buffer may stay at or above Soft. The zero value is no limit.
type OutputBufferLimit struct {
	Hard, Soft  int64
	SoftSeconds int64
}

// String is the normal class as CONFIG GET shows it ("normal 0 0 0").
func (l OutputBufferLimit) String() string {
	return "normal " + itoa(l.Hard) + " " + itoa(l.Soft) + " " + itoa(l.SoftSeconds)
}

// configValue is CONFIG GET client-output-buffer-limit: the normal class,
// then Redis's defaults for the classes celld does not have.
func (l OutputBufferLimit) configValue() string {
	return l.String() + " slave 268435456 67108864 60 pubsub 33554432 8388608 60"
}

// over reports whether a buffer of mem bytes breaks the limit, keeping the
// time the soft limit was first reached in *softSince (Unix seconds; 0:
// below it), exactly as Redis's checkClientOutputBufferLimits: hard at or
// above Hard; soft once at or above Soft for more than SoftSeconds whole
// seconds. The caller holds whatever guards *softSince.
func (l OutputBufferLimit) over(mem int64, softSince *int64) bool {
	if l.Hard > 0 && mem >= l.Hard {
		return true
	}
	if l.Soft == 0 || mem < l.Soft {
		*softSince = 0
		return false
	}
	now := time.Now().Unix()
	if *softSince == 0 {
		*softSince = now
		return false
	}
	return now-*softSince > l.SoftSeconds
}

// unauthOutputLimit bounds the output buffer of a client that must
// authenticate and has not: past it the client is closed, whatever
// OutputBufferLimit says, as Redis does since 7.2.8 / 7.4.3
// (CVE-2025-21605: an unauthenticated client that never reads could make
// the server buffer NOAUTH replies without bound). Redis allows 1 KiB
// beyond its 16 KiB reply buffer; celld allows 64 KiB of queue (four
// blocks), since a TLS connection queues every reply on its way to the
// socket.
const unauthOutputLimit = 64 << 10

// outputOver reports whether an output buffer of mem bytes must close the
// connection of c (nil: not registered yet): the unauthenticated bound,
// then OutputBufferLimit. *softSince is the connection's soft-limit timer.
func (s *Server) outputOver(c *client, mem int64, softSince *int64) bool {
	if c != nil && c.unauthed.Load() && mem > unauthOutputLimit {
		return true
	}
	lim := s.cfg.OutputBufferLimit
	return lim != (OutputBufferLimit{}) && lim.over(mem, softSince)
}

// errOutputLimit is what a write returns once the connection has been
// closed for its output buffer.
var errOutputLimit = errors.New("server: client closed for overcoming of output buffer limits")

// outputLimitReached counts and logs a connection closed for its output
// buffer (mem bytes): every way a connection is closed for it (the
// OutputBufferLimit checks, the unauthenticated bound, pushBacklogLimit for
// tracking pushes) ends here. c may be nil (not registered yet); limit
// names the limit passed ("": OutputBufferLimit's). The count
// is exact; the WARN (Redis's "Client ... scheduled to be closed ASAP for
// overcoming of output buffer limits") is written at most once per
// obufLogEvery, saying how many closes it did not log. A logged close is
// logged before it is counted: whoever sees the count (Stats) finds the
// log line written. Any goroutine; a close costs one atomic add and a
// short lock.
func (s *Server) outputLimitReached(c *client, addr string, mem int64, limit string) {
	skipped, ok := s.stats.obufLog.allow(time.Now(), obufLogEvery)
	if !ok {
		s.stats.obufDisconnects.Add(1)
		return
	}
	var id int64
	if c != nil {
		id = c.id
	}
	if limit == "" {
		limit = s.cfg.OutputBufferLimit.String()
	}
	s.log.Warn("client closed for overcoming of output buffer limits",
		"client", id, "addr", addr, "omem", mem, "limit", limit,
		"not_logged_since_last", skipped)
	s.stats.obufDisconnects.Add(1)
}

// obufLogEvery is how often, at most, a close for the output buffer limit
// is logged: a crowd of clients that stop reading (or one that reconnects
// and does it again) would otherwise write a line each.
const obufLogEvery = 10 * time.Second

// rateLog lets an event be logged at most once per interval and counts
// the events not logged. The zero value is ready; safe for concurrent use.
type rateLog struct {
	mu         sync.Mutex
	last       time.Time // zero until the first logged event
	suppressed int64
}

// allow reports whether the event at now may be logged (the first, or
// every ≥ every after the last logged one) and, if so, how many events
// were not logged since the last one.
func (r *rateLog) allow(now time.Time, every time.Duration) (skipped int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.last.IsZero() && now.Sub(r.last) < every {
		r.suppressed++
		return 0, false
	}
	r.last = now
	skipped, r.suppressed = r.suppressed, 0
	return skipped, true
}

// outBlock is the size of an output buffer block: Redis's reply chunk.
const outBlock = 16 << 10

// outBlocks recycles output blocks: a backlog of a million replies takes
// and gives back a couple of thousand of them.
var outBlocks = sync.Pool{New: func() any { return new([outBlock]byte) }}

// outQueue is a connection's output not yet taken by the socket: a list
// of outBlock-sized blocks, the first read from head. Appending copies; a
// write takes from the front. Its owner's lock guards it. The zero value
// is empty.
type outQueue struct {
	blocks [][]byte // each a full outBlock array sliced to its used length
	head   int      // bytes of blocks[0] already written
	n      int      // bytes queued
	// mem mirrors len(blocks)*outBlock for readers without the lock
	// (CLIENT LIST's omem and oll).
	mem atomic.Int64
}

func (q *outQueue) len() int { return q.n }

// memory is what the queue holds, counted by whole blocks as Redis counts
// its reply list (omem, and the limits).
func (q *outQueue) memory() int64 { return int64(len(q.blocks)) * outBlock }

// memoryAfter is memory() once n more bytes are pushed: the limits are
// checked against it before the copy, so that a write past the hard limit
// is never copied (Redis counts after appending, which is the same test).
func (q *outQueue) memoryAfter(n int) int64 {
	blocks := len(q.blocks)
	if blocks > 0 {
		n -= outBlock - len(q.blocks[blocks-1])
	}
	if n > 0 {
		blocks += (n + outBlock - 1) / outBlock
	}
	return int64(blocks) * outBlock
}

// push appends a copy of b.
func (q *outQueue) push(b []byte) {
	for len(b) > 0 {
		if k := len(q.blocks); k == 0 || len(q.blocks[k-1]) == outBlock {
			q.blocks = append(q.blocks, outBlocks.Get().(*[outBlock]byte)[:0])
		}
		last := &q.blocks[len(q.blocks)-1]
		n := copy((*last)[len(*last):outBlock], b)
		*last = (*last)[:len(*last)+n]
		b = b[n:]
		q.n += n
	}
	q.mem.Store(q.memory())
}

// front appends to bufs the queued bytes in order, at most max blocks, for
// a vectored write (the slices alias the queue: consume after writing).
func (q *outQueue) front(bufs [][]byte, max int) [][]byte {
	for i, b := range q.blocks {
		if i == max {
			break
		}
		if i == 0 {
			b = b[q.head:]
		}
		bufs = append(bufs, b)
	}
	return bufs
}

// consume drops the first n bytes (written), recycling emptied blocks.
func (q *outQueue) consume(n int) {
	q.n -= n
	for n > 0 {
		b := q.blocks[0]
		left := len(b) - q.head
		if n < left {
			q.head += n
			break
		}
		n -= left
		outBlocks.Put((*[outBlock]byte)(b[:outBlock]))
		q.blocks[0] = nil
		q.blocks, q.head = q.blocks[1:], 0
	}
	if len(q.blocks) == 0 {
		q.blocks = nil
	}
	q.mem.Store(q.memory())
}

// reset drops everything queued.
func (q *outQueue) reset() {
	for _, b := range q.blocks {
		outBlocks.Put((*[outBlock]byte)(b[:outBlock]))
	}
	q.blocks, q.head, q.n = nil, 0, 0
	q.mem.Store(0)
}

// discard drops everything queued without recycling the blocks (a writer
// may still be reading them).
func (q *outQueue) discard() {
	q.blocks, q.head, q.n = nil, 0, 0
	q.mem.Store(0)
}

// outBuffer is what CLIENT LIST, INFO and the tracking pushes read of a
// connection's output side: loopConn and outConn implement it.
type outBuffer interface {
	// outMemory returns the output buffer's size as Redis's omem (bytes
	// in whole blocks) and its block count (oll). Any goroutine.
	outMemory() (mem int64, blocks int)
	// outWritten returns the bytes the socket has taken. Any goroutine.
	outWritten() int64
	// outFd returns the socket's file descriptor, or -1. Any goroutine.
	outFd() int
}

// pushBacklogLimit bounds what invalidation pushes may add to a
// connection: a push is dropped, and the connection closed, when the
// pushes waiting plus the connection's output buffer would exceed it
// (tracking.go), whatever OutputBufferLimit says, so that a tracking
// client that stops reading cannot make others' writes grow its memory
// without bound. Redis bounds RESP2 redirect targets likewise, as Pub/Sub
// clients (32 MiB hard). A var for tests.
var pushBacklogLimit = maxPendingPush

// backlog is the connection's output buffer in bytes (0 without one).
func (ps *pushState) backlog() int {
	if ps.obuf == nil {
		return 0
	}
	mem, _ := ps.obuf.outMemory()
	return int(mem)
}

// One large reply. Commands append their replies to client.out, which
// runBatch hands to the connection between commands once the pipeline's
// replies pass maxBatchOut. One command's reply can be far larger than
// that, and larger than the data it reads (HRANDFIELD h -1000000
// WITHVALUES on a two-field hash: ~200 MB from 400 bytes), so every
// append that may belong to a large reply first passes a check point,
// client.replyFull: the Ctx reply methods (every registered command's
// elements), the built-in commands that loop (KEYS, SCAN, COMMAND),
// EXEC between its commands and a script's result as it is encoded.
// Past spillAt (maxBatchOut) the output so far is handed to the
// connection in the middle of the command (spillOut): the socket takes
// what it takes and the rest waits in the output buffer, whose limits
// are checked as for any write — as Redis checks its limit each time it
// appends to its reply list (_addReplyProtoToList). Once the connection
// is closed for its limit (or its socket failed) the check point drops
// what was appended and tells the caller to append nothing more, as
// Redis stops appending for a client flagged CLIENT_CLOSE_ASAP: the
// command runs to its end (a loop with nothing to copy) without building
// the rest of its reply, and memory stays within the limit plus one
// check's worth (64 KiB and one element).
//
// The reply of a command whose start was handed on is no longer in
// c.out: the places that look at a command's reply (call's statistics,
// WATCH and tracking; execute; eval) take a mark (outMark) before it runs
// and read it with replyFrom, which answers spilledReply for it.

// replyFull is the check point before appending a part of a reply that
// may grow large; true means "append nothing: the connection is gone".
// Hot-path cost: one length comparison while c.out is under spillAt.
// The goroutine running c's commands only.
func (c *client) replyFull() bool {
	if len(c.out) <= c.spillAt {
		return false
	}
	return c.spillOut()
}

// spillOut is replyFull's slow path (see above). While replies wait for
// the replication barrier (replgate.go: Config.ReplyBarrier is set and a
// write passed the gate since they were last written) nothing may reach
// the socket: then the output
// is only counted against the hard limit (and the unauthenticated one)
// and, while under it, kept.
func (c *client) spillOut() bool {
	if c.outGone {
		c.outBase += len(c.out)
		c.out = c.out[:0]
		return true
	}
	st := c.st
	if st == nil { // not a served connection (a script's client): no limit
		c.spillAt = math.MaxInt
		return false
	}
	s := c.srv
	if c.replWrote && s.cfg.ReplyBarrier != nil {
		mem := int64(len(c.out))
		if c.obuf != nil {
			q, _ := c.obuf.outMemory()
			mem += q
		}
		if !s.outputHardOver(c, mem) {
			c.spillAt = len(c.out) + maxBatchOut // writeOut sets it back
			return false
		}
		c.netConn.Close()
		s.outputLimitReached(c, c.addr, mem, "")
	} else {
		n := len(c.out)
		err := s.writeOut(c, st.pc, false)
		c.outBase += n
		if err == nil {
			return false
		}
	}
	c.outGone, c.closed, c.spillAt = true, true, 0
	c.outBase += len(c.out)
	c.out = c.out[:0]
	return true
}

// closeForOutput closes c's connection for its output limit without
// appending the reply that passed it (mem: the output with that reply, as
// far as it was counted): a sidecar's client whose owner's reply was
// dropped past the hard limit (ForwardReq.Dropped). The output not yet
// written is dropped with the connection, as spillOut drops it. The
// goroutine running c's commands only.
func (c *client) closeForOutput(mem int64) {
	if c.outGone {
		return
	}
	if c.obuf != nil {
		q, _ := c.obuf.outMemory()
		mem += q
	}
	c.netConn.Close()
	c.srv.outputLimitReached(c, c.addr, mem, "")
	c.outGone, c.closed, c.spillAt = true, true, 0
	c.outBase += len(c.out)
	c.out = c.out[:0]
}

// outputHardOver reports whether an output of mem bytes passes c's hard
// limit or, before AUTH, the unauthenticated one.
func (s *Server) outputHardOver(c *client, mem int64) bool {
	if c.unauthed.Load() && mem > unauthOutputLimit {
		return true
	}
	h := s.cfg.OutputBufferLimit.Hard
	return h > 0 && mem >= h
}

// outMark is where the next reply byte lands, counting the bytes spillOut
// handed on: a command's reply is replyFrom(the mark taken before it ran).
func (c *client) outMark() int { return c.outBase + len(c.out) }

// spilledReply stands for a reply whose start was handed on: only an
// aggregate being built passes a check point, so it is one (not an error,
// and, for WATCH and tracking, a write that may have changed its keys).
var spilledReply = []byte("*")

// replyFrom returns the reply written since mark (outMark), or
// spilledReply when its start was handed on already.
func (c *client) replyFrom(mark int) []byte {
	if i := mark - c.outBase; i >= 0 && i <= len(c.out) {
		return c.out[i:]
	}
	return spilledReply
}
