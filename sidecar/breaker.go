package sidecar

import (
	"sync"
	"sync/atomic"
	"time"
)

// breaker is one owner's reachability, the fallback state machine:
//
//	up ──(a send, a dial or a reply fails or times out)──▶ down
//	down ──(probe due: dial + PING answered)──▶ up
//	down ──(probe fails)──▶ down, next probe after twice the backoff (≤ maxBackoff)
//
// While up, commands are forwarded. While down, they are decided by the
// fallback mode at once (no dial, no wait), and only the prober talks to
// the owner. Time is passed in (tests drive it by hand); the zero value is
// up. Safe for concurrent use: isUp is one atomic load, the hot path's
// only cost.
type breaker struct {
	down atomic.Bool

	mu        sync.Mutex // guards the fields below
	since     time.Time  // when it went down
	backoff   time.Duration
	nextProbe time.Time
	probing   bool
	failures  int64 // transitions up → down
	lastErr   string
}

// Probe backoff: the first probe follows a failure by minBackoff, each
// failed probe doubles the wait, up to maxBackoff, so that a returning
// owner takes forwarding back within about a second, and a dead one costs
// a dial per second.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = time.Second
)

func (b *breaker) isUp() bool { return !b.down.Load() }

// fail records a failure at now; it reports whether the owner just went
// down (the caller then starts the prober).
func (b *breaker) fail(now time.Time, err error) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.lastErr = err.Error()
	}
	if b.down.Load() {
		return false
	}
	b.down.Store(true)
	b.since = now
	b.backoff = minBackoff
	b.nextProbe = now.Add(minBackoff)
	b.failures++
	return true
}

// probeDue reports whether a probe should run at now, and if so marks one
// running (one at a time).
func (b *breaker) probeDue(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.down.Load() || b.probing || now.Before(b.nextProbe) {
		return false
	}
	b.probing = true
	return true
}

// probeResult ends a probe started by probeDue: ok brings the owner up,
// else the next probe waits twice as long (at most maxBackoff).
func (b *breaker) probeResult(now time.Time, ok bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	if ok {
		b.down.Store(false)
		return
	}
	if err != nil {
		b.lastErr = err.Error()
	}
	b.backoff = min(2*b.backoff, maxBackoff)
	b.nextProbe = now.Add(b.backoff)
}

// wait is how long from now until the next probe is due (0: now).
func (b *breaker) wait(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.nextProbe.Sub(now), 0)
}

// snapshot is the state INFO reports.
func (b *breaker) snapshot() (up bool, since time.Time, failures int64, lastErr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.down.Load(), b.since, b.failures, b.lastErr
}
