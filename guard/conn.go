package guard

import (
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// minRead is the smallest p that Read validates in place; a smaller p
	// is served through Conn.small. bufio (and so redcon) reads 4096.
	minRead = 64
	// unauthChunk bounds one read from the socket while the connection is
	// not authenticated, and so the stash (see Conn.stash).
	unauthChunk = 4096
	// authChunk bounds one read from the socket once authenticated, and so
	// the stash.
	authChunk = 64 << 10
)

// Conn is a net.Conn whose Read passes on only a valid Redis request stream
// (see the package comment). Everything else is the wrapped net.Conn's,
// except that Write sets a write deadline first and Close is idempotent.
//
// Concurrency: Read must be called by one goroutine at a time (the
// server's connection goroutine). SetAuthenticated, Authenticated, Write, Close and the
// rest of net.Conn may be called from any goroutine. The zero Conn is not
// usable: get one from a Listener or NewConn.
type Conn struct {
	net.Conn

	m      machine
	authed atomic.Bool
	closed atomic.Bool
	opt    *options
	onDone func() // the listener's release of a client slot; may be nil

	rerr      error  // a read error that came with data, returned next
	stashRuns bool   // the stash may hold whole commands (see ReadReady)
	final     *Error // set once the guard has ended the stream
	stash     []byte // input read but not yet scanned, or given back by scan
	stashBuf  []byte // stash's backing array, reused
	out       []byte // validated bytes of small[] not yet returned
	small     [minRead]byte
}

// NewConn wraps nc. The listener options (MaxClients, KeepAlive) have no
// effect here. It panics if lim.Validate fails: check Limits where they are
// configured.
func NewConn(nc net.Conn, lim Limits, opts ...Option) *Conn {
	return newConn(nc, checkLimits(lim), newOptions(opts), nil)
}

func checkLimits(lim Limits) Limits {
	if err := lim.Validate(); err != nil {
		panic(err)
	}
	return lim.withDefaults()
}

func newConn(nc net.Conn, lim Limits, opt *options, onDone func()) *Conn {
	c := &Conn{Conn: nc, opt: opt, onDone: onDone}
	c.m.lim = lim
	c.m.authed = &c.authed
	c.authed.Store(!opt.requireAuth)
	return c
}

// SetAuthenticated switches between the Unauth* limits (false) and the full
// ones (true) from the next command on. The server calls it after a
// successful AUTH (or HELLO with AUTH); without the RequireAuth option a Conn
// starts authenticated. Safe for concurrent use; an atomic store.
//
// While unauthenticated, Read hands the server one command at a time (it keeps
// the rest, at most 4 KiB, until the next Read), so an AUTH pipelined with
// the commands after it lifts the limits for them, as in Redis.
func (c *Conn) SetAuthenticated(ok bool) { c.authed.Store(ok) }

// Authenticated reports the state SetAuthenticated last set.
func (c *Conn) Authenticated() bool { return c.authed.Load() }

// Read fills p with the next bytes of the request stream that are known to
// belong to valid commands, validating them in place: it reads from the
// socket into p and returns n <= what it read, compacting only when an
// ignored "*0\r\n" is dropped. Hot-path cost: one pass over header bytes,
// payload bytes skipped by length, no allocation.
//
// When the stream breaks a rule, the bytes before the bad frame are returned
// first (so the commands before it run and their replies are flushed, as
// Redis does); the next Read writes Redis's error line to the client, if that
// violation has one, and returns an *Error, which wraps io.EOF. The server then
// closes the connection without writing anything of its own. Every later Read
// returns the same *Error.
//
// Read never returns 0, nil. One goroutine at a time.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(c.out) > 0 {
		n := copy(p, c.out)
		c.out = c.out[n:]
		return n, nil
	}
	if len(p) >= minRead {
		return c.read(p)
	}
	n, err := c.read(c.small[:])
	k := copy(p, c.small[:n])
	c.out = c.small[k:n]
	return k, err
}

// read is Read for len(p) >= minRead.
//
// What it returns is either whole commands (and the ignored blank lines
// between them), or part of a single command, never whole commands followed
// by the start of another: when a read from the socket ends inside a command
// that follows complete ones, that command's bytes are kept (in stash) for
// the next Read. redcon's Reader grows its buffer whenever a read fills it
// and ends inside a command, without compacting the commands before it; were
// the two mixed, a pipeline cut mid-command read after read would grow that
// buffer without bound (see cutAtBoundary).
//
// A command still incomplete at the end of what was read is not handed over
// alone while p has room: read keeps filling p until the command ends or p
// is full. redcon rescans a partial command from its start on every read
// (an inline line byte by byte), so a client trickling a 64 KiB line one
// byte per packet would otherwise cost 2^31 byte comparisons; this way each
// rescan comes with at least len(p) new bytes. redcon can do nothing with a
// partial command anyway, and the replies to every earlier command were
// flushed before this Read.
//
// On a non-blocking connection, whose Read returns syscall.EAGAIN when
// nothing is there, read returns what it has at that point and never keeps
// the EAGAIN for later: 0, EAGAIN when nothing was validated; n, EAGAIN
// when the n bytes are only part of one command (no command ended in this
// call, so there is nothing to parse yet: the caller should keep them and
// wait, which keeps a trickled command from being rescanned per packet);
// n, nil when whole commands came.
func (c *Conn) read(p []byte) (int, error) {
	m := &c.m
	out := 0 // p[:out] is validated
	first := m.commands
	for {
		if m.verdict != vNone {
			if out > 0 {
				return out, nil
			}
			return 0, c.fail()
		}
		if c.rerr != nil && len(c.stash) == 0 {
			if c.rerr == syscall.EAGAIN {
				c.rerr = nil
				if out > 0 && m.commands == first && m.st != stIdle {
					return out, syscall.EAGAIN
				}
				if out > 0 {
					return out, nil
				}
				return 0, syscall.EAGAIN
			}
			if out > 0 {
				return out, nil
			}
			err := c.rerr
			c.rerr = nil
			return 0, err
		}
		q := p[out:]
		h := copy(q, m.hold[:m.nhold])
		m.nhold = 0
		authed := c.authed.Load()
		var k int
		fromStash := len(c.stash) > 0
		if fromStash {
			k = copy(q[h:], c.stash)
		} else {
			r := q[h:]
			if chunk := readChunk(authed); len(r) > chunk {
				r = r[:chunk]
			}
			k, c.rerr = c.Conn.Read(r)
		}
		before := m.commands
		mode := cutAtBoundary
		if !authed {
			mode = stopAfterCommand
		}
		n, rest := m.scan(q[:h+k], h, mode)
		out += n
		if fromStash {
			c.unstash(rest - h)
		} else if rest < h+k {
			c.stashBytes(q[rest : h+k])
			// Cut after one command (before AUTH), the stash may hold
			// whole commands; cut at a boundary, only the start of one.
			c.stashRuns = mode == stopAfterCommand
		}
		if out == 0 {
			continue
		}
		if m.commands == before && m.verdict == vNone && m.st != stIdle && len(p)-out >= minRead {
			continue // only part of a command so far: coalesce
		}
		if c.rerr == syscall.EAGAIN {
			c.rerr = nil // the next read from the socket says it again if still so
		}
		return out, nil
	}
}

// readChunk bounds one read from the socket, and so the stash: 4 KiB while
// unauthenticated, 64 KiB after.
func readChunk(authed bool) int {
	if authed {
		return authChunk
	}
	return unauthChunk
}

// stashBytes keeps b, input read but given back by scan, for the next Read.
func (c *Conn) stashBytes(b []byte) {
	if c.stashBuf == nil {
		c.stashBuf = make([]byte, 0, unauthChunk)
	}
	c.stashBuf = append(c.stashBuf[:0], b...)
	c.stash = c.stashBuf
}

// unstash drops the first n bytes of the stash, which were scanned. An
// emptied stash larger than unauthChunk is freed, so an idle connection
// keeps at most 4 KiB.
func (c *Conn) unstash(n int) {
	c.stash = c.stash[n:]
	if len(c.stash) == 0 {
		c.stash = nil
		if cap(c.stashBuf) > unauthChunk {
			c.stashBuf = nil
		}
	}
}

// fail ends the stream once: it sends the reply, calls the hooks, and
// returns the *Error every later Read returns.
func (c *Conn) fail() error {
	if c.final != nil {
		return c.final
	}
	e := newError(c.m.verdict, c.m.got)
	c.final = e
	if e.Reply != "" {
		c.Write([]byte(e.Reply)) // best effort: the connection ends anyway
	}
	remote := ""
	if a := c.RemoteAddr(); a != nil {
		remote = a.String()
	}
	if e.Kind == ErrSecurity && c.opt.onSecurity != nil {
		c.opt.onSecurity(remote)
	}
	if c.opt.onViolation != nil {
		c.opt.onViolation(remote, e)
	}
	return e
}

// Write writes b to the client after setting a write deadline of
// WriteTimeout from now (unless WriteTimeout is 0), so a client that stops
// reading cannot hold the writer forever. It replaces any deadline set
// through SetWriteDeadline. Cost: a clock read and a deadline update.
func (c *Conn) Write(b []byte) (int, error) {
	if d := c.opt.writeTimeout; d > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(d)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(b)
}

// Close closes the connection and, for a Conn from a Listener, frees its
// client slot. Only the first call does anything; later calls return nil.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := c.Conn.Close()
	if c.onDone != nil {
		c.onDone()
	}
	return err
}

// ReadReady reports whether the next Read has something to return without
// more input from the socket: whole commands read ahead (before AUTH,
// commands are handed over one at a time), or the end of the stream (the
// next Read returns the error). Input held that is only the start of a
// command does not count: it needs the socket anyway. An event loop that
// reads only when the socket is readable calls Read again while this is
// true, and otherwise waits for epoll, so that one client streaming
// commands cannot keep the loop from the others. Read's goroutine only.
func (c *Conn) ReadReady() bool {
	return len(c.out) > 0 || (len(c.stash) > 0 && c.stashRuns) || c.m.verdict != vNone || c.final != nil
}

// NetConn returns the wrapped connection.
func (c *Conn) NetConn() net.Conn { return c.Conn }
