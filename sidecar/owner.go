package sidecar

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// owner is one upstream node: its reachability (breaker), its pool of
// multiplexed connections per protocol version, and its latency.
type owner struct {
	addr string
	id   int // order of creation: an index for per-loop tables (loop.go)
	sc   *Sidecar
	br   breaker
	lat  histogram
	next atomic.Uint32
	// gen counts the owner's falls (up → down): an event loop's
	// connection dialled before the last fall is not used again
	// (loop.go), since the owner may have restarted meanwhile.
	gen atomic.Uint64
	// probing: a probe goroutine runs (startProbe); at most one.
	probing atomic.Bool
	// refusedAt is when the owner's current run of refusals began
	// (session.refusedByOwner; unix ns), 0 when its last reply was not
	// one.
	refusedAt atomic.Int64
	// unlistedAt is when a topology read first found the owner out of
	// the topology and no redirect target (zero while listed): it is
	// dropped ownerLinger after (Sidecar.sweepUnlistedLocked). Sidecar.mu.
	unlistedAt time.Time
	// self: the owner is at an address this sidecar listens on
	// (self.go); its breaker stays down and it is never probed.
	self atomic.Bool

	mu sync.Mutex // guards conns and dbConns
	// conns are database 0's pools, by poolIndex (RESP2/RESP3, decision
	// or bulk lane: bulk.go): PoolSize each, nil until first used.
	conns [4][]*muxConn
	// dbConns are the pools of the other databases a client SELECTed
	// (a plain upstream only), created on first use.
	dbConns map[int]*[4][]*muxConn
}

// errOverload: every connection to the owner has MaxInFlight replies
// awaited for longer than the timeout.
var errOverload = errors.New("sidecar: upstream connections full")

// errDown: the owner went down while a session waited to use it.
var errDown = errors.New("sidecar: upstream owner down")

// poolIndex is the index in owner.conns of the pool for a protocol
// version and lane.
func poolIndex(resp3, bulk bool) int {
	p := 0
	if resp3 {
		p = 1
	}
	if bulk {
		p += 2
	}
	return p
}

// conn returns a live connection of the pool of database db (of the bulk
// lane when bulk), dialling it if needed. It waits at most until deadline
// for one with room (MaxInFlight).
func (o *owner) conn(resp3, bulk bool, db int, deadline time.Time) (*muxConn, error) {
	p := poolIndex(resp3, bulk)
	for {
		i := int(o.next.Add(1)) % o.sc.cfg.PoolSize
		o.mu.Lock()
		if !o.br.isUp() {
			// Another session's dial failed while this one waited for
			// the lock: do not dial again (a dropped SYN costs the
			// whole timeout).
			o.mu.Unlock()
			return nil, errDown
		}
		pool := &o.conns
		if db != 0 {
			pool = o.dbPoolLocked(db)
		}
		m := pool[p][i]
		if m == nil || m.broken() {
			var err error
			opts := o.sc.dialOpts(resp3)
			opts.db = db
			m, err = dial(o.addr, opts, o.failed)
			if err != nil {
				o.mu.Unlock()
				return nil, err
			}
			pool[p][i] = m
		}
		o.mu.Unlock()
		if m.inFlight() < o.sc.cfg.MaxInFlight { // a broken m fails the send: the caller falls back
			return m, nil
		}
		if time.Now().After(deadline) {
			return nil, errOverload
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// failed is called when a connection breaks, or a dial, send or reply
// fails or times out: the owner goes down, its connections are closed and
// the prober starts.
func (o *owner) failed(err error) {
	o.sc.stats.UpstreamErrors.Add(1)
	if !o.br.fail(time.Now(), err) {
		return
	}
	o.gen.Add(1)
	o.sc.log.Warn("upstream owner unreachable: fallback decides its keys", "owner", o.addr,
		"fallback", o.sc.cfg.Fallback.String(), "err", err)
	o.closeConns(false)
	o.startProbe()
}

// startProbe starts the owner's probe unless one runs or the sidecar is
// closing. Called when the owner falls, and by refresh for every owner
// of a new topology that is down (a probe that ended because its owner
// had left the topology may have raced the read that lists it again).
func (o *owner) startProbe() {
	if o.self.Load() || !o.probing.CompareAndSwap(false, true) {
		return
	}
	if !o.sc.goTracked() { // not once the sidecar is closing
		o.probing.Store(false)
		return
	}
	go o.probe()
}

// refreshWhileDown is how often the topology is read again while an
// owner of a cluster upstream is down: an HA shard (docs/ha.md) elects a
// new leader within its lease TTL, and CLUSTER SLOTS of any live node then
// names it; reading it this often lets forwarding resume to the new
// leader within about this long of its election, where the periodic
// refresh (10 s) or a probe of the dead address (which never succeeds)
// would not. A refresh is one dial and one CLUSTER SLOTS.
const refreshWhileDown = 100 * time.Millisecond

// probe dials the owner with backoff until it answers (then forwarding
// resumes), the owner has left the topology, or the sidecar closes. With a
// cluster upstream it also reads the topology every refreshWhileDown
// meanwhile: the slots may have moved to another node (an HA failover),
// which forwarding then takes at once.
//
// An owner that left the topology while down (its slots moved: an old
// leader whose address does not come back, a node removed) is probed no
// more and forgotten (Sidecar.forget): before, each such owner kept a
// goroutine dialling it every second for the sidecar's life, and the
// owners map kept it, so that every failover to a new address (a
// rescheduled pod, a hostile upstream naming new nodes) added one for
// good. A later topology that names the address again gets a fresh owner.
func (o *owner) probe() {
	defer o.sc.wg.Done()
	for {
		wait := o.br.wait(time.Now())
		in := o.sc.listed(o)
		if o.self.Load() { // marked self while it probed: never dialled again
			o.probing.Store(false)
			if !in {
				o.sc.forget(o)
			}
			return
		}
		if in && o.sc.topo.Load().cluster {
			wait = min(wait, refreshWhileDown)
		}
		if !in || o.br.isUp() {
			// Out of the topology (or up): end, unless the owner was
			// listed (or fell) again meanwhile, whose startProbe found
			// this probe still running (set-then-check on both sides).
			o.probing.Store(false)
			if o.br.isUp() || !o.sc.listed(o) || !o.probing.CompareAndSwap(false, true) {
				if !o.br.isUp() {
					o.sc.forget(o)
				}
				return
			}
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-o.sc.closed:
			t.Stop()
			o.probing.Store(false)
			return
		case <-t.C:
		}
		if t := o.sc.topo.Load(); t.cluster && !o.br.isUp() && t.has(o) {
			o.sc.triggerRefresh()
		}
		if !o.br.probeDue(time.Now()) {
			continue
		}
		m, err := dial(o.addr, o.sc.dialOpts(false), nil)
		if err == nil {
			m.close()
		}
		if err == nil && o.self.Load() { // marked self while it dialled
			err = errSelf
		}
		o.br.probeResult(time.Now(), err == nil, err)
		if err == nil {
			o.sc.log.Info("upstream owner answers again: forwarding resumes", "owner", o.addr)
			o.sc.triggerRefresh() // the loop's top then ends the probe
		}
	}
}

// dbPoolLocked returns database db's pools, creating them.
func (o *owner) dbPoolLocked(db int) *[4][]*muxConn {
	pool := o.dbConns[db]
	if pool == nil {
		if o.dbConns == nil {
			o.dbConns = map[int]*[4][]*muxConn{}
		}
		pool = new([4][]*muxConn)
		for p := range pool {
			pool[p] = make([]*muxConn, o.sc.cfg.PoolSize)
		}
		o.dbConns[db] = pool
	}
	return pool
}

// closeConns closes the owner's pooled connections: those of the bulk
// lanes too when bulk, else they are left to end by themselves (a bulk
// reply may still stream in on one after a decision's timeout took the
// owner down; a broken one is replaced when next used).
func (o *owner) closeConns(bulk bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	closeAll := func(pool *[4][]*muxConn) {
		for p := range pool {
			if p >= 2 && !bulk {
				continue
			}
			for i, m := range pool[p] {
				if m != nil {
					m.close()
					pool[p][i] = nil
				}
			}
		}
	}
	closeAll(&o.conns)
	for _, pool := range o.dbConns {
		closeAll(pool)
	}
}

// latencyBounds are the upper bounds of the latency histogram's buckets:
// on an event loop, one forwarded command, queued to reply (loop.go); on
// the blocking path, one owner's share of a pipeline, send to last reply.
var latencyBounds = []time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second,
}

// histogram counts latencies in latencyBounds' buckets (the last counts
// everything above); atomic, safe for concurrent use.
type histogram struct {
	counts [14]atomic.Int64
	sumNs  atomic.Int64
}

func (h *histogram) observe(d time.Duration) {
	i := 0
	for i < len(latencyBounds) && d > latencyBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

// Histogram is a snapshot: Counts[i] observations at or below Bounds[i]
// (not cumulative), the last one above every bound.
type Histogram struct {
	Bounds []time.Duration
	Counts []int64
	Sum    time.Duration
}

func (h *histogram) snapshot() Histogram {
	s := Histogram{Bounds: latencyBounds, Counts: make([]int64, len(h.counts)), Sum: time.Duration(h.sumNs.Load())}
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	return s
}
