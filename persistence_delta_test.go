package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/persist"
	"github.com/celld/celld/store"
)

// kindsHarness is a store with persistence on a directory, driven by hand:
// writes to hashes, lists and sorted sets, flushes, base rewrites, and the
// drain-then-rewrite-then-write interleaving a fold running beside the
// flush loop can produce.
type kindsHarness struct {
	t     *testing.T
	dir   string
	nowMs int64
	db    *persist.DB
	st    *store.Store
	p     *persistence
}

func newKindsHarness(t *testing.T) *kindsHarness {
	h := &kindsHarness{t: t, dir: t.TempDir(), nowMs: 1_800_000_000_000}
	now := time.UnixMilli(h.nowMs)
	db, err := persist.Open(h.dir, persist.Options{Logger: quietLog(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	h.db = db
	h.st = store.New(store.Options{TrackDirty: true})
	h.p = &persistence{db: db, st: h.st, log: quietLog()}
	h.p.fl = persist.NewFlusher(db, persist.FlusherConfig{Interval: time.Hour, Encode: h.p.encode, Logger: quietLog()})
	return h
}

var kindMakers = map[store.Kind]func() store.Object{
	store.KindHash: func() store.Object { return kinds.NewHash() },
	store.KindList: func() store.Object { return kinds.NewList() },
	store.KindZSet: func() store.Object { return kinds.NewZSet() },
}

// write runs fn on key's object of kind, creating it.
func (h *kindsHarness) write(key string, kind store.Kind, fn func(o store.Object)) {
	h.t.Helper()
	if _, err := h.st.WriteObject([]byte(key), kind, h.nowMs, kindMakers[kind], func(o store.Object) bool { fn(o); return true }); err != nil {
		h.t.Fatal(err)
	}
}

func (h *kindsHarness) flush() {
	h.t.Helper()
	if err := h.p.fl.FlushNow(); err != nil {
		h.t.Fatal(err)
	}
}

func (h *kindsHarness) rewrite() {
	h.t.Helper()
	if _, err := h.db.WriteBase(func(w *persist.BaseWriter) error { return h.p.snapshot(h.nowMs, w) }); err != nil {
		h.t.Fatal(err)
	}
}

// drainRewriteWrite drains a window, rewrites the base (whose snapshot
// then holds the drained changes and any made before it), and writes the
// window after the cut: the log then holds records the base contains.
func (h *kindsHarness) drainRewriteWrite(between func()) {
	h.t.Helper()
	ops := h.p.drain(h.nowMs, nil)
	if between != nil {
		between()
	}
	h.rewrite()
	if err := h.db.Write(ops); err != nil {
		h.t.Fatal(err)
	}
}

// restart closes and restores into a new store, returning it.
func (h *kindsHarness) restart() *store.Store {
	h.t.Helper()
	if err := h.p.Close(); err != nil {
		h.t.Fatal(err)
	}
	db, err := persist.Open(h.dir, persist.Options{Logger: quietLog()})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { db.Close() })
	st := store.New(store.Options{TrackDirty: true})
	p := &persistence{db: db, st: st, log: quietLog()}
	if err := p.load(time.UnixMilli(h.nowMs)); err != nil {
		h.t.Fatal(err)
	}
	return st
}

// randomKindWrite is one random element write, as the data handlers make
// them.
func randomKindWrite(r *rand.Rand, kind store.Kind, o store.Object) {
	item := "e" + strconv.Itoa(r.IntN(60))
	switch x := o.(type) {
	case *kinds.Hash:
		if r.IntN(4) == 0 {
			x.Delete(item)
		} else {
			x.Set(item, strconv.Itoa(r.IntN(100)))
		}
	case *kinds.ZSet:
		if r.IntN(4) == 0 {
			x.Remove(item)
		} else {
			x.Set(item, float64(r.IntN(100)))
		}
	case *kinds.List:
		switch n := x.Len(); {
		case n > 0 && r.IntN(5) == 0:
			x.PopBack()
		case n > 0 && r.IntN(5) == 0:
			x.SetAt(r.IntN(n), item)
		case n > 3 && r.IntN(8) == 0:
			x.Trim(1, n-2)
		default:
			x.PushFront(item)
		}
	}
}

// TestPersistKindsDeltasExact: hashes, lists and sorted sets changed at
// random between flushes, base rewrites, and windows drained before a
// rewrite but written after its cut, restore exactly. A list's records
// are not idempotent (LPUSH twice is two items), so a record the base
// already holds being replayed again shows up as a difference: the
// generations must skip it.
func TestPersistKindsDeltasExact(t *testing.T) { testPersistKindsDeltasExact(t, false) }

// TestPersistKindsDeltasExactWithReplication: the same, with replication's
// feed on and drained (DrainRepl, SnapshotShard) at random moments between
// the writes: replication reads whole images and must neither take
// persistence's deltas nor seal its generations.
func TestPersistKindsDeltasExactWithReplication(t *testing.T) { testPersistKindsDeltasExact(t, true) }

func testPersistKindsDeltasExact(t *testing.T, repl bool) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			h := newKindsHarness(t)
			r := rand.New(rand.NewPCG(seed, 99))
			replDrained := 0
			if repl {
				h.st.SetRepl(true)
			}
			keys := []string{"h1", "h2", "l1", "l2", "z1", "z2"}
			kindOf := func(k string) store.Kind {
				switch k[0] {
				case 'h':
					return store.KindHash
				case 'l':
					return store.KindList
				}
				return store.KindZSet
			}
			writes := func(n int) {
				for range n {
					k := keys[r.IntN(len(keys))]
					h.write(k, kindOf(k), func(o store.Object) { randomKindWrite(r, kindOf(k), o) })
					if repl && r.IntN(4) == 0 {
						replDrained += h.st.DrainRepl(func(store.Change) {})
					}
					if repl && r.IntN(40) == 0 {
						h.st.SnapshotShard(r.IntN(store.NumShards), h.nowMs, func(store.Change) {})
					}
				}
			}
			for step := range 60 {
				writes(1 + r.IntN(30))
				switch r.IntN(6) {
				case 0:
					h.rewrite()
				case 1:
					h.drainRewriteWrite(func() { writes(r.IntN(10)) })
				case 2:
					if r.IntN(3) == 0 { // a key deleted and made again
						k := keys[r.IntN(len(keys))]
						h.st.Delete([]byte(k), h.nowMs)
						writes(2)
					}
					h.flush()
				default:
					h.flush()
				}
				_ = step
			}
			writes(5)
			want := dumpKinds(t, h.st, h.nowMs, keys)
			got := dumpKinds(t, h.restart(), h.nowMs, keys)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after restart:\n got %v\nwant %v", got, want)
			}
			if repl && replDrained == 0 {
				t.Fatal("replication's feed drained nothing")
			}
		})
	}
}

// TestPersistKindsDeltaCostsTheChange: once a 100,000-member sorted set is
// on disk, a window that adds 10 members writes a few hundred bytes, not
// the set; so does a window that changes a big hash or list by one
// element.
func TestPersistKindsDeltaCostsTheChange(t *testing.T) {
	h := newKindsHarness(t)
	h.write("z", store.KindZSet, func(o store.Object) {
		for i := range 100_000 {
			o.(*kinds.ZSet).Set("member:"+strconv.Itoa(i), float64(i))
		}
	})
	h.write("h", store.KindHash, func(o store.Object) {
		for i := range 50_000 {
			o.(*kinds.Hash).Set("field:"+strconv.Itoa(i), "value")
		}
	})
	h.write("l", store.KindList, func(o store.Object) {
		for i := range 50_000 {
			o.(*kinds.List).PushBack("item:" + strconv.Itoa(i))
		}
	})
	h.flush()
	first := h.db.LogBytes()
	if first < 1_000_000 {
		t.Fatalf("the images took %d bytes: too few to tell", first)
	}
	h.write("z", store.KindZSet, func(o store.Object) {
		for i := range 10 {
			o.(*kinds.ZSet).Set("new:"+strconv.Itoa(i), float64(-i))
		}
	})
	h.write("h", store.KindHash, func(o store.Object) { o.(*kinds.Hash).Set("field:7", "changed") })
	h.write("l", store.KindList, func(o store.Object) { o.(*kinds.List).PushFront("head") })
	h.flush()
	second := h.db.LogBytes() - first
	t.Logf("images: %d bytes; a window of 12 element changes: %d bytes", first, second)
	if second > 1024 {
		t.Fatalf("a window of 12 element changes wrote %d bytes", second)
	}
	want := dumpKinds(t, h.st, h.nowMs, []string{"z", "h", "l"})
	got := dumpKinds(t, h.restart(), h.nowMs, []string{"z", "h", "l"})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatal("after restart: the values differ")
	}
}
