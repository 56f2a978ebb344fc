package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/config"
	"github.com/celld/celld/ha"
	"github.com/celld/celld/repl"
	"github.com/celld/celld/server"
)

// HA mode (--etcd, docs/ha.md): the topology and the shards' leadership
// live in etcd; package ha turns them into the topology the server routes
// by (server.SetTopology). `celld cluster ...` changes the document.

// haSubcommand runs `celld cluster ...` (the topology tool) when args start
// with "cluster"; ok is false otherwise and main parses flags as usual.
func haSubcommand(args []string) (code int, ok bool) {
	if len(args) == 0 || args[0] != "cluster" {
		return 0, false
	}
	return ha.CLI(args[1:], os.Stdout, os.Stderr, os.Getenv), true
}

// newReplicator is what ha tells of role changes: the node's replication
// (main_repl.go's newReplication built it, with no role, for --etcd), so a
// new leader streams to its replicas and a replica follows its leader.
func newReplicator(cfg *config.Config, srv *server.Server, log *slog.Logger) ha.Replicator {
	if n := replNode.Load(); n != nil {
		// A source's seal waits until this server routes none of the
		// moved slots (repl/move.go).
		n.SetServes(func(slot int) bool {
			t := srv.Topology()
			return t != nil && t.Owns(slot)
		})
		// ...and until every command it routed by an older topology
		// has made its store writes (server/routeseal.go).
		n.SetRouted(srv.WaitRouted)
		return haImporter{n}
	}
	log.Warn("HA mode without replication: a new leader decides from its own state")
	return ha.NopReplicator{}
}

// haAnnounce is this node's announced client address in HA mode.
func haAnnounce(cfg *config.Config) string {
	if cfg.ClusterAnnounce != "" {
		return cfg.ClusterAnnounce
	}
	return cfg.Addr
}

// clusterOrHATopology is clusterTopology, or in HA mode the bootstrap
// topology (this node alone, serving nothing until etcd has been heard).
func clusterOrHATopology(cfg *config.Config) (*cluster.Topology, error) {
	if cfg.Etcd == "" {
		return clusterTopology(cfg)
	}
	switch {
	case cfg.ClusterNodes != "":
		return nil, errors.New("--etcd and --cluster-nodes exclude each other (HA or static cluster mode)")
	case cfg.HACluster == "" || cfg.NodeID == "":
		return nil, errors.New("--etcd needs --cluster and --node-id (env CELLD_CLUSTER, CELLD_NODE_ID)")
	}
	topo, err := ha.Bootstrap(cfg.NodeID, haAnnounce(cfg))
	if err != nil {
		return nil, fmt.Errorf("--etcd: %w (set --cluster-announce to a dialable host:port)", err)
	}
	return topo, nil
}

// startHA connects to etcd and starts this node's registration, campaign
// and topology watch (nil, nil when HA is off).
func startHA(cfg *config.Config, srv *server.Server, log *slog.Logger) (*ha.Node, error) {
	if cfg.Etcd == "" {
		return nil, nil
	}
	cli, err := ha.NewClient(cfg.Etcd)
	if err != nil {
		return nil, fmt.Errorf("--etcd: %w", err)
	}
	n, err := ha.Start(ha.Config{
		Client: cli, Cluster: cfg.HACluster, NodeID: cfg.NodeID,
		Addr: haAnnounce(cfg), ReplAddr: cfg.ReplAddr, TTL: cfg.HALeaseTTL,
		Apply: srv.SetTopology, Replicator: newReplicator(cfg, srv, log), Log: log,
	})
	if err != nil {
		cli.Close()
		return nil, err
	}
	log.Info("HA mode", "etcd", cfg.Etcd, "cluster", cfg.HACluster, "node_id", cfg.NodeID, "lease_ttl", cfg.HALeaseTTL)
	return n, nil
}

// stopHA fences this node and hands its leadership over (resign, revoke)
// before the server drains, so clients move to the new leader at once. It
// waits for that until by at most: with etcd unreachable ha.Node.Close
// waits up to 2 s for it, and SIGTERM must exit within --shutdown-grace
// (TestProcessHASIGTERMWithinGrace). A step-down cut short leaves the
// lease to expire by itself; the server's lease deadline check keeps the
// node from deciding past it meanwhile. Called once, from main.
func stopHA(n *ha.Node, by time.Time, log *slog.Logger) {
	if n == nil {
		return
	}
	done := make(chan struct{})
	go func() { n.Close(); close(done) }()
	t := time.NewTimer(max(time.Until(by), 0))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		log.Warn("HA: stepping down (resign, revoke the lease) did not finish within a quarter of --shutdown-grace (etcd unreachable?); " +
			"going on with the shutdown: the lease expires by itself after its TTL")
	}
}

// haImporter is the node's replication as ha's Importer too: slot moves
// (docs/ha-slot-moves.md) pulled by the target shard's leader.
type haImporter struct{ *repl.Node }

func (h haImporter) Import(tasks []ha.ImportTask) {
	out := make([]repl.ImportTask, len(tasks))
	for i, t := range tasks {
		out[i] = repl.ImportTask{ID: t.ID, First: t.First, Last: t.Last, Source: t.Source, Epoch: t.Epoch, Final: t.Final}
	}
	h.Node.Import(out)
}

func (h haImporter) ImportStates() []ha.ImportState {
	var out []ha.ImportState
	for _, s := range h.Node.ImportStates() {
		out = append(out, ha.ImportState{ID: s.ID, State: s.State, Keys: s.Keys, CopyMs: s.CopyMs})
	}
	return out
}
