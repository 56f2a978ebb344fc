package server

import "time"

// busyPoll decides when an event loop polls for more events for a short
// while (Config.BusyPoll) instead of going to sleep in epoll_wait at once.
//
// Why: under pipelined load a loop that answers faster than its clients
// send keeps running out of events for a few microseconds. Sleeping then
// costs a context switch and, on a virtual machine, an idle vCPU's wake-up
// through the hypervisor: on the 2-core VM bench/run.sh runs on, the loop
// slept 6-25 times per 1000 CL.THROTTLE calls and Redis, CPU-bound, about
// 0.5 times. Polling first cut that to 3-5, raised bare PING at pipeline
// 16 by 8-12% and CL.THROTTLE (persistence on) by a median 6% (README,
// Performance).
//
// When: only while the loop has been busy, i.e. its moving average share of
// time spent handling events (rather than waiting) is at least
// busyPollLoad. An idle or lightly loaded server never polls, so a sidecar
// burns no CPU waiting for traffic; a saturated one wastes at most the
// budget per wait, and only when events then came late.
//
// A busyPoll belongs to one loop goroutine (no locking). observe costs a
// few float operations per loop iteration.
type busyPoll struct {
	budget time.Duration // 0: never poll
	load   float64       // moving average of busy / (busy + waiting)
}

// busyPollLoad is the busy share above which a loop polls before
// sleeping.
const busyPollLoad = 0.5

// busyPollWeight is the weight of the latest iteration in load: 1/8, so a
// change of regime takes effect within a few dozen iterations (well under
// a millisecond under load).
const busyPollWeight = 1.0 / 8

// spinning reports whether the loop should poll for up to budget before
// its next blocking wait.
func (b *busyPoll) spinning() bool { return b.budget > 0 && b.load >= busyPollLoad }

// observe records one loop iteration: busy handling events, after waiting
// for them (polling and sleeping together).
func (b *busyPoll) observe(busy, waited time.Duration) {
	total := busy + waited
	if total <= 0 {
		return
	}
	b.load += (float64(busy)/float64(total) - b.load) * busyPollWeight
}
