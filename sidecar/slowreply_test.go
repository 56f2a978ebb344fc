package sidecar

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/server"
	"github.com/redis/go-redis/v9"
)

// TestSidecarDecisionNotBehindSlowReply: an owner that sends a reply
// slowly but never falls silent for --upstream-timeout (a degraded link, an
// overloaded proxy, or simply a large GET over a slow hop) must not hold
// back the rate-limit decisions of other clients for longer than the
// timeout. docs/sidecar-bulk.md: "That bound is what makes a failed or
// paused owner cost a rate-limit check at most a quarter of a second";
// "Everything else — CL.THROTTLE and its family, ... GET ... — keeps the
// 250 ms bound".
//
// Here client A's GET of an 8 KB string trickles in at 32 bytes per 10 ms
// (about 2.6 s); client B's CL.THROTTLE, sent 100 ms later, queues behind it
// on the loop's one pipelined connection to the owner and gets no answer
// until the GET's reply has fully arrived. Measured by hand with a fake
// owner dribbling 1 byte per 100 ms into a 100-byte GET reply: GET 10.56 s,
// the other client's CL.THROTTLE 10.05 s (--upstream-timeout 250ms), the
// owner never taken as down (upstream_state:ok, 0 fallbacks); with an
// endless trickle the decision waits forever. A client of redis-server
// bounds the whole reply (go-redis: ReadTimeout is a deadline on the
// whole reply, 3 s by default), so the slow GET alone would fail, not
// every decision behind it.
func TestSidecarDecisionNotBehindSlowReply(t *testing.T) {
	const timeout = 100 * time.Millisecond
	owner := serve(t, nil, server.Config{}, nil)
	if err := client(t, owner.addr).Set(ctx, "big", strings.Repeat("v", 8<<10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	proxy := trickleProxy(t, owner.addr, 32, 10*time.Millisecond)
	// One event loop, celld's default (--io-loops 1): every client of the
	// sidecar shares the loop's pipelined connection to the owner.
	if sidecarIOLoops > 0 {
		defer func(n int) { sidecarIOLoops = n }(sidecarIOLoops)
		sidecarIOLoops = 1
	}
	side := sidecarNode(t, Config{Seeds: []string{proxy}, Fallback: Open, Timeout: timeout})

	// Warm the connection: the first command dials.
	b := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, ReadTimeout: 1500 * time.Millisecond})
	defer b.Close()
	if err := b.Do(ctx, "CL.THROTTLE", "warm", 1, 10, 60).Err(); err != nil {
		t.Fatal(err)
	}

	a := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, ReadTimeout: time.Minute})
	defer a.Close()
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Get(actx, "big").Err() }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // the GET is on the wire

	start := time.Now()
	err := b.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60).Err()
	took := time.Since(start)
	t.Logf("CL.THROTTLE behind a trickling GET reply: %v after %v (timeout %v)", err, took, timeout)
	if err != nil || took > timeout+time.Second {
		t.Fatalf("CL.THROTTLE waited %v (err %v) behind another client's slowly arriving reply; "+
			"--upstream-timeout is %v: a decision must be answered (by the owner or the fallback) within about the timeout",
			took, err, timeout)
	}
}
