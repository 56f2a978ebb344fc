package server

import "github.com/celld/celld/cluster"

// The cluster topology at runtime. Config.Cluster is the first one; the HA
// mode (package ha) replaces it whenever leadership or the topology
// document changes, and to extend or end this node's lease deadline. The
// routing check of every keyed command loads it once (one atomic load) and
// compares one slot's owner: nothing is allocated or locked.

// SetTopology makes t the topology every following command is routed by.
// It may be called from any goroutine at any time, but only on a server
// started in cluster mode (Config.Cluster set) and never with nil: a
// standalone server stays standalone, and a cluster node stays one.
func (s *Server) SetTopology(t *cluster.Topology) {
	if t == nil || s.topo.Load() == nil {
		panic("server: SetTopology needs a topology and a server started in cluster mode")
	}
	s.topo.Store(t)
}

// Topology is the topology commands are routed by now (nil: standalone).
// Safe from any goroutine; the value is immutable.
func (s *Server) Topology() *cluster.Topology { return s.topo.Load() }

// clusterOn reports whether the server runs in Redis Cluster mode.
func (s *Server) clusterOn() bool { return s.topo.Load() != nil }

// checkTopologyDeadline fences this node when its topology carries a lease
// deadline that has passed (see cluster.Topology.WithDeadline). runBatch
// calls it before each batch of commands, so a node resumed from a pause
// longer than its lease answers nothing as a leader even before the HA
// goroutine that would fence it has run. It reads the clock only when a
// deadline is set (a leader under HA); otherwise it is one atomic load.
// It reports whether the server runs in cluster mode.
func (s *Server) checkTopologyDeadline() bool {
	t := s.topo.Load()
	if t != nil && t.Expired() {
		s.topo.CompareAndSwap(t, t.AsFenced())
	}
	return t != nil
}
