package sidecar

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestBreakerStateMachine drives the fallback state machine with a clock
// set by hand: up → down on a failure, probes only when due, backoff
// doubling to maxBackoff, up again on a probe that succeeds.
func TestBreakerStateMachine(t *testing.T) {
	var b breaker
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at     time.Duration
		do     string // fail, due, probeOK, probeFail
		want   bool   // fail: went down; due: probe allowed
		up     bool   // isUp after the step
		nextIn time.Duration
	}{
		{0, "due", false, true, 0},
		{0, "fail", true, false, minBackoff},
		{10 * time.Millisecond, "fail", false, false, 40 * time.Millisecond}, // already down: no new transition
		{49 * time.Millisecond, "due", false, false, time.Millisecond},
		{50 * time.Millisecond, "due", true, false, 0},
		{50 * time.Millisecond, "due", false, false, 0}, // one probe at a time
		{60 * time.Millisecond, "probeFail", false, false, 100 * time.Millisecond},
		{159 * time.Millisecond, "due", false, false, time.Millisecond},
		{160 * time.Millisecond, "due", true, false, 0},
		{160 * time.Millisecond, "probeFail", false, false, 200 * time.Millisecond},
		{360 * time.Millisecond, "due", true, false, 0},
		{360 * time.Millisecond, "probeFail", false, false, 400 * time.Millisecond},
		{760 * time.Millisecond, "due", true, false, 0},
		{760 * time.Millisecond, "probeFail", false, false, 800 * time.Millisecond},
		{1560 * time.Millisecond, "due", true, false, 0},
		{1560 * time.Millisecond, "probeFail", false, false, maxBackoff}, // capped
		{2560 * time.Millisecond, "due", true, false, 0},
		{2570 * time.Millisecond, "probeOK", false, true, 0},
		{2570 * time.Millisecond, "due", false, true, 0},
		{3000 * time.Millisecond, "fail", true, false, minBackoff}, // backoff starts over
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		var got bool
		switch s.do {
		case "fail":
			got = b.fail(now, errors.New("boom"))
		case "due":
			got = b.probeDue(now)
		case "probeOK":
			b.probeResult(now, true, nil)
		case "probeFail":
			b.probeResult(now, false, errors.New("refused"))
		}
		if got != s.want {
			t.Errorf("step %d (%s at %v): got %v, want %v", i, s.do, s.at, got, s.want)
		}
		if b.isUp() != s.up {
			t.Errorf("step %d: isUp %v, want %v", i, b.isUp(), s.up)
		}
		if !s.up {
			if w := b.wait(now); w != s.nextIn {
				t.Errorf("step %d: next probe in %v, want %v", i, w, s.nextIn)
			}
		}
	}
	if _, _, failures, lastErr := b.snapshot(); failures != 2 || lastErr != "boom" {
		t.Errorf("snapshot: failures %d, lastErr %q; want 2, boom", failures, lastErr)
	}
}

// TestCloseWhileOwnerFails: an owner failing (a connection's reader calls
// owner.failed, which starts a probe) while the sidecar closes must not
// add to the WaitGroup that Close is waiting on: under -race that was
// reported as a race (seen once in TestSidecarBlockingPath), and a probe
// started after Wait returned outlived Close. Now failed starts no probe
// once Close has begun (goTracked). Run with -race.
func TestCloseWhileOwnerFails(t *testing.T) {
	for range 200 {
		sc, err := New(Config{Seeds: []string{"127.0.0.1:1"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		o := sc.ownerFor("127.0.0.1:1")
		done := make(chan struct{})
		go func() {
			defer close(done)
			o.failed(errTimeout)
		}()
		sc.Close()
		<-done
		sc.Close() // waits for a probe that started before the first Close
	}
}
