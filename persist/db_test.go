package persist

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// record is what Restore hands back, copied.
type record struct {
	key, value string
	exp        int64
}

func (r record) String() string { return fmt.Sprintf("{%q %q %d}", r.key, r.value, r.exp) }

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testLogger logs through t.Logf, so failures show pebble's messages.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func mustOpen(t testing.TB, dir string, opts Options) *DB {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", dir, err)
	}
	return db
}

func mustClose(t testing.TB, db *DB) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func restoreAll(t testing.TB, db *DB, nowMs int64) ([]record, RestoreStats) {
	t.Helper()
	var got []record
	st, err := db.Restore(nowMs, func(k, v []byte, exp int64) error {
		got = append(got, record{string(k), string(v), exp})
		return nil
	})
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if st.Loaded != int64(len(got)) {
		t.Fatalf("Restore: stats.Loaded = %d, callback saw %d", st.Loaded, len(got))
	}
	return got, st
}

// checkDir opens dir on fs, checks that it restores exactly want (as of
// time 0, so nothing counts as expired) and closes it.
func checkDir(t testing.TB, fs vfs.FS, dir string, want []record) {
	t.Helper()
	db := mustOpen(t, dir, Options{FS: fs})
	defer mustClose(t, db)
	got, _ := restoreAll(t, db, 0)
	checkRecords(t, got, want)
}

func checkRecords(t testing.TB, got, want []record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("restored %d records, want %d\ngot:  %v\nwant: %v", len(got), len(want), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func set(key, value string, exp int64) Op {
	return Op{Key: []byte(key), Value: []byte(value), ExpireAtMs: exp}
}

func del(key string) Op { return Op{Key: []byte(key), Delete: true} }

func TestRoundTrip(t *testing.T) {
	const now = 1_700_000_000_000
	fs := vfs.NewMem()
	db := mustOpen(t, "data", Options{FS: fs})
	steps := [][]Op{
		{
			set("a", "1000", 0),
			set("", "empty key", 0),
			set("nul\x00key", "42", now+1),
			set("\xff\xff", "18446744073709551615", now+60_000),
			set("expired", "7", now),           // expiry == now counts as expired
			set("long-expired", "7", 1),        // long ago
			set("negative", "7", -5),           // always expired
			set("gone", "1", 0),                // deleted below
			set("k\x00", "", 0),                // empty value
			set("overwritten", "old", now+999), // overwritten below
		},
		{
			del("gone"),
			set("overwritten", "new", 0),
			del("never-existed"),
		},
	}
	for i, ops := range steps {
		if err := db.Write(ops); err != nil {
			t.Fatalf("step %d: Write: %v", i, err)
		}
	}
	if n, err := db.Count(); err != nil || n != 9 {
		t.Fatalf("Count = %d, %v; want 9 (expired records are still on disk)", n, err)
	}
	mustClose(t, db)

	db = mustOpen(t, "data", Options{FS: fs})
	defer mustClose(t, db)
	got, st := restoreAll(t, db, now)
	want := []record{ // bytewise key order
		{"", "empty key", 0},
		{"\xff\xff", "18446744073709551615", now + 60_000},
		{"a", "1000", 0},
		{"k\x00", "", 0},
		{"nul\x00key", "42", now + 1},
		{"overwritten", "new", 0},
	}
	// bytewise order puts 0xff after ASCII; sort want accordingly.
	want = []record{want[0], want[2], want[3], want[4], want[5], want[1]}
	checkRecords(t, got, want)
	if st.Expired != 3 {
		t.Errorf("Expired = %d, want 3", st.Expired)
	}
	// Expired records stay on disk until the next base rewrite, which
	// Restore therefore asks for.
	if !db.BaseDue() {
		t.Error("BaseDue = false after a Restore that skipped expired records")
	}
	if n, err := db.Count(); err != nil || n != 9 {
		t.Errorf("Count before WriteBase = %d, %v; want 9", n, err)
	}
	writeBase(t, db, got)
	if db.BaseDue() {
		t.Error("BaseDue = true right after WriteBase")
	}
	if n, err := db.Count(); err != nil || n != int64(len(want)) {
		t.Errorf("Count after WriteBase = %d, %v; want %d", n, err, len(want))
	}
	got, st = restoreAll(t, db, now)
	checkRecords(t, got, want)
	if st.Expired != 0 {
		t.Errorf("second Restore: Expired = %d, want 0", st.Expired)
	}
}

// writeBase rewrites db's base from recs, as the Flusher's Snapshot would
// from the store, spilling after every record.
func writeBase(t testing.TB, db *DB, recs []record) BaseStats {
	t.Helper()
	st, err := db.WriteBase(func(w *BaseWriter) error {
		for _, r := range recs {
			w.Add([]byte(r.key), []byte(r.value), r.exp)
			if err := w.Spill(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("WriteBase: %v", err)
	}
	if st.Keys != int64(len(recs)) {
		t.Fatalf("WriteBase wrote %d keys, want %d", st.Keys, len(recs))
	}
	return st
}

func TestRestoreCallbackError(t *testing.T) {
	db := mustOpen(t, "d", Options{FS: vfs.NewMem()})
	defer mustClose(t, db)
	if err := db.Write([]Op{set("a", "1", 0), set("b", "2", 0), set("c", "3", 0)}); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	var seen int
	st, err := db.Restore(0, func(k, v []byte, exp int64) error {
		seen++
		if string(k) == "b" {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || seen != 2 || st.Loaded != 1 {
		t.Fatalf("Restore = %+v, %v after %d calls; want the callback's error after 2 calls, 1 loaded", st, err, seen)
	}
}

func TestRestoreCallbackPanicPropagates(t *testing.T) {
	db := mustOpen(t, "d", Options{FS: vfs.NewMem()})
	defer mustClose(t, db)
	if err := db.Write([]Op{set("a", "1", 0)}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("recovered %v, want the callback's panic", r)
		}
		// The DB is still usable afterwards.
		if n, err := db.Count(); err != nil || n != 1 {
			t.Fatalf("Count after panic = %d, %v", n, err)
		}
	}()
	_, _ = db.Restore(0, func(k, v []byte, exp int64) error { panic("boom") })
}

func TestClosedDB(t *testing.T) {
	db := mustOpen(t, "d", Options{FS: vfs.NewMem()})
	mustClose(t, db)
	if err := db.Write([]Op{set("a", "1", 0)}); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	if _, err := db.Restore(0, func([]byte, []byte, int64) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Restore after Close = %v, want ErrClosed", err)
	}
	if _, err := db.Count(); !errors.Is(err, ErrClosed) {
		t.Errorf("Count after Close = %v, want ErrClosed", err)
	}
	if err := db.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
}

func TestCrashCloneKeepsSyncedWrites(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db := mustOpen(t, "data", Options{FS: fs})
	var want []record
	for i := range 50 {
		k := fmt.Sprintf("key%03d", i)
		v := fmt.Sprint(1_000_000 + i)
		if err := db.Write([]Op{set(k, v, 0)}); err != nil {
			t.Fatal(err)
		}
		want = append(want, record{k, v, 0})
	}
	// A crash now: only synced data survives.
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	mustClose(t, db)

	checkDir(t, crashed, "data", want)
}

func TestSecondOpenFailsWithLocked(t *testing.T) {
	dir := t.TempDir()
	db := mustOpen(t, dir, Options{})
	defer mustClose(t, db)
	db2, err := Open(dir, Options{Logger: quietLogger()})
	if err == nil {
		db2.Close()
		t.Fatal("second Open of the same dir succeeded")
	}
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second Open error = %v; want ErrLocked naming %s", err, dir)
	}
	t.Logf("second Open: %v", err)
}

// TestSecondProcessOpenFails runs the test binary as a helper process that
// tries to open a directory this process holds.
func TestSecondProcessOpenFails(t *testing.T) {
	if dir := os.Getenv("PERSIST_HELPER_OPEN"); dir != "" {
		db, err := Open(dir, Options{Logger: quietLogger()})
		if err == nil {
			db.Close()
			fmt.Println("HELPER: opened")
			os.Exit(0)
		}
		fmt.Printf("HELPER: locked=%v err=%v\n", errors.Is(err, ErrLocked), err)
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	db := mustOpen(t, dir, Options{})
	defer mustClose(t, db)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestSecondProcessOpenFails$")
	cmd.Env = append(os.Environ(), "PERSIST_HELPER_OPEN="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("HELPER: locked=true")) || !bytes.Contains(out, []byte(dir)) {
		t.Fatalf("helper output does not report ErrLocked naming %s:\n%s", dir, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}

func TestCorruptDir(t *testing.T) {
	dir := t.TempDir()
	newPebbleDir(t, vfs.Default, dir, "celld-persist-v4", func(pdb *pebble.DB) {
		if err := pdb.Set([]byte("mflushed_at"), make([]byte, 8), nil); err != nil {
			t.Fatal(err)
		}
	})
	manifests, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if len(manifests) == 0 {
		t.Fatalf("no MANIFEST in %s", dir)
	}
	for _, m := range manifests {
		garbage := bytes.Repeat([]byte("this is not a manifest "), 100)
		if err := os.WriteFile(m, garbage, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db, err := Open(dir, Options{Logger: quietLogger()})
	if err == nil {
		db.Close()
		t.Fatal("Open of a directory with a garbage MANIFEST succeeded")
	}
	if !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %q does not name %s", err, dir)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("error %v does not wrap ErrCorrupt", err)
	}
	t.Logf("Open: %v", err)
	// The failed Open released the lock.
	if db, err := Open(dir, Options{Logger: quietLogger()}); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			db.Close()
		}
		t.Fatalf("second Open = %v, want ErrCorrupt again (lock must have been released)", err)
	}
}

// TestCorruptRecord: a v1 record too short to hold its expiry header
// makes the migration fail with ErrCorrupt naming the key.
func TestCorruptRecord(t *testing.T) {
	fs := vfs.NewMem()
	newPebbleDir(t, fs, "d", "celld-persist-v1", func(pdb *pebble.DB) {
		if err := pdb.Set([]byte("kbad"), []byte{1, 2, 3}, nil); err != nil {
			t.Fatal(err)
		}
	})
	_, err := Open("d", Options{FS: fs, Logger: quietLogger()})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "bad") {
		t.Fatalf("Open = %v, want ErrCorrupt naming the key", err)
	}
}

func TestFormatMarker(t *testing.T) {
	fs := vfs.NewMem()
	newPebbleDir(t, fs, "d", "something-else", nil)
	_, err := Open("d", Options{FS: fs, Logger: quietLogger()})
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("Open = %v, want ErrFormat", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{CacheSize: -1}, {FoldMinBytes: -1}, {OpenTimeout: -time.Second}} {
		if _, err := Open("d", o); err == nil {
			t.Errorf("Open with %+v succeeded", o)
		}
	}
}

// TestLastFlushedAt pins the flush-time stamp: absent in a fresh directory,
// set by every Write from Options.Now in the same synced batch as the ops
// (so a crash keeps the stamp that matches the surviving records), read back
// by Open, and invisible to Restore and Count.
func TestLastFlushedAt(t *testing.T) {
	fs := vfs.NewCrashableMem()
	var clock atomic.Int64
	clock.Store(1_700_000_000_123)
	now := func() time.Time { return time.UnixMilli(clock.Load()) }
	db := mustOpen(t, "data", Options{FS: fs, Now: now})
	if got, ok := db.LastFlushedAt(); ok {
		t.Fatalf("fresh dir: LastFlushedAt = %v, true; want none", got)
	}
	if err := db.Write(nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := db.LastFlushedAt(); ok {
		t.Fatal("an empty Write recorded a flush time")
	}
	if err := db.Write([]Op{set("a", "1", 0)}); err != nil {
		t.Fatal(err)
	}
	if got, ok := db.LastFlushedAt(); !ok || got.UnixMilli() != 1_700_000_000_123 {
		t.Fatalf("after Write: LastFlushedAt = %v, %v; want 1700000000123 ms", got.UnixMilli(), ok)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	// A clock that steps back is recorded as it is: the stamp is the latest
	// Write's, not the largest.
	clock.Store(1_600_000_000_000)
	if err := db.Write([]Op{set("b", "2", 0)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.LastFlushedAt(); got.UnixMilli() != 1_600_000_000_000 {
		t.Fatalf("after second Write: LastFlushedAt = %d ms, want 1600000000000", got.UnixMilli())
	}
	mustClose(t, db)

	db = mustOpen(t, "data", Options{FS: fs})
	if got, ok := db.LastFlushedAt(); !ok || got.UnixMilli() != 1_600_000_000_000 {
		t.Errorf("reopened: LastFlushedAt = %d, %v; want 1600000000000 ms", got.UnixMilli(), ok)
	}
	got, _ := restoreAll(t, db, 0)
	checkRecords(t, got, []record{{"a", "1", 0}, {"b", "2", 0}})
	if n, err := db.Count(); err != nil || n != 2 {
		t.Errorf("Count = %d, %v; want 2 (metadata not counted)", n, err)
	}
	mustClose(t, db)

	// The crash image taken after the first Write has that Write's stamp.
	db = mustOpen(t, "data", Options{FS: crashed})
	defer mustClose(t, db)
	if got, ok := db.LastFlushedAt(); !ok || got.UnixMilli() != 1_700_000_000_123 {
		t.Errorf("crash image: LastFlushedAt = %d, %v; want 1700000000123 ms", got.UnixMilli(), ok)
	}
	got, _ = restoreAll(t, db, 0)
	checkRecords(t, got, []record{{"a", "1", 0}})
}

// TestMalformedFlushedAt: a flush-time stamp that is not 8 bytes makes Open
// fail with ErrCorrupt naming the directory, rather than being ignored.
func TestMalformedFlushedAt(t *testing.T) {
	fs := vfs.NewMem()
	newPebbleDir(t, fs, "data", "celld-persist-v4", func(pdb *pebble.DB) {
		if err := pdb.Set(flushedKey, []byte("bad"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	})
	_, err := Open("data", Options{FS: fs, Logger: quietLogger()})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "data") {
		t.Fatalf("Open with a malformed stamp = %v, want ErrCorrupt naming the dir", err)
	}
}
