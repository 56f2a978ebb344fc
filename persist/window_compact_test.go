package persist

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/celld/celld/window"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// decodeOne decodes a chunk holding one window entry and returns it.
func decodeOne(t *testing.T, chunk []byte) (key, state []byte, exp int64) {
	t.Helper()
	n := 0
	fnErr, fmtErr := decodeChunk(chunk, func(_ uint32, k, v []byte, e int64, kind Kind, deleted bool) error {
		n++
		if kind != KindWindow || deleted {
			t.Errorf("entry %q: kind %d deleted %v, want a window", k, kind, deleted)
		}
		key, state, exp = bytes.Clone(k), bytes.Clone(v), e
		return nil
	})
	if fnErr != nil || fmtErr != nil || n != 1 {
		t.Fatalf("decoding %q: %v %v, %d entries", chunk, fnErr, fmtErr, n)
	}
	return key, state, exp
}

// The compact tags' mode numbers and byte layout are the window package's:
// every FIXED and SLIDING state window.AppendCounters writes is written
// compact and comes back byte for byte, whatever its counters and expiry
// (no expiry, MaxInt64, before its start); its encoded size is entrySize's.
func TestCompactWindowRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	counts := []int64{0, 1, 99, 1 << 21, 1<<22 - 1, 1 << 22, 1 << 44, math.MaxInt64}
	exps := func(start int64) []int64 {
		add := func(d int64) int64 { return min(start, math.MaxInt64-d) + d } // saturating
		return []int64{0, 1, start, add(1000), add(2000), add(1 << 40), math.MaxInt64}
	}
	for i := 0; i < 2000; i++ {
		m, c := randCounters(r, []int64{0, 1, 1_764_000_000_000, 1 << 44, math.MaxInt64}, counts)
		start := c.Start
		state := window.AppendCounters(nil, m, c)
		exp := exps(start)[r.IntN(7)]
		key := bytes.Repeat([]byte{'k'}, 1+r.IntN(20))
		op := Op{Key: key, Value: state, ExpireAtMs: exp, Window: true}
		chunk := appendEntry(nil, &op)
		if len(chunk) != entrySize(&op) {
			t.Fatalf("%v %+v exp %d: encoded %d bytes, entrySize %d", m, c, exp, len(chunk), entrySize(&op))
		}
		want := byte(entryWinFixed)
		if m == window.Sliding {
			want = entryWinSliding
		}
		if chunk[0] != want {
			t.Fatalf("%v %+v exp %d: tag %q, want %q", m, c, exp, chunk[0], want)
		}
		k, got, e := decodeOne(t, chunk)
		if !bytes.Equal(k, key) || !bytes.Equal(got, state) || e != exp {
			t.Fatalf("%v %+v exp %d: got key %q state %x exp %d, want %x", m, c, exp, k, got, e, state)
		}
	}
}

// The figures the package comment gives: a 15-byte key with a 1 s window
// on today's clock is 26 bytes (FIXED) and 27 (SLIDING), against 41 and 49
// as 'w' entries and a 't' TAT entry's 31 (26 as CL.THROTTLE writes it:
// an 'r' entry, TestEntryEncodingRoundTrip).
func TestCompactWindowSize(t *testing.T) {
	key := []byte("wf:000000012345")
	now := int64(1_764_000_000_000)
	fixed := window.AppendCounters(nil, window.Fixed, window.Counters{Start: now, Curr: 57})
	sliding := window.AppendCounters(nil, window.Sliding, window.Counters{Start: now, Prev: 80, Curr: 57})
	tat := Op{Key: key, TAT: uint64(now) * 1e6, IsTAT: true, ExpireAtMs: now + 1000}
	for _, tc := range []struct {
		op   Op
		want int
	}{
		{Op{Key: key, Value: fixed, ExpireAtMs: now + 1000, Window: true}, 26},
		{Op{Key: key, Value: sliding, ExpireAtMs: now + 2000, Window: true}, 27},
		{tat, 31},
	} {
		if got := len(appendEntry(nil, &tc.op)); got != tc.want {
			t.Errorf("%q: %d bytes, want %d", tc.op.Value, got, tc.want)
		}
	}
	old := len(appendOldWindow(nil, key, fixed, now+1000))
	if old != 41 {
		t.Errorf("old FIXED entry: %d bytes, want 41", old)
	}
}

// appendOldWindow is the 'w' entry every window state was written as
// before the compact tags (win9): what existing directories hold.
func appendOldWindow(b, key, state []byte, exp int64) []byte {
	b = append(b, entryWindow)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendVarint(b, exp)
	b = binary.AppendUvarint(b, uint64(len(state)))
	return append(b, state...)
}

// What the compact tags cannot hold exactly stays a 'w' entry and comes
// back unchanged: LOG states, negative starts or counts, negative
// expiries, odd bytes. And 'w' entries of FIXED and SLIDING states, as
// directories written before the compact tags hold them, still restore.
func TestCompactWindowFallsBack(t *testing.T) {
	now := int64(1_764_000_000_000)
	var logState []byte
	l := window.Limit{Mode: window.Log, Limit: 10, WindowMs: 1000}
	for i := range int64(3) {
		_, logState, _, _ = l.Apply(logState, now+i, 1, nil)
		logState = bytes.Clone(logState)
	}
	fixed := window.AppendCounters(nil, window.Fixed, window.Counters{Start: now, Curr: 3})
	negCount := window.AppendCounters(nil, window.Fixed, window.Counters{Start: now, Curr: 3})
	binary.LittleEndian.PutUint64(negCount[9:], uint64(1<<63))
	for _, tc := range []struct {
		state []byte
		exp   int64
	}{
		{logState, now + 1000},
		{window.AppendCounters(nil, window.Fixed, window.Counters{Start: -5, Curr: 3}), 995},
		{window.AppendCounters(nil, window.Sliding, window.Counters{Start: -1 << 62, Prev: 1, Curr: 3}), math.MaxInt64},
		{negCount, now + 1000},
		{fixed, -1},
		{fixed[:16], now},
		{append(bytes.Clone(fixed), 0), now},
		{[]byte{byte(window.Fixed)}, now},
		{nil, now},
	} {
		op := Op{Key: []byte("k"), Value: tc.state, ExpireAtMs: tc.exp, Window: true}
		chunk := appendEntry(nil, &op)
		if chunk[0] != entryWindow || len(chunk) != entrySize(&op) {
			t.Errorf("state %x exp %d: tag %q, %d bytes (entrySize %d), want a 'w' entry", tc.state, tc.exp, chunk[0], len(chunk), entrySize(&op))
		}
		if _, got, e := decodeOne(t, chunk); !bytes.Equal(got, tc.state) || e != tc.exp {
			t.Errorf("state %x exp %d: came back %x exp %d", tc.state, tc.exp, got, e)
		}
	}
	for _, m := range []window.Mode{window.Fixed, window.Sliding} {
		state := window.AppendCounters(nil, m, window.Counters{Start: now, Prev: 4, Curr: 7})
		if _, got, e := decodeOne(t, appendOldWindow(nil, []byte("old"), state, now+2000)); !bytes.Equal(got, state) || e != now+2000 {
			t.Errorf("old %v entry: came back %x exp %d, want %x", m, got, e, state)
		}
	}
}

// Compact entries that do not decode are format errors, never a state.
func TestCompactWindowMalformed(t *testing.T) {
	for _, chunk := range [][]byte{
		{'f', 1, 'k'},          // no expiry
		{'f', 1, 'k', 2},       // no span
		{'f', 1, 'k', 2, 2},    // no count
		{'c', 1, 'k', 2, 2, 1}, // SLIDING: one count
		{'f', 1, 'k', 1, 2, 1}, // negative expiry
		{'f', 1, 'k', 2, 4, 1}, // span past the expiry: negative start
		{'f', 1, 'k', 2, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // count 2^64-1
		{'f', 1, 'k', 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 1}, // start past MaxInt64
	} {
		if _, fmtErr := decodeChunk(chunk, func(uint32, []byte, []byte, int64, Kind, bool) error { return nil }); fmtErr == nil {
			t.Errorf("chunk %x decoded", chunk)
		}
	}
}

// Through a DB: compact entries in the log and in a base, beside old 'w'
// entries written straight into the log (a directory from before), restore
// as the same states; a later entry wins as for any key.
func TestCompactWindowEntriesInDB(t *testing.T) {
	fs := vfs.NewMem()
	db := mustOpen(t, "d", Options{FS: fs})
	now := int64(1_764_000_000_000)
	fixed := window.AppendCounters(nil, window.Fixed, window.Counters{Start: now, Curr: 9})
	sliding := window.AppendCounters(nil, window.Sliding, window.Counters{Start: now - 1000, Prev: 3, Curr: 9})
	fixed2 := window.AppendCounters(nil, window.Fixed, window.Counters{Start: now, Curr: 10})
	if err := db.Write([]Op{
		{Key: []byte("f"), Value: fixed, ExpireAtMs: now + 1000, Window: true},
		{Key: []byte("s"), Value: sliding, ExpireAtMs: now + 1000, Window: true},
		{Key: []byte("t"), TAT: 42, IsTAT: true, ExpireAtMs: now + 5000},
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Write([]Op{{Key: []byte("f"), Value: fixed2, ExpireAtMs: now + 1000, Window: true}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]kindRec{
		"f": {"f", string(fixed2), now + 1000, KindWindow, false},
		"s": {"s", string(sliding), now + 1000, KindWindow, false},
		"t": {"t", "42", now + 5000, KindString, false},
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
	check("log", replayKinds(t, db, now))
	if _, err := db.WriteBase(func(w *BaseWriter) error {
		w.AddWindow([]byte("f"), fixed2, now+1000)
		w.AddWindow([]byte("s"), sliding, now+1000)
		w.AddTAT([]byte("t"), 42, now+5000)
		return w.Spill()
	}); err != nil {
		t.Fatal(err)
	}
	check("base", replayKinds(t, db, now))
	if got := replayKinds(t, db, now+1000); got["f"].key != "" || got["s"].key != "" {
		t.Errorf("expired compact window keys replayed: %+v", got)
	}
	mustClose(t, db)
	db = mustOpen(t, "d", Options{FS: fs})
	defer mustClose(t, db)
	check("reopened", replayKinds(t, db, now))
}

// Encoder.WindowCounters, given a FIXED or SLIDING state's numbers, writes
// exactly the bytes Encoder.Window writes for the window package's
// encoding of them: compact entries when they can hold the numbers, 'w'
// entries (a negative start or expiry, a count of 2^63 or more) otherwise;
// FIXED's prev is ignored, as its encoding ignores it.
func TestWindowCountersMatchesWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	counts := []int64{0, 1, 99, 1 << 22, 1 << 44, math.MaxInt64, -1, math.MinInt64}
	starts := []int64{0, 1, 1_764_000_000_000, 1 << 44, math.MaxInt64, -5, math.MinInt64}
	exps := []int64{0, 1, 1_764_000_001_000, math.MaxInt64, -1}
	var a, b Encoder
	for i := range 3000 {
		m, c := randCounters(r, starts, counts)
		start := c.Start
		exp := exps[r.IntN(len(exps))]
		if r.IntN(2) == 0 {
			exp = max(start, 0) + r.Int64N(5000)
		}
		key := bytes.Repeat([]byte{'k'}, 1+r.IntN(20))
		db := uint32(r.IntN(3))
		a.SetDB(db)
		b.SetDB(db)
		a.Window(key, window.AppendCounters(nil, m, c), exp)
		b.WindowCounters(key, byte(m), c.Start, uint64(c.Prev), uint64(c.Curr), exp)
		if !bytes.Equal(a.buf, b.buf) {
			t.Fatalf("entry %d, %v %+v exp %d: WindowCounters wrote\n%x\nWindow wrote\n%x", i, m, c, exp, b.buf, a.buf)
		}
	}
	if a.ops != b.ops || a.Len() != b.Len() {
		t.Errorf("ops %d and %d, Len %d and %d", a.ops, b.ops, a.Len(), b.Len())
	}
}

// randCounters draws a FIXED or SLIDING state: its start one of starts or
// a random time below 2^45, its counts from counts.
func randCounters(r *rand.Rand, starts, counts []int64) (window.Mode, window.Counters) {
	start := starts[r.IntN(len(starts))]
	if r.IntN(2) == 0 {
		start = r.Int64N(1 << 45)
	}
	c := window.Counters{Start: start, Prev: counts[r.IntN(len(counts))], Curr: counts[r.IntN(len(counts))]}
	if r.IntN(2) == 0 {
		return window.Sliding, c
	}
	return window.Fixed, c
}
