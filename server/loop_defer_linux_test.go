package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// The loop writes a turn's replies at its end (deferOut, writePending).
// These tests drive that over real sockets.

// A connection held for the replication barrier is served on after the
// barrier (release) in the same turn: the replies of what it runs then
// are written in that turn too, not left for the next wake (the epoll
// wait of up to a second when nothing else arrives). Without the
// writePending after release, each round trip below waited ~1 s.
func TestLoopDeferredRepliesAfterReplicationRelease(t *testing.T) {
	_, addr := startServerConfig(t, nil, Config{IOLoops: 1,
		WriteGate: func() error { return nil }, ReplyBarrier: func() error { return nil }})
	r := dial(t, addr)
	const rounds = 8
	start := time.Now()
	for i := range rounds {
		r.send([]string{"CL.THROTTLE", fmt.Sprint("k", i), "5", "10", "60"})
		if got := r.mustReply(); got != "[:0 :6 :5 :-1 :6]" {
			t.Fatalf("round %d: %q", i, got)
		}
	}
	if took := time.Since(start); took > rounds*time.Second/4 {
		t.Fatalf("%d write round trips behind the barrier took %v: replies waited for the next wake", rounds, took)
	}
}

// A connection's reply waits in c.out for the end of the turn (deferred)
// when, in the same turn of the one loop, another connection makes it the
// target of its tracking (CLIENT TRACKING ON REDIRECT: that creates the
// target's push state) and then invalidates a key it tracks: the push
// must follow the reply, as it does when the reply is written at once.
// The pushConn.deferred flag makes the push state start busy. Without
// it the push was written at once and the target read it before its
// ECHO's reply. A third connection's scripts keep the loop busy so
// that the requests land in one turn.
func TestLoopDeferredRepliesPrecedePushes(t *testing.T) {
	_, addr := startServerConfig(t, nil, Config{IOLoops: 1})
	busy := dial(t, addr)
	// A script that keeps the loop for a few milliseconds: the requests
	// written meanwhile are served in its next turn, in order, and the
	// same script last in that turn gives a push written at once the
	// time to get ahead of the turn's deferred writes.
	slow := encode("EVAL", "local x = 0 for i = 1, 200000 do x = x + i end return 1", "0")
	for i := range 30 {
		// busy lives for all 30 rounds: dial's 10 s deadline is for the
		// whole connection, which 60 scripts under -race on a loaded
		// machine outlast (CI-like run: i/o timeout after 10.2 s). Each
		// round gets its own 10 s.
		busy.c.SetDeadline(time.Now().Add(10 * time.Second))
		target, tracker := dial(t, addr), dial(t, addr)
		target.send([]string{"HELLO", "3"})
		target.mustReply()
		target.send([]string{"CLIENT", "ID"})
		id := strings.TrimPrefix(target.mustReply(), ":")
		key := fmt.Sprint("k", i)
		if _, err := busy.c.Write(slow); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Microsecond)
		target.send([]string{"ECHO", "first"})
		tracker.send([]string{"CLIENT", "TRACKING", "ON", "REDIRECT", id},
			[]string{"GET", key}, []string{"CL.THROTTLE", key, "5", "10", "60"})
		if _, err := busy.c.Write(slow); err != nil { // the same turn's last: time for the push
			t.Fatal(err)
		}
		if got := target.mustReply(); got != "first" {
			t.Fatalf("round %d: the target's first reply is %q, want its ECHO's", i, got)
		}
		if got := target.mustReply(); got != fmt.Sprintf(">[invalidate [%s]]", key) {
			t.Fatalf("round %d: push %q", i, got)
		}
		for _, want := range []string{"+OK", "$-1", "[:0 :6 :5 :-1 :6]"} {
			if got := tracker.mustReply(); got != want {
				t.Fatalf("round %d: tracker %q, want %q", i, got, want)
			}
		}
		for range 2 {
			if got := busy.mustReply(); got != ":1" {
				t.Fatalf("round %d: EVAL: %q", i, got)
			}
		}
		target.c.Close()
		tracker.c.Close()
	}
}

// QUIT at the end of a pipeline, in one read or after a first part of
// it whose replies were deferred: every reply before it, and its own, is
// written before the close (the closing pump writes at once).
func TestLoopDeferredRepliesBeforeQuit(t *testing.T) {
	_, addr := startServerConfig(t, nil, Config{IOLoops: 1})
	for _, split := range []bool{false, true} {
		r := dial(t, addr)
		var cmds [][]string
		for i := range 200 {
			cmds = append(cmds, []string{"ECHO", fmt.Sprint(i)})
		}
		if split {
			r.send(cmds...)
			cmds = nil
		}
		cmds = append(cmds, []string{"QUIT"}, []string{"PING"}) // PING never runs
		r.send(cmds...)
		for i := range 200 {
			if got := r.mustReply(); got != fmt.Sprint(i) {
				t.Fatalf("split %v: reply %d = %q", split, i, got)
			}
		}
		if got := r.mustReply(); got != "+OK" {
			t.Fatalf("split %v: QUIT: %q", split, got)
		}
		r.expectEOF()
	}
}

// Work posted to the loop (RunOnLoop: persistence's drain slices) runs
// between two connections' commands; the replies of the connections
// served before it in the turn are written first, not held behind it.
// Here a PING is served in a turn, then a script whose run the test posts
// a function into; that function keeps the loop until the test has read
// the PONG. Without the write before runSoon the PONG waited for the end
// of the turn, after the function: the read times out (5 s) and only then
// is the function released.
//
// The scripts hold the loop for a span of wall-clock time (TIME), not a
// count of Lua steps: a count that lasts 2 s under -race passed the 5 s
// script limit on a loaded machine (3 of 8 runs, "script timed out").
// When the machine is so slow that the requests miss the intended turns
// (the PING served alone, the function posted after the second script),
// the PONG is out before the function runs and the test passes without
// having tested anything; it never fails on the delay.
func TestLoopDeferredRepliesNotHeldBehindPostedWork(t *testing.T) {
	s, addr := startServerConfig(t, nil, Config{IOLoops: 1})
	busy, busy2, r := dial(t, addr), dial(t, addr), dial(t, addr)
	for _, c := range []*rawConn{busy, busy2, r} {
		c.send([]string{"PING"}) // on the loop (watched) before the test
		c.mustReply()
	}
	// Holds the loop for ARGV[1] ms.
	const hold = "local t = redis.call('TIME') local e = t[1] * 1000000 + t[2] + ARGV[1] * 1000 " +
		"repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= e return 1"
	// The first script keeps the loop while the PING and the second
	// script arrive: both run in the next turn, the PING first.
	busy.send([]string{"EVAL", hold, "0", "300"})
	time.Sleep(2 * time.Millisecond)
	r.send([]string{"PING"})
	time.Sleep(time.Millisecond) // ready after the PING's connection
	busy2.send([]string{"EVAL", hold, "0", "1000"})
	if got := busy.mustReply(); got != ":1" { // the first turn's end
		t.Fatalf("EVAL: %q", got)
	}
	time.Sleep(10 * time.Millisecond) // into the second script
	posted := make(chan bool, 1)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	go func() {
		posted <- s.RunOnLoop(func() {
			select {
			case <-release:
			case <-time.After(time.Minute):
			}
		}, time.Minute)
	}()
	r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := r.reply()
	free()
	if err != nil {
		t.Fatalf("no PONG within 5 s while the posted function held the loop: it waited behind the function (%v)", err)
	}
	if got != "+PONG" {
		t.Fatalf("PING: %q", got)
	}
	if !<-posted {
		t.Fatal("the posted function did not run on the loop")
	}
	if got := busy2.mustReply(); got != ":1" {
		t.Fatalf("EVAL: %q", got)
	}
}
