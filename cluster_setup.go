package main

import (
	"fmt"
	"log/slog"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/config"
)

// clusterTopology builds the static topology from --cluster-nodes (nil,
// nil when the flag is empty: standalone). This node is the entry equal to
// --cluster-announce, or to --addr. It reads no file, so main runs it with
// the other checks, before the data directory is opened.
func clusterTopology(cfg *config.Config) (*cluster.Topology, error) {
	if cfg.ClusterNodes == "" {
		if cfg.ClusterAnnounce != "" {
			return nil, fmt.Errorf("--cluster-announce needs --cluster-nodes")
		}
		return nil, nil
	}
	addrs, err := cluster.ParseNodes(cfg.ClusterNodes)
	if err != nil {
		return nil, fmt.Errorf("--cluster-nodes: %w", err)
	}
	self, err := cluster.FindSelf(addrs, cfg.ClusterAnnounce, cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("--cluster-nodes: %w", err)
	}
	topo, err := cluster.Static(addrs, self)
	if err != nil {
		return nil, fmt.Errorf("--cluster-nodes: %w", err)
	}
	return topo, nil
}

// recordClusterID logs the cluster mode and, with persistence on, records
// the node id in <dir>/cluster-myid. A different id recorded there means
// the data directory last served another address, which is logged, because
// the keys it holds may now belong to other nodes' slots (they stay
// readable by SCAN/KEYS here, and clients are sent to their new owner,
// which starts them from a full bucket: at most one bucket more granted,
// as after a restart that lost state).
func recordClusterID(cfg *config.Config, topo *cluster.Topology, log *slog.Logger) error {
	me := topo.Self()
	if cfg.Persist {
		prev, err := cluster.PersistID(cfg.Dir, me.ID)
		if err != nil {
			return fmt.Errorf("node id: %w", err)
		}
		if prev != "" && prev != me.ID {
			log.Warn("this data directory last served another cluster node (its announced address changed): keys of slots this node does not own stay unused until they expire",
				"previous_id", prev, "id", me.ID, "announce", me.Addr())
		}
	}
	slots := "none yet (HA: from etcd)"
	if len(me.Slots) > 0 {
		slots = fmt.Sprintf("%d-%d", me.Slots[0].First, me.Slots[0].Last)
	}
	log.Info("cluster mode", "nodes", len(topo.Nodes()), "self", topo.SelfIndex(), "announce", me.Addr(), "id", me.ID,
		"slots", slots)
	return nil
}
