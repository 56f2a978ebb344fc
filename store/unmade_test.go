package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestWritesOfNothingMakeNoShard: a shard is made on the first write that
// reaches it and stays, charged, for the store's life; so a call that
// writes nothing to a missing key must not make one. On 73bbdf8 Update
// (EXPIRE, PERSIST, GETEX...), Put with XX, WriteObject without create
// (LPOP, HDEL, ZREM, LTRIM, LPUSHX...), Rename, Copy, CopyTo and Move
// each made the missing key's shard: PEXPIRE on 3,000 missing keys made
// all 256 of a database's (196 KB), for good (hostile15).
func TestWritesOfNothingMakeNoShard(t *testing.T) {
	const now = 1_700_000_000_000
	d := newDBs(t, 2, Options{})
	s, s1 := d.DB(0), d.DB(1)
	calls := map[string]func(k []byte){
		"Update keep": func(k []byte) {
			if err := s.Update(k, now, func(old Value, ok bool) (Value, Action) { return old, Keep }); err != nil {
				t.Fatal(err)
			}
		},
		"Update delete": func(k []byte) {
			s.Update(k, now, func(old Value, ok bool) (Value, Action) { return old, Delete })
		},
		"Update past expiry": func(k []byte) {
			s.Update(k, now, func(old Value, ok bool) (Value, Action) { return Value{TAT: 1, ExpireAtMs: now - 1}, Put })
		},
		"Put XX": func(k []byte) {
			if ok, _ := s.Put(k, Value{TAT: 1}, now, PutIfPresent, false); ok {
				t.Fatal("Put XX on a missing key held")
			}
		},
		"Put past expiry": func(k []byte) { s.Put(k, Value{TAT: 1, ExpireAtMs: now - 1}, now, 0, false) },
		"WriteObject without create": func(k []byte) {
			if ran, err := s.WriteObject(k, KindList, now, nil, func(Object) bool { return true }); ran || err != nil {
				t.Fatalf("WriteObject on a missing key: %v, %v", ran, err)
			}
		},
		"Rename": func(k []byte) {
			if _, err := s.Rename(k, []byte("dst"), now, false); err != ErrNoSuchKey {
				t.Fatalf("Rename of a missing key: %v", err)
			}
		},
		"Copy":   func(k []byte) { s.Copy(k, []byte("dst"), now, false) },
		"CopyTo": func(k []byte) { CopyTo(s, s1, k, []byte("dst"), now, false) },
		"Move":   func(k []byte) { Move(s, s1, k, now) },
	}
	for name, call := range calls {
		for i := range 3000 {
			call(fmt.Appendf(nil, "missing:%d", i))
		}
		if m0, m1 := s.made.Load(), s1.made.Load(); m0 != 0 || m1 != 0 {
			t.Errorf("%s on 3,000 missing keys made %d + %d shards", name, m0, m1)
		}
		if s.Len() != 0 || s1.Len() != 0 {
			t.Fatalf("%s: %d + %d keys", name, s.Len(), s1.Len())
		}
	}
	// Writes that create still make their shard.
	if err := s.Update([]byte("k"), now, func(Value, bool) (Value, Action) { return Value{TAT: 7}, Put }); err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Get([]byte("k"), now); !ok || v.TAT != 7 || s.made.Load() != 1 {
		t.Fatalf("Update creating a key: %+v %v, %d shards made", v, ok, s.made.Load())
	}
}

// TestUpdateUnmadeShardIsAtomic: Update on a key whose shard is not made
// decides without the shard's lock (updateUnmade); concurrent creating
// Updates of one key (SET NX's decision: create when missing) must still
// see each other: exactly one creates, the others find the key (run with
// -race).
func TestUpdateUnmadeShardIsAtomic(t *testing.T) {
	const now = 1_700_000_000_000
	for round := range 200 {
		s := New(Options{})
		key := fmt.Appendf(nil, "k%d", round)
		var created atomic.Int32
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.Update(key, now, func(old Value, ok bool) (Value, Action) {
					if ok {
						return old, Keep
					}
					created.Add(1)
					return Value{TAT: uint64(g + 1)}, Put
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if n := created.Load(); n != 1 {
			t.Fatalf("round %d: %d Updates created the missing key, want 1", round, n)
		}
	}
}
