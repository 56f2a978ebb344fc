package main

import (
	"io"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/celld/celld/persist"
	"github.com/celld/celld/store"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func dec(n uint64) string { return strconv.FormatUint(n, 10) }

// stored is a record as persist.Restore hands it back.
type stored struct {
	value string
	exp   int64
}

// readDir returns every record in dir, expired ones included (Restore with
// nowMs 0), and the flush stamp.
func readDir(t testing.TB, dir string) (map[string]stored, time.Time) {
	t.Helper()
	db, err := persist.Open(dir, persist.Options{Logger: quietLog()})
	if err != nil {
		t.Fatalf("persist.Open(%s): %v", dir, err)
	}
	defer db.Close()
	got := map[string]stored{}
	if _, err := db.Restore(0, func(k, v []byte, exp int64) error {
		got[string(k)] = stored{string(v), exp}
		return nil
	}); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	at, _ := db.LastFlushedAt()
	return got, at
}

// TestLoadUndoesClockStepBack: the last flush was stamped by a clock one
// hour ahead of the restart's. Every key keeps the delay and TTL it had at
// that flush; verbatim, non-numeric and already-past values are left as
// written; a key that had expired by the old clock is dropped from memory
// and disk; the shifted records are written back with a new stamp, so a
// second restart does not shift again.
func TestLoadUndoesClockStepBack(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC) // the restart's clock
	stamp := t0.Add(time.Hour)                        // the last flush's clock
	t0ns, t0ms := uint64(t0.UnixNano()), t0.UnixMilli()
	sns, sms := uint64(stamp.UnixNano()), stamp.UnixMilli()
	const hourNs = uint64(time.Hour)

	dir := t.TempDir()
	clock := stamp
	db, err := persist.Open(dir, persist.Options{Logger: quietLog(), Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	op := func(k, v string, exp int64) persist.Op {
		return persist.Op{Key: []byte(k), Value: []byte(v), ExpireAtMs: exp}
	}
	const maxU64 = "18446744073709551615"
	if err := db.Write([]persist.Op{
		op("throttled", dec(sns+30e9+500), sms+30_000), // CL.THROTTLE-shaped: 30 s of delay at the flush
		op("no-ttl-ahead", dec(t0ns+hourNs/2), 0),      // ahead of t0, behind the stamp
		op("small", "5", 0),                            // SET k 5: in the past under both clocks
		op("verbatim", "+5", sms+60_000),               // SET k +5 PX 60000
		op("verbatim-far", "+"+dec(sns+5e9), 0),        // verbatim text is never rewritten
		op("zeros", "007", sms+1_000),                  // SET k 007 PX 1000
		op("invalid", "abc", sms+2_000),                // not a number (restored data only)
		op("max", maxU64, 0),                           // far future, no TTL
		op("expired-by-old-clock", dec(sns-10e9), sms-10_000),
	}); err != nil {
		t.Fatal(err)
	}

	st := store.New(store.Options{TrackDirty: true})
	clock = t0 // the write-back is stamped by the restart's clock
	p := &persistence{db: db, st: st, log: quietLog()}
	if err := p.load(t0); err != nil {
		t.Fatal(err)
	}
	if p.clockBackMs != time.Hour.Milliseconds() {
		t.Errorf("clockBackMs = %d, want %d", p.clockBackMs, time.Hour.Milliseconds())
	}
	want := map[string]stored{
		"throttled":    {dec(t0ns + 30e9 + 500), t0ms + 30_000},
		"no-ttl-ahead": {dec(t0ns - hourNs/2), 0},
		"small":        {"5", 0},
		"verbatim":     {"+5", t0ms + 60_000},
		"verbatim-far": {"+" + dec(sns+5e9), 0},
		"zeros":        {"007", t0ms + 1_000},
		"invalid":      {"abc", t0ms + 2_000},
		"max":          {dec(1<<64 - 1 - hourNs), 0},
	}
	for k, w := range want {
		v, ok := st.Get([]byte(k), t0ms)
		if !ok {
			t.Errorf("%s: missing after load", k)
			continue
		}
		if got := string(v.AppendText(nil)); got != w.value || v.ExpireAtMs != w.exp {
			t.Errorf("%s: loaded %q exp %d, want %q exp %d", k, got, v.ExpireAtMs, w.value, w.exp)
		}
	}
	if _, ok := st.Get([]byte("expired-by-old-clock"), t0ms); ok {
		t.Error("a key expired by the clock that wrote it was restored")
	}
	if n := st.DirtyKeys(); n != 0 {
		t.Errorf("DirtyKeys after load = %d, want 0 (the shift is written back by load itself)", n)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	onDisk, at := readDir(t, dir)
	if !at.Equal(t0) {
		t.Errorf("flush stamp after load = %v, want %v", at, t0)
	}
	if len(onDisk) != len(want) {
		t.Errorf("on disk after load: %d records, want %d: %v", len(onDisk), len(want), onDisk)
	}
	for k, w := range want {
		if onDisk[k] != w {
			t.Errorf("%s on disk = %+v, want %+v", k, onDisk[k], w)
		}
	}

	// A second restart half a second later sees no step and changes nothing.
	db, err = persist.Open(dir, persist.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st2 := store.New(store.Options{TrackDirty: true})
	p2 := &persistence{db: db, st: st2, log: quietLog()}
	if err := p2.load(t0.Add(500 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if p2.clockBackMs != 0 {
		t.Errorf("second restart: clockBackMs = %d, want 0", p2.clockBackMs)
	}
	for k, w := range want {
		v, ok := st2.Get([]byte(k), t0ms)
		if got := string(v.AppendText(nil)); !ok || got != w.value || v.ExpireAtMs != w.exp {
			t.Errorf("second restart: %s = %q exp %d (present %v), want %q exp %d", k, got, v.ExpireAtMs, ok, w.value, w.exp)
		}
	}
}

// TestLoadNoStepNoShift: a clock at or after the stamp restores records as
// written.
func TestLoadNoStepNoShift(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	dir := t.TempDir()
	db, err := persist.Open(dir, persist.Options{Logger: quietLog(), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tat := dec(uint64(t0.UnixNano()) + 30e9)
	if err := db.Write([]persist.Op{{Key: []byte("k"), Value: []byte(tat), ExpireAtMs: t0.UnixMilli() + 30_000}}); err != nil {
		t.Fatal(err)
	}
	for _, now := range []time.Time{t0, t0.Add(time.Millisecond), t0.Add(10 * time.Second)} {
		st := store.New(store.Options{})
		p := &persistence{db: db, st: st, log: quietLog()}
		if err := p.load(now); err != nil {
			t.Fatal(err)
		}
		v, ok := st.Get([]byte("k"), now.UnixMilli())
		if got := string(v.AppendText(nil)); !ok || got != tat || v.ExpireAtMs != t0.UnixMilli()+30_000 || p.clockBackMs != 0 {
			t.Errorf("load at %v: %q exp %d back %d, want %q exp %d back 0", now, got, v.ExpireAtMs, p.clockBackMs, tat, t0.UnixMilli()+30_000)
		}
	}
}

// TestDrainDeleteBeforeWrite: a key deleted and written again in one window
// lists its deletion first, so the write (its current state) is what
// reaches the disk, since persist applies ops in order.
func TestDrainDeleteBeforeWrite(t *testing.T) {
	dir := t.TempDir()
	db, err := persist.Open(dir, persist.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{TrackDirty: true})
	p := &persistence{db: db, st: st, log: quietLog()}
	p.fl = persist.NewFlusher(db, persist.FlusherConfig{Interval: time.Hour, Encode: p.encode, Logger: quietLog()})
	const nowMs = 1_800_000_000_000
	put := func(k, v string) {
		st.Update([]byte(k), nowMs, func(store.Value, bool) (store.Value, store.Action) {
			nv, _ := store.NewValue([]byte(v))
			return nv, store.Put
		})
	}
	for _, k := range []string{"m", "c", "x", "a", "gone"} {
		put(k, "1")
	}
	if err := p.fl.FlushNow(); err != nil {
		t.Fatal(err)
	}
	st.Delete([]byte("c"), nowMs)
	put("c", "2") // deleted and written again in one window
	st.Delete([]byte("gone"), nowMs)
	put("b", "3")
	ops := p.drain(nowMs, nil)
	var got []string
	for _, op := range ops {
		if op.Delete {
			got = append(got, "del "+string(op.Key))
		} else {
			v := string(op.Value)
			if op.IsTAT {
				v = strconv.FormatUint(op.TAT, 10)
			}
			got = append(got, "set "+string(op.Key)+"="+v)
		}
	}
	if slices.Index(got, "del c") > slices.Index(got, "set c=2") {
		t.Fatalf("drained %v: the deletion of c must come before its write", got)
	}
	sorted := slices.Sorted(slices.Values(got))
	want := []string{"del c", "del gone", "set b=3", "set c=2"}
	if !slices.Equal(sorted, want) {
		t.Fatalf("drained %v, want the ops %v in some order", got, want)
	}
	// Writing them leaves the current state on disk.
	if err := db.Write(ops); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	onDisk, _ := readDir(t, dir)
	wantDisk := map[string]stored{"a": {"1", 0}, "b": {"3", 0}, "c": {"2", 0}, "m": {"1", 0}, "x": {"1", 0}}
	if len(onDisk) != len(wantDisk) {
		t.Errorf("on disk: %v, want %v", onDisk, wantDisk)
	}
	for k, w := range wantDisk {
		if onDisk[k] != w {
			t.Errorf("%s on disk = %+v, want %+v", k, onDisk[k], w)
		}
	}
}
