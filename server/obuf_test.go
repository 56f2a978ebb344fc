package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// pipelineBeforeReading sends n commands (CL.THROTTLE over a few keys,
// with a PING every 1000th) on one connection, all of them before reading
// any reply, then reads and checks every reply in order. It fails if the
// send or the replies do not complete within the connection's deadline.
func pipelineBeforeReading(t *testing.T, addr string, n int) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Minute)) // generous: -race on a loaded machine
	throttle := encode("CL.THROTTLE", "bp:key", "1000000000", "1", "1")
	ping := []byte("*1\r\n$4\r\nPING\r\n")
	var chunk []byte
	const perChunk = 1000
	for i := range perChunk {
		if i == perChunk-1 {
			chunk = append(chunk, ping...)
		} else {
			chunk = append(chunk, throttle...)
		}
	}
	if n%perChunk != 0 {
		t.Fatalf("n %d: a multiple of %d", n, perChunk)
	}
	for i := 0; i < n/perChunk; i++ {
		if _, err := c.Write(chunk); err != nil {
			t.Fatalf("sending chunk %d of %d: %v", i, n/perChunk, err)
		}
	}
	rd := bufio.NewReaderSize(c, 64<<10)
	for i := range n {
		line, err := rd.ReadSlice('\n')
		if err != nil {
			t.Fatalf("reply %d of %d: %v", i, n, err)
		}
		if i%perChunk == perChunk-1 {
			if string(line) != "+PONG\r\n" {
				t.Fatalf("reply %d: %q, want +PONG", i, line)
			}
			continue
		}
		if string(line) != "*5\r\n" {
			t.Fatalf("reply %d: %q, want *5", i, line)
		}
		for j := range 5 {
			line, err := rd.ReadSlice('\n')
			if err != nil {
				t.Fatalf("reply %d, element %d: %v", i, j, err)
			}
			if j == 0 && string(line) != ":0\r\n" {
				t.Fatalf("reply %d: limited %q, want :0", i, line)
			}
		}
	}
	// Nothing more than the replies, and the connection still works.
	c.Write(ping)
	if line, err := rd.ReadSlice('\n'); err != nil || string(line) != "+PONG\r\n" {
		t.Fatalf("after the batch: %q, %v", line, err)
	}
}

// A client that sends a batch of a million commands before it reads a
// reply gets every reply, in order, on the event loop and with a goroutine
// per connection: the server keeps reading while its replies wait in the
// output buffer, as Redis does (issue 14 item 7: this used to stop after
// ~3k replies and reset after 10 s).
func TestPipelineMillionBeforeReading(t *testing.T) {
	for _, tc := range []struct {
		name  string
		loops int
	}{{"event loop", 0}, {"goroutine per connection", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			s, addr := startServerConfig(t, nil, Config{IOLoops: tc.loops})
			pipelineBeforeReading(t, addr, 1_000_000)
			if got := s.stats.obufDisconnects.Load(); got != 0 {
				t.Fatalf("%d output-limit disconnections with no limit set", got)
			}
		})
	}
}

// With a hard limit, a client whose unread replies exceed it is closed
// (its output dropped, a warning logged, INFO counting it), as Redis does;
// other clients are not affected. With a soft limit, only once the buffer
// has stayed above it for longer than its seconds.
func TestOutputBufferHardLimitClosesClient(t *testing.T) {
	for _, tc := range []struct {
		name  string
		loops int
	}{{"event loop", 0}, {"goroutine per connection", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			var log syncBuffer
			s, addr := startServerConfig(t, &log, Config{IOLoops: tc.loops,
				OutputBufferLimit: OutputBufferLimit{Hard: 1 << 20}})
			slow := dial(t, addr)
			// A small receive buffer, so that the sockets cannot hold
			// all 16 MiB (Linux may grow it to tcp_rmem's maximum).
			slow.c.(*net.TCPConn).SetReadBuffer(64 << 10)
			// dial's 10 s deadline could stop the sending before the
			// server, slow under -race, has queued 1 MiB.
			slow.c.SetDeadline(time.Now().Add(2 * time.Minute))
			// 64 replies of 256 KiB: 16 MiB, far past 1 MiB plus what
			// the sockets hold.
			big := strings.Repeat("v", 256<<10)
			var pipe []byte
			for range 64 {
				pipe = append(pipe, encode("ECHO", big)...)
			}
			go slow.c.Write(pipe) // may block once the server stops reading
			// Some MB go into the sockets first: under -race on a busy
			// machine that takes longer than waitFor's 5 s.
			for deadline := time.Now().Add(time.Minute); s.stats.obufDisconnects.Load() != 1; {
				if time.Now().After(deadline) {
					t.Fatalf("the client over the hard limit was not closed within a minute (%d closed)", s.stats.obufDisconnects.Load())
				}
				time.Sleep(time.Millisecond)
			}
			slow.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := io.Copy(io.Discard, slow.c)
			if n >= int64(len(pipe)) {
				t.Fatalf("got all %d bytes of replies past the limit", n)
			}
			if err != nil && !strings.Contains(err.Error(), "reset") {
				t.Fatalf("slow client: %v after %d bytes, want EOF or reset", err, n)
			}
			waitFor(t, func() bool { return s.clientCount() == 0 })
			if !strings.Contains(log.String(), "output buffer limits") {
				t.Fatalf("no warning logged: %s", log.String())
			}
			fast := dial(t, addr)
			fast.send([]string{"INFO", "stats"})
			if got := infoField(fast.mustReply(), "client_output_buffer_limit_disconnections"); got != "1" {
				t.Fatalf("client_output_buffer_limit_disconnections = %q, want 1", got)
			}
			// Replies that fit under the limit are not affected.
			pipelineBeforeReading(t, addr, 10_000)
		})
	}
}

// syncBuffer is a bytes.Buffer safe for the server's logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestOutputBufferLimitConfigValue(t *testing.T) {
	if got := (OutputBufferLimit{64 << 20, 16 << 20, 60}).configValue(); got != "normal 67108864 16777216 60 slave 268435456 67108864 60 pubsub 33554432 8388608 60" {
		t.Errorf("configValue: %q", got)
	}
}

// The soft limit closes a client only once its buffer has stayed at or
// above it for more than SoftSeconds whole seconds; dropping below resets.
func TestOutputBufferLimitOver(t *testing.T) {
	l := OutputBufferLimit{Hard: 100, Soft: 50, SoftSeconds: 0}
	var since int64
	if l.over(49, &since) || since != 0 {
		t.Fatal("under both limits")
	}
	if !l.over(100, &since) {
		t.Fatal("at the hard limit")
	}
	if l.over(50, &since) || since == 0 {
		t.Fatal("first time at the soft limit: noted, not over")
	}
	since -= 2 // as if reached two seconds ago
	if !l.over(60, &since) {
		t.Fatal("soft limit held for 2 s > 0 s")
	}
	if l.over(10, &since) || since != 0 {
		t.Fatal("below the soft limit resets")
	}
	l.SoftSeconds = 5
	l.over(60, &since)
	since -= 5
	if l.over(60, &since) {
		t.Fatal("5 s is not more than 5 s")
	}
	since--
	if !l.over(60, &since) {
		t.Fatal("6 s is more than 5 s")
	}
}

func TestOutQueue(t *testing.T) {
	var q outQueue
	var want []byte
	for i := range 3000 {
		b := []byte(fmt.Sprintf("reply %d;", i))
		q.push(b)
		want = append(want, b...)
	}
	if q.len() != len(want) || q.memory() != int64((len(want)+outBlock-1)/outBlock)*outBlock {
		t.Fatalf("len %d memory %d for %d bytes", q.len(), q.memory(), len(want))
	}
	var got []byte
	for step := 1; q.len() > 0; step = step*3 + 1 {
		bufs := q.front(nil, 2)
		n := 0
		for _, b := range bufs {
			k := min(len(b), step-n)
			got = append(got, b[:k]...)
			n += k
			if n == step {
				break
			}
		}
		q.consume(n)
		if step < 1000 {
			q.push([]byte("x"))
			want = append(want, 'x')
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, differing from the %d pushed", len(got), len(want))
	}
	if q.memory() != 0 || q.mem.Load() != 0 || q.blocks != nil {
		t.Fatalf("drained queue holds %d bytes in %d blocks", q.memory(), len(q.blocks))
	}
}
