package sidecar

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
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

// switchProxy forwards connections to addr; while slow is set it passes
// what the owner sends back one byte per pause (an owner, or a link, that
// trickles), else at once.
func switchProxy(t testing.TB, addr string, pause time.Duration, slow *atomic.Bool) string {
	t.Helper()
	return listen(t, func(c net.Conn) {
		u, err := net.Dial("tcp", addr)
		if err != nil {
			c.Close()
			return
		}
		go func() {
			io.Copy(u, c)
			u.Close()
		}()
		go func() {
			defer c.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := u.Read(buf)
				for p := buf[:n]; len(p) > 0; {
					k := len(p)
					if slow.Load() {
						k = 1
					}
					if _, werr := c.Write(p[:k]); werr != nil {
						return
					}
					p = p[k:]
					if slow.Load() {
						time.Sleep(pause)
					}
				}
				if err != nil {
					return
				}
			}
		}()
	})
}

// TestSidecarTricklingDecisionTimesOut: a CL.THROTTLE reply that trickles
// in (1 byte per 50 ms: about 1.5 s for its 29 bytes) against a 100 ms
// --upstream-timeout is answered by the fallback within about the timeout
// and the owner is taken as down (before: the sidecar waited for the
// whole trickle, since the connection was never silent for 100 ms, and
// never fell back); while the owner trickles the probes keep it down, and
// once it answers at speed again the first probe brings it back.
func TestSidecarTricklingDecisionTimesOut(t *testing.T) {
	const timeout = 100 * time.Millisecond
	owner := serve(t, nil, server.Config{}, nil)
	var slow atomic.Bool
	proxy := switchProxy(t, owner.addr, 50*time.Millisecond, &slow)
	side := sidecarNode(t, Config{Seeds: []string{proxy}, Fallback: Open, Timeout: timeout, PoolSize: 1})
	st := side.sc.StatsRef()
	c := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, ReadTimeout: time.Minute})
	defer c.Close()
	if err := c.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60).Err(); err != nil {
		t.Fatal(err)
	}
	if n := st.FallbackByMode[Open].Load(); n != 0 {
		t.Fatalf("%d fallback decisions with the owner answering at speed, want 0", n)
	}

	slow.Store(true)
	start := time.Now()
	err := c.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60).Err()
	took := time.Since(start)
	t.Logf("CL.THROTTLE through a trickling owner: %v after %v", err, took)
	if err != nil || took > 800*time.Millisecond {
		t.Fatalf("CL.THROTTLE through a trickling owner: %v after %v; want the fallback's answer within about %v", err, took, timeout)
	}
	if n := st.FallbackByMode[Open].Load(); n != 1 {
		t.Fatalf("%d fallback decisions after the trickling reply, want 1", n)
	}
	if s := side.sc.State(); s != "down" {
		t.Fatalf("upstream state %q after the trickling reply, want down", s)
	}
	time.Sleep(300 * time.Millisecond) // probes meet the trickle too
	if s := side.sc.State(); s != "down" {
		t.Fatalf("upstream state %q while the owner trickles, want down", s)
	}

	slow.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for side.sc.State() != "ok" {
		if time.Now().After(deadline) {
			t.Fatal("the owner answers at speed again, but no probe brought it back in 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The owner decides again. On a loaded machine a forwarded call can
	// still meet the 100 ms timeout and get the fallback's answer
	// (GOMAXPROCS=1 under -race: once in a run); a sidecar that does not
	// forward again fails every attempt.
	deadline = time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		before := owner.st.Len()
		if err := c.Do(ctx, "CL.THROTTLE", fmt.Sprint("k2:", i), 1, 10, 60).Err(); err != nil {
			t.Fatal(err)
		}
		if owner.st.Len() == before+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CL.THROTTLE after the owner came back: none of %d calls over 5 s decided by the owner", i+1)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSidecarSlowValueReadNotTimeout: a GET of a 160 KB string that takes
// about 0.4 s to arrive (4 KiB per 10 ms) against a 150 ms
// --upstream-timeout is a large healthy reply, not a dead owner: it
// travels on the bulk lane, where a reply that keeps arriving is waited
// for. (Had GET stayed on the decision lane, whose timeout is the age of
// the reply, the owner would be taken as down and the fallback answer.)
func TestSidecarSlowValueReadNotTimeout(t *testing.T) {
	owner := serve(t, nil, server.Config{}, nil)
	val := strings.Repeat("0123456789abcdef", 10_000)
	if err := client(t, owner.addr).Set(ctx, "big", val, 0).Err(); err != nil {
		t.Fatal(err)
	}
	proxy := trickleProxy(t, owner.addr, 4<<10, 10*time.Millisecond)
	side := sidecarNode(t, Config{Seeds: []string{proxy}, Fallback: Closed, Timeout: 150 * time.Millisecond})
	sd := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, ReadTimeout: time.Minute})
	defer sd.Close()
	start := time.Now()
	for _, cmd := range []string{"GET", "GETRANGE", "MGET"} {
		var got any
		var err error
		switch cmd {
		case "GET":
			got, err = sd.Get(ctx, "big").Result()
		case "GETRANGE":
			got, err = sd.GetRange(ctx, "big", 0, -1).Result()
		case "MGET":
			var vs []any
			if vs, err = sd.MGet(ctx, "big").Result(); err == nil && len(vs) == 1 {
				got = vs[0]
			}
		}
		if err != nil || got != val {
			t.Fatalf("%s of 160 KB through a slow link: %v after %v (the owner was taken as down)", cmd, err, time.Since(start))
		}
	}
	t.Logf("GET, GETRANGE, MGET of 160 KB through the slow link: %v", time.Since(start))
	if took := time.Since(start); took < 450*time.Millisecond {
		t.Fatalf("3 x 160 KB in %v: the proxy did not slow the replies, the test tests nothing", took)
	}
	if n, e := side.sc.StatsRef().FallbackByMode[Closed].Load(), side.sc.StatsRef().UpstreamErrors.Load(); n != 0 || e != 0 || side.sc.State() != "ok" {
		t.Fatalf("after the slow value reads: %d fallbacks, %d upstream errors, state %q; want 0, 0, ok", n, e, side.sc.State())
	}
}

// TestSidecarEndlessTrickleOnBulkLane: on the bulk lane a reply that
// keeps arriving is waited for, but not forever: once older than
// --upstream-bulk-timeout it must have come at minBulkRate. A GET whose
// 8 KB reply trickles at 20 bytes per second (400 s) with a 300 ms bulk
// timeout meets the fallback (UPSTREAMDOWN) after about 300 ms (before:
// never, the connection was never silent).
func TestSidecarEndlessTrickleOnBulkLane(t *testing.T) {
	owner := serve(t, nil, server.Config{}, nil)
	if err := client(t, owner.addr).Set(ctx, "big", strings.Repeat("v", 8<<10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	var slow atomic.Bool
	proxy := switchProxy(t, owner.addr, 50*time.Millisecond, &slow)
	side := sidecarNode(t, Config{Seeds: []string{proxy}, Fallback: Closed, Timeout: 100 * time.Millisecond, BulkTimeout: 300 * time.Millisecond, PoolSize: 1})
	sd := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, ReadTimeout: 10 * time.Second})
	defer sd.Close()
	if err := sd.Get(ctx, "big").Err(); err != nil { // dials the bulk lane at speed
		t.Fatal(err)
	}
	slow.Store(true)
	start := time.Now()
	err := sd.Get(ctx, "big").Err()
	took := time.Since(start)
	t.Logf("GET through an endless trickle: %v after %v", err, took)
	if err == nil || !strings.HasPrefix(err.Error(), "UPSTREAMDOWN") || took > 3*time.Second {
		t.Fatalf("GET through an endless trickle: %v after %v; want UPSTREAMDOWN after about the 300 ms bulk timeout", err, took)
	}
}

// TestReplyLeft drives the timeout rule with made-up times (ms).
func TestReplyLeft(t *testing.T) {
	const ms = int64(time.Millisecond)
	to, bto := 250*time.Millisecond, 10*time.Second
	for _, c := range []struct {
		name                     string
		now, sent, start, lastRd int64
		got                      int
		bulk, slow               bool
		want                     time.Duration
	}{
		{"decision, silent", 300, 0, 0, 0, 0, false, false, -50 * time.Millisecond},
		{"decision, trickling: bytes do not extend it", 300, 0, 0, 299, 10, false, false, -50 * time.Millisecond},
		{"decision, in time", 100, 0, 0, 0, 0, false, false, 150 * time.Millisecond},
		{"value read, no first byte", 300, 0, 0, 0, 0, true, false, -50 * time.Millisecond},
		{"value read, behind another: clock from its end", 300, 0, 200, 0, 0, true, false, 150 * time.Millisecond},
		{"bulk read, computing", 9000, 0, 0, 0, 0, true, true, time.Second},
		{"bulk read, streaming: the rate bound at 10 s", 9000, 0, 0, 8900, 1, true, true, time.Second + time.Second/minBulkRate},
		{"value read, silent mid-reply", 12000, 0, 0, 1000, 1, true, false, -2*time.Second + time.Second/minBulkRate},
		{"endless trickle: 1 B/100 ms", 10500, 0, 0, 10400, 105, true, false, -500*time.Millisecond + time.Duration(105*int64(time.Second)/minBulkRate)},
		{"50 MB at 1 MB/s, 40 MB in: the silence bound", 40000, 0, 0, 40000, 40 << 20, true, false, 10 * time.Second},
		{"50 MB at 1 MB/s, 40 MB in, silent 9 s: the silence bound", 49000, 0, 0, 40000, 40 << 20, true, false, time.Second},
		{"20 KB/s, 40 s in: the rate bound", 40000, 0, 0, 40000, 800 << 10, true, false, 10*time.Second - 40*time.Second + time.Duration(800<<10)*time.Second/minBulkRate},
	} {
		got := replyLeft(c.now*ms, c.sent*ms, c.start*ms, c.lastRd*ms, c.got, c.bulk, c.slow, to, bto)
		if got != c.want {
			t.Errorf("%s: replyLeft = %v, want %v", c.name, got, c.want)
		}
	}
}
