package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// readAll returns the contents of path on fs.
func readAll(t testing.TB, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeAll replaces path on fs with b.
func writeAll(t testing.TB, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestChangeLogTornTail: the last record of a change file that a crash
// (or a failed write) left short or followed by junk is ignored,
// the records before it restore, Open reports nothing wrong, and the next
// Writes go to a new file that replays after the torn one.
func TestChangeLogTornTail(t *testing.T) {
	// bStart is where Write B's record starts (after Write A's).
	for _, tc := range []struct {
		name   string
		mangle func(b []byte, bStart int) []byte
		keepsB bool // whether Write B survives the damage
	}{
		{"truncated by one byte", func(b []byte, _ int) []byte { return b[:len(b)-1] }, false},
		{"truncated in the header", func(b []byte, bStart int) []byte { return b[:bStart+recordHeaderLen-3] }, false},
		{"zeros appended", func(b []byte, _ int) []byte { return append(b, make([]byte, 4096)...) }, true},
		{"junk appended", func(b []byte, _ int) []byte { return append(b, "\xff\xff\xff\x7fjunk that is not a record"...) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			clock := int64(1_700_000_000_000)
			now := func() time.Time { return time.UnixMilli(clock) }
			db := mustOpen(t, "d", Options{FS: fs, Now: now})
			if err := db.Write([]Op{set("a", "1", 0), set("c", "0", 0)}); err != nil {
				t.Fatal(err)
			}
			clock += 1000
			if err := db.Write([]Op{{Key: []byte("b"), TAT: 22, IsTAT: true}, set("bb", "x", 0)}); err != nil {
				t.Fatal(err)
			}
			mustClose(t, db)
			path := fs.PathJoin("d", changeFileName(1))
			b := readAll(t, fs, path)
			bStart := recordHeaderLen + int(binary.LittleEndian.Uint32(b))
			writeAll(t, fs, path, tc.mangle(b, bStart))

			want := model{}
			want.apply([]Op{set("a", "1", 0), set("c", "0", 0)})
			wantStamp := int64(1_700_000_000_000)
			if tc.keepsB {
				want.apply([]Op{set("b", "22", 0), set("bb", "x", 0)})
				wantStamp += 1000
			}
			db = mustOpen(t, "d", Options{FS: fs, Now: now})
			if got, ok := db.LastFlushedAt(); !ok || got.UnixMilli() != wantStamp {
				t.Errorf("LastFlushedAt = %d, %v; want %d (the last intact record's)", got.UnixMilli(), ok, wantStamp)
			}
			got, _ := restoreAll(t, db, 0)
			checkRecords(t, got, want.sorted())
			clock += 1000
			c := []Op{set("c", "3", 0)}
			if err := db.Write(c); err != nil {
				t.Fatal(err)
			}
			want.apply(c)
			if names := changeFileNames(t, db); len(names) != 2 || names[0] != changeFileName(1) {
				t.Errorf("change files = %q, want the torn one and a new one", names)
			}
			mustClose(t, db)
			checkDir(t, fs, "d", want.sorted())
		})
	}
}

// TestChangeLogCorruptPayload: a record whose CRC matches but whose payload
// does not decode was written that way, so it is corruption, not a torn
// tail: Replay fails with ErrCorrupt naming the directory and the file.
func TestChangeLogCorruptPayload(t *testing.T) {
	fs := vfs.NewMem()
	db := mustOpen(t, "d", Options{FS: fs})
	if err := db.Write([]Op{set("fine", "1", 0)}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, db)
	path := fs.PathJoin("d", changeFileName(1))
	b := readAll(t, fs, path)
	// A second record, well formed but holding an unknown entry kind.
	h := len(b)
	b = append(b, make([]byte, recordHeaderLen)...)
	b = append(b, "x\x01a"...)
	fixRecord(b[h:], 2)
	writeAll(t, fs, path, b)

	db = mustOpen(t, "d", Options{FS: fs})
	defer mustClose(t, db)
	_, err := db.Replay(0, func([]byte, []byte, int64, bool) error { return nil })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "d:") || !strings.Contains(err.Error(), changeFileName(1)) {
		t.Fatalf("Replay = %v, want ErrCorrupt naming the dir and the file", err)
	}
}

// fixRecord fills in the header of the record rec (header + payload).
func fixRecord(rec []byte, seq uint64) {
	n := len(rec) - recordHeaderLen
	binary.LittleEndian.PutUint32(rec, uint32(n))
	binary.LittleEndian.PutUint64(rec[8:], seq)
	binary.LittleEndian.PutUint32(rec[4:], crc32.Checksum(rec[8:], castagnoli))
}

// TestChangeLogCrashImages takes a crash image (half of the unsynced data
// kept, at random) after every Write and WriteBase of a random workload,
// and checks that each image restores exactly what had been acknowledged:
// records are synced before Write returns, a new file's directory entry is
// synced before it is used, and a fold's removals cannot lose data.
func TestChangeLogCrashImages(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db := mustOpen(t, "data", Options{FS: fs})
	rng := rand.New(rand.NewPCG(7, 11))
	m := model{}
	type image struct {
		fs   *vfs.MemFS
		want []record
	}
	var images []image
	for step := range 60 {
		if step%13 == 12 {
			writeBase(t, db, m.sorted())
		} else {
			var ops []Op
			for range 1 + rng.IntN(50) {
				k := fmt.Sprintf("k%03d", rng.IntN(200))
				switch rng.IntN(4) {
				case 0:
					ops = append(ops, del(k))
				case 1:
					ops = append(ops, Op{Key: []byte(k), TAT: rng.Uint64(), IsTAT: true, ExpireAtMs: int64(rng.IntN(3)) * 4_000_000_000_000})
				default:
					ops = append(ops, set(k, fmt.Sprint("v", rng.IntN(1000)), 0))
				}
			}
			if err := db.Write(ops); err != nil {
				t.Fatal(err)
			}
			for i := range ops {
				if ops[i].IsTAT {
					ops[i].Value = []byte(fmt.Sprint(ops[i].TAT))
				}
			}
			m.apply(ops)
		}
		images = append(images, image{
			fs:   fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(uint64(step), 3))}),
			want: m.sorted(),
		})
	}
	mustClose(t, db)
	for i, img := range images {
		checkDir(t, img.fs, "data", img.want)
		if t.Failed() {
			t.Fatalf("crash image %d", i)
		}
	}
}

// TestLeftoverChangeFileRemoved: a change file that a fold could not remove
// (here: put back after the fold) is all at or below the base's seq, so
// replay skips it and the next Open removes it.
func TestLeftoverChangeFileRemoved(t *testing.T) {
	fs := vfs.NewMem()
	db := mustOpen(t, "d", Options{FS: fs})
	if err := db.Write([]Op{set("a", "1", 0), set("b", "2", 0)}); err != nil {
		t.Fatal(err)
	}
	path := fs.PathJoin("d", changeFileName(1))
	old := readAll(t, fs, path)
	writeBase(t, db, []record{{"a", "1", 0}, {"b", "2", 0}})
	if err := db.Write([]Op{del("a")}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, db)
	writeAll(t, fs, path, old)

	db = mustOpen(t, "d", Options{FS: fs})
	if names := changeFileNames(t, db); len(names) != 1 || names[0] != changeFileName(2) {
		t.Errorf("change files after Open = %q, want only %s", names, changeFileName(2))
	}
	got, _ := restoreAll(t, db, 0)
	checkRecords(t, got, []record{{"b", "2", 0}})
	mustClose(t, db)
}

// TestChangeLogSplitsHugeWrites: a Write whose changes encode to more than
// maxRecord is several records, each within the cap, with consecutive
// seqs; all of them replay, in order (a key set in the first record and
// again in the last ends with the last value).
func TestChangeLogSplitsHugeWrites(t *testing.T) {
	defer func(m int) { maxRecord = m }(maxRecord)
	maxRecord = 1 << 10
	fs := vfs.NewMem()
	db := mustOpen(t, "d", Options{FS: fs})
	m := model{}
	ops := []Op{set("first-and-last", "1", 0)}
	for i := range 500 {
		ops = append(ops, set(fmt.Sprintf("key%04d", i), fmt.Sprint(i), 0))
	}
	ops = append(ops, set("first-and-last", "2", 0))
	if err := db.Write(ops); err != nil {
		t.Fatal(err)
	}
	m.apply(ops)
	records := db.mu.nextSeq - 1
	if records < 5 {
		t.Fatalf("a %d-op Write used %d record(s), want several of ≤ %d bytes", len(ops), records, maxRecord)
	}
	mustClose(t, db)
	var seqs []uint64
	_, _, err := readChangeFile(fs, fs.PathJoin("d", changeFileName(1)), nil, func(seq uint64, _ int64, payload []byte) error {
		if len(payload) > maxRecord {
			t.Errorf("record %d holds %d bytes, over the %d cap", seq, len(payload), maxRecord)
		}
		seqs = append(seqs, seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(seqs)) != records || seqs[0] != 1 || seqs[len(seqs)-1] != records {
		t.Errorf("file holds seqs %v, want 1..%d", seqs, records)
	}
	checkDir(t, fs, "d", m.sorted())
}

// TestSizeBoundBoundsEntrySize: appendRecords sizes its buffer and picks
// the one-record path from sizeBound, so it must never be below the
// encoded size, for every shape of set value (canonical decimals encode
// as 8-byte TATs, shorter or longer than their text), expiry and database.
func TestSizeBoundBoundsEntrySize(t *testing.T) {
	values := [][]byte{nil, {}, []byte("0"), []byte("7"), []byte("007"), []byte("18446744073709551615"),
		[]byte("18446744073709551616"), []byte("-1"), []byte("abc"), make([]byte, 100), make([]byte, 300)}
	for _, v := range values {
		for _, exp := range []int64{0, 1, 1 << 40, -5} {
			for _, db := range []uint32{0, 3, 1 << 20} {
				for _, op := range []Op{
					{Key: []byte("k"), Value: v, ExpireAtMs: exp, DB: db},
					{Key: make([]byte, 200), Value: v, ExpireAtMs: exp, DB: db},
					{Key: []byte("k"), TAT: 5, IsTAT: true, ExpireAtMs: exp, DB: db},
					{Key: []byte("k"), Delete: true, DB: db},
				} {
					b, e := sizeBound(&op), entrySize(&op)
					if b < e {
						t.Fatalf("sizeBound %d < entrySize %d for %+v", b, e, op)
					}
					if got := len(appendEntry(nil, &op)); got != e {
						t.Fatalf("entrySize %d, encoded %d bytes for %+v", e, got, op)
					}
				}
			}
		}
	}
}
