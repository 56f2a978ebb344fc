package main

import "testing"

// The GC target follows the heap's scannable share, with hysteresis: a
// TAT keyspace (nothing to scan) stays lean, a heap of hashes and lists
// goes to Go's default, and neither flips back and forth in between. A
// lean heap without a bound grows by a quarter, or by 16 MiB below 64 MiB
// live (gcLeanMinGrowth).
func TestGCPercentFor(t *testing.T) {
	const mb = 1 << 20
	for i, c := range []struct {
		scan, live uint64
		current    int
		want       int
	}{
		{0, 43 * mb, gcPercentLean, 37},                   // 630k TAT keys: 16 MiB of growth (gcLeanMinGrowth)
		{0, 43 * mb, gcPercentRich, 37},                   // the objects were deleted
		{0, 64 * mb, 37, gcPercentLean},                   // from 64 MiB live: a quarter
		{0, 400 * mb, 37, gcPercentLean},                  // ... and above it
		{36 * mb, 46 * mb, gcPercentLean, gcPercentRich},  // 1.2M list elements
		{10 * mb, 12 * mb, gcPercentLean, 99},             // small: a collection is cheap, 16 MiB capped
		{10 * mb, 12 * mb, gcPercentRich, 99},             // ... whatever its share
		{0, 0, gcPercentLean, gcPercentLean},              // no live figure yet
		{20 * mb, 80 * mb, gcPercentLean, gcPercentRich},  // a quarter
		{20 * mb, 120 * mb, gcPercentRich, gcPercentRich}, // between an eighth and a quarter: kept
		{20 * mb, 120 * mb, gcPercentLean, gcPercentLean}, // ... either way
		{20 * mb, 200 * mb, gcPercentRich, gcPercentLean}, // below an eighth
		{1 << 40, 1 << 40, gcPercentLean, gcPercentRich},  // no overflow
		{40 * mb, 0, gcPercentLean, gcPercentRich},        // before the first GC's live figure
	} {
		if got := gcPercentFor(c.scan, c.live, c.current, 0); got != c.want {
			t.Errorf("step %d: gcPercentFor(%d MB, %d MB, %d) = %d, want %d", i, c.scan/mb, c.live/mb, c.current, got, c.want)
		}
	}
}

// Under a bound a lean heap's target is its headroom's share of live (a
// collection every headroom bytes of growth), from gcPercentMin to just
// under gcPercentRich; a rich heap keeps gcPercentRich, with the same
// hysteresis as without a bound.
func TestGCPercentForUnderABound(t *testing.T) {
	const mb = 1 << 20
	h := uint64(headroomFor(64 * mb)) // 4 MiB
	if h != 4*mb || headroomFor(0) != 0 || headroomFor(1*mb) != 2*mb {
		t.Fatalf("headroomFor: %d %d %d", h, headroomFor(0), headroomFor(1*mb))
	}
	for i, c := range []struct {
		scan, live uint64
		current    int
		want       int
	}{
		{0, 64 * mb, gcPercentLean, 6},                    // at a 64 MB bound: 4 MiB of 64
		{0, 16 * mb, 6, 25},                               // filling
		{0, 2 * mb, 25, gcPercentRich - 1},                // a small heap: capped
		{0, 400 * mb, 25, gcPercentMin},                   // floor
		{0, 0, 25, gcPercentLean},                         // no figure yet
		{36 * mb, 46 * mb, 6, gcPercentRich},              // rich
		{20 * mb, 120 * mb, gcPercentRich, gcPercentRich}, // in between: kept rich
		{20 * mb, 120 * mb, 6, gcPercentMin},              // ... or lean: 4 of 120 MiB, floored
		{20 * mb, 200 * mb, gcPercentRich, gcPercentMin},  // lean again
	} {
		if got := gcPercentFor(c.scan, c.live, c.current, h); got != c.want {
			t.Errorf("step %d: gcPercentFor(%d MB, %d MB, %d, 4 MiB) = %d, want %d", i, c.scan/mb, c.live/mb, c.current, got, c.want)
		}
	}
}
