package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// rawKeys returns the pebble keys of db's instance under prefix.
func rawKeys(t testing.TB, db *DB, prefix byte) [][]byte {
	t.Helper()
	db.pm.Lock()
	defer db.pm.Unlock()
	var keys [][]byte
	if err := scan(db.pm.pdb, []byte{prefix}, []byte{prefix + 1}, func(k, _ []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// changeFileNames returns the change files in db's directory.
func changeFileNames(t testing.TB, db *DB) []string {
	t.Helper()
	files, err := listChangeFiles(db.fs, db.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, db.fs.PathBase(f.path))
	}
	return names
}

// model is the expected state: key → record.
type model map[string]record

func (m model) apply(ops []Op) {
	for _, op := range ops {
		if op.Delete {
			delete(m, string(op.Key))
		} else {
			m[string(op.Key)] = record{string(op.Key), string(op.Value), op.ExpireAtMs}
		}
	}
}

func (m model) sorted() []record {
	out := make([]record, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sortRecords(out)
	return out
}

func sortRecords(rs []record) {
	slices.SortFunc(rs, func(a, b record) int { return strings.Compare(a.key, b.key) })
}

// TestLogAndBase: a big Write keeps op order (a key set first and again
// last ends with the last value); Writes append to one change file;
// WriteBase folds the log away (no change file left, one base generation
// on disk); Writes after the base go to a new change file and replay on
// top of it after a reopen.
func TestLogAndBase(t *testing.T) {
	fs := vfs.NewMem()
	db := mustOpen(t, "data", Options{FS: fs})
	m := model{}
	big := make([]Op, 0, 40_000)
	big = append(big, set("first-and-last", "1", 0))
	for i := range 40_000 - 2 {
		big = append(big, set(fmt.Sprintf("user:%09d", i), strings.Repeat("7", 19), 0))
	}
	big = append(big, set("first-and-last", "2", 0))
	if err := db.Write(big); err != nil {
		t.Fatal(err)
	}
	m.apply(big)
	small := []Op{del("user:000000001"), set("new", "5", 4_000_000_000_000), del("never")}
	if err := db.Write(small); err != nil {
		t.Fatal(err)
	}
	m.apply(small)
	if names := changeFileNames(t, db); len(names) != 1 || names[0] != changeFileName(1) {
		t.Fatalf("change files after two Writes: %q, want [%s]", names, changeFileName(1))
	}

	st := writeBase(t, db, m.sorted())
	if st.Chunks < 2 {
		t.Errorf("base of %d keys in %d chunk(s), want several", st.Keys, st.Chunks)
	}
	if names := changeFileNames(t, db); len(names) != 0 {
		t.Errorf("change files left after WriteBase: %q, want none", names)
	}
	after := []Op{set("user:000000002", "9", 0), del("new"), set("post", "3", 0)}
	if err := db.Write(after); err != nil {
		t.Fatal(err)
	}
	m.apply(after)
	if names := changeFileNames(t, db); len(names) != 1 || names[0] != changeFileName(3) {
		t.Errorf("change files after the base and a Write: %q, want [%s]", names, changeFileName(3))
	}
	// A second base leaves only its own generation.
	writeBase(t, db, m.sorted())
	more := []Op{set("post", "4", 0)}
	if err := db.Write(more); err != nil {
		t.Fatal(err)
	}
	m.apply(more)
	for _, k := range rawKeys(t, db, basePrefix) {
		if gen := binary.BigEndian.Uint64(k[1:]); gen != 2 {
			t.Fatalf("base chunk of generation %d left after the second WriteBase", gen)
		}
	}
	mustClose(t, db)

	db = mustOpen(t, "data", Options{FS: fs})
	defer mustClose(t, db)
	got, rst := restoreAll(t, db, 0)
	checkRecords(t, got, m.sorted())
	if rst.LogBytes == 0 || rst.BaseBytes == 0 {
		t.Errorf("restore stats %+v: want both base and log bytes", rst)
	}
	if n, err := db.Count(); err != nil || n != int64(len(m)) {
		t.Errorf("Count = %d, %v; want %d", n, err, len(m))
	}
}

// TestWriteBaseIsAtomic: a crash in the middle of WriteBase (chunks of the
// new generation already written) restores the old base and log exactly,
// and a failed WriteBase leaves the DB usable: the next one, with fewer
// chunks, does not pick up the failed attempt's leftovers.
func TestWriteBaseIsAtomic(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db := mustOpen(t, "data", Options{FS: fs})
	m := model{}
	for w := range 5 {
		var ops []Op
		for i := range 200 {
			ops = append(ops, set(fmt.Sprintf("k%04d", i), fmt.Sprint(w*1000+i), 0))
		}
		if err := db.Write(ops); err != nil {
			t.Fatal(err)
		}
		m.apply(ops)
	}
	writeBase(t, db, m.sorted()) // generation 1
	tail := []Op{set("k0001", "tail", 0), del("k0002")}
	if err := db.Write(tail); err != nil {
		t.Fatal(err)
	}
	m.apply(tail)

	var midCrash *vfs.MemFS
	boom := errors.New("fill gave up")
	_, err := db.WriteBase(func(w *BaseWriter) error {
		// Far more than one chunk of keys that exist nowhere else.
		for i := range 60_000 {
			w.Add([]byte(fmt.Sprintf("phantom:%06d", i)), []byte("12345678901234567890"), 0)
			if err := w.Spill(); err != nil {
				return err
			}
		}
		if w.idx == 0 {
			t.Error("no chunk spilled before the crash point")
		}
		midCrash = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(1, 2))})
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WriteBase = %v, want fill's error", err)
	}
	if !db.BaseDue() && db.pm.baseGen != 1 {
		t.Fatalf("base generation moved to %d after a failed WriteBase", db.pm.baseGen)
	}
	got, _ := restoreAll(t, db, 0)
	checkRecords(t, got, m.sorted())

	// Generation 2 again, with few keys: the phantom chunks must be gone.
	writeBase(t, db, m.sorted())
	got, _ = restoreAll(t, db, 0)
	checkRecords(t, got, m.sorted())
	done := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	mustClose(t, db)

	for name, img := range map[string]*vfs.MemFS{"crash during WriteBase": midCrash, "crash after WriteBase": done} {
		checkDir(t, img, "data", m.sorted())
		t.Logf("%s: %d keys restored exactly", name, len(m))
	}
}

// TestV1DirectoryMigrates: a directory written by celld-persist-v1 (one
// pebble key per limiter key) opens, is restamped v2 (so an older celld no
// longer opens it), replays its records under later log writes, asks for a
// base, and the first base removes the v1 records.
// A celld-persist-v2 directory (text set entries only) or v3 one (log
// chunks in pebble) is read as it is and restamped v4, so that an older
// build, which cannot read 't' entries or change files, refuses it instead
// of finding a chunk it cannot decode or missing the change log.
func TestV2DirectoryRestamped(t *testing.T) {
	for _, marker := range []string{formatVersionV2, formatVersionV3} {
		t.Run(marker, func(t *testing.T) {
			fs := vfs.NewMem()
			pdb, err := pebble.Open("data", &pebble.Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			var chunk []byte
			for _, r := range []record{{"a", "100", 0}, {"b", "200", 4_000_000_000_000}} {
				chunk = append(chunk, entrySet)
				chunk = binary.AppendUvarint(chunk, uint64(len(r.key)))
				chunk = append(chunk, r.key...)
				chunk = binary.AppendVarint(chunk, r.exp)
				chunk = binary.AppendUvarint(chunk, uint64(len(r.value)))
				chunk = append(chunk, r.value...)
			}
			if err := pdb.Set(formatKey, []byte(marker), nil); err != nil {
				t.Fatal(err)
			}
			if err := pdb.Set(logKey(1), chunk, nil); err != nil {
				t.Fatal(err)
			}
			if err := pdb.Close(); err != nil {
				t.Fatal(err)
			}
			db := mustOpen(t, "data", Options{FS: fs})
			// The change log replays after the pebble log: "a" ends at 101.
			if err := db.Write([]Op{{Key: []byte("c"), TAT: 5, IsTAT: true}, set("a", "101", 0)}); err != nil {
				t.Fatal(err)
			}
			got, _ := restoreAll(t, db, 1_700_000_000_000)
			checkRecords(t, got, []record{{"a", "101", 0}, {"b", "200", 4_000_000_000_000}, {"c", "5", 0}})
			mustClose(t, db)
			pdb, err = pebble.Open("data", &pebble.Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			defer pdb.Close()
			v, closer, err := pdb.Get(formatKey)
			if err != nil {
				t.Fatal(err)
			}
			defer closer.Close()
			if string(v) != formatVersion {
				t.Fatalf("format marker %q after opening a v2 directory, want %q", v, formatVersion)
			}
		})
	}
}

func TestV1DirectoryMigrates(t *testing.T) {
	fs := vfs.NewMem()
	pdb, err := pebble.Open("data", &pebble.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	v1 := func(key, value string, exp int64) {
		v := binary.BigEndian.AppendUint64(nil, uint64(exp))
		if err := pdb.Set(append([]byte{recordPrefix}, key...), append(v, value...), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := pdb.Set(formatKey, []byte(formatVersionV1), nil); err != nil {
		t.Fatal(err)
	}
	v1("a", "100", 0)
	v1("b", "200", 4_000_000_000_000)
	v1("old", "300", 5) // expired long ago
	if err := pdb.Close(); err != nil {
		t.Fatal(err)
	}

	db := mustOpen(t, "data", Options{FS: fs})
	if err := db.Write([]Op{set("a", "101", 0), set("c", "1", 0)}); err != nil {
		t.Fatal(err)
	}
	want := []record{{"a", "101", 0}, {"b", "200", 4_000_000_000_000}, {"c", "1", 0}}
	got, st := restoreAll(t, db, 1_700_000_000_000)
	checkRecords(t, got, want)
	if st.Expired != 1 || !db.BaseDue() {
		t.Errorf("Expired = %d, BaseDue = %v; want 1, true", st.Expired, db.BaseDue())
	}
	writeBase(t, db, got)
	if n := len(rawKeys(t, db, recordPrefix)); n != 0 {
		t.Errorf("%d v1 records left after the first base", n)
	}
	mustClose(t, db)

	pdb, err = pebble.Open("data", &pebble.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	v, closer, err := pdb.Get(formatKey)
	if err != nil || string(v) != formatVersion {
		t.Errorf("format marker = %q, %v; want %q", v, err, formatVersion)
	}
	if closer != nil {
		closer.Close()
	}
	pdb.Close()
	db = mustOpen(t, "data", Options{FS: fs})
	defer mustClose(t, db)
	got, _ = restoreAll(t, db, 1_700_000_000_000)
	checkRecords(t, got, want)
}

// TestCorruptChunk: a log or base chunk that does not decode makes Replay
// fail with ErrCorrupt naming the directory, never skip it silently.
func TestCorruptChunk(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value []byte
	}{
		{"unknown kind", []byte("x\x01a")},
		{"key past the end", []byte("s\x09ab")},
		{"value past the end", append([]byte("s\x01a\x00\x7f"), "short"...)},
		{"truncated expiry", []byte("s\x01a\x80")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := mustOpen(t, "d", Options{FS: vfs.NewMem()})
			defer mustClose(t, db)
			if err := db.Write([]Op{set("fine", "1", 0)}); err != nil {
				t.Fatal(err)
			}
			if err := db.pm.pdb.Set(logKey(db.mu.nextSeq), tc.value, nil); err != nil {
				t.Fatal(err)
			}
			_, err := db.Replay(0, func([]byte, []byte, int64, bool) error { return nil })
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "d:") {
				t.Fatalf("Replay = %v, want ErrCorrupt naming the dir", err)
			}
		})
	}
}

// TestEntryEncodingRoundTrip pins entrySize against appendEntry and the
// decoder over awkward keys, values and expiries.
func TestEntryEncodingRoundTrip(t *testing.T) {
	tat := func(key string, v uint64, exp int64) Op {
		return Op{Key: []byte(key), TAT: v, IsTAT: true, ExpireAtMs: exp}
	}
	ops := []Op{
		set("", "", 0),
		set("k", strings.Repeat("v", 300), -1),
		set(strings.Repeat("\xff", 200), "1", 1<<62),
		set("neg", "x", -1<<62),
		del(""),
		del(strings.Repeat("d", 128)),
		tat("t0", 0, 0),
		tat("tmax", 1<<64-1, 1_800_000_000_000),
		// Canonical decimal text becomes a 't' entry; anything else
		// stays text, so every value reads back exactly as written.
		set("c", "1796012296590996844", 7),
		set("c0", "0", 0),
		set("cmax", "18446744073709551615", 0),
		set("over", "18446744073709551616", 0),
		set("lead", "0123", 0),
		set("plus", "+1", 0),
		set("mixed", "12a", 0),
	}
	wantKind := []byte{'s', 's', 't', 's', 'd', 'd', 't', 't', 't', 't', 't', 's', 's', 's', 's'}
	text := func(op Op) string {
		if op.IsTAT {
			return strconv.FormatUint(op.TAT, 10)
		}
		return string(op.Value)
	}
	var chunk []byte
	for i := range ops {
		before := len(chunk)
		chunk = appendEntry(chunk, &ops[i])
		if got := len(chunk) - before; got != entrySize(&ops[i]) {
			t.Fatalf("op %d: encoded %d bytes, entrySize says %d", i, got, entrySize(&ops[i]))
		}
		if chunk[before] != wantKind[i] {
			t.Errorf("op %d (%q): entry kind %q, want %q", i, text(ops[i]), chunk[before], wantKind[i])
		}
	}
	var i int
	cbErr, fmtErr := decodeChunk(chunk, func(_ uint32, k, v []byte, exp int64, deleted bool) error {
		want := ops[i]
		if string(k) != string(want.Key) || deleted != want.Delete ||
			(!deleted && (string(v) != text(want) || exp != want.ExpireAtMs)) {
			t.Errorf("entry %d = %q %q %d %v, want %+v", i, k, v, exp, deleted, want)
		}
		i++
		return nil
	})
	if cbErr != nil || fmtErr != nil || i != len(ops) {
		t.Fatalf("decode: %v %v after %d entries", cbErr, fmtErr, i)
	}
}

// TestFlusherFoldsLog: with a small fold threshold the loop rewrites the
// base from Snapshot while writes continue, and the directory always
// restores the model: after Stop, and from crash images taken at random
// moments while the loop writes and folds.
func TestFlusherFoldsLog(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db := mustOpen(t, "data", Options{FS: fs, FoldMinBytes: 4 << 10})
	ds := newDirtySet()
	var snapshots atomic.Int64
	f := NewFlusher(db, FlusherConfig{
		Interval: 2 * time.Millisecond,
		Drain:    ds.drain,
		Snapshot: func(_ int64, w *BaseWriter) error {
			snapshots.Add(1)
			for _, r := range ds.want() {
				w.Add([]byte(r.key), []byte(r.value), r.exp)
			}
			return w.Spill()
		},
		Logger: quietLogger(),
	})
	f.Start()
	type image struct {
		fs   *vfs.MemFS
		want []record // durable before the clone (FlushNow returned)
	}
	var images []image
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 3000 {
		k := fmt.Sprintf("key%03d", i%300)
		if i%7 == 0 {
			ds.del(k)
		} else {
			ds.set(k, fmt.Sprint(i), 0)
		}
		if i%500 == 499 {
			if err := f.FlushNow(); err != nil {
				t.Fatal(err)
			}
			images = append(images, image{fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 30, RNG: rng}), ds.want()})
		}
		if i%50 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(t, "three base rewrites", func() bool { return f.Status().Bases >= 3 })
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	if st := f.Status(); st.BaseErrors != 0 || st.LastBase.Keys == 0 {
		t.Errorf("status %+v: want no base errors and a non-empty last base", st)
	}
	want := ds.want()
	mustClose(t, db)
	checkDir(t, fs, "data", want)
	t.Logf("%d snapshots, %d crash images", snapshots.Load(), len(images))
	for _, img := range images {
		// Nothing changed the model between FlushNow and the clone, and a
		// base the loop may have been writing holds that same state: exact.
		checkDir(t, img.fs, "data", img.want)
	}
}

// TestBaseDuePolicy pins when the log is folded: not before it reaches
// Options.FoldMinBytes, and not before it reaches the base's size, so a
// restart replays at most about twice the live state.
func TestBaseDuePolicy(t *testing.T) {
	db := mustOpen(t, "d", Options{FS: vfs.NewMem(), FoldMinBytes: 1000})
	defer mustClose(t, db)
	write := func(n int) {
		t.Helper()
		ops := make([]Op, n)
		for i := range ops {
			// 20-byte entries: the leading zero keeps the value text
			// (a canonical number would be a 17-byte 't' entry).
			ops[i] = set(fmt.Sprintf("k%05d", i), "0123456789", 0)
		}
		if err := db.Write(ops); err != nil {
			t.Fatal(err)
		}
	}
	write(40) // 800 bytes < FoldMinBytes
	if db.BaseDue() {
		t.Fatalf("BaseDue with a %d-byte log under FoldMinBytes 1000", db.LogBytes())
	}
	write(10) // 1000 bytes
	if !db.BaseDue() {
		t.Fatalf("BaseDue = false with a %d-byte log and no base", db.LogBytes())
	}
	var recs []record
	for i := range 200 {
		recs = append(recs, record{fmt.Sprintf("k%05d", i), "1234567890", 0})
	}
	st := writeBase(t, db, recs) // a 4000-byte base
	if db.BaseDue() || db.LogBytes() != 0 {
		t.Fatalf("after WriteBase: BaseDue %v, log %d bytes", db.BaseDue(), db.LogBytes())
	}
	for db.LogBytes()+200 < st.Bytes {
		write(10)
		if db.BaseDue() {
			t.Fatalf("BaseDue with a %d-byte log under the %d-byte base", db.LogBytes(), st.Bytes)
		}
	}
	write(10)
	if !db.BaseDue() {
		t.Fatalf("BaseDue = false with a %d-byte log and a %d-byte base", db.LogBytes(), st.Bytes)
	}
}
