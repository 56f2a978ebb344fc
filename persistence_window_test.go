package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/celld/celld/gcra"
	"github.com/celld/celld/persist"
	"github.com/celld/celld/store"
	"github.com/celld/celld/window"
)

// Window keys go through the drain and the base rewrite as 'w' entries and
// load back as window keys answering exactly as before, beside TATs.
func TestWindowKeysPersist(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	nowMs := now.UnixMilli()
	dir := t.TempDir()
	db, err := persist.Open(dir, persist.Options{Logger: quietLog(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{TrackDirty: true})
	limits := map[string]window.Limit{}
	for i := range 30 {
		k := fmt.Sprintf("w:%d", i)
		l := window.Limit{Mode: window.Mode(1 + i%3), Limit: 50, WindowMs: 10_000}
		limits[k] = l
		for j := range i + 1 {
			if _, err := st.Window([]byte(k), l, 1, nowMs+int64(j*7)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := st.Throttle([]byte("tat"), mustGCRA(t), 1, now.UnixNano()); err != nil {
		t.Fatal(err)
	}
	p := &persistence{db: db, st: st, log: quietLog()}
	if err := db.Write(p.drain(nowMs, nil)); err != nil {
		t.Fatal(err)
	}
	later := nowMs + 500
	answers := func(s *store.Store) map[string]window.Result {
		out := map[string]window.Result{}
		for k, l := range limits {
			r, err := s.Window([]byte(k), l, 0, later)
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			out[k] = r
		}
		return out
	}
	want := answers(st)
	check := func(what string, s *store.Store) {
		t.Helper()
		got := answers(s)
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: %s answers %+v, want %+v", what, k, got[k], w)
			}
			a, _ := st.Get([]byte(k), later)
			b, ok := s.Get([]byte(k), later)
			if !ok || b.Kind != store.KindWindow || a.ExpireAtMs != b.ExpireAtMs {
				t.Errorf("%s: %s restored as %+v (present %v), want a window key expiring at %d", what, k, b, ok, a.ExpireAtMs)
			}
		}
		if v, ok := s.Get([]byte("tat"), later); !ok || v.Kind != store.KindString {
			t.Errorf("%s: the TAT key restored as %+v %v", what, v, ok)
		}
	}
	fromLog := store.New(store.Options{TrackDirty: true})
	if err := (&persistence{db: db, st: fromLog, log: quietLog()}).load(now); err != nil {
		t.Fatal(err)
	}
	check("from the log", fromLog)
	if bs, err := db.WriteBase(func(w *persist.BaseWriter) error { return p.snapshot(nowMs, w) }); err != nil || bs.Keys != 31 {
		t.Fatalf("WriteBase: %+v %v, want 31 keys", bs, err)
	}
	fromBase := store.New(store.Options{TrackDirty: true})
	if err := (&persistence{db: db, st: fromBase, log: quietLog()}).load(now); err != nil {
		t.Fatal(err)
	}
	check("from the base", fromBase)
	db.Close()
}

// After a clock step back, a LOG key's units keep the time they had left in
// the window (times and expiry shift with the clock); FIXED and SLIDING
// keys keep their epoch-aligned window and expiry as written.
func TestWindowLoadAfterClockStepBack(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC) // the restart's clock, aligned to 10 s
	stamp := t0.Add(time.Hour)
	t0ms, sms := t0.UnixMilli(), stamp.UnixMilli()
	dir := t.TempDir()
	clock := stamp
	db, err := persist.Open(dir, persist.Options{Logger: quietLog(), Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{TrackDirty: true})
	logL := window.Limit{Mode: window.Log, Limit: 2, WindowMs: 10_000}
	fixL := window.Limit{Mode: window.Fixed, Limit: 2, WindowMs: 10_000}
	st.Window([]byte("log"), logL, 2, sms-4_000) // full, 6 s left
	st.Window([]byte("fixed"), fixL, 2, sms+1_000)
	p := &persistence{db: db, st: st, log: quietLog()}
	if err := db.Write(p.drain(sms, nil)); err != nil {
		t.Fatal(err)
	}
	clock = t0
	re := store.New(store.Options{TrackDirty: true})
	if err := (&persistence{db: db, st: re, log: quietLog()}).load(t0); err != nil {
		t.Fatal(err)
	}
	if r, err := re.Window([]byte("log"), logL, 1, t0ms); err != nil || !r.Limited || r.RetryAfter != 6_000 {
		t.Errorf("LOG after the step: %+v %v, want denied with 6000 ms to wait", r, err)
	}
	if v, _ := re.Get([]byte("log"), t0ms); v.ExpireAtMs != t0ms+6_000 {
		t.Errorf("LOG key expires at t0%+d, want t0+6000", v.ExpireAtMs-t0ms)
	}
	if v, _ := re.Get([]byte("fixed"), t0ms); v.ExpireAtMs != sms+10_000 {
		t.Errorf("FIXED key expires at stamp%+d, want stamp+10000 (as written)", v.ExpireAtMs-sms)
	}
	if r, err := re.Window([]byte("fixed"), fixL, 1, t0ms); err != nil || !r.Limited {
		t.Errorf("FIXED after the step: %+v %v, want denied (its window is still ahead)", r, err)
	}
	db.Close()
}

func mustGCRA(t *testing.T) gcraLimit {
	t.Helper()
	l, err := newGCRA(5, 10, 60)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

type gcraLimit = gcra.Limit

var newGCRA = gcra.NewLimit

// A window key that expired in its grace (store/walk.go) is drained as
// its state with its past expiry, not as a deletion, and stays in the
// store for the next call to remake in place; on disk it must still
// replace every older record of the key. Each key is first written with a
// 1-hour window (a record live for an hour), then with a 100 ms one, and
// drained 500 ms later: a restore from the log, and from a base written
// then, must not have the key. Called again within its grace, the key is
// remade and restores with its new state. Fails without the grace rule in
// the drain (a deletion is written and the slot is freed), and if the
// past-expiry record did not replace the hour-long one.
func TestWindowExpiredInGraceDrained(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	nowMs := now.UnixMilli()
	clock := now
	db, err := persist.Open(t.TempDir(), persist.Options{Logger: quietLog(), Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := store.New(store.Options{TrackDirty: true})
	p := &persistence{db: db, st: st, log: quietLog()}
	modes := []window.Mode{window.Fixed, window.Sliding, window.Log}
	for _, m := range modes {
		if _, err := st.Window([]byte("k:"+m.String()), window.Limit{Mode: m, Limit: 10, WindowMs: 3_600_000}, 1, nowMs); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Write(p.drain(nowMs, nil)); err != nil {
		t.Fatal(err)
	}
	short := func(m window.Mode) window.Limit { return window.Limit{Mode: m, Limit: 10, WindowMs: 100} }
	for _, m := range modes {
		r, err := st.Window([]byte("k:"+m.String()), short(m), 1, nowMs+1)
		if err != nil || r.Limited || r.ResetAfter > 200 {
			t.Fatalf("%v with a 100 ms window: %+v %v", m, r, err)
		}
	}
	drainMs := nowMs + 500 // every key expired, within its grace
	clock = now.Add(500 * time.Millisecond)
	ops := p.drain(drainMs, nil)
	if len(ops) != len(modes) {
		t.Fatalf("drain gave %d ops, want %d", len(ops), len(modes))
	}
	for _, op := range ops {
		if op.Delete || op.ExpireAtMs == 0 || op.ExpireAtMs > drainMs {
			t.Errorf("%s drained as %+v, want its state with its past expiry", op.Key, op)
		}
	}
	if err := db.Write(ops); err != nil {
		t.Fatal(err)
	}
	if n := st.Len(); n != len(modes) {
		t.Errorf("store holds %d keys after the drain, want %d (in their grace)", n, len(modes))
	}
	absent := func(what string) {
		t.Helper()
		re := store.New(store.Options{TrackDirty: true})
		if err := (&persistence{db: db, st: re, log: quietLog()}).load(clock); err != nil {
			t.Fatal(err)
		}
		for _, m := range modes {
			if v, ok := re.Get([]byte("k:"+m.String()), drainMs); ok {
				t.Errorf("%s: k:%v restored as %+v, want no key", what, m, v)
			}
		}
	}
	absent("from the log")
	if _, err := db.WriteBase(func(w *persist.BaseWriter) error { return p.snapshot(drainMs, w) }); err != nil {
		t.Fatal(err)
	}
	absent("from the base")

	// Remade within the grace, in place, and restored as remade.
	want := map[string]window.Result{}
	for _, m := range modes {
		if _, err := st.Window([]byte("k:"+m.String()), short(m), 2, drainMs+1); err != nil {
			t.Fatal(err)
		}
		want[m.String()], _ = st.Window([]byte("k:"+m.String()), short(m), 0, drainMs+2)
	}
	if n := st.Len(); n != len(modes) {
		t.Errorf("store holds %d keys after the calls, want %d", n, len(modes))
	}
	if err := db.Write(p.drain(drainMs+1, nil)); err != nil {
		t.Fatal(err)
	}
	re := store.New(store.Options{TrackDirty: true})
	if err := (&persistence{db: db, st: re, log: quietLog()}).load(clock); err != nil {
		t.Fatal(err)
	}
	for _, m := range modes {
		if got, err := re.Window([]byte("k:"+m.String()), short(m), 0, drainMs+2); err != nil || got != want[m.String()] {
			t.Errorf("restored k:%v peeks %+v %v, want %+v", m, got, err, want[m.String()])
		}
	}
}
