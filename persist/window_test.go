package persist

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

type kindRec struct {
	key, value string
	exp        int64
	kind       Kind
	deleted    bool
}

func replayKinds(t *testing.T, db *DB, nowMs int64) map[string]kindRec {
	t.Helper()
	got := map[string]kindRec{}
	if _, err := db.ReplayAll(nowMs, func(_ uint32, k, v []byte, exp int64, kind Kind, deleted bool) error {
		if deleted {
			delete(got, string(k))
			return nil
		}
		got[string(k)] = kindRec{string(k), string(v), exp, kind, false}
		return nil
	}); err != nil {
		t.Fatalf("ReplayAll: %v", err)
	}
	return got
}

// A window op is stored as a 'w' entry and comes back as KindWindow, from
// the log and from a base, beside strings and TATs; deleting it works as
// for any key.
func TestWindowEntries(t *testing.T) {
	fs := vfs.NewMem()
	db := mustOpen(t, "d", Options{FS: fs})
	state := "\x01\x80\x80\x01\x03" // any bytes: persist does not read them
	ops := []Op{
		{Key: []byte("w1"), Value: []byte(state), ExpireAtMs: 5000, Window: true},
		{Key: []byte("w2"), Value: []byte("\x02abc"), ExpireAtMs: 6000, Window: true},
		{Key: []byte("t"), TAT: 42, IsTAT: true, ExpireAtMs: 7000},
		{Key: []byte("s"), Value: []byte("+5"), ExpireAtMs: 0},
	}
	for i := range ops {
		if got, want := len(appendEntry(nil, &ops[i])), entrySize(&ops[i]); got != want {
			t.Errorf("op %d: encoded %d bytes, entrySize %d", i, got, want)
		}
	}
	if err := db.Write(ops); err != nil {
		t.Fatal(err)
	}
	if err := db.Write([]Op{{Key: []byte("w2"), Delete: true, Window: true}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]kindRec{
		"w1": {"w1", state, 5000, KindWindow, false},
		"t":  {"t", "42", 7000, KindString, false},
		"s":  {"s", "+5", 0, KindString, false},
	}
	check := func(what string, got map[string]kindRec) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %d keys %v, want %v", what, len(got), got, want)
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: %q = %+v, want %+v", what, k, got[k], w)
			}
		}
	}
	check("log", replayKinds(t, db, 0))
	// An expired window entry replays as a deletion.
	if got := replayKinds(t, db, 5000); got["w1"].key != "" {
		t.Errorf("expired window key replayed: %+v", got["w1"])
	}
	if _, err := db.WriteBase(func(w *BaseWriter) error {
		w.AddWindow([]byte("w1"), []byte(state), 5000)
		w.AddTAT([]byte("t"), 42, 7000)
		w.Add([]byte("s"), []byte("+5"), 0)
		return w.Spill()
	}); err != nil {
		t.Fatal(err)
	}
	check("base", replayKinds(t, db, 0))
	mustClose(t, db)
	db = mustOpen(t, "d", Options{FS: fs})
	defer mustClose(t, db)
	check("reopened", replayKinds(t, db, 0))
}

func TestWindowEntryMalformed(t *testing.T) {
	for _, chunk := range [][]byte{
		{'w', 1, 'k'},                // no expiry
		{'w', 1, 'k', 2},             // no state length
		{'w', 1, 'k', 2, 5, 1, 2, 3}, // state shorter than its length
	} {
		if _, fmtErr := decodeChunk(chunk, func(uint32, []byte, []byte, int64, Kind, bool) error { return nil }); fmtErr == nil {
			t.Errorf("chunk %q decoded", chunk)
		}
	}
}
