package store

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentChaos runs every Store method from many goroutines on
// overlapping keys (run it with -race). A single drainer applies Drain's
// output to a model of the disk; at the end the model must equal the store,
// which is the persistence contract: every change is reported, in order.
func TestConcurrentChaos(t *testing.T) {
	s := New(Options{TrackDirty: true})
	var clock atomic.Int64
	clock.Store(t0ms)
	now := func() int64 { return clock.Load() }

	const nkeys = 48
	keys := make([][]byte, nkeys)
	for i := range keys {
		keys[i] = []byte("k" + strconv.Itoa(i))
	}
	// A few keys forced into one shard, so shard-local paths (slot reuse,
	// dirty list) see contention too.
	for _, k := range keysInShard(s, 9, 16, "same:") {
		keys = append(keys, []byte(k))
	}
	lim := mustLimit(t, 3, 10, 1) // EI 100 ms: TTLs up to 400 ms

	iters := 10000
	if testing.Short() {
		iters = 500
	}
	stop := make(chan struct{})
	var fg, bgWG sync.WaitGroup
	worker := func(seed uint64, f func(r *rand.Rand, i int)) {
		fg.Add(1)
		go func() {
			defer fg.Done()
			r := rand.New(rand.NewPCG(seed, 7))
			for i := 0; i < iters; i++ {
				f(r, i)
			}
		}()
	}
	bg := func(f func()) { // runs until the workers are done
		bgWG.Add(1)
		go func() {
			defer bgWG.Done()
			for {
				select {
				case <-stop:
					return
				default:
					f()
				}
			}
		}()
	}

	for g := 0; g < 4; g++ {
		worker(uint64(g), func(r *rand.Rand, i int) {
			k := keys[r.IntN(len(keys))]
			q := int64(r.IntN(3)) // 0 exercises the 0 ms delete path
			if _, err := s.Throttle(k, lim, q, now()*1e6); err != nil && err != ErrInvalidValue {
				t.Errorf("Throttle: %v", err)
			}
			if i%50 == 0 {
				clock.Add(int64(r.IntN(30)))
			}
		})
	}
	worker(10, func(r *rand.Rand, _ int) {
		k := keys[r.IntN(len(keys))]
		if v, ok := s.Get(k, now()); ok && v.TextLen() != len(v.AppendText(nil)) {
			t.Errorf("TextLen mismatch for %+v", v)
		}
		s.Version(k, now())
	})
	worker(11, func(r *rand.Rand, _ int) {
		k := keys[r.IntN(len(keys))]
		n := now()
		switch r.IntN(4) {
		case 0:
			s.Update(k, n, func(v Value, ok bool) (Value, Action) {
				return Value{TAT: uint64(r.IntN(1000)), ExpireAtMs: n + int64(r.IntN(200))}, Put
			})
		case 1:
			s.Update(k, n, func(v Value, ok bool) (Value, Action) {
				return Value{TAT: 5, Raw: "+5"}, Put
			})
		case 2:
			s.Update(k, n, func(v Value, ok bool) (Value, Action) { return v, Keep })
		case 3:
			s.Update(k, n, func(v Value, ok bool) (Value, Action) { return Value{}, Delete })
		}
	})
	worker(12, func(r *rand.Rand, _ int) {
		s.Delete(keys[r.IntN(len(keys))], now())
	})
	worker(14, func(r *rand.Rand, _ int) {
		// Prefetch reads the index without the shard locks, while the
		// workers above insert, delete, flush and grow it.
		var batch [8][]byte
		var hs [8]uint64
		for j := range batch {
			batch[j] = keys[r.IntN(len(keys))]
		}
		s.Prefetch(batch[:], hs[:])
	})
	worker(13, func(r *rand.Rand, i int) {
		// Load on keys of its own: they are "on disk" already, so the model
		// ignores them.
		k := []byte("load:" + strconv.Itoa(r.IntN(32)))
		text := []byte(strconv.Itoa(r.IntN(100)))
		if i%7 == 0 {
			text = []byte("not-a-number")
		}
		s.Load(k, text, now()+int64(r.IntN(100)))
		if i%500 == 499 {
			s.Flush()
		}
	})
	bg(func() {
		c := uint64(0)
		for {
			c = s.Scan(c, 7, now(), func(kb []byte) {
				k := string(kb)
				_ = k

				if len(k) == 0 {
					t.Error("empty key from Scan")
				}
			})
			if c == 0 {
				break
			}
		}
		s.Keys("k*", now(), func([]byte) {})
		s.Counts()
		s.Len()
	})
	bg(func() { s.SweepStep(now(), time.Millisecond) })
	bg(func() { s.DirtyKeys() })

	disk := map[string]diskRec{}
	var drainMu sync.Mutex
	drain := func() {
		drainMu.Lock()
		applyChanges(disk, s.Drain(now(), nil))
		drainMu.Unlock()
	}
	bg(drain)

	// Stop the background loops once the workers finish.
	fg.Wait()
	close(stop)
	bgWG.Wait()

	drain()
	final := now()
	drainMu.Lock()
	defer drainMu.Unlock()
	for k := range disk {
		if strings.HasPrefix(k, "load:") {
			delete(disk, k)
		}
	}
	var live []string
	s.Keys("*", final, func(kb []byte) {
		k := string(kb)
		_ = k

		if !strings.HasPrefix(k, "load:") {
			live = append(live, k)
		}
	})
	for _, k := range live {
		v, ok := s.Get([]byte(k), final)
		if !ok {
			continue
		}
		d, on := disk[k]
		if !on {
			t.Errorf("live key %q (%q exp %d) was never reported by Drain", k, v.AppendText(nil), v.ExpireAtMs)
			continue
		}
		if d.text != string(v.AppendText(nil)) || d.exp != v.ExpireAtMs {
			t.Errorf("key %q: Drain said %+v, store has %q exp %d", k, d, v.AppendText(nil), v.ExpireAtMs)
		}
	}
	for k, d := range disk {
		if _, ok := s.Get([]byte(k), final); !ok && (d.exp == 0 || d.exp >= final) {
			t.Errorf("key %q: Drain said %+v, but the store has no live key", k, d)
		}
	}
	if n := s.DirtyKeys(); n != 0 {
		t.Errorf("DirtyKeys = %d after the final Drain", n)
	}
}
