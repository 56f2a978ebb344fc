package compat_test

import (
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/celld/celld/guard"
	"github.com/celld/celld/server"
)

// Ports of Redis's tests/unit/limits.tcl and querybuf.tcl, and the other
// connection limits of the guard, against the real server.

const maxClientsReply = "-ERR max number of clients reached\r\n"

// limits.tcl: "Check if maxclients works refusing connections", with
// maxclients 10. (Redis counts the test's own client among the 10, hence
// its "c > 8 && c <= 10"; here every client is one of the test's.)
func TestMaxClients(t *testing.T) {
	var ref guardRef
	ts := startServer(t, withGuard(&ref, guard.Limits{}, guard.MaxClients(10)))
	first := dialRaw(t, ts)
	runRaw(t, first, nil) // Serve is running
	first.conn.Close()
	gl := ref.get(t)
	waitFor(t, "the first client to be gone", func() bool { return gl.Clients() == 0 })
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	refused := 0
	for c := 1; c <= 50; c++ {
		seen := gl.Clients() + gl.Rejected()
		conn, err := net.Dial("tcp", ts.Addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		// Wait for the accept loop to decide, and send nothing before:
		// had a refused client sent a command, the close would reset the
		// connection (as with Redis) and the reply could be lost.
		waitFor(t, "the accept loop", func() bool { return gl.Clients()+gl.Rejected() > seen })
		if gl.Rejected() == 0 {
			open = append(open, conn)
			io.WriteString(conn, "PING\r\n")
			buf := make([]byte, 7)
			if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "+PONG\r\n" {
				t.Fatalf("client %d: %q, %v", c, buf, err)
			}
			continue
		}
		got, err := io.ReadAll(conn)
		conn.Close()
		if string(got) != maxClientsReply {
			t.Fatalf("client %d got %q, %v; want %q", c, got, err, maxClientsReply)
		}
		refused = c
		break
	}
	if refused != 11 {
		t.Fatalf("the first client refused was #%d, want #11", refused)
	}
	if gl.Rejected() != 1 || gl.Clients() != 10 {
		t.Fatalf("Rejected() = %d, Clients() = %d", gl.Rejected(), gl.Clients())
	}
	// A client leaving frees its slot.
	open[0].Close()
	open = open[1:]
	waitFor(t, "the slot to be freed", func() bool { return gl.Clients() == 9 })
	rc := dialRaw(t, ts)
	runRaw(t, rc, nil)
}

func TestGuardDefaultConstants(t *testing.T) {
	if guard.DefaultMaxArgs != 1<<20 || guard.DefaultMaxBulk != 512<<10 || guard.DefaultMaxInline != 64<<10 ||
		guard.DefaultUnauthMaxArgs != 10 || guard.DefaultUnauthMaxBulk != 16<<10 ||
		guard.DefaultMaxClients != 10000 || guard.DefaultWriteTimeout != 10*time.Second ||
		guard.DefaultKeepAlive != 300*time.Second {
		t.Fatalf("guard defaults changed: %+v, maxclients %d, write timeout %v, keepalive %v",
			guard.DefaultLimits(), guard.DefaultMaxClients, guard.DefaultWriteTimeout, guard.DefaultKeepAlive)
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // generous: -race on a loaded machine
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Cross-protocol scripting: an HTTP request reaching the server. Redis
// closes the connection at the POST or Host: line, without a reply, after
// answering what came before, and logs it (once per connection here, since
// a request has both lines).
func TestCrossProtocolPostHost(t *testing.T) {
	var warnings atomic.Int64
	ts := startServer(t, withGuard(nil, guard.Limits{}, guard.OnSecurityWarning(func(string) { warnings.Add(1) })))
	for i, tc := range []struct{ name, send, want string }{
		{"POST", "POST / HTTP/1.1\r\nHost: 127.0.0.1:6379\r\nContent-Type: text/plain\r\n\r\nSET pwned 1\r\n", ""},
		{"GET then Host:", "GET / HTTP/1.1\r\nHost: 127.0.0.1:6379\r\n\r\nSET pwned 1\r\n", "-ERR wrong number of arguments for 'get' command\r\n"},
		{"multibulk POST", resp("post", "/"), ""},
		{"multibulk Host:", resp("PING") + resp("HOST:", "x"), "+PONG\r\n"},
		{"lower-case host: inline", "host: x\r\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, ts)
			rc.write(tc.send)
			rc.expectClosed(tc.want)
			if n := warnings.Load(); n != int64(i+1) {
				t.Fatalf("%d security warnings after %d such connections, want one each", n, i+1)
			}
		})
	}
	rc := dialRaw(t, ts)
	runRaw(t, rc, []rawStep{{resp("EXISTS", "pwned"), ":0\r\n"}})
}

// A client that never reads its replies cannot hold the server forever:
// once its output waits and the socket has taken nothing for the guard's
// write timeout (10 s by default, here 300 ms), the server drops the
// connection. Other clients are served meanwhile.
func TestWriteDeadline(t *testing.T) {
	var ref guardRef
	ts := startServer(t, withGuard(&ref, guard.Limits{}, guard.WriteTimeout(300*time.Millisecond)))
	rc := dialRaw(t, ts)
	runRaw(t, rc, nil)
	gl := ref.get(t)
	slow, err := net.Dial("tcp", ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	waitFor(t, "the second client", func() bool { return gl.Clients() == 2 })
	// 32 scripts returning 1 MiB each: 2 KB sent, 32 MiB of replies, never
	// read. The server reads them all (replies wait in the output buffer,
	// as with Redis), so the write completes; the client writes from a
	// goroutine all the same.
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		slow.SetWriteDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(slow, strings.Repeat(resp("EVAL", "return string.rep('v', 1048576)", "0"), 32))
	}()
	waitFor(t, "the server to drop the client that does not read", func() bool { return gl.Clients() == 1 })
	runRaw(t, rc, []rawStep{{resp("ECHO", "still here"), "$10\r\nstill here\r\n"}})
	slow.Close()
	<-wrote
}

// Accepted connections have TCP keepalive (Redis's tcp-keepalive 300).
func TestServerConnectionsHaveKeepAlive(t *testing.T) {
	var mu sync.Mutex
	var accepted []net.Conn
	ts := startServer(t, withConfig(func(c *server.Config) {
		c.WrapListener = func(ln net.Listener) net.Listener {
			rec := recordListener{Listener: ln, record: func(nc net.Conn) {
				mu.Lock()
				accepted = append(accepted, nc)
				mu.Unlock()
			}}
			return guard.NewListener(rec, guard.Limits{})
		}
	}))
	rc := dialRaw(t, ts)
	runRaw(t, rc, nil)
	mu.Lock()
	defer mu.Unlock()
	if len(accepted) != 1 {
		t.Fatalf("%d connections recorded", len(accepted))
	}
	// A *net.TCPConn, or the server's event-loop connection (which has
	// taken the socket over by now): both give the socket through
	// syscall.Conn.
	sc, err := accepted[0].(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	sc.Control(func(fd uintptr) {
		on, err1 := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		idle, err2 := syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
		if err1 != nil || err2 != nil || on != 1 || idle != 300 {
			t.Errorf("SO_KEEPALIVE %d (%v), TCP_KEEPIDLE %d (%v); want 1, 300", on, err1, idle, err2)
		}
	})
}

type recordListener struct {
	net.Listener
	record func(net.Conn)
}

func (l recordListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err == nil {
		l.record(nc)
	}
	return nc, err
}

// querybuf.tcl, "query buffer resized correctly": a command split across
// writes 100 ms apart is executed when its last byte arrives.
func TestQueryBufferPartialCommand(t *testing.T) {
	ts := startServer(t, guarded())
	rc := dialRaw(t, ts)
	rc.write("*3\r\n$3\r\nset\r\n$2\r\na")
	time.Sleep(100 * time.Millisecond)
	rc.write("a\r\n$1\r\n7\r\n")
	if got := rc.readLine(); got != "+OK\r\n" {
		t.Fatalf("got %q", got)
	}
	runRaw(t, rc, []rawStep{{resp("GET", "aa"), "$1\r\n7\r\n"}})
}

// querybuf.tcl, "query buffer resized correctly with fat argv": a big
// argument announced, then sent a byte, then the rest. Redis's 1,000,000
// bytes exceed celld's 512 KiB bulk limit, so 500,000 here; and celld's SET
// takes integers only, so ECHO. Other clients are served while it is
// pending.
func TestQueryBufferFatArgv(t *testing.T) {
	ts := startServer(t, guarded())
	rc := dialRaw(t, ts)
	rc.write("*2\r\n$4\r\nECHO\r\n$500000\r\n")
	time.Sleep(200 * time.Millisecond)
	rc.write("a")
	time.Sleep(20 * time.Millisecond)
	other := dialRaw(t, ts)
	runRaw(t, other, []rawStep{{resp("ECHO", "other"), "$5\r\nother\r\n"}})
	rest := strings.Repeat("a", 499999)
	rc.write(rest + "\r\n")
	want := "$500000\r\na" + rest + "\r\n"
	if got := rc.read(len(want)); got != want {
		t.Fatalf("got %d bytes, not the 500,000-byte echo", len(got))
	}
	runRaw(t, rc, nil)
}

// client-query-buffer-limit: a command that declares more than
// MaxQueryBuffer (default 64 MiB; 1 MiB here) is refused when the header
// that crosses the limit arrives, before its payload, and the connection is
// closed without a reply, as Redis does.
func TestQueryBufferLimit(t *testing.T) {
	var viol atomic.Value
	ts := startServer(t, withGuard(nil, guard.Limits{MaxQueryBuffer: 1 << 20},
		guard.OnViolation(func(_ string, e *guard.Error) { viol.Store(e) })))
	rc := dialRaw(t, ts)
	half := strings.Repeat("x", 512<<10)
	runRaw(t, rc, []rawStep{{resp("DEL", half), ":0\r\n"}}) // 512 KiB: fine
	rc.write("*3\r\n$3\r\nDEL\r\n$524288\r\n" + half + "\r\n$524288\r\n")
	rc.expectClosed("")
	if e, _ := viol.Load().(*guard.Error); e == nil || e.Kind != guard.ErrQueryBuffer {
		t.Fatalf("violation %v, want the query buffer limit", e)
	}
	runRaw(t, dialRaw(t, ts), nil)
}
