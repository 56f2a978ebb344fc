package window

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// scanLogRef is scanLog as it was before its fast path (one loop over
// binary.Varint/Uvarint per field): the reference scanLog must agree with
// on every input, valid or not.
func scanLogRef(state []byte, now, w int64) (logScan, error) {
	var s logScan
	var t int64
	lo := now - w // entries at t > lo are in the window
	for off := 1; off < len(state); {
		at := off
		if off == 1 {
			v, n := binary.Varint(state[off:])
			if n <= 0 {
				return s, ErrCorrupt
			}
			t, off = v, off+n
		} else {
			d, n := binary.Uvarint(state[off:])
			if n <= 0 || d == 0 || d > uint64(math.MaxInt64)-uint64(t) {
				return s, ErrCorrupt
			}
			t, off = t+int64(d), off+n
		}
		c, n := binary.Uvarint(state[off:])
		if n <= 0 || c == 0 || c > 1<<63-1 {
			return s, ErrCorrupt
		}
		off += n
		s.entries++
		s.last, s.lastT, s.lastCount = at, t, int64(c)
		if t > lo {
			switch s.n {
			case 0:
				s.first, s.firstT = at, t
			case 1:
				s.second, s.secondT = at, t
			}
			s.n++
			s.used = satAdd(s.used, int64(c))
		}
	}
	return s, nil
}

// checkScan compares scanLog with scanLogRef on state: the same error, and
// on success the same logScan.
func checkScan(t *testing.T, state []byte, now, w int64) {
	t.Helper()
	got, gerr := scanLog(state, now, w)
	want, werr := scanLogRef(state, now, w)
	if gerr != werr {
		t.Fatalf("scanLog(%x, %d, %d): error %v, reference %v", state, now, w, gerr, werr)
	}
	if gerr == nil && got != want {
		t.Fatalf("scanLog(%x, %d, %d) = %+v, reference %+v", state, now, w, got, want)
	}
}

// TestScanLogMatchesReference: on logs built by real calls (deltas and
// counts of one, two and more varint bytes, windows that hold all, some
// or none of the entries, huge times) and on every one-byte corruption and
// truncation of them, scanLog answers what the plain loop did.
func TestScanLogMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for range 3000 {
		l := Limit{Mode: Log, Limit: 1 << 40, WindowMs: 1 + r.Int64N(1<<20)}
		now := r.Int64N(1 << 45)
		if r.IntN(8) == 0 {
			now = math.MaxInt64 - 1<<30 + r.Int64N(1<<29) // near the top of int64
		}
		var state []byte
		for range r.IntN(40) {
			switch r.IntN(4) {
			case 0:
				now += 1 + r.Int64N(127)
			case 1:
				now += 128 + r.Int64N(20000)
			case 2:
				now += r.Int64N(1 << 30)
			}
			q := 1 + r.Int64N(3)
			if r.IntN(6) == 0 {
				q = 1 + r.Int64N(1<<40)
			}
			_, next, _, err := l.Apply(state, now, q, nil)
			if err != nil {
				t.Fatalf("Apply(%x, %d, %d): %v", state, now, q, err)
			}
			if next != nil {
				state = plainOf(t, next) // scanLog reads plain states (old ones)
			}
		}
		for _, at := range []int64{now, now - l.WindowMs/2, now + l.WindowMs/2, now + 2*l.WindowMs, 0, math.MinInt64 + 1<<62, math.MaxInt64 - 1} {
			for _, w := range []int64{l.WindowMs, 1, 1 << 62} {
				checkScan(t, state, at, w)
			}
		}
		for i := range state {
			checkScan(t, state[:i], now, l.WindowMs)
			bad := append([]byte(nil), state...)
			bad[i] ^= byte(1 << r.IntN(8))
			checkScan(t, bad, now, l.WindowMs)
			bad[i] = byte(r.IntN(256))
			checkScan(t, bad, now, l.WindowMs)
		}
	}
	for _, state := range [][]byte{nil, {1}, {1, 0}, {1, 2}, {1, 2, 0}, {1, 2, 1, 0, 1}, {1, 2, 1, 0x80}, {1, 2, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1}} {
		checkScan(t, state, 10, 5)
	}
}

// FuzzScanLog: scanLog and scanLogRef agree on any bytes.
func FuzzScanLog(f *testing.F) {
	f.Add([]byte{1, 2, 1, 4, 1}, int64(3), int64(2))
	f.Add([]byte{1, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 1, 1}, int64(math.MaxInt64), int64(1))
	f.Fuzz(func(t *testing.T, state []byte, now, w int64) {
		checkScan(t, state, now, w)
	})
}

// BenchmarkScanLog: scanLog against the plain loop on logs of 12 and 100
// entries (bench/window.sh's LOG rows: a call every ~80 ms per key, and a
// full log of limit 100).
func BenchmarkScanLog(b *testing.B) {
	for _, c := range []struct {
		n    int
		gap  int64
		name string
	}{{12, 83, "12x83ms"}, {12, 200, "12x200ms"}, {100, 10, "100x10ms"}} {
		l := Limit{Mode: Log, Limit: 1000, WindowMs: 100_000}
		now := int64(1_700_000_000_000)
		var state []byte
		for range c.n {
			now += c.gap
			_, next, _, _ := l.Apply(state, now, 1, nil)
			state = plainOf(b, next)
		}
		for _, f := range []struct {
			name string
			fn   func([]byte, int64, int64) (logScan, error)
		}{{"fast", scanLog}, {"ref", scanLogRef}} {
			b.Run(c.name+"/"+f.name, func(b *testing.B) {
				for range b.N {
					f.fn(state, now, l.WindowMs)
				}
			})
		}
	}
}

// TestVarintHead: varintHead decodes t₀ as binary.Varint does for every
// length of varint (1 to 10 bytes), with and without 8 bytes to read
// after the mode byte, every truncation and a continuation bit set on
// each byte (both paths: a varint of more than 8 bytes, or a short
// state, falls back to binary.Varint).
func TestVarintHead(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	vals := []int64{0, -1, 1, 63, -64, 64, 1<<41 + 12345, 1_700_000_000_000, -1_700_000_000_000, math.MaxInt64, math.MinInt64}
	for shift := range 64 {
		vals = append(vals, int64(1)<<shift, -(int64(1) << shift), r.Int64()>>shift, -(r.Int64() >> shift))
	}
	for _, v := range vals {
		for _, pad := range []int{0, 1, 3, 9} {
			st := binary.AppendVarint([]byte{byte(Log)}, v)
			for range pad {
				st = append(st, byte(r.IntN(256)))
			}
			for cut := 2; cut <= len(st); cut++ {
				check := func(st []byte) {
					t.Helper()
					got, off := varintHead(st)
					want, n := binary.Varint(st[1:])
					if n <= 0 {
						if off > 0 {
							t.Fatalf("varintHead(%x) = %d, %d; binary.Varint n %d", st, got, off, n)
						}
						return
					}
					if got != want || off != 1+n {
						t.Fatalf("varintHead(%x) = %d, %d; want %d, %d", st, got, off, want, 1+n)
					}
				}
				check(st[:cut])
				for i := 1; i < cut; i++ {
					bad := append([]byte(nil), st[:cut]...)
					bad[i] |= 0x80
					check(bad)
				}
			}
		}
	}
}
