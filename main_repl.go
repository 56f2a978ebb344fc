package main

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/celld/celld/config"
	"github.com/celld/celld/metrics"
	"github.com/celld/celld/repl"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// Static replication wiring (docs/replication.md): --replication yes makes
// this node lead its shard at epoch 1; --replicate-from HOST:PORT makes it
// follow that leader at epoch 1. The HA layer drives the same repl.Node
// through Lead/Follow/Fence instead; CELLD.REPL does so by hand (tests,
// operators).

// replNode is the node's replication, nil when off (CELLD.REPL reads it).
var replNode atomic.Pointer[repl.Node]

// replAddr is cfg's replication address: --repl-addr, or the client port
// + 10000 on --addr's host.
func replAddr(cfg *config.Config) (string, error) {
	if cfg.ReplAddr != "" {
		return cfg.ReplAddr, nil
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return "", fmt.Errorf("--repl-addr: cannot derive it from --addr %q: %w", cfg.Addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p == 0 || p+10000 > 65535 {
		return "", fmt.Errorf("--repl-addr: cannot derive it from --addr %q (port + 10000); set it", cfg.Addr)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+10000)), nil
}

// newReplication builds the node's replication when configured, hooks it
// into srvCfg (the write gate; the reply barrier in sync mode) and takes
// the static role. nil, nil when replication is off. Call it after the
// restore: leading starts the effect log from the restored state.
func newReplication(cfg *config.Config, st *store.Store, srvCfg *server.Config, log *slog.Logger) (*repl.Node, error) {
	if cfg.Etcd != "" {
		if cfg.Replication || cfg.ReplicateFrom != "" {
			return nil, fmt.Errorf("--replication and --replicate-from are static roles; with --etcd the elections give each node its role")
		}
		// HA mode: no role until the elections give one (main_ha.go's
		// newReplicator hands this node to them).
		return newReplNode(cfg, st, srvCfg, log)
	}
	if !cfg.Replication && cfg.ReplicateFrom == "" {
		return nil, nil
	}
	n, err := newReplNode(cfg, st, srvCfg, log)
	if err != nil {
		return nil, err
	}
	if cfg.ReplicateFrom != "" {
		n.Follow(0, 1, cfg.ReplicateFrom)
	} else {
		n.Lead(0, 1)
		if n.ReplAddr() == "" {
			n.Close()
			return nil, fmt.Errorf("--repl-addr: cannot listen on %s", n.Options().Addr)
		}
	}
	return n, nil
}

// newReplNode builds the node's replication with no role yet (writes are
// refused until Lead) and hooks it into srvCfg: the write gate, and the
// reply barrier in sync mode. The HA layer's wiring calls it and hands the
// node (its Lead, Follow and Fence) to the elections; newReplication does
// the static roles. Call it after the restore.
func newReplNode(cfg *config.Config, st *store.Store, srvCfg *server.Config, log *slog.Logger) (*repl.Node, error) {
	dbs, err := store.Group(st, cfg.Databases)
	if err != nil {
		return nil, err
	}
	ack, err := repl.ParseAck(cfg.ReplicaAck)
	if err != nil {
		return nil, err
	}
	addr, err := replAddr(cfg)
	if err != nil {
		return nil, err
	}
	n := repl.New(dbs, repl.Options{Addr: addr, Ack: ack, MaxLag: cfg.MaxReplicaLag, MinReplicas: cfg.MinReplicas, Logger: log})
	srvCfg.WriteGate = n.Gate
	srvCfg.ReplicationInfo = n.Info
	if ack == repl.Sync {
		srvCfg.ReplyBarrier = n.Barrier
	}
	replNode.Store(n)
	return n, nil
}

func init() {
	server.Register(server.Command{Name: "celld.repl", Arity: -2, Flags: "admin noscript loading stale",
		ACL: "admin slow dangerous", Group: "server", Since: "0.9.0",
		Summary: "Replication: STATUS, or take a role by hand: LEAD epoch, FOLLOW epoch host:port, FENCE.",
		Run:     cmdRepl})
}

// cmdRepl is CELLD.REPL STATUS | LEAD epoch | FOLLOW epoch host:port | FENCE.
func cmdRepl(x *server.Ctx) {
	n := replNode.Load()
	if n == nil {
		x.Error("ERR replication is off (--replication, --replicate-from)")
		return
	}
	args := x.Args()
	epoch := func() (uint64, bool) {
		e, err := strconv.ParseUint(string(args[2]), 10, 64)
		if err != nil || e == 0 {
			x.Error("ERR epoch must be a positive integer")
			return 0, false
		}
		return e, true
	}
	switch sub := strings.ToLower(string(args[1])); {
	case sub == "status" && len(args) == 2:
		st := n.Status()
		var b strings.Builder
		fmt.Fprintf(&b, "role:%s\r\nshard:%d\r\nepoch:%d\r\nack:%s\r\n", st.Role, st.Shard, st.Epoch, st.Ack)
		fmt.Fprintf(&b, "followers:%d\r\nseq:%d\r\nacked:%d\r\n", st.Followers, st.Seq, st.Acked)
		fmt.Fprintf(&b, "lag_us:%d\r\nlag_p50_us:%d\r\nlag_p99_us:%d\r\n", st.Lag.Microseconds(), st.LagP50.Microseconds(), st.LagP99.Microseconds())
		fmt.Fprintf(&b, "bytes_sent:%d\r\nbytes_received:%d\r\nbytes_per_sec:%.0f\r\nrefused_writes:%d\r\n", st.BytesSent, st.BytesRecv, st.BytesPerS, st.Refused)
		fmt.Fprintf(&b, "min_replicas:%d\r\nrefused_no_replicas:%d\r\n", st.MinReplicas, st.RefusedNoReplicas)
		fmt.Fprintf(&b, "leader:%s\r\nsynced:%t\r\nrepl_addr:%s\r\n", st.Leader, st.Synced, n.ReplAddr())
		fmt.Fprintf(&b, "dropped_damaged:%d\r\n", st.DroppedDamaged)
		x.BulkString(b.String())
	case sub == "lead" && len(args) == 3:
		if e, ok := epoch(); ok {
			n.Lead(0, e)
			x.OK()
		}
	case sub == "follow" && len(args) == 4:
		if e, ok := epoch(); ok {
			n.Follow(0, e, string(args[3]))
			x.OK()
		}
	case sub == "fence" && len(args) == 2:
		n.Fence()
		x.OK()
	default:
		x.Error("ERR usage: CELLD.REPL STATUS | LEAD epoch | FOLLOW epoch host:port | FENCE")
	}
}

// attachRepl exports the node's replication (when on) as Prometheus
// series: metrics/replication.go.
func (ms *metricsService) attachRepl() {
	n := replNode.Load()
	if ms == nil || n == nil {
		return
	}
	ms.e.SetReplication(func() metrics.Replication {
		st := n.Status()
		r := metrics.Replication{Role: st.Role, Epoch: st.Epoch, Followers: st.Followers,
			Offset: st.LastBatch, AckedOffset: st.Acked, LagSeconds: st.Lag.Seconds(),
			LagBuckets: map[float64]uint64{}, LagSum: st.LagSum.Seconds(),
			RefusedLag: st.Refused, RefusedMin: st.RefusedNoReplicas,
			SentBytes: st.BytesSent, RecvBytes: st.BytesRecv, Synced: st.Synced}
		for i, b := range repl.LagBounds {
			r.LagBuckets[b.Seconds()] = st.LagCounts[i]
		}
		r.LagCount = st.LagCounts[len(st.LagCounts)-1]
		if st.Role == "follower" {
			r.Offset = st.Acked // applied
		}
		return r
	})
}
