// Package ha is celld's high-availability mode: the topology of a cluster
// and the leadership of its shards live in etcd; every node registers under
// a session lease, the members of a shard campaign for its leadership (the
// leader key's revision is the shard's epoch, its fencing token), and each
// node turns what it sees into the cluster.Topology the server routes by.
// A leader stops answering for its slots before its lease can expire
// (self-fencing, see Node). The command-line tool `celld cluster ...`
// (CLI) changes the topology document by compare-and-swap; there is no
// controller process.
//
// Keys, under /celld/<cluster>/:
//
//	topology        the Doc (JSON), changed only by CAS on its mod revision
//	nodes/<id>      a live node's registration (JSON), under its session lease
//	leader/<shard>/ the shard's election (concurrency.Election); the key with
//	                the lowest create revision is the leader, its value the
//	                leader's node id, its create revision the epoch
package ha

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/celld/celld/cluster"
)

// DocVersion is the format version of the topology document.
const DocVersion = 1

// Doc is the versioned topology document: shards, each with slot ranges
// and members. It is a plain value; Validate checks it.
type Doc struct {
	Version int     `json:"version"`
	Shards  []Shard `json:"shards"`
	// Moves are the slot moves under way (move.go): absent from documents
	// without one, so older readers see the same document.
	Moves []Move `json:"moves,omitempty"`
}

// Shard is one group of members sharing slot ranges: one of them leads
// (serves the slots), the others follow.
type Shard struct {
	Slots   []cluster.SlotRange `json:"slots"`
	Members []Member            `json:"members"`
}

// Member is one node of a shard.
type Member struct {
	// ID is the node's name (--node-id); its Redis Cluster id is
	// ClusterID(ID).
	ID string `json:"id"`
	// Addr is the announced client address (host:port): what MOVED and
	// CLUSTER SLOTS report.
	Addr string `json:"addr"`
	// ReplAddr is where its replication stream listens (host:port).
	ReplAddr string `json:"repl_addr"`
}

// Errors of topology documents and their changes.
var (
	ErrBadDoc     = errors.New("ha: bad topology document")
	ErrNoDoc      = errors.New("ha: no topology document (run celld cluster init)")
	ErrDocExists  = errors.New("ha: the cluster already has a topology document")
	ErrUnknown    = errors.New("ha: no such node")
	ErrConflict   = errors.New("ha: the topology changed under us too often")
	ErrBadCommand = errors.New("ha: bad command line")
)

// ClusterID is the 40-hex-digit Redis Cluster id of the node named id: it
// does not depend on the node's address, so a node keeps it when it moves.
func ClusterID(id string) string { return cluster.DeriveID("celld ha node " + id) }

// DefaultReplAddr is addr's port + 10000 on addr's host (as Redis's
// cluster bus).
func DefaultReplAddr(addr string) (string, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 1 || p+10000 > 65535 {
		return "", fmt.Errorf("ha: no replication port for %q (port + 10000 must be a port): set --repl-addr", addr)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+10000)), nil
}

// Validate checks that every slot belongs to exactly one shard, ranges are
// in order and bounds, node ids are unique and addresses well formed.
func (d *Doc) Validate() error {
	if d.Version != DocVersion {
		return fmt.Errorf("%w: version %d (this celld reads %d)", ErrBadDoc, d.Version, DocVersion)
	}
	if len(d.Shards) == 0 {
		return fmt.Errorf("%w: no shards", ErrBadDoc)
	}
	if err := d.validateMoves(); err != nil {
		return err
	}
	var owner [cluster.SlotCount]int16
	ids := map[string]bool{}
	for i, sh := range d.Shards {
		for _, r := range sh.Slots {
			if r.First < 0 || r.Last >= cluster.SlotCount || r.First > r.Last {
				return fmt.Errorf("%w: shard %d: slot range %d-%d", ErrBadDoc, i, r.First, r.Last)
			}
			for s := r.First; s <= r.Last; s++ {
				if owner[s] != 0 {
					return fmt.Errorf("%w: slot %d in shards %d and %d", ErrBadDoc, s, owner[s]-1, i)
				}
				owner[s] = int16(i + 1)
			}
		}
		for _, m := range sh.Members {
			if m.ID == "" || strings.ContainsAny(m.ID, "/ \t\r\n") {
				return fmt.Errorf("%w: node id %q", ErrBadDoc, m.ID)
			}
			if ids[m.ID] {
				return fmt.Errorf("%w: node %q listed twice", ErrBadDoc, m.ID)
			}
			ids[m.ID] = true
			for _, a := range []string{m.Addr, m.ReplAddr} {
				if h, p, err := net.SplitHostPort(a); err != nil || h == "" || p == "" || p == "0" {
					return fmt.Errorf("%w: node %q: address %q", ErrBadDoc, m.ID, a)
				}
			}
		}
	}
	return nil
}

// Find returns the shard index and member of node id, or -1.
func (d *Doc) Find(id string) (int, *Member) {
	for i := range d.Shards {
		for j := range d.Shards[i].Members {
			if d.Shards[i].Members[j].ID == id {
				return i, &d.Shards[i].Members[j]
			}
		}
	}
	return -1, nil
}

// Marshal is the document's JSON.
func (d *Doc) Marshal() []byte {
	b, _ := json.MarshalIndent(d, "", "  ")
	return b
}

// ParseDoc reads and validates a document.
func ParseDoc(b []byte) (*Doc, error) {
	var d Doc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadDoc, err)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// InitDoc is the document of `celld cluster init`: the nodes in order,
// replicas+1 per shard (the first of each group is listed first, which
// means nothing: leadership is elected), the slots split into equal
// contiguous shares as the static mode splits them.
func InitDoc(shards, replicas int, nodes []Member) (*Doc, error) {
	if shards < 1 || shards > cluster.SlotCount || replicas < 0 {
		return nil, fmt.Errorf("%w: --shards %d --replicas %d", ErrBadCommand, shards, replicas)
	}
	if len(nodes) != shards*(replicas+1) {
		return nil, fmt.Errorf("%w: %d shards × %d members need %d nodes, got %d", ErrBadCommand, shards, replicas+1, shards*(replicas+1), len(nodes))
	}
	d := &Doc{Version: DocVersion}
	for i := range shards {
		first, next := i*cluster.SlotCount/shards, (i+1)*cluster.SlotCount/shards
		d.Shards = append(d.Shards, Shard{
			Slots:   []cluster.SlotRange{{First: first, Last: next - 1}},
			Members: append([]Member(nil), nodes[i*(replicas+1):(i+1)*(replicas+1)]...),
		})
	}
	return d, d.Validate()
}

// ParseMember reads ID@HOST:PORT (or HOST:PORT, whose id is the address
// itself), with the replication address DefaultReplAddr.
func ParseMember(s string) (Member, error) {
	id, addr, ok := strings.Cut(strings.TrimSpace(s), "@")
	if !ok {
		addr = id // HOST:PORT alone: the address is the id
	}
	if h, p, err := net.SplitHostPort(addr); err != nil || h == "" || p == "" {
		return Member{}, fmt.Errorf("%w: node %q is not ID@HOST:PORT", ErrBadCommand, s)
	}
	ra, err := DefaultReplAddr(addr)
	if err != nil {
		return Member{}, err
	}
	return Member{ID: id, Addr: addr, ReplAddr: ra}, nil
}

// MoveSlots gives the slots first..last to shard to, taking them from
// whichever shards hold them.
func (d *Doc) MoveSlots(first, last, to int) error {
	if to < 0 || to >= len(d.Shards) {
		return fmt.Errorf("%w: no shard %d", ErrBadCommand, to)
	}
	if first < 0 || last >= cluster.SlotCount || first > last {
		return fmt.Errorf("%w: slot range %d-%d", ErrBadCommand, first, last)
	}
	for _, m := range d.Moves {
		if m.First <= last && first <= m.Last {
			return fmt.Errorf("%w: slots %d-%d are being moved to shard %d (run that move-slots again to finish it)", ErrBadCommand, m.First, m.Last, m.To)
		}
	}
	d.Unassign(first, last)
	d.Shards[to].Slots = mergeRanges(append(d.Shards[to].Slots, cluster.SlotRange{First: first, Last: last}))
	return d.Validate()
}

// Unassign takes the slots first..last from whichever shards hold them:
// no node serves them (CLUSTERDOWN) until a shard is given them.
func (d *Doc) Unassign(first, last int) {
	for i := range d.Shards {
		var keep []cluster.SlotRange
		for _, r := range d.Shards[i].Slots {
			if r.Last < first || r.First > last {
				keep = append(keep, r)
				continue
			}
			if r.First < first {
				keep = append(keep, cluster.SlotRange{First: r.First, Last: first - 1})
			}
			if r.Last > last {
				keep = append(keep, cluster.SlotRange{First: last + 1, Last: r.Last})
			}
		}
		d.Shards[i].Slots = keep
	}
}

// mergeRanges sorts ranges and joins adjacent ones.
func mergeRanges(rs []cluster.SlotRange) []cluster.SlotRange {
	sort.Slice(rs, func(i, j int) bool { return rs[i].First < rs[j].First })
	var out []cluster.SlotRange
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].Last+1 >= r.First {
			out[n-1].Last = max(out[n-1].Last, r.Last)
			continue
		}
		out = append(out, r)
	}
	return out
}

// ParseRange reads FIRST-LAST or one SLOT.
func ParseRange(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = a
	}
	first, err1 := strconv.Atoi(a)
	last, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || first < 0 || last >= cluster.SlotCount || first > last {
		return 0, 0, fmt.Errorf("%w: slot range %q (FIRST-LAST, 0..16383)", ErrBadCommand, s)
	}
	return first, last, nil
}
