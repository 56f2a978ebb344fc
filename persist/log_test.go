package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// baseFileNames returns the base files (and temp base files) in db's
// directory.
func baseFileNames(t testing.TB, db *DB) []string {
	t.Helper()
	names, err := db.fs.List(db.dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, baseFilePrefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// newPebbleDir creates a pebble v2 database in dir on fs the way celld
// up to format v4 did, with format stamp marker, and calls fill on it.
func newPebbleDir(t testing.TB, fs vfs.FS, dir, marker string, fill func(pdb *pebble.DB)) {
	t.Helper()
	pdb, err := pebble.Open(dir, &pebble.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if marker != "" {
		if err := pdb.Set(formatKey, []byte(marker), nil); err != nil {
			t.Fatal(err)
		}
	}
	if fill != nil {
		fill(pdb)
	}
	if err := pdb.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkPebbleGone fails unless the directory holds no pebble file.
func checkPebbleGone(t testing.TB, db *DB) {
	t.Helper()
	l, err := scanLayout(db.fs, db.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.pebble) != 0 || len(l.bases) != 1 {
		t.Fatalf("after migration: pebble files %q, base files %v; want none and one", l.pebble, l.bases)
	}
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
	if names := baseFileNames(t, db); len(names) != 1 || names[0] != baseFileName(db.pm.baseSeq, baseFileSuffix) {
		t.Fatalf("base files after the second WriteBase: %q, want only the current one", names)
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

	baseSeq := db.pm.baseSeq
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
		if w.f.chunks == 0 {
			t.Error("no chunk spilled before the crash point")
		}
		midCrash = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(1, 2))})
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WriteBase = %v, want fill's error", err)
	}
	if db.pm.baseSeq != baseSeq {
		t.Fatalf("base moved to seq %d after a failed WriteBase, want %d", db.pm.baseSeq, baseSeq)
	}
	if names := baseFileNames(t, db); len(names) != 1 {
		t.Fatalf("base files after a failed WriteBase: %q, want only the old one (temp file removed)", names)
	}
	got, _ := restoreAll(t, db, 0)
	checkRecords(t, got, m.sorted())

	// Again, with few keys: the phantom chunks must be gone.
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

// TestOldDirectoriesMigrate: a directory written by celld-persist-v2 (text
// set entries only), v3 (log chunks in pebble) or v4 (a pebble base plus
// change files) opens; its state is copied into a base file and pebble's
// files are removed; the change log replays on top as before; a second
// Open reads the base file alone.
func TestOldDirectoriesMigrate(t *testing.T) {
	for _, marker := range []string{"celld-persist-v2", "celld-persist-v3", "celld-persist-v4"} {
		t.Run(marker, func(t *testing.T) {
			fs := vfs.NewMem()
			var chunk []byte
			for _, r := range []record{{"a", "100", 0}, {"b", "200", 4_000_000_000_000}} {
				chunk = append(chunk, entrySet)
				chunk = binary.AppendUvarint(chunk, uint64(len(r.key)))
				chunk = append(chunk, r.key...)
				chunk = binary.AppendVarint(chunk, r.exp)
				chunk = binary.AppendUvarint(chunk, uint64(len(r.value)))
				chunk = append(chunk, r.value...)
			}
			newPebbleDir(t, fs, "data", marker, func(pdb *pebble.DB) {
				key := logKey(1)
				if marker == "celld-persist-v4" { // a base of generation 1 covering seq 1
					key = baseChunkKey(1, 0)
					meta := binary.BigEndian.AppendUint64(nil, 1)
					meta = binary.BigEndian.AppendUint64(meta, 1)
					meta = binary.BigEndian.AppendUint64(meta, uint64(len(chunk)))
					if err := pdb.Set(baseKey, meta, nil); err != nil {
						t.Fatal(err)
					}
				}
				if err := pdb.Set(key, chunk, nil); err != nil {
					t.Fatal(err)
				}
			})
			db := mustOpen(t, "data", Options{FS: fs})
			checkPebbleGone(t, db)
			// The change log replays after the migrated state: "a" ends at 101.
			if err := db.Write([]Op{{Key: []byte("c"), TAT: 5, IsTAT: true}, set("a", "101", 0)}); err != nil {
				t.Fatal(err)
			}
			want := []record{{"a", "101", 0}, {"b", "200", 4_000_000_000_000}, {"c", "5", 0}}
			got, _ := restoreAll(t, db, 1_700_000_000_000)
			checkRecords(t, got, want)
			mustClose(t, db)
			checkDir(t, fs, "data", want)
		})
	}
}

// TestV1DirectoryMigrates: a directory written by celld-persist-v1 (one
// pebble key per limiter key) migrates to a base file, replays its records
// under later log writes, asks for a base, and the first base writes each
// key once.
func TestV1DirectoryMigrates(t *testing.T) {
	fs := vfs.NewMem()
	newPebbleDir(t, fs, "data", "celld-persist-v1", func(pdb *pebble.DB) {
		v1 := func(key, value string, exp int64) {
			v := binary.BigEndian.AppendUint64(nil, uint64(exp))
			if err := pdb.Set(append([]byte{recordPrefix}, key...), append(v, value...), nil); err != nil {
				t.Fatal(err)
			}
		}
		v1("a", "100", 0)
		v1("b", "200", 4_000_000_000_000)
		v1("old", "300", 5) // expired long ago
	})
	db := mustOpen(t, "data", Options{FS: fs})
	checkPebbleGone(t, db)
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
	mustClose(t, db)
	db = mustOpen(t, "data", Options{FS: fs})
	defer mustClose(t, db)
	got, st = restoreAll(t, db, 1_700_000_000_000)
	checkRecords(t, got, want)
	if st.Loaded != int64(len(want)) || st.Expired != 0 {
		t.Errorf("after the first base: %+v, want %d loaded and nothing expired", st, len(want))
	}
}

// copyMainFixture copies testdata/v4-main-116090b (a directory written by
// main at 116090b: format v4) into a temporary directory and returns it.
func copyMainFixture(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("testdata", "v4-main-116090b")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMainDirectoryMigrates: a data directory written by celld's main at
// 116090b (format v4: a pebble base in a table and a WAL, and a change
// file after it) restores exactly, is migrated (pebble's files removed),
// and restores the same after a restart.
func TestMainDirectoryMigrates(t *testing.T) {
	dir := copyMainFixture(t)
	m := model{}
	for i := range 3000 {
		k := fmt.Sprintf("k%05d", i)
		m[k] = record{k, fmt.Sprint(1000 + i), int64(4_000_000_000_000 * (i % 2))}
	}
	m["str"] = record{"str", "hello", 0}
	m["k00001"] = record{"k00001", "99", 0}
	delete(m, "k00002")
	m["new"] = record{"new", "v", 4_000_000_000_000}
	for range 2 {
		db := mustOpen(t, dir, Options{})
		checkPebbleGone(t, db)
		if at, ok := db.LastFlushedAt(); !ok || at.UnixMilli() != 1_800_000_000_000 {
			t.Errorf("LastFlushedAt = %v, %v; want the stamp main wrote (1800000000000 ms)", at.UnixMilli(), ok)
		}
		got, _ := restoreAll(t, db, 1_700_000_000_000)
		checkRecords(t, got, m.sorted())
		mustClose(t, db)
	}
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
			// A record whose checksum matches but whose payload does not
			// decode: written, so corruption, not damage.
			db.mu.Lock()
			buf := make([]byte, recordHeaderLen, recordHeaderLen+len(tc.value))
			buf = append(buf, tc.value...)
			seq := db.mu.nextSeq
			db.mu.nextSeq++
			binary.LittleEndian.PutUint32(buf, uint32(len(tc.value)))
			binary.LittleEndian.PutUint64(buf[8:], seq)
			binary.LittleEndian.PutUint32(buf[4:], crc32Sum(buf[8:]))
			err := db.appendLocked(buf, seq)
			db.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			_, err = db.Replay(0, func([]byte, []byte, int64, bool) error { return nil })
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "d:") {
				t.Fatalf("Replay = %v, want ErrCorrupt naming the dir", err)
			}
		})
	}
}

// TestEntryEncodingRoundTrip pins entrySize against appendEntry and the
// decoder over awkward keys, values and expiries, and which TATs take
// the compact 'r' entry (expiry relative to the TAT) and its 26 bytes for
// CL.THROTTLE's key.
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
		// An expiry within a signed byte of the TAT's millisecond (what
		// CL.THROTTLE writes) is an 'r' entry, unless it is a one-byte
		// varint itself; one past the byte's range is a 't' entry.
		tat("ok:000000012345", 1_796_012_296_590_996_844, 1_796_012_296_590),
		tat("lo", 1_796_012_296_590_996_844, 1_796_012_296_590-128),
		tat("hi", 1_796_012_296_590_999_999, 1_796_012_296_590+127),
		tat("lo-1", 1_796_012_296_590_996_844, 1_796_012_296_590-129),
		tat("hi+1", 1_796_012_296_590_996_844, 1_796_012_296_590+128),
		tat("small", 5_000_000, 5),
		tat("edge", 64_000_000, 64),
		tat("edge-", 0, -65),
		tat("wrapmax", 1<<64-1, 18_446_744_073_709),
		tat("wrapneg", 1<<64-1, -1<<63),
		set("numrel", "1796012296590996844", 1_796_012_296_591),
	}
	wantKind := []byte{'s', 's', 't', 's', 'd', 'd', 't', 't', 't', 't', 't', 's', 's', 's', 's',
		'r', 'r', 'r', 't', 't', 't', 'r', 'r', 'r', 't', 'r'}
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
	cbErr, fmtErr := decodeChunk(chunk, func(_ uint32, k, v []byte, exp int64, _ Kind, deleted bool) error {
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
	throttled := tat("ok:000000012345", 1_796_012_296_590_996_844, 1_796_012_296_591)
	if n := len(appendEntry(nil, &throttled)); n != 26 {
		t.Errorf("CL.THROTTLE's entry for a 15-byte key: %d bytes, want 26", n)
	}
}

// TestEntryTATRelDamage: an 'r' entry cut short is a format error, not a
// read past the chunk.
func TestEntryTATRelDamage(t *testing.T) {
	op := Op{Key: []byte("k"), TAT: 1_796_012_296_590_996_844, IsTAT: true, ExpireAtMs: 1_796_012_296_590}
	chunk := appendEntry(nil, &op)
	if chunk[0] != entryTATRel {
		t.Fatalf("entry kind %q, want 'r'", chunk[0])
	}
	for n := 3; n < len(chunk); n++ {
		_, fmtErr := decodeChunk(chunk[:n], func(uint32, []byte, []byte, int64, Kind, bool) error {
			t.Fatalf("cut at %d: decoded an entry", n)
			return nil
		})
		if fmtErr == nil {
			t.Errorf("cut at %d of %d: no format error", n, len(chunk))
		}
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

// TestMain6fbfad1LogReads: a directory written by celld's main at 6fbfad1
// (before the 'r' entry: 300 CL.THROTTLE keys, two TATs of 100 of them,
// and three SET keys, as 't' and 's' entries in its change log; kill -9)
// restores exactly what that server's GET and PEXPIRETIME answered
// (want.txt), and again after this build writes 'r' entries over part
// of it.
func TestMain6fbfad1LogReads(t *testing.T) {
	src := filepath.Join("testdata", "log-main-6fbfad1")
	dir := t.TempDir()
	m := model{}
	for _, name := range []string{"base-0000000000000000.dat", "changes-0000000000000001.log", "want.txt"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "want.txt" {
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var r record
				if _, err := fmt.Sscan(line, &r.key, &r.value, &r.exp); err != nil {
					t.Fatalf("want.txt %q: %v", line, err)
				}
				r.exp = max(r.exp, 0) // PEXPIRETIME's -1: no TTL
				m[r.key] = r
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(m) != 303 {
		t.Fatalf("want.txt holds %d keys, want 303", len(m))
	}
	const nowMs = 1_800_000_000_000 // before every expiry in the fixture
	db := mustOpen(t, dir, Options{})
	got, _ := restoreAll(t, db, nowMs)
	checkRecords(t, got, m.sorted())
	var ops []Op
	for i := range 50 {
		tat := uint64(2_200_000_000_000_000_000 + i*1_000_003)
		op := Op{Key: fmt.Appendf(nil, "ok:%012d", i*5), TAT: tat, IsTAT: true, ExpireAtMs: int64(tat/1e6) - int64(i%2)}
		if k := appendEntry(nil, &op)[0]; k != entryTATRel {
			t.Fatalf("op %d: entry kind %q, want 'r'", i, k)
		}
		ops = append(ops, op)
		m[string(op.Key)] = record{string(op.Key), strconv.FormatUint(tat, 10), op.ExpireAtMs}
	}
	if err := db.Write(ops); err != nil {
		t.Fatal(err)
	}
	mustClose(t, db)
	db = mustOpen(t, dir, Options{})
	defer mustClose(t, db)
	got, _ = restoreAll(t, db, nowMs)
	checkRecords(t, got, m.sorted())
}
