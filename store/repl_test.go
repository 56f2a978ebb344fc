package store

import (
	"fmt"
	"math/rand"
	"sort"
	"sync/atomic"
	"testing"

	"github.com/celld/celld/gcra"
	"github.com/celld/celld/window"
)

// dumpAll is every live key of s as "key kind value exp" lines, sorted.
func dumpAll(s *Store, nowMs int64) []string {
	var out []string
	for i := 0; i < NumShards; i++ {
		s.SnapshotShard(i, nowMs, func(c Change) {
			v := string(c.Text)
			if c.IsTAT {
				v = fmt.Sprint(c.TAT)
			}
			if c.Image != nil {
				v = fmt.Sprintf("%x", c.Image)
			}
			out = append(out, fmt.Sprintf("%q %s %s %d", c.Key, c.Kind, v, c.ExpireAtMs))
		})
	}
	sort.Strings(out)
	return out
}

// shipRepl drains src's effects into dst as a follower applies the live
// stream, and returns how many there were.
func shipRepl(t *testing.T, src, dst *Store, nowMs int64) int {
	t.Helper()
	return src.DrainRepl(func(c Change) {
		var obj Object
		if c.Kind != KindString && c.Kind != KindWindow && !c.Deleted {
			obj = &testObj{n: int(c.Image[0])}
		}
		c.Key = append([]byte(nil), c.Key...) // as a wire would
		if err := dst.ApplyChange(c, obj, false, nowMs); err != nil {
			t.Fatalf("apply %q: %v", c.Key, err)
		}
	})
}

// TestReplFeedMirrorsEveryKind: every kind of change on a leader's store
// (TATs, strings, raw and invalid texts, windows, objects, TTL changes,
// deletes, expiry, overwrites by another kind, FLUSH) reaches a follower's
// store through DrainRepl/ApplyChange, which then holds exactly the same
// keys, values and expiries, after every round of a random workload.
func TestReplFeedMirrorsEveryKind(t *testing.T) {
	leader, follower := New(Options{}), New(Options{})
	leader.SetRepl(true)
	rng := rand.New(rand.NewSource(1))
	now := int64(1_700_000_000_000)
	lim, err := gcra.NewLimit(5, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for round := 0; round < 200; round++ {
		for op := 0; op < 50; op++ {
			k := []byte(fmt.Sprintf("k%d", rng.Intn(40)))
			if rng.Intn(3) == 0 { // past the entry's inline key bytes
				k = []byte(fmt.Sprintf("a-key-longer-than-sixteen-bytes:%d", rng.Intn(20)))
			}
			switch rng.Intn(9) {
			case 0, 1:
				leader.Throttle(k, lim, 1, now*1e6)
			case 2:
				leader.Update(k, now, func(old Value, ok bool) (Value, Action) {
					v, _ := NewValue([]byte(fmt.Sprintf("+%d", rng.Intn(9))))
					return v, Put
				})
			case 3:
				leader.Update(k, now, func(old Value, ok bool) (Value, Action) {
					return Value{Raw: "not a number", Invalid: true, ExpireAtMs: now + 500}, Put
				})
			case 4:
				leader.Delete(k, now)
			case 5: // any mode: FIXED and SLIDING states on these short names are inline
				leader.Window(k, winLimit(window.Mode(1+rng.Intn(3)), 3, 1000), 1, now)
			case 6:
				leader.WriteObject(k, KindHash, now, newTestObj, func(o Object) bool {
					o.(*testObj).n = (o.(*testObj).n + 1) % 4
					return true
				})
			case 7: // EXPIRE on whatever kind is there
				leader.Update(k, now, func(old Value, ok bool) (Value, Action) {
					if !ok {
						return old, Keep
					}
					old.ExpireAtMs = now + int64(rng.Intn(300))
					return old, Put
				})
			case 8:
				if rng.Intn(20) == 0 {
					leader.Flush()
				}
			}
			now += int64(rng.Intn(3))
		}
		if rng.Intn(4) == 0 {
			leader.SweepStep(now, 1e6)
		}
		total += shipRepl(t, leader, follower, now)
		got, want := dumpAll(follower, now), dumpAll(leader, now)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: follower\n%v\nleader\n%v", round, got, want)
		}
	}
	if total == 0 {
		t.Fatal("no effects drained")
	}
}

// TestReplApplyMergeRules: a snapshot merge keeps the larger TAT; the live
// stream applies a refund (a TAT going down) and a delete.
func TestReplApplyMergeRules(t *testing.T) {
	s := New(Options{})
	const now = 1000
	k := []byte("k")
	apply := func(c Change, maxTAT bool) {
		t.Helper()
		c.Key = k
		if err := s.ApplyChange(c, nil, maxTAT, now); err != nil {
			t.Fatal(err)
		}
	}
	tat := func() uint64 { v, _ := s.Get(k, now); return v.TAT }
	apply(Change{TAT: 50, IsTAT: true, ExpireAtMs: now + 10}, true)
	apply(Change{TAT: 40, IsTAT: true, ExpireAtMs: now + 5}, true)
	if tat() != 50 {
		t.Fatalf("snapshot merge kept %d, want the larger 50", tat())
	}
	apply(Change{TAT: 40, IsTAT: true, ExpireAtMs: now + 5}, false)
	if tat() != 40 {
		t.Fatalf("stream refund left %d, want 40", tat())
	}
	apply(Change{Deleted: true}, false)
	if _, ok := s.Get(k, now); ok {
		t.Fatal("stream delete left the key")
	}
	apply(Change{TAT: 40, IsTAT: true, ExpireAtMs: now - 1}, false)
	if _, ok := s.Get(k, now); ok {
		t.Fatal("a change expired already created the key")
	}
	// An expiry of now is live to the end of this millisecond on the
	// leader (entry.alive, a 0 ms TTL): the follower keeps it too.
	apply(Change{TAT: 40, IsTAT: true, ExpireAtMs: now}, false)
	if _, ok := s.Get(k, now); !ok {
		t.Fatal("a change expiring at the end of this millisecond was dropped")
	}
	if err := s.ApplyChange(Change{Key: k, Kind: KindHash}, nil, false, now); err != ErrBadChange {
		t.Fatalf("object change without object: %v", err)
	}
}

// TestReplOffCostsNothing: without SetRepl nothing is logged, and a
// CL.THROTTLE on an existing key still allocates nothing with it on.
func TestReplOffCostsNothing(t *testing.T) {
	s := New(Options{})
	lim, _ := gcra.NewLimit(5, 1000, 1)
	s.Throttle([]byte("k"), lim, 1, 1e15)
	if n := s.DrainRepl(func(Change) {}); n != 0 {
		t.Fatalf("drained %d effects with replication off", n)
	}
	s.SetRepl(true)
	s.Throttle([]byte("k"), lim, 1, 1e15)
	s.DrainRepl(func(Change) {})
	now := int64(1e15)
	allocs := testing.AllocsPerRun(1000, func() {
		now += 1e9
		s.Throttle([]byte("k"), lim, 1, now)
		if now%64 == 0 {
			s.DrainRepl(func(Change) {})
		}
	})
	if allocs > 0.01 {
		t.Fatalf("%.2f allocations per Throttle with replication on", allocs)
	}
}

// TestReplDrainSkipsOnlyEmptyShards: DrainRepl skips shards whose pending
// word is clear without locking them; no effect may be left behind by it.
// Writers on several goroutines write and delete keys while a drainer
// drains in a loop. Each effect (a write of a fresh key, or the delete of
// one written before) must be carried by a drain that started no earlier
// than the drain in progress when the effect was made, and no later than
// the first drain that starts after it (what Barrier relies on).
func TestReplDrainSkipsOnlyEmptyShards(t *testing.T) {
	s := New(Options{})
	s.SetRepl(true)
	lim, _ := gcra.NewLimit(5, 10, 60)
	type req struct {
		key   string // "d:" + key for a delete
		since int64  // the drain in progress (or last done) before the effect
		ok    chan bool
	}
	var started atomic.Int64 // drains started; a drain's index is the value after its start
	reqs := make(chan req)
	stop := make(chan struct{})
	drained := make(chan struct{})
	go func() { // the drainer
		defer close(drained)
		seen := map[string]int64{} // effect → index of the last drain carrying it
		var waiting []req
		for {
			select {
			case r := <-reqs:
				waiting = append(waiting, r)
				continue
			case <-stop:
				return
			default:
			}
			idx := started.Add(1)
			s.DrainRepl(func(c Change) {
				k := string(c.Key)
				if c.Deleted {
					k = "d:" + k
				}
				seen[k] = idx
			})
			for _, r := range waiting {
				r.ok <- seen[r.key] >= r.since && seen[r.key] != 0
			}
			waiting = waiting[:0]
		}
	}()
	done := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := range 400 {
				since := started.Load()
				k := fmt.Sprintf("g%d:%d", g, i)
				effect := k
				if i%5 == 4 {
					k = fmt.Sprintf("g%d:%d", g, i-1)
					if !s.Delete([]byte(k), 1000) {
						done <- fmt.Errorf("%s was not there to delete", k)
						return
					}
					effect = "d:" + k
				} else if _, err := s.Throttle([]byte(k), lim, 1, 1e9); err != nil {
					done <- err
					return
				}
				r := req{effect, max(since, 1), make(chan bool)}
				reqs <- r
				if !<-r.ok {
					done <- fmt.Errorf("effect %s not carried by the drain after it", effect)
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-drained
}

// TestReplDrainTakesEachKeyOnce: a plain TAT's effect is recorded when it
// is written, and the drain sends each key's last state once: a key
// written many times in a round is one change with its latest TAT and
// expiry, a key deleted after its writes is a deletion only, and a slot
// freed and taken by another key carries the new key (short and long
// keys alike).
func TestReplDrainTakesEachKeyOnce(t *testing.T) {
	s := New(Options{})
	s.SetRepl(true)
	lim, _ := gcra.NewLimit(1000, 1000, 1)
	const now = int64(1_700_000_000_000)
	drain := func() map[string]Change {
		got := map[string]Change{}
		n := s.DrainRepl(func(c Change) {
			k := string(c.Key)
			if c.Deleted {
				k = "del " + k
			}
			if _, dup := got[k]; dup {
				t.Fatalf("%s sent twice in one round", k)
			}
			c.Key = nil
			got[k] = c
		})
		if n != len(got) {
			t.Fatalf("DrainRepl reported %d effects, passed %d", n, len(got))
		}
		return got
	}
	long := "a-key-longer-than-sixteen-bytes:hot"
	for _, hot := range []string{"hot", long} {
		for i := range 100 {
			if _, err := s.Throttle([]byte(hot), lim, 1, (now+int64(i))*1e6); err != nil {
				t.Fatal(err)
			}
		}
		got := drain()
		v, _ := s.Get([]byte(hot), now+100)
		if c, ok := got[hot]; len(got) != 1 || !ok || !c.IsTAT || c.TAT != v.TAT || c.ExpireAtMs != v.ExpireAtMs {
			t.Fatalf("%s: round sent %+v, want one change with TAT %d exp %d", hot, got, v.TAT, v.ExpireAtMs)
		}
	}
	// Written, then deleted: the deletion only.
	s.Throttle([]byte("gone"), lim, 1, now*1e6)
	s.Throttle([]byte(long+"2"), lim, 1, now*1e6)
	s.Delete([]byte("gone"), now)
	s.Delete([]byte(long+"2"), now)
	if got := drain(); len(got) != 2 || !got["del gone"].Deleted || !got["del "+long+"2"].Deleted {
		t.Fatalf("written then deleted: round sent %v", got)
	}
	// A slot freed and reused by another key (LIFO free list), then a
	// TAT overwritten by a string and the string by a TAT again.
	s.Throttle([]byte("a"), lim, 1, now*1e6)
	s.Delete([]byte("a"), now)
	s.Throttle([]byte("b"), lim, 1, now*1e6)
	if s.shardOf([]byte("a")) == s.shardOf([]byte("b")) {
		t.Log("a and b share a shard")
	}
	s.Update([]byte("hot"), now, func(Value, bool) (Value, Action) {
		return Value{Raw: "text", Invalid: true}, Put
	})
	got := drain()
	if len(got) != 3 || !got["del a"].Deleted || !got["b"].IsTAT || got["hot"].IsTAT || string(got["hot"].Text) != "text" {
		t.Fatalf("reuse and overwrite: round sent %v", got)
	}
	s.Update([]byte("hot"), now, func(Value, bool) (Value, Action) { return Value{TAT: 7}, Put })
	if got := drain(); len(got) != 1 || !got["hot"].IsTAT || got["hot"].TAT != 7 {
		t.Fatalf("string back to a TAT: round sent %v", got)
	}
	if got := drain(); len(got) != 0 {
		t.Fatalf("an empty round sent %v", got)
	}
}
