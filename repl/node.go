package repl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/celld/celld/store"
)

// Ack is when a leader's write counts as replicated.
type Ack int

const (
	// Async answers at once; writes are refused (-TRYAGAIN) while the
	// oldest effect no follower has acknowledged is older than MaxLag.
	Async Ack = iota
	// Sync answers a batch of writes only once a follower acknowledged
	// them (Barrier); the MaxLag refusal applies too.
	Sync
)

// ParseAck reads "async" or "sync".
func ParseAck(s string) (Ack, error) {
	switch s {
	case "async":
		return Async, nil
	case "sync":
		return Sync, nil
	}
	return 0, fmt.Errorf("repl: ack mode %q is not async or sync", s)
}

// Options configures a Node.
type Options struct {
	// Addr is the replication listen address (host:port) a leader
	// accepts followers on.
	Addr string
	// Ack is the acknowledgement mode (Async by default).
	Ack Ack
	// MaxLag is the oldest unacknowledged effect a leader tolerates
	// before refusing writes. Default 10ms.
	MaxLag time.Duration
	// MinReplicas is how many connected, synced followers a leader needs
	// to accept writes (Redis's min-replicas-to-write): below it writes
	// are refused with -NOREPLICAS. 0 (the default) chooses availability:
	// a leader with no follower accepts writes, and the MaxLag bound
	// applies only while a follower is connected (docs/replica-availability.md).
	MinReplicas int
	// Tick is how often the leader's sender wakes: it advances the
	// effect log's clock and checks the lag bound every tick. Default 1ms.
	Tick time.Duration
	// Gather is how long the sender lets effects gather before a round
	// drains and sends them (a Barrier or a slot move's seal starts a
	// round at once): fewer, larger batches cost both sides fewer
	// wake-ups, system calls and shard visits per effect, and add up to
	// Gather to async's lag, which the MaxLag bound still caps. Default
	// MaxLag/5 (2ms for the default 10ms), at most 4ms; never under Tick.
	Gather time.Duration
	// BarrierTimeout bounds Barrier's wait (then the client's connection
	// is closed unanswered). Default 1s.
	BarrierTimeout time.Duration
	// Logger receives role changes and link errors. Default slog.Default().
	Logger *slog.Logger
}

// The gate's states (Node.gate): what a write meets.
const (
	gateOpen       = iota // leading, within the lag bound
	gateLagging           // leading, the oldest unacked effect is older than MaxLag
	gateFenced            // Fence was called
	gateFollower          // following a leader
	gateNoRole            // neither Lead nor Follow yet
	gateNoReplicas        // leading with fewer synced followers than MinReplicas
)

// Errors a write meets at the gate, their text RESP's (the server writes
// "-" + Error()).
var (
	ErrLagging  = errors.New("TRYAGAIN replication lag is above max-replica-lag; retry shortly")
	ErrFenced   = errors.New("TRYAGAIN this node is fenced: it no longer leads its shard")
	ErrReadOnly = errors.New("READONLY You can't write against a read only replica.")
	ErrNoRole   = errors.New("TRYAGAIN this node neither leads nor follows yet")
	ErrNoAck    = errors.New("repl: no follower acknowledged in time")
	// ErrNoReplicas is Redis's reply when min-replicas-to-write is not met.
	ErrNoReplicas = errors.New("NOREPLICAS Not enough good replicas to write.")
)

// Node is one celld's replication: it leads (serves writes, streams its
// effects to followers) or follows (applies a leader's stream, refuses
// client writes), as told by Lead, Follow and Fence, which implement the
// HA layer's Replicator. A Node serves one shard: the shard number is
// recorded, not interpreted.
//
// Concurrency: every method is safe for concurrent use. Gate is on the
// write path: one atomic load. Barrier blocks its caller.
type Node struct {
	dbs  *store.Databases
	opts Options
	log  *slog.Logger
	gate atomic.Int32
	// refused counts writes the gate refused while leading for lag;
	// refusedNoReplicas those refused for fewer than MinReplicas followers.
	refused, refusedNoReplicas atomic.Int64
	lead                       atomic.Pointer[leader]              // the current leader role, nil when not leading
	lags                       lagHistogram                        // every acknowledged batch's lag, across terms
	serves                     atomic.Pointer[func(slot int) bool] // SetServes (move.go)

	routed atomic.Pointer[func(context.Context) error] // SetRouted (move.go)

	imu     sync.Mutex // guards the imports (move.go)
	imports map[int64]*importer
	cmu     sync.Mutex     // guards cleared (the importers take it; imu is held while they stop)
	cleared map[int64]bool // moves whose stale keys were deleted here
	ievents chan struct{}

	mu     sync.Mutex // guards the fields below and role changes
	shard  int
	epoch  uint64
	role   string // "none", "leader", "follower", "fenced"
	ln     net.Listener
	fol    *follower
	closed bool
}

// New returns a Node over dbs with no role yet (writes are refused until
// Lead). It does not listen until Lead.
func New(dbs *store.Databases, opts Options) *Node {
	if opts.MaxLag <= 0 {
		opts.MaxLag = 10 * time.Millisecond
	}
	if opts.Tick <= 0 {
		opts.Tick = time.Millisecond
	}
	if opts.Gather <= 0 {
		opts.Gather = min(opts.MaxLag/5, 4*time.Millisecond)
	}
	opts.Gather = max(opts.Gather, opts.Tick)
	if opts.BarrierTimeout <= 0 {
		opts.BarrierTimeout = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	n := &Node{dbs: dbs, opts: opts, log: opts.Logger, role: "none", ievents: make(chan struct{}, 1)}
	n.gate.Store(gateNoRole)
	return n
}

// Gate is consulted before every write command: nil lets it run, else
// the error to answer. Cost: one atomic load when open.
func (n *Node) Gate() error {
	switch n.gate.Load() {
	case gateOpen:
		return nil
	case gateLagging:
		n.refused.Add(1)
		return ErrLagging
	case gateNoReplicas:
		n.refusedNoReplicas.Add(1)
		return ErrNoReplicas
	case gateFenced:
		return ErrFenced
	case gateFollower:
		return ErrReadOnly
	}
	return ErrNoRole
}

// Barrier returns once a follower acknowledged every effect made before
// the call (sync mode's group commit: the server calls it once per batch
// of replies that contains a write), or an error when none did within
// BarrierTimeout or the node stopped leading; the server then closes the
// connection without answering.
func (n *Node) Barrier() error {
	l := n.lead.Load()
	if l == nil {
		return ErrFenced
	}
	return l.barrier(n.opts.BarrierTimeout)
}

// Lead makes the node its shard's leader at epoch: it stops following,
// listens on Options.Addr (once) and streams every effect from now on to
// followers that connect with the same epoch, after a snapshot. Writes are
// accepted at once with MinReplicas 0 (the MaxLag bound then applies while
// a follower is connected), else once MinReplicas followers are synced.
func (n *Node) Lead(shard int, epoch uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	if l := n.lead.Load(); l != nil && l.epoch == epoch {
		return
	}
	n.stopRolesLocked()
	if n.ln == nil {
		ln, err := net.Listen("tcp", n.opts.Addr)
		if err != nil {
			n.log.Error("replication: cannot listen; not leading", "addr", n.opts.Addr, "err", err)
			n.gate.Store(gateFenced)
			n.role = "fenced"
			return
		}
		n.ln = ln
		go n.accept(ln)
	}
	n.shard, n.epoch, n.role = shard, epoch, "leader"
	n.dbs.SetRepl(true)
	l := newLeader(n, epoch)
	n.lead.Store(l)
	if n.opts.MinReplicas > 0 {
		n.gate.Store(gateNoReplicas)
	} else {
		n.gate.Store(gateOpen)
	}
	go l.run()
	n.log.Info("replication: leading", "shard", shard, "epoch", epoch, "addr", n.ln.Addr().String(), "ack", n.opts.Ack)
}

// Follow makes the node a follower at epoch of the leader whose
// replication address is leaderAddr: client writes are refused
// (-READONLY), and the node syncs from the leader (merging the snapshot
// into what it holds, largest TAT winning) and then applies its stream,
// reconnecting as needed. A leader of another epoch is refused.
func (n *Node) Follow(shard int, epoch uint64, leaderAddr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	if f := n.fol; f != nil && f.epoch == epoch && f.addr == leaderAddr {
		return
	}
	n.gate.Store(gateFollower)
	n.stopRolesLocked()
	n.stopImports()
	n.shard, n.epoch, n.role = shard, epoch, "follower"
	n.fol = newFollower(n, epoch, leaderAddr)
	go n.fol.run()
	n.log.Info("replication: following", "shard", shard, "epoch", epoch, "leader", leaderAddr)
}

// Fence stops serving writes now (the gate refuses them from this call
// on) and stops leading; a follower keeps following.
func (n *Node) Fence() {
	n.gate.Store(gateFenced)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.gate.Store(gateFenced) // again: a Lead that held mu may have opened it
	if n.role == "follower" {
		n.gate.Store(gateFollower)
		return
	}
	n.stopRolesLocked()
	n.stopImports()
	n.role = "fenced"
	n.log.Warn("replication: fenced", "epoch", n.epoch)
}

// fenceStale is Fence after a follower showed a newer epoch than ours.
func (n *Node) fenceStale(l *leader, theirs uint64) {
	if n.lead.Load() != l {
		return
	}
	n.log.Warn("replication: a follower knows a newer epoch; fencing", "ours", l.epoch, "theirs", theirs)
	n.Fence()
}

// stopRolesLocked ends the current role's goroutines. Requires n.mu.
func (n *Node) stopRolesLocked() {
	if l := n.lead.Swap(nil); l != nil {
		l.stop()
		n.dbs.SetRepl(false)
	}
	if f := n.fol; f != nil {
		n.fol = nil
		f.stop()
	}
}

// Close stops the node's role and its listener.
func (n *Node) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	n.gate.Store(gateFenced)
	n.stopRolesLocked()
	n.stopImports()
	if n.ln != nil {
		n.ln.Close()
	}
}

// Options returns the options the node was made with (defaults filled).
func (n *Node) Options() Options { return n.opts }

// ReplAddr is the address the node listens on for followers ("" before
// Lead).
func (n *Node) ReplAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ln == nil {
		return ""
	}
	return n.ln.Addr().String()
}

// accept hands each follower's connection to the current leader, or
// refuses it when the node does not lead.
func (n *Node) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if l := n.lead.Load(); l != nil {
			go l.serveFollower(c)
		} else {
			go refuse(c, "this node does not lead")
		}
	}
}

func refuse(c net.Conn, why string) {
	c.SetDeadline(time.Now().Add(time.Second))
	c.Write(frame(nil, frameRefusal, []byte(why)))
	c.Close()
}

// Status is a snapshot of the node's replication, for STATUS and metrics.
type Status struct {
	Role      string // "none", "leader", "follower", "fenced"
	Shard     int
	Epoch     uint64
	Ack       string
	Followers int // connected and synced (leader)
	Seq       uint64
	Acked     uint64        // highest sequence a follower acknowledged (leader) or applied (follower)
	Lag       time.Duration // age of the oldest unacknowledged effect now (leader)
	LagP50    time.Duration // over the last acknowledged batches (leader)
	LagP99    time.Duration
	BytesSent int64   // bytes written to followers (leader)
	BytesRecv int64   // bytes read from the leader (follower)
	BytesPerS float64 // of BytesSent, or BytesRecv, over the last second or so
	Refused   int64   // writes refused for lag (leader)
	// RefusedNoReplicas counts writes refused for fewer synced followers
	// than MinReplicas (leader).
	RefusedNoReplicas int64
	MinReplicas       int
	Leader            string // the leader's replication address (follower)
	Synced            bool   // the follower holds a snapshot and applies the stream
	// DroppedDamaged counts CL.WINDOW states from the leader that this
	// node refused as damaged and dropped the key for (follower).
	DroppedDamaged int64
	// LastBatch is the last round that sent a batch of changes (leader).
	LastBatch uint64
	// LastIO is when the follower last read from its leader (follower).
	LastIO time.Time
	// Peers are the followers connected now (leader).
	Peers []PeerStatus
	// MaxLag is Options.MaxLag.
	MaxLag time.Duration
	// LagCounts[i] counts acknowledged batches whose lag was at most
	// LagBounds[i] (cumulative, as a Prometheus histogram; the last
	// element counts them all); LagSum is their lags' sum. Across terms.
	LagCounts []uint64
	LagSum    time.Duration
}

// Status describes the node now.
func (n *Node) Status() Status {
	n.mu.Lock()
	st := Status{Role: n.role, Shard: n.shard, Epoch: n.epoch, Ack: "async"}
	if n.opts.Ack == Sync {
		st.Ack = "sync"
	}
	f := n.fol
	n.mu.Unlock()
	st.Refused, st.RefusedNoReplicas, st.MinReplicas = n.refused.Load(), n.refusedNoReplicas.Load(), n.opts.MinReplicas
	st.MaxLag = n.opts.MaxLag
	st.LagCounts, st.LagSum = n.lags.snapshot()
	if l := n.lead.Load(); l != nil {
		l.status(&st)
	}
	if f != nil {
		f.status(&st)
	}
	return st
}

// Node has the HA layer's Replicator method set (package ha declares the
// interface; repl does not import it).
var _ interface {
	Lead(shard int, epoch uint64)
	Follow(shard int, epoch uint64, leaderReplAddr string)
	Fence()
} = (*Node)(nil)
