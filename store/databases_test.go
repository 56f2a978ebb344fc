package store

import (
	"fmt"
	"testing"

	"github.com/celld/celld/gcra"
)

func newDBs(t *testing.T, n int, opts Options) *Databases {
	t.Helper()
	d, err := Group(New(opts), n)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestGroupRefusesBadCounts(t *testing.T) {
	for _, n := range []int{0, -1, MaxDatabases + 1} {
		if _, err := Group(New(Options{}), n); err != ErrDatabases {
			t.Errorf("Group(%d) = %v, want ErrDatabases", n, err)
		}
	}
	st := New(Options{})
	d, err := Group(st, 4)
	if err != nil {
		t.Fatal(err)
	}
	if d2, _ := Group(st, 99); d2 != d || d.Len() != 4 || st.Databases() != d || d.DB(0) != st {
		t.Fatal("Group of a store already in a group must return that group")
	}
}

// The same key in two databases holds two independent states.
func TestDatabasesSeparateState(t *testing.T) {
	d := newDBs(t, 16, Options{})
	lim, err := gcra.NewLimit(1, 1, 60)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1_700_000_000_000_000_000)
	key := []byte("user:1")
	if d.Existing(3) != nil {
		t.Fatal("database 3 exists before its first use")
	}
	for i, want := range []bool{false, false, true} { // burst 1: two allowed, then denied
		r, err := d.DB(3).Throttle(key, lim, 1, now)
		if err != nil || r.Limited != want {
			t.Fatalf("db 3 call %d: limited=%v err=%v, want %v", i, r.Limited, err, want)
		}
	}
	r, err := d.DB(0).Throttle(key, lim, 1, now)
	if err != nil || r.Limited {
		t.Fatalf("db 0 sees db 3's state: %+v %v", r, err)
	}
	if d.DB(3).Len() != 1 || d.DB(0).Len() != 1 || d.DB(5).Len() != 0 || d.Keys() != 2 {
		t.Fatalf("lens: db0 %d db3 %d db5 %d all %d", d.DB(0).Len(), d.DB(3).Len(), d.DB(5).Len(), d.Keys())
	}
	d.DB(3).Flush()
	if d.DB(3).Len() != 0 || d.DB(0).Len() != 1 {
		t.Fatal("FLUSHDB of db 3 touched db 0")
	}
	d.DB(3).Load(key, []byte("7"), 0)
	d.FlushAll()
	if d.Keys() != 0 {
		t.Fatalf("FlushAll left %d keys", d.Keys())
	}
}

func TestDatabasesSwap(t *testing.T) {
	d := newDBs(t, 8, Options{TrackDirty: true})
	a, b := d.DB(1), d.DB(2)
	a.Load([]byte("k"), []byte("1"), 0)
	d.Swap(1, 2)
	if d.DB(2) != a || d.DB(1) != b {
		t.Fatal("Swap did not exchange the stores")
	}
	if v, ok := d.DB(2).Get([]byte("k"), 0); !ok || v.TAT != 1 {
		t.Fatal("db 2 does not hold what db 1 held")
	}
	if _, ok := d.DB(1).Get([]byte("k"), 0); ok {
		t.Fatal("db 1 still holds k")
	}
	perm, swaps, identity := d.Perm()
	if identity || swaps != 1 || perm[1] != 2 || perm[2] != 1 || a.ID() != 1 || b.ID() != 2 {
		t.Fatalf("perm %v swaps %d identity %v ids %d %d", perm, swaps, identity, a.ID(), b.ID())
	}
	// Swapping with a database never used: it is created later with the
	// id the mapping gives it.
	d.Swap(0, 5)
	if d.Existing(0) != nil || d.DB(5).ID() != 0 || d.DB(0).ID() != 5 {
		t.Fatalf("swap with an unused database: ids db0 %d db5 %d", d.DB(0).ID(), d.DB(5).ID())
	}
	d.Swap(3, 3)
	if d.Swaps() != 2 {
		t.Fatalf("a swap of a database with itself counted: %d", d.Swaps())
	}
}

func TestDatabasesSetPerm(t *testing.T) {
	d := newDBs(t, 4, Options{})
	for id := range uint32(4) {
		d.ByID(id).Load([]byte("k"), fmt.Appendf(nil, "%d", id), 0)
	}
	for _, bad := range [][]uint32{{0, 0, 1, 2}, {0, 1, 2, 4}, {0, 1, 2, 3, 4}} {
		if err := d.SetPerm(bad); err != ErrPerm {
			t.Errorf("SetPerm(%v) = %v, want ErrPerm", bad, err)
		}
	}
	if err := d.SetPerm([]uint32{2, 0, 1}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint64{2, 0, 1, 3} {
		v, ok := d.DB(i).Get([]byte("k"), 0)
		if !ok || v.TAT != want || d.DB(i).ID() != uint32(want) {
			t.Errorf("db %d holds %d (id %d), want %d", i, v.TAT, d.DB(i).ID(), want)
		}
	}
}

func TestMove(t *testing.T) {
	d := newDBs(t, 4, Options{TrackDirty: true})
	src, dst := d.DB(0), d.DB(2)
	src.Load([]byte("k"), []byte("+5"), 9_000) // verbatim text, expiry
	src.Load([]byte("a-key-longer-than-sixteen-bytes"), []byte("12"), 0)
	src.Drain(0, nil)
	dst.Drain(0, nil)
	used := keysUsed(d.DB(0))
	for _, k := range []string{"k", "a-key-longer-than-sixteen-bytes"} {
		ok, err := Move(src, dst, []byte(k), 1_000)
		if !ok || err != nil {
			t.Fatalf("Move(%q) = %v, %v", k, ok, err)
		}
	}
	// The keys' charges moved with them; the source may have started a
	// block for its deletions' names (4 KiB per shard, memory.go).
	if got := keysUsed(d.DB(0)); got < used || got > used+2*4096 {
		t.Errorf("used memory %d after the moves, want %d (+ at most two deletion blocks)", got, used)
	}
	v, ok := dst.Get([]byte("k"), 1_000)
	if !ok || v.Raw != "+5" || v.ExpireAtMs != 9_000 || src.Len() != 0 {
		t.Fatalf("moved value %+v %v, source len %d", v, ok, src.Len())
	}
	if ch := src.Drain(1_000, nil); len(ch) != 2 || !ch[0].Deleted || !ch[1].Deleted {
		t.Errorf("source changes %+v, want two deletions", ch)
	}
	if ch := dst.Drain(1_000, nil); len(ch) != 2 || ch[0].Deleted {
		t.Errorf("destination changes %+v, want two writes", ch)
	}
	// Absent in the source, present in the destination, expired: no move.
	if ok, _ := Move(src, dst, []byte("k"), 1_000); ok {
		t.Error("moved a key absent from the source")
	}
	src.Load([]byte("k"), []byte("1"), 0)
	if ok, _ := Move(src, dst, []byte("k"), 1_000); ok {
		t.Error("moved onto a key the destination holds")
	}
	if ok, _ := Move(dst, src, []byte("k"), 10_000); ok {
		t.Error("moved a key expired in the source") // dst's k expired at 9 000
	}
	if v, _ := src.Get([]byte("k"), 10_000); v.TAT != 1 {
		t.Error("a refused move changed the destination")
	}
}

// Eviction is one account over every database: keys of any database are
// evicted to make room for a key of another.
func TestDatabasesShareTheMemoryBound(t *testing.T) {
	d := newDBs(t, 16, Options{})
	d.DB(0).SetPolicy(AllKeysRandom)
	for i := range 2000 {
		d.DB(1+i%2).Load(fmt.Appendf(nil, "k%d", i), []byte("1"), 0)
	}
	d.DB(7)
	before := d.UsedMemory()
	if d.DB(7).UsedMemory() != before {
		t.Fatal("UsedMemory differs between databases of one account")
	}
	d.DB(0).SetMaxMemory(before - 500*entryCost)
	lim, _ := gcra.NewLimit(10, 10, 60)
	for i := range 200 {
		if _, err := d.DB(0).Throttle(fmt.Appendf(nil, "new%d", i), lim, 1, 1e18); err != nil {
			t.Fatalf("insert %d into db 0: %v", i, err)
		}
	}
	if d.DB(0).EvictedKeys() < 500 {
		t.Errorf("evicted %d keys, want at least 500", d.DB(0).EvictedKeys())
	}
	if n1, n2 := d.DB(1).Len(), d.DB(2).Len(); n1 == 1000 || n2 == 1000 {
		t.Errorf("eviction spared a database: db1 %d db2 %d keys", n1, n2)
	}
	if got, limit := d.UsedMemory(), d.DB(0).MaxMemory(); got > limit+limit/64 {
		t.Errorf("used %d over the bound %d", got, limit)
	}
	// A database created under the bound follows it.
	d.DB(9).Load([]byte("x"), []byte("1"), 0)
	if d.DB(9).shardAt(0).memBatch != batchFor(d.DB(0).MaxMemory()) {
		t.Error("a new database's shards do not follow the bound's batch")
	}
}

func TestRandomKey(t *testing.T) {
	s := New(Options{})
	if _, ok := s.RandomKey(0); ok {
		t.Fatal("RandomKey of an empty store")
	}
	want := map[string]bool{}
	for i := range 50 {
		k := fmt.Sprintf("k%d", i)
		want[k] = true
		s.Load([]byte(k), []byte("1"), 0)
	}
	s.Load([]byte("gone"), []byte("1"), 5)
	seen := map[string]bool{}
	for range 2000 {
		k, ok := s.RandomKey(10)
		if !ok || !want[string(k)] {
			t.Fatalf("RandomKey = %q, %v", k, ok)
		}
		seen[string(k)] = true
	}
	if len(seen) < 25 {
		t.Errorf("2000 draws saw %d of 50 keys", len(seen))
	}
	if _, ok := s.Get([]byte("gone"), 0); ok {
		t.Error("the expired key met on the way was not deleted")
	}
}

func TestSweepStepCoversEveryDatabase(t *testing.T) {
	d := newDBs(t, 16, Options{})
	for i := range 16 {
		d.DB(i).Load([]byte("k"), []byte("1"), 5)
	}
	for range 20 {
		d.SweepStep(10, 1e9)
	}
	if d.Keys() != 0 || d.ExpiredKeys() != 16 {
		t.Fatalf("after sweeps: %d keys, %d expired", d.Keys(), d.ExpiredKeys())
	}
}

// TestRandomKeyFair: each of two keys comes back about half the time,
// wherever their shards are (Redis's Tcl "RANDOMKEY" test: two keys, 100
// calls, both seen). Choosing the first key met from a random shard gave
// a key whose shard came right after the other's a 1/256 chance. 40 pairs
// of keys, 400 draws each: a fair choice sees each key 200 ± 10 times, so
// the 25% floor is 10 standard deviations away.
func TestRandomKeyFair(t *testing.T) {
	for p := range 40 {
		s := New(Options{})
		a, b := fmt.Sprintf("a%d", p), fmt.Sprintf("b%d", p)
		s.Load([]byte(a), []byte("1"), 0)
		s.Load([]byte(b), []byte("1"), 0)
		n := map[string]int{}
		for range 400 {
			k, ok := s.RandomKey(10)
			if !ok {
				t.Fatal("RandomKey found nothing")
			}
			n[string(k)]++
		}
		if n[a] < 100 || n[b] < 100 {
			t.Fatalf("pair %d: %q drawn %d times, %q %d times in 400", p, a, n[a], b, n[b])
		}
	}
}
