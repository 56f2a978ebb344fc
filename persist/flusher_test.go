package persist

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// dirtySet stands in for the in-memory table's per-shard dirty sets: the
// data path records changes under its own lock; Drain swaps the set out.
// model is the state the server holds, i.e. what a full flush must leave on
// disk.
type dirtySet struct {
	mu     sync.Mutex
	dirty  map[string]Op
	model  map[string]record
	drains atomic.Int64
}

func newDirtySet() *dirtySet {
	return &dirtySet{dirty: map[string]Op{}, model: map[string]record{}}
}

func (d *dirtySet) set(k, v string, exp int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dirty[k] = Op{Key: []byte(k), Value: []byte(v), ExpireAtMs: exp}
	d.model[k] = record{k, v, exp}
}

func (d *dirtySet) del(k string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dirty[k] = Op{Key: []byte(k), Delete: true}
	delete(d.model, k)
}

func (d *dirtySet) drain(nowMs int64, buf []Op) []Op {
	d.mu.Lock()
	dirty := d.dirty
	d.dirty = make(map[string]Op, len(dirty))
	d.mu.Unlock()
	for _, op := range dirty {
		buf = append(buf, op)
	}
	d.drains.Add(1)
	return buf
}

// want returns the model in key order.
func (d *dirtySet) want() []record {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []record
	for _, k := range slices.Sorted(maps.Keys(d.model)) {
		out = append(out, d.model[k])
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFlushNowMergesWindow(t *testing.T) {
	fs := vfs.NewMem()
	db := mustOpen(t, "d", Options{FS: fs})
	defer mustClose(t, db)
	clock := time.UnixMilli(1_700_000_000_000)
	var sawNow int64
	ds := newDirtySet()
	f := NewFlusher(db, FlusherConfig{
		Drain: func(nowMs int64, buf []Op) []Op { sawNow = nowMs; return ds.drain(nowMs, buf) },
		Now:   func() time.Time { return clock },
	})
	if st := f.Status(); !st.LastFlushOK || st.Flushes != 0 {
		t.Fatalf("initial Status = %+v", st)
	}
	if err := f.FlushNow(); err != nil {
		t.Fatalf("FlushNow with nothing dirty: %v", err)
	}
	if st := f.Status(); st.Flushes != 0 {
		t.Fatalf("an empty window wrote a batch: %+v", st)
	}

	ds.set("a", "1", 0)
	ds.set("b", "2", 0)
	ds.set("", "empty key", 0)
	ds.set("a", "3", 0) // same window: the newer value wins
	if err := f.FlushNow(); err != nil {
		t.Fatal(err)
	}
	if sawNow != clock.UnixMilli() {
		t.Errorf("Drain got nowMs %d, want %d", sawNow, clock.UnixMilli())
	}
	ds.del("b")
	ds.set("c", "4", clock.UnixMilli()+1000)
	if err := f.FlushNow(); err != nil {
		t.Fatal(err)
	}
	st := f.Status()
	if !st.LastFlushOK || st.Flushes != 2 || st.FlushErrors != 0 || st.PendingKeys != 0 ||
		st.LastFlushKeys != 2 || !st.LastSuccessAt.Equal(clock) || !st.LastFlushAt.Equal(clock) {
		t.Errorf("Status = %+v", st)
	}
	got, _ := restoreAll(t, db, clock.UnixMilli())
	checkRecords(t, got, ds.want())
}

func TestFlusherLoopAndStop(t *testing.T) {
	fs := vfs.NewMem()
	db := mustOpen(t, "d", Options{FS: fs})
	ds := newDirtySet()
	f := NewFlusher(db, FlusherConfig{Interval: 2 * time.Millisecond, Drain: ds.drain, Logger: quietLogger()})
	f.Start()
	f.Start() // idempotent
	for i := range 200 {
		ds.set(fmt.Sprintf("key%d", i%50), fmt.Sprint(i), 0)
		if i%10 == 0 {
			ds.del(fmt.Sprintf("key%d", (i+7)%50))
		}
	}
	waitFor(t, "the loop to write a batch", func() bool { return f.Status().Flushes > 0 })
	ds.set("last", "x", 0) // possibly after the loop's last window: Stop's final flush must catch it
	if err := f.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := f.Stop(); err != nil { // idempotent
		t.Fatalf("second Stop: %v", err)
	}
	f.Start() // no-op after Stop
	drains := ds.drains.Load()
	time.Sleep(10 * time.Millisecond)
	if ds.drains.Load() != drains {
		t.Fatal("Drain called after Stop")
	}
	mustClose(t, db)

	checkDir(t, fs, "d", ds.want())
}

func TestFlushNowConcurrentWithLoop(t *testing.T) {
	fs := vfs.NewMem()
	db := mustOpen(t, "d", Options{FS: fs})
	defer mustClose(t, db)
	ds := newDirtySet()
	f := NewFlusher(db, FlusherConfig{Interval: time.Millisecond, Drain: ds.drain, Logger: quietLogger()})
	f.Start()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 300 {
				ds.set(fmt.Sprintf("w%d-%d", w, i%40), fmt.Sprint(i), 0)
				if i%50 == 0 {
					if err := f.FlushNow(); err != nil {
						t.Error(err)
					}
					_ = f.Status()
				}
			}
		})
	}
	wg.Wait()
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	got, _ := restoreAll(t, db, 0)
	checkRecords(t, got, ds.want())
}

// TestFlusherCrashClone: once FlushNow returns, a crash keeps everything;
// what was never flushed is what a crash may lose.
func TestFlusherCrashClone(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db := mustOpen(t, "data", Options{FS: fs})
	ds := newDirtySet()
	f := NewFlusher(db, FlusherConfig{Interval: time.Hour, Drain: ds.drain, Logger: quietLogger()})
	f.Start() // the loop never ticks within the test: only FlushNow writes
	for i := range 1000 {
		ds.set(fmt.Sprintf("key%04d", i), fmt.Sprint(1_000_000_000+i), int64(i%3)*1e13)
	}
	if err := f.FlushNow(); err != nil {
		t.Fatal(err)
	}
	flushed := ds.want()
	ds.set("unflushed", "1", 0) // still in the dirty set at the crash

	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, db)

	checkDir(t, crashed, "data", flushed)
}

// TestFlusherOverrunCoalesces: a window that takes far longer than Interval
// is followed by one more window, not by a burst of queued ticks.
func TestFlusherOverrunCoalesces(t *testing.T) {
	db := mustOpen(t, "d", Options{FS: vfs.NewMem()})
	defer mustClose(t, db)
	const interval = 10 * time.Millisecond
	var (
		mu    sync.Mutex
		calls []time.Time
	)
	slowDone := make(chan time.Time, 1)
	f := NewFlusher(db, FlusherConfig{
		Interval: interval,
		Logger:   quietLogger(),
		Drain: func(nowMs int64, buf []Op) []Op {
			mu.Lock()
			calls = append(calls, time.Now())
			first := len(calls) == 1
			mu.Unlock()
			if first {
				time.Sleep(15 * interval) // simulate a window that overruns
				slowDone <- time.Now()
			}
			return buf
		},
	})
	f.Start()
	end := <-slowDone
	time.Sleep(3 * interval)
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var burst int
	for _, c := range calls[1:] {
		if c.Sub(end) < interval/2 {
			burst++
		}
	}
	// A queue of ticks would show up as ~15 calls immediately after end;
	// one or two (a tick that fired while the slow flush ran, and one
	// more on a loaded machine) are not a queue.
	if burst > 3 {
		t.Fatalf("%d Drain calls within %v after the overrun; ticks queued up", burst, interval/2)
	}
}

func TestBackoff(t *testing.T) {
	f := NewFlusher(&DB{}, FlusherConfig{Interval: 100 * time.Millisecond, Drain: func(int64, []Op) []Op { return nil }})
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i, w := range want {
		f.failures = i + 1
		if got := f.backoff(); got != w*time.Millisecond {
			t.Errorf("backoff after %d failures = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	f.failures = 1000
	if got := f.backoff(); got != DefaultMaxBackoff {
		t.Errorf("backoff after 1000 failures = %v", got)
	}
}

func TestFlusherConfigValidate(t *testing.T) {
	for _, c := range []FlusherConfig{{}, {Drain: func(int64, []Op) []Op { return nil }, Interval: -1}} {
		if c.Validate() == nil {
			t.Errorf("Validate(%+v) = nil", c)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("NewFlusher without Drain did not panic")
		}
	}()
	NewFlusher(&DB{}, FlusherConfig{})
}

// TestFlusherIdle: Idle runs once when the changes stop (and once after
// start, before any), not on every quiet window, and again after the next
// burst; the reused buffers are dropped at that point.
func TestFlusherIdle(t *testing.T) {
	db := mustOpen(t, "data", Options{FS: vfs.NewMem()})
	defer mustClose(t, db)
	ds := newDirtySet()
	var idles atomic.Int64
	f := NewFlusher(db, FlusherConfig{Interval: 2 * time.Millisecond, Drain: ds.drain, Idle: func() { idles.Add(1) }, Logger: quietLogger()})
	f.Start()
	defer f.Stop()
	waitFor(t, "the first Idle", func() bool { return idles.Load() == 1 })
	for i := range 200 { // no gap a window could see as the end
		ds.set(fmt.Sprint("k", i), "1", 0)
	}
	waitFor(t, "Idle after the burst", func() bool { return idles.Load() >= 2 })
	quiet := ds.drains.Load()
	waitFor(t, "20 more quiet windows", func() bool { return ds.drains.Load() >= quiet+20 })
	if n := idles.Load(); n != 2 {
		t.Fatalf("Idle ran %d times, want 2: once per busy-to-idle transition", n)
	}
	f.mu.Lock()
	buf := f.buf
	f.mu.Unlock()
	db.mu.Lock()
	logBuf := db.mu.logBuf
	db.mu.Unlock()
	if buf != nil || logBuf != nil {
		t.Errorf("after Idle: drain buffer %v, log buffer %v; want both dropped", cap(buf), cap(logBuf))
	}
}

// drainPiece is drain taking at most limit keys (any limit of them): the
// rest stays dirty and more says so, as the server's drain does under a
// memory bound.
func (d *dirtySet) drainPiece(limit int, buf []Op, pieces *[]int) ([]Op, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for k, op := range d.dirty {
		if n == limit {
			break
		}
		buf = append(buf, op)
		delete(d.dirty, k)
		n++
	}
	*pieces = append(*pieces, n)
	d.drains.Add(1)
	return buf, len(d.dirty) > 0
}

// TestFlusherWindowPieces: with DrainPiece, one window (and one FlushNow)
// writes every change in pieces of the size DrainPiece cuts, each its own
// synced write, so no buffer holds the whole window; a write that fails
// stops the window, its piece is kept pending, the rest stays dirty, and
// the next FlushNow writes it all.
func TestFlusherWindowPieces(t *testing.T) {
	mem := vfs.NewMem()
	sw := &faultySwitch{match: changeLogWrites}
	db := mustOpen(t, "d", Options{FS: errorfs.Wrap(mem, sw)})
	defer mustClose(t, db)
	ds := newDirtySet()
	const limit = 64
	var pieces []int
	f := NewFlusher(db, FlusherConfig{
		Interval:   time.Hour, // windows run by calling tick
		Drain:      func(int64, []Op) []Op { t.Fatal("Drain called with DrainPiece set"); return nil },
		DrainPiece: func(_ int64, buf []Op) ([]Op, bool) { return ds.drainPiece(limit, buf, &pieces) },
		Logger:     quietLogger(),
	})
	for i := range 1000 {
		ds.set(fmt.Sprintf("k%04d", i), fmt.Sprint(i), 0)
	}
	f.tick()
	if st := f.Status(); st.Flushes != 16 || st.FlushErrors != 0 || st.LastFlushKeys != 1000-15*limit {
		t.Errorf("after one window of 1000 changes in pieces of %d: %+v", limit, st)
	}
	if len(pieces) != 16 || slices.Max(pieces) != limit {
		t.Errorf("pieces drained: %v", pieces)
	}
	got, _ := restoreAll(t, db, 0)
	checkRecords(t, got, ds.want())

	// A failing write ends the window: one piece pending, the rest dirty.
	for i := range 300 {
		ds.set(fmt.Sprintf("k%04d", i), fmt.Sprint(i+1), 0)
	}
	pieces = nil
	sw.on.Store(true)
	f.tick()
	if st := f.Status(); st.PendingKeys != limit || st.LastFlushOK {
		t.Errorf("after a failed window: %+v", st)
	}
	if len(pieces) != 1 || len(ds.dirty) != 300-limit {
		t.Errorf("a failed window drained %v, left %d dirty; want one piece of %d and %d dirty", pieces, len(ds.dirty), limit, 300-limit)
	}
	sw.on.Store(false)
	pieces = nil
	if err := f.FlushNow(); err != nil {
		t.Fatal(err)
	}
	if st := f.Status(); st.PendingKeys != 0 || !st.LastFlushOK || len(ds.dirty) != 0 || len(pieces) != 4 {
		t.Errorf("FlushNow after recovery: %+v, pieces %v", st, pieces)
	}
	got, _ = restoreAll(t, db, 0)
	checkRecords(t, got, ds.want())
}
