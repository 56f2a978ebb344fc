package window

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// Every state a call writes loads again (a restart, a follower, a
// restore of a SAVE): Load accepts what Apply and ApplyInPlace write, for
// any times a state may hold, including the far past (a LOG state that
// entered with t₀ near −2^63 and a window_ms near 2^63, so that the next
// unit lies more than 2^62 ms after it) and the far future. Without that a
// server writes a data directory it refuses to start from.
func TestWrittenStatesLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 81))
	t0s := []int64{math.MinInt64 + 1, -(1 << 62) - 1_000_000, -(1 << 62) + 5, -1, 0, base, 1 << 62, math.MaxInt64 - 100_000}
	ws := []int64{1, 1000, 1 << 40, 1 << 62, math.MaxInt64 - 1, math.MaxInt64}
	for range 3000 {
		first := t0s[rng.IntN(len(t0s))]
		st := binary.AppendVarint([]byte{byte(Log)}, first)
		st = binary.AppendUvarint(st, 1+rng.Uint64N(3))
		loaded, err := Load(st, nil)
		if err != nil {
			t.Fatalf("Load(%x): %v", st, err)
		}
		st = loaded
		nows := []int64{first, base, base + rng.Int64N(1000), math.MaxInt64 - rng.Int64N(1000), first + rng.Int64N(3)}
		for range 1 + rng.IntN(6) {
			l := Limit{Mode: Log, Limit: []int64{1, 5, math.MaxInt64}[rng.IntN(3)], WindowMs: ws[rng.IntN(len(ws))]}
			now := nows[rng.IntN(len(nows))]
			q := rng.Int64N(3)
			_, next, write, err := l.Apply(st, now, q, nil)
			if err != nil {
				t.Fatalf("Apply(%x, %d, %d) with %+v: %v", st, now, q, l, err)
			}
			blk := append(make([]byte, 0, len(st)+32), st...)
			_, inext, _, iwrite, ierr := l.ApplyInPlace(blk, now, q, nil)
			if ierr != nil || iwrite != write || (write && !bytes.Equal(inext, next)) {
				t.Fatalf("ApplyInPlace(%x, %d, %d): %x %v %v; Apply wrote %x %v", st, now, q, inext, iwrite, ierr, next, write)
			}
			if !write {
				continue
			}
			if got, err := Load(next, nil); err != nil || !bytes.Equal(got, next) {
				t.Fatalf("%+v at %d q %d on %x wrote %x, which Load refuses: %v", l, now, q, st, next, err)
			}
			st = append([]byte(nil), next...)
		}
	}
}

// FuzzLoadWide is FuzzLoad over every limit, window and quantity (up to
// 2^63−1): a state Load accepts decides as its plain form does (main's
// full pass), through Apply and ApplyInPlace, and what either writes
// loads again.
func FuzzLoadWide(f *testing.F) {
	f.Add([]byte{logHdr, 2, 3, 1, 2, 1, 1, 2}, int64(base), int64(1000), int64(1), int64(10))
	f.Add([]byte{byte(Log), 2, 1, 4, 1}, int64(3), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(binary.AppendUvarint(binary.AppendVarint([]byte{byte(Log)}, math.MinInt64+1), 3), int64(base), int64(math.MaxInt64), int64(2), int64(5))
	f.Fuzz(func(t *testing.T, st []byte, now, w, q, limit int64) {
		l := Limit{Mode: Log, Limit: max(1, limit), WindowMs: max(1, w)}
		q = max(0, q)
		got, err := Load(st, nil)
		if err != nil || len(got) == 0 || got[0] != logHdr {
			return
		}
		r1, n1, w1, e1 := l.Apply(got, now, q, nil)
		r2, n2, w2, e2 := l.Apply(plainOf(t, got), now, q, nil)
		if r1 != r2 || w1 != w2 || e1 != e2 || !bytes.Equal(n1, n2) {
			t.Fatalf("loaded %x: %v %x %v; plain %v %x %v", got, reply(r1), n1, e1, reply(r2), n2, e2)
		}
		blk := append(make([]byte, 0, len(got)+8), got...)
		r3, n3, _, w3, e3 := l.ApplyInPlace(blk, now, q, nil)
		if r3 != r1 || w3 != w1 || e3 != e1 || (w1 && !bytes.Equal(n3, n1)) {
			t.Fatalf("ApplyInPlace(%x): %v %x; Apply %v %x", got, reply(r3), n3, reply(r1), n1)
		}
		if w1 {
			if back, err := Load(n1, nil); err != nil || !bytes.Equal(back, n1) {
				t.Fatalf("%+v at %d q %d on %x wrote %x, which Load refuses: %v", l, now, q, got, n1, err)
			}
		}
	})
}
