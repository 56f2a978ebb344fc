package main

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/celld/celld/store"
)

// limitIs reports whether got is the soft limit for the bound's figure
// base: base itself, or the live heap's figure when that is higher
// (limitFor).
func limitIs(got, base int64) bool {
	return got == base || got == limitFor(base, liveHeap())
}

// limitFor keeps the bound's figure while the live heap is what a steady
// bound explains (up to 1.2 x maxmemory), and rises above it only for a
// heap the bound does not explain.
func TestLimitFor(t *testing.T) {
	const mb = 1 << 20
	base := softMemoryLimit(64 * mb) // 112 MB
	for _, c := range []struct{ base, live, want int64 }{
		{base, 0, base},                            // no collection yet
		{base, 77 * mb, base},                      // 1.2 x 64 MB: the bound's figure
		{base, 100 * mb, 100*mb + 100*mb/8 + 8*mb}, // more than the bound explains
		{math.MaxInt64, 500 * mb, math.MaxInt64},   // no bound
		{0, 500 * mb, 0},                           // not celld's to set
	} {
		if got := limitFor(c.base, c.live); got != c.want {
			t.Errorf("limitFor(%d, %d) = %d, want %d", c.base, c.live, got, c.want)
		}
	}
}

// TestSoftLimitNeverBelowLiveHeap: lowering the bound far below what the
// heap holds (CONFIG SET maxmemory down tenfold: eviction brings
// used_memory under it, but the slabs keep their peak size) does not set
// the runtime's soft limit under the live heap, where the collector runs
// back to back (1.2k instead of 45k SET/s measured, main_gclimit.go); and
// the limit comes down again once the heap shrinks.
func TestSoftLimitNeverBelowLiveHeap(t *testing.T) {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		t.Setenv("GOMEMLIMIT", v) // restored after the test
		os.Unsetenv("GOMEMLIMIT")
	}
	orig, origHeadroom := debug.SetMemoryLimit(-1), gcHeadroom.Load()
	t.Cleanup(func() {
		softLimitBase.Store(0)
		debug.SetMemoryLimit(orig)
		gcHeadroom.Store(origHeadroom)
	})
	st := store.New(store.Options{})
	followBound(st, false)
	ballast := make([]byte, 96<<20) // the heap a 64 MB bound's keys left
	for i := 0; i < len(ballast); i += 4096 {
		ballast[i] = 1
	}
	runtime.GC()
	const bound = 6710886 // a tenth of 64 MB
	st.SetMaxMemory(bound)
	got, live := debug.SetMemoryLimit(-1), liveHeap()
	if got < live {
		t.Fatalf("soft limit %d under the live heap %d after lowering the bound to %d", got, live, bound)
	}
	runtime.KeepAlive(ballast)
	ballast = nil
	// The loop (one look a second) brings the limit back down.
	deadline := time.Now().Add(30 * time.Second)
	for debug.SetMemoryLimit(-1) >= 96<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("limit %d, live heap %d: not lowered once the heap shrank (the bound's figure: %d)", debug.SetMemoryLimit(-1), liveHeap(), softMemoryLimit(bound))
		}
		runtime.GC()
		time.Sleep(100 * time.Millisecond)
	}
}
