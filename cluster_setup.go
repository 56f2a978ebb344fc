package main

import (
	"fmt"
	"log/slog"

	"github.com/celld/celld/cluster"
)

// setupCluster builds the static topology from --cluster-nodes (nil, nil
// when the flag is empty: standalone). This node is the entry equal to
// --cluster-announce, or to --addr. With persistence on, the node id is
// recorded in <dir>/cluster-myid; a different id recorded there means the
// data directory last served another address, which is logged, because the
// keys it holds may now belong to other nodes' slots (they stay readable by
// SCAN/KEYS here, and clients are sent to their new owner, which starts them
// from a full bucket: at most one bucket more granted, as after a restart
// that lost state).
func setupCluster(cfg config, log *slog.Logger) (*cluster.Topology, error) {
	if cfg.clusterNodes == "" {
		if cfg.clusterAnnounce != "" {
			return nil, fmt.Errorf("--cluster-announce needs --cluster-nodes")
		}
		return nil, nil
	}
	addrs, err := cluster.ParseNodes(cfg.clusterNodes)
	if err != nil {
		return nil, fmt.Errorf("--cluster-nodes: %w", err)
	}
	self, err := cluster.FindSelf(addrs, cfg.clusterAnnounce, cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("--cluster-nodes: %w", err)
	}
	topo, err := cluster.Static(addrs, self)
	if err != nil {
		return nil, fmt.Errorf("--cluster-nodes: %w", err)
	}
	me := topo.Self()
	if cfg.persist {
		prev, err := cluster.PersistID(cfg.dir, me.ID)
		if err != nil {
			return nil, fmt.Errorf("node id: %w", err)
		}
		if prev != "" && prev != me.ID {
			log.Warn("this data directory last served another cluster node (its announced address changed): keys of slots this node does not own stay unused until they expire",
				"previous_id", prev, "id", me.ID, "announce", me.Addr())
		}
	}
	r := me.Slots[0]
	log.Info("cluster mode", "nodes", len(addrs), "self", self, "announce", me.Addr(), "id", me.ID,
		"slots", fmt.Sprintf("%d-%d", r.First, r.Last))
	return topo, nil
}
