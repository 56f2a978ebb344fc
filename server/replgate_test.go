package server

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

// TestReplWriteGate: with a WriteGate refusing, every write command (also
// queued in MULTI) answers the gate's error and changes nothing, while
// reads run; once the gate opens, writes run again.
func TestReplWriteGate(t *testing.T) {
	for _, loops := range []int{-1, 1} {
		t.Run(fmt.Sprint("loops=", loops), func(t *testing.T) {
			var shut atomic.Bool
			shut.Store(true)
			gate := func() error {
				if shut.Load() {
					return errors.New("TRYAGAIN lagging")
				}
				return nil
			}
			_, addr := startServerConfig(t, nil, Config{IOLoops: loops, WriteGate: gate})
			r := dial(t, addr)
			r.c.Write(encode("CL.THROTTLE", "k", "5", "10", "60"))
			r.c.Write(encode("SET", "s", "1"))
			r.c.Write(encode("EXISTS", "k"))
			r.c.Write(encode("PING"))
			r.c.Write(encode("MULTI"))
			r.c.Write(encode("SET", "s", "2"))
			r.c.Write(encode("EXEC"))
			for i, want := range []string{"-TRYAGAIN lagging", "-TRYAGAIN lagging", ":0", "+PONG", "+OK", "+QUEUED", "[-TRYAGAIN lagging]"} {
				if got := r.mustReply(); got != want {
					t.Fatalf("reply %d: %q, want %q", i, got, want)
				}
			}
			shut.Store(false)
			r.c.Write(encode("CL.THROTTLE", "k", "5", "10", "60"))
			if got := r.mustReply(); got != "[:0 :6 :5 :-1 :6]" {
				t.Fatalf("open gate: %q", got)
			}
		})
	}
}

// TestReplReplyBarrier: a batch of replies that holds a write waits for
// the barrier (once per batch, not per command); a batch of reads does
// not; a failing barrier closes the connection without its replies.
func TestReplReplyBarrier(t *testing.T) {
	for _, loops := range []int{-1, 1} {
		t.Run(fmt.Sprint("loops=", loops), func(t *testing.T) {
			var calls atomic.Int64
			var fail atomic.Bool
			barrier := func() error {
				calls.Add(1)
				if fail.Load() {
					return errors.New("no follower")
				}
				return nil
			}
			_, addr := startServerConfig(t, nil, Config{IOLoops: loops, WriteGate: func() error { return nil }, ReplyBarrier: barrier})
			r := dial(t, addr)
			var batch []byte
			for i := 0; i < 20; i++ {
				batch = append(batch, encode("CL.THROTTLE", fmt.Sprint("k", i), "5", "10", "60")...)
			}
			r.c.Write(batch)
			for i := 0; i < 20; i++ {
				if got := r.mustReply(); got != "[:0 :6 :5 :-1 :6]" {
					t.Fatalf("reply %d: %q", i, got)
				}
			}
			if n := calls.Load(); n < 1 || n > 20 {
				t.Fatalf("%d barriers for one batch of 20 writes", n)
			} else if n == 20 {
				t.Logf("every command waited on its own barrier (batch split by reads)")
			}
			before := calls.Load()
			r.c.Write(encode("PING"))
			r.c.Write(encode("GET", "k1"))
			r.mustReply()
			r.mustReply()
			if calls.Load() != before {
				t.Fatal("a batch of reads waited on the barrier")
			}
			fail.Store(true)
			r.c.Write(encode("CL.THROTTLE", "gone", "5", "10", "60"))
			r.expectEOF()
		})
	}
}
