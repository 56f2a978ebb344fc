package store

import (
	"runtime"
	"testing"
)

// TestDatabaseFixedCost: a used database with one key costs a few KB, in
// used_memory (what --maxmemory bounds) and in heap alike, as Redis pays
// almost nothing for a database; an unused one costs nothing. The store
// held its 256 shards inline (~770 bytes each: ~198 KB per database the
// moment it was touched, the heap and used_memory both), so at
// --maxmemory 2mb touching 8 databases left an empty server refusing
// keys. The bound: 8 KB per database with one key.
func TestDatabaseFixedCost(t *testing.T) {
	const n = 16
	d := newDBs(t, n, Options{})
	now := int64(1_700_000_000_000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	used0 := d.DB(0).UsedMemory()
	for i := 1; i < n; i++ {
		if _, err := d.DB(i).Put([]byte("k"), Value{TAT: 1}, now, 0, false); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perUsed := (d.DB(0).UsedMemory() - used0) / (n - 1)
	perHeap := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / (n - 1)
	t.Logf("per database with one key: used_memory %d B, heap %d B", perUsed, perHeap)
	const bound = 8 << 10
	if perUsed > bound || perHeap > bound {
		t.Errorf("a database with one key costs %d B of used_memory and %d B of heap, want ≤ %d", perUsed, perHeap, bound)
	}
	if perUsed < perHeap/2 {
		t.Errorf("used_memory (%d B per database) understates the heap (%d B)", perUsed, perHeap)
	}
	for i := 1; i < n; i++ {
		if d.DB(i).Len() != 1 {
			t.Fatalf("db %d: %d keys", i, d.DB(i).Len())
		}
	}
}

// keysUsed is UsedMemory less the account's fixed costs (baseMemory a
// store, shardCost a made shard): what the keys are charged.
func keysUsed(s *Store) int64 { return s.UsedMemory() - s.fixed.Load() }
