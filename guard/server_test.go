package guard

import (
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

// testServer is a real redcon server listening through the guard on
// 127.0.0.1:0, with a handler that knows PING, AUTH (flips the guard),
// ARGC (replies the argument count) and BIG (replies 16 MiB).
type testServer struct {
	addr      string
	ln        *Listener
	closedErr chan error // every connection's end, as redcon reports it
}

func startServer(t *testing.T, lim Limits, opts ...Option) *testServer {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{
		addr:      raw.Addr().String(),
		ln:        NewListener(raw, lim, opts...),
		closedErr: make(chan error, 100),
	}
	var conns sync.WaitGroup
	srv := redcon.NewServer("", handle,
		func(redcon.Conn) bool { conns.Add(1); return true },
		func(_ redcon.Conn, err error) {
			select {
			case ts.closedErr <- err:
			default:
			}
			conns.Done()
		})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ts.ln) }()
	t.Cleanup(func() {
		ts.ln.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		conns.Wait() // redcon closed every connection on the way out
	})
	return ts
}

func handle(c redcon.Conn, cmd redcon.Command) {
	switch strings.ToUpper(string(cmd.Args[0])) {
	case "PING":
		c.WriteString("PONG")
	case "AUTH":
		c.NetConn().(*Conn).SetAuthenticated(true)
		c.WriteString("OK")
	case "ARGC":
		c.WriteInt(len(cmd.Args))
	case "BIG":
		c.WriteBulk(make([]byte, 16<<20)) // more than loopback socket buffers hold
	default:
		c.WriteError("ERR unknown command '" + string(cmd.Args[0]) + "'")
	}
}

// exchange sends req on a new connection and returns everything the server
// sends until it closes the connection.
func exchange(t *testing.T, addr, req string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("reading the reply to %q: %v (got %q)", abbrev([]byte(req)), err, got)
	}
	return string(got)
}

// roundTrip sends req on conn and reads len(want) bytes.
func roundTrip(t *testing.T, conn net.Conn, req, want string) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != want {
		t.Fatalf("%q -> %q, %v; want %q", req, got, err, want)
	}
}

func assertAlive(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	roundTrip(t, conn, "PING\r\n", "+PONG\r\n")
}

// The transcripts: request bytes -> everything the client receives before the
// server closes the connection.
func TestServerTranscripts(t *testing.T) {
	ts := startServer(t, Limits{})
	for _, tc := range []struct{ name, req, reply string }{
		{"panic payload", "*1\r\n$9223372036854775807\r\nabc\r\n", rInvalidBulk},
		{"spin payload", "*9223372036854775807\r\n", rInvalidMB},
		{"huge bulk", "*2\r\n$3\r\nGET\r\n$1000000000\r\n", rInvalidBulk},
		{"count over MaxArgs", "*1048577\r\n", rInvalidMB},
		{"expected $", "*1\r\nx3\r\n", expectedDollar('x')},
		{"replies before the error", "PING\r\n" + ping + "*0\r\n*-1\r\n\r\n" + ping + "*1\r\n$-5\r\n", "+PONG\r\n+PONG\r\n+PONG\r\n" + rInvalidBulk},
		{"unbalanced quotes", "PING\r\nECHO \"x\r\n", "+PONG\r\n" + rUnbalanced},
		{"inline too big", strings.Repeat("x", 65537), rTooBigInl},
		{"HTTP POST", "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n", ""},
		{"HTTP GET then Host:", "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", "-ERR unknown command 'GET'\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exchange(t, ts.addr, tc.req); got != tc.reply {
				t.Fatalf("got %q, want %q", got, tc.reply)
			}
			assertAlive(t, ts.addr)
		})
	}
}

func TestServerIgnoresEmptyCommands(t *testing.T) {
	ts := startServer(t, Limits{})
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	roundTrip(t, conn, "*0\r\n*-1\r\n\r\n\n  \r\nPING\r\n", "+PONG\r\n")
	roundTrip(t, conn, "*-1\r\n"+ping, "+PONG\r\n")
}

func TestServerSecurityHook(t *testing.T) {
	var warned, violations atomic.Int32
	ts := startServer(t, Limits{},
		OnSecurityWarning(func(remote string) {
			if remote == "" {
				t.Error("no remote address")
			}
			warned.Add(1)
		}),
		OnViolation(func(string, *Error) { violations.Add(1) }))
	if got := exchange(t, ts.addr, "POST / HTTP/1.1\r\nHost: x\r\n\r\n"); got != "" {
		t.Fatalf("got %q, want no reply", got)
	}
	// The hook ran before the guard's Read returned; redcon closed the
	// connection after that, and reported the guard's error.
	if err := <-ts.closedErr; err == nil || !strings.Contains(err.Error(), "SECURITY") {
		t.Fatalf("redcon reported %v", err)
	}
	if warned.Load() != 1 || violations.Load() != 1 {
		t.Fatalf("OnSecurityWarning called %d times, OnViolation %d", warned.Load(), violations.Load())
	}
}

func TestServerAuthLimits(t *testing.T) {
	ts := startServer(t, Limits{}, RequireAuth(true))
	if got := exchange(t, ts.addr, "*11\r\n"); got != rUnauthMB {
		t.Fatalf("got %q", got)
	}
	if got := exchange(t, ts.addr, "*1\r\n$16385\r\n"); got != rUnauthBulk {
		t.Fatalf("got %q", got)
	}
	// AUTH pipelined with a command over the unauthenticated limits: the
	// guard hands redcon one command at a time until AUTH has run.
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	big := "*12\r\n$4\r\nARGC\r\n" + strings.Repeat("$5\r\nhello\r\n", 11)
	huge := "*2\r\n$4\r\nARGC\r\n$20000\r\n" + strings.Repeat("z", 20000) + "\r\n"
	roundTrip(t, conn, ping+"AUTH pw\r\n"+big+huge, "+PONG\r\n+OK\r\n:12\r\n:2\r\n")
}

func TestServerMaxClients(t *testing.T) {
	ts := startServer(t, Limits{}, MaxClients(1))
	first, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, first, "PING\r\n", "+PONG\r\n") // accepted and counted
	// The second client is refused before it says anything. (Had it sent a
	// command first, the close would reset the connection, as with Redis.)
	if got := exchange(t, ts.addr, ""); got != "-ERR max number of clients reached\r\n" {
		t.Fatalf("second client got %q", got)
	}
	if ts.ln.Rejected() != 1 || ts.ln.Clients() != 1 {
		t.Fatalf("Rejected() = %d, Clients() = %d", ts.ln.Rejected(), ts.ln.Clients())
	}
	first.Close()
	<-ts.closedErr // the server has closed its side, freeing the slot
	if n := ts.ln.Clients(); n != 0 {
		t.Fatalf("Clients() = %d after the only client left", n)
	}
	assertAlive(t, ts.addr)
}

// A client that never reads cannot hold a server goroutine past WriteTimeout.
func TestServerWriteTimeout(t *testing.T) {
	ts := startServer(t, Limits{}, WriteTimeout(200*time.Millisecond))
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "BIG\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ts.closedErr:
		var ne net.Error
		if err == nil || !asNetTimeout(err, &ne) {
			t.Fatalf("connection ended with %v, want a write timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write to a client that does not read is still blocked")
	}
}

func asNetTimeout(err error, ne *net.Error) bool {
	e, ok := err.(net.Error)
	if ok {
		*ne = e
	}
	return ok && e.Timeout()
}

// A complete command is answered at once even when part of the next one
// arrived with it.
func TestServerPartialInline(t *testing.T) {
	ts := startServer(t, Limits{})
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	roundTrip(t, conn, "PING\r\nPI", "+PONG\r\n")
	roundTrip(t, conn, "NG\r\n*1\r\n$4\r\nPI", "+PONG\r\n")
	roundTrip(t, conn, "NG\r\n", "+PONG\r\n")
}
