package repl

import (
	"bufio"
	"encoding/binary"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/celld/celld/store"
)

// leader is one term of leading: the sender goroutine that drains the
// store's effects every Gather (or at a kick) into a batch per round,
// the followers it sends them to, and the bookkeeping of what is not
// acknowledged yet.
type leader struct {
	n     *Node
	epoch uint64
	done  chan struct{}
	kick  chan struct{} // a Barrier asks for a round now
	once  sync.Once

	round atomic.Uint64 // rounds started (a round's number is its batch's seq)
	bytes atomic.Int64  // bytes queued to followers
	// rtt is a decaying maximum of the acknowledged batches' times from
	// queued to acknowledged (ns): a slower one raises it at once, each
	// later ack takes 1/32 off (a stall keeps rounds short for ~100 ms
	// after it). The sender shortens its gathering by it. Written by
	// onAck under mu.
	rtt atomic.Int64

	mu        sync.Mutex
	followers map[*peer]struct{}
	movers    map[*mover]struct{} // targets pulling slots (move.go); nil when none
	pending   []pend              // batches sent, not acknowledged by any follower, oldest first
	lastRound uint64              // the last round finished
	lastBatch uint64              // the last round that sent a batch (INFO's master_repl_offset)
	acked     uint64              // highest seq a follower acknowledged
	changed   chan struct{}       // closed (and replaced) when lastRound or acked moves
	lags      [1024]time.Duration
	nlags     int
	rate      rateMeter
}

// pend is a batch not yet acknowledged: its seq, the earliest time one
// of its effects can have been made (the later of the round before's
// start and the oldest stamp its shards took), and when it was queued.
type pend struct {
	seq    uint64
	origin time.Time
	sent   time.Time
}

func newLeader(n *Node, epoch uint64) *leader {
	return &leader{n: n, epoch: epoch, done: make(chan struct{}), kick: make(chan struct{}, 1),
		followers: map[*peer]struct{}{}, changed: make(chan struct{})}
}

func (l *leader) stop() {
	l.once.Do(func() {
		close(l.done)
		l.mu.Lock()
		for p := range l.followers {
			p.close()
		}
		for m := range l.movers {
			m.p.close()
		}
		l.mu.Unlock()
	})
}

// maxPending bounds the unacknowledged batches remembered; past it two
// neighbours merge into one (the later seq with the earlier origin), so
// lag is never under-stated.
const maxPending = 4096

// run is the sender, until stop: every tick it advances the effect log's
// clock (Store.SetReplStamp) and checks the lag bound; a round — drain,
// send — runs once Gather has passed since the last one, or at once on a
// kick (a Barrier, a slot move's seal).
func (l *leader) run() {
	t := time.NewTicker(l.n.opts.Tick)
	defer t.Stop()
	ping := time.NewTicker(100 * time.Millisecond)
	defer ping.Stop()
	// base is the zero of the stamps (stamp = time since base + 1, so
	// that 0 means unknown).
	base := time.Now()
	stamp := func(now time.Time) {
		v := int64(now.Sub(base)) + 1
		l.n.dbs.Each(func(_ int, st *store.Store) { st.SetReplStamp(v) })
	}
	stamp(base)
	prev := base // the last round's start
	swaps := l.n.dbs.Swaps()
	var buf []byte
	var rb *refBuf // the round's buffer, from batchPool; handed to the followers when sent
	for {
		kicked := false
		select {
		case <-l.done:
			return
		case <-t.C:
		case <-l.kick:
			kicked = true
		case <-ping.C:
			l.broadcast(frame(nil, framePing, nil))
			l.mu.Lock()
			l.rate.rate(time.Now(), l.bytes.Load())
			l.mu.Unlock()
			continue
		}
		start := time.Now()
		stamp(start)
		if !kicked && start.Sub(prev) < l.gather()-l.n.opts.Tick/2 { // (ticks jitter)
			l.mu.Lock()
			l.updateGateLocked(start)
			l.mu.Unlock()
			continue
		}
		seq := l.round.Add(1)
		if rb == nil {
			rb = batchPool.Get().(*refBuf)
		}
		var at int
		buf, at = startFrame(rb.b[:0], frameBatch)
		buf = binary.AppendUvarint(buf, seq)
		entries := len(buf)
		n := 0
		// origin: no effect of this round was made before the previous
		// round started, nor before the oldest stamp a shard took.
		// origin is the later of those two bounds.
		oldest, known := int64(math.MaxInt64), true
		l.n.dbs.Each(func(db int, st *store.Store) {
			k, o := st.DrainReplSince(func(c store.Change) { buf = appendEntry(buf, db, c) },
				func(key []byte, tat uint64, exp int64) { buf = appendTAT(buf, db, key, tat, exp) })
			n += k
			if k > 0 {
				known = known && o > 0
				oldest = min(oldest, o)
			}
		})
		origin := prev
		if o := base.Add(time.Duration(oldest - 1)); n > 0 && known && o.After(prev) {
			origin = o
		}
		if sw := l.n.dbs.Swaps(); sw != swaps {
			// SWAPDB moved whole databases: followers resync.
			swaps = sw
			l.mu.Lock()
			for p := range l.followers {
				p.close()
			}
			l.mu.Unlock()
		}
		l.mu.Lock()
		if n > 0 && len(l.movers) > 0 {
			l.sendMoversLocked(seq, buf[entries:])
		}
		// With MinReplicas 0 an effect waits for an ack only while a
		// follower is connected: one that connects later gets it in its
		// snapshot.
		if n > 0 && (l.n.opts.MinReplicas > 0 || len(l.followers) > 0) {
			buf = finishFrame(buf, at)
			l.lastBatch = seq
			l.pending = append(l.pending, pend{seq, origin, start})
			if len(l.pending) > maxPending {
				l.pending[1].origin = l.pending[0].origin
				l.pending = l.pending[1:]
			}
			rb.b = buf
			if k := len(l.followers); k > 0 {
				rb.refs.Store(int32(k))
				for p := range l.followers {
					p.sendShared(rb)
					l.bytes.Add(int64(len(buf)))
				}
				rb, buf = nil, nil // the followers' now; the last one recycles it
			}
		}
		if rb != nil {
			rb.b = buf // keep what the round grew
		}
		l.lastRound = seq
		l.updateGateLocked(start)
		l.notifyLocked()
		l.mu.Unlock()
		prev = start
		if rb != nil && cap(rb.b) > 1<<20 {
			rb.b = nil
		}
	}
}

// gather is how long the sender lets effects gather now: Options.Gather,
// shortened so that an effect's wait plus the last batch's round trip
// stays within half of MaxLag (a slow follower or a loaded machine makes
// rounds shorter, back to one per tick, rather than the lag bound
// refuse writes), and never under Tick.
func (l *leader) gather() time.Duration {
	o := &l.n.opts
	return max(o.Tick, min(o.Gather, o.MaxLag/2-time.Duration(l.rtt.Load())-o.Tick))
}

// updateGateLocked closes the gate while fewer followers than MinReplicas
// are synced (no replicas) or the oldest unacknowledged effect is older
// than MaxLag (lagging), and opens it again once both hold. It only moves
// the gate among open, lagging and no-replicas (compare-and-swap from the
// state it read), never out of fenced or follower.
func (l *leader) updateGateLocked(now time.Time) {
	g := int32(gateOpen)
	if min := l.n.opts.MinReplicas; min > 0 && l.syncedLocked() < min {
		g = gateNoReplicas
	} else if len(l.pending) > 0 && now.Sub(l.pending[0].origin) > l.n.opts.MaxLag {
		g = gateLagging
	}
	if l.n.lead.Load() != l {
		return
	}
	for {
		cur := l.n.gate.Load()
		if cur == g || (cur != gateOpen && cur != gateLagging && cur != gateNoReplicas) {
			return
		}
		if l.n.gate.CompareAndSwap(cur, g) {
			return
		}
	}
}

// syncedLocked counts the connected followers that hold a snapshot and
// apply the stream. Requires l.mu.
func (l *leader) syncedLocked() int {
	n := 0
	for p := range l.followers {
		if p.synced.Load() {
			n++
		}
	}
	return n
}

// dropFollower forgets p. With MinReplicas 0 and no follower left, the
// unacknowledged effects are forgotten too (the next follower gets them
// in its snapshot), so the lag bound stops refusing writes and barriers
// release: the availability choice (docs/replica-availability.md).
func (l *leader) dropFollower(p *peer) {
	l.mu.Lock()
	delete(l.followers, p)
	if l.n.opts.MinReplicas == 0 && len(l.followers) == 0 && len(l.pending) > 0 {
		l.pending = nil
		l.notifyLocked()
	}
	l.updateGateLocked(time.Now())
	l.mu.Unlock()
}

func (l *leader) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// confirmedLocked is the highest round whose effects, and all before
// them, a follower has.
func (l *leader) confirmedLocked() uint64 {
	if len(l.pending) == 0 {
		return l.lastRound
	}
	return l.pending[0].seq - 1
}

// onAck records that a follower applied everything up to seq.
func (l *leader) onAck(seq uint64) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq > l.acked {
		l.acked = seq
	}
	i := 0
	for i < len(l.pending) && l.pending[i].seq <= seq {
		r := l.rtt.Load()
		l.rtt.Store(max(int64(now.Sub(l.pending[i].sent)), r-r/32))
		l.n.lags.observe(now.Sub(l.pending[i].origin))
		l.lags[l.nlags%len(l.lags)] = now.Sub(l.pending[i].origin)
		l.nlags++
		i++
	}
	if i == 0 {
		return
	}
	l.pending = l.pending[i:]
	if len(l.pending) == 0 {
		l.pending = nil
	}
	l.updateGateLocked(now)
	l.notifyLocked()
}

// barrier waits until every effect made before the call is acknowledged.
func (l *leader) barrier(timeout time.Duration) error {
	target := l.round.Load() + 1 // the next round to start drains our writes
	select {
	case l.kick <- struct{}{}:
	default:
	}
	var timer *time.Timer
	for {
		l.mu.Lock()
		ok := l.confirmedLocked() >= target
		ch := l.changed
		l.mu.Unlock()
		if ok {
			if timer != nil {
				timer.Stop()
			}
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(timeout)
		}
		select {
		case <-ch:
		case <-l.done:
			timer.Stop()
			return ErrFenced
		case <-timer.C:
			return ErrNoAck
		}
	}
}

func (l *leader) broadcast(msg []byte) {
	l.mu.Lock()
	for p := range l.followers {
		p.send(msg)
	}
	for m := range l.movers {
		m.p.send(msg)
	}
	l.mu.Unlock()
}

func (l *leader) status(st *Status) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := range l.followers {
		if p.synced.Load() {
			st.Followers++
		}
		ps := PeerStatus{Addr: p.conn.RemoteAddr().String(), Synced: p.synced.Load(), Acked: p.acked.Load()}
		if at := p.lastAck.Load(); at != 0 {
			ps.SinceAck = now.Sub(time.Unix(0, at))
		}
		st.Peers = append(st.Peers, ps)
	}
	st.Seq, st.Acked, st.LastBatch = l.lastRound, l.acked, l.lastBatch
	if len(l.pending) > 0 {
		st.Lag = now.Sub(l.pending[0].origin)
	}
	n := min(l.nlags, len(l.lags))
	if n > 0 {
		s := slices.Clone(l.lags[:n])
		slices.Sort(s)
		st.LagP50, st.LagP99 = s[n/2], s[min(n-1, n*99/100)]
	}
	st.BytesSent = l.bytes.Load()
	st.BytesPerS = l.rate.last // updated by the sender every 100 ms
}

// serveFollower runs one follower's connection: handshake, registration
// at a round boundary, snapshot, then the stream and its acks.
func (l *leader) serveFollower(c net.Conn) {
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	t, payload, _, err := readFrame(r, nil)
	if err == nil && t == frameMoveHello && len(payload) >= len(magic) && string(payload[:len(magic)]) == magic {
		l.serveMover(c, r, payload)
		return
	}
	if err != nil || t != frameHello || len(payload) < len(magic) || string(payload[:len(magic)]) != magic {
		refuse(c, "expected a celld-repl/1 hello")
		return
	}
	d := decoder{b: payload[len(magic):]}
	theirs := d.uvarint()
	if d.err != nil {
		refuse(c, "bad hello")
		return
	}
	switch {
	case theirs < l.epoch:
		refuse(c, "stale epoch: the leader is at a newer one")
		return
	case theirs > l.epoch:
		refuse(c, "stale leader: the follower knows a newer epoch")
		go l.n.fenceStale(l, theirs)
		return
	}
	c.SetDeadline(time.Time{})
	p := &peer{conn: c, wake: make(chan struct{}, 1)}
	l.mu.Lock()
	select {
	case <-l.done:
		l.mu.Unlock()
		return
	default:
	}
	from := l.lastRound // the snapshot covers every round up to here
	l.followers[p] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.dropFollower(p)
		p.close()
	}()
	go func() { // acks
		defer p.close()
		for {
			c.SetReadDeadline(time.Now().Add(30 * time.Second)) // no ack during a long snapshot
			t, payload, _, err := readFrame(r, payload[:0])
			if err != nil || t != frameAck {
				return
			}
			d := decoder{b: payload}
			seq := d.uvarint()
			if d.err != nil {
				return
			}
			if seq >= from {
				p.synced.Store(true)
			}
			p.acked.Store(seq)
			p.lastAck.Store(time.Now().UnixNano())
			l.onAck(seq)
		}
	}()
	w := bufio.NewWriterSize(c, 256<<10)
	hello := binary.AppendUvarint(nil, l.epoch)
	if _, err := w.Write(frame(nil, frameWelcome, hello)); err != nil {
		return
	}
	if err := l.snapshot(w); err != nil {
		l.n.log.Warn("replication: snapshot to follower failed", "follower", c.RemoteAddr().String(), "err", err)
		return
	}
	if _, err := w.Write(frame(nil, frameSynced, binary.AppendUvarint(nil, from))); err != nil {
		return
	}
	if w.Flush() != nil {
		return
	}
	l.n.log.Info("replication: follower synced", "follower", c.RemoteAddr().String(), "seq", from)
	p.pump(w, l.done)
}

// snapshot writes every live key of every database as 'S' frames, one
// shard at a time (each shard lock held while its keys are encoded).
func (l *leader) snapshot(w *bufio.Writer) error {
	nowMs := time.Now().UnixMilli()
	var buf []byte
	var err error
	l.n.dbs.Each(func(db int, st *store.Store) {
		for i := 0; i < store.NumShards && err == nil; i++ {
			var at int
			buf, at = startFrame(buf[:0], frameSnapshot)
			n := 0
			st.SnapshotShard(i, nowMs, func(c store.Change) {
				buf = appendEntry(buf, db, c)
				n++
			})
			if n == 0 {
				continue
			}
			buf = finishFrame(buf, at)
			l.bytes.Add(int64(len(buf)))
			_, err = w.Write(buf)
		}
	})
	return err
}

// peer is a follower's connection as the leader sees it: a queue of frames
// its writer goroutine sends in order.
type peer struct {
	conn   net.Conn
	wake   chan struct{}
	synced atomic.Bool
	// acked is the highest seq this follower acknowledged, lastAck when
	// (unix ns): INFO's slave<n> lines.
	acked   atomic.Uint64
	lastAck atomic.Int64

	mu     sync.Mutex
	q      []queued
	spare  []queued // the previous q, reused by pump
	qbytes int
	closed bool
}

// queued is a frame waiting for a peer's writer: b, and the shared batch
// buffer it lies in (nil for a frame of its own).
type queued struct {
	b  []byte
	rb *refBuf
}

// refBuf is a round's batch buffer shared by the followers it is queued
// for: the last writer to copy it into its socket buffer returns it to
// batchPool, so the sender encodes the next rounds into reused memory
// instead of cloning each batch.
type refBuf struct {
	b    []byte
	refs atomic.Int32
}

var batchPool = sync.Pool{New: func() any { return new(refBuf) }}

// release drops one follower's reference; the last one recycles rb.
func (rb *refBuf) release() {
	if rb.refs.Add(-1) == 0 && cap(rb.b) <= 1<<20 {
		batchPool.Put(rb)
	}
}

// maxQueue bounds what waits for a slow follower: past it the follower is
// dropped (it reconnects and resyncs from a snapshot).
const maxQueue = 64 << 20

func (p *peer) send(msg []byte) { p.enqueue(queued{b: msg}) }

// sendShared queues rb's batch, for which the caller counted a reference
// for p: it is released when written, or at once when p cannot take it.
func (p *peer) sendShared(rb *refBuf) { p.enqueue(queued{b: rb.b, rb: rb}) }

func (p *peer) enqueue(m queued) {
	msg := m.b
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		if m.rb != nil {
			m.rb.release()
		}
		return
	}
	if p.qbytes+len(msg) > maxQueue {
		p.mu.Unlock()
		if m.rb != nil {
			m.rb.release()
		}
		p.close()
		return
	}
	p.q = append(p.q, m)
	p.qbytes += len(msg)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *peer) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.q = nil
		p.conn.Close()
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// pump writes queued frames until the peer closes or the term ends.
func (p *peer) pump(w *bufio.Writer, done <-chan struct{}) {
	for {
		p.mu.Lock()
		q, closed := p.q, p.closed
		p.q, p.qbytes = p.spare[:0], 0
		p.spare = nil
		p.mu.Unlock()
		if closed {
			return
		}
		for i, m := range q {
			_, err := w.Write(m.b) // copies m.b into w's buffer (or the socket)
			if m.rb != nil {
				m.rb.release()
			}
			q[i] = queued{}
			if err != nil {
				return
			}
		}
		p.mu.Lock()
		if cap(q) <= 1024 {
			p.spare = q[:0]
		}
		p.mu.Unlock()
		if len(q) > 0 {
			p.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if w.Flush() != nil {
				return
			}
		}
		select {
		case <-p.wake:
		case <-done:
			return
		}
	}
}

// rateMeter turns a running byte count into bytes per second over the
// last second or so.
type rateMeter struct {
	at    time.Time
	count int64
	last  float64
}

func (m *rateMeter) rate(now time.Time, count int64) float64 {
	if m.at.IsZero() {
		m.at, m.count = now, count
		return 0
	}
	if d := now.Sub(m.at); d >= time.Second {
		m.last = float64(count-m.count) / d.Seconds()
		m.at, m.count = now, count
	}
	return m.last
}
