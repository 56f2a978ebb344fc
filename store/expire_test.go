package store

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/celld/celld/window"
)

// TestCleanExpiryLeavesNoRecord: on every path that removes an expired key
// (a lookup by CL.THROTTLE, a GET, CL.WINDOW, the sweep, RandomKey), a key
// whose last write was drained goes without a deletion record and is
// counted by TakeUnloggedExpiries; a key written since the last drain
// (dirty) still gets its deletion. Without persistence nothing is counted.
func TestCleanExpiryLeavesNoRecord(t *testing.T) {
	lim := mustLimit(t, 0, 1, 1) // EI 1 s: TTL 1 s
	fixed := winLimit(window.Fixed, 10, 1000)
	now := t0ms - t0ms%1000
	paths := map[string]func(s *Store, key string, at int64){
		"throttle": func(s *Store, key string, at int64) { s.Throttle([]byte(key), lim, 1, at*1e6) },
		"get":      func(s *Store, key string, at int64) { s.Get([]byte(key), at) },
		"window":   func(s *Store, key string, at int64) { s.Window([]byte(key), fixed, 0, at) }, // a peek: removes, writes nothing
		"sweep": func(s *Store, _ string, at int64) {
			for s.SweepStep(at, time.Second) > 0 {
			}
		},
		"random": func(s *Store, _ string, at int64) { s.RandomKey(at) },
	}
	for name, expire := range paths {
		for _, dirty := range []bool{false, true} {
			s := New(Options{TrackDirty: true})
			key := name + "-key"
			if name == "window" {
				s.Window([]byte(key), fixed, 1, now) // expires at now+1000
			} else {
				s.Throttle([]byte(key), lim, 1, now*1e6) // expires at now+1000
			}
			if !dirty {
				s.Drain(now, nil)
			}
			later := now + 1500
			expire(s, key, later)
			var dels int
			for _, c := range s.Drain(later, nil) {
				if string(c.Key) == key && c.Deleted {
					dels++
				}
			}
			want, wantQuiet := 0, int64(1)
			if dirty {
				want, wantQuiet = 1, 0
			}
			if name == "throttle" && !dirty {
				// Made again by the call: its new state is drained, no
				// deletion before it.
				if v, ok := s.Get([]byte(key), later); !ok || v.ExpireAtMs != later+1000 {
					t.Errorf("%s: not made again: %+v %v", name, v, ok)
				}
			}
			if dels != want {
				t.Errorf("%s (dirty %v): %d deletions drained, want %d", name, dirty, dels, want)
			}
			if n := s.TakeUnloggedExpiries(); n != wantQuiet {
				t.Errorf("%s (dirty %v): TakeUnloggedExpiries = %d, want %d", name, dirty, n, wantQuiet)
			}
			if n := s.ExpiredKeys(); n != 1 {
				t.Errorf("%s (dirty %v): ExpiredKeys = %d, want 1", name, dirty, n)
			}
		}
	}
	s := New(Options{})
	s.Throttle([]byte("k"), lim, 1, now*1e6)
	s.Get([]byte("k"), now+1500)
	if n := s.TakeUnloggedExpiries(); n != 0 {
		t.Errorf("without persistence: TakeUnloggedExpiries = %d, want 0", n)
	}
}

// TestExpiryRecordsReplayExactly is a model check of what the disk says
// once expired keys leave no record: random writes (with and without a
// TTL), TTLs shortened, lengthened and removed, deletions, CL.THROTTLE and
// CL.WINDOW calls, lookups, sweeps and RandomKey over 40 keys, with drains
// applied to a model of the disk at random times and folds that replace
// it with a snapshot. At every drain, a restore of the disk at any later
// time (one that drops records whose expiry has passed, as persist's
// replay does) must give exactly the store's live keys at the drain that
// are still alive then: what a SIGTERM's final drain leaves, and what a
// kill -9 after that drain leaves.
func TestExpiryRecordsReplayExactly(t *testing.T) {
	type rec struct {
		exp  int64
		kind Kind
	}
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := New(Options{TrackDirty: true})
		disk := map[string]rec{}
		now := t0ms
		lim := mustLimit(t, 1, 1, 1)
		fixed := winLimit(window.Fixed, 3, 200)
		keys := make([]string, 40)
		for i := range keys {
			keys[i] = "k" + strconv.Itoa(i)
		}
		restore := func(d map[string]rec, at int64) map[string]rec {
			out := map[string]rec{}
			for k, r := range d {
				if r.exp == 0 || at <= r.exp {
					out[k] = r
				}
			}
			return out
		}
		live := func(at int64) map[string]rec {
			var ks []string
			s.EachKey(at, func(k []byte) bool { ks = append(ks, string(k)); return true })
			out := map[string]rec{}
			for _, k := range ks {
				if v, ok := s.Get([]byte(k), at); ok {
					out[k] = rec{v.ExpireAtMs, v.Kind}
				}
			}
			return out
		}
		same := func(what string, got, want map[string]rec) {
			t.Helper()
			for k, w := range want {
				if g, ok := got[k]; !ok || g != w {
					t.Fatalf("seed %d, %s: %s restored as %+v (present %v), want %+v", seed, what, k, g, ok, w)
				}
			}
			for k, g := range got {
				if _, ok := want[k]; !ok {
					t.Fatalf("seed %d, %s: %s restored (%+v) but not live", seed, what, k, g)
				}
			}
		}
		for step := range 3000 {
			now += int64(rng.IntN(40))
			k := []byte(keys[rng.IntN(len(keys))])
			isWin := k[1]%2 == 0 // even keys are windows, odd ones TATs and strings
			switch op := rng.IntN(12); {
			case op < 3 && isWin:
				s.Window(k, fixed, int64(rng.IntN(2)), now)
			case op < 3:
				s.Throttle(k, lim, 1, now*1e6)
			case op == 3 && !isWin:
				exp := int64(0)
				if rng.IntN(2) == 0 {
					exp = now + int64(rng.IntN(500)) + 1
				}
				s.Put(k, Value{TAT: uint64(step), ExpireAtMs: exp}, now, PutAlways, false)
			case op == 4: // PEXPIRE: shorter, longer, or PERSIST
				s.Update(k, now, func(old Value, ok bool) (Value, Action) {
					if !ok {
						return old, Keep
					}
					switch rng.IntN(3) {
					case 0:
						old.ExpireAtMs = now + 1 + int64(rng.IntN(30))
					case 1:
						old.ExpireAtMs = now + 1000 + int64(rng.IntN(1000))
					default:
						old.ExpireAtMs = 0
					}
					return old, Put
				})
			case op == 5:
				s.Delete(k, now)
			case op == 6:
				s.Get(k, now)
			case op == 7:
				s.SweepStep(now, time.Second)
			case op == 8:
				s.RandomKey(now)
			case op == 9: // a fold: the disk becomes a snapshot
				disk = map[string]rec{}
				for i := range NumShards {
					s.DumpShard(i, now, func(c Change) { disk[string(c.Key)] = rec{c.ExpireAtMs, c.Kind} })
				}
			default: // a drain; then restores now and later
				for _, c := range s.Drain(now, nil) {
					if c.Deleted {
						delete(disk, string(c.Key))
					} else {
						disk[string(c.Key)] = rec{c.ExpireAtMs, c.Kind}
					}
				}
				at := live(now)
				for _, later := range []int64{now, now + 1, now + 37, now + 600, now + 5000} {
					same("restore at +"+strconv.FormatInt(later-now, 10), restore(disk, later), restore(at, later))
				}
			}
		}
	}
}

// BenchmarkSweepExpired measures the sweep's cost per expired key, as a
// FIXED window's boundary has it: 100,000 keys of 15 bytes that stay and
// 100,000 FIXED keys made by one call each (random order, drained: clean,
// as persistence has them once flushed) that all expire; the sweep then
// removes them, and a drain takes whatever it queued. ns/op is per
// expired key (CPU time of the process, so a neighbour's load is not
// counted).
func BenchmarkSweepExpired(b *testing.B) {
	const nkeys = 100_000
	all, _ := churnKeys(2 * nkeys)
	keys, stay := all[:nkeys], all[nkeys:]
	perm := rand.New(rand.NewPCG(3, 4)).Perm(nkeys)
	l, lStay := winLimit(window.Fixed, 100, 1000), winLimit(window.Fixed, 1_000_000, 3_600_000)
	s := New(Options{TrackDirty: true})
	now := t0ms - t0ms%1000
	for _, k := range stay {
		s.Window(k, lStay, 1, now)
	}
	var block []byte
	var cpu int64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for i := range nkeys {
			s.Window(keys[perm[i]], l, 1, now)
		}
		block = s.DrainFunc(now, block[:0], func(Change) {})
		now += 1000
		b.StartTimer()
		t0 := processCPUNs()
		// The keys end at now. A step leaves a shard at its first batch
		// of mostly live keys (as the server's, which runs every
		// interval), so it takes a few steps to pass them all.
		for i := 0; s.Len() > nkeys; i++ {
			if i == 1000 {
				b.Fatalf("%d keys after 1000 sweep steps, want %d", s.Len(), nkeys)
			}
			s.SweepStep(now+1, time.Second)
		}
		block = s.DrainFunc(now+1, block[:0], func(Change) {})
		cpu += processCPUNs() - t0
	}
	b.ReportMetric(float64(cpu)/float64(b.N)/nkeys, "cpu-ns/key")
}
