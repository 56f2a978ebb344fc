package compat_test

import (
	"runtime"
	"strings"
	"testing"
)

// TestSmallWriteToBigStringCost: APPEND, SETRANGE and SETBIT of a few bytes
// on a large string copy the whole value in celld (docs/strings.md: strings
// are immutable in the store, "appending to a value of n bytes costs
// O(n)"), and the copy runs on the event loop, so with a raised
// --proto-max-bulk-len every such write stalls every client. Measured with
// the binary (--proto-max-bulk-len 512mb, --persist no, load 0.9), 20 calls
// each on a 100 MB string: APPEND of 10 bytes median 27.6 ms (max 34.5),
// SETRANGE of 1 byte 44.9 ms, SETBIT 22.5 ms; redis-server 7.0.15 on the
// same string: 0.07 ms each (sds grows in place). At the default 512 KB
// bound, 10,000 APPENDs of 50 bytes building one 500 KB string took
// 0.78 s against Redis's 0.004 s, SETRANGE 1.34 s against 0.005 s.
//
// Here, in process: 20 writes of at most 10 bytes each to an 8 MB string
// must not allocate 20 copies of it (Redis allocates nothing for them);
// the bar is an eighth of the value per write.
func TestSmallWriteToBigStringCost(t *testing.T) {
	const size = 8 << 20
	ts := startServer(t)
	rdb := newGoRedis(t, ts)
	chunk := strings.Repeat("x", 256<<10)
	for i := 0; i < size/len(chunk); i++ {
		if err := rdb.Append(ctx, "big", chunk).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range []struct {
		name string
		do   func(i int) error
	}{
		{"APPEND", func(i int) error { return rdb.Append(ctx, "big", "0123456789").Err() }},
		{"SETRANGE", func(i int) error { return rdb.SetRange(ctx, "big", int64(i), "y").Err() }},
		{"SETBIT", func(i int) error { return rdb.SetBit(ctx, "big", int64(i), 1).Err() }},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := 0; i < 20; i++ {
			if err := op.do(i); err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
		}
		runtime.ReadMemStats(&after)
		per := (after.TotalAlloc - before.TotalAlloc) / 20
		t.Logf("%s on an %d-byte string: %d bytes allocated per call", op.name, size, per)
		if per > size/8 {
			t.Errorf("%s of a few bytes on an %d-byte string allocated %d bytes per call (a copy of the value; "+
				"on the event loop, a 27.6-44.9 ms stall per call on a 100 MB string, Redis 0.07 ms)", op.name, size, per)
		}
	}
}
