package persist

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// objectRec is one object entry as ReplayAll passes it.
type objectRec struct {
	key     string
	kind    byte
	payload string
	exp     int64
}

func replayObjects(t *testing.T, db *DB) []objectRec {
	t.Helper()
	var got []objectRec
	_, err := db.ReplayAll(0, func(uint32, []byte, []byte, int64, Kind, bool) error { return nil },
		func(_ uint32, key []byte, kind byte, payload []byte, exp int64) error {
			got = append(got, objectRec{string(key), kind, string(payload), exp})
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestObjectEntriesRoundTrip: an image of generation 0 is the old 'o'
// entry, byte for byte; an image of a later generation and a delta come
// back flagged, with their payloads; an image followed by a delta in one
// op gives both, in that order.
func TestObjectEntriesRoundTrip(t *testing.T) {
	old := appendObject(nil, []byte("k"), 3, []byte("IMG"), 77)
	op := Op{Key: []byte("k"), Kind: 3, Object: []byte("IMG"), ExpireAtMs: 77}
	if enc := appendEntry(nil, &op); !bytes.Equal(enc, old) || entrySize(&op) != len(old) {
		t.Fatalf("generation 0: %q (size %d), want the 'o' entry %q", enc, entrySize(&op), old)
	}
	db := mustOpen(t, "d", Options{FS: vfs.NewMem()})
	defer mustClose(t, db)
	ops := []Op{
		{Key: []byte("a"), Kind: 3, Object: []byte("IMG"), TAT: 300, ExpireAtMs: 5, DB: 2},
		{Key: []byte("b"), Kind: 4, Value: []byte("DELTA")},
		{Key: []byte("c"), Kind: 5, Object: []byte("I"), TAT: 1, Value: []byte{}},
	}
	for i := range ops {
		if n := len(appendEntry(nil, &ops[i])); n != entrySize(&ops[i]) {
			t.Fatalf("op %d: size %d, encoded %d", i, entrySize(&ops[i]), n)
		}
	}
	if err := db.Write(ops); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(replayObjects(t, db))
	want := fmt.Sprint([]objectRec{
		{"a", 3 | ObjectGen, "\xac\x02IMG", 5},
		{"b", 4 | ObjectDelta, "DELTA", 0},
		{"c", 5 | ObjectGen, "\x01I", 0},
		{"c", 5 | ObjectDelta, "", 0},
	})
	if got != want {
		t.Fatalf("replayed\n got %s\nwant %s", got, want)
	}
	if gen, img, err := SplitGen([]byte("\xac\x02IMG")); err != nil || gen != 300 || string(img) != "IMG" {
		t.Fatalf("SplitGen: %d %q %v", gen, img, err)
	}
}

// TestPendingObjectOpsSurviveFailures: while the disk fails, an image and
// the deltas after it stay pending together (a delta extends, never
// replaces, what is pending for its key) and hold copies of their bytes:
// the drain below reuses one buffer every window, as the server's does.
// When the disk is back, the image and the deltas in order are written.
func TestPendingObjectOpsSurviveFailures(t *testing.T) {
	sw := &faultySwitch{match: allWrites}
	db := mustOpen(t, "d", Options{FS: errorfs.Wrap(vfs.NewMem(), sw)})
	defer mustClose(t, db)
	block := make([]byte, 0, 64)
	windows := []Op{
		{Key: []byte("k"), Kind: 3, Object: []byte("IMAGE"), TAT: 1},
		{Key: []byte("k"), Kind: 3, Value: []byte("D2"), ExpireAtMs: 10},
		{Key: []byte("k"), Kind: 3, Value: []byte("D3"), ExpireAtMs: 20},
	}
	w := 0
	drain := func(_ int64, buf []Op) []Op {
		if w >= len(windows) {
			return buf
		}
		op := windows[w]
		w++
		block = block[:0] // reused: last window's bytes are overwritten
		block = append(block, op.Key...)
		op.Key = block[:len(op.Key):len(op.Key)]
		if op.Object != nil {
			s := len(block)
			block = append(block, op.Object...)
			op.Object = block[s:]
		}
		if op.Value != nil {
			s := len(block)
			block = append(block, op.Value...)
			op.Value = block[s:]
		}
		return append(buf, op)
	}
	f := NewFlusher(db, FlusherConfig{Interval: time.Hour, Logger: quietLogger(), Drain: drain, Release: func([]Op) {}})
	sw.on.Store(true)
	for range 2 {
		if err := f.FlushNow(); err == nil {
			t.Fatal("a write succeeded on a failing disk")
		}
	}
	sw.on.Store(false)
	if err := f.FlushNow(); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(replayObjects(t, db))
	want := fmt.Sprint([]objectRec{
		{"k", 3 | ObjectGen, "\x01IMAGE", 20},
		{"k", 3 | ObjectDelta, "D2D3", 20},
	})
	if got != want {
		t.Fatalf("replayed\n got %s\nwant %s", got, want)
	}
}
