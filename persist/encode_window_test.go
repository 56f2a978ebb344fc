package persist

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/celld/celld/window"
)

// TestEncoderWindowFastPath: Encoder.Window's in-place path for a LOG
// state writes, byte for byte, the records DB.Write's encoder
// (appendRecords) makes of the same changes: real LOG states (from
// window.Limit.Apply) of 1 to ~60 entries, keys and states at and around
// the one-byte length's edge (127, 128), expiries of every varint length,
// databases 0 and 3, among FIXED states, deletions and TATs, in one
// record and split at maxRecord (the bounds the path tests up front).
// Checked to fail when the path writes other bytes (a wrong expiry
// varint, a length byte off by one).
func TestEncoderWindowFastPath(t *testing.T) {
	defer func(m int) { maxRecord = m }(maxRecord)
	l := window.Limit{Mode: window.Log, Limit: 1000, WindowMs: 60_000}
	for _, limit := range []int{maxRecord, 1024, 200, 1} {
		maxRecord = limit
		for seed := uint64(1); seed <= 10; seed++ {
			t.Run(fmt.Sprintf("max=%d/%d", limit, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 21))
				var ops []Op
				for range 300 + r.IntN(300) {
					key := []byte(fmt.Sprintf("wl:%d", r.IntN(1000)))
					if r.IntN(6) == 0 {
						key = append(bytes.Repeat([]byte{'K'}, []int{120, 123, 124, 125, 126, 200}[r.IntN(6)]), key...)
					}
					db := []uint32{0, 0, 0, 3}[r.IntN(4)]
					switch r.IntN(8) {
					case 0:
						ops = append(ops, Op{Key: key, Delete: true, DB: db})
						continue
					case 1:
						ops = append(ops, Op{Key: key, IsTAT: true, TAT: r.Uint64(), ExpireAtMs: r.Int64N(1 << 42), DB: db})
						continue
					case 2:
						st := window.AppendCounters(nil, window.Fixed, window.Counters{Start: r.Int64N(1 << 40), Curr: r.Int64N(100)})
						ops = append(ops, Op{Key: key, Window: true, Value: st, ExpireAtMs: r.Int64N(1 << 42), DB: db})
						continue
					}
					var state []byte
					now := int64(1_800_000_000_000)
					for range 1 + r.IntN(60) {
						now += 1 + r.Int64N(300)
						_, next, write, err := l.Apply(state, now, 1+r.Int64N(3), nil)
						if err != nil {
							t.Fatal(err)
						}
						if write {
							state = next
						}
					}
					exp := []int64{0, now + 60_000, -1, 1<<63 - 1, -1 << 63, 63, 64}[r.IntN(7)]
					ops = append(ops, Op{Key: key, Window: true, Value: state, ExpireAtMs: exp, DB: db})
				}
				const seq, stamp = 9, 1_800_000_000_777
				want, wantRecords := appendRecords(nil, ops, seq, stamp)
				var e Encoder
				e.Reset()
				short, long := 0, 0
				for i := range ops {
					if ops[i].Window && len(ops[i].Value) < 0x80 {
						short++
					} else if ops[i].Window {
						long++
					}
					addLikeDrain(&e, &ops[i])
				}
				if short == 0 {
					t.Fatal("no LOG state under 128 bytes: the fast path was not exercised")
				}
				if records := e.seal(seq, stamp); records != wantRecords || !bytes.Equal(e.buf, want) {
					t.Fatalf("%d records of %d bytes; appendRecords: %d records of %d bytes (%d short, %d long states)",
						records, len(e.buf), wantRecords, len(want), short, long)
				}
			})
		}
	}
}
