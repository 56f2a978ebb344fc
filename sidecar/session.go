package sidecar

import (
	"bytes"
	"slices"
	"strconv"
	"time"

	"github.com/celld/celld/server"
)

// session forwards one client connection's pipelines (server.ForwardSession).
// Only that connection's goroutine uses it.
type session struct {
	sc    *Sidecar
	timer *time.Timer
	b     *batch // reused by every Do

	// Scratch reused across Do calls (fresh ones after a timeout, when
	// the abandoned requests may still be written by a reader).
	reqs   []request
	ptrs   []*request
	route  []*owner
	bulk   []bool // per request: a bulk read (bulk.go), sent on the bulk lane
	data   []byte
	groups []group

	// pin is the connection a forwarded WATCH runs on, kept until the
	// transaction that follows it (or UNWATCH, DISCARD, RESET).
	pin      *muxConn
	pinOwner *owner
	pinKey   [2]int // resp3 (0/1) and database the pin was dialled for
	pinSlot  int    // the slot of the last WATCH sent on the pin
	// watchLost: the pin of a WATCH broke, or the watched slot moved to
	// another owner (a failover), before the transaction: the owner no
	// longer watches the key, so the transaction is answered as aborted
	// (checkPin), not run without its WATCH. Cleared by EXEC, DISCARD,
	// UNWATCH, RESET (Unwatch).
	watchLost bool
}

// group is one owner's share of a pipeline on one lane (decisions, or
// bulk reads: bulk.go).
type group struct {
	o     *owner
	bulk  bool
	m     *muxConn
	start time.Time
}

// maxKeepBuf is the largest scratch buffer a session keeps between
// pipelines.
const maxKeepBuf = 64 << 10

var (
	cmdMulti  = []byte("MULTI")
	cmdExec   = []byte("EXEC")
	cmdAsking = []byte("ASKING")
)

// Do implements server.ForwardSession.
func (s *session) Do(reqs []server.ForwardReq) {
	sc := s.sc
	t := sc.topo.Load()
	if cap(s.reqs) < len(reqs) {
		s.reqs = make([]request, len(reqs), max(len(reqs), 32))
		s.ptrs = make([]*request, 0, cap(s.reqs))
		s.route = make([]*owner, len(reqs), cap(s.reqs))
		s.bulk = make([]bool, len(reqs), cap(s.reqs))
	}
	s.reqs, s.route, s.bulk = s.reqs[:len(reqs)], s.route[:len(reqs)], s.bulk[:len(reqs)]
	// The replies of the previous Do have been copied out by now: drop
	// buffers a large value grew, so an idle connection keeps little.
	for i := range s.reqs {
		if cap(s.reqs[i].reply) > maxKeepBuf {
			s.reqs[i].reply = nil
		}
	}
	if cap(s.data) > maxKeepBuf {
		s.data = nil
	}
	s.checkPin(t)
	n := 0
	for i := range reqs {
		o := t.slots[reqs[i].Slot]
		s.route[i] = o
		s.bulk[i] = false
		if reqs[i].Unit != nil && s.watchLost {
			s.route[i] = nil
			reqs[i].Reply = execAborted(reqs[i].RESP3)
			s.watchLost = false // EXEC ends the WATCH
			continue
		}
		if reqs[i].DB != 0 && t.cluster {
			// SELECTed before the topology said "cluster" (SELECT asks
			// SelectError): a cluster has database 0 only.
			s.route[i] = nil
			reqs[i].Reply = appendError(nil, errSelectCluster)
			continue
		}
		if o == nil || !o.br.isUp() { // no owner: a partial topology
			s.route[i] = nil
			s.fallback(&reqs[i], o)
			continue
		}
		n++
	}
	if n == 0 {
		return
	}
	bulkLanes(reqs, s.route, s.bulk)
	if s.b == nil {
		s.b = newBatch(0)
	}
	b := s.b
	b.reset(n)
	deadline := time.Now().Add(sc.cfg.Timeout)
	s.groups = s.groups[:0]
	// Each owner's share, in the pipeline's order, in one send per lane.
	for i := range reqs {
		o, bulk := s.route[i], s.bulk[i]
		if o == nil || s.seen(o, bulk) {
			continue
		}
		g := group{o: o, bulk: bulk, start: time.Now()}
		sent := g.start.UnixNano()
		s.data, s.ptrs = s.data[:0], s.ptrs[:0]
		var pinned bool
		for k := i; k < len(reqs); k++ {
			if s.route[k] != o || s.bulk[k] != bulk {
				continue
			}
			r := &s.reqs[k]
			r.reply, r.err, r.skip, r.done, r.unsent = r.reply[:0], nil, 0, b, false
			r.sent, r.slow = sent, bulk && slowFirst(&reqs[k])
			s.encode(&reqs[k], r, o)
			pinned = pinned || s.usesPin(&reqs[k], o)
			if isWatch(&reqs[k]) {
				s.pinSlot = reqs[k].Slot
			}
			s.ptrs = append(s.ptrs, r)
		}
		var err error
		if pinned {
			g.m, err = s.pinned(o, reqs[i].RESP3, reqs[i].DB)
		} else {
			g.m, err = o.conn(reqs[i].RESP3, bulk, reqs[i].DB, deadline)
		}
		if err == nil {
			err = g.m.send(s.data, s.ptrs)
		}
		if err != nil {
			for _, r := range s.ptrs {
				r.err, r.unsent = err, true
				b.finish()
			}
			if err != errOverload && err != errDown {
				o.failed(err)
			}
		}
		s.groups = append(s.groups, g)
	}
	s.wait(b, deadline)
	done := time.Now()
	for _, g := range s.groups {
		g.o.lat.observe(done.Sub(g.start))
	}
	for i := range reqs {
		o := s.route[i]
		if o == nil {
			continue
		}
		r := &s.reqs[i]
		if r.err != nil {
			s.failed(&reqs[i], o, r.err, !r.unsent)
			continue
		}
		if addr, ask, ok := redirect(r.reply); ok && reqs[i].Unit == nil {
			sc.stats.Redirects.Add(1)
			if !ask {
				sc.refreshSoon()
			}
			if isWatch(&reqs[i]) {
				// Not followed: follow runs on the target's pooled
				// connection, shared by every client, where the WATCH
				// would stay (aborting another client's transaction
				// sent there) while this client's pin has none
				// (TestSidecarWatchRedirectNotOnPool). Not run: the
				// client retries, on the new owner once it is read.
				s.Unwatch()
				reqs[i].Reply = appendError(nil, "TRYAGAIN slot "+strconv.Itoa(reqs[i].Slot)+
					" redirected to "+addr+" while it was watched: WATCH not run")
				continue
			}
			s.follow(&reqs[i], r, sc.redirectOwner(addr), ask)
			continue
		}
		if ((len(r.reply) > 0 && r.reply[0] == '-') || o.refusedAt.Load() != 0) && s.refusedByOwner(&reqs[i], o, r.reply) {
			continue
		}
		if isWatch(&reqs[i]) && bytes.HasPrefix(r.reply, []byte("-")) {
			s.Unwatch()
		}
		if reqs[i].Unit != nil {
			s.Unwatch() // EXEC ended the WATCH on the owner
		}
		sc.stats.Forwarded.Add(1)
		reqs[i].Reply = r.reply
	}
}

// bulkLanes sets bulk[i] for every request routed (route[i] != nil) to
// an owner that gets a bulk read in this pipeline: all of that owner's
// share then travels on its bulk lane, in order, so that a write and a
// bulk read of one pipeline (HSET h f v, HGETALL h) still run in the
// client's order on one connection. Cheap when there is no bulk read:
// one byte test per request.
func bulkLanes(reqs []server.ForwardReq, route []*owner, bulk []bool) {
	var buf [4]*owner // the common case on the stack
	owners := buf[:0]
	for i := range reqs {
		if route[i] != nil && isBulk(&reqs[i]) && !slices.Contains(owners, route[i]) {
			owners = append(owners, route[i])
		}
	}
	if len(owners) == 0 {
		return
	}
	for i := range reqs {
		bulk[i] = route[i] != nil && slices.Contains(owners, route[i])
	}
}

// seen reports whether o already has a group on that lane in this Do.
func (s *session) seen(o *owner, bulk bool) bool {
	for _, g := range s.groups {
		if g.o == o && g.bulk == bulk {
			return true
		}
	}
	return false
}

// encode appends req's bytes to s.data and sets how many replies r skips.
func (s *session) encode(req *server.ForwardReq, r *request, o *owner) {
	if req.Unit == nil {
		s.data = appendForward(s.data, req)
		return
	}
	s.data = appendCommand(s.data, cmdMulti)
	for _, q := range req.Unit {
		s.data = appendCommand(s.data, q...)
	}
	s.data = appendCommand(s.data, cmdExec)
	r.skip = 1 + len(req.Unit)
}

func isWatch(req *server.ForwardReq) bool {
	return req.Unit == nil && len(req.Args) > 0 && bytes.EqualFold(req.Args[0], []byte("watch"))
}

// usesPin reports whether req must run on the session's pinned
// connection: a WATCH (which pins it), the transaction after one, or a
// transaction that SELECTs (it would change the database of a shared
// connection; the pin is closed after its EXEC).
func (s *session) usesPin(req *server.ForwardReq, o *owner) bool {
	return isWatch(req) || (req.Unit != nil && (s.pin != nil || unitSelects(req.Unit)))
}

// unitSelects reports whether a transaction has a SELECT.
func unitSelects(unit [][][]byte) bool {
	for _, q := range unit {
		if len(q) > 0 && bytes.EqualFold(q[0], []byte("select")) {
			return true
		}
	}
	return false
}

// checkPin drops a pin whose WATCH the owner no longer holds: its
// connection broke (the owner restarted, the network cut it), or the
// watched slot's owner in topology t is another node (a failover moved
// the shard). A transaction sent on a new pin would run without the
// WATCH, so that a key changed meanwhile no longer aborts it: before,
// the EXEC after such a break succeeded, overwriting what another
// client had written (TestSidecarWatchLostAbortsExec). watchLost makes
// the next transaction answer as aborted, as Redis answers one whose
// watched key changed; the application retries it.
func (s *session) checkPin(t *topology) {
	if s.pin != nil && (s.pin.broken() || t.slots[s.pinSlot] != s.pinOwner) {
		s.dropPin()
		s.watchLost = true
	}
}

// execAborted is EXEC's reply to a transaction aborted by its WATCH: a
// null array (RESP3: null).
func execAborted(resp3 bool) []byte {
	if resp3 {
		return []byte("_\r\n")
	}
	return []byte("*-1\r\n")
}

// pinned returns the session's pinned connection to o in database db,
// dialling it; a pin to another owner (WATCH on one owner, a transaction
// on another) or another database is dropped first: that transaction then
// runs without the other WATCH, as the keys of one transaction live on
// one owner and a WATCH watches the keys of its own database.
func (s *session) pinned(o *owner, resp3 bool, db int) (*muxConn, error) {
	key := [2]int{0, db}
	if resp3 {
		key[0] = 1
	}
	if s.pin != nil && (s.pinOwner != o || s.pinKey != key || s.pin.broken()) {
		s.dropPin()
	}
	if s.pin == nil {
		opts := s.sc.dialOpts(resp3)
		opts.db = db
		m, err := dial(o.addr, opts, nil)
		if err != nil {
			return nil, err
		}
		s.pin, s.pinOwner, s.pinKey = m, o, key
	}
	return s.pin, nil
}

// wait waits for b until deadline; past it, the connections still owing
// replies whose oldest awaited reply has timed out (replyLeft: on the
// decision lane, not answered within Timeout however many bytes of it
// came) are closed (their owners are taken as down), which finishes b. A
// bulk lane's reply that is still arriving, or within its first-byte
// allowance, is waited for, until it times out.
func (s *session) wait(b *batch, deadline time.Time) {
	for {
		s.timer.Reset(time.Until(deadline))
		select {
		case <-b.ch:
			s.timer.Stop()
			return
		case <-s.timer.C:
		}
		now := time.Now()
		var next time.Duration // the soonest a connection's oldest reply may time out
		for _, g := range s.groups {
			if g.m == nil || !g.m.owes(b) {
				continue
			}
			if left := s.sc.replyLeft(g.m, g.bulk, now); left > 0 {
				if next == 0 || left < next {
					next = left
				}
				continue
			}
			g.m.close()
			g.o.failed(errTimeout)
		}
		if next == 0 {
			break
		}
		deadline = now.Add(next)
	}
	<-b.ch // a closed connection has failed (finished) every request it held
}

// replyLeft is m.replyLeft with the sidecar's timeouts.
func (sc *Sidecar) replyLeft(m *muxConn, bulk bool, now time.Time) time.Duration {
	return m.replyLeft(now.UnixNano(), bulk, sc.cfg.Timeout, sc.cfg.BulkTimeout)
}

// errTimeout is an owner that did not answer within the timeout.
var errTimeout = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string { return "sidecar: upstream did not answer within the timeout" }

// maxHops bounds the redirects followed for one request. During an HA
// handover two nodes can name each other for a moment (the old leader
// knows the new one, which does not know yet that it leads): a client of
// the sidecar, which is no cluster client, must not get that MOVED.
const maxHops = 5

// follow sends req again to the node a MOVED or ASK named (ASKING first
// for ASK), and again to the next one if that answers a redirect too, up
// to maxHops, 1, 2, 4 and 8 ms apart while the nodes agree. A request
// still redirected then gets TRYAGAIN (a MOVED or ASK means the command
// was not run, so a client may retry it; go-redis and others do).
func (s *session) follow(req *server.ForwardReq, r *request, o *owner, ask bool) {
	for hop := 1; ; hop++ {
		if !s.followOnce(req, o, ask) {
			return
		}
		addr, next, ok := redirect(req.Reply)
		if !ok {
			return
		}
		if hop == maxHops {
			req.Reply = appendError(nil, "TRYAGAIN slot "+strconv.Itoa(req.Slot)+" still redirected after "+
				strconv.Itoa(maxHops)+" hops (the last to "+addr+"): not run")
			return
		}
		s.sc.stats.Redirects.Add(1)
		if !next {
			s.sc.refreshSoon()
		}
		time.Sleep(time.Millisecond << (hop - 1))
		o, ask = s.sc.redirectOwner(addr), next
	}
}

// followOnce sends req to o (ASKING first for ask) and sets req.Reply to
// its answer, reporting true; or has the fallback or the failure path
// answer req, reporting false.
func (s *session) followOnce(req *server.ForwardReq, o *owner, ask bool) bool {
	if !o.br.isUp() {
		s.fallback(req, o)
		return false
	}
	start := time.Now()
	deadline := start.Add(s.sc.cfg.Timeout)
	bulk := isBulk(req)
	m, err := o.conn(req.RESP3, bulk, req.DB, deadline)
	if err != nil {
		// A failed dial takes the target down, as one to an owner of
		// the topology does (Do): its breaker then answers the next
		// redirects to it at once, and only its probe dials it. Before,
		// each redirect to a dead or blackholed target dialled it again
		// and waited the whole timeout (20 calls: 2.05 s, 20 dials).
		if err != errOverload && err != errDown {
			o.failed(err)
		}
		s.fallback(req, o)
		return false
	}
	b := newBatch(1)
	nr := &request{done: b, sent: start.UnixNano(), slow: bulk && slowFirst(req)}
	var data []byte
	if ask {
		data = appendCommand(data, cmdAsking)
		nr.skip = 1
	}
	data = appendCommand(data, req.Args...)
	if err := m.send(data, []*request{nr}); err != nil {
		o.failed(err)
		s.fallback(req, o)
		return false
	}
	t := time.NewTimer(time.Until(deadline))
	for done := false; !done; {
		select {
		case <-b.ch:
			t.Stop()
			done = true
		case <-t.C:
			if left := s.sc.replyLeft(m, bulk, time.Now()); left > 0 {
				t.Reset(left) // a bulk reply still arriving, or another's ahead of it
				continue
			}
			m.close()
			o.failed(errTimeout)
			<-b.ch
			done = true
		}
	}
	if nr.err != nil {
		s.failed(req, o, nr.err, true)
		return false
	}
	s.sc.stats.Forwarded.Add(1)
	req.Reply = nr.reply
	return true
}

// refusedByOwner is called with every reply of o that is forwarded (but
// those that are no error while o.refusedAt is 0: the caller tests that
// inline, a byte and an atomic load per reply on the forwarding path). It
// reports whether the reply refuses a command o did not run because it
// cannot decide the slot now (refusedUnrun: a fenced HA leader, as every
// leader is while etcd is down; a slot without a leader) while o has
// refused everything for longer than Timeout, and then has the fallback
// answer req instead, as for an owner that cannot be reached: docs/ha.md
// promises that an application that must keep deciding while etcd is down
// gets the local fallback through the sidecar, and it got the owner's
// -TRYAGAIN for as long as etcd was down. A shorter run of refusals (a
// leader's first moments, before its lease is confirmed) is relayed:
// clients retry TRYAGAIN and CLUSTERDOWN, and the owner decides. The
// closed mode always relays the owner's error. Each refusal reads the
// topology again (at most every 100 ms): the slot may have a new leader.
// Not for a transaction (its EXEC answers -EXECABORT).
func (s *session) refusedByOwner(req *server.ForwardReq, o *owner, reply []byte) bool {
	if req.Unit != nil || !refusedUnrun(reply) {
		if o.refusedAt.Load() != 0 {
			o.refusedAt.Store(0)
		}
		return false
	}
	now := time.Now().UnixNano()
	o.refusedAt.CompareAndSwap(0, now)
	first := o.refusedAt.Load()
	s.sc.refreshSoon()
	if s.sc.cfg.Fallback == Closed || first == 0 || now-first < int64(s.sc.cfg.Timeout) {
		return false
	}
	s.sc.stats.Refused.Add(1)
	s.fallback(req, o)
	return true
}

// failed answers req, forwarded to o, whose reply did not come (err):
// the fallback's answer when the request never reached o, or when it is a
// decision (the CL.* family, whose fallback is the documented degraded
// decision) or a read; an error when a write was sent (sent: its bytes
// went to the socket, or may have) — o may have applied it, and the
// fallback's answer (a nil for an LPOP, a local OK for a SET) would
// hide what o did (docs/sidecar.md, "A write sent is never answered by
// the fallback").
func (s *session) failed(req *server.ForwardReq, o *owner, err error, sent bool) {
	if e, ok := err.(*replyOverLimit); ok {
		// The owner answered, past the client's output limit: the
		// server closes the client (its reply is gone, as Redis drops
		// the output of a client it closes for the limit).
		req.Reply, req.Dropped = nil, e.n
		return
	}
	if !sent || !req.Write || decisionReq(req) {
		s.fallback(req, o)
		return
	}
	s.sc.stats.WritesUnknown.Add(1)
	if isWatch(req) || req.Unit != nil {
		s.Unwatch()
	}
	req.Reply = appendError(nil, errWriteUnknown(o, req.Slot, err))
}

// errWriteUnknown is the error a write sent to o gets when o's reply did
// not come: UPSTREAMDOWN (not a prefix clients retry on: a retry could
// apply the write twice), saying that the write may have been applied.
func errWriteUnknown(o *owner, slot int, err error) string {
	return "UPSTREAMDOWN owner " + o.addr + " of slot " + strconv.Itoa(slot) +
		" failed after the write was sent (" + err.Error() + "): it may have been applied there; " +
		"not answered by the fallback"
}

// decisionReq reports whether req is a rate-limit decision of the CL.*
// family (CL.THROTTLE, CL.WINDOW, ...), or a transaction of nothing else.
func decisionReq(req *server.ForwardReq) bool {
	if req.Unit == nil {
		return isDecisionName(req.Args)
	}
	for _, q := range req.Unit {
		if !isDecisionName(q) {
			return false
		}
	}
	return true
}

func isDecisionName(args [][]byte) bool {
	return len(args) > 0 && len(args[0]) > 3 && bytes.EqualFold(args[0][:3], []byte("cl."))
}

// fallback answers req by the sidecar's mode while o cannot be reached,
// or while req's slot has no owner (o nil; the topology is read again).
func (s *session) fallback(req *server.ForwardReq, o *owner) {
	mode := s.sc.cfg.Fallback
	if o == nil {
		s.sc.stats.Unowned.Add(1)
		s.sc.refreshSoon()
	}
	s.sc.stats.FallbackByMode[mode].Add(1)
	if isWatch(req) || req.Unit != nil {
		s.Unwatch()
	}
	switch mode {
	case Local:
		req.Local = true
		return
	case Open:
		if r, ok := openThrottle(req); ok {
			req.Reply = r
			return
		}
	}
	if o == nil {
		req.Reply = appendError(nil, "UPSTREAMDOWN slot "+strconv.Itoa(req.Slot)+
			" has no owner in the upstream's CLUSTER SLOTS (--upstream-fallback "+mode.String()+")")
		return
	}
	if o.self.Load() {
		req.Reply = appendError(nil, "UPSTREAMDOWN owner "+o.addr+" of slot "+strconv.Itoa(req.Slot)+
			" is this sidecar's own address: not forwarded to itself (--upstream-fallback "+mode.String()+")")
		return
	}
	req.Reply = appendError(nil, "UPSTREAMDOWN owner "+o.addr+" of slot "+strconv.Itoa(req.Slot)+
		" is unreachable (--upstream-fallback "+mode.String()+")")
}

// openThrottle is Open mode's answer to CL.THROTTLE key max_burst count
// period [quantity]: allowed, limit max_burst+1, remaining limit-quantity
// (at least 0), retry_after -1, reset_after 0. ok is false for any other
// command, or arguments CL.THROTTLE would refuse.
func openThrottle(req *server.ForwardReq) ([]byte, bool) {
	a := req.Args
	if req.Unit != nil || len(a) < 5 || len(a) > 6 || !bytes.EqualFold(a[0], []byte("cl.throttle")) {
		return nil, false
	}
	burst, err := strconv.ParseInt(string(a[2]), 10, 64)
	if err != nil || burst < 0 || burst == 1<<63-1 {
		return nil, false
	}
	q := int64(1)
	if len(a) == 6 {
		if q, err = strconv.ParseInt(string(a[5]), 10, 64); err != nil || q < 0 {
			return nil, false
		}
	}
	limit := burst + 1
	b := []byte("*5\r\n:0\r\n:")
	b = strconv.AppendInt(b, limit, 10)
	b = append(b, "\r\n:"...)
	b = strconv.AppendInt(b, max(limit-q, 0), 10)
	b = append(b, "\r\n:-1\r\n:0\r\n"...)
	return b, true
}

// Unwatch implements server.ForwardSession (EXEC, DISCARD, UNWATCH,
// RESET): closing the pinned connection ends its WATCH on the owner.
func (s *session) Unwatch() {
	s.dropPin()
	s.watchLost = false
}

// dropPin closes the pinned connection (its WATCH ends on the owner).
func (s *session) dropPin() {
	if s.pin != nil {
		s.pin.close()
		s.pin, s.pinOwner = nil, nil
	}
}

// Close implements server.ForwardSession.
func (s *session) Close() {
	s.Unwatch()
	s.timer.Stop()
}
