package server

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// client is one connection's state. Fields above mu belong to whoever
// serves the connection (its goroutine or its event loop) alone; atomic
// ones are also read by others, as noted. Fields under mu are also read by
// CLIENT LIST from other goroutines.
type client struct {
	srv     *Server
	id      int64
	netConn net.Conn       // the accepted connection (a *pushConn from Serve)
	ln      *drainListener // the listener it came from; nil for scratch clients
	addr    string
	laddr   string
	created time.Time

	hctx Ctx // a registered command's Ctx, reused: no allocation per call (handlerapi.go)
	// multi is CL.MTHROTTLE's working memory (cmd_gcra_family.go), made on
	// the client's first such call and reused: only the goroutine running
	// the client's commands touches it.
	multi *multiScratch

	authed bool // AUTH done, or no password configured
	// readonly: READONLY was sent (cluster mode): a replica serves this
	// connection's reads of its primary's slots (cmd_cluster.go).
	readonly bool
	// unauthed is !authed for the output buffer's check (obuf.go), which
	// may run on other goroutines (pushes).
	unauthed atomic.Bool
	// isoHeld: runBatch holds this client's isolation read lock across a
	// batch of ordinary commands, so dispatch does not take it per command.
	isoHeld bool
	// routeSeq is odd while a batch runs in cluster mode (routeseal.go:
	// Server.WaitRouted reads it from other goroutines).
	routeSeq atomic.Uint32
	// out holds the replies of the pipeline being answered: serveConn
	// writes it once per batch of commands read (conn.go); commands
	// append to it, each reply starting at the length it found.
	out []byte
	// outBase counts the reply bytes handed on from c.out in the middle
	// of a command (spillOut, obuf.go), so that a command's reply can be
	// found again from the mark it took (outMark, replyFrom). spillAt is
	// the length of c.out past which a reply's check point (replyFull)
	// hands it on: maxBatchOut on a served connection, 0 once the
	// connection was closed for its output (outGone: nothing more is
	// appended), and a client that is not a connection (a script's) turns
	// it to MaxInt at its first check.
	outBase         int
	spillAt         int
	outGone         bool
	flushFn         func([]byte) []byte // c.flushScript, made once (cmd_script.go)
	resp3           bool
	closeAfterReply bool
	closed          bool // QUIT, SHUTDOWN or a panic: run nothing more, close after the reply
	// pending counts commands read and dispatched since the last
	// publishCommands; commands is the connection's published total,
	// summed by Server.commandsProcessed from other goroutines.
	pending  int64
	commands atomic.Int64
	// lastCmd is the command running or last run, for CLIENT LIST's cmd=;
	// atomic so other clients' CLIENT LIST can read it without a lock on
	// this client's hot path.
	lastCmd atomic.Pointer[command]

	// fwd is sidecar mode's forwarding state (forward.go), nil until
	// the connection's first batch with a Forwarder configured.
	fwd *fwdState

	// Transactions.
	inMulti    bool
	multiError bool       // a command failed to queue: EXEC answers EXECABORT
	queue      [][][]byte // queued commands (copied: arguments alias the read buffer)
	queueOOM   bool       // a queued command is denyoom: EXEC checks the memory bound
	queueMem   int64      // the queue's bytes, held in the store's account (store.AddHeldMemory)
	watched    []watchedKey
	// watchTouched is set by other goroutines through the watch registry.
	watchTouched atomic.Bool

	// trk is the CLIENT TRACKING state, nil until the client first turns
	// tracking on (tracking.go); ncalls counts commands executed for the
	// current top-level one (cmdstats.go).
	trk    *trackState
	ncalls int
	// shadowed: the command running answered a denial as allowed in
	// shadow mode and wrote nothing (decisions.go); call clears it.
	shadowed bool
	// replWrote: a write passed the replication gate since the client's
	// replies were last written (replgate.go).
	replWrote bool
	// limiter is the limiter this client's last decision was counted
	// under (decisions.go: lookupFor).
	limiter *limiterSlot
	// errCounted: the error reply of the command running was counted
	// already, as the error of a command a script called (scripterr.go).
	errCounted bool
	// evalKeys are the KEYS of the script this client runs, while it
	// runs and the client tracks keys (cmd_script.go).
	evalKeys [][]byte

	// Introspection (clientinfo.go): obuf is the connection's output side
	// (nil for a script's client; set before the client is served), st its
	// request side (for its own CLIENT INFO only), io what its owner
	// publishes for others.
	obuf outBuffer
	st   *connState
	io   ioStats

	mu       sync.Mutex
	proto    int   // 2 or 3, mirrors resp3
	multiLen int   // queued commands, -1 outside MULTI
	multiMem int64 // their memory, as CLIENT LIST's multi-mem
	name     string
	libName  string
	libVer   string
	db       int
}

// newClient returns the state of a new connection nc, not registered yet
// (Server.accept does that).
func newClient(s *Server, nc net.Conn) *client {
	c := &client{
		srv:      s,
		id:       s.nextID.Add(1),
		netConn:  nc,
		created:  time.Now(),
		proto:    2,
		multiLen: -1,
	}
	c.authed = s.cfg.RequirePass == ""
	c.unauthed.Store(!c.authed)
	c.obuf, _ = unwrapConn[outBuffer](nc)
	c.io.lastSeen.Store(s.coarseMs.Load())
	if ra := nc.RemoteAddr(); ra != nil {
		c.addr = ra.String()
	}
	if la := nc.LocalAddr(); la != nil {
		c.laddr = la.String()
	}
	return c
}

// publishCommands adds the commands counted since the last call to the
// connection's published total: once per pipeline (before its replies are
// written, so a client that has a reply sees its command counted), not once
// per command. Connection goroutine only.
func (c *client) publishCommands() {
	if c.pending != 0 {
		c.commands.Add(c.pending)
		c.pending = 0
	}
}

// reset returns the client to a fresh connection's state (RESET).
func (c *client) reset() {
	c.discardMulti()
	c.srv.watch.unwatchAll(c)
	c.srv.trackingOff(c)
	c.setProto(false)
	c.mu.Lock()
	c.name = ""
	c.db = 0
	c.mu.Unlock()
	c.readonly = false
}

func (c *client) discardMulti() {
	c.inMulti = false
	c.multiError = false
	c.queueOOM = false
	c.queue = nil
	if c.queueMem != 0 {
		c.srv.store.AddHeldMemory(-c.queueMem)
		c.queueMem = 0
	}
	c.setMultiLen(-1)
}

// setProto switches the reply protocol (HELLO, RESET).
func (c *client) setProto(resp3 bool) {
	c.resp3 = resp3
	c.mu.Lock()
	c.proto = 2
	if resp3 {
		c.proto = 3
	}
	c.mu.Unlock()
}

func (c *client) setMultiLen(n int) {
	c.mu.Lock()
	c.multiLen = n
	switch {
	case n <= 0:
		c.multiMem = 0
	case n == len(c.queue): // one more queued: dispatch appends, then calls this
		c.multiMem += queuedMem(c.queue[n-1])
	}
	c.mu.Unlock()
}
