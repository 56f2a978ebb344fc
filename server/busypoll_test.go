package server

import (
	"testing"
	"time"
)

// The policy polls only after the loop has been busy most of the time, and
// stops soon after the load goes away; a zero budget never polls.
func TestBusyPollPolicy(t *testing.T) {
	b := busyPoll{budget: 50 * time.Microsecond}
	if b.spinning() {
		t.Fatal("a fresh loop polls before any load")
	}
	// Light load: 20 µs of work per 2 ms: never polls.
	for i := 0; i < 1000; i++ {
		b.observe(20*time.Microsecond, 2*time.Millisecond)
		if b.spinning() {
			t.Fatalf("polls under 1%% load (iteration %d, load %.3f)", i, b.load)
		}
	}
	// Saturated: 90% busy. Polls within a few dozen iterations.
	n := 0
	for !b.spinning() {
		b.observe(90*time.Microsecond, 10*time.Microsecond)
		if n++; n > 50 {
			t.Fatalf("not polling after %d busy iterations (load %.3f)", n, b.load)
		}
	}
	// The load goes away: polling stops within a few dozen iterations.
	n = 0
	for b.spinning() {
		b.observe(10*time.Microsecond, time.Millisecond)
		if n++; n > 50 {
			t.Fatalf("still polling after %d idle iterations (load %.3f)", n, b.load)
		}
	}
	// Either side of the threshold (half busy).
	for i := 0; i < 200; i++ {
		b.observe(60*time.Microsecond, 40*time.Microsecond)
	}
	if !b.spinning() {
		t.Fatalf("not polling at 60%% load (load %.3f)", b.load)
	}
	for i := 0; i < 200; i++ {
		b.observe(40*time.Microsecond, 60*time.Microsecond)
	}
	if b.spinning() {
		t.Fatalf("polling at 40%% load (load %.3f)", b.load)
	}
	// A zero-length iteration changes nothing.
	before := b.load
	b.observe(0, 0)
	if b.load != before {
		t.Fatalf("empty iteration moved the load %.3f -> %.3f", before, b.load)
	}
	off := busyPoll{}
	for i := 0; i < 100; i++ {
		off.observe(time.Millisecond, 0)
	}
	if off.spinning() {
		t.Fatal("zero budget polls")
	}
}
