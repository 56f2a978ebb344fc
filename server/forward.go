package server

import (
	"bytes"
	"net"
	"strings"
)

// Sidecar mode's seam: with Config.Forwarder set, the commands of a
// connection whose keys live elsewhere are handed to the Forwarder (package
// sidecar implements it; main wires it) instead of the local keyspace. The
// server still parses, checks arity and authentication, answers the
// connection-level commands itself (PING, HELLO, AUTH, CLIENT, INFO,
// COMMAND, MULTI's queueing, ...) and runs locally whatever the Forwarder
// hands back (a fallback decision with the sidecar's own state).
//
// Cost: nothing when Forwarder is nil but one nil check per batch
// (runBatch). With a Forwarder that is an AsyncForwarder, the event loops
// serve the clients and a connection whose commands are upstream is parked,
// not blocked (forward_loop.go); otherwise (and on connections with a
// goroutine of their own) the connection's goroutine blocks while a batch
// is forwarded.

// Forwarder routes commands to the node that owns their keys. Its methods
// are called from every connection's goroutine concurrently.
type Forwarder interface {
	// Session returns the forwarding state of one new client connection
	// (its pinned upstream connection after WATCH, its scratch buffers).
	Session() ForwardSession
	// Owner names the node that owns slot now ("" when none does), to
	// tell whether a transaction's keys live on one owner.
	Owner(slot int) string
	// Info returns "field:value" lines for INFO's Upstream section.
	Info() []string
}

// ForwardSession forwards the commands of one client connection. Only that
// connection's goroutine calls it, one call at a time.
type ForwardSession interface {
	// Do forwards reqs (a pipeline, in order) to their owners and returns
	// once every one has its Reply or is marked Local; it waits at most
	// the forwarder's timeout per owner.
	Do(reqs []ForwardReq)
	// Unwatch ends what a forwarded WATCH started (UNWATCH, DISCARD,
	// RESET, a transaction run locally).
	Unwatch()
	// Close releases the session (the connection closed).
	Close()
}

// ForwardSelectChecker is implemented by a Forwarder that cannot carry
// some databases upstream: SELECT asks it first, and answers the error it
// returns (a cluster upstream has database 0 only). Called from the
// client's goroutine.
type ForwardSelectChecker interface {
	// SelectError returns the error text (without '-') for SELECT db, or
	// "" when db can be used.
	SelectError(db int) string
}

// ForwardKeyless is implemented by a Forwarder that forwards some keyless
// commands (DBSIZE, SCAN, ... when one owner holds every key). Called
// from the client's goroutine or loop, per keyless command.
type ForwardKeyless interface {
	// ForwardsKeyless reports whether the keyless command name (lower
	// case; args as sent) goes to the owner of slot 0 rather than run
	// here.
	ForwardsKeyless(name string, args [][]byte) bool
}

// ForwardListener is implemented by a Forwarder that must know the
// addresses this server listens on: a sidecar whose topology or a
// redirect names one of them would otherwise forward to itself (each
// hop a new request on its own port, until the timeout). Serve calls
// ListeningOn with each listener's address before it accepts on it: once
// per listener, from Serve's goroutine (several Serves may call it
// concurrently). Not on any command's path.
type ForwardListener interface {
	ListeningOn(addr net.Addr)
}

// ForwardLargeReply is implemented by a Forwarder that knows which
// commands may have a reply far larger than their request (LRANGE,
// HGETALL, GET of a large value, LPOP with a count, ...). With an output
// limit set (Config.OutputBufferLimit), forwardBatch ends a run after
// such a command: the limit is checked between runs and between a run's
// replies, so a client that pipelines large reads and does not read them
// is closed after about one of them, and the sidecar never holds more than
// one such reply for it (a run's replies are all collected before any is
// appended). Without a limit runs are not split (nothing to check early).
// Called from the client's goroutine or loop, per forwarded command while
// a limit is set.
type ForwardLargeReply interface {
	LargeReply(args [][]byte) bool
}

// ForwardReq is one command (or one transaction) to forward.
type ForwardReq struct {
	// Args is the command, name first. It aliases the connection's read
	// buffer: valid only during Do.
	Args [][]byte
	// Raw is the command as the client sent it, when that was a RESP
	// array (not an inline command): the bytes Args were parsed from,
	// aliasing the read buffer like Args. A forwarder may send it as it
	// is instead of encoding Args again, once it has checked that it is
	// the canonical encoding of Args (the parser accepts some
	// non-canonical numbers, e.g. "$03", that another server may not).
	Raw []byte
	// Unit, when set instead of Args, is a transaction's queued commands:
	// they are sent as MULTI, Unit..., EXEC on one connection, and Reply
	// is EXEC's reply.
	Unit [][][]byte
	// Slot is the hash slot of the keys.
	Slot int
	// RESP3: the client speaks RESP3 (HELLO 3); the reply must too.
	RESP3 bool
	// DB is the client's selected database: the command runs in that
	// database of the owner.
	DB int
	// Write: the command (or a command of the transaction) may change
	// data: flagged write, or a script that may write (EVAL, EVALSHA,
	// FCALL; not their _RO forms). Once such a request was sent to its
	// owner, the forwarder must not answer it with its fallback.
	Write bool

	// Reply is set by Do: the RESP bytes to relay as they are (the
	// owner's reply, or the fallback's answer). Owned by the session;
	// valid until its next Do.
	Reply []byte
	// Local is set by Do: the owner cannot be reached and the fallback
	// is to decide with this server's own state.
	Local bool
	// Dropped is set by Do instead of Reply: the owner's reply passed the
	// hard output limit (Config.OutputBufferLimit, which the Forwarder
	// was given) after this many bytes and was discarded as it came, not
	// collected. The server closes the client for its output limit, as
	// it would have once the reply was appended (Redis closes a client
	// whose reply passes the hard limit).
	Dropped int64
}

// errTrkSidecar answers CLIENT TRACKING ON in sidecar mode. The keys a
// sidecar's client reads live on the owners, where every other sidecar's
// clients change them: the sidecar's own tracking table would never hear
// of those changes, so a client-side cache it promised to invalidate
// would serve stale values silently. Refused, as clearly as Redis refuses
// what it cannot do (docs/sidecar.md, "Client-side caching").
const errTrkSidecar = "ERR CLIENT TRACKING is not supported through a celld sidecar (--upstream): " +
	"its keys change on the upstream owners, which it does not hear from; track on the owners, " +
	"or turn client-side caching off in the client"

// forwardAction is what forwardBatch does with one command.
type forwardAction uint8

const (
	fwdLocal     forwardAction = iota // run here (connection commands, keyless, queued in MULTI, errors)
	fwdForward                        // one command to its owner
	fwdExec                           // EXEC: the queued transaction to its owner
	fwdCrossSlot                      // keys on several slots (several owners for EXEC)
)

// fwdState is a connection's forwarding state: its session and a scratch
// request slice reused across batches.
type fwdState struct {
	sess ForwardSession
	reqs []ForwardReq
	// On an event loop (forward_loop.go): the session's asynchronous
	// form, the done function that resumes the connection, and whether
	// reqs is a parked run whose replies are in (the connection was
	// resumed: the run is st.cmds[:len(reqs)] once parsed again).
	async  AsyncForwardSession
	done   func()
	parked bool
	// at is the index in st.cmds of the parked run's first command: on
	// the resume the batch is not parsed again (connState.keep).
	at int
	// large is the Forwarder's ForwardLargeReply while an output limit
	// is set (runs end after a large reply), else nil.
	large ForwardLargeReply
}

// mayWrite reports whether cmd may change data: flagged write, or a
// script command that may write (not EVAL_RO, EVALSHA_RO, FCALL_RO).
// Hot-path cost: two field loads.
func mayWrite(cmd *command) bool {
	return cmd.meta.write || (cmd.script && !strings.HasSuffix(cmd.name, "_ro"))
}

// unitMayWrite is mayWrite for a transaction's queued commands.
func unitMayWrite(unit [][][]byte) bool {
	for _, q := range unit {
		if len(q) > 0 {
			if qc := lookup(commands, q[0]); qc != nil && mayWrite(qc) {
				return true
			}
		}
	}
	return false
}

// largeReply asks f.large about r: its command, or each command of a
// transaction.
func (f *fwdState) largeReply(r *ForwardReq) bool {
	if r.Unit == nil {
		return f.large.LargeReply(r.Args)
	}
	for _, q := range r.Unit {
		if f.large.LargeReply(q) {
			return true
		}
	}
	return false
}

// forwardClassify decides what happens to one command now (the client's
// state, MULTI or authentication, may change between commands).
func (s *Server) forwardClassify(c *client, cmd *command, args [][]byte) (forwardAction, int) {
	if cmd == nil || len(args) == 0 || !arityOK(cmd.arity, len(args)) || (!c.authed && !cmd.noAuth) {
		return fwdLocal, -1 // answered here with the usual error
	}
	if c.inMulti {
		if cmd.name != "exec" || c.multiError {
			return fwdLocal, -1 // queued (or refused) here; EXEC sends them
		}
		slot, owner := -1, ""
		for _, q := range c.queue {
			qc := lookup(commands, q[0])
			if qc == nil {
				continue
			}
			qs, ok := foldKeySlot(qc, q, -1)
			if !ok {
				return fwdCrossSlot, -1
			}
			if qs < 0 {
				continue
			}
			if slot < 0 {
				slot, owner = qs, s.cfg.Forwarder.Owner(qs)
			} else if qs != slot && s.cfg.Forwarder.Owner(qs) != owner {
				return fwdCrossSlot, -1
			}
		}
		if slot < 0 {
			return fwdLocal, -1 // no keys: a local transaction
		}
		return fwdExec, slot
	}
	if cmd.immediate && cmd.name != "watch" {
		return fwdLocal, -1 // MULTI, EXEC without MULTI, DISCARD, UNWATCH, ...
	}
	if cmd.firstKey == 0 && !movableKeys(cmd.name) {
		if kf, ok := s.cfg.Forwarder.(ForwardKeyless); ok && kf.ForwardsKeyless(cmd.name, args) {
			return fwdForward, 0 // any slot: one owner holds them all
		}
		return fwdLocal, -1
	}
	slot, ok := foldKeySlot(cmd, args, -1)
	switch {
	case !ok:
		return fwdCrossSlot, -1
	case slot < 0:
		return fwdLocal, -1 // EVAL with no keys, a command short of its key
	}
	return fwdForward, slot
}

// forwardBatch is runBatch in sidecar mode: runs of forwardable commands
// go to the Forwarder as one pipeline, and their replies are stitched in
// order with those of the commands answered here.
func (s *Server) forwardBatch(c *client, st *connState) (r pumpResult, ran, stop bool) {
	if c.fwd == nil {
		c.fwd = s.newFwdState(st)
	}
	f := c.fwd
	i := 0
	if f.parked {
		i = f.at // resumed: st.cmds is the batch parked, not parsed again
	}
	for i < len(st.cmds) && !c.closed {
		if f.parked {
			// Resumed: the run is st.cmds[i:i+len(f.reqs)], its
			// replies are in.
			f.parked = false
		} else {
			f.reqs = f.reqs[:0]
			from := st.start // where command i starts in buf
			for j := i; j < len(st.cmds); j++ {
				pc := st.cmds[j]
				args := st.flat[pc.off : pc.off+pc.n : pc.off+pc.n]
				act, slot := s.forwardClassify(c, pc.cmd, args)
				raw := st.buf[from:pc.end:pc.end]
				from = pc.end
				if len(raw) == 0 || raw[0] != '*' {
					raw = nil // inline: Args must be encoded
				}
				if act == fwdForward {
					f.reqs = append(f.reqs, ForwardReq{Args: args, Raw: raw, Slot: slot, RESP3: c.resp3, DB: c.db,
						Write: mayWrite(pc.cmd)})
				} else if act == fwdExec {
					f.reqs = append(f.reqs, ForwardReq{Unit: c.queue, Slot: slot, RESP3: c.resp3, DB: c.db,
						Write: unitMayWrite(c.queue)})
				} else {
					break
				}
				if f.large != nil && f.largeReply(&f.reqs[len(f.reqs)-1]) {
					break // one large reply per run while a limit is set
				}
			}
			if len(f.reqs) > 0 {
				if f.async == nil {
					f.sess.Do(f.reqs)
				} else if !f.async.Start(f.reqs, f.done) {
					// Park: nothing of this connection runs until
					// done; st.start stays at the run's first command,
					// and the batch stays parsed (st.keep).
					f.parked, f.at = true, i
					st.keep = true
					return pumpForward, ran, true
				}
			}
		}
		if len(f.reqs) > 0 {
			for k := range f.reqs {
				req := &f.reqs[k]
				pc := st.cmds[i+k]
				st.start = pc.end
				ran = true
				if req.Local || c.closed {
					s.execute(c, pc.cmd, st.flat[pc.off:pc.off+pc.n:pc.off+pc.n])
					continue
				}
				c.pending++
				c.lastCmd.Store(pc.cmd)
				if req.Unit != nil {
					if req.Dropped == 0 {
						s.selectAfterExec(c, req.Unit, req.Reply)
					}
					c.discardMulti()
					s.watch.unwatchAll(c)
				}
				// A check point before each reply (obuf.go: replyFull):
				// the replies before it go to the connection, whose output
				// limit may close it; then nothing more is copied.
				if req.Dropped > 0 {
					c.closeForOutput(int64(len(c.out)) + req.Dropped)
				} else if !c.replyFull() {
					c.out = append(c.out, req.Reply...)
				}
				req.Reply, req.Args, req.Raw, req.Unit, req.Dropped = nil, nil, nil, nil, 0
			}
			i += len(f.reqs)
			continue
		}
		pc := st.cmds[i]
		i++
		st.start = pc.end
		if pc.n == 0 {
			continue
		}
		ran = true
		args := st.flat[pc.off : pc.off+pc.n : pc.off+pc.n]
		if act, _ := s.forwardClassify(c, pc.cmd, args); act == fwdCrossSlot {
			c.pending++
			s.clusterStats.crossSlot.Add(1)
			if c.inMulti { // EXEC across owners: the transaction is discarded
				c.discardMulti()
				s.watch.unwatchAll(c)
				f.sess.Unwatch()
			}
			c.out = appendError(c.out, errCrossSlot)
			continue
		}
		if pc.cmd != nil {
			switch pc.cmd.name {
			case "unwatch", "discard", "reset", "exec":
				f.sess.Unwatch() // exec here: a keyless or refused transaction
			}
		}
		s.execute(c, pc.cmd, args)
	}
	return 0, ran, false
}

// newFwdState makes a connection's forwarding state: asynchronous on an
// event loop when the Forwarder can (forward_loop.go), blocking otherwise.
func (s *Server) newFwdState(st *connState) *fwdState {
	var large ForwardLargeReply
	if l := s.cfg.OutputBufferLimit; l.Hard > 0 || l.Soft > 0 {
		large, _ = s.cfg.Forwarder.(ForwardLargeReply)
	}
	if af, ok := s.cfg.Forwarder.(AsyncForwarder); ok && st.lc != nil {
		if l, done := forwardLoopOf(st.lc); l != nil {
			as := af.LoopSession(l)
			return &fwdState{sess: as, async: as, done: done, large: large}
		}
	}
	return &fwdState{sess: s.cfg.Forwarder.Session(), large: large}
}

// selectAfterExec applies a SELECT that ran inside a forwarded transaction
// to the client, as Redis's EXEC leaves the client in the database the
// transaction selected: the last SELECT of a valid index, when EXEC ran
// (its reply is an array, not an error or a null). The owner then ran that
// SELECT as well; an owner with fewer databases than this server would
// have refused it, which only its element of EXEC's reply shows.
func (s *Server) selectAfterExec(c *client, unit [][][]byte, reply []byte) {
	if len(reply) < 2 || reply[0] != '*' || reply[1] == '-' {
		return
	}
	for i := len(unit) - 1; i >= 0; i-- {
		q := unit[i]
		if len(q) != 2 || !bytes.EqualFold(q[0], []byte("select")) {
			continue
		}
		fc, _ := s.cfg.Forwarder.(ForwardSelectChecker)
		if n, ok := parseRedisInt(q[1]); ok && s.validDB(n) && (fc == nil || fc.SelectError(int(n)) == "") {
			c.mu.Lock()
			c.db = int(n)
			c.mu.Unlock()
		}
		return
	}
}

// infoUpstream is INFO's Upstream section (sidecar mode only).
func (s *Server) infoUpstream() []string {
	if s.cfg.Forwarder == nil {
		return nil
	}
	return s.cfg.Forwarder.Info()
}
