package store

import (
	"github.com/celld/celld/gcra"
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

// TestMakeShardAgainstSetReplAndBound: shards made while SetRepl and
// SetMaxMemory run (the two walk every made shard to set its log and
// batch) end up with the settings that were current last: a shard made
// meanwhile is neither left without a log nor with an old batch, and the
// account's fixed cost counts every made shard once (run with -race).
func TestMakeShardAgainstSetReplAndBound(t *testing.T) {
	for round := range 20 {
		s := New(Options{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range 2000 {
				key := []byte{byte(i), byte(i >> 8), 'k'}
				if _, err := s.Put(key, Value{TAT: 1}, 1, 0, false); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		s.SetRepl(true)
		s.SetMaxMemory(4 << 20) // a batch of 256 bytes, where no bound's is 1 KiB
		<-done
		want := batchFor(4 << 20)
		made := 0
		for i := range s.shards {
			sh := s.shards[i].Load()
			if sh == nil {
				continue
			}
			made++
			sh.mu.Lock()
			rl, batch := sh.rl, sh.memBatch
			sh.mu.Unlock()
			if rl == nil || batch != want {
				t.Fatalf("round %d shard %d: log %v, batch %d (want a log and %d)", round, i, rl != nil, batch, want)
			}
		}
		if made != int(s.made.Load()) || s.fixed.Load() != baseMemory+int64(made)*shardCost {
			t.Fatalf("round %d: %d shards made, counted %d, fixed %d", round, made, s.made.Load(), s.fixed.Load())
		}
	}
}

// TestReadsMakeNoShards: looking up keys that are not there (GET, WATCH's
// Version, DEL, OBJECT, MEMORY USAGE, a kind's read, CL.THROTTLE_RO's Peek) makes no shard, so a
// client probing random names in every database does not bring back the
// ~197 KB per database that lazy shards saved. A write makes its shard.
func TestReadsMakeNoShards(t *testing.T) {
	s := New(Options{})
	now := int64(1_700_000_000_000)
	before := s.UsedMemory()
	peekLim := mustLimit(t, 5, 1, 10)
	for i := range 4096 {
		k := []byte("missing:" + string(rune('a'+i%26)) + string(rune(i)))
		s.Get(k, now)
		s.Version(k, now)
		s.Delete(k, now)
		s.Inspect(k, now)
		s.KeyMemory(k, now)
		s.PeekString(k, now, func(Value) {})
		s.PeekObject(k, now, func(Object) {})
		if _, err := s.ReadObject(k, KindHash, now, func(Object) {}); err != nil {
			t.Fatal(err)
		}
		if r, err := s.Peek(gcra.UnitSeconds, k, peekLim, 1, now*1e6); err != nil || r.Limited || r.Max != 6 {
			t.Fatalf("Peek of a missing key: %+v %v", r, err)
		}
	}
	if made := s.made.Load(); made != 0 {
		t.Fatalf("reads of 4096 missing keys made %d shards (used_memory %d -> %d)", made, before, s.UsedMemory())
	}
	if _, err := s.Put([]byte("k"), Value{TAT: 1}, now, 0, false); err != nil {
		t.Fatal(err)
	}
	if made := s.made.Load(); made != 1 {
		t.Fatalf("one write made %d shards, want 1", made)
	}
	if v, ok := s.Get([]byte("k"), now); !ok || v.TAT != 1 {
		t.Fatalf("Get after Put: %+v %v", v, ok)
	}
}
