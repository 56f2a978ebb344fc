package persist

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// faultySwitch is an errorfs injector toggled atomically: while on, every
// operation it matches fails with errorfs.ErrInjected.
type faultySwitch struct {
	on       atomic.Bool
	match    func(errorfs.Op) bool
	injected atomic.Int64
}

func (s *faultySwitch) String() string { return "faultySwitch" }

func (s *faultySwitch) MaybeError(op errorfs.Op) error {
	if s.on.Load() && s.match(op) {
		s.injected.Add(1)
		return errorfs.ErrInjected
	}
	return nil
}

// allWrites matches every mutating filesystem operation: the disk refuses
// writes, as when it is full or has gone read-only.
func allWrites(op errorfs.Op) bool { return op.Kind.ReadOrWrite() == errorfs.OpIsWrite }

// isChangeFile reports whether path is one of persist's change files (not
// pebble's WAL, whose names also end in .log).
func isChangeFile(path string) bool {
	_, ok := parseChangeFileName(filepath.Base(path))
	return ok
}

// changeLogSyncs matches fsyncs of change files only.
func changeLogSyncs(op errorfs.Op) bool {
	return isChangeFile(op.Path) &&
		(op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo)
}

// changeLogWrites matches every write to a change file (and its creation).
func changeLogWrites(op errorfs.Op) bool {
	return isChangeFile(op.Path) && op.Kind.ReadOrWrite() == errorfs.OpIsWrite
}

// TestWriteFaultThenRecover shows what Write does when the disk fails: the
// failing write or fsync returns an error carrying the cause; while the disk
// keeps failing, every retry fails too; once it recovers the next Write
// succeeds (in a new change file: a DB never appends after a failed write),
// and the data written before the fault is intact, in this DB and after a
// reopen.
func TestWriteFaultThenRecover(t *testing.T) {
	for _, tc := range []struct {
		name  string
		match func(errorfs.Op) bool
	}{
		{"all-writes", allWrites},
		{"change-log-fsync", changeLogSyncs},
		{"change-log-writes", changeLogWrites},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			sw := &faultySwitch{match: tc.match}
			db := mustOpen(t, "d", Options{FS: errorfs.Wrap(mem, sw)})
			if err := db.Write([]Op{set("before", "1", 0)}); err != nil {
				t.Fatal(err)
			}
			sw.on.Store(true)
			err := db.Write([]Op{set("during", "2", 0)})
			if err == nil || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("Write with failing disk = %v; want the injected error", err)
			}
			t.Logf("failing Write: %v", err)
			for i := range 3 {
				err := db.Write([]Op{set("during", "2", 0)})
				if err == nil {
					t.Fatalf("retry %d succeeded while the disk fails (%s)", i, tc.name)
				}
				t.Logf("retry %d: %v", i, err)
			}
			sw.on.Store(false)
			if err := db.Write([]Op{set("during", "2", 0), set("after", "3", 0)}); err != nil {
				t.Fatalf("Write after the fault cleared: %v", err)
			}
			got, _ := restoreAll(t, db, 0)
			checkRecords(t, got, []record{{"after", "3", 0}, {"before", "1", 0}, {"during", "2", 0}})
			mustClose(t, db)

			db = mustOpen(t, "d", Options{FS: mem})
			defer mustClose(t, db)
			got, _ = restoreAll(t, db, 0)
			checkRecords(t, got, []record{{"after", "3", 0}, {"before", "1", 0}, {"during", "2", 0}})
		})
	}
}

// TestFlusherSurvivesIOFaults: while the disk fails, the Flusher keeps
// draining every window, keeps the ops pending (newer ops replacing older
// ones), reports the error in Status and retries with backoff; once the
// fault clears the pending ops are written and Status is OK again.
func TestFlusherSurvivesIOFaults(t *testing.T) {
	mem := vfs.NewMem()
	sw := &faultySwitch{match: allWrites}
	db := mustOpen(t, "d", Options{FS: errorfs.Wrap(mem, sw)})
	ds := newDirtySet()
	f := NewFlusher(db, FlusherConfig{
		Interval:   2 * time.Millisecond,
		MaxBackoff: 20 * time.Millisecond,
		Drain:      ds.drain,
		Logger:     testLogger(t),
	})
	f.Start()
	for i := range 20 {
		ds.set(fmt.Sprintf("k%02d", i), "100", 0)
	}
	waitFor(t, "the healthy flush", func() bool { return f.Status().Flushes > 0 && f.Status().PendingKeys == 0 })

	sw.on.Store(true)
	for i := range 10 {
		ds.set(fmt.Sprintf("k%02d", i), "200", 0)
	}
	ds.del("k19")
	// The flusher (every 2 ms) may drain and fail on part of the ops
	// while they are being set: wait until every one is pending.
	waitFor(t, "a failed flush with every op pending", func() bool { s := f.Status(); return !s.LastFlushOK && s.PendingKeys == 11 })
	st := f.Status()
	if st.LastFlushErr == "" || st.FlushErrors == 0 || st.PendingKeys != 11 || st.ConsecutiveErrors == 0 {
		t.Fatalf("Status while failing = %+v; want an error and 11 pending keys", st)
	}
	t.Logf("Status while failing: %+v", st)

	// The data path keeps going and Drain keeps being called every window.
	d0 := ds.drains.Load()
	for i := range 5 {
		ds.set(fmt.Sprintf("k%02d", i), "300", 0) // replaces pending ops
		ds.set(fmt.Sprintf("new%d", i), "1", 0)
	}
	waitFor(t, "Drain to keep being called while failing", func() bool { return ds.drains.Load() >= d0+10 })
	waitFor(t, "the new ops to be drained into pending", func() bool { return f.Status().PendingKeys == 16 })
	waitFor(t, "more than one retry", func() bool { return f.Status().ConsecutiveErrors >= 3 })
	if st := f.Status(); st.LastFlushOK || st.NextRetryAt.IsZero() {
		t.Fatalf("Status while failing = %+v", st)
	}

	sw.on.Store(false)
	waitFor(t, "recovery", func() bool { s := f.Status(); return s.LastFlushOK && s.PendingKeys == 0 })
	st = f.Status()
	if st.LastFlushErr != "" || st.ConsecutiveErrors != 0 || st.LastSuccessAt.IsZero() {
		t.Fatalf("Status after recovery = %+v", st)
	}
	t.Logf("Status after recovery: %+v (injected %d faults)", st, sw.injected.Load())
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, db)

	checkDir(t, mem, "d", ds.want())
}

// TestStopWhileFailingReportsError: shutdown with a failing disk returns the
// error instead of pretending the state is durable.
func TestStopWhileFailingReportsError(t *testing.T) {
	sw := &faultySwitch{match: allWrites}
	db := mustOpen(t, "d", Options{FS: errorfs.Wrap(vfs.NewMem(), sw)})
	ds := newDirtySet()
	f := NewFlusher(db, FlusherConfig{Interval: time.Hour, Drain: ds.drain, Logger: quietLogger()})
	f.Start()
	ds.set("a", "1", 0)
	sw.on.Store(true)
	if err := f.Stop(); err == nil {
		t.Fatal("Stop with a failing disk returned nil")
	} else {
		t.Logf("Stop: %v", err)
	}
	if st := f.Status(); st.PendingKeys != 1 || st.LastFlushOK {
		t.Fatalf("Status = %+v", st)
	}
	sw.on.Store(false)
	// A later FlushNow (e.g. SAVE, or a retrying shutdown) still has the op.
	if err := f.FlushNow(); err != nil {
		t.Fatal(err)
	}
	got, _ := restoreAll(t, db, 0)
	checkRecords(t, got, []record{{"a", "1", 0}})
	mustClose(t, db)
}

// TestSlowDiskDoesNotBlockDataPath: while a write is stuck in fsync, the
// data path (recording changes) and Status do not wait for it.
func TestSlowDiskDoesNotBlockDataPath(t *testing.T) {
	var stall atomic.Bool
	release := make(chan struct{})
	stalled := make(chan struct{}, 1)
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if stall.Load() && changeLogSyncs(op) {
			select {
			case stalled <- struct{}{}:
			default:
			}
			<-release
		}
		return nil
	})
	db := mustOpen(t, "d", Options{FS: errorfs.Wrap(vfs.NewMem(), inj)})
	defer mustClose(t, db)
	ds := newDirtySet()
	f := NewFlusher(db, FlusherConfig{Interval: time.Millisecond, Drain: ds.drain, Logger: quietLogger()})
	f.Start()
	stall.Store(true)
	ds.set("a", "1", 0)
	<-stalled // a flush is now blocked inside fsync
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			ds.set(fmt.Sprintf("k%d", i), "1", 0)
		}
		if st := f.Status(); st.Flushes != 0 {
			t.Errorf("Status = %+v while the first write is still in fsync", st)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the data path or Status waited for the stalled fsync")
	}
	stall.Store(false)
	close(release)
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	got, _ := restoreAll(t, db, 0)
	checkRecords(t, got, ds.want())
}

// baseFileWrites matches every write to a base file or its temp file
// (creation, writes, syncs, the rename).
func baseFileWrites(op errorfs.Op) bool {
	return strings.HasPrefix(filepath.Base(op.Path), baseFilePrefix) && op.Kind.ReadOrWrite() == errorfs.OpIsWrite
}

// TestBaseRewriteFaultKeepsOldBase: every way a base rewrite can fail on
// the disk (the temp file's create, a write, its sync, the rename) returns
// an ordinary error, removes the temp file, keeps the old base and log in
// charge while Writes go on, and the next rewrite after the fault clears
// succeeds; the directory restores exactly what was written. With pebble
// (format v4) a WAL or MANIFEST fault here could end the process.
func TestBaseRewriteFaultKeepsOldBase(t *testing.T) {
	for name, kind := range map[string]errorfs.OpKind{"create": errorfs.OpCreate, "write": errorfs.OpFileWrite, "sync": errorfs.OpFileSync, "rename": errorfs.OpRename} {
		t.Run(name, func(t *testing.T) {
			mem := vfs.NewMem()
			sw := &faultySwitch{match: func(op errorfs.Op) bool { return baseFileWrites(op) && op.Kind == kind }}
			db := mustOpen(t, "d", Options{FS: errorfs.Wrap(mem, sw)})
			m := model{}
			var ops []Op
			for i := range 20000 { // several 256 KiB buffer writes
				ops = append(ops, set(fmt.Sprintf("key%06d", i), "1234567890123456789", 0))
			}
			if err := db.Write(ops); err != nil {
				t.Fatal(err)
			}
			m.apply(ops)
			before := listNames(t, mem, "d")
			sw.on.Store(true)
			_, err := db.WriteBase(func(w *BaseWriter) error {
				for _, r := range m.sorted() {
					w.Add([]byte(r.key), []byte(r.value), r.exp)
					if err := w.Spill(); err != nil {
						return err
					}
				}
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), "injected") || !strings.Contains(err.Error(), "d") {
				t.Fatalf("WriteBase with failing %v = %v; want the injected error naming the directory", kind, err)
			}
			if after := listNames(t, mem, "d"); !slices.Equal(before, after) {
				t.Fatalf("files after the failed rewrite %q, want as before %q (temp file removed)", after, before)
			}
			more := []Op{set("key000001", "7", 0), del("key000002")}
			if err := db.Write(more); err != nil {
				t.Fatalf("Write after the failed rewrite: %v", err)
			}
			m.apply(more)
			got, _ := restoreAll(t, db, 0)
			checkRecords(t, got, m.sorted())
			sw.on.Store(false)
			writeBase(t, db, m.sorted())
			mustClose(t, db)
			checkDir(t, mem, "d", m.sorted())
		})
	}
}

// listNames lists dir, sorted, without the LOCK file.
func listNames(t testing.TB, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == "LOCK" })
	slices.Sort(names)
	return names
}

// TestFlushNowOrderAndFailedFreshDrain pins the flusher's no-map path (a
// drain while nothing is pending is written straight from the slice): a
// drain that lists one key twice is applied in order, the later op winning;
// when that write fails the ops become pending (counted once per key), a
// newer op for the same key from the next drain replaces the pending one,
// and the retry writes the newest state.
func TestFlushNowOrderAndFailedFreshDrain(t *testing.T) {
	mem := vfs.NewMem()
	sw := &faultySwitch{match: allWrites}
	db := mustOpen(t, "d", Options{FS: errorfs.Wrap(mem, sw)})
	var next [][]Op // what the following drains return, in order
	f := NewFlusher(db, FlusherConfig{Interval: time.Hour, Logger: quietLogger(),
		Drain: func(_ int64, buf []Op) []Op {
			if len(next) == 0 {
				return buf
			}
			buf = append(buf, next[0]...)
			next = next[1:]
			return buf
		}})
	next = [][]Op{{
		{Key: []byte("a"), Delete: true}, set("a", "1", 0), // deleted, then written again
		set("b", "2", 0), {Key: []byte("b"), Delete: true}, // written, then deleted
		set("c", "3", 0),
	}}
	if err := f.FlushNow(); err != nil {
		t.Fatal(err)
	}

	sw.on.Store(true)
	next = [][]Op{{set("a", "10", 0), {Key: []byte("c"), Delete: true}, set("d", "4", 0), set("d", "5", 0)}}
	if err := f.FlushNow(); err == nil {
		t.Fatal("FlushNow succeeded on a failing disk")
	}
	if st := f.Status(); st.LastFlushOK || st.PendingKeys != 3 {
		t.Fatalf("Status after the failed write = %+v; want 3 pending keys (a, c, d)", st)
	}
	sw.on.Store(false)
	next = [][]Op{{set("a", "11", 0), set("e", "6", 0)}}
	if err := f.FlushNow(); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if st := f.Status(); !st.LastFlushOK || st.PendingKeys != 0 || st.LastFlushKeys != 4 {
		t.Fatalf("Status after the retry = %+v; want 4 keys written, none pending", st)
	}
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, db)

	checkDir(t, mem, "d", []record{{"a", "11", 0}, {"d", "5", 0}, {"e", "6", 0}})
}

// TestBaseRewriteSurvivesIOFaults: a base rewrite whose synced switch fails
// (the disk starts failing mid-rewrite) is counted and logged, leaves the
// old base and the log in charge, and is retried once the disk recovers;
// the directory then restores exactly the model.
func TestBaseRewriteSurvivesIOFaults(t *testing.T) {
	mem := vfs.NewMem()
	sw := &faultySwitch{match: allWrites}
	db := mustOpen(t, "d", Options{FS: errorfs.Wrap(mem, sw), FoldMinBytes: 1})
	ds := newDirtySet()
	var failNext atomic.Bool
	f := NewFlusher(db, FlusherConfig{
		Interval:   2 * time.Millisecond,
		MaxBackoff: 20 * time.Millisecond,
		Drain:      ds.drain,
		Snapshot: func(_ int64, w *BaseWriter) error {
			for _, r := range ds.want() {
				w.Add([]byte(r.key), []byte(r.value), r.exp)
			}
			if failNext.CompareAndSwap(true, false) {
				sw.on.Store(true) // the switch batch will fail
			}
			return w.Spill()
		},
		Logger: quietLogger(),
	})
	f.Start()
	for i := range 20 {
		ds.set(fmt.Sprintf("k%02d", i), "100", 0)
	}
	waitFor(t, "a healthy base rewrite", func() bool { return f.Status().Bases >= 1 })

	failNext.Store(true)
	for round := 0; f.Status().BaseErrors == 0; round++ {
		if round == 5000 {
			t.Fatalf("no failed base rewrite: %+v", f.Status())
		}
		// Enough log to make the next base due (it must reach the base's size).
		ds.set(fmt.Sprintf("k%02d", round%10), fmt.Sprint(200+round), 0)
		time.Sleep(time.Millisecond)
	}
	sw.on.Store(false)
	ds.del("k19")
	bases := f.Status().Bases
	waitFor(t, "a base rewrite after recovery", func() bool {
		s := f.Status()
		return s.Bases > bases && s.LastFlushOK && s.PendingKeys == 0
	})
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("status: %+v (injected %d faults)", f.Status(), sw.injected.Load())
	mustClose(t, db)

	checkDir(t, mem, "d", ds.want())
}
