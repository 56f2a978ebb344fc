package cluster

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Errors from building a topology.
var (
	ErrNoNodes   = errors.New("cluster: empty node list")
	ErrTooMany   = errors.New("cluster: more nodes than hash slots")
	ErrDuplicate = errors.New("cluster: node listed twice")
	ErrBadAddr   = errors.New("cluster: node address must be host:port")
	ErrNoSelf    = errors.New("cluster: this node is not in the node list")
	ErrAmbiguous = errors.New("cluster: this node's address matches more than one entry")
)

// SlotRange is the slots First..Last, both included.
type SlotRange struct{ First, Last int }

// Node is one member of a topology, as every node reports it.
type Node struct {
	// ID is the node's 40-hex-digit name (see DeriveID).
	ID string
	// Host and Port are the announced address: what clients dial, what
	// MOVED and CLUSTER SLOTS report.
	Host string
	Port int
	// Slots are the node's slot ranges, ascending.
	Slots []SlotRange
	// Epoch is the node's config epoch (its position in the list, from 1,
	// in a static topology; its shard leader's epoch under HA), reported by
	// CLUSTER NODES and CLUSTER INFO.
	Epoch int
	// Role is primary (the zero value: every node of a static topology) or
	// replica; a replica has no Slots and names its primary in MasterID.
	Role     Role
	MasterID string
}

// Addr is the node's announced address as Redis prints it in MOVED and
// CLUSTER NODES: host, a colon, the port (an IPv6 host is not bracketed,
// as in Redis).
func (n *Node) Addr() string { return n.Host + ":" + strconv.Itoa(n.Port) }

// Topology is the cluster as one node sees it: every node, the owner of
// every slot, and which node is this one. It is immutable once built, so any
// number of goroutines may read it; a topology change means building a new
// Topology and swapping the pointer (see docs/cluster.md).
type Topology struct {
	nodes []Node
	self  int
	owner []uint16 // slot → index into nodes; unowned (replicas.go) when no node serves it
	// route is the index routing compares owner with: self, or -1 when this
	// node is fenced (replicas.go). master is the index of the primary this
	// node replicates (-1 when it is none).
	route, master int
	ha            // replicas.go: epoch, fencing, deadline; zero in a static topology
}

// Static returns the topology of a fixed node list: node i of N owns the
// contiguous slots [i*16384/N, (i+1)*16384/N), every node's id is
// DeriveID of its address, and self is this node's index. addrs are
// host:port strings (see ParseNodes).
func Static(addrs []string, self int) (*Topology, error) {
	n := len(addrs)
	switch {
	case n == 0:
		return nil, ErrNoNodes
	case n > SlotCount:
		return nil, ErrTooMany
	case self < 0 || self >= n:
		return nil, ErrNoSelf
	}
	t := &Topology{nodes: make([]Node, n), self: self, owner: make([]uint16, SlotCount), route: self, master: -1}
	seen := make(map[string]bool, n)
	for i, a := range addrs {
		host, port, err := splitNodeAddr(a)
		if err != nil {
			return nil, err
		}
		key := strings.ToLower(host) + ":" + strconv.Itoa(port)
		if seen[key] {
			return nil, fmt.Errorf("%w: %s", ErrDuplicate, a)
		}
		seen[key] = true
		first, next := i*SlotCount/n, (i+1)*SlotCount/n
		t.nodes[i] = Node{
			ID:    DeriveID(net.JoinHostPort(host, strconv.Itoa(port))),
			Host:  host,
			Port:  port,
			Slots: []SlotRange{{first, next - 1}},
			Epoch: i + 1,
		}
		for s := first; s < next; s++ {
			t.owner[s] = uint16(i)
		}
	}
	return t, nil
}

// Nodes returns every node, in list order. The slice and its Slots are
// shared: callers must not modify them.
func (t *Topology) Nodes() []Node { return t.nodes }

// SelfIndex is this node's position in Nodes.
func (t *Topology) SelfIndex() int { return t.self }

// Self is this node.
func (t *Topology) Self() *Node { return &t.nodes[t.self] }

// Owner returns the node that owns slot, which must be in [0, SlotCount),
// or nil when no node serves it (possible only under HA, while its shard
// has no leader).
func (t *Topology) Owner(slot int) *Node {
	if o := t.owner[slot]; o != unowned {
		return &t.nodes[o]
	}
	return nil
}

// Owns reports whether this node serves slot (as its primary, and not
// fenced). It is the routing check of every keyed command: one compare.
func (t *Topology) Owns(slot int) bool { return int(t.owner[slot]) == t.route }

// SlotsAssigned is the number of slots some node owns (all of them, in a
// static topology).
func (t *Topology) SlotsAssigned() int {
	if t.assigned == 0 && !t.isHA {
		return SlotCount
	}
	return t.assigned
}

// DeriveID returns the node id of the node announced at addr: the first 40
// hex digits of SHA-1 over a fixed prefix and the address. Every node of a
// static topology computes every other node's id this way, so all of them
// report the same ids without talking to each other, and a node keeps its
// id across restarts for as long as its announced address stays the same.
func DeriveID(addr string) string {
	sum := sha1.Sum([]byte("celld cluster node " + addr))
	return hex.EncodeToString(sum[:])
}

// ParseNodes splits a --cluster-nodes value ("host:port,host:port,...";
// spaces around entries are ignored) and checks each address.
func ParseNodes(list string) ([]string, error) {
	var addrs []string
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		host, port, err := splitNodeAddr(f)
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, net.JoinHostPort(host, strconv.Itoa(port)))
	}
	if len(addrs) == 0 {
		return nil, ErrNoNodes
	}
	return addrs, nil
}

// FindSelf returns this node's index in addrs: the entry equal to announce
// when announce is set, else the entry equal to listen (hosts compared
// case-insensitively, ports as numbers). When listen has an unspecified host
// (":6379", "0.0.0.0:6379", "[::]:6379") and announce is empty, the one
// entry with listen's port is this node; two such entries are ambiguous and
// need --cluster-announce.
func FindSelf(addrs []string, announce, listen string) (int, error) {
	want := announce
	if want == "" {
		want = listen
	}
	host, port, err := splitAddr(want)
	if err != nil {
		return -1, err
	}
	wildcard := announce == "" && (host == "" || net.ParseIP(host).IsUnspecified())
	found := -1
	for i, a := range addrs {
		h, p, err := splitAddr(a)
		if err != nil {
			return -1, err
		}
		if p != port || (!wildcard && !strings.EqualFold(h, host)) {
			continue
		}
		if found >= 0 {
			return -1, fmt.Errorf("%w: %s (set --cluster-announce)", ErrAmbiguous, want)
		}
		found = i
	}
	if found < 0 {
		return -1, fmt.Errorf("%w: %s is not one of %s", ErrNoSelf, want, strings.Join(addrs, ","))
	}
	return found, nil
}

// splitNodeAddr is splitAddr for an announced address, which clients must
// be able to dial: its host may be neither empty nor unspecified (0.0.0.0).
func splitNodeAddr(a string) (string, int, error) {
	host, port, err := splitAddr(a)
	if err == nil && (host == "" || net.ParseIP(host).IsUnspecified()) {
		err = fmt.Errorf("%w: %q has no dialable host", ErrBadAddr, a)
	}
	return host, port, err
}

// splitAddr parses host:port with a port in 1..65535; the host may be empty
// (a listen address such as ":6379").
func splitAddr(a string) (string, int, error) {
	host, ps, err := net.SplitHostPort(a)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %q", ErrBadAddr, a)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("%w: %q", ErrBadAddr, a)
	}
	return host, port, nil
}
