package server

import (
	"errors"
	"net"
	"runtime/debug"
	"syscall"

	"github.com/tidwall/redcon"
)

// The connection loop. A connection is served either by a goroutine of its
// own (serveConn: TLS connections, --io-loops 0, platforms without epoll) or
// by an event loop (loop_linux.go: plain TCP by default); both run pump,
// which owns the connection's read buffer, its reply buffer (client.out) and
// everything else in client above client.mu. Per pipeline it:
//
//  1. reads into the read buffer, after the part of a command left over
//     from the previous read;
//  2. parses every complete command in place (redcon.ReadNextCommand into a
//     reused argument slice: the arguments alias the read buffer, no copy)
//     and runs each (execute), appending the replies to client.out;
//  3. writes client.out with one Write (through pushConn, so that CLIENT
//     TRACKING pushes never land inside a reply and those queued meanwhile
//     follow it), then moves the partial command left, if any, to the
//     front of the buffer and reads again (a goroutine) or returns to its
//     event loop until the socket is readable again.
//
// Hot-path cost per command: the parse (one pass over the header bytes),
// dispatch, and no allocation; per pipeline: one Read, one Write, one atomic
// add (the command count, client.publishCommands) and one or two atomic
// loads (pushConn), plus the introspection counters (clientinfo.go: an
// atomic add per read, a few loads). Memory per connection: readBufSize plus
// the replies of one pipeline (at most about maxBatchOut before they are
// written early), plus, while the client does not read, its output buffer
// (obuf.go, bounded by Config.OutputBufferLimit).
//
// Because arguments alias the read buffer, which the next read overwrites,
// a command must copy whatever it keeps beyond its own call (dispatch's doc
// lists those places).

const (
	// readBufSize is a connection's read buffer. It grows only while a
	// single command does not fit (the guard bounds command sizes), and
	// shrinks back to this once that command has run.
	readBufSize = 16 << 10
	// minReadRoom is the least free space a read is given: with less, the
	// leftover partial command is moved to the front or the buffer grows,
	// so that a large command is not read a few bytes at a time.
	minReadRoom = 4 << 10
	// maxBatchOut bounds the replies held back for one Write: past it they
	// are written before the rest of the pipeline runs.
	maxBatchOut = 64 << 10
	// maxKeepOut is the largest reply buffer kept between pipelines.
	maxKeepOut = 2 * maxBatchOut
	// initialOut is a new connection's reply buffer.
	initialOut = 4 << 10
	// maxKeepArgs is the largest argument buffer (connState.flat) kept
	// between pipelines.
	maxKeepArgs = 1024
)

// errProtocolInline is redcon's text for an inline line it cannot split.
var errProtocolInline = errors.New("Protocol error: unbalanced quotes in request")

// connState is a connection's request side between pumps: the read
// buffer, the part of it read but not parsed yet (at most one partial
// command after a pump that did not stop early), and the batch of commands
// parsed from it. Owned by whoever runs the connection: its goroutine, or
// its event loop.
type connState struct {
	buf        []byte
	start, end int                           // buf[start:end]: read, not parsed yet
	pc         *pushConn                     // c.netConn, always from Serve
	lc         *loopConn                     // non-nil when an event loop serves the connection
	held       interface{ ReadReady() bool } // the guard, which may hold input read ahead
	// A batch of parsed commands (parseBatch): their arguments in
	// flat, each command's table entry, span of flat and end offset in
	// cmds, and the first key of each keyed command in keys, for the
	// store to prefetch (hashes is Prefetch's scratch).
	flat   [][]byte
	cmds   []parsedCmd
	keys   [][]byte
	hashes []uint64
	// winIdx are the indices in keys of the batch's calls that decide a
	// window held in a block (command.meta.prefetchWindow said so), for
	// Store.PrefetchWith, which prefetches their blocks from the hashes
	// and index lines its own passes computed.
	winIdx []int32
	// memo is the last command name parseBatch looked up, as sent, and
	// its entry (see lookup).
	memo struct {
		name [maxNameLen]byte
		n    int
		cmd  *command
		set  bool
	}
	// part follows a partial multibulk command at buf[start:] across
	// reads (partial.go), so that a command of many arguments arriving in
	// many reads is not parsed again from its start on every read.
	part partialScan
	// keep: the batch in cmds was parked mid-way (sidecar mode,
	// forwardBatch) and is run on at the resume without parsing buf
	// again; keptErr is the parse error met after it, if any.
	keep    bool
	keptErr error
	// readMax, when not 0, bounds the next read (at least minReadRoom):
	// the event loop's fair share of a slow turn (turnShare), so that one
	// connection's deep pipeline of costly commands does not hold every
	// other connection of its loop for a whole 16 KiB of them. lastRead
	// counts the bytes pump read, for the loop's cost per byte. Both are
	// set by the loop goroutine around each serve; a goroutine-per-
	// connection Serve leaves them alone.
	readMax, lastRead int
}

// parsedCmd is one command of a batch: cmd is its dispatch table entry
// (nil: unknown, or no arguments), its arguments are
// connState.flat[off : off+n], and it ends at buf offset end.
type parsedCmd struct {
	cmd         *command
	off, n, end int
}

// maxBatchCmds bounds how many commands are parsed ahead of running them.
const maxBatchCmds = 32

// parseBatch parses up to maxBatchCmds whole commands from buf[start:end]
// into st.cmds, st.flat and st.keys (args alias buf, except an inline
// command's quoted words), looking each command up once: dispatch uses
// the entry, and its key position says which argument to prefetch. It
// stops early at an incomplete command or a protocol error, which it
// returns. Nothing runs and st.start does not
// move: the caller does that per command it runs.
func (st *connState) parseBatch() error {
	st.cmds, st.flat, st.keys, st.winIdx = st.cmds[:0], st.flat[:0], st.keys[:0], st.winIdx[:0]
	packet := st.buf[st.start:st.end]
	for len(st.cmds) < maxBatchCmds && len(packet) > 0 {
		var complete bool
		var argv [][]byte
		var rest []byte
		var err error
		off := len(st.flat)
		if off == 0 && st.part.waiting && !st.part.complete(packet) {
			return nil // partial.go: still incomplete, nothing parsed again
		}
		// The parsers append the arguments to the argument buffer they
		// are given: st.flat's spare capacity, so that they land in
		// place; only a command that outgrows it is copied.
		if packet[0] != '*' {
			// Inline commands are split here, as redcon's Reader (and
			// Redis) split them: ReadNextCommand would take a line
			// starting with '$' for Tile38's native protocol, and its
			// own splitter allocates the rest of the line for every
			// word (a 64 KiB line of 32k words: about 1 GiB).
			complete, argv, rest, err = readInline(packet, st.flat[off:])
		} else if argv, rest, complete = readMultibulk(packet, st.flat[off:]); !complete {
			// respfast.go answers for whole, plain commands only.
			complete, argv, _, rest, err = redcon.ReadNextCommand(packet, st.flat[off:])
		}
		if err != nil {
			return err
		}
		if !complete {
			// The first command of the batch is partial: follow it
			// from here on with st.part (no cost otherwise).
			st.part.waiting = len(st.cmds) == 0 && packet[0] == '*'
			return nil
		}
		packet = rest
		if n := len(argv); n > 0 && off+n <= cap(st.flat) && &st.flat[:off+1][off] == &argv[0] {
			st.flat = st.flat[:off+n]
		} else {
			st.flat = append(st.flat, argv...)
		}
		var cmd *command
		if len(argv) > 0 {
			cmd = st.lookup(argv[0])
		}
		st.cmds = append(st.cmds, parsedCmd{cmd: cmd, off: off, n: len(argv), end: st.end - len(rest)})
		if cmd != nil && cmd.firstKey > 0 && cmd.firstKey < len(argv) && len(st.keys) < maxPrefetchKeys {
			// (at most maxPrefetchKeys in all, the size of the
			// hashes' scratch: appendOtherKeys stops there too)
			st.keys = append(st.keys, argv[cmd.firstKey])
			if pw := cmd.meta.prefetchWindow; pw != nil && pw(argv) {
				st.winIdx = append(st.winIdx, int32(len(st.keys)-1))
			}
			if cmd.lastKey != cmd.firstKey {
				st.keys = appendOtherKeys(st.keys, cmd, argv) // CL.MTHROTTLE's, DEL's, ...
			}
		}
	}
	return nil
}

// lookup is lookup(commands, name), remembering the last name looked up:
// a client's pipeline usually repeats one command, and comparing its bytes
// costs less than lower-casing and hashing them. The table is read-only
// after init, so the memo never goes stale.
func (st *connState) lookup(name []byte) *command {
	m := &st.memo
	if m.set && string(name) == string(m.name[:m.n]) {
		return m.cmd
	}
	cmd := lookup(commands, name)
	if len(name) <= maxNameLen {
		m.n = copy(m.name[:], name)
		m.cmd, m.set = cmd, true
	}
	return cmd
}

// newConnState prepares c's connection for pump.
func (s *Server) newConnState(c *client) *connState {
	st := &connState{buf: make([]byte, readBufSize), flat: make([][]byte, 0, 4*maxBatchCmds)}
	st.pc, _ = c.netConn.(*pushConn)
	st.lc = loopConnOf(c.netConn)
	st.held, _ = unwrapConn[interface{ ReadReady() bool }](c.netConn)
	if cap(c.out) == 0 {
		c.out = make([]byte, 0, initialOut)
	}
	c.spillAt = maxBatchOut // obuf.go: replyFull
	c.st = st
	return st
}

// unwrapConn returns the first layer of nc that is a T, following NetConn
// (pushConn wraps the guard's connection, which wraps the accepted one).
func unwrapConn[T any](nc net.Conn) (T, bool) {
	for range 8 { // a few layers at most; never loop on a self-wrapping conn
		if t, ok := nc.(T); ok {
			return t, true
		}
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		nc = u.NetConn()
	}
	var zero T
	return zero, false
}

// pumpResult is what a connection waits for after pump returns.
type pumpResult uint8

const (
	pumpDone pumpResult = iota // the connection ends: close it
	pumpRead                   // its socket to be readable (event loop only)
	pumpHold                   // its replies wait for the replication barrier (replgate.go; event loop only)
)

// serveConn serves c's connection until it is closed, Shutdown's read
// deadline stops it, QUIT/SHUTDOWN/a panic ends it, or the request stream is
// invalid. Then it closes the connection and unregisters c. It is c's
// connection goroutine (started by the accept loop); nothing else reads the
// connection or touches its buffers.
func (s *Server) serveConn(c *client) {
	defer s.closed(c)
	defer c.netConn.Close()
	defer func() {
		// Commands recover their own panics (execute); this one is for
		// the parser, which without the guard may be handed absurd
		// lengths. The connection is closed.
		if p := recover(); p != nil {
			s.stats.panics.Add(1)
			s.log.Error("panic in connection loop", "panic", p, "client", c.id,
				"stack", string(debug.Stack()))
		}
	}()
	s.pump(c, s.newConnState(c), true)
	if o, ok := unwrapConn[*outConn](c.netConn); ok {
		o.drain() // replies still queued are written before the close
	}
}

// pump serves c: it reads (first, when read is set), runs every whole
// command read, writes their replies, and repeats. On a blocking
// connection it returns only when the connection ends. On an event loop's
// connection it returns pumpRead once the socket has nothing more (it
// reads once per call, and again only while the guard holds input read
// ahead). Output the socket does not take waits in the connection's
// output buffer (obuf.go) and never stops the reading: a client may send
// a whole batch before it reads any reply, as with Redis.
func (s *Server) pump(c *client, st *connState, read bool) pumpResult {
	for {
		var rerr error
		if read {
			if len(st.buf)-st.end < minReadRoom {
				// Only here can buf[start:end] be a partial command
				// that fills most of the buffer: make room.
				st.buf, st.start, st.end = makeRoom(st.buf, st.start, st.end)
			}
			room := st.buf[st.end:]
			if st.readMax > 0 && len(room) > st.readMax && st.end-st.start < st.readMax {
				// A share of the loop's turn; a partial command larger
				// than the share is read whole, as before.
				room = room[:st.readMax]
			}
			var n int
			n, rerr = c.netConn.Read(room)
			st.end += n
			st.lastRead += n
			if n > 0 {
				c.noteRead(n) // clientinfo.go: a counter and the idle clock
			}
			if rerr == syscall.EAGAIN {
				// Non-blocking: nothing more now, or (n > 0) only
				// part of a command, which cannot run yet.
				return pumpRead
			}
		}
		read = true
		ran := false
		for st.start < st.end && !c.closed {
			var perr error
			if st.keep {
				// Resumed after a forwarded run (forward.go): the
				// batch parked is still parsed, run it on.
				st.keep, perr = false, st.keptErr
			} else {
				perr = st.parseBatch()
			}
			if len(st.keys) > 1 && s.cfg.Forwarder == nil { // a sidecar's keys live upstream
				// Start every key's cache misses before the first
				// command waits on its own (store/prefetch.go).
				if cap(st.hashes) < len(st.keys) {
					st.hashes = make([]uint64, max(maxBatchCmds, maxPrefetchKeys))
				}
				// CL.WINDOW's blocks too, one miss further (worth it
				// with two calls or more to overlap)
				win := st.winIdx
				if len(win) < 2 {
					win = nil
				}
				s.keyspace(c).PrefetchWith(st.keys, st.hashes[:len(st.keys)], win)
			}
			r, batchRan, stop := s.runBatch(c, st)
			if stop {
				if st.keep {
					st.keptErr = perr // parked: seen again on the resume
				}
				return r
			}
			ran = ran || batchRan
			if perr != nil && !c.closed {
				// The guard ends an invalid stream before this with
				// Redis's text; without it, answer as redcon did.
				c.out = append(c.out, "-ERR "...)
				c.out = append(c.out, perr.Error()...)
				c.out = append(c.out, "\r\n"...)
				c.closed = true
			}
			if len(st.cmds) < maxBatchCmds {
				break // the rest, if any, is an incomplete command
			}
		}
		// An event loop's connection whose guard holds input read ahead
		// runs on in this call; otherwise pump returns pumpRead below.
		readAhead := st.lc != nil && st.held != nil && st.held.ReadReady()
		if ran || len(c.out) > 0 {
			c.publishCommands()
			if c.replWrote { // replgate.go
				if st.lc != nil && s.cfg.ReplyBarrier != nil {
					return pumpHold // the loop waits once for all its held connections
				}
				if !s.replBarrier(c) {
					return pumpDone
				}
			}
			// Deferred only when pump returns next (pumpRead): while the
			// guard holds input read ahead it runs on in this call, and
			// a write there holds the connection (pumpHold) with c.out
			// for the replication barrier, which the replies deferred
			// before it must not wait for nor slip through ahead of.
			if st.lc != nil && !c.closed && rerr == nil && !c.replWrote && !readAhead && st.lc.deferOut(st.pc) {
				// Written with the other connections' replies at the
				// end of the loop's turn (loop_linux.go, writePending).
			} else if s.writeOut(c, st.pc, true) != nil {
				return pumpDone
			}
		}
		if c.closed || rerr != nil {
			return pumpDone
		}
		if cap(st.flat) > maxKeepArgs {
			st.flat = make([][]byte, 0, 4*maxBatchCmds)
		}
		st.compact()
		c.publishBuffers(st) // for CLIENT LIST elsewhere: loads, rarely a store
		if st.lc != nil && !readAhead {
			return pumpRead // level-triggered: the loop calls again
		}
	}
}

// runBatch runs the commands parseBatch parsed, in order, advancing
// st.start past each. Output that outgrows maxBatchOut is written out
// between commands. ran reports whether any command ran; stop is true when
// pump must return r (the connection failed).
//
// Isolation: consecutive commands that dispatch would run under the
// client's isolation read lock (everything but MULTI/EXEC-style immediate
// commands and scripts, which manage isolation themselves) share one
// hold of it, taken before the first and released before any other
// command, any write to the socket and the return: an EXEC elsewhere
// waits for at most one batch, never for a client's socket.
func (s *Server) runBatch(c *client, st *connState) (r pumpResult, ran, stop bool) {
	if s.cfg.Forwarder != nil {
		return s.forwardBatch(c, st) // forward.go: sidecar mode
	}
	defer s.releaseIso(c)
	inCluster := s.checkTopologyDeadline() // topology.go: a leader past its lease deadline fences first
	if inCluster {
		c.routeEnter() // in flight for WaitRouted (routeseal.go)
		defer c.routeLeave()
	}
	for _, cmd := range st.cmds {
		if c.closed {
			break
		}
		st.start = cmd.end
		if cmd.n == 0 {
			continue // a blank inline line or "*0": nothing runs
		}
		ran = true
		if shared := cmd.cmd != nil && cmd.cmd.sharesIsolation(); shared != c.isoHeld {
			if shared {
				s.iso.rlock(c.id)
				c.isoHeld = true
			} else {
				s.releaseIso(c)
			}
		}
		s.execute(c, cmd.cmd, st.flat[cmd.off:cmd.off+cmd.n:cmd.off+cmd.n])
		if len(c.out) > maxBatchOut && !c.closed {
			s.releaseIso(c)
			c.publishCommands()
			// A socket write holds no seal up (routeseal.go).
			c.routeLeave()
			if c.replWrote && !s.replBarrier(c) { // replgate.go
				return pumpDone, ran, true
			}
			if s.writeOut(c, st.pc, false) != nil {
				return pumpDone, ran, true
			}
			if inCluster {
				c.routeEnter()
			}
		}
	}
	return 0, ran, false
}

// releaseIso releases the isolation read lock runBatch holds for c, if
// it does.
func (s *Server) releaseIso(c *client) {
	if c.isoHeld {
		c.isoHeld = false
		s.iso.runlock(c.id)
	}
}

// compact moves the partial command left over, if any, to the front of
// the buffer, and shrinks a buffer grown for a large command once it has
// run.
func (st *connState) compact() {
	if st.start == st.end {
		st.start, st.end = 0, 0
		if len(st.buf) > readBufSize {
			st.dropRefs()
			st.buf = make([]byte, readBufSize)
		}
	} else if st.start > 0 {
		if len(st.buf) > readBufSize && st.end-st.start <= readBufSize/2 {
			st.dropRefs()
			nb := make([]byte, readBufSize)
			st.end = copy(nb, st.buf[st.start:st.end])
			st.buf = nb
		} else {
			st.end = copy(st.buf, st.buf[st.start:st.end])
		}
		st.start = 0
	}
}

// dropRefs clears the parsed arguments, which point into the buffer about
// to be replaced, so they do not keep it alive.
func (st *connState) dropRefs() {
	clear(st.flat[:cap(st.flat)])
	clear(st.keys[:cap(st.keys)])
}

// makeRoom returns a buffer holding buf[start:end] at its front with at
// least minReadRoom free: the same buffer if moving the data is enough,
// else one twice as large.
func makeRoom(buf []byte, start, end int) ([]byte, int, int) {
	if start > 0 && len(buf)-(end-start) >= minReadRoom {
		return buf, 0, copy(buf, buf[start:end])
	}
	nb := make([]byte, 2*len(buf))
	return nb, 0, copy(nb, buf[start:end])
}

// writeOut writes c.out (see pushConn.writeReplies for done) and empties
// it, dropping a buffer grown past maxKeepOut by a large reply.
func (s *Server) writeOut(c *client, pc *pushConn, done bool) error {
	c.noteReplies(len(c.out)) // rbp
	var err error
	if pc != nil {
		err = pc.writeReplies(c.out, done)
	} else if len(c.out) > 0 {
		_, err = c.netConn.Write(c.out)
	}
	if cap(c.out) > maxKeepOut {
		c.out = make([]byte, 0, initialOut)
	} else {
		c.out = c.out[:0]
	}
	if c.spillAt > maxBatchOut { // raised while replies waited for the barrier (spillOut)
		c.spillAt = maxBatchOut
	}
	return err
}

// execute runs one command read from c's connection and appends its reply
// to c.out. A panic is recovered and logged; the command's partial reply is
// replaced by an error and c.closed is set, so that nothing more runs on
// the connection, as after QUIT. args alias the read buffer (see dispatch);
// cmd is lookup(commands, args[0]), done once by parseBatch.
// c's connection goroutine only; cost beyond dispatch: a deferred recover
// (no allocation) and the afterDispatch checks.
func (s *Server) execute(c *client, cmd *command, args [][]byte) {
	if c.closed {
		return
	}
	start := c.outMark()
	defer func() {
		if p := recover(); p != nil {
			c.closed = true
			s.stats.panics.Add(1)
			s.log.Error("panic in command handler", "panic", p, "client", c.id,
				"stack", string(debug.Stack()))
			if i := start - c.outBase; i >= 0 && i <= len(c.out) {
				c.out = append(c.out[:i], "-ERR internal error\r\n"...)
			} else {
				// Part of the reply was handed on (spillOut): the
				// connection ends after it, cut short.
				c.out = c.out[:0]
			}
		}
	}()
	s.dispatch(c, cmd, args)
	s.afterDispatch(c, args, start) // cmdstats.go
	if c.closeAfterReply {
		c.closed = true
	}
}

// readInline parses an inline command at the start of packet exactly as
// redcon's Reader does (and as redcon.ReadNextCommand does for lines not
// starting with '$'): words split on spaces, a word may be quoted with " or
// ' from its first byte, with \n \r \t and \<any> escapes inside quotes.
// Unquoted words alias packet; quoted ones are copies. It returns
// complete=false when packet holds no whole line yet.
func readInline(packet []byte, argsbuf [][]byte) (complete bool, args [][]byte, rest []byte, err error) {
	args = argsbuf[:0]
	i := 0
	for i < len(packet) && packet[i] != '\n' {
		i++
	}
	if i == len(packet) {
		return false, args, packet, nil
	}
	line := packet[:i]
	if i > 0 && packet[i-1] == '\r' {
		line = packet[:i-1]
	}
	for len(line) > 0 {
		if q := line[0]; q == '"' || q == '\'' {
			word := []byte{}
			escape, closed := false, false
			j := 1
			for ; j < len(line); j++ {
				ch := line[j]
				if escape {
					escape = false
					switch ch {
					case 'n':
						ch = '\n'
					case 'r':
						ch = '\r'
					case 't':
						ch = '\t'
					}
				} else if ch == q {
					closed = true
					break
				} else if ch == '\\' {
					escape = true
					continue
				}
				word = append(word, ch)
			}
			if !closed || (j+1 < len(line) && line[j+1] != ' ') {
				return false, argsbuf[:0], packet, errProtocolInline
			}
			args = append(args, word)
			line = line[min(j+2, len(line)):]
			continue
		}
		j := 0
		for j < len(line) && line[j] != ' ' {
			if line[j] == '"' || line[j] == '\'' {
				return false, argsbuf[:0], packet, errProtocolInline
			}
			j++
		}
		if j > 0 {
			args = append(args, line[:j])
		}
		line = line[min(j+1, len(line)):]
	}
	return true, args, packet[i+1:], nil
}
