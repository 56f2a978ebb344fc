package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Vectors checked against Redis 7.0's CLUSTER KEYSLOT, including the hash
// tag examples of the cluster specification.
var slotVectors = []struct {
	key  string
	slot int
}{
	{"123456789", 12739}, // the CRC16-XMODEM check value 0x31C3
	{"somekey", 11058},
	{"foo{hash_tag}", 2515},
	{"foo", 12182},
	{"bar", 5061},
	{"hello", 866},
	{"user1000", 3443},
	{"{user1000}.following", 3443},
	{"{user1000}.followers", 3443},
	{"foo{}{bar}", 8363},    // first tag empty: the whole key
	{"foo{{bar}}zap", 4015}, // tag is "{bar"
	{"{bar", 4015},
	{"foo{bar}{zap}", 5061}, // only the first tag counts: "bar"
	{"", 0},
	{"{}", 15257},
	{"{", 4092},
	{"}", 12090},
	{"a{b}", 3300},
}

func TestClusterKeySlot(t *testing.T) {
	for i, v := range slotVectors {
		if got := KeySlot([]byte(v.key)); got != v.slot {
			t.Errorf("step %d: KeySlot(%q) = %d, want %d", i, v.key, got, v.slot)
		}
		if got := KeySlotString(v.key); got != v.slot {
			t.Errorf("step %d: KeySlotString(%q) = %d, want %d", i, v.key, got, v.slot)
		}
	}
}

// crc16Bitwise is the textbook bit-at-a-time CRC16-XMODEM, the oracle for
// the table-driven one.
func crc16Bitwise(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func FuzzKeySlot(f *testing.F) {
	for _, v := range slotVectors {
		f.Add([]byte(v.key))
	}
	f.Fuzz(func(t *testing.T, key []byte) {
		slot := KeySlot(key)
		if slot < 0 || slot >= SlotCount {
			t.Fatalf("slot %d out of range", slot)
		}
		if s2 := KeySlotString(string(key)); s2 != slot {
			t.Fatalf("string form %d != %d", s2, slot)
		}
		// The spec's rule, written independently: hash between the first
		// '{' and the next '}' when non-empty, else the whole key.
		hashed := key
		if s := strings.IndexByte(string(key), '{'); s >= 0 {
			if e := strings.IndexByte(string(key[s+1:]), '}'); e > 0 {
				hashed = key[s+1 : s+1+e]
			}
		}
		if want := int(crc16Bitwise(hashed) & (SlotCount - 1)); slot != want {
			t.Fatalf("KeySlot(%q) = %d, want %d", key, slot, want)
		}
	})
}

func BenchmarkKeySlot(b *testing.B) {
	key := []byte("user:{tenant-42}:login")
	b.ReportAllocs()
	for b.Loop() {
		KeySlot(key)
	}
}

func addrs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("127.0.0.1:%d", 7000+i)
	}
	return out
}

// TestClusterStaticShares checks the formula: node i of N owns
// [i*16384/N, (i+1)*16384/N), the ranges tile all slots with no overlap, and
// Owner/Owns agree with the ranges.
func TestClusterStaticShares(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 7, 64} {
		list := addrs(n)
		for self := 0; self < n; self++ {
			topo, err := Static(list, self)
			if err != nil {
				t.Fatalf("n=%d: %v", n, err)
			}
			next := 0
			for i, node := range topo.Nodes() {
				if len(node.Slots) != 1 {
					t.Fatalf("n=%d node %d: %d ranges", n, i, len(node.Slots))
				}
				r := node.Slots[0]
				if r.First != next || r.First != i*SlotCount/n || r.Last != (i+1)*SlotCount/n-1 {
					t.Fatalf("n=%d node %d: range %v, want [%d,%d)", n, i, r, i*SlotCount/n, (i+1)*SlotCount/n)
				}
				next = r.Last + 1
				if !ValidID(node.ID) || node.ID != DeriveID(list[i]) || node.Epoch != i+1 {
					t.Fatalf("n=%d node %d: id %q epoch %d", n, i, node.ID, node.Epoch)
				}
			}
			if next != SlotCount {
				t.Fatalf("n=%d: ranges end at %d", n, next)
			}
			for _, s := range []int{0, 1, SlotCount / 2, SlotCount - 1} {
				owner := topo.Owner(s)
				if r := owner.Slots[0]; s < r.First || s > r.Last {
					t.Fatalf("n=%d: Owner(%d) = %v", n, s, r)
				}
				if topo.Owns(s) != (owner == topo.Self()) {
					t.Fatalf("n=%d self=%d: Owns(%d) disagrees with Owner", n, self, s)
				}
			}
		}
	}
}

// TestClusterEmulated: one node naming only itself owns every slot.
func TestClusterEmulated(t *testing.T) {
	topo, err := Static([]string{"10.0.0.5:6379"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	self := topo.Self()
	if self.Host != "10.0.0.5" || self.Port != 6379 || self.Addr() != "10.0.0.5:6379" {
		t.Fatalf("self = %+v", self)
	}
	if got := self.Slots; len(got) != 1 || got[0] != (SlotRange{0, SlotCount - 1}) {
		t.Fatalf("slots = %v", got)
	}
	for s := 0; s < SlotCount; s++ {
		if !topo.Owns(s) {
			t.Fatalf("slot %d not owned", s)
		}
	}
}

func TestClusterStaticErrors(t *testing.T) {
	cases := []struct {
		addrs []string
		self  int
		err   error
	}{
		{nil, 0, ErrNoNodes},
		{[]string{"a:1"}, 1, ErrNoSelf},
		{[]string{"a:1", "A:1"}, 0, ErrDuplicate},
		{[]string{"a"}, 0, ErrBadAddr},
		{[]string{"a:0"}, 0, ErrBadAddr},
		{[]string{"a:65536"}, 0, ErrBadAddr},
		{[]string{":6379"}, 0, ErrBadAddr},
		{[]string{"0.0.0.0:6379"}, 0, ErrBadAddr},
		{make([]string, SlotCount+1), 0, ErrTooMany},
	}
	for i, c := range cases {
		if _, err := Static(c.addrs, c.self); !errors.Is(err, c.err) {
			t.Errorf("step %d: Static(%v) err = %v, want %v", i, c.addrs, err, c.err)
		}
	}
}

func TestClusterParseNodes(t *testing.T) {
	got, err := ParseNodes(" 10.0.0.1:7001, node-b:7002 ,[::1]:7003,")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.1:7001", "node-b:7002", "[::1]:7003"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"", " , ", "a:1,b", "a:x"} {
		if _, err := ParseNodes(bad); err == nil {
			t.Errorf("ParseNodes(%q) accepted", bad)
		}
	}
}

func TestClusterFindSelf(t *testing.T) {
	list := []string{"10.0.0.1:7001", "10.0.0.2:7002", "Node-C:7003", "10.0.0.4:7002"}
	cases := []struct {
		announce, listen string
		want             int
		err              error
	}{
		{"", "10.0.0.1:7001", 0, nil},
		{"", "node-c:7003", 2, nil},               // host case-insensitive
		{"10.0.0.4:7002", "0.0.0.0:7002", 3, nil}, // announce wins
		{"", "0.0.0.0:7001", 0, nil},              // unspecified host: unique port
		{"", ":7003", 2, nil},
		{"", "[::]:7001", 0, nil},
		{"", "0.0.0.0:7002", -1, ErrAmbiguous}, // two entries on 7002
		{"", "10.0.0.9:7001", -1, ErrNoSelf},
		{"10.0.0.9:7001", "10.0.0.1:7001", -1, ErrNoSelf},
		{"", "nonsense", -1, ErrBadAddr},
	}
	for i, c := range cases {
		got, err := FindSelf(list, c.announce, c.listen)
		if got != c.want || !errors.Is(err, c.err) {
			t.Errorf("step %d: FindSelf(%q, %q) = %d, %v; want %d, %v", i, c.announce, c.listen, got, err, c.want, c.err)
		}
	}
}

func TestClusterDeriveID(t *testing.T) {
	a, b := DeriveID("10.0.0.1:7001"), DeriveID("10.0.0.1:7001")
	if a != b || !ValidID(a) {
		t.Fatalf("DeriveID not stable or not an id: %q %q", a, b)
	}
	if DeriveID("10.0.0.1:7002") == a {
		t.Fatal("two addresses, one id")
	}
	// Pin the derivation: changing it would rename every deployed node.
	if want := "dd3962adabfc0408e669109aca9735afc418c859"; a != want {
		t.Fatalf("DeriveID(10.0.0.1:7001) = %s, want %s", a, want)
	}
}

func TestClusterIDPersistence(t *testing.T) {
	dir := t.TempDir()
	if _, found, err := LoadID(dir); found || err != nil {
		t.Fatalf("empty dir: found=%v err=%v", found, err)
	}
	id := DeriveID("10.0.0.1:7001")
	prev, err := PersistID(dir, id)
	if err != nil || prev != "" {
		t.Fatalf("first PersistID: prev=%q err=%v", prev, err)
	}
	got, found, err := LoadID(dir)
	if err != nil || !found || got != id {
		t.Fatalf("LoadID = %q, %v, %v", got, found, err)
	}
	if prev, err := PersistID(dir, id); err != nil || prev != id {
		t.Fatalf("same id again: prev=%q err=%v", prev, err)
	}
	other := DeriveID("10.0.0.1:7002")
	if prev, err := PersistID(dir, other); err != nil || prev != id {
		t.Fatalf("new id: prev=%q err=%v", prev, err)
	}
	if got, _, _ := LoadID(dir); got != other {
		t.Fatalf("after change LoadID = %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temp files left behind: %v", entries)
	}
	// A corrupt file is reported by LoadID and replaced by PersistID.
	if err := os.WriteFile(filepath.Join(dir, IDFile), []byte("not an id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadID(dir); !errors.Is(err, ErrBadIDFile) {
		t.Fatalf("corrupt file: err = %v", err)
	}
	if _, err := PersistID(dir, id); err != nil {
		t.Fatalf("PersistID over corrupt file: %v", err)
	}
	if err := SaveID(dir, "XYZ"); err == nil {
		t.Fatal("SaveID accepted an invalid id")
	}
	for _, bad := range []string{"", strings.Repeat("a", 39), strings.Repeat("A", 40), strings.Repeat("g", 40)} {
		if ValidID(bad) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
}
