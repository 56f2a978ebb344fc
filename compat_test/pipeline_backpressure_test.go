package compat_test

import (
	"bufio"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/celld/celld/server"
)

// sendAllThenRead writes n CL.THROTTLE commands on conn before reading
// anything, then reads and checks every reply (issue 14 item 7).
func sendAllThenRead(t *testing.T, conn net.Conn, n int) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(5 * time.Minute)) // generous: -race on a loaded machine
	cmd := resp("CL.THROTTLE", "bp:guarded", "1000000000", "1", "1")
	var chunk []byte
	for range 1000 {
		chunk = append(chunk, cmd...)
	}
	for i := 0; i < n/1000; i++ {
		if _, err := conn.Write(chunk); err != nil {
			t.Fatalf("sending command %d of %d before reading: %v", i*1000, n, err)
		}
	}
	rd := bufio.NewReaderSize(conn, 64<<10)
	for i := range n {
		for j := range 6 { // *5, then five integers
			line, err := rd.ReadSlice('\n')
			if err != nil {
				t.Fatalf("reply %d of %d: %v", i, n, err)
			}
			if (j == 0 && string(line) != "*5\r\n") || (j == 1 && string(line) != ":0\r\n") {
				t.Fatalf("reply %d, line %d: %q", i, j, line)
			}
		}
	}
}

// Through the protocol guard (whose 10 s write timeout now bounds a
// backlog that makes no progress, not one that is being read), a client
// that pipelines 300k commands before reading gets every reply: on the
// event loop, with a goroutine per connection, and over TLS (whose writes
// always go through the connection's writer goroutine).
func TestGuardedPipelineBeforeReading(t *testing.T) {
	const n = 300_000
	for _, tc := range []struct {
		name  string
		loops int
	}{{"event loop", 0}, {"goroutine per connection", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, guarded(), withConfig(func(c *server.Config) { c.IOLoops = tc.loops }))
			conn, err := net.Dial("tcp", ts.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			sendAllThenRead(t, conn, n)
		})
	}
	t.Run("TLS", func(t *testing.T) {
		p := newPKI(t)
		ts := startTLSServer(t, p.serverConfig(false), false, guarded())
		conn, err := tls.Dial("tcp", ts.TLSAddr, p.clientConfig(false))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		sendAllThenRead(t, conn, n)
	})
}
