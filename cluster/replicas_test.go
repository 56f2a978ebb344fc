package cluster

import (
	"errors"
	"testing"
	"time"
)

func haNodes() []Node {
	return []Node{
		{ID: DeriveID("a"), Host: "10.0.0.1", Port: 7000, Slots: []SlotRange{{0, 99}, {200, 16383}}, Epoch: 5},
		{ID: DeriveID("b"), Host: "10.0.0.2", Port: 7000, Role: RoleReplica, MasterID: DeriveID("a"), Epoch: 5},
		{ID: DeriveID("c"), Host: "10.0.0.3", Port: 7000, Slots: []SlotRange{{100, 149}}, Epoch: 9},
	}
}

// TestNewTopology: owners, unowned slots, replicas and the self-relations
// routing uses.
func TestNewTopology(t *testing.T) {
	topo, err := New(haNodes(), 1, 9)
	if err != nil {
		t.Fatal(err)
	}
	if topo.SlotsAssigned() != SlotCount-50 || topo.Epoch() != 9 || !topo.HA() {
		t.Fatalf("assigned %d epoch %d", topo.SlotsAssigned(), topo.Epoch())
	}
	if o := topo.Owner(150); o != nil {
		t.Errorf("slot 150 owned by %v", o)
	}
	if topo.Owner(100).Host != "10.0.0.3" || topo.Owner(0).Host != "10.0.0.1" {
		t.Error("owners")
	}
	if topo.Owns(0) || !topo.ServesReplica(0) || topo.ServesReplica(100) || topo.ReplicaOf().ID != DeriveID("a") {
		t.Error("replica relations")
	}
	if r := topo.Replicas(DeriveID("a")); len(r) != 1 || r[0].Host != "10.0.0.2" {
		t.Errorf("replicas %v", r)
	}
	primary, _ := New(haNodes(), 0, 9)
	f := primary.AsFenced()
	if !primary.Owns(0) || f.Owns(0) || !f.FencedSlot(0) || f.FencedSlot(100) || !f.Fenced() || primary.Fenced() {
		t.Error("fencing")
	}
	if primary.Expired() {
		t.Error("no deadline, yet expired")
	}
	d := primary.WithDeadline(time.Now().Add(-time.Second))
	if !d.Expired() || !d.Owns(0) || d.AsFenced().Owns(0) || d.AsFenced() != d.AsFenced() {
		t.Error("deadline")
	}
	if s, _ := Static([]string{"h:1", "h:2"}, 0); s.Epoch() != 2 || s.HA() || s.SlotsAssigned() != SlotCount || s.Owner(16383).Port != 2 {
		t.Error("static topology changed")
	}
}

func TestNewTopologyErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func([]Node) []Node
		want error
	}{
		"twice":    {func(n []Node) []Node { n[2].Slots = []SlotRange{{99, 120}}; return n }, ErrSlotTwice},
		"range":    {func(n []Node) []Node { n[2].Slots = []SlotRange{{120, 100}}; return n }, ErrBadRange},
		"past end": {func(n []Node) []Node { n[2].Slots = []SlotRange{{100, SlotCount}}; return n }, ErrBadRange},
		"orphan":   {func(n []Node) []Node { n[1].MasterID = DeriveID("zz"); return n }, ErrBadReplica},
		"replica of replica": {func(n []Node) []Node {
			n = append(n, Node{ID: DeriveID("d"), Host: "h", Port: 1, Role: RoleReplica, MasterID: DeriveID("b")})
			return n
		}, ErrBadReplica},
		"duplicate": {func(n []Node) []Node { n[2].ID = n[0].ID; return n }, ErrDuplicate},
		"no host":   {func(n []Node) []Node { n[2].Host = ""; return n }, ErrBadAddr},
	} {
		if _, err := New(tc.edit(haNodes()), 0, 1); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if _, err := New(haNodes(), 3, 1); !errors.Is(err, ErrNoSelf) {
		t.Errorf("self out of range: %v", err)
	}
}
