package compat_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/guard"
)

// One client streaming a long pipeline (and reading its replies) does not
// keep the event loop from the others: a second client's commands are
// answered while the stream is still being served. (The guard holds the
// start of a command cut by a read; that is no reason for the loop to go
// on reading the streaming client before the others.)
func TestStreamingClientDoesNotStarveOthers(t *testing.T) {
	ts := startServer(t, withGuard(nil, guard.Limits{}))
	stream, err := net.Dial("tcp", ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	const n = 2_000_000
	var replies atomic.Int64
	done := make(chan struct{})
	go func() { // read the stream's replies as they come
		defer close(done)
		rd := bufio.NewReader(stream)
		for replies.Load() < n {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			if line == "+PONG\r\n" {
				replies.Add(1)
			}
		}
	}()
	go func() {
		stream.SetWriteDeadline(time.Now().Add(time.Minute))
		chunk := strings.Repeat(resp("PING"), 10_000)
		for i := 0; i < n/10_000; i++ {
			if _, err := io.WriteString(stream, chunk); err != nil {
				return
			}
		}
	}()
	for replies.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	rc := dialRaw(t, ts)
	for range 20 {
		runRaw(t, rc, []rawStep{{resp("ECHO", "other"), "$5\r\nother\r\n"}})
	}
	if got := replies.Load(); got >= n {
		t.Fatalf("the other client was answered only after all %d streamed commands", got)
	}
	<-done
	if got := replies.Load(); got != n {
		t.Fatalf("%d of %d streamed PINGs answered", got, n)
	}
}
