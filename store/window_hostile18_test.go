package store

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/celld/celld/window"
)

// plainOfHdr is a header-format LOG state (state byte 4) in the plain
// format main wrote before it: the state byte 1 and the entries.
func plainOfHdr(t *testing.T, st []byte) []byte {
	t.Helper()
	if len(st) == 0 {
		return nil
	}
	if st[0] != 4 {
		t.Fatalf("state %x: not a header-format LOG state", st)
	}
	off := 1
	for range 3 { // entries, units, span
		_, n := binary.Uvarint(st[off:])
		if n <= 0 {
			t.Fatalf("state %x: bad header", st)
		}
		off += n
	}
	return append([]byte{byte(window.Log)}, st[off:]...)
}

// The store's LOG calls (store.Window: ApplyInPlace on the key's block,
// the block grown, moved and inline, the header read instead of the
// entries) answer every call as main's full pass over the plain form of
// the same log does (window.Apply on a plain state, the code before the
// header), and store exactly the state that pass writes: random sequences
// with calls in the same ms, gaps, clock steps back and forward by
// minutes, quantities 0 to above the limit, limits 1 to 2^63−1, windows 1
// ms to 2^63−1 ms, logs past MaxLogEntries (two oldest merged), COPY and
// RENAME of the key between calls, a restore through LoadWindow of both
// forms. The reference drops its state when the key's TTL (the last
// write's reset_after_ms) has run out, as the store does.
func TestStoreWindowLogAsPlainPass(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 18))
	limits := []int64{1, 2, 3, 10, 100, 2000, 1_000_000, math.MaxInt64}
	windows := []int64{1, 2, 7, 100, 1000, 60_000, 1 << 40, math.MaxInt64}
	for seq := range 400 {
		s := New(Options{})
		key := []byte("k")
		now := t0ms + rng.Int64N(1<<20)
		var plain []byte // the reference's state, plain form
		var expAt int64  // and its key's expiry (the TTL is the write's reset_after_ms)
		steps := 1 + rng.IntN(60)
		if seq%20 == 0 {
			steps = 1500 // past MaxLogEntries
		}
		for i := range steps {
			l := winLimit(window.Log, limits[rng.IntN(len(limits))], windows[rng.IntN(len(windows))])
			if steps > 100 {
				l = winLimit(window.Log, math.MaxInt64, 1<<40)
			}
			switch rng.IntN(10) {
			case 0: // same ms
			case 1:
				now -= rng.Int64N(120_000) // clock back
			case 2:
				now += rng.Int64N(600_000)
			default:
				now += 1 + rng.Int64N(200)
			}
			var q int64
			switch rng.IntN(7) {
			case 0:
				q = 0
			case 1:
				q = l.Limit
			case 2:
				q = min(l.Limit, math.MaxInt64-1) + 1
			case 3:
				q = 200 + rng.Int64N(1<<20)
			default:
				q = 1 + rng.Int64N(3)
			}
			if expAt != 0 && expAt < now {
				plain, expAt = nil, 0
			}
			want, next, write, err := l.Apply(plain, now, q, nil)
			if err != nil {
				t.Fatalf("seq %d call %d: reference: %v", seq, i, err)
			}
			got, err := s.Window(key, l, q, now)
			if err != nil || got != want {
				t.Fatalf("seq %d call %d (%+v at %d q %d, plain %x): store %+v %v; plain pass %+v", seq, i, l, now, q, plain, got, err, want)
			}
			stored := dumpWin(s, string(key), now)
			if write {
				if !bytes.Equal(stored, next) {
					t.Fatalf("seq %d call %d: store holds %x, the plain pass wrote %x", seq, i, stored, next)
				}
				plain = plainOfHdr(t, next)
				expAt = satAddMs(now, want.ResetAfter)
			}
			switch rng.IntN(40) {
			case 0: // a restore of the state in either form
				st := stored
				if rng.IntN(2) == 0 {
					st = plainOfHdr(t, stored)
				}
				if len(st) > 0 {
					if err := s.LoadWindow(key, st, now+1<<50); err != nil {
						t.Fatalf("seq %d: LoadWindow(%x): %v", seq, st, err)
					}
					expAt = now + 1<<50
				}
			case 1, 2: // the state moves to another key (COPY, RENAME)
				dst := []byte("c")
				if string(key) == "c" {
					dst = []byte("k")
				}
				var ok bool
				var err error
				if rng.IntN(2) == 0 {
					ok, err = s.Copy(key, dst, now, true)
				} else {
					ok, err = s.Rename(key, dst, now, false)
				}
				if err != nil && (err != ErrNoSuchKey || plain != nil) {
					t.Fatalf("seq %d: moving %s (reference %x): %v", seq, key, plain, err)
				}
				if ok {
					key = dst
				}
			}
		}
	}
}
