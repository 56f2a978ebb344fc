package ha

import (
	"errors"
	"testing"

	"github.com/celld/celld/cluster"
)

func TestInitDocAndMoves(t *testing.T) {
	d, err := InitDoc(2, 1, members("a", "b", "c", "d"))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Shards) != 2 || d.Shards[1].Slots[0] != (cluster.SlotRange{First: 8192, Last: 16383}) || d.Shards[1].Members[1].ID != "d" {
		t.Fatalf("%s", d.Marshal())
	}
	if d.Shards[0].Members[0].ReplAddr != "127.0.0.1:17001" {
		t.Errorf("repl addr %q", d.Shards[0].Members[0].ReplAddr)
	}
	if err := d.MoveSlots(8000, 8300, 1); err != nil {
		t.Fatal(err)
	}
	if got := d.Shards[0].Slots; len(got) != 1 || got[0] != (cluster.SlotRange{First: 0, Last: 7999}) {
		t.Errorf("shard 0 slots %v", got)
	}
	if got := d.Shards[1].Slots; len(got) != 1 || got[0] != (cluster.SlotRange{First: 8000, Last: 16383}) {
		t.Errorf("shard 1 slots %v", got)
	}
	if err := d.MoveSlots(100, 100, 1); err != nil {
		t.Fatal(err)
	}
	if got := d.Shards[0].Slots; len(got) != 2 || got[1] != (cluster.SlotRange{First: 101, Last: 7999}) {
		t.Errorf("shard 0 slots after a one-slot move %v", got)
	}
	back, err := ParseDoc(d.Marshal())
	if err != nil || len(back.Shards[0].Slots) != 2 {
		t.Fatalf("round trip: %v %v", back, err)
	}
	for name, bad := range map[string]func(*Doc){
		"slot twice":  func(d *Doc) { d.Shards[1].Slots = append(d.Shards[1].Slots, cluster.SlotRange{First: 0, Last: 0}) },
		"dup id":      func(d *Doc) { d.Shards[1].Members[0].ID = "a" },
		"bad addr":    func(d *Doc) { d.Shards[1].Members[0].Addr = "nohost" },
		"id with /":   func(d *Doc) { d.Shards[1].Members[0].ID = "x/y" },
		"version":     func(d *Doc) { d.Version = 2 },
		"range order": func(d *Doc) { d.Shards[0].Slots[0] = cluster.SlotRange{First: 5, Last: 4} },
	} {
		c, _ := ParseDoc(d.Marshal())
		bad(c)
		if err := c.Validate(); !errors.Is(err, ErrBadDoc) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := InitDoc(2, 1, members("a", "b", "c")); !errors.Is(err, ErrBadCommand) {
		t.Errorf("3 nodes for 2×2: %v", err)
	}
	if _, _, err := ParseRange("5-4"); err == nil {
		t.Error("ParseRange 5-4")
	}
	if f, l, err := ParseRange("7"); err != nil || f != 7 || l != 7 {
		t.Errorf("ParseRange 7: %d %d %v", f, l, err)
	}
	if m, err := ParseMember("127.0.0.1:6379"); err != nil || m.ID != "127.0.0.1:6379" || m.ReplAddr != "127.0.0.1:16379" {
		t.Errorf("ParseMember: %+v %v", m, err)
	}
	if _, err := ParseMember("x@127.0.0.1:60000"); err == nil {
		t.Error("port 60000 has no +10000")
	}
}
