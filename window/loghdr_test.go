package window

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// plainOf is a header-format LOG state in the plain format written before
// it (mode byte Log, the entries): what a data directory, a replication
// stream or a DUMP of an older celld holds for the same log.
func plainOf(tb testing.TB, st []byte) []byte {
	tb.Helper()
	if len(st) == 0 {
		return st
	}
	var h hdrLog
	ok := readHdr(st, &h)
	if st[0] != logHdr || !ok {
		tb.Fatalf("plainOf(%x): not a header-format state", st)
	}
	return append([]byte{byte(Log)}, st[h.tAt:]...)
}

// checkForms checks a LOG call made on a header-format state (r, next,
// write: Apply's answer) against the other forms of the same log: the
// state passes Load unchanged; its plain form loads to the same bytes, and
// a call on the plain form (decided by the full pass over its entries, the
// implementation before the header) answers the same reply and writes the
// same header-format bytes, through Apply and ApplyInPlace.
func checkForms(t *testing.T, l Limit, state []byte, now, q int64, r Result, next []byte, write bool) {
	t.Helper()
	if len(state) == 0 {
		return
	}
	if got, err := Load(state, nil); err != nil || !bytes.Equal(got, state) {
		t.Fatalf("Load(%x) = %x, %v; want it unchanged", state, got, err)
	}
	plain := plainOf(t, state)
	if got, err := Load(plain, nil); err != nil || !bytes.Equal(got, state) {
		t.Fatalf("Load(plain %x) = %x, %v; want %x", plain, got, err, state)
	}
	pr, pnext, pw, err := l.Apply(plain, now, q, make([]byte, 0, 4))
	if err != nil || pr != r || pw != write || !bytes.Equal(pnext, next) {
		t.Fatalf("plain %x: %v %x %v %v; header form %x: %v %x %v", plain, reply(pr), pnext, pw, err, state, reply(r), next, write)
	}
	blk := append(make([]byte, 0, len(plain)+64), plain...)
	ir, inext, inPlace, iw, err := l.ApplyInPlace(blk, now, q, nil)
	if err != nil || ir != r || iw != write || inPlace || !bytes.Equal(inext, next) || !bytes.Equal(blk, plain) {
		t.Fatalf("ApplyInPlace(plain %x): %v %x in place %v %v %v; want %v %x", plain, reply(ir), inext, inPlace, iw, err, reply(r), next)
	}
	if write {
		if got, err := Load(next, nil); err != nil || !bytes.Equal(got, next) {
			t.Fatalf("Load(written %x) = %x, %v", next, got, err)
		}
	}
}

// The clock steps back between calls (as the store sees it: the state
// holds times after now), with bursts, gaps and limits 1 to 1,000,000:
// every reply as the brute-force reference's.
func TestAgainstReferenceClockBack(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 1500 {
		limit := []int64{1, 2, 3, 5, 10, 100, 1_000_000}[rng.IntN(7)]
		w := []int64{1, 2, 7, 100, 1000}[rng.IntN(5)]
		cs := calls(rng, limit, w, 1+rng.IntN(60))
		for i := range cs {
			if rng.IntN(5) == 0 {
				cs[i].t -= rng.Int64N(2*w + 1) // a step back, of up to two windows
			}
		}
		play(t, Log, limit, w, cs)
	}
}

// The header is what a pass over the entries computes, after any call:
// entry count, units, span, t₀ (Load's check); and the log's bytes stay
// those of the plain format after the header, which takes 3 bytes for
// logs of up to 127 entries and units spanning less than 128 ms.
func TestHeaderSize(t *testing.T) {
	for _, n := range []int{1, 10, 100, 1000} {
		l := Limit{Mode: Log, Limit: 1_000_000, WindowMs: 1 << 40}
		var st []byte
		for i := range n {
			_, next, _, err := l.Apply(st, base+int64(i), 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			st = next
		}
		plain := plainOf(t, st)
		hdr := len(st) - len(plain)
		want := 3 // one byte each for n, total and span
		if n > 127 {
			want = 6
		}
		if hdr != want {
			t.Errorf("%d entries: header %d bytes, want %d (state %d bytes)", n, hdr, want, len(st))
		}
	}
}

// Load refuses every damaged state it can tell from a good one: every
// truncation and every one-byte change of real logs either fails with
// ErrCorrupt or loads a state that decides exactly as its plain form does
// (a change that keeps the header and entries consistent, e.g. t₀). And no
// call on a damaged state, loaded or not, panics.
func TestLoadRefusesDamage(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for range 300 {
		l := Limit{Mode: Log, Limit: []int64{1, 100, 1 << 40}[r.IntN(3)], WindowMs: 1 + r.Int64N(5000)}
		now := base + r.Int64N(1<<20)
		var st []byte
		for range 1 + r.IntN(30) {
			now += r.Int64N(l.WindowMs/3 + 2)
			if _, next, w, _ := l.Apply(st, now, 1+r.Int64N(3), nil); w {
				st = next
			}
		}
		if len(st) == 0 {
			continue
		}
		try := func(bad []byte) {
			for _, at := range []int64{now, now + l.WindowMs/2, now + 2*l.WindowMs, now - 5*l.WindowMs} {
				for _, q := range []int64{0, 1, l.Limit} {
					l.Apply(bad, at, q, nil) // no panic
					blk := append(make([]byte, 0, len(bad)+8), bad...)
					l.ApplyInPlace(blk, at, q, nil)
				}
			}
			got, err := Load(bad, nil)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Load(%x): %v, want ErrCorrupt", bad, err)
				}
				return
			}
			if len(got) == 0 {
				return
			}
			if got[0] != logHdr {
				if m, ok := stateMode(got[0]); ok && m != Log {
					return // the mode byte now names FIXED or SLIDING: their calls check them
				}
				t.Fatalf("Load(%x) = %x", bad, got)
			}
			plain := plainOf(t, got)
			for _, at := range []int64{now, now + l.WindowMs/2, now + 2*l.WindowMs} {
				for _, q := range []int64{0, 1, l.Limit} {
					r1, n1, w1, e1 := l.Apply(got, at, q, nil)
					r2, n2, w2, e2 := l.Apply(plain, at, q, nil)
					if r1 != r2 || w1 != w2 || e1 != e2 || !bytes.Equal(n1, n2) {
						t.Fatalf("loaded %x (from damaged %x) at %d q %d: %v %x; its plain form %v %x", got, bad, at, q, reply(r1), n1, reply(r2), n2)
					}
				}
			}
		}
		for i := range st {
			try(st[:i])
			bad := append([]byte(nil), st...)
			bad[i] ^= byte(1 << r.IntN(8))
			try(bad)
			bad[i] = byte(r.IntN(256))
			try(bad)
		}
	}
	for _, bad := range [][]byte{
		{logHdr},
		{logHdr, 1, 1, 0},             // no t₀
		{logHdr, 1, 1, 0, 2},          // no count
		{logHdr, 0, 0, 0, 2, 1},       // n 0
		{logHdr, 1, 2, 0, 2, 1},       // total 2, the entry holds 1
		{logHdr, 2, 2, 0, 2, 1, 1, 1}, // span 0, the entries span 1 ms
		{logHdr, 1, 1, 0, 2, 1, 1, 1}, // 2 entries, n says 1
		{logHdr, 2, 2, 1, 2, 1, 0, 1}, // delta 0
		{logHdr, 1, 0, 0, 2, 0},       // count 0
		{byte(Log), 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 1}, // units past 2^63
		{9},
		{byte(Log), 0x30, 0x30, 0xf9, 0x00, 0x30},    // a delta of 121 in two bytes (FuzzLoad)
		{logHdr, 0x82, 0x00, 0x60, 0x79, 0x30, 0x30}, // n 2 in two bytes
		{logHdr, 0x30, 0x30, 0x02, 0x30, 0x30, 0x30}, // n 48, 2 entries, the last without a count (FuzzLoad: a call panicked on it)
	} {
		if _, err := Load(bad, nil); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Load(%x): %v, want ErrCorrupt", bad, err)
		}
	}
}

// FuzzLoad: on any bytes, no call panics, and a state Load accepts
// decides as its plain form (the pass over every entry) does.
func FuzzLoad(f *testing.F) {
	f.Add([]byte{logHdr, 2, 3, 1, 2, 1, 1, 2}, int64(3), int64(2), int64(1))
	f.Add([]byte{byte(Log), 2, 1, 4, 1}, int64(3), int64(2), int64(1))
	f.Fuzz(func(t *testing.T, st []byte, now, w, q int64) {
		l := Limit{Mode: Log, Limit: 100, WindowMs: max(1, w&0xffff)}
		q &= 0xff
		l.Apply(st, now, q, nil)
		blk := append(make([]byte, 0, len(st)+8), st...)
		l.ApplyInPlace(blk, now, q, nil)
		got, err := Load(st, nil)
		if err != nil || len(got) == 0 || got[0] != logHdr {
			return
		}
		r1, n1, w1, e1 := l.Apply(got, now, q, nil)
		r2, n2, w2, e2 := l.Apply(plainOf(t, got), now, q, nil)
		if r1 != r2 || w1 != w2 || e1 != e2 || !bytes.Equal(n1, n2) {
			t.Fatalf("loaded %x: %v %x; plain %v %x", got, reply(r1), n1, reply(r2), n2)
		}
	})
}

// ShiftBack moves a header-format log's times as it did a plain one's.
func TestShiftBackHeader(t *testing.T) {
	l := Limit{Mode: Log, Limit: 100, WindowMs: 1000}
	var st []byte
	for i := range 5 {
		_, st, _, _ = l.Apply(st, base+int64(i*7), 1, nil)
	}
	got, ok := ShiftBack(st, 5000, nil)
	wantPlain, _ := ShiftBack(plainOf(t, st), 5000, nil)
	if !ok || !bytes.Equal(plainOf(t, got), wantPlain) {
		t.Fatalf("ShiftBack(%x) = %x, %v; plain form shifted %x", st, got, ok, wantPlain)
	}
	if _, err := Load(got, nil); err != nil {
		t.Fatal(err)
	}
	_ = binary.MaxVarintLen64
	_ = math.MaxInt64
}

// Load refuses a state of more entries than celld ever writes
// (MaxLogEntries), in either format: a crafted one would stay that long
// (each call merges its two oldest entries) and every denied call would
// walk it. MaxLogEntries entries still load.
func TestLoadRefusesOverMaxEntries(t *testing.T) {
	plain := func(n int) []byte {
		st := binary.AppendVarint([]byte{byte(Log)}, base)
		st = append(st, 1)
		for range n - 1 {
			st = append(st, 1, 1) // 1 ms later, one unit
		}
		return st
	}
	// oneMore is a header-format state with one entry more than st (1 ms
	// later, one unit), its header made to agree.
	oneMore := func(st []byte) []byte {
		var h hdrLog
		if !readHdr(st, &h) {
			t.Fatalf("readHdr(%x) failed", st)
		}
		more := appendHdr(nil, h.n+1, h.total+1, h.span+1, h.t0)
		more = append(more, st[h.c0:]...)
		return append(more, 1, 1)
	}
	for _, n := range []int{MaxLogEntries - 1, MaxLogEntries, MaxLogEntries + 1, 5000} {
		got, err := Load(plain(n), nil)
		if ok := n <= MaxLogEntries; ok != (err == nil) {
			t.Fatalf("Load(plain, %d entries): %v", n, err)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Load(plain, %d entries): %v, want ErrCorrupt", n, err)
			}
			continue
		}
		more, err := Load(oneMore(got), nil)
		switch {
		case n < MaxLogEntries:
			if want, _ := Load(plain(n+1), nil); err != nil || !bytes.Equal(more, want) {
				t.Fatalf("Load(header, %d entries) = %x, %v; want %x", n+1, more, err, want)
			}
		case !errors.Is(err, ErrCorrupt):
			t.Fatalf("Load(header, %d entries): %v, want ErrCorrupt", n+1, err)
		}
	}
}
