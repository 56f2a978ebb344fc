package server

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"
)

// CLIENT LIST / CLIENT INFO's per-connection numbers, as Redis 7.0 defines
// them, and how celld gets them cheaply:
//
//	fd         the socket's descriptor (the event loop's own duplicate)
//	idle       seconds since the connection last read a request, on the
//	           server's coarse clock (coarseMs, 100 ms steps, as Redis's
//	           cached unixtime)
//	qbuf       bytes read and not yet run; for the client asking, what
//	           follows its current command; for others, the partial
//	           command waiting for more input
//	qbuf-free  free space in the read buffer
//	argv-mem   the current command's argument bytes (the client asking;
//	           0 for the others, which run nothing right now)
//	multi-mem  queued MULTI commands: argument bytes + 8 per argument, as
//	           Redis's argv_len_sums
//	rbs, rbp   the reply buffer (client.out): its size, and its largest
//	           use by one pipeline within the last 5 seconds
//	obl        bytes in the reply buffer now (replies of the pipeline
//	           being answered)
//	oll, omem  the output buffer waiting for the socket (obuf.go): blocks
//	           and bytes (whole 16 KiB blocks, as Redis's reply list)
//	tot-mem    the connection's memory: the client and connection structs,
//	           read and reply buffers, output buffer, argv and multi memory
//	events     r, and w while output waits for the socket
//
// The connection's owner publishes the values others read (ioStats) at most
// once per pipeline, each only when it changed: a handful of atomic loads
// per pipeline, no stores in a steady state.

// ioStats are a connection's numbers for other goroutines' CLIENT LIST:
// written by the connection's owner, read by anyone.
type ioStats struct {
	netIn    atomic.Int64 // bytes read (total_net_input_bytes)
	lastSeen atomic.Int64 // coarse Unix ms of the last read
	qbuf     atomic.Int64
	qfree    atomic.Int64
	rbs      atomic.Int64
	rbp      atomic.Int64
	rbpAt    atomic.Int64 // coarse Unix ms the current rbp window began
	// The owner's copy of the peak and its window start.
	peak, peakAt int64
}

// peakWindow is how long rbp remembers a pipeline's reply bytes (Redis's
// reply buffer peak reset time).
const peakWindow = 5000 // ms

// clientOverhead is the fixed memory of a connection: the client and
// connState structs and the parse batch's slices.
var clientOverhead = int64(unsafe.Sizeof(client{}) + unsafe.Sizeof(connState{}) +
	4*maxBatchCmds*unsafe.Sizeof([]byte(nil)) + maxBatchCmds*unsafe.Sizeof(parsedCmd{}))

func storeIfChanged(a *atomic.Int64, v int64) {
	if a.Load() != v {
		a.Store(v)
	}
}

// noteRead records n bytes read at the coarse time now. Connection owner.
func (c *client) noteRead(n int) {
	c.io.netIn.Add(int64(n))
	storeIfChanged(&c.io.lastSeen, c.srv.coarseMs.Load())
}

// noteReplies records a pipeline's reply bytes (before they are written)
// for rbp. Connection owner.
func (c *client) noteReplies(n int) {
	now := c.srv.coarseMs.Load()
	io := &c.io
	if now-io.peakAt >= peakWindow {
		io.peak, io.peakAt = 0, now
		io.rbpAt.Store(now)
		io.rbp.Store(0)
	}
	if int64(n) > io.peak {
		io.peak = int64(n)
		io.rbp.Store(io.peak)
	}
}

// publishBuffers makes the read and reply buffers' sizes visible to other
// goroutines. Connection owner, once per pipeline.
func (c *client) publishBuffers(st *connState) {
	storeIfChanged(&c.io.qbuf, int64(st.end-st.start))
	storeIfChanged(&c.io.qfree, int64(len(st.buf)-st.end))
	storeIfChanged(&c.io.rbs, int64(cap(c.out)))
}

// netBytes returns the bytes the connection has read and the socket has
// taken. Any goroutine.
func (c *client) netBytes() (in, out int64) {
	in = c.io.netIn.Load()
	if c.obuf != nil {
		out = c.obuf.outWritten()
	}
	return in, out
}

// info returns the client's CLIENT LIST / CLIENT INFO line, in Redis 7's
// field order (with Redis 7.2's lib-name and lib-ver at the end). cur is the
// command running when c itself asks (its arguments; nil when another
// client is described): then the live request-side numbers are read from
// c's own connState, which only c's owner may do. Otherwise it reads only
// immutable fields, atomics and those under mu, so any goroutine may call
// it.
func (c *client) info(now time.Time, cur [][]byte) string {
	c.mu.Lock()
	name, lib, ver, db := c.name, c.libName, c.libVer, c.db
	resp, multi, multiMem := c.proto, c.multiLen, c.multiMem
	c.mu.Unlock()
	cmd := "NULL"
	if last := c.lastCmd.Load(); last != nil {
		cmd = last.fullname
	}
	flags := "N"
	if multi >= 0 {
		flags = "x"
	}
	coarse := c.srv.coarseMs.Load()
	idle := max(coarse-c.io.lastSeen.Load(), 0) / 1000
	age := int64(now.Sub(c.created) / time.Second)
	qbuf, qfree, rbs := c.io.qbuf.Load(), c.io.qfree.Load(), c.io.rbs.Load()
	rbp := c.io.rbp.Load()
	if coarse-c.io.rbpAt.Load() >= peakWindow {
		rbp = 0 // no pipeline since the window ended
	}
	var argvMem, obl int64
	if cur != nil {
		for _, a := range cur {
			argvMem += int64(len(a))
		}
		obl = int64(len(c.out))
		rbs = int64(cap(c.out))
		if st := c.st; st != nil {
			qbuf, qfree = int64(st.end-st.start), int64(len(st.buf)-st.end)
		}
	}
	fd, omem, oll := -1, int64(0), 0
	if c.obuf != nil {
		fd = c.obuf.outFd()
		omem, oll = c.obuf.outMemory()
	}
	events := "r"
	if omem > 0 {
		events = "rw"
	}
	totMem := clientOverhead + qbuf + qfree + rbs + omem + argvMem + 8*int64(len(cur)) + multiMem
	var b strings.Builder
	b.WriteString("id=" + strconv.FormatInt(c.id, 10))
	b.WriteString(" addr=" + c.addr)
	b.WriteString(" laddr=" + c.laddr)
	b.WriteString(" fd=" + strconv.Itoa(fd))
	b.WriteString(" name=" + name)
	b.WriteString(" age=" + itoa(age) + " idle=" + itoa(idle))
	b.WriteString(" flags=" + flags)
	b.WriteString(" db=" + strconv.Itoa(db))
	b.WriteString(" sub=0 psub=0 ssub=0 multi=" + strconv.Itoa(multi))
	b.WriteString(" qbuf=" + itoa(qbuf) + " qbuf-free=" + itoa(qfree))
	b.WriteString(" argv-mem=" + itoa(argvMem) + " multi-mem=" + itoa(multiMem))
	b.WriteString(" rbs=" + itoa(rbs) + " rbp=" + itoa(rbp))
	b.WriteString(" obl=" + itoa(obl) + " oll=" + strconv.Itoa(oll) + " omem=" + itoa(omem))
	b.WriteString(" tot-mem=" + itoa(totMem) + " events=" + events)
	b.WriteString(" cmd=" + cmd)
	b.WriteString(" user=default redir=-1")
	b.WriteString(" resp=" + strconv.Itoa(resp))
	b.WriteString(" lib-name=" + lib + " lib-ver=" + ver)
	return b.String()
}

// queuedMem is what one queued MULTI command adds to multi-mem.
func queuedMem(args [][]byte) int64 {
	n := int64(8 * len(args))
	for _, a := range args {
		n += int64(len(a))
	}
	return n
}
