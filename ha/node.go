package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/celld/celld/cluster"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Config is what a Node needs. Client, Cluster, NodeID, Addr, TTL and
// Apply are required.
type Config struct {
	Client  *clientv3.Client
	Cluster string // the cluster's name: its keys are under /celld/<Cluster>/
	NodeID  string // this node's id in the topology document
	// Addr is this node's announced client address (host:port), used while
	// the document does not list the node; ReplAddr its replication
	// address ("" = DefaultReplAddr(Addr)).
	Addr, ReplAddr string
	// TTL is the session lease's TTL (whole seconds, at least 2: etcd's
	// minimum with its default timing). Margin is how long before the
	// lease could expire a leader stops answering (default TTL/5, at
	// least 200 ms): it covers the time a batch in flight takes to finish
	// and the difference between this machine's clock rate and etcd's.
	TTL, Margin time.Duration
	// Apply installs a topology (server.SetTopology). Called from the
	// Node's goroutine only.
	Apply func(*cluster.Topology)
	// Replicator is told of role changes (nil: NopReplicator).
	Replicator Replicator
	Log        *slog.Logger

	// campaign (tests only; nil = e.Campaign) runs one campaign of this
	// node in shard's election: the seam fault-injection tests use to make
	// a campaign fail the way an unreachable etcd does.
	campaign func(ctx context.Context, e *concurrency.Election, sess *concurrency.Session, shard int, val string) error
}

// Node is one celld node in HA mode: its registration, its campaign for its
// shard's leadership, and the topology it derives from etcd. Start runs it
// on goroutines of its own; Close stops it. Its methods may be called from
// any goroutine.
type Node struct {
	cfg    Config
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	last *cluster.Topology // the topology last applied

	// crashed (tests only) makes the node leave as kill -9 would: no
	// resign, no revoke; its lease runs out in etcd.
	crashed atomic.Bool
}

// Bootstrap is the topology a node starts with, before it has heard from
// etcd: itself alone, serving no slot (every keyed command answers
// CLUSTERDOWN until the first topology arrives).
func Bootstrap(nodeID, addr string) (*cluster.Topology, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("ha: announced address %q: %w", addr, err)
	}
	port, _ := strconv.Atoi(ps)
	return cluster.New([]cluster.Node{{ID: ClusterID(nodeID), Host: host, Port: port}}, 0, 0)
}

// Start checks cfg and starts the node's goroutine.
func Start(cfg Config) (*Node, error) {
	if cfg.Client == nil || cfg.Cluster == "" || cfg.NodeID == "" || cfg.Apply == nil {
		return nil, errors.New("ha: Config needs Client, Cluster, NodeID and Apply")
	}
	if strings.Contains(cfg.Cluster, "/") || strings.ContainsAny(cfg.NodeID, "/ \t\r\n") {
		return nil, errors.New("ha: cluster name and node id may not contain '/' or spaces")
	}
	if cfg.TTL < 2*time.Second {
		return nil, fmt.Errorf("ha: lease TTL %v is below etcd's minimum of 2s", cfg.TTL)
	}
	if cfg.Margin <= 0 {
		cfg.Margin = max(cfg.TTL/5, 200*time.Millisecond)
	}
	if cfg.ReplAddr == "" {
		ra, err := DefaultReplAddr(cfg.Addr)
		if err != nil {
			return nil, err
		}
		cfg.ReplAddr = ra
	}
	if cfg.Replicator == nil {
		cfg.Replicator = NopReplicator{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.campaign == nil {
		cfg.campaign = func(ctx context.Context, e *concurrency.Election, _ *concurrency.Session, _ int, val string) error {
			return e.Campaign(ctx, val)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{cfg: cfg, cancel: cancel, done: make(chan struct{})}
	go n.run(ctx)
	return n, nil
}

// Close fences this node, resigns its leadership and revokes its lease (so
// another member takes over at once rather than after the TTL), then
// returns. It waits at most a few seconds for etcd.
func (n *Node) Close() {
	n.cancel()
	<-n.done
}

// Topology is the topology the node last applied (nil before the first).
func (n *Node) Topology() *cluster.Topology {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.last
}

func (n *Node) apply(t *cluster.Topology) {
	n.mu.Lock()
	n.last = t
	n.mu.Unlock()
	n.cfg.Apply(t)
}

// run is the node's life: one session after another until ctx ends. Between
// sessions it is fenced (it may have led under the lost one).
func (n *Node) run(ctx context.Context) {
	defer close(n.done)
	r := &roles{rep: n.cfg.Replicator}
	for ctx.Err() == nil {
		err := n.session(ctx, r)
		if ctx.Err() != nil {
			break
		}
		n.cfg.Log.Warn("ha: session ended; starting a new one", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	n.fenceIfLeading(r)
}

// fenceIfLeading makes this node serve nothing it serves as a leader (the
// topology it last applied carries a lease deadline) and tells the
// Replicator.
func (n *Node) fenceIfLeading(r *roles) {
	if t := n.Topology(); t != nil && !t.Deadline().IsZero() && !t.Fenced() {
		n.apply(t.AsFenced())
	}
	r.fence()
	if imp, ok := r.rep.(Importer); ok {
		imp.Import(nil)
	}
}

// roles remembers what the Replicator was last told, so each change is
// told once.
type roles struct {
	rep    Replicator
	state  string // "lead", "follow", "fenced" or ""
	shard  int
	epoch  uint64
	leader string
}

func (r *roles) lead(shard int, epoch uint64) {
	if r.state != "lead" || r.shard != shard || r.epoch != epoch {
		r.state, r.shard, r.epoch = "lead", shard, epoch
		r.rep.Lead(shard, epoch)
	}
}

func (r *roles) follow(shard int, epoch uint64, addr string) {
	if r.state != "follow" || r.shard != shard || r.epoch != epoch || r.leader != addr {
		r.state, r.shard, r.epoch, r.leader = "follow", shard, epoch, addr
		r.rep.Follow(shard, epoch, addr)
	}
}

func (r *roles) fence() {
	if r.state == "lead" {
		r.state = "fenced"
		r.rep.Fence()
	}
}

// view is what a node knows of etcd at one revision.
type view struct {
	doc     *Doc
	docRev  int64             // the document's mod revision
	leaders map[int]leaderKey // shard → its leader
	rev     int64
}

type leaderKey struct {
	id  string
	rev int64 // create revision: the epoch
}

// registration is the value of nodes/<id>.
type registration struct {
	Addr     string `json:"addr"`
	ReplAddr string `json:"repl_addr"`
	TTLMs    int64  `json:"ttl_ms"`
	// DocRev is the mod revision of the topology document this node
	// routes by: `celld cluster move-slots` waits for every live node to
	// report the document that takes the slots away from their old shard
	// before it gives them to the new one.
	DocRev int64 `json:"doc_rev"`
	// Imports is the progress of the slot moves this node pulls as the
	// target shard's leader (move.go): move-slots waits on it.
	Imports []ImportState `json:"imports,omitempty"`
}

// session is one lease's life: grant, register, watch, campaign, keep the
// lease alive and fence by its deadline. It returns when the lease is lost,
// etcd contradicts our leadership, or ctx ends (then it resigns and
// revokes).
func (n *Node) session(ctx context.Context, r *roles) error {
	cfg := n.cfg
	cli := cfg.Client
	opTimeout := cfg.TTL / 3

	// The lease: its deadline counts from before the grant was sent.
	t0 := time.Now()
	gctx, gcancel := context.WithTimeout(ctx, opTimeout)
	grant, err := cli.Grant(gctx, int64(cfg.TTL/time.Second))
	gcancel()
	if err != nil {
		return fmt.Errorf("grant: %w", err)
	}
	ttl := time.Duration(grant.TTL) * time.Second
	deadline := t0.Add(ttl - cfg.Margin)
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	sess, err := concurrency.NewSession(cli, concurrency.WithLease(grant.ID), concurrency.WithContext(sctx))
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	var campaignCancel context.CancelFunc = func() {}
	var elect *concurrency.Election
	defer func() {
		campaignCancel()
		// Fence first, then resign and revoke: another member takes over
		// now rather than after the TTL, and never while this one still
		// serves. Bounded: etcd may be down.
		n.fenceIfLeading(r)
		if n.crashed.Load() {
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if elect != nil {
			elect.Resign(cctx)
		}
		cli.Revoke(cctx, grant.ID)
		cancel()
	}()
	imp, _ := cfg.Replicator.(Importer)
	var impEvents <-chan struct{}
	if imp != nil {
		impEvents = imp.ImportEvents()
	}
	reported := ""
	register := func(docRev int64) error {
		reg := registration{Addr: cfg.Addr, ReplAddr: cfg.ReplAddr, TTLMs: ttl.Milliseconds(), DocRev: docRev}
		if imp != nil {
			reg.Imports = imp.ImportStates()
			sort.Slice(reg.Imports, func(i, j int) bool { return reg.Imports[i].ID < reg.Imports[j].ID })
		}
		b, _ := json.Marshal(reg)
		if string(b) == reported {
			return nil
		}
		pctx, pcancel := context.WithTimeout(ctx, opTimeout)
		_, err := cli.Put(pctx, nodeKey(cfg.Cluster, cfg.NodeID), string(b), clientv3.WithLease(grant.ID))
		pcancel()
		if err == nil {
			reported = string(b)
		}
		return err
	}
	if err := register(0); err != nil {
		return fmt.Errorf("register: %w", err)
	}

	// Keepalives: each success moves the deadline to its send time + TTL -
	// margin; a lost lease ends the session.
	kaOK := make(chan time.Time, 1)
	lost := make(chan error, 1)
	go func() {
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
			}
			t := time.Now()
			kctx, cancel := context.WithTimeout(sctx, opTimeout)
			_, err := cli.KeepAliveOnce(kctx, grant.ID)
			cancel()
			switch {
			case err == nil:
				select {
				case <-kaOK:
				default:
				}
				kaOK <- t
			case errors.Is(err, rpctypes.ErrLeaseNotFound) || strings.Contains(err.Error(), "requested lease not found"):
				lost <- err
				return
			}
		}
	}()

	// Watch everything of the cluster; any event means "re-read".
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	go func() {
		for sctx.Err() == nil {
			wch := cli.Watch(clientv3.WithRequireLeader(sctx), prefix(cfg.Cluster), clientv3.WithPrefix())
			for resp := range wch {
				if resp.Err() != nil {
					break
				}
				notify()
			}
			notify() // the watch broke: re-read when it comes back
			select {
			case <-sctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	type win struct {
		shard int
		e     *concurrency.Election
	}
	won := make(chan win, 1)
	// campaignErr: a campaign that ended in an error (etcd unreachable
	// while it waited) rather than a win or our own cancel. Its key may
	// still be in etcd and later be named leader with no goroutine left to
	// say so: the session starts over instead, campaigning anew.
	campaignErr := make(chan error, 1)
	campaignShard := -1
	var v *view
	leading := false // we won our shard's election in this session
	var leadEpoch int64
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	refresh := time.NewTicker(ttl) // re-read even without events (a broken watch)
	defer refresh.Stop()
	notify()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sess.Done():
			return errors.New("session lease ended")
		case err := <-lost:
			return fmt.Errorf("lease lost: %w", err)
		case err := <-campaignErr:
			return fmt.Errorf("campaign failed: %w", err)
		case t := <-kaOK:
			deadline = t.Add(ttl - cfg.Margin)
			timer.Reset(time.Until(deadline))
		case <-timer.C:
			// No keepalive confirmed in time: fence (publish below).
		case <-changed:
			rctx, cancel := context.WithTimeout(ctx, opTimeout)
			nv, err := n.read(rctx)
			cancel()
			if err != nil {
				cfg.Log.Debug("ha: read", "err", err)
				break
			}
			v = nv
		case <-refresh.C:
			notify()
			continue
		case <-impEvents:
			// An import's state changed: report it (below).
		case w := <-won:
			if w.shard != campaignShard { // a campaign we had given up on won
				rctx, cancel := context.WithTimeout(ctx, opTimeout)
				w.e.Resign(rctx)
				cancel()
				break
			}
			elect = w.e // only the goroutine that won used it: no race
			leading, leadEpoch = true, w.e.Rev()
		}
		if v == nil {
			continue
		}
		// Campaign in our shard (again, if the document moved us).
		myShard, _ := v.doc.Find(cfg.NodeID)
		if myShard != campaignShard {
			if leading {
				return errors.New("this node's shard changed while it led: starting over")
			}
			campaignCancel()
			campaignShard = myShard
			if myShard >= 0 {
				cctx, cc := context.WithCancel(sctx)
				campaignCancel = cc
				e := concurrency.NewElection(sess, electionKey(cfg.Cluster, myShard))
				go func(shard int) {
					err := cfg.campaign(cctx, e, sess, shard, cfg.NodeID)
					if err == nil {
						select {
						case won <- win{shard, e}:
						case <-sctx.Done():
						}
						return
					}
					if cctx.Err() == nil {
						select {
						case campaignErr <- err:
						default:
						}
					}
				}(myShard)
			}
		}
		if leading {
			if l, ok := v.leaders[myShard]; ok && (l.id != cfg.NodeID || l.rev != leadEpoch) {
				return fmt.Errorf("etcd names %s (epoch %d) leader of shard %d, not this node (epoch %d)", l.id, l.rev, myShard, leadEpoch)
			}
			// Our own key may not be in v yet (an older read): we won,
			// so it is ours.
			v.leaders[myShard] = leaderKey{id: cfg.NodeID, rev: leadEpoch}
		}
		topo, err := n.build(v)
		if err != nil {
			cfg.Log.Error("ha: topology", "err", err)
			continue
		}
		switch {
		case leading && time.Now().Before(deadline):
			r.lead(myShard, uint64(leadEpoch))
			n.apply(topo.WithDeadline(deadline))
		case leading:
			n.apply(topo.WithDeadline(deadline).AsFenced())
			r.fence()
		case len(topo.Self().Slots) > 0:
			// etcd names this node leader, but not in this session's
			// election as far as this goroutine knows yet (its campaign's
			// result is on its way, or the key is a previous session's,
			// about to expire): serve nothing until it is confirmed.
			n.apply(topo.AsFenced())
			r.fence()
		default:
			if rm := topo.ReplicaOf(); rm != nil && myShard >= 0 {
				r.fence()
				l := v.leaders[myShard]
				_, m := v.doc.Find(l.id)
				r.follow(myShard, uint64(l.rev), m.ReplAddr)
			}
			n.apply(topo)
		}
		if imp != nil {
			var tasks []ImportTask
			if leading && time.Now().Before(deadline) {
				tasks = importTasks(v, myShard)
			}
			imp.Import(tasks)
		}
		if err := register(v.docRev); err != nil {
			cfg.Log.Debug("ha: report the document applied", "err", err)
		}
	}
}

// read loads the document and the leaders of every shard in one request.
func (n *Node) read(ctx context.Context) (*view, error) {
	resp, err := n.cfg.Client.Get(ctx, prefix(n.cfg.Cluster), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	v := &view{leaders: map[int]leaderKey{}, rev: resp.Header.Revision}
	lp := leaderPrefix(n.cfg.Cluster)
	tk := topologyKey(n.cfg.Cluster)
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		switch {
		case k == tk:
			d, err := ParseDoc(kv.Value)
			if err != nil {
				return nil, err
			}
			v.doc, v.docRev = d, kv.ModRevision
		case strings.HasPrefix(k, lp):
			shardStr, _, _ := strings.Cut(k[len(lp):], "/")
			shard, err := strconv.Atoi(shardStr)
			if err != nil {
				continue
			}
			if cur, ok := v.leaders[shard]; !ok || kv.CreateRevision < cur.rev {
				v.leaders[shard] = leaderKey{id: string(kv.Value), rev: kv.CreateRevision}
			}
		}
	}
	if v.doc == nil {
		return nil, ErrNoDoc
	}
	return v, nil
}

// build turns a view into the topology this node routes by: per shard, the
// leader is the primary of the shard's slots (its epoch the leader key's
// revision) and the other members are its replicas; a shard without a
// leader (or whose leader is not a member) lists its members as primaries
// without slots, so its slots are unowned (CLUSTERDOWN) until one is
// elected.
func (n *Node) build(v *view) (*cluster.Topology, error) {
	var nodes []cluster.Node
	self := -1
	var epoch uint64
	add := func(m Member, nd cluster.Node) error {
		host, ps, err := net.SplitHostPort(m.Addr)
		if err != nil {
			return err
		}
		nd.ID, nd.Host = ClusterID(m.ID), host
		nd.Port, _ = strconv.Atoi(ps)
		if m.ID == n.cfg.NodeID {
			self = len(nodes)
		}
		nodes = append(nodes, nd)
		return nil
	}
	for i, sh := range v.doc.Shards {
		l, ok := v.leaders[i]
		if ok {
			if _, m := v.doc.Find(l.id); m == nil {
				ok = false
			} else if si, _ := v.doc.Find(l.id); si != i {
				ok = false
			}
		}
		if ok {
			epoch = max(epoch, uint64(l.rev))
		}
		members := append([]Member(nil), sh.Members...)
		sort.SliceStable(members, func(a, b int) bool { return ok && members[a].ID == l.id && members[b].ID != l.id })
		for _, m := range members {
			nd := cluster.Node{}
			switch {
			case ok && m.ID == l.id:
				nd.Slots, nd.Epoch = sh.Slots, int(l.rev)
			case ok:
				nd.Role, nd.MasterID, nd.Epoch = cluster.RoleReplica, ClusterID(l.id), int(l.rev)
			}
			if err := add(m, nd); err != nil {
				return nil, err
			}
		}
	}
	if self < 0 {
		if err := add(Member{ID: n.cfg.NodeID, Addr: n.cfg.Addr}, cluster.Node{}); err != nil {
			return nil, err
		}
	}
	return cluster.New(nodes, self, epoch)
}
