package ha

// Replicator is what a node does with its data when its role changes. ha
// calls it from one goroutine (the Node's), never concurrently, and waits
// for each call to return before it serves under the new role: a call must
// not block on the network for long (start work on goroutines of its own).
//
// The replication stream (another package) implements it; until it is
// wired, NopReplicator keeps the node's data as it is: a new leader then
// starts from whatever state it holds (at most one bucket more granted per
// key, as after a restart that lost state).
type Replicator interface {
	// Lead: this node leads shard at epoch; start accepting followers,
	// serve writes.
	Lead(shard int, epoch uint64)
	// Follow: leaderReplAddr leads shard at epoch; drop nothing, sync from
	// the leader, merge by max.
	Follow(shard int, epoch uint64, leaderReplAddr string)
	// Fence: stop serving writes now (the lease may be about to end).
	Fence()
}

// NopReplicator does nothing: data stays where it is.
type NopReplicator struct{}

func (NopReplicator) Lead(int, uint64)           {}
func (NopReplicator) Follow(int, uint64, string) {}
func (NopReplicator) Fence()                     {}
