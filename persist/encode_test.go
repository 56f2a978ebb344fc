package persist

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/celld/celld/window"
)

// randomOps is n ops of every kind the drain produces: deletions, TATs,
// texts (canonical decimals and not, verbatim ones), CL.WINDOW states
// (compact and not), object images with and without a generation, object
// deltas (empty ones too), in databases 0, 3 and the mapping's.
func randomOps(r *rand.Rand, n int) []Op {
	ops := make([]Op, 0, n)
	for range n {
		key := []byte("k" + strconv.Itoa(r.IntN(500)))
		if r.IntN(8) == 0 { // around the one-byte length's edge (Encoder.TAT's in-place case)
			key = append(bytes.Repeat([]byte{'L'}, []int{125, 126, 127, 128, 300}[r.IntN(5)]), key...)
		}
		exp := []int64{0, 1_800_000_000_000 + r.Int64N(1e6), -1, 1<<63 - 1, -1 << 63}[r.IntN(5)]
		op := Op{Key: key, ExpireAtMs: exp, DB: []uint32{0, 0, 3, 300, 1<<32 - 1}[r.IntN(5)]}
		switch r.IntN(10) {
		case 0:
			op = Op{Key: key, Delete: true, DB: op.DB}
		case 1:
			op.IsTAT, op.TAT = true, r.Uint64()
			if r.IntN(2) == 0 { // CL.THROTTLE's expiry, the TAT's ms: an 'r' entry, or a 't' past a byte
				op.ExpireAtMs = int64(op.TAT/1e6) + r.Int64N(261) - 130
			}
		case 2:
			op.Value = strconv.AppendUint(nil, r.Uint64N(1e12), 10) // canonical: a 't' entry
		case 3:
			op.Value = []byte([]string{"+5", "007", "-3", "", "1e3", "18446744073709551616"}[r.IntN(6)])
		case 4:
			op.Value, op.Verbatim = bytes.Repeat([]byte{'v'}, r.IntN(300)), true
		case 5:
			m := window.Fixed
			if r.IntN(2) == 0 {
				m = window.Sliding
			}
			start := r.Int64N(1 << 45)
			op.Window = true
			op.Value = window.AppendCounters(nil, m, window.Counters{Start: start, Prev: r.Int64N(100), Curr: r.Int64N(1 << 30)})
			op.ExpireAtMs = []int64{0, start + 1000, start + 2000}[r.IntN(3)]
		case 6:
			op.Window, op.Value = true, bytes.Repeat([]byte{'w'}, 1+r.IntN(40)) // not compact
		case 7:
			op.Kind, op.Object = byte(1+r.IntN(3)), bytes.Repeat([]byte{'o'}, r.IntN(200))
		case 8:
			op.Kind, op.TAT, op.Object = byte(1+r.IntN(3)), 1+r.Uint64N(1<<40), bytes.Repeat([]byte{'g'}, r.IntN(200))
		case 9:
			op.Kind, op.Value = byte(1+r.IntN(3)), bytes.Repeat([]byte{'e'}, r.IntN(50)) // a delta, maybe empty
		}
		if r.IntN(50) == 0 {
			op = Op{DB: DBMapID, Value: EncodeDBMap([]uint32{3, 1, 2, 0})}
		}
		ops = append(ops, op)
	}
	return ops
}

// TestEncoderMatchesWrite: the records an Encoder builds from a window's
// changes are byte for byte those DB.Write's encoder (appendRecords)
// makes of the same changes as Ops, whether added as Ops or through the
// per-kind Add methods the server's drain uses, in one record and split
// at maxRecord; and EachOp gives back ops that encode to the same bytes
// again (what the pending set writes after a failed write). So the
// on-disk format is unchanged and existing data directories restore as
// before.
func TestEncoderMatchesWrite(t *testing.T) {
	defer func(m int) { maxRecord = m }(maxRecord)
	for _, limit := range []int{maxRecord, 4096, 1} {
		maxRecord = limit
		for seed := uint64(1); seed <= 20; seed++ {
			t.Run(fmt.Sprintf("max=%d/%d", limit, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 3))
				n := 1 + r.IntN(400)
				if seed%4 == 0 { // windows of many crcChunks (the checksum taken as written)
					n = 2000 + r.IntN(2000)
				}
				ops := randomOps(r, n)
				const seq, stamp = 77, 1_800_000_000_123
				want, wantRecords := appendRecords(nil, ops, seq, stamp)

				var byOp, byAdd Encoder
				byOp.Reset()
				for i := range ops {
					byOp.Op(&ops[i])
				}
				for i := range ops {
					addLikeDrain(&byAdd, &ops[i])
				}
				for name, e := range map[string]*Encoder{"Op": &byOp, "Add": &byAdd} {
					if e.Len() != len(ops) {
						t.Fatalf("%s: Len %d, want %d", name, e.Len(), len(ops))
					}
					if records := e.seal(seq, stamp); records != wantRecords || !bytes.Equal(e.buf, want) {
						t.Fatalf("%s: %d records of %d bytes; appendRecords: %d records of %d bytes", name, records, len(e.buf), wantRecords, len(want))
					}
				}
				// Sealed again with another seq (the bytes a retried
				// write would carry): still appendRecords' bytes.
				want2, _ := appendRecords(nil, ops, seq+5, stamp+1)
				if byAdd.seal(seq+5, stamp+1); !bytes.Equal(byAdd.buf, want2) {
					t.Fatalf("sealed again: %d bytes differ from appendRecords' %d", len(byAdd.buf), len(want2))
				}

				var again Encoder
				byOp.EachOp(func(op *Op) { again.Op(op) })
				if again.seal(seq, stamp); !bytes.Equal(again.buf, want) {
					t.Fatalf("EachOp's ops re-encode to %d bytes, want the same %d", len(again.buf), len(want))
				}
			})
		}
	}
}

// addLikeDrain adds op through the Add method the server's drain
// (persistence.encodeUpTo) uses for a change of its kind.
func addLikeDrain(e *Encoder, op *Op) {
	if op.DB == DBMapID {
		e.Op(op)
		return
	}
	e.SetDB(op.DB)
	switch {
	case op.Delete:
		e.Delete(op.Key)
	case op.Window:
		if m, c, ok := window.DecodeCounters(op.Value); ok { // inline counters come as numbers
			e.WindowCounters(op.Key, byte(m), c.Start, uint64(c.Prev), uint64(c.Curr), op.ExpireAtMs)
			break
		}
		e.Window(op.Key, op.Value, op.ExpireAtMs)
	case op.Kind != 0 && op.Object == nil:
		e.Delta(op.Key, op.Kind, op.Value, op.ExpireAtMs)
	case op.Kind != 0:
		e.Object(op.Key, op.Kind, op.TAT, op.Object, op.ExpireAtMs)
	case op.IsTAT:
		e.TAT(op.Key, op.TAT, op.ExpireAtMs)
	case op.Verbatim:
		e.Text(op.Key, op.Value, op.ExpireAtMs)
	default:
		e.Set(op.Key, op.Value, op.ExpireAtMs)
	}
}
