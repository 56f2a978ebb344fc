package cluster

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Replicas, epochs and fencing: the parts of a Topology that the HA mode
// (package ha) fills in. A static topology has none of them: every node is a
// primary, no deadline applies and the epoch is the number of nodes.

// Role is a node's role in its shard.
type Role uint8

const (
	// RolePrimary serves its slots' reads and writes (Redis's "master").
	RolePrimary Role = iota
	// RoleReplica follows a primary: it answers MOVED for writes and serves
	// reads to clients that sent READONLY.
	RoleReplica
)

// String is the role as CLUSTER SHARDS spells it.
func (r Role) String() string {
	if r == RoleReplica {
		return "replica"
	}
	return "master"
}

// unowned marks a slot no node serves in Topology.owner.
const unowned = 0xFFFF

// Errors from New.
var (
	ErrSlotTwice  = errors.New("cluster: slot owned by two primaries")
	ErrBadRange   = errors.New("cluster: bad slot range")
	ErrBadReplica = errors.New("cluster: replica of an unknown primary")
)

// ha is the HA part of a Topology (zero in a static one).
type ha struct {
	isHA     bool
	epoch    uint64    // the cluster's current epoch (the highest leader epoch)
	assigned int       // slots some primary serves
	fenced   bool      // this node serves no slot (see Fenced)
	until    time.Time // this node's leadership is valid until then (monotonic); zero: no deadline
	twin     *Topology // the fenced twin of a topology with a deadline
}

// New builds an HA topology: nodes lists primaries (with their Slots) and
// replicas (with MasterID naming a primary, and no Slots); self is this
// node's index; epoch is the cluster's current epoch. Slots no primary lists
// are unowned: commands on them answer CLUSTERDOWN. Nodes' ids must be
// unique and valid; addresses dialable.
func New(nodes []Node, self int, epoch uint64) (*Topology, error) {
	if len(nodes) == 0 {
		return nil, ErrNoNodes
	}
	if len(nodes) >= unowned {
		return nil, ErrTooMany
	}
	if self < 0 || self >= len(nodes) {
		return nil, ErrNoSelf
	}
	t := &Topology{nodes: append([]Node(nil), nodes...), self: self, owner: make([]uint16, SlotCount), route: self, master: -1}
	t.isHA, t.epoch = true, epoch
	for i := range t.owner {
		t.owner[i] = unowned
	}
	index := make(map[string]int, len(nodes))
	for i := range t.nodes {
		n := &t.nodes[i]
		if !ValidID(n.ID) {
			return nil, fmt.Errorf("cluster: invalid node id %q", n.ID)
		}
		if _, dup := index[n.ID]; dup {
			return nil, fmt.Errorf("%w: %s", ErrDuplicate, n.ID)
		}
		index[n.ID] = i
		if n.Host == "" || n.Port < 1 || n.Port > 65535 {
			return nil, fmt.Errorf("%w: %q", ErrBadAddr, n.Addr())
		}
	}
	for i := range t.nodes {
		n := &t.nodes[i]
		if n.Role == RoleReplica {
			m, ok := index[n.MasterID]
			if !ok || t.nodes[m].Role != RolePrimary || len(n.Slots) > 0 {
				return nil, fmt.Errorf("%w: %s of %q", ErrBadReplica, n.ID, n.MasterID)
			}
			if i == self {
				t.master = m
			}
			continue
		}
		n.Slots = append([]SlotRange(nil), n.Slots...)
		for _, r := range n.Slots {
			if r.First < 0 || r.Last >= SlotCount || r.First > r.Last {
				return nil, fmt.Errorf("%w: %d-%d", ErrBadRange, r.First, r.Last)
			}
			for s := r.First; s <= r.Last; s++ {
				if t.owner[s] != unowned {
					return nil, fmt.Errorf("%w: %d", ErrSlotTwice, s)
				}
				t.owner[s] = uint16(i)
				t.assigned++
			}
		}
	}
	return t, nil
}

// Epoch is the cluster's current epoch: under HA the highest epoch of any
// shard's leader (an etcd revision); in a static topology the node count.
func (t *Topology) Epoch() uint64 {
	if !t.isHA {
		return uint64(len(t.nodes))
	}
	return t.epoch
}

// HA reports whether the topology came from New (the HA mode).
func (t *Topology) HA() bool { return t.isHA }

// ReplicaOf returns the primary this node replicates, or nil.
func (t *Topology) ReplicaOf() *Node {
	if t.master < 0 {
		return nil
	}
	return &t.nodes[t.master]
}

// ServesReplica reports whether this node is a replica of slot's owner
// (it may then serve reads after READONLY).
func (t *Topology) ServesReplica(slot int) bool {
	return t.master >= 0 && int(t.owner[slot]) == t.master
}

// Replicas returns the replicas of the primary with id, in list order.
func (t *Topology) Replicas(id string) []*Node {
	var r []*Node
	for i := range t.nodes {
		if t.nodes[i].Role == RoleReplica && t.nodes[i].MasterID == id {
			r = append(r, &t.nodes[i])
		}
	}
	return r
}

// Fenced reports whether this node is fenced: it still lists its slots
// (FencedSlot), but serves none of them until a new topology says so.
func (t *Topology) Fenced() bool { return t.fenced }

// FencedSlot reports whether slot is one this node would serve but for
// being fenced (commands on it answer TRYAGAIN rather than MOVED).
func (t *Topology) FencedSlot(slot int) bool {
	return t.fenced && int(t.owner[slot]) == t.self
}

// WithDeadline returns a copy of t (sharing its immutable tables) whose
// service ends at until (read on the monotonic clock): once time.Now() is
// past it, Expired reports true and the server swaps in AsFenced. The HA
// mode sets it from the last lease keepalive, so a node that was paused or
// cut off stops serving before its lease can have expired in etcd.
func (t *Topology) WithDeadline(until time.Time) *Topology {
	c := *t
	c.until = until
	c.twin = nil
	c.twin = c.AsFenced()
	return &c
}

// AsFenced returns a copy of t in which this node serves no slot: commands
// on its own slots answer TRYAGAIN, reads as a replica stop too.
func (t *Topology) AsFenced() *Topology {
	if t.fenced {
		return t
	}
	if t.twin != nil {
		return t.twin
	}
	c := *t
	c.fenced, c.route, c.master, c.until, c.twin = true, -1, -1, time.Time{}, nil
	return &c
}

// Expired reports whether t has a deadline and it has passed. It reads the
// clock only when there is a deadline (about 20 ns); the server calls it
// once per batch of commands, so a node resumed after a pause longer than
// its lease answers nothing from its old topology.
func (t *Topology) Expired() bool {
	return !t.until.IsZero() && !time.Now().Before(t.until)
}

// Deadline is the time WithDeadline set (zero when none).
func (t *Topology) Deadline() time.Time { return t.until }

// String is a one-line summary for logs and tests.
func (t *Topology) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch=%d self=%d fenced=%v", t.Epoch(), t.self, t.fenced)
	for _, n := range t.nodes {
		fmt.Fprintf(&b, " [%s %s %s %v]", n.ID[:min(8, len(n.ID))], n.Addr(), n.Role, n.Slots)
	}
	return b.String()
}
