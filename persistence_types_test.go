package main

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/persist"
	"github.com/celld/celld/store"
)

// dumpKinds describes every hash, list and sorted set in st, for
// comparing a store before and after a restart.
func dumpKinds(t *testing.T, st *store.Store, nowMs int64, keys []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range keys {
		for _, kind := range []store.Kind{store.KindHash, store.KindList, store.KindZSet} {
			found, err := st.ReadObject([]byte(k), kind, nowMs, func(o store.Object) {
				out[k] = fmt.Sprintf("%s %x", kind, o.AppendImage(nil))
			})
			if found && err == nil {
				v, _ := st.Get([]byte(k), nowMs)
				out[k] += fmt.Sprintf(" exp=%d", v.ExpireAtMs)
			}
		}
	}
	return out
}

// TestPersistKindsRestart: hashes, lists and sorted sets written through
// the store reach the disk by the drain (change log) and by a base
// rewrite, and a restart restores them exactly, with their expiries; a
// deleted one and an expired one stay gone; a string key beside them is
// untouched.
func TestPersistKindsRestart(t *testing.T) {
	dir := t.TempDir()
	const nowMs = 1_800_000_000_000
	now := time.UnixMilli(nowMs)
	db, err := persist.Open(dir, persist.Options{Logger: quietLog(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{TrackDirty: true})
	p := &persistence{db: db, st: st, log: quietLog()}
	p.fl = persist.NewFlusher(db, persist.FlusherConfig{Interval: time.Hour, Encode: p.encode, Logger: quietLog()})
	write := func(key string, kind store.Kind, mk func() store.Object, fn func(o store.Object)) {
		t.Helper()
		if _, err := st.WriteObject([]byte(key), kind, nowMs, mk, func(o store.Object) bool { fn(o); return true }); err != nil {
			t.Fatal(err)
		}
	}
	newHash := func() store.Object { return kinds.NewHash() }
	newList := func() store.Object { return kinds.NewList() }
	newZSet := func() store.Object { return kinds.NewZSet() }
	write("h", store.KindHash, newHash, func(o store.Object) { o.(*kinds.Hash).Set("water", "3"); o.(*kinds.Hash).Set("lastTime", "17") })
	write("l", store.KindList, newList, func(o store.Object) { o.(*kinds.List).PushBack("a"); o.(*kinds.List).PushBack("b") })
	write("z", store.KindZSet, newZSet, func(o store.Object) { o.(*kinds.ZSet).Set("m1", 1.5); o.(*kinds.ZSet).Set("m2", -2) })
	write("gone", store.KindZSet, newZSet, func(o store.Object) { o.(*kinds.ZSet).Set("x", 1) })
	// A -0 score survives in a big (full) set, whose image decodes into
	// the full form from its first member, as Redis's skiplist keeps it; a
	// small set stores 0 (kinds.TestZSetNegativeZero).
	negZero := math.Copysign(0, -1)
	write("zneg", store.KindZSet, newZSet, func(o store.Object) {
		for i := range kinds.CompactMaxEntries + 10 {
			o.(*kinds.ZSet).Set(fmt.Sprint("m", i), float64(i+1))
		}
		o.(*kinds.ZSet).Set("neg", negZero)
	})
	write("ttl", store.KindHash, newHash, func(o store.Object) { o.(*kinds.Hash).Set("f", "v") })
	st.Update([]byte("s"), nowMs, func(store.Value, bool) (store.Value, store.Action) {
		v, _ := store.NewValue([]byte("42"))
		return v, store.Put
	})
	st.Update([]byte("ttl"), nowMs, func(v store.Value, _ bool) (store.Value, store.Action) {
		v.ExpireAtMs = nowMs + 60_000
		return v, store.Put
	})
	if err := p.fl.FlushNow(); err != nil {
		t.Fatal(err)
	}
	// A base rewrite, then changes on top of it in the log.
	if _, err := db.WriteBase(func(w *persist.BaseWriter) error { return p.snapshot(nowMs, w) }); err != nil {
		t.Fatal(err)
	}
	write("z", store.KindZSet, nil, func(o store.Object) { o.(*kinds.ZSet).Set("m3", 7); o.(*kinds.ZSet).Remove("m2") })
	write("l", store.KindList, nil, func(o store.Object) { o.(*kinds.List).PushFront("first") })
	write("zneg", store.KindZSet, nil, func(o store.Object) { o.(*kinds.ZSet).Set("neg2", negZero) })
	st.Delete([]byte("gone"), nowMs)
	write("short", store.KindList, newList, func(o store.Object) { o.(*kinds.List).PushBack("x") })
	st.Update([]byte("short"), nowMs, func(v store.Value, _ bool) (store.Value, store.Action) {
		v.ExpireAtMs = nowMs + 1000
		return v, store.Put
	})
	keys := []string{"h", "l", "z", "gone", "ttl", "short", "zneg"}
	want := dumpKinds(t, st, nowMs, keys)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	later := int64(nowMs + 5000) // "short" has expired by then
	delete(want, "short")
	db2, err := persist.Open(dir, persist.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	st2 := store.New(store.Options{TrackDirty: true})
	p2 := &persistence{db: db2, st: st2, log: quietLog()}
	if err := p2.load(time.UnixMilli(later)); err != nil {
		t.Fatal(err)
	}
	got := dumpKinds(t, st2, later, keys)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after restart:\n got %v\nwant %v", got, want)
	}
	st2.ReadObject([]byte("zneg"), store.KindZSet, later, func(o store.Object) {
		for _, m := range []string{"neg", "neg2"} {
			if sc, ok := o.(*kinds.ZSet).Score(m); !ok || !math.Signbit(sc) || sc != 0 {
				t.Errorf("zneg %s after restart: %v (%v), want -0", m, sc, ok)
			}
		}
	})
	if v, ok := st2.Get([]byte("s"), later); !ok || string(v.AppendText(nil)) != "42" {
		t.Fatalf("string key beside them: %v %v", v, ok)
	}
	if _, err := st2.ReadObject([]byte("s"), store.KindHash, later, func(store.Object) {}); err != store.ErrWrongType {
		t.Fatalf("string restored as another kind: %v", err)
	}
}
