//go:build attack

package main

import "testing"

// TestProcessKindsDiffFuzzFollower is TestProcessKindsDiffFuzz with a
// follower replicating the leader through every step and restart; at the
// end the follower's keys must equal the leader's.
//
// Run: go test -tags attack -run TestProcessKindsDiffFuzzFollower .
// (CELLD_KINDS_FUZZ_RANDOM=1 CELLD_KINDS_FUZZ_STEPS=3000 for new seeds.)
//
// It fails now and then on main (271428d): 1 of 6 random 3000-step runs,
// and once among the first three 1500-step seeds, at load 30+. Seed
// 15338757841619482826 (3000 steps) ended with the leader holding
// "1862" (a string with a TTL) in db 0's "sixteen-bytes-16" and the
// follower still holding the key's older CL.THROTTLE TAT, 30 s after the
// last write; rerun, the same seed passed, so the loss depends on timing
// (the follower's link was dropped and resynced several times during the
// run: "link to leader lost; retrying err=EOF" while the leader ran).
func TestProcessKindsDiffFuzzFollower(t *testing.T) { kindsDiffFuzz(t, true) }
