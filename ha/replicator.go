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

// Importer is a Replicator that can also pull slots (docs/ha-slot-moves.md):
// the leader of a move's target shard is told, after every change it sees,
// exactly the moves it must pull (Import; nil when none or not leading),
// and reports their progress (ImportStates) in its registration, which
// `celld cluster move-slots` waits on. ImportEvents receives a value when
// a state changes. Import must return at once.
type Importer interface {
	Import(tasks []ImportTask)
	ImportStates() []ImportState
	ImportEvents() <-chan struct{}
}

// ImportTask is one move to pull: slots First..Last from the leader of the
// source shard, whose replication address is Source and epoch Epoch.
// Final: the slots are unowned; the source must seal (send its last
// effects on them and say so). ID is the move's (Move.ID).
type ImportTask struct {
	ID          int64
	First, Last int
	Source      string
	Epoch       uint64
	Final       bool
}

// ImportState is a move's progress on its target: State is "connecting",
// "copying", "synced" (the snapshot is merged, the stream applied) or
// "sealed" (every effect on the slots is applied; the source serves none
// of them). Keys and CopyMs: the snapshot's size and how long it took.
type ImportState struct {
	ID     int64   `json:"id"`
	State  string  `json:"state"`
	Keys   int64   `json:"keys"`
	CopyMs float64 `json:"copy_ms"`
}
